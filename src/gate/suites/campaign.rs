//! The gate's "campaign" suite: free-running campaigns judged by the model's checker, then
//! the fenced resource (what epochs are for, SEMANTICS section 5): workers that pause past
//! their TTL write with their old epoch through a guard, which must refuse every such write.

use crate::gate::ctx::{bounded, judged, write_page, Ctx};
use crate::gate::listing::{Listing, Planned};
use crate::gate::outcome::{Branches, CheckResult, SuiteResult};
use crate::gate::Size;
use harness::campaign::{self, Campaign, Length, Target};
use harness::fenced::FencedConfig;
use harness::judgement::Judgement;
use model::branch::Branch;
use model::Budget;
use std::sync::Arc;
use std::time::{Duration, Instant};

pub(super) const SUITE: super::Suite = super::Suite {
    name: "campaign",
    order: 40,
    cost: [3, 14],
    checks,
    run: |c| Box::pin(free_campaigns(c)),
};

/// Recording is bounded by the ops and the call timeout; this bounds a harness hang.
const CAMPAIGN_TIMEOUT: Duration = Duration::from_secs(900);

/// Free-running campaigns on the race-hunting workload of the mutant hunts (8 processes on
/// 2 keys, pairs of processes sharing an owner, a fifth of the turns in transactions): quick
/// 3 x 1,500 ops, full 8 x 3,000, seeds S, S+1, ..., stopping at the first that does not pass.
pub(super) async fn free_campaigns(ctx: &Ctx<'_>) -> SuiteResult {
    let start = Instant::now();
    let (campaigns, ops) = sized(ctx.size, ctx.campaign_ops);
    let mut checks = Vec::new();
    for k in 0..campaigns {
        let check = one_campaign(ctx, ctx.seed.wrapping_add(k), ops).await;
        let stop = check.status != crate::gate::outcome::Status::Passed;
        checks.push(check);
        if stop {
            return SuiteResult::of("campaign", checks, start.elapsed());
        }
    }
    let covered = Branches::sum(checks.iter().map(|c| c.coverage.as_ref())).unwrap_or_default();
    ctx.say("campaign", &format!("their linearizations {}", covered.line()));
    checks.push(branches_check(&covered, start.elapsed()));
    checks.push(fenced(ctx).await);
    SuiteResult::of("campaign", checks, start.elapsed())
}

/// How many campaigns of how many calls a size runs (`ops`: `--campaign-ops`).
fn sized(size: Size, ops: Option<u64>) -> (u64, u64) {
    let (campaigns, default) = match size {
        Size::Quick => (3, 1_500),
        Size::Full => (8, 3_000),
    };
    (campaigns, ops.unwrap_or(default))
}

/// A campaign's check name.
fn name(workload: &harness::workload::Workload, ops: u64, seed: u64) -> String {
    let (processes, keys) = (workload.processes, workload.keys);
    format!("{processes} processes x {keys} keys, {ops} ops, seed {seed}")
}

/// One check per campaign, of seeds S, S+1, ..., the branches they took, then the fenced
/// resource.
pub(super) fn checks(listing: &Listing<'_>) -> Vec<Planned> {
    let (campaigns, ops) = sized(listing.size, listing.campaign_ops);
    let workload = harness::workload::Workload::shared_owners();
    let seeds = (0..campaigns).map(|k| listing.seed.wrapping_add(k));
    let names = seeds.map(|seed| name(&workload, ops, seed));
    let fenced = FencedConfig::short(Target::PgLease, true, listing.seed);
    let names = names.chain([BRANCHES_CHECK.to_string(), fenced_name(&fenced)]);
    names.map(Planned::on_connection).collect()
}

/// The fenced workload records for 4 s and checks its lease calls; this bounds a hang.
const FENCED_TIMEOUT: Duration = Duration::from_secs(180);

fn fenced_name(c: &FencedConfig) -> String {
    format!(
        "fenced resource: {} workers x {} resources, guarded, seed {}",
        c.workers, c.resources, c.seed
    )
}

/// The fenced resource on the build: no deposed holder's write gets through the guard, and
/// the lease calls are linearizable.
async fn fenced(ctx: &Ctx<'_>) -> CheckResult {
    let start = Instant::now();
    let config = FencedConfig::short(ctx.target(), true, ctx.seed);
    let name = fenced_name(&config);
    ctx.say("campaign", &name);
    let run = async {
        let judgement = match harness::fenced::run(ctx.cluster, &config).await {
            Ok(report) => report.judgement(),
            Err(e) => Judgement::no_verdict_from_text(e.to_string()),
        };
        CheckResult::of(&name, judgement, start.elapsed())
    };
    bounded(ctx, &name, FENCED_TIMEOUT, run).await
}

/// The check that the campaigns reached the branches a pass must have exercised.
const BRANCHES_CHECK: &str = "spec branches the campaigns took";

/// Branches every passing run of the campaigns must have taken: without them a pass says
/// nothing about grants, takeovers of lapsed leases, contention, renewals, releases and
/// reads of a live lease (each is reached hundreds of times in a quick run here).
const REQUIRED: [Branch; 6] = [
    Branch::AcquireFirstGrant,
    Branch::AcquireTakeover,
    Branch::AcquireDenied,
    Branch::RenewOk,
    Branch::ReleaseOk,
    Branch::InspectLive,
];

/// Passed when the campaigns took every [`REQUIRED`] branch, else no verdict: the run
/// cannot say the build handles what it never exercised.
fn branches_check(c: &Branches, elapsed: Duration) -> CheckResult {
    let taken = format!("their linearizations {}", c.line());
    let missed: Vec<&str> = REQUIRED
        .iter()
        .map(|b| b.name())
        .filter(|name| !c.0.contains_key(*name))
        .collect();
    if missed.is_empty() {
        return CheckResult {
            message: taken,
            ..CheckResult::passed(BRANCHES_CHECK, elapsed)
        };
    }
    let why = format!(
        "the campaigns passed but never took the required branch(es) {}: {taken}; a pass \
         would say nothing about them (run the full size, more calls per campaign with \
         --campaign-ops, or other seeds)",
        missed.join(", "),
    );
    CheckResult::infrastructure(BRANCHES_CHECK, why, elapsed)
}

/// One campaign's check (with the branches its linearization took when it passed).
async fn one_campaign(ctx: &Ctx<'_>, seed: u64, ops: u64) -> CheckResult {
    let start = Instant::now();
    let dir = ctx.out_dir.join(format!("campaign-seed-{seed}"));
    let campaign = Campaign {
        workload: harness::workload::Workload::shared_owners(),
        budget: Budget {
            time: Some(Duration::from_secs(120)),
            states: Some(20_000_000),
            ..Budget::default()
        },
        history_file: Some(dir.join("history.jsonl")),
        ..Campaign::new(ctx.target(), Length::Ops(ops), seed)
    };
    let name = name(&campaign.workload, ops, seed);
    ctx.say("campaign", &name);
    let run = async {
        let report = campaign::run(ctx.cluster, &campaign, Arc::new(campaign::Silent)).await;
        let verdict = report.outcome.verdict();
        let timeline = report.history.as_ref().zip(verdict.as_ref()).map(|(h, v)| {
            let page = harness::timeline::render(h, v, &format!("campaign {name}"));
            write_page(&dir.join("timeline.html"), &page)
        });
        judged(&name, &report.outcome, timeline.flatten(), ctx, start)
    };
    bounded(ctx, &name, CAMPAIGN_TIMEOUT, run).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gate::outcome::Status;

    fn reaching(branches: &[Branch]) -> Branches {
        Branches(branches.iter().map(|b| (b.name().to_string(), 3)).collect())
    }

    #[test]
    fn campaigns_that_took_every_required_branch_pass_saying_how_many() {
        let check = branches_check(&reaching(&REQUIRED), Duration::ZERO);
        assert_eq!(check.status, Status::Passed, "{}", check.message);
        assert!(
            check.message.starts_with(&format!(
                "their linearizations reached 6 of the spec's {} branches (never: acquire: \
                 grant after release",
                Branch::ALL.len()
            )),
            "{}",
            check.message
        );
    }

    #[test]
    fn campaigns_that_never_took_over_a_lapsed_lease_have_no_verdict() {
        let without: Vec<Branch> = REQUIRED
            .into_iter()
            .filter(|b| *b != Branch::AcquireTakeover)
            .collect();
        let check = branches_check(&reaching(&without), Duration::ZERO);
        assert_eq!(check.status, Status::Infrastructure);
        assert!(
            check
                .message
                .contains("never took the required branch(es) acquire: takeover after lapse:"),
            "{}",
            check.message
        );
        // Every branch but a required one is still no verdict.
        let all_but: Vec<Branch> = Branch::ALL
            .into_iter()
            .filter(|b| *b != Branch::InspectLive)
            .collect();
        let check = branches_check(&reaching(&all_but), Duration::ZERO);
        assert_eq!(check.status, Status::Infrastructure, "{}", check.message);
    }
}
