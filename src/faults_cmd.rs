//! `leasecheck faults`: the named fault checks (specs/FAILURE-MODEL.md), each on a throwaway
//! cluster of its own, with one summary line each; exit 0 all passed, 1 a finding (a
//! violation, a broken expectation, a control not caught), 2 a check that could not run.

use anyhow::Context;
use harness::pg::PgInstall;
use indicatif::{ProgressBar, ProgressStyle};
use nemesis::checks::control;
use nemesis::suite::{self, CheckRun, Run, Status};
use nemesis::Fault;
use std::time::Duration;

/// Run the named fault checks: a fault injected into a recorded history, judged by the
/// checker. Exit 0 all passed, 1 a finding, 2 a check could not run (infrastructure).
#[derive(Debug, Clone, clap::Args)]
pub struct FaultsArgs {
    /// Only this fault (repeatable); every named fault by default.
    #[arg(long = "fault", value_name = "NAME")]
    pub faults: Vec<Fault>,
    /// PostgreSQL major; fetched if not installed.
    #[arg(long = "pg", default_value_t = harness::pg::DEFAULT_MAJOR)]
    pub major: u32,
    /// Also run each check's negative control (it must fail by the failure it names).
    #[arg(long)]
    pub controls: bool,
    /// List the faults, the invariants their checks defend and their controls; run nothing.
    #[arg(long)]
    pub list: bool,
}

fn list() {
    for fault in Fault::ALL {
        let defends: Vec<String> = fault.defends().iter().map(|i| i.to_string()).collect();
        let c = control(fault);
        println!(
            "{fault}: defends {}; control: {} must fail with {}",
            defends.join(", "),
            c.breakage,
            c.expects
        );
    }
}

fn progress_bar(runs: u64) -> ProgressBar {
    let bar = ProgressBar::new(runs);
    if let Ok(style) =
        ProgressStyle::with_template("{spinner} [{elapsed_precise}] {bar:30} {pos}/{len} {msg}")
    {
        bar.set_style(style);
    }
    bar.enable_steady_tick(Duration::from_millis(200));
    bar
}

/// Runs the checks; the exit status.
pub fn run(args: &FaultsArgs) -> anyhow::Result<i32> {
    if args.list {
        list();
        return Ok(0);
    }
    let faults = if args.faults.is_empty() {
        Fault::ALL.to_vec()
    } else {
        args.faults.clone()
    };
    let install = PgInstall::ensure(args.major)
        .with_context(|| format!("finding or fetching PostgreSQL {}", args.major))?;
    println!(
        "faults: {} check(s){} on PostgreSQL {}",
        faults.len(),
        if args.controls {
            " and their controls"
        } else {
            ""
        },
        install.version
    );
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    let per_fault = if args.controls { 2 } else { 1 };
    let bar = progress_bar((faults.len() * per_fault) as u64);
    let runs = runtime.block_on(suite::run_all(
        &install,
        &nemesis::builds::under_test(),
        &faults,
        args.controls,
        |run| {
            bar.suspend(|| println!("{run}"));
            bar.inc(1);
        },
    ));
    bar.finish_and_clear();
    Ok(summarise(&runs))
}

/// Prints the totals; the exit status.
fn summarise(runs: &[CheckRun]) -> i32 {
    let count = |s: Status| runs.iter().filter(|r| r.status() == s).count();
    let (passed, failed, infra) = (
        count(Status::Passed),
        count(Status::Failed),
        count(Status::Infrastructure),
    );
    let checks = runs.iter().filter(|r| r.run == Run::Check).count();
    println!(
        "{passed} passed, {failed} failed, {infra} could not run ({checks} checks, {} controls), {:.0} s",
        runs.len() - checks,
        runs.iter().map(|r| r.duration.as_secs_f64()).sum::<f64>()
    );
    match (failed, infra) {
        (0, 0) => model::Exit::Passed,
        (0, _) => model::Exit::NoVerdict,
        _ => model::Exit::Finding,
    }
    .code()
}
