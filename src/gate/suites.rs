//! The gate's registry of suites: each is named, runs on one major's cluster against the
//! build under test ([`Ctx`]), and returns a typed [`SuiteResult`]; its body is in a file of
//! its own.

use super::ctx::Ctx;
use super::outcome::SuiteResult;
use super::Size;
use std::future::Future;
use std::pin::Pin;

type SuiteFuture<'a> = Pin<Box<dyn Future<Output = SuiteResult> + Send + 'a>>;

/// The suite that runs first: a build whose calls do not answer gets that verdict in
/// seconds, and nothing else runs on it.
pub const LIVENESS: &str = "liveness";

/// One named suite.
#[derive(Clone, Copy)]
pub struct Suite {
    pub name: &'static str,
    /// About how many seconds it takes at quick and full size on one major (measured on
    /// PG 15 on a 2-core machine, results/gate): only a hint that balances `--shard`.
    cost: [u32; 2],
    run: for<'a> fn(&'a Ctx<'a>) -> SuiteFuture<'a>,
}

impl Suite {
    pub async fn run(&self, ctx: &Ctx<'_>) -> SuiteResult {
        (self.run)(ctx).await
    }

    pub fn cost(&self, size: Size) -> u32 {
        match size {
            Size::Quick => self.cost[0],
            Size::Full => self.cost[1],
        }
    }
}

/// Every suite, in the order they run.
pub fn suites() -> Vec<Suite> {
    vec![
        Suite {
            name: LIVENESS,
            cost: [2, 2],
            run: |c| Box::pin(super::conformance_suite::liveness(c)),
        },
        Suite {
            name: "installcheck",
            cost: [12, 12],
            run: |c| Box::pin(super::installcheck_suite::installcheck(c)),
        },
        Suite {
            name: "conformance",
            cost: [24, 24],
            run: |c| Box::pin(super::conformance_suite::conformance(c)),
        },
        Suite {
            name: "campaign",
            cost: [3, 14],
            run: |c| Box::pin(super::campaign_suite::free_campaigns(c)),
        },
        Suite {
            name: "stepped",
            cost: [30, 70],
            run: |c| Box::pin(super::stepped_suite::stepped_plans(c)),
        },
        Suite {
            name: "matrix",
            cost: [6, 215],
            run: |c| Box::pin(super::matrix_suite::matrix(c)),
        },
        Suite {
            name: "security",
            cost: [36, 45],
            run: |c| Box::pin(super::security_suite::security(c)),
        },
        Suite {
            name: "faults",
            cost: [33, 70],
            run: |c| Box::pin(super::fault_suite::faults(c)),
        },
        Suite {
            name: "bench",
            cost: [39, 39],
            run: |c| Box::pin(super::bench_suite::bench(c)),
        },
    ]
}
