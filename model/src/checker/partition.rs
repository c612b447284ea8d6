//! Server-time windows for every entry, and the split of a history into independent
//! partitions (one per key, or per group of keys a transaction ties together).

use crate::history::{History, Nanos, NemesisEffect, OpRecord, OpResult, TxnEnd, TxnId};
use crate::spec::{Op, Outcome};
use crate::time::{Span, Ts};
use std::collections::BTreeMap;

/// Stands for "no bound in the past" in derived windows (far enough from `i64::MIN` that
/// spec arithmetic never overflows).
pub const FAR_PAST: Ts = Ts(i64::MIN / 4);
/// Stands for "no bound in the future": an unknown op may take effect until the end.
pub const FAR_FUTURE: Ts = Ts(i64::MAX / 4);

/// The server-time window of every op and nemesis event of a history.
#[derive(Clone, Debug)]
pub struct Windows {
    /// By index into `History::ops`.
    pub ops: Vec<Span>,
    /// By index into `History::nemeses` (restart: the downtime; lapse: when it applied).
    pub nemeses: Vec<Span>,
    clock: Clock,
    /// (start, end of its window) of every restart, by start.
    restarts: Vec<(Nanos, Ts)>,
}

impl Windows {
    /// The server-time window of something that happened in real time `[from, to]`
    /// (`to = None`: open-ended), derived from the ops around it.
    pub fn span(&self, from: Nanos, to: Option<Nanos>) -> Span {
        self.clock.span(from, to)
    }

    /// The latest instant a session alive at real time `from` can still act at: the end
    /// of the window of the first restart that starts at or after `from` (the old server
    /// was gone by then), if one does.
    pub fn session_end(&self, from: Nanos) -> Option<Ts> {
        let n = self.restarts.partition_point(|(start, _)| *start < from);
        self.restarts.get(n).map(|(_, end)| *end)
    }

    /// `window` of an open-ended entry of a session alive at `from`, ended no later than
    /// the restart that ends that session: what it did, it did before the crash.
    fn capped(&self, window: Span, from: Nanos) -> Span {
        match self.session_end(from) {
            Some(end) if end < window.t1() => {
                Span::new(window.t0(), end).unwrap_or(Span::point(window.t0()))
            }
            _ => window,
        }
    }
}

/// Server times known at real-time instants: every op with a reported window says the
/// server clock read `t0` after its invoke and `t1` before its complete.
#[derive(Clone, Debug)]
struct Clock {
    /// (complete, t1), sorted by complete, with t1 replaced by the running maximum.
    by_complete: Vec<(Nanos, Ts)>,
    /// (invoke, t0), sorted by invoke, with t0 replaced by the running minimum from the end.
    by_invoke: Vec<(Nanos, Ts)>,
}

impl Clock {
    fn new(history: &History) -> Clock {
        let mut by_complete: Vec<(Nanos, Ts)> = Vec::new();
        let mut by_invoke: Vec<(Nanos, Ts)> = Vec::new();
        for op in &history.ops {
            if let Some(s) = op.server {
                by_complete.push((op.complete, s.t1()));
                by_invoke.push((op.invoke, s.t0()));
            }
        }
        by_complete.sort();
        by_invoke.sort();
        let mut max = FAR_PAST;
        for e in &mut by_complete {
            max = max.max(e.1);
            e.1 = max;
        }
        let mut min = FAR_FUTURE;
        for e in by_invoke.iter_mut().rev() {
            min = min.min(e.1);
            e.1 = min;
        }
        Clock {
            by_complete,
            by_invoke,
        }
    }

    /// A server time every instant after real time `at` is at or past: the latest `t1` of
    /// an op that completed before `at`.
    fn after(&self, at: Nanos) -> Ts {
        let n = self.by_complete.partition_point(|(c, _)| *c < at);
        if n == 0 {
            FAR_PAST
        } else {
            self.by_complete[n - 1].1
        }
    }

    /// A server time every instant before real time `at` is at or before: the earliest
    /// `t0` of an op invoked after `at`.
    fn before(&self, at: Nanos) -> Ts {
        let n = self.by_invoke.partition_point(|(i, _)| *i <= at);
        self.by_invoke.get(n).map_or(FAR_FUTURE, |e| e.1)
    }

    fn span(&self, from: Nanos, to: Option<Nanos>) -> Span {
        let lo = self.after(from);
        let hi = to.map_or(FAR_FUTURE, |t| self.before(t)).max(lo);
        Span::new(lo, hi).unwrap_or(Span::point(lo))
    }
}

impl Windows {
    /// Reported windows where there are; derived ones elsewhere. An unknown op may take
    /// effect from its invoke to the end of the history, or to the restart that ends its
    /// session.
    pub fn derive(history: &History) -> Windows {
        let clock = Clock::new(history);
        let nemeses: Vec<Span> = history
            .nemeses
            .iter()
            .map(|n| match &n.effect {
                NemesisEffect::Restart { down: Some(d), .. } => *d,
                NemesisEffect::Lapse {
                    server: Some(s),
                    applied: Some(_),
                    ..
                } => *s,
                NemesisEffect::Lapse { applied: None, .. } => clock.span(n.start, None),
                _ => clock.span(n.start, Some(n.end)),
            })
            .collect();
        let mut restarts: Vec<(Nanos, Ts)> = history
            .nemeses
            .iter()
            .zip(&nemeses)
            .filter(|(n, _)| matches!(n.effect, NemesisEffect::Restart { .. }))
            .map(|(n, w)| (n.start, w.t1()))
            .collect();
        restarts.sort();
        let mut windows = Windows {
            ops: Vec::new(),
            nemeses,
            clock,
            restarts,
        };
        windows.ops = history
            .ops
            .iter()
            .map(|op| {
                let w = op_window(&windows.clock, op);
                if op.result.outcome() == Outcome::Unknown {
                    windows.capped(w, op.invoke)
                } else {
                    w
                }
            })
            .collect();
        for (i, n) in history.nemeses.iter().enumerate() {
            if matches!(n.effect, NemesisEffect::Lapse { applied: None, .. }) {
                windows.nemeses[i] = windows.capped(windows.nemeses[i], n.start);
            }
        }
        windows
    }
}

/// The earliest instant `op` can have taken effect at: its window's start, or later when a
/// reported expiry pins a grant or renew to the instants `t` with `t + ttl = expires_at`.
fn earliest_effect(op: &OpRecord, window: Span) -> Ts {
    let pinned = match (&op.result, &op.call) {
        (
            OpResult::Ok(Outcome::Acquired { expires_at, .. }),
            Op::Acquire { ttl: Some(ttl), .. },
        )
        | (OpResult::Ok(Outcome::Renewed { expires_at }), Op::Renew { ttl: Some(ttl), .. }) => {
            ttl.earliest_source_in(*expires_at, window.t0(), window.t1())
        }
        _ => None,
    };
    pinned.map_or(window.t0(), |p| p.max(window.t0()))
}

fn op_window(clock: &Clock, op: &OpRecord) -> Span {
    let unknown = op.result.outcome() == Outcome::Unknown;
    match (op.server, unknown) {
        (Some(s), false) => s,
        (Some(s), true) => Span::new(s.t0(), FAR_FUTURE).unwrap_or(Span::point(s.t0())),
        (None, true) => clock.span(op.invoke, None),
        (None, false) => clock.span(op.invoke, Some(op.complete)),
    }
}

/// What one entry of a partition is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EntryKind {
    /// An op, by index into `History::ops`.
    Op(usize),
    /// The end of a transaction (its record may be missing: then `end` is `Unknown`).
    TxnEnd { txn: TxnId, end: TxnEnd },
    /// A nemesis event with an effect, by index into `History::nemeses`.
    Nemesis(usize),
}

/// One thing to linearize.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Entry {
    pub kind: EntryKind,
    /// Real time it was invoked (started).
    pub call: Nanos,
    /// Real time it returned; `None`: open-ended (an unknown outcome), it may be placed
    /// anywhere after `call`, or its effect may never happen.
    pub ret: Option<Nanos>,
    /// Server-time window of its effect.
    pub window: Span,
    /// Restarts whose start precedes `call`: an unknown effect can only happen before the
    /// next restart kills its session.
    pub crash_gen: u32,
    /// The transaction of an op.
    pub txn: Option<TxnId>,
    /// The earliest server instant its effect can have (a grant's or renew's reported
    /// expiry pins it): the search tries entries in this order.
    pub order: Ts,
}

impl Entry {
    /// An entry whose effect may happen at any point after its call, or never (an unknown
    /// outcome): the search keeps it pending instead of choosing its place.
    pub fn is_open_ended(&self) -> bool {
        self.ret.is_none()
    }
}

/// Keys that interact, and the entries on them.
#[derive(Clone, Debug)]
pub struct Partition {
    /// The keys (empty: calls that name no key, e.g. invalid input).
    pub keys: Vec<String>,
    pub entries: Vec<Entry>,
    /// The entry index of each transaction's end.
    pub txn_end: BTreeMap<TxnId, usize>,
}

/// Splits `history` into partitions, ordered by key.
pub fn partition(history: &History, windows: &Windows) -> Vec<Partition> {
    let restarts: Vec<Nanos> = history
        .nemeses
        .iter()
        .filter(|n| matches!(n.effect, NemesisEffect::Restart { .. }))
        .map(|n| n.start)
        .collect();
    let crash_gen = |at: Nanos| restarts.iter().filter(|s| **s < at).count() as u32;
    let groups = Groups::of(history);
    let mut parts: BTreeMap<Option<String>, Partition> = BTreeMap::new();
    fn part_of<'p>(
        parts: &'p mut BTreeMap<Option<String>, Partition>,
        group: Option<String>,
        keys: &Groups,
    ) -> &'p mut Partition {
        parts.entry(group.clone()).or_insert_with(|| Partition {
            keys: group.map(|g| keys.members(&g)).unwrap_or_default(),
            entries: Vec::new(),
            txn_end: BTreeMap::new(),
        })
    }
    // ops, and what each transaction's end must follow
    let mut txn_group: BTreeMap<TxnId, Option<String>> = BTreeMap::new();
    let mut txn_ops: BTreeMap<TxnId, TxnOps> = BTreeMap::new();
    for (i, op) in history.ops.iter().enumerate() {
        let group = groups.group_of_op(op);
        let unknown = op.result.outcome() == Outcome::Unknown;
        if let Some(t) = op.txn {
            txn_group.insert(t, group.clone());
            txn_ops.entry(t).or_default().add(op, unknown);
        }
        part_of(&mut parts, group, &groups).entries.push(Entry {
            kind: EntryKind::Op(i),
            call: op.invoke,
            // a record that completes before it is invoked (invalid, see
            // `history::validate`) is judged as if instantaneous
            ret: (!unknown).then_some(op.complete.max(op.invoke)),
            window: windows.ops[i],
            crash_gen: crash_gen(op.invoke),
            txn: op.txn,
            order: if unknown {
                FAR_PAST
            } else {
                earliest_effect(op, windows.ops[i])
            },
        });
    }
    // transaction ends (a transaction without a record ended unknown)
    for (txn, group) in &txn_group {
        let record = history.txn(*txn);
        let ops = &txn_ops[txn];
        let (end, call, ret) = match record {
            Some(r) => {
                let call = r.end_invoke.max(ops.after);
                (r.end, call, Some(r.end_complete.max(call)))
            }
            None => (TxnEnd::Unknown, ops.after.max(ops.first.unwrap_or(0)), None),
        };
        // an end whose time the client cannot know is open-ended: a COMMIT whose answer
        // was lost, or a transaction whose connection was lost (the server aborts it when
        // it notices)
        let ret = ret.filter(|_| end != TxnEnd::Unknown && !ops.lost);
        let begin = record.map_or(ops.first.unwrap_or(0), |r| r.begin);
        let window = match ret {
            Some(_) => windows.span(call, ret),
            None => windows.capped(windows.span(call, None), begin),
        };
        let p = part_of(&mut parts, group.clone(), &groups);
        p.txn_end.insert(*txn, p.entries.len());
        p.entries.push(Entry {
            kind: EntryKind::TxnEnd { txn: *txn, end },
            call,
            ret,
            window,
            crash_gen: crash_gen(begin),
            txn: Some(*txn),
            order: if ret.is_some() { window.t0() } else { FAR_PAST },
        });
    }
    // nemesis events: restarts reach every partition, lapses their key's
    for (i, n) in history.nemeses.iter().enumerate() {
        let entry = |gen| Entry {
            kind: EntryKind::Nemesis(i),
            call: n.start,
            ret: match &n.effect {
                NemesisEffect::Lapse { applied: None, .. } => None,
                _ => Some(n.end.max(n.start)),
            },
            window: windows.nemeses[i],
            crash_gen: gen,
            txn: None,
            order: windows.nemeses[i].t0(),
        };
        match &n.effect {
            NemesisEffect::None => {}
            NemesisEffect::Restart { .. } => {
                let gen = crash_gen(n.start);
                for p in parts.values_mut() {
                    p.entries.push(entry(gen));
                }
            }
            NemesisEffect::Lapse { key, .. } => {
                if let Some(g) = groups.group_of_key(key) {
                    part_of(&mut parts, Some(g), &groups)
                        .entries
                        .push(entry(crash_gen(n.start)));
                }
            }
        }
    }
    parts.into_values().collect()
}

/// What a transaction's end must follow.
#[derive(Default)]
struct TxnOps {
    /// the first invoke of its ops
    first: Option<Nanos>,
    /// just after the last complete of its answered ops and the last invoke of its
    /// unanswered ones: the end comes after them (a failing op is not waited for: the
    /// server aborts the transaction at the error)
    after: Nanos,
    /// one of its ops lost its connection
    lost: bool,
}

impl TxnOps {
    fn add(&mut self, op: &OpRecord, unknown: bool) {
        self.first = Some(self.first.map_or(op.invoke, |f| f.min(op.invoke)));
        if matches!(op.result, OpResult::Ok(_)) {
            self.after = self.after.max(op.complete.saturating_add(1));
        }
        if unknown {
            // its COMMIT (if any was sent) came after it was sent
            self.after = self.after.max(op.invoke.saturating_add(1));
        }
        self.lost |= unknown;
    }
}

/// Union-find over keys: the keys of one transaction are one group, named by its least key.
struct Groups {
    parent: BTreeMap<String, String>,
    /// The first key each transaction named.
    txn_keys: BTreeMap<TxnId, String>,
    /// Each group's keys, once computed.
    members: BTreeMap<String, Vec<String>>,
}

impl Groups {
    fn of(history: &History) -> Groups {
        let mut g = Groups {
            parent: BTreeMap::new(),
            txn_keys: BTreeMap::new(),
            members: BTreeMap::new(),
        };
        let mut txn_keys: BTreeMap<TxnId, String> = BTreeMap::new();
        for op in &history.ops {
            let Some(key) = op.call.key() else { continue };
            g.add(key);
            if let Some(t) = op.txn {
                match txn_keys.get(&t) {
                    Some(first) => {
                        let first = first.clone();
                        g.union(&first, key);
                    }
                    None => {
                        txn_keys.insert(t, key.clone());
                    }
                }
            }
        }
        // keyless ops of a transaction follow its keys (group_of_op)
        g.txn_keys = txn_keys;
        let keys: Vec<String> = g.parent.keys().cloned().collect();
        for k in keys {
            if let Some(root) = g.find(&k) {
                g.members.entry(root).or_default().push(k);
            }
        }
        g
    }

    fn add(&mut self, key: &str) {
        if !self.parent.contains_key(key) {
            self.parent.insert(key.to_string(), key.to_string());
        }
    }

    fn find(&self, key: &str) -> Option<String> {
        let mut k = self.parent.get_key_value(key)?.0.clone();
        loop {
            let p = &self.parent[&k];
            if *p == k {
                return Some(k);
            }
            k = p.clone();
        }
    }

    fn union(&mut self, a: &str, b: &str) {
        let (Some(ra), Some(rb)) = (self.find(a), self.find(b)) else {
            return;
        };
        if ra != rb {
            let (lo, hi) = if ra < rb { (ra, rb) } else { (rb, ra) };
            self.parent.insert(hi, lo);
        }
    }

    fn group_of_key(&self, key: &str) -> Option<String> {
        self.find(key)
    }

    fn group_of_op(&self, op: &OpRecord) -> Option<String> {
        match (op.call.key(), op.txn) {
            (Some(k), _) => self.find(k),
            (None, Some(t)) => self.txn_keys.get(&t).and_then(|k| self.find(k)),
            (None, None) => None,
        }
    }

    fn members(&self, group: &str) -> Vec<String> {
        self.members.get(group).cloned().unwrap_or_default()
    }
}

/// All partitions as one (every key together), for linearizers that must see keys interact
/// (a diagnosis of writes that ignore their key; the brute-force differential test).
pub fn merge(parts: &[Partition]) -> Partition {
    let mut keys = Vec::new();
    let mut entries: Vec<Entry> = Vec::new();
    let mut txn_end = BTreeMap::new();
    for p in parts {
        keys.extend(p.keys.iter().cloned());
        for e in &p.entries {
            // restarts are copied into every partition: keep one
            if matches!(e.kind, EntryKind::Nemesis(_)) && entries.iter().any(|x| x.kind == e.kind) {
                continue;
            }
            if let EntryKind::TxnEnd { txn, .. } = e.kind {
                txn_end.insert(txn, entries.len());
            }
            entries.push(*e);
        }
    }
    keys.sort();
    Partition {
        keys,
        entries,
        txn_end,
    }
}
