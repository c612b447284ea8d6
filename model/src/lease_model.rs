//! The stateright model: clients acquiring, renewing, releasing and inspecting leases on a
//! few keys, an abstract server clock, the `expire` fault, server crash and restart,
//! transactions that commit or abort, invalid inputs, and a fenced resource the clients write
//! to with the epoch they hold. Every lease operation is [`Spec::step`]: the model adds only
//! scheduling, clients and faults.
//!
//! The invariants are checked by monitors: each transition compares what the (possibly
//! mutated) spec did with the invariant's statement and records a violation bit in the state
//! (stateright properties are plain functions of one state). Invariant 1 is also a predicate
//! on the state: at most one client believes, from the grants it received, that it holds an
//! unexpired lease on a key.

use crate::invariant::Invariant;
use crate::mutation::Mutation;
use crate::spec::{Epoch, KeyState, Op, Outcome, Row, Spec, Store};
use crate::time::{Interval, Span, Ts};
use stateright::{Model, Property};

/// Most clients a model can have.
pub const MAX_CLIENTS: usize = 4;
/// Most keys a model can have.
pub const MAX_KEYS: usize = 3;

/// Bit for the fencing property (not one of the 11 invariants).
const FENCING_BIT: u16 = 1 << 12;

fn bit(inv: Invariant) -> u16 {
    1 << inv.number()
}

/// What the model explores.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Config {
    /// clients (owners), 1 to [`MAX_CLIENTS`]
    pub clients: u8,
    /// keys, 1 to [`MAX_KEYS`]
    pub keys: u8,
    /// the clock stops at this tick
    pub max_time: i64,
    /// states with a larger epoch are outside the explored boundary
    pub max_epoch: Epoch,
    /// lease TTLs (ticks) clients may ask for
    pub ttls: Vec<i64>,
    /// wait bound (ticks) of blocking acquires; 0: no blocking acquires
    pub wait: i64,
    /// server crash and restart
    pub crashes: bool,
    /// operations inside a transaction that commits or aborts
    pub transactions: bool,
    /// invalid-input calls
    pub invalid_inputs: bool,
    /// inspect calls
    pub inspects: bool,
    /// the injected `expire(key)` fault
    pub expire_faults: bool,
    /// writes to the fenced resource
    pub fenced_writes: bool,
    /// renew/release also with a stale epoch (held epoch - 1)
    pub stale_epochs: bool,
    /// the spec variant
    pub mutation: Mutation,
}

impl Default for Config {
    /// The default configuration: two clients, one key, every feature; checked exhaustively
    /// by `cargo test`.
    fn default() -> Self {
        Config {
            clients: 2,
            keys: 1,
            max_time: 3,
            max_epoch: 3,
            ttls: vec![2],
            wait: 1,
            crashes: true,
            transactions: true,
            invalid_inputs: true,
            inspects: true,
            expire_faults: true,
            fenced_writes: true,
            stale_epochs: true,
            mutation: Mutation::None,
        }
    }
}

/// An unusable [`Config`].
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    #[error("clients must be 1 to {MAX_CLIENTS}, got {0}")]
    Clients(u8),
    #[error("keys must be 1 to {MAX_KEYS}, got {0}")]
    Keys(u8),
    #[error("max_time must be 0 to 1000, got {0}")]
    MaxTime(i64),
    #[error("max_epoch must be 1 to 1000, got {0}")]
    MaxEpoch(Epoch),
    #[error("ttls must be non-empty, each 1 to 1000, got {0:?}")]
    Ttls(Vec<i64>),
    #[error("wait must be 0 to 1000, got {0}")]
    Wait(i64),
}

impl Config {
    /// The default configuration with two keys and the per-key features that do not interact
    /// across keys turned off (inspect, invalid input, fenced writes, blocking acquire): key
    /// isolation under transactions, crashes and the expire fault. Checked exhaustively by
    /// `cargo test` too.
    pub fn two_keys() -> Config {
        Config {
            keys: 2,
            max_epoch: 2,
            wait: 0,
            invalid_inputs: false,
            inspects: false,
            fenced_writes: false,
            ..Config::default()
        }
    }

    /// Three clients on one key (bigger: about 0.4 M unique states).
    pub fn three_clients() -> Config {
        Config {
            clients: 3,
            ..Config::default()
        }
    }

    /// The named configurations: `default`, `two-keys`, `three-clients`.
    pub fn preset(name: &str) -> Option<Config> {
        match name {
            "default" => Some(Config::default()),
            "two-keys" => Some(Config::two_keys()),
            "three-clients" => Some(Config::three_clients()),
            _ => None,
        }
    }

    /// Names accepted by [`Config::preset`].
    pub const PRESETS: [&'static str; 3] = ["default", "two-keys", "three-clients"];

    /// Checks the bounds.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.clients == 0 || usize::from(self.clients) > MAX_CLIENTS {
            return Err(ConfigError::Clients(self.clients));
        }
        if self.keys == 0 || usize::from(self.keys) > MAX_KEYS {
            return Err(ConfigError::Keys(self.keys));
        }
        if !(0..=1000).contains(&self.max_time) {
            return Err(ConfigError::MaxTime(self.max_time));
        }
        if !(1..=1000).contains(&self.max_epoch) {
            return Err(ConfigError::MaxEpoch(self.max_epoch));
        }
        if self.ttls.is_empty() || self.ttls.iter().any(|t| !(1..=1000).contains(t)) {
            return Err(ConfigError::Ttls(self.ttls.clone()));
        }
        if !(0..=1000).contains(&self.wait) {
            return Err(ConfigError::Wait(self.wait));
        }
        Ok(())
    }
}

/// What a client believes about one key, from the results it received.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Belief {
    /// the epoch of its last grant of the key (0: never granted); used for fenced writes
    pub epoch: Epoch,
    /// `Some(x)`: it holds the key until `x` (> now); `None`: it does not hold it
    pub until: Option<i64>,
}

/// What a client is doing.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Phase {
    #[default]
    Idle,
    /// inside a blocking acquire started at `since`
    Waiting { key: u8, ttl: i64, since: i64 },
    /// inside a transaction with one lease operation, not yet committed or aborted
    InTxn,
}

/// One client.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Client {
    pub phase: Phase,
    pub leases: [Belief; MAX_KEYS],
}

/// The fenced resource's guard for one key.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Guard {
    /// highest epoch accepted
    pub epoch: Epoch,
    /// client whose write was accepted last
    pub writer: Option<u8>,
}

/// The open transaction (at most one at a time).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Txn {
    pub client: u8,
    pub key: u8,
    /// rows its operation wrote (visible to others only after commit)
    pub writes: Vec<(u8, KeyState<u8>)>,
    /// the operation's result as the client saw it
    pub outcome: Outcome<u8>,
}

/// The last transition, when it is one a `sometimes` property looks for.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Note {
    #[default]
    None,
    Takeover,
    Idempotent,
    WaitGranted,
    WaitTimeout,
    Renewed,
    Released,
    NotOwner,
    Lapsed,
    EpochMismatch,
    InspectLapsed,
    Invalid,
    AbortedGrant,
    WriteRejected,
    Expired,
}

/// A model state.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct State {
    /// server clock (ticks keep running while the server is down)
    pub now: i64,
    /// `Some(t)`: the server is down since `t`
    pub down_since: Option<i64>,
    /// committed lease state
    pub store: Store<u8, u8>,
    pub txn: Option<Txn>,
    pub clients: [Client; MAX_CLIENTS],
    pub guards: [Guard; MAX_KEYS],
    /// ghost: highest epoch of each key committed or reported by inspect so far
    pub hi: [Epoch; MAX_KEYS],
    pub note: Note,
    /// violation bits: `1 << n` for invariant n, bit 12 for fencing
    pub violated: u16,
}

impl State {
    /// True when the monitors recorded a violation of `inv`.
    pub fn violates(&self, inv: Invariant) -> bool {
        self.violated & bit(inv) != 0
    }
}

/// How an acquire is called.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Mode {
    /// non-blocking, autocommit
    Auto,
    /// non-blocking, in a transaction
    Txn,
    /// blocking with the configured wait, autocommit
    Blocking,
}

/// A model action.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Action {
    Acquire {
        client: u8,
        key: u8,
        ttl: i64,
        mode: Mode,
    },
    Renew {
        client: u8,
        key: u8,
        epoch: Epoch,
        ttl: i64,
        in_txn: bool,
    },
    Release {
        client: u8,
        key: u8,
        epoch: Epoch,
        in_txn: bool,
    },
    Inspect {
        client: u8,
        key: u8,
    },
    /// an acquire with `ttl = 0` (22023)
    InvalidAcquire {
        client: u8,
        key: u8,
    },
    /// a waiting client's poll: granted, or timed out once the wait passed
    Poll {
        client: u8,
    },
    Commit {
        client: u8,
    },
    Abort {
        client: u8,
    },
    /// write to the fenced resource with the client's last epoch for the key
    Write {
        client: u8,
        key: u8,
    },
    Tick,
    Expire {
        key: u8,
    },
    Crash,
    Restart,
}

/// The stateright model of pg_lease.
#[derive(Clone, Debug)]
pub struct LeaseModel {
    cfg: Config,
    spec: Spec,
}

impl LeaseModel {
    /// The model of `cfg`.
    pub fn new(cfg: Config) -> Result<LeaseModel, ConfigError> {
        cfg.validate()?;
        Ok(LeaseModel {
            spec: Spec::new(cfg.mutation),
            cfg,
        })
    }

    pub fn config(&self) -> &Config {
        &self.cfg
    }

    /// A compact description of `s` (only the configured clients and keys).
    pub fn describe(&self, s: &State) -> String {
        let mut out = format!("t={}", s.now);
        if let Some(since) = s.down_since {
            out.push_str(&format!(" DOWN since {since}"));
        }
        for k in self.keys() {
            let st = match s.store.state(&k) {
                KeyState::NeverLeased => "never-leased".to_string(),
                KeyState::Free { epoch } => format!("FREE e{epoch}"),
                KeyState::Held {
                    owner,
                    epoch,
                    expires,
                } => format!("HELD c{owner} e{epoch} until {}", expires.lo.0),
            };
            let g = s.guards[usize::from(k)];
            out.push_str(&format!("; k{k}: {st}"));
            if let Some(w) = g.writer {
                out.push_str(&format!(", guard e{} by c{w}", g.epoch));
            }
        }
        if let Some(t) = &s.txn {
            out.push_str(&format!(
                "; open txn of c{} on k{}: {:?}",
                t.client, t.key, t.outcome
            ));
        }
        for c in self.clients() {
            let cl = &s.clients[usize::from(c)];
            let mut beliefs = Vec::new();
            for k in self.keys() {
                let b = cl.leases[usize::from(k)];
                if b.epoch > 0 || b.until.is_some() {
                    beliefs.push(match b.until {
                        Some(x) => format!("k{k} e{} until {x}", b.epoch),
                        None => format!("k{k} e{} (not held)", b.epoch),
                    });
                }
            }
            out.push_str(&format!("; c{c} {:?} [{}]", cl.phase, beliefs.join(", ")));
        }
        let violated: Vec<u8> = Invariant::ALL
            .iter()
            .filter(|i| s.violates(**i))
            .map(|i| i.number())
            .collect();
        if !violated.is_empty() {
            out.push_str(&format!("; violated invariants {violated:?}"));
        }
        if s.violated & FENCING_BIT != 0 {
            out.push_str("; fencing violated");
        }
        out
    }

    fn keys(&self) -> impl Iterator<Item = u8> {
        0..self.cfg.keys
    }

    fn clients(&self) -> impl Iterator<Item = u8> {
        0..self.cfg.clients
    }

    /// True when `key` is row-locked by a transaction of a client other than `client`.
    fn locked(s: &State, key: u8, client: Option<u8>) -> bool {
        s.txn
            .as_ref()
            .is_some_and(|t| t.key == key && Some(t.client) != client)
    }

    fn acquire_op(key: u8, client: u8, ttl: i64, wait: i64) -> Op<u8, u8> {
        Op::acquire_wait(key, client, Interval::micros(ttl), Interval::micros(wait))
    }

    fn invalid_op(key: u8, client: u8) -> Op<u8, u8> {
        Op::Acquire {
            key: Some(key),
            owner: Some(client),
            ttl: Some(Interval::ZERO),
            wait: Some(Interval::ZERO),
        }
    }

    fn epoch_choices(&self, held: Epoch) -> impl Iterator<Item = Epoch> {
        let first = held.max(1);
        let stale = (self.cfg.stale_epochs && held >= 2).then_some(held - 1);
        std::iter::once(first).chain(stale)
    }

    /// Runs a lease operation of `client` on `key` at the current time.
    fn client_op(&self, s: &State, client: u8, key: u8, op: &Op<u8, u8>, in_txn: bool) -> State {
        let (outcome, post) = self.spec.step(&s.store, op, Ts(s.now));
        let mut n = s.clone();
        n.violated |= self.monitor_op(s, client, key, op, &outcome, &post);
        n.note = note_for(s, client, key, op, &outcome);
        if in_txn {
            n.txn = Some(Txn {
                client,
                key,
                writes: s.store.diff(&post),
                outcome,
            });
            n.clients[usize::from(client)].phase = Phase::InTxn;
        } else {
            n.store = post;
            learn(&mut n, client, key, &outcome);
        }
        n
    }

    /// Checks one operation's outcome against the invariants; returns violation bits.
    fn monitor_op(
        &self,
        s: &State,
        client: u8,
        key: u8,
        op: &Op<u8, u8>,
        outcome: &Outcome<u8>,
        post: &Store<u8, u8>,
    ) -> u16 {
        let pre = &s.store;
        let now = s.now;
        let st = pre.state(&key);
        let after = post.state(&key);
        let mut v = 0;
        for other in self.keys().filter(|k| *k != key) {
            if pre.state(&other) != post.state(&other) {
                v |= bit(Invariant::PrecedenceAndIsolation);
            }
        }
        let valid = op.violations().is_empty();
        if !valid {
            if *outcome != Outcome::InvalidInput || post != pre {
                v |= bit(Invariant::FailClosed);
            }
            return v;
        }
        if *outcome == Outcome::InvalidInput {
            v |= bit(Invariant::FailClosed);
        }
        // (holder, epoch, expires_at, live)
        let holder = st.holder().map(|(o, e, w)| (*o, e, w.lo.0, w.lo.0 > now));
        match op {
            Op::Acquire { ttl, .. } => match outcome {
                Outcome::Acquired { epoch, expires_at } => match holder {
                    Some((h, e, x, true)) if h == client => {
                        if *epoch != e || expires_at.0 != x || after != st {
                            v |= bit(Invariant::ReacquireIdempotent);
                        }
                    }
                    _ => {
                        if *epoch <= s.hi[usize::from(key)] {
                            v |= bit(Invariant::GrantEpochFresh);
                        }
                        if matches!(holder, Some((h, _, _, true)) if h != client) {
                            v |= bit(Invariant::MutualExclusion);
                        }
                        let ttl = ttl.map_or(0, |t| t.micros);
                        if expires_at.0 != now + ttl {
                            v |= bit(Invariant::DurabilityAndTimeAuthority);
                        }
                    }
                },
                Outcome::Denied | Outcome::Timeout => {
                    if !matches!(holder, Some((h, _, _, true)) if h != client) {
                        v |= bit(Invariant::LapseIsFinal);
                    }
                    if after != st {
                        v |= bit(Invariant::PrecedenceAndIsolation);
                    }
                }
                _ => v |= bit(Invariant::PrecedenceAndIsolation),
            },
            Op::Renew { epoch, .. } | Op::Release { epoch, .. } => {
                let given = epoch.unwrap_or_default();
                let expected = match holder {
                    Some((h, _, _, _)) if h != client => Outcome::NotOwner,
                    None => Outcome::NotOwner,
                    Some((_, _, _, false)) => Outcome::Lapsed,
                    Some((_, e, _, true)) if e != given => Outcome::EpochMismatch,
                    Some(_) => Outcome::Released, // stands for "ok"
                };
                let is_renew = matches!(op, Op::Renew { .. });
                if is_renew && after.epoch() != st.epoch() {
                    v |= bit(Invariant::RenewKeepsEpoch);
                }
                match outcome {
                    Outcome::Renewed { .. } | Outcome::Released => {
                        if matches!(holder, Some((h, _, _, false)) if h == client) {
                            v |= bit(Invariant::LapseIsFinal);
                        }
                        if expected != Outcome::Released
                            || (is_renew != matches!(outcome, Outcome::Renewed { .. }))
                        {
                            v |= bit(Invariant::PrecedenceAndIsolation);
                        }
                        if !is_renew
                            && after
                                != (KeyState::Free {
                                    epoch: st.epoch().saturating_add(1),
                                })
                        {
                            v |= bit(Invariant::ReleaseAdvancesEpoch);
                        }
                    }
                    status => {
                        if *status != expected || after != st {
                            v |= bit(Invariant::PrecedenceAndIsolation);
                        }
                    }
                }
            }
            Op::Inspect { .. } => {
                let expected = match holder {
                    _ if st == KeyState::NeverLeased => None,
                    Some((h, e, x, true)) => Some(Row {
                        held: true,
                        owner: Some(h),
                        epoch: e,
                        expires_at: Some(Ts(x)),
                    }),
                    _ => Some(Row {
                        held: false,
                        owner: None,
                        epoch: st.epoch(),
                        expires_at: None,
                    }),
                };
                if *outcome != Outcome::Inspected(expected) || post != pre {
                    v |= bit(Invariant::InspectConsistent);
                }
            }
            Op::Expire { .. } => {}
        }
        v
    }

    /// Common bookkeeping after every transition: invariant 2, the epoch ghost, beliefs.
    fn finish(&self, s: &State, mut n: State) -> State {
        for k in self.keys() {
            let i = usize::from(k);
            let e = n.store.epoch(&k);
            if e < s.store.epoch(&k) {
                n.violated |= bit(Invariant::EpochNeverDecreases);
            }
            n.hi[i] = n.hi[i].max(e);
        }
        let now = n.now;
        for c in n.clients.iter_mut() {
            for b in c.leases.iter_mut() {
                if b.until.is_some_and(|x| x <= now) {
                    b.until = None;
                }
            }
        }
        n
    }

    fn poll(&self, s: &State, client: u8) -> Option<(Op<u8, u8>, Outcome<u8>)> {
        let Phase::Waiting { key, ttl, since } = s.clients[usize::from(client)].phase else {
            return None;
        };
        let op = Self::acquire_op(key, client, ttl, self.cfg.wait);
        let (outcome, _) = self.spec.step(&s.store, &op, Ts(s.now));
        let done = matches!(outcome, Outcome::Acquired { .. }) || s.now >= since + self.cfg.wait;
        done.then_some((op, outcome))
    }
}

/// Updates the client's beliefs from a result it received (committed).
fn learn(n: &mut State, client: u8, key: u8, outcome: &Outcome<u8>) {
    let b = &mut n.clients[usize::from(client)].leases[usize::from(key)];
    match outcome {
        Outcome::Acquired { epoch, expires_at } => {
            *b = Belief {
                epoch: *epoch,
                until: Some(expires_at.0),
            };
        }
        Outcome::Renewed { expires_at } => b.until = Some(expires_at.0),
        Outcome::Released | Outcome::NotOwner | Outcome::Lapsed => b.until = None,
        Outcome::Inspected(Some(row)) => {
            let i = usize::from(key);
            n.hi[i] = n.hi[i].max(row.epoch);
        }
        _ => {}
    }
}

fn note_for(s: &State, client: u8, key: u8, op: &Op<u8, u8>, outcome: &Outcome<u8>) -> Note {
    let st = s.store.state(&key);
    let now = Ts(s.now);
    match outcome {
        Outcome::Acquired { .. } => match st.holder() {
            Some((h, _, _)) if st.is_live_at(now) && *h == client => Note::Idempotent,
            Some((h, _, _)) if !st.is_live_at(now) && *h != client => Note::Takeover,
            _ => Note::None,
        },
        Outcome::Timeout => Note::WaitTimeout,
        Outcome::Renewed { .. } => Note::Renewed,
        Outcome::Released => Note::Released,
        Outcome::NotOwner => Note::NotOwner,
        Outcome::Lapsed => Note::Lapsed,
        Outcome::EpochMismatch => Note::EpochMismatch,
        Outcome::Inspected(Some(row)) if !row.held && st.holder().is_some() => Note::InspectLapsed,
        Outcome::InvalidInput if !op.violations().is_empty() => Note::Invalid,
        _ => Note::None,
    }
}

impl Model for LeaseModel {
    type State = State;
    type Action = Action;

    fn init_states(&self) -> Vec<State> {
        vec![State {
            now: 0,
            down_since: None,
            store: Store::new(),
            txn: None,
            clients: [Client::default(); MAX_CLIENTS],
            guards: [Guard::default(); MAX_KEYS],
            hi: [0; MAX_KEYS],
            note: Note::None,
            violated: 0,
        }]
    }

    fn actions(&self, s: &State, actions: &mut Vec<Action>) {
        let cfg = &self.cfg;
        let up = s.down_since.is_none();
        for client in self.clients() {
            let c = &s.clients[usize::from(client)];
            match c.phase {
                Phase::Idle if up => {
                    for key in self.keys() {
                        let held = c.leases[usize::from(key)].epoch;
                        if !Self::locked(s, key, Some(client)) {
                            let txn_ok = cfg.transactions && s.txn.is_none();
                            for &ttl in &cfg.ttls {
                                actions.push(Action::Acquire {
                                    client,
                                    key,
                                    ttl,
                                    mode: Mode::Auto,
                                });
                                if txn_ok {
                                    actions.push(Action::Acquire {
                                        client,
                                        key,
                                        ttl,
                                        mode: Mode::Txn,
                                    });
                                }
                                if cfg.wait > 0 {
                                    actions.push(Action::Acquire {
                                        client,
                                        key,
                                        ttl,
                                        mode: Mode::Blocking,
                                    });
                                }
                                for epoch in self.epoch_choices(held) {
                                    actions.push(Action::Renew {
                                        client,
                                        key,
                                        epoch,
                                        ttl,
                                        in_txn: false,
                                    });
                                    if txn_ok {
                                        actions.push(Action::Renew {
                                            client,
                                            key,
                                            epoch,
                                            ttl,
                                            in_txn: true,
                                        });
                                    }
                                }
                            }
                            for epoch in self.epoch_choices(held) {
                                actions.push(Action::Release {
                                    client,
                                    key,
                                    epoch,
                                    in_txn: false,
                                });
                                if txn_ok {
                                    actions.push(Action::Release {
                                        client,
                                        key,
                                        epoch,
                                        in_txn: true,
                                    });
                                }
                            }
                        }
                        if cfg.inspects {
                            actions.push(Action::Inspect { client, key });
                        }
                        // Not while another transaction holds the key's row lock: a correct
                        // call is rejected before touching the row either way, but the
                        // invalid-input-writes mutant would block on the lock.
                        if cfg.invalid_inputs && !Self::locked(s, key, Some(client)) {
                            actions.push(Action::InvalidAcquire { client, key });
                        }
                    }
                }
                Phase::Waiting { key, .. }
                    if up
                        && !Self::locked(s, key, Some(client))
                        && self.poll(s, client).is_some() =>
                {
                    actions.push(Action::Poll { client });
                }
                Phase::InTxn if up => {
                    actions.push(Action::Commit { client });
                    actions.push(Action::Abort { client });
                }
                _ => {}
            }
            if cfg.fenced_writes && c.phase == Phase::Idle {
                for key in self.keys() {
                    if c.leases[usize::from(key)].epoch > 0 {
                        actions.push(Action::Write { client, key });
                    }
                }
            }
        }
        if up {
            if cfg.expire_faults {
                for key in self.keys() {
                    if s.store.state(&key).is_live_at(Ts(s.now)) && !Self::locked(s, key, None) {
                        actions.push(Action::Expire { key });
                    }
                }
            }
            if cfg.crashes {
                actions.push(Action::Crash);
            }
        } else if cfg.crashes {
            actions.push(Action::Restart);
        }
        if s.now < cfg.max_time {
            actions.push(Action::Tick);
        }
    }

    fn next_state(&self, s: &State, action: Action) -> Option<State> {
        let mut n = match action {
            Action::Acquire {
                client,
                key,
                ttl,
                mode,
            } => match mode {
                Mode::Auto => self.client_op(
                    s,
                    client,
                    key,
                    &Self::acquire_op(key, client, ttl, 0),
                    false,
                ),
                Mode::Txn => {
                    self.client_op(s, client, key, &Self::acquire_op(key, client, ttl, 0), true)
                }
                Mode::Blocking => {
                    let op = Self::acquire_op(key, client, ttl, self.cfg.wait);
                    let (outcome, _) = self.spec.step(&s.store, &op, Ts(s.now));
                    if matches!(outcome, Outcome::Acquired { .. }) {
                        self.client_op(s, client, key, &op, false)
                    } else {
                        let mut n = s.clone();
                        n.note = Note::None;
                        n.clients[usize::from(client)].phase = Phase::Waiting {
                            key,
                            ttl,
                            since: s.now,
                        };
                        n
                    }
                }
            },
            Action::Renew {
                client,
                key,
                epoch,
                ttl,
                in_txn,
            } => {
                let op = Op::renew(key, client, epoch, Interval::micros(ttl));
                self.client_op(s, client, key, &op, in_txn)
            }
            Action::Release {
                client,
                key,
                epoch,
                in_txn,
            } => self.client_op(s, client, key, &Op::release(key, client, epoch), in_txn),
            Action::Inspect { client, key } => {
                self.client_op(s, client, key, &Op::inspect(key), false)
            }
            Action::InvalidAcquire { client, key } => {
                self.client_op(s, client, key, &Self::invalid_op(key, client), false)
            }
            Action::Poll { client } => {
                let (op, outcome) = self.poll(s, client)?;
                let Phase::Waiting { key, since, .. } = s.clients[usize::from(client)].phase else {
                    return None;
                };
                let mut n = self.client_op(s, client, key, &op, false);
                n.clients[usize::from(client)].phase = Phase::Idle;
                if matches!(outcome, Outcome::Acquired { .. }) && s.now > since {
                    n.note = Note::WaitGranted;
                }
                n
            }
            Action::Commit { client } => {
                let txn = s.txn.as_ref().filter(|t| t.client == client)?;
                let mut n = s.clone();
                n.note = Note::None;
                n.store = self.spec.commit(&s.store, &txn.writes);
                learn(&mut n, client, txn.key, &txn.outcome);
                n.txn = None;
                n.clients[usize::from(client)].phase = Phase::Idle;
                n
            }
            Action::Abort { client } => {
                let txn = s.txn.as_ref().filter(|t| t.client == client)?;
                let mut n = s.clone();
                n.store = self.spec.abort(&s.store, &txn.writes);
                if n.store != s.store {
                    n.violated |= bit(Invariant::FailClosed);
                }
                n.note = if matches!(txn.outcome, Outcome::Acquired { .. }) {
                    Note::AbortedGrant
                } else {
                    Note::None
                };
                n.txn = None;
                n.clients[usize::from(client)].phase = Phase::Idle;
                n
            }
            Action::Write { client, key } => {
                let mut n = s.clone();
                n.note = Note::None;
                let epoch = s.clients[usize::from(client)].leases[usize::from(key)].epoch;
                let g = &mut n.guards[usize::from(key)];
                if epoch >= g.epoch {
                    if g.writer.is_some_and(|w| w != client) && epoch <= g.epoch {
                        n.violated |= FENCING_BIT;
                    }
                    *g = Guard {
                        epoch,
                        writer: Some(client),
                    };
                } else {
                    n.note = Note::WriteRejected;
                }
                n
            }
            Action::Tick => {
                let mut n = s.clone();
                n.note = Note::None;
                n.now += 1;
                n
            }
            Action::Expire { key } => {
                let (_, post) = self.spec.step(&s.store, &Op::expire(key), Ts(s.now));
                let mut n = s.clone();
                n.note = Note::Expired;
                if let Some((h, _, _)) = s.store.state(&key).holder() {
                    n.clients[usize::from(*h)].leases[usize::from(key)].until = None;
                }
                n.store = post;
                n
            }
            Action::Crash => {
                let mut n = s.clone();
                n.note = Note::None;
                n.store = self.spec.crash(&s.store);
                if n.store != s.store {
                    n.violated |= bit(Invariant::DurabilityAndTimeAuthority);
                }
                n.txn = None;
                for c in n.clients.iter_mut() {
                    c.phase = Phase::Idle;
                }
                n.down_since = Some(s.now);
                n
            }
            Action::Restart => {
                let since = s.down_since?;
                let down = Span::new(Ts(since), Ts(s.now)).ok()?;
                let mut n = s.clone();
                n.note = Note::None;
                n.store = self.spec.restart(&s.store, down);
                if n.store != s.store {
                    n.violated |= bit(Invariant::DurabilityAndTimeAuthority);
                }
                n.down_since = None;
                n
            }
        };
        n = self.finish(s, n);
        Some(n)
    }

    fn within_boundary(&self, s: &State) -> bool {
        let max = self.cfg.max_epoch;
        s.store.rows().all(|(_, st)| st.epoch() <= max)
            && s.txn
                .as_ref()
                .is_none_or(|t| t.writes.iter().all(|(_, st)| st.epoch() <= max))
    }

    fn properties(&self) -> Vec<Property<Self>> {
        properties(&self.cfg)
    }
}

/// Name of the fencing property.
pub const FENCING: &str = "fencing: a new writer's epoch exceeds the last writer's";

fn mutual_exclusion(m: &LeaseModel, s: &State) -> bool {
    if s.violates(Invariant::MutualExclusion) {
        return false;
    }
    m.keys().all(|k| {
        s.clients
            .iter()
            .filter(|c| c.leases[usize::from(k)].until.is_some())
            .count()
            <= 1
    })
}

fn down_with_live_lease(s: &State) -> bool {
    s.down_since.is_some_and(|since| {
        s.store
            .rows()
            .any(|(_, st)| matches!(st, KeyState::Held { expires, .. } if expires.lo.0 > since))
    })
}

fn lapsed_during_downtime(s: &State) -> bool {
    s.down_since.is_some_and(|since| {
        s.store.rows().any(|(_, st)| {
            matches!(st, KeyState::Held { expires, .. }
                if expires.lo.0 > since && expires.lo.0 <= s.now)
        })
    })
}

fn two_keys_held(_: &LeaseModel, s: &State) -> bool {
    s.store
        .rows()
        .filter(|(_, st)| st.is_live_at(Ts(s.now)))
        .count()
        >= 2
}

/// The properties checked for `cfg`: the 11 invariants and fencing as `always`, and
/// `sometimes` reachability checks for the features `cfg` enables.
pub fn properties(cfg: &Config) -> Vec<Property<LeaseModel>> {
    let mut p = vec![
        Property::always(Invariant::MutualExclusion.property_name(), mutual_exclusion),
        Property::always(
            Invariant::EpochNeverDecreases.property_name(),
            |_, s: &State| !s.violates(Invariant::EpochNeverDecreases),
        ),
        Property::always(
            Invariant::GrantEpochFresh.property_name(),
            |_, s: &State| !s.violates(Invariant::GrantEpochFresh),
        ),
        Property::always(
            Invariant::RenewKeepsEpoch.property_name(),
            |_, s: &State| !s.violates(Invariant::RenewKeepsEpoch),
        ),
        Property::always(
            Invariant::ReleaseAdvancesEpoch.property_name(),
            |_, s: &State| !s.violates(Invariant::ReleaseAdvancesEpoch),
        ),
        Property::always(
            Invariant::ReacquireIdempotent.property_name(),
            |_, s: &State| !s.violates(Invariant::ReacquireIdempotent),
        ),
        Property::always(Invariant::LapseIsFinal.property_name(), |_, s: &State| {
            !s.violates(Invariant::LapseIsFinal)
        }),
        Property::always(
            Invariant::PrecedenceAndIsolation.property_name(),
            |_, s: &State| !s.violates(Invariant::PrecedenceAndIsolation),
        ),
        Property::always(Invariant::FailClosed.property_name(), |_, s: &State| {
            !s.violates(Invariant::FailClosed)
        }),
        Property::always(
            Invariant::InspectConsistent.property_name(),
            |_, s: &State| !s.violates(Invariant::InspectConsistent),
        ),
        Property::always(
            Invariant::DurabilityAndTimeAuthority.property_name(),
            |_, s: &State| !s.violates(Invariant::DurabilityAndTimeAuthority),
        ),
        Property::sometimes("sometimes: a lapsed lease is taken over", |_, s: &State| {
            s.note == Note::Takeover
        }),
        Property::sometimes(
            "sometimes: a same-owner re-acquire is idempotent",
            |_, s: &State| s.note == Note::Idempotent,
        ),
        Property::sometimes("sometimes: a renew succeeds", |_, s: &State| {
            s.note == Note::Renewed
        }),
        Property::sometimes("sometimes: a release succeeds", |_, s: &State| {
            s.note == Note::Released
        }),
        Property::sometimes("sometimes: not_owner is reported", |_, s: &State| {
            s.note == Note::NotOwner
        }),
        Property::sometimes("sometimes: lapsed is reported", |_, s: &State| {
            s.note == Note::Lapsed
        }),
        Property::sometimes("sometimes: epoch_mismatch is reported", |_, s: &State| {
            s.note == Note::EpochMismatch
        }),
        Property::sometimes(
            "sometimes: a lease reaches the epoch bound",
            |m: &LeaseModel, s: &State| s.store.rows().any(|(_, st)| st.epoch() == m.cfg.max_epoch),
        ),
    ];
    if cfg.inspects {
        p.push(Property::sometimes(
            "sometimes: inspect reports a lapsed lease as not held",
            |_, s: &State| s.note == Note::InspectLapsed,
        ));
    }
    if cfg.fenced_writes {
        p.push(Property::always(FENCING, |_, s: &State| {
            s.violated & FENCING_BIT == 0
        }));
        p.push(Property::sometimes(
            "sometimes: a deposed holder's write is fenced off",
            |_, s: &State| s.note == Note::WriteRejected,
        ));
    }
    if cfg.wait > 0 {
        p.push(Property::sometimes(
            "sometimes: a blocking acquire is granted after waiting",
            |_, s: &State| s.note == Note::WaitGranted,
        ));
        p.push(Property::sometimes(
            "sometimes: a blocking acquire times out",
            |_, s: &State| s.note == Note::WaitTimeout,
        ));
    }
    if cfg.invalid_inputs {
        p.push(Property::sometimes(
            "sometimes: invalid input is rejected",
            |_, s: &State| s.note == Note::Invalid,
        ));
    }
    if cfg.transactions {
        p.push(Property::sometimes(
            "sometimes: an acquire is rolled back",
            |_, s: &State| s.note == Note::AbortedGrant,
        ));
    }
    if cfg.expire_faults {
        p.push(Property::sometimes(
            "sometimes: an expire fault cuts a live lease",
            |_, s: &State| s.note == Note::Expired,
        ));
    }
    if cfg.crashes {
        p.push(Property::sometimes(
            "sometimes: the server crashes while a lease is live",
            |_, s: &State| down_with_live_lease(s),
        ));
        if cfg.max_time > 0 && cfg.ttls.iter().any(|t| *t < cfg.max_time) {
            p.push(Property::sometimes(
                "sometimes: a lease lapses while the server is down",
                |_, s: &State| lapsed_during_downtime(s),
            ));
        }
    }
    if cfg.keys >= 2 {
        p.push(Property::sometimes(
            "sometimes: two keys are held at once",
            two_keys_held,
        ));
    }
    p
}
