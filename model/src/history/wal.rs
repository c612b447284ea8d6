//! What the server's write-ahead log says committed: the changes of the lease table, in
//! commit order, as a logical decoding slot listed them after every session of the history
//! ended (specs/HISTORY.md, "Wal line"). [`resolve`] turns them into fates for the calls
//! whose answers were lost: a lost call whose write is among the commits took effect, with
//! the outcome that write shows; one whose key has no unclaimed commit wrote nothing, which
//! for the spec is the same as never having run. Anything ambiguous stays unknown.

use super::{History, NemesisEffect, OpId, OpRecord, TxnEnd, TxnId};
use crate::spec::{Op, Outcome};
use crate::time::{Interval, Span, Ts};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

/// The committed changes of the lease table during a history.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WalLog {
    /// The table decoded (`lease_internal.leases`).
    pub table: String,
    /// Every transaction that changed it, in commit order.
    pub commits: Vec<WalCommit>,
    /// Changes of the table the recorder could not read (their text as decoded). Any makes
    /// the log useless for resolution: a change of an unknown key could be any call's.
    pub unreadable: Vec<String>,
    /// The records whose answers reported a transaction id that no commit of the log has:
    /// their transactions changed no row of the table (a transaction whose COMMIT was lost
    /// and that did not commit).
    pub absent: Vec<WalWriter>,
    /// Lost calls whose session's backend the recorder saw gone, and the server time by
    /// which it was: the call took effect, if at all, before it.
    pub ended: Vec<WalEnded>,
}

/// A lost call's session seen ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WalEnded {
    pub op: OpId,
    /// Unix microseconds (the server's clock).
    pub by: i64,
    /// When the recorder saw it gone (its clock, like an op's `complete_ns`).
    pub seen_ns: u64,
}

/// One committed transaction that changed the lease table.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WalCommit {
    pub xid: u64,
    /// The record whose transaction this is, by the transaction id its answer reported;
    /// `None` when no answered call or transaction of the history had this id.
    pub by: Option<WalWriter>,
    /// The key's row after the transaction, one entry per key it changed.
    pub changes: Vec<WalChange>,
}

/// The record a commit belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase", deny_unknown_fields)]
pub enum WalWriter {
    Op(OpId),
    Txn(TxnId),
}

impl std::fmt::Display for WalWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            WalWriter::Op(id) => write!(f, "op {id}"),
            WalWriter::Txn(id) => write!(f, "txn {id}"),
        }
    }
}

/// A key's row after a commit.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WalChange {
    pub key: String,
    /// `None`: the row was deleted.
    pub row: Option<WalRow>,
}

/// A row of the lease table: free when `owner` and `expires_at` are null.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WalRow {
    pub owner: Option<String>,
    pub epoch: i64,
    /// Unix microseconds.
    pub expires_at: Option<i64>,
}

impl WalRow {
    fn held_by(&self, owner: &str) -> bool {
        self.owner.as_deref() == Some(owner) && self.expires_at.is_some()
    }
}

/// How the log resolved the history's lost autocommit calls.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Resolution {
    /// Calls that took effect: the commit that holds their write and what it means.
    pub took_effect: BTreeMap<OpId, Effect>,
    /// Calls that wrote nothing (their key has no commit they could have made).
    pub never: BTreeSet<OpId>,
    /// Lost calls the log could not decide.
    pub open: BTreeSet<OpId>,
    /// Transactions that ended unknown whose commit the log has: they committed.
    pub committed_txns: BTreeSet<TxnId>,
}

/// A lost call's write, found in the log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Effect {
    /// Its place in the commit order.
    pub commit: usize,
    /// The answer the call would have given.
    pub outcome: Outcome<String>,
    /// Server-time bounds on its instant from the answered writes of its key committed
    /// before it (their `t0`) and after it (their `t1`): the lease table's writes read the
    /// clock under the key's row lock, so they are dated in commit order; and from when its
    /// session was seen ended.
    pub after: Option<Ts>,
    pub before: Option<Ts>,
    /// When the recorder saw its session ended, if it did: it took effect before then.
    pub seen_ended: Option<u64>,
}

/// The fates the history's [`WalLog`] gives its lost autocommit calls; `None` without one.
/// `windows` are the server-time windows the calls may have taken effect in, by index into
/// `h.ops` (the checker's, [`crate::checker::resolution`]): a grant or renew dated outside
/// its call's window is not that call's.
pub fn resolve(h: &History, windows: &[Span]) -> Option<Resolution> {
    let wal = h.wal.as_ref()?;
    let lost: Vec<OpId> = h
        .ops
        .iter()
        .filter(|o| o.txn.is_none() && o.result.outcome() == Outcome::Unknown)
        .map(|o| o.id)
        .collect();
    let claimed: BTreeSet<WalWriter> = wal.commits.iter().filter_map(|c| c.by).collect();
    let mut r = Resolution {
        open: lost.iter().copied().collect(),
        committed_txns: h
            .txns
            .iter()
            .filter(|t| t.end == TxnEnd::Unknown && claimed.contains(&WalWriter::Txn(t.id)))
            .map(|t| t.id)
            .collect(),
        ..Resolution::default()
    };
    if !wal.unreadable.is_empty() {
        return Some(r);
    }
    let ops: BTreeMap<OpId, &OpRecord> = h.ops.iter().map(|o| (o.id, o)).collect();
    let windows = ended_by(h, wal, windows);
    let windows = windows.as_slice();
    let keys = Keys::of(h, wal, &ops);
    for (key, lost_here) in group_by_key(&ops, &lost) {
        keys.resolve_key(h, wal, windows, &key, &lost_here, &mut r);
    }
    Some(r)
}

/// `windows`, each lost call's ending no later than its session was seen ended.
fn ended_by(h: &History, wal: &WalLog, windows: &[Span]) -> Vec<Span> {
    let ended: BTreeMap<OpId, i64> = wal.ended.iter().map(|e| (e.op, e.by)).collect();
    h.ops
        .iter()
        .zip(windows)
        .map(|(op, w)| match ended.get(&op.id) {
            Some(&by) if by < w.t1().0 => Span::new(w.t0(), Ts(by)).unwrap_or(*w),
            _ => *w,
        })
        .collect()
}

/// The lost calls by key (a call without a key writes nothing a change could name).
fn group_by_key(ops: &BTreeMap<OpId, &OpRecord>, lost: &[OpId]) -> BTreeMap<String, Vec<OpId>> {
    let mut by_key: BTreeMap<String, Vec<OpId>> = BTreeMap::new();
    for &id in lost {
        if let Some(key) = ops.get(&id).and_then(|o| o.call.key()) {
            by_key.entry(key.clone()).or_default().push(id);
        }
    }
    by_key
}

/// The log's commits sorted out per key.
#[derive(Default)]
struct Keys {
    /// Unclaimed single-key commits, by key: (commit index, row after).
    unclaimed: BTreeMap<String, Vec<usize>>,
    /// Keys an unclaimed commit of several keys changed: some transaction nobody recorded
    /// (or one that ended unknown) wrote them.
    unexplained: BTreeSet<String>,
    /// Keys a transaction that ended unknown, and whose commit nobody claimed, called.
    blocked: BTreeSet<String>,
    /// Claimed commits by key: (commit index, the server window of the answered call).
    claimed: BTreeMap<String, Vec<(usize, Option<Span>)>>,
}

impl Keys {
    fn of(h: &History, wal: &WalLog, ops: &BTreeMap<OpId, &OpRecord>) -> Keys {
        let mut keys = Keys::default();
        let mut claimed_txns: BTreeSet<TxnId> = BTreeSet::new();
        for (i, commit) in wal.commits.iter().enumerate() {
            match commit.by {
                Some(by) => {
                    if let WalWriter::Txn(t) = by {
                        claimed_txns.insert(t);
                    }
                    // A statement of several calls dates each write by its own call.
                    let window = match by {
                        WalWriter::Op(id) if commit.changes.len() == 1 => {
                            ops.get(&id).and_then(|o| o.server)
                        }
                        _ => None,
                    };
                    for c in &commit.changes {
                        keys.claimed
                            .entry(c.key.clone())
                            .or_default()
                            .push((i, window));
                    }
                }
                None if commit.changes.len() == 1 => {
                    let key = commit.changes[0].key.clone();
                    keys.unclaimed.entry(key).or_default().push(i);
                }
                None => keys
                    .unexplained
                    .extend(commit.changes.iter().map(|c| c.key.clone())),
            }
        }
        let absent: BTreeSet<WalWriter> = wal.absent.iter().copied().collect();
        for txn in h.txns.iter().filter(|t| t.end == TxnEnd::Unknown) {
            if claimed_txns.contains(&txn.id) || absent.contains(&WalWriter::Txn(txn.id)) {
                continue;
            }
            let called = h.ops.iter().filter(|o| o.txn == Some(txn.id));
            keys.blocked
                .extend(called.filter_map(|o| o.call.key().cloned()));
        }
        keys
    }

    fn resolve_key(
        &self,
        h: &History,
        wal: &WalLog,
        windows: &[Span],
        key: &str,
        lost: &[OpId],
        r: &mut Resolution,
    ) {
        let commits = self.unclaimed.get(key).cloned().unwrap_or_default();
        if self.unexplained.contains(key) {
            return;
        }
        if commits.is_empty() {
            for id in lost {
                r.open.remove(id);
                r.never.insert(*id);
            }
            return;
        }
        if self.blocked.contains(key) {
            return;
        }
        let writers = Writers::of(h, windows, key, lost);
        let candidates: Vec<BTreeSet<Writer>> = commits
            .iter()
            .map(|&i| writers.fitting(&wal.commits[i].changes[0]))
            .collect();
        let matched = peel(&candidates);
        for (slot, writer) in &matched {
            if let Writer::Op(id) = *writer {
                let index = commits[*slot];
                if let Some(effect) = self.effect(h, wal, id, index) {
                    r.open.remove(&id);
                    r.took_effect.insert(id, effect);
                }
            }
        }
        // A call no unmatched commit could be from wrote nothing, unless some commit fits
        // no call at all (then it could be anyone's, written in a shape nobody expects).
        let unmatched: Vec<&BTreeSet<Writer>> = (0..commits.len())
            .filter(|s| !matched.contains_key(s))
            .map(|s| &candidates[s])
            .collect();
        if unmatched.iter().any(|c| c.is_empty()) {
            return;
        }
        for &id in lost {
            let used = matched.values().any(|w| *w == Writer::Op(id));
            let possible = unmatched.iter().any(|c| c.contains(&Writer::Op(id)));
            if !used && !possible {
                r.open.remove(&id);
                r.never.insert(id);
            }
        }
    }

    fn effect(&self, h: &History, wal: &WalLog, id: OpId, index: usize) -> Option<Effect> {
        let op = h.op(id)?;
        let row = wal.commits[index].changes[0].row.as_ref()?;
        let outcome = match &op.call {
            Op::Acquire { .. } => Outcome::Acquired {
                epoch: row.epoch,
                expires_at: Ts(row.expires_at?),
            },
            Op::Renew { .. } => Outcome::Renewed {
                expires_at: Ts(row.expires_at?),
            },
            Op::Release { .. } => Outcome::Released,
            Op::Inspect { .. } | Op::Expire { .. } => return None,
        };
        let claimed = self.claimed.get(op.call.key()?.as_str());
        let windows = claimed.into_iter().flatten();
        let (mut after, mut before) = (None::<Ts>, None::<Ts>);
        for (i, window) in windows {
            match window {
                Some(w) if *i < index => after = Some(after.map_or(w.t0(), |a| a.max(w.t0()))),
                Some(w) if *i > index => before = Some(before.map_or(w.t1(), |b| b.min(w.t1()))),
                _ => {}
            }
        }
        let ended = wal.ended.iter().find(|e| e.op == id);
        if let Some(ended) = ended {
            before = Some(before.map_or(Ts(ended.by), |b| b.min(Ts(ended.by))));
        }
        Some(Effect {
            commit: index,
            outcome,
            after,
            before,
            seen_ended: ended.map(|e| e.seen_ns),
        })
    }
}

/// Who may have made an unclaimed commit of a key.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Writer {
    /// A lost call.
    Op(OpId),
    /// A lapse whose write nobody claimed (by its index among the nemesis records).
    Lapse(usize),
}

struct Writers<'h> {
    /// Lost calls of the key with the window each may have taken effect in.
    calls: Vec<(OpId, &'h Op<String, String>, Option<Span>)>,
    /// Lapses of the key that may have written: the server window they ran in, if known.
    lapses: Vec<(usize, Option<Span>)>,
}

impl<'h> Writers<'h> {
    fn of(h: &'h History, windows: &[Span], key: &str, lost: &[OpId]) -> Writers<'h> {
        let calls = h
            .ops
            .iter()
            .enumerate()
            .filter(|(_, o)| lost.contains(&o.id))
            .map(|(i, o)| (o.id, &o.call, windows.get(i).copied()))
            .collect();
        let lapses = h
            .nemeses
            .iter()
            .enumerate()
            .filter_map(|(i, n)| match &n.effect {
                NemesisEffect::Lapse {
                    key: k,
                    server,
                    applied,
                } if k == key && *applied != Some(false) => Some((i, *server)),
                _ => None,
            })
            .collect();
        Writers { calls, lapses }
    }

    /// The writers whose write `change` could be: a grant or renew leaves the row held by
    /// its owner until an instant of its window plus its TTL, a release leaves it free, a
    /// lapse dates it within its own window.
    fn fitting(&self, change: &WalChange) -> BTreeSet<Writer> {
        let Some(row) = &change.row else {
            return BTreeSet::new();
        };
        let dated = |ttl: &Option<Interval>, window: &Option<Span>| match (ttl, window) {
            (Some(ttl), Some(w)) => row
                .expires_at
                .is_some_and(|at| ttl.earliest_source_in(Ts(at), w.t0(), w.t1()).is_some()),
            (Some(_), None) => true,
            (None, _) => false,
        };
        let calls = self.calls.iter().filter(|(_, call, window)| match call {
            Op::Acquire {
                owner: Some(o),
                ttl,
                ..
            }
            | Op::Renew {
                owner: Some(o),
                ttl,
                ..
            } => row.held_by(o) && dated(ttl, window),
            Op::Release { owner: Some(_), .. } => row.owner.is_none() && row.expires_at.is_none(),
            _ => false,
        });
        let lapses = self.lapses.iter().filter(|(_, window)| {
            let (Some(_), Some(at)) = (&row.owner, row.expires_at) else {
                return false;
            };
            window.is_none_or(|w| w.t0().0 <= at && at <= w.t1().0)
        });
        calls
            .map(|(id, _, _)| Writer::Op(*id))
            .chain(lapses.map(|(i, _)| Writer::Lapse(*i)))
            .collect()
    }
}

/// Matches commits to writers where the match is forced: a commit whose only possible
/// writer (among those not yet matched) is one writer was made by it, and a writer makes
/// at most one commit (a call is one transaction). Repeats until nothing more is forced.
fn peel(candidates: &[BTreeSet<Writer>]) -> BTreeMap<usize, Writer> {
    let mut matched: BTreeMap<usize, Writer> = BTreeMap::new();
    loop {
        let used: BTreeSet<Writer> = matched.values().copied().collect();
        let forced = candidates.iter().enumerate().find_map(|(slot, c)| {
            if matched.contains_key(&slot) {
                return None;
            }
            let mut left = c.difference(&used);
            match (left.next(), left.next()) {
                (Some(w), None) => Some((slot, *w)),
                _ => None,
            }
        });
        match forced {
            Some((slot, w)) => {
                matched.insert(slot, w);
            }
            None => return matched,
        }
    }
}
