//! The history recorder and free-running campaigns against real servers
//! (harness::recorder, harness::campaign).

use harness::pg::{shared, test_majors, Cluster, PgInstall};
use harness::recorder::{Begun, Recorder, RecorderOptions};
use model::{Interval, Op, OpRecord, OpResult, Outcome, Span, TxnEnd};
use std::time::{Duration, Instant};

/// A recorder on a fresh database of the shared cluster of `major`.
async fn recorder(
    major: u32,
    prefix: &str,
    call_timeout: Duration,
) -> (&'static Cluster, String, Recorder) {
    let cluster = shared(major).expect("a PostgreSQL cluster");
    let db = cluster
        .fresh_database(prefix)
        .await
        .expect("a fresh database");
    let options = RecorderOptions {
        call_timeout,
        ..RecorderOptions::default()
    };
    let rec = Recorder::new(cluster.config(&db), options).expect("a recorder");
    (cluster, db, rec)
}

fn key(s: &str) -> Option<String> {
    Some(s.to_string())
}

fn acquire(k: &str, owner: &str, ttl: Interval, wait: Interval) -> Op<String, String> {
    Op::acquire_wait(k.to_string(), owner.to_string(), ttl, wait)
}

fn span(op: &OpRecord) -> Span {
    op.server.expect("a server window")
}

/// A plain-microsecond grant's reported expiry is `t + ttl` for some `t` of its window.
fn grant_within_window(op: &OpRecord, ttl_us: i64) -> bool {
    match (&op.result, op.server) {
        (OpResult::Ok(Outcome::Acquired { expires_at, .. }), Some(w)) => {
            w.t0().plus(ttl_us) <= *expires_at && *expires_at <= w.t1().plus(ttl_us)
        }
        _ => false,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_recorder_reads_windows_and_outcomes_in_the_same_round_trip() {
    for major in test_majors() {
        let (_, _, rec) = recorder(major, "rec_window", Duration::from_secs(10)).await;
        let mut s = rec.session();
        let ttl = Interval::secs(10);
        let granted = s
            .call(&acquire("k", "a", ttl, Interval::ZERO))
            .await
            .unwrap();
        assert!(
            grant_within_window(&granted, ttl.micros),
            "PG {major}: {granted:?}"
        );
        // Negative control: the same grant, 1 us later or earlier than possible, fails.
        let mut late = granted.clone();
        let mut early = granted.clone();
        if let OpResult::Ok(Outcome::Acquired { expires_at, .. }) = &mut late.result {
            *expires_at = span(&granted).t1().plus(ttl.micros + 1);
        }
        if let OpResult::Ok(Outcome::Acquired { expires_at, .. }) = &mut early.result {
            *expires_at = span(&granted).t0().plus(ttl.micros - 1);
        }
        assert!(!grant_within_window(&late, ttl.micros));
        assert!(!grant_within_window(&early, ttl.micros));

        let never = s
            .call(&Op::Inspect {
                key: key("never leased"),
            })
            .await
            .unwrap();
        assert_eq!(
            never.result,
            OpResult::Ok(Outcome::Inspected(None)),
            "PG {major}"
        );
        let w = span(&never);
        assert!(w.t0() <= w.t1());
        // statement_timestamp() is per execution of the prepared statement, not per prepare.
        assert!(
            w.t0() >= span(&granted).t1(),
            "PG {major}: {w:?} vs {:?}",
            span(&granted)
        );
        let held = s.call(&Op::Inspect { key: key("k") }).await.unwrap();
        assert!(
            matches!(&held.result, OpResult::Ok(Outcome::Inspected(Some(r))) if r.held && r.epoch == 1)
        );

        let invalid = s
            .call(&Op::Acquire {
                key: None,
                owner: key("a"),
                ttl: Some(ttl),
                wait: Some(Interval::ZERO),
            })
            .await
            .unwrap();
        assert!(
            matches!(&invalid.result, OpResult::Fail { sqlstate, .. } if sqlstate == "22023"),
            "PG {major}: {invalid:?}"
        );
        assert_eq!(invalid.server, None);
        // A definite failure does not retire the process.
        assert_eq!(s.process(), Some(granted.process));
        let history = rec.finish().expect("a valid history");
        assert_eq!(history.ops.len(), 4);
        assert!(model::checker::check(&history, &Default::default()).is_linearizable());
    }
}

/// Intervals with month and day fields reach the server exactly.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn intervals_with_months_and_days_are_passed_exactly() {
    let major = test_majors()[0];
    let (cluster, db, rec) = recorder(major, "rec_interval", Duration::from_secs(10)).await;
    let mut s = rec.session();
    let ttl = Interval {
        months: 1,
        days: 2,
        micros: 3_600_000_123,
    };
    let granted = s
        .call(&acquire("k", "a", ttl, Interval::ZERO))
        .await
        .unwrap();
    let OpResult::Ok(Outcome::Acquired { expires_at, .. }) = granted.result else {
        panic!("not granted: {granted:?}");
    };
    let w = span(&granted);
    let client = cluster.connect(&db).await.unwrap();
    let back = |interval: &'static str| {
        let client = &client;
        async move {
            let sql = format!(
                "SELECT (extract(epoch FROM (to_timestamp($1::bigint / 1e6) - interval '{interval}')) * 1e6)::bigint"
            );
            let v: i64 = client
                .query_one(&sql, &[&expires_at.0])
                .await
                .unwrap()
                .get(0);
            v
        }
    };
    let exact = back("1 mon 2 days 01:00:00.000123").await;
    assert!(
        w.t0().0 <= exact && exact <= w.t1().0,
        "{exact} not in {w:?}"
    );
    // Negative control: without the microseconds field (an hour and 123 us) the start
    // falls outside the window (which is far narrower than an hour).
    let truncated = back("1 mon 2 days").await;
    assert!(!(w.t0().0 <= truncated && truncated <= w.t1().0));
    rec.finish().unwrap();
}

/// Waits until `pid` runs a statement (or waits in `wait_event`), then terminates it.
async fn terminate_when(cluster: &Cluster, db: &str, pid: i32, wait_event: Option<&str>) {
    let admin = cluster.connect(db).await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let row = admin
            .query_opt(
                "SELECT wait_event FROM pg_stat_activity WHERE pid = $1 AND state = 'active'",
                &[&pid],
            )
            .await
            .unwrap();
        let event: Option<String> = row.as_ref().and_then(|r| r.get(0));
        let ready = match wait_event {
            None => row.is_some(),
            Some(want) => event.as_deref() == Some(want),
        };
        if ready {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "backend {pid} never reached {wait_event:?}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let killed: bool = admin
        .query_one("SELECT pg_terminate_backend($1)", &[&pid])
        .await
        .unwrap()
        .get(0);
    assert!(killed);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_backend_gives_an_unknown_op_and_a_retired_process() {
    for major in test_majors() {
        let (cluster, db, rec) = recorder(major, "rec_killed", Duration::from_secs(60)).await;
        let mut holder = rec.session();
        let mut waiter = rec.session();
        let held = holder
            .call(&acquire("k", "a", Interval::secs(60), Interval::ZERO))
            .await
            .unwrap();
        assert!(matches!(
            held.result,
            OpResult::Ok(Outcome::Acquired { .. })
        ));
        // Negative control: without a kill the blocking acquire ends with its timeout,
        // a definite answer, and the process goes on.
        let timed_out = waiter
            .call(&acquire("k", "b", Interval::secs(1), Interval::millis(100)))
            .await
            .unwrap();
        assert_eq!(
            timed_out.result.outcome(),
            Outcome::Timeout,
            "PG {major}: {timed_out:?}"
        );
        let before = waiter.process().expect("still connected");
        assert_eq!(before, timed_out.process);

        let pid = waiter.backend_pid().expect("connected");
        let blocking = acquire("k", "b", Interval::secs(1), Interval::secs(30));
        let (lost, ()) = tokio::join!(
            waiter.call(&blocking),
            terminate_when(cluster, &db, pid, None)
        );
        let lost = lost.unwrap();
        assert!(
            matches!(lost.result, OpResult::Unknown { .. }),
            "PG {major}: {lost:?}"
        );
        assert_eq!(lost.process, before);
        assert_eq!(lost.server, None);
        assert_eq!(waiter.process(), None, "the process is retired");
        let after = waiter.call(&Op::Inspect { key: key("k") }).await.unwrap();
        assert_ne!(after.process, before, "the next op runs as a new process");
        assert!(matches!(
            after.result,
            OpResult::Ok(Outcome::Inspected(Some(_)))
        ));
        let history = rec.finish().expect("a valid history");
        assert!(model::checker::check(&history, &Default::default()).is_linearizable());
    }
}

/// `pg_xact_status` tells a committed transaction from an aborted one; an id it cannot
/// judge stays unresolved.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_commit_is_resolved_by_the_transaction_id() {
    let major = test_majors()[0];
    let (cluster, db, rec) = recorder(major, "rec_xact", Duration::from_secs(10)).await;
    let client = cluster.connect(&db).await.unwrap();
    let xid_of = |end: &'static str| {
        let client = &client;
        async move {
            client.batch_execute("BEGIN").await.unwrap();
            let xid: String = client
                .query_one("SELECT pg_current_xact_id()::text", &[])
                .await
                .unwrap()
                .get(0);
            client.batch_execute(end).await.unwrap();
            xid
        }
    };
    let committed = xid_of("COMMIT").await;
    let aborted = xid_of("ROLLBACK").await;
    assert_eq!(rec.resolve_xact(&committed).await, Some(TxnEnd::Commit));
    assert_eq!(rec.resolve_xact(&aborted).await, Some(TxnEnd::Rollback));
    // An id from the future cannot be judged.
    assert_eq!(rec.resolve_xact("999999999999").await, None);
    rec.finish().unwrap();
}

/// A real lost COMMIT: the server waits for a synchronous standby that does not exist, so
/// COMMIT hangs after committing locally; its backend is then terminated. The recorder
/// resolves it through pg_xact_status. (Own cluster: the setting is server-wide.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_commit_whose_answer_is_lost_is_recorded_committed() {
    let major = test_majors()[0];
    let install = PgInstall::ensure(major).unwrap();
    let cluster = Cluster::start(&install).unwrap();
    let db = cluster.fresh_database("rec_lost_commit").await.unwrap();
    let admin = cluster.connect(&db).await.unwrap();
    admin
        .batch_execute("ALTER SYSTEM SET synchronous_standby_names = 'nobody'")
        .await
        .unwrap();
    admin
        .batch_execute("SELECT pg_reload_conf()")
        .await
        .unwrap();
    let rec = Recorder::new(cluster.config(&db), RecorderOptions::default()).unwrap();
    let mut s = rec.session();
    // A new session sees the reloaded setting.
    s.connect().await.unwrap();
    let txn = s.begin(model::Isolation::ReadCommitted).await.unwrap();
    assert!(matches!(txn, Begun::Open(_)));
    let granted = s
        .call(&acquire("k", "a", Interval::secs(60), Interval::ZERO))
        .await
        .unwrap();
    assert!(
        matches!(granted.result, OpResult::Ok(Outcome::Acquired { .. })),
        "{granted:?}"
    );
    let pid = s.backend_pid().unwrap();
    let (end, ()) = tokio::join!(
        s.commit(),
        terminate_when(&cluster, &db, pid, Some("SyncRep"))
    );
    assert_eq!(end.unwrap(), TxnEnd::Commit, "resolved, not left unknown");
    assert_eq!(s.process(), None, "the process is retired");
    let seen = s.call(&Op::Inspect { key: key("k") }).await.unwrap();
    assert!(matches!(&seen.result, OpResult::Ok(Outcome::Inspected(Some(r))) if r.held));
    let history = rec.finish().unwrap();
    assert_eq!(history.txns.len(), 1);
    assert_eq!(history.txns[0].end, TxnEnd::Commit);
    assert!(model::checker::check(&history, &Default::default()).is_linearizable());
}
