//! Diagnosis of a violation: is the history consistent with a known bug class? A partition
//! the correct spec rejects is searched again under each mutation of the catalogue
//! ([`Mutation::ALL`]); the first whose semantics explain it names the invariant broken,
//! which is more telling than the first symptom the search tripped on.

use super::intern::{Ctx, Prepared};
use super::partition::{merge, EntryKind, Partition};
use super::search::{search, Outcome};
use super::Meter;
use crate::history::{History, Nanos, OpId};
use crate::invariant::Invariant;
use crate::mutation::Mutation;
use crate::spec::Spec;
use crate::Budget;

/// The catalogued mutations whose semantics explain `part` (or, for a mutation that makes
/// keys interact, the whole history) up to the return of the op `offending`: those listed
/// against `symptom` first, then in catalogue order.
pub(crate) fn diagnose(
    history: &History,
    prepared: &Prepared,
    part: &Partition,
    all: &[Partition],
    violation: (Invariant, Option<OpId>),
    budget: Budget,
) -> Vec<Mutation> {
    let (symptom, offending) = violation;
    let cutoff = offending.and_then(|id| return_of(history, part, id));
    let part = &truncate(part, cutoff);
    let mut order: Vec<Mutation> = Mutation::ALL.to_vec();
    order.sort_by_key(|m| m.expected() != Some(symptom));
    // each mutation gets an equal share of what is left (diagnosis is best effort)
    let share = order.len() as u64;
    let per = Budget {
        time: budget.time.map(|t| t / share as u32),
        states: budget.states.map(|n| n / share),
        memory: budget.memory,
    };
    let merged = (all.len() > 1).then(|| truncate(&merge(all), cutoff));
    let mut explaining = Vec::new();
    for m in order {
        let target = match &merged {
            Some(whole) if m == Mutation::WriteIgnoresKey => whole,
            _ => part,
        };
        let spec = Spec::new(m);
        let cx = Ctx {
            spec: &spec,
            history,
            prepared,
            part: target,
        };
        let mut meter = Meter::new(per);
        if let Outcome::Linearizable(_) = search(cx, &mut meter) {
            explaining.push(m);
        }
    }
    explaining
}

/// When the op with id `id` returned (or was invoked, if it never did).
fn return_of(history: &History, part: &Partition, id: OpId) -> Option<Nanos> {
    part.entries.iter().find_map(|e| match e.kind {
        EntryKind::Op(o) if history.ops[o].id == id => Some(e.ret.unwrap_or(e.call)),
        _ => None,
    })
}

/// `part` without the entries invoked after `cutoff`: nothing after the violation can help
/// explain it, and a short history is searched fast. A transaction whose end is cut off
/// stays open (its writes pending).
fn truncate(part: &Partition, cutoff: Option<Nanos>) -> Partition {
    let Some(cutoff) = cutoff else {
        return part.clone();
    };
    let mut entries = Vec::new();
    let mut txn_end = std::collections::BTreeMap::new();
    for e in part.entries.iter().filter(|e| e.call <= cutoff) {
        if let EntryKind::TxnEnd { txn, .. } = e.kind {
            txn_end.insert(txn, entries.len());
        }
        entries.push(*e);
    }
    Partition {
        keys: part.keys.clone(),
        entries,
        txn_end,
    }
}
