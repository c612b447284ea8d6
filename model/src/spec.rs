//! The sequential spec of pg_lease: one key's lease (never-leased / FREE / HELD, epochs,
//! expiry) under server time, for every operation of the API and the injected `expire` fault.
//!
//! This module is the single source of the semantics (specs/SEMANTICS.md). It is used in two
//! ways:
//! - [`Spec::step`]: the operation takes effect at one known server instant; the result is
//!   deterministic. The stateright model uses this.
//! - [`Spec::possible`] and [`Spec::check`]: the operation took effect at some unknown instant
//!   of an observed [`Span`] `[t0, t1]`. Expiry is judged three-valued: a stored
//!   `expires_at <= t0` must look expired, `expires_at > t1` must look live, anything between
//!   may look either way and the observed outcome decides (the returned state is the one
//!   consistent with that choice). History checkers use this.
//!
//! A [`Spec`] carries a [`Mutation`]; [`Mutation::None`] is the correct semantics, the others
//! are the negative controls.

use crate::branch::Branch;
use crate::invariant::Invariant;
use crate::mutation::Mutation;
use crate::time::{Interval, Span, Ts, Window};
use std::fmt::Debug;
use std::hash::Hash;

mod classify;
mod input;
mod judge;

use classify::{branch_of, classify, failed_branch, invalid_branch};
pub use input::Violation;

/// A fencing epoch (`bigint`). A never-leased key has epoch 0; the first grant has epoch 1.
pub type Epoch = i64;

/// Longest key or owner accepted, in bytes (`octet_length`).
pub const MAX_NAME_BYTES: usize = 1024;

/// A key or owner value. Real histories use `String`; the stateright model uses small ids.
pub trait Name: Clone + Eq + Ord + Hash + Debug {
    /// The value's length in bytes as PostgreSQL `text` (`octet_length`).
    fn byte_len(&self) -> usize;
}

impl Name for String {
    fn byte_len(&self) -> usize {
        self.len()
    }
}

impl Name for &'static str {
    fn byte_len(&self) -> usize {
        self.len()
    }
}

/// Model ids: always valid one-byte names.
impl Name for u8 {
    fn byte_len(&self) -> usize {
        1
    }
}

/// The state of one key.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum KeyState<O> {
    /// No row: the key was never granted.
    NeverLeased,
    /// Unowned; `epoch` is the fencing watermark (every epoch `<=` it is stale).
    Free { epoch: Epoch },
    /// Granted to `owner` with `epoch` until `expires_at`, which lies in `expires`. The lease
    /// is *lapsed* at server time `t` when `expires_at <= t` (lazy expiry: the row stays).
    Held {
        owner: O,
        epoch: Epoch,
        expires: Window,
    },
}

impl<O> KeyState<O> {
    /// The key's epoch (0 when never leased).
    pub fn epoch(&self) -> Epoch {
        match self {
            KeyState::NeverLeased => 0,
            KeyState::Free { epoch } | KeyState::Held { epoch, .. } => *epoch,
        }
    }

    /// True when the key is held by a grant certainly unexpired at `t`.
    pub fn is_live_at(&self, t: Ts) -> bool {
        matches!(self, KeyState::Held { expires, .. } if expires.lo > t)
    }

    /// The holder and expiry window of a `Held` state, lapsed or not.
    pub fn holder(&self) -> Option<(&O, Epoch, Window)> {
        match self {
            KeyState::Held {
                owner,
                epoch,
                expires,
            } => Some((owner, *epoch, *expires)),
            _ => None,
        }
    }
}

/// The state of every key: the content of `lease.leases`. Keys without a row are
/// [`KeyState::NeverLeased`]. Rows are kept sorted by key in a vector: stores are small
/// (a history checker keeps one per partition, usually of one key) and cloned often.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Store<K: Ord, O> {
    rows: Vec<(K, KeyState<O>)>,
}

impl<K: Ord, O> Default for Store<K, O> {
    fn default() -> Self {
        Store { rows: Vec::new() }
    }
}

impl<K: Name, O: Name> Store<K, O> {
    /// The empty store: every key never leased.
    pub fn new() -> Self {
        Store::default()
    }

    fn find(&self, key: &K) -> Result<usize, usize> {
        self.rows.binary_search_by(|(k, _)| k.cmp(key))
    }

    /// The state of `key`.
    pub fn state(&self, key: &K) -> KeyState<O> {
        self.find(key)
            .map_or(KeyState::NeverLeased, |i| self.rows[i].1.clone())
    }

    /// The epoch of `key` (0 when never leased).
    pub fn epoch(&self, key: &K) -> Epoch {
        self.find(key).map_or(0, |i| self.rows[i].1.epoch())
    }

    /// Sets the state of `key` (`NeverLeased` removes its row).
    pub fn set(&mut self, key: K, state: KeyState<O>) {
        match (self.find(&key), state) {
            (Ok(i), KeyState::NeverLeased) => {
                self.rows.remove(i);
            }
            (Ok(i), st) => self.rows[i].1 = st,
            (Err(_), KeyState::NeverLeased) => {}
            (Err(i), st) => self.rows.insert(i, (key, st)),
        }
    }

    /// The keys that have a row, with their states, in key order.
    pub fn rows(&self) -> impl Iterator<Item = (&K, &KeyState<O>)> {
        self.rows.iter().map(|(k, st)| (k, st))
    }

    /// The rows on which `after` differs from `self`, with their states in `after`
    /// (`NeverLeased` for a row `after` lacks).
    pub fn diff(&self, after: &Store<K, O>) -> Vec<(K, KeyState<O>)> {
        let mut out = Vec::new();
        for (k, st) in &after.rows {
            if self.find(k).map_or(true, |i| self.rows[i].1 != *st) {
                out.push((k.clone(), st.clone()));
            }
        }
        for (k, _) in &self.rows {
            if after.find(k).is_err() {
                out.push((k.clone(), KeyState::NeverLeased));
            }
        }
        out
    }

    /// Applies writes as produced by [`Store::diff`].
    pub fn apply(&mut self, writes: &[(K, KeyState<O>)]) {
        for (k, st) in writes {
            self.set(k.clone(), st.clone());
        }
    }
}

/// One call of the API (or the injected fault), with its arguments as sent: `None` is SQL
/// `NULL`.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Op<K, O> {
    /// `lease.acquire(key, owner, ttl, wait)`; `wait` zero is the non-blocking acquire.
    Acquire {
        key: Option<K>,
        owner: Option<O>,
        ttl: Option<Interval>,
        wait: Option<Interval>,
    },
    /// `lease.renew(key, owner, epoch, ttl)`.
    Renew {
        key: Option<K>,
        owner: Option<O>,
        epoch: Option<Epoch>,
        ttl: Option<Interval>,
    },
    /// `lease.release(key, owner, epoch)`.
    Release {
        key: Option<K>,
        owner: Option<O>,
        epoch: Option<Epoch>,
    },
    /// `lease.inspect(key)`.
    Inspect { key: Option<K> },
    /// Injected fault: a held key's `expires_at` is set to the current server time.
    Expire { key: K },
}

impl<T> Op<T, T> {
    /// The same call with every key and owner mapped by `f` (e.g. to interned names).
    pub fn map_names<U>(self, f: &mut impl FnMut(T) -> U) -> Op<U, U> {
        match self {
            Op::Acquire {
                key,
                owner,
                ttl,
                wait,
            } => Op::Acquire {
                key: key.map(&mut *f),
                owner: owner.map(&mut *f),
                ttl,
                wait,
            },
            Op::Renew {
                key,
                owner,
                epoch,
                ttl,
            } => Op::Renew {
                key: key.map(&mut *f),
                owner: owner.map(&mut *f),
                epoch,
                ttl,
            },
            Op::Release { key, owner, epoch } => Op::Release {
                key: key.map(&mut *f),
                owner: owner.map(&mut *f),
                epoch,
            },
            Op::Inspect { key } => Op::Inspect {
                key: key.map(&mut *f),
            },
            Op::Expire { key } => Op::Expire { key: f(key) },
        }
    }
}

impl<K: Name, O: Name> Op<K, O> {
    /// Non-blocking acquire.
    pub fn acquire(key: K, owner: O, ttl: Interval) -> Self {
        Op::Acquire {
            key: Some(key),
            owner: Some(owner),
            ttl: Some(ttl),
            wait: Some(Interval::ZERO),
        }
    }

    /// Blocking acquire with a wait bound.
    pub fn acquire_wait(key: K, owner: O, ttl: Interval, wait: Interval) -> Self {
        Op::Acquire {
            key: Some(key),
            owner: Some(owner),
            ttl: Some(ttl),
            wait: Some(wait),
        }
    }

    pub fn renew(key: K, owner: O, epoch: Epoch, ttl: Interval) -> Self {
        Op::Renew {
            key: Some(key),
            owner: Some(owner),
            epoch: Some(epoch),
            ttl: Some(ttl),
        }
    }

    pub fn release(key: K, owner: O, epoch: Epoch) -> Self {
        Op::Release {
            key: Some(key),
            owner: Some(owner),
            epoch: Some(epoch),
        }
    }

    pub fn inspect(key: K) -> Self {
        Op::Inspect { key: Some(key) }
    }

    pub fn expire(key: K) -> Self {
        Op::Expire { key }
    }

    /// The key the operation names, if not `NULL`.
    pub fn key(&self) -> Option<&K> {
        match self {
            Op::Acquire { key, .. }
            | Op::Renew { key, .. }
            | Op::Release { key, .. }
            | Op::Inspect { key } => key.as_ref(),
            Op::Expire { key } => Some(key),
        }
    }

    /// The owner the operation names, if not `NULL` (inspect and expire name none).
    pub fn owner(&self) -> Option<&O> {
        match self {
            Op::Acquire { owner, .. } | Op::Renew { owner, .. } | Op::Release { owner, .. } => {
                owner.as_ref()
            }
            Op::Inspect { .. } | Op::Expire { .. } => None,
        }
    }
}

/// One row of `lease.inspect`.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Row<O, T = Ts> {
    pub held: bool,
    pub owner: Option<O>,
    pub epoch: Epoch,
    pub expires_at: Option<T>,
}

/// The observed result of one operation. `T` is how reported times are known: [`Ts`] for an
/// observation, [`Window`] for a prediction ([`Expected`]).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Outcome<O, T = Ts> {
    /// acquire: `(acquired = true, epoch, expires_at)`.
    Acquired { epoch: Epoch, expires_at: T },
    /// non-blocking acquire of a key held by another owner: `(false, NULL, NULL)`.
    Denied,
    /// blocking acquire whose wait bound passed: SQLSTATE 57014 with the wait-exhausted message.
    Timeout,
    /// renew: `('ok', expires_at)`.
    Renewed { expires_at: T },
    /// release: `'ok'`.
    Released,
    /// renew/release status `not_owner`.
    NotOwner,
    /// renew/release status `lapsed`.
    Lapsed,
    /// renew/release status `epoch_mismatch`.
    EpochMismatch,
    /// inspect: zero rows (`None`) or one row.
    Inspected(Option<Row<O, T>>),
    /// SQLSTATE 22023.
    InvalidInput,
    /// the injected `expire` fault was applied (the lease was live and lapses now).
    Injected,
    /// the injected `expire` fault found no live lease and changed nothing.
    NotInjected,
    /// the statement failed with an error that guarantees it had no effect (e.g. a user
    /// cancel, "canceling statement due to user request").
    Failed,
    /// the result was lost (connection closed, lost COMMIT): the operation may or may not
    /// have taken effect.
    Unknown,
}

/// A predicted outcome: reported times known to lie in a window.
pub type Expected<O> = Outcome<O, Window>;

/// The result of a check that found the observation impossible under the spec.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{invariant}: {detail}")]
pub struct Mismatch {
    /// The invariant the observation most directly contradicts (a best guess: black-box
    /// observations show the first visible symptom of a bug, not its cause).
    pub invariant: Invariant,
    pub detail: String,
}

/// One way an observed outcome is consistent with the spec ([`Spec::judge`]).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Judgement<K: Ord, O> {
    /// The store after the operation.
    pub store: Store<K, O>,
    /// The operation wrote (a grant, renew, release, or an injected lapse): it needs the
    /// key's row lock, and its effective instant orders it among the key's writes.
    pub writes: bool,
    /// The earliest server instant the operation can have taken effect at.
    pub at: Ts,
    /// The spec branch it took (`None`: an unknown outcome that had no effect, a failed
    /// call other than a cancelled wait, an injected lapse).
    pub branch: Option<Branch>,
}

/// The lease semantics, possibly mutated.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Spec {
    pub mutation: Mutation,
}

/// Renew/release check result.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Status {
    NotOwner,
    Lapsed,
    EpochMismatch,
    Ok,
}

/// How expiry of a `Held` state was judged for one branch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Judged {
    NotHeld,
    Live,
    Lapsed,
}

impl Judged {
    /// The judgement at a known instant `t`: live only when the stored expiry
    /// is certainly after `t`.
    fn at<O>(st: &KeyState<O>, t: Ts) -> Judged {
        match st {
            KeyState::Held { expires, .. } if expires.lo > t => Judged::Live,
            KeyState::Held { .. } => Judged::Lapsed,
            _ => Judged::NotHeld,
        }
    }
}

/// A validated per-key operation.
enum KeyOp<'a, O> {
    Acquire {
        owner: &'a O,
        ttl: Interval,
        wait: Interval,
    },
    Renew {
        owner: &'a O,
        epoch: Epoch,
        ttl: Interval,
    },
    Release {
        owner: &'a O,
        epoch: Epoch,
    },
    Inspect,
    Expire,
}

impl<O> KeyOp<'_, O> {
    fn is_blocking(&self) -> bool {
        matches!(self, KeyOp::Acquire { wait, .. } if wait.is_positive())
    }
}

/// What an operation does to its key, before time is filled in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Effect {
    /// new grant with this epoch (`expires_at = t + ttl`)
    Grant(Epoch),
    /// same-owner re-acquire of a live lease: same epoch and expiry, no write
    Idempotent,
    /// held by another owner: denied or timeout, no write
    Busy,
    /// a renew/release status other than ok: no write
    Status(Status),
    /// renew ok: `expires_at = t + ttl`, epoch as given
    Extend(Epoch),
    /// release ok: FREE with this epoch
    Free(Epoch),
    /// release ok that deletes the row (mutant)
    Forget,
    /// inspect: zero rows
    NoRow,
    /// inspect: held row
    HeldRow,
    /// inspect: not-held row
    FreeRow,
    /// expire fault on a held key: `expires_at = t`
    ExpireNow,
    /// expire fault on a key that is not held: nothing
    Nothing,
}

impl Effect {
    fn writes(self) -> bool {
        matches!(
            self,
            Effect::Grant(_) | Effect::Extend(_) | Effect::Free(_) | Effect::Forget
        )
    }
}

/// One way an operation can take effect: an expiry judgement, the interval of effective
/// times consistent with it, and the effect.
#[derive(Clone, Copy, Debug)]
struct Way {
    judged: Judged,
    teff: (Ts, Ts),
    effect: Effect,
}

impl Spec {
    /// The correct semantics.
    pub const CORRECT: Spec = Spec {
        mutation: Mutation::None,
    };

    pub fn new(mutation: Mutation) -> Spec {
        Spec { mutation }
    }

    fn is(&self, m: Mutation) -> bool {
        self.mutation == m
    }

    /// The effect of `op` on key state `st`, given how expiry was judged.
    fn decide<O: Name>(&self, st: &KeyState<O>, op: &KeyOp<'_, O>, judged: Judged) -> Effect {
        let lapsed = judged == Judged::Lapsed;
        match op {
            KeyOp::Acquire { owner, .. } => match st {
                KeyState::NeverLeased => Effect::Grant(1),
                KeyState::Free { epoch } => Effect::Grant(epoch.saturating_add(1)),
                KeyState::Held {
                    owner: holder,
                    epoch,
                    ..
                } => {
                    if lapsed {
                        if self.is(Mutation::TakeoverReusesEpoch) {
                            Effect::Grant(*epoch)
                        } else {
                            Effect::Grant(epoch.saturating_add(1))
                        }
                    } else if holder == *owner {
                        if self.is(Mutation::ReacquireBumpsEpoch) {
                            Effect::Grant(epoch.saturating_add(1))
                        } else {
                            Effect::Idempotent
                        }
                    } else if self.is(Mutation::AcquireIgnoresHolder) {
                        Effect::Grant(epoch.saturating_add(1))
                    } else {
                        Effect::Busy
                    }
                }
            },
            KeyOp::Renew { owner, epoch, .. } => {
                let ignore_expiry = self.is(Mutation::RenewIgnoresExpiry);
                match self.status(st, owner, *epoch, lapsed && !ignore_expiry) {
                    Status::Ok => {
                        if self.is(Mutation::RenewChangesEpoch) {
                            Effect::Extend(st.epoch().saturating_add(1))
                        } else {
                            Effect::Extend(st.epoch())
                        }
                    }
                    s => Effect::Status(s),
                }
            }
            KeyOp::Release { owner, epoch } => match self.status(st, owner, *epoch, lapsed) {
                Status::Ok => {
                    if self.is(Mutation::ReleaseDeletesRow) {
                        Effect::Forget
                    } else if self.is(Mutation::ReleaseKeepsEpoch) {
                        Effect::Free(st.epoch())
                    } else {
                        Effect::Free(st.epoch().saturating_add(1))
                    }
                }
                s => Effect::Status(s),
            },
            KeyOp::Inspect => match st {
                KeyState::NeverLeased => Effect::NoRow,
                KeyState::Free { .. } => Effect::FreeRow,
                KeyState::Held { .. } => {
                    if !lapsed || self.is(Mutation::InspectShowsLapsedAsHeld) {
                        Effect::HeldRow
                    } else {
                        Effect::FreeRow
                    }
                }
            },
            KeyOp::Expire => match (st, judged) {
                (KeyState::Held { .. }, Judged::Live) => Effect::ExpireNow,
                _ => Effect::Nothing,
            },
        }
    }

    /// Renew/release precedence: not_owner, then lapsed, then epoch_mismatch.
    fn status<O: Name>(&self, st: &KeyState<O>, owner: &O, given: Epoch, lapsed: bool) -> Status {
        let (is_owner, stored) = match st {
            KeyState::Held {
                owner: holder,
                epoch,
                ..
            } => (holder == owner, *epoch),
            other => (false, other.epoch()),
        };
        if self.is(Mutation::WrongPrecedence) && stored != given {
            return Status::EpochMismatch;
        }
        if !is_owner {
            Status::NotOwner
        } else if lapsed {
            Status::Lapsed
        } else if stored != given {
            Status::EpochMismatch
        } else {
            Status::Ok
        }
    }

    /// Every branch of `op` on `st` within `span`.
    /// Every branch of `op` on `st` within `span`, at instants from `not_before` on (a
    /// blocking acquire's wait still counts from the span's start).
    fn branches<O: Name>(
        &self,
        st: &KeyState<O>,
        op: &KeyOp<'_, O>,
        span: Span,
        not_before: Ts,
    ) -> Vec<Way> {
        let (t0, t1) = (span.t0(), span.t1());
        let from = t0.max(not_before);
        let mut judgements = Vec::with_capacity(2);
        match st {
            KeyState::Held { expires, .. } => {
                if expires.hi > from {
                    let hi = Ts(expires.hi.0 - 1);
                    judgements.push((Judged::Live, (from, t1.min(hi))));
                }
                if expires.lo <= t1 {
                    judgements.push((Judged::Lapsed, (from.max(expires.lo), t1)));
                }
            }
            _ => judgements.push((Judged::NotHeld, (from, t1))),
        }
        let mut out = Vec::with_capacity(judgements.len());
        for (judged, mut teff) in judgements {
            let effect = self.decide(st, op, judged);
            if effect == Effect::Busy {
                if let KeyOp::Acquire { wait, .. } = op {
                    if wait.is_positive() {
                        // A timeout is decided by the last poll, once the deadline
                        // (the call's start + wait, the start somewhere in the span) passed.
                        teff.0 = teff.0.max(earliest_deadline(wait, span));
                    }
                }
            }
            if teff.0 <= teff.1 {
                out.push(Way {
                    judged,
                    teff,
                    effect,
                });
            }
        }
        out
    }

    /// The predicted outcome and new key state of `branch`.
    fn realize<O: Name>(
        &self,
        st: &KeyState<O>,
        op: &KeyOp<'_, O>,
        branch: &Way,
    ) -> (Expected<O>, KeyState<O>) {
        let (a, b) = branch.teff;
        let narrowed = narrow(st, branch.judged, branch.teff);
        let ttl_window = |ttl: &Interval| ttl.image(a, b);
        match (branch.effect, op) {
            (Effect::Grant(epoch), KeyOp::Acquire { owner, ttl, .. }) => {
                let w = ttl_window(ttl);
                (
                    Outcome::Acquired {
                        epoch,
                        expires_at: w,
                    },
                    KeyState::Held {
                        owner: (*owner).clone(),
                        epoch,
                        expires: w,
                    },
                )
            }
            (Effect::Idempotent, _) => {
                let (epoch, w) = match &narrowed {
                    KeyState::Held { epoch, expires, .. } => (*epoch, *expires),
                    other => (other.epoch(), Window::exact(a)),
                };
                (
                    Outcome::Acquired {
                        epoch,
                        expires_at: w,
                    },
                    narrowed,
                )
            }
            (Effect::Busy, _) => {
                let out = if op.is_blocking() {
                    Outcome::Timeout
                } else {
                    Outcome::Denied
                };
                (out, narrowed)
            }
            (Effect::Status(s), _) => {
                let out = match s {
                    Status::NotOwner => Outcome::NotOwner,
                    Status::Lapsed => Outcome::Lapsed,
                    Status::EpochMismatch | Status::Ok => Outcome::EpochMismatch,
                };
                (out, narrowed)
            }
            (Effect::Extend(epoch), KeyOp::Renew { owner, ttl, .. }) => {
                let w = ttl_window(ttl);
                (
                    Outcome::Renewed { expires_at: w },
                    KeyState::Held {
                        owner: (*owner).clone(),
                        epoch,
                        expires: w,
                    },
                )
            }
            (Effect::Free(epoch), _) => (Outcome::Released, KeyState::Free { epoch }),
            (Effect::Forget, _) => (Outcome::Released, KeyState::NeverLeased),
            (Effect::NoRow, _) => (Outcome::Inspected(None), narrowed),
            (Effect::FreeRow, _) => (
                Outcome::Inspected(Some(Row {
                    held: false,
                    owner: None,
                    epoch: narrowed.epoch(),
                    expires_at: None,
                })),
                narrowed,
            ),
            (Effect::HeldRow, _) => {
                let row = match &narrowed {
                    KeyState::Held {
                        owner,
                        epoch,
                        expires,
                    } => Row {
                        held: true,
                        owner: Some(owner.clone()),
                        epoch: *epoch,
                        expires_at: Some(*expires),
                    },
                    other => Row {
                        held: false,
                        owner: None,
                        epoch: other.epoch(),
                        expires_at: None,
                    },
                };
                (Outcome::Inspected(Some(row)), narrowed)
            }
            (Effect::ExpireNow, _) => match st {
                KeyState::Held { owner, epoch, .. } => (
                    Outcome::Injected,
                    KeyState::Held {
                        owner: owner.clone(),
                        epoch: *epoch,
                        expires: Window::between(a, b),
                    },
                ),
                other => (Outcome::Injected, other.clone()),
            },
            // Grant/Extend only arise from acquire/renew; Nothing leaves the key alone.
            (Effect::Nothing, _) => (Outcome::NotInjected, narrowed),
            // Grant/Extend only arise from acquire/renew
            (Effect::Grant(_) | Effect::Extend(_), _) => (Outcome::Injected, st.clone()),
        }
    }

    /// Writes `new` as the state of `key`, as the (possibly mutated) implementation would.
    fn put<K: Name, O: Name>(
        &self,
        store: &mut Store<K, O>,
        key: &K,
        new: KeyState<O>,
        effect: Effect,
    ) {
        if effect.writes() && self.is(Mutation::WriteIgnoresKey) {
            let others: Vec<K> = store
                .rows
                .iter()
                .map(|(k, _)| k)
                .filter(|k| *k != key)
                .cloned()
                .collect();
            for k in others {
                store.set(k, new.clone());
            }
        }
        store.set(key.clone(), new);
    }

    /// `op` taking effect at server time `t`: its outcome and the new store. Deterministic.
    /// A blocking acquire is judged at its last attempt (a held key gives [`Outcome::Timeout`]).
    /// An expiry window that straddles `t` (never the case in the stateright model) is judged
    /// lapsed.
    pub fn step<K: Name, O: Name>(
        &self,
        store: &Store<K, O>,
        op: &Op<K, O>,
        t: Ts,
    ) -> (Outcome<O>, Store<K, O>) {
        let violations = op.violations();
        if !violations.is_empty() {
            return (
                Outcome::InvalidInput,
                self.invalid_effect(store, op, &violations, t),
            );
        }
        let Some((key, kop)) = key_op(op) else {
            return (Outcome::InvalidInput, store.clone());
        };
        let st = store.state(key);
        let judged = Judged::at(&st, t);
        let branch = Way {
            judged,
            teff: (t, t),
            effect: self.decide(&st, &kop, judged),
        };
        let (expected, new) = self.realize(&st, &kop, &branch);
        let mut next = store.clone();
        self.put(&mut next, key, new, branch.effect);
        (exact_outcome(expected), next)
    }

    /// The store after an invalid call (unchanged, except under
    /// [`Mutation::InvalidInputWrites`]).
    fn invalid_effect<K: Name, O: Name>(
        &self,
        store: &Store<K, O>,
        op: &Op<K, O>,
        violations: &[Violation],
        t: Ts,
    ) -> Store<K, O> {
        if self.is(Mutation::InvalidInputWrites) && violations.iter().all(|v| v.is_interval()) {
            if let Op::Acquire {
                key: Some(key),
                owner: Some(owner),
                ttl,
                ..
            } = op
            {
                let forced = Op::acquire(key.clone(), owner.clone(), ttl.unwrap_or_default());
                let inner = Spec::CORRECT;
                if let Some((k, kop)) = key_op(&forced) {
                    let st = store.state(k);
                    let judged = Judged::at(&st, t);
                    let branch = Way {
                        judged,
                        teff: (t, t),
                        effect: inner.decide(&st, &kop, judged),
                    };
                    let (_, new) = inner.realize(&st, &kop, &branch);
                    let mut next = store.clone();
                    next.set(k.clone(), new);
                    return next;
                }
            }
        }
        store.clone()
    }

    /// The committed store after a crash (unchanged: the table is WAL-logged).
    pub fn crash<K: Name, O: Name>(&self, store: &Store<K, O>) -> Store<K, O> {
        if self.is(Mutation::CrashLosesCommitted) {
            Store::new()
        } else {
            store.clone()
        }
    }

    /// The committed store when the server comes back after being down for `down`
    /// (`[went down, came back]`): unchanged, since server time kept running.
    pub fn restart<K: Name, O: Name>(&self, store: &Store<K, O>, down: Span) -> Store<K, O> {
        if !self.is(Mutation::DowntimeExtendsLease) {
            return store.clone();
        }
        let shift = down.t1().0.saturating_sub(down.t0().0);
        let mut next = store.clone();
        for (_, st) in next.rows.iter_mut() {
            if let KeyState::Held { expires, .. } = st {
                *expires = expires.shifted(shift);
            }
        }
        next
    }

    /// The committed store after a transaction with `writes` (from [`Store::diff`]) commits.
    pub fn commit<K: Name, O: Name>(
        &self,
        committed: &Store<K, O>,
        writes: &[(K, KeyState<O>)],
    ) -> Store<K, O> {
        let mut next = committed.clone();
        next.apply(writes);
        next
    }

    /// The committed store after a transaction with `writes` aborts (unchanged).
    pub fn abort<K: Name, O: Name>(
        &self,
        committed: &Store<K, O>,
        writes: &[(K, KeyState<O>)],
    ) -> Store<K, O> {
        if self.is(Mutation::AbortKeepsEffects) {
            self.commit(committed, writes)
        } else {
            committed.clone()
        }
    }
}

/// The key and validated per-key form of a valid op.
fn key_op<K: Name, O: Name>(op: &Op<K, O>) -> Option<(&K, KeyOp<'_, O>)> {
    match op {
        Op::Acquire {
            key: Some(key),
            owner: Some(owner),
            ttl: Some(ttl),
            wait: Some(wait),
        } => Some((
            key,
            KeyOp::Acquire {
                owner,
                ttl: *ttl,
                wait: *wait,
            },
        )),
        Op::Renew {
            key: Some(key),
            owner: Some(owner),
            epoch: Some(epoch),
            ttl: Some(ttl),
        } => Some((
            key,
            KeyOp::Renew {
                owner,
                epoch: *epoch,
                ttl: *ttl,
            },
        )),
        Op::Release {
            key: Some(key),
            owner: Some(owner),
            epoch: Some(epoch),
        } => Some((
            key,
            KeyOp::Release {
                owner,
                epoch: *epoch,
            },
        )),
        Op::Inspect { key: Some(key) } => Some((key, KeyOp::Inspect)),
        Op::Expire { key } => Some((key, KeyOp::Expire)),
        _ => None,
    }
}

/// `st` with its expiry window narrowed to what `judged` at an instant of `teff` implies.
fn narrow<O: Clone>(st: &KeyState<O>, judged: Judged, teff: (Ts, Ts)) -> KeyState<O> {
    match (st, judged) {
        (
            KeyState::Held {
                owner,
                epoch,
                expires,
            },
            Judged::Live | Judged::Lapsed,
        ) => {
            // (the branch's instants leave a value on each side: `None` cannot happen)
            let w = if judged == Judged::Live {
                // expires_at > t >= teff.0
                expires.at_or_after(teff.0.plus(1))
            } else {
                // expires_at <= t <= teff.1
                expires.at_or_before(teff.1)
            }
            .unwrap_or(*expires);
            KeyState::Held {
                owner: owner.clone(),
                epoch: *epoch,
                expires: w,
            }
        }
        _ => st.clone(),
    }
}

/// The earliest deadline a blocking acquire whose call started somewhere in `span` can
/// have: `start + wait`, least over the span's instants (adding months is not monotone).
fn earliest_deadline(wait: &Interval, span: Span) -> Ts {
    wait.image(span.t0(), span.t1()).lo
}

/// A predicted outcome as an observation (the low end of each window).
fn exact_outcome<O>(e: Expected<O>) -> Outcome<O> {
    match e {
        Outcome::Acquired { epoch, expires_at } => Outcome::Acquired {
            epoch,
            expires_at: expires_at.lo,
        },
        Outcome::Renewed { expires_at } => Outcome::Renewed {
            expires_at: expires_at.lo,
        },
        Outcome::Inspected(row) => Outcome::Inspected(row.map(|r| Row {
            held: r.held,
            owner: r.owner,
            epoch: r.epoch,
            expires_at: r.expires_at.map(|w| w.lo),
        })),
        Outcome::Denied => Outcome::Denied,
        Outcome::Timeout => Outcome::Timeout,
        Outcome::Released => Outcome::Released,
        Outcome::NotOwner => Outcome::NotOwner,
        Outcome::Lapsed => Outcome::Lapsed,
        Outcome::EpochMismatch => Outcome::EpochMismatch,
        Outcome::InvalidInput => Outcome::InvalidInput,
        Outcome::Injected => Outcome::Injected,
        Outcome::NotInjected => Outcome::NotInjected,
        Outcome::Failed => Outcome::Failed,
        Outcome::Unknown => Outcome::Unknown,
    }
}

#[cfg(test)]
mod tests;
