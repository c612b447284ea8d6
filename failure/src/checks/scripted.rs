//! Checks that are a scripted situation: a few sessions make set calls around one fault,
//! so that the fault meets exactly the state it is about (a blocking acquire mid-wait, a
//! transaction holding a row lock, a COMMIT in flight, a lease expiring while the server
//! is down). Each situation's history is judged by the checker first, then its own
//! expectations are checked. Eight situations are plans (`scripted/plans.rs`,
//! `failure/plans/`) with their expectations as the plan's `expect`s; two
//! (`scripted/timing.rs`) are still functions: they need a crash with two COMMITs in flight
//! (trapped by a trigger and a missing standby), or a wake-up timed against the poll bound,
//! which no plan step makes.

use super::rig::{Rig, Setup};
use super::{doctor, judge, Breakage, CheckFailure, CheckResult, Passed, Script, TimeoutIn};
use crate::error::FaultError;
use crate::fault::Fault;
use crate::inject::Reach;
use crate::server::Stop;
use harness::extension::ExtensionFiles;
use harness::pg::PgInstall;
use harness::recorder::Session;
use model::{Interval, NemesisEffect, Op, OpRecord, OpResult, Outcome, TxnEnd};
use std::future::Future;
use std::pin::Pin;
use std::time::{Duration, Instant};
use tokio_postgres::Client;

mod plans;
mod timing;

use timing::{commit_crash, wait_wake};

type Scenario<'a> = Pin<Box<dyn Future<Output = Result<Vec<String>, CheckFailure>> + Send + 'a>>;

/// What a scenario's expectations found wrong, when they did.
fn expect(ok: bool, what: impl FnOnce() -> String) -> Result<(), CheckFailure> {
    match ok {
        true => Ok(()),
        false => Err(CheckFailure::Unexpected(what())),
    }
}

fn setup(script: Script) -> Setup {
    let options = |o: &str| Setup {
        session_options: Some(o.to_string()),
        ..Setup::default()
    };
    match script {
        Script::TimeoutInWait(TimeoutIn::Statement) => options("-c statement_timeout=300"),
        Script::TimeoutInWait(TimeoutIn::Lock) => options("-c lock_timeout=300"),
        Script::Terminate
        | Script::Cancel
        | Script::ClientPause
        | Script::ShortTtl
        | Script::DowntimeExpiry
        | Script::AbortAfterAcquire
        | Script::CommitCrash
        | Script::WaitWake => Setup::default(),
    }
}

pub(super) async fn run(
    fault: Fault,
    script: Script,
    install: &PgInstall,
    under_test: &ExtensionFiles,
    breakage: Option<Breakage>,
) -> CheckResult {
    let build = match breakage {
        Some(Breakage::Build(b)) => b.files(),
        _ => Some(under_test.clone()),
    };
    let Some(build) = build else {
        return Err(
            FaultError::not_injected(fault.name(), "the broken build no longer applies").into(),
        );
    };
    let rig = Rig::start(install, &build, &setup(script)).await?;
    let postgres = rig.postgres.clone();
    let played = scenario(script, fault, &rig).await;
    let history = rig.finish().await;
    let (mut history, evidence) = match (history, played) {
        (Ok(h), Ok(evidence)) => {
            plans::arose(script, fault, &h)?;
            (h, evidence)
        }
        // The history decides first when it shows a violation: a broken target may make
        // a later step of the situation impossible.
        (Ok(h), Err(CheckFailure::Unexpected(what))) => {
            judge(&h)?;
            return Err(CheckFailure::Unexpected(what));
        }
        (_, Err(e)) => return Err(e),
        (Err(e), _) => return Err(e.into()),
    };
    if let Some(Breakage::Doctored(d)) = breakage {
        if !doctor(&mut history, d) {
            return Err(FaultError::not_injected(
                fault.name(),
                "nothing for the doctored control to change",
            )
            .into());
        }
    }
    let verdict = judge(&history)?;
    Ok(Passed {
        fault,
        postgres,
        verdict,
        evidence,
        history: Some(history),
    })
}

/// `script` played on `rig`: its plan (failure/plans/) or its function; `fault` names the
/// nemesis events it records.
fn scenario<'a>(script: Script, fault: Fault, rig: &'a Rig) -> Scenario<'a> {
    let plan = |text| -> Scenario<'a> { Box::pin(plans::play(rig, fault, text)) };
    match script {
        Script::Terminate => plan(plans::TERMINATE),
        Script::Cancel => plan(plans::CANCEL),
        Script::TimeoutInWait(TimeoutIn::Statement) => plan(plans::STATEMENT_TIMEOUT),
        Script::TimeoutInWait(TimeoutIn::Lock) => plan(plans::LOCK_TIMEOUT),
        Script::ClientPause => plan(plans::CLIENT_PAUSE),
        Script::ShortTtl => plan(plans::SHORT_TTL),
        Script::AbortAfterAcquire => plan(plans::ABORT_AFTER_ACQUIRE),
        Script::DowntimeExpiry => plan(plans::DOWNTIME_EXPIRY),
        Script::CommitCrash => Box::pin(commit_crash(rig, fault)),
        Script::WaitWake => Box::pin(wait_wake(rig, fault)),
    }
}

fn acquire(key: &str, owner: &str, ttl: Interval) -> Op<String, String> {
    Op::acquire(key.to_string(), owner.to_string(), ttl)
}

fn acquire_wait(key: &str, owner: &str, ttl: Interval, wait: Interval) -> Op<String, String> {
    Op::acquire_wait(key.to_string(), owner.to_string(), ttl, wait)
}

fn inspect(key: &str) -> Op<String, String> {
    Op::inspect(key.to_string())
}

/// The epoch of a grant.
fn granted(op: &OpRecord) -> Option<i64> {
    match op.result {
        OpResult::Ok(Outcome::Acquired { epoch, .. }) => Some(epoch),
        _ => None,
    }
}

/// The (owner, epoch) an inspect saw held, or `None`.
fn held(op: &OpRecord) -> Option<(Option<String>, i64)> {
    match &op.result {
        OpResult::Ok(Outcome::Inspected(Some(r))) if r.held => Some((r.owner.clone(), r.epoch)),
        _ => None,
    }
}

async fn call(s: &mut Session, op: Op<String, String>) -> Result<OpRecord, CheckFailure> {
    s.call(&op).await.map_err(|e| FaultError::from(e).into())
}

async fn connected_pid(s: &mut Session) -> Result<i32, CheckFailure> {
    s.connect().await.map_err(FaultError::from)?;
    s.backend_pid()
        .ok_or_else(|| FaultError::Task("a connected session has no backend pid".into()).into())
}

/// Waits (at most 10 s) until backend `pid` runs a statement that waits on `event`.
async fn waiting(admin: &Client, pid: i32, event: &str) -> Result<(), FaultError> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let row = admin
            .query_opt(
                "SELECT 1 FROM pg_stat_activity WHERE pid = $1 AND state = 'active' AND wait_event = $2",
                &[&pid, &event],
            )
            .await
            .map_err(FaultError::db("watching a backend"))?;
        if row.is_some() {
            return Ok(());
        }
        if Instant::now() >= deadline {
            return Err(never_waited(admin, pid, event).await);
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Why backend `pid` did not reach its wait on `event` within the bound: the target's
/// doing when the server shows the statement ended without that wait, or kept running
/// the target's code, or waits for something else (the shipped build reaches the wait in
/// milliseconds); no verdict when the server cannot say, or the backend waits for I/O.
async fn never_waited(admin: &Client, pid: i32, event: &str) -> FaultError {
    let hang = FaultError::Hang {
        what: "a backend reaching its wait",
        seconds: 10,
    };
    match harness::liveness::backend(admin, pid, Duration::from_secs(5)).await {
        Some(b) if !b.shown.contains("wait event IO:") => FaultError::Prevented {
            what: "a backend reaching its wait",
            detail: format!(
                "backend {pid} never waited on {event} within 10 s ({}); the build's calls \
                 kept the situation from arising",
                b.shown
            ),
        },
        _ => hang,
    }
}

/// Records a nemesis event around `during` (a fault that is a situation: a timeout firing,
/// a pause, a rollback) with no direct effect on state.
async fn around<T>(
    reach: &Reach<'_>,
    fault: Fault,
    detail: &str,
    during: impl Future<Output = T>,
) -> Result<T, CheckFailure> {
    let started = reach.recorder.nemesis_start(fault.name());
    let out = during.await;
    reach
        .recorder
        .nemesis_end(started, NemesisEffect::None, detail)
        .map_err(FaultError::from)?;
    Ok(out)
}

const MINUTE: Interval = Interval::secs(60);
