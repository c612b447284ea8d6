//! Workload generation: what the processes of a campaign call.
//!
//! A [`Workload`] fixes the shape of a run (processes, keys, the op mix, TTLs, waits,
//! transactions, isolation levels, invalid inputs). Each process turns draws into
//! [`Step`]s: a call ([`OpChoice`]), BEGIN, COMMIT or ROLLBACK. A draw is a tuple of plain
//! integers ([`Draw`]) mapped through fixed weight tables, so the same mapping serves the
//! free-running mode (draws from a per-process [`Rng`] seeded from the campaign seed) and
//! proptest strategies ([`op_choice_strategy`], [`step_strategy`], [`workload_strategy`]),
//! whose integer draws shrink toward the first entry of each table.
//!
//! An [`OpChoice`] is resolved into a call against what its process has learnt
//! ([`Memory`]): its own grants' epochs and the epochs it has seen, so that renew and
//! release carry real, stale, or other owners' epochs.

use model::gen::Rng;
use model::{Epoch, Interval, Isolation, Op, OpRecord, Outcome};
use proptest::prelude::*;
use std::collections::BTreeMap;
use std::fmt;

/// Fewest and most processes of a workload.
pub const PROCESSES: std::ops::RangeInclusive<u32> = 2..=32;
/// Fewest and most keys of a workload.
pub const KEYS: std::ops::RangeInclusive<u32> = 1..=8;
/// The longest valid key or owner, in bytes.
pub const MAX_NAME_BYTES: usize = model::MAX_NAME_BYTES;

/// The keys a workload draws from, in order: the first `keys` are used. All valid, most
/// awkward: quotes and a backslash, the 1024-byte maximum, non-ASCII, a single byte.
pub fn key_pool() -> Vec<String> {
    vec![
        "k'quote\\back".to_string(),
        format!("max-{}", "L".repeat(MAX_NAME_BYTES - 4)),
        "ключ-λ✓".to_string(),
        "x".to_string(),
        "job 42".to_string(),
        "k\"double\"".to_string(),
        "tab\tkey".to_string(),
        "emoji-🔒".to_string(),
    ]
}

/// The owner name of process slot `slot` (kept when a retired process is replaced: the
/// new session acts for the same worker).
pub fn owner_name(slot: u32) -> String {
    match slot % 4 {
        0 => format!("w{slot}"),
        1 => format!("wörker-{slot}"),
        2 => format!("w'{slot}\\"),
        _ => format!("w {slot} \"q\""),
    }
}

/// An owner no process acts as.
pub const STRANGER: &str = "nobody-owns-this";

/// The names a workload's keys and owners are made of.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Names {
    /// [`key_pool`] and [`owner_name`]: valid and awkward (quotes, backslashes, the longest
    /// key, non-ASCII).
    #[default]
    Awkward,
    /// Case twins ([`twin_key_pool`], [`twin_owner_name`]): pairs of keys and pairs of
    /// owners that differ only in letter case, so that a comparison under a
    /// case-insensitive collation confuses them (byte-wise they are distinct).
    CaseTwins,
    /// [`key_pool`], and owners shared by pairs of processes: slots `2i` and `2i + 1` act
    /// as one owner, [`owner_name`]`(i)` (two connections of one client), so one session
    /// can hold the row lock of a lease (a renew in an open transaction) while another
    /// session of the same owner calls on it.
    SharedOwners,
}

impl Names {
    /// Every kind of names.
    pub const ALL: [Names; 3] = [Names::Awkward, Names::CaseTwins, Names::SharedOwners];

    /// The kind's name in a workload's JSON and in a plan's text form.
    pub fn word(self) -> &'static str {
        match self {
            Names::Awkward => "awkward",
            Names::CaseTwins => "case-twins",
            Names::SharedOwners => "shared-owners",
        }
    }
}

/// The keys of [`Names::CaseTwins`], in order: each even entry's twin follows it.
pub fn twin_key_pool() -> Vec<String> {
    [
        "lease-a", "LEASE-A", "Job-b", "job-B", "kEy-c", "KeY-C", "x-d", "X-D",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

/// The owner of process slot `slot` under [`Names::CaseTwins`]: slots `2i` and `2i + 1`
/// are twins.
pub fn twin_owner_name(slot: u32) -> String {
    if slot % 2 == 0 {
        format!("worker-{}", slot / 2)
    } else {
        format!("WORKER-{}", slot / 2)
    }
}

/// What is wrong with a workload.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum WorkloadError {
    #[error("processes must be in 2..=32, got {0}")]
    Processes(u32),
    #[error("keys must be in 1..=8, got {0}")]
    Keys(u32),
    #[error("{0} must not be empty")]
    Empty(&'static str),
    #[error("{what} must be at most 100, got {value}")]
    Percent { what: &'static str, value: u32 },
    #[error("the op mix has no weight")]
    NoMix,
    #[error("{what} must be valid: {value} is not")]
    Invalid { what: &'static str, value: String },
}

/// Relative weights of the calls.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OpMix {
    pub acquire: u32,
    /// Blocking acquires (wait > 0).
    pub acquire_wait: u32,
    pub renew: u32,
    pub release: u32,
    pub inspect: u32,
}

impl Default for OpMix {
    fn default() -> Self {
        OpMix {
            acquire: 30,
            acquire_wait: 8,
            renew: 25,
            release: 15,
            inspect: 22,
        }
    }
}

impl OpMix {
    fn table(&self) -> [(CallKind, u32); 5] {
        [
            (CallKind::Acquire, self.acquire),
            (CallKind::AcquireWait, self.acquire_wait),
            (CallKind::Renew, self.renew),
            (CallKind::Release, self.release),
            (CallKind::Inspect, self.inspect),
        ]
    }
}

/// The shape of a run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Workload {
    /// Concurrent sessions (2-32).
    pub processes: u32,
    /// Keys used, from [`key_pool`] (1-8).
    pub keys: u32,
    pub mix: OpMix,
    /// Lease TTLs with weights.
    pub ttls: Vec<(Interval, u32)>,
    /// Waits of blocking acquires, with weights.
    pub waits: Vec<(Interval, u32)>,
    /// Percent of a process's turns (outside a transaction) that begin one.
    pub txn_percent: u32,
    /// Ops per transaction: 1 to this many.
    pub txn_max_ops: u32,
    /// Percent of transactions that end with ROLLBACK rather than COMMIT.
    pub rollback_percent: u32,
    /// Isolation levels transactions draw from.
    pub isolations: Vec<Isolation>,
    /// Percent of calls with an invalid argument.
    pub invalid_percent: u32,
    /// What keys and owners are called.
    pub names: Names,
}

impl Default for Workload {
    /// 8 processes on 2 keys; TTLs from 5 ms (leases lapse mid-run) to a month; 10% of
    /// turns run a transaction of 1-3 ops (30% roll back); READ COMMITTED only (pg_lease
    /// 0.1.0 is known to misbehave at the other levels); 3% invalid calls.
    fn default() -> Self {
        Workload {
            processes: 8,
            keys: 2,
            mix: OpMix::default(),
            ttls: vec![
                (Interval::millis(5), 6),
                (Interval::millis(20), 6),
                (Interval::millis(60), 5),
                (Interval::millis(200), 4),
                (Interval::secs(1), 3),
                (Interval::secs(5), 2),
                (Interval::secs(120), 1),
                (
                    Interval {
                        months: 0,
                        days: 1,
                        micros: 0,
                    },
                    1,
                ),
                (
                    Interval {
                        months: 1,
                        days: 0,
                        micros: 250_000,
                    },
                    1,
                ),
            ],
            waits: vec![
                (Interval::millis(10), 3),
                (Interval::millis(50), 3),
                (Interval::millis(250), 1),
            ],
            txn_percent: 10,
            txn_max_ops: 3,
            rollback_percent: 30,
            isolations: vec![Isolation::ReadCommitted],
            invalid_percent: 3,
            names: Names::Awkward,
        }
    }
}

impl Workload {
    /// The workload of the free-running hunts and of the gate's campaigns: the default one
    /// (8 processes, 2 keys), with pairs of processes acting as one owner (so one session can
    /// hold a lease's row lock in a transaction while another calls on the lease) and twice
    /// the transactions.
    pub fn shared_owners() -> Workload {
        Workload {
            names: Names::SharedOwners,
            txn_percent: 20,
            ..Workload::default()
        }
    }

    /// Checks the bounds.
    pub fn validate(&self) -> Result<(), WorkloadError> {
        if !PROCESSES.contains(&self.processes) {
            return Err(WorkloadError::Processes(self.processes));
        }
        if !KEYS.contains(&self.keys) {
            return Err(WorkloadError::Keys(self.keys));
        }
        if self.mix.table().iter().all(|(_, w)| *w == 0) {
            return Err(WorkloadError::NoMix);
        }
        for (what, list) in [("ttls", &self.ttls), ("waits", &self.waits)] {
            if list.iter().all(|(_, w)| *w == 0) {
                return Err(WorkloadError::Empty(what));
            }
        }
        if self.isolations.is_empty() {
            return Err(WorkloadError::Empty("isolations"));
        }
        for (what, value) in [
            ("txn_percent", self.txn_percent),
            ("rollback_percent", self.rollback_percent),
            ("invalid_percent", self.invalid_percent),
        ] {
            if value > 100 {
                return Err(WorkloadError::Percent { what, value });
            }
        }
        self.check_intervals()
    }

    /// Every TTL and wait must be one pg_lease accepts (invalid ones come from
    /// `invalid_percent` only, so that they are counted as such).
    fn check_intervals(&self) -> Result<(), WorkloadError> {
        let probe = |ttl: Interval, wait: Interval| {
            Op::acquire_wait("k".to_string(), "o".to_string(), ttl, wait)
                .violations()
                .is_empty()
        };
        for (ttl, _) in &self.ttls {
            if !probe(*ttl, Interval::ZERO) {
                return Err(WorkloadError::Invalid {
                    what: "ttl",
                    value: ttl.to_string(),
                });
            }
        }
        for (wait, _) in &self.waits {
            if !wait.is_positive() || !probe(Interval::secs(1), *wait) {
                return Err(WorkloadError::Invalid {
                    what: "wait",
                    value: wait.to_string(),
                });
            }
        }
        Ok(())
    }

    /// The keys in use.
    pub fn key_names(&self) -> Vec<String> {
        let mut pool = match self.names {
            Names::Awkward | Names::SharedOwners => key_pool(),
            Names::CaseTwins => twin_key_pool(),
        };
        pool.truncate(self.keys as usize);
        pool
    }

    /// The owner process slot `slot` acts as.
    pub fn owner(&self, slot: u32) -> String {
        match self.names {
            Names::Awkward => owner_name(slot),
            Names::CaseTwins => twin_owner_name(slot),
            Names::SharedOwners => owner_name(slot / 2),
        }
    }

    /// The workload as JSON, for a history's header and a verdict file.
    pub fn to_json(&self) -> serde_json::Value {
        let intervals = |list: &[(Interval, u32)]| {
            list.iter()
                .map(|(i, w)| {
                    serde_json::json!({"months": i.months, "days": i.days, "us": i.micros, "weight": w})
                })
                .collect::<Vec<_>>()
        };
        serde_json::json!({
            "processes": self.processes,
            "keys": self.key_names(),
            "mix": {
                "acquire": self.mix.acquire,
                "acquire_wait": self.mix.acquire_wait,
                "renew": self.mix.renew,
                "release": self.mix.release,
                "inspect": self.mix.inspect,
            },
            "ttls": intervals(&self.ttls),
            "waits": intervals(&self.waits),
            "txn_percent": self.txn_percent,
            "txn_max_ops": self.txn_max_ops,
            "rollback_percent": self.rollback_percent,
            "isolations": self.isolations.iter().map(|i| i.sql()).collect::<Vec<_>>(),
            "invalid_percent": self.invalid_percent,
            "names": self.names.word(),
        })
    }
}

/// Which call.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CallKind {
    Acquire,
    AcquireWait,
    Renew,
    Release,
    Inspect,
}

/// Whose name a call carries as owner.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum OwnerChoice {
    /// The process's own.
    Own,
    /// Another slot's owner (a wrong owner).
    Slot(u32),
    /// An owner nobody acts as.
    Stranger,
}

/// Which epoch a renew or release carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EpochChoice {
    /// The epoch of the process's own grant of the key (else the latest it saw).
    Own,
    /// One less than that: a stale epoch.
    Stale,
    /// The latest epoch the process saw on the key, whoever held it (other owners').
    Seen,
    /// A small guess, 0 to 4.
    Guess(i64),
}

/// An invalid argument (SQLSTATE 22023 from a correct pg_lease).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum InvalidInput {
    NullKey,
    EmptyKey,
    /// 1025 bytes: one over the limit.
    KeyTooLong,
    /// 3000 bytes: also over PostgreSQL's btree row limit, so a missing check shows.
    HugeKey,
    NullOwner,
    EmptyOwner,
    /// renew, release (other calls: an empty key).
    NullEpoch,
    /// acquire, renew (inspect, release: an empty key).
    ZeroTtl,
    /// `1 day -1 hour`: positive, but with a negative field.
    NegativeTtlField,
    /// 100 years and a month.
    TtlOverHundredYears,
    /// acquire only (others: a NULL key).
    NegativeWait,
}

const INVALID_INPUTS: [(InvalidInput, u32); 11] = [
    (InvalidInput::NullKey, 1),
    (InvalidInput::EmptyKey, 1),
    (InvalidInput::KeyTooLong, 2),
    (InvalidInput::HugeKey, 2),
    (InvalidInput::NullOwner, 1),
    (InvalidInput::EmptyOwner, 1),
    (InvalidInput::NullEpoch, 1),
    (InvalidInput::ZeroTtl, 1),
    (InvalidInput::NegativeTtlField, 1),
    (InvalidInput::TtlOverHundredYears, 1),
    (InvalidInput::NegativeWait, 1),
];

const OWNER_CHOICES: [(OwnerKind, u32); 3] = [
    (OwnerKind::Own, 85),
    (OwnerKind::Other, 10),
    (OwnerKind::Stranger, 5),
];

#[derive(Clone, Copy)]
enum OwnerKind {
    Own,
    Other,
    Stranger,
}

const EPOCH_CHOICES: [(EpochKind, u32); 4] = [
    (EpochKind::Own, 70),
    (EpochKind::Stale, 10),
    (EpochKind::Seen, 10),
    (EpochKind::Guess, 10),
];

#[derive(Clone, Copy)]
enum EpochKind {
    Own,
    Stale,
    Seen,
    Guess,
}

/// One call, chosen; [`OpChoice::op`] makes it concrete for a process.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OpChoice {
    pub call: CallKind,
    /// Index into the workload's keys.
    pub key: usize,
    pub owner: OwnerChoice,
    pub epoch: EpochChoice,
    pub ttl: Interval,
    pub wait: Interval,
    pub invalid: Option<InvalidInput>,
}

/// The raw integers one [`OpChoice`] is made of: each is reduced modulo its table's total
/// weight, so any `u32` is a valid draw and 0 is the first entry.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Draw {
    pub call: u32,
    pub key: u32,
    pub owner: u32,
    pub other_slot: u32,
    pub epoch: u32,
    pub ttl: u32,
    pub wait: u32,
    /// Below `invalid_percent` (of 100): the call gets an invalid argument.
    pub invalid_roll: u32,
    pub invalid: u32,
}

impl Draw {
    /// A draw from `rng`.
    pub fn from_rng(rng: &mut Rng) -> Draw {
        let mut next = || (rng.next_u64() >> 32) as u32;
        Draw {
            call: next(),
            key: next(),
            owner: next(),
            other_slot: next(),
            epoch: next(),
            ttl: next(),
            wait: next(),
            invalid_roll: next() % 100,
            invalid: next(),
        }
    }
}

/// The entry of `table` that `draw` falls on (weights as widths; zero weights never hit).
fn weighted<T: Copy>(table: &[(T, u32)], draw: u32) -> Option<T> {
    let total: u64 = table.iter().map(|(_, w)| u64::from(*w)).sum();
    if total == 0 {
        return None;
    }
    let mut at = u64::from(draw) % total;
    for (value, w) in table {
        if at < u64::from(*w) {
            return Some(*value);
        }
        at -= u64::from(*w);
    }
    None
}

impl OpChoice {
    /// The choice `draw` makes in workload `w`.
    pub fn from_draw(w: &Workload, draw: Draw) -> OpChoice {
        let call = weighted(&w.mix.table(), draw.call).unwrap_or(CallKind::Inspect);
        let owner = match weighted(&OWNER_CHOICES, draw.owner) {
            Some(OwnerKind::Other) => OwnerChoice::Slot(draw.other_slot % w.processes.max(1)),
            Some(OwnerKind::Stranger) => OwnerChoice::Stranger,
            _ => OwnerChoice::Own,
        };
        let epoch = match weighted(&EPOCH_CHOICES, draw.epoch) {
            Some(EpochKind::Stale) => EpochChoice::Stale,
            Some(EpochKind::Seen) => EpochChoice::Seen,
            Some(EpochKind::Guess) => EpochChoice::Guess(i64::from(draw.epoch % 5)),
            _ => EpochChoice::Own,
        };
        let invalid = (draw.invalid_roll % 100 < w.invalid_percent)
            .then(|| weighted(&INVALID_INPUTS, draw.invalid))
            .flatten();
        OpChoice {
            call,
            key: (draw.key % w.keys.max(1)) as usize,
            owner,
            epoch,
            ttl: weighted(&w.ttls, draw.ttl).unwrap_or(Interval::secs(1)),
            wait: weighted(&w.waits, draw.wait).unwrap_or(Interval::millis(10)),
            invalid,
        }
    }

    /// The call process slot `slot` makes for this choice, given what it knows.
    pub fn op(&self, w: &Workload, slot: u32, memory: &Memory) -> Op<String, String> {
        let keys = w.key_names();
        let key = keys
            .get(self.key)
            .or(keys.first())
            .cloned()
            .unwrap_or_else(|| "k".to_string());
        let owner = match self.owner {
            OwnerChoice::Own => w.owner(slot),
            OwnerChoice::Slot(other) => w.owner(other),
            OwnerChoice::Stranger => STRANGER.to_string(),
        };
        let epoch = memory.epoch_for(&key, self.epoch);
        let op = match self.call {
            CallKind::Acquire => Op::acquire(key, owner, self.ttl),
            CallKind::AcquireWait => Op::acquire_wait(key, owner, self.ttl, self.wait),
            CallKind::Renew => Op::renew(key, owner, epoch, self.ttl),
            CallKind::Release => Op::release(key, owner, epoch),
            CallKind::Inspect => Op::inspect(key),
        };
        match self.invalid {
            Some(bad) => invalidate(op, bad),
            None => op,
        }
    }
}

/// `op` with the invalid argument `bad` (or, where the call has no such argument, an
/// empty or NULL key).
fn invalidate(op: Op<String, String>, bad: InvalidInput) -> Op<String, String> {
    use InvalidInput as I;
    let key_of = |bad: InvalidInput| match bad {
        I::NullKey => None,
        I::KeyTooLong => Some("K".repeat(MAX_NAME_BYTES + 1)),
        I::HugeKey => Some("H".repeat(3000)),
        _ => Some(String::new()),
    };
    let bad_ttl = match bad {
        I::ZeroTtl => Some(Interval::ZERO),
        I::NegativeTtlField => Some(Interval {
            months: 0,
            days: 1,
            micros: -3_600_000_000,
        }),
        I::TtlOverHundredYears => Some(Interval {
            months: 1201,
            days: 0,
            micros: 0,
        }),
        _ => None,
    };
    let owner_of = |bad: InvalidInput| match bad {
        I::NullOwner => None,
        _ => Some(String::new()),
    };
    match (op, bad) {
        (op, I::NullKey | I::EmptyKey | I::KeyTooLong | I::HugeKey) => with_key(op, key_of(bad)),
        (Op::Acquire { key, ttl, wait, .. }, I::NullOwner | I::EmptyOwner) => Op::Acquire {
            key,
            owner: owner_of(bad),
            ttl,
            wait,
        },
        (
            Op::Renew {
                key, epoch, ttl, ..
            },
            I::NullOwner | I::EmptyOwner,
        ) => Op::Renew {
            key,
            owner: owner_of(bad),
            epoch,
            ttl,
        },
        (Op::Release { key, epoch, .. }, I::NullOwner | I::EmptyOwner) => Op::Release {
            key,
            owner: owner_of(bad),
            epoch,
        },
        (
            Op::Renew {
                key, owner, ttl, ..
            },
            I::NullEpoch,
        ) => Op::Renew {
            key,
            owner,
            epoch: None,
            ttl,
        },
        (Op::Release { key, owner, .. }, I::NullEpoch) => Op::Release {
            key,
            owner,
            epoch: None,
        },
        (
            Op::Acquire {
                key, owner, wait, ..
            },
            _,
        ) if bad_ttl.is_some() => Op::Acquire {
            key,
            owner,
            ttl: bad_ttl,
            wait,
        },
        (
            Op::Renew {
                key, owner, epoch, ..
            },
            _,
        ) if bad_ttl.is_some() => Op::Renew {
            key,
            owner,
            epoch,
            ttl: bad_ttl,
        },
        (
            Op::Acquire {
                key, owner, ttl, ..
            },
            I::NegativeWait,
        ) => Op::Acquire {
            key,
            owner,
            ttl,
            wait: Some(Interval::millis(-1)),
        },
        (op, I::NegativeWait) => with_key(op, None),
        (op, _) => with_key(op, Some(String::new())),
    }
}

fn with_key(op: Op<String, String>, key: Option<String>) -> Op<String, String> {
    match op {
        Op::Acquire {
            owner, ttl, wait, ..
        } => Op::Acquire {
            key,
            owner,
            ttl,
            wait,
        },
        Op::Renew {
            owner, epoch, ttl, ..
        } => Op::Renew {
            key,
            owner,
            epoch,
            ttl,
        },
        Op::Release { owner, epoch, .. } => Op::Release { key, owner, epoch },
        Op::Inspect { .. } => Op::Inspect { key },
        Op::Expire { key } => Op::Expire { key },
    }
}

/// What a process has learnt about the keys from its own answers.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Memory {
    /// The epoch of the process's own current grant, per key.
    own: BTreeMap<String, Epoch>,
    /// The latest epoch seen on the key (any owner).
    seen: BTreeMap<String, Epoch>,
}

impl Memory {
    /// The epoch `choice` picks for `key`.
    pub fn epoch_for(&self, key: &str, choice: EpochChoice) -> Epoch {
        let seen = self.seen.get(key).copied();
        let own = self.own.get(key).copied().or(seen).unwrap_or(1);
        match choice {
            EpochChoice::Own => own,
            EpochChoice::Stale => own - 1,
            EpochChoice::Seen => seen.unwrap_or(own),
            EpochChoice::Guess(e) => e,
        }
    }

    /// Learns from a recorded call of the process acting as `me`.
    pub fn learn(&mut self, record: &OpRecord, me: &str) {
        let Some(key) = record.call.key().cloned() else {
            return;
        };
        let mine = record.call.owner().is_some_and(|o| o == me);
        match record.result.outcome() {
            Outcome::Acquired { epoch, .. } => {
                self.see(&key, epoch);
                if mine {
                    self.own.insert(key, epoch);
                }
            }
            Outcome::Released => {
                if let Op::Release { epoch: Some(e), .. } = record.call {
                    self.see(&key, e + 1);
                }
                if mine {
                    self.own.remove(&key);
                }
            }
            Outcome::Lapsed | Outcome::NotOwner | Outcome::Unknown if mine => {
                self.own.remove(&key);
            }
            Outcome::Inspected(Some(row)) => {
                self.see(&key, row.epoch);
                if row.held && row.owner.as_deref() == Some(me) {
                    self.own.insert(key, row.epoch);
                }
            }
            _ => {}
        }
    }

    fn see(&mut self, key: &str, epoch: Epoch) {
        let e = self.seen.entry(key.to_string()).or_insert(epoch);
        *e = (*e).max(epoch);
    }
}

/// One step of a process.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step {
    Call(OpChoice),
    Begin(Isolation),
    Commit,
    Rollback,
    /// The process does nothing for this long (its open transaction, if any, ages). Only
    /// written plans pause; drawn steps never do.
    Pause(std::time::Duration),
    /// The lease on key `k` (its index), if held and live, expires at the server's current
    /// time: the clock-independent lapse, made beside the process's session on a
    /// connection of its own and recorded as a `lapse` nemesis event. Only written plans
    /// lapse; drawn steps never do.
    Lapse(usize),
    /// The process's backend is signalled, now, whatever it is doing: its statement
    /// cancelled, or the backend terminated (its open transaction rolled back, its call in
    /// flight left unknown). Made from beside the process, recorded as a nemesis event
    /// named after the signal. Only written plans signal; drawn steps never do.
    Signal(Signal),
    /// The server is stopped as the [`Stop`] says, kept down this long, and started again:
    /// every session's connection ends (its open transaction rolled back, its call in
    /// flight unknown) and the next step of each process connects anew. Made by the
    /// caller's control of the server (the failure crate's), recorded as a restart nemesis
    /// event with its server-time downtime. Only written plans restart; drawn steps never do.
    Restart(Stop, std::time::Duration),
    /// A server fact the model does not decide, asked on the process's session inside its
    /// open transaction (with the answer the step expects, if any). Only written plans
    /// probe; drawn steps never do.
    Probe(Probe),
    /// A setting of the process's session (`set_config(name, value, false)`: PostgreSQL's
    /// `SET`, undone by the rollback of a transaction it was made in, gone when the session
    /// reconnects). Only written plans set; drawn steps never do.
    Set(Setting),
}

/// A server setting as a plan names it: `lock_timeout=200ms`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Setting {
    pub name: String,
    pub value: String,
}

impl Setting {
    /// `name=value`, the setting as a plan writes it: a name of letters, digits, `_` and
    /// `.`, a value without spaces (both nonempty); else why not.
    pub fn of(text: &str) -> Result<Setting, String> {
        let usage = "a setting is written name=value, e.g. `lock_timeout=300ms`";
        let Some((name, value)) = text.split_once('=') else {
            return Err(format!("`{text}` is not a setting: {usage}"));
        };
        let named = !name.is_empty()
            && name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'.');
        if !named || value.is_empty() || value.contains(char::is_whitespace) {
            return Err(format!(
                "`{text}` is not a setting: {usage} (a name of letters, digits, `_` and `.`, \
                 a value without spaces)"
            ));
        }
        Ok(Setting {
            name: name.into(),
            value: value.into(),
        })
    }
}

impl fmt::Display for Setting {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}={}", self.name, self.value)
    }
}

/// What a [`Step::Probe`] asks the server.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Probe {
    /// Whether the process's open transaction has a transaction id
    /// (`pg_current_xact_id_if_assigned()`): whether it wrote.
    Xid,
}

impl Probe {
    /// `xid`: the plan text's word.
    pub fn name(self) -> &'static str {
        match self {
            Probe::Xid => "xid",
        }
    }
}

/// How a [`Step::Restart`] stops the server.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Stop {
    /// SIGKILL of the postmaster and every backend at once.
    Crash,
    /// `pg_ctl stop -m immediate` (SIGQUIT): no checkpoint, crash recovery at start.
    Immediate,
    /// `pg_ctl stop -m fast` (SIGINT): sessions terminated, shutdown checkpoint.
    Fast,
}

impl Stop {
    pub const ALL: [Stop; 3] = [Stop::Crash, Stop::Immediate, Stop::Fast];

    /// Whether the stop is clean (a shutdown checkpoint), as history format v2 records it.
    pub fn is_clean(self) -> bool {
        self == Stop::Fast
    }

    /// `crash`, `immediate` or `fast`: the plan text's word.
    pub fn name(self) -> &'static str {
        match self {
            Stop::Crash => "crash",
            Stop::Immediate => "immediate",
            Stop::Fast => "fast",
        }
    }
}

/// What a [`Step::Signal`] sends to a process's backend.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Signal {
    /// `pg_cancel_backend`: the statement in flight fails with 57014.
    Cancel,
    /// `pg_terminate_backend`: the connection ends.
    Terminate,
}

impl Signal {
    /// `cancel` or `terminate`: the plan text's word and the nemesis event's name.
    pub fn name(self) -> &'static str {
        match self {
            Signal::Cancel => "cancel",
            Signal::Terminate => "terminate",
        }
    }
}

/// A process's own sequence of steps in free-running mode.
#[derive(Clone, Debug)]
pub struct ProcessPlan {
    rng: Rng,
    /// Calls left in the open transaction.
    txn_left: Option<u32>,
}

impl ProcessPlan {
    /// The plan of process slot `slot` in a campaign seeded `seed`.
    pub fn new(seed: u64, slot: u32) -> ProcessPlan {
        let stream = u64::from(slot)
            .wrapping_add(1)
            .wrapping_mul(0xa076_1d64_78bd_642f);
        ProcessPlan {
            rng: Rng::new(seed ^ stream),
            txn_left: None,
        }
    }

    /// The next step; `in_txn` says whether the session still has a transaction open (an
    /// error ends one early).
    pub fn next(&mut self, w: &Workload, in_txn: bool) -> Step {
        if !in_txn {
            self.txn_left = None;
        }
        match self.txn_left {
            Some(0) => {
                self.txn_left = None;
                if self.rng.chance(w.rollback_percent) {
                    Step::Rollback
                } else {
                    Step::Commit
                }
            }
            Some(n) => {
                self.txn_left = Some(n - 1);
                Step::Call(OpChoice::from_draw(w, Draw::from_rng(&mut self.rng)))
            }
            None if self.rng.chance(w.txn_percent) => {
                self.txn_left = Some(self.rng.range(1, i64::from(w.txn_max_ops.max(1))) as u32);
                Step::Begin(*self.rng.pick(&w.isolations))
            }
            None => Step::Call(OpChoice::from_draw(w, Draw::from_rng(&mut self.rng))),
        }
    }

    /// How the open transaction ends when the run stops.
    pub fn last_end(&mut self, w: &Workload) -> Step {
        self.txn_left = None;
        if self.rng.chance(w.rollback_percent) {
            Step::Rollback
        } else {
            Step::Commit
        }
    }
}

/// Draws for proptest: each field from the whole `u32` range (shrinking toward 0, the
/// first entry of each table), the invalid roll below 100.
pub fn draw_strategy() -> impl Strategy<Value = Draw> {
    draw_strategy_of(any::<u32>)
}

/// Draws for proptest with each field from `field()` (the invalid roll below 100).
pub fn draw_strategy_of<S>(field: impl Fn() -> S) -> impl Strategy<Value = Draw>
where
    S: Strategy<Value = u32>,
{
    (
        (field(), field(), field(), field()),
        (field(), field(), field(), 0u32..100, field()),
    )
        .prop_map(
            |((call, key, owner, other_slot), (epoch, ttl, wait, invalid_roll, invalid))| Draw {
                call,
                key,
                owner,
                other_slot,
                epoch,
                ttl,
                wait,
                invalid_roll,
                invalid,
            },
        )
}

/// Op choices of workload `w`, as proptest values.
pub fn op_choice_strategy(w: &Workload) -> impl Strategy<Value = OpChoice> {
    let w = w.clone();
    draw_strategy().prop_map(move |d| OpChoice::from_draw(&w, d))
}

/// Steps of workload `w` (a call, or a transaction boundary), as proptest values.
pub fn step_strategy(w: &Workload) -> impl Strategy<Value = Step> {
    let isolations = w.isolations.clone();
    prop_oneof![
        8 => op_choice_strategy(w).prop_map(Step::Call),
        1 => proptest::sample::select(isolations).prop_map(Step::Begin),
        1 => any::<bool>().prop_map(|commit| if commit { Step::Commit } else { Step::Rollback }),
    ]
}

/// Workloads within the bounds, READ COMMITTED only (the other levels are selectable by
/// hand but off by default).
pub fn workload_strategy() -> impl Strategy<Value = Workload> {
    (
        PROCESSES,
        KEYS,
        (1u32..50, 0u32..20, 0u32..40, 0u32..30, 0u32..40),
        0u32..=30,
        1u32..=4,
        0u32..=100,
        0u32..=10,
    )
        .prop_map(
            |(
                processes,
                keys,
                (acquire, acquire_wait, renew, release, inspect),
                txn_percent,
                txn_max_ops,
                rollback_percent,
                invalid_percent,
            )| {
                Workload {
                    processes,
                    keys,
                    mix: OpMix {
                        acquire,
                        acquire_wait,
                        renew,
                        release,
                        inspect,
                    },
                    txn_percent,
                    txn_max_ops,
                    rollback_percent,
                    invalid_percent,
                    ..Workload::default()
                }
            },
        )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_key_pool_is_valid_and_awkward() {
        let pool = key_pool();
        assert_eq!(pool.len(), *KEYS.end() as usize);
        assert!(pool.iter().any(|k| k.len() == MAX_NAME_BYTES));
        assert!(pool.iter().any(|k| k.len() == 1));
        assert!(pool.iter().any(|k| k.contains('\'') && k.contains('\\')));
        assert!(pool.iter().any(|k| !k.is_ascii()));
        for k in &pool {
            let op: Op<String, String> = Op::inspect(k.clone());
            assert!(op.violations().is_empty(), "{k:?}");
        }
        // Negative control: one byte more is invalid.
        let long: Op<String, String> = Op::inspect("K".repeat(MAX_NAME_BYTES + 1));
        assert!(!long.violations().is_empty());
    }

    #[test]
    fn case_twins_differ_only_in_case_and_are_valid() {
        let pool = twin_key_pool();
        assert_eq!(pool.len(), *KEYS.end() as usize);
        for pair in pool.chunks(2) {
            assert_ne!(pair[0], pair[1]);
            assert_eq!(pair[0].to_lowercase(), pair[1].to_lowercase());
        }
        let w = Workload {
            names: Names::CaseTwins,
            ..Workload::default()
        };
        assert_eq!(w.validate(), Ok(()));
        assert_eq!(w.key_names(), ["lease-a", "LEASE-A"]);
        let (a, b) = (w.owner(0), w.owner(1));
        assert!(a != b && a.to_lowercase() == b.to_lowercase(), "{a} {b}");
        // Negative control: the default names have no case twins.
        let d = Workload::default();
        let owners: Vec<String> = (0..8).map(|s| d.owner(s).to_lowercase()).collect();
        let distinct: std::collections::BTreeSet<_> = owners.iter().collect();
        assert_eq!(distinct.len(), owners.len());
    }

    #[test]
    fn the_default_workload_is_valid_and_bad_ones_are_refused() {
        assert_eq!(Workload::default().validate(), Ok(()));
        for (w, want) in [
            (
                Workload {
                    processes: 1,
                    ..Workload::default()
                },
                WorkloadError::Processes(1),
            ),
            (
                Workload {
                    keys: 9,
                    ..Workload::default()
                },
                WorkloadError::Keys(9),
            ),
            (
                Workload {
                    ttls: vec![(Interval::ZERO, 1)],
                    ..Workload::default()
                },
                WorkloadError::Invalid {
                    what: "ttl",
                    value: Interval::ZERO.to_string(),
                },
            ),
        ] {
            assert_eq!(w.validate(), Err(want));
        }
    }

    proptest! {
        /// A choice is invalid input exactly when it was drawn so.
        #[test]
        fn choices_are_invalid_exactly_when_drawn_invalid(w in workload_strategy(), d in draw_strategy()) {
            prop_assert_eq!(w.validate(), Ok(()));
            let choice = OpChoice::from_draw(&w, d);
            let op = choice.op(&w, 0, &Memory::default());
            prop_assert_eq!(op.violations().is_empty(), choice.invalid.is_none(), "{:?} -> {:?}", choice, op);
        }
    }

    #[test]
    fn a_plan_draws_every_kind_of_step() {
        let w = Workload::default();
        let mut plan = ProcessPlan::new(7, 0);
        let mut kinds = std::collections::HashSet::new();
        let mut steps = Vec::new();
        let mut in_txn = false;
        for _ in 0..5_000 {
            let step = plan.next(&w, in_txn);
            match &step {
                Step::Begin(_) => in_txn = true,
                Step::Commit | Step::Rollback => in_txn = false,
                Step::Pause(_)
                | Step::Lapse(_)
                | Step::Signal(_)
                | Step::Restart(..)
                | Step::Probe(_)
                | Step::Set(_) => {}
                Step::Call(c) => {
                    kinds.insert(format!("{:?}", c.call));
                    if c.invalid.is_some() {
                        kinds.insert("invalid".into());
                    }
                }
            }
            steps.push(step);
        }
        assert_eq!(kinds.len(), 6, "{kinds:?}");
        assert!(steps.contains(&Step::Commit) && steps.contains(&Step::Rollback));
        // The same seed and slot give the same steps; another slot does not.
        let mut again = ProcessPlan::new(7, 0);
        let mut other = ProcessPlan::new(7, 1);
        let first: Vec<Step> = (0..50).map(|_| again.next(&w, false)).collect();
        let theirs: Vec<Step> = (0..50).map(|_| other.next(&w, false)).collect();
        let mut replay = ProcessPlan::new(7, 0);
        let mine: Vec<Step> = (0..50).map(|_| replay.next(&w, false)).collect();
        assert_eq!(first, mine);
        assert_ne!(first, theirs);
    }

    #[test]
    fn memory_tracks_own_grants_and_seen_epochs() {
        use model::{OpResult, Ts};
        let me = owner_name(0);
        let mut m = Memory::default();
        let record = |call: Op<String, String>, outcome: Outcome<String>| OpRecord {
            id: 1,
            process: 1,
            txn: None,
            call,
            invoke: 0,
            complete: 1,
            server: None,
            result: OpResult::Ok(outcome),
        };
        let granted = record(
            Op::acquire("k".into(), me.clone(), Interval::secs(1)),
            Outcome::Acquired {
                epoch: 4,
                expires_at: Ts(9),
            },
        );
        m.learn(&granted, &me);
        assert_eq!(m.epoch_for("k", EpochChoice::Own), 4);
        assert_eq!(m.epoch_for("k", EpochChoice::Stale), 3);
        let released = record(Op::release("k".into(), me.clone(), 4), Outcome::Released);
        m.learn(&released, &me);
        assert_eq!(m.epoch_for("k", EpochChoice::Seen), 5);
        assert_eq!(m.epoch_for("k", EpochChoice::Own), 5);
    }
}
