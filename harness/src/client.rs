//! A typed tokio-postgres client for pg_lease, with error classification.
//!
//! The functions take any [`GenericClient`] (a client or an open transaction)
//! and return typed outcomes. Errors are classified by the one error-fate
//! table ([`model::fate`], through [`crate::fate`]) so that a fault is never
//! mistaken for an answer: a definite failure means the statement did not
//! take effect; a lost connection, a terminated backend or a client-side
//! timeout means the outcome is unknown ([`LeaseError::OutcomeUnknown`]); bad
//! SQL or a misused driver is the harness's own bug ([`LeaseError::HarnessBug`]).
//!
//! The free functions pass keys and owners as they are; [`Calls`] can pass them through a
//! collation instead (a session setting a caller controls, specs/SEMANTICS.md section 10).
//! The client's own SQL qualifies what a session's search_path could redirect.

use crate::session::{Arguments, Collated};
use chrono::{DateTime, Utc};
use model::fate::{
    BugCause, Condition, Failure, Fate, UnknownCause, INVALID_PARAMETER_VALUE, QUERY_CANCELED,
};
use std::future::Future;
use std::time::Duration;
use tokio_postgres::error::DbError;
use tokio_postgres::GenericClient;

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
    /// Any other definite failure: the statement (and its transaction) did not
    /// take effect. `transient` when trying again may succeed (40001, 40P01,
    /// 55P03, class 53, ...).
    #[error("server error {code}: {message}")]
    Failed {
        code: String,
        message: String,
        transient: bool,
    },
    /// The call may or may not have taken effect: the connection was lost,
    /// the server ended the session, or the client gave up waiting.
    #[error("outcome unknown ({cause:?}): {detail}")]
    OutcomeUnknown {
        cause: UnknownCause,
        detail: String,
        #[source]
        source: Option<tokio_postgres::Error>,
    },
    /// The harness itself is wrong (SQL the server rejects as such, a
    /// parameter or column of the wrong type): neither an answer nor a fault.
    #[error("harness bug ({cause:?}): {detail}")]
    HarnessBug {
        cause: BugCause,
        detail: String,
        #[source]
        source: Option<tokio_postgres::Error>,
    },
    /// The target's code raised an error its contract does not have (specs/SEMANTICS.md
    /// section 7; [`Fate::OutsideContract`]): a finding about the target, not the harness's
    /// bug. `context` names the target's routines the error was raised in.
    #[error("the target raised {code} inside its code ({context}): {message}")]
    OutsideContract {
        code: String,
        message: String,
        context: String,
    },
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
            LeaseError::InvalidInput { .. } => Some(INVALID_PARAMETER_VALUE),
            LeaseError::WaitExhausted { .. } | LeaseError::Canceled { .. } => Some(QUERY_CANCELED),
            LeaseError::Failed { code, .. } | LeaseError::OutsideContract { code, .. } => {
                Some(code)
            }
            LeaseError::OutcomeUnknown { source, .. } | LeaseError::HarnessBug { source, .. } => {
                source.as_ref().and_then(|e| e.code()).map(|c| c.code())
            }
            LeaseError::Unexpected(_) => None,
        }
    }
}

/// Classifies a tokio-postgres error by its fate ([`crate::fate::fate`]).
pub fn classify(err: tokio_postgres::Error) -> LeaseError {
    let fate = crate::fate::fate(&err);
    match (fate, err.as_db_error()) {
        (Fate::Failed(failure), Some(db)) => return refused(db, failure),
        (Fate::OutsideContract, Some(db)) => {
            return LeaseError::OutsideContract {
                code: db.code().code().to_string(),
                message: db.message().to_string(),
                context: crate::fate::target_frames(db),
            }
        }
        _ => {}
    }
    let detail = describe(&err);
    without_answer(fate, detail, Some(err))
}

/// The error for a call the harness stopped waiting for after `after`: the
/// statement may still run, so its outcome is unknown.
pub fn timed_out(after: Duration) -> LeaseError {
    let detail = format!("no answer within the client timeout of {after:?}");
    without_answer(model::fate::of(Condition::ClientTimeout), detail, None)
}

/// Runs `call`, giving up after `after` with [`timed_out`].
pub async fn within<T>(
    after: Duration,
    call: impl Future<Output = Result<T, LeaseError>>,
) -> Result<T, LeaseError> {
    tokio::time::timeout(after, call)
        .await
        .unwrap_or_else(|_| Err(timed_out(after)))
}

/// A definite failure the server reported, named by what pg_lease means by it.
fn refused(db: &DbError, failure: Failure) -> LeaseError {
    let code = db.code().code();
    let message = db.message().to_string();
    match code {
        INVALID_PARAMETER_VALUE => LeaseError::InvalidInput {
            message,
            detail: db.detail().unwrap_or_default().to_string(),
        },
        QUERY_CANCELED if model::fate::is_wait_exhausted(code, &message) => {
            LeaseError::WaitExhausted { message }
        }
        QUERY_CANCELED => LeaseError::Canceled { message },
        _ => LeaseError::Failed {
            code: code.to_string(),
            message,
            transient: failure.transient,
        },
    }
}

/// The error for a fate without a server's refusal to name.
fn without_answer(fate: Fate, detail: String, source: Option<tokio_postgres::Error>) -> LeaseError {
    match fate {
        Fate::Unknown(cause) => LeaseError::OutcomeUnknown {
            cause,
            detail,
            source,
        },
        Fate::HarnessBug(cause) => LeaseError::HarnessBug {
            cause,
            detail,
            source,
        },
        // The table gives these only for a SQLSTATE, which a server's error
        // carries: an error judged so without one is not pg_lease's answer.
        Fate::Ok | Fate::Failed(_) | Fate::OutsideContract => {
            LeaseError::Unexpected(format!("{detail}, judged {fate} without a server error"))
        }
    }
}

/// A driver error for people: the server's code and message, or the
/// driver's kind and its cause (tokio-postgres prints the two separately).
fn describe(err: &tokio_postgres::Error) -> String {
    if let Some(db) = err.as_db_error() {
        return format!("{}: {}", db.code().code(), db.message());
    }
    match std::error::Error::source(err) {
        Some(cause) => format!("{err}: {cause}"),
        None => err.to_string(),
    }
}

/// Microseconds of a Duration, saturating (pg_lease rejects absurd values itself).
fn micros(d: Duration) -> i64 {
    i64::try_from(d.as_micros()).unwrap_or(i64::MAX)
}

/// The SQL of the four calls: keys and owners passed as they are, or through a
/// collation (on the argument or from a source column, [`crate::session`]).
#[derive(Clone, Debug)]
pub struct Calls {
    acquire: String,
    renew: String,
    release: String,
    inspect: String,
}

impl Calls {
    /// The calls with keys and owners through `collation` (as they are when `None`).
    pub fn new(collation: Option<&Collated>) -> Calls {
        let us = |n: usize| format!("${n}::bigint * interval '1 microsecond'");
        let with_owner = Arguments::of(collation, true);
        let key_only = Arguments::of(collation, false);
        let (k, o) = (&with_owner.key, &with_owner.owner);
        Calls {
            acquire: format!(
                "SELECT r.acquired, r.epoch, r.expires_at FROM {}",
                with_owner.from(&format!("lease.acquire({k}, {o}, {}, {})", us(3), us(4)))
            ),
            renew: format!(
                "SELECT r.status, r.expires_at FROM {}",
                with_owner.from(&format!("lease.renew({k}, {o}, $3::bigint, {})", us(4)))
            ),
            release: format!(
                "SELECT r.status FROM {}",
                with_owner.from(&format!("lease.release({k}, {o}, $3::bigint)"))
            ),
            inspect: format!(
                "SELECT r.held, r.owner, r.epoch, r.expires_at FROM {}",
                key_only.from(&format!("lease.inspect({})", key_only.key))
            ),
        }
    }

    /// Keys and owners as they are.
    pub fn plain() -> &'static Calls {
        static PLAIN: std::sync::OnceLock<Calls> = std::sync::OnceLock::new();
        PLAIN.get_or_init(|| Calls::new(None))
    }

    /// `lease.acquire(key, owner, ttl, wait)`.
    pub async fn acquire<C: GenericClient>(
        &self,
        c: &C,
        key: &str,
        owner: &str,
        ttl: Duration,
        wait: Duration,
    ) -> Result<Acquire, LeaseError> {
        let rows = c
            .query(&self.acquire, &[&key, &owner, &micros(ttl), &micros(wait)])
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
        &self,
        c: &C,
        key: &str,
        owner: &str,
        epoch: i64,
        ttl: Duration,
    ) -> Result<Renew, LeaseError> {
        let rows = c
            .query(&self.renew, &[&key, &owner, &epoch, &micros(ttl)])
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
        &self,
        c: &C,
        key: &str,
        owner: &str,
        epoch: i64,
    ) -> Result<Status, LeaseError> {
        let rows = c
            .query(&self.release, &[&key, &owner, &epoch])
            .await
            .map_err(classify)?;
        let row = one_row(rows, "lease.release")?;
        status_of(&row)
    }

    /// `lease.inspect(key)`: None for a never-leased key.
    pub async fn inspect<C: GenericClient>(
        &self,
        c: &C,
        key: &str,
    ) -> Result<Option<Inspect>, LeaseError> {
        let rows = c.query(&self.inspect, &[&key]).await.map_err(classify)?;
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
}

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
    // A column that does not decode is pg_lease's answer not having its
    // documented shape (a NULL where none is allowed, another type): that is
    // what `Unexpected` reports, where `classify` would blame the harness.
    row.try_get(idx).map_err(|e| {
        LeaseError::Unexpected(
            crate::contract::column_mismatch(row, idx, "the call").unwrap_or_else(|| describe(&e)),
        )
    })
}

/// `lease.acquire(key, owner, ttl, wait)`, keys and owners as they are.
pub async fn acquire<C: GenericClient>(
    c: &C,
    key: &str,
    owner: &str,
    ttl: Duration,
    wait: Duration,
) -> Result<Acquire, LeaseError> {
    Calls::plain().acquire(c, key, owner, ttl, wait).await
}

/// `lease.renew(key, owner, epoch, ttl)`, keys and owners as they are.
pub async fn renew<C: GenericClient>(
    c: &C,
    key: &str,
    owner: &str,
    epoch: i64,
    ttl: Duration,
) -> Result<Renew, LeaseError> {
    Calls::plain().renew(c, key, owner, epoch, ttl).await
}

/// `lease.release(key, owner, epoch)`, keys and owners as they are.
pub async fn release<C: GenericClient>(
    c: &C,
    key: &str,
    owner: &str,
    epoch: i64,
) -> Result<Status, LeaseError> {
    Calls::plain().release(c, key, owner, epoch).await
}

/// The status column (the first) of a renew or release row.
fn status_of(row: &tokio_postgres::Row) -> Result<Status, LeaseError> {
    let status: String = get(row, 0)?;
    Status::parse(&status).ok_or_else(|| LeaseError::Unexpected(format!("status {status:?}")))
}

/// `lease.inspect(key)`: None for a never-leased key (the key as it is).
pub async fn inspect<C: GenericClient>(c: &C, key: &str) -> Result<Option<Inspect>, LeaseError> {
    Calls::plain().inspect(c, key).await
}

/// The injected `expire(key)` fault: a held key's lease lapses now (its
/// expiry is set to the server's current time; the epoch is unchanged).
/// Needs a role that may write the lease table (the cluster superuser).
/// Returns whether a held lease was expired.
pub async fn expire<C: GenericClient>(c: &C, key: &str) -> Result<bool, LeaseError> {
    let table = crate::extension::lease_table(c).await.map_err(classify)?;
    let n = c
        .execute(&expire_statement(&table, "$1::text"), &[&key])
        .await
        .map_err(classify)?;
    Ok(n == 1)
}

/// [`expire`]'s statement on `table` for `key`, with the key as a literal (for reports:
/// it runs as is in psql).
pub fn expire_sql(table: &str, key: &str) -> String {
    expire_statement(table, &format!("'{}'::text", key.replace('\'', "''")))
}

/// The one statement of the clock-independent lapse: the lease on the key `key` (an SQL
/// expression), if held and live, expires at the server's current time.
fn expire_statement(table: &str, key: &str) -> String {
    format!(
        "UPDATE {table} SET expires_at = pg_catalog.clock_timestamp() \
         WHERE key OPERATOR(pg_catalog.=) {key} AND owner IS NOT NULL \
           AND expires_at OPERATOR(pg_catalog.>) pg_catalog.clock_timestamp()"
    )
}

/// The server's `clock_timestamp()`.
pub async fn server_now<C: GenericClient>(c: &C) -> Result<DateTime<Utc>, LeaseError> {
    let row = c
        .query_one("SELECT pg_catalog.clock_timestamp()", &[])
        .await
        .map_err(classify)?;
    get(&row, 0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::str::FromStr;

    #[test]
    fn a_client_timeout_is_an_unknown_outcome() {
        let err = timed_out(Duration::from_millis(250));
        assert!(err.is_unknown());
        assert!(matches!(
            err,
            LeaseError::OutcomeUnknown {
                cause: UnknownCause::ClientTimeout,
                source: None,
                ..
            }
        ));
        assert_eq!(err.code(), None);
    }

    #[tokio::test]
    async fn within_gives_up_with_an_unknown_outcome() {
        let never = std::future::pending::<Result<(), LeaseError>>();
        let err = within(Duration::from_millis(20), never)
            .await
            .expect_err("a pending call cannot finish");
        assert!(matches!(
            err,
            LeaseError::OutcomeUnknown {
                cause: UnknownCause::ClientTimeout,
                ..
            }
        ));
        let answered = within(Duration::from_secs(5), async { Ok::<_, LeaseError>(7) }).await;
        assert!(matches!(answered, Ok(7)));
    }

    #[test]
    fn a_driver_misuse_is_a_harness_bug_not_an_unknown_outcome() {
        let err = tokio_postgres::Config::from_str("port=not-a-number")
            .expect_err("a port must be a number");
        let classified = classify(err);
        assert!(!classified.is_unknown());
        assert!(matches!(
            classified,
            LeaseError::HarnessBug {
                cause: BugCause::DriverMisuse,
                source: Some(_),
                ..
            }
        ));
    }
}
