//! The steps the runner makes itself, beside the processes, whatever they wait for: a
//! signal to a process's backend and a restart of the server (through the caller's
//! [`ServerControl`]).

use super::{monitor, RunError, Runner, Until, CANCEL_GRACE};
use crate::workload::{Signal, Stop};
use model::NemesisEffect;
use std::time::Duration;

impl Runner<'_> {
    /// Signals the backend of `step`'s process once every pending step is seen waiting,
    /// recorded as a nemesis event named after the signal; then waits (at most
    /// [`CANCEL_GRACE`]) for the step the process had pending to answer, so that no later
    /// step races the signal (a COMMIT freeing the lock a cancelled call waits for).
    pub(super) async fn signal(&mut self, step: usize, signal: Signal) -> Result<(), RunError> {
        self.quiesce().await?;
        let slot = self.slot_of_step(step);
        let process = self.plan.steps[step].process;
        let pid = self.pid(slot);
        self.logs[step].sql = Some(format!("SELECT pg_{}_backend({pid})", signal.name()));
        self.logs[step].issued = Some(self.next_issue);
        self.next_issue += 1;
        let started = self.recorder.nemesis_start(signal.name());
        let hit = monitor::signal(self.monitor(), pid, signal).await;
        let detail = match &hit {
            Ok(true) => format!("{} backend {pid} of p{process}", signal.name()),
            Ok(false) => format!("no backend {pid} of p{process} to {}", signal.name()),
            Err(e) => format!("{} of backend {pid} failed: {e}", signal.name()),
        };
        self.recorder
            .nemesis_end(started, NemesisEffect::None, detail.clone())
            .map_err(RunError::Recorder)?;
        if !hit? {
            return Err(RunError::NotSignalled {
                step,
                process,
                signal: signal.name(),
                pid,
            });
        }
        self.logs[step].answer = Some(detail);
        if let Some(pending) = self.slots[slot].pending {
            self.wait_answers(CANCEL_GRACE, Until::Answered(pending.step))
                .await?;
        }
        Ok(())
    }

    /// Restarts the server through the caller's control once every pending step is seen
    /// waiting (the control records the restart), takes a new monitor connection, and
    /// waits (at most [`CANCEL_GRACE`]) for the calls the restart ended to answer.
    pub(super) async fn restart(
        &mut self,
        step: usize,
        stop: Stop,
        down: Duration,
    ) -> Result<(), RunError> {
        let Some(control) = self.control else {
            return Err(RunError::NoServerControl { step });
        };
        self.quiesce().await?;
        self.logs[step].sql = Some(format!(
            "-- no statement: a {} stop, {} ms down, a start",
            stop.name(),
            down.as_millis()
        ));
        self.logs[step].issued = Some(self.next_issue);
        self.next_issue += 1;
        let failed = |why| RunError::Restart { step, why };
        let done = control
            .restart(&self.recorder, stop, down)
            .await
            .map_err(failed)?;
        self.fresh_monitor = Some(control.monitor().await.map_err(failed)?);
        self.logs[step].answer = Some(done);
        for slot in 0..self.slots.len() {
            if let Some(pending) = self.slots[slot].pending {
                self.wait_answers(CANCEL_GRACE, Until::Answered(pending.step))
                    .await?;
            }
        }
        Ok(())
    }
}
