//! The gate's "campaign" suite: free-running campaigns judged by the model's checker.

use super::ctx::{bounded, judged, write_page, Ctx};
use super::outcome::{CheckResult, SuiteResult};
use super::suites::{Listing, Planned};
use super::Size;
use harness::campaign::{self, Campaign, Length};
use model::Budget;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Recording is bounded by the ops and the call timeout; this bounds a harness hang.
const CAMPAIGN_TIMEOUT: Duration = Duration::from_secs(900);

/// Free-running campaigns on the race-hunting workload of the mutant hunts (8 processes on
/// 2 keys, pairs of processes sharing an owner, a fifth of the turns in transactions): quick
/// 3 x 1,500 ops, full 8 x 3,000, seeds S, S+1, ..., stopping at the first that does not pass.
pub(super) async fn free_campaigns(ctx: &Ctx<'_>) -> SuiteResult {
    let start = Instant::now();
    let (campaigns, ops) = sized(ctx.size);
    let mut checks = Vec::new();
    for k in 0..campaigns {
        let check = one_campaign(ctx, ctx.seed.wrapping_add(k), ops).await;
        let stop = check.status != super::outcome::Status::Passed;
        checks.push(check);
        if stop {
            break;
        }
    }
    SuiteResult::of("campaign", checks, start.elapsed())
}

/// How many campaigns of how many calls a size runs.
fn sized(size: Size) -> (u64, u64) {
    match size {
        Size::Quick => (3, 1_500),
        Size::Full => (8, 3_000),
    }
}

/// A campaign's check name.
fn name(workload: &harness::workload::Workload, ops: u64, seed: u64) -> String {
    let (processes, keys) = (workload.processes, workload.keys);
    format!("{processes} processes x {keys} keys, {ops} ops, seed {seed}")
}

/// One check per campaign, of seeds S, S+1, ...
pub(super) fn checks(listing: &Listing<'_>) -> Vec<Planned> {
    let (campaigns, ops) = sized(listing.size);
    let workload = harness::workload::Workload::shared_owners();
    let seeds = (0..campaigns).map(|k| listing.seed.wrapping_add(k));
    seeds
        .map(|seed| Planned::on_connection(name(&workload, ops, seed)))
        .collect()
}

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
