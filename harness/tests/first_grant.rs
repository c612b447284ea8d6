//! A first grant of a never-leased key that waited for another transaction inserting the
//! same key, which then rolled back, is dated after that wait: its expiry is at least the
//! rollback's time plus its ttl (SEMANTICS section 8: a first grant reads the clock for its
//! expiry after its insert). pg_lease 0.2.0 read the clock before the wait, so its grant
//! came back expired (the negative control: its expiry is before the rollback).
//! Margins: the waiter is seen waiting for the lock (pg_stat_activity) before the inserter
//! reads the clock and rolls back 1 s later; the ttl is 500 ms, so 0.2.0's expiry
//! (its call's start + 500 ms) is at least 500 ms before the rollback, whatever the load.

use chrono::{DateTime, Utc};
use harness::client::{self, Acquire};
use harness::extension::ExtensionFiles;
use harness::pg::{shared, test_majors, PgInstall};
use std::time::Duration;

const TTL: Duration = Duration::from_millis(500);

/// The waiter's grant and the inserter's clock just before its ROLLBACK.
async fn grant_after_rolled_back_insert(
    major: u32,
    files: &ExtensionFiles,
) -> (Acquire, DateTime<Utc>) {
    let install = PgInstall::ensure(major).expect("the tested major");
    files.install(&install).expect("install the files");
    let cluster = shared(major).expect("a cluster");
    let db = cluster
        .fresh_database_with("first_grant", &files.name)
        .await
        .expect("a database");
    let inserter = cluster.connect(&db).await.expect("connect");
    let waiter = std::sync::Arc::new(cluster.connect(&db).await.expect("connect"));
    let monitor = cluster.connect(&db).await.expect("connect");
    inserter.batch_execute("BEGIN").await.expect("begin");
    let first = client::acquire(
        &inserter,
        "k",
        "inserter",
        Duration::from_secs(60),
        Duration::ZERO,
    )
    .await
    .expect("the inserter's grant");
    assert_eq!(first.epoch(), Some(1));
    let pid: i32 = waiter
        .query_one("SELECT pg_backend_pid()", &[])
        .await
        .expect("pid")
        .get(0);
    let w = waiter.clone();
    let call =
        tokio::spawn(async move { client::acquire(&*w, "k", "waiter", TTL, Duration::ZERO).await });
    // Until the waiter waits for the inserter's lock (at most 10 s).
    let mut waiting = false;
    for _ in 0..500 {
        let event: Option<String> = monitor
            .query_one(
                "SELECT wait_event_type FROM pg_stat_activity WHERE pid = $1",
                &[&pid],
            )
            .await
            .expect("activity")
            .get(0);
        if event.as_deref() == Some("Lock") {
            waiting = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        waiting,
        "PG {major} {}: the waiter never waited for the inserter",
        files.name
    );
    tokio::time::sleep(Duration::from_secs(1)).await;
    let before_rollback: DateTime<Utc> = inserter
        .query_one("SELECT clock_timestamp()", &[])
        .await
        .expect("clock")
        .get(0);
    inserter.batch_execute("ROLLBACK").await.expect("rollback");
    let granted = call
        .await
        .expect("the waiter's task")
        .expect("the waiter's call");
    (granted, before_rollback)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_first_grant_after_a_rolled_back_insert_is_dated_after_it() {
    for major in test_majors() {
        let files = ExtensionFiles::renamed("pg_lease_first_grant");
        let (granted, rollback) = grant_after_rolled_back_insert(major, &files).await;
        match granted {
            Acquire::Acquired {
                epoch: 1,
                expires_at,
            } => {
                let ttl = chrono::Duration::from_std(TTL).expect("ttl");
                assert!(
                    expires_at >= rollback + ttl,
                    "PG {major}: expires {expires_at}, rollback at {rollback}"
                );
            }
            other => panic!("PG {major}: the waiter got {other:?}"),
        }
    }
}

/// The negative control: 0.2.0's grant expires before the rollback it waited for.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pg_lease_0_2_0_dates_it_before_the_wait() {
    let major = test_majors()[0];
    let (granted, rollback) =
        grant_after_rolled_back_insert(major, &ExtensionFiles::version_0_2_0()).await;
    match granted {
        Acquire::Acquired {
            epoch: 1,
            expires_at,
        } => assert!(
            expires_at < rollback,
            "PG {major}: 0.2.0's grant expires {expires_at}, rollback at {rollback}"
        ),
        other => panic!("PG {major}: 0.2.0's waiter got {other:?}"),
    }
}
