//! Linear pre-checks (Elle-style): the common violations of one key found in O(n log n),
//! before the search.
//!
//! - `grant-epoch-owner`, `grant-epoch-order` (invariant 3): one owner per granted epoch;
//!   a grant committed before another acquire was invoked has a smaller epoch than it.
//! - `grant-overlap` (invariant 1): a later epoch's grant that took effect before the lease
//!   of an earlier epoch can have ended.
//! - `success-after-lapse` (invariant 7): a renew or release that succeeded at or after the
//!   latest expiry its lease can have had.
//!
//! A finding here must be a finding of the search too, so every bound is taken over the
//! search's rules (checker/state.rs), not over what a real server could do. The argument:
//! 1. Per key, the writes that reach the committed state (autocommit writes, and the pending
//!    writes of a transaction that commits) form one chain in the order they are placed: a
//!    writer row-locks the key until its transaction ends, so no other write interleaves.
//!    Epochs strictly increase along the chain: a grant of epoch `e` is unique in it.
//! 2. An acquire that returned `Acquired` either is that chain's grant or is an idempotent
//!    re-acquire that saw it, when the acquire's own effect certainly reaches the committed
//!    state ("counted": autocommit, or a committed transaction no restart can come into).
//!    So every counted acquire of epoch `e` names the one owner of the chain's lease `e`, and
//!    that lease's grant is placed no later than any of them.
//! 3. Writes are placed in the order of their effective instants (the `floor`), so every
//!    write on the chain after the grant of `e` takes effect at or after it; a write of an
//!    explicit transaction orders the other writers from its COMMIT's window on, so a
//!    release in a transaction that acquires nothing of its key ends the lease, for the
//!    next grant, no earlier than that window's start.
//! 4. A stored expiry only changes by writes (grant, renew, injected lapse); reads narrow it.
//!    So the lease's expiry at any point lies within the bounds some write to it set.
//!
//! Anything that may or may not have happened (unknown outcomes, transactions of unknown
//! end, injected lapses) only widens the bounds. Rolled-back transactions are ignored: their
//! writes never reach the chain, and no counted op sees them.
//!
//! The checks encode the correct semantics; with a mutated spec they report nothing.

use super::explain::{describe_entry, fmt_ts, invariant_line, time_base};
use super::partition::{EntryKind, Partition};
use super::{FoundBy, Violation};
use crate::history::{History, Nanos, NemesisEffect, OpRecord, TxnEnd};
use crate::invariant::Invariant;
use crate::spec::{Epoch, Op, Outcome, Spec};
use crate::time::{Interval, Span, Ts};
use std::collections::{BTreeMap, BTreeSet};

/// The first violation a pre-check finds in `part`, if any.
pub fn run(spec: &Spec, history: &History, part: &Partition) -> Option<Violation> {
    // The bounds below follow the correct semantics; a mutant is for the search alone.
    if *spec != Spec::CORRECT {
        return None;
    }
    let by_key = collect(history, part);
    by_key.iter().find_map(|(key, items)| {
        check_key(items).map(|f| f.into_violation(history, part, key, items))
    })
}

fn check_key(items: &[Item<'_>]) -> Option<Finding> {
    if let Some(f) = epoch_owners(items).or_else(|| epoch_order(items)) {
        return Some(f);
    }
    // From here on every counted acquire of an epoch names the same owner.
    let facts = KeyFacts::of(items);
    overlap(items, &facts).or_else(|| success_after_lapse(&facts))
}

// ---------------------------------------------------------------------------------------
// What each entry says about its key

/// What one op or nemesis event may have done to its key's leases.
#[derive(Clone, Copy, Debug)]
enum Fact<'h> {
    /// acquire returned `Acquired`: the grant of `epoch`, or an idempotent re-acquire of it.
    Acquired {
        owner: &'h str,
        epoch: Epoch,
        expires_at: Ts,
        ttl: Interval,
    },
    /// acquire with an unknown outcome: it may have granted some epoch to `owner`.
    MaybeAcquired { owner: &'h str, ttl: Interval },
    /// renew returned ok.
    Renewed {
        owner: &'h str,
        epoch: Epoch,
        expires_at: Ts,
        ttl: Interval,
    },
    /// renew with an unknown outcome.
    MaybeRenewed {
        owner: &'h str,
        epoch: Epoch,
        ttl: Interval,
    },
    /// release returned ok, or its outcome is unknown: either way it may end the lease,
    /// and only its earliest instant matters.
    Released { owner: &'h str, epoch: Epoch },
    /// An injected lapse: the lease held then (if any) expires within its window.
    Lapse,
}

impl<'h> Fact<'h> {
    fn of(call: &'h Op<String, String>, outcome: &Outcome<String>) -> Option<Fact<'h>> {
        // An invalid call changes nothing; one that reported success is the search's to reject.
        if !call.violations().is_empty() {
            return None;
        }
        match (call, outcome) {
            (
                Op::Acquire {
                    owner: Some(owner),
                    ttl: Some(ttl),
                    ..
                },
                _,
            ) => Fact::of_acquire(owner, *ttl, outcome),
            (
                Op::Renew {
                    owner: Some(owner),
                    epoch: Some(epoch),
                    ttl: Some(ttl),
                    ..
                },
                _,
            ) => Fact::of_renew(owner, *epoch, *ttl, outcome),
            (
                Op::Release {
                    owner: Some(owner),
                    epoch: Some(epoch),
                    ..
                },
                Outcome::Released | Outcome::Unknown,
            ) => Some(Fact::Released {
                owner,
                epoch: *epoch,
            }),
            _ => None,
        }
    }

    fn of_acquire(owner: &'h str, ttl: Interval, outcome: &Outcome<String>) -> Option<Fact<'h>> {
        match outcome {
            Outcome::Acquired { epoch, expires_at } => Some(Fact::Acquired {
                owner,
                epoch: *epoch,
                expires_at: *expires_at,
                ttl,
            }),
            Outcome::Unknown => Some(Fact::MaybeAcquired { owner, ttl }),
            _ => None,
        }
    }

    fn of_renew(
        owner: &'h str,
        epoch: Epoch,
        ttl: Interval,
        outcome: &Outcome<String>,
    ) -> Option<Fact<'h>> {
        match outcome {
            Outcome::Renewed { expires_at } => Some(Fact::Renewed {
                owner,
                epoch,
                expires_at: *expires_at,
                ttl,
            }),
            Outcome::Unknown => Some(Fact::MaybeRenewed { owner, epoch, ttl }),
            _ => None,
        }
    }
}

/// One entry of a key, with what the pre-checks need of it.
#[derive(Clone, Copy, Debug)]
struct Item<'h> {
    fact: Fact<'h>,
    /// Index into the partition's entries.
    entry: usize,
    /// Real time it was invoked (started).
    call: Nanos,
    /// Real time it returned; `None`: open-ended (unknown outcome).
    ret: Option<Nanos>,
    /// Server-time window of its effect (reported or derived).
    window: Span,
    /// Real time by which its effect is in the committed state in every linearization;
    /// `None` when it may never be (unknown outcome, transaction of unknown end, a restart
    /// that may come between it and its commit).
    committed_by: Option<Nanos>,
    /// The earliest instant a grant of another lease can take effect at after this one, were
    /// it committed: its own window's start, or, in an explicit transaction that makes no
    /// acquire of the key, the later of that and the start of its COMMIT's window (it
    /// row-locks the key until then, so every other writer comes after its commit: the
    /// search's floor). A transaction that also acquires the key may grant it before its
    /// own COMMIT.
    orders_from: Ts,
}

impl Item<'_> {
    /// The instants of its window a reported expiry fixes for a grant or renew (the
    /// instants `t` with `t + ttl = expires_at`: with months, up to four); the whole window
    /// when none does (the search rejects the op then).
    fn implied_start(&self) -> Option<(Ts, Ts)> {
        match self.fact {
            Fact::Acquired {
                expires_at, ttl, ..
            }
            | Fact::Renewed {
                expires_at, ttl, ..
            } => {
                let (t0, t1) = (self.window.t0(), self.window.t1());
                Some(
                    ttl.earliest_source_in(expires_at, t0, t1)
                        .zip(ttl.latest_source_in(expires_at, t0, t1))
                        .unwrap_or((t0, t1)),
                )
            }
            _ => None,
        }
    }

    /// The earliest instant it can have taken effect at.
    fn earliest(&self) -> Ts {
        self.implied_start()
            .map_or(self.window.t0(), |(earliest, _)| earliest)
    }

    /// The latest instant it can have taken effect at.
    fn latest(&self) -> Ts {
        self.implied_start()
            .map_or(self.window.t1(), |(_, latest)| latest)
    }

    /// A counted `Acquired`: (owner, epoch, committed by).
    fn counted_grant(&self) -> Option<(&str, Epoch, Nanos)> {
        match (self.fact, self.committed_by) {
            (Fact::Acquired { owner, epoch, .. }, Some(by)) => Some((owner, epoch, by)),
            _ => None,
        }
    }
}

/// Restarts of a partition, to tell whether one can be placed inside a span of real time.
struct Restarts {
    /// Start of each restart, sorted.
    starts: Vec<Nanos>,
    /// The latest end among the restarts up to each position of `starts`.
    max_end: Vec<Nanos>,
}

impl Restarts {
    fn of(history: &History, part: &Partition) -> Restarts {
        let mut spans: Vec<(Nanos, Nanos)> = part
            .entries
            .iter()
            .filter_map(|e| match e.kind {
                EntryKind::Nemesis(i) => match history.nemeses[i].effect {
                    NemesisEffect::Restart { .. } => Some((e.call, e.ret.unwrap_or(Nanos::MAX))),
                    _ => None,
                },
                _ => None,
            })
            .collect();
        spans.sort_unstable();
        let mut latest = 0;
        let max_end = spans
            .iter()
            .map(|(_, end)| {
                latest = latest.max(*end);
                latest
            })
            .collect();
        Restarts {
            starts: spans.iter().map(|(s, _)| *s).collect(),
            max_end,
        }
    }

    /// True when a restart may be placed after an entry invoked at `from` and before one
    /// that returned at `to`: it neither ended before `from` nor started after `to`.
    fn may_fall_within(&self, from: Nanos, to: Nanos) -> bool {
        let n = self.starts.partition_point(|s| *s <= to);
        n > 0 && self.max_end[n - 1] >= from
    }
}

/// The items of every key of `part`, in no particular order.
fn collect<'h>(history: &'h History, part: &Partition) -> BTreeMap<&'h str, Vec<Item<'h>>> {
    let restarts = Restarts::of(history, part);
    // (transaction, key) of every acquire made in a transaction
    let acquiring: BTreeSet<(u64, &str)> = part
        .entries
        .iter()
        .filter_map(|e| match e.kind {
            EntryKind::Op(i) => Some(&history.ops[i]),
            _ => None,
        })
        .filter(|op| matches!(op.call, Op::Acquire { .. }))
        .filter_map(|op| Some((op.txn?, op.call.key()?.as_str())))
        .collect();
    let mut by_key: BTreeMap<&'h str, Vec<Item<'h>>> = BTreeMap::new();
    for (index, entry) in part.entries.iter().enumerate() {
        let found = match entry.kind {
            EntryKind::Op(i) => op_item(history, part, &restarts, &acquiring, index, i),
            EntryKind::Nemesis(i) => match &history.nemeses[i].effect {
                NemesisEffect::Lapse { key, .. } => Some((
                    key.as_str(),
                    Item {
                        fact: Fact::Lapse,
                        entry: index,
                        call: entry.call,
                        ret: entry.ret,
                        window: entry.window,
                        committed_by: None,
                        orders_from: entry.window.t0(),
                    },
                )),
                _ => None,
            },
            EntryKind::TxnEnd { .. } => None,
        };
        if let Some((key, item)) = found {
            by_key.entry(key).or_default().push(item);
        }
    }
    by_key
}

fn op_item<'h>(
    history: &'h History,
    part: &Partition,
    restarts: &Restarts,
    acquiring: &BTreeSet<(u64, &str)>,
    index: usize,
    op_index: usize,
) -> Option<(&'h str, Item<'h>)> {
    let op = &history.ops[op_index];
    let key = op.call.key()?;
    let outcome = op.result.outcome();
    let fact = Fact::of(&op.call, &outcome)?;
    let committed_by = match commit_of(op, &outcome, part, restarts) {
        // Its effects never reach the committed state, and no counted op sees them.
        Commit::Never => return None,
        Commit::Maybe => None,
        Commit::By(at) => Some(at),
    };
    let entry = &part.entries[index];
    let commit_window = op
        .txn
        .filter(|t| !acquiring.contains(&(*t, key.as_str())))
        .and_then(|t| part.txn_end.get(&t))
        .map(|i| part.entries[*i].window.t0());
    Some((
        key.as_str(),
        Item {
            fact,
            entry: index,
            call: entry.call,
            ret: entry.ret,
            window: entry.window,
            committed_by,
            orders_from: commit_window.map_or(entry.window.t0(), |c| entry.window.t0().max(c)),
        },
    ))
}

/// Whether an op's effect reaches the committed state in every linearization.
enum Commit {
    /// In no linearization: its transaction rolled back.
    Never,
    /// In some linearizations only.
    Maybe,
    /// In every one, by this real time.
    By(Nanos),
}

fn commit_of(
    op: &OpRecord,
    outcome: &Outcome<String>,
    part: &Partition,
    restarts: &Restarts,
) -> Commit {
    let unknown = *outcome == Outcome::Unknown;
    let Some(txn) = op.txn else {
        return if unknown {
            Commit::Maybe
        } else {
            Commit::By(op.complete)
        };
    };
    let end = part.txn_end.get(&txn).map(|i| &part.entries[*i]);
    let Some((kind, end_call, end_ret)) = end.and_then(|e| match e.kind {
        EntryKind::TxnEnd { end, .. } => Some((end, e.call, e.ret)),
        _ => None,
    }) else {
        return Commit::Maybe;
    };
    match (kind, end_ret) {
        (TxnEnd::Rollback, _) => Commit::Never,
        // An op answered after COMMIT was sent may be placed after the end (its write then
        // never commits); a restart between it and the end drops its pending write.
        (TxnEnd::Commit, Some(done))
            if !unknown && op.complete < end_call && !restarts.may_fall_within(op.invoke, done) =>
        {
            Commit::By(done)
        }
        _ => Commit::Maybe,
    }
}

// ---------------------------------------------------------------------------------------
// Findings

/// What a pre-check found, by entry index (into the partition), before it is worded.
#[derive(Clone, Copy, Debug)]
enum Finding {
    /// Epoch granted to two owners: `later` conflicts with `earlier`.
    TwoOwners { later: usize, earlier: usize },
    /// `later`, invoked after `earlier` committed, reported a smaller epoch.
    EpochOrder { later: usize, earlier: usize },
    /// The grant `grant` took effect by `latest_start`, but the lease granted by `lease`
    /// cannot have ended before `earliest_end` (a bound set by `end_by`).
    Overlap {
        grant: usize,
        lease: usize,
        end_by: usize,
        latest_start: Ts,
        earliest_end: Ts,
        same_owner: bool,
    },
    /// The renew or release `late` took effect at `earliest` at the soonest, at or after
    /// `latest_expiry`, the latest expiry its lease can have had (a bound set by `expiry_by`).
    AfterLapse {
        late: usize,
        expiry_by: usize,
        earliest: Ts,
        latest_expiry: Ts,
    },
}

impl Finding {
    fn name(&self) -> &'static str {
        match self {
            Finding::TwoOwners { .. } => "grant-epoch-owner",
            Finding::EpochOrder { .. } => "grant-epoch-order",
            Finding::Overlap { .. } => "grant-overlap",
            Finding::AfterLapse { .. } => "success-after-lapse",
        }
    }

    fn invariant(&self) -> Invariant {
        match self {
            Finding::TwoOwners { .. } | Finding::EpochOrder { .. } => Invariant::GrantEpochFresh,
            // The owner's own live lease: its acquire had to be an idempotent re-acquire.
            Finding::Overlap {
                same_owner: true, ..
            } => Invariant::ReacquireIdempotent,
            Finding::Overlap { .. } => Invariant::MutualExclusion,
            Finding::AfterLapse { .. } => Invariant::LapseIsFinal,
        }
    }

    /// The entries involved, the offending one first.
    fn entries(&self) -> Vec<usize> {
        let mut out = match *self {
            Finding::TwoOwners { later, earlier } | Finding::EpochOrder { later, earlier } => {
                vec![later, earlier]
            }
            Finding::Overlap {
                grant,
                lease,
                end_by,
                ..
            } => vec![grant, lease, end_by],
            Finding::AfterLapse {
                late, expiry_by, ..
            } => vec![late, expiry_by],
        };
        let mut seen = Vec::new();
        out.retain(|e| {
            let fresh = !seen.contains(e);
            seen.push(*e);
            fresh
        });
        out
    }

    fn into_violation(
        self,
        history: &History,
        part: &Partition,
        key: &str,
        items: &[Item<'_>],
    ) -> Violation {
        let entries = self.entries();
        let ops = entries
            .iter()
            .filter_map(|i| match part.entries[*i].kind {
                EntryKind::Op(o) => Some(history.ops[o].id),
                _ => None,
            })
            .collect();
        Violation {
            keys: vec![key.to_string()],
            invariant: self.invariant(),
            ops,
            prefix: Vec::new(),
            explanation: self.explain(history, part, key, items),
            found_by: FoundBy::Precheck(self.name()),
            diagnosis: None,
            also_consistent_with: Vec::new(),
        }
    }

    fn explain(
        &self,
        history: &History,
        part: &Partition,
        key: &str,
        items: &[Item<'_>],
    ) -> String {
        let base = time_base(history);
        let mut text = format!(
            "key {key:?}: the pre-check {} finds: {}\n",
            self.name(),
            self.summary(base, part, items)
        );
        for i in self.entries() {
            text.push_str(&format!("  {}\n", describe_entry(history, part, i, base)));
        }
        text.push_str(&format!("  {}\n", invariant_line(self.invariant())));
        text
    }

    /// What was found, in one sentence about the ops listed after it.
    fn summary(&self, base: Ts, part: &Partition, items: &[Item<'_>]) -> String {
        let ts = |t: Ts| fmt_ts(t, base);
        match *self {
            Finding::TwoOwners { .. } => "both acquires listed committed reporting the same \
                epoch for different owners, but a key grants each epoch once, to one owner."
                .to_string(),
            Finding::EpochOrder { later, earlier } => format!(
                "the first acquire listed was invoked at real time {} ns, after the epoch of \
                 the second was committed (by {} ns), yet it reports a smaller epoch.",
                part.entries[later].call,
                committed_by(items, earlier).unwrap_or(0)
            ),
            Finding::Overlap {
                latest_start,
                earliest_end,
                same_owner,
                ..
            } => format!(
                "the grant by the first op listed took effect at {} at the latest, but the \
                 lease of the second, an earlier epoch, cannot have ended before {} (the \
                 earliest end its writes allow, set by the last op listed), {}.",
                ts(latest_start),
                ts(earliest_end),
                if same_owner {
                    "so the owner re-acquired its own live lease and got a new grant"
                } else {
                    "so two owners held the key at once"
                }
            ),
            Finding::AfterLapse {
                earliest,
                latest_expiry,
                ..
            } => format!(
                "the first op listed succeeded at {} at the earliest, but its lease had \
                 expired by {} at the latest (the highest expiry any write to it that can be \
                 placed before it can have set, by the second op listed).",
                ts(earliest),
                ts(latest_expiry)
            ),
        }
    }
}

fn committed_by(items: &[Item<'_>], entry: usize) -> Option<Nanos> {
    items
        .iter()
        .find(|i| i.entry == entry)
        .and_then(|i| i.committed_by)
}

// ---------------------------------------------------------------------------------------
// Invariant 3: grant epochs

/// Two counted acquires of one epoch by different owners: the chain has one lease per epoch.
fn epoch_owners(items: &[Item<'_>]) -> Option<Finding> {
    let mut grants: Vec<&Item<'_>> = items
        .iter()
        .filter(|i| i.counted_grant().is_some())
        .collect();
    grants.sort_by_key(|i| (i.call, i.entry));
    let mut owner_of: BTreeMap<Epoch, (&str, usize)> = BTreeMap::new();
    for item in grants {
        let Some((owner, epoch, _)) = item.counted_grant() else {
            continue;
        };
        match owner_of.get(&epoch) {
            Some((first, entry)) if *first != owner => {
                return Some(Finding::TwoOwners {
                    later: item.entry,
                    earlier: *entry,
                })
            }
            Some(_) => {}
            None => {
                owner_of.insert(epoch, (owner, item.entry));
            }
        }
    }
    None
}

/// A counted acquire invoked after another's epoch `e` was committed sees an epoch `>= e`
/// (the committed epoch never decreases), so it reports `e` or more.
fn epoch_order(items: &[Item<'_>]) -> Option<Finding> {
    let mut committed: Vec<(Nanos, Epoch, usize)> = Vec::new();
    let mut invoked: Vec<(Nanos, Epoch, usize)> = Vec::new();
    for item in items {
        if let Some((_, epoch, by)) = item.counted_grant() {
            committed.push((by, epoch, item.entry));
            invoked.push((item.call, epoch, item.entry));
        }
    }
    committed.sort_unstable();
    invoked.sort_unstable();
    let mut highest: Option<(Epoch, usize)> = None;
    let mut next = 0;
    for (call, epoch, entry) in invoked {
        while let Some((by, e, earlier)) = committed.get(next).copied() {
            if by >= call {
                break;
            }
            if highest.is_none_or(|(h, _)| e > h) {
                highest = Some((e, earlier));
            }
            next += 1;
        }
        if let Some((h, earlier)) = highest {
            if epoch < h {
                return Some(Finding::EpochOrder {
                    later: entry,
                    earlier,
                });
            }
        }
    }
    None
}

// ---------------------------------------------------------------------------------------
// What is known of each lease of a key

/// A bound and the entry that set it.
type Bound = (Ts, usize);

fn lower(a: Option<Bound>, b: Option<Bound>) -> Option<Bound> {
    match (a, b) {
        (Some(x), Some(y)) => Some(if y.0 < x.0 { y } else { x }),
        (x, None) => x,
        (None, y) => y,
    }
}

fn higher(a: Option<Bound>, b: Option<Bound>) -> Option<Bound> {
    match (a, b) {
        (Some(x), Some(y)) => Some(if y.0 > x.0 { y } else { x }),
        (x, None) => x,
        (None, y) => y,
    }
}

/// Unknown acquires of one owner, sorted by invoke, with running bounds over each prefix.
#[derive(Default)]
struct MaybeGrants {
    calls: Vec<Nanos>,
    prefix: Vec<MaybeSummary>,
}

/// Bounds over a set of unknown acquires, as grants they may have been.
#[derive(Clone, Copy)]
struct MaybeSummary {
    earliest_start: Bound,
    latest_start: Bound,
    lowest_expiry: Bound,
    highest_expiry: Bound,
}

impl MaybeGrants {
    fn of(mut found: Vec<(Nanos, Span, Interval, usize)>) -> MaybeGrants {
        found.sort_by_key(|(call, _, _, entry)| (*call, *entry));
        let mut out = MaybeGrants::default();
        let mut acc: Option<MaybeSummary> = None;
        for (call, window, ttl, entry) in found {
            let expiries = ttl.image(window.t0(), window.t1());
            let one = MaybeSummary {
                earliest_start: (window.t0(), entry),
                latest_start: (window.t1(), entry),
                lowest_expiry: (expiries.lo, entry),
                highest_expiry: (expiries.hi, entry),
            };
            let next = acc.map_or(one, |a| a.join(&one));
            out.calls.push(call);
            out.prefix.push(next);
            acc = Some(next);
        }
        out
    }

    /// Bounds over the unknown acquires invoked at or before `at`.
    fn invoked_by(&self, at: Nanos) -> Option<MaybeSummary> {
        let n = self.calls.partition_point(|c| *c <= at);
        n.checked_sub(1).map(|i| self.prefix[i])
    }
}

impl MaybeSummary {
    fn join(&self, other: &MaybeSummary) -> MaybeSummary {
        let min = |a: Bound, b: Bound| if b.0 < a.0 { b } else { a };
        let max = |a: Bound, b: Bound| if b.0 > a.0 { b } else { a };
        MaybeSummary {
            earliest_start: min(self.earliest_start, other.earliest_start),
            latest_start: max(self.latest_start, other.latest_start),
            lowest_expiry: min(self.lowest_expiry, other.lowest_expiry),
            highest_expiry: max(self.highest_expiry, other.highest_expiry),
        }
    }
}

/// The injected lapses of a key, indexed two ways.
#[derive(Default)]
struct Lapses {
    /// (start, running highest window end up to here), sorted by start.
    by_call: Vec<(Nanos, Bound)>,
    /// (window end, lowest window start from here on), sorted by window end.
    by_end: Vec<(Ts, Bound)>,
}

impl Lapses {
    fn of(items: &[Item<'_>]) -> Lapses {
        let lapses: Vec<&Item<'_>> = items
            .iter()
            .filter(|i| matches!(i.fact, Fact::Lapse))
            .collect();
        let mut by_call: Vec<(Nanos, Bound)> = lapses
            .iter()
            .map(|i| (i.call, (i.window.t1(), i.entry)))
            .collect();
        by_call.sort_unstable();
        let mut acc: Option<Bound> = None;
        for e in &mut by_call {
            acc = higher(acc, Some(e.1));
            e.1 = acc.unwrap_or(e.1);
        }
        let mut by_end: Vec<(Ts, Bound)> = lapses
            .iter()
            .map(|i| (i.window.t1(), (i.window.t0(), i.entry)))
            .collect();
        by_end.sort_unstable();
        let mut acc: Option<Bound> = None;
        for e in by_end.iter_mut().rev() {
            acc = lower(acc, Some(e.1));
            e.1 = acc.unwrap_or(e.1);
        }
        Lapses { by_call, by_end }
    }

    /// The highest window end of the lapses started at or before `at`.
    fn highest_end_started_by(&self, at: Nanos) -> Option<Bound> {
        let n = self.by_call.partition_point(|(c, _)| *c <= at);
        n.checked_sub(1).map(|i| self.by_call[i].1)
    }

    /// The lowest window start of the lapses whose window ends at or after `t`: those that
    /// can take effect after a grant at `t`.
    fn lowest_start_ending_from(&self, t: Ts) -> Option<Bound> {
        let n = self.by_end.partition_point(|(end, _)| *end < t);
        self.by_end.get(n).map(|(_, b)| *b)
    }
}

/// The items of one lease: an (owner, epoch) pair.
#[derive(Default)]
struct LeaseItems<'i, 'h> {
    /// `Acquired` of this epoch by this owner (the grant is one of them, or an unknown one).
    acquired: Vec<&'i Item<'h>>,
    /// Renews of this epoch by this owner, ok or unknown.
    renewed: Vec<&'i Item<'h>>,
    /// Releases of this epoch by this owner, ok or unknown.
    released: Vec<&'i Item<'h>>,
}

/// Everything the lease checks need of one key.
struct KeyFacts<'i, 'h> {
    leases: BTreeMap<(&'h str, Epoch), LeaseItems<'i, 'h>>,
    maybe_grants: BTreeMap<&'h str, MaybeGrants>,
    lapses: Lapses,
}

impl<'i, 'h> KeyFacts<'i, 'h> {
    fn of(items: &'i [Item<'h>]) -> KeyFacts<'i, 'h> {
        let mut leases: BTreeMap<(&'h str, Epoch), LeaseItems<'i, 'h>> = BTreeMap::new();
        let mut maybe: BTreeMap<&'h str, Vec<(Nanos, Span, Interval, usize)>> = BTreeMap::new();
        for item in items {
            match item.fact {
                Fact::Acquired { owner, epoch, .. } => leases
                    .entry((owner, epoch))
                    .or_default()
                    .acquired
                    .push(item),
                Fact::Renewed { owner, epoch, .. } | Fact::MaybeRenewed { owner, epoch, .. } => {
                    leases.entry((owner, epoch)).or_default().renewed.push(item)
                }
                Fact::Released { owner, epoch, .. } => leases
                    .entry((owner, epoch))
                    .or_default()
                    .released
                    .push(item),
                Fact::MaybeAcquired { owner, ttl } => {
                    maybe
                        .entry(owner)
                        .or_default()
                        .push((item.call, item.window, ttl, item.entry))
                }
                Fact::Lapse => {}
            }
        }
        KeyFacts {
            leases,
            maybe_grants: maybe
                .into_iter()
                .map(|(o, v)| (o, MaybeGrants::of(v)))
                .collect(),
            lapses: Lapses::of(items),
        }
    }

    /// Bounds over the unknown acquires of `owner` invoked at or before `at`.
    fn maybe_grants(&self, owner: &str, at: Nanos) -> Option<MaybeSummary> {
        self.maybe_grants.get(owner)?.invoked_by(at)
    }
}

/// What is known of the grant of one lease (the one on the chain).
#[derive(Clone, Copy)]
struct GrantBounds {
    /// It took effect at or after this instant.
    earliest: Ts,
    /// It took effect at or before this instant.
    latest: Bound,
    /// Unknown acquires invoked after this cannot be it: it is placed no later than every
    /// counted acquire of its epoch, and those return by here.
    maybe_until: Nanos,
    /// The earliest invoke among the acquires that may be it.
    first_call: Nanos,
}

fn grant_bounds(
    facts: &KeyFacts<'_, '_>,
    owner: &str,
    lease: &LeaseItems<'_, '_>,
) -> Option<GrantBounds> {
    let maybe_until = lease
        .acquired
        .iter()
        .filter(|i| i.committed_by.is_some())
        .filter_map(|i| i.ret)
        .min()
        .unwrap_or(Nanos::MAX);
    let maybe = facts.maybe_grants(owner, maybe_until);
    let mut earliest = maybe.map(|m| m.earliest_start.0);
    let mut latest = maybe.map(|m| m.latest_start);
    let mut first_call = maybe.and_then(|_| {
        facts
            .maybe_grants
            .get(owner)
            .and_then(|g| g.calls.first().copied())
    });
    for item in &lease.acquired {
        earliest = Some(earliest.map_or(item.earliest(), |e| e.min(item.earliest())));
        latest = higher(latest, Some((item.latest(), item.entry)));
        first_call = Some(first_call.map_or(item.call, |c| c.min(item.call)));
    }
    Some(GrantBounds {
        earliest: earliest?,
        latest: latest?,
        maybe_until,
        first_call: first_call?,
    })
}

// ---------------------------------------------------------------------------------------
// Invariant 1: mutual exclusion

/// The earliest instant the lease can have ended at: its end is a write on the chain after
/// its grant (a release, or the next grant, which needs the stored expiry passed), and the
/// stored expiry lies within what some write to the lease set.
fn earliest_end(
    facts: &KeyFacts<'_, '_>,
    owner: &str,
    lease: &LeaseItems<'_, '_>,
    grant: &GrantBounds,
) -> Option<Bound> {
    let after_grant = |t: Ts| t.max(grant.earliest);
    let mut end: Option<Bound> = None;
    for item in lease
        .acquired
        .iter()
        .chain(&lease.renewed)
        .chain(&lease.released)
    {
        let bound = match item.fact {
            Fact::Acquired { expires_at, .. } | Fact::Renewed { expires_at, .. } => expires_at,
            Fact::MaybeRenewed { ttl, .. } => {
                ttl.image(after_grant(item.window.t0()), item.window.t1())
                    .lo
            }
            // a release ends the lease for the next grant once it committed
            _ => after_grant(item.orders_from),
        };
        end = lower(end, Some((bound, item.entry)));
    }
    let maybe = facts.maybe_grants(owner, grant.maybe_until);
    end = lower(end, maybe.map(|m| m.lowest_expiry));
    let lapse = facts
        .lapses
        .lowest_start_ending_from(grant.earliest)
        .map(|(t, e)| (after_grant(t), e));
    lower(end, lapse)
}

/// A grant of a later epoch that took effect before the lease of an earlier one can have
/// ended. Epochs are walked in increasing order, keeping the latest such end so far.
fn overlap(items: &[Item<'_>], facts: &KeyFacts<'_, '_>) -> Option<Finding> {
    let mut owner_of: BTreeMap<Epoch, &str> = BTreeMap::new();
    for item in items {
        if let Some((owner, epoch, _)) = item.counted_grant() {
            owner_of.insert(epoch, owner);
        }
    }
    // (earliest end, owner, a counted acquire of the lease, the entry that set the end)
    let mut latest_end: Option<(Ts, &str, usize, usize)> = None;
    for (epoch, owner) in owner_of {
        let Some(lease) = facts.leases.get(&(owner, epoch)) else {
            continue;
        };
        let Some(grant) = grant_bounds(facts, owner, lease) else {
            continue;
        };
        if let Some((end, earlier_owner, lease_entry, end_by)) = latest_end {
            if grant.latest.0 < end {
                return Some(Finding::Overlap {
                    grant: grant.latest.1,
                    lease: lease_entry,
                    end_by,
                    latest_start: grant.latest.0,
                    earliest_end: end,
                    same_owner: earlier_owner == owner,
                });
            }
        }
        if let Some((end, end_by)) = earliest_end(facts, owner, lease, &grant) {
            let counted = lease.acquired.iter().find(|i| i.committed_by.is_some());
            let lease_entry = counted.map_or(end_by, |i| i.entry);
            if latest_end.is_none_or(|(e, ..)| end > e) {
                latest_end = Some((end, owner, lease_entry, end_by));
            }
        }
    }
    None
}

// ---------------------------------------------------------------------------------------
// Invariant 7: lapse is final

/// The two highest bounds added, to take the highest other than a given entry's own.
#[derive(Default)]
struct TopTwo {
    first: Option<Bound>,
    second: Option<Bound>,
}

impl TopTwo {
    fn add(&mut self, b: Bound) {
        if self.first.is_none_or(|f| b.0 > f.0) {
            self.second = self.first;
            self.first = Some(b);
        } else if self.second.is_none_or(|s| b.0 > s.0) {
            self.second = Some(b);
        }
    }

    fn highest_except(&self, entry: usize) -> Option<Bound> {
        match self.first {
            Some(f) if f.1 == entry => self.second,
            f => f,
        }
    }
}

/// A counted renew or release that succeeded at or after the latest expiry its lease can
/// have had when it took effect: the highest expiry any write to the lease that can be
/// placed before it set.
fn success_after_lapse(facts: &KeyFacts<'_, '_>) -> Option<Finding> {
    facts
        .leases
        .iter()
        .find_map(|((owner, _), lease)| lease_after_lapse(facts, owner, lease))
}

fn lease_after_lapse(
    facts: &KeyFacts<'_, '_>,
    owner: &str,
    lease: &LeaseItems<'_, '_>,
) -> Option<Finding> {
    let mut successes: Vec<&Item<'_>> = lease
        .renewed
        .iter()
        .chain(&lease.released)
        .filter(|i| i.committed_by.is_some())
        .copied()
        .collect();
    if successes.is_empty() {
        return None;
    }
    let grant = grant_bounds(facts, owner, lease)?;
    successes.sort_by_key(|i| (i.ret, i.entry));
    let mut writes = expiry_writes(lease);
    writes.sort_unstable_by_key(|(call, _)| *call);
    let mut top = TopTwo::default();
    let mut next = 0;
    for late in successes {
        let done = late.ret.unwrap_or(Nanos::MAX);
        while let Some((call, bound)) = writes.get(next).copied() {
            if call > done {
                break;
            }
            top.add(bound);
            next += 1;
        }
        if grant.first_call > done {
            continue; // no grant can be placed before it: the search's to judge
        }
        let latest = latest_expiry(facts, owner, &grant, &top, late, done);
        let earliest = late.earliest().max(grant.earliest);
        if let Some((expiry, by)) = latest {
            if earliest >= expiry {
                return Some(Finding::AfterLapse {
                    late: late.entry,
                    expiry_by: by,
                    earliest,
                    latest_expiry: expiry,
                });
            }
        }
    }
    None
}

/// (invoke, highest expiry it can set) of every op that may write the lease's expiry.
fn expiry_writes(lease: &LeaseItems<'_, '_>) -> Vec<(Nanos, Bound)> {
    lease
        .acquired
        .iter()
        .chain(&lease.renewed)
        .map(|item| {
            let bound = match item.fact {
                Fact::Acquired { expires_at, .. } | Fact::Renewed { expires_at, .. } => expires_at,
                Fact::MaybeRenewed { ttl, .. } => ttl.image(item.window.t0(), item.window.t1()).hi,
                _ => item.window.t1(),
            };
            (item.call, (bound, item.entry))
        })
        .collect()
}

/// The highest expiry the lease can have when `late` (returned at `done`) takes effect.
fn latest_expiry(
    facts: &KeyFacts<'_, '_>,
    owner: &str,
    grant: &GrantBounds,
    writes: &TopTwo,
    late: &Item<'_>,
    done: Nanos,
) -> Option<Bound> {
    let own = writes.highest_except(late.entry);
    let maybe = facts
        .maybe_grants(owner, done.min(grant.maybe_until))
        .map(|m| m.highest_expiry);
    // A lapse sets the expiry to its instant; one that ends before the grant can start
    // cannot be placed after it.
    let lapse = facts
        .lapses
        .highest_end_started_by(done)
        .filter(|(end, _)| *end >= grant.earliest);
    higher(higher(own, maybe), lapse)
}
