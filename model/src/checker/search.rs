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
use crate::history::Nanos;
use std::collections::{BTreeSet, HashSet};
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

/// The deepest point the search reached, for the explanation.
pub(crate) struct Deepest {
    /// Entries placed, in order.
    pub(crate) placed: Vec<usize>,
    /// The states after them.
    pub(crate) states: Vec<PState>,
    /// The entry whose return forced the search back from there.
    pub(crate) blocking: usize,
}

/// The entries not placed yet, by call and (for entries that must be placed) by return.
struct Unplaced {
    by_call: BTreeSet<(Nanos, usize)>,
    by_ret: BTreeSet<(Nanos, usize)>,
}

impl Unplaced {
    fn new(part: &Partition) -> Unplaced {
        let mut u = Unplaced {
            by_call: BTreeSet::new(),
            by_ret: BTreeSet::new(),
        };
        for i in 0..part.entries.len() {
            u.insert(part, i);
        }
        u
    }

    fn insert(&mut self, part: &Partition, i: usize) {
        let e = &part.entries[i];
        self.by_call.insert((e.call, i));
        if let Some(r) = e.ret {
            self.by_ret.insert((r, i));
        }
    }

    fn remove(&mut self, part: &Partition, i: usize) {
        let e = &part.entries[i];
        self.by_call.remove(&(e.call, i));
        if let Some(r) = e.ret {
            self.by_ret.remove(&(r, i));
        }
    }

    /// The entry that must be placed first (the earliest return), if any must.
    fn first_to_return(&self) -> Option<usize> {
        self.by_ret.first().map(|(_, i)| *i)
    }

    /// The entries that may be placed next: those called before the earliest return (an
    /// entry that returned before another was called precedes it), earliest instant first.
    fn candidates(&self, part: &Partition) -> Vec<usize> {
        let limit = self.by_ret.first().map_or(Nanos::MAX, |(r, _)| *r);
        let mut out: Vec<usize> = self
            .by_call
            .iter()
            .take_while(|(call, _)| *call <= limit)
            .map(|(_, i)| *i)
            .collect();
        out.sort_by_key(|i| (part.entries[*i].order, part.entries[*i].call, *i));
        out
    }
}

/// One position of the search: the candidates to try there and how far it got.
struct Frame {
    candidates: Vec<usize>,
    next: usize,
    /// the entry placed from here and the states before it
    placed: Option<(usize, Vec<PState>)>,
}

/// Searches `cx.part` for a linearization: depth first, trying at each position the
/// entries real time allows in the order of their earliest possible instant, memoising
/// (placed set, states) pairs as Porcupine does.
pub(crate) fn search(cx: Ctx<'_>, meter: &mut Meter) -> Outcome {
    let (history, part) = (cx.history, cx.part);
    let mut unplaced = Unplaced::new(part);
    let mut states = vec![PState::default()];
    let mut bits = Bits::new(part.entries.len());
    let mut memo = Memo::default();
    let mut frames: Vec<Frame> = Vec::new();
    let mut deepest: Option<Deepest> = None;
    let mut cur = Frame {
        candidates: unplaced.candidates(part),
        next: 0,
        placed: None,
    };
    // the states with pending entries fired, computed once per position
    let mut closed: Option<Vec<PState>> = None;
    loop {
        if let Some(e) = meter.tick() {
            return Outcome::Exhausted(e);
        }
        let Some(blocking) = unplaced.first_to_return() else {
            // only open-ended entries are left: they may never take effect
            return Outcome::Linearizable;
        };
        let mut placed = None;
        while cur.next < cur.candidates.len() {
            let i = cur.candidates[cur.next];
            cur.next += 1;
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
                    placed = Some((i, next));
                    break;
                }
                bits.clear(i);
            }
        }
        match placed {
            Some((i, next)) => {
                unplaced.remove(part, i);
                cur.placed = Some((i, std::mem::replace(&mut states, next)));
                frames.push(cur);
                closed = None;
                cur = Frame {
                    candidates: unplaced.candidates(part),
                    next: 0,
                    placed: None,
                };
            }
            None => {
                // a dead end: go back one placement
                if deepest
                    .as_ref()
                    .is_none_or(|d| frames.len() > d.placed.len())
                {
                    deepest = Some(Deepest {
                        placed: frames
                            .iter()
                            .filter_map(|f| f.placed.as_ref().map(|(i, _)| *i))
                            .collect(),
                        states: states.clone(),
                        blocking,
                    });
                }
                let Some(mut back) = frames.pop() else {
                    let d = deepest.unwrap_or(Deepest {
                        placed: Vec::new(),
                        states,
                        blocking,
                    });
                    return Outcome::Violation(Box::new(explain::violation(cx, &d)));
                };
                if let Some((i, before)) = back.placed.take() {
                    bits.clear(i);
                    unplaced.insert(part, i);
                    states = before;
                }
                closed = None;
                cur = back;
            }
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
