//! The store SPI (C2 #ct2-spi, #ct2-records, #ct2-exceptions; here
//! `specs/LOCKSTORE.md` §3-§5): the [`LockStore`] trait, its records and its
//! errors.
//!
//! The discipline: only a zero-row result means "lost". `extend` returning
//! `Ok(None)` says *you do not hold this lock, now*; the layer above turns it
//! into [`StoreError::LockLost`]. A fault is never folded into that answer:
//! it is [`StoreError::Contention`] (outcome unknown, the lock may still be
//! ours, the caller may try again within its lease) or
//! [`StoreError::Programming`] (a bug, the driver's error unchanged).

use crate::named::BindError;
use chrono::{DateTime, Utc};
use std::fmt;
use std::future::Future;
use std::time::Duration;
use tokio_postgres::error::SqlState;

/// A grant as ACQUIRE and RENEW return it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LockHandle {
    pub key: String,
    pub owner_id: String,
    pub session_id: String,
    /// Identifies this grant for all time (one global sequence).
    pub fencing_token: i64,
    /// The server's expiry for the grant, as of the statement that returned it.
    pub expires_at: DateTime<Utc>,
}

/// A key's row as READ returns it: live or lapsed-but-unreaped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LockInfo {
    pub key: String,
    pub owner_id: String,
    pub session_id: String,
    pub fencing_token: i64,
    pub acquired_at: DateTime<Utc>,
    pub renewed_at: DateTime<Utc>,
    pub expires_at: DateTime<Utc>,
    /// The server's `now()` for the read.
    pub read_at: DateTime<Utc>,
}

impl LockInfo {
    /// Whether the grant had lapsed at the instant of the read (server time).
    /// A lapsed row is still data: its holder may still release it, anyone
    /// may take it over.
    pub fn is_lapsed(&self) -> bool {
        self.expires_at <= self.read_at
    }
}

/// The lock server's storage SPI. One call is one execution of one pinned
/// statement: implementations do not retry, wait or reconnect on their own.
///
/// No method takes an owner or a session to prove ownership: the fencing
/// token, drawn from one global sequence, identifies one grant for all time.
pub trait LockStore: Send + Sync {
    /// Which backend this is (`"pg"` for [`crate::PostgresLockStore`]).
    fn backend_id(&self) -> &'static str;

    /// ACQUIRE: grants `key` to `owner_id`/`session_id` for `ttl` if it has
    /// no row or its row has lapsed (takeover); either way a new token is
    /// minted. `Ok(None)`: the key has a live grant (possibly the caller's
    /// own); nothing changed.
    fn try_insert(
        &self,
        key: &str,
        owner_id: &str,
        session_id: &str,
        ttl: Duration,
    ) -> impl Future<Output = Result<Option<LockHandle>, StoreError>> + Send;

    /// RENEW: extends the live grant (`key`, `fencing_token`) to `ttl` from
    /// now. `Ok(Some)` carries the same token and the new `expires_at`.
    /// `Ok(None)` means **lost now** — wrong token, lapsed (even by a
    /// millisecond), taken over, released or reaped — and the caller must
    /// stop; the layer above turns it into [`StoreError::LockLost`].
    fn extend(
        &self,
        key: &str,
        fencing_token: i64,
        ttl: Duration,
    ) -> impl Future<Output = Result<Option<LockHandle>, StoreError>> + Send;

    /// RELEASE: deletes the grant (`key`, `fencing_token`), lapsed or not.
    /// `Ok(false)`: nothing of ours was there (already released, reaped or
    /// taken over; another holder's row is untouched) — a success path for
    /// the caller, never a reason to try again with a wider predicate.
    fn delete_if_owner(
        &self,
        key: &str,
        fencing_token: i64,
    ) -> impl Future<Output = Result<bool, StoreError>> + Send;

    /// READ: the key's row at one instant, lapsed-but-unreaped rows included.
    ///
    /// **Non-authoritative.** The answer may be stale by the time it is
    /// looked at (and other backends may serve it from a follower). It is for
    /// display, diagnostics and tests; it must never be used to decide
    /// whether to proceed — only [`LockStore::extend`] answers "do I still
    /// hold it?".
    fn read(&self, key: &str) -> impl Future<Output = Result<Option<LockInfo>, StoreError>> + Send;

    /// Revokes a key's grant administratively (a later task: the
    /// `lock_revocation` insert).
    fn revoke(
        &self,
        key: &str,
        reason: &str,
    ) -> impl Future<Output = Result<bool, StoreError>> + Send;

    /// Deletes up to `limit` lapsed rows (a later task: the reaper).
    fn reap_expired(&self, limit: u32) -> impl Future<Output = Result<u64, StoreError>> + Send;
}

/// Everything a store call can fail with.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// **Terminal**: the lease is gone; the holder must stop its critical
    /// section. Defined for the layers above the store, which produce it from
    /// `extend` returning `Ok(None)`. The store and its error translation
    /// never produce it: a fault is not evidence of loss.
    #[error("lock {key:?} is lost: fencing token {fencing_token} no longer holds it")]
    LockLost { key: String, fencing_token: i64 },

    /// **Retryable**: the outcome is unknown and the lock may still be ours
    /// (the statement may even have taken effect). See [`Contention`].
    #[error(transparent)]
    Contention(#[from] Contention),

    /// A bug, bad input or a refusal that would repeat (a constraint
    /// violation, an unknown table, a type mismatch, ...): the driver's
    /// error, returned unchanged. Never retried.
    #[error(transparent)]
    Programming(tokio_postgres::Error),

    /// Not implemented by this store yet.
    #[error(
        "{operation} is not implemented by the Postgres lock store yet: it arrives with {planned}"
    )]
    Unsupported {
        operation: &'static str,
        planned: &'static str,
    },

    /// A pinned statement cannot be bound (a bug in `sql.rs`).
    #[error("pinned statement {statement} cannot be bound: {source}")]
    InvalidStatement {
        statement: &'static str,
        #[source]
        source: BindError,
    },
}

impl StoreError {
    /// True for [`StoreError::Contention`] only.
    pub fn is_retryable(&self) -> bool {
        matches!(self, StoreError::Contention(_))
    }

    /// The SQLSTATE behind the error, if the server sent one.
    pub fn code(&self) -> Option<&SqlState> {
        self.driver_error().and_then(tokio_postgres::Error::code)
    }

    /// The driver's error behind the error, if any.
    pub fn driver_error(&self) -> Option<&tokio_postgres::Error> {
        match self {
            StoreError::Contention(c) => c.source.as_ref(),
            StoreError::Programming(e) => Some(e),
            _ => None,
        }
    }

    /// The contention details, for a retryable error.
    pub fn contention(&self) -> Option<&Contention> {
        match self {
            StoreError::Contention(c) => Some(c),
            _ => None,
        }
    }
}

/// A fault whose outcome is unknown: the statement may or may not have taken
/// effect, and the lock may still be ours. The caller may repeat the same
/// call, but only within its lease (`specs/LOCKSTORE.md` §3).
#[derive(Debug)]
pub struct Contention {
    pub reason: ContentionReason,
    /// The driver's error, when there was one (none for a client timeout).
    pub source: Option<tokio_postgres::Error>,
    /// How the store's connection ended, if it has (e.g. the FATAL 57P01 a
    /// terminated backend sent while the connection was idle).
    pub connection_end: Option<String>,
}

impl Contention {
    pub fn new(reason: ContentionReason, source: Option<tokio_postgres::Error>) -> Contention {
        Contention {
            reason,
            source,
            connection_end: None,
        }
    }
}

impl fmt::Display for Contention {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "contention ({}): outcome unknown, the lock may still be held",
            self.reason
        )?;
        if let Some(db) = self.source.as_ref().and_then(|e| e.as_db_error()) {
            write!(f, "; server said: {}", db.message())?;
        }
        if let Some(end) = &self.connection_end {
            write!(f, "; connection ended: {end}")?;
        }
        Ok(())
    }
}

impl std::error::Error for Contention {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source
            .as_ref()
            .map(|e| e as &(dyn std::error::Error + 'static))
    }
}

/// Why a call may be tried again (`specs/LOCKSTORE.md` §6): the fate the
/// one error-fate table ([`model::fate`]) gave it, named. An unknown outcome
/// is named by the fate's cause; a transient failure, whose fate carries no
/// cause, by its SQLSTATE.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ContentionReason {
    /// 40001 serialization_failure.
    Serialization,
    /// 40P01 deadlock_detected.
    Deadlock,
    /// 57014 query_canceled (statement_timeout, a cancel request).
    QueryCanceled,
    /// 55P03 lock_not_available (lock_timeout).
    LockTimeout,
    /// Class 53, insufficient resources (53300 too_many_connections, disk
    /// full, out of memory, ...): the server refused for now.
    ServerUnavailable(SqlState),
    /// 40003 statement_completion_unknown.
    CompletionUnknown,
    /// Class 08, connection exception.
    ConnectionFailure(SqlState),
    /// The server ended the session (57P01 admin_shutdown, 57P02
    /// crash_shutdown, 57P05 idle_session_timeout, 25P03
    /// idle_in_transaction_session_timeout) or would not start one (57P03
    /// cannot_connect_now).
    SessionTerminated(SqlState),
    /// The connection closed without a SQLSTATE (a crash, a cut, a
    /// connection that had already ended).
    ConnectionClosed,
    /// A socket error (connecting or communicating) or an unparsable message
    /// from the server, without a SQLSTATE.
    ConnectionIo,
    /// A client-side timeout: the store's per-call timeout (`after` is it),
    /// or one of unknown length. A pool timeout would be one too.
    ClientTimeout { after: Option<Duration> },
    /// The call was dropped before its answer arrived.
    Abandoned,
    /// Any other fate the table lets be tried again (e.g. 40000
    /// transaction_rollback), with the SQLSTATE when there was one.
    OtherRetryable {
        fate: model::fate::Fate,
        code: Option<SqlState>,
    },
}

impl fmt::Display for ContentionReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ContentionReason::Serialization => f.write_str("serialization failure, 40001"),
            ContentionReason::Deadlock => f.write_str("deadlock, 40P01"),
            ContentionReason::QueryCanceled => f.write_str("statement cancelled, 57014"),
            ContentionReason::LockTimeout => f.write_str("lock wait timed out, 55P03"),
            ContentionReason::ServerUnavailable(c) => {
                write!(f, "server out of resources for now, {}", c.code())
            }
            ContentionReason::CompletionUnknown => {
                f.write_str("statement completion unknown, 40003")
            }
            ContentionReason::ConnectionFailure(c) => {
                write!(f, "connection failure, {}", c.code())
            }
            ContentionReason::SessionTerminated(c) => {
                write!(f, "session ended by the server, {}", c.code())
            }
            ContentionReason::ConnectionClosed => f.write_str("connection closed"),
            ContentionReason::ConnectionIo => f.write_str("connection I/O error"),
            ContentionReason::ClientTimeout { after: Some(d) } => {
                write!(f, "no answer within the client timeout of {d:?}")
            }
            ContentionReason::ClientTimeout { after: None } => {
                f.write_str("no answer within a client timeout")
            }
            ContentionReason::Abandoned => f.write_str("call abandoned before its answer"),
            ContentionReason::OtherRetryable {
                fate,
                code: Some(c),
            } => {
                write!(f, "{fate}, {}", c.code())
            }
            ContentionReason::OtherRetryable { fate, code: None } => write!(f, "{fate}"),
        }
    }
}
