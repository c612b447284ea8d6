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

mod coverage;
mod diagnose;
mod explain;
mod fire;
pub mod intern;
mod partition;
pub mod precheck;
mod resolved;
mod search;
pub mod state;

pub use coverage::{Coverage, Tally};
pub use explain::describe_call;
pub use partition::{merge, partition, Entry, EntryKind, Partition, Windows};
pub use resolved::{patched, resolution, Resolved};
pub use state::{PState, Reject};

use crate::history::{History, OpId, TxnId};
use crate::invariant::Invariant;
use crate::spec::Spec;
use std::collections::BTreeSet;
use std::fmt;
use std::time::{Duration, Instant};

/// Limits on one check: every bound of the search comes from here. A check that reaches
/// one ends [`Verdict::Unknown`], naming it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Budget {
    /// Wall-clock time for the whole check (`--budget`).
    pub time: Option<Duration>,
    /// Search states kept, summed over partitions: memoised ones and those the unknown
    /// outcomes pending at one point can lead to (`--max-states`).
    pub states: Option<u64>,
    /// Bytes the search's states may take, estimated from their sizes (`--max-memory`):
    /// the memo and the states of the current point. The process's resident memory is
    /// this plus the history, and up to about twice it (allocator and hash table slack).
    pub memory: Option<u64>,
}

impl Budget {
    /// No limit at all (tests and the brute-force oracle).
    pub const UNLIMITED: Budget = Budget {
        time: None,
        states: None,
        memory: None,
    };
}

impl Default for Budget {
    /// 60 s, 20 million states and 2 GiB of states.
    fn default() -> Self {
        Budget {
            time: Some(Duration::from_secs(60)),
            states: Some(20_000_000),
            memory: Some(2 << 30),
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
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    pub ops: usize,
    pub partitions: usize,
    /// Search states memoised, over all partitions searched.
    pub states: u64,
    /// Their estimated size in bytes, at its highest.
    pub bytes: u64,
    pub elapsed: Duration,
    /// The lost calls the history's wal line resolved (`None`: it has none).
    pub resolved: Option<Resolved>,
    /// The spec branches the linearization took (empty unless linearizable).
    pub coverage: Coverage,
}

/// Which budget ran out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Exhausted {
    Time(Duration),
    States(u64),
    /// Bytes of states (estimated).
    Memory(u64),
}

impl Exhausted {
    /// The budget, as a person reads it.
    pub fn what(&self) -> String {
        match self {
            Exhausted::Time(t) => format!("time budget of {t:.1?}"),
            Exhausted::States(n) => format!("state budget of {n} states"),
            Exhausted::Memory(b) => format!("memory budget of {}", fmt_bytes(*b)),
        }
    }

    /// The command-line option of `leasecheck check-history` (and `leasecheck check`)
    /// that raises it.
    pub fn flag(&self) -> &'static str {
        match self {
            Exhausted::Time(_) => "--budget",
            Exhausted::States(_) => "--max-states",
            Exhausted::Memory(_) => "--max-memory",
        }
    }
}

/// `n` bytes as `512 MiB`, `2.5 GiB`.
pub fn fmt_bytes(n: u64) -> String {
    const MIB: f64 = (1u64 << 20) as f64;
    let mib = n as f64 / MIB;
    if mib >= 1024.0 {
        format!("{:.1} GiB", mib / 1024.0)
    } else {
        format!("{mib:.0} MiB")
    }
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
    pub fn exit(&self) -> crate::Exit {
        match self {
            Verdict::Linearizable(_) => crate::Exit::Passed,
            Verdict::Violation(_) => crate::Exit::Finding,
            Verdict::Unknown(_) => crate::Exit::NoVerdict,
        }
    }
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Verdict::Linearizable(s) => write!(
                f,
                "LINEARIZABLE: {} ops in {} partitions, {} search states (about {} at \
                 most), {:.3?}{}{}",
                s.ops,
                s.partitions,
                s.states,
                fmt_bytes(s.bytes),
                s.elapsed,
                resolved_note(s.resolved),
                coverage_note(&s.coverage)
            ),
            Verdict::Violation(v) => write!(f, "{v}"),
            Verdict::Unknown(s) => write!(
                f,
                "UNKNOWN: the {} ran out while searching keys [{}] ({} ops, {} states so \
                 far, about {} of them); this is not a pass: raise it with {}{}",
                s.exhausted.what(),
                explain::quoted_list(&s.keys),
                s.stats.ops,
                s.stats.states,
                fmt_bytes(s.stats.bytes),
                s.exhausted.flag(),
                match s.stats.resolved {
                    // lost calls are what makes a search large: say how they resolve
                    None =>
                        " (or record the lease table's commits so that lost calls \
                             resolve: a campaign on a server with wal_level = logical writes \
                             them as the history's wal line, specs/HISTORY.md)",
                    Some(_) => "",
                }
            )
            .and_then(|()| f.write_str(&resolved_note(s.stats.resolved))),
        }
    }
}

/// `; its linearization took N of the spec's M branches` (and why the count may be short).
fn coverage_note(c: &Coverage) -> String {
    let partial = if c.partial {
        " (the budget ran out while counting: some keys not counted)"
    } else {
        ""
    };
    format!(
        "; its linearization took {} of the spec's {} branches{partial}",
        c.reached(),
        crate::branch::Branch::ALL.len()
    )
}

/// `; the write-ahead log resolved ...` for a history with a wal line and lost calls, else
/// nothing.
fn resolved_note(resolved: Option<Resolved>) -> String {
    match resolved {
        Some(r) if r.unreadable > 0 && r.open > 0 => format!(
            "; the write-ahead log resolved none of {} lost calls: {} of its changes of the \
             lease table could not be read, and a change of an unknown key could be any \
             call's",
            r.open, r.unreadable
        ),
        Some(r) if r.took_effect + r.never + r.open > 0 => format!(
            "; the write-ahead log resolved {} of {} lost calls ({} committed, {} wrote nothing)",
            r.took_effect + r.never,
            r.took_effect + r.never + r.open,
            r.took_effect,
            r.never
        ),
        _ => String::new(),
    }
}

/// The running budget of one check, shared by its partitions.
pub(crate) struct Meter {
    start: Instant,
    budget: Budget,
    /// States memoised so far.
    pub(crate) states: u64,
    /// Their estimated bytes.
    pub(crate) bytes: u64,
    /// The highest `bytes + transient` seen.
    pub(crate) peak: u64,
    steps: u64,
}

impl Meter {
    pub(crate) fn new(budget: Budget) -> Meter {
        Meter {
            start: Instant::now(),
            budget,
            states: 0,
            bytes: 0,
            peak: 0,
            steps: 0,
        }
    }

    /// The budget left of `budget` after this meter's use (for the work that follows a
    /// verdict: explanation, diagnosis).
    pub(crate) fn remaining(&self) -> Budget {
        Budget {
            time: self
                .budget
                .time
                .map(|t| t.saturating_sub(self.start.elapsed())),
            states: self.budget.states.map(|n| n.saturating_sub(self.states)),
            memory: self.budget.memory,
        }
    }

    /// Counts one search step: the budget that ran out, if one did. States and memory are
    /// checked every step, the clock every 64 steps (reading it costs more than a step).
    pub(crate) fn tick(&mut self) -> Option<Exhausted> {
        self.steps += 1;
        if let Some(e) = self.over(0, 0) {
            return Some(e);
        }
        if self.steps % 64 == 1 {
            return self.exhausted();
        }
        None
    }

    /// The states or memory budget, were `states` more states of `bytes` more bytes kept
    /// beside the memo (the states of a closure being built).
    pub(crate) fn over(&mut self, states: u64, bytes: u64) -> Option<Exhausted> {
        self.peak = self.peak.max(self.bytes.saturating_add(bytes));
        if let Some(limit) = self.budget.states {
            if self.states.saturating_add(states) >= limit {
                return Some(Exhausted::States(limit));
            }
        }
        if let Some(limit) = self.budget.memory {
            if self.bytes.saturating_add(bytes) >= limit {
                return Some(Exhausted::Memory(limit));
            }
        }
        None
    }

    /// The time budget, looked at every 64 calls (for loops between search steps).
    pub(crate) fn clock(&mut self) -> Option<Exhausted> {
        self.steps += 1;
        if self.steps % 64 != 1 {
            return None;
        }
        let limit = self.budget.time?;
        (self.start.elapsed() >= limit).then_some(Exhausted::Time(limit))
    }

    /// The budget that ran out, if one did.
    pub(crate) fn exhausted(&mut self) -> Option<Exhausted> {
        if let Some(e) = self.over(0, 0) {
            return Some(e);
        }
        if let Some(limit) = self.budget.time {
            if self.start.elapsed() >= limit {
                return Some(Exhausted::Time(limit));
            }
        }
        None
    }
}

/// Judges `history`, with its lost calls resolved by its wal line when it has one
/// ([`patched`]).
pub fn check(history: &History, options: &CheckOptions) -> Verdict {
    match patched(history) {
        Some((resolved_history, resolution)) => {
            let unreadable = history.wal.as_ref().map_or(0, |w| w.unreadable.len());
            let resolved = Some(Resolved {
                unreadable,
                ..Resolved::from(&resolution)
            });
            let found: BTreeSet<usize> = resolved_history
                .ops
                .iter()
                .enumerate()
                .filter(|(_, o)| resolution.took_effect.contains_key(&o.id))
                .map(|(i, _)| i)
                .collect();
            let mut verdict = check_as_recorded(&resolved_history, options, found);
            match &mut verdict {
                Verdict::Linearizable(stats) => stats.resolved = resolved,
                Verdict::Unknown(spent) => spent.stats.resolved = resolved,
                Verdict::Violation(v) => {
                    let paragraph = resolved::explained(&resolution, &v.ops);
                    v.explanation.push_str(&paragraph);
                }
            }
            verdict
        }
        None => check_as_recorded(history, options, BTreeSet::new()),
    }
}

/// Judges `history` as it stands; `resolved` holds the indices of its ops that are lost
/// calls the write-ahead log found committed (for the coverage).
fn check_as_recorded(
    history: &History,
    options: &CheckOptions,
    resolved: BTreeSet<usize>,
) -> Verdict {
    let marks = coverage::Marks::of(history, resolved);
    let mut meter = Meter::new(options.budget);
    let prepared = intern::Prepared::new(history);
    let windows = Windows::derive(history);
    let parts = partition(history, &windows);
    let stats = |meter: &Meter| Stats {
        ops: history.ops.len(),
        partitions: parts.len(),
        states: meter.states,
        bytes: meter.peak,
        elapsed: meter.start.elapsed(),
        resolved: None,
        coverage: Coverage::default(),
    };
    let mut covered = Coverage::default();
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
            search::Outcome::Linearizable(witness) => {
                match coverage::of(cx, &witness, &marks, &mut meter) {
                    Some(c) => covered.merge(&c),
                    None => covered.partial = true,
                }
            }
            search::Outcome::Violation(d) => {
                let v = explain::violation(cx, &d, meter.remaining());
                return Verdict::Violation(Box::new(diagnosed(
                    history, &prepared, part, &parts, v, options,
                )));
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
    Verdict::Linearizable(Stats {
        coverage: covered,
        ..stats(&meter)
    })
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
    let budget = Budget {
        time: Some(options.budget.time.map_or(time, |t| t.min(time))),
        ..options.budget
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
        budget,
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
