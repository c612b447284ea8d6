//! The one mutant catalogue end to end (harness::mutants): every SQL mutant the campaigns
//! hunt (the fault-only ones are their fault checks' negative controls,
//! failure/tests/faults.rs) is killed on PG 15 by a history campaign's verdict naming its invariant (a stall, for the
//! lock-behaviour mutants), and pg_lease comes out linearizable with no stall on the same
//! campaigns. Seeds are fixed (`HuntOptions::quick`): a hunt tries them in order and stops
//! at the first kill, and the seed that killed each mutant is printed; `leasecheck mutants
//! --mutant NAME` runs the same hunt (stepped plans replay exactly; free-running campaigns
//! replay their plans, not the real interleaving, so their killing seed can vary).

use harness::mutants::{self, HuntOptions, HuntReport, Kill, Mode, Mutant, Status};
use harness::pg::{shared, test_majors};
use std::time::{Duration, Instant};

/// PG 15 when it is tested, else the first tested major.
fn major() -> u32 {
    let majors = test_majors();
    if majors.contains(&15) {
        15
    } else {
        majors[0]
    }
}

/// Bounded: 41 hunts, two at a time (the 12 of the classes beyond a history verdict by
/// their conformance checks, late plans or a matrix setting, seconds each), most killed by their first campaign (1,500 calls,
/// 2-6 s; a violation's search can take 30 s), a race mutant the free campaigns miss by
/// the race plans (186 written ones, in order; lock_live_skips_expiry once survived 8 free
/// campaigns and 150 drawn plans before they were hunted), the stall mutants within 150
/// drawn plans (under 1 s each), plus the control; 1.5-3.5 minutes on 2 busy cores
/// (measured: 76-200 s). (HuntOptions::quick caps a hunt at 8 free-running campaigns, the
/// race plans and 150 drawn plans; lost_race_keeps_row_lock once survived 60 on a quiet
/// machine.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_sql_mutant_is_killed_and_pg_lease_passes_the_same_campaigns() {
    let major = major();
    let cluster = shared(major).expect("a PostgreSQL cluster");
    let options = HuntOptions::quick();
    let started = Instant::now();
    // Two hunts at a time (every other mutant in each), on the one cluster.
    let (even, odd): (Vec<_>, Vec<_>) = mutants::MUTANTS
        .iter()
        .filter(|m| m.hunted_by_campaigns())
        .enumerate()
        .partition(|(i, _)| i % 2 == 0);
    let (mut hunts, odd) = tokio::join!(
        hunt_each(cluster, even.into_iter().map(|(_, m)| m), &options),
        hunt_each(cluster, odd.into_iter().map(|(_, m)| m), &options)
    );
    hunts.extend(odd);
    let campaigns = HuntReport::campaigns_run(&hunts);
    let control = mutants::control(cluster, &campaigns, &options, &|_| {}).await;
    println!("control: {}", control.line());
    let killed = hunts.iter().filter(|h| h.killed()).count();
    println!(
        "kill rate on PG {major}: {killed}/{} ({:.0}%) in {:.1?}",
        hunts.len(),
        100.0 * killed as f64 / hunts.len() as f64,
        started.elapsed()
    );
    let infrastructure: Vec<String> = hunts
        .iter()
        .filter(|h| matches!(h.status, Status::Infrastructure(_)))
        .map(HuntReport::line)
        .collect();
    assert!(
        infrastructure.is_empty(),
        "infrastructure failures (not kills): {infrastructure:#?}"
    );
    let survivors: Vec<String> = hunts
        .iter()
        .filter(|h| !h.killed())
        .map(HuntReport::line)
        .collect();
    assert!(survivors.is_empty(), "survivors: {survivors:#?}");
    for h in &hunts {
        assert_killed_as_wanted(h);
    }
    assert_eq!(
        control.status,
        Status::Survived,
        "pg_lease on the hunts' campaigns: {}",
        control.line()
    );
    assert!(control.runs.len() as u64 >= campaigns.iter().map(|(_, n)| n).sum::<u64>());
    // The figures the kill table records: every free-running campaign recorded all its
    // calls at a measured rate, but one the target stopped early (an answer outside the
    // API or a call that hung ends the recording at that call).
    for run in hunts.iter().chain([&control]).flat_map(|h| &h.runs) {
        if run.mode == Mode::Free {
            if !matches!(run.outcome, "malformed" | "hang") {
                assert_eq!(run.ops as u64, options.free_ops, "seed {}", run.seed);
            }
            assert!(run.ops_per_s > 0.0, "seed {}", run.seed);
        }
    }
}

/// The hunts of `each`, one after the other.
async fn hunt_each(
    cluster: &harness::pg::Cluster,
    each: impl Iterator<Item = &'static Mutant>,
    options: &HuntOptions,
) -> Vec<HuntReport> {
    let mut hunts = Vec::new();
    for m in each {
        let report = mutants::hunt(cluster, m, options).await;
        println!("{}", report.line());
        hunts.push(report);
    }
    hunts
}

/// The run that killed `h` is the finding its kill names: a violation of its invariant, a
/// stall, or a finding naming its phrase.
fn assert_killed_as_wanted(h: &HuntReport) {
    let (Some(kill), Some(run)) = (h.kill, h.killer()) else {
        panic!("{}: no killing run", h.line());
    };
    match (run.invariant, kill) {
        (Some(inv), _) => {
            assert_eq!(run.outcome, "violation", "{}", h.line());
            assert!(kill.named_by(inv), "{}", h.line());
        }
        (None, Kill::Finding(phrase)) => {
            assert!(run.verdict.contains(phrase), "{}", h.line());
        }
        (None, _) => {
            assert_eq!(kill, Kill::Stall);
            assert_eq!(run.outcome, "stall", "{}", h.line());
            assert_eq!(run.mode, Mode::Stepped, "{}", h.line());
        }
    }
}

/// Negative control of the hunt: a mutant whose edit no longer applies cannot be
/// installed, and its hunt ends as an infrastructure failure on its first campaign (free
/// and stepped alike), never as a kill.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mutant_that_cannot_be_installed_is_an_infrastructure_failure_not_a_kill() {
    static FREE: Mutant = Mutant {
        name: "stale_free",
        breaks: "nothing: its edit matches no text of the script",
        kill: Kill::Stall,
        hunt: &[Mode::Free],
        edits: &[("no such text in the script", "")],
        caught_by: &[],
    };
    static STEPPED: Mutant = Mutant {
        hunt: &[Mode::Stepped],
        name: "stale_stepped",
        ..FREE
    };
    let cluster = shared(major()).expect("a PostgreSQL cluster");
    let options = HuntOptions::quick();
    for m in [&FREE, &STEPPED] {
        let report = mutants::hunt(cluster, m, &options).await;
        println!("{}", report.line());
        assert!(
            matches!(&report.status, Status::Infrastructure(e) if e.contains("no such text")),
            "{}",
            report.line()
        );
        assert!(!report.killed());
        assert_eq!(report.runs.len(), 1, "the hunt stops at the failure");
        assert!(report.line().contains("not a kill"), "{}", report.line());
    }
    // The same hunt with a mutant that installs runs its campaigns (so the failure above
    // is the stale edit's, not the path's).
    let ok = mutants::find("release_keeps_epoch").expect("catalogued");
    let bounded = HuntOptions {
        free_campaigns: 1,
        free_ops: 200,
        free_budget: model::Budget {
            time: Some(Duration::from_secs(20)),
            states: Some(1_000_000),
            ..model::Budget::default()
        },
        ..HuntOptions::quick()
    };
    let report = mutants::hunt(cluster, ok, &bounded).await;
    assert!(
        !matches!(report.status, Status::Infrastructure(_)),
        "{}",
        report.line()
    );
    assert_eq!(report.runs[0].ops, 200, "{}", report.line());
}
