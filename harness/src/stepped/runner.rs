//! The stepped runner: issues a plan's steps one at a time, each on its process's session,
//! without waiting for a step that blocks.
//!
//! Each process is a task that owns its recorder [`Session`] and runs the steps it is sent;
//! answers come back on one channel as they arrive. After issuing a step the runner waits
//! [`StepOptions::answer_wait`] for its answer; without one it asks the [`monitor`] whether
//! the session is waiting (blocked by another session of the plan, or asleep in a blocking
//! acquire's poll) and, if so, goes on with the next step.
//!
//! - A process's later steps wait for its pending step, as in isolationtester. When that
//!   step can only be freed by a later step (it waits for a session idle in its
//!   transaction), they are deferred instead: issued, in plan order, as soon as the process
//!   is free.
//! - No step is issued until every pending step is seen waiting again: a session an answer
//!   has just woken settles first, so the next step never races it for a lock.
//! - A step that is neither answered nor waiting for [`StepOptions::step_timeout`] is
//!   cancelled and reported as a hang ([`RunError::Hang`], an infrastructure failure naming
//!   the step and its SQL).
//!
//! The order of issue follows from the plan and from what the server answers, so a plan
//! replays the same way as long as the server decides the same (timing-bound facts, a
//! millisecond lease lapsing or a wait running out between two steps, may still differ).

mod inject;
mod session;
pub(crate) mod types;
mod watch;

pub use types::{RunError, StepLog, StepOptions, Waiting};

use super::control::ServerControl;
use super::expect::Unmet;
use super::monitor;
use super::plan::{call_sql, describe, Plan};
use super::stall::{Sighting, StepFacts};
use crate::progress::Progress;
use crate::recorder::Recorder;
use crate::workload::{Memory, Step};
use model::Op;
use session::{process_task, Action, Answer, Command, Done};
use std::collections::{BTreeSet, VecDeque};
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::mpsc;
use tokio::task::JoinSet;
use tokio_postgres::Client;

/// The step a process is waiting for.
#[derive(Clone, Copy)]
struct Pending {
    step: usize,
    /// When it was issued or last seen waiting.
    since_waiting: Instant,
}

/// One process as the runner sees it.
struct Slot {
    commands: mpsc::UnboundedSender<Command>,
    pid: Arc<AtomicI32>,
    pending: Option<Pending>,
    deferred: VecDeque<usize>,
    memory: Memory,
    in_txn: bool,
    /// Keys the open transaction has called.
    txn_keys: BTreeSet<String>,
}

/// What a run leaves for the judgement.
pub(super) struct Outputs {
    pub(super) logs: Vec<StepLog>,
    pub(super) facts: Vec<StepFacts>,
    pub(super) sightings: Vec<Sighting>,
    /// The calls that did not answer as their step expects.
    pub(super) unmet: Vec<Unmet>,
}

impl Outputs {
    /// The outputs of a run that never started.
    pub(super) fn none(plan: &Plan) -> Outputs {
        Outputs {
            logs: initial_logs(plan),
            facts: vec![StepFacts::default(); plan.steps.len()],
            sightings: Vec::new(),
            unmet: Vec::new(),
        }
    }
}

/// Until what [`Runner::wait_answers`] waits.
#[derive(Clone, Copy)]
enum Until {
    /// This step's answer.
    Answered(usize),
    /// Any answer.
    Any,
    /// The whole time.
    Elapsed,
}

/// After a process is found blocked: whether it got free or waits on a later step.
#[derive(PartialEq, Eq)]
enum Freed {
    Yes,
    Stuck,
}

/// How long a cancelled step may take to answer.
const CANCEL_GRACE: Duration = Duration::from_secs(5);
/// How many consecutive looks must find every pending step stuck before the plan is.
const STUCK_LOOKS: u32 = 3;

pub(super) struct Runner<'a> {
    plan: &'a Plan,
    recorder: Arc<Recorder>,
    options: StepOptions,
    /// The caller's monitor connection, until a restart ends it.
    monitor: &'a Client,
    /// The monitor connection made after the latest restart.
    fresh_monitor: Option<Client>,
    /// The caller's control of the server, for restart steps (none: a plan that restarts
    /// cannot run).
    control: Option<&'a dyn ServerControl>,
    slots: Vec<Slot>,
    answers: mpsc::UnboundedReceiver<Done>,
    tasks: JoinSet<()>,
    logs: Vec<StepLog>,
    facts: Vec<StepFacts>,
    sightings: Vec<Sighting>,
    unmet: Vec<Unmet>,
    next_issue: usize,
    started: Instant,
    progress: Arc<dyn Progress>,
    answered_ops: u64,
}

impl<'a> Runner<'a> {
    /// Connects one session per process of `plan` and starts their tasks.
    pub(super) async fn start(
        recorder: &Arc<Recorder>,
        plan: &'a Plan,
        options: StepOptions,
        monitor: &'a Client,
        control: Option<&'a dyn ServerControl>,
        progress: Arc<dyn Progress>,
    ) -> Result<Runner<'a>, RunError> {
        let (done, answers) = mpsc::unbounded_channel();
        let mut tasks = JoinSet::new();
        let mut slots = Vec::new();
        for slot in 0..plan.workload.processes as usize {
            let mut session = recorder.session();
            session.connect().await.map_err(RunError::Recorder)?;
            let pid = Arc::new(AtomicI32::new(session.backend_pid().unwrap_or(0)));
            let (commands, incoming) = mpsc::unbounded_channel();
            tasks.spawn(process_task(
                slot,
                Arc::clone(recorder),
                session,
                Arc::clone(&pid),
                incoming,
                done.clone(),
            ));
            slots.push(Slot {
                commands,
                pid,
                pending: None,
                deferred: VecDeque::new(),
                memory: Memory::default(),
                in_txn: false,
                txn_keys: BTreeSet::new(),
            });
        }
        Ok(Runner {
            recorder: Arc::clone(recorder),
            logs: initial_logs(plan),
            facts: vec![StepFacts::default(); plan.steps.len()],
            plan,
            options,
            monitor,
            fresh_monitor: None,
            control,
            slots,
            answers,
            tasks,
            sightings: Vec::new(),
            unmet: Vec::new(),
            next_issue: 0,
            started: Instant::now(),
            progress,
            answered_ops: 0,
        })
    }

    /// Runs every step of the plan and waits for every answer.
    pub(super) async fn run(&mut self) -> Result<(), RunError> {
        for step in 0..self.plan.steps.len() {
            self.take_ready()?;
            self.issue_deferred().await?;
            self.place(step).await?;
        }
        self.finish().await
    }

    /// Ends the run: after a failure, cancels what still runs; stops the process tasks
    /// (each ends after its current step; a call is bounded by the recorder's timeout).
    /// Gives the monitor connection made after a restart, if one was.
    pub(super) async fn close(self, failed: bool, bound: Duration) -> (Outputs, Option<Client>) {
        if failed {
            for slot in 0..self.slots.len() {
                if self.slots[slot].pending.is_some() {
                    // Best effort: the recorder's call timeout ends it otherwise.
                    let _ = monitor::cancel(self.monitor(), self.pid(slot)).await;
                }
            }
        }
        let Runner {
            slots,
            answers,
            mut tasks,
            logs,
            facts,
            sightings,
            unmet,
            fresh_monitor,
            ..
        } = self;
        drop(slots);
        drop(answers);
        let _ =
            tokio::time::timeout(bound, async { while tasks.join_next().await.is_some() {} }).await;
        tasks.abort_all();
        let outputs = Outputs {
            logs,
            facts,
            sightings,
            unmet,
        };
        (outputs, fresh_monitor)
    }

    fn slot_of_step(&self, step: usize) -> usize {
        self.plan.steps[step].process as usize
    }

    /// The monitor connection now (a restart replaces the caller's).
    fn monitor(&self) -> &Client {
        self.fresh_monitor.as_ref().unwrap_or(self.monitor)
    }

    fn pid(&self, slot: usize) -> i32 {
        self.slots[slot].pid.load(Ordering::Acquire)
    }

    fn is_pending(&self, step: usize) -> bool {
        let slot = self.slot_of_step(step);
        self.slots[slot].pending.map(|p| p.step) == Some(step)
    }

    /// Issues `step`, or defers it while its process waits on a later step. A signal is
    /// never deferred: it is made from beside its process, whatever that process waits for.
    async fn place(&mut self, step: usize) -> Result<(), RunError> {
        match self.plan.steps[step].action {
            Step::Signal(signal) => return self.signal(step, signal).await,
            Step::Restart(stop, down) => return self.restart(step, stop, down).await,
            _ => {}
        }
        let slot = self.slot_of_step(step);
        let blocked = self.slots[slot].pending.is_some();
        if !self.slots[slot].deferred.is_empty()
            || (blocked && self.await_slot(slot).await? == Freed::Stuck)
        {
            self.slots[slot].deferred.push_back(step);
            self.logs[step].deferred = true;
            return Ok(());
        }
        self.issue(step).await
    }

    /// Issues deferred steps whose processes are free, lowest step first.
    async fn issue_deferred(&mut self) -> Result<(), RunError> {
        loop {
            let next = self
                .slots
                .iter()
                .enumerate()
                .filter(|(_, s)| s.pending.is_none())
                .filter_map(|(i, s)| s.deferred.front().map(|&step| (step, i)))
                .min();
            let Some((step, slot)) = next else {
                return Ok(());
            };
            self.slots[slot].deferred.pop_front();
            self.issue(step).await?;
        }
    }

    /// Sends `step` to its process and waits until it answers or is seen waiting.
    async fn issue(&mut self, step: usize) -> Result<(), RunError> {
        self.quiesce().await?;
        let slot = self.slot_of_step(step);
        let action = self.action(step);
        let process = self.plan.steps[step].process;
        self.slots[slot]
            .commands
            .send(Command { step, action })
            .map_err(|_| RunError::SessionGone { process })?;
        self.slots[slot].pending = Some(Pending {
            step,
            since_waiting: Instant::now(),
        });
        self.logs[step].issued = Some(self.next_issue);
        self.next_issue += 1;
        self.settle(step).await
    }

    /// The action of `step` for its process now (a call's epoch from what it learnt), and
    /// the facts the stall judgement needs.
    fn action(&mut self, step: usize) -> Action {
        let slot = self.slot_of_step(step);
        let log = &mut self.logs[step];
        match &self.plan.steps[step].action {
            Step::Call(choice) => {
                let s = &mut self.slots[slot];
                let op = choice.op(&self.plan.workload, slot as u32, &s.memory);
                let key = op.key().cloned();
                self.facts[step] = StepFacts {
                    blocking_acquire: is_blocking_acquire(&op),
                    key_called_earlier_in_txn: s.in_txn
                        && key.as_ref().is_some_and(|k| s.txn_keys.contains(k)),
                    key: key.clone(),
                };
                if let (true, Some(k)) = (s.in_txn, key) {
                    s.txn_keys.insert(k);
                }
                log.what = model::checker::describe_call(&op);
                log.sql = Some(call_sql(&op));
                Action::Call(op)
            }
            Step::Begin(isolation) => {
                log.sql = Some(log.what.clone());
                Action::Begin(*isolation)
            }
            Step::Commit => {
                log.sql = Some("COMMIT".into());
                Action::Commit
            }
            Step::Rollback => {
                log.sql = Some("ROLLBACK".into());
                Action::Rollback
            }
            Step::Pause(idle) => {
                log.sql = Some(format!("-- no statement: the client idles {idle:?}"));
                Action::Pause(*idle)
            }
            Step::Lapse(k) => {
                let keys = self.plan.workload.key_names();
                let key = keys.get(*k).cloned().unwrap_or_default();
                log.sql = Some(crate::client::expire_sql("lease.leases", &key));
                Action::Lapse(key)
            }
            Step::Probe(probe) => {
                log.sql =
                    Some("SELECT pg_catalog.pg_current_xact_id_if_assigned() IS NOT NULL".into());
                Action::Probe(*probe)
            }
            Step::Set(setting) => {
                log.sql = Some(format!(
                    "SELECT pg_catalog.set_config('{}', '{}', false)",
                    setting.name, setting.value
                ));
                Action::Set(setting.clone())
            }
            // Made by the runner itself ([`Runner::signal`], [`Runner::restart`]), never
            // sent to the process.
            Step::Signal(_) | Step::Restart(..) => {
                unreachable!("a signal or restart step is never sent to its process")
            }
        }
    }

    /// Waits until every pending step is seen waiting again (or answers). A session an
    /// answer has just woken is still running: a step issued now would race it for the
    /// locks it is about to take (a waiter re-checking after the holder's COMMIT), and the
    /// plan would not replay.
    async fn quiesce(&mut self) -> Result<(), RunError> {
        loop {
            self.take_ready()?;
            let pending: Vec<usize> = (0..self.slots.len())
                .filter(|&s| self.slots[s].pending.is_some())
                .collect();
            if pending.is_empty() {
                return Ok(());
            }
            let snapshot = self.observe().await?;
            if pending
                .iter()
                .all(|&s| self.waiting(s, &snapshot).is_some())
            {
                return Ok(());
            }
            self.wait_answers(self.options.poll, Until::Any).await?;
        }
    }

    /// Waits for `step`'s answer until it comes or the monitor finds the step waiting.
    async fn settle(&mut self, step: usize) -> Result<(), RunError> {
        let slot = self.slot_of_step(step);
        let mut wait = self.options.answer_wait;
        loop {
            self.wait_answers(wait, Until::Answered(step)).await?;
            if !self.is_pending(step) {
                return Ok(());
            }
            let snapshot = self.observe().await?;
            if let Some(waiting) = self.waiting(slot, &snapshot) {
                self.logs[step].waited.get_or_insert(waiting);
                return Ok(());
            }
            wait = self.options.poll;
        }
    }

    /// Waits for the pending step of `slot` to answer, unless it waits on a session that
    /// only a later step can free.
    async fn await_slot(&mut self, slot: usize) -> Result<Freed, RunError> {
        while let Some(pending) = self.slots[slot].pending {
            self.wait_answers(self.options.poll, Until::Answered(pending.step))
                .await?;
            if self.slots[slot].pending.is_none() {
                break;
            }
            let snapshot = self.observe().await?;
            if self.stuck(slot, &snapshot, &mut BTreeSet::new()) {
                return Ok(Freed::Stuck);
            }
        }
        Ok(Freed::Yes)
    }

    /// Waits until every step is issued and answered.
    async fn finish(&mut self) -> Result<(), RunError> {
        let mut stuck_looks = 0;
        loop {
            self.take_ready()?;
            self.issue_deferred().await?;
            let pending: Vec<usize> = (0..self.slots.len())
                .filter(|&s| self.slots[s].pending.is_some())
                .collect();
            if pending.is_empty() {
                return Ok(());
            }
            if self.wait_answers(self.options.poll, Until::Any).await? {
                stuck_looks = 0;
                continue;
            }
            let snapshot = self.observe().await?;
            let all_stuck = pending
                .iter()
                .all(|&s| self.stuck(s, &snapshot, &mut BTreeSet::new()));
            stuck_looks = if all_stuck { stuck_looks + 1 } else { 0 };
            if stuck_looks >= STUCK_LOOKS {
                let steps = pending
                    .iter()
                    .filter_map(|&s| self.slots[s].pending.map(|p| p.step))
                    .collect();
                return Err(RunError::Stuck { steps });
            }
        }
    }

    /// Takes the answers that have arrived, without waiting.
    fn take_ready(&mut self) -> Result<(), RunError> {
        while let Ok(done) = self.answers.try_recv() {
            self.absorb(done)?;
        }
        Ok(())
    }

    /// Takes answers for up to `wait`, or until `until`; whether any answer came.
    async fn wait_answers(&mut self, wait: Duration, until: Until) -> Result<bool, RunError> {
        let deadline = tokio::time::Instant::now() + wait;
        let mut any = false;
        loop {
            let done = match until {
                Until::Answered(step) if !self.is_pending(step) => return Ok(any),
                Until::Any if any => return Ok(true),
                _ => tokio::time::timeout_at(deadline, self.answers.recv()).await,
            };
            match done {
                Ok(Some(done)) => {
                    self.absorb(done)?;
                    any = true;
                }
                // Every process task is gone (they hold the senders).
                Ok(None) => return Err(RunError::SessionsGone),
                Err(_elapsed) => return Ok(any),
            }
        }
    }

    /// Books an answer: the process is free, has learnt from it, and may have left its
    /// transaction.
    fn absorb(&mut self, done: Done) -> Result<(), RunError> {
        let s = &mut self.slots[done.slot];
        if s.pending.map(|p| p.step) == Some(done.step) {
            s.pending = None;
        }
        s.in_txn = done.in_txn;
        if !done.in_txn {
            s.txn_keys.clear();
        }
        let answer = done.answer.map_err(RunError::Recorder)?;
        let log = &mut self.logs[done.step];
        log.answer = Some(answer.text());
        match answer {
            Answer::Committed(ended) => self.unmet.extend(super::expect::compare_commit(
                self.plan,
                done.step,
                Some(ended),
            )),
            Answer::Skipped => self
                .unmet
                .extend(super::expect::compare_commit(self.plan, done.step, None)),
            _ => {}
        }
        if let Answer::Probed(assigned) = answer {
            self.unmet
                .extend(super::expect::compare_probe(self.plan, done.step, assigned));
        }
        if let Answer::Op(record) = answer {
            s.memory
                .learn(&record, &self.plan.workload.owner(done.slot as u32));
            log.op = Some(record.id);
            self.unmet
                .extend(super::expect::compare(self.plan, done.step, &record));
            self.answered_ops += 1;
            self.progress.recorded(self.answered_ops);
        }
        Ok(())
    }
}

/// A log line per step, before anything ran.
fn initial_logs(plan: &Plan) -> Vec<StepLog> {
    let keys = plan.workload.key_names();
    plan.steps
        .iter()
        .enumerate()
        .map(|(step, s)| StepLog {
            step,
            process: s.process,
            what: describe(&s.action, &keys),
            sql: None,
            issued: None,
            deferred: false,
            waited: None,
            answer: None,
            op: None,
        })
        .collect()
}

fn is_blocking_acquire(op: &Op<String, String>) -> bool {
    matches!(op, Op::Acquire { wait: Some(w), .. } if w.is_positive())
}
