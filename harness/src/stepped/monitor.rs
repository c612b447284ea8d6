//! The monitor: a connection of its own that asks the server what the plan's sessions are
//! doing, as isolationtester asks `pg_isolation_test_session_is_blocked`: a session waits
//! when another session of the plan blocks it (`pg_blocking_pids`), or when it sleeps in
//! `pg_sleep` (a blocking acquire between probes), or when its COMMIT waits for a
//! synchronous standby (`SyncRep`: a plan's setup named one that never comes). A session
//! blocked only by a backend outside the plan is not waiting: nothing in the plan can free
//! it.

use crate::workload::Signal;
use std::collections::BTreeMap;
use tokio_postgres::Client;

/// The wait event of a backend sleeping in `pg_sleep`.
pub const PG_SLEEP: &str = "PgSleep";

/// The wait event of a COMMIT waiting for a synchronous standby's confirmation.
pub const SYNC_REP: &str = "SyncRep";

/// One backend as the monitor saw it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Backend {
    /// `pg_stat_activity.state`: `active`, `idle`, `idle in transaction`, ...
    pub state: String,
    pub wait_event: Option<String>,
    /// `pg_blocking_pids`: every backend this one waits for.
    pub blocked_by: Vec<i32>,
}

impl Backend {
    /// Sleeping in `pg_sleep`.
    pub fn sleeping(&self) -> bool {
        self.wait_event.as_deref() == Some(PG_SLEEP)
    }

    /// Its COMMIT, committed locally, waits for a synchronous standby.
    pub fn awaiting_standby(&self) -> bool {
        self.wait_event.as_deref() == Some(SYNC_REP)
    }

    /// Running no statement: only a later step of its own can change what it holds.
    pub fn idle(&self) -> bool {
        self.state.starts_with("idle")
    }
}

/// The plan's backends at one instant, by pid (a pid that has gone is absent).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Snapshot {
    pub backends: BTreeMap<i32, Backend>,
}

/// Why the monitor could not answer.
#[derive(Debug, thiserror::Error)]
#[error("the stepped runner's monitor connection failed ({what}): {source}")]
pub struct MonitorError {
    pub what: &'static str,
    #[source]
    pub source: tokio_postgres::Error,
}

const SNAPSHOT_SQL: &str = "SELECT pid, coalesce(state, ''), wait_event, pg_blocking_pids(pid) \
     FROM pg_stat_activity WHERE pid = ANY($1::int4[])";

/// Reads the state of the backends `pids`.
pub async fn snapshot(monitor: &Client, pids: &[i32]) -> Result<Snapshot, MonitorError> {
    let failed = |source| MonitorError {
        what: "reading pg_stat_activity",
        source,
    };
    let rows = monitor
        .query(SNAPSHOT_SQL, &[&pids])
        .await
        .map_err(failed)?;
    let mut backends = BTreeMap::new();
    for row in rows {
        let pid: i32 = row.try_get(0).map_err(failed)?;
        let backend = Backend {
            state: row.try_get(1).map_err(failed)?,
            wait_event: row.try_get(2).map_err(failed)?,
            blocked_by: row.try_get(3).map_err(failed)?,
        };
        backends.insert(pid, backend);
    }
    Ok(Snapshot { backends })
}

/// Sends `signal` to backend `pid` (`pg_cancel_backend`, `pg_terminate_backend`): whether
/// the server found the backend to signal (and, for a terminate, saw it end within 5 s, so
/// that the next step meets it gone: PostgreSQL 14 and later wait so when given a timeout).
pub async fn signal(monitor: &Client, pid: i32, signal: Signal) -> Result<bool, MonitorError> {
    let sql = match signal {
        Signal::Cancel => "SELECT pg_cancel_backend($1)",
        Signal::Terminate => "SELECT pg_terminate_backend($1, 5000)",
    };
    let failed = |source| MonitorError {
        what: "signalling a backend",
        source,
    };
    let row = monitor.query_one(sql, &[&pid]).await.map_err(failed)?;
    row.try_get(0).map_err(failed)
}

/// Asks the server to cancel what `pid` runs (`pg_cancel_backend`).
pub async fn cancel(monitor: &Client, pid: i32) -> Result<(), MonitorError> {
    monitor
        .query_one("SELECT pg_cancel_backend($1)", &[&pid])
        .await
        .map(|_| ())
        .map_err(|source| MonitorError {
            what: "cancelling a step",
            source,
        })
}
