//! Checks that are a scripted situation: a few sessions make set calls around one fault,
//! so that the fault meets exactly the state it is about (a blocking acquire mid-wait, a
//! transaction holding a row lock, a COMMIT in flight, a lease expiring while the server
//! is down). Each situation's history is judged by the checker first, then its own
//! expectations are checked. Nine situations are plans (`scripted/plans.rs`,
//! `failure/plans/`) with their expectations as the plan's `expect`s and what their history
//! shows beside the answers; one (`scripted/commit_crash.rs`) is still a function: it needs
//! a crash with two COMMITs in flight, trapped by a trigger and a missing standby, which no
//! plan step makes.

use super::rig::Rig;
use super::{doctor, judge, Breakage, CheckFailure, CheckResult, Passed, Script, Shows};
use crate::error::FaultError;
use crate::fault::Fault;
use crate::situation::PlanFile;
use harness::extension::ExtensionFiles;
use harness::pg::PgInstall;

mod commit_crash;
mod plans;

use commit_crash::commit_crash;

/// A check's situation as the checks module hands it here.
#[derive(Clone, Copy, Debug)]
pub(super) enum Scene {
    /// A plan file, and what its history must show.
    Plan(PlanFile, Shows),
    /// A situation written as code (commit-crash, the only one).
    Script(Script),
}

pub(super) async fn run(
    fault: Fault,
    scene: Scene,
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
    let (plan, shows) = match scene {
        Scene::Plan(plan, shows) => (Some(plans::read(fault, plan)?), shows),
        Scene::Script(_) => (None, Shows::Answers),
    };
    let setup = plan.as_ref().map(plans::setup).unwrap_or_default();
    let rig = Rig::start(install, &build, &setup).await?;
    let postgres = rig.postgres.clone();
    let played = match &plan {
        Some(plan) => plans::play(&rig, fault, plan).await,
        None => commit_crash(&rig, fault).await,
    };
    let history = rig.finish().await;
    // What the history shows beside the answers (a downtime that held the expiry, how
    // soon waiters woke) joins the situation's own expectations.
    let played = match (&history, played) {
        (Ok(h), Ok(mut evidence)) => plans::seen_in(shows, fault, h).map(|seen| {
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
