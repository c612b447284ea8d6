//! Generated concurrent histories: a deterministic discrete-event simulation of clients
//! calling a pg_lease that behaves exactly as a given [`Spec`] (possibly mutated), with
//! transactions, blocking waits, row locks, lost answers, crashes and injected lapses.
//!
//! Used to test the checker (a correct spec must give linearizable histories; a mutated one
//! must give histories the checker rejects) and to benchmark it. Server time and real time
//! are the same simulated clock (microseconds; real time recorded as nanoseconds).

use crate::history::{
    History, NemesisEffect, NemesisRecord, OpRecord, OpResult, ProcessId, TxnEnd, TxnId, TxnRecord,
};
use crate::mutation::Mutation;
use crate::spec::{KeyState, Op, Outcome, Spec, Store};
use crate::time::{Interval, Span, Ts};
use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap};

/// A small, fast, deterministic random number generator (SplitMix64).
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed ^ 0x9e37_79b9_7f4a_7c15)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (0 when `n` is 0).
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            0
        } else {
            self.next_u64() % n
        }
    }

    /// Uniform in `lo..=hi` (any two `i64`).
    pub fn range(&mut self, lo: i64, hi: i64) -> i64 {
        if hi <= lo {
            return lo;
        }
        let width = (i128::from(hi) - i128::from(lo) + 1) as u128;
        let offset = match u64::try_from(width) {
            Ok(w) => self.below(w),
            Err(_) => self.next_u64(), // the whole of i64
        };
        (i128::from(lo) + i128::from(offset)) as i64
    }

    /// True with probability `percent`/100.
    pub fn chance(&mut self, percent: u32) -> bool {
        self.below(100) < u64::from(percent)
    }

    pub fn pick<'a, T>(&mut self, xs: &'a [T]) -> &'a T {
        &xs[self.below(xs.len() as u64) as usize]
    }
}

/// What to simulate.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GenConfig {
    /// The semantics the simulated server follows.
    pub spec: Spec,
    /// Concurrent client sessions.
    pub clients: u32,
    pub keys: u32,
    /// Ops to record (transaction ends and nemesis events not counted).
    pub ops: usize,
    /// Lease TTLs to choose from, in microseconds.
    pub ttls_us: Vec<i64>,
    /// Percent of TTLs drawn from [`CALENDAR_TTLS`] instead (months and days, added as
    /// PostgreSQL adds them in UTC).
    pub calendar_pct: u32,
    /// Longest wait of a blocking acquire (0: none are made).
    pub max_wait_us: i64,
    /// Percent of autocommit ops whose answer is lost (half of them took effect).
    pub unknown_pct: u32,
    /// Percent of a client's turns that run a transaction of 1 to 3 ops.
    pub txn_pct: u32,
    /// Per-mille chance, per op, of a crash and restart.
    pub restart_permille: u32,
    /// Per-mille chance, per op, of an injected lapse.
    pub lapse_permille: u32,
    /// Percent of ops with an invalid (NULL or empty) argument.
    pub invalid_pct: u32,
    /// Duration of a call from invoke to complete, in microseconds.
    pub latency_us: (i64, i64),
    /// Pause between a client's calls, in microseconds.
    pub think_us: (i64, i64),
}

impl GenConfig {
    /// Small histories with every feature, for tests.
    pub fn small(spec: Spec, ops: usize) -> GenConfig {
        GenConfig {
            spec,
            clients: 3,
            keys: 2,
            ops,
            ttls_us: vec![20, 60, 200],
            calendar_pct: 0,
            max_wait_us: 80,
            unknown_pct: 8,
            txn_pct: 10,
            restart_permille: 20,
            lapse_permille: 30,
            invalid_pct: 3,
            latency_us: (2, 30),
            think_us: (0, 20),
        }
    }

    /// Long valid histories for benchmarks: no faults, few unknowns.
    pub fn bench(clients: u32, keys: u32, ops: usize) -> GenConfig {
        GenConfig {
            spec: Spec::CORRECT,
            clients,
            keys,
            ops,
            ttls_us: vec![500, 2_000, 10_000],
            calendar_pct: 0,
            max_wait_us: 1_000,
            unknown_pct: 0,
            txn_pct: 0,
            restart_permille: 0,
            lapse_permille: 0,
            invalid_pct: 0,
            latency_us: (20, 200),
            think_us: (0, 100),
        }
    }
}

/// Calendar TTLs a generator may draw: a day, a month (31 days from the generator's
/// January 1970 clock), and mixed fields.
pub const CALENDAR_TTLS: [Interval; 4] = [
    Interval {
        months: 0,
        days: 1,
        micros: 0,
    },
    Interval {
        months: 1,
        days: 0,
        micros: 0,
    },
    Interval {
        months: 1,
        days: 1,
        micros: 20,
    },
    Interval {
        months: 0,
        days: 1,
        micros: 50,
    },
];

/// The history of one simulation run.
pub fn generate(cfg: &GenConfig, seed: u64) -> History {
    Sim::new(cfg, seed).run()
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Event {
    Invoke(usize),
    Effect(usize),
    Complete(usize),
    Restart,
    Lapse,
}

/// A call in flight.
#[derive(Clone, Debug)]
struct Call {
    /// `None`: the end of the client's transaction.
    op: Option<Op<String, String>>,
    invoke: i64,
    /// the answer will be lost
    lost: bool,
    /// outcome, once it took effect
    outcome: Option<Outcome<String>>,
    commit: bool,
}

#[derive(Clone, Debug)]
struct OpenTxn {
    id: TxnId,
    begin: i64,
    writes: BTreeMap<String, KeyState<String>>,
    ops_left: u32,
    aborted: bool,
}

#[derive(Clone, Debug)]
struct Client {
    process: ProcessId,
    owner: String,
    known: BTreeMap<String, i64>,
    txn: Option<OpenTxn>,
    call: Option<Call>,
    /// bumped when the client is retired: its queued events become stale
    gen: u32,
}

struct Sim<'a> {
    cfg: &'a GenConfig,
    rng: Rng,
    /// one store per key, or one for all keys when a mutation makes keys interact
    stores: BTreeMap<String, Store<String, String>>,
    shared_store: bool,
    locks: BTreeMap<String, TxnId>,
    clients: Vec<Client>,
    queue: BinaryHeap<Reverse<(i64, u64, Event, u32)>>,
    seq: u64,
    out: History,
    next_process: ProcessId,
    next_txn: TxnId,
    down_until: i64,
    keys: Vec<String>,
}

const ALL: &str = "";
/// How long a call waits for a row lock before the simulated deadlock detector fails it.
const DEADLOCK_AFTER_US: i64 = 400;

impl<'a> Sim<'a> {
    fn new(cfg: &'a GenConfig, seed: u64) -> Sim<'a> {
        let keys: Vec<String> = (0..cfg.keys.max(1)).map(|i| format!("k{i}")).collect();
        let mut sim = Sim {
            cfg,
            rng: Rng::new(seed),
            stores: BTreeMap::new(),
            shared_store: cfg.spec.mutation == Mutation::WriteIgnoresKey,
            locks: BTreeMap::new(),
            clients: Vec::new(),
            queue: BinaryHeap::new(),
            seq: 0,
            out: History::default(),
            next_process: 1,
            next_txn: 1,
            down_until: 0,
            keys,
        };
        sim.out.meta.insert("generator".into(), "model::gen".into());
        sim.out.meta.insert("seed".into(), seed.into());
        sim.out
            .meta
            .insert("mutation".into(), cfg.spec.mutation.name().into());
        for slot in 0..cfg.clients.max(1) as usize {
            let process = sim.new_process();
            sim.clients.push(Client {
                process,
                owner: format!("w{slot}"),
                known: BTreeMap::new(),
                txn: None,
                call: None,
                gen: 0,
            });
            let t = sim.rng.range(0, 10);
            sim.schedule(t, Event::Invoke(slot));
        }
        sim
    }

    fn new_process(&mut self) -> ProcessId {
        let p = self.next_process;
        self.next_process += 1;
        p
    }

    fn schedule(&mut self, at: i64, ev: Event) {
        let gen = match ev {
            Event::Invoke(c) | Event::Effect(c) | Event::Complete(c) => self.clients[c].gen,
            _ => 0,
        };
        self.seq += 1;
        self.queue.push(Reverse((at, self.seq, ev, gen)));
    }

    fn run(mut self) -> History {
        while let Some(Reverse((at, _, ev, gen))) = self.queue.pop() {
            if self.out.ops.len() >= self.cfg.ops {
                self.cut_off(at);
                break;
            }
            let stale = match ev {
                Event::Invoke(c) | Event::Effect(c) | Event::Complete(c) => {
                    self.clients[c].gen != gen
                }
                _ => false,
            };
            if stale {
                continue;
            }
            match ev {
                Event::Invoke(c) => self.invoke(c, at),
                Event::Effect(c) => self.effect(c, at),
                Event::Complete(c) => self.complete(c, at),
                Event::Restart => self.restart(at),
                Event::Lapse => self.lapse(at),
            }
        }
        self.out
    }

    /// The history ends at `at`: calls in flight (which may have taken effect) are
    /// recorded as unknown; open transactions get no record (their end is unknown).
    fn cut_off(&mut self, at: i64) {
        for c in 0..self.clients.len() {
            if let Some(call) = self.clients[c].call.take() {
                if let Some(op) = &call.op {
                    let mut lost = call.clone();
                    lost.lost = true;
                    self.record_op(c, op, &lost, None, at);
                }
            }
        }
    }

    fn store_key(&self, key: &str) -> String {
        if self.shared_store {
            ALL.to_string()
        } else {
            key.to_string()
        }
    }

    /// The committed store holding `key`.
    fn committed(&self, key: &str) -> Store<String, String> {
        self.stores
            .get(&self.store_key(key))
            .cloned()
            .unwrap_or_default()
    }

    fn set_committed(&mut self, key: &str, store: Store<String, String>) {
        let k = self.store_key(key);
        self.stores.insert(k, store);
    }

    fn invoke(&mut self, c: usize, at: i64) {
        if at < self.down_until {
            self.schedule(self.down_until, Event::Invoke(c));
            return;
        }
        self.maybe_nemesis(at);
        let in_txn_end = self.clients[c]
            .txn
            .as_ref()
            .is_some_and(|t| t.ops_left == 0 || t.aborted);
        let call = if in_txn_end {
            let commit =
                self.rng.chance(80) && !self.clients[c].txn.as_ref().is_some_and(|t| t.aborted);
            Call {
                op: None,
                invoke: at,
                lost: self.rng.chance(self.cfg.unknown_pct / 2),
                outcome: None,
                commit,
            }
        } else {
            if self.clients[c].txn.is_none() && self.rng.chance(self.cfg.txn_pct) {
                let id = self.next_txn;
                self.next_txn += 1;
                let ops_left = self.rng.range(1, 3) as u32;
                self.clients[c].txn = Some(OpenTxn {
                    id,
                    begin: at,
                    writes: BTreeMap::new(),
                    ops_left,
                    aborted: false,
                });
            }
            let op = self.choose_op(c);
            let in_txn = self.clients[c].txn.is_some();
            Call {
                op: Some(op),
                invoke: at,
                lost: !in_txn && self.rng.chance(self.cfg.unknown_pct),
                outcome: None,
                commit: false,
            }
        };
        self.clients[c].call = Some(call);
        let lat = self.rng.range(self.cfg.latency_us.0, self.cfg.latency_us.1);
        let d = self.rng.range(0, lat);
        self.schedule(at + d, Event::Effect(c));
    }

    fn maybe_nemesis(&mut self, at: i64) {
        if self.cfg.restart_permille > 0
            && self.rng.below(1000) < u64::from(self.cfg.restart_permille)
        {
            let d = self.rng.range(1, 30);
            self.schedule(at + d, Event::Restart);
        }
        if self.cfg.lapse_permille > 0 && self.rng.below(1000) < u64::from(self.cfg.lapse_permille)
        {
            let d = self.rng.range(1, 30);
            self.schedule(at + d, Event::Lapse);
        }
    }

    fn choose_op(&mut self, c: usize) -> Op<String, String> {
        let key = self.rng.pick(&self.keys).clone();
        let me = self.clients[c].owner.clone();
        let owner = if self.rng.chance(10) {
            format!("w{}", self.rng.below(u64::from(self.cfg.clients.max(1))))
        } else {
            me
        };
        let known = self.clients[c].known.get(&key).copied();
        let epoch = match known {
            Some(e) if self.rng.chance(85) => e,
            _ => self.rng.range(0, 4),
        };
        // (no draw when off: the histories of a seed stay what they were)
        let ttl = if self.cfg.calendar_pct > 0 && self.rng.chance(self.cfg.calendar_pct) {
            *self.rng.pick(&CALENDAR_TTLS)
        } else {
            Interval::micros(*self.rng.pick(&self.cfg.ttls_us))
        };
        let mut op = match self.rng.below(100) {
            0..=34 => Op::acquire(key, owner, ttl),
            35..=44 if self.cfg.max_wait_us > 0 => {
                let wait = Interval::micros(self.rng.range(1, self.cfg.max_wait_us));
                Op::acquire_wait(key, owner, ttl, wait)
            }
            35..=64 => Op::renew(key, owner, epoch, ttl),
            65..=79 => Op::release(key, owner, epoch),
            _ => Op::inspect(key),
        };
        if self.clients[c].txn.is_none() && self.rng.chance(self.cfg.invalid_pct) {
            invalidate(&mut op, &mut self.rng);
        }
        op
    }

    fn effect(&mut self, c: usize, at: i64) {
        let Some(call) = self.clients[c].call.clone() else {
            return;
        };
        let Some(op) = call.op.clone() else {
            self.end_txn(c, at, &call);
            return;
        };
        let view_key = op.key().cloned().unwrap_or_else(|| self.keys[0].clone());
        let view = self.view(c, &view_key);
        let (outcome, after) = self.cfg.spec.step(&view, &op, Ts(at));
        let written: Vec<String> = view.diff(&after).into_iter().map(|(k, _)| k).collect();
        let my_txn = self.clients[c].txn.as_ref().map(|t| t.id);
        let blocked = written
            .iter()
            .any(|k| self.locks.get(k).is_some_and(|t| Some(*t) != my_txn));
        if blocked {
            if at - call.invoke > DEADLOCK_AFTER_US {
                // PostgreSQL's deadlock detector: the statement fails, its transaction aborts
                self.fail(c, at, Outcome::Failed);
            } else {
                // a row lock of another transaction: wait for it
                self.schedule(at + 3, Event::Effect(c));
            }
            return;
        }
        if let Op::Acquire { wait: Some(w), .. } = &op {
            let deadline = w.advance(Ts(call.invoke)).0;
            if outcome == Outcome::Timeout && at < deadline {
                self.schedule((at + 5).min(deadline), Event::Effect(c));
                return;
            }
        }
        let applies = !call.lost || self.rng.chance(50);
        if applies {
            self.apply(c, &view_key, view, after, &written);
        }
        if let Some(call) = self.clients[c].call.as_mut() {
            call.outcome = Some(outcome.clone());
        }
        if outcome == Outcome::InvalidInput {
            if let Some(t) = self.clients[c].txn.as_mut() {
                t.aborted = true;
            }
        }
        let lat = self.rng.range(0, self.cfg.latency_us.1 / 2);
        self.schedule(at + lat, Event::Complete(c));
    }

    /// The call fails without effect; a transaction it ran in is aborted.
    fn fail(&mut self, c: usize, at: i64, outcome: Outcome<String>) {
        if let Some(call) = self.clients[c].call.as_mut() {
            call.outcome = Some(outcome);
            call.lost = false;
        }
        if let Some(t) = self.clients[c].txn.as_mut() {
            t.aborted = true;
        }
        self.schedule(at + 1, Event::Complete(c));
    }

    /// The store client `c` sees for `key`: committed, with its transaction's writes.
    fn view(&self, c: usize, key: &str) -> Store<String, String> {
        let mut view = self.committed(key);
        if let Some(t) = &self.clients[c].txn {
            for (k, st) in &t.writes {
                if self.shared_store || k == key {
                    view.set(k.clone(), st.clone());
                }
            }
        }
        view
    }

    fn apply(
        &mut self,
        c: usize,
        key: &str,
        view: Store<String, String>,
        after: Store<String, String>,
        written: &[String],
    ) {
        if let Some(t) = self.clients[c].txn.as_mut() {
            for (k, st) in view.diff(&after) {
                self.locks.insert(k.clone(), t.id);
                t.writes.insert(k, st);
            }
        } else if !written.is_empty() {
            self.set_committed(key, after);
        }
    }

    fn end_txn(&mut self, c: usize, at: i64, call: &Call) {
        let Some(t) = self.clients[c].txn.clone() else {
            return;
        };
        let applies = !call.lost || self.rng.chance(50);
        if applies {
            self.finish_txn(&t, call.commit);
        }
        if let Some(call) = self.clients[c].call.as_mut() {
            call.outcome = Some(Outcome::Injected);
        }
        let lat = self.rng.range(0, self.cfg.latency_us.1 / 2);
        self.schedule(at + lat, Event::Complete(c));
    }

    /// Commits or aborts `t`'s pending writes and releases its locks.
    fn finish_txn(&mut self, t: &OpenTxn, commit: bool) {
        let spec = self.cfg.spec;
        let mut by_store: BTreeMap<String, Vec<(String, KeyState<String>)>> = BTreeMap::new();
        for (k, st) in &t.writes {
            by_store
                .entry(k.clone())
                .or_default()
                .push((k.clone(), st.clone()));
        }
        for (k, writes) in by_store {
            let committed = self.committed(&k);
            let next = if commit {
                spec.commit(&committed, &writes)
            } else {
                spec.abort(&committed, &writes)
            };
            self.set_committed(&k, next);
        }
        self.locks.retain(|_, id| *id != t.id);
    }

    fn complete(&mut self, c: usize, at: i64) {
        let Some(call) = self.clients[c].call.take() else {
            return;
        };
        let Some(outcome) = call.outcome.clone() else {
            return;
        };
        match &call.op {
            None => self.record_txn_end(c, &call, at),
            Some(op) => {
                self.learn(c, op, &outcome);
                self.record_op(c, op, &call, Some(outcome), at);
                if let Some(t) = self.clients[c].txn.as_mut() {
                    t.ops_left = t.ops_left.saturating_sub(1);
                }
            }
        }
        if call.lost {
            self.retire(c);
        }
        let think = self.rng.range(self.cfg.think_us.0, self.cfg.think_us.1);
        self.schedule(at + think, Event::Invoke(c));
    }

    fn learn(&mut self, c: usize, op: &Op<String, String>, outcome: &Outcome<String>) {
        let Some(key) = op.key().cloned() else { return };
        match outcome {
            Outcome::Acquired { epoch, .. } => {
                self.clients[c].known.insert(key, *epoch);
            }
            Outcome::Released | Outcome::Lapsed | Outcome::NotOwner => {
                self.clients[c].known.remove(&key);
            }
            _ => {}
        }
    }

    fn record_op(
        &mut self,
        c: usize,
        op: &Op<String, String>,
        call: &Call,
        outcome: Option<Outcome<String>>,
        at: i64,
    ) {
        let result = match (call.lost, outcome) {
            (true, _) | (_, None) => OpResult::Unknown {
                reason: "connection closed".to_string(),
            },
            (false, Some(o)) => result_of(o),
        };
        let unknown = matches!(result, OpResult::Unknown { .. });
        let id = self.out.ops.len() as u64 + 1;
        self.out.ops.push(OpRecord {
            id,
            process: self.clients[c].process,
            txn: self.clients[c].txn.as_ref().map(|t| t.id),
            call: op.clone(),
            invoke: ns(call.invoke),
            complete: ns(at),
            server: (!unknown).then(|| span(call.invoke, at)),
            result,
        });
    }

    fn record_txn_end(&mut self, c: usize, call: &Call, at: i64) {
        let Some(t) = self.clients[c].txn.take() else {
            return;
        };
        let end = match (call.lost, call.commit) {
            (true, true) => TxnEnd::Unknown,
            (_, false) => TxnEnd::Rollback,
            (false, true) => TxnEnd::Commit,
        };
        self.out.txns.push(TxnRecord {
            id: t.id,
            process: self.clients[c].process,
            isolation: Default::default(),
            begin: ns(t.begin),
            end,
            end_invoke: ns(call.invoke),
            end_complete: ns(at),
        });
    }

    /// The client lost its session: a new process takes its place.
    fn retire(&mut self, c: usize) {
        let p = self.new_process();
        let cl = &mut self.clients[c];
        cl.process = p;
        cl.gen += 1;
        cl.known.clear();
    }

    fn restart(&mut self, at: i64) {
        if at < self.down_until {
            return;
        }
        let down = self.rng.range(5, 60);
        for c in 0..self.clients.len() {
            self.kill_session(c, at);
        }
        let spec = self.cfg.spec;
        let window = span(at, at + down);
        for store in self.stores.values_mut() {
            *store = spec.restart(&spec.crash(store), window);
        }
        self.locks.clear();
        self.down_until = at + down;
        let id = self.out.nemeses.len() as u64 + 1;
        self.out.nemeses.push(NemesisRecord {
            id,
            fault: "crash".to_string(),
            start: ns(at),
            end: ns(at + down),
            effect: NemesisEffect::Restart {
                clean: false,
                down: Some(window),
            },
            detail: "simulated SIGKILL of the postmaster, then restart".to_string(),
        });
    }

    /// A crash at `at` ends client `c`'s session: its call in flight is lost (it took
    /// effect only if its effect came before), its transaction is rolled back.
    fn kill_session(&mut self, c: usize, at: i64) {
        let call = self.clients[c].call.take();
        let had_session = call.is_some() || self.clients[c].txn.is_some();
        if let Some(call) = &call {
            match &call.op {
                Some(op) => {
                    let mut lost = call.clone();
                    lost.lost = true;
                    self.record_op(c, op, &lost, None, at);
                }
                None => {
                    let mut lost = call.clone();
                    lost.lost = true;
                    // a commit that took effect before the crash stands; we cannot tell
                    self.record_txn_end(c, &lost, at);
                }
            }
        }
        if let Some(t) = self.clients[c].txn.take() {
            self.out.txns.push(TxnRecord {
                id: t.id,
                process: self.clients[c].process,
                isolation: Default::default(),
                begin: ns(t.begin),
                end: TxnEnd::Rollback,
                end_invoke: ns(at),
                end_complete: ns(at),
            });
        }
        if had_session {
            self.retire(c);
            let t = self.down_until.max(at) + 70;
            self.schedule(t, Event::Invoke(c));
        }
    }

    fn lapse(&mut self, at: i64) {
        if at < self.down_until {
            return;
        }
        let key = self.rng.pick(&self.keys).clone();
        if self.locks.contains_key(&key) {
            return;
        }
        let store = self.committed(&key);
        let (outcome, after) = self.cfg.spec.step(&store, &Op::expire(key.clone()), Ts(at));
        self.set_committed(&key, after);
        let id = self.out.nemeses.len() as u64 + 1;
        self.out.nemeses.push(NemesisRecord {
            id,
            fault: "lapse".to_string(),
            start: ns(at),
            end: ns(at),
            effect: NemesisEffect::Lapse {
                key,
                server: Some(span(at, at)),
                applied: Some(outcome == Outcome::Injected),
            },
            detail: String::new(),
        });
    }
}

/// Makes one argument of `op` NULL or empty.
fn invalidate(op: &mut Op<String, String>, rng: &mut Rng) {
    match op {
        Op::Acquire { ttl, wait, .. } if rng.chance(40) => {
            if rng.chance(50) {
                *ttl = Some(Interval::ZERO);
            } else {
                *wait = Some(Interval::micros(-1));
            }
        }
        Op::Acquire { key, owner, .. }
        | Op::Renew { key, owner, .. }
        | Op::Release { key, owner, .. } => {
            if rng.chance(50) {
                *key = None;
            } else {
                *owner = Some(String::new());
            }
        }
        Op::Inspect { key } => *key = Some(String::new()),
        Op::Expire { .. } => {}
    }
}

/// The recorded result of an outcome the simulated server returned.
pub fn result_of(outcome: Outcome<String>) -> OpResult {
    match outcome {
        Outcome::InvalidInput => OpResult::Fail {
            sqlstate: crate::fate::INVALID_PARAMETER_VALUE.to_string(),
            message: "lease: invalid input".to_string(),
        },
        Outcome::Timeout => OpResult::Fail {
            sqlstate: crate::fate::QUERY_CANCELED.to_string(),
            message: format!(
                "{}(simulated) exhausted",
                crate::fate::WAIT_EXHAUSTED_PREFIX
            ),
        },
        Outcome::Failed => OpResult::Fail {
            sqlstate: "40P01".to_string(),
            message: "deadlock detected".to_string(),
        },
        Outcome::Unknown => OpResult::Unknown {
            reason: "lost".to_string(),
        },
        other => OpResult::Ok(other),
    }
}

fn ns(us: i64) -> u64 {
    u64::try_from(us).unwrap_or(0).saturating_mul(1000)
}

fn span(a: i64, b: i64) -> Span {
    Span::new(Ts(a), Ts(b.max(a))).unwrap_or(Span::point(Ts(a)))
}
