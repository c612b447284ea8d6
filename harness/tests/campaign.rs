//! The history recorder and free-running campaigns against real servers
//! (harness::recorder, harness::campaign).

#[path = "campaign/lost_calls.rs"]
mod lost_calls;
#[path = "campaign/wal_resolved.rs"]
mod wal_resolved;

use harness::pg::{shared, test_majors, Cluster, PgInstall};
use harness::recorder::{Begun, Recorder, RecorderOptions};
use model::{Interval, Op, OpRecord, OpResult, Outcome, Span, TxnEnd};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A recorder on a fresh database of the shared cluster of `major`.
async fn recorder(
    major: u32,
    prefix: &str,
    call_timeout: Duration,
) -> (&'static Cluster, String, Arc<Recorder>) {
    let cluster = shared(major).expect("a PostgreSQL cluster");
    let db = cluster
        .fresh_database(prefix)
        .await
        .expect("a fresh database");
    let options = RecorderOptions {
        call_timeout,
        ..RecorderOptions::default()
    };
    let rec = Arc::new(Recorder::new(cluster.config(&db), options).expect("a recorder"));
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
    let rec = Arc::new(Recorder::new(cluster.config(&db), RecorderOptions::default()).unwrap());
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

use harness::campaign::{self, Campaign, Length, Report, Silent, Target};
use harness::extension::MUTANTS;
use model::Budget;

/// The seed of the campaigns below (fixed, so a failure names its plans; the interleaving
/// of real concurrency still varies run to run).
const SEED: u64 = 20_261_203;

/// A campaign of the default workload (8 processes, 2 keys) of `ops` calls. Its history is
/// kept in `$LEASECHECK_HISTORY_DIR` when that is set.
fn campaign(target: Target, ops: u64, label: &str) -> Campaign {
    Campaign {
        history_file: campaign::history_file_from_env(label, SEED),
        budget: Budget {
            time: Some(Duration::from_secs(30)),
            states: Some(5_000_000),
            ..Budget::default()
        },
        ..Campaign::new(target, Length::Ops(ops), SEED)
    }
}

fn summary(label: &str, r: &Report, elapsed: Duration) -> String {
    let f = &r.figures;
    format!(
        "{label} on PG {}: {} ({} ops, {:.0} ops/s, {} unknown, {} failed, {} txns, record {:.1?}, check {:.1?}, total {:.1?})",
        r.postgres,
        r.outcome.name(),
        f.ops,
        f.ops_per_s(),
        f.unknown_ops,
        f.failed_ops,
        f.txns,
        f.record_time,
        f.check_time,
        elapsed
    )
}

/// 8 processes x 2 keys x 1,500 ops on every tested major: the shipped pg_lease must come
/// out linearizable. Bounded: each campaign must finish within 60 s (recording at
/// ~1,000-1,500 ops/s takes 1-2 s here; the check's budget is 30 s, its diagnosis 5 s).
/// (pg_lease 0.1.0 failed this in most runs: it read `clock_timestamp()` before taking the
/// key's row lock, so a grant that waited for the lock was backdated; see
/// results/histories/20261203T093850Z.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_free_running_campaign_on_pg_lease_is_linearizable() {
    for major in test_majors() {
        let cluster = shared(major).unwrap();
        let started = Instant::now();
        let report = campaign::run(
            cluster,
            &campaign(Target::PgLease, 1_500, &format!("pg_lease-pg{major}")),
            Arc::new(Silent),
        )
        .await;
        let elapsed = started.elapsed();
        println!("{}", summary("pg_lease", &report, elapsed));
        assert!(
            matches!(report.outcome, campaign::Outcome::Linearizable(_)),
            "PG {major}: {}",
            report.outcome
        );
        assert_eq!(report.figures.ops, 1_500);
        assert!(elapsed < Duration::from_secs(60), "took {elapsed:?}");
    }
}

/// A campaign that cannot be made is an infrastructure failure (exit status 2), never a
/// violation: an invalid workload, and a mutant whose edit no longer applies.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_campaign_that_cannot_run_is_an_infrastructure_failure() {
    static STALE: harness::mutants::Mutant = harness::mutants::Mutant {
        name: "stale",
        breaks: "nothing: its edit matches no text of the script",
        kill: harness::mutants::Kill::Stall,
        hunt: &[harness::mutants::Mode::Stepped],
        edits: &[("no such text in the script", "")],
        caught_by: &[],
    };
    let cluster = shared(test_majors()[0]).unwrap();
    let mut bad_workload = campaign(Target::PgLease, 10, "bad-workload");
    bad_workload.workload.processes = 99;
    for c in [
        bad_workload,
        campaign(Target::Mutant(&STALE), 10, "stale-mutant"),
    ] {
        let report = campaign::run(cluster, &c, Arc::new(Silent)).await;
        assert!(
            matches!(report.outcome, campaign::Outcome::Infrastructure(_)),
            "{}",
            report.outcome
        );
        assert_eq!(report.outcome.exit(), model::Exit::NoVerdict);
        let verdict = campaign::verdict_json(&report, &c, None);
        assert_eq!(verdict["verdict"], "infrastructure");
        assert_eq!(verdict["invariant"], serde_json::Value::Null);
    }
    // Negative control: the same path with a valid campaign records and judges.
    let ok = campaign(Target::PgLease, 10, "tiny");
    let report = campaign::run(cluster, &ok, Arc::new(Silent)).await;
    assert_eq!(report.figures.ops, 10, "{}", report.outcome);
    let verdict = campaign::verdict_json(&report, &ok, Some("history.jsonl"));
    assert_eq!(verdict["figures"]["ops"], 10);
    assert_eq!(verdict["target"], "pg_lease");
    assert_eq!(verdict["seed"], SEED);
}

#[test]
fn targets_are_pg_lease_or_a_known_mutant() {
    assert_eq!("pg_lease".parse::<Target>().unwrap(), Target::PgLease);
    for m in MUTANTS {
        let t: Target = format!("mutant:{}", m.name).parse().unwrap();
        assert_eq!(t.to_string(), format!("mutant:{}", m.name));
    }
    let err = "mutant:nope".parse::<Target>().unwrap_err().to_string();
    assert!(err.contains("release_keeps_epoch"), "{err}");
    assert!("pg_lease_x".parse::<Target>().is_err());
}

/// A call without an answer within the client timeout is cancelled on the server and
/// recorded unknown; its process is retired.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_that_times_out_is_cancelled_and_unknown() {
    let major = test_majors()[0];
    let timeout = Duration::from_millis(300);
    let (cluster, db, rec) = recorder(major, "rec_timeout", timeout).await;
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
    waiter.connect().await.unwrap();
    let pid = waiter.backend_pid().unwrap();
    let process = waiter.process().unwrap();
    let started = Instant::now();
    let lost = waiter
        .call(&acquire("k", "b", Interval::secs(1), Interval::secs(30)))
        .await
        .unwrap();
    // The margin: the timeout plus the cancel's own round trip, far below the 30 s wait.
    assert!(started.elapsed() < timeout + Duration::from_secs(5));
    assert!(
        matches!(&lost.result, OpResult::Unknown { reason } if reason.contains("client timeout")),
        "{lost:?}"
    );
    assert_eq!(lost.process, process);
    assert_eq!(waiter.process(), None, "the process is retired");
    // The server stopped running it: the backend no longer runs the 30 s wait.
    let admin = cluster.connect(&db).await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let active = admin
            .query_opt(
                "SELECT 1 FROM pg_stat_activity WHERE pid = $1 AND state = 'active'",
                &[&pid],
            )
            .await
            .unwrap();
        if active.is_none() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "backend {pid} still runs the call"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Negative control: a call that answers within the timeout is recorded as answered.
    let answered = waiter.call(&Op::Inspect { key: key("k") }).await.unwrap();
    assert!(matches!(answered.result, OpResult::Ok(_)));
    assert_ne!(answered.process, process);
    let history = rec.finish().unwrap();
    assert!(model::checker::check(&history, &Default::default()).is_linearizable());
}

/// A fault injector records its fault's start, end and effect through the recorder.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nemesis_events_are_recorded_with_their_effect() {
    let (_, _, rec) = recorder(test_majors()[0], "rec_nemesis", Duration::from_secs(10)).await;
    let started = rec.nemesis_start("pause");
    let mut s = rec.session();
    s.call(&Op::Inspect { key: key("k") }).await.unwrap();
    rec.nemesis_end(started, model::NemesisEffect::None, "paused nothing")
        .unwrap();
    let history = rec.finish().unwrap();
    assert_eq!(history.nemeses.len(), 1);
    let n = &history.nemeses[0];
    assert_eq!(n.fault, "pause");
    assert!(n.start <= history.ops[0].invoke && history.ops[0].complete <= n.end);
    // A finished recorder takes no more records.
    let late = rec.nemesis_start("pause");
    assert!(rec
        .nemesis_end(late, model::NemesisEffect::None, "")
        .is_err());
}

/// A campaign can run for a time instead of a number of ops. Bounded: 1 s of recording.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_campaign_can_run_for_a_time() {
    let cluster = shared(test_majors()[0]).unwrap();
    let c = Campaign {
        length: Length::Time(Duration::from_secs(1)),
        ..campaign(Target::PgLease, 0, "timed")
    };
    let report = campaign::run(cluster, &c, Arc::new(Silent)).await;
    assert!(report.figures.ops > 0, "{}", report.outcome);
    // The margin: calls started before the deadline finish within the call timeout.
    assert!(report.figures.record_time < Duration::from_secs(1) + c.call_timeout);
    assert!(
        !matches!(report.outcome, campaign::Outcome::Infrastructure(_)),
        "{}",
        report.outcome
    );
}
