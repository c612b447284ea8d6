//! Scripted histories: a check's calls run on recorded sessions ([`Recorder`]), in the
//! order the script says, and the history they make is judged by the model's checker.
//! The check states what it does; the model says whether what came back was right
//! (specs/INVARIANTS.md). A check adds hand-written assertions only for what the model
//! does not cover: error texts and SQLSTATEs, whether a call wrote, how long a call took.

use super::{by_sqlstate, infra, Ctx, Failure};
use crate::pg::Cluster;
use crate::recorder::{Recorder, RecorderError, RecorderOptions, Session};
use model::checker::{check, Verdict};
use model::{CheckOptions, Interval, Op, OpRecord, OpResult, Outcome};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

/// Longer than any wait a check's call makes: a call without an answer after this long
/// is cancelled and recorded unknown (which then fails the check as undecided).
const CALL_TIMEOUT: Duration = Duration::from_secs(30);

/// The recorded history of one check on one database.
pub(super) struct Script {
    recorder: Arc<Recorder>,
}

impl Script {
    /// Records on database `db` of the check's cluster, under the check's session settings.
    pub(super) fn on(ctx: &Ctx<'_>, db: &str) -> Result<Script, Failure> {
        Script::on_cluster(ctx, ctx.cluster, db)
    }

    /// Records on database `db` of `cluster`, under the check's session settings.
    pub(super) fn on_cluster(
        ctx: &Ctx<'_>,
        cluster: &Cluster,
        db: &str,
    ) -> Result<Script, Failure> {
        let mut meta = BTreeMap::new();
        meta.insert("check".to_string(), serde_json::json!(ctx.check));
        meta.insert("extension".to_string(), serde_json::json!(ctx.extension));
        let options = RecorderOptions {
            call_timeout: CALL_TIMEOUT,
            history_file: None,
            meta,
            session: ctx.session.clone(),
            ..RecorderOptions::default()
        };
        let recorder = Recorder::new(cluster.config(db), options)
            .map_err(|e| infra(format!("cannot record: {e}")))?;
        Ok(Script {
            recorder: Arc::new(recorder),
        })
    }

    /// A new recorded session (one process; it connects on its first call).
    pub(super) async fn session(&self) -> Result<Session, Failure> {
        let mut s = self.recorder.session();
        s.connect()
            .await
            .map_err(|e| infra(format!("a recorded session: {e}")))?;
        Ok(s)
    }

    /// Ends the history and judges it: passes only when the checker finds it
    /// linearizable; a violation fails with the checker's explanation.
    pub(super) async fn judge(self) -> Result<(), Failure> {
        let history = self
            .recorder
            .finish()
            .map_err(|e| infra(format!("the recorded history: {e}")))?;
        let verdict =
            tokio::task::spawn_blocking(move || check(&history, &CheckOptions::default()))
                .await
                .map_err(|e| infra(format!("the checker: {e}")))?;
        match verdict {
            Verdict::Linearizable(_) => Ok(()),
            Verdict::Violation(v) => Err(Failure::Violation(format!(
                "the history breaks invariant {} ({}): {}",
                v.invariant.number(),
                v.invariant,
                v.explanation
            ))),
            Verdict::Unknown(spent) => {
                Err(infra(format!("the checker could not decide: {spent:?}")))
            }
        }
    }
}

impl Script {
    /// The check cannot go on (`why`): the checker's finding if the history so far breaks
    /// an invariant, else `why`.
    pub(super) async fn stop(self, why: String) -> Failure {
        match self.judge().await {
            Err(failure) => failure,
            Ok(()) => Failure::Violation(format!(
                "{why} (the history so far is linearizable; the script cannot go on)"
            )),
        }
    }
}

/// Runs `op` on the recorded session `s`; its record, whatever came back. An answer
/// outside the API (an error outside the contract, a column of another type, a hang) is a
/// violation; a harness failure (no connection, its own bug) is no verdict.
pub(super) async fn attempt(s: &mut Session, op: Op<String, String>) -> Result<OpRecord, Failure> {
    s.call(&op).await.map_err(|err| match err {
        RecorderError::Malformed { .. } | RecorderError::Hang { .. } => {
            Failure::Violation(err.to_string())
        }
        other => infra(other),
    })
}

/// Runs `op` on the recorded session `s`, which must answer: a result, or the wait
/// timeout of a blocking acquire. Any other error stops the check with its SQLSTATE and
/// message (the model allows a definite failure anywhere, as no effect, but the script
/// documents a call that answers).
pub(super) async fn call(s: &mut Session, op: Op<String, String>) -> Result<OpRecord, Failure> {
    let record = attempt(s, op).await?;
    match &record.result {
        OpResult::Ok(_) => Ok(record),
        _ if record.result.outcome() == Outcome::Timeout => Ok(record),
        OpResult::Fail { sqlstate, message } => Err(by_sqlstate(
            sqlstate,
            format!("{:?} failed: {sqlstate}: {message}", record.call),
        )),
        OpResult::Unknown { reason } => {
            Err(infra(format!("{:?} got no answer: {reason}", record.call)))
        }
    }
}

pub(super) fn interval(d: Duration) -> Interval {
    Interval::micros(i64::try_from(d.as_micros()).unwrap_or(i64::MAX))
}

/// `lease.acquire(key, owner, ttl, wait)`.
pub(super) fn acquire(key: &str, owner: &str, ttl: Duration, wait: Duration) -> Op<String, String> {
    Op::Acquire {
        key: Some(key.into()),
        owner: Some(owner.into()),
        ttl: Some(interval(ttl)),
        wait: Some(interval(wait)),
    }
}

/// The epoch a call was granted (None unless it answered `Acquired`).
pub(super) fn granted(r: &OpRecord) -> Option<i64> {
    match &r.result {
        OpResult::Ok(Outcome::Acquired { epoch, .. }) => Some(*epoch),
        _ => None,
    }
}

/// Why a script that needed a grant cannot go on.
pub(super) fn not_granted(r: &OpRecord) -> String {
    format!(
        "{:?} answered {:?}, the script needs a grant",
        r.call, r.result
    )
}
