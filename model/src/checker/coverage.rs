//! What a history covered: the spec branch each call of the linearization the checker
//! found took ([`Branch`]), counted, also inside a transaction, after a restart and as a
//! lost call the write-ahead log resolved. A call counts where every state the search
//! kept before it agrees on its branch; one with several possible branches is uncertain.

use super::fire::{resolve, Scopes};
use super::intern::Ctx;
use super::partition::EntryKind;
use super::search::Witness;
use super::state::branches;
use super::Meter;
use crate::branch::Branch;
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
        }
        self.uncertain += other.uncertain;
        self.partial |= other.partial;
    }
}

/// The coverage of one partition's linearization `witness`; `resolved` holds the indices
/// (into the history's ops) of the lost calls the log found committed. `None` when the
/// budget ran out while replaying it (the search had placed every call already).
pub(crate) fn of(
    cx: Ctx<'_>,
    witness: &Witness,
    resolved: &BTreeSet<usize>,
    meter: &mut Meter,
) -> Option<Coverage> {
    let scopes = Scopes::of(cx);
    let mut coverage = Coverage::default();
    for (i, before) in &witness.0 {
        let EntryKind::Op(op) = cx.part.entries[*i].kind else {
            continue;
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
                coverage.uncertain += 1;
                continue;
            }
        };
        let tally = coverage.branches.entry(branch).or_default();
        tally.calls += 1;
        tally.in_txn += u64::from(cx.history.ops[op].txn.is_some());
        tally.after_restart += u64::from(closed.iter().all(|s| s.crashes > 0));
        tally.resolved += u64::from(resolved.contains(&op));
    }
    Some(coverage)
}
