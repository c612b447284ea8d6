//! Diagnosis of a violation: is the history consistent with a known bug class? A partition
//! the correct spec rejects is searched again under each mutation of the catalogue
//! ([`Mutation::ALL`]); the first whose semantics explain it names the invariant broken,
//! which is more telling than the first symptom the search tripped on.

use super::intern::{Ctx, Prepared};
use super::partition::{merge, Partition};
use super::search::{search, Outcome};
use super::Meter;
use crate::history::History;
use crate::invariant::Invariant;
use crate::mutation::Mutation;
use crate::spec::Spec;
use crate::Budget;
use std::time::Duration;

/// States one mutation's search may use (diagnosis is best effort and must stay cheap).
const STATES_PER_MUTATION: u64 = 100_000;

/// The first catalogued mutation whose semantics explain `part` (or, for a mutation that
/// makes keys interact, the whole history), trying those listed against `symptom` first.
pub(crate) fn diagnose(
    history: &History,
    prepared: &Prepared,
    part: &Partition,
    all: &[Partition],
    symptom: Invariant,
    time: Duration,
) -> Option<Mutation> {
    let mut order: Vec<Mutation> = Mutation::ALL.to_vec();
    order.sort_by_key(|m| m.expected() != Some(symptom));
    let per = time / order.len() as u32;
    let merged = (all.len() > 1).then(|| merge(all));
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
        let mut meter = Meter::new(Budget {
            time: Some(per),
            states: Some(STATES_PER_MUTATION),
        });
        if let Outcome::Linearizable = search(cx, &mut meter) {
            return Some(m);
        }
    }
    None
}
