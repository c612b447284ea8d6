//! The gate's "liveness" suite: harness::conformance's liveness check, first and alone, so
//! that a build whose calls do not answer gets that verdict in seconds and nothing else
//! runs on it.

use super::conformance::conformance_check;
use super::{Suite, LIVENESS};
use crate::gate::ctx::{bounded, Ctx};
use crate::gate::listing::{Listing, Planned};
use crate::gate::outcome::SuiteResult;
use std::time::{Duration, Instant};

pub(super) const SUITE: Suite = Suite {
    name: LIVENESS,
    order: 10,
    cost: [2, 2],
    checks,
    run: |c| Box::pin(liveness(c)),
};

/// The liveness check makes about 80 calls, each bounded by 5 s (a hang ends it there).
const LIVENESS_TIMEOUT: Duration = Duration::from_secs(120);

/// The suite's one check.
fn checks(_: &Listing<'_>) -> Vec<Planned> {
    vec![Planned::on_connection(harness::conformance::LIVENESS_CHECK)]
}

async fn liveness(ctx: &Ctx<'_>) -> SuiteResult {
    let start = Instant::now();
    let name = harness::conformance::LIVENESS_CHECK;
    ctx.say(LIVENESS, name);
    let check = bounded(ctx, name, LIVENESS_TIMEOUT, conformance_check(ctx, name)).await;
    SuiteResult::of(LIVENESS, vec![check], start.elapsed())
}
