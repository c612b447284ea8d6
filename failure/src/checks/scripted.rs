//! Checks that are a scripted situation: a few sessions make set calls around one fault,
//! so that the fault meets exactly the state it is about (a blocking acquire mid-wait, a
//! transaction holding a row lock, a COMMIT in flight, a lease expiring while the server
//! is down). Each situation's history is judged by the checker first, then its own
//! expectations are checked. Nine situations are plans (`scripted/plans.rs`,
//! `failure/plans/`) with their expectations as the plan's `expect`s and what their history
//! shows beside the answers; one (`scripted/commit_crash.rs`) is still a function: it needs
//! a crash with two COMMITs in flight, trapped by a trigger and a missing standby, which no
//! plan step makes.

use super::rig::{Rig, Setup};
use super::{doctor, judge, Breakage, CheckFailure, CheckResult, Passed, Script, TimeoutIn};
use crate::error::FaultError;
use crate::fault::Fault;
use harness::extension::ExtensionFiles;
use harness::pg::PgInstall;
use std::future::Future;
use std::pin::Pin;

mod commit_crash;
mod plans;

use commit_crash::commit_crash;

type Scenario<'a> = Pin<Box<dyn Future<Output = Result<Vec<String>, CheckFailure>> + Send + 'a>>;

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
    // What the history shows beside the answers (a downtime that held the expiry, how
    // soon waiters woke) joins the situation's own expectations.
    let played = match (&history, played) {
        (Ok(h), Ok(mut evidence)) => plans::seen_in(script, fault, h).map(|seen| {
            evidence.extend(seen);
            evidence
        }),
        (_, played) => played,
    };
    let (mut history, evidence) = match (history, played) {
        (Ok(h), Ok(evidence)) => (h, evidence),
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
        Script::WaitWake => plan(plans::WAIT_WAKE),
    }
}
