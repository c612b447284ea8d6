//! Liveness: a call of the target answers within its bound. A call that does not, while the
//! server is executing it (on the CPU or in a timed sleep, not waiting for another
//! transaction's lock, a client or I/O), is a finding: the target hangs. One that does not
//! while the server cannot say what it is doing proves nothing about the target.
//!
//! Every finding of this kind says [`HANGS`], so that a suite that meets one stops its
//! remaining checks on that build (they would each wait out their own bounds).

use std::time::Duration;
use tokio_postgres::{Client, NoTls};

/// What every hang finding says.
pub const HANGS: &str = "the target hangs (liveness)";

/// The bound of a call that waits for nothing (no lock, no blocking acquire's wait): far
/// above any such call's latency here (under 10 ms; a loaded machine's fsync stalls reach
/// a second), far below a suite's own bounds.
pub const CALL_BOUND: Duration = Duration::from_secs(5);

/// A backend's state as `pg_stat_activity` shows it, and whether the server is executing
/// its statement itself.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Backend {
    /// `backend <pid> <state> for <s> s, wait event <event>, running: <query>`.
    pub shown: String,
    /// Active, and on the CPU or in a timed sleep.
    pub executing: bool,
    /// When its statement started (server time, as text): the same statement across two
    /// looks.
    pub statement_start: String,
}

/// How long [`still_executing`] waits between its two looks: a statement that was only
/// slowed (a server paused and resumed, a loaded machine) ends within it, one that does
/// not return does not.
pub const SECOND_LOOK: Duration = Duration::from_secs(1);

/// What backend `pid` is doing, asked on `admin` within `limit`; `None` when the server
/// does not say (it is not reachable, or the backend is gone).
pub async fn backend(admin: &Client, pid: i32, limit: Duration) -> Option<Backend> {
    let params: [&(dyn tokio_postgres::types::ToSql + Sync); 1] = [&pid];
    let ask = admin.query_opt(
        "SELECT pg_catalog.format('backend %s %s for %s s, wait event %s, running: %s', \
                pid, state, \
                round(extract(epoch FROM pg_catalog.clock_timestamp() - query_start)::numeric, 1), \
                coalesce(wait_event_type || ':' || wait_event, 'none (on the CPU)'), \
                pg_catalog.left(query, 300)), \
                state = 'active' AND (wait_event_type IS NULL OR wait_event_type = 'Timeout'), \
                coalesce(query_start::text, '') \
           FROM pg_catalog.pg_stat_activity WHERE pid = $1",
        &params,
    );
    let row = tokio::time::timeout(limit, ask).await.ok()?.ok()??;
    Some(Backend {
        shown: row.try_get(0).ok()?,
        executing: row.try_get(1).ok()?,
        statement_start: row.try_get(2).ok()?,
    })
}

/// Backend `pid` when the server is executing its statement at two looks [`SECOND_LOOK`]
/// apart, the same statement both times (the second look's state); `None` otherwise, or
/// when the server does not say.
pub async fn still_executing(admin: &Client, pid: i32, limit: Duration) -> Option<Backend> {
    let first = backend(admin, pid, limit).await.filter(|b| b.executing)?;
    tokio::time::sleep(SECOND_LOOK).await;
    backend(admin, pid, limit)
        .await
        .filter(|b| b.executing && b.statement_start == first.statement_start)
}

/// Why `what`, made on backend `pid`, gave no answer within `bound`: the finding when the
/// server is executing it (`Ok`), else why there is no verdict (`Err`: the server could not
/// say, or the backend waits for something outside the target). The statement is
/// cancelled either way (`cancel` is its connection's token).
pub async fn no_answer(
    admin: &Client,
    cancel: &tokio_postgres::CancelToken,
    pid: i32,
    what: &str,
    bound: Duration,
) -> Result<String, String> {
    let executing = still_executing(admin, pid, CALL_BOUND).await;
    let seen = match executing {
        Some(b) => Some(b),
        None => backend(admin, pid, CALL_BOUND).await,
    };
    let _ = tokio::time::timeout(CALL_BOUND, cancel.cancel_query(NoTls)).await;
    match seen {
        Some(b) if b.executing => Ok(format!(
            "{what} did not answer within {bound:?} while the server was executing it ({}): {HANGS}",
            b.shown
        )),
        Some(b) => Err(format!(
            "{what} did not answer within {bound:?}; the server was not executing it ({})",
            b.shown
        )),
        None => Err(format!(
            "{what} did not answer within {bound:?} and the server did not say what its backend \
             {pid} was doing"
        )),
    }
}
