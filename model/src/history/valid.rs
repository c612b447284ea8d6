//! Semantic validation of a [`History`]: the rules a well-formed recording obeys whatever
//! the server did. A history that breaks one is a recorder bug, not a pg_lease bug, so the
//! checker must not judge it (its verdict would be about the recorder).

use super::{History, NemesisRecord, OpId, OpRecord, ProcessId, TxnId, TxnRecord, WalWriter};
use crate::spec::{Op, Outcome};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

/// The record a [`ValidationError`] is about: its kind, its index in the history's list of
/// that kind, and its id.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RecordRef {
    Op {
        index: usize,
        id: OpId,
    },
    Txn {
        index: usize,
        id: TxnId,
    },
    Nemesis {
        index: usize,
        id: u64,
    },
    /// A commit of the wal line, by its place in the commit order.
    Wal {
        commit: usize,
    },
}

impl fmt::Display for RecordRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RecordRef::Op { id, .. } => write!(f, "op {id}"),
            RecordRef::Txn { id, .. } => write!(f, "txn {id}"),
            RecordRef::Nemesis { id, .. } => write!(f, "nemesis {id}"),
            RecordRef::Wal { commit } => write!(f, "wal commit {commit}"),
        }
    }
}

/// The rule a record breaks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Rule {
    /// An earlier record of the same kind has the same id.
    DuplicateId,
    /// It completes (or ends) before it starts.
    EndsBeforeStart {
        start_field: &'static str,
        start: u64,
        end_field: &'static str,
        end: u64,
    },
    /// An op's call is [`Op::Expire`], which only a lapse nemesis injects.
    ExpireCall,
    /// An op's ok-result is not one its call can return.
    ResultMismatch {
        call: &'static str,
        result: &'static str,
    },
    /// An op of a process starts before the process's previous op completed.
    Overlaps { process: ProcessId, previous: OpId },
    /// An op of a process comes after an op of that process ended unknown.
    AfterRetirement { process: ProcessId, unknown: OpId },
    /// An op names a transaction recorded for another process.
    TxnOfOtherProcess { txn: TxnId, txn_process: ProcessId },
    /// An op lies outside its transaction's `[begin, end_complete]`.
    OutsideTxn { txn: TxnId },
    /// A wal commit is claimed by a record the history does not have (an op in a
    /// transaction is claimed through its transaction).
    UnknownWriter { writer: String },
    /// A wal commit is claimed by a record an earlier commit claimed (a call or a
    /// transaction commits once).
    ClaimedTwice { writer: String },
}

impl Rule {
    /// The wire field (specs/HISTORY.md) the rule is about, for error reports.
    pub fn field(&self) -> &'static str {
        match self {
            Rule::DuplicateId => "id",
            Rule::EndsBeforeStart { end_field, .. } => end_field,
            Rule::ExpireCall => "call",
            Rule::ResultMismatch { .. } => "result.ok",
            Rule::Overlaps { .. } => "invoke_ns",
            Rule::AfterRetirement { .. } => "process",
            Rule::TxnOfOtherProcess { .. } | Rule::OutsideTxn { .. } => "txn",
            Rule::UnknownWriter { .. } | Rule::ClaimedTwice { .. } => "commits.by",
        }
    }
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Rule::DuplicateId => f.write_str("its id is already used by an earlier record"),
            Rule::EndsBeforeStart {
                start_field,
                start,
                end_field,
                end,
            } => write!(f, "{end_field} {end} is before {start_field} {start}"),
            Rule::ExpireCall => f.write_str(
                "its call is expire, which is never called: an injected lapse is a nemesis",
            ),
            Rule::ResultMismatch { call, result } => {
                write!(f, "a {call} call cannot return {result}")
            }
            Rule::Overlaps { process, previous } => write!(
                f,
                "process {process} invoked it before its op {previous} completed \
                 (a process runs one call at a time)"
            ),
            Rule::AfterRetirement { process, unknown } => write!(
                f,
                "process {process} ran it after its op {unknown} ended unknown \
                 (a process is retired after an unknown outcome)"
            ),
            Rule::TxnOfOtherProcess { txn, txn_process } => write!(
                f,
                "it names txn {txn}, which belongs to process {txn_process}"
            ),
            Rule::OutsideTxn { txn } => write!(
                f,
                "it lies outside txn {txn} (from begin_ns to end_complete_ns)"
            ),
            Rule::UnknownWriter { writer } => write!(
                f,
                "it is claimed by {writer}, which the history does not have as an \
                 autocommit call or a transaction"
            ),
            Rule::ClaimedTwice { writer } => write!(
                f,
                "it is claimed by {writer}, which an earlier commit claims (a call or a \
                 transaction commits once)"
            ),
        }
    }
}

/// A history that breaks a rule of specs/HISTORY.md.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{record}: {rule}")]
pub struct ValidationError {
    pub record: RecordRef,
    pub rule: Rule,
}

/// Checks the rules every recorded history obeys (specs/HISTORY.md, "Validity"): unique
/// ids, ordered instants, ok-results that fit their calls, one call at a time per process,
/// no call after an unknown outcome, ops inside their transactions.
pub fn validate(h: &History) -> Result<(), ValidationError> {
    unique_ids(h.ops.iter().map(|o| o.id), |index, id| RecordRef::Op {
        index,
        id,
    })?;
    unique_ids(h.txns.iter().map(|t| t.id), |index, id| RecordRef::Txn {
        index,
        id,
    })?;
    unique_ids(h.nemeses.iter().map(|n| n.id), |index, id| {
        RecordRef::Nemesis { index, id }
    })?;
    for (index, op) in h.ops.iter().enumerate() {
        op_alone(op).map_err(|rule| op_error(index, op, rule))?;
    }
    for (index, txn) in h.txns.iter().enumerate() {
        txn_alone(txn).map_err(|rule| ValidationError {
            record: RecordRef::Txn { index, id: txn.id },
            rule,
        })?;
    }
    for (index, nemesis) in h.nemeses.iter().enumerate() {
        nemesis_alone(nemesis).map_err(|rule| ValidationError {
            record: RecordRef::Nemesis {
                index,
                id: nemesis.id,
            },
            rule,
        })?;
    }
    process_order(h)?;
    txn_membership(h)?;
    wal_claims(h)
}

/// Every commit of the wal line is claimed by an autocommit op or a transaction of the
/// history, each at most once.
fn wal_claims(h: &History) -> Result<(), ValidationError> {
    let Some(wal) = &h.wal else {
        return Ok(());
    };
    let autocommit: BTreeSet<OpId> = h
        .ops
        .iter()
        .filter(|o| o.txn.is_none())
        .map(|o| o.id)
        .collect();
    let txns: BTreeSet<TxnId> = h.txns.iter().map(|t| t.id).collect();
    let mut seen = BTreeSet::new();
    for (commit, c) in wal.commits.iter().enumerate() {
        let Some(by) = c.by else { continue };
        let writer = by.to_string();
        let exists = match by {
            WalWriter::Op(id) => autocommit.contains(&id),
            WalWriter::Txn(id) => txns.contains(&id),
        };
        let rule = if !exists {
            Rule::UnknownWriter { writer }
        } else if !seen.insert(by) {
            Rule::ClaimedTwice { writer }
        } else {
            continue;
        };
        return Err(ValidationError {
            record: RecordRef::Wal { commit },
            rule,
        });
    }
    for (index, &absent) in wal.absent.iter().enumerate() {
        let writer = absent.to_string();
        let exists = match absent {
            WalWriter::Op(id) => autocommit.contains(&id),
            WalWriter::Txn(id) => txns.contains(&id),
        };
        let rule = match (exists, seen.contains(&absent)) {
            (false, _) => Rule::UnknownWriter { writer },
            (true, true) => Rule::ClaimedTwice { writer },
            (true, false) => continue,
        };
        return Err(ValidationError {
            record: RecordRef::Wal {
                commit: wal.commits.len() + index,
            },
            rule,
        });
    }
    Ok(())
}

fn op_error(index: usize, op: &OpRecord, rule: Rule) -> ValidationError {
    ValidationError {
        record: RecordRef::Op { index, id: op.id },
        rule,
    }
}

fn unique_ids(
    ids: impl Iterator<Item = u64>,
    record: impl Fn(usize, u64) -> RecordRef,
) -> Result<(), ValidationError> {
    let mut seen = BTreeSet::new();
    for (index, id) in ids.enumerate() {
        if !seen.insert(id) {
            return Err(ValidationError {
                record: record(index, id),
                rule: Rule::DuplicateId,
            });
        }
    }
    Ok(())
}

fn ordered(
    start_field: &'static str,
    start: u64,
    end_field: &'static str,
    end: u64,
) -> Result<(), Rule> {
    if start <= end {
        Ok(())
    } else {
        Err(Rule::EndsBeforeStart {
            start_field,
            start,
            end_field,
            end,
        })
    }
}

/// The rules one op obeys on its own.
fn op_alone(op: &OpRecord) -> Result<(), Rule> {
    ordered("invoke_ns", op.invoke, "complete_ns", op.complete)?;
    if matches!(op.call, Op::Expire { .. }) {
        return Err(Rule::ExpireCall);
    }
    match &op.result {
        super::OpResult::Ok(outcome) => result_fits(&op.call, outcome),
        _ => Ok(()),
    }
}

/// An ok-result must be one of the answers its call returns; the error outcomes
/// (invalid input, timeout, failed, unknown) are `fail` and `unknown` results instead.
fn result_fits(call: &Op<String, String>, outcome: &Outcome<String>) -> Result<(), Rule> {
    let (call_name, fits) = match call {
        Op::Acquire { .. } => (
            "acquire",
            matches!(outcome, Outcome::Acquired { .. } | Outcome::Denied),
        ),
        Op::Renew { .. } => (
            "renew",
            matches!(
                outcome,
                Outcome::Renewed { .. }
                    | Outcome::NotOwner
                    | Outcome::Lapsed
                    | Outcome::EpochMismatch
            ),
        ),
        Op::Release { .. } => (
            "release",
            matches!(
                outcome,
                Outcome::Released | Outcome::NotOwner | Outcome::Lapsed | Outcome::EpochMismatch
            ),
        ),
        Op::Inspect { .. } => ("inspect", matches!(outcome, Outcome::Inspected(_))),
        Op::Expire { .. } => ("expire", false),
    };
    if fits {
        Ok(())
    } else {
        Err(Rule::ResultMismatch {
            call: call_name,
            result: outcome_name(outcome),
        })
    }
}

fn outcome_name(outcome: &Outcome<String>) -> &'static str {
    match outcome {
        Outcome::Acquired { .. } => "a grant",
        Outcome::Denied => "a denial",
        Outcome::Timeout => "a timeout (a fail result)",
        Outcome::Renewed { .. } => "status ok with an expiry",
        Outcome::Released => "status ok",
        Outcome::NotOwner => "status not_owner",
        Outcome::Lapsed => "status lapsed",
        Outcome::EpochMismatch => "status epoch_mismatch",
        Outcome::Inspected(_) => "an inspect row",
        Outcome::InvalidInput => "invalid input (a fail result)",
        Outcome::Injected | Outcome::NotInjected => "an injected lapse",
        Outcome::Failed => "a failure (a fail result)",
        Outcome::Unknown => "an unknown outcome (an unknown result)",
    }
}

fn txn_alone(txn: &TxnRecord) -> Result<(), Rule> {
    ordered("begin_ns", txn.begin, "end_invoke_ns", txn.end_invoke)?;
    ordered(
        "end_invoke_ns",
        txn.end_invoke,
        "end_complete_ns",
        txn.end_complete,
    )
}

fn nemesis_alone(nemesis: &NemesisRecord) -> Result<(), Rule> {
    ordered("start_ns", nemesis.start, "end_ns", nemesis.end)
}

/// Per process: calls one at a time, and none after an unknown outcome.
fn process_order(h: &History) -> Result<(), ValidationError> {
    let mut by_process: BTreeMap<ProcessId, Vec<usize>> = BTreeMap::new();
    for (index, op) in h.ops.iter().enumerate() {
        by_process.entry(op.process).or_default().push(index);
    }
    for (process, mut indices) in by_process {
        indices.sort_by_key(|i| (h.ops[*i].invoke, h.ops[*i].complete, *i));
        let mut previous: Option<&OpRecord> = None;
        for index in indices {
            let op = &h.ops[index];
            if let Some(prev) = previous {
                if prev.result.is_unknown() {
                    let rule = Rule::AfterRetirement {
                        process,
                        unknown: prev.id,
                    };
                    return Err(op_error(index, op, rule));
                }
                if op.invoke < prev.complete {
                    let rule = Rule::Overlaps {
                        process,
                        previous: prev.id,
                    };
                    return Err(op_error(index, op, rule));
                }
            }
            previous = Some(op);
        }
    }
    Ok(())
}

/// An op's transaction, when recorded, is its process's and spans it. A transaction
/// without a record is allowed: the recorder died before its end.
fn txn_membership(h: &History) -> Result<(), ValidationError> {
    let txns: BTreeMap<TxnId, &TxnRecord> = h.txns.iter().map(|t| (t.id, t)).collect();
    for (index, op) in h.ops.iter().enumerate() {
        let Some(txn) = op.txn.and_then(|id| txns.get(&id)) else {
            continue;
        };
        if txn.process != op.process {
            let rule = Rule::TxnOfOtherProcess {
                txn: txn.id,
                txn_process: txn.process,
            };
            return Err(op_error(index, op, rule));
        }
        if op.invoke < txn.begin || op.complete > txn.end_complete {
            return Err(op_error(index, op, Rule::OutsideTxn { txn: txn.id }));
        }
    }
    Ok(())
}
