//! A fault check meeting a build whose calls keep its situation from arising, or that
//! answers outside its API while the check runs, fails with a finding saying so: never "the
//! fault could not be injected", never no verdict. The shipped build reaches both
//! situations (failure/tests/faults.rs).

use harness::extension::ExtensionFiles;
use harness::pg::{test_majors, PgInstall};
use nemesis::checks::{self, CheckFailure};
use nemesis::Fault;

fn build(name: &str) -> ExtensionFiles {
    let m = harness::mutants::find(name).expect("a catalogued mutant");
    ExtensionFiles::mutant(m).expect("the mutant applies")
}

/// A build that leaks `synchronous_commit = off` into the caller's transaction: the
/// commit-crash check's COMMIT never waits for the (missing) synchronous standby, so it is
/// not in flight at the crash. The check names that the situation never arose and what
/// the COMMIT did instead (it answered, committed).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_build_that_keeps_a_fault_checks_situation_from_arising_is_a_finding() {
    let major = test_majors()[0];
    let install = PgInstall::ensure(major).expect("PostgreSQL");
    let leaking = build("acquire_leaks_synchronous_commit_off");
    let result = checks::run(Fault::CommitCrash, &install, &leaking, None).await;
    match &result {
        Err(CheckFailure::Unexpected(why)) => {
            assert!(why.contains("the situation never arose"), "{why}");
            assert!(
                why.contains("expected lost-committed, came back committed"),
                "{why}"
            );
        }
        Err(other) => panic!("{} {other}", other.name()),
        Ok(p) => panic!("passed: {}", p.verdict),
    }
}

/// A build that raises an error outside its contract inside its code (a SQL injection in
/// its failure-status lookup): the crash check's campaign stops at that answer before the
/// crash's turn, and the check fails with it, not with "could not be injected".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_build_that_errs_before_the_faults_turn_is_a_finding_not_a_fault_not_injected() {
    let major = test_majors()[0];
    let install = PgInstall::ensure(major).expect("PostgreSQL");
    let injecting = build("status_lookup_injects_key");
    let result = checks::run(Fault::Crash, &install, &injecting, None).await;
    match &result {
        Err(CheckFailure::Unexpected(why)) => {
            assert!(why.contains("SQLSTATE 42601 inside the target"), "{why}");
        }
        Err(other) => panic!("{} {other}", other.name()),
        Ok(p) => panic!("passed: {}", p.verdict),
    }
}

/// A user's build at another version than this checkout's (the released 0.2.0, as `gate
/// --extension` installs it): the fault checks judge it at its own control file's version
/// (a campaign check and a scripted one pass it, as 0.2.0 handles both faults), never
/// "the build did not install" because it is not at 0.3.0.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_build_at_another_version_is_judged_at_its_own_version() {
    let major = test_majors()[0];
    let install = PgInstall::ensure(major).expect("PostgreSQL");
    let released = ExtensionFiles::version_0_2_0();
    for fault in [Fault::Crash, Fault::Terminate] {
        match checks::run(fault, &install, &released, None).await {
            Ok(_) => {}
            Err(e) => panic!("{fault:?} on 0.2.0: {} {e}", e.name()),
        }
    }
}
