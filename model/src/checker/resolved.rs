//! The history the checker judges when the recorder decoded the lease table's commits: each
//! lost autocommit call the log resolves ([`crate::history::resolve`]) is judged as what it
//! was. One that took effect becomes a call with the answer its write shows, dated within
//! its window as a lost call (from its invoke, up to the restart that ended its session)
//! narrowed by the commit order of its key, and in real time from its invoke to when its
//! session was seen ended, or to the end of the history (its commit may have come after the
//! client gave up on it). One that wrote nothing is left out: a call
//! without a write and without an answer constrains nothing. A transaction that ended
//! unknown and whose commit the log has committed. All only narrow what the
//! lost call could have done, so a resolution can turn a pass into a violation, never the
//! reverse.

use super::partition::Windows;
use crate::history::{resolve, History, OpResult, Resolution, TxnEnd};
use crate::time::Span;

/// How many lost calls the log resolved.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Resolved {
    /// Lost calls found committed.
    pub took_effect: usize,
    /// Lost calls found to have written nothing.
    pub never: usize,
    /// Lost calls the log left undecided.
    pub open: usize,
    /// Changes of the lease table the recorder could not read: any leaves every lost call
    /// undecided (a change of an unknown key could be any call's).
    pub unreadable: usize,
}

impl From<&Resolution> for Resolved {
    fn from(r: &Resolution) -> Resolved {
        Resolved {
            took_effect: r.took_effect.len(),
            never: r.never.len(),
            open: r.open.len(),
            unreadable: 0,
        }
    }
}

/// `history` with its lost calls resolved by its wal line, and how; `None` without a wal
/// line.
pub fn patched(history: &History) -> Option<(History, Resolution)> {
    let windows = Windows::derive(history);
    let resolution = resolve(history, &windows.ops)?;
    let last = last_instant(history);
    let mut out = history.clone();
    out.ops.clear();
    for (index, op) in history.ops.iter().enumerate() {
        if resolution.never.contains(&op.id) {
            continue;
        }
        let mut op = op.clone();
        if let Some(effect) = resolution.took_effect.get(&op.id) {
            let base = windows.ops[index];
            let lo = effect.after.map_or(base.t0(), |a| a.max(base.t0()));
            let hi = effect.before.map_or(base.t1(), |b| b.min(base.t1()));
            op.server = Some(Span::new(lo, hi).unwrap_or(base));
            op.result = OpResult::Ok(effect.outcome.clone());
            op.complete = effect.seen_ended.unwrap_or(last).max(op.complete);
        }
        out.ops.push(op);
    }
    for txn in out.txns.iter_mut() {
        if resolution.committed_txns.contains(&txn.id) {
            txn.end = TxnEnd::Commit;
        }
    }
    Some((out, resolution))
}

/// The fates `history`'s wal line gives its lost calls, judged against the windows the
/// checker gives them; `None` without a wal line.
pub fn resolution(history: &History) -> Option<Resolution> {
    resolve(history, &Windows::derive(history).ops)
}

/// The latest instant on the recorder's clock the history mentions.
fn last_instant(h: &History) -> u64 {
    let ops = h.ops.iter().map(|o| o.complete);
    let txns = h.txns.iter().map(|t| t.end_complete);
    let nemeses = h.nemeses.iter().map(|n| n.end);
    ops.chain(txns).chain(nemeses).max().unwrap_or(0)
}

/// A paragraph for a violation's explanation: which of its calls the log resolved.
pub(super) fn explained(resolution: &Resolution, ops: &[crate::history::OpId]) -> String {
    let r = Resolved::from(resolution);
    let mut text = format!(
        "The server's write-ahead log resolved {} of the lost calls: {} committed, {} wrote \
         nothing ({} left undecided).\n",
        r.took_effect + r.never,
        r.took_effect,
        r.never,
        r.open
    );
    for id in ops
        .iter()
        .filter(|id| resolution.took_effect.contains_key(id))
    {
        if let Some(effect) = resolution.took_effect.get(id) {
            text.push_str(&format!(
                "Op {id}'s answer was lost; the log shows its write committed (commit {} of \
                 the lease table), so it is judged as having answered {:?}.\n",
                effect.commit + 1,
                effect.outcome
            ));
        }
    }
    text
}
