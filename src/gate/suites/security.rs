//! The gate's "security" suite: harness::security's checks, then the attack-surface suite
//! ([`surface`]).

use crate::gate::ctx::{active_sql, bounded, is_hang, Ctx};
use crate::gate::listing::{Listing, Planned};
use crate::gate::outcome::{CheckResult, SuiteResult};
use harness::judgement::Cause;
use std::time::{Duration, Instant};

#[path = "security/surface.rs"]
pub(in crate::gate) mod surface;

pub(super) const SUITE: super::Suite = super::Suite {
    name: "security",
    order: 70,
    cost: [36, 45],
    checks,
    run: |c| Box::pin(security(c)),
};

/// The security checks, then the attack-surface classes of the size on the major.
pub(super) fn checks(listing: &Listing<'_>) -> Vec<Planned> {
    let why = "it logs in as roles it creates (trust authentication), runs this machine's \
               pg_dump and psql against the server and crashes it";
    let security = harness::security::checks();
    let security = security.iter().map(|c| c.name.to_string());
    security
        .chain(surface::names(listing))
        .map(|name| Planned::on_managed(name, why))
        .collect()
}

pub(super) async fn security(ctx: &Ctx<'_>) -> SuiteResult {
    let start = Instant::now();
    let mut checks = Vec::new();
    for check in harness::security::checks() {
        ctx.say("security", check.name);
        let one = async {
            let report =
                harness::security::run_against(ctx.cluster, ctx.extension(), |n| n == check.name)
                    .await;
            match report.outcomes.into_iter().next() {
                Some(o) => CheckResult::judged(check.name, o.result, o.elapsed),
                None => CheckResult::infrastructure(
                    check.name,
                    Cause::Harness.message("the check did not run"),
                    Duration::ZERO,
                ),
            }
        };
        // The suite bounds each check at 60 s itself; this only adds the SQL in flight.
        let result = bounded(ctx, check.name, Duration::from_secs(90), one).await;
        let stop = is_hang(&result);
        checks.push(result);
        if stop {
            break;
        }
    }
    let surface_started = Instant::now();
    let timeout = surface::TIMEOUT;
    match tokio::time::timeout(timeout, surface::checks(ctx)).await {
        Ok(results) => checks.extend(results),
        Err(_) => checks.push(CheckResult::infrastructure(
            format!("{}the suite", surface::PREFIX),
            format!(
                "hung: the attack-surface suite did not finish within {timeout:?}; {}",
                active_sql(ctx.cluster).await
            ),
            surface_started.elapsed(),
        )),
    }
    SuiteResult::of("security", checks, start.elapsed())
}
