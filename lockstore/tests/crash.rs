//! Server crashes, on a cluster of its own per major (a crash would disturb
//! the shared clusters of the other tests): a backend killed with SIGKILL
//! (the postmaster then ends every other session and recovers) and a crash
//! of the whole server. Both are contention for the store, never a lost
//! lock, and the committed grant survives recovery.

mod common;

use common::{contention, wait_closed};
use harness::pg::{test_majors, Cluster, PgInstall};
use lockstore::{install_schema, ContentionReason, LockStore, PostgresLockStore, StoreOptions};
use std::time::{Duration, Instant};
use tokio_postgres::error::SqlState;
use tokio_postgres::Config;

const MINUTE: Duration = Duration::from_secs(60);
const DB: &str = "crash";

fn config(cluster: &Cluster, app: &str) -> Config {
    let mut config = cluster.config(DB);
    config.application_name(app);
    config
}

/// Connects once the server accepts connections again (after recovery).
async fn reconnect(cluster: &Cluster) -> tokio_postgres::Client {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        match cluster.connect(DB).await {
            Ok(client) => return client,
            Err(e) => {
                assert!(Instant::now() < deadline, "no recovery: {e}");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
}

#[tokio::test]
async fn server_crashes_are_contention_and_the_grant_survives() {
    for major in test_majors() {
        let install = PgInstall::ensure(major).unwrap();
        let mut cluster = Cluster::start(&install).unwrap();
        cluster.create_database(DB).await.unwrap();
        let admin = cluster.connect(DB).await.unwrap();
        install_schema(&admin).await.unwrap();
        admin
            .batch_execute(
                "INSERT INTO lock_session (session_id, owner_id, expires_at) \
                 VALUES ('s', 'o', now() + interval '1 hour')",
            )
            .await
            .unwrap();
        let options = StoreOptions::default();
        let idle = PostgresLockStore::connect(&config(&cluster, "idle"), options.clone())
            .await
            .unwrap();
        let busy = PostgresLockStore::connect(&config(&cluster, "busy"), options.clone())
            .await
            .unwrap();
        let token = idle
            .try_insert("k", "o", "s", 10 * MINUTE)
            .await
            .unwrap()
            .unwrap()
            .fencing_token;

        // 1. One backend dies by SIGKILL while `busy` waits for its row lock.
        let blocker = cluster.connect(DB).await.unwrap();
        blocker
            .batch_execute("BEGIN; UPDATE lock SET renewed_at = renewed_at WHERE lock_key = 'k'")
            .await
            .unwrap();
        let pid: i32 = blocker
            .query_one("SELECT pg_backend_pid()", &[])
            .await
            .unwrap()
            .get(0);
        let (renewed, ()) = tokio::join!(busy.extend("k", token, MINUTE), async {
            let deadline = Instant::now() + Duration::from_secs(10);
            loop {
                let waiting: bool = admin
                    .query_one(
                        "SELECT EXISTS (SELECT 1 FROM pg_stat_activity \
                         WHERE application_name = 'busy' AND wait_event_type = 'Lock')",
                        &[],
                    )
                    .await
                    .unwrap()
                    .get(0);
                if waiting {
                    break;
                }
                assert!(Instant::now() < deadline, "busy never blocked");
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            // SAFETY: signalling a backend process of our own cluster.
            assert_eq!(unsafe { libc::kill(pid, libc::SIGKILL) }, 0);
        });
        let err = renewed.unwrap_err();
        let busy_reason = contention(major, "backend crash, mid-statement (RENEW)", &err);
        assert!(
            busy_reason == ContentionReason::SessionTerminated(SqlState::CRASH_SHUTDOWN)
                || busy_reason == ContentionReason::ConnectionClosed,
            "PG {major}: {busy_reason:?}"
        );
        wait_closed(&idle).await;
        let err = idle.extend("k", token, MINUTE).await.unwrap_err();
        assert_eq!(
            contention(major, "backend crash, idle (RENEW)", &err),
            ContentionReason::ConnectionClosed
        );
        eprintln!(
            "PG {major}: backend crash, idle: connection task ended with: {:?}",
            idle.connection_end()
        );
        // Recovery keeps the committed grant, token and all.
        let admin = reconnect(&cluster).await;
        let row = admin
            .query_one("SELECT fencing_token FROM lock WHERE lock_key = 'k'", &[])
            .await
            .unwrap();
        assert_eq!(row.get::<_, i64>(0), token);
        drop(admin);

        // 2. The whole server crashes (SIGKILL of the postmaster and all).
        let store = PostgresLockStore::connect(&config(&cluster, "after"), options.clone())
            .await
            .unwrap();
        assert!(store
            .extend("k", token, 10 * MINUTE)
            .await
            .unwrap()
            .is_some());
        cluster.crash().unwrap();
        let err = store.extend("k", token, MINUTE).await.unwrap_err();
        assert_eq!(
            contention(major, "server crash (RENEW)", &err),
            ContentionReason::ConnectionClosed
        );
        eprintln!(
            "PG {major}: server crash: connection task ended with: {:?}",
            store.connection_end()
        );
        // While it is down, building a store is contention too.
        let err = PostgresLockStore::connect(&config(&cluster, "down"), options.clone())
            .await
            .unwrap_err();
        assert_eq!(
            contention(major, "server down (connect)", &err),
            ContentionReason::ConnectionIo
        );
        cluster.resume().unwrap();
        let store = PostgresLockStore::connect(&config(&cluster, "resumed"), options.clone())
            .await
            .unwrap();
        let info = store.read("k").await.unwrap().unwrap();
        assert_eq!(info.fencing_token, token);
        // Still live (10 minutes), still ours: the renew works under the same token.
        let renewed = store.extend("k", token, MINUTE).await.unwrap().unwrap();
        assert_eq!(renewed.fencing_token, token);
        drop(store);
        drop(cluster);
    }
}
