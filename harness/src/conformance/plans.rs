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
use crate::pg::{Cluster, ClusterOptions};
use crate::stepped::{self, ClusterControl, Plan, Report, RunOptions, Stage};
use std::sync::Arc;
use std::time::Duration;

/// Longer than any wait a plan's call makes (as a scripted check's calls): a call without
/// an answer after this long is cancelled and recorded unknown.
const CALL_TIMEOUT: Duration = Duration::from_secs(30);

/// The plan `text` of check `name`, read.
fn plan_of(name: &str, text: &str) -> Result<Plan, Failure> {
    Plan::from_text(text).map_err(|e| infra(format!("the plan of {name}: {e}")))
}

/// Runs the check's plan, `text`, on a fresh database, under the check's session settings.
pub(super) async fn run(ctx: &Ctx<'_>, text: &'static str) -> CheckResult {
    let plan = plan_of(ctx.check, text)?;
    let db = ctx.fresh_database_on(ctx.cluster, ctx.check).await?;
    let stage = Stage::on(
        ctx.cluster,
        ctx.extension.to_string(),
        db,
        ctx.session.clone(),
    )
    .await
    .map_err(infra)?;
    let report = stepped::run(&stage, &plan, &options(), Arc::new(Silent)).await;
    judged(&report)
}

/// Runs the check's plan, `text`, whose steps restart the server, on a cluster of the
/// check's own from the same install (the shared cluster never goes down under another
/// check), under the check's session settings.
pub(super) async fn run_restarting(ctx: &Ctx<'_>, text: &'static str) -> CheckResult {
    let plan = plan_of(ctx.check, text)?;
    let cluster = own_cluster(ctx).await?;
    let db = ctx.fresh_database_on(&cluster, "restarts").await?;
    let stage = Stage::on(
        &cluster,
        ctx.extension.to_string(),
        db.clone(),
        ctx.session.clone(),
    )
    .await
    .map_err(infra)?;
    let control = ClusterControl::new(cluster, db);
    let report =
        stepped::run_controlled(&stage, Some(&control), &plan, &options(), Arc::new(Silent)).await;
    judged(&report)
}

fn options() -> RunOptions {
    RunOptions {
        call_timeout: CALL_TIMEOUT,
        ..RunOptions::default()
    }
}

/// A run's judgement as the check's result.
fn judged(report: &Report) -> CheckResult {
    match report.judgement() {
        Judgement::Pass => Ok(()),
        Judgement::Finding { message, .. } => Err(Failure::Violation(message)),
        Judgement::NoVerdict { why, .. } => Err(Failure::Infrastructure(why)),
    }
}

/// A cluster of the check's own from the same install (the extension under test is
/// already installed there).
async fn own_cluster(ctx: &Ctx<'_>) -> Result<Cluster, Failure> {
    let options = ClusterOptions {
        extensions: Vec::new(),
        ..ClusterOptions::default()
    };
    // initdb and the start block: off the runtime's threads.
    let install = ctx.cluster.install().map_err(infra)?.clone();
    tokio::task::spawn_blocking(move || Cluster::start_with(&install, options))
        .await
        .map_err(infra)?
        .map_err(infra)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every file of harness/plans/conformance/ reads, expects answers, and is a check of
    /// the suite under its name (a check's missing file does not compile).
    #[test]
    fn every_plan_reads_and_is_a_check_of_the_suite_under_its_name() {
        let names: Vec<&str> = super::super::checks().iter().map(|c| c.name).collect();
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/plans/conformance");
        let entries = std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{dir}: {e}"));
        let mut seen = 0;
        for entry in entries.flatten() {
            let path = entry.path();
            let name = path
                .file_stem()
                .and_then(|s| s.to_str())
                .unwrap_or_default();
            let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{name}: {e}"));
            let plan = plan_of(name, &text).unwrap_or_else(|e| panic!("{e}"));
            assert!(!plan.steps.is_empty(), "{name}");
            assert!(
                plan.steps.iter().any(|s| s.expect.is_some()),
                "{name} expects no answer"
            );
            assert!(names.contains(&name), "{name} is not a check");
            seen += 1;
        }
        assert!(seen > 0, "no plan in {dir}");
    }
}
