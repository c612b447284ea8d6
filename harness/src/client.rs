//! A typed tokio-postgres client for pg_lease, with error classification.
//!
//! The functions take any [`GenericClient`] (a client or an open transaction)
//! and return typed outcomes. Errors are classified so that a fault is never
//! mistaken for an answer: a server-reported error means the statement did
//! not take effect; a lost connection, a terminated backend or a client-side
//! timeout means the outcome is unknown ([`LeaseError::OutcomeUnknown`]).

use chrono::{DateTime, Utc};
use std::time::Duration;
use tokio_postgres::error::SqlState;
use tokio_postgres::GenericClient;

/// The message prefix pg_lease uses for an exhausted wait (SQLSTATE 57014).
pub const WAIT_EXHAUSTED_PREFIX: &str = "lease.acquire: wait of ";

/// Result of `lease.acquire`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Acquire {
    Acquired {
        epoch: i64,
        expires_at: DateTime<Utc>,
    },
    Denied,
}

impl Acquire {
    pub fn epoch(&self) -> Option<i64> {
        match self {
            Acquire::Acquired { epoch, .. } => Some(*epoch),
            Acquire::Denied => None,
        }
    }
}

/// Status of `lease.renew` / `lease.release`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    Ok,
    NotOwner,
    Lapsed,
    EpochMismatch,
}

impl Status {
    pub fn parse(s: &str) -> Option<Status> {
        Some(match s {
            "ok" => Status::Ok,
            "not_owner" => Status::NotOwner,
            "lapsed" => Status::Lapsed,
            "epoch_mismatch" => Status::EpochMismatch,
            _ => return None,
        })
    }
}

/// Result of `lease.renew`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Renew {
    pub status: Status,
    /// The new expiry when `status` is `Ok`.
    pub expires_at: Option<DateTime<Utc>>,
}

/// The row of `lease.inspect` (None when the key was never leased).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Inspect {
    pub held: bool,
    pub owner: Option<String>,
    pub epoch: i64,
    pub expires_at: Option<DateTime<Utc>>,
}

/// Why a call did not produce an answer.
#[derive(Debug, thiserror::Error)]
pub enum LeaseError {
    /// 22023: the input was rejected; nothing changed.
    #[error("invalid input: {message} ({detail})")]
    InvalidInput { message: String, detail: String },
    /// 57014 raised by pg_lease: a blocking acquire's wait ran out; nothing changed.
    #[error("{message}")]
    WaitExhausted { message: String },
    /// 57014 from a cancel or statement_timeout: the statement did not take effect.
    #[error("statement canceled: {message}")]
    Canceled { message: String },
    /// 40001 / 40P01: the statement (and its transaction) was rolled back; retryable.
    #[error("rolled back ({code}): {message}")]
    RolledBack { code: String, message: String },
    /// The connection was lost (no answer, class 08, 57P01-57P03) or the
    /// client gave up waiting: the call may or may not have taken effect.
    #[error("outcome unknown: {reason}")]
    OutcomeUnknown {
        reason: String,
        #[source]
        source: Option<tokio_postgres::Error>,
    },
    /// Any other server error: the statement did not take effect.
    #[error("server error {code}: {message}")]
    Server { code: String, message: String },
    /// The server answered something pg_lease never returns.
    #[error("unexpected result from pg_lease: {0}")]
    Unexpected(String),
}

impl LeaseError {
    /// True when the call may have taken effect without us seeing the answer.
    pub fn is_unknown(&self) -> bool {
        matches!(self, LeaseError::OutcomeUnknown { .. })
    }

    /// The SQLSTATE the server reported, if any.
    pub fn code(&self) -> Option<&str> {
        match self {
            LeaseError::InvalidInput { .. } => Some("22023"),
            LeaseError::WaitExhausted { .. } | LeaseError::Canceled { .. } => Some("57014"),
            LeaseError::RolledBack { code, .. } | LeaseError::Server { code, .. } => Some(code),
            LeaseError::OutcomeUnknown { .. } | LeaseError::Unexpected(_) => None,
        }
    }
}

/// Classifies a tokio-postgres error.
pub fn classify(err: tokio_postgres::Error) -> LeaseError {
    let Some(db) = err.as_db_error() else {
        // No server answer: closed connection, I/O error, protocol failure.
        return LeaseError::OutcomeUnknown {
            reason: err.to_string(),
            source: Some(err),
        };
    };
    let code = db.code().clone();
    let message = db.message().to_string();
    if code == SqlState::INVALID_PARAMETER_VALUE {
        LeaseError::InvalidInput {
            message,
            detail: db.detail().unwrap_or_default().to_string(),
        }
    } else if code == SqlState::QUERY_CANCELED {
        if message.starts_with(WAIT_EXHAUSTED_PREFIX) {
            LeaseError::WaitExhausted { message }
        } else {
            LeaseError::Canceled { message }
        }
    } else if code == SqlState::T_R_SERIALIZATION_FAILURE || code == SqlState::T_R_DEADLOCK_DETECTED
    {
        LeaseError::RolledBack {
            code: code.code().to_string(),
            message,
        }
    } else if code.code().starts_with("08")
        || code == SqlState::ADMIN_SHUTDOWN
        || code == SqlState::CRASH_SHUTDOWN
        || code == SqlState::CANNOT_CONNECT_NOW
    {
        LeaseError::OutcomeUnknown {
            reason: format!("{}: {message}", code.code()),
            source: Some(err),
        }
    } else {
        LeaseError::Server {
            code: code.code().to_string(),
            message,
        }
    }
}

/// Microseconds of a Duration, saturating (pg_lease rejects absurd values itself).
fn micros(d: Duration) -> i64 {
    i64::try_from(d.as_micros()).unwrap_or(i64::MAX)
}

const ACQUIRE: &str = "SELECT acquired, epoch, expires_at FROM lease.acquire($1, $2, \
                       $3::bigint * interval '1 microsecond', $4::bigint * interval '1 microsecond')";
const RENEW: &str =
    "SELECT status, expires_at FROM lease.renew($1, $2, $3, $4::bigint * interval '1 microsecond')";
const RELEASE: &str = "SELECT status FROM lease.release($1, $2, $3)";
const INSPECT: &str = "SELECT held, owner, epoch, expires_at FROM lease.inspect($1)";

fn one_row(rows: Vec<tokio_postgres::Row>, what: &str) -> Result<tokio_postgres::Row, LeaseError> {
    let n = rows.len();
    let mut rows = rows.into_iter();
    match (rows.next(), n) {
        (Some(row), 1) => Ok(row),
        _ => Err(LeaseError::Unexpected(format!(
            "{what} returned {n} rows, expected 1"
        ))),
    }
}

fn get<'a, T: tokio_postgres::types::FromSql<'a>>(
    row: &'a tokio_postgres::Row,
    idx: usize,
) -> Result<T, LeaseError> {
    row.try_get(idx)
        .map_err(|e| LeaseError::Unexpected(e.to_string()))
}

/// `lease.acquire(key, owner, ttl, wait)`.
pub async fn acquire<C: GenericClient>(
    c: &C,
    key: &str,
    owner: &str,
    ttl: Duration,
    wait: Duration,
) -> Result<Acquire, LeaseError> {
    let rows = c
        .query(ACQUIRE, &[&key, &owner, &micros(ttl), &micros(wait)])
        .await
        .map_err(classify)?;
    let row = one_row(rows, "lease.acquire")?;
    let acquired: bool = get(&row, 0)?;
    let epoch: Option<i64> = get(&row, 1)?;
    let expires_at: Option<DateTime<Utc>> = get(&row, 2)?;
    match (acquired, epoch, expires_at) {
        (true, Some(epoch), Some(expires_at)) => Ok(Acquire::Acquired { epoch, expires_at }),
        (false, None, None) => Ok(Acquire::Denied),
        other => Err(LeaseError::Unexpected(format!(
            "lease.acquire returned {other:?}"
        ))),
    }
}

/// `lease.renew(key, owner, epoch, ttl)`.
pub async fn renew<C: GenericClient>(
    c: &C,
    key: &str,
    owner: &str,
    epoch: i64,
    ttl: Duration,
) -> Result<Renew, LeaseError> {
    let rows = c
        .query(RENEW, &[&key, &owner, &epoch, &micros(ttl)])
        .await
        .map_err(classify)?;
    let row = one_row(rows, "lease.renew")?;
    let status = status_of(&row)?;
    let expires_at: Option<DateTime<Utc>> = get(&row, 1)?;
    if (status == Status::Ok) != expires_at.is_some() {
        return Err(LeaseError::Unexpected(format!(
            "lease.renew returned {status:?} with expires_at {expires_at:?}"
        )));
    }
    Ok(Renew { status, expires_at })
}

/// `lease.release(key, owner, epoch)`.
pub async fn release<C: GenericClient>(
    c: &C,
    key: &str,
    owner: &str,
    epoch: i64,
) -> Result<Status, LeaseError> {
    let rows = c
        .query(RELEASE, &[&key, &owner, &epoch])
        .await
        .map_err(classify)?;
    let row = one_row(rows, "lease.release")?;
    status_of(&row)
}

/// The status column (the first) of a renew or release row.
fn status_of(row: &tokio_postgres::Row) -> Result<Status, LeaseError> {
    let status: String = get(row, 0)?;
    Status::parse(&status).ok_or_else(|| LeaseError::Unexpected(format!("status {status:?}")))
}

/// `lease.inspect(key)`: None for a never-leased key.
pub async fn inspect<C: GenericClient>(c: &C, key: &str) -> Result<Option<Inspect>, LeaseError> {
    let rows = c.query(INSPECT, &[&key]).await.map_err(classify)?;
    if rows.len() > 1 {
        return Err(LeaseError::Unexpected(format!(
            "lease.inspect returned {} rows",
            rows.len()
        )));
    }
    let Some(row) = rows.into_iter().next() else {
        return Ok(None);
    };
    let out = Inspect {
        held: get(&row, 0)?,
        owner: get(&row, 1)?,
        epoch: get(&row, 2)?,
        expires_at: get(&row, 3)?,
    };
    if out.held != (out.owner.is_some() && out.expires_at.is_some())
        || (!out.held && out.owner.is_some())
    {
        return Err(LeaseError::Unexpected(format!(
            "lease.inspect returned {out:?}"
        )));
    }
    Ok(Some(out))
}

/// The injected `expire(key)` fault: a held key's lease lapses now (its
/// expiry is set to the server's current time; the epoch is unchanged).
/// Needs a role that may write `lease.leases` (the cluster superuser).
/// Returns whether a held lease was expired.
pub async fn expire<C: GenericClient>(c: &C, key: &str) -> Result<bool, LeaseError> {
    let n = c
        .execute(
            "UPDATE lease.leases SET expires_at = clock_timestamp() \
             WHERE key = $1 AND owner IS NOT NULL AND expires_at > clock_timestamp()",
            &[&key],
        )
        .await
        .map_err(classify)?;
    Ok(n == 1)
}

/// The server's `clock_timestamp()`.
pub async fn server_now<C: GenericClient>(c: &C) -> Result<DateTime<Utc>, LeaseError> {
    let row = c
        .query_one("SELECT clock_timestamp()", &[])
        .await
        .map_err(classify)?;
    get(&row, 0)
}
