//! The model's state: the key's row versions, its lock, the sessions and their calls, and
//! the history of committed grants.

pub use super::config::CallKind;
use super::config::{MAX_EPOCH, MAX_SESSIONS, MAX_TXN_CALLS};
use std::fmt;

/// A version of the key's row. FREE: no owner (`expires` unused).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Row {
    pub owner: Option<u8>,
    pub epoch: u8,
    pub expires: u8,
}

impl Row {
    pub(super) fn live_at(self, t: u8) -> bool {
        self.owner.is_some() && self.expires > t
    }

    /// FREE or lapsed at `t`: what acquire's write may take.
    pub(super) fn takeable_at(self, t: u8) -> bool {
        !self.live_at(t)
    }

    /// The lease `renew`/`release` of `owner`'s `epoch` may act on at `t`.
    pub(super) fn renewable_by(self, owner: u8, epoch: u8, t: u8) -> bool {
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

pub(super) fn show(row: Option<Row>) -> String {
    row.map_or_else(|| "never-leased".to_string(), |r| r.to_string())
}

/// The row lock and what its holder wrote under it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Lock {
    pub holder: u8,
    /// the holder's uncommitted version (None: it only locked the row)
    pub pending: Option<Row>,
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
    /// renew/release: `_failure_status` after a write that matched no row (0.3.0: also
    /// first, before the write)
    FailureStatus,
    /// 0.3.0: a SELECT .. FOR NO KEY UPDATE that waited holds the row lock (in a
    /// subtransaction); the re-check at the clock follows
    Locked,
    /// 0.3.0's first grant, after its INSERT: read the clock and UPDATE the inserted row's
    /// `expires_at` with it
    DateInsert,
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
    pub(super) fn overlaps(self, other: Grant) -> bool {
        self.start < other.end && other.start < self.end
    }

    pub(super) fn validity(self) -> String {
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
    /// an INSERT that waited for another transaction's insert of the key inserted (that
    /// transaction rolled back)
    InsertAfterRolledBackInsert,
    /// a transaction that had inserted the key rolled back
    InsertRolledBack,
}

/// A grant written with an expiry at or before the clock of its write.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ExpiredGrant {
    pub owner: u8,
    pub epoch: u8,
    /// the clock value its expiry was computed from
    pub start: u8,
    pub expires: u8,
    /// the clock when it was written
    pub written_at: u8,
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
    /// inv11 broke: an acquire wrote a grant already expired
    pub expired_grant: Option<ExpiredGrant>,
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

    pub(super) fn locked_by_other(&self, session: u8) -> bool {
        self.lock.is_some_and(|l| l.holder != session)
    }

    pub(super) fn written_by_other(&self, session: u8) -> bool {
        self.lock
            .is_some_and(|l| l.holder != session && l.pending.is_some())
    }

    pub(super) fn session(&mut self, session: u8) -> &mut Session {
        &mut self.sessions[usize::from(session)]
    }

    pub(super) fn call(&self, session: u8) -> Call {
        self.sessions[usize::from(session)]
            .call
            .expect("a stepping session has a call")
    }

    pub(super) fn call_mut(&mut self, session: u8) -> &mut Call {
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

    /// The history already breaks inv01, inv07 or inv11 (and keeps breaking it).
    pub fn breaks_safety(&self) -> bool {
        self.lapse_broken || self.expired_grant.is_some() || self.overlapping_grants().is_some()
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

    pub(super) fn some_renew_blocked(&self) -> bool {
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
    /// `ROLLBACK` the session's explicit transaction: its writes are discarded
    Rollback(u8),
    /// the clock advances one tick
    Tick,
}
