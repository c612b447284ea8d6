//! The gate's "liveness" and "conformance" suites: harness::conformance's checks against
//! the build, the liveness check first and alone.

use super::ctx::{bounded, is_hang, Ctx};
use super::listing::{Listing, Planned};
use super::outcome::{CheckResult, SuiteResult};
use harness::judgement::{Cause, Needs};
use std::time::{Duration, Instant};

/// Why a conformance check marked [`Needs::ManagedServer`] needs a managed server.
const RESTARTS: &str = "it stops, restarts or crashes the server";

/// The liveness suite's one check.
pub(super) fn liveness_checks(_: &Listing<'_>) -> Vec<Planned> {
    vec![Planned::on_connection(harness::conformance::LIVENESS_CHECK)]
}

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

/// The liveness check alone, before every other suite: a build whose calls do not answer
/// gets that verdict in seconds, and the gate runs nothing else on it.
pub(super) async fn liveness(ctx: &Ctx<'_>) -> SuiteResult {
    let start = Instant::now();
    let name = harness::conformance::LIVENESS_CHECK;
    ctx.say("liveness", name);
    let check = bounded(ctx, name, LIVENESS_TIMEOUT, conformance_check(ctx, name)).await;
    SuiteResult::of("liveness", vec![check], start.elapsed())
}

/// The liveness check makes about 80 calls, each bounded by 5 s (a hang ends it there).
const LIVENESS_TIMEOUT: Duration = Duration::from_secs(120);

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
async fn conformance_check(ctx: &Ctx<'_>, name: &'static str) -> CheckResult {
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
