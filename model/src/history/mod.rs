//! Histories, format v2 (specs/HISTORY.md): what a recorder saw while clients ran pg_lease
//! calls concurrently, in a form the [checker](crate::checker) judges.
//!
//! A history holds three kinds of record:
//! - [`OpRecord`]: one call by one process, with its invoke and complete instants on the
//!   recorder's monotonic clock, the server-time window `[t0, t1]` the server reported for
//!   it, and its [`OpResult`]: `ok`, `fail` (the server definitely did not apply it) or
//!   `unknown` (it may take effect at any instant after its invoke, or never; its process is
//!   retired).
//! - [`TxnRecord`]: an explicit transaction (the ops that carry its id) and how it ended.
//! - [`NemesisRecord`]: an injected fault, with the effect the checker must apply.
//!
//! The JSON Lines encoding is in [`jsonl`]; [`validate`] checks the rules every recorded
//! history obeys. This module is pure data.

pub mod jsonl;
mod valid;
pub mod wal;

pub use valid::{validate, RecordRef, Rule, ValidationError};
pub use wal::{resolve, Resolution, WalChange, WalCommit, WalEnded, WalLog, WalRow, WalWriter};

use crate::fate::{self, Fate};
use crate::spec::{Op, Outcome};
use crate::time::Span;
use std::collections::BTreeMap;

/// The `format` value of a history's header line.
pub const FORMAT: &str = "leasecheck-history";
/// The format version this crate reads and writes.
pub const VERSION: u32 = 2;

/// A client session of a history. A process runs one call at a time; once a call of it
/// ended `unknown`, the process is retired and never used again (the Jepsen convention).
pub type ProcessId = u32;
/// An operation's id, unique within a history.
pub type OpId = u64;
/// A transaction's id, unique within a history.
pub type TxnId = u64;
/// An instant on the recorder's monotonic clock: nanoseconds since the recorder started.
/// Only the order of instants matters (real-time order of calls).
pub type Nanos = u64;

/// One call of the pg_lease API, as recorded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OpRecord {
    pub id: OpId,
    pub process: ProcessId,
    /// The explicit transaction the call ran in (`None`: autocommit).
    pub txn: Option<TxnId>,
    /// The call and its arguments as sent (`None` is SQL `NULL`). Never [`Op::Expire`]: an
    /// injected lapse is a [`NemesisRecord`].
    pub call: Op<String, String>,
    /// When the call was sent.
    pub invoke: Nanos,
    /// When its answer arrived, or when the client gave up on it (for `unknown`).
    pub complete: Nanos,
    /// The server-time window (`clock_timestamp()`, Unix microseconds) within which the
    /// call took effect, as the server reported it in the same round trip. `None` when no
    /// answer came back; the checker then derives a window from the calls around it.
    pub server: Option<Span>,
    pub result: OpResult,
}

/// What came back from a call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum OpResult {
    /// The call returned this outcome (never `InvalidInput`, `Timeout`, `Failed` or
    /// `Unknown`: those are `Fail` and `Unknown`).
    Ok(Outcome<String>),
    /// The server answered with an error.
    Fail { sqlstate: String, message: String },
    /// No answer: a lost connection, a client timeout, a crash.
    Unknown { reason: String },
}

impl OpResult {
    /// The outcome the spec judges: the error-fate table decides whether a failure is
    /// definite ([`Outcome::InvalidInput`], [`Outcome::Timeout`], [`Outcome::Failed`]) or
    /// leaves the effect unknown ([`Outcome::Unknown`]).
    pub fn outcome(&self) -> Outcome<String> {
        match self {
            OpResult::Ok(o) => o.clone(),
            OpResult::Unknown { .. } => Outcome::Unknown,
            OpResult::Fail { sqlstate, message } => {
                match fate::of_sqlstate(sqlstate) {
                    Fate::Unknown(_) => Outcome::Unknown,
                    // A success class in a fail record is a recorder bug; judge it as
                    // "no answer" rather than as an answer.
                    Fate::Ok => Outcome::Unknown,
                    Fate::Failed(_) | Fate::HarnessBug(_) | Fate::OutsideContract => {
                        if sqlstate == fate::INVALID_PARAMETER_VALUE {
                            Outcome::InvalidInput
                        } else if fate::is_wait_exhausted(sqlstate, message) {
                            Outcome::Timeout
                        } else {
                            Outcome::Failed
                        }
                    }
                }
            }
        }
    }

    /// True when the effect of the call is unknown.
    pub fn is_unknown(&self) -> bool {
        self.outcome() == Outcome::Unknown
    }
}

/// The isolation level of an explicit transaction. The checker judges every level by the
/// READ COMMITTED contract (each statement sees the latest committed state and its own
/// transaction's writes); pg_lease must behave so, or refuse.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Isolation {
    #[default]
    ReadCommitted,
    RepeatableRead,
    Serializable,
}

impl Isolation {
    /// The SQL spelling (`read committed`, ...).
    pub fn sql(self) -> &'static str {
        match self {
            Isolation::ReadCommitted => "read committed",
            Isolation::RepeatableRead => "repeatable read",
            Isolation::Serializable => "serializable",
        }
    }

    /// The level spelled `s` in SQL (case-insensitive).
    pub fn from_sql(s: &str) -> Option<Isolation> {
        let s = s.trim().to_ascii_lowercase();
        [
            Isolation::ReadCommitted,
            Isolation::RepeatableRead,
            Isolation::Serializable,
        ]
        .into_iter()
        .find(|i| i.sql() == s)
    }
}

/// How an explicit transaction ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum TxnEnd {
    /// COMMIT returned success.
    Commit,
    /// ROLLBACK, an error that aborted it, or a connection lost before COMMIT was sent:
    /// none of its ops took effect.
    Rollback,
    /// COMMIT was sent and its answer lost (unresolved by `pg_xact_status`): it may have
    /// committed at any instant after `end_invoke`, or not at all.
    Unknown,
}

/// One explicit transaction.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TxnRecord {
    pub id: TxnId,
    pub process: ProcessId,
    pub isolation: Isolation,
    /// When BEGIN was sent.
    pub begin: Nanos,
    pub end: TxnEnd,
    /// When COMMIT or ROLLBACK was sent (or the transaction was found aborted).
    pub end_invoke: Nanos,
    /// When its answer arrived, or the client gave up.
    pub end_complete: Nanos,
}

/// What an injected fault does to lease state, as the checker applies it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NemesisEffect {
    /// No direct effect on state (a pause, a cut, a killed backend, a cancel): its
    /// consequences show as failed or unknown ops.
    None,
    /// The server stopped and came back: open transactions are lost; committed state
    /// stands. `down` is the server-time window from the last instant the old server was
    /// seen up to the first instant the new one answered, when known.
    Restart { clean: bool, down: Option<Span> },
    /// A clock-independent lapse: the lease on `key` (if held and live) was made to expire
    /// at the server's current time, inside `server`. `applied` is `None` when the step's
    /// answer was lost.
    Lapse {
        key: String,
        server: Option<Span>,
        applied: Option<bool>,
    },
}

/// One injected fault.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NemesisRecord {
    pub id: u64,
    /// The fault's name (e.g. `crash`, `pause`, `cut-reset`, `lapse`).
    pub fault: String,
    pub start: Nanos,
    pub end: Nanos,
    pub effect: NemesisEffect,
    /// Free text for a reader (which backend, which process, how long).
    pub detail: String,
}

/// A recorded history.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct History {
    /// Free-form facts about the run (target, PostgreSQL version, seed, workload).
    pub meta: BTreeMap<String, serde_json::Value>,
    pub ops: Vec<OpRecord>,
    pub txns: Vec<TxnRecord>,
    pub nemeses: Vec<NemesisRecord>,
    /// The lease table's committed changes, when the recorder decoded them (specs/HISTORY.md,
    /// "Wal line"): they resolve lost calls ([`resolve`]).
    pub wal: Option<WalLog>,
}

impl History {
    /// The transaction with id `id`.
    pub fn txn(&self, id: TxnId) -> Option<&TxnRecord> {
        self.txns.iter().find(|t| t.id == id)
    }

    /// The op with id `id`.
    pub fn op(&self, id: OpId) -> Option<&OpRecord> {
        self.ops.iter().find(|o| o.id == id)
    }
}
