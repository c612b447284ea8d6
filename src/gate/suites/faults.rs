//! The gate's "faults" suite: nemesis's named fault checks against the build under test,
//! each on a throwaway cluster of its own (from the major's install) with the fault
//! injected into a recorded history, judged by the model's checker. The negative controls
//! are not run: they test the checks, not the build (`leasecheck faults --controls`).

use crate::gate::ctx::Ctx;
use crate::gate::listing::{Listing, Planned};
use crate::gate::outcome::{CheckResult, SuiteResult};
use crate::gate::Size;
use harness::judgement::Cause;
use nemesis::suite::{self, Run};
use nemesis::Fault;
use std::time::{Duration, Instant};

pub(super) const SUITE: super::Suite = super::Suite {
    name: "faults",
    order: 80,
    cost: [33, 70],
    checks,
    run: |c| Box::pin(faults(c)),
};

/// A check records for a few seconds, restarts its server at most three times and judges
/// within a 60 s checker budget (2-13 s per check seen here); this bounds a hang.
const FAULT_CHECK_TIMEOUT: Duration = Duration::from_secs(180);

/// The faults a size runs: nemesis's quick set (one per class) or every named fault.
pub fn of_size(size: Size) -> &'static [Fault] {
    match size {
        Size::Quick => &Fault::QUICK,
        Size::Full => &Fault::ALL,
    }
}

/// The run's fault checks, each on clusters of its own.
pub(super) fn checks(listing: &Listing<'_>) -> Vec<Planned> {
    let why = "each fault check starts, crashes and restarts clusters of its own from the \
               server's install";
    let faults = listing.faults.iter();
    faults.map(|f| Planned::on_managed(f.name(), why)).collect()
}

pub async fn faults(ctx: &Ctx<'_>) -> SuiteResult {
    let start = Instant::now();
    let install = match ctx.cluster.install() {
        Ok(install) => install,
        Err(e) => {
            let why = Cause::Server.message(e);
            let check = CheckResult::infrastructure("install", why, start.elapsed());
            return SuiteResult::of("faults", vec![check], start.elapsed());
        }
    };
    let mut checks = Vec::new();
    for (k, &fault) in ctx.faults.iter().enumerate() {
        ctx.say(
            "faults",
            &format!("{fault} ({}/{})", k + 1, ctx.faults.len()),
        );
        let run = suite::run_one(fault, Run::Check, install, &ctx.build.files);
        let check = match tokio::time::timeout(FAULT_CHECK_TIMEOUT, run).await {
            Ok(done) => CheckResult::of(fault.name(), done.judgement(), done.duration)
                .covering(done.coverage()),
            Err(_) => CheckResult::infrastructure(
                fault.name(),
                Cause::Stalled.message(format!(
                    "the {fault} check did not finish within {FAULT_CHECK_TIMEOUT:?} \
                     (it ran on a cluster of its own, removed with it)"
                )),
                FAULT_CHECK_TIMEOUT,
            ),
        };
        let stop = crate::gate::ctx::is_hang(&check);
        checks.push(check);
        if stop {
            break;
        }
    }
    SuiteResult::of("faults", checks, start.elapsed())
}
