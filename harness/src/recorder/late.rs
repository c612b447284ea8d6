//! Calls made late in a long statement: several calls of one kind in one statement that
//! first sleeps, either a SELECT over the keys (`FROM unnest(keys) k, LATERAL
//! lease.acquire(k, ...)`, a batch) or a DO block that makes its calls one after another.
//! A call that dates or judges by the statement's start (`statement_timestamp()`) instead
//! of the clock answers from before the sleep.
//!
//! Each call is recorded as an op within the statement's invoke and complete instants
//! (one slice of that real time per call, in the order the server made the calls, since a
//! process makes one call at a time) and with the server window the statement gives it: in a batch, from the clock read after the
//! sleep (before every call: the calls take their arguments from the relation that reads
//! it) to the clock read after its own row; in a block, the clocks read right before and
//! right after the call. Every op of a statement shares its result class: the statement
//! failed (every call with its error, no effect), got no answer (every call unknown), or
//! answered every call.

use super::sql::{self, Answer, CallError};
use super::{failed_result, unknown, RecorderError, Session};
use model::{Interval, Op, OpRecord, OpResult};
use std::sync::atomic::Ordering;
use std::time::Duration;
use tokio_postgres::types::ToSql;
use tokio_postgres::Row;

/// How the calls of one statement are made.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Form {
    /// One SELECT over the keys: each call a row of a lateral join.
    Batch,
    /// A DO block: each call a statement of its own, between two clock reads.
    Block,
}

/// The kind of call a statement makes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Acquire,
    Renew,
    Release,
    Inspect,
}

fn kind(op: &Op<String, String>) -> Option<Kind> {
    Some(match op {
        Op::Acquire { .. } => Kind::Acquire,
        Op::Renew { .. } => Kind::Renew,
        Op::Release { .. } => Kind::Release,
        Op::Inspect { .. } => Kind::Inspect,
        Op::Expire { .. } => return None,
    })
}

/// Why a statement of late calls cannot be made.
fn refused(detail: &str) -> RecorderError {
    RecorderError::HarnessBug {
        what: "a statement of late calls",
        cause: model::fate::BugCause::DriverMisuse,
        detail: detail.to_string(),
    }
}

/// The ops' common kind, ttl and wait (a batch passes them once).
fn common(
    ops: &[Op<String, String>],
) -> Result<(Kind, Option<Interval>, Option<Interval>), RecorderError> {
    let first = ops.first().ok_or_else(|| refused("no call"))?;
    let k = kind(first).ok_or_else(|| refused("the injected lapse is not a call"))?;
    let (ttl, wait) = match first {
        Op::Acquire { ttl, wait, .. } => (*ttl, *wait),
        Op::Renew { ttl, .. } => (*ttl, None),
        _ => (None, None),
    };
    for op in ops {
        let same = match op {
            Op::Acquire {
                ttl: t, wait: w, ..
            } => k == Kind::Acquire && *t == ttl && *w == wait,
            Op::Renew { ttl: t, .. } => k == Kind::Renew && *t == ttl,
            Op::Release { .. } => k == Kind::Release,
            Op::Inspect { .. } => k == Kind::Inspect,
            Op::Expire { .. } => false,
        };
        if !same {
            return Err(refused(
                "the calls of one statement differ in kind, ttl or wait",
            ));
        }
    }
    Ok((k, ttl, wait))
}

/// The batch SELECT of `kind`: `$1` keys, `$2` owners, `$3` epochs (as the kind needs
/// them), then the ttl's and the wait's fields, then the sleep in seconds. Its rows have
/// the layout of the single call's statement (the window's start, the result's columns,
/// the window's end, the transaction id), then the call's ordinal.
fn batch_sql(kind: Kind) -> String {
    let (arrays, columns, call, result) = match kind {
        Kind::Acquire => (
            format!(
                "$1::text[] AS keys, $2::text[] AS owners, {} AS ttl, {} AS wait",
                sql::interval(3),
                sql::interval(6)
            ),
            "unnest(s.keys, s.owners) WITH ORDINALITY AS k(key, owner, n)",
            "CROSS JOIN LATERAL lease.acquire(k.key, k.owner, s.ttl, s.wait) AS r",
            "r.acquired, r.epoch, r.expires_at",
        ),
        Kind::Renew => (
            format!(
                "$1::text[] AS keys, $2::text[] AS owners, $3::bigint[] AS epochs, {} AS ttl",
                sql::interval(4)
            ),
            "unnest(s.keys, s.owners, s.epochs) WITH ORDINALITY AS k(key, owner, epoch, n)",
            "CROSS JOIN LATERAL lease.renew(k.key, k.owner, k.epoch, s.ttl) AS r",
            "r.status, r.expires_at",
        ),
        Kind::Release => (
            "$1::text[] AS keys, $2::text[] AS owners, $3::bigint[] AS epochs".to_string(),
            "unnest(s.keys, s.owners, s.epochs) WITH ORDINALITY AS k(key, owner, epoch, n)",
            "CROSS JOIN LATERAL lease.release(k.key, k.owner, k.epoch) AS r",
            "r.status",
        ),
        Kind::Inspect => (
            "$1::text[] AS keys".to_string(),
            "unnest(s.keys) WITH ORDINALITY AS k(key, n)",
            "LEFT JOIN LATERAL lease.inspect(k.key) AS r ON true",
            "r.held, r.owner, r.epoch, r.expires_at",
        ),
    };
    let sleep = match kind {
        Kind::Acquire => 9,
        Kind::Renew => 7,
        Kind::Release => 4,
        Kind::Inspect => 2,
    };
    format!(
        "WITH s AS MATERIALIZED (SELECT pg_catalog.pg_sleep(${sleep}::float8) AS slept, \
         pg_catalog.clock_timestamp() AS t0, {arrays}) \
         SELECT s.t0, {result}, pg_catalog.clock_timestamp(), {}, k.n \
         FROM s CROSS JOIN LATERAL {columns} {call}",
        sql::XID
    )
}

type Fields = (Option<i32>, Option<i32>, Option<i64>);

fn fields(i: Option<Interval>) -> Fields {
    match i {
        Some(i) => (Some(i.months), Some(i.days), Some(i.micros)),
        None => (None, None, None),
    }
}

/// A text literal that means `s` whatever `standard_conforming_strings` says.
fn literal(s: &Option<String>) -> String {
    match s {
        None => "NULL::text".into(),
        Some(s) => format!("E'{}'::text", s.replace('\\', "\\\\").replace('\'', "\\'")),
    }
}

fn interval_literal(i: Option<Interval>) -> String {
    match i {
        None => "NULL::interval".into(),
        Some(i) => format!(
            "({} * interval '1 month' + {} * interval '1 day' + {} * interval '1 second' \
             + {} * interval '1 microsecond')",
            i.months,
            i.days,
            i.micros / 1_000_000,
            i.micros % 1_000_000
        ),
    }
}

fn epoch_literal(e: Option<i64>) -> String {
    e.map_or("NULL::bigint".into(), |e| format!("{e}::bigint"))
}

/// The temporary table a block writes its calls' results to (the session's own).
const BLOCK_TABLE: &str = "CREATE TEMP TABLE IF NOT EXISTS leasecheck_late_calls \
     (n int, t0 timestamptz, b boolean, s text, o text, e bigint, x timestamptz, t1 timestamptz); \
     DELETE FROM pg_temp.leasecheck_late_calls";

/// One call of a block: the clock before it, the call into the results table, its ordinal.
fn block_call(n: usize, op: &Op<String, String>) -> String {
    let (columns, call) = match op {
        Op::Acquire {
            key,
            owner,
            ttl,
            wait,
        } => (
            "r.acquired, NULL, NULL, r.epoch, r.expires_at",
            format!(
                "lease.acquire({}, {}, {}, {})",
                literal(key),
                literal(owner),
                interval_literal(*ttl),
                interval_literal(*wait)
            ),
        ),
        Op::Renew {
            key,
            owner,
            epoch,
            ttl,
        } => (
            "NULL, r.status, NULL, NULL, r.expires_at",
            format!(
                "lease.renew({}, {}, {}, {})",
                literal(key),
                literal(owner),
                epoch_literal(*epoch),
                interval_literal(*ttl)
            ),
        ),
        Op::Release { key, owner, epoch } => (
            "NULL, r.status, NULL, NULL, NULL",
            format!(
                "lease.release({}, {}, {})",
                literal(key),
                literal(owner),
                epoch_literal(*epoch)
            ),
        ),
        Op::Inspect { key } => (
            "r.held, NULL, r.owner, r.epoch, r.expires_at",
            format!("lease.inspect({})", literal(key)),
        ),
        Op::Expire { key } => (
            "r.held, NULL, r.owner, r.epoch, r.expires_at",
            format!("lease.inspect({})", literal(&Some(key.clone()))),
        ),
    };
    let from = match op {
        // Keeps a row when inspect returns none.
        Op::Inspect { .. } => format!("(SELECT 1) AS one LEFT JOIN LATERAL {call} AS r ON true"),
        _ => format!("{call} AS r"),
    };
    format!(
        "  v_t0 := pg_catalog.clock_timestamp();\n  INSERT INTO pg_temp.leasecheck_late_calls \
         SELECT {n}, v_t0, {columns}, pg_catalog.clock_timestamp() FROM {from};\n"
    )
}

/// The DO block that sleeps `sleep`, then makes `ops` in order.
fn block_sql(ops: &[Op<String, String>], sleep: Duration) -> String {
    let mut body = format!(
        "DO $leasecheck$\nDECLARE v_t0 timestamptz;\nBEGIN\n  PERFORM pg_catalog.pg_sleep({});\n",
        sleep.as_secs_f64()
    );
    for (n, op) in ops.iter().enumerate() {
        body.push_str(&block_call(n + 1, op));
    }
    body.push_str("END\n$leasecheck$");
    body
}

/// Reads call `n`'s row of a block in the layout of the single call's statement.
fn block_row_sql(kind: Kind) -> &'static str {
    match kind {
        Kind::Acquire => {
            "SELECT t0, b, e, x, t1, NULL::text FROM pg_temp.leasecheck_late_calls WHERE n = $1"
        }
        Kind::Renew => {
            "SELECT t0, s, x, t1, NULL::text FROM pg_temp.leasecheck_late_calls WHERE n = $1"
        }
        Kind::Release => {
            "SELECT t0, s, t1, NULL::text FROM pg_temp.leasecheck_late_calls WHERE n = $1"
        }
        Kind::Inspect => {
            "SELECT t0, b, o, e, x, t1, NULL::text FROM pg_temp.leasecheck_late_calls WHERE n = $1"
        }
    }
}

fn decode(kind: Kind, row: &Row) -> Result<Answer, CallError> {
    match kind {
        Kind::Acquire => sql::decode_acquire(row),
        Kind::Renew => sql::decode_renew(row),
        Kind::Release => sql::decode_release(row),
        Kind::Inspect => sql::decode_inspect(row),
    }
}

/// What came back from a statement of late calls.
enum Answered {
    Rows(Vec<Answer>),
    Error(tokio_postgres::Error),
    Malformed(&'static str, String),
    TimedOut,
}

impl Session {
    /// Makes `ops` (one kind; one ttl and wait for acquires, one ttl for renews) late in
    /// one statement of `form` that first sleeps `sleep`, and records each as an op (see
    /// the module's documentation). A block's results pass through a temporary table of
    /// the session.
    pub async fn call_late(
        &mut self,
        ops: &[Op<String, String>],
        form: Form,
        sleep: Duration,
    ) -> Result<Vec<OpRecord>, RecorderError> {
        let (kind, ttl, wait) = common(ops)?;
        let invoke = self.fresh_conn().await?;
        let Some(conn) = self.conn.as_ref() else {
            return Err(super::not_connected("late calls"));
        };
        let process = conn.process;
        let limit = self.recorder.call_timeout + sleep;
        let run = async {
            match form {
                Form::Batch => batch(conn, kind, ops, ttl, wait, sleep).await,
                Form::Block => block(conn, kind, ops, sleep).await,
            }
        };
        let answered = tokio::time::timeout(limit, run)
            .await
            .unwrap_or(Answered::TimedOut);
        let complete = self.recorder.now();
        let (results, xid): (Vec<(Option<model::Span>, OpResult)>, Option<String>) = match answered
        {
            Answered::Rows(answers) => {
                let xid = answers.iter().rev().find_map(|a| a.xid.clone());
                let results = answers
                    .into_iter()
                    .map(|a| (a.server, OpResult::Ok(a.outcome)))
                    .collect();
                (results, xid)
            }
            Answered::Malformed(call, detail) => {
                return Err(RecorderError::Malformed { call, detail })
            }
            Answered::Error(e) => {
                let result = match failed_result(&e, "a statement of late calls") {
                    Ok(result) => result,
                    Err(bug @ RecorderError::HarnessBug { .. }) => {
                        let call = sql::call_name(&ops[0]);
                        return Err(self.recorder.attribute_bug(call, bug).await);
                    }
                    Err(other) => return Err(other),
                };
                (ops.iter().map(|_| (None, result.clone())).collect(), None)
            }
            Answered::TimedOut => {
                self.cancel_and_retire().await;
                let result = unknown(format!(
                    "no answer within {limit:?} (the statement's sleep and the call timeout)"
                ));
                (ops.iter().map(|_| (None, result.clone())).collect(), None)
            }
        };
        let mut records = Vec::with_capacity(ops.len());
        // A process makes one call at a time (the history's rule): the statement's real
        // time is cut into one slice per call, in the calls' order, which is the order the
        // server made them in.
        let slice = complete.saturating_sub(invoke) / ops.len().max(1) as u64;
        for (i, (op, (server, result))) in ops.iter().zip(results).enumerate() {
            let from = invoke + slice * i as u64;
            let to = match i + 1 == ops.len() {
                true => complete,
                false => (from + slice).saturating_sub(1).max(from),
            };
            let record = OpRecord {
                id: self.recorder.next_op.fetch_add(1, Ordering::Relaxed),
                process,
                txn: self.txn.as_ref().map(|t| t.id),
                call: op.clone(),
                invoke: from,
                complete: to,
                server,
                result,
            };
            self.recorder.record_op(record.clone())?;
            records.push(record);
        }
        if let Some(first) = records.first() {
            self.after_call(first, xid).await?;
        }
        Ok(records)
    }
}

/// The batch SELECT of `ops`; its rows in the calls' order.
async fn batch(
    conn: &super::Conn,
    kind: Kind,
    ops: &[Op<String, String>],
    ttl: Option<Interval>,
    wait: Option<Interval>,
    sleep: Duration,
) -> Answered {
    let keys: Vec<Option<String>> = ops.iter().map(|o| o.key().cloned()).collect();
    let owners: Vec<Option<String>> = ops.iter().map(|o| o.owner().cloned()).collect();
    let epochs: Vec<Option<i64>> = ops
        .iter()
        .map(|o| match o {
            Op::Renew { epoch, .. } | Op::Release { epoch, .. } => *epoch,
            _ => None,
        })
        .collect();
    let (tm, td, tu) = fields(ttl);
    let (wm, wd, wu) = fields(wait);
    let secs = sleep.as_secs_f64();
    let params: Vec<&(dyn ToSql + Sync)> = match kind {
        Kind::Acquire => vec![&keys, &owners, &tm, &td, &tu, &wm, &wd, &wu, &secs],
        Kind::Renew => vec![&keys, &owners, &epochs, &tm, &td, &tu, &secs],
        Kind::Release => vec![&keys, &owners, &epochs, &secs],
        Kind::Inspect => vec![&keys, &secs],
    };
    let rows = match conn.client.query(&batch_sql(kind), &params).await {
        Ok(rows) => rows,
        Err(e) => return Answered::Error(e),
    };
    let mut numbered = Vec::with_capacity(rows.len());
    for row in &rows {
        let last = row.len().saturating_sub(1);
        match row.try_get::<_, i64>(last) {
            Ok(n) => numbered.push((n, row)),
            Err(e) => return Answered::Error(e),
        }
    }
    numbered.sort_by_key(|(n, _)| *n);
    let expected: Vec<i64> = (1..=ops.len() as i64).collect();
    if numbered.iter().map(|(n, _)| *n).collect::<Vec<_>>() != expected {
        return Answered::Malformed(
            sql::call_name(&ops[0]),
            format!(
                "a batch of {} calls returned {} rows",
                ops.len(),
                rows.len()
            ),
        );
    }
    let mut answers = Vec::with_capacity(ops.len());
    for (_, row) in numbered {
        match decode(kind, row) {
            Ok(a) => answers.push(a),
            Err(CallError::Db(e)) => return Answered::Error(e),
            Err(CallError::Malformed { call, detail }) => return Answered::Malformed(call, detail),
        }
    }
    Answered::Rows(answers)
}

/// The DO block of `ops`, then each call's row from the session's table.
async fn block(
    conn: &super::Conn,
    kind: Kind,
    ops: &[Op<String, String>],
    sleep: Duration,
) -> Answered {
    let c = &conn.client;
    if let Err(e) = c.batch_execute(BLOCK_TABLE).await {
        return Answered::Error(e);
    }
    if let Err(e) = c.batch_execute(&block_sql(ops, sleep)).await {
        return Answered::Error(e);
    }
    let mut answers = Vec::with_capacity(ops.len());
    for n in 1..=ops.len() as i32 {
        let row = match c.query_opt(block_row_sql(kind), &[&n]).await {
            Ok(Some(row)) => row,
            Ok(None) => {
                return Answered::Malformed(
                    sql::call_name(&ops[0]),
                    format!("call {n} of a block left no row"),
                )
            }
            Err(e) => return Answered::Error(e),
        };
        match decode(kind, &row) {
            Ok(a) => answers.push(a),
            Err(CallError::Db(e)) => return Answered::Error(e),
            Err(CallError::Malformed { call, detail }) => return Answered::Malformed(call, detail),
        }
    }
    // The transaction id, once the calls (or the table) assigned one.
    if let Some(last) = answers.last_mut() {
        if let Ok(row) = c.query_one(&format!("SELECT {}", sql::XID), &[]).await {
            last.xid = row.try_get(0).ok().flatten();
        }
    }
    Answered::Rows(answers)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_literal_means_its_text_whatever_the_escaping() {
        assert_eq!(
            literal(&Some("k'quote\\back".into())),
            "E'k\\'quote\\\\back'::text"
        );
        assert_eq!(literal(&None), "NULL::text");
        assert_eq!(
            interval_literal(Some(Interval {
                months: 1,
                days: -2,
                micros: -1_500_001
            })),
            "(1 * interval '1 month' + -2 * interval '1 day' + -1 * interval '1 second' + -500001 * interval '1 microsecond')"
        );
    }

    #[test]
    fn the_calls_of_a_statement_share_kind_ttl_and_wait() {
        let a = Op::acquire("k".to_string(), "o".to_string(), Interval::secs(1));
        let b = Op::acquire("k2".to_string(), "o".to_string(), Interval::secs(2));
        assert!(common(&[a.clone(), a.clone()]).is_ok());
        // Negative controls: another ttl, another kind, nothing.
        assert!(common(&[a.clone(), b]).is_err());
        assert!(common(&[a, Op::inspect("k".to_string())]).is_err());
        assert!(common(&[]).is_err());
    }
}
