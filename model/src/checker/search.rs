//! The Wing-Gong/Lowe linearization search of one partition, with Porcupine's
//! memoisation: a (set of placed entries, set of possible states) pair is explored once.
//!
//! Entries are laid out as call and return events in real-time order in a linked list. The
//! search walks the list from the front: a call event whose entry can be placed next (it
//! leads to at least one state) is removed with its return event and the walk restarts; a
//! return event reached means its entry was not placed before something that started after
//! it returned, so the last placement is undone. Entries with no return (unknown outcomes)
//! put their return events after all others: reaching one means every entry that must be
//! placed is placed.
//!
//! States are sets: an entry with several possible effects (an unknown outcome, an expiry
//! that may go either way) leads to every one of them at once, so the search itself never
//! branches on effects, only on order.

use super::explain;
use super::partition::Partition;
use super::state::{apply, PState};
use super::{Exhausted, Meter, Violation};
use crate::history::History;
use crate::spec::Spec;
use std::collections::HashSet;

pub(crate) enum Outcome {
    Linearizable,
    Violation(Box<Violation>),
    Exhausted(Exhausted),
}

/// A set of entry indices.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Bits(Vec<u64>);

impl Bits {
    pub(crate) fn new(n: usize) -> Bits {
        Bits(vec![0; n.div_ceil(64)])
    }

    pub(crate) fn set(&mut self, i: usize) {
        self.0[i / 64] |= 1 << (i % 64);
    }

    pub(crate) fn clear(&mut self, i: usize) {
        self.0[i / 64] &= !(1 << (i % 64));
    }

    pub(crate) fn get(&self, i: usize) -> bool {
        self.0[i / 64] & (1 << (i % 64)) != 0
    }
}

const NIL: usize = usize::MAX;

/// The doubly linked list of call and return events.
struct Events {
    /// node -> entry index
    entry: Vec<usize>,
    /// node -> is a call event
    is_call: Vec<bool>,
    /// call node -> its return node
    ret_of: Vec<usize>,
    /// return node -> the entry has no return (an open-ended unknown)
    open_ended: Vec<bool>,
    prev: Vec<usize>,
    next: Vec<usize>,
    /// index of the head sentinel
    head: usize,
}

impl Events {
    fn new(part: &Partition) -> Events {
        let n = part.entries.len();
        // (time, kind: 0 call / 1 return, entry); open-ended returns sort last
        let mut order: Vec<(u64, u8, usize)> = Vec::with_capacity(2 * n);
        for (i, e) in part.entries.iter().enumerate() {
            order.push((e.call, 0, i));
            order.push((e.ret.unwrap_or(u64::MAX), 1, i));
        }
        order.sort_unstable();
        let mut ev = Events {
            entry: Vec::with_capacity(2 * n),
            is_call: Vec::with_capacity(2 * n),
            ret_of: vec![NIL; 2 * n],
            open_ended: vec![false; 2 * n],
            prev: Vec::with_capacity(2 * n + 1),
            next: Vec::with_capacity(2 * n + 1),
            head: 2 * n,
        };
        let mut call_node = vec![NIL; n];
        for (node, (_, kind, i)) in order.iter().enumerate() {
            ev.entry.push(*i);
            ev.is_call.push(*kind == 0);
            if *kind == 0 {
                call_node[*i] = node;
            } else {
                ev.ret_of[call_node[*i]] = node;
                ev.open_ended[node] = part.entries[*i].ret.is_none();
            }
            ev.prev.push(if node == 0 { ev.head } else { node - 1 });
            ev.next.push(if node + 1 == 2 * n { NIL } else { node + 1 });
        }
        ev.prev.push(NIL);
        ev.next.push(if n == 0 { NIL } else { 0 });
        ev
    }

    fn unlink(&mut self, node: usize) {
        let (p, n) = (self.prev[node], self.next[node]);
        self.next[p] = n;
        if n != NIL {
            self.prev[n] = p;
        }
    }

    fn relink(&mut self, node: usize) {
        let (p, n) = (self.prev[node], self.next[node]);
        self.next[p] = node;
        if n != NIL {
            self.prev[n] = node;
        }
    }

    /// Removes a call node and its return node.
    fn lift(&mut self, call: usize) {
        self.unlink(call);
        self.unlink(self.ret_of[call]);
    }

    /// Undoes [`Events::lift`] (in reverse order of removal).
    fn unlift(&mut self, call: usize) {
        self.relink(self.ret_of[call]);
        self.relink(call);
    }
}

/// The deepest point the search reached, for the explanation.
pub(crate) struct Deepest {
    /// Entries placed, in order.
    pub(crate) placed: Vec<usize>,
    /// The states after them.
    pub(crate) states: Vec<PState>,
    /// The entry whose return forced the search back from there.
    pub(crate) blocking: usize,
}

/// Searches `part` for a linearization.
pub(crate) fn search(
    spec: &Spec,
    history: &History,
    part: &Partition,
    meter: &mut Meter,
) -> Outcome {
    let n = part.entries.len();
    let mut ev = Events::new(part);
    let mut states = vec![PState::default()];
    let mut bits = Bits::new(n);
    let mut memo: HashSet<(Bits, Vec<PState>)> = HashSet::new();
    let mut stack: Vec<(usize, Vec<PState>)> = Vec::new();
    let mut deepest: Option<Deepest> = None;
    let mut cursor = ev.next[ev.head];
    let mut steps: u64 = 0;
    loop {
        steps += 1;
        if steps % 1024 == 0 {
            if let Some(e) = meter.exhausted() {
                return Outcome::Exhausted(e);
            }
        }
        if cursor == NIL {
            return Outcome::Linearizable;
        }
        let node = cursor;
        let i = ev.entry[node];
        if ev.is_call[node] {
            let ended = txn_ended(history, part, &bits, i);
            if let Some(next) = step(spec, history, part, &states, i, ended) {
                bits.set(i);
                if memo.insert((bits.clone(), next.clone())) {
                    meter.states += 1;
                    stack.push((node, std::mem::replace(&mut states, next)));
                    ev.lift(node);
                    cursor = ev.next[ev.head];
                    continue;
                }
                bits.clear(i);
            }
            cursor = ev.next[node];
        } else {
            if ev.open_ended[node] {
                // every entry that must be placed is placed
                return Outcome::Linearizable;
            }
            if deepest
                .as_ref()
                .is_none_or(|d| stack.len() > d.placed.len())
            {
                deepest = Some(Deepest {
                    placed: stack.iter().map(|(c, _)| ev.entry[*c]).collect(),
                    states: states.clone(),
                    blocking: i,
                });
            }
            let Some((call, prev)) = stack.pop() else {
                let d = deepest.unwrap_or(Deepest {
                    placed: Vec::new(),
                    states,
                    blocking: i,
                });
                return Outcome::Violation(Box::new(explain::violation(spec, history, part, &d)));
            };
            bits.clear(ev.entry[call]);
            states = prev;
            ev.unlift(call);
            cursor = ev.next[call];
        }
    }
}

/// True when entry `i` is an op whose transaction's end is already placed.
pub(crate) fn txn_ended(history: &History, part: &Partition, bits: &Bits, i: usize) -> bool {
    let super::partition::EntryKind::Op(op) = part.entries[i].kind else {
        return false;
    };
    history.ops[op]
        .txn
        .and_then(|t| part.txn_end.get(&t))
        .is_some_and(|end| bits.get(*end))
}

/// Places entry `i` after `states`: the states it leads to, or `None` when none.
pub(crate) fn step(
    spec: &Spec,
    history: &History,
    part: &Partition,
    states: &[PState],
    i: usize,
    txn_ended: bool,
) -> Option<Vec<PState>> {
    let entry = &part.entries[i];
    let mut out: Vec<PState> = Vec::new();
    for s in states {
        if let Ok(next) = apply(spec, history, entry, s, txn_ended, false) {
            out.extend(next);
        }
    }
    if out.is_empty() {
        return None;
    }
    out.sort();
    out.dedup();
    Some(out)
}
