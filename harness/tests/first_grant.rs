//! The first-grant clock class: a first grant of a never-leased key that waited for another
//! transaction inserting the same key, which then rolled back, is dated after that wait
//! (SEMANTICS section 8). The conformance check
//! `a_first_grant_that_waited_for_a_rolled_back_insert_is_dated_after_it` (in the gate's
//! conformance suite) decides it; here it passes pg_lease on every tested major and fails
//! the released 0.2.0, which read the clock before the wait (its margins are stated at the
//! check: its grant expires at least 500 ms before the rollback).

use harness::conformance::{run_against, Failure};
use harness::extension::ExtensionFiles;
use harness::pg::{shared, test_majors, PgInstall};

const CHECK: &str = "a_first_grant_that_waited_for_a_rolled_back_insert_is_dated_after_it";

/// The check's result against `files` on `major`.
async fn judged(major: u32, files: &ExtensionFiles) -> Result<(), Failure> {
    let install = PgInstall::ensure(major).expect("the tested major");
    install.install_extension(files).expect("install the files");
    let cluster = shared(major).expect("a cluster");
    let report = run_against(cluster, &files.name, |n| n == CHECK).await;
    println!("{}", report.render());
    let [outcome] = report.outcomes.as_slice() else {
        panic!(
            "PG {major}: expected one outcome, got {}",
            report.outcomes.len()
        );
    };
    outcome.result.clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_first_grant_after_a_rolled_back_insert_is_dated_after_it() {
    for major in test_majors() {
        let files = ExtensionFiles::renamed("pg_lease_first_grant");
        let result = judged(major, &files).await;
        assert!(result.is_ok(), "PG {major}: {result:?}");
    }
}

/// The negative control: 0.2.0's grant is dated before the wait, a finding naming the class.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pg_lease_0_2_0_dates_it_before_the_wait() {
    let major = test_majors()[0];
    match judged(major, &ExtensionFiles::version_0_2_0()).await {
        Err(Failure::Violation(why)) => assert!(
            why.contains("first-grant clock class"),
            "PG {major}: 0.2.0 failed by another finding: {why}"
        ),
        other => panic!("PG {major}: 0.2.0 gave {other:?}, expected the first-grant finding"),
    }
}
