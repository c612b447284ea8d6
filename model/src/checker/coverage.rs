//! What a history covered: the spec branch each call of the linearization the checker
//! found took ([`Branch`]), counted, also inside a transaction, after a restart and as a
//! lost call the write-ahead log resolved. A call counts where every state the search
//! kept before it agrees on its branch; one with several possible branches is uncertain.
//! The first answered call on a key after a fault (the call that finds what the fault left
//! of the key's state) counts as such too, so a fault check can ask what its faults were
//! followed by.

use super::fire::{resolve, Scopes};
use super::intern::Ctx;
use super::partition::EntryKind;
use super::search::Witness;
use super::state::branches;
use super::Meter;
use crate::branch::Branch;
use crate::history::{History, NemesisEffect};
use crate::Outcome;
use std::collections::{BTreeMap, BTreeSet};

/// Calls that took one branch.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Tally {
    pub calls: u64,
    /// inside a transaction
    pub in_txn: u64,
    /// after a restart or crash of the server
    pub after_restart: u64,
    /// lost calls the write-ahead log found committed
    pub resolved: u64,
    /// first answered calls on their key after a fault: after a restart or an applied
    /// lapse in the linearization, after a pause, cut or kill in real time
    pub after_fault: u64,
}

/// A history's coverage of the spec's branches.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Coverage {
    /// The branches reached, with their calls.
    pub branches: BTreeMap<Branch, Tally>,
    /// Calls whose branch the linearization leaves open (the states before them disagree).
    pub uncertain: u64,
    /// The checker's budget ran out while counting: some partitions are not counted.
    pub partial: bool,
}

impl Coverage {
    /// How many of [`Branch::ALL`] were reached.
    pub fn reached(&self) -> usize {
        self.branches.len()
    }

    /// The branches never reached, in [`Branch::ALL`]'s order.
    pub fn missing(&self) -> Vec<Branch> {
        let reached = |b: &Branch| self.branches.contains_key(b);
        Branch::ALL.into_iter().filter(|b| !reached(b)).collect()
    }

    /// The coverage as verdict.json carries it (specs/HISTORY.md, "Coverage").
    pub fn to_json(&self) -> serde_json::Value {
        let branches: serde_json::Map<String, serde_json::Value> = self
            .branches
            .iter()
            .map(|(b, t)| {
                let counts = serde_json::json!({
                    "calls": t.calls,
                    "in_txn": t.in_txn,
                    "after_restart": t.after_restart,
                    "resolved": t.resolved,
                    "after_fault": t.after_fault,
                });
                (b.name().to_string(), counts)
            })
            .collect();
        let missing: Vec<&str> = self.missing().into_iter().map(Branch::name).collect();
        serde_json::json!({
            "reached": self.reached(),
            "of": Branch::ALL.len(),
            "branches": branches,
            "missing": missing,
            "uncertain": self.uncertain,
            "partial": self.partial,
        })
    }

    /// Adds `other`'s counts (another partition's).
    pub fn merge(&mut self, other: &Coverage) {
        for (b, t) in &other.branches {
            let mine = self.branches.entry(*b).or_default();
            mine.calls += t.calls;
            mine.in_txn += t.in_txn;
            mine.after_restart += t.after_restart;
            mine.resolved += t.resolved;
            mine.after_fault += t.after_fault;
        }
        self.uncertain += other.uncertain;
        self.partial |= other.partial;
    }
}

/// Calls of a history counted apart, by their indices into its ops.
#[derive(Debug, Default)]
pub(crate) struct Marks {
    /// The lost calls the write-ahead log found committed.
    pub resolved: BTreeSet<usize>,
    /// For each fault without an effect on lease state (a pause, a cut, a killed
    /// backend), the first answered call (neither unknown nor a plain failure) on each key
    /// invoked after the fault ended. Such a fault is not placed in the linearization; the
    /// first call after a restart or a lapse is found there ([`of`]).
    pub after_fault: BTreeSet<usize>,
}

impl Marks {
    pub(crate) fn of(history: &History, resolved: BTreeSet<usize>) -> Marks {
        Marks {
            resolved,
            after_fault: firsts_after_faults(history),
        }
    }
}

/// [`Marks::after_fault`] of `history`.
fn firsts_after_faults(history: &History) -> BTreeSet<usize> {
    let mut by_key: BTreeMap<&str, Vec<(u64, usize)>> = BTreeMap::new();
    for (i, o) in history.ops.iter().enumerate() {
        let answered = !matches!(o.result.outcome(), Outcome::Unknown | Outcome::Failed);
        if let (Some(key), true) = (o.call.key(), answered) {
            by_key.entry(key).or_default().push((o.invoke, i));
        }
    }
    for calls in by_key.values_mut() {
        calls.sort_unstable();
    }
    let without_effect = history
        .nemeses
        .iter()
        .filter(|n| n.effect == NemesisEffect::None);
    let mut firsts = BTreeSet::new();
    for n in without_effect {
        for calls in by_key.values() {
            let after = calls.partition_point(|(invoke, _)| *invoke <= n.end);
            firsts.extend(calls.get(after).map(|(_, i)| *i));
        }
    }
    firsts
}

/// The keys of the partition whose next call in the linearization is the first after a
/// restart or an applied lapse: the call that reads what the fault left.
#[derive(Default)]
struct AfterFault(BTreeSet<String>);

impl AfterFault {
    /// Notes the placed nemesis event `n`.
    fn placed(&mut self, cx: Ctx<'_>, n: usize) {
        match &cx.history.nemeses[n].effect {
            NemesisEffect::Restart { .. } => self.0.extend(cx.part.keys.iter().cloned()),
            NemesisEffect::Lapse {
                applied: Some(false),
                ..
            }
            | NemesisEffect::None => {}
            NemesisEffect::Lapse { key, .. } => {
                self.0.insert(key.clone());
            }
        }
    }

    /// Whether the answered call `op` is the first on its key after such a fault.
    fn first(&mut self, cx: Ctx<'_>, op: usize) -> bool {
        cx.history.ops[op]
            .call
            .key()
            .is_some_and(|k| self.0.remove(k))
    }
}

/// The coverage of one partition's linearization `witness`, with `marks`'s calls counted
/// apart. `None` when the budget ran out while replaying it (the search had placed every
/// call already).
pub(crate) fn of(
    cx: Ctx<'_>,
    witness: &Witness,
    marks: &Marks,
    meter: &mut Meter,
) -> Option<Coverage> {
    let scopes = Scopes::of(cx);
    let mut coverage = Coverage::default();
    let mut after_fault = AfterFault::default();
    for (i, before) in &witness.0 {
        let op = match cx.part.entries[*i].kind {
            EntryKind::Op(op) => op,
            EntryKind::Nemesis(n) => {
                after_fault.placed(cx, n);
                continue;
            }
            EntryKind::TxnEnd { .. } => continue,
        };
        // the states the search placed it from: the pending calls it needs fired
        let closed = resolve(cx, &scopes, before, scopes.before(*i), meter).ok()?;
        let taken: BTreeSet<Branch> = closed.iter().flat_map(|s| branches(cx, *i, s)).collect();
        let mut taken = taken.into_iter();
        let branch = match (taken.next(), taken.next()) {
            (Some(branch), None) => branch,
            // a call with no branch (a failed call, an injected lapse)
            (None, _) => continue,
            (Some(_), Some(_)) => {
                after_fault.first(cx, op);
                coverage.uncertain += 1;
                continue;
            }
        };
        let first_after_fault = after_fault.first(cx, op) || marks.after_fault.contains(&op);
        let tally = coverage.branches.entry(branch).or_default();
        tally.calls += 1;
        tally.in_txn += u64::from(cx.history.ops[op].txn.is_some());
        tally.after_restart += u64::from(closed.iter().all(|s| s.crashes > 0));
        tally.resolved += u64::from(marks.resolved.contains(&op));
        tally.after_fault += u64::from(first_after_fault);
    }
    Some(coverage)
}
