//! The gate's "stepped" suite: the late plans, the race plans and drawn plans, each run one
//! step at a time and judged by the model's checker.

use crate::gate::ctx::{bounded, judged, write_page, Ctx};
use crate::gate::listing::{Listing, Planned};
use crate::gate::outcome::{CheckResult, SuiteResult};
use crate::gate::Size;
use harness::campaign::{self};
use harness::stepped::{self, Plan, RunOptions, Stage};
use std::sync::Arc;
use std::time::{Duration, Instant};

pub(super) const SUITE: super::Suite = super::Suite {
    name: "stepped",
    order: 50,
    cost: [30, 70],
    checks,
    run: |c| Box::pin(stepped_plans(c)),
};

/// Every step has its own timeout (the runner's); this bounds a plan's whole run.
const PLAN_TIMEOUT: Duration = Duration::from_secs(180);

/// The race plans (every call behind a transaction holding the key's row lock), then
/// drawn plans of seeds S, S+1, ... (quick 12, full 150), stopping at the first check that
/// does not pass.
pub(super) async fn stepped_plans(ctx: &Ctx<'_>) -> SuiteResult {
    let start = Instant::now();
    let drawn_count = drawn_count(ctx.size);
    let stage = match Stage::new(ctx.cluster, ctx.target()).await {
        Ok(stage) => stage,
        Err(e) => {
            let check =
                CheckResult::infrastructure("stepped stage", e.to_string(), start.elapsed());
            return SuiteResult::of("stepped", vec![check], start.elapsed());
        }
    };
    let races = match stepped::race_plans() {
        Ok(plans) => plans,
        Err(e) => {
            let check = CheckResult::infrastructure("race plans", e.to_string(), start.elapsed());
            return SuiteResult::of("stepped", vec![check], start.elapsed());
        }
    };
    // The mutant hunts' contended plans: 2-3 sessions on one key, transactions holding its
    // row lock across steps, blocking acquires, TTLs short enough to lapse mid-wait.
    let config = harness::stepped::PlanConfig::contended();
    let drawn = (0..drawn_count).map(|k| {
        let seed = ctx.seed.wrapping_add(k);
        let plan = Plan::from_seed(&config, seed).map_err(|e| e.to_string());
        (drawn_name(seed), plan)
    });
    let late = harness::late::plans();
    let total = races.len() as u64 + late.len() as u64 + drawn_count;
    let races = (1..).zip(races).map(|(k, p)| (race_name(k), Ok(p)));
    let mut checks = Vec::new();
    // The late plans: calls late in a long statement (a batch, a block), judged likewise.
    for (k, plan) in late.iter().enumerate() {
        let name = late_name(k, plan);
        ctx.say("stepped", &format!("{name} ({}/{total})", k + 1));
        let check = bounded(ctx, &name, PLAN_TIMEOUT, one_late_plan(ctx, &name, plan)).await;
        let stop = check.status != crate::gate::outcome::Status::Passed;
        checks.push(check);
        if stop {
            return SuiteResult::of("stepped", checks, start.elapsed());
        }
    }
    for (k, (name, plan)) in races.chain(drawn).enumerate() {
        let k = k + late.len();
        ctx.say("stepped", &format!("{name} ({}/{total})", k + 1));
        let check = match plan {
            Ok(plan) => {
                bounded(
                    ctx,
                    &name,
                    PLAN_TIMEOUT,
                    one_plan(ctx, &stage, &name, &plan),
                )
                .await
            }
            Err(why) => CheckResult::infrastructure(&name, why, start.elapsed()),
        };
        let stop = check.status != crate::gate::outcome::Status::Passed;
        checks.push(check);
        if stop {
            break;
        }
    }
    SuiteResult::of("stepped", checks, start.elapsed())
}

/// How many drawn plans a size runs.
fn drawn_count(size: Size) -> u64 {
    match size {
        Size::Quick => 12,
        Size::Full => 150,
    }
}

fn late_name(k: usize, plan: &harness::late::Plan) -> String {
    format!("late plan {} ({})", k + 1, plan.name)
}

fn race_name(k: usize) -> String {
    format!("race plan {k}")
}

fn drawn_name(seed: u64) -> String {
    format!("plan of seed {seed}")
}

/// The late plans, the race plans and the drawn plans of seeds S, S+1, ..., in order.
pub(super) fn checks(listing: &Listing<'_>) -> Vec<Planned> {
    let late = harness::late::plans();
    let late = late.iter().enumerate().map(|(k, p)| late_name(k, p));
    let races = (1..=stepped::race_plans().map_or(0, |p| p.len())).map(race_name);
    let drawn = (0..drawn_count(listing.size)).map(|k| drawn_name(listing.seed.wrapping_add(k)));
    let names = late.chain(races).chain(drawn);
    names.map(Planned::on_connection).collect()
}

async fn one_late_plan(ctx: &Ctx<'_>, name: &str, plan: &harness::late::Plan) -> CheckResult {
    let start = Instant::now();
    let report = harness::late::run(ctx.cluster, ctx.target(), plan, Duration::from_secs(10)).await;
    let verdict = report.outcome.verdict();
    let timeline = report.history.as_ref().zip(verdict.as_ref()).map(|(h, v)| {
        let page = harness::timeline::render(h, v, &format!("stepped {name}"));
        let dir = name.replace([' ', '(', ')'], "-");
        write_page(
            &ctx.out_dir.join(format!("stepped-{dir}/timeline.html")),
            &page,
        )
    });
    judged(name, &report.outcome, timeline.flatten(), ctx, start)
}

async fn one_plan(ctx: &Ctx<'_>, stage: &Stage, name: &str, plan: &Plan) -> CheckResult {
    let start = Instant::now();
    let report = stepped::run(
        stage,
        plan,
        &RunOptions::default(),
        Arc::new(campaign::Silent),
    )
    .await;
    let dir = ctx
        .out_dir
        .join(format!("stepped-{}", name.replace(' ', "-")));
    // The checker's verdict and the plan's expected answers, judged as one.
    let judgement = report.judgement();
    let timeline = (judgement.exit() == model::Exit::Finding)
        .then(|| report.timeline(&format!("stepped {name}")))
        .flatten()
        .and_then(|page| write_page(&dir.join("timeline.html"), &page));
    let shown = !judgement.is_pass();
    let mut result = CheckResult::of(name, judgement, start.elapsed());
    if shown {
        result.timeline = timeline.map(|p| ctx.link(&p));
    }
    if result.status != crate::gate::outcome::Status::Passed {
        // The plan's text form, for `leasecheck check --mode stepped --plan`.
        let repeat = write_page(&dir.join("plan.txt"), &plan.to_text()).map(|path| {
            format!(
                "repeat this plan with leasecheck check --mode stepped --plan {}\n",
                path.display()
            )
        });
        result.message = format!("{plan}{}\n{}", repeat.unwrap_or_default(), result.message);
    }
    result
}
