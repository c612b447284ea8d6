//! The gate's registry of suites: each is named, lists the checks it runs for a size on a
//! major with what each needs ([`Planned`]), runs on one major's cluster against the build
//! under test ([`Ctx`]), and returns a typed [`SuiteResult`]; its body is in a file of its
//! own. `--list` prints the listings; on a server the gate does not manage (`--dsn`) a suite
//! whose every check needs a managed server is reported skipped from its listing, unrun.
//!
//! Each suite is a file of this directory declaring `pub(super) const SUITE: Suite`; the
//! registry is generated from the directory by `build.rs`.

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
    /// Where it runs among the suites: lowest first (the liveness suite, 10, first; the
    /// files use steps of 10). Distinct per suite.
    order: u16,
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

// Every file of this directory (but this one) is a suite: `build.rs` declares each as a
// module and lists its `SUITE`, so adding a suite is adding its file.
include!(concat!(env!("OUT_DIR"), "/gate_suites.rs"));

/// Every suite, in the order they run (their `order`).
pub fn suites() -> Vec<Suite> {
    let mut all = SUITE_FILES.to_vec();
    all.sort_by_key(|s| s.order);
    all
}

#[cfg(test)]
mod tests {
    use super::*;

    fn listing(size: Size, major: u32) -> Listing<'static> {
        Listing {
            size,
            campaign_ops: None,
            seed: 7,
            major,
            faults: &nemesis::Fault::QUICK,
            bench_baseline: false,
        }
    }

    /// The registry holds every suite file once, in their order, the liveness suite first:
    /// names and orders are distinct (a second file with a name or order already taken
    /// would make the run order or `--suite` ambiguous).
    #[test]
    fn the_suites_run_in_their_order_with_the_liveness_suite_first() {
        let all = suites();
        assert_eq!(all.len(), SUITE_FILES.len());
        assert_eq!(all.first().map(|s| s.name), Some(LIVENESS));
        assert!(
            all.windows(2).all(|w| w[0].order < w[1].order),
            "orders are distinct"
        );
        let mut names: Vec<&str> = all.iter().map(|s| s.name).collect();
        let run_order = names.clone();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), all.len(), "names are distinct: {run_order:?}");
        for known in [
            "installcheck",
            "conformance",
            "stepped",
            "security",
            "faults",
            "bench",
        ] {
            assert!(run_order.contains(&known), "{known} in {run_order:?}");
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
        let runs_unmanaged = |name: &str| {
            let suite = suites().into_iter().find(|s| s.name == name);
            let planned = suite.map(|s| s.checks(&quick)).unwrap_or_default();
            planned.iter().any(|p| p.needs_managed.is_none())
        };
        for name in [LIVENESS, "conformance", "campaign", "stepped"] {
            assert!(runs_unmanaged(name), "{name} runs on an existing server");
        }
        for name in ["installcheck", "matrix", "security", "faults", "bench"] {
            assert!(!runs_unmanaged(name), "{name} needs a managed server");
        }
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
