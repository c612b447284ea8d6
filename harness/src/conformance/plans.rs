//! The conformance checks that are plans: "these sessions do these steps, expecting these
//! answers", written in the plan text form (specs/HISTORY.md, "Plan text") in
//! `harness/plans/conformance/NAME.plan` and run by the one stepped runner
//! ([`crate::stepped`]) under the check's session settings, on a fresh database of the
//! check. The model's checker judges the history, and each call with an `expect` must give
//! that answer ([`crate::stepped::Report::judgement`]). A plan that needs a lease to lapse
//! now injects the lapse (`pN lapse kK`), recorded as a nemesis event the checker applies.

use super::{infra, CheckResult, Ctx, Failure};
use crate::campaign::Silent;
use crate::judgement::Judgement;
use crate::stepped::{self, Plan, RunOptions, Stage};
use std::sync::Arc;
use std::time::Duration;

/// Each plan check's name and text.
pub(super) const PLANS: [(&str, &str); 10] = [
    (
        "denied_acquire_returns_nulls_and_writes_nothing",
        include_str!("../../plans/conformance/denied_acquire_returns_nulls_and_writes_nothing.plan"),
    ),
    (
        "same_owner_acquire_is_idempotent_and_writes_nothing",
        include_str!(
            "../../plans/conformance/same_owner_acquire_is_idempotent_and_writes_nothing.plan"
        ),
    ),
    (
        "acquire_grants_epoch_1_expiring_at_server_time_plus_ttl",
        include_str!(
            "../../plans/conformance/acquire_grants_epoch_1_expiring_at_server_time_plus_ttl.plan"
        ),
    ),
    (
        "renew_extends_expiry_and_keeps_the_epoch",
        include_str!("../../plans/conformance/renew_extends_expiry_and_keeps_the_epoch.plan"),
    ),
    (
        "release_frees_and_advances_the_epoch",
        include_str!("../../plans/conformance/release_frees_and_advances_the_epoch.plan"),
    ),
    (
        "renew_and_release_statuses_follow_precedence",
        include_str!("../../plans/conformance/renew_and_release_statuses_follow_precedence.plan"),
    ),
    (
        "inspect_tells_never_leased_free_held_and_lapsed_apart",
        include_str!(
            "../../plans/conformance/inspect_tells_never_leased_free_held_and_lapsed_apart.plan"
        ),
    ),
    (
        "lapsed_lease_is_taken_over_at_once_with_a_greater_epoch",
        include_str!(
            "../../plans/conformance/lapsed_lease_is_taken_over_at_once_with_a_greater_epoch.plan"
        ),
    ),
    (
        "distinct_keys_never_interact",
        include_str!("../../plans/conformance/distinct_keys_never_interact.plan"),
    ),
    (
        "a_write_that_waited_across_its_leases_expiry_answers_lapsed",
        include_str!(
            "../../plans/conformance/a_write_that_waited_across_its_leases_expiry_answers_lapsed.plan"
        ),
    ),
];

/// Longer than any wait a plan's call makes (as a scripted check's calls): a call without
/// an answer after this long is cancelled and recorded unknown.
const CALL_TIMEOUT: Duration = Duration::from_secs(30);

/// The plan of check `name`.
pub(super) fn plan_of(name: &str) -> Result<Plan, Failure> {
    let (_, text) = PLANS
        .iter()
        .find(|(n, _)| *n == name)
        .ok_or_else(|| infra(format!("no plan is written for {name}")))?;
    Plan::from_text(text).map_err(|e| infra(format!("the plan of {name}: {e}")))
}

/// Runs the check's plan on a fresh database, under the check's session settings.
pub(super) async fn run(ctx: &Ctx<'_>) -> CheckResult {
    let plan = plan_of(ctx.check)?;
    let db = ctx.fresh_database_on(ctx.cluster, ctx.check).await?;
    let stage = Stage::on(
        ctx.cluster,
        ctx.extension.to_string(),
        db,
        ctx.session.clone(),
    )
    .await
    .map_err(infra)?;
    let options = RunOptions {
        call_timeout: CALL_TIMEOUT,
        ..RunOptions::default()
    };
    let report = stepped::run(&stage, &plan, &options, Arc::new(Silent)).await;
    match report.judgement() {
        Judgement::Pass => Ok(()),
        Judgement::Finding { message, .. } => Err(Failure::Violation(message)),
        Judgement::NoVerdict { why, .. } => Err(Failure::Infrastructure(why)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_plan_reads_and_is_a_check_of_the_suite_under_its_name() {
        let names: Vec<&str> = super::super::checks().iter().map(|c| c.name).collect();
        for (name, _) in PLANS {
            let plan = plan_of(name).unwrap_or_else(|e| panic!("{e}"));
            assert!(!plan.steps.is_empty(), "{name}");
            assert!(
                plan.steps.iter().any(|s| s.expect.is_some()),
                "{name} expects no answer"
            );
            assert!(names.contains(&name), "{name} is not a check");
        }
    }
}
