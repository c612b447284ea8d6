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
//!   instants (pg_lease reads the clock while holding the key's row lock), so a write cannot
//!   be placed at an instant before a write placed earlier (`floor`). A lock-free read is
//!   judged at an instant of its own window only: it may see the state before a write that
//!   was decided but not yet committed.
//! - **Restarts**: committed state stands ([`Spec::crash`], [`Spec::restart`]), pending
//!   writes are lost, and an unknown op can only have taken effect before the restart that
//!   ended its session.

use super::partition::{Entry, EntryKind};
use crate::history::{History, NemesisEffect, TxnEnd, TxnId};
use crate::invariant::Invariant;
use crate::spec::{Judgement, KeyState, Mismatch, Op, Outcome, Spec, Store};
use crate::time::{Span, Ts};
use std::collections::BTreeMap;

/// One possible state of a partition during a linearization.
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PState {
    /// Committed lease state.
    pub committed: Store<String, String>,
    /// Pending writes of open transactions (each key in a map is row-locked by it).
    pub open: BTreeMap<TxnId, BTreeMap<String, KeyState<String>>>,
    /// The earliest instant the next write may take effect at.
    pub floor: Ts,
    /// Restarts applied so far.
    pub crashes: u32,
}

/// Why an entry cannot be placed next in a state.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reject {
    /// The spec does not allow the observed outcome.
    Spec(Mismatch),
    /// The op writes `key`, which an open transaction has row-locked.
    Locked { txn: TxnId, key: String },
    /// The op writes, but every instant its observation allows is before `floor`, the
    /// instant of a write to the key already placed.
    TooEarly { at: Ts, floor: Ts },
}

impl Reject {
    /// The invariant the rejection points to, for the op `call` that was rejected.
    pub fn invariant(&self, call: Option<&Op<String, String>>) -> Invariant {
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

impl std::fmt::Display for Reject {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Reject::Spec(m) => write!(f, "{m}"),
            Reject::Locked { txn, key } => write!(
                f,
                "it writes key {key:?}, which open transaction {txn} has row-locked"
            ),
            Reject::TooEarly { at, floor } => write!(
                f,
                "its observation places it at {at}, before the instant {floor} of a write to \
                 the key placed before it"
            ),
        }
    }
}

impl PState {
    /// The store an op of transaction `txn` (or of no transaction) sees.
    fn view(&self, txn: Option<TxnId>) -> Store<String, String> {
        let mut view = self.committed.clone();
        if let Some(writes) = txn.and_then(|t| self.open.get(&t)) {
            for (k, st) in writes {
                view.set(k.clone(), st.clone());
            }
        }
        view
    }

    /// The open transaction other than `txn` that row-locks `key`.
    fn locker(&self, key: &str, txn: Option<TxnId>) -> Option<TxnId> {
        self.open
            .iter()
            .find(|(t, w)| Some(**t) != txn && w.contains_key(key))
            .map(|(t, _)| *t)
    }
}

/// Places `entry` next in `state`: every state it can lead to (never empty), or why it
/// cannot be placed. `txn_ended`: the end of the op's transaction is already placed.
/// `detail`: build the mismatch texts (slower; for explanations).
pub fn apply(
    spec: &Spec,
    history: &History,
    entry: &Entry,
    state: &PState,
    txn_ended: bool,
    detail: bool,
) -> Result<Vec<PState>, Reject> {
    match entry.kind {
        EntryKind::Op(i) => {
            let op = &history.ops[i];
            let call = Call {
                op: &op.call,
                txn: op.txn,
                outcome: op.result.outcome(),
            };
            apply_call(spec, entry, state, &call, txn_ended, detail)
        }
        EntryKind::TxnEnd { txn, end } => Ok(apply_end(spec, entry, state, txn, end)),
        EntryKind::Nemesis(i) => match &history.nemeses[i].effect {
            NemesisEffect::None => Ok(vec![state.clone()]),
            NemesisEffect::Restart { clean, .. } => {
                let mut next = state.clone();
                if !clean {
                    next.committed = spec.crash(&next.committed);
                }
                next.committed = spec.restart(&next.committed, entry.window);
                next.open.clear();
                next.crashes += 1;
                Ok(vec![next])
            }
            NemesisEffect::Lapse { key, applied, .. } => {
                let op = Op::expire(key.clone());
                let call = Call {
                    op: &op,
                    txn: None,
                    outcome: if applied.is_some() {
                        Outcome::Injected
                    } else {
                        Outcome::Unknown
                    },
                };
                apply_call(spec, entry, state, &call, false, detail)
            }
        },
    }
}

struct Call<'a> {
    op: &'a Op<String, String>,
    txn: Option<TxnId>,
    outcome: Outcome<String>,
}

fn apply_call(
    spec: &Spec,
    entry: &Entry,
    state: &PState,
    call: &Call<'_>,
    txn_ended: bool,
    detail: bool,
) -> Result<Vec<PState>, Reject> {
    let unknown = call.outcome == Outcome::Unknown;
    if unknown && (txn_ended || state.crashes != entry.crash_gen) {
        // Its session or transaction is gone: it can no longer take effect.
        return Ok(vec![state.clone()]);
    }
    let view = state.view(call.txn);
    let judge = |w: Span| {
        spec.judge_with(&view, call.op, w, &call.outcome, detail)
            .map_err(Reject::Spec)
    };
    let window = entry.window;
    let all = judge(window)?;
    // Writes must not be placed before the key's last write: judge them again on the part
    // of the window from the floor on.
    let writes: Vec<Judgement<String, String>> = if state.floor <= window.t0() {
        all.iter().filter(|j| j.writes).cloned().collect()
    } else if state.floor <= window.t1() {
        let clipped = Span::new(state.floor, window.t1()).unwrap_or(window);
        judge(clipped)
            .map(|js| js.into_iter().filter(|j| j.writes).collect())
            .unwrap_or_default()
    } else {
        Vec::new()
    };
    let mut out = Vec::new();
    let mut reject = None;
    for j in all.iter().filter(|j| !j.writes) {
        out.push(settle(state, call.txn, &view, j, false));
    }
    let any_write = all.iter().any(|j| j.writes);
    for j in &writes {
        let changed = view.diff(&j.store);
        if let Some((txn, key)) = changed
            .iter()
            .find_map(|(k, _)| state.locker(k, call.txn).map(|t| (t, k.clone())))
        {
            reject.get_or_insert(Reject::Locked { txn, key });
            continue;
        }
        out.push(settle(state, call.txn, &view, j, true));
    }
    if out.is_empty() {
        if any_write && reject.is_none() {
            let at = all
                .iter()
                .filter(|j| j.writes)
                .map(|j| j.at)
                .max()
                .unwrap_or(window.t1());
            reject = Some(Reject::TooEarly {
                at,
                floor: state.floor,
            });
        }
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
    view: &Store<String, String>,
    j: &Judgement<String, String>,
    wrote: bool,
) -> PState {
    let mut next = state.clone();
    for (key, st) in view.diff(&j.store) {
        match txn {
            Some(t) if wrote || next.open.get(&t).is_some_and(|w| w.contains_key(&key)) => {
                next.open.entry(t).or_default().insert(key, st);
            }
            _ => next.committed.set(key, st),
        }
    }
    if wrote {
        next.floor = next.floor.max(j.at);
    }
    next
}

fn apply_end(spec: &Spec, entry: &Entry, state: &PState, txn: TxnId, end: TxnEnd) -> Vec<PState> {
    let writes: Vec<(String, KeyState<String>)> = state
        .open
        .get(&txn)
        .map(|w| w.iter().map(|(k, s)| (k.clone(), s.clone())).collect())
        .unwrap_or_default();
    let finish = |commit: bool| {
        let mut next = state.clone();
        next.open.remove(&txn);
        next.committed = if commit {
            spec.commit(&state.committed, &writes)
        } else {
            spec.abort(&state.committed, &writes)
        };
        next
    };
    let alive = state.crashes == entry.crash_gen;
    let mut out = match end {
        TxnEnd::Commit => vec![finish(true)],
        TxnEnd::Rollback => vec![finish(false)],
        TxnEnd::Unknown if alive => vec![finish(true), finish(false)],
        TxnEnd::Unknown => vec![finish(false)],
    };
    out.sort();
    out.dedup();
    out
}
