//! The per-call step programs: starting a call, its clock reads, probe, sleep, failure
//! status and select, and the end of a call and of its transaction.

use super::config::Timing;
use super::model::{AlgoModel, Narrate};
use super::state::*;

/// The first statement of a call after any clock read.
pub(super) fn first_statement(kind: CallKind) -> Pc {
    match kind {
        CallKind::Acquire { .. } => Pc::Probe,
        CallKind::Renew | CallKind::Release => Pc::Write,
        CallKind::Inspect => Pc::Select,
    }
}

/// Outcome of renew/release when their write matched no row.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Status {
    NotOwner,
    Lapsed,
    EpochMismatch,
}

impl AlgoModel {
    pub(super) fn start<N: Narrate>(&self, s: &mut AlgoState, me: u8, kind: CallKind, n: &mut N) {
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
    pub(super) fn first_pc(&self, kind: CallKind) -> Pc {
        let renews_or_releases = matches!(kind, CallKind::Renew | CallKind::Release);
        if self.variant().clock_read_first() {
            Pc::ReadClock
        } else if renews_or_releases && self.variant().failure_status_first() {
            Pc::FailureStatus
        } else {
            first_statement(kind)
        }
    }

    pub(super) fn step<N: Narrate>(&self, s: &mut AlgoState, me: u8, n: &mut N) {
        match s.call(me).pc {
            Pc::ReadClock => self.read_clock(s, me, n),
            Pc::Probe => self.probe(s, me, n),
            Pc::Write => self.attempt(s, me, false, n),
            Pc::Blocked if self.variant().locks_before_recheck() && !self.inserts(s.call(me)) => {
                self.lock_after_wait(s, me, n);
            }
            Pc::Blocked | Pc::Locked => self.attempt(s, me, true, n),
            Pc::FailureStatus => self.failure_status(s, me, n),
            Pc::DateInsert => self.date_insert(s, me, n),
            Pc::Sleeping { .. } => {
                s.call_mut(me).pc = self.first_pc(s.call(me).kind);
                n.say(|| format!("s{me}: wakes up"));
            }
            Pc::Select => self.select(s, me, n),
        }
    }

    pub(super) fn read_clock<N: Narrate>(&self, s: &mut AlgoState, me: u8, n: &mut N) {
        let now = s.now;
        let call = s.call_mut(me);
        call.clock = now;
        call.pc = first_statement(call.kind);
        n.say(|| format!("s{me}: reads the clock: v_now = {now}"));
    }

    /// The clock a probe or write decides with: 0.1.0's `v_now`; the clock an INSERT's
    /// VALUES read when it started (before any wait); else the clock now (0.2.0 and 0.3.0
    /// read it after the probe's snapshot and, in an update, after any lock wait).
    pub(super) fn decision_clock(&self, s: &AlgoState, me: u8) -> u8 {
        if self.variant().clock_read_first() || self.inserts(s.call(me)) {
            s.call(me).clock
        } else {
            s.now
        }
    }

    pub(super) fn probe<N: Narrate>(&self, s: &mut AlgoState, me: u8, n: &mut N) {
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
    pub(super) fn held_by_other<N: Narrate>(&self, s: &mut AlgoState, me: u8, n: &mut N) {
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

    /// `_failure_status`: the status by precedence at the clock now, or None (try again).
    pub(super) fn failure_status<N: Narrate>(&self, s: &mut AlgoState, me: u8, n: &mut N) {
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
                // 0.3.0 asks first, and locks the row (`_lock_live`) when nothing failed.
                s.call_mut(me).pc = if self.variant().failure_status_first() {
                    Pc::Write
                } else {
                    self.first_pc(call.kind)
                };
                n.say(|| {
                    format!(
                        "s{me}: _failure_status sees {} (judged at {now}): tries the write",
                        show(row)
                    )
                });
            }
        }
    }

    pub(super) fn select<N: Narrate>(&self, s: &mut AlgoState, me: u8, n: &mut N) {
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
    pub(super) fn finish<N: Narrate>(
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
    pub(super) fn commit<N: Narrate>(&self, s: &mut AlgoState, me: u8, n: &mut N) {
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

    /// `ROLLBACK` of the session's explicit transaction: its versions are discarded, its row
    /// lock released, its effects never enter the history. A session waiting for its
    /// uncommitted insert then finds the key never leased again.
    pub(super) fn rollback<N: Narrate>(&self, s: &mut AlgoState, me: u8, n: &mut N) {
        let pending = s.lock.filter(|l| l.holder == me).and_then(|l| l.pending);
        if pending.is_some() && s.committed.is_none() {
            s.mark = Mark::InsertRolledBack;
        }
        self.abort(s, me);
        n.say(|| match pending {
            Some(row) => format!("s{me}: ROLLBACK (discards its uncommitted {row})"),
            None => format!("s{me}: ROLLBACK"),
        });
    }

    /// Ends the session's call and transaction at an error: nothing it did stays.
    pub(super) fn abort(&self, s: &mut AlgoState, me: u8) {
        if s.lock.is_some_and(|l| l.holder == me) {
            s.lock = None;
        }
        let sess = s.session(me);
        sess.call = None;
        sess.txn_calls = None;
        sess.events = Default::default();
    }

    pub(super) fn can_step(&self, s: &AlgoState, me: u8, call: Call) -> bool {
        match call.pc {
            Pc::Blocked => !self.lock_in_way(s, me, call),
            Pc::Sleeping { since } => s.now > since,
            _ => true,
        }
    }

    /// A session in a call that is neither asleep nor waiting for a lock still held.
    pub(super) fn running(&self, s: &AlgoState, me: u8) -> bool {
        s.sessions[usize::from(me)]
            .call
            .is_some_and(|c| !matches!(c.pc, Pc::Sleeping { .. }) && self.can_step(s, me, c))
    }

    pub(super) fn can_tick(&self, s: &AlgoState) -> bool {
        s.now < self.cfg.max_time
            && (self.cfg.timing == Timing::SlowSteps
                || !self.sessions().any(|me| self.running(s, me)))
    }

    /// The calls a session not in a call may start.
    pub(super) fn startable(&self, sess: &Session) -> impl Iterator<Item = CallKind> {
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

    pub(super) fn idle_actions(&self, s: &AlgoState, me: u8, actions: &mut Vec<Action>) {
        let sess = &s.sessions[usize::from(me)];
        actions.extend(self.startable(sess).map(|kind| Action::Start(me, kind)));
        match sess.txn_calls {
            None if self.cfg.txn_calls > 0 && sess.calls_left > 0 => {
                actions.push(Action::Begin(me));
            }
            Some(calls) if calls > 0 => {
                actions.push(Action::Commit(me));
                actions.push(Action::Rollback(me));
            }
            _ => {}
        }
    }
}

/// A committed event enters the history; a renew or release at or after its grant's end
/// breaks inv07.
pub(super) fn record(s: &mut AlgoState, owner: u8, event: Event) {
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

pub(super) fn end_grant(s: &mut AlgoState, epoch: u8, at: u8, end: u8, released: bool) {
    let Some(g) = s.grants[usize::from(epoch)].as_mut() else {
        return;
    };
    s.lapse_broken |= at >= g.end;
    g.end = end;
    g.released = released;
}

pub(super) fn event_result(event: Event) -> String {
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
