//! Firing the open-ended entries (unknown outcomes) of a set of states before the next
//! step: every subset, in every order, as [`super::state`]'s rules allow, without the
//! states another one dominates.
//!
//! What keeps this from multiplying out (issue 17 (c), (d)):
//! - **Dominance**: a state whose pending entries include another's, otherwise equal, can
//!   do all that one can (the extra entries may never fire); only the larger is kept
//!   ([`prune`]). Twelve lost renews of one lease then leave a dozen states, not 2^12.
//! - **Scope**: with the correct semantics an entry acts on its key only, so before placing
//!   an entry only the pending entries on its keys fire; the others stay pending (they
//!   commute with it). Lost writes on different keys do not multiply.
//! - **Restarts**: a restart keeps committed state, so the calls it leaves pending are
//!   deferred ([`super::state::PState::deferred`]) and resolved just before the next entry
//!   on their key, older generations first: fired as of before the crash, or dropped.
//!   Those of transactions fire (or not) before the restart, which ends their transaction.
//! - **Epoch caps**: epochs never decrease, so when the next op reports an epoch, states
//!   whose epoch of its key is already past it lead nowhere and are not expanded.
//!
//! A mutated spec (the diagnosis) gets each shortcut only where its argument holds: no
//! scope when writes touch other keys ([`Mutation::WriteIgnoresKey`]), no deferral when a
//! restart changes state ([`Mutation::CrashLosesCommitted`],
//! [`Mutation::DowntimeExtendsLease`]), no caps at all (some mutations lower epochs).

use super::intern::{Ctx, Sym};
use super::partition::EntryKind;
use super::state::{apply, defers_restarts, PState};
use super::{Exhausted, Meter};
use crate::history::NemesisEffect;
use crate::mutation::Mutation;
use crate::spec::{Epoch, Op, Outcome, Spec};
use std::collections::{HashMap, VecDeque};
use std::hash::{Hash, Hasher};

/// True when an entry acts on its own keys only.
fn keys_apart(spec: &Spec) -> bool {
    spec.mutation != Mutation::WriteIgnoresKey
}

/// Which pending entries must fire before an entry is placed.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Scope {
    /// All of them.
    All,
    /// Those acting on one of these keys (sorted).
    Keys(Vec<Sym>),
    /// Those of transactions (before a restart, with the correct semantics).
    Transactions,
}

/// The keys every entry of a partition acts on, and what must fire before each.
pub(crate) struct Scopes {
    keys: Vec<Vec<Sym>>,
    before: Vec<Scope>,
    /// per entry, the key and the highest epoch it may find there (see [`cap_of`])
    caps: Vec<Option<(Sym, Epoch)>>,
}

impl Scopes {
    pub(crate) fn of(cx: Ctx<'_>) -> Scopes {
        let part = cx.part;
        let (defer, apart) = (defers_restarts(cx.spec), keys_apart(cx.spec));
        let mut txn_keys: HashMap<u64, Vec<Sym>> = HashMap::new();
        let mut keys: Vec<Vec<Sym>> = part
            .entries
            .iter()
            .map(|e| match e.kind {
                EntryKind::Op(o) => {
                    let key: Vec<Sym> = cx.prepared.ops[o].0.key().copied().into_iter().collect();
                    if let Some(t) = e.txn {
                        txn_keys.entry(t).or_default().extend(key.iter().copied());
                    }
                    key
                }
                EntryKind::Nemesis(n) => cx.prepared.lapse_keys[n].into_iter().collect(),
                EntryKind::TxnEnd { .. } => Vec::new(),
            })
            .collect();
        for (i, e) in part.entries.iter().enumerate() {
            if let EntryKind::TxnEnd { txn, .. } = e.kind {
                let mut k = txn_keys.get(&txn).cloned().unwrap_or_default();
                k.sort_unstable();
                k.dedup();
                keys[i] = k;
            }
        }
        let before = part
            .entries
            .iter()
            .enumerate()
            .map(|(i, e)| match e.kind {
                EntryKind::Nemesis(n)
                    if matches!(cx.history.nemeses[n].effect, NemesisEffect::Restart { .. }) =>
                {
                    if defer && apart {
                        Scope::Transactions
                    } else {
                        Scope::All
                    }
                }
                _ if apart => Scope::Keys(keys[i].clone()),
                _ => Scope::All,
            })
            .collect();
        let caps = (0..part.entries.len())
            .map(|i| {
                if *cx.spec == Spec::CORRECT {
                    cap_of(cx, i)
                } else {
                    None
                }
            })
            .collect();
        Scopes { keys, before, caps }
    }

    /// What must fire before entry `i`, and its epoch cap.
    pub(crate) fn before(&self, i: usize) -> (&Scope, Option<(Sym, Epoch)>) {
        (&self.before[i], self.caps[i])
    }

    /// True when pending entry `p` must fire (or be given up) before an entry of `scope`.
    fn in_scope(&self, cx: Ctx<'_>, p: usize, scope: &Scope) -> bool {
        match scope {
            Scope::All => true,
            Scope::Transactions => cx.part.entries[p].txn.is_some(),
            Scope::Keys(keys) => self.keys[p].iter().any(|k| keys.binary_search(k).is_ok()),
        }
    }
}

/// The key of an autocommit op and the highest epoch its key may have before it for the
/// op to give what it reported (epochs never decrease, so states past it lead nowhere).
fn cap_of(cx: Ctx<'_>, i: usize) -> Option<(Sym, Epoch)> {
    let e = &cx.part.entries[i];
    let EntryKind::Op(o) = e.kind else {
        return None;
    };
    if e.txn.is_some() {
        return None;
    }
    let (op, outcome) = &cx.prepared.ops[o];
    if !op.violations().is_empty() {
        return None;
    }
    let key = *op.key()?;
    let cap = match (op, outcome) {
        // a grant of e is made on epoch e - 1; an idempotent re-acquire finds e
        (_, Outcome::Acquired { epoch, .. }) => *epoch,
        (Op::Renew { epoch, .. }, Outcome::Renewed { .. })
        | (Op::Release { epoch, .. }, Outcome::Released) => (*epoch)?,
        (_, Outcome::Inspected(Some(row))) => row.epoch,
        (_, Outcome::Inspected(None)) => 0,
        _ => return None,
    };
    Some((key, cap))
}

/// The states reachable from `states` by firing the entries that must fire before an
/// entry with this scope and cap (deferred ones first, generation by generation, and
/// given up after), without the states another one dominates; or the budget that ran out.
pub(crate) fn resolve(
    cx: Ctx<'_>,
    scopes: &Scopes,
    states: &[PState],
    before: (&Scope, Option<(Sym, Epoch)>),
    meter: &mut Meter,
) -> Result<Vec<PState>, Exhausted> {
    let (scope, cap) = before;
    let mut current: Vec<PState> = states.to_vec();
    // Deferred entries on any key something may write here came before it: resolve them
    // first, the oldest generation first, and give up the rest.
    let deferred_scope = match scope {
        Scope::All => Scope::All,
        Scope::Keys(_) | Scope::Transactions => {
            let mut keys: Vec<Sym> = match scope {
                Scope::Keys(k) => k.clone(),
                _ => Vec::new(),
            };
            for s in &current {
                for p in s.pending.iter().filter(|p| scopes.in_scope(cx, **p, scope)) {
                    keys.extend(scopes.keys[*p].iter().copied());
                }
            }
            keys.sort_unstable();
            keys.dedup();
            Scope::Keys(keys)
        }
    };
    let scope_of_deferred = &deferred_scope;
    let mut gens: Vec<u32> = current
        .iter()
        .flat_map(|s| s.deferred.iter())
        .filter(|p| scopes.in_scope(cx, **p, scope_of_deferred))
        .map(|p| cx.part.entries[*p].crash_gen)
        .collect();
    gens.sort_unstable();
    gens.dedup();
    for gen in gens {
        let chosen = |s: &PState| -> Vec<usize> {
            s.deferred
                .iter()
                .copied()
                .filter(|p| {
                    cx.part.entries[*p].crash_gen == gen
                        && scopes.in_scope(cx, *p, scope_of_deferred)
                })
                .collect()
        };
        current = expand(cx, &current, Source::Deferred(gen), &chosen, cap, meter)?;
        for s in &mut current {
            let done = chosen(s);
            s.deferred.retain(|p| !done.contains(p));
        }
        current = prune(current);
    }
    let chosen = |s: &PState| -> Vec<usize> {
        s.pending
            .iter()
            .copied()
            .filter(|p| scopes.in_scope(cx, *p, scope))
            .collect()
    };
    expand(cx, &current, Source::Pending, &chosen, cap, meter)
}

/// Where the entries being fired sit in a state.
#[derive(Clone, Copy)]
enum Source {
    Pending,
    /// deferred by restarts, of this generation: fired as of before its crash
    Deferred(u32),
}

/// Every state reachable by firing entries `chosen` picks (any subset, any order).
fn expand(
    cx: Ctx<'_>,
    states: &[PState],
    source: Source,
    chosen: &dyn Fn(&PState) -> Vec<usize>,
    cap: Option<(Sym, Epoch)>,
    meter: &mut Meter,
) -> Result<Vec<PState>, Exhausted> {
    let past_cap = |s: &PState| cap.is_some_and(|(k, e)| s.committed.epoch(&k) > e);
    if states.iter().all(|s| chosen(s).is_empty()) {
        return Ok(states.to_vec());
    }
    let mut kept = Antichain::default();
    // breadth first (fewest fired first): a state many firings reach is then usually met
    // after the state fewer firings reach and that dominates it
    let mut frontier: VecDeque<PState> = VecDeque::new();
    for s in states {
        if kept.insert(s.clone()) {
            frontier.push_back(s.clone());
        }
    }
    while let Some(s) = frontier.pop_front() {
        if !kept.holds(&s) {
            continue; // dominated since it was queued
        }
        for e in chosen(&s) {
            let mut base = s.clone();
            let fired = match source {
                Source::Pending => {
                    base.pending.retain(|x| *x != e);
                    apply(cx, e, &base, false, false)
                }
                Source::Deferred(gen) => {
                    base.deferred.retain(|x| *x != e);
                    // as of before the crash that ended its session
                    let mut then = base.clone();
                    then.crashes = gen;
                    apply(cx, e, &then, false, false).map(|v| {
                        v.into_iter()
                            .map(|mut f| {
                                f.crashes = base.crashes;
                                f
                            })
                            .collect()
                    })
                }
            };
            let Ok(fired) = fired else {
                continue;
            };
            for f in fired {
                if f != base && !past_cap(&f) && kept.insert(f.clone()) {
                    frontier.push_back(f);
                }
            }
            if let Some(x) = meter.over(kept.len, kept.bytes) {
                return Err(x);
            }
            if let Some(x) = meter.clock() {
                return Err(x);
            }
        }
    }
    Ok(kept.into_sorted())
}

/// `states` without those another one dominates, sorted: the canonical form of a set of
/// states.
pub(crate) fn prune(states: Vec<PState>) -> Vec<PState> {
    if states.len() < 2 {
        return states;
    }
    let mut kept = Antichain::default();
    for s in states {
        kept.insert(s);
    }
    kept.into_sorted()
}

/// States none of which dominates another: grouped by everything but their open-ended
/// entries, each group keeping only the states whose pending and deferred entries no other
/// one's hold.
#[derive(Default)]
struct Antichain {
    groups: HashMap<u64, Vec<PState>>,
    len: u64,
    bytes: u64,
}

impl Antichain {
    fn key(s: &PState) -> u64 {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        s.committed.hash(&mut h);
        s.open.hash(&mut h);
        s.floors.hash(&mut h);
        s.crashes.hash(&mut h);
        h.finish()
    }

    /// Adds `s` unless a kept state dominates it (or equals it), dropping those it
    /// dominates; true when added.
    fn insert(&mut self, s: PState) -> bool {
        let group = self.groups.entry(Antichain::key(&s)).or_default();
        if group.iter().any(|k| dominates(k, &s)) {
            return false;
        }
        let before = group.len();
        let mut freed = 0;
        group.retain(|k| {
            let dominated = dominates(&s, k);
            if dominated {
                freed += k.heap_bytes();
            }
            !dominated
        });
        self.len -= (before - group.len()) as u64;
        self.bytes = self.bytes.saturating_sub(freed) + s.heap_bytes();
        self.len += 1;
        group.push(s);
        true
    }

    /// True when `s` itself is kept.
    fn holds(&self, s: &PState) -> bool {
        self.groups
            .get(&Antichain::key(s))
            .is_some_and(|g| g.contains(s))
    }

    fn into_sorted(self) -> Vec<PState> {
        let mut out: Vec<PState> = self.groups.into_values().flatten().collect();
        out.sort();
        out
    }
}

/// `a` can do all `b` can: equal but for open-ended entries, of which `a` has all `b` has.
fn dominates(a: &PState, b: &PState) -> bool {
    a.crashes == b.crashes
        && a.committed == b.committed
        && a.floors == b.floors
        && a.open == b.open
        && is_subset(&b.pending, &a.pending)
        && is_subset(&b.deferred, &a.deferred)
}

/// True when every element of sorted `a` is in sorted `b`.
fn is_subset(a: &[usize], b: &[usize]) -> bool {
    if a.len() > b.len() {
        return false;
    }
    let mut j = 0;
    for x in a {
        while j < b.len() && b[j] < *x {
            j += 1;
        }
        if j == b.len() || b[j] != *x {
            return false;
        }
        j += 1;
    }
    true
}
