//! The error translation (spec §6, the task's §4 table) over real errors:
//! each row provoked on a live server where a server can produce it —
//! through the store wherever the store can meet it — and on every major
//! of `test_majors()`. No fault may come back as a lost lock.
//!
//! Run with `--nocapture` to see what tokio-postgres returned for each fault.

mod common;

use common::*;
use lockstore::{
    classify, translate, ContentionReason, Fault, LockStore, PostgresLockStore, StoreError,
    StoreOptions, Verdict,
};
use nemesis::proxy::Proxy;
use std::net::SocketAddr;
use std::time::{Duration, Instant};
use tokio_postgres::error::SqlState;
use tokio_postgres::Client;

fn observed(major: u32, what: &str, err: &dyn std::fmt::Debug) {
    eprintln!("PG {major}: {what}: {err:?}");
}

/// Translates a raw driver error and checks both steps agree.
fn raw(major: u32, what: &str, err: tokio_postgres::Error) -> (Fault, StoreError) {
    observed(major, what, &err);
    let fault = Fault::of(&err);
    let verdict = classify(&fault);
    let translated = translate(err);
    match (&verdict, &translated) {
        (Verdict::Contention(r), StoreError::Contention(c)) => assert_eq!(r, &c.reason),
        (Verdict::Programming, StoreError::Programming(_)) => {}
        other => panic!("PG {major}: {what}: verdict and translation disagree: {other:?}"),
    }
    (fault, translated)
}

/// Opens a transaction on a new connection that holds the row lock of `key`.
async fn hold_row_lock(db: &Db, key: &str) -> Client {
    let blocker = db.client().await;
    blocker.batch_execute("BEGIN").await.unwrap();
    let n = blocker
        .execute(
            "UPDATE lock SET renewed_at = renewed_at WHERE lock_key = $1",
            &[&key],
        )
        .await
        .unwrap();
    assert_eq!(n, 1);
    blocker
}

// ---- Row 1: 40001, 40P01 -------------------------------------------------

#[tokio::test]
async fn serialization_failure_is_contention() {
    each_major("ser", |db| async move {
        let store = db.store().await;
        grant(&store, "k").await;
        // Raw: a REPEATABLE READ update of a row updated and committed since its snapshot.
        let a = db.client().await;
        a.batch_execute("BEGIN ISOLATION LEVEL REPEATABLE READ; SELECT * FROM lock")
            .await
            .unwrap();
        db.admin
            .execute(
                "UPDATE lock SET renewed_at = now() WHERE lock_key = 'k'",
                &[],
            )
            .await
            .unwrap();
        let err = a
            .execute(
                "UPDATE lock SET renewed_at = now() WHERE lock_key = 'k'",
                &[],
            )
            .await
            .unwrap_err();
        let (fault, translated) = raw(db.major, "40001 (raw)", err);
        assert_eq!(fault, Fault::Sql(SqlState::T_R_SERIALIZATION_FAILURE));
        assert_eq!(
            contention(db.major, "40001", &translated),
            ContentionReason::Serialization
        );
        // Through the store: its RENEW, in a SERIALIZABLE session, waits for
        // a concurrent update of the row that then commits.
        let (mut config, app) = db.tagged_config("ser");
        config.options("-c default_transaction_isolation=serializable");
        let strict = db.store_with(&config, StoreOptions::default()).await;
        let token = db.row("k").await.unwrap().fencing_token;
        let blocker = hold_row_lock(&db, "k").await;
        let (renewed, ()) = tokio::join!(strict.extend("k", token, MINUTE), async {
            db.wait_blocked(&app).await;
            blocker.batch_execute("COMMIT").await.unwrap();
        });
        let err = renewed.unwrap_err();
        observed(db.major, "40001 (store RENEW)", &err);
        assert_eq!(err.code(), Some(&SqlState::T_R_SERIALIZATION_FAILURE));
        assert_eq!(
            contention(db.major, "40001", &err),
            ContentionReason::Serialization
        );
        // The lock was ours all along: the renew succeeds when tried again.
        assert!(strict.extend("k", token, MINUTE).await.unwrap().is_some());
    })
    .await;
}

#[tokio::test]
async fn deadlock_is_contention() {
    each_major("deadlock", |db| async move {
        let store = db.store().await;
        grant(&store, "k1").await;
        grant(&store, "k2").await;
        let a = db.client().await;
        let b = db.client().await;
        for c in [&a, &b] {
            c.batch_execute("SET deadlock_timeout = '50ms'; BEGIN")
                .await
                .unwrap();
        }
        let lock = "UPDATE lock SET renewed_at = renewed_at WHERE lock_key = $1";
        a.execute(lock, &[&"k1"]).await.unwrap();
        b.execute(lock, &[&"k2"]).await.unwrap();
        let (ra, rb) = tokio::join!(a.execute(lock, &[&"k2"]), b.execute(lock, &[&"k1"]));
        let err = match (ra, rb) {
            (Err(e), Ok(_)) | (Ok(_), Err(e)) => e,
            other => panic!(
                "PG {}: expected exactly one deadlock victim: {other:?}",
                db.major
            ),
        };
        let (fault, translated) = raw(db.major, "40P01 (raw)", err);
        assert_eq!(fault, Fault::Sql(SqlState::T_R_DEADLOCK_DETECTED));
        assert_eq!(
            contention(db.major, "40P01", &translated),
            ContentionReason::Deadlock
        );
    })
    .await;
}

// ---- Row 2: class 08, 57014, timeouts; connection loss -------------------

#[tokio::test]
async fn query_canceled_is_contention() {
    each_major("cancel", |db| async move {
        // Through the store: statement_timeout while RENEW waits for a row lock.
        let (mut config, _) = db.tagged_config("cancel");
        config.options("-c statement_timeout=200");
        let store = db.store_with(&config, StoreOptions::default()).await;
        let token = grant(&store, "k").await;
        let before = db.row("k").await.unwrap();
        let blocker = hold_row_lock(&db, "k").await;
        let err = store.extend("k", token, MINUTE).await.unwrap_err();
        observed(db.major, "57014 (store RENEW, statement_timeout)", &err);
        assert_eq!(err.code(), Some(&SqlState::QUERY_CANCELED));
        assert_eq!(
            contention(db.major, "57014", &err),
            ContentionReason::QueryCanceled
        );
        blocker.batch_execute("ROLLBACK").await.unwrap();
        assert_eq!(db.row("k").await.unwrap(), before);
        // Raw: pg_cancel_backend from another session.
        let victim = db.client().await;
        let pid: i32 = victim
            .query_one("SELECT pg_backend_pid()", &[])
            .await
            .unwrap()
            .get(0);
        let (slept, ()) = tokio::join!(victim.execute("SELECT pg_sleep(30)", &[]), async {
            let deadline = Instant::now() + Duration::from_secs(10);
            loop {
                let sleeping: bool = db
                    .admin
                    .query_one(
                        "SELECT EXISTS (SELECT 1 FROM pg_stat_activity \
                         WHERE pid = $1 AND query LIKE '%pg_sleep%' AND state = 'active')",
                        &[&pid],
                    )
                    .await
                    .unwrap()
                    .get(0);
                if sleeping {
                    break;
                }
                assert!(Instant::now() < deadline);
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            db.admin
                .execute("SELECT pg_cancel_backend($1)", &[&pid])
                .await
                .unwrap();
        });
        let (fault, translated) = raw(
            db.major,
            "57014 (raw, pg_cancel_backend)",
            slept.unwrap_err(),
        );
        assert_eq!(fault, Fault::Sql(SqlState::QUERY_CANCELED));
        assert_eq!(
            contention(db.major, "57014", &translated),
            ContentionReason::QueryCanceled
        );
    })
    .await;
}

/// The store's own per-call timeout: contention, and the outcome really is
/// unknown — the abandoned RENEW runs once the row lock is free.
#[tokio::test]
async fn client_timeout_is_contention_and_the_outcome_is_unknown() {
    each_major("timeout", |db| async move {
        let (config, app) = db.tagged_config("timeout");
        let options = StoreOptions {
            call_timeout: Duration::from_millis(300),
        };
        let store = db.store_with(&config, options).await;
        let token = grant(&store, "k").await;
        let before = db.row("k").await.unwrap();
        let blocker = hold_row_lock(&db, "k").await;
        let started = Instant::now();
        let err = store.extend("k", token, 10 * MINUTE).await.unwrap_err();
        let took = started.elapsed();
        observed(db.major, "client timeout (store RENEW)", &err);
        assert_eq!(
            contention(db.major, "client timeout", &err),
            ContentionReason::ClientTimeout {
                after: Some(Duration::from_millis(300))
            }
        );
        assert!(err.driver_error().is_none());
        assert!(took >= Duration::from_millis(300) && took < Duration::from_secs(5));
        db.wait_blocked(&app).await;
        blocker.batch_execute("ROLLBACK").await.unwrap();
        // The statement the caller gave up on still ran: "outcome unknown".
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let row = db.row("k").await.unwrap();
            if row.expires_at > before.expires_at {
                assert_eq!(row.fencing_token, token);
                break;
            }
            assert!(
                Instant::now() < deadline,
                "PG {}: the abandoned renew never ran",
                db.major
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        // And the store goes on working on the same connection.
        assert!(store.extend("k", token, MINUTE).await.unwrap().is_some());
    })
    .await;
}

/// A cut connection (both sockets reset by the proxy): contention; the row is
/// untouched; later calls on the dead connection stay contention.
#[tokio::test]
async fn cut_connection_is_contention() {
    each_major("cut", |db| async move {
        let proxy = Proxy::start(db.addr()).await.unwrap();
        let config = db.config_at(proxy.addr());
        let store = db.store_with(&config, StoreOptions::default()).await;
        let token = grant(&store, "k").await;
        let before = db.row("k").await.unwrap();
        assert_eq!(proxy.cut().await, 1);
        let err = store.extend("k", token, MINUTE).await.unwrap_err();
        observed(db.major, "cut (store RENEW)", &err);
        // The driver hands a call only "connection closed"; the reset went
        // to the connection task, which the store reports.
        assert_eq!(
            contention(db.major, "cut", &err),
            ContentionReason::ConnectionClosed
        );
        assert_eq!(err.code(), None);
        let end = err.contention().unwrap().connection_end.clone().unwrap();
        eprintln!("PG {}: cut: connection task ended with: {end}", db.major);
        assert!(end.contains("error communicating with the server"), "{end}");
        assert_eq!(db.row("k").await.unwrap(), before);
        // The store does not reconnect: every later call is contention too.
        let err = store.delete_if_owner("k", token).await.unwrap_err();
        assert_eq!(
            contention(db.major, "after cut", &err),
            ContentionReason::ConnectionClosed
        );
        assert!(store.is_closed());
        assert_eq!(db.row("k").await.unwrap(), before);
    })
    .await;
}

/// A connection that goes silent (the proxy stops forwarding): the per-call
/// timeout fires; once forwarding resumes the held RENEW is delivered and
/// runs, and the connection is usable again.
#[tokio::test]
async fn silent_connection_times_out_as_contention() {
    each_major("blackhole", |db| async move {
        let proxy = Proxy::start(db.addr()).await.unwrap();
        let config = db.config_at(proxy.addr());
        let options = StoreOptions {
            call_timeout: Duration::from_millis(300),
        };
        let store = db.store_with(&config, options).await;
        let token = grant(&store, "k").await;
        let before = db.row("k").await.unwrap();
        proxy.set_blackhole(true);
        let err = store.extend("k", token, 10 * MINUTE).await.unwrap_err();
        observed(db.major, "blackhole (store RENEW)", &err);
        assert!(matches!(
            contention(db.major, "blackhole", &err),
            ContentionReason::ClientTimeout { after: Some(_) }
        ));
        assert_eq!(
            db.row("k").await.unwrap(),
            before,
            "nothing reached the server"
        );
        proxy.set_blackhole(false);
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if db.row("k").await.unwrap().expires_at > before.expires_at {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "PG {}: the held renew never ran",
                db.major
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert!(store.extend("k", token, MINUTE).await.unwrap().is_some());
    })
    .await;
}

/// A backend terminated while the store's statement runs: 57P01 for that
/// call; "connection closed" for the next.
#[tokio::test]
async fn backend_killed_mid_statement_is_contention() {
    each_major("kill_busy", |db| async move {
        let (config, app) = db.tagged_config("kill_busy");
        let store = db.store_with(&config, StoreOptions::default()).await;
        let token = grant(&store, "k").await;
        let blocker = hold_row_lock(&db, "k").await;
        let (renewed, ()) = tokio::join!(store.extend("k", token, MINUTE), async {
            db.wait_blocked(&app).await;
            db.terminate(&app).await;
        });
        let err = renewed.unwrap_err();
        observed(db.major, "killed mid-statement (store RENEW)", &err);
        assert_eq!(err.code(), Some(&SqlState::ADMIN_SHUTDOWN));
        assert_eq!(
            contention(db.major, "57P01", &err),
            ContentionReason::SessionTerminated(SqlState::ADMIN_SHUTDOWN)
        );
        let err = store.read("k").await.unwrap_err();
        observed(
            db.major,
            "killed mid-statement, next call (store READ)",
            &err,
        );
        assert_eq!(
            contention(db.major, "after 57P01", &err),
            ContentionReason::ConnectionClosed
        );
        blocker.batch_execute("ROLLBACK").await.unwrap();
    })
    .await;
}

/// A backend terminated while idle: the next call sees only "connection
/// closed" (no SQLSTATE); the 57P01 reached the connection task, and the
/// store reports it.
#[tokio::test]
async fn backend_killed_while_idle_is_contention() {
    each_major("kill_idle", |db| async move {
        let (config, app) = db.tagged_config("kill_idle");
        let store = db.store_with(&config, StoreOptions::default()).await;
        let token = grant(&store, "k").await;
        let before = db.row("k").await.unwrap();
        db.terminate(&app).await;
        wait_closed(&store).await;
        let err = store.extend("k", token, MINUTE).await.unwrap_err();
        observed(db.major, "killed while idle (store RENEW)", &err);
        assert_eq!(err.code(), None);
        assert_eq!(
            contention(db.major, "idle kill", &err),
            ContentionReason::ConnectionClosed
        );
        let end = err.contention().unwrap().connection_end.clone().unwrap();
        eprintln!(
            "PG {}: idle kill: connection task ended with: {end}",
            db.major
        );
        assert!(end.contains("57P01"), "{end}");
        assert!(err.to_string().contains("57P01"));
        assert_eq!(db.row("k").await.unwrap(), before);
    })
    .await;
}

/// idle_session_timeout (57P05) arrives like an idle kill.
#[tokio::test]
async fn idle_session_timeout_is_contention() {
    each_major("idle_timeout", |db| async move {
        let mut config = db.config();
        config.options("-c idle_session_timeout=200");
        let store = db.store_with(&config, StoreOptions::default()).await;
        let token = grant(&store, "k").await;
        wait_closed(&store).await;
        let err = store.extend("k", token, MINUTE).await.unwrap_err();
        observed(db.major, "idle_session_timeout (store RENEW)", &err);
        assert_eq!(
            contention(db.major, "57P05", &err),
            ContentionReason::ConnectionClosed
        );
        let end = store.connection_end().unwrap();
        assert!(end.contains("57P05"), "{end}");
    })
    .await;
}

/// lock_timeout (55P03), not in the task's table: contention, like 57014.
#[tokio::test]
async fn lock_timeout_is_contention() {
    each_major("lock_timeout", |db| async move {
        let mut config = db.config();
        config.options("-c lock_timeout=200");
        let store = db.store_with(&config, StoreOptions::default()).await;
        let token = grant(&store, "k").await;
        let blocker = hold_row_lock(&db, "k").await;
        let err = store.delete_if_owner("k", token).await.unwrap_err();
        observed(db.major, "55P03 (store RELEASE)", &err);
        assert_eq!(
            contention(db.major, "55P03", &err),
            ContentionReason::LockTimeout
        );
        blocker.batch_execute("ROLLBACK").await.unwrap();
        assert!(store.delete_if_owner("k", token).await.unwrap());
    })
    .await;
}

/// Connection refusals: 53300 from the server, and nobody listening.
#[tokio::test]
async fn refused_connections_are_contention() {
    each_major("refused", |db| async move {
        let role = format!("{}_limited", db.name);
        db.admin
            .batch_execute(&format!("CREATE ROLE {role} LOGIN CONNECTION LIMIT 0"))
            .await
            .unwrap();
        let mut config = db.config();
        config.user(&role);
        let err = PostgresLockStore::connect(&config, StoreOptions::default())
            .await
            .unwrap_err();
        observed(db.major, "53300 (connect)", &err);
        assert_eq!(err.code(), Some(&SqlState::TOO_MANY_CONNECTIONS));
        assert_eq!(
            contention(db.major, "53300", &err),
            ContentionReason::ServerUnavailable(SqlState::TOO_MANY_CONNECTIONS)
        );
        db.admin
            .batch_execute(&format!("DROP ROLE {role}"))
            .await
            .unwrap();
        // Nobody listening: a port that was free a moment ago.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let config = db.config_at(SocketAddr::from(([127, 0, 0, 1], port)));
        let err = PostgresLockStore::connect(&config, StoreOptions::default())
            .await
            .unwrap_err();
        observed(db.major, "refused (connect)", &err);
        assert_eq!(
            contention(db.major, "refused", &err),
            ContentionReason::ConnectionIo
        );
    })
    .await;
}

// ---- Row 3: 23503, 23514 --------------------------------------------------

#[tokio::test]
async fn foreign_key_violation_is_a_programming_error() {
    each_major("fk", |db| async move {
        let store = db.store().await;
        let err = store
            .try_insert("k", OWNER, "no-such-session", MINUTE)
            .await
            .unwrap_err();
        observed(db.major, "23503 (store ACQUIRE)", &err);
        programming(db.major, "23503", &err, "23503");
        // Unchanged: the driver's error with all the server said.
        let db_error = err.driver_error().unwrap().as_db_error().unwrap();
        assert_eq!(db_error.constraint(), Some("lock_session_id_fkey"));
        assert_eq!(db_error.table(), Some("lock"));
        assert_eq!(db.row("k").await, None);
    })
    .await;
}

#[tokio::test]
async fn check_violations_are_programming_errors() {
    each_major("check", |db| async move {
        let store = db.store().await;
        let long = "k".repeat(513);
        for (what, key, ttl, constraint) in [
            ("zero TTL", "k", Duration::ZERO, "lock_expiry_sane"),
            (
                "sub-microsecond TTL",
                "k",
                Duration::from_nanos(100),
                "lock_expiry_sane",
            ),
            ("empty key", "", MINUTE, "lock_key_sane"),
            ("513-character key", long.as_str(), MINUTE, "lock_key_sane"),
        ] {
            let err = store
                .try_insert(key, OWNER, SESSION, ttl)
                .await
                .unwrap_err();
            observed(db.major, &format!("23514 (store ACQUIRE, {what})"), &err);
            programming(db.major, what, &err, "23514");
            let db_error = err.driver_error().unwrap().as_db_error().unwrap();
            assert_eq!(db_error.constraint(), Some(constraint), "{what}");
        }
        // RENEW with a zero TTL is refused by the same CHECK (renewed_at = expires_at).
        let token = grant(&store, "k").await;
        let before = db.row("k").await.unwrap();
        let err = store.extend("k", token, Duration::ZERO).await.unwrap_err();
        programming(db.major, "zero TTL renew", &err, "23514");
        assert_eq!(db.row("k").await.unwrap(), before);
        // Raw, for the table row itself.
        let err = db
            .admin
            .execute(
                "UPDATE lock SET fencing_token = 0 WHERE lock_key = 'k'",
                &[],
            )
            .await
            .unwrap_err();
        let (fault, translated) = raw(db.major, "23514 (raw)", err);
        assert_eq!(fault, Fault::Sql(SqlState::CHECK_VIOLATION));
        programming(db.major, "23514 raw", &translated, "23514");
    })
    .await;
}

// ---- Row 4: anything else -------------------------------------------------

#[tokio::test]
async fn anything_else_is_returned_unchanged() {
    each_major("other", |db| async move {
        let store = db.store().await;
        // A TTL too large for an interval.
        let err = store
            .try_insert("k", OWNER, SESSION, Duration::MAX)
            .await
            .unwrap_err();
        observed(db.major, "huge TTL (store ACQUIRE)", &err);
        let code = err.code().map(|c| c.code().to_string());
        assert_eq!(code.as_deref(), Some("22008"), "PG {}: {err:?}", db.major);
        programming(db.major, "huge TTL", &err, "22008");
        // A database without the schema: building the store fails, 42P01.
        let bare = format!("{}_bare", db.name);
        db.cluster.create_database(&bare).await.unwrap();
        let err = PostgresLockStore::connect(&db.cluster.config(&bare), StoreOptions::default())
            .await
            .unwrap_err();
        observed(db.major, "no schema (store build)", &err);
        programming(db.major, "no schema", &err, "42P01");
        // A client-side error without a SQLSTATE: a row count mismatch.
        let err = db
            .admin
            .query_one("SELECT 1 WHERE false", &[])
            .await
            .unwrap_err();
        let (fault, translated) = raw(db.major, "row count (raw)", err);
        assert_eq!(fault, Fault::DriverMisuse);
        assert!(matches!(translated, StoreError::Programming(_)));
        // A type mismatch on a parameter, also client-side.
        let err = db
            .admin
            .query("SELECT $1::int4", &[&"text"])
            .await
            .unwrap_err();
        let (fault, _) = raw(db.major, "parameter type (raw)", err);
        assert_eq!(fault, Fault::DriverMisuse);
    })
    .await;
}
