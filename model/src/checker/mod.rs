//! The linearizability checker: does a recorded [`History`] of concurrent pg_lease calls
//! have a linearization the one [`Spec`] accepts?
//!
//! How (specs/HISTORY.md, "How a history is judged"):
//! 1. Every op gets a server-time window: the one it reported, or for an op without an
//!    answer, one derived from the ops around it (an unknown op's window is open-ended).
//! 2. The history is split into [`Partition`]s by key: keys never interact (invariant 8),
//!    except that a transaction touching several keys keeps them together.
//! 3. Linear pre-checks ([`precheck`]) look for the common violations in O(n log n).
//! 4. Each partition is searched ([`search`]) depth-first for a linearization, Wing-Gong/Lowe
//!    style with memoisation of (linearized set, possible states), as Porcupine does. A step
//!    applies one entry (an op, a transaction end, a nemesis event) to every state still
//!    possible ([`state`]); the spec judges expiry three-valued from the window.
//!
//! The verdict is three-valued: a spent budget is [`Verdict::Unknown`], never a pass.

mod diagnose;
mod explain;
pub mod intern;
mod partition;
pub mod precheck;
mod search;
pub mod state;

pub use explain::describe_call;
pub use partition::{merge, partition, Entry, EntryKind, Partition, Windows};
pub use state::{PState, Reject};

use crate::history::{History, OpId, TxnId};
use crate::invariant::Invariant;
use crate::spec::Spec;
use std::fmt;
use std::time::{Duration, Instant};

/// Limits on one check. A check that reaches one ends [`Verdict::Unknown`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Budget {
    /// Wall-clock time for the whole check.
    pub time: Option<Duration>,
    /// Search states memoised, summed over partitions (each costs memory).
    pub states: Option<u64>,
}

impl Default for Budget {
    /// 60 s and 20 million states (a few GiB at most).
    fn default() -> Self {
        Budget {
            time: Some(Duration::from_secs(60)),
            states: Some(20_000_000),
        }
    }
}

/// How to check.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CheckOptions {
    /// The semantics to judge by ([`Spec::CORRECT`] unless testing the checker).
    pub spec: Spec,
    pub budget: Budget,
    /// Run the linear pre-checks before the search.
    pub prechecks: bool,
    /// On a violation, look for the known bug class that explains it (at most this long).
    pub diagnosis: Option<Duration>,
}

impl Default for CheckOptions {
    fn default() -> Self {
        CheckOptions {
            spec: Spec::CORRECT,
            budget: Budget::default(),
            prechecks: true,
            diagnosis: Some(Duration::from_secs(5)),
        }
    }
}

/// One entry of a linearization, for reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Step {
    Op(OpId),
    /// The end (commit, rollback) of a transaction.
    TxnEnd(TxnId),
    /// A nemesis event, by its id.
    Nemesis(u64),
}

impl fmt::Display for Step {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Step::Op(id) => write!(f, "op {id}"),
            Step::TxnEnd(id) => write!(f, "end of txn {id}"),
            Step::Nemesis(id) => write!(f, "nemesis {id}"),
        }
    }
}

/// Which part of the checker found a violation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FoundBy {
    /// A linear pre-check, by name.
    Precheck(&'static str),
    /// The linearization search.
    Search,
}

/// A history no linearization explains.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Violation {
    /// The keys of the partition the violation is in (usually one).
    pub keys: Vec<String>,
    /// The invariant the offending op breaks.
    pub invariant: Invariant,
    /// The ops involved, the offending op first.
    pub ops: Vec<OpId>,
    /// The longest linearizable prefix found: entries in linearization order. Empty for a
    /// pre-check's finding.
    pub prefix: Vec<Step>,
    /// A plain-text explanation a person can follow.
    pub explanation: String,
    pub found_by: FoundBy,
    /// The known bug class (a mutation of the catalogue) the history is consistent with,
    /// when one is; it names the invariant.
    pub diagnosis: Option<crate::mutation::Mutation>,
    /// Other known bug classes the history is consistent with too.
    pub also_consistent_with: Vec<crate::mutation::Mutation>,
}

impl Violation {
    /// The key the violation is on (the first of its partition's keys).
    pub fn key(&self) -> Option<&str> {
        self.keys.first().map(String::as_str)
    }
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "VIOLATION of invariant {} ({})",
            self.invariant.number(),
            self.invariant
        )?;
        f.write_str(&self.explanation)
    }
}

/// Figures of a check.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    pub ops: usize,
    pub partitions: usize,
    /// Search states memoised, over all partitions searched.
    pub states: u64,
    pub elapsed: Duration,
}

/// Which budget ran out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Exhausted {
    Time(Duration),
    States(u64),
}

/// Where a check stopped when its budget ran out.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Spent {
    pub exhausted: Exhausted,
    /// The keys of the partition being searched.
    pub keys: Vec<String>,
    pub stats: Stats,
}

/// The verdict on a history.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    Linearizable(Stats),
    Violation(Box<Violation>),
    /// The budget ran out before a verdict: never a pass.
    Unknown(Box<Spent>),
}

impl Verdict {
    pub fn is_linearizable(&self) -> bool {
        matches!(self, Verdict::Linearizable(_))
    }

    pub fn violation(&self) -> Option<&Violation> {
        match self {
            Verdict::Violation(v) => Some(v),
            _ => None,
        }
    }

    /// The invariant a violation breaks.
    pub fn invariant(&self) -> Option<Invariant> {
        self.violation().map(|v| v.invariant)
    }

    /// Exit status convention of `leasecheck check-history`: 0 linearizable, 1 violation,
    /// 2 unknown.
    pub fn exit_code(&self) -> i32 {
        match self {
            Verdict::Linearizable(_) => 0,
            Verdict::Violation(_) => 1,
            Verdict::Unknown(_) => 2,
        }
    }
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Verdict::Linearizable(s) => write!(
                f,
                "LINEARIZABLE: {} ops in {} partitions, {} search states, {:.3?}",
                s.ops, s.partitions, s.states, s.elapsed
            ),
            Verdict::Violation(v) => write!(f, "{v}"),
            Verdict::Unknown(s) => {
                let what = match s.exhausted {
                    Exhausted::Time(t) => format!("time budget of {t:.1?}"),
                    Exhausted::States(n) => format!("state budget of {n} states"),
                };
                write!(
                    f,
                    "UNKNOWN: the {what} ran out while searching keys {:?} \
                     ({} ops, {} states so far); this is not a pass: raise --budget or \
                     resolve unknown outcomes",
                    s.keys, s.stats.ops, s.stats.states
                )
            }
        }
    }
}

/// The running budget of one check, shared by its partitions.
pub(crate) struct Meter {
    start: Instant,
    budget: Budget,
    pub(crate) states: u64,
    steps: u64,
}

impl Meter {
    pub(crate) fn new(budget: Budget) -> Meter {
        Meter {
            start: Instant::now(),
            budget,
            states: 0,
            steps: 0,
        }
    }

    /// Counts one search step: the budget that ran out, if one did. The state budget is
    /// checked every step, the clock every 64 steps (reading it costs more than a step).
    pub(crate) fn tick(&mut self) -> Option<Exhausted> {
        self.steps += 1;
        if let Some(limit) = self.budget.states {
            if self.states >= limit {
                return Some(Exhausted::States(limit));
            }
        }
        if self.steps % 64 == 1 {
            return self.exhausted();
        }
        None
    }

    /// The budget that ran out, if one did.
    pub(crate) fn exhausted(&self) -> Option<Exhausted> {
        if let Some(limit) = self.budget.states {
            if self.states >= limit {
                return Some(Exhausted::States(limit));
            }
        }
        if let Some(limit) = self.budget.time {
            if self.start.elapsed() >= limit {
                return Some(Exhausted::Time(limit));
            }
        }
        None
    }
}

/// Judges `history`.
pub fn check(history: &History, options: &CheckOptions) -> Verdict {
    let mut meter = Meter::new(options.budget);
    let prepared = intern::Prepared::new(history);
    let windows = Windows::derive(history);
    let parts = partition(history, &windows);
    let stats = |meter: &Meter| Stats {
        ops: history.ops.len(),
        partitions: parts.len(),
        states: meter.states,
        elapsed: meter.start.elapsed(),
    };
    if options.prechecks {
        for part in &parts {
            if let Some(v) = precheck::run(&options.spec, history, part) {
                return Verdict::Violation(Box::new(diagnosed(
                    history, &prepared, part, &parts, v, options,
                )));
            }
        }
    }
    for part in &parts {
        let cx = intern::Ctx {
            spec: &options.spec,
            history,
            prepared: &prepared,
            part,
        };
        match search::search(cx, &mut meter) {
            search::Outcome::Linearizable => {}
            search::Outcome::Violation(v) => {
                return Verdict::Violation(Box::new(diagnosed(
                    history, &prepared, part, &parts, *v, options,
                )))
            }
            search::Outcome::Exhausted(exhausted) => {
                return Verdict::Unknown(Box::new(Spent {
                    exhausted,
                    keys: part.keys.clone(),
                    stats: stats(&meter),
                }))
            }
        }
    }
    Verdict::Linearizable(stats(&meter))
}

/// `v` with the known bug class that explains its partition, if diagnosis is on and finds
/// one: its invariant replaces the symptom's.
fn diagnosed(
    history: &History,
    prepared: &intern::Prepared,
    part: &Partition,
    parts: &[Partition],
    mut v: Violation,
    options: &CheckOptions,
) -> Violation {
    let Some(time) = options.diagnosis else {
        return v;
    };
    if options.spec != Spec::CORRECT {
        return v;
    }
    let offending = v.ops.first().copied();
    let explaining = diagnose::diagnose(
        history,
        prepared,
        part,
        parts,
        (v.invariant, offending),
        time,
    );
    let Some(&m) = explaining.first() else {
        return v;
    };
    if let Some(inv) = m.expected() {
        if inv != v.invariant {
            v.explanation.push_str(&format!(
                "The first symptom points to invariant {} ({}), but the history is consistent \
                 with a known bug class that breaks invariant {} instead.\n",
                v.invariant.number(),
                v.invariant,
                inv.number()
            ));
        }
        v.explanation.push_str(&format!(
            "Diagnosis: the history is consistent with the known bug \"{}\": {}; this breaks \
             invariant {} ({}): {}\n",
            m.name(),
            m.description(),
            inv.number(),
            inv,
            inv.statement()
        ));
        v.invariant = inv;
    }
    for other in &explaining[1..] {
        v.explanation.push_str(&format!(
            "It is also consistent with \"{}\": {} (invariant {}).\n",
            other.name(),
            other.description(),
            other.expected().map_or(0, |i| i.number())
        ));
    }
    v.diagnosis = Some(m);
    v.also_consistent_with = explaining[1..].to_vec();
    v
}
