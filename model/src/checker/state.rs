//! One step of a linearization: applying an entry (an op, a transaction's end, a nemesis
//! event) to a state of a partition. The search and any other linearizer (the brute-force
//! one of the differential tests) share these rules, so they differ only in how they search.
//!
//! The rules beyond the spec:
//! - **Transactions** (READ COMMITTED): an op in an open transaction sees the committed
//!   state with that transaction's own writes over it; its writes stay pending, and hold the
//!   key's row lock, until the transaction's end commits or discards them.
//! - **Row locks**: an op that writes a key cannot take effect while another open
//!   transaction has a pending write on it (it would block until that transaction ends).
//! - **Commit windows**: writes to a key take effect in the order of their effective server
//!   instants (pg_lease reads the clock while holding the key's row lock), so an entry cannot
//!   be placed at an instant before the commit of a write to the same key placed earlier
//!   (`floors`): an autocommit write commits at or after its own instant; a write in an
//!   explicit transaction holds the row lock until the transaction's COMMIT, so it orders
//!   later entries from the COMMIT's server window on (the later of its instant and the
//!   start of the end entry's window); a rolled-back write orders nothing. A lock-free read
//!   is judged at an instant of its own window only: it may see the state before a write
//!   that was decided but not yet committed.
//! - **Restarts**: committed state stands ([`Spec::crash`], [`Spec::restart`]), pending
//!   writes are lost, and an unknown op can only have taken effect before the restart that
//!   ended its session: at the restart every call still pending from a session it ended
//!   has either taken effect (fired before it) or never will; it is no longer pending.
//! - **Unknown outcomes** (open-ended entries): from its call on, such an entry is
//!   *pending* in the state; before any later step it may fire, or never
//!   ([`super::fire`]). So a linearizer never has to choose where to place it (Knossos does
//!   the same).

use super::intern::{Ctx, Sym};
use super::partition::{Entry, EntryKind};
use crate::history::{NemesisEffect, TxnEnd, TxnId};
use crate::invariant::Invariant;
use crate::spec::{Judgement, KeyState, Mismatch, Op, Outcome, Store};
use crate::time::Ts;
use std::collections::BTreeMap;

/// Keys and owners as the checker keeps them.
pub type S = Store<Sym, Sym>;

/// One possible state of a partition during a linearization.
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PState {
    /// Committed lease state.
    pub committed: S,
    /// Pending writes of open transactions (each key in a map is row-locked by it).
    pub open: BTreeMap<TxnId, Pending>,
    /// Per key, the earliest instant the commit of its latest committed write can have had:
    /// every entry on the key placed later took effect at or after it. (Writes to different
    /// keys are not ordered.)
    pub floors: BTreeMap<Sym, Ts>,
    /// Restarts applied so far.
    pub crashes: u32,
    /// Open-ended entries called but not fired yet (entry indices, sorted).
    pub pending: Vec<usize>,
    /// Open-ended entries of sessions a restart ended, not resolved yet (sorted): each may
    /// still have taken effect before that restart. With the correct semantics a restart
    /// changes no committed state, so one resolves just before the next entry on its key
    /// (fired as of before the crash, or never), not at the restart itself:
    /// [`super::fire`].
    pub deferred: Vec<usize>,
}

/// The pending writes of one open transaction.
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Pending {
    /// The keys it wrote (and row-locks), with their new states.
    pub writes: BTreeMap<Sym, KeyState<Sym>>,
    /// The instant of its latest write. With the start of the COMMIT's window it raises
    /// the floor when the transaction commits; a rolled-back write orders nothing (a write
    /// that waited for it may go on with the clock it read before waiting).
    pub at: Ts,
}

/// Why an entry cannot be placed next in a state.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reject {
    /// The spec does not allow the observed outcome.
    Spec(Mismatch),
    /// The op writes `key`, which an open transaction has row-locked.
    Locked { txn: TxnId, key: Sym },
    /// The op writes, but every instant its observation allows is before `floor`, the
    /// instant of a write to the key already placed.
    TooEarly { at: Ts, floor: Ts },
}

impl Reject {
    /// The invariant the rejection points to, for the op `call` that was rejected.
    pub fn invariant<K, O>(&self, call: Option<&Op<K, O>>) -> Invariant {
        match self {
            Reject::Spec(m) => m.invariant,
            Reject::TooEarly { .. } => match call {
                Some(Op::Acquire { .. }) => Invariant::MutualExclusion,
                Some(Op::Renew { .. } | Op::Release { .. }) => Invariant::LapseIsFinal,
                _ => Invariant::DurabilityAndTimeAuthority,
            },
            Reject::Locked { .. } => match call {
                Some(Op::Acquire { .. }) => Invariant::MutualExclusion,
                _ => Invariant::PrecedenceAndIsolation,
            },
        }
    }
}

impl PState {
    /// The earliest instant an op on `key` placed now can take effect at.
    fn floor(&self, key: Option<&Sym>) -> Ts {
        key.and_then(|k| self.floors.get(k))
            .copied()
            .unwrap_or(super::partition::FAR_PAST)
    }

    /// A write to `key` took effect at `at` and is committed.
    fn raise(&mut self, key: Sym, at: Ts) {
        let f = self.floors.entry(key).or_insert(at);
        *f = (*f).max(at);
    }

    /// The store an op of transaction `txn` (or of no transaction) sees.
    fn view(&self, txn: Option<TxnId>) -> S {
        let mut view = self.committed.clone();
        if let Some(p) = txn.and_then(|t| self.open.get(&t)) {
            for (k, st) in &p.writes {
                view.set(*k, st.clone());
            }
        }
        view
    }

    /// The open transaction other than `txn` that row-locks `key`.
    fn locker(&self, key: &Sym, txn: Option<TxnId>) -> Option<TxnId> {
        self.open
            .iter()
            .find(|(t, p)| Some(**t) != txn && p.writes.contains_key(key))
            .map(|(t, _)| *t)
    }
}

/// Places entry `i` next in `state`: every state it can lead to (never empty), or why it
/// cannot be placed. `txn_ended`: the end of the op's transaction is already placed.
/// `detail`: build the mismatch texts (slower; for explanations). An open-ended entry
/// placed here takes effect here (or, for an unknown outcome, possibly never).
pub fn apply(
    cx: Ctx<'_>,
    i: usize,
    state: &PState,
    txn_ended: bool,
    detail: bool,
) -> Result<Vec<PState>, Reject> {
    let entry = &cx.part.entries[i];
    match entry.kind {
        EntryKind::Op(o) => {
            let (op, outcome) = &cx.prepared.ops[o];
            let call = Call {
                op,
                txn: entry.txn,
                outcome,
            };
            apply_call(cx, entry, state, &call, txn_ended, detail)
        }
        EntryKind::TxnEnd { txn, end } => apply_end(cx, i, state, txn, end),
        EntryKind::Nemesis(n) => match (&cx.history.nemeses[n].effect, cx.prepared.lapse_keys[n]) {
            (NemesisEffect::Restart { clean, .. }, _) => {
                let mut next = state.clone();
                if !clean {
                    next.committed = cx.spec.crash(&next.committed);
                }
                next.committed = cx.spec.restart(&next.committed, entry.window);
                next.open.clear();
                // the calls the crash left pending took effect before it or never: with the
                // correct semantics (the crash keeps committed state) they are resolved
                // lazily, as of before the crash (`deferred`); those of transactions died
                // with them (the search fired them before the restart, see `fire`)
                if defers_restarts(cx.spec) {
                    let part = cx.part;
                    next.deferred.extend(
                        next.pending
                            .iter()
                            .filter(|p| part.entries[**p].txn.is_none()),
                    );
                    next.deferred.sort_unstable();
                }
                next.pending.clear();
                next.crashes += 1;
                Ok(vec![next])
            }
            (NemesisEffect::Lapse { applied, .. }, Some(key)) => {
                let op = Op::expire(key);
                let outcome = match applied {
                    Some(true) => Outcome::Injected,
                    Some(false) => Outcome::NotInjected,
                    None => Outcome::Unknown,
                };
                let call = Call {
                    op: &op,
                    txn: None,
                    outcome: &outcome,
                };
                apply_call(cx, entry, state, &call, false, detail)
            }
            _ => Ok(vec![state.clone()]),
        },
    }
}

/// The open-ended entry `i` is called in `state`: it becomes pending, unless its session
/// or transaction is already gone (then it can never take effect) or it cannot write.
pub fn call_open_ended(cx: Ctx<'_>, i: usize, state: &PState, txn_ended: bool) -> PState {
    let entry = &cx.part.entries[i];
    let mut next = state.clone();
    let never_writes = matches!(entry.kind, EntryKind::Op(o)
        if matches!(cx.prepared.ops[o].0, Op::Inspect { .. }));
    if !txn_ended && state.crashes == entry.crash_gen && !never_writes {
        if let Err(at) = next.pending.binary_search(&i) {
            next.pending.insert(at, i);
        }
    }
    next
}

impl PState {
    /// An estimate of the bytes this state takes (itself and what it owns), for the
    /// memory budget.
    pub fn heap_bytes(&self) -> u64 {
        const ROW: usize = std::mem::size_of::<(Sym, KeyState<Sym>)>();
        // a B-tree entry with its share of a node
        const NODE_ENTRY: usize = 16;
        let rows = self.committed.rows().count() * ROW;
        let open: usize = self
            .open
            .values()
            .map(|p| 64 + p.writes.len() * (ROW + NODE_ENTRY))
            .sum();
        let floors = self.floors.len() * (std::mem::size_of::<(Sym, Ts)>() + NODE_ENTRY);
        let open_ended =
            (self.pending.capacity() + self.deferred.capacity()) * std::mem::size_of::<usize>();
        (std::mem::size_of::<PState>() + rows + open + floors + open_ended) as u64
    }
}

struct Call<'a> {
    op: &'a Op<Sym, Sym>,
    txn: Option<TxnId>,
    outcome: &'a Outcome<Sym>,
}

/// The spec branches entry `i` (an op) may have taken from `state`, as [`apply`] judges it
/// (none for other entries, or when the state does not allow it).
pub(crate) fn branches(cx: Ctx<'_>, i: usize, state: &PState) -> Vec<crate::branch::Branch> {
    let entry = &cx.part.entries[i];
    let EntryKind::Op(o) = entry.kind else {
        return Vec::new();
    };
    let (op, outcome) = &cx.prepared.ops[o];
    let view = state.view(entry.txn);
    let floor = state.floor(op.key());
    cx.spec
        .judge_from(&view, op, entry.window, floor, outcome, false)
        .map(|js| js.iter().filter_map(|j| j.branch).collect())
        .unwrap_or_default()
}

fn apply_call(
    cx: Ctx<'_>,
    entry: &Entry,
    state: &PState,
    call: &Call<'_>,
    txn_ended: bool,
    detail: bool,
) -> Result<Vec<PState>, Reject> {
    let unknown = *call.outcome == Outcome::Unknown;
    if unknown && (txn_ended || state.crashes != entry.crash_gen) {
        // Its session or transaction is gone: it can no longer take effect.
        return Ok(vec![state.clone()]);
    }
    let view = state.view(call.txn);
    let window = entry.window;
    // An op placed after a write saw that write committed, so it took effect at or after
    // the write's instant (the floor). (A read may still be placed before a write decided
    // earlier than it: it then saw the state before that write's commit; the floor only
    // counts writes placed before.)
    let floor = state.floor(call.op.key());
    let too_early = |at: Ts| Reject::TooEarly { at, floor };
    if floor > window.t1() {
        return Err(too_early(window.t1()));
    }
    let judged = cx
        .spec
        .judge_from(&view, call.op, window, floor, call.outcome, detail);
    let after_floor = match judged {
        Ok(js) => js,
        Err(m) => {
            // without the floor, would the observation have been possible?
            return Err(
                match cx
                    .spec
                    .judge_with(&view, call.op, window, call.outcome, false)
                {
                    Ok(js) => too_early(js.iter().map(|j| j.at).max().unwrap_or(window.t1())),
                    Err(_) => Reject::Spec(m),
                },
            );
        }
    };
    let mut out = Vec::new();
    let mut reject = None;
    for j in after_floor.iter().filter(|j| !j.writes) {
        out.push(settle(state, call.txn, &view, j, false));
    }
    for j in after_floor.iter().filter(|j| j.writes) {
        let changed = view.diff(&j.store);
        if let Some((txn, key)) = changed
            .iter()
            .find_map(|(k, _)| state.locker(k, call.txn).map(|t| (t, *k)))
        {
            reject.get_or_insert(Reject::Locked { txn, key });
            continue;
        }
        out.push(settle(state, call.txn, &view, j, true));
    }
    if out.is_empty() {
        return Err(reject.unwrap_or_else(|| {
            Reject::Spec(Mismatch {
                invariant: Invariant::PrecedenceAndIsolation,
                detail: "no state allows the op".to_string(),
            })
        }));
    }
    out.sort();
    out.dedup();
    Ok(out)
}

/// The state after judgement `j` of an op of `txn` that saw `view`: its changes (a write,
/// or a read narrowing what is known of an expiry) go to the transaction's pending writes
/// when it wrote there, else to the committed state.
fn settle(
    state: &PState,
    txn: Option<TxnId>,
    view: &S,
    j: &Judgement<Sym, Sym>,
    wrote: bool,
) -> PState {
    let mut next = state.clone();
    for (key, st) in view.diff(&j.store) {
        if wrote && txn.is_none() {
            next.raise(key, j.at);
        }
        match txn {
            Some(t)
                if wrote
                    || next
                        .open
                        .get(&t)
                        .is_some_and(|p| p.writes.contains_key(&key)) =>
            {
                let p = next.open.entry(t).or_default();
                p.writes.insert(key, st);
                if wrote {
                    p.at = p.at.max(j.at);
                }
            }
            _ => next.committed.set(key, st),
        }
    }
    next
}

fn apply_end(
    cx: Ctx<'_>,
    i: usize,
    state: &PState,
    txn: TxnId,
    end: TxnEnd,
) -> Result<Vec<PState>, Reject> {
    let entry = &cx.part.entries[i];
    let pending = state.open.get(&txn);
    // The COMMIT came after the transaction's writes and within the end's window.
    let committed_at = pending.map_or(entry.window.t0(), |p| p.at.max(entry.window.t0()));
    let can_commit = committed_at <= entry.window.t1();
    let writes: Vec<(Sym, KeyState<Sym>)> = pending
        .map(|p| p.writes.iter().map(|(k, s)| (*k, s.clone())).collect())
        .unwrap_or_default();
    let finish = |commit: bool| {
        let mut next = state.clone();
        next.open.remove(&txn);
        // the transaction's unknown ops can no longer take effect
        next.pending
            .retain(|p| *p == i || cx.part.entries[*p].txn != Some(txn));
        if commit {
            next.committed = cx.spec.commit(&state.committed, &writes);
            // every key it wrote was row-locked until the COMMIT: later entries on them
            // come after it
            if let Some(p) = pending {
                for key in p.writes.keys() {
                    next.raise(*key, committed_at);
                }
            }
        } else {
            next.committed = cx.spec.abort(&state.committed, &writes);
        }
        next
    };
    let alive = state.crashes == entry.crash_gen;
    let mut out = match end {
        TxnEnd::Commit if can_commit => vec![finish(true)],
        TxnEnd::Commit => {
            // a write dated after its own COMMIT's window
            return Err(Reject::TooEarly {
                at: entry.window.t1(),
                floor: committed_at,
            });
        }
        TxnEnd::Rollback => vec![finish(false)],
        TxnEnd::Unknown if alive && can_commit => vec![finish(true), finish(false)],
        TxnEnd::Unknown => vec![finish(false)],
    };
    out.sort();
    out.dedup();
    Ok(out)
}

/// True when restarts defer the calls they leave pending: a restart changes no committed
/// state.
pub(crate) fn defers_restarts(spec: &crate::spec::Spec) -> bool {
    !matches!(
        spec.mutation,
        crate::mutation::Mutation::CrashLosesCommitted
            | crate::mutation::Mutation::DowntimeExtendsLease
    )
}
