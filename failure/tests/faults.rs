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

macro_rules! fault_checks {
    ($($name:ident: $fault:expr, pg14: $pg14:expr;)*) => {
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
                    assert_eq!($pg14, $fault.on_pg14_in_tests());
                    if $pg14 {
                        passes($fault, 14).await;
                    }
                }
            )*
        }
    };
}

fault_checks! {
    crash: Fault::Crash, pg14: true;
    restart_immediate: Fault::RestartImmediate, pg14: true;
    restart_fast: Fault::RestartFast, pg14: false;
    sync_commit_off_crash: Fault::SyncCommitOffCrash, pg14: false;
    terminate: Fault::Terminate, pg14: false;
    cancel: Fault::Cancel, pg14: false;
    statement_timeout: Fault::StatementTimeout, pg14: false;
    lock_timeout: Fault::LockTimeout, pg14: false;
    client_pause: Fault::ClientPause, pg14: false;
    server_pause: Fault::ServerPause, pg14: false;
    cut_close: Fault::CutClose, pg14: false;
    cut_reset: Fault::CutReset, pg14: true;
    cut_blackhole: Fault::CutBlackhole, pg14: false;
    downtime_expiry: Fault::DowntimeExpiry, pg14: false;
    short_ttl: Fault::ShortTtl, pg14: false;
    abort_after_acquire: Fault::AbortAfterAcquire, pg14: false;
    commit_crash: Fault::CommitCrash, pg14: false;
    wait_wake: Fault::WaitWake, pg14: false;
    lapse: Fault::Lapse, pg14: true;
}

/// Every fault has a check here.
#[test]
fn every_fault_is_listed() {
    assert_eq!(Fault::ALL.len(), 19);
}
