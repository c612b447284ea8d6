//! The Wing-Gong/Lowe linearization search of one partition, with Porcupine's
//! memoisation: a (set of placed entries, set of possible states) pair is explored once.
//!
//! Entries are laid out as call and return events in real-time order. The search places
//! entries from the front: an entry called before the earliest return of the unplaced ones
//! may be placed next if it leads to at least one state; when none can, the last placement
//! is undone. Once only entries with no return (unknown outcomes) are left, every entry
//! that must be placed is placed.
//!
//! States are sets: an entry with several possible effects (an unknown outcome, an expiry
//! that may go either way) leads to every one of them at once, so the search itself never
//! branches on effects, only on order. An entry with no return is never a branch either:
//! as soon as it may have been called (it is called before the earliest unplaced return)
//! it becomes pending in every state, at once and once; from there it may fire before any
//! later step or never ([`super::fire`]), so placing it later could only lose
//! possibilities. A restart ends every pending entry of the sessions it ended
//! (specs/HISTORY.md, "How a history is judged", 6): the search never returns to them.

use super::fire::{prune, resolve, Scope, Scopes};
use super::intern::{Ctx, Sym};
use super::partition::Partition;
use super::state::{apply, call_open_ended, PState};
use super::{Exhausted, Meter};
use crate::history::History;
use crate::history::Nanos;
use crate::spec::Epoch;
use std::collections::{BTreeSet, HashSet};
use std::hash::{BuildHasherDefault, Hasher};
use std::rc::Rc;

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

/// A set of possible states, shared between the memo and the search's frames.
pub(crate) type States = Rc<Vec<PState>>;

/// The memo: placed sets (run-length coded: a placed set is mostly long runs) with their
/// states.
type Memo = HashSet<(Runs, States), BuildHasherDefault<Fx>>;

/// A placed set as the lengths of its alternating runs of unset and set bits (the first run
/// unset, possibly empty). Exact, so the memo never confuses two sets; a history's placed
/// sets are a few long runs (entries are placed roughly in call order), so this takes a
/// few dozen bytes where the bit set takes one bit per entry (39 KB at 312,000 entries).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Runs(Box<[u32]>);

impl Runs {
    fn of(bits: &Bits, n: usize) -> Runs {
        let mut runs = Vec::new();
        let (mut pos, mut set) = (0, false);
        while pos < n {
            let next = bits.next_differing(pos, set, n);
            runs.push((next - pos) as u32);
            pos = next;
            set = !set;
        }
        Runs(runs.into_boxed_slice())
    }

    fn bytes(&self) -> u64 {
        (std::mem::size_of::<Runs>() + self.0.len() * 4) as u64
    }
}

pub(crate) enum Outcome {
    /// The linearization found: each placed entry with the states before it.
    Linearizable(Witness),
    /// No linearization: the deepest point the search reached.
    Violation(Box<Deepest>),
    Exhausted(Exhausted),
}

/// A linearization: the entries placed, in order, each with the states before it
/// (entries with no return that became pending are not in it).
pub(crate) struct Witness(pub(crate) Vec<(usize, States)>);

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

    /// The first position from `pos` (below `n`) whose bit is not `set`, or `n`.
    fn next_differing(&self, pos: usize, set: bool, n: usize) -> usize {
        let mut i = pos;
        while i < n {
            let word = self.0[i / 64];
            let differing = if set { !word } else { word } >> (i % 64);
            if differing != 0 {
                return (i + differing.trailing_zeros() as usize).min(n);
            }
            i = (i / 64 + 1) * 64;
        }
        n
    }
}

/// The deepest point the search reached, for the explanation.
#[derive(Clone, Debug)]
pub(crate) struct Deepest {
    /// Entries placed, in order (entries with no return that became pending excluded).
    pub(crate) placed: Vec<usize>,
    /// Every entry placed or pending there.
    pub(crate) bits: Bits,
    /// The states after them.
    pub(crate) states: Vec<PState>,
    /// The entry whose return forced the search back from there.
    pub(crate) blocking: usize,
}

/// The entries not placed yet: those with a return by call and by return, those without
/// (unknown outcomes) by call.
struct Unplaced {
    by_call: BTreeSet<(Nanos, usize)>,
    by_ret: BTreeSet<(Nanos, usize)>,
    open_by_call: BTreeSet<(Nanos, usize)>,
}

impl Unplaced {
    fn new(part: &Partition) -> Unplaced {
        let mut u = Unplaced {
            by_call: BTreeSet::new(),
            by_ret: BTreeSet::new(),
            open_by_call: BTreeSet::new(),
        };
        for i in 0..part.entries.len() {
            u.insert(part, i);
        }
        u
    }

    fn insert(&mut self, part: &Partition, i: usize) {
        let e = &part.entries[i];
        match e.ret {
            Some(r) => {
                self.by_call.insert((e.call, i));
                self.by_ret.insert((r, i));
            }
            None => {
                self.open_by_call.insert((e.call, i));
            }
        }
    }

    fn remove(&mut self, part: &Partition, i: usize) {
        let e = &part.entries[i];
        match e.ret {
            Some(r) => {
                self.by_call.remove(&(e.call, i));
                self.by_ret.remove(&(r, i));
            }
            None => {
                self.open_by_call.remove(&(e.call, i));
            }
        }
    }

    /// The entry that must be placed first (the earliest return), if any must.
    fn first_to_return(&self) -> Option<usize> {
        self.by_ret.first().map(|(_, i)| *i)
    }

    fn limit(&self) -> Nanos {
        self.by_ret.first().map_or(Nanos::MAX, |(r, _)| *r)
    }

    /// The entries with a return that may be placed next: those called before the
    /// earliest return (an entry that returned before another was called precedes it),
    /// earliest instant first.
    fn candidates(&self, part: &Partition) -> Vec<usize> {
        let limit = self.limit();
        let mut out: Vec<usize> = self
            .by_call
            .iter()
            .take_while(|(call, _)| *call <= limit)
            .map(|(_, i)| *i)
            .collect();
        out.sort_by_key(|i| (part.entries[*i].order, part.entries[*i].call, *i));
        out
    }

    /// The entries without a return that may have been called by now, by call.
    fn callable_open(&self) -> Vec<usize> {
        let limit = self.limit();
        self.open_by_call
            .iter()
            .take_while(|(call, _)| *call <= limit)
            .map(|(_, i)| *i)
            .collect()
    }
}

/// One position of the search: the candidates to try there and how far it got.
struct Frame {
    candidates: Vec<usize>,
    next: usize,
    /// the entry placed from here, the entries that became pending after it, and the
    /// states before it
    placed: Option<(usize, Vec<usize>, States)>,
}

/// The search of one partition: its memo and where it stands.
struct Search<'a> {
    cx: Ctx<'a>,
    scopes: Scopes,
    unplaced: Unplaced,
    bits: Bits,
    memo: Memo,
    /// the memo's estimated bytes (given back to the meter at the end)
    memo_bytes: u64,
}

impl Search<'_> {
    /// Makes every entry without a return that may have been called by now pending in
    /// `states` (in call order): the entries it made pending. An entry of a session that
    /// began after a restart waits for that restart to be placed.
    fn pend_callable(&mut self, states: &mut Vec<PState>) -> Vec<usize> {
        let (history, part) = (self.cx.history, self.cx.part);
        // (every state of a set has seen the same restarts: restarts are placed entries)
        let crashes = states.first().map_or(0, |s| s.crashes);
        let ready: Vec<usize> = self
            .unplaced
            .callable_open()
            .into_iter()
            .filter(|i| part.entries[*i].crash_gen <= crashes)
            .collect();
        for &i in &ready {
            let ended = txn_ended(history, part, &self.bits, i);
            *states = pend(self.cx, states, i, ended);
            self.bits.set(i);
            self.unplaced.remove(part, i);
        }
        ready
    }

    fn unpend(&mut self, pended: &[usize]) {
        for &i in pended {
            self.bits.clear(i);
            self.unplaced.insert(self.cx.part, i);
        }
    }

    /// Places `i` after `closed`, makes what became callable pending, and keeps the
    /// result unless the memo has it: the pended entries and the states, or `None`.
    fn place(
        &mut self,
        closed: &[PState],
        i: usize,
        meter: &mut Meter,
    ) -> Option<(Vec<usize>, States)> {
        let (history, part) = (self.cx.history, self.cx.part);
        let ended = txn_ended(history, part, &self.bits, i);
        let mut next = step(self.cx, closed, i, ended)?;
        self.bits.set(i);
        self.unplaced.remove(part, i);
        let pended = self.pend_callable(&mut next);
        let next: States = Rc::new(next);
        let runs = Runs::of(&self.bits, part.entries.len());
        let bytes = runs.bytes() + states_bytes(&next) + MEMO_ENTRY_OVERHEAD;
        if self.memo.insert((runs, Rc::clone(&next))) {
            meter.states += 1;
            meter.bytes += bytes;
            self.memo_bytes += bytes;
            return Some((pended, next));
        }
        self.unpend(&pended);
        self.bits.clear(i);
        self.unplaced.insert(part, i);
        None
    }
}

/// Hash table slack per memo entry (its slot, control byte and growth headroom).
const MEMO_ENTRY_OVERHEAD: u64 = 2 * std::mem::size_of::<(Runs, States)>() as u64 + 16;

fn states_bytes(states: &[PState]) -> u64 {
    24 + states.iter().map(PState::heap_bytes).sum::<u64>()
}

/// Searches `cx.part` for a linearization: depth first, trying at each position the
/// entries real time allows in the order of their earliest possible instant, memoising
/// (placed set, states) pairs as Porcupine does.
pub(crate) fn search(cx: Ctx<'_>, meter: &mut Meter) -> Outcome {
    let mut s = Search {
        cx,
        scopes: Scopes::of(cx),
        unplaced: Unplaced::new(cx.part),
        bits: Bits::new(cx.part.entries.len()),
        memo: Memo::default(),
        memo_bytes: 0,
    };
    let outcome = run(&mut s, meter);
    meter.bytes = meter.bytes.saturating_sub(s.memo_bytes);
    outcome
}

fn run(s: &mut Search<'_>, meter: &mut Meter) -> Outcome {
    let part = s.cx.part;
    let mut first = vec![PState::default()];
    s.pend_callable(&mut first);
    let mut states: States = Rc::new(first);
    let mut frames: Vec<Frame> = Vec::new();
    let mut deepest: Option<Deepest> = None;
    let mut cur = Frame {
        candidates: s.unplaced.candidates(part),
        next: 0,
        placed: None,
    };
    // the states with pending entries fired, computed once per position and scope
    let mut closed: Closed = Vec::new();
    loop {
        if let Some(e) = meter.tick() {
            return Outcome::Exhausted(e);
        }
        let Some(blocking) = s.unplaced.first_to_return() else {
            // only entries without a return are left, all pending: they may never fire
            let placed = frames.iter().filter_map(|f| f.placed.as_ref());
            let steps = placed
                .map(|(i, _, before)| (*i, Rc::clone(before)))
                .collect();
            return Outcome::Linearizable(Witness(steps));
        };
        let mut placed = None;
        while cur.next < cur.candidates.len() {
            let i = cur.candidates[cur.next];
            cur.next += 1;
            let (scope, cap) = s.scopes.before(i);
            let at = match closed.iter().position(|(k, _)| k.0 == *scope && k.1 == cap) {
                Some(at) => at,
                None => match resolve(s.cx, &s.scopes, &states, (scope, cap), meter) {
                    Ok(c) => {
                        closed.push(((scope.clone(), cap), c));
                        closed.len() - 1
                    }
                    Err(e) => return Outcome::Exhausted(e),
                },
            };
            let from = std::mem::take(&mut closed[at].1);
            let placed_here = s.place(&from, i, meter);
            closed[at].1 = from;
            if let Some((pended, next)) = placed_here {
                placed = Some((i, pended, next));
                break;
            }
        }
        match placed {
            Some((i, pended, next)) => {
                cur.placed = Some((i, pended, std::mem::replace(&mut states, next)));
                frames.push(cur);
                closed.clear();
                cur = Frame {
                    candidates: s.unplaced.candidates(part),
                    next: 0,
                    placed: None,
                };
            }
            None => {
                // a dead end: go back one placement
                // the dead end that got furthest in real time (the latest return it could
                // not get past), then the deepest: every order fails at or before that
                // observation, so it names what broke rather than a side branch's symptom
                let reach = |blocking: usize, placed: usize| (part.entries[blocking].ret, placed);
                if deepest.as_ref().is_none_or(|d| {
                    reach(blocking, frames.len()) > reach(d.blocking, d.placed.len())
                }) {
                    deepest = Some(Deepest {
                        placed: frames
                            .iter()
                            .filter_map(|f| f.placed.as_ref().map(|(i, _, _)| *i))
                            .collect(),
                        bits: s.bits.clone(),
                        states: states.to_vec(),
                        blocking,
                    });
                }
                let Some(mut back) = frames.pop() else {
                    let d = deepest.unwrap_or(Deepest {
                        placed: Vec::new(),
                        bits: s.bits.clone(),
                        states: states.to_vec(),
                        blocking,
                    });
                    return Outcome::Violation(Box::new(d));
                };
                if let Some((i, pended, before)) = back.placed.take() {
                    s.unpend(&pended);
                    s.bits.clear(i);
                    s.unplaced.insert(part, i);
                    states = before;
                }
                closed.clear();
                cur = back;
            }
        }
    }
}

/// The states of one position with the entries a scope needs fired.
type Closed = Vec<((Scope, Option<(Sym, Epoch)>), Vec<PState>)>;

/// True when entry `i` is an op whose transaction's end is already placed (or pending).
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
    prune(
        states
            .iter()
            .map(|s| call_open_ended(cx, i, s, ended))
            .collect(),
    )
}

/// Places entry `i` after `closed` (states with the pending entries it needs fired, see
/// [`resolve`]): the states it leads to, or `None` when none.
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
    Some(prune(out))
}
