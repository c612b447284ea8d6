//! Every named fault's check on PostgreSQL 15 (and crash, restart-immediate, cut-reset and
//! lapse on 14), each with its negative control, which must fail by the failure it names.
//! Each check starts and removes its own cluster.
//!
//! Bounded: a check takes 2-13 s here (a cluster start, a few seconds of recording, the
//! check); the 58 tests took 119 s with 2 test threads on the 2 shared cores (with a
//! campaign running beside them). `LEASECHECK_PG_MAJORS` limits the majors.

use harness::pg::{test_majors, PgInstall};
use nemesis::checks::{self, caught, control, Breakage, CheckResult};
use nemesis::{builds, Fault};

fn install(major: u32) -> Option<PgInstall> {
    if !test_majors().contains(&major) {
        eprintln!("PG {major} is not among LEASECHECK_PG_MAJORS: skipped");
        return None;
    }
    Some(PgInstall::ensure(major).unwrap_or_else(|e| panic!("PostgreSQL {major}: {e}")))
}

fn summary(fault: Fault, result: &CheckResult) -> String {
    match result {
        Ok(p) => format!(
            "{fault} on PG {}: {}\n  {}",
            p.postgres,
            p.verdict,
            p.evidence.join("\n  ")
        ),
        Err(e) => format!("{fault}: {} {e}", e.name()),
    }
}

/// The check passes; a doctored control (the history edited to what a broken server would
/// have answered) is judged on its history right away.
async fn passes(fault: Fault, major: u32) {
    let Some(install) = install(major) else {
        return;
    };
    let result = checks::run(fault, &install, &builds::under_test(), None).await;
    println!("{}", summary(fault, &result));
    let Ok(passed) = &result else {
        panic!("{}", summary(fault, &result));
    };
    if let Some(doctored) = checks::doctored_control(fault, passed) {
        let c = control(fault);
        println!(
            "control of {fault} ({:?}): {}",
            c.breakage,
            summary(fault, &doctored)
        );
        assert!(
            caught(c.expects, &doctored),
            "the control of {fault} ({:?}) must fail with {:?}, got: {}",
            c.breakage,
            c.expects,
            summary(fault, &doctored)
        );
    }
}

/// A control that runs on its own (a broken build, or the fault made to miss); a doctored
/// one is judged in its check's test.
async fn control_is_caught(fault: Fault, major: u32) {
    let c = control(fault);
    if matches!(c.breakage, Breakage::Doctored(_)) {
        println!("the doctored control of {fault} is judged in its check's test");
        return;
    }
    let Some(install) = install(major) else {
        return;
    };
    let result = checks::run(fault, &install, &builds::under_test(), Some(c.breakage)).await;
    println!(
        "control of {fault} ({:?}): {}",
        c.breakage,
        summary(fault, &result)
    );
    assert!(
        caught(c.expects, &result),
        "the control of {fault} ({:?}) must fail with {:?}, got: {}",
        c.breakage,
        c.expects,
        summary(fault, &result)
    );
}

/// One test per fault in each module, named after it so that a failure names the fault;
/// what runs where is the fault's record (`nemesis::fault::SPECS`), and
/// [`every_fault_is_listed`] holds this list to the table.
macro_rules! fault_checks {
    ($($name:ident: $fault:expr;)*) => {
        /// The faults listed here, in order.
        const LISTED: &[Fault] = &[$($fault),*];
        /// Their tests' names.
        const TEST_NAMES: &[&str] = &[$(stringify!($name)),*];
        mod pg15 {
            use super::*;
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    passes($fault, 15).await;
                }
            )*
        }
        mod pg15_control {
            use super::*;
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    control_is_caught($fault, 15).await;
                }
            )*
        }
        mod pg14 {
            use super::*;
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    if $fault.on_pg14_in_tests() {
                        passes($fault, 14).await;
                    } else {
                        println!("{} runs on PG 15 only in cargo test", $fault);
                    }
                }
            )*
        }
    };
}

fault_checks! {
    crash: Fault::Crash;
    restart_immediate: Fault::RestartImmediate;
    restart_fast: Fault::RestartFast;
    sync_commit_off_crash: Fault::SyncCommitOffCrash;
    terminate: Fault::Terminate;
    cancel: Fault::Cancel;
    statement_timeout: Fault::StatementTimeout;
    lock_timeout: Fault::LockTimeout;
    client_pause: Fault::ClientPause;
    server_pause: Fault::ServerPause;
    cut_close: Fault::CutClose;
    cut_reset: Fault::CutReset;
    cut_blackhole: Fault::CutBlackhole;
    downtime_expiry: Fault::DowntimeExpiry;
    short_ttl: Fault::ShortTtl;
    abort_after_acquire: Fault::AbortAfterAcquire;
    commit_crash: Fault::CommitCrash;
    wait_wake: Fault::WaitWake;
    lapse: Fault::Lapse;
}

/// Every fault of the table has its tests here, named after it (test names are
/// identifiers: the fault's name with `_` for `-`), and the PG 14 runs are those the
/// table says.
#[test]
fn every_fault_is_listed() {
    assert_eq!(LISTED, Fault::ALL.as_slice());
    for (fault, test) in LISTED.iter().zip(TEST_NAMES) {
        assert_eq!(fault.name().replace('-', "_"), *test);
    }
    assert_eq!(Fault::ALL.len(), 19);
    let pg14: Vec<&str> = Fault::ALL
        .into_iter()
        .filter(|f| f.on_pg14_in_tests())
        .map(Fault::name)
        .collect();
    assert_eq!(pg14, ["crash", "restart-immediate", "cut-reset", "lapse"]);
}
