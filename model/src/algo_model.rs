//! The algorithm model: pg_lease's calls as the steps its SQL takes, run by concurrent
//! sessions against one key's row, the row's lock and an abstract server clock, in the step
//! order of a [`Variant`] (0.1.0 or 0.2.0).
//!
//! [`crate::LeaseModel`] checks the contract: every call is one atomic [`crate::Spec::step`].
//! This model refines it: a call is a sequence of steps (read the clock, probe, try the write,
//! wait for the row lock, re-check, write, commit; a wait loop's sleep), and other sessions'
//! steps and clock ticks interleave between them. The invariants are stated over server-time
//! instants, on the history of committed grants: a grant is valid from its effective instant
//! (the clock value its `expires_at = clock + ttl` was computed from) until its release
//! instant or its expiry.
//!
//! Step orders (one key, READ COMMITTED; a session reads its own uncommitted version, else
//! the committed one):
//! - 0.1.0 acquire: read the clock into `v_now`; probe (plain SELECT); decide with `v_now`
//!   (idempotent, denied, time out, sleep, or try); INSERT .. ON CONFLICT DO UPDATE .. WHERE
//!   free or `expires_at <= v_now`, in a subtransaction: it waits for any other transaction's
//!   lock on the row, re-checks the latest version with the same `v_now` and writes
//!   `v_now + ttl`; a failed re-check rolls the subtransaction back (dropping the lock) and
//!   the call loops.
//! - 0.1.0 renew and release: read the clock into `v_now`; UPDATE .. WHERE owner, epoch and
//!   `expires_at > v_now`, in a subtransaction: a row whose snapshot version matches waits
//!   for the lock and is re-checked on the latest version with the same `v_now`; when no row
//!   matched, `_failure_status` (clock, then SELECT) names the status or the call loops.
//! - 0.2.0 acquire: probe, then read the clock; decide; `_take`: UPDATE .. WHERE free or
//!   `expires_at <= clock_timestamp()` when the probe saw a row, else INSERT .. ON CONFLICT
//!   DO NOTHING; the statement reads the clock itself, after any lock wait. A blocking
//!   acquire runs the attempt in a subtransaction and rolls a lost one back; a non-blocking
//!   one keeps the lock a lost re-check took until its transaction ends.
//! - 0.2.0 renew and release: one UPDATE that reads the clock itself (after any lock wait);
//!   a lost re-check keeps the lock until the transaction ends; `_failure_status` as above
//!   (SELECT, then clock).
//! - inspect: 0.1.0 reads the clock, then SELECTs; 0.2.0 does both in one statement.
//!
//! An UPDATE waits only for a row its snapshot version matches, and an INSERT .. ON CONFLICT
//! DO NOTHING only for another transaction's uncommitted write; after a wait the statement
//! re-checks the latest committed version, and an UPDATE that then fails keeps the row lock
//! (PostgreSQL locks the latest version before re-checking it) until its (sub)transaction
//! ends. A timeout (57014) aborts the call's transaction at the error. A waiter may be
//! overtaken by a session that takes the freed lock first (a superset of PostgreSQL's
//! lock queue).
//!
//! Time ([`Timing`]): with [`Timing::InstantSteps`] a running call's steps take no time: the
//! clock ticks only while every session is idle, idle in a transaction, blocked on the row
//! lock or asleep. Statements take microseconds and leases milliseconds to seconds, so only
//! waits stretch the gap between a clock read and the write that uses it.
//! [`Timing::SlowSteps`] lets the clock tick between any two steps. An autocommit call
//! commits in its last step.

use crate::invariant::Invariant;
use stateright::{Checker, Expectation, HasDiscoveries, Model, Property};
use std::collections::{BTreeSet, HashSet};
use std::fmt;
use std::time::{Duration, Instant};

/// Most sessions a model can have.
pub const MAX_SESSIONS: usize = 3;
/// Largest epoch bound a model can have.
pub const MAX_EPOCH: u8 = 5;
/// Most calls an explicit transaction can run.
pub const MAX_TXN_CALLS: usize = 2;

/// Name of the liveness-shaped property: a blocking acquire's wait never stalls a renew.
pub const NO_RENEW_STALLED_BY_SLEEPER: &str =
    "waiters never stall a renew: no renew waits for the row lock of a sleeping acquire";

/// The step order modelled.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Variant {
    /// pg_lease 0.1.0 (`extension/released/pg_lease--0.1.0.sql`): the clock is read at the top of
    /// each attempt, before the probe and before any lock wait.
    V0_1_0,
    /// pg_lease 0.2.0 (`extension/pg_lease--0.1.0--0.2.0.sql`): writes read the clock after
    /// any lock wait, reads after their snapshot.
    V0_2_0,
    /// 0.2.0 without the blocking acquire's subtransaction: a lost attempt keeps its row lock
    /// across the sleep (the harness's SQL mutant `lost_race_keeps_row_lock`).
    V0_2_0LostRaceKeepsLock,
}

impl Variant {
    /// Every variant.
    pub const ALL: [Variant; 3] = [
        Variant::V0_1_0,
        Variant::V0_2_0,
        Variant::V0_2_0LostRaceKeepsLock,
    ];

    /// The variant's name, as `leasecheck model --algo` takes it.
    pub fn name(self) -> &'static str {
        match self {
            Variant::V0_1_0 => "0.1.0",
            Variant::V0_2_0 => "0.2.0",
            Variant::V0_2_0LostRaceKeepsLock => "0.2.0-lost-race-keeps-lock",
        }
    }

    /// The variant named `name`.
    pub fn from_name(name: &str) -> Option<Variant> {
        Variant::ALL.into_iter().find(|v| v.name() == name)
    }

    /// 0.1.0 reads `v_now` once per attempt, before it probes and writes.
    fn clock_read_first(self) -> bool {
        self == Variant::V0_1_0
    }

    /// Whether a write attempt of `call` that waited and then failed its re-check keeps the
    /// row lock until its transaction ends (else a subtransaction rollback drops it).
    fn keeps_lost_lock(self, call: CallKind) -> bool {
        match self {
            Variant::V0_1_0 => false,
            Variant::V0_2_0 => call != CallKind::Acquire { blocking: true },
            Variant::V0_2_0LostRaceKeepsLock => true,
        }
    }
}

impl fmt::Display for Variant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// When the clock may tick.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Timing {
    /// Only while no session is running a step: a call's steps take no time, waits do.
    InstantSteps,
    /// Between any two steps.
    SlowSteps,
}

/// What the algorithm model explores.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct AlgoConfig {
    pub variant: Variant,
    /// sessions (each one owner), 1 to [`MAX_SESSIONS`]
    pub sessions: u8,
    /// the clock stops at this tick
    pub max_time: u8,
    /// states with a larger epoch are outside the explored boundary (1 to [`MAX_EPOCH`])
    pub max_epoch: u8,
    /// lease TTL (ticks) of every acquire and renew
    pub ttl: u8,
    /// wait bound (ticks) of blocking acquires; 0: none
    pub wait: u8,
    /// calls each session makes
    pub calls: u8,
    /// calls an explicit transaction may run (0: autocommit only), up to [`MAX_TXN_CALLS`];
    /// explicit transactions run non-blocking acquires, renews and releases
    pub txn_calls: u8,
    /// inspect calls (autocommit)
    pub inspects: bool,
    pub timing: Timing,
}

impl Default for AlgoConfig {
    /// pg_lease 0.2.0; two sessions, three calls each, transactions of up to two calls, a
    /// lease of two ticks, a wait of one, the clock up to two (a lease can lapse), instant
    /// steps. Checked exhaustively by `cargo test`.
    fn default() -> Self {
        AlgoConfig {
            variant: Variant::V0_2_0,
            sessions: 2,
            max_time: 2,
            max_epoch: 3,
            ttl: 2,
            wait: 1,
            calls: 3,
            txn_calls: 2,
            inspects: true,
            timing: Timing::InstantSteps,
        }
    }
}

/// An unusable [`AlgoConfig`].
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum AlgoConfigError {
    #[error("sessions must be 1 to {MAX_SESSIONS}, got {0}")]
    Sessions(u8),
    #[error("max_epoch must be 1 to {MAX_EPOCH}, got {0}")]
    MaxEpoch(u8),
    #[error("txn_calls must be 0 to {MAX_TXN_CALLS}, got {0}")]
    TxnCalls(u8),
    #[error("ttl must be 1 or more, got 0")]
    Ttl,
    #[error("max_time + ttl + wait must stay below 256")]
    TimeRange,
}

impl AlgoConfig {
    /// The default configuration with `variant`.
    pub fn of(variant: Variant) -> AlgoConfig {
        AlgoConfig {
            variant,
            ..AlgoConfig::default()
        }
    }

    /// Checks the bounds.
    pub fn validate(&self) -> Result<(), AlgoConfigError> {
        if self.sessions == 0 || usize::from(self.sessions) > MAX_SESSIONS {
            return Err(AlgoConfigError::Sessions(self.sessions));
        }
        if !(1..=MAX_EPOCH).contains(&self.max_epoch) {
            return Err(AlgoConfigError::MaxEpoch(self.max_epoch));
        }
        if usize::from(self.txn_calls) > MAX_TXN_CALLS {
            return Err(AlgoConfigError::TxnCalls(self.txn_calls));
        }
        if self.ttl == 0 {
            return Err(AlgoConfigError::Ttl);
        }
        let latest = u16::from(self.max_time) + u16::from(self.ttl) + u16::from(self.wait);
        if latest > 255 {
            return Err(AlgoConfigError::TimeRange);
        }
        Ok(())
    }
}

/// A version of the key's row. FREE: no owner (`expires` unused).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Row {
    pub owner: Option<u8>,
    pub epoch: u8,
    pub expires: u8,
}

impl Row {
    fn live_at(self, t: u8) -> bool {
        self.owner.is_some() && self.expires > t
    }

    /// FREE or lapsed at `t`: what acquire's write may take.
    fn takeable_at(self, t: u8) -> bool {
        !self.live_at(t)
    }

    /// The lease `renew`/`release` of `owner`'s `epoch` may act on at `t`.
    fn renewable_by(self, owner: u8, epoch: u8, t: u8) -> bool {
        self.owner == Some(owner) && self.epoch == epoch && self.expires > t
    }
}

impl fmt::Display for Row {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.owner {
            Some(o) => write!(f, "HELD s{o} e{} until {}", self.epoch, self.expires),
            None => write!(f, "FREE e{}", self.epoch),
        }
    }
}

fn show(row: Option<Row>) -> String {
    row.map_or_else(|| "never-leased".to_string(), |r| r.to_string())
}

/// The row lock and what its holder wrote under it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Lock {
    pub holder: u8,
    /// the holder's uncommitted version (None: it only locked the row)
    pub pending: Option<Row>,
}

/// A call a session makes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CallKind {
    /// `blocking`: with the configured wait (else wait = 0)
    Acquire {
        blocking: bool,
    },
    Renew,
    Release,
    Inspect,
}

/// Where a call is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Pc {
    /// 0.1.0: `v_now := clock_timestamp()` at the top of an attempt
    ReadClock,
    /// acquire's plain SELECT and decision
    Probe,
    /// the writing statement
    Write,
    /// the writing statement, waiting for another transaction's row lock
    Blocked,
    /// renew/release: `_failure_status` after a write that matched no row
    FailureStatus,
    /// a blocking acquire's `pg_sleep`, entered at tick `since`
    Sleeping { since: u8 },
    /// inspect's SELECT
    Select,
}

/// A call in progress.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Call {
    pub kind: CallKind,
    pub pc: Pc,
    /// renew/release's epoch argument
    pub epoch: u8,
    /// the clock value the attempt decides with (0.1.0: `v_now`)
    pub clock: u8,
    /// a blocking acquire's `v_deadline`
    pub deadline: u8,
    /// 0.2.0 acquire: the probe saw a row (so `_take` UPDATEs, else INSERTs)
    pub found: bool,
    /// a blocking acquire has slept
    pub slept: bool,
}

/// A committed-on-commit effect of a call, in server-time instants.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Event {
    Grant { epoch: u8, start: u8, expires: u8 },
    Renew { epoch: u8, at: u8, expires: u8 },
    Release { epoch: u8, at: u8 },
}

/// One session (one owner, one call at a time).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Session {
    pub call: Option<Call>,
    /// `Some(n)`: inside an explicit transaction that has started `n` calls
    pub txn_calls: Option<u8>,
    pub calls_left: u8,
    /// the epoch of the session's last grant (0: none); renew/release pass it
    pub epoch: u8,
    /// the effects of the open transaction, in order
    pub events: [Option<Event>; MAX_TXN_CALLS],
}

/// A committed grant: valid from `start` until `end` (its release instant when `released`,
/// else its current expiry).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Grant {
    pub owner: u8,
    pub start: u8,
    pub end: u8,
    pub released: bool,
}

impl Grant {
    /// Both grants hold the key at some instant. A grant released at its own instant holds
    /// it at that instant only, which conflicts with a grant valid before and after it but
    /// not with one ending or starting there (they are ordered at that instant).
    fn overlaps(self, other: Grant) -> bool {
        self.start < other.end && other.start < self.end
    }

    fn validity(self) -> String {
        if self.start == self.end {
            format!("at {} only (released at once)", self.start)
        } else if self.released {
            format!(
                "in [{}, {}) (released at {})",
                self.start, self.end, self.end
            )
        } else {
            format!(
                "in [{}, {}) (expires at {})",
                self.start, self.end, self.end
            )
        }
    }
}

/// The last transition, when a `sometimes` property looks for it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Mark {
    #[default]
    None,
    GrantAfterWait,
    Takeover,
    LostRaceAfterWait,
    GrantAfterSleep,
    InspectLapsed,
    Timeout,
}

/// A state of the algorithm model.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct AlgoState {
    /// server clock
    pub now: u8,
    /// the committed row (None: never leased)
    pub committed: Option<Row>,
    pub lock: Option<Lock>,
    pub sessions: [Session; MAX_SESSIONS],
    /// the committed grants, by epoch
    pub grants: [Option<Grant>; MAX_EPOCH as usize + 1],
    /// an inspect reported the committed version lapsed
    pub lapse_seen: bool,
    /// inv07 broke: a renew/release succeeded on a lapsed grant
    pub lapse_broken: bool,
    pub mark: Mark,
}

impl AlgoState {
    /// The version `session` reads: its own uncommitted write, else the committed one.
    pub fn visible(&self, session: u8) -> Option<Row> {
        match self.lock {
            Some(Lock {
                holder,
                pending: Some(row),
            }) if holder == session => Some(row),
            _ => self.committed,
        }
    }

    fn locked_by_other(&self, session: u8) -> bool {
        self.lock.is_some_and(|l| l.holder != session)
    }

    fn written_by_other(&self, session: u8) -> bool {
        self.lock
            .is_some_and(|l| l.holder != session && l.pending.is_some())
    }

    fn session(&mut self, session: u8) -> &mut Session {
        &mut self.sessions[usize::from(session)]
    }

    fn call(&self, session: u8) -> Call {
        self.sessions[usize::from(session)]
            .call
            .expect("a stepping session has a call")
    }

    fn call_mut(&mut self, session: u8) -> &mut Call {
        self.session(session)
            .call
            .as_mut()
            .expect("a stepping session has a call")
    }

    /// Two committed grants valid at a common instant: `(earlier epoch, later epoch)`.
    pub fn overlapping_grants(&self) -> Option<(u8, u8)> {
        let epochs = || 0..=MAX_EPOCH;
        epochs().find_map(|e1| {
            let g1 = self.grants[usize::from(e1)]?;
            let overlapping =
                |e2: &u8| self.grants[usize::from(*e2)].is_some_and(|g2| g1.overlaps(g2));
            epochs()
                .skip_while(|e2| *e2 <= e1)
                .find(overlapping)
                .map(|e2| (e1, e2))
        })
    }

    /// The history already breaks inv01 or inv07 (and keeps breaking it).
    pub fn breaks_safety(&self) -> bool {
        self.lapse_broken || self.overlapping_grants().is_some()
    }

    /// A session whose renew waits for the lock of a session asleep in a blocking acquire:
    /// `(renewing session, sleeping session)`.
    pub fn renew_stalled_by_sleeper(&self) -> Option<(u8, u8)> {
        let holder = self.lock?.holder;
        let sleeping = self.sessions[usize::from(holder)].call.is_some_and(|c| {
            c.kind == CallKind::Acquire { blocking: true } && matches!(c.pc, Pc::Sleeping { .. })
        });
        let renewing = self.sessions.iter().position(|s| {
            s.call
                .is_some_and(|c| c.kind == CallKind::Renew && c.pc == Pc::Blocked)
        })?;
        sleeping.then_some((renewing as u8, holder))
    }

    fn some_renew_blocked(&self) -> bool {
        self.sessions.iter().any(|s| {
            s.call
                .is_some_and(|c| c.kind == CallKind::Renew && c.pc == Pc::Blocked)
        })
    }
}

/// A model action.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Action {
    /// `BEGIN` an explicit transaction
    Begin(u8),
    /// start a call (in the session's explicit transaction, else in autocommit)
    Start(u8, CallKind),
    /// the session's next step
    Step(u8),
    /// `COMMIT` the session's explicit transaction
    Commit(u8),
    /// the clock advances one tick
    Tick,
}

/// Receives a line per thing a transition does; [`Silent`] while checking, [`Transcript`]
/// when printing a path.
pub trait Narrate {
    fn say(&mut self, line: impl FnOnce() -> String);
}

/// Says nothing (and formats nothing).
pub struct Silent;

impl Narrate for Silent {
    fn say(&mut self, _: impl FnOnce() -> String) {}
}

/// Collects the lines.
#[derive(Default)]
pub struct Transcript(pub Vec<String>);

impl Narrate for Transcript {
    fn say(&mut self, line: impl FnOnce() -> String) {
        self.0.push(line());
    }
}

/// What a write attempt does with the version it sees.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Attempt {
    /// write this version (the event is what it means once committed)
    Write(Row, Event),
    /// no row matched
    Miss,
    /// another transaction's lock is in the way
    Wait,
}

/// What becomes of the row lock when a write matches no row.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum LockFate {
    NotTaken,
    Kept,
    RolledBack,
}

impl LockFate {
    fn words(self) -> &'static str {
        match self {
            LockFate::NotTaken => "",
            LockFate::Kept => "; keeps the row lock",
            LockFate::RolledBack => "; its subtransaction rolls back, dropping the row lock",
        }
    }
}

/// The first statement of a call after any clock read.
fn first_statement(kind: CallKind) -> Pc {
    match kind {
        CallKind::Acquire { .. } => Pc::Probe,
        CallKind::Renew | CallKind::Release => Pc::Write,
        CallKind::Inspect => Pc::Select,
    }
}

/// How a write statement looked at the row.
fn checks(waited: bool) -> &'static str {
    if waited {
        "after the wait, re-checks"
    } else {
        "finds"
    }
}

/// Outcome of renew/release when their write matched no row.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Status {
    NotOwner,
    Lapsed,
    EpochMismatch,
}

/// The stateright model of pg_lease's algorithm.
#[derive(Clone, Debug)]
pub struct AlgoModel {
    cfg: AlgoConfig,
}

impl AlgoModel {
    /// The model of `cfg`.
    pub fn new(cfg: AlgoConfig) -> Result<AlgoModel, AlgoConfigError> {
        cfg.validate()?;
        Ok(AlgoModel { cfg })
    }

    pub fn config(&self) -> &AlgoConfig {
        &self.cfg
    }

    fn sessions(&self) -> impl Iterator<Item = u8> {
        0..self.cfg.sessions
    }

    fn variant(&self) -> Variant {
        self.cfg.variant
    }

    /// The transition of `action` from `s`, telling `n` what happens.
    pub fn apply<N: Narrate>(&self, s: &AlgoState, action: Action, n: &mut N) -> AlgoState {
        let mut next = s.clone();
        next.mark = Mark::None;
        match action {
            Action::Begin(me) => {
                next.session(me).txn_calls = Some(0);
                n.say(|| format!("s{me}: BEGIN"));
            }
            Action::Start(me, kind) => self.start(&mut next, me, kind, n),
            Action::Step(me) => self.step(&mut next, me, n),
            Action::Commit(me) => self.commit(&mut next, me, n),
            Action::Tick => {
                next.now += 1;
                n.say(|| format!("tick: the clock reads {}", next.now));
            }
        }
        next
    }

    /// The path's transitions as readable lines, one or more per action.
    pub fn trace(&self, path: &[(AlgoState, Option<Action>)]) -> Vec<String> {
        let mut lines = Vec::new();
        for (i, (state, action)) in path.iter().enumerate() {
            let Some(action) = action else { continue };
            let mut t = Transcript::default();
            self.apply(state, *action, &mut t);
            let prefix = format!("{:>3}. t={}", i + 1, state.now);
            lines.extend(t.0.into_iter().map(|l| format!("{prefix} {l}")));
        }
        lines
    }

    /// The shortest path (in actions) to a discovery of property `name`: a state that breaks
    /// it (`always`) or shows it (`sometimes`); None if there is none. A true breadth-first
    /// search: stateright 0.31's `spawn_bfs` pops its queue last-in first-out, so its paths
    /// are not shortest.
    pub fn shortest_discovery(&self, name: &str) -> Option<Vec<(AlgoState, Option<Action>)>> {
        let property = self.properties().into_iter().find(|p| p.name == name)?;
        let sought = property.expectation == Expectation::Sometimes;
        let mut visited: Vec<(AlgoState, Option<(usize, Action)>)> = Vec::new();
        let mut seen = HashSet::new();
        for init in self.init_states() {
            seen.insert(init.clone());
            visited.push((init, None));
        }
        let mut actions = Vec::new();
        for at in 0.. {
            let state = &visited.get(at)?.0;
            if (property.condition)(self, state) == sought {
                return Some(path_to(&visited, at));
            }
            self.actions(state, &mut actions);
            let successors: Vec<(AlgoState, Option<(usize, Action)>)> = actions
                .drain(..)
                .filter_map(|a| Some((self.next_state(state, a)?, Some((at, a)))))
                .filter(|(next, _)| self.within_boundary(next) && seen.insert(next.clone()))
                .collect();
            visited.extend(successors);
        }
        None
    }

    /// A compact description of `s` (the configured sessions only).
    pub fn describe(&self, s: &AlgoState) -> String {
        let mut out = format!("t={}; committed {}", s.now, show(s.committed));
        if let Some(l) = s.lock {
            let pending = l.pending.map_or("lock only".to_string(), |r| r.to_string());
            out.push_str(&format!("; row lock s{} ({pending})", l.holder));
        }
        for me in self.sessions() {
            let sess = &s.sessions[usize::from(me)];
            let txn = sess.txn_calls.map_or("", |_| " in txn");
            match sess.call {
                Some(c) => out.push_str(&format!("; s{me}{txn} {:?} at {:?}", c.kind, c.pc)),
                None => out.push_str(&format!("; s{me}{txn} idle")),
            }
        }
        out.push_str("; grants");
        for (e, g) in s.grants.iter().enumerate() {
            if let Some(g) = g {
                let how = if g.released { "released" } else { "expiry" };
                out.push_str(&format!(
                    " e{e}: s{} [{}, {}) ({how})",
                    g.owner, g.start, g.end
                ));
            }
        }
        out
    }

    /// Why `s` breaks inv01, in words.
    pub fn explain_overlap(&self, s: &AlgoState) -> Option<String> {
        let (e1, e2) = s.overlapping_grants()?;
        let g1 = s.grants[usize::from(e1)]?;
        let g2 = s.grants[usize::from(e2)]?;
        let from = g1.start.max(g2.start);
        let to = g1.end.min(g2.end);
        let common = if from == to {
            format!("at {from}")
        } else {
            format!("in [{from}, {to})")
        };
        Some(format!(
            "inv01: grant e{e1} to s{} is valid {}, grant e{e2} to s{} {}: both hold the key {common}",
            g1.owner,
            g1.validity(),
            g2.owner,
            g2.validity()
        ))
    }

    fn start<N: Narrate>(&self, s: &mut AlgoState, me: u8, kind: CallKind, n: &mut N) {
        let now = s.now;
        let wait = if kind == (CallKind::Acquire { blocking: true }) {
            self.cfg.wait
        } else {
            0
        };
        let sess = s.session(me);
        sess.calls_left -= 1;
        if let Some(calls) = sess.txn_calls.as_mut() {
            *calls += 1;
        }
        sess.call = Some(Call {
            kind,
            pc: self.first_pc(kind),
            epoch: sess.epoch,
            clock: now,
            deadline: now + wait,
            found: false,
            slept: false,
        });
        let epoch = sess.epoch;
        let ttl = self.cfg.ttl;
        n.say(|| match kind {
            CallKind::Acquire { .. } => format!("s{me}: acquire(ttl {ttl}, wait {wait})"),
            CallKind::Renew => format!("s{me}: renew(e{epoch}, ttl {ttl})"),
            CallKind::Release => format!("s{me}: release(e{epoch})"),
            CallKind::Inspect => format!("s{me}: inspect"),
        });
    }

    /// Where a call starts, and where an attempt starts over.
    fn first_pc(&self, kind: CallKind) -> Pc {
        if self.variant().clock_read_first() {
            Pc::ReadClock
        } else {
            first_statement(kind)
        }
    }

    fn step<N: Narrate>(&self, s: &mut AlgoState, me: u8, n: &mut N) {
        match s.call(me).pc {
            Pc::ReadClock => self.read_clock(s, me, n),
            Pc::Probe => self.probe(s, me, n),
            Pc::Write => self.attempt(s, me, false, n),
            Pc::Blocked => self.attempt(s, me, true, n),
            Pc::FailureStatus => self.failure_status(s, me, n),
            Pc::Sleeping { .. } => {
                s.call_mut(me).pc = self.first_pc(s.call(me).kind);
                n.say(|| format!("s{me}: wakes up"));
            }
            Pc::Select => self.select(s, me, n),
        }
    }

    fn read_clock<N: Narrate>(&self, s: &mut AlgoState, me: u8, n: &mut N) {
        let now = s.now;
        let call = s.call_mut(me);
        call.clock = now;
        call.pc = first_statement(call.kind);
        n.say(|| format!("s{me}: reads the clock: v_now = {now}"));
    }

    /// The clock a probe or write decides with: 0.1.0's `v_now`, else the clock now (0.2.0
    /// reads it after the probe's snapshot and inside the writing statement).
    fn decision_clock(&self, s: &AlgoState, me: u8) -> u8 {
        if self.variant().clock_read_first() {
            s.call(me).clock
        } else {
            s.now
        }
    }

    fn probe<N: Narrate>(&self, s: &mut AlgoState, me: u8, n: &mut N) {
        let clock = self.decision_clock(s, me);
        let row = s.visible(me);
        let call = s.call_mut(me);
        call.clock = clock;
        call.found = row.is_some();
        n.say(|| format!("s{me}: probe sees {} (judged at {clock})", show(row)));
        match row {
            Some(r) if r.live_at(clock) && r.owner == Some(me) => {
                s.session(me).epoch = r.epoch;
                self.finish(s, me, n, || format!("idempotent: e{}", r.epoch));
            }
            Some(r) if r.live_at(clock) => self.held_by_other(s, me, n),
            _ => s.call_mut(me).pc = Pc::Write,
        }
    }

    /// A probe found the key live and another owner's: deny, time out or sleep.
    fn held_by_other<N: Narrate>(&self, s: &mut AlgoState, me: u8, n: &mut N) {
        let now = s.now;
        let call = s.call(me);
        if call.kind == (CallKind::Acquire { blocking: false }) {
            self.finish(s, me, n, || "denied".to_string());
        } else if call.clock >= call.deadline {
            s.mark = Mark::Timeout;
            self.abort(s, me);
            n.say(|| format!("s{me}: raises 57014 (wait exhausted); its transaction aborts"));
        } else {
            let call = s.call_mut(me);
            call.pc = Pc::Sleeping { since: now };
            call.slept = true;
            n.say(|| format!("s{me}: sleeps"));
        }
    }

    /// The write statement of the session's call, first try or after a lock wait.
    fn attempt<N: Narrate>(&self, s: &mut AlgoState, me: u8, waited: bool, n: &mut N) {
        let clock = self.decision_clock(s, me);
        match self.plan(s, me) {
            Attempt::Wait => {
                s.call_mut(me).pc = Pc::Blocked;
                let holder = s.lock.map_or(me, |l| l.holder);
                n.say(|| format!("s{me}: waits for s{holder}'s row lock"));
            }
            Attempt::Write(row, event) => self.write(s, me, waited, row, event, n),
            Attempt::Miss => self.missed(s, me, waited, clock, n),
        }
    }

    /// What the session's write statement does now: on its first evaluation it may have to
    /// wait; after a wait (the lock is free) it writes or matches no row.
    fn plan(&self, s: &AlgoState, me: u8) -> Attempt {
        let call = s.call(me);
        let clock = self.decision_clock(s, me);
        match call.kind {
            CallKind::Acquire { .. } if self.variant().clock_read_first() => {
                self.plan_upsert(s, me, clock)
            }
            CallKind::Acquire { .. } if call.found => self.plan_take_update(s, me, clock),
            CallKind::Acquire { .. } => self.plan_take_insert(s, me, clock),
            CallKind::Renew | CallKind::Release => self.plan_update(s, me, call, clock),
            CallKind::Inspect => unreachable!("inspect does not write"),
        }
    }

    /// 0.2.0's INSERT .. ON CONFLICT DO NOTHING (a key its probe found never leased).
    fn inserts(&self, call: Call) -> bool {
        matches!(call.kind, CallKind::Acquire { .. })
            && !self.variant().clock_read_first()
            && !call.found
    }

    /// Another transaction holds what the session's write statement waits for: any row
    /// lock, or for an INSERT .. DO NOTHING an uncommitted write. A waiting statement
    /// re-checks only once that is gone, whatever the clock says meanwhile.
    fn lock_in_way(&self, s: &AlgoState, me: u8, call: Call) -> bool {
        if self.inserts(call) {
            s.written_by_other(me)
        } else {
            s.locked_by_other(me)
        }
    }

    /// A grant of the key for `me` at `clock`, over `base` (None: a new row).
    fn grant(&self, me: u8, base: Option<Row>, clock: u8) -> Attempt {
        let epoch = base.map_or(1, |r| r.epoch + 1);
        let expires = clock + self.cfg.ttl;
        let row = Row {
            owner: Some(me),
            epoch,
            expires,
        };
        let event = Event::Grant {
            epoch,
            start: clock,
            expires,
        };
        Attempt::Write(row, event)
    }

    /// 0.1.0: INSERT .. ON CONFLICT DO UPDATE .. WHERE free or lapsed at `v_now`. The
    /// conflict path locks the row before its WHERE is evaluated, so it always waits.
    fn plan_upsert(&self, s: &AlgoState, me: u8, clock: u8) -> Attempt {
        if s.locked_by_other(me) {
            return Attempt::Wait;
        }
        match s.visible(me) {
            None => self.grant(me, None, clock),
            Some(r) if r.takeable_at(clock) => self.grant(me, Some(r), clock),
            Some(_) => Attempt::Miss,
        }
    }

    /// 0.2.0 `_take` of a row the probe saw: UPDATE .. WHERE free or lapsed at the
    /// statement's clock; it waits only for a row its snapshot version matches.
    fn plan_take_update(&self, s: &AlgoState, me: u8, clock: u8) -> Attempt {
        match s.visible(me) {
            Some(r) if r.takeable_at(clock) && s.locked_by_other(me) => Attempt::Wait,
            Some(r) if r.takeable_at(clock) => self.grant(me, Some(r), clock),
            _ => Attempt::Miss,
        }
    }

    /// 0.2.0 `_take` of a key the probe found never leased: INSERT .. ON CONFLICT DO
    /// NOTHING; it waits for another transaction's uncommitted write only.
    fn plan_take_insert(&self, s: &AlgoState, me: u8, clock: u8) -> Attempt {
        match s.visible(me) {
            Some(_) => Attempt::Miss,
            None if s.written_by_other(me) => Attempt::Wait,
            None => self.grant(me, None, clock),
        }
    }

    /// renew/release: UPDATE .. WHERE owner, epoch and live at `clock`; it waits only for a
    /// row its snapshot version matches.
    fn plan_update(&self, s: &AlgoState, me: u8, call: Call, clock: u8) -> Attempt {
        let Some(r) = s
            .visible(me)
            .filter(|r| r.renewable_by(me, call.epoch, clock))
        else {
            return Attempt::Miss;
        };
        if s.locked_by_other(me) {
            return Attempt::Wait;
        }
        if call.kind == CallKind::Renew {
            let expires = clock + self.cfg.ttl;
            let event = Event::Renew {
                epoch: r.epoch,
                at: clock,
                expires,
            };
            return Attempt::Write(Row { expires, ..r }, event);
        }
        let freed = Row {
            owner: None,
            epoch: r.epoch + 1,
            expires: 0,
        };
        let event = Event::Release {
            epoch: r.epoch,
            at: clock,
        };
        Attempt::Write(freed, event)
    }

    fn write<N: Narrate>(
        &self,
        s: &mut AlgoState,
        me: u8,
        waited: bool,
        row: Row,
        event: Event,
        n: &mut N,
    ) {
        let base = s.visible(me);
        let clock = self.decision_clock(s, me);
        check_revival(s, me, event);
        s.mark = self.write_mark(s.call(me), waited, base, event);
        stage(s, me, row, event);
        n.say(|| {
            let how = checks(waited);
            format!(
                "s{me}: {how} {} (judged at {clock}) and writes {row}",
                show(base)
            )
        });
        self.finish(s, me, n, || event_result(event));
    }

    fn write_mark(&self, call: Call, waited: bool, base: Option<Row>, event: Event) -> Mark {
        if !matches!(event, Event::Grant { .. }) {
            return Mark::None;
        }
        if waited {
            Mark::GrantAfterWait
        } else if call.slept {
            Mark::GrantAfterSleep
        } else if base.is_some_and(|r| r.owner.is_some()) {
            Mark::Takeover
        } else {
            Mark::None
        }
    }

    /// The write matched no row: after a lock wait it may keep the lock; acquire loops,
    /// renew/release ask `_failure_status`.
    fn missed<N: Narrate>(&self, s: &mut AlgoState, me: u8, waited: bool, clock: u8, n: &mut N) {
        let call = s.call(me);
        let fate = if waited {
            self.lost_lock_fate(call)
        } else {
            LockFate::NotTaken
        };
        if fate == LockFate::Kept && s.lock.is_none() {
            s.lock = Some(Lock {
                holder: me,
                pending: None,
            });
        }
        if waited {
            s.mark = Mark::LostRaceAfterWait;
        }
        let row = s.visible(me);
        n.say(|| {
            let how = checks(waited);
            let lock = fate.words();
            format!(
                "s{me}: {how} {} (judged at {clock}): no row matches{lock}",
                show(row)
            )
        });
        s.call_mut(me).pc = match call.kind {
            CallKind::Acquire { .. } => self.first_pc(call.kind),
            _ => Pc::FailureStatus,
        };
    }

    /// What becomes of the row lock when a write of `call` waited and then matched no row:
    /// an UPDATE (or ON CONFLICT DO UPDATE) locked the latest version before re-checking it,
    /// and keeps it unless a subtransaction rollback drops it; 0.2.0's INSERT .. ON CONFLICT
    /// DO NOTHING locks nothing.
    fn lost_lock_fate(&self, call: Call) -> LockFate {
        if self.inserts(call) {
            LockFate::NotTaken
        } else if self.variant().keeps_lost_lock(call.kind) {
            LockFate::Kept
        } else {
            LockFate::RolledBack
        }
    }

    /// `_failure_status`: the status by precedence at the clock now, or None (try again).
    fn failure_status<N: Narrate>(&self, s: &mut AlgoState, me: u8, n: &mut N) {
        let call = s.call(me);
        let now = s.now;
        let row = s.visible(me);
        let status = match row {
            Some(r) if r.owner == Some(me) && r.expires <= now => Some(Status::Lapsed),
            Some(r) if r.owner == Some(me) && r.epoch != call.epoch => Some(Status::EpochMismatch),
            Some(r) if r.owner == Some(me) => None,
            _ => Some(Status::NotOwner),
        };
        match status {
            Some(st) => {
                self.finish(s, me, n, || {
                    format!("{st:?} (sees {}, judged at {now})", show(row))
                });
            }
            None => {
                s.call_mut(me).pc = self.first_pc(call.kind);
                n.say(|| {
                    format!(
                        "s{me}: _failure_status sees {} (judged at {now}): retries",
                        show(row)
                    )
                });
            }
        }
    }

    fn select<N: Narrate>(&self, s: &mut AlgoState, me: u8, n: &mut N) {
        let clock = self.decision_clock(s, me);
        // inspect runs in autocommit only, so it reads the committed version.
        let row = s.committed;
        let lapsed = row.is_some_and(|r| r.owner.is_some() && !r.live_at(clock));
        if lapsed {
            s.lapse_seen = true;
            s.mark = Mark::InspectLapsed;
        }
        self.finish(s, me, n, || {
            let held = row.is_some_and(|r| r.live_at(clock));
            format!("held = {held} (sees {}, judged at {clock})", show(row))
        });
    }

    /// The call returns `result`; an autocommit call commits.
    fn finish<N: Narrate>(
        &self,
        s: &mut AlgoState,
        me: u8,
        n: &mut N,
        result: impl FnOnce() -> String,
    ) {
        s.session(me).call = None;
        n.say(|| format!("s{me}: returns {}", result()));
        if s.sessions[usize::from(me)].txn_calls.is_none() {
            self.commit(s, me, n);
        }
    }

    /// Ends the session's transaction: its version becomes the committed one, its effects
    /// enter the history, the row lock is released.
    fn commit<N: Narrate>(&self, s: &mut AlgoState, me: u8, n: &mut N) {
        if let Some(lock) = s.lock.filter(|l| l.holder == me) {
            if let Some(row) = lock.pending {
                s.committed = Some(row);
                s.lapse_seen = false;
            }
            s.lock = None;
        }
        let sess = s.session(me);
        let events = std::mem::take(&mut sess.events);
        sess.txn_calls = None;
        for event in events.into_iter().flatten() {
            record(s, me, event);
        }
        if events.iter().any(Option::is_some) {
            n.say(|| format!("s{me}: commits"));
        } else if self.cfg.txn_calls > 0 {
            n.say(|| format!("s{me}: commits (nothing written)"));
        }
    }

    /// Ends the session's call and transaction at an error: nothing it did stays.
    fn abort(&self, s: &mut AlgoState, me: u8) {
        if s.lock.is_some_and(|l| l.holder == me) {
            s.lock = None;
        }
        let sess = s.session(me);
        sess.call = None;
        sess.txn_calls = None;
        sess.events = Default::default();
    }

    fn can_step(&self, s: &AlgoState, me: u8, call: Call) -> bool {
        match call.pc {
            Pc::Blocked => !self.lock_in_way(s, me, call),
            Pc::Sleeping { since } => s.now > since,
            _ => true,
        }
    }

    /// A session in a call that is neither asleep nor waiting for a lock still held.
    fn running(&self, s: &AlgoState, me: u8) -> bool {
        s.sessions[usize::from(me)]
            .call
            .is_some_and(|c| !matches!(c.pc, Pc::Sleeping { .. }) && self.can_step(s, me, c))
    }

    fn can_tick(&self, s: &AlgoState) -> bool {
        s.now < self.cfg.max_time
            && (self.cfg.timing == Timing::SlowSteps
                || !self.sessions().any(|me| self.running(s, me)))
    }

    /// The calls a session not in a call may start.
    fn startable(&self, sess: &Session) -> impl Iterator<Item = CallKind> {
        let in_txn = sess.txn_calls.is_some();
        let txn_full = sess.txn_calls.is_some_and(|c| c >= self.cfg.txn_calls);
        let may_call = sess.calls_left > 0 && !txn_full;
        let holds_epoch = sess.epoch > 0;
        [
            (CallKind::Acquire { blocking: false }, true),
            (
                CallKind::Acquire { blocking: true },
                !in_txn && self.cfg.wait > 0,
            ),
            (CallKind::Renew, holds_epoch),
            (CallKind::Release, holds_epoch),
            (CallKind::Inspect, !in_txn && self.cfg.inspects),
        ]
        .into_iter()
        .filter(move |(_, allowed)| may_call && *allowed)
        .map(|(kind, _)| kind)
    }

    fn idle_actions(&self, s: &AlgoState, me: u8, actions: &mut Vec<Action>) {
        let sess = &s.sessions[usize::from(me)];
        actions.extend(self.startable(sess).map(|kind| Action::Start(me, kind)));
        match sess.txn_calls {
            None if self.cfg.txn_calls > 0 && sess.calls_left > 0 => {
                actions.push(Action::Begin(me));
            }
            Some(calls) if calls > 0 => actions.push(Action::Commit(me)),
            _ => {}
        }
    }
}

/// inv07: a renew or release never succeeds on the committed version an inspect reported
/// lapsed (a version of the session's own open transaction is another version).
fn check_revival(s: &mut AlgoState, me: u8, event: Event) {
    let own_version = s.lock.filter(|l| l.holder == me).and_then(|l| l.pending);
    let ends_grant = matches!(event, Event::Renew { .. } | Event::Release { .. });
    if ends_grant && own_version.is_none() {
        s.lapse_broken |= s.lapse_seen;
    }
}

/// The session's transaction writes `row` (uncommitted, under the row lock) meaning `event`.
fn stage(s: &mut AlgoState, me: u8, row: Row, event: Event) {
    s.lock = Some(Lock {
        holder: me,
        pending: Some(row),
    });
    let sess = s.session(me);
    let slot = sess.events.iter_mut().find(|e| e.is_none());
    *slot.expect("a transaction runs at most MAX_TXN_CALLS calls") = Some(event);
    if let Event::Grant { epoch, .. } = event {
        sess.epoch = epoch;
    }
}

/// The path from the initial state to `visited[at]`, each state with the action taken from it.
fn path_to(
    visited: &[(AlgoState, Option<(usize, Action)>)],
    at: usize,
) -> Vec<(AlgoState, Option<Action>)> {
    let mut path = Vec::new();
    let mut step = Some((at, None));
    while let Some((i, action)) = step {
        let (state, parent) = &visited[i];
        path.push((state.clone(), action));
        step = parent.map(|(p, a)| (p, Some(a)));
    }
    path.reverse();
    path
}

/// A committed event enters the history; a renew or release at or after its grant's end
/// breaks inv07.
fn record(s: &mut AlgoState, owner: u8, event: Event) {
    match event {
        Event::Grant {
            epoch,
            start,
            expires,
        } => {
            // A grant past the array is past max_epoch too: its state is outside the boundary.
            if let Some(slot) = s.grants.get_mut(usize::from(epoch)) {
                *slot = Some(Grant {
                    owner,
                    start,
                    end: expires,
                    released: false,
                });
            }
        }
        Event::Renew { epoch, at, expires } => end_grant(s, epoch, at, expires, false),
        Event::Release { epoch, at } => end_grant(s, epoch, at, at, true),
    }
}

fn end_grant(s: &mut AlgoState, epoch: u8, at: u8, end: u8, released: bool) {
    let Some(g) = s.grants[usize::from(epoch)].as_mut() else {
        return;
    };
    s.lapse_broken |= at >= g.end;
    g.end = end;
    g.released = released;
}

fn event_result(event: Event) -> String {
    match event {
        Event::Grant {
            epoch,
            start,
            expires,
        } => format!("granted e{epoch} until {expires} (effective {start})"),
        Event::Renew { at, expires, .. } => format!("ok until {expires} (effective {at})"),
        Event::Release { at, .. } => format!("ok (released at {at})"),
    }
}

impl Model for AlgoModel {
    type State = AlgoState;
    type Action = Action;

    fn init_states(&self) -> Vec<AlgoState> {
        let session = Session {
            calls_left: self.cfg.calls,
            ..Session::default()
        };
        vec![AlgoState {
            now: 0,
            committed: None,
            lock: None,
            sessions: [session; MAX_SESSIONS],
            grants: [None; MAX_EPOCH as usize + 1],
            lapse_seen: false,
            lapse_broken: false,
            mark: Mark::None,
        }]
    }

    fn actions(&self, s: &AlgoState, actions: &mut Vec<Action>) {
        // A broken history stays broken: stop there, so counterexamples end at the break.
        if s.breaks_safety() {
            return;
        }
        for me in self.sessions() {
            match s.sessions[usize::from(me)].call {
                Some(call) if self.can_step(s, me, call) => actions.push(Action::Step(me)),
                Some(_) => {}
                None => self.idle_actions(s, me, actions),
            }
        }
        if self.can_tick(s) {
            actions.push(Action::Tick);
        }
    }

    fn next_state(&self, s: &AlgoState, action: Action) -> Option<AlgoState> {
        Some(self.apply(s, action, &mut Silent))
    }

    fn within_boundary(&self, s: &AlgoState) -> bool {
        let max = self.cfg.max_epoch;
        let pending = s.lock.and_then(|l| l.pending);
        [s.committed, pending]
            .into_iter()
            .flatten()
            .all(|r| r.epoch <= max)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        properties(&self.cfg)
    }
}

/// The properties checked for `cfg`: inv01 and inv07 over instants and the stall property
/// as `always`, and `sometimes` reachability checks for the paths the variants differ on.
pub fn properties(cfg: &AlgoConfig) -> Vec<Property<AlgoModel>> {
    let mut p = vec![
        Property::always(
            Invariant::MutualExclusion.property_name(),
            |_, s: &AlgoState| s.overlapping_grants().is_none(),
        ),
        Property::always(
            Invariant::LapseIsFinal.property_name(),
            |_, s: &AlgoState| !s.lapse_broken,
        ),
        Property::always(NO_RENEW_STALLED_BY_SLEEPER, |_, s: &AlgoState| {
            s.renew_stalled_by_sleeper().is_none()
        }),
        Property::sometimes(
            "sometimes: a grant after a lock wait",
            |_, s: &AlgoState| s.mark == Mark::GrantAfterWait,
        ),
        Property::sometimes(
            "sometimes: a lapsed lease is taken over",
            |_, s: &AlgoState| s.mark == Mark::Takeover,
        ),
        Property::sometimes(
            "sometimes: a write loses its re-check after a lock wait",
            |_, s: &AlgoState| s.mark == Mark::LostRaceAfterWait,
        ),
        Property::sometimes(
            "sometimes: a renew waits for the row lock",
            |_, s: &AlgoState| s.some_renew_blocked(),
        ),
    ];
    if cfg.wait > 0 {
        p.push(Property::sometimes(
            "sometimes: a blocking acquire is granted after sleeping",
            |_, s: &AlgoState| s.mark == Mark::GrantAfterSleep,
        ));
        p.push(Property::sometimes(
            "sometimes: a blocking acquire times out",
            |_, s: &AlgoState| s.mark == Mark::Timeout,
        ));
    }
    if cfg.inspects {
        p.push(Property::sometimes(
            "sometimes: inspect reports a lapsed lease",
            |_, s: &AlgoState| s.mark == Mark::InspectLapsed,
        ));
    }
    p
}

/// How one property fared in an [`AlgoReport`].
#[derive(Clone, Debug)]
pub struct AlgoProperty {
    pub name: &'static str,
    /// `true` for `always`, `false` for `sometimes`
    pub always: bool,
    /// the checker's path to the discovery (a counterexample or an example), if any
    pub path: Option<Vec<(AlgoState, Option<Action>)>>,
    /// for a violated `always` property, a shortest counterexample
    pub shortest: Option<Vec<(AlgoState, Option<Action>)>>,
}

impl AlgoProperty {
    /// The property holds: no counterexample for `always`, an example for `sometimes`.
    pub fn holds(&self) -> bool {
        self.always != self.path.is_some()
    }
}

/// The result of checking an [`AlgoConfig`].
#[derive(Clone, Debug)]
pub struct AlgoReport {
    pub model: AlgoModel,
    /// states generated, repeats included
    pub states: usize,
    pub unique_states: usize,
    pub max_depth: usize,
    pub elapsed: Duration,
    /// every reachable state within the boundary was visited
    pub complete: bool,
    pub properties: Vec<AlgoProperty>,
}

impl AlgoReport {
    /// Every `always` property held and every `sometimes` one was reached, completely.
    pub fn ok(&self) -> bool {
        self.complete && self.properties.iter().all(AlgoProperty::holds)
    }

    /// Names of the `always` properties with a counterexample.
    pub fn violated(&self) -> Vec<&'static str> {
        let broken = self
            .properties
            .iter()
            .filter(|p| p.always && p.path.is_some());
        broken.map(|p| p.name).collect()
    }

    /// The result for property `name`.
    pub fn property(&self, name: &str) -> Option<&AlgoProperty> {
        self.properties.iter().find(|p| p.name == name)
    }

    /// A shortest counterexample to `name` as readable steps (empty when there is none).
    pub fn counterexample(&self, name: &str) -> Vec<String> {
        let path = self.property(name).and_then(|p| p.shortest.as_ref());
        path.map_or_else(Vec::new, |path| self.model.trace(path))
    }
}

impl fmt::Display for AlgoReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let c = self.model.config();
        writeln!(
            f,
            "algorithm model of pg_lease {}: sessions={} calls={} txn_calls={} max_time={} \
             max_epoch={} ttl={} wait={} inspects={} timing={:?}",
            c.variant,
            c.sessions,
            c.calls,
            c.txn_calls,
            c.max_time,
            c.max_epoch,
            c.ttl,
            c.wait,
            c.inspects,
            c.timing
        )?;
        let stopped = if self.complete {
            ""
        } else {
            " (stopped early)"
        };
        writeln!(
            f,
            "Bfs: {} states, {} unique, max depth {}, {:.2?}{stopped}",
            self.states, self.unique_states, self.max_depth, self.elapsed
        )?;
        for p in &self.properties {
            self.fmt_property(f, p)?;
        }
        Ok(())
    }
}

impl AlgoReport {
    fn fmt_property(&self, f: &mut fmt::Formatter<'_>, p: &AlgoProperty) -> fmt::Result {
        let verdict = match (p.always, p.path.is_some()) {
            (true, false) => "holds",
            (true, true) => "VIOLATED",
            (false, true) => "reached",
            (false, false) => "NOT REACHED",
        };
        writeln!(f, "  {verdict:<11} {}", p.name)?;
        let (Some(found), Some(path)) = (&p.path, &p.shortest) else {
            return Ok(());
        };
        writeln!(
            f,
            "    shortest counterexample ({} actions; the checker's path had {}):",
            path.len() - 1,
            found.len() - 1
        )?;
        for line in self.model.trace(path) {
            writeln!(f, "     {line}")?;
        }
        if let Some((last, _)) = path.last() {
            writeln!(f, "    last state: {}", self.model.describe(last))?;
            if let Some(why) = self.model.explain_overlap(last) {
                writeln!(f, "    {why}")?;
            }
        }
        Ok(())
    }
}

/// Checks `cfg` with one-thread BFS; stops once every property in `stop_when_found` has a
/// discovery (empty: explores everything).
pub fn run(
    cfg: &AlgoConfig,
    stop_when_found: &[&'static str],
) -> Result<AlgoReport, AlgoConfigError> {
    let model = AlgoModel::new(cfg.clone())?;
    let mut builder = model.clone().checker();
    let stop: BTreeSet<&'static str> = stop_when_found.iter().copied().collect();
    if !stop.is_empty() {
        builder = builder.finish_when(HasDiscoveries::AllOf(stop.clone()));
    }
    let start = Instant::now();
    let checker = builder.spawn_bfs().join();
    let elapsed = start.elapsed();
    let discoveries = checker.discoveries();
    let complete = stop.is_empty() || !stop.iter().all(|n| discoveries.contains_key(n));
    let properties = properties(cfg)
        .into_iter()
        .map(|p| {
            let always = p.expectation != Expectation::Sometimes;
            let path = discoveries.get(p.name).map(|path| path.clone().into_vec());
            let violated = always && path.is_some();
            AlgoProperty {
                name: p.name,
                always,
                path,
                shortest: violated.then(|| model.shortest_discovery(p.name)).flatten(),
            }
        })
        .collect();
    Ok(AlgoReport {
        model,
        states: checker.state_count(),
        unique_states: checker.unique_state_count(),
        max_depth: checker.max_depth(),
        elapsed,
        complete,
        properties,
    })
}
