//! Real driver errors read by `harness::fate` and classified by the lease
//! client, on every tested major: each fate of the one table that a server
//! can produce, provoked for real.

use harness::client::{self, LeaseError};
use harness::pg::{shared, test_majors, Cluster};
use model::fate::{BugCause, Condition, Failure, Fate, UnknownCause};
use std::time::{Duration, Instant};
use tokio_postgres::Client;

const MINUTE: Duration = Duration::from_secs(60);

/// A fresh pg_lease database on the shared cluster of `major`, and a client of it.
async fn database(major: u32, prefix: &str) -> (&'static Cluster, String, Client) {
    let cluster = shared(major).unwrap();
    let name = cluster.fresh_database(prefix).await.unwrap();
    let client = cluster.connect(&name).await.unwrap();
    (cluster, name, client)
}

async fn backend_pid(client: &Client) -> i32 {
    client
        .query_one("SELECT pg_backend_pid()", &[])
        .await
        .unwrap()
        .get(0)
}

/// Waits until backend `pid` is running a statement (pg_lease's acquire
/// polls with `pg_sleep` while it waits).
async fn wait_active(observer: &Client, pid: i32) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let active: bool = observer
            .query_one(
                "SELECT EXISTS (SELECT 1 FROM pg_stat_activity \
                 WHERE pid = $1 AND state = 'active' AND query LIKE '%lease.acquire%')",
                &[&pid],
            )
            .await
            .unwrap()
            .get(0);
        if active {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "backend {pid} never ran its acquire"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Grants `key` to another owner for a minute, so that a blocking acquire of it waits.
async fn hold(c: &Client, key: &str) {
    let got = client::acquire(c, key, "holder", MINUTE, Duration::ZERO)
        .await
        .unwrap();
    assert!(got.epoch().is_some());
}

#[tokio::test]
async fn a_killed_backend_leaves_the_outcome_unknown() {
    for major in test_majors() {
        let (cluster, db, observer) = database(major, "fate_kill").await;
        hold(&observer, "k").await;
        let victim = cluster.connect(&db).await.unwrap();
        let pid = backend_pid(&victim).await;
        let (waited, ()) =
            tokio::join!(client::acquire(&victim, "k", "v", MINUTE, MINUTE), async {
                wait_active(&observer, pid).await;
                observer
                    .execute("SELECT pg_terminate_backend($1)", &[&pid])
                    .await
                    .unwrap();
            });
        let err = waited.unwrap_err();
        eprintln!("PG {major}: killed mid-call: {err:?}");
        assert!(
            matches!(
                err,
                LeaseError::OutcomeUnknown {
                    cause: UnknownCause::SessionEnded,
                    ..
                }
            ),
            "PG {major}: {err:?}"
        );
        assert_eq!(err.code(), Some("57P01"));
        // The next call on the dead connection: closed, no SQLSTATE.
        let raw = victim.query("SELECT 1", &[]).await.unwrap_err();
        assert_eq!(harness::fate::condition(&raw), Condition::ConnectionLost);
        assert_eq!(
            harness::fate::fate(&raw),
            Fate::Unknown(UnknownCause::ConnectionLost)
        );
        assert!(client::classify(raw).is_unknown());
    }
}

#[tokio::test]
async fn bad_sql_and_a_wrong_parameter_type_are_harness_bugs() {
    for major in test_majors() {
        let (_, _, c) = database(major, "fate_bug").await;
        let err = c.query("SELEC 1", &[]).await.unwrap_err();
        assert_eq!(harness::fate::condition(&err), Condition::Sql("42601"));
        assert_eq!(
            harness::fate::fate(&err),
            Fate::HarnessBug(BugCause::BadSql)
        );
        let err = client::classify(err);
        assert!(
            matches!(
                err,
                LeaseError::HarnessBug {
                    cause: BugCause::BadSql,
                    ..
                }
            ),
            "PG {major}: {err:?}"
        );
        assert_eq!(err.code(), Some("42601"));
        // A text parameter where the statement wants int4: the driver refuses it.
        let err = c.query("SELECT $1::int4", &[&"text"]).await.unwrap_err();
        assert_eq!(harness::fate::condition(&err), Condition::DriverMisuse);
        let err = client::classify(err);
        assert!(
            matches!(
                err,
                LeaseError::HarnessBug {
                    cause: BugCause::DriverMisuse,
                    ..
                }
            ),
            "PG {major}: {err:?}"
        );
        assert!(!err.is_unknown());
    }
}

#[tokio::test]
async fn pg_leases_invalid_input_is_a_definite_failure() {
    for major in test_majors() {
        let (_, _, c) = database(major, "fate_invalid").await;
        let err = c
            .query(
                "SELECT * FROM lease.acquire('k', '', interval '1 minute')",
                &[],
            )
            .await
            .unwrap_err();
        // Raised inside pg_lease (its context names lease._raise_invalid): a contract
        // error, so the same fate as from anywhere.
        assert_eq!(harness::fate::condition(&err), Condition::InTarget("22023"));
        assert_eq!(
            harness::fate::fate(&err),
            Fate::Failed(Failure { transient: false })
        );
        let err = client::acquire(&c, "k", "", MINUTE, Duration::ZERO)
            .await
            .unwrap_err();
        assert!(
            matches!(err, LeaseError::InvalidInput { .. }),
            "PG {major}: {err:?}"
        );
    }
}

#[tokio::test]
async fn a_statement_timeout_and_an_exhausted_wait_are_transient_failures() {
    for major in test_majors() {
        let (_, _, c) = database(major, "fate_cancel").await;
        c.batch_execute("SET statement_timeout = '100ms'")
            .await
            .unwrap();
        let err = c.query("SELECT pg_sleep(5)", &[]).await.unwrap_err();
        assert_eq!(harness::fate::condition(&err), Condition::Sql("57014"));
        assert_eq!(
            harness::fate::fate(&err),
            Fate::Failed(Failure { transient: true })
        );
        let err = client::classify(err);
        assert!(
            matches!(err, LeaseError::Canceled { .. }),
            "PG {major}: {err:?}"
        );
        c.batch_execute("RESET statement_timeout").await.unwrap();
        // pg_lease's own 57014: the same fate, told apart by its message.
        hold(&c, "k").await;
        let err = client::acquire(&c, "k", "w", MINUTE, Duration::from_millis(100))
            .await
            .unwrap_err();
        assert!(
            matches!(err, LeaseError::WaitExhausted { .. }),
            "PG {major}: {err:?}"
        );
    }
}

#[tokio::test]
async fn a_call_abandoned_by_the_client_timeout_is_unknown() {
    for major in test_majors() {
        let (_, _, c) = database(major, "fate_client_timeout").await;
        hold(&c, "k").await;
        let started = Instant::now();
        let err = client::within(
            Duration::from_millis(200),
            client::acquire(&c, "k", "w", MINUTE, MINUTE),
        )
        .await
        .unwrap_err();
        assert!(started.elapsed() < Duration::from_secs(10));
        assert!(
            matches!(
                err,
                LeaseError::OutcomeUnknown {
                    cause: UnknownCause::ClientTimeout,
                    source: None,
                    ..
                }
            ),
            "PG {major}: {err:?}"
        );
    }
}

/// Attribution: the same SQLSTATE (42601, a syntax error) is the harness's own bug when
/// its statement has it (no routine of the target in the error's context: no verdict), and
/// a finding when the server raised it while running the target's code (a build that
/// splices the key into SQL it EXECUTEs, given a key with a quote): the client's and the
/// recorder's error then name where in the target it was raised.
#[tokio::test]
async fn the_same_sqlstate_is_the_harness_bug_from_its_statement_and_a_finding_from_the_target() {
    use harness::extension::ExtensionFiles;
    use harness::recorder::{Recorder, RecorderError, RecorderOptions};
    let mutant = harness::mutants::find("status_lookup_injects_key").expect("catalogued");
    let files = ExtensionFiles::mutant(mutant).expect("the mutant applies");
    for major in test_majors() {
        let cluster = shared(major).unwrap();
        cluster.provide_extension(&files).await.unwrap();
        let db = cluster
            .fresh_database_with("fate_where", &files.name)
            .await
            .unwrap();
        let c = cluster.connect(&db).await.unwrap();
        // The harness's own statement.
        let own = c.query("SELEC 1", &[]).await.unwrap_err();
        assert_eq!(harness::fate::condition(&own), Condition::Sql("42601"));
        assert_eq!(
            harness::fate::fate(&own),
            Fate::HarnessBug(BugCause::BadSql)
        );
        // The same SQLSTATE raised inside the target.
        let inside = c
            .query(
                "SELECT * FROM lease.renew($1::text, 'o', 1, interval '1 minute')",
                &[&"k'quote"],
            )
            .await
            .unwrap_err();
        assert_eq!(
            harness::fate::condition(&inside),
            Condition::InTarget("42601"),
            "PG {major}: {inside:?}"
        );
        assert_eq!(harness::fate::fate(&inside), Fate::OutsideContract);
        let err = client::release(&c, "k'quote", "o", 1).await.unwrap_err();
        match &err {
            LeaseError::OutsideContract { code, context, .. } => {
                assert_eq!(code, "42601");
                // The innermost frame is the helper, in 0.3.0's schema lease_internal.
                assert!(
                    context.starts_with("PL/pgSQL function lease_internal._failure_status("),
                    "{context}"
                );
            }
            other => panic!("PG {major}: {other:?}"),
        }
        // The control: a key without a quote is answered.
        assert!(client::release(&c, "k", "o", 1).await.is_ok());
        // The recorder stops with a finding, not a harness bug.
        let recorder = std::sync::Arc::new(
            Recorder::new(cluster.config(&db), RecorderOptions::default()).unwrap(),
        );
        let mut s = recorder.session();
        let op = model::Op::renew(
            "k'quote".to_string(),
            "o".to_string(),
            1,
            model::Interval::secs(1),
        );
        match s.call(&op).await {
            Err(RecorderError::Malformed { call, detail }) => {
                assert_eq!(call, "lease.renew");
                assert!(detail.contains("42601 inside the target"), "{detail}");
            }
            other => panic!("PG {major}: {other:?}"),
        }
    }
}

/// Attribution follows the build's own routines (its extension's members in pg_depend), not
/// a schema name: an error raised in a helper of schema `lease_internal`, called on its own
/// (no frame of the API around it), is the target's; the same error from a function the
/// harness puts into that very schema, which is no member of the extension, is not.
#[tokio::test]
async fn an_error_raised_in_a_helper_of_lease_internal_is_the_targets() {
    use harness::extension::ExtensionFiles;
    let mutant = harness::mutants::find("status_lookup_injects_key").expect("catalogued");
    let files = ExtensionFiles::mutant(mutant).expect("the mutant applies");
    for major in test_majors() {
        let cluster = shared(major).unwrap();
        cluster.provide_extension(&files).await.unwrap();
        let db = cluster
            .fresh_database_with("fate_helper", &files.name)
            .await
            .unwrap();
        let c = cluster.connect(&db).await.unwrap();
        let routines = harness::fate::target_routines(&c, &files.name)
            .await
            .unwrap();
        assert!(
            routines
                .names("PL/pgSQL function lease_internal._failure_status(text,text,bigint) line 1"),
            "PG {major}: {routines:?}"
        );
        let inside = c
            .query(
                "SELECT lease_internal._failure_status($1::text, 'o', 1)",
                &[&"k'quote"],
            )
            .await
            .unwrap_err();
        let db_err = inside.as_db_error().expect("a server error");
        assert!(
            !db_err.where_().unwrap_or_default().contains("lease."),
            "PG {major}: no frame of the API: {db_err:?}"
        );
        assert_eq!(
            harness::fate::condition(&inside),
            Condition::InTarget("42601"),
            "PG {major}: {inside:?}"
        );
        assert_eq!(harness::fate::fate(&inside), Fate::OutsideContract);
        // Negative control: the same error from the harness's own function in that schema.
        c.batch_execute(
            "CREATE FUNCTION lease_internal.planted_by_the_harness() RETURNS void \
             LANGUAGE plpgsql AS $$ BEGIN EXECUTE 'SELEC 1'; END $$",
        )
        .await
        .unwrap();
        let own = c
            .query("SELECT lease_internal.planted_by_the_harness()", &[])
            .await
            .unwrap_err();
        assert_eq!(
            harness::fate::condition(&own),
            Condition::Sql("42601"),
            "PG {major}: {own:?}"
        );
    }
}
