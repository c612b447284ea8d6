//! What the runner learns from the monitor: how a session waits, whether a pending step
//! is stuck behind a later one, sightings of a sleeping waiter blocking a call, and hangs
//! (cancelled and reported).

use super::super::monitor::{self, Snapshot};
use super::super::stall::Sighting;
use super::{RunError, Runner, Until, Waiting, CANCEL_GRACE};
use std::collections::BTreeSet;
use std::time::{Duration, Instant};

impl Runner<'_> {
    /// Asks the monitor about the plan's sessions; confirms a new sighting of a sleeping
    /// waiter blocking a call (a second look [`StepOptions::confirm`] later) and cancels a
    /// step that has been neither answered nor waiting for too long.
    pub(super) async fn observe(&mut self) -> Result<Snapshot, RunError> {
        let mut snapshot = self.look().await?;
        if self.note_sightings(&snapshot) {
            self.wait_answers(self.options.confirm, Until::Elapsed)
                .await?;
            snapshot = self.look().await?;
            self.note_sightings(&snapshot);
        }
        self.check_hangs(&snapshot).await?;
        Ok(snapshot)
    }

    async fn look(&self) -> Result<Snapshot, RunError> {
        let pids: Vec<i32> = (0..self.slots.len())
            .map(|s| self.pid(s))
            .filter(|&p| p != 0)
            .collect();
        Ok(monitor::snapshot(self.monitor(), &pids).await?)
    }

    fn slot_of_pid(&self, pid: i32) -> Option<usize> {
        (0..self.slots.len()).find(|&s| pid != 0 && self.pid(s) == pid)
    }

    /// How `slot`'s session waits, if it does.
    pub(super) fn waiting(&self, slot: usize, snapshot: &Snapshot) -> Option<Waiting> {
        let backend = snapshot.backends.get(&self.pid(slot))?;
        if backend.sleeping() {
            return Some(Waiting::Sleeping);
        }
        if backend.awaiting_standby() {
            return Some(Waiting::Standby);
        }
        let by: Vec<u32> = backend
            .blocked_by
            .iter()
            .filter_map(|&pid| self.slot_of_pid(pid))
            .map(|s| s as u32)
            .collect();
        (!by.is_empty()).then_some(Waiting::BlockedBy(by))
    }

    /// Whether `slot`'s pending step waits only for sessions that no answer can free: each
    /// blocker is idle in its transaction with no step pending (only a later step frees
    /// it), or itself stuck. A cycle is not stuck: the server's deadlock detector ends it.
    pub(super) fn stuck(
        &self,
        slot: usize,
        snapshot: &Snapshot,
        seen: &mut BTreeSet<usize>,
    ) -> bool {
        if !seen.insert(slot) {
            return false;
        }
        let Some(backend) = snapshot.backends.get(&self.pid(slot)) else {
            return false;
        };
        let blockers: Vec<usize> = backend
            .blocked_by
            .iter()
            .filter_map(|&pid| self.slot_of_pid(pid))
            .collect();
        if backend.sleeping() || blockers.is_empty() || blockers.len() < backend.blocked_by.len() {
            return false;
        }
        blockers.iter().all(|&b| match self.slots[b].pending {
            None => snapshot
                .backends
                .get(&self.pid(b))
                .is_some_and(|s| s.state.starts_with("idle in transaction")),
            Some(_) => self.stuck(b, snapshot, seen),
        })
    }

    /// Records each pending step blocked by a session asleep in a pending step; whether
    /// a pair was seen for the first time.
    fn note_sightings(&mut self, snapshot: &Snapshot) -> bool {
        let at = self.started.elapsed();
        let mut new = false;
        for slot in 0..self.slots.len() {
            let Some(pending) = self.slots[slot].pending else {
                continue;
            };
            let Some(backend) = snapshot.backends.get(&self.pid(slot)) else {
                continue;
            };
            for &pid in &backend.blocked_by {
                let Some(blocker) = self.slot_of_pid(pid) else {
                    continue;
                };
                let asleep = snapshot.backends.get(&pid).is_some_and(|b| b.sleeping());
                let Some(sleeper) = self.slots[blocker].pending.filter(|_| asleep) else {
                    continue;
                };
                let sighting = Sighting {
                    blocked: pending.step,
                    blocker: sleeper.step,
                    at,
                };
                new |= !self
                    .sightings
                    .iter()
                    .any(|s| (s.blocked, s.blocker) == (sighting.blocked, sighting.blocker));
                self.sightings.push(sighting);
            }
        }
        new
    }

    /// Cancels the first pending step that has been neither answered nor waiting for the
    /// step timeout, and reports it as a hang.
    async fn check_hangs(&mut self, snapshot: &Snapshot) -> Result<(), RunError> {
        let now = Instant::now();
        for slot in 0..self.slots.len() {
            let waiting = self.waiting(slot, snapshot).is_some();
            let Some(pending) = self.slots[slot].pending.as_mut() else {
                continue;
            };
            if waiting {
                pending.since_waiting = now;
            } else if now.duration_since(pending.since_waiting) > self.options.step_timeout {
                let (step, after) = (pending.step, now.duration_since(pending.since_waiting));
                return Err(self.hang(slot, step, after).await);
            }
        }
        Ok(())
    }

    async fn hang(&mut self, slot: usize, step: usize, after: Duration) -> RunError {
        let seen = crate::liveness::still_executing(
            self.monitor(),
            self.pid(slot),
            self.options.step_timeout,
        )
        .await
        .map(|b| b.shown);
        if let Err(e) = monitor::cancel(self.monitor(), self.pid(slot)).await {
            return e.into();
        }
        if let Err(e) = self.wait_answers(CANCEL_GRACE, Until::Answered(step)).await {
            return e;
        }
        RunError::Hang {
            step,
            process: self.plan.steps[step].process,
            sql: self.logs[step].sql.clone().unwrap_or_default(),
            after,
            executing: seen,
        }
    }
}
