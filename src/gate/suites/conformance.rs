//! The gate's "conformance" suite: harness::conformance's checks against the build (the
//! liveness check runs before, alone, as the suite of its own in `liveness.rs`).

use crate::gate::ctx::{bounded, is_hang, Ctx};
use crate::gate::listing::{Listing, Planned};
use crate::gate::outcome::{CheckResult, SuiteResult};
use harness::judgement::{Cause, Needs};
use std::time::{Duration, Instant};

pub(super) const SUITE: super::Suite = super::Suite {
    name: "conformance",
    order: 30,
    cost: [24, 24],
    checks,
    run: |c| Box::pin(conformance(c)),
};

/// Why a conformance check marked [`Needs::ManagedServer`] needs a managed server.
const RESTARTS: &str = "it stops, restarts or crashes the server";

/// Every conformance check but the liveness check (the liveness suite runs it first).
pub(super) fn checks(_: &Listing<'_>) -> Vec<Planned> {
    harness::conformance::checks()
        .iter()
        .filter(|c| c.name != harness::conformance::LIVENESS_CHECK)
        .map(|c| match c.needs {
            Needs::Connection => Planned::on_connection(c.name),
            Needs::ManagedServer => Planned::on_managed(c.name, RESTARTS),
        })
        .collect()
}

/// No conformance check waits longer than its TTLs of a few seconds or a restart (60 s).
const CONFORMANCE_CHECK_TIMEOUT: Duration = Duration::from_secs(180);

/// Every conformance check but the liveness check (the liveness suite runs it first),
/// stopping after a finding that the target hangs.
pub(super) async fn conformance(ctx: &Ctx<'_>) -> SuiteResult {
    let start = Instant::now();
    let mut checks = Vec::new();
    for check in harness::conformance::checks() {
        if check.name == harness::conformance::LIVENESS_CHECK {
            continue;
        }
        if check.needs == Needs::ManagedServer && !ctx.cluster.is_managed() {
            checks.push(CheckResult::skipped(check.name, RESTARTS));
            continue;
        }
        ctx.say("conformance", check.name);
        let one = conformance_check(ctx, check.name);
        let result = bounded(ctx, check.name, CONFORMANCE_CHECK_TIMEOUT, one).await;
        let stop = is_hang(&result);
        checks.push(result);
        if stop {
            break;
        }
    }
    SuiteResult::of("conformance", checks, start.elapsed())
}

/// The conformance check `name` against the build.
pub(super) async fn conformance_check(ctx: &Ctx<'_>, name: &'static str) -> CheckResult {
    let report =
        harness::conformance::run_against(ctx.cluster, ctx.extension(), |n| n == name).await;
    match report.outcomes.into_iter().next() {
        Some(o) => CheckResult::judged(name, o.result, o.elapsed),
        None => CheckResult::infrastructure(
            name,
            Cause::Harness.message("the check did not run"),
            Duration::ZERO,
        ),
    }
}
