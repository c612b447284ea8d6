//! The gate's registry of suites: each is named, lists the checks it runs for a size on a
//! major with what each needs ([`Planned`]), runs on one major's cluster against the build
//! under test ([`Ctx`]), and returns a typed [`SuiteResult`]; its body is in a file of its
//! own. `--list` prints the listings; on a server the gate does not manage (`--dsn`) a suite
//! whose every check needs a managed server is reported skipped from its listing, unrun.

use super::ctx::Ctx;
use super::listing::{Listing, Planned};
use super::outcome::{CheckResult, SuiteResult};
use super::Size;
use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

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
    checks: fn(&Listing<'_>) -> Vec<Planned>,
    run: for<'a> fn(&'a Ctx<'a>) -> SuiteFuture<'a>,
}

impl Suite {
    /// Runs the suite; on a server the gate does not manage, a suite whose every check
    /// needs a managed one is not run and each check is reported skipped, saying why.
    pub async fn run(&self, ctx: &Ctx<'_>) -> SuiteResult {
        if !ctx.cluster.is_managed() {
            let planned = self.checks(&ctx.listing());
            if !planned.is_empty() && planned.iter().all(|p| p.needs_managed.is_some()) {
                let skipped = planned
                    .iter()
                    .map(|p| CheckResult::skipped(&p.name, p.needs_managed.unwrap_or_default()))
                    .collect();
                return SuiteResult::of(self.name, skipped, Duration::ZERO);
            }
        }
        (self.run)(ctx).await
    }

    /// The checks the suite runs for `listing`, in order.
    pub fn checks(&self, listing: &Listing<'_>) -> Vec<Planned> {
        (self.checks)(listing)
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
            checks: super::conformance_suite::liveness_checks,
            run: |c| Box::pin(super::conformance_suite::liveness(c)),
        },
        Suite {
            name: "installcheck",
            cost: [12, 12],
            checks: super::installcheck_suite::checks,
            run: |c| Box::pin(super::installcheck_suite::installcheck(c)),
        },
        Suite {
            name: "conformance",
            cost: [24, 24],
            checks: super::conformance_suite::checks,
            run: |c| Box::pin(super::conformance_suite::conformance(c)),
        },
        Suite {
            name: "campaign",
            cost: [3, 14],
            checks: super::campaign_suite::checks,
            run: |c| Box::pin(super::campaign_suite::free_campaigns(c)),
        },
        Suite {
            name: "stepped",
            cost: [30, 70],
            checks: super::stepped_suite::checks,
            run: |c| Box::pin(super::stepped_suite::stepped_plans(c)),
        },
        Suite {
            name: "matrix",
            cost: [6, 215],
            checks: super::matrix_suite::checks,
            run: |c| Box::pin(super::matrix_suite::matrix(c)),
        },
        Suite {
            name: "security",
            cost: [36, 45],
            checks: super::security_suite::checks,
            run: |c| Box::pin(super::security_suite::security(c)),
        },
        Suite {
            name: "faults",
            cost: [33, 70],
            checks: super::fault_suite::checks,
            run: |c| Box::pin(super::fault_suite::faults(c)),
        },
        Suite {
            name: "bench",
            cost: [39, 39],
            checks: super::bench_suite::checks,
            run: |c| Box::pin(super::bench_suite::bench(c)),
        },
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn listing(size: Size, major: u32) -> Listing<'static> {
        Listing {
            size,
            seed: 7,
            major,
            faults: &nemesis::Fault::QUICK,
            bench_baseline: false,
        }
    }

    /// Every suite lists its checks at each size on each supported major, each name once
    /// (the summary, JUnit and the merge tell checks apart by name).
    #[test]
    fn every_suite_lists_distinct_checks_at_every_size_and_major() {
        for major in harness::pg::majors::supported() {
            for size in [Size::Quick, Size::Full] {
                for suite in suites() {
                    let names: Vec<String> = suite
                        .checks(&listing(size, major))
                        .into_iter()
                        .map(|p| p.name)
                        .collect();
                    assert!(!names.is_empty(), "{} on PG {major}", suite.name);
                    let mut unique = names.clone();
                    unique.sort();
                    unique.dedup();
                    assert_eq!(unique.len(), names.len(), "{} on PG {major}", suite.name);
                }
            }
        }
    }

    /// What runs on a server the gate does not manage: the liveness guard, the conformance
    /// checks that need no restart, the campaigns and the stepped plans; every check of the
    /// other suites needs a managed server, so those suites are skipped there unrun.
    #[test]
    fn the_suites_that_run_on_an_existing_server_are_those_needing_only_a_connection() {
        let quick = listing(Size::Quick, 15);
        let runs_unmanaged: Vec<&str> = suites()
            .iter()
            .filter(|s| s.checks(&quick).iter().any(|p| p.needs_managed.is_none()))
            .map(|s| s.name)
            .collect();
        assert_eq!(
            runs_unmanaged,
            [LIVENESS, "conformance", "campaign", "stepped"]
        );
        let base = quick.seed;
        let seeded = Listing {
            seed: base + 1,
            ..quick
        };
        let campaign = suites().into_iter().find(|s| s.name == "campaign");
        let names = |l: &Listing<'_>| campaign.map(|s| s.checks(l)).unwrap_or_default();
        assert_ne!(
            names(&quick),
            names(&seeded),
            "a campaign's name carries its seed"
        );
    }
}
