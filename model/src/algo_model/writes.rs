//! The writing statements: what an attempt plans with the version it sees, waiting for the
//! row lock, the write itself and a lost re-check.

use super::calls::event_result;
use super::model::{AlgoModel, Narrate};
use super::state::*;

/// What a write attempt does with the version it sees.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Attempt {
    /// write this version (the event is what it means once committed)
    Write(Row, Event),
    /// no row matched
    Miss,
    /// another transaction's lock is in the way
    Wait,
}

/// What becomes of the row lock when a write matches no row.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum LockFate {
    NotTaken,
    Kept,
    RolledBack,
}

impl LockFate {
    pub(super) fn words(self) -> &'static str {
        match self {
            LockFate::NotTaken => "",
            LockFate::Kept => "; keeps the row lock",
            LockFate::RolledBack => "; its subtransaction rolls back, dropping the row lock",
        }
    }
}

/// How a write statement looked at the row.
pub(super) fn checks(waited: bool) -> &'static str {
    if waited {
        "after the wait, re-checks"
    } else {
        "finds"
    }
}

impl AlgoModel {
    /// The write statement of the session's call, first try or after a lock wait.
    pub(super) fn attempt<N: Narrate>(&self, s: &mut AlgoState, me: u8, waited: bool, n: &mut N) {
        if !waited && self.inserts(s.call(me)) {
            // The INSERT's VALUES compute `expires_at` as the statement starts, before any
            // wait for a concurrent inserter.
            s.call_mut(me).clock = s.now;
        }
        let clock = self.decision_clock(s, me);
        match self.plan(s, me) {
            Attempt::Wait => {
                let inserts = self.inserts(s.call(me));
                s.call_mut(me).pc = Pc::Blocked;
                let holder = s.lock.map_or(me, |l| l.holder);
                n.say(|| {
                    if inserts {
                        format!(
                            "s{me}: INSERT (VALUES dated at {clock}) waits for s{holder}'s \
                             uncommitted insert of the key"
                        )
                    } else {
                        format!("s{me}: waits for s{holder}'s row lock")
                    }
                });
            }
            Attempt::Write(row, event) => self.write(s, me, waited, row, event, n),
            Attempt::Miss => self.missed(s, me, waited, clock, n),
        }
    }

    /// What the session's write statement does now: on its first evaluation it may have to
    /// wait; after a wait (the lock is free) it writes or matches no row.
    pub(super) fn plan(&self, s: &AlgoState, me: u8) -> Attempt {
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

    /// 0.2.0's and 0.3.0's INSERT .. ON CONFLICT DO NOTHING (a key its probe found never
    /// leased).
    pub(super) fn inserts(&self, call: Call) -> bool {
        matches!(call.kind, CallKind::Acquire { .. })
            && !self.variant().clock_read_first()
            && !call.found
    }

    /// Another transaction holds what the session's write statement waits for: any row
    /// lock, or for an INSERT .. DO NOTHING an uncommitted write. A waiting statement
    /// re-checks only once that is gone, whatever the clock says meanwhile.
    pub(super) fn lock_in_way(&self, s: &AlgoState, me: u8, call: Call) -> bool {
        if self.inserts(call) {
            s.written_by_other(me)
        } else {
            s.locked_by_other(me)
        }
    }

    /// A grant of the key for `me` at `clock`, over `base` (None: a new row).
    pub(super) fn grant(&self, me: u8, base: Option<Row>, clock: u8) -> Attempt {
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
    pub(super) fn plan_upsert(&self, s: &AlgoState, me: u8, clock: u8) -> Attempt {
        if s.locked_by_other(me) {
            return Attempt::Wait;
        }
        match s.visible(me) {
            None => self.grant(me, None, clock),
            Some(r) if r.takeable_at(clock) => self.grant(me, Some(r), clock),
            Some(_) => Attempt::Miss,
        }
    }

    /// `_take` of a row the probe saw. 0.2.0: UPDATE .. WHERE free or lapsed at the
    /// statement's clock; it waits only for a row its snapshot version matches. 0.3.0: the
    /// same decisions in other statements: SELECT .. FOR NO KEY UPDATE SKIP LOCKED of the
    /// row if free or lapsed (then the clock, then the UPDATE), else a plain SELECT: live
    /// means lost (nothing locked), else it waits for the lock in a subtransaction,
    /// re-checks at the clock after the wait and rolls back when the key was taken.
    pub(super) fn plan_take_update(&self, s: &AlgoState, me: u8, clock: u8) -> Attempt {
        match s.visible(me) {
            Some(r) if r.takeable_at(clock) && s.locked_by_other(me) => Attempt::Wait,
            Some(r) if r.takeable_at(clock) => self.grant(me, Some(r), clock),
            _ => Attempt::Miss,
        }
    }

    /// `_take` of a key the probe found never leased: INSERT .. ON CONFLICT DO NOTHING; it
    /// waits for another transaction's uncommitted write only, and inserts after all when
    /// that transaction rolled back. `clock` is the one its VALUES read as it started.
    pub(super) fn plan_take_insert(&self, s: &AlgoState, me: u8, clock: u8) -> Attempt {
        match s.visible(me) {
            Some(_) => Attempt::Miss,
            None if s.written_by_other(me) => Attempt::Wait,
            None => self.grant(me, None, clock),
        }
    }

    /// renew/release: UPDATE .. WHERE owner, epoch and live at `clock`; it waits only for a
    /// row its snapshot version matches. 0.3.0's `_lock_live` decides alike in other
    /// statements: SELECT .. FOR NO KEY UPDATE SKIP LOCKED of the live lease (then the
    /// clock, then the UPDATE); if not locked at once and `_failure_status` names no failure,
    /// it waits for the lock in a subtransaction, re-checks at the clock after the wait and
    /// rolls back when the lease changed.
    pub(super) fn plan_update(&self, s: &AlgoState, me: u8, call: Call, clock: u8) -> Attempt {
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

    pub(super) fn write<N: Narrate>(
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
        let call = s.call(me);
        s.mark = self.write_mark(call, waited, base, event);
        if self.inserts(call) && self.variant().dates_insert_after() {
            // 0.3.0: the inserted version still carries the VALUES' expiry; the next step
            // dates it.
            s.lock = Some(Lock {
                holder: me,
                pending: Some(row),
            });
            s.call_mut(me).pc = Pc::DateInsert;
            n.say(|| {
                let how = checks(waited);
                format!("s{me}: {how} never-leased and inserts {row} (VALUES dated at {clock})")
            });
            return;
        }
        check_revival(s, me, event);
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

    pub(super) fn write_mark(
        &self,
        call: Call,
        waited: bool,
        base: Option<Row>,
        event: Event,
    ) -> Mark {
        if !matches!(event, Event::Grant { .. }) {
            return Mark::None;
        }
        if waited && base.is_none() {
            Mark::InsertAfterRolledBackInsert
        } else if waited {
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
    pub(super) fn missed<N: Narrate>(
        &self,
        s: &mut AlgoState,
        me: u8,
        waited: bool,
        clock: u8,
        n: &mut N,
    ) {
        let call = s.call(me);
        let fate = if waited {
            self.lost_lock_fate(call)
        } else {
            LockFate::NotTaken
        };
        let lock_only = Some(Lock {
            holder: me,
            pending: None,
        });
        match fate {
            LockFate::Kept if s.lock.is_none() => s.lock = lock_only,
            // 0.3.0 took the lock in the subtransaction it now rolls back.
            LockFate::RolledBack if s.lock == lock_only => s.lock = None,
            _ => {}
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

    /// 0.3.0, once the lock it waited for is free: its SELECT .. FOR NO KEY UPDATE (in a
    /// subtransaction) locks the latest version; the re-check is the next step.
    pub(super) fn lock_after_wait<N: Narrate>(&self, s: &mut AlgoState, me: u8, n: &mut N) {
        s.lock = Some(Lock {
            holder: me,
            pending: None,
        });
        s.call_mut(me).pc = Pc::Locked;
        n.say(|| format!("s{me}: after the wait, locks the row (in a subtransaction)"));
    }

    /// 0.3.0's first grant after its INSERT: `v_now := clock_timestamp()`, then an UPDATE of
    /// its own inserted row (a second version; no wait: the row is its own) sets
    /// `expires_at = v_now + ttl`.
    pub(super) fn date_insert<N: Narrate>(&self, s: &mut AlgoState, me: u8, n: &mut N) {
        let now = s.now;
        let inserted = s
            .visible(me)
            .expect("a session dating its insert sees its inserted row");
        let expires = now + self.cfg.ttl;
        let row = Row {
            expires,
            ..inserted
        };
        let event = Event::Grant {
            epoch: row.epoch,
            start: now,
            expires,
        };
        stage(s, me, row, event);
        n.say(|| format!("s{me}: reads the clock: v_now = {now}; dates its row: {row}"));
        self.finish(s, me, n, || event_result(event));
    }

    /// What becomes of the row lock when a write of `call` waited and then matched no row:
    /// an UPDATE (or ON CONFLICT DO UPDATE) locked the latest version before re-checking it,
    /// and keeps it unless a subtransaction rollback drops it; 0.2.0's INSERT .. ON CONFLICT
    /// DO NOTHING locks nothing.
    pub(super) fn lost_lock_fate(&self, call: Call) -> LockFate {
        if self.inserts(call) {
            LockFate::NotTaken
        } else if self.variant().keeps_lost_lock(call.kind) {
            LockFate::Kept
        } else {
            LockFate::RolledBack
        }
    }
}

/// inv07: a renew or release never succeeds on the committed version an inspect reported
/// lapsed (a version of the session's own open transaction is another version).
pub(super) fn check_revival(s: &mut AlgoState, me: u8, event: Event) {
    let own_version = s.lock.filter(|l| l.holder == me).and_then(|l| l.pending);
    let ends_grant = matches!(event, Event::Renew { .. } | Event::Release { .. });
    if ends_grant && own_version.is_none() {
        s.lapse_broken |= s.lapse_seen;
    }
}

/// The session's transaction writes `row` (uncommitted, under the row lock) meaning `event`.
/// A grant whose expiry is not after the clock of its write breaks inv11 (its acquire
/// returns a lease that has already expired).
pub(super) fn stage(s: &mut AlgoState, me: u8, row: Row, event: Event) {
    if let Event::Grant {
        epoch,
        start,
        expires,
    } = event
    {
        if expires <= s.now {
            s.expired_grant = Some(ExpiredGrant {
                owner: me,
                epoch,
                start,
                expires,
                written_at: s.now,
            });
        }
    }
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
