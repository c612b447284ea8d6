//! `leasecheck check --mode stepped`: plans generated from the seed (S, S+1, ... with
//! `--plans`), each run one step at a time on one database of a throwaway cluster; the
//! first plan that does not come out linearizable (else the last one) is written out.

use super::{async_runtime, print_figures, CheckArgs, RunFiles, HISTORY};
use anyhow::Context;
use harness::campaign::{Progress, Target};
use harness::stepped::{self, Plan, PlanConfig, Report, RunOptions, Stage, StepOptions};
use indicatif::{ProgressBar, ProgressStyle};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

/// The plans of the run, as the options shape them.
fn plan_config(args: &CheckArgs) -> anyhow::Result<PlanConfig> {
    let mut config = PlanConfig::default();
    if let Some(p) = args.processes {
        config.processes = p..=p;
    }
    if let Some(k) = args.keys {
        config.keys = k..=k;
    }
    if let Some(n) = args.steps {
        config.max_steps = n;
    }
    if !args.isolations.is_empty() {
        config.isolations = args.isolations.iter().map(|&i| (i, 1)).collect();
        config.workload.isolations = args.isolations.clone();
    }
    config.validate()?;
    Ok(config)
}

fn range(r: &std::ops::RangeInclusive<u32>) -> String {
    if r.start() == r.end() {
        r.start().to_string()
    } else {
        format!("{}-{}", r.start(), r.end())
    }
}

/// Progress over plans.
struct PlanBar(ProgressBar);

impl Progress for PlanBar {
    fn recorded(&self, ops: u64) {
        self.0.set_message(format!("{ops} ops in this plan"));
    }

    fn checking(&self) {
        self.0.set_message("checking the plan's history");
    }
}

fn plan_bar(plans: u64) -> PlanBar {
    let bar = ProgressBar::new(plans);
    if let Ok(style) = ProgressStyle::with_template(
        "{spinner} [{elapsed_precise}] {bar:40} {pos}/{len} plans {msg}",
    ) {
        bar.set_style(style);
    }
    bar.enable_steady_tick(Duration::from_millis(200));
    PlanBar(bar)
}

/// Runs the plans; the exit status.
pub(super) fn run(args: &CheckArgs, seed: u64, dir: &Path) -> anyhow::Result<i32> {
    let target: Target = args.target.parse()?;
    let config = plan_config(args)?;
    let plans = args.plans.unwrap_or(1).max(1);
    println!(
        "check: {target} on PostgreSQL {}, stepped, {plans} plan(s) of 1-{} steps, {} processes x {} keys, seed {seed} (repeat with --mode stepped --seed {seed})",
        args.major,
        config.max_steps,
        range(&config.processes),
        range(&config.keys),
    );
    let (_install, cluster) = crate::start(args.major)?;
    let runtime = async_runtime()?;
    let options = RunOptions {
        steps: StepOptions {
            step_timeout: args
                .step_timeout
                .unwrap_or(StepOptions::default().step_timeout),
            ..StepOptions::default()
        },
        call_timeout: args.call_timeout,
        budget: args.budget(),
        history_file: Some(dir.join(HISTORY)),
    };
    let (plan, report, ran) = match runtime.block_on(Stage::new(&cluster, target)) {
        Ok(stage) => {
            let bar = Arc::new(plan_bar(plans));
            let ran = run_plans(&runtime, &stage, &config, seed, plans, &options, &bar);
            bar.0.finish_and_clear();
            ran?
        }
        Err(e) => {
            let plan = Plan::from_seed(&config, seed)?;
            let postgres = cluster.version().full.clone();
            let report = Report::infrastructure(e, postgres, &plan);
            (plan, report, 0)
        }
    };
    write_out(args, target, dir, (&plan, &report), (seed, ran))
}

/// Runs plans seeded `seed`, `seed + 1`, ... until one does not come out linearizable;
/// that plan and its report, or the last ones, and how many plans ran.
fn run_plans(
    runtime: &tokio::runtime::Runtime,
    stage: &Stage<'_>,
    config: &PlanConfig,
    seed: u64,
    plans: u64,
    options: &RunOptions,
    bar: &Arc<PlanBar>,
) -> anyhow::Result<(Plan, Report, u64)> {
    let mut last = None;
    for k in 0..plans {
        let plan = Plan::from_seed(config, seed.wrapping_add(k))?;
        let report = runtime.block_on(stepped::run(stage, &plan, options, bar.clone()));
        bar.0.inc(1);
        let stop = report.run.outcome.exit() != model::Exit::Passed;
        last = Some((plan, report, k + 1));
        if stop {
            break;
        }
    }
    last.context("no plan ran")
}

/// Writes the run's files and prints the verdict; the exit status. `plans` is the first
/// plan's seed and how many plans ran.
fn write_out(
    args: &CheckArgs,
    target: Target,
    dir: &Path,
    (plan, report): (&Plan, &Report),
    (first_seed, plans_run): (u64, u64),
) -> anyhow::Result<i32> {
    let plan_seed = plan.seed().unwrap_or_default();
    let files = RunFiles::new(dir);
    let title = format!("{target}: stepped plan of seed {plan_seed}");
    let timeline =
        files.write_timeline(args.timeline, &report.run, report.verdict.as_ref(), &title)?;
    let mut verdict = stepped::verdict_json(report, target, plan, files.history_name(), timeline);
    if let Some(fields) = verdict.as_object_mut() {
        fields.insert("first_seed".into(), first_seed.into());
        fields.insert("plans_run".into(), plans_run.into());
    }
    files.write_verdict(&verdict)?;
    let outcome = &report.run.outcome;
    if outcome.exit() != model::Exit::Passed || args.plans.unwrap_or(1) == 1 {
        print!("{plan}");
    }
    println!("{outcome}");
    files.print_timeline(timeline);
    print_figures(&report.run.figures);
    files.print_paths(&report.run, plan_seed);
    println!("repeat this plan with --mode stepped --seed {plan_seed}");
    Ok(outcome.exit().code())
}
