//! One process slot of a campaign: it draws its steps from its plan and makes them on its
//! recorder session until the campaign's quota is spent. After a call whose answer was
//! lost (its connection ended under it: a cut, a crash, a terminated backend), the
//! process that takes over the slot first inspects the keys whose state the loss left
//! unknown, as etcd's robustness traffic reads back what an indeterminate write touched:
//! what the inspect shows bounds when the lost call took effect, if it did.

use super::Length;
use crate::progress::Progress;
use crate::recorder::{RecorderError, Session, CLIENT_TIMEOUT};
use crate::workload::{Memory, ProcessPlan, Step, Workload};
use model::{Op, OpRecord, OpResult, TxnEnd};
use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;
use tokio::sync::watch;

/// Counts the calls of a campaign and tells the processes when to stop.
pub(super) struct Quota {
    pub(super) length: Length,
    pub(super) start: Instant,
    pub(super) issued: AtomicU64,
    pub(super) done: AtomicU64,
    pub(super) stop: AtomicBool,
}

impl Quota {
    /// Takes the right to make one more call.
    fn claim(&self) -> bool {
        if self.stop.load(Ordering::Relaxed) {
            return false;
        }
        match self.length {
            Length::Ops(n) => self.issued.fetch_add(1, Ordering::Relaxed) < n,
            Length::Time(t) => self.start.elapsed() < t,
        }
    }

    /// Whether calls may still be claimed (without claiming one): a transaction is begun
    /// only while they may.
    fn claim_peek(&self) -> bool {
        if self.stop.load(Ordering::Relaxed) {
            return false;
        }
        match self.length {
            Length::Ops(n) => self.issued.load(Ordering::Relaxed) < n,
            Length::Time(t) => self.start.elapsed() < t,
        }
    }
}

/// One process slot of a campaign: its session (a new process id after each retirement),
/// its plan and what it has learnt.
pub(super) struct Process {
    pub(super) slot: u32,
    pub(super) session: Session,
    pub(super) plan: ProcessPlan,
    pub(super) memory: Memory,
    pub(super) workload: Arc<Workload>,
    pub(super) quota: Arc<Quota>,
    pub(super) progress: Arc<dyn Progress>,
    /// `true` while the slot is paused by a fault injector.
    pub(super) pause: watch::Receiver<bool>,
    /// Whether the process that takes over after a lost call inspects its keys first.
    pub(super) inspect_after_loss: bool,
}

/// The keys a process's calls left in doubt, and those its open transaction touched.
#[derive(Default)]
struct Doubts {
    /// Keys whose state a lost call (or a lost COMMIT) left unknown: inspected next.
    unknown: BTreeSet<String>,
    /// Keys the open transaction called: in doubt all together if it is lost.
    in_txn: BTreeSet<String>,
}

impl Doubts {
    /// Notes `record`, a call made inside a transaction or not.
    fn note_call(&mut self, record: &OpRecord, in_txn: bool) {
        let Some(key) = record.call.key().cloned() else {
            return;
        };
        if in_txn {
            self.in_txn.insert(key.clone());
        }
        if lost(&record.result) {
            self.unknown.insert(key);
            self.unknown.append(&mut self.in_txn);
        }
    }

    /// Notes how the open transaction ended.
    fn note_end(&mut self, end: TxnEnd) {
        if end == TxnEnd::Unknown {
            self.unknown.append(&mut self.in_txn);
        }
        self.in_txn.clear();
    }
}

/// Whether a call's answer was lost with its connection. A call the client gave up on at
/// its timeout is not: the target hung, which is a finding of its own, and an inspect
/// after it would wait on the same hang.
fn lost(result: &OpResult) -> bool {
    matches!(result, OpResult::Unknown { reason } if !reason.starts_with(CLIENT_TIMEOUT))
}

impl Process {
    pub(super) async fn run(mut self) -> Result<(), RecorderError> {
        let result = self.steps().await;
        if result.is_err() {
            self.quota.stop.store(true, Ordering::Relaxed);
        }
        result
    }

    async fn steps(&mut self) -> Result<(), RecorderError> {
        let mut doubts = Doubts::default();
        loop {
            // A paused client makes no step (a closed switch, at the end of the run, is
            // never paused).
            let _ = self.pause.wait_for(|paused| !*paused).await;
            if self.inspect_after_loss && !doubts.unknown.is_empty() && self.session.txn().is_none()
            {
                let keys = std::mem::take(&mut doubts.unknown);
                if !self.inspect(keys).await? {
                    break;
                }
                continue;
            }
            match self.plan.next(&self.workload, self.session.txn().is_some()) {
                Step::Begin(isolation) => {
                    if !self.quota.claim_peek() {
                        break;
                    }
                    doubts.in_txn.clear();
                    self.session.begin(isolation).await?;
                }
                Step::Commit => doubts.note_end(self.session.commit().await?),
                Step::Rollback => doubts.note_end(self.session.rollback().await?),
                Step::Pause(idle) => tokio::time::sleep(idle).await,
                // A free-running process draws no lapse or signal (only written plans
                // make them; the failure crate injects them into campaigns).
                Step::Lapse(_)
                | Step::Signal(_)
                | Step::Restart(..)
                | Step::Probe(_)
                | Step::Set(_) => {}
                Step::Call(choice) => {
                    let in_txn = self.session.txn().is_some();
                    let op = choice.op(&self.workload, self.slot, &self.memory);
                    match self.call(&op).await? {
                        Some(record) => doubts.note_call(&record, in_txn),
                        None => break,
                    }
                }
            }
        }
        if self.session.txn().is_some() {
            match self.plan.last_end(&self.workload) {
                Step::Rollback => self.session.rollback().await?,
                _ => self.session.commit().await?,
            };
        }
        Ok(())
    }

    /// Makes `op` if the quota allows (else `None`), learns from its answer and counts it.
    async fn call(&mut self, op: &Op<String, String>) -> Result<Option<OpRecord>, RecorderError> {
        if !self.quota.claim() {
            return Ok(None);
        }
        let record = self.session.call(op).await?;
        self.memory.learn(&record, &self.workload.owner(self.slot));
        let done = self.quota.done.fetch_add(1, Ordering::Relaxed) + 1;
        self.progress.recorded(done);
        Ok(Some(record))
    }

    /// Inspects `keys` (outside any transaction); whether the quota allowed every one.
    async fn inspect(&mut self, keys: BTreeSet<String>) -> Result<bool, RecorderError> {
        for key in keys {
            if self.call(&Op::inspect(key)).await?.is_none() {
                return Ok(false);
            }
        }
        Ok(true)
    }
}
