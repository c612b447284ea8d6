//! Checks that are a scripted situation: a few sessions make set calls around one fault,
//! so that the fault meets exactly the state it is about (a blocking acquire mid-wait, a
//! transaction holding a row lock, a COMMIT in flight, a lease expiring while the server
//! is down). Each situation's history is judged by the checker first, then its own
//! expectations are checked. Every situation is a plan (`scripted/plans.rs`,
//! `failure/plans/`) with its expectations as the plan's `expect`s and what its history
//! shows beside the answers; the server-side traps a situation needs (commit-crash's
//! sleeping trigger and missing standby) are the plan's `setup` and `teardown`.

use super::rig::Rig;
use super::{doctor, judge, Breakage, CheckFailure, CheckResult, Passed, Shows};
use crate::error::FaultError;
use crate::fault::Fault;
use crate::situation::PlanFile;
use harness::extension::ExtensionFiles;
use harness::pg::PgInstall;

mod plans;

/// Plays `fault`'s situation, the plan file `plan` whose history must show `shows`.
pub(super) async fn run(
    fault: Fault,
    plan: PlanFile,
    shows: Shows,
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
    let plan = plans::read(fault, plan)?;
    let rig = Rig::start(install, &build, &plans::setup(&plan)).await?;
    let postgres = rig.postgres.clone();
    let played = plans::play(&rig, fault, &plan).await;
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
    let judged = judge(&history)?;
    Ok(Passed {
        fault,
        postgres,
        verdict: judged.verdict,
        evidence,
        history: Some(history),
        coverage: judged.coverage,
    })
}
