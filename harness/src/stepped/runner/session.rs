//! The task of one process: owns its recorder [`Session`], runs the steps it is sent in
//! order and sends each answer back on the runner's channel.

use crate::recorder::{Begun, RecorderError, Session};
use model::{Isolation, Op, OpRecord, TxnEnd};
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;

/// What one process is asked to do.
pub(super) enum Action {
    Call(Op<String, String>),
    Begin(Isolation),
    Commit,
    Rollback,
    Pause(Duration),
}

pub(super) struct Command {
    pub(super) step: usize,
    pub(super) action: Action,
}

/// What a process did.
pub(super) enum Answer {
    Op(Box<OpRecord>),
    Begun(Begun),
    Ended(TxnEnd),
    /// COMMIT or ROLLBACK without an open transaction (an error had ended it).
    Skipped,
    /// Idle for the pause's length.
    Paused,
}

pub(super) struct Done {
    pub(super) slot: usize,
    pub(super) step: usize,
    pub(super) answer: Result<Answer, RecorderError>,
    /// Whether the session still has a transaction open after the step.
    pub(super) in_txn: bool,
}

/// The task of one process: runs the steps it is sent on its session, in order.
pub(super) async fn process_task(
    slot: usize,
    mut session: Session,
    pid: Arc<AtomicI32>,
    mut commands: mpsc::UnboundedReceiver<Command>,
    done: mpsc::UnboundedSender<Done>,
) {
    while let Some(Command { step, action }) = commands.recv().await {
        let answer = perform(&mut session, &pid, action).await;
        let in_txn = session.txn().is_some();
        let sent = done.send(Done {
            slot,
            step,
            answer,
            in_txn,
        });
        if sent.is_err() {
            break;
        }
    }
}

async fn perform(
    session: &mut Session,
    pid: &AtomicI32,
    action: Action,
) -> Result<Answer, RecorderError> {
    // A retired process reconnects here: the monitor must know the new backend.
    session.connect().await?;
    pid.store(session.backend_pid().unwrap_or(0), Ordering::Release);
    match action {
        Action::Call(op) => session.call(&op).await.map(|r| Answer::Op(Box::new(r))),
        Action::Begin(isolation) => session.begin(isolation).await.map(Answer::Begun),
        Action::Commit if session.txn().is_some() => session.commit().await.map(Answer::Ended),
        Action::Rollback if session.txn().is_some() => session.rollback().await.map(Answer::Ended),
        Action::Commit | Action::Rollback => Ok(Answer::Skipped),
        Action::Pause(idle) => {
            tokio::time::sleep(idle).await;
            Ok(Answer::Paused)
        }
    }
}
