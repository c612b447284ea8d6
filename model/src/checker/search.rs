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
use super::intern::Ctx;
use super::partition::Partition;
use super::state::{apply, call_open_ended, closure, PState, CLOSURE_LIMIT};
use super::{Exhausted, Meter, Violation};
use crate::history::History;
use std::collections::HashSet;
use std::hash::{BuildHasherDefault, Hasher};

/// FxHash (rustc's): the memo hashes large keys millions of times, SipHash is too slow.
#[derive(Default)]
struct Fx(u64);

impl Hasher for Fx {
    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut word = [0u8; 8];
            word[..chunk.len()].copy_from_slice(chunk);
            self.write_u64(u64::from_le_bytes(word));
        }
    }

    fn write_u64(&mut self, i: u64) {
        self.0 = (self.0.rotate_left(5) ^ i).wrapping_mul(0x517c_c1b7_2722_0a95);
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

type Memo = HashSet<(Bits, Vec<PState>), BuildHasherDefault<Fx>>;

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

/// Searches `cx.part` for a linearization.
pub(crate) fn search(cx: Ctx<'_>, meter: &mut Meter) -> Outcome {
    let (history, part) = (cx.history, cx.part);
    let n = part.entries.len();
    let mut ev = Events::new(part);
    let mut states = vec![PState::default()];
    let mut bits = Bits::new(n);
    let mut memo = Memo::default();
    let mut stack: Vec<(usize, Vec<PState>)> = Vec::new();
    let mut deepest: Option<Deepest> = None;
    let mut cursor = ev.next[ev.head];
    // the states with pending entries fired, computed once per position
    let mut closed: Option<Vec<PState>> = None;
    loop {
        if let Some(e) = meter.tick() {
            return Outcome::Exhausted(e);
        }
        if cursor == NIL {
            return Outcome::Linearizable;
        }
        let node = cursor;
        let i = ev.entry[node];
        if ev.is_call[node] {
            let ended = txn_ended(history, part, &bits, i);
            let next = if part.entries[i].is_open_ended() {
                Some(pend(cx, &states, i, ended))
            } else {
                if closed.is_none() {
                    match closure(cx, &states) {
                        Ok(c) => closed = Some(c),
                        Err(_) => {
                            return Outcome::Exhausted(Exhausted::States(CLOSURE_LIMIT as u64))
                        }
                    }
                }
                closed.as_deref().and_then(|from| step(cx, from, i, ended))
            };
            if let Some(next) = next {
                bits.set(i);
                if memo.insert((bits.clone(), next.clone())) {
                    meter.states += 1;
                    stack.push((node, std::mem::replace(&mut states, next)));
                    closed = None;
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
                return Outcome::Violation(Box::new(explain::violation(cx, &d)));
            };
            bits.clear(ev.entry[call]);
            states = prev;
            closed = None;
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

/// The open-ended entry `i` is called after `states`: it becomes pending in each.
fn pend(cx: Ctx<'_>, states: &[PState], i: usize, ended: bool) -> Vec<PState> {
    let mut out: Vec<PState> = states
        .iter()
        .map(|s| call_open_ended(cx, i, s, ended))
        .collect();
    out.sort();
    out.dedup();
    out
}

/// Places entry `i` after `closed` (states with their pending entries fired, see
/// [`closure`]): the states it leads to, or `None` when none.
fn step(cx: Ctx<'_>, closed: &[PState], i: usize, txn_ended: bool) -> Option<Vec<PState>> {
    let mut out: Vec<PState> = Vec::new();
    for s in closed {
        if let Ok(next) = apply(cx, i, s, txn_ended, false) {
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
