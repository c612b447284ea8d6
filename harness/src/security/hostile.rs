//! Hostile input: any text, interval or bigint argument (NULLs, empty, whitespace, control
//! characters, invalid lengths, huge and negative intervals, infinity, epoch 0 and negative)
//! gives a result or SQLSTATE 22023 with a DETAIL, never another error, and changes lease
//! state only as the spec allows.
//!
//! Each case is one call by a non-superuser on a trusted install. Around it the harness
//! reads, as the superuser, the whole of `lease.leases` and the server clock, and, as the
//! caller, `lease.inspect` of a fixed set of keys. The spec ([`model::spec::Spec::check`])
//! judges the outcome against the table before and after: an invalid call must be 22023
//! with the DETAIL the spec names and change nothing; a valid one must answer as the spec
//! allows at some instant of the call and leave the table in a state the spec allows.
//!
//! Interval arguments travel in PostgreSQL's binary form ([`PgInterval`]), so any
//! (months, days, microseconds) reaches the call, including values the text parser refuses.
//! Text intervals (`'infinity'`, `'1 year -1 month'`, ...) are cast by the server in a
//! statement of their own first: a cast the server refuses never reaches pg_lease, and the
//! case shows that the same cast inside the call fails the same way, before any lease code.

use super::{describe_db, table_rows, Failure, LeaseRow, SecurityError};
use crate::extension::Mutant;
use bytes::{Buf, BufMut, BytesMut};
use chrono::{DateTime, Utc};
use model::spec::{KeyState, Op, Outcome, Row, Spec, Store};
use model::time::{Interval, Span, Ts, Window};
use proptest::prelude::*;
use std::error::Error as StdError;
use std::time::Duration;
use tokio_postgres::types::{accepts, to_sql_checked, FromSql, IsNull, ToSql, Type};
use tokio_postgres::Client;

mod strategies;
pub use strategies::{call_strategy, epoch_strategy, interval_strategy, text_strategy};

/// A PostgreSQL `interval` in its binary wire form: microseconds, days, months.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PgInterval(pub Interval);

impl ToSql for PgInterval {
    fn to_sql(
        &self,
        _ty: &Type,
        out: &mut BytesMut,
    ) -> Result<IsNull, Box<dyn StdError + Sync + Send>> {
        out.put_i64(self.0.micros);
        out.put_i32(self.0.days);
        out.put_i32(self.0.months);
        Ok(IsNull::No)
    }

    accepts!(INTERVAL);
    to_sql_checked!();
}

impl<'a> FromSql<'a> for PgInterval {
    fn from_sql(_ty: &Type, mut raw: &'a [u8]) -> Result<Self, Box<dyn StdError + Sync + Send>> {
        if raw.len() != 16 {
            return Err(format!("an interval is 16 bytes, got {}", raw.len()).into());
        }
        let micros = raw.get_i64();
        let days = raw.get_i32();
        let months = raw.get_i32();
        Ok(PgInterval(Interval {
            months,
            days,
            micros,
        }))
    }

    accepts!(INTERVAL);
}

/// An interval argument as the caller writes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IntervalInput {
    /// Sent in binary form.
    Fields(Interval),
    /// Text the server casts to `interval` first (it may refuse).
    Text(String),
}

/// One call with hostile arguments (`None` is SQL NULL).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Call {
    Acquire {
        key: Option<String>,
        owner: Option<String>,
        ttl: Option<IntervalInput>,
        wait: Option<IntervalInput>,
    },
    Renew {
        key: Option<String>,
        owner: Option<String>,
        epoch: Option<i64>,
        ttl: Option<IntervalInput>,
    },
    Release {
        key: Option<String>,
        owner: Option<String>,
        epoch: Option<i64>,
    },
    Inspect {
        key: Option<String>,
    },
}

/// Keys whose state every case watches through `lease.inspect`.
pub const WATCHED_KEYS: [&str; 4] = ["w-held", "w-free", "w-lapsed", "w-never"];
/// Owners of the watched keys (hostile calls use them too, to reach real state).
pub const WATCHED_OWNERS: [&str; 2] = ["alice", "bob"];

/// How a case ended when pg_lease behaved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CaseOutcome {
    /// The call answered (or a blocking acquire timed out, or was still waiting when the
    /// statement timeout cancelled it), as the spec allows.
    Answered(String),
    /// 22023 with the DETAIL the spec names; nothing changed.
    Invalid { detail: String },
    /// The server refused to cast a text interval (SQLSTATE): the call was never made.
    CastRefused { code: String, text: String },
}

/// How long one call may run before the harness's statement timeout cancels it: a valid
/// blocking acquire of a key live-held by another owner waits longer than this.
pub const CALL_TIMEOUT: Duration = Duration::from_millis(300);

/// A caller's and the superuser's connections to a database with pg_lease installed.
pub struct Target<'a> {
    /// The superuser (reads the table and the clock).
    pub su: &'a Client,
    /// A non-superuser making the calls.
    pub caller: &'a Client,
}

impl Target<'_> {
    /// Puts the watched keys in place (held, free, lapsed, never leased) and sets the
    /// caller's statement timeout.
    pub async fn seed(&self) -> Result<(), SecurityError> {
        let hour = Duration::from_secs(3600);
        let c = self.caller;
        crate::client::acquire(c, "w-held", "alice", hour, Duration::ZERO).await?;
        let free = crate::client::acquire(c, "w-free", "alice", hour, Duration::ZERO).await?;
        if let Some(e) = free.epoch() {
            crate::client::release(c, "w-free", "alice", e).await?;
        }
        crate::client::acquire(
            c,
            "w-lapsed",
            "bob",
            Duration::from_millis(1),
            Duration::ZERO,
        )
        .await?;
        tokio::time::sleep(Duration::from_millis(5)).await;
        c.batch_execute(&format!(
            "SET statement_timeout = '{}ms'",
            CALL_TIMEOUT.as_millis()
        ))
        .await?;
        Ok(())
    }
}

fn ts(t: DateTime<Utc>) -> Ts {
    Ts(t.timestamp_micros())
}

/// The store the table holds.
fn store_of(rows: &[LeaseRow]) -> Store<String, String> {
    let mut store = Store::new();
    for (key, owner, epoch, expires) in rows {
        let state = match (owner, expires) {
            (Some(o), Some(x)) => KeyState::Held {
                owner: o.clone(),
                epoch: *epoch,
                expires: Window::exact(ts(*x)),
            },
            _ => KeyState::Free { epoch: *epoch },
        };
        store.set(key.clone(), state);
    }
    store
}

async fn server_now(su: &Client) -> Result<Ts, SecurityError> {
    let t: DateTime<Utc> = su
        .query_one("SELECT clock_timestamp()", &[])
        .await?
        .try_get(0)?;
    Ok(ts(t))
}

type Inspected = Vec<(String, Option<(bool, Option<String>, i64)>)>;

async fn inspect_watched(caller: &Client) -> Result<Inspected, SecurityError> {
    let mut out = Vec::new();
    for k in WATCHED_KEYS {
        let row = crate::client::inspect(caller, k).await?;
        out.push((k.to_string(), row.map(|r| (r.held, r.owner, r.epoch))));
    }
    Ok(out)
}

/// The SQL of a call, with the interval arguments as `$n::interval` parameters.
fn call_sql(call: &Call) -> &'static str {
    match call {
        Call::Acquire { .. } => {
            "SELECT acquired, epoch, expires_at FROM lease.acquire($1::text, $2::text, $3::interval, $4::interval)"
        }
        Call::Renew { .. } => {
            "SELECT status, expires_at FROM lease.renew($1::text, $2::text, $3::bigint, $4::interval)"
        }
        Call::Release { .. } => "SELECT status FROM lease.release($1::text, $2::text, $3::bigint)",
        Call::Inspect { .. } => "SELECT held, owner, epoch, expires_at FROM lease.inspect($1::text)",
    }
}

/// The same call with one interval argument written as `$n::text::interval` (the server
/// casts it inside the call's statement).
fn call_sql_casting(call: &Call, position: usize) -> String {
    let sql = call_sql(call);
    sql.replace(
        &format!("${position}::interval"),
        &format!("${position}::text::interval"),
    )
}

/// Resolves the text intervals by a cast of their own. `Err(Some(..))`: the server refused
/// the cast of that text.
async fn resolve(
    caller: &Client,
    input: &Option<IntervalInput>,
) -> Result<Option<Interval>, Result<(String, tokio_postgres::Error), SecurityError>> {
    match input {
        None => Ok(None),
        Some(IntervalInput::Fields(i)) => Ok(Some(*i)),
        Some(IntervalInput::Text(text)) => {
            match caller.query_one("SELECT $1::text::interval", &[text]).await {
                Ok(row) => row
                    .try_get::<_, PgInterval>(0)
                    .map(|p| Some(p.0))
                    .map_err(|e| Err(SecurityError::from(e))),
                Err(e) if e.as_db_error().is_some() => Err(Ok((text.clone(), e))),
                Err(e) => Err(Err(SecurityError::from(e))),
            }
        }
    }
}

/// Runs one case and judges it. Every call changes at most what the spec allows.
pub async fn run_case(t: &Target<'_>, call: &Call) -> Result<CaseOutcome, Failure> {
    // Text intervals: the server casts them on their own first.
    let (ttl_in, wait_in) = match call {
        Call::Acquire { ttl, wait, .. } => (ttl.clone(), wait.clone()),
        Call::Renew { ttl, .. } => (ttl.clone(), None),
        _ => (None, None),
    };
    let ttl_pos = match call {
        Call::Acquire { .. } | Call::Renew { .. } => {
            4 - usize::from(matches!(call, Call::Acquire { .. }))
        }
        _ => 0,
    };
    let mut resolved = Vec::new();
    for (input, position) in [(&ttl_in, ttl_pos), (&wait_in, 4)] {
        match resolve(t.caller, input).await {
            Ok(v) => resolved.push(v),
            Err(Ok((text, err))) => return cast_refused(t, call, position, &text, &err).await,
            Err(Err(e)) => return Err(e.into()),
        }
    }
    let (ttl, wait) = (resolved[0], resolved[1]);
    let op: Op<String, String> = match call {
        Call::Acquire { key, owner, .. } => Op::Acquire {
            key: key.clone(),
            owner: owner.clone(),
            ttl,
            wait,
        },
        Call::Renew {
            key, owner, epoch, ..
        } => Op::Renew {
            key: key.clone(),
            owner: owner.clone(),
            epoch: *epoch,
            ttl,
        },
        Call::Release { key, owner, epoch } => Op::Release {
            key: key.clone(),
            owner: owner.clone(),
            epoch: *epoch,
        },
        Call::Inspect { key } => Op::Inspect { key: key.clone() },
    };

    let rows_before = table_rows(t.su).await?;
    let watched_before = inspect_watched(t.caller).await?;
    let t0 = server_now(t.su).await?;
    let result = execute(t.caller, call, ttl, wait).await;
    let t1 = server_now(t.su).await?;
    let rows_after = table_rows(t.su).await?;
    let watched_after = inspect_watched(t.caller).await?;
    // A lease may lapse between t1 and the inspects after it: judged against this instant.
    let inspected_by = server_now(t.su).await?;
    let span = Span::new(t0, t1).map_err(|e| Failure::Infrastructure(e.to_string()))?;
    let store_before = store_of(&rows_before);
    let store_after = store_of(&rows_after);
    let spec = Spec::default();
    let violations = op.violations();

    let (observed, outcome) = match result {
        Ok(rows) => {
            let observed = outcome_of(call, &rows).map_err(Failure::Violation)?;
            (
                observed.clone(),
                CaseOutcome::Answered(format!("{observed:?}")),
            )
        }
        Err(e) => {
            let Some(db) = e.as_db_error() else {
                return Err(Failure::Infrastructure(format!(
                    "the call got no answer from the server: {}",
                    describe_db(&e)
                )));
            };
            let code = db.code().code();
            let message = db.message();
            match code {
                "22023" => {
                    let detail = db.detail().unwrap_or_default().to_string();
                    check_detail(&violations, &detail).map_err(Failure::Violation)?;
                    (Outcome::InvalidInput, CaseOutcome::Invalid { detail })
                }
                "57014" if model::fate::is_wait_exhausted(code, message) => {
                    (Outcome::Timeout, CaseOutcome::Answered("Timeout".into()))
                }
                "57014" if spec.possible(&store_before, &op, span).is_empty() => {
                    // A blocking acquire the spec says is still waiting, cancelled by the
                    // harness's statement timeout: no effect.
                    (
                        Outcome::Failed,
                        CaseOutcome::Answered("still waiting at the statement timeout".into()),
                    )
                }
                _ => {
                    return Err(Failure::Violation(format!(
                        "SQLSTATE {code} ({message}; DETAIL {:?}; CONTEXT {:?}); expected a result or 22023",
                        db.detail(),
                        db.where_()
                    )))
                }
            }
        }
    };
    if !violations.is_empty() && observed != Outcome::InvalidInput {
        return Err(Failure::Violation(format!(
            "an invalid call ({violations:?}) gave {observed:?} instead of 22023"
        )));
    }
    match spec.check(&store_before, &op, span, &observed) {
        Ok(allowed) if allowed.contains(&store_after) => {}
        Ok(allowed) => {
            return Err(Failure::Violation(format!(
            "the call ({observed:?}) changed lease state to {rows_after:?} from {rows_before:?}; \
                 the spec allows {allowed:?}"
        )))
        }
        Err(m) => {
            return Err(Failure::Violation(format!(
                "the outcome {observed:?} is impossible under the spec: {m}"
            )))
        }
    }
    if observed == Outcome::InvalidInput && rows_after != rows_before {
        return Err(Failure::Violation(format!(
            "an invalid call changed lease.leases from {rows_before:?} to {rows_after:?}"
        )));
    }
    check_watched(
        &op,
        &watched_before,
        &watched_after,
        &rows_after,
        inspected_by,
        observed == Outcome::InvalidInput,
    )
    .map_err(Failure::Violation)?;
    Ok(outcome)
}

/// The text interval `text` was refused by a cast of its own. The same call with the cast
/// inside its statement must fail with the same SQLSTATE before any pg_lease code runs (no
/// CONTEXT naming it), and change nothing.
async fn cast_refused(
    t: &Target<'_>,
    call: &Call,
    position: usize,
    text: &str,
    err: &tokio_postgres::Error,
) -> Result<CaseOutcome, Failure> {
    let code = err.code().map(|c| c.code().to_string()).unwrap_or_default();
    if !code.starts_with("22") {
        return Err(Failure::Infrastructure(format!(
            "casting {text:?} to interval failed with {}, not a data exception",
            describe_db(err)
        )));
    }
    let before = table_rows(t.su).await?;
    let sql = call_sql_casting(call, position);
    let none = Option::<PgInterval>::None;
    let zero = Some(PgInterval(Interval::ZERO));
    let (key, owner, epoch) = match call {
        Call::Acquire { key, owner, .. } => (key.clone(), owner.clone(), None),
        Call::Renew {
            key, owner, epoch, ..
        } => (key.clone(), owner.clone(), *epoch),
        _ => (None, None, None),
    };
    let inline = match call {
        Call::Acquire { .. } if position == 3 => {
            t.caller.query(&sql, &[&key, &owner, &text, &zero]).await
        }
        Call::Acquire { .. } => {
            t.caller
                .query(
                    &sql,
                    &[&key, &owner, &Some(PgInterval(Interval::secs(1))), &text],
                )
                .await
        }
        Call::Renew { .. } => t.caller.query(&sql, &[&key, &owner, &epoch, &text]).await,
        _ => t.caller.query(&sql, &[&none]).await,
    };
    let after = table_rows(t.su).await?;
    match inline {
        Err(e) if e.code().map(|c| c.code()) == Some(code.as_str()) => {
            let context = e
                .as_db_error()
                .and_then(|d| d.where_())
                .unwrap_or_default()
                .to_string();
            if context.contains("lease.") {
                return Err(Failure::Violation(format!(
                    "the cast of {text:?} failed inside pg_lease code (CONTEXT {context:?})"
                )));
            }
        }
        other => {
            return Err(Failure::Violation(format!(
                "the cast of {text:?} is refused on its own ({code}) but inside the call gave {:?}",
                other.map(|r| r.len()).map_err(|e| describe_db(&e))
            )))
        }
    }
    if after != before {
        return Err(Failure::Violation(format!(
            "a call whose interval cast failed changed lease.leases: {before:?} -> {after:?}"
        )));
    }
    Ok(CaseOutcome::CastRefused {
        code,
        text: text.to_string(),
    })
}

async fn execute(
    c: &Client,
    call: &Call,
    ttl: Option<Interval>,
    wait: Option<Interval>,
) -> Result<Vec<tokio_postgres::Row>, tokio_postgres::Error> {
    let sql = call_sql(call);
    let ttl = ttl.map(PgInterval);
    let wait = wait.map(PgInterval);
    match call {
        Call::Acquire { key, owner, .. } => c.query(sql, &[key, owner, &ttl, &wait]).await,
        Call::Renew {
            key, owner, epoch, ..
        } => c.query(sql, &[key, owner, epoch, &ttl]).await,
        Call::Release { key, owner, epoch } => c.query(sql, &[key, owner, epoch]).await,
        Call::Inspect { key } => c.query(sql, &[key]).await,
    }
}

/// The spec's outcome for the rows a call returned (a malformed answer is a violation).
fn outcome_of(call: &Call, rows: &[tokio_postgres::Row]) -> Result<Outcome<String>, String> {
    let get = |e: tokio_postgres::Error| format!("a column of the answer does not decode: {e}");
    if let Call::Inspect { .. } = call {
        return match rows {
            [] => Ok(Outcome::Inspected(None)),
            [r] => {
                let held: bool = r.try_get(0).map_err(get)?;
                let owner: Option<String> = r.try_get(1).map_err(get)?;
                let epoch: i64 = r.try_get(2).map_err(get)?;
                let expires: Option<DateTime<Utc>> = r.try_get(3).map_err(get)?;
                Ok(Outcome::Inspected(Some(Row {
                    held,
                    owner,
                    epoch,
                    expires_at: expires.map(ts),
                })))
            }
            _ => Err(format!("inspect returned {} rows", rows.len())),
        };
    }
    let [r] = rows else {
        return Err(format!("the call returned {} rows, expected 1", rows.len()));
    };
    match call {
        Call::Acquire { .. } => {
            let acquired: bool = r.try_get(0).map_err(get)?;
            let epoch: Option<i64> = r.try_get(1).map_err(get)?;
            let expires: Option<DateTime<Utc>> = r.try_get(2).map_err(get)?;
            match (acquired, epoch, expires) {
                (true, Some(epoch), Some(x)) => Ok(Outcome::Acquired {
                    epoch,
                    expires_at: ts(x),
                }),
                (false, None, None) => Ok(Outcome::Denied),
                other => Err(format!("acquire returned {other:?}")),
            }
        }
        Call::Renew { .. } | Call::Release { .. } => {
            let status: String = r.try_get(0).map_err(get)?;
            let expires: Option<DateTime<Utc>> = if matches!(call, Call::Renew { .. }) {
                r.try_get(1).map_err(get)?
            } else {
                None
            };
            Ok(match (status.as_str(), expires) {
                ("ok", Some(x)) if matches!(call, Call::Renew { .. }) => {
                    Outcome::Renewed { expires_at: ts(x) }
                }
                ("ok", None) if matches!(call, Call::Release { .. }) => Outcome::Released,
                ("not_owner", None) => Outcome::NotOwner,
                ("lapsed", None) => Outcome::Lapsed,
                ("epoch_mismatch", None) => Outcome::EpochMismatch,
                other => return Err(format!("status {other:?}")),
            })
        }
        Call::Inspect { .. } => Err("unreachable".into()),
    }
}

/// The DETAIL of a 22023: one sentence per violated argument, in signature order, each
/// starting as the spec says, joined by "; " and ending in ".".
fn check_detail(violations: &[model::spec::Violation], detail: &str) -> Result<(), String> {
    if detail.trim().is_empty() {
        return Err("22023 without a DETAIL".into());
    }
    if violations.is_empty() {
        return Err(format!(
            "22023 ({detail:?}) for a call the spec holds valid"
        ));
    }
    let Some(body) = detail.strip_suffix('.') else {
        return Err(format!("the DETAIL {detail:?} does not end in '.'"));
    };
    let sentences: Vec<&str> = body.split("; ").collect();
    if sentences.len() != violations.len()
        || !sentences
            .iter()
            .zip(violations)
            .all(|(s, v)| s.starts_with(v.detail_prefix()))
    {
        let want: Vec<&str> = violations.iter().map(|v| v.detail_prefix()).collect();
        return Err(format!(
            "the DETAIL {detail:?} does not name the violations {want:?} in order"
        ));
    }
    Ok(())
}

/// The watched keys the call does not name read the same through inspect before and
/// after (a held lease may lapse meanwhile); after an invalid call, all of them do.
fn check_watched(
    op: &Op<String, String>,
    before: &Inspected,
    after: &Inspected,
    rows_after: &[LeaseRow],
    inspected_by: Ts,
    invalid: bool,
) -> Result<(), String> {
    for ((key, b), (_, a)) in before.iter().zip(after) {
        if !invalid && op.key().is_some_and(|k| k == key) {
            continue;
        }
        if a == b {
            continue;
        }
        let lapsed = matches!((b, a), (Some((true, _, eb)), Some((false, None, ea))) if eb == ea)
            && rows_after
                .iter()
                .find(|r| &r.0 == key)
                .and_then(|r| r.3)
                .is_some_and(|x| ts(x) <= inspected_by);
        if !lapsed {
            return Err(format!(
                "inspect({key:?}) changed from {b:?} to {a:?} across a call on another key or an invalid call"
            ));
        }
    }
    Ok(())
}

/// A pg_lease whose interval validation has no upper bound (negative control: a 200-year
/// ttl must be 22023); catalogued in [`crate::mutants`].
pub const NO_INTERVAL_CAP: Mutant = crate::mutants::NO_INTERVAL_CAP;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn binary_intervals_round_trip() {
        let v = PgInterval(Interval {
            months: -3,
            days: 7,
            micros: i64::MIN,
        });
        let mut buf = BytesMut::new();
        v.to_sql(&Type::INTERVAL, &mut buf).expect("encodes");
        assert_eq!(buf.len(), 16);
        let back = PgInterval::from_sql(&Type::INTERVAL, &buf).expect("decodes");
        assert_eq!(back, v);
        assert!(PgInterval::from_sql(&Type::INTERVAL, &buf[..15]).is_err());
    }

    #[test]
    fn details_are_checked_in_order() {
        use model::spec::Violation::*;
        assert!(check_detail(
            &[KeyEmpty, TtlTooLong],
            "key must not be empty; ttl must be at most 100 years (got x)."
        )
        .is_ok());
        assert!(check_detail(
            &[KeyEmpty, TtlTooLong],
            "ttl must be at most 100 years; key must not be empty."
        )
        .is_err());
        assert!(check_detail(&[KeyEmpty], "").is_err());
        assert!(check_detail(&[], "key must not be empty.").is_err());
        assert!(check_detail(&[KeyEmpty], "key must not be empty").is_err());
    }
}
