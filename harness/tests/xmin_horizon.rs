//! A blocking acquire pins the xmin horizon for its whole wait (SEMANTICS section 8, a
//! documented cost; measured in results/xmin-horizon/): the function runs inside the
//! caller's `SELECT`, whose snapshot stays registered until the statement ends, so VACUUM
//! cannot remove a row version that died after the call started (each of the holder's renews
//! leaves one) until the waiter's call returns, even though every probe of the wait loop
//! takes a fresh snapshot (READ COMMITTED) and the waiting transaction has no transaction id.
//!
//! The pinning test shows the documented behaviour on every tested major: the dead versions
//! of N renews stay while a waiter waits and go once its call ended. Its control shows the
//! measurement tells the two apart: the same N renews with no waiter leave none behind
//! VACUUM.

use harness::client;
use harness::extension::ExtensionFiles;
use harness::pg::{shared, test_majors, Cluster, PgInstall};
use std::time::{Duration, Instant};
use tokio_postgres::Client;

const NAME: &str = "pg_lease_xmin_horizon";
/// Renews of the holder while the waiter waits (the figure was for 200).
const RENEWS: usize = 200;
const MINUTE: Duration = Duration::from_secs(60);

/// Dead row versions of the lease table VACUUM could not remove: `n_dead_tup` as the VACUUM
/// just run reported it (on 14 the statistics collector applies the report asynchronously,
/// so this waits for the table's `vacuum_count` to move).
async fn dead_after_vacuum(su: &Client, table: &str) -> u64 {
    let stats = format!(
        "SELECT n_dead_tup, vacuum_count FROM pg_catalog.pg_stat_all_tables \
          WHERE relid = '{table}'::pg_catalog.regclass"
    );
    let before: i64 = su.query_one(&stats, &[]).await.expect("stats").get(1);
    su.batch_execute(&format!("VACUUM {table}"))
        .await
        .expect("vacuum");
    let start = Instant::now();
    loop {
        let row = su.query_one(&stats, &[]).await.expect("stats");
        let (dead, count): (i64, i64) = (row.get(0), row.get(1));
        if count > before {
            return u64::try_from(dead).unwrap_or(0);
        }
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "the VACUUM of {table} was not reported within 10 s"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// (backend_xid, backend_xmin) of the backend `pid`, as text.
async fn horizon_of(su: &Client, pid: i32) -> (Option<String>, Option<String>) {
    let row = su
        .query_one(
            "SELECT backend_xid::text, backend_xmin::text FROM pg_catalog.pg_stat_activity \
              WHERE pid = $1",
            &[&pid],
        )
        .await
        .expect("activity");
    (row.get(0), row.get(1))
}

/// `RENEWS` renews of `holder`'s lease on `key`, each its own transaction.
async fn renew_many(holder: &Client, key: &str, epoch: i64) {
    for _ in 0..RENEWS {
        let r = client::renew(holder, key, "holder", epoch, MINUTE)
            .await
            .expect("renew");
        assert_eq!(r.status, client::Status::Ok, "{r:?}");
    }
}

/// (dead versions after N renews with no waiter, while a waiter waits, after its call ended).
async fn measure(cluster: &Cluster) -> (u64, u64, u64) {
    let db = cluster
        .fresh_database_with("xmin_horizon", NAME)
        .await
        .expect("a database with the build");
    let su = cluster.connect(&db).await.expect("connect");
    let table = harness::extension::lease_table(&su).await.expect("table");
    // Only the VACUUMs here remove versions (no autovacuum run in between).
    su.batch_execute(&format!(
        "ALTER TABLE {table} SET (autovacuum_enabled = off)"
    ))
    .await
    .expect("autovacuum off");
    let holder = cluster.connect(&db).await.expect("connect");

    // Control: N renews, nobody waiting.
    let g = client::acquire(&holder, "alone", "holder", MINUTE, Duration::ZERO)
        .await
        .expect("grant");
    renew_many(&holder, "alone", g.epoch().expect("granted")).await;
    let alone = dead_after_vacuum(&su, &table).await;

    // N renews while a blocking acquire of the key waits.
    let g = client::acquire(&holder, "k", "holder", MINUTE, Duration::ZERO)
        .await
        .expect("grant");
    let epoch = g.epoch().expect("granted");
    let waiter = cluster.connect(&db).await.expect("connect");
    let pid: i32 = waiter
        .query_one("SELECT pg_catalog.pg_backend_pid()", &[])
        .await
        .expect("pid")
        .get(0);
    let waiting = tokio::spawn(async move {
        client::acquire(&waiter, "k", "waiter", MINUTE, Duration::from_secs(50)).await
    });
    // Wait until the waiter's call is running (it holds a snapshot then).
    let start = Instant::now();
    loop {
        let active: bool = su
            .query_one(
                "SELECT state = 'active' AND backend_xmin IS NOT NULL \
                   FROM pg_catalog.pg_stat_activity WHERE pid = $1",
                &[&pid],
            )
            .await
            .expect("activity")
            .get::<_, Option<bool>>(0)
            .unwrap_or(false);
        if active {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "the waiter never ran"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let xmin_at_start = horizon_of(&su, pid).await;
    renew_many(&holder, "k", epoch).await;
    // Why: the waiter took no transaction id, and its xmin (the outer statement's snapshot)
    // has not moved through the renews, though each probe took a new snapshot.
    let xmin_after = horizon_of(&su, pid).await;
    assert_eq!(
        (xmin_at_start.0.as_deref(), &xmin_at_start.1),
        (None, &xmin_after.1),
        "the waiter's (backend_xid, backend_xmin) went from {xmin_at_start:?} to {xmin_after:?}"
    );
    let while_waiting = dead_after_vacuum(&su, &table).await;
    assert!(!waiting.is_finished(), "the waiter stopped waiting");
    let status = client::release(&holder, "k", "holder", epoch)
        .await
        .expect("release");
    assert_eq!(status, client::Status::Ok);
    let granted = waiting.await.expect("join").expect("the waiter's call");
    assert!(granted.epoch().is_some(), "{granted:?}");
    let after = dead_after_vacuum(&su, &table).await;
    (alone, while_waiting, after)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_blocking_waiter_keeps_dead_row_versions_until_its_call_ends() {
    let mut problems = Vec::new();
    for major in test_majors() {
        let install = PgInstall::ensure(major).expect("the tested major");
        install
            .install_extension(&ExtensionFiles::renamed(NAME))
            .expect("install the build's files");
        let cluster = shared(major).expect("a cluster of the tested major");
        let (alone, while_waiting, after) = measure(cluster).await;
        println!(
            "PG {major}: dead row versions VACUUM left after {RENEWS} renews: {alone} with no \
             waiter, {while_waiting} while a blocking acquire waited, {after} after its call \
             ended"
        );
        // Control: without a waiter VACUUM removes the renews' versions (a handful may be
        // pinned by a concurrent snapshot of the harness's own sessions).
        if alone > 10 {
            problems.push(format!(
                "PG {major}: with no waiter {alone} dead versions stayed (the control)"
            ));
        }
        // Documented: every renew's version stays while the waiter waits...
        if while_waiting < RENEWS as u64 {
            problems.push(format!(
                "PG {major}: only {while_waiting} dead versions stayed while the waiter waited \
                 ({RENEWS} renews): the documented cost changed, update SEMANTICS section 8"
            ));
        }
        // ... and go once its call ended.
        if after > 10 {
            problems.push(format!(
                "PG {major}: {after} dead versions stayed after the waiter's call ended"
            ));
        }
    }
    assert!(problems.is_empty(), "{problems:#?}");
}
