//! `leasecheck gate --jobs N`: the run's units split into N lanes as `--shard` splits
//! them, each lane on clusters of its own in a thread of its own, joined as `report
//! merge` joins shards. The bench suite runs after the lanes, alone, so that its figures
//! are not measured beside the other lanes' load.

use super::ctx::Baseline;
use super::outcome::MajorResult;
use super::shard::{Shard, ShardRun};
use super::suites::Suite;
use super::{merge, plan, GateArgs};
use anyhow::Context;
use harness::extension::Build;
use indicatif::MultiProgress;
use std::path::Path;

/// The suite that measures: it runs alone after the lanes.
const BENCH: &str = "bench";

/// Runs `selected` on `majors` in `jobs` lanes, then the bench suite; one result per major.
#[allow(clippy::too_many_arguments)]
pub fn run(
    args: &GateArgs,
    build: &'static Build,
    majors: &[u32],
    selected: &[Suite],
    seed: u64,
    report_dir: &Path,
    baseline: Option<&Baseline>,
    jobs: u32,
) -> anyhow::Result<Vec<MajorResult>> {
    let (bench, parallel): (Vec<Suite>, Vec<Suite>) =
        selected.iter().partition(|s| s.name == BENCH);
    let units = plan::units(majors, &parallel, args.size()).len() as u32;
    let count = jobs.min(units).max(1);
    let faults: Vec<String> = args
        .fault_checks()
        .iter()
        .map(|f| f.name().into())
        .collect();
    let mut lanes = Vec::new();
    for index in 1..=count {
        let which = Shard { index, count };
        lanes.push(plan::of_shard(
            which,
            majors,
            &parallel,
            args.size(),
            faults.clone(),
        )?);
    }
    println!("{count} lanes: {}", described(&lanes));
    let multi = MultiProgress::new();
    let results: Vec<anyhow::Result<Vec<MajorResult>>> = std::thread::scope(|scope| {
        let handles: Vec<_> = lanes
            .iter()
            .map(|(plan, _)| {
                let multi = &multi;
                scope.spawn(move || {
                    super::run_local(args, build, plan, seed, report_dir, baseline, multi)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| match h.join() {
                Ok(result) => result,
                Err(_) => Err(anyhow::anyhow!("a lane of the gate panicked")),
            })
            .collect()
    });
    let mut ran = Vec::new();
    for result in results {
        ran.push(result.context("a lane of the gate")?);
    }
    let parts: Vec<(&ShardRun, &[MajorResult])> = lanes
        .iter()
        .zip(&ran)
        .map(|((_, record), majors)| (record, majors.as_slice()))
        .collect();
    let whole = ShardRun {
        index: 1,
        count,
        units: Vec::new(),
        ..lanes[0].1.clone()
    };
    let (mut joined, cut) = merge::join(&whole, &parts);
    if !cut.is_empty() {
        println!(
            "not counted after the finding that the build hangs: {}",
            cut.join(", ")
        );
    }
    if !bench.is_empty() {
        run_bench(
            args,
            build,
            &bench,
            seed,
            report_dir,
            baseline,
            &multi,
            &mut joined,
        )?;
    }
    Ok(joined)
}

/// The bench suite on every major whose lanes found no hang, appended to its results.
#[allow(clippy::too_many_arguments)]
fn run_bench(
    args: &GateArgs,
    build: &'static Build,
    bench: &[Suite],
    seed: u64,
    report_dir: &Path,
    baseline: Option<&Baseline>,
    multi: &MultiProgress,
    joined: &mut [MajorResult],
) -> anyhow::Result<()> {
    let hung = |m: &MajorResult| {
        m.suites
            .iter()
            .any(|s| s.checks.iter().any(super::ctx::is_hang))
    };
    let plan: plan::Plan = joined
        .iter()
        .filter(|m| !hung(m))
        .map(|m| (m.major, bench.to_vec()))
        .collect();
    let measured = super::run_local(args, build, &plan, seed, report_dir, baseline, multi)?;
    for m in measured {
        if let Some(target) = joined.iter_mut().find(|j| j.major == m.major) {
            let mut suites = std::mem::take(&mut target.suites);
            suites.extend(m.suites);
            *target = MajorResult::of(m.major, target.postgres.clone(), &target.backend, suites);
        }
    }
    Ok(())
}

/// `lane 1: pg15 security, pg15 stepped; lane 2: ...`
fn described(lanes: &[(plan::Plan, ShardRun)]) -> String {
    lanes
        .iter()
        .map(|(_, record)| {
            let units: Vec<String> = record
                .units
                .iter()
                .map(|u| format!("pg{} {}", u.major, u.suite))
                .collect();
            format!("lane {}: {}", record.index, units.join(", "))
        })
        .collect::<Vec<_>>()
        .join("; ")
}
