//! [`PostgresLockStore`]: the [`LockStore`] SPI on PostgreSQL, one pinned
//! statement (`crate::sql`) per call.

use crate::named::Named;
use crate::spi::{LockHandle, LockInfo, LockStore, StoreError};
use crate::sql;
use crate::translate::{timed_out, translate};
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio_postgres::types::{ToSql, Type};
use tokio_postgres::{Client, Config, NoTls, Row, Statement};

/// How a [`PostgresLockStore`] behaves.
#[derive(Debug, Clone)]
pub struct StoreOptions {
    /// Each call (and connecting, and preparing) gets at most this long; when
    /// it passes the call returns contention with
    /// [`crate::ContentionReason::ClientTimeout`] — the statement may still
    /// run on the server. Consider a server-side `statement_timeout` below it,
    /// so that abandoned statements do not pile up on the one connection.
    pub call_timeout: Duration,
}

impl Default for StoreOptions {
    fn default() -> Self {
        StoreOptions {
            call_timeout: Duration::from_secs(5),
        }
    }
}

/// A pinned statement, bound and prepared.
struct Prepared {
    name: &'static str,
    named: Named,
    statement: Statement,
}

impl Prepared {
    fn args<'a>(
        &self,
        values: &[(&str, &'a (dyn ToSql + Sync))],
    ) -> Result<Vec<&'a (dyn ToSql + Sync)>, StoreError> {
        self.named
            .args(values)
            .map_err(|source| StoreError::InvalidStatement {
                statement: self.name,
                source,
            })
    }
}

/// The lock store on one PostgreSQL connection.
///
/// Every method is one execution of one statement, in autocommit, under the
/// per-call timeout; errors go through [`crate::translate()`]. The connection
/// is used as it is: when it is lost every call returns contention until the
/// owner builds a new store. Needs a tokio runtime with time enabled.
pub struct PostgresLockStore {
    client: Client,
    options: StoreOptions,
    acquire: Prepared,
    renew: Prepared,
    release: Prepared,
    read: Prepared,
    /// How the connection task ended, when this store spawned it.
    connection_end: Option<Arc<Mutex<Option<String>>>>,
}

impl std::fmt::Debug for PostgresLockStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PostgresLockStore")
            .field("options", &self.options)
            .field("closed", &self.client.is_closed())
            .field("connection_end", &self.connection_end())
            .finish()
    }
}

impl PostgresLockStore {
    /// What [`LockStore::backend_id`] returns.
    pub const BACKEND_ID: &'static str = "pg";

    /// A store on an established connection; prepares the statements (so
    /// the schema of `specs/LOCKSTORE.md` must exist: without it this fails
    /// with a programming error, 42P01).
    pub async fn new(
        client: Client,
        options: StoreOptions,
    ) -> Result<PostgresLockStore, StoreError> {
        let acquire = prepare(&client, &options, "ACQUIRE", sql::ACQUIRE).await?;
        let renew = prepare(&client, &options, "RENEW", sql::RENEW).await?;
        let release = prepare(&client, &options, "RELEASE", sql::RELEASE).await?;
        let read = prepare(&client, &options, "READ", sql::READ).await?;
        Ok(PostgresLockStore {
            client,
            options,
            acquire,
            renew,
            release,
            read,
            connection_end: None,
        })
    }

    /// Connects (without TLS) under the call timeout, runs the connection on
    /// a spawned task that records how it ended, and builds the store.
    pub async fn connect(
        config: &Config,
        options: StoreOptions,
    ) -> Result<PostgresLockStore, StoreError> {
        let (client, connection) = within(&options, config.connect(NoTls)).await?;
        let end = Arc::new(Mutex::new(None));
        let record = Arc::clone(&end);
        tokio::spawn(async move {
            let mut connection = Box::pin(connection);
            let outcome = connection.as_mut().await;
            let text = match outcome {
                Ok(()) => "closed by the server".to_string(),
                Err(e) => describe(&e),
            };
            *record.lock().unwrap_or_else(|p| p.into_inner()) = Some(text);
            // The connection is dropped only now, so that a caller who sees
            // "connection closed" also finds why.
            drop(connection);
        });
        let mut store = PostgresLockStore::new(client, options).await?;
        store.connection_end = Some(end);
        Ok(store)
    }

    /// How the connection ended, if it has and this store spawned it.
    pub fn connection_end(&self) -> Option<String> {
        let end = self.connection_end.as_ref()?;
        end.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Whether the connection is known to be closed (this lags a cut: it
    /// turns true once the driver has noticed).
    pub fn is_closed(&self) -> bool {
        self.client.is_closed()
    }

    pub fn options(&self) -> &StoreOptions {
        &self.options
    }

    /// Runs one driver call under the timeout and translates its error,
    /// adding how the connection ended when that is known.
    async fn call<T>(
        &self,
        fut: impl Future<Output = Result<T, tokio_postgres::Error>>,
    ) -> Result<T, StoreError> {
        within(&self.options, fut).await.map_err(|e| match e {
            StoreError::Contention(mut c) => {
                c.connection_end = self.connection_end();
                StoreError::Contention(c)
            }
            other => other,
        })
    }
}

async fn within<T>(
    options: &StoreOptions,
    fut: impl Future<Output = Result<T, tokio_postgres::Error>>,
) -> Result<T, StoreError> {
    match tokio::time::timeout(options.call_timeout, fut).await {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(e)) => Err(translate(e)),
        Err(_) => Err(timed_out(options.call_timeout)),
    }
}

async fn prepare(
    client: &Client,
    options: &StoreOptions,
    name: &'static str,
    text: &'static str,
) -> Result<Prepared, StoreError> {
    let invalid = |source| StoreError::InvalidStatement {
        statement: name,
        source,
    };
    let named = Named::parse(text).map_err(invalid)?;
    let types = named
        .names()
        .iter()
        .map(|p| {
            sql::param_type(p)
                .ok_or_else(|| invalid(crate::named::BindError::UnknownType(p.clone())))
        })
        .collect::<Result<Vec<Type>, StoreError>>()?;
    let statement = within(options, client.prepare_typed(named.sql(), &types)).await?;
    Ok(Prepared {
        name,
        named,
        statement,
    })
}

/// A driver error with its cause, for [`PostgresLockStore::connection_end`].
fn describe(e: &tokio_postgres::Error) -> String {
    match e.as_db_error() {
        Some(db) => format!(
            "{e}: {}: {} (SQLSTATE {})",
            db.severity(),
            db.message(),
            db.code().code()
        ),
        None => match std::error::Error::source(e) {
            Some(cause) => format!("{e}: {cause}"),
            None => e.to_string(),
        },
    }
}

fn handle(row: &Row) -> Result<LockHandle, StoreError> {
    let get = || -> Result<LockHandle, tokio_postgres::Error> {
        Ok(LockHandle {
            key: row.try_get("lock_key")?,
            owner_id: row.try_get("owner_id")?,
            session_id: row.try_get("session_id")?,
            fencing_token: row.try_get("fencing_token")?,
            expires_at: row.try_get("expires_at")?,
        })
    };
    get().map_err(translate)
}

fn info(row: &Row) -> Result<LockInfo, StoreError> {
    let get = || -> Result<LockInfo, tokio_postgres::Error> {
        Ok(LockInfo {
            key: row.try_get("lock_key")?,
            owner_id: row.try_get("owner_id")?,
            session_id: row.try_get("session_id")?,
            fencing_token: row.try_get("fencing_token")?,
            acquired_at: row.try_get("acquired_at")?,
            renewed_at: row.try_get("renewed_at")?,
            expires_at: row.try_get("expires_at")?,
            read_at: row.try_get("read_at")?,
        })
    };
    get().map_err(translate)
}

impl LockStore for PostgresLockStore {
    fn backend_id(&self) -> &'static str {
        Self::BACKEND_ID
    }

    async fn try_insert(
        &self,
        key: &str,
        owner_id: &str,
        session_id: &str,
        ttl: Duration,
    ) -> Result<Option<LockHandle>, StoreError> {
        let ttl_seconds = ttl.as_secs_f64();
        let args = self.acquire.args(&[
            ("key", &key),
            ("owner_id", &owner_id),
            ("session_id", &session_id),
            ("ttl_seconds", &ttl_seconds),
        ])?;
        let row = self
            .call(self.client.query_opt(&self.acquire.statement, &args))
            .await?;
        row.as_ref().map(handle).transpose()
    }

    async fn extend(
        &self,
        key: &str,
        fencing_token: i64,
        ttl: Duration,
    ) -> Result<Option<LockHandle>, StoreError> {
        let ttl_seconds = ttl.as_secs_f64();
        let args = self.renew.args(&[
            ("key", &key),
            ("token", &fencing_token),
            ("ttl_seconds", &ttl_seconds),
        ])?;
        // Zero rows is the answer "lost now"; it is returned as `None`, not
        // as an error, and a fault never becomes `None`.
        let row = self
            .call(self.client.query_opt(&self.renew.statement, &args))
            .await?;
        row.as_ref().map(handle).transpose()
    }

    async fn delete_if_owner(&self, key: &str, fencing_token: i64) -> Result<bool, StoreError> {
        let args = self
            .release
            .args(&[("key", &key), ("token", &fencing_token)])?;
        let deleted = self
            .call(self.client.execute(&self.release.statement, &args))
            .await?;
        Ok(deleted > 0)
    }

    async fn read(&self, key: &str) -> Result<Option<LockInfo>, StoreError> {
        let args = self.read.args(&[("key", &key)])?;
        let row = self
            .call(self.client.query_opt(&self.read.statement, &args))
            .await?;
        row.as_ref().map(info).transpose()
    }

    async fn revoke(&self, _key: &str, _reason: &str) -> Result<bool, StoreError> {
        Err(StoreError::Unsupported {
            operation: "revoke",
            planned: "the revocation task (the lock_revocation insert), after T-012",
        })
    }

    async fn reap_expired(&self, _limit: u32) -> Result<u64, StoreError> {
        Err(StoreError::Unsupported {
            operation: "reap_expired",
            planned: "the reaper task, after T-012",
        })
    }
}
