//! The recorder's statements: each pg_lease call in one SELECT that also reads the
//! server-time window (`statement_timestamp()` before the call, `clock_timestamp()` after
//! it) and the transaction id, and the decoding of its row into an outcome.

use super::Conn;
use crate::session::{Arguments, Collated};
use chrono::{DateTime, Utc};
use model::{Interval, Op, Outcome, Row, Span, Ts};
use tokio_postgres::types::ToSql;
use tokio_postgres::{Client, Statement};

/// An interval passed exactly, field by field, from three parameters starting at `$n`:
/// months, days, microseconds (split into whole seconds and the rest so that the float
/// factor of `interval * float8` is exact for every `bigint`). NULL fields give NULL.
pub(super) fn interval(n: usize) -> String {
    let (m, d, us) = (n, n + 1, n + 2);
    format!(
        "(${m}::int * interval '1 month' + ${d}::int * interval '1 day' \
         + ${us}::bigint / 1000000 * interval '1 second' \
         + ${us}::bigint % 1000000 * interval '1 microsecond')"
    )
}

/// The transaction id, once assigned (NULL before the transaction wrote). Every function
/// the recorder calls itself is qualified: a session's search_path may put same-named
/// functions before pg_catalog (specs/SEMANTICS.md section 10).
pub(super) const XID: &str = "pg_catalog.pg_current_xact_id_if_assigned()::text";
/// The server time before the call (set when the server received the statement).
const T0: &str = "pg_catalog.statement_timestamp()";
/// The server time after the call returned.
const T1: &str = "pg_catalog.clock_timestamp()";

fn acquire_sql(collation: Option<&Collated>) -> String {
    let a = Arguments::of(collation, true);
    let call = format!(
        "lease.acquire({}, {}, {}, {})",
        a.key,
        a.owner,
        interval(3),
        interval(6)
    );
    format!(
        "SELECT {T0}, r.acquired, r.epoch, r.expires_at, {T1}, {XID} FROM {}",
        a.from(&call)
    )
}

fn renew_sql(collation: Option<&Collated>) -> String {
    let a = Arguments::of(collation, true);
    let call = format!(
        "lease.renew({}, {}, $3::bigint, {})",
        a.key,
        a.owner,
        interval(4)
    );
    format!(
        "SELECT {T0}, r.status, r.expires_at, {T1}, {XID} FROM {}",
        a.from(&call)
    )
}

fn release_sql(collation: Option<&Collated>) -> String {
    let a = Arguments::of(collation, true);
    let call = format!("lease.release({}, {}, $3::bigint)", a.key, a.owner);
    format!("SELECT {T0}, r.status, {T1}, {XID} FROM {}", a.from(&call))
}

/// The LEFT JOIN keeps one row (with the two instants) when inspect returns zero rows.
fn inspect_sql(collation: Option<&Collated>) -> String {
    let a = Arguments::of(collation, false);
    let call = format!("lease.inspect({})", a.key);
    format!(
        "SELECT {T0}, r.held, r.owner, r.epoch, r.expires_at, {T1}, {XID} FROM {}",
        a.from_keeping_a_row(&call)
    )
}

/// The server time, once backend `$1` is gone (NULL while it is there).
pub(super) const BACKEND_GONE: &str = "SELECT CASE WHEN NOT EXISTS \
     (SELECT FROM pg_catalog.pg_stat_activity WHERE pid = $1::int) \
     THEN pg_catalog.clock_timestamp() END";

/// What became of a transaction, by its id (text of an `xid8`).
pub(super) const XACT_STATUS: &str = "SELECT pg_catalog.pg_xact_status($1::text::xid8)";

/// The four calls, prepared once per connection.
pub(super) struct Statements {
    acquire: Statement,
    renew: Statement,
    release: Statement,
    inspect: Statement,
}

impl Statements {
    /// Prepares the calls on `client`, keys and owners passed through `collation` when
    /// there is one; also returns the connection's backend pid.
    pub(super) async fn prepare(
        client: &Client,
        collation: Option<&Collated>,
    ) -> Result<(Statements, i32), tokio_postgres::Error> {
        let statements = Statements {
            acquire: client.prepare(&acquire_sql(collation)).await?,
            renew: client.prepare(&renew_sql(collation)).await?,
            release: client.prepare(&release_sql(collation)).await?,
            inspect: client.prepare(&inspect_sql(collation)).await?,
        };
        let pid: i32 = client
            .query_one("SELECT pg_catalog.pg_backend_pid()", &[])
            .await?
            .try_get(0)?;
        Ok((statements, pid))
    }
}

/// A call's answer.
pub(super) struct Answer {
    pub(super) server: Option<Span>,
    pub(super) outcome: Outcome<String>,
    /// The transaction id after the call, when one is assigned.
    pub(super) xid: Option<String>,
}

/// Why a call gave no answer to record.
pub(super) enum CallError {
    /// The server or the driver reported an error (judged by the fate table).
    Db(tokio_postgres::Error),
    /// The answer is outside the documented shape of the call.
    Malformed { call: &'static str, detail: String },
}

impl From<tokio_postgres::Error> for CallError {
    fn from(e: tokio_postgres::Error) -> Self {
        CallError::Db(e)
    }
}

type Fields = (Option<i32>, Option<i32>, Option<i64>);

fn fields(i: &Option<Interval>) -> Fields {
    match i {
        Some(i) => (Some(i.months), Some(i.days), Some(i.micros)),
        None => (None, None, None),
    }
}

/// The API function `op` calls, as reports name it.
pub(super) fn call_name(op: &Op<String, String>) -> &'static str {
    match op {
        Op::Acquire { .. } => "lease.acquire",
        Op::Renew { .. } => "lease.renew",
        Op::Release { .. } => "lease.release",
        Op::Inspect { .. } => "lease.inspect",
        Op::Expire { .. } => "expire",
    }
}

/// Column `idx` of `row` (an answer of `call`) as `T`: a column whose type is not the
/// contract's is the build's answer outside its API ([`CallError::Malformed`]); any other
/// decoding error is the driver's (judged by the fate table: the harness's bug).
fn column<'a, T: tokio_postgres::types::FromSql<'a>>(
    row: &'a tokio_postgres::Row,
    idx: usize,
    call: &'static str,
) -> Result<T, CallError> {
    row.try_get(idx)
        .map_err(|e| match crate::contract::column_mismatch(row, idx, call) {
            Some(detail) => CallError::Malformed { call, detail },
            None => CallError::Db(e),
        })
}

/// Runs `op` on `conn`.
pub(super) async fn call(conn: &Conn, op: &Op<String, String>) -> Result<Answer, CallError> {
    let st = &conn.statements;
    let c = &conn.client;
    match op {
        Op::Acquire {
            key,
            owner,
            ttl,
            wait,
        } => {
            let (tm, td, tu) = fields(ttl);
            let (wm, wd, wu) = fields(wait);
            let params: [&(dyn ToSql + Sync); 8] = [key, owner, &tm, &td, &tu, &wm, &wd, &wu];
            let row = one_row(c.query(&st.acquire, &params).await?, "lease.acquire")?;
            decode_acquire(&row)
        }
        Op::Renew {
            key,
            owner,
            epoch,
            ttl,
        } => {
            let (tm, td, tu) = fields(ttl);
            let params: [&(dyn ToSql + Sync); 6] = [key, owner, epoch, &tm, &td, &tu];
            let row = one_row(c.query(&st.renew, &params).await?, "lease.renew")?;
            decode_renew(&row)
        }
        Op::Release { key, owner, epoch } => {
            let params: [&(dyn ToSql + Sync); 3] = [key, owner, epoch];
            let row = one_row(c.query(&st.release, &params).await?, "lease.release")?;
            decode_release(&row)
        }
        Op::Inspect { key } => {
            let row = one_row(c.query(&st.inspect, &[key]).await?, "lease.inspect")?;
            decode_inspect(&row)
        }
        Op::Expire { .. } => Err(CallError::Malformed {
            call: "expire",
            detail: "the injected lapse is a nemesis, not a call".into(),
        }),
    }
}

fn one_row(
    rows: Vec<tokio_postgres::Row>,
    call: &'static str,
) -> Result<tokio_postgres::Row, CallError> {
    let n = rows.len();
    match <[tokio_postgres::Row; 1]>::try_from(rows) {
        Ok([row]) => Ok(row),
        Err(_) => Err(CallError::Malformed {
            call,
            detail: format!("{n} rows, expected 1"),
        }),
    }
}

fn micros(t: DateTime<Utc>) -> Ts {
    Ts(t.timestamp_micros())
}

/// The window `[t0, t1]` from columns `first` and `last`; `None` if the clock went back.
fn window(row: &tokio_postgres::Row, first: usize, last: usize) -> Result<Option<Span>, CallError> {
    let t0: DateTime<Utc> = row.try_get(first)?;
    let t1: DateTime<Utc> = row.try_get(last)?;
    Ok(Span::new(micros(t0), micros(t1)).ok())
}

fn answer(
    row: &tokio_postgres::Row,
    outcome: Outcome<String>,
    last: usize,
) -> Result<Answer, CallError> {
    Ok(Answer {
        server: window(row, 0, last)?,
        outcome,
        xid: row.try_get(last + 1)?,
    })
}

fn malformed(call: &'static str, detail: String) -> CallError {
    CallError::Malformed { call, detail }
}

pub(super) fn decode_acquire(row: &tokio_postgres::Row) -> Result<Answer, CallError> {
    const CALL: &str = "lease.acquire";
    let acquired: Option<bool> = column(row, 1, CALL)?;
    let epoch: Option<i64> = column(row, 2, CALL)?;
    let expires: Option<DateTime<Utc>> = column(row, 3, CALL)?;
    let outcome = match (acquired, epoch, expires) {
        (Some(true), Some(epoch), Some(at)) => Outcome::Acquired {
            epoch,
            expires_at: micros(at),
        },
        (Some(false), None, None) => Outcome::Denied,
        other => {
            return Err(malformed(
                "lease.acquire",
                format!("(acquired, epoch, expires_at) = {other:?}"),
            ))
        }
    };
    answer(row, outcome, 4)
}

/// A renew or release status other than `ok`.
fn refusal(status: &str) -> Option<Outcome<String>> {
    Some(match status {
        "not_owner" => Outcome::NotOwner,
        "lapsed" => Outcome::Lapsed,
        "epoch_mismatch" => Outcome::EpochMismatch,
        _ => return None,
    })
}

pub(super) fn decode_renew(row: &tokio_postgres::Row) -> Result<Answer, CallError> {
    const CALL: &str = "lease.renew";
    let status: Option<String> = column(row, 1, CALL)?;
    let expires: Option<DateTime<Utc>> = column(row, 2, CALL)?;
    let outcome = match (status.as_deref(), expires) {
        (Some("ok"), Some(at)) => Some(Outcome::Renewed {
            expires_at: micros(at),
        }),
        (Some(s), None) => refusal(s),
        _ => None,
    };
    let outcome = outcome.ok_or_else(|| {
        malformed(
            "lease.renew",
            format!("(status, expires_at) = {:?}", (status.as_deref(), expires)),
        )
    })?;
    answer(row, outcome, 3)
}

pub(super) fn decode_release(row: &tokio_postgres::Row) -> Result<Answer, CallError> {
    let status: Option<String> = column(row, 1, "lease.release")?;
    let outcome = match status.as_deref() {
        Some("ok") => Outcome::Released,
        Some(s) => refusal(s).ok_or_else(|| malformed("lease.release", format!("status {s:?}")))?,
        None => return Err(malformed("lease.release", "status NULL".into())),
    };
    answer(row, outcome, 2)
}

pub(super) fn decode_inspect(row: &tokio_postgres::Row) -> Result<Answer, CallError> {
    const CALL: &str = "lease.inspect";
    let held: Option<bool> = column(row, 1, CALL)?;
    let owner: Option<String> = column(row, 2, CALL)?;
    let epoch: Option<i64> = column(row, 3, CALL)?;
    let expires: Option<DateTime<Utc>> = column(row, 4, CALL)?;
    let found = match (held, epoch) {
        // The LEFT JOIN's NULL row: inspect returned zero rows.
        (None, None) if owner.is_none() && expires.is_none() => None,
        (Some(held), Some(epoch)) => Some(Row {
            held,
            owner,
            epoch,
            expires_at: expires.map(micros),
        }),
        (held, epoch) => {
            return Err(malformed(
                "lease.inspect",
                format!(
                    "(held, owner, epoch, expires_at) = {:?}",
                    (held, owner, epoch, expires)
                ),
            ))
        }
    };
    answer(row, Outcome::Inspected(found), 5)
}
