//! Shared by the integration tests: one fresh database with the lock store
//! schema per test and major, on the harness's shared clusters.

#![allow(dead_code)]

use harness::pg::{shared, test_majors, Cluster};
use lockstore::{install_schema, PostgresLockStore, StoreError, StoreOptions};
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};
use tokio_postgres::{Client, Config};

pub const SESSION: &str = "session-a";
pub const OWNER: &str = "owner-a";
pub const OTHER_SESSION: &str = "session-b";
pub const OTHER_OWNER: &str = "owner-b";
pub const MINUTE: Duration = Duration::from_secs(60);

static NEXT: AtomicU64 = AtomicU64::new(0);

/// One test's database on one major.
pub struct Db {
    pub major: u32,
    pub cluster: &'static Cluster,
    pub name: String,
    /// A direct connection (not the store's), for setup and inspection.
    pub admin: Client,
}

impl Db {
    /// A connection config for this database, as the superuser.
    pub fn config(&self) -> Config {
        self.cluster.config(&self.name)
    }

    /// A config for this database at another address (a proxy, a dead port).
    pub fn config_at(&self, addr: std::net::SocketAddr) -> Config {
        let mut config = Config::new();
        config
            .host(addr.ip().to_string())
            .port(addr.port())
            .user(self.cluster.superuser())
            .dbname(&self.name)
            .application_name("lockstore-test")
            .connect_timeout(Duration::from_secs(10));
        config
    }

    /// The cluster's own address.
    pub fn addr(&self) -> std::net::SocketAddr {
        std::net::SocketAddr::from(([127, 0, 0, 1], self.cluster.port()))
    }

    /// A config whose connections carry a unique application_name (returned),
    /// so that a test can find their backends in pg_stat_activity.
    pub fn tagged_config(&self, tag: &str) -> (Config, String) {
        let app = format!("{}_{tag}", self.name);
        let mut config = self.config();
        config.application_name(&app);
        (config, app)
    }

    pub async fn client(&self) -> Client {
        self.cluster.connect(&self.name).await.expect("connect")
    }

    /// A store on its own connection with the default options.
    pub async fn store(&self) -> PostgresLockStore {
        self.store_with(&self.config(), StoreOptions::default())
            .await
    }

    pub async fn store_with(&self, config: &Config, options: StoreOptions) -> PostgresLockStore {
        PostgresLockStore::connect(config, options)
            .await
            .unwrap_or_else(|e| panic!("PG {}: building the store: {e:?}", self.major))
    }

    /// Creates a session row that stays live for an hour.
    pub async fn session(&self, session_id: &str, owner_id: &str) {
        self.admin
            .execute(
                "INSERT INTO lock_session (session_id, owner_id, expires_at) \
                 VALUES ($1, $2, now() + interval '1 hour')",
                &[&session_id, &owner_id],
            )
            .await
            .expect("insert session");
    }

    /// The raw row of `key`: (token, expires_at, owner, session, renewed_at).
    pub async fn row(&self, key: &str) -> Option<RawRow> {
        self.admin
            .query_opt(
                "SELECT fencing_token, expires_at, owner_id, session_id, renewed_at, acquired_at \
                 FROM lock WHERE lock_key = $1",
                &[&key],
            )
            .await
            .expect("select row")
            .map(|r| RawRow {
                fencing_token: r.get(0),
                expires_at: r.get(1),
                owner_id: r.get(2),
                session_id: r.get(3),
                renewed_at: r.get(4),
                acquired_at: r.get(5),
            })
    }

    /// Moves the grant of `key` into the past: lapsed `ago` ago, no other change of meaning.
    pub async fn lapse(&self, key: &str, ago: Duration) {
        let n = self
            .admin
            .execute(
                "UPDATE lock SET acquired_at = now() - make_interval(secs => $2) - interval '1 minute', \
                                 renewed_at  = now() - make_interval(secs => $2) - interval '1 minute', \
                                 expires_at  = now() - make_interval(secs => $2) \
                 WHERE lock_key = $1",
                &[&key, &ago.as_secs_f64()],
            )
            .await
            .expect("lapse");
        assert_eq!(n, 1, "lapse: no row for {key}");
    }

    /// Waits until a backend with `application_name = app` waits for a lock.
    pub async fn wait_blocked(&self, app: &str) {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let waiting: bool = self
                .admin
                .query_one(
                    "SELECT EXISTS (SELECT 1 FROM pg_stat_activity \
                     WHERE application_name = $1 AND wait_event_type = 'Lock')",
                    &[&app],
                )
                .await
                .expect("pg_stat_activity")
                .get(0);
            if waiting {
                return;
            }
            assert!(Instant::now() < deadline, "{app} never blocked on a lock");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// Terminates the one backend of `app` and waits (up to 5 s) for it to exit.
    pub async fn terminate(&self, app: &str) {
        // Two steps: in one statement the planner may call
        // pg_terminate_backend before filtering on the name.
        let pids: Vec<i32> = self
            .admin
            .query(
                "SELECT pid FROM pg_stat_activity WHERE application_name = $1",
                &[&app],
            )
            .await
            .expect("pg_stat_activity")
            .iter()
            .map(|r| r.get(0))
            .collect();
        assert_eq!(pids.len(), 1, "expected one backend named {app}");
        let done: bool = self
            .admin
            .query_one("SELECT pg_terminate_backend($1, 5000)", &[&pids[0]])
            .await
            .expect("pg_terminate_backend")
            .get(0);
        assert!(done, "backend {} of {app} did not exit", pids[0]);
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawRow {
    pub fencing_token: i64,
    pub expires_at: chrono::DateTime<chrono::Utc>,
    pub owner_id: String,
    pub session_id: String,
    pub renewed_at: chrono::DateTime<chrono::Utc>,
    pub acquired_at: chrono::DateTime<chrono::Utc>,
}

/// A new database on `major` with the schema and two live sessions
/// ([`SESSION`] of [`OWNER`], [`OTHER_SESSION`] of [`OTHER_OWNER`]).
pub async fn fresh(major: u32, prefix: &str) -> Db {
    let cluster = shared(major).unwrap_or_else(|e| panic!("PG {major}: {e}"));
    let name = format!("ls_{prefix}_{}", NEXT.fetch_add(1, Ordering::Relaxed));
    cluster
        .create_database(&name)
        .await
        .unwrap_or_else(|e| panic!("PG {major}: creating {name}: {e}"));
    let admin = cluster.connect(&name).await.expect("connect");
    install_schema(&admin).await.expect("install the schema");
    let db = Db {
        major,
        cluster,
        name,
        admin,
    };
    db.session(SESSION, OWNER).await;
    db.session(OTHER_SESSION, OTHER_OWNER).await;
    db
}

/// Runs `body` once per major of `test_majors()`, each on a fresh database.
pub async fn each_major<F, Fut>(prefix: &str, body: F)
where
    F: Fn(Db) -> Fut,
    Fut: Future<Output = ()>,
{
    for major in test_majors() {
        body(fresh(major, prefix).await).await;
    }
}

/// The contention behind `err`, panicking (with context) on anything else.
/// A lost lock in particular is never an acceptable answer to a fault.
pub fn contention(major: u32, what: &str, err: &StoreError) -> lockstore::ContentionReason {
    assert!(
        !matches!(err, StoreError::LockLost { .. }),
        "PG {major}: {what}: a fault became a lost lock"
    );
    match err {
        StoreError::Contention(c) => {
            assert!(err.is_retryable());
            c.reason.clone()
        }
        other => panic!("PG {major}: {what}: expected contention, got {other:?}"),
    }
}

/// Asserts `err` is the driver's error, unchanged, with SQLSTATE `code`.
pub fn programming(major: u32, what: &str, err: &StoreError, code: &str) {
    assert!(
        !matches!(err, StoreError::LockLost { .. }),
        "PG {major}: {what}: an error became a lost lock"
    );
    match err {
        StoreError::Programming(e) => {
            assert!(!err.is_retryable());
            assert_eq!(
                e.code().map(|c| c.code()),
                Some(code),
                "PG {major}: {what}: {e:?}"
            );
        }
        other => panic!("PG {major}: {what}: expected a programming error {code}, got {other:?}"),
    }
}

/// `try_insert` that must grant.
pub async fn grant_as(
    store: &PostgresLockStore,
    key: &str,
    owner: &str,
    session: &str,
    ttl: Duration,
) -> lockstore::LockHandle {
    use lockstore::LockStore;
    store
        .try_insert(key, owner, session, ttl)
        .await
        .unwrap()
        .expect("granted")
}

/// A one-minute grant of `key` to `OWNER`; its fencing token.
pub async fn grant(store: &PostgresLockStore, key: &str) -> i64 {
    grant_as(store, key, OWNER, SESSION, MINUTE)
        .await
        .fencing_token
}

/// Waits until the store has noticed that its connection is gone.
pub async fn wait_closed(store: &PostgresLockStore) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !store.is_closed() {
        assert!(Instant::now() < deadline, "the connection never closed");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}
