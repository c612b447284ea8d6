//! The commit-time routes around the durability trigger (harness::security::CommitRoute):
//! SEMANTICS section 8 documents that user code running at COMMIT after pg_lease's
//! deferred trigger (the caller firing it early, a caller's deferred trigger queued after
//! the lease write, a WITH HOLD cursor) can turn the commit asynchronous again. The document
//! must stay true: on every tested major each route loses an acknowledged grant in a crash
//! right after COMMIT, and its epoch is handed out again. When a build closes a route, this
//! fails, and SEMANTICS, README and this test change together. The control is the security
//! check `synchronous_commit_off_does_not_make_a_lease_write_asynchronous`, which the same
//! build passes: the same crash after a plain `SET LOCAL synchronous_commit = off` keeps the
//! grant, so the loss is the route's doing.

use harness::extension::ExtensionFiles;
use harness::pg::{test_majors, PgInstall};
use harness::security::{self, CommitRoute};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_documented_commit_time_route_still_loses_the_grant() {
    let mut problems = Vec::new();
    for major in test_majors() {
        let install = PgInstall::ensure(major).expect("the tested major");
        let files = ExtensionFiles::renamed("pg_lease_commit_time");
        install
            .install_extension(&files)
            .expect("install pg_lease's files");
        for route in CommitRoute::ALL {
            let started = std::time::Instant::now();
            let bypass = security::commit_time_bypass(&install, &files.name, route)
                .await
                .expect("the reproduction ran");
            println!("PG {major} {route:?}: {bypass:?} ({:?})", started.elapsed());
            if !bypass.grant_was_lost() {
                problems.push(format!(
                    "PG {major} {route:?}: the grant survived the crash: {bypass:?}"
                ));
            } else if bypass.next_epoch != Some(1) {
                problems.push(format!(
                    "PG {major} {route:?}: the lost grant's epoch was not handed out again: {bypass:?}"
                ));
            }
        }
    }
    assert!(problems.is_empty(), "{problems:#?}");
}

/// The controls of the two new routes: the same user code run before COMMIT, not at it (an
/// immediate trigger, a cursor without HOLD that is read before COMMIT) sets
/// `synchronous_commit = off` too, and the grant survives the same crash: the durability
/// trigger, firing at COMMIT after it, raised the setting again.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_same_code_run_before_commit_keeps_the_grant() {
    let major = test_majors()[0];
    let install = PgInstall::ensure(major).expect("the tested major");
    let files = ExtensionFiles::renamed("pg_lease_commit_time");
    install
        .install_extension(&files)
        .expect("install pg_lease's files");
    let before_commit = [
        CommitRoute::DeferredTrigger
            .setup()
            .replace("DEFERRABLE INITIALLY DEFERRED ", ""),
        "DECLARE async_commit CURSOR FOR \
         SELECT pg_catalog.set_config('synchronous_commit', 'off', true); \
         FETCH ALL FROM async_commit"
            .to_string(),
    ];
    for setup in before_commit {
        assert!(!setup.contains("DEFERRED") && !setup.contains("WITH HOLD"));
        let kept = security::grant_then_crash(&install, &files.name, &setup)
            .await
            .expect("the control ran");
        assert!(!kept.grant_was_lost(), "PG {major}: `{setup}`: {kept:?}");
    }
}
