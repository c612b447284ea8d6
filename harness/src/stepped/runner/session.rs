//! The task of one process: owns its recorder [`Session`], runs the steps it is sent in
//! order and sends each answer back on the runner's channel. A lapse runs beside the
//! session, on a connection of the recorder's own ([`Recorder::lapse_on`]). What came back
//! reads briefly in the step's log ([`Answer::text`]).

use crate::recorder::{Begun, CommitEnd, Recorder, RecorderError, Session};
use crate::workload::{Probe, Setting};
use model::{Isolation, Op, OpRecord, OpResult, Outcome, TxnEnd};
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
    /// The clock-independent lapse of this key.
    Lapse(String),
    /// A server fact asked on the session.
    Probe(Probe),
    /// A setting of the session.
    Set(Setting),
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
    /// A COMMIT's end, and whether the COMMIT answered.
    Committed(CommitEnd),
    /// COMMIT or ROLLBACK without an open transaction (an error had ended it).
    Skipped,
    /// Idle for the pause's length.
    Paused,
    /// A lapse made and recorded: whether a live lease was there (`None`: its answer was
    /// lost).
    Lapsed(Option<bool>),
    /// A `probe xid`: whether the open transaction has a transaction id (`None`: no
    /// transaction was open, an error had ended it).
    Probed(Option<bool>),
    /// A setting made: its value as the session now shows it.
    Set(String),
}

impl Answer {
    /// The answer, briefly, for its step's log.
    pub(super) fn text(&self) -> String {
        match self {
            Answer::Op(record) => summary(&record.result),
            Answer::Begun(Begun::Open(id)) => format!("transaction {id} open"),
            Answer::Begun(Begun::Lost) => "BEGIN lost: process retired".into(),
            Answer::Ended(end) => format!("transaction ended {end:?}"),
            Answer::Committed(CommitEnd {
                end,
                answered: true,
            }) => format!("transaction ended {end:?}"),
            Answer::Committed(CommitEnd {
                end,
                answered: false,
            }) => format!("COMMIT's answer lost: transaction resolved {end:?}"),
            Answer::Skipped => "skipped: no transaction open (an error had ended it)".into(),
            Answer::Paused => "idled".into(),
            Answer::Lapsed(Some(true)) => "lapse injected: the live lease expired now".into(),
            Answer::Lapsed(Some(false)) => "lapse injected: no live lease to expire".into(),
            Answer::Lapsed(None) => "lapse injected: its answer was lost".into(),
            Answer::Probed(Some(true)) => "xid assigned: the transaction wrote".into(),
            Answer::Probed(Some(false)) => "no xid: the transaction wrote nothing".into(),
            Answer::Probed(None) => "no transaction open to probe (an error had ended it)".into(),
            Answer::Set(value) => format!("set: now {value}"),
        }
    }
}

/// An op's result, briefly.
fn summary(result: &OpResult) -> String {
    match result {
        OpResult::Ok(Outcome::Acquired { epoch, .. }) => format!("acquired, epoch {epoch}"),
        OpResult::Ok(Outcome::Inspected(row)) => match row {
            None => "no row".into(),
            Some(r) => format!(
                "held {} by {:?}, epoch {}",
                r.held,
                r.owner.as_deref().unwrap_or("-"),
                r.epoch
            ),
        },
        OpResult::Ok(o) => format!("{o:?}"),
        OpResult::Fail { sqlstate, message } => format!("error {sqlstate}: {message}"),
        OpResult::Unknown { reason } => format!("unknown: {reason}"),
    }
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
    recorder: Arc<Recorder>,
    mut session: Session,
    pid: Arc<AtomicI32>,
    mut commands: mpsc::UnboundedReceiver<Command>,
    done: mpsc::UnboundedSender<Done>,
) {
    while let Some(Command { step, action }) = commands.recv().await {
        let answer = perform(&recorder, &mut session, &pid, action).await;
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
    recorder: &Recorder,
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
        Action::Commit if session.txn().is_some() => {
            session.commit_ended().await.map(Answer::Committed)
        }
        Action::Rollback if session.txn().is_some() => session.rollback().await.map(Answer::Ended),
        Action::Commit | Action::Rollback => Ok(Answer::Skipped),
        Action::Pause(idle) => {
            tokio::time::sleep(idle).await;
            Ok(Answer::Paused)
        }
        Action::Lapse(key) => lapse(recorder, pid, &key).await.map(Answer::Lapsed),
        Action::Probe(Probe::Xid) => xid_assigned(session).await.map(Answer::Probed),
        Action::Set(setting) => set(session, &setting).await.map(Answer::Set),
    }
}

/// Makes `setting` on the session's connection (its name and value as parameters, never
/// spliced into the SQL): the value the session then shows, or why the server refused it.
async fn set(session: &Session, setting: &Setting) -> Result<String, RecorderError> {
    let failed = |detail: String| RecorderError::Setting {
        setting: setting.to_string(),
        detail,
    };
    let client = session
        .connection()
        .ok_or_else(|| failed("the session has no connection".into()))?;
    let row = client
        .query_one(
            "SELECT pg_catalog.set_config($1, $2, false)",
            &[&setting.name, &setting.value],
        )
        .await
        .map_err(|e| failed(crate::judgement::describe_db(&e)))?;
    row.try_get(0).map_err(|e| failed(e.to_string()))
}

/// Whether the session's open transaction has a transaction id (none without one open).
async fn xid_assigned(session: &Session) -> Result<Option<bool>, RecorderError> {
    let failed = |detail: String| RecorderError::Probe {
        probe: "xid",
        detail,
    };
    if session.txn().is_none() {
        return Ok(None);
    }
    let client = session
        .connection()
        .ok_or_else(|| failed("the session has no connection".into()))?;
    let row = client
        .query_one(
            "SELECT pg_catalog.pg_current_xact_id_if_assigned() IS NOT NULL",
            &[],
        )
        .await
        .map_err(|e| failed(e.to_string()))?;
    row.try_get(0).map(Some).map_err(|e| failed(e.to_string()))
}

/// Lapses `key` on a new connection of the recorder's own, recorded as a `lapse` nemesis
/// event. While it runs, the process's backend for the monitor is that connection's (its
/// UPDATE waits for the row lock of a transaction writing the key like any write), then
/// the session's again.
async fn lapse(
    recorder: &Recorder,
    pid: &AtomicI32,
    key: &str,
) -> Result<Option<bool>, RecorderError> {
    let admin = recorder.lapse_client(key).await?;
    let own = pid.load(Ordering::Acquire);
    if let Ok(row) = admin
        .query_one("SELECT pg_catalog.pg_backend_pid()", &[])
        .await
    {
        if let Ok(lapser) = row.try_get::<_, i32>(0) {
            pid.store(lapser, Ordering::Release);
        }
    }
    let applied = recorder.lapse_on(&admin, key).await;
    pid.store(own, Ordering::Release);
    applied
}
