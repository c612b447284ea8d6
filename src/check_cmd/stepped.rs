//! `leasecheck check --mode stepped`: plans generated from the seed (S, S+1, ... with
//! `--plans`), or the written plan of `--plan FILE`, each run one step at a time on one
//! database of a throwaway cluster; the first plan that does not pass (its history not
//! linearizable, or a call not answering as its step expects; else the last plan) is
//! written out, its text form as `plan.txt` when it did not pass.

use super::{async_runtime, print_figures, CheckArgs, RunFiles, HISTORY};
use anyhow::{bail, Context};
use harness::campaign::{Progress, Target};
use harness::stepped::{
    self, ClusterControl, Plan, PlanConfig, Report, RunOptions, Stage, StepOptions,
};
use indicatif::{ProgressBar, ProgressStyle};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// The plans a run runs.
enum Plans {
    /// The plans of seeds `first`, `first + 1`, ... (`count` of them).
    Drawn {
        config: PlanConfig,
        first: u64,
        count: u64,
    },
    /// The plan of `--plan FILE`.
    Written { plan: Plan, file: PathBuf },
}

impl Plans {
    fn of(args: &CheckArgs, seed: u64) -> anyhow::Result<Plans> {
        Ok(match &args.plan {
            Some(file) => Plans::Written {
                plan: read_plan(file)?,
                file: file.clone(),
            },
            None => Plans::Drawn {
                config: plan_config(args)?,
                first: seed,
                count: args.plans.unwrap_or(1).max(1),
            },
        })
    }

    fn count(&self) -> u64 {
        match self {
            Plans::Drawn { count, .. } => *count,
            Plans::Written { .. } => 1,
        }
    }

    /// The `k`th plan (from 0).
    fn plan(&self, k: u64) -> anyhow::Result<Plan> {
        match self {
            Plans::Drawn { config, first, .. } => {
                Ok(Plan::from_seed(config, first.wrapping_add(k))?)
            }
            Plans::Written { plan, .. } => Ok(plan.clone()),
        }
    }

    /// What the run runs, for its first line.
    fn announce(&self) -> String {
        match self {
            Plans::Drawn {
                config,
                first,
                count,
            } => format!(
                "{count} plan(s) of 1-{} steps, {} processes x {} keys, seed {first} (repeat with --mode stepped --seed {first})",
                config.max_steps,
                range(&config.processes),
                range(&config.keys),
            ),
            Plans::Written { plan, file } => format!(
                "the plan of {} ({} steps, {} processes x {} keys)",
                file.display(),
                plan.steps.len(),
                plan.workload.processes,
                plan.workload.keys
            ),
        }
    }
}

/// The written plan of `file`; a plan of no steps is refused (it would pass on nothing).
fn read_plan(file: &Path) -> anyhow::Result<Plan> {
    let text = std::fs::read_to_string(file)
        .with_context(|| format!("reading the plan file {}", file.display()))?;
    let plan = Plan::from_text(&text).with_context(|| format!("plan file {}", file.display()))?;
    if plan.steps.is_empty() {
        bail!(
            "plan file {}: the plan has no steps: write one step a line, e.g. `p0 acquire k0 as own ttl 5s`",
            file.display()
        );
    }
    Ok(plan)
}

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
    let plans = Plans::of(args, seed)?;
    println!(
        "check: {target} on PostgreSQL {}, stepped, {}",
        args.major,
        plans.announce()
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
            // The throwaway cluster is the run's own: a plan's restart steps restart it.
            let control = ClusterControl::new(cluster, stage.database().to_string());
            let bar = Arc::new(plan_bar(plans.count()));
            let ran = run_plans(&runtime, (&stage, &control), &plans, &options, &bar);
            bar.0.finish_and_clear();
            ran?
        }
        Err(e) => {
            let plan = plans.plan(0)?;
            let postgres = cluster.version().full.clone();
            let report = Report::infrastructure(e, postgres, &plan);
            (plan, report, 0)
        }
    };
    write_out(args, target, dir, (&plan, &report), (&plans, ran))
}

/// Runs the plans in order until one does not come out linearizable; that plan and its
/// report, or the last ones, and how many plans ran.
fn run_plans(
    runtime: &tokio::runtime::Runtime,
    (stage, control): (&Stage, &ClusterControl),
    plans: &Plans,
    options: &RunOptions,
    bar: &Arc<PlanBar>,
) -> anyhow::Result<(Plan, Report, u64)> {
    let mut last = None;
    for k in 0..plans.count() {
        let plan = plans.plan(k)?;
        let report = runtime.block_on(stepped::run_controlled(
            stage,
            Some(control),
            &plan,
            options,
            bar.clone(),
        ));
        bar.0.inc(1);
        let stop = report.judgement().exit() != model::Exit::Passed;
        last = Some((plan, report, k + 1));
        if stop {
            break;
        }
    }
    last.context("no plan ran")
}

/// Writes the run's files and prints the verdict; the exit status. `plans_run` counts the
/// plans that ran.
fn write_out(
    args: &CheckArgs,
    target: Target,
    dir: &Path,
    (plan, report): (&Plan, &Report),
    (plans, plans_run): (&Plans, u64),
) -> anyhow::Result<i32> {
    let files = RunFiles::new(dir);
    let what_ran = match (plan.seed(), plans) {
        (Some(seed), _) => format!("seed {seed}"),
        (None, Plans::Written { file, .. }) => format!("plan {}", file.display()),
        (None, Plans::Drawn { .. }) => "a plan written by hand".into(),
    };
    let title = format!("{target}: stepped plan of {what_ran}");
    let timeline =
        files.write_timeline(args.timeline, &report.run, report.verdict.as_ref(), &title)?;
    let mut verdict = stepped::verdict_json(report, target, plan, files.history_name(), timeline);
    if let Some(fields) = verdict.as_object_mut() {
        let first_seed = match plans {
            Plans::Drawn { first, .. } => Some(*first),
            Plans::Written { .. } => None,
        };
        fields.insert("first_seed".into(), first_seed.into());
        fields.insert("plans_run".into(), plans_run.into());
    }
    files.write_verdict(&verdict)?;
    let outcome = &report.run.outcome;
    let judgement = report.judgement();
    let passed = judgement.exit() == model::Exit::Passed;
    if !passed || plans.count() == 1 {
        print!("{plan}");
    }
    println!("{outcome}");
    for unmet in &report.unmet {
        println!("EXPECTATION NOT MET: {unmet}");
    }
    files.print_timeline(timeline);
    print_figures(&report.run.figures);
    files.print_paths(&report.run, &what_ran);
    print_repeat(&files, plan, plans, passed)?;
    Ok(judgement.exit().code())
}

/// How to run the plan again: its seed, and for a plan that did not pass its text form,
/// written beside the verdict (a written plan that passed: the file it came from).
fn print_repeat(files: &RunFiles, plan: &Plan, plans: &Plans, passed: bool) -> anyhow::Result<()> {
    if let Some(seed) = plan.seed() {
        println!("repeat this plan with --mode stepped --seed {seed}");
    }
    let file = match plans {
        _ if !passed => Some(files.write_plan(plan)?),
        Plans::Written { file, .. } => Some(file.clone()),
        Plans::Drawn { .. } => None,
    };
    if let Some(file) = file {
        println!(
            "repeat this plan with --mode stepped --plan {}",
            file.display()
        );
    }
    Ok(())
}
