//! Hunting a SQL mutant: campaigns (free-running ones from fixed seeds, the written race
//! plans in order, stepped plans drawn from fixed seeds, in the order its [`Mutant::hunt`]
//! lists) until a verdict kills it ([`judge`]), within a bound; and the control, pg_lease
//! itself, through the same campaigns.
//!
//! A campaign that ends as an infrastructure failure (the mutant failed to install, a hang,
//! a harness error) ends the hunt as such: it is reported, never counted as a kill.

mod checks;

use super::{judge, judge_control, Judged, Kill, Mode, Mutant};
use crate::campaign::{self, Campaign, Figures, InfraError, Length, Outcome, Silent, Target};
use crate::judgement::Judgement;
use crate::pg::Cluster;
use crate::stepped::{self, Plan, PlanConfig, RunOptions, Stage};
use crate::workload::Workload;
use model::{Budget, Invariant};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The bounds of a hunt.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HuntOptions {
    /// Free-running campaigns per mutant at most, seeded `free_seed`, `free_seed + 1`, ...
    pub free_campaigns: u64,
    pub free_seed: u64,
    /// Calls per free-running campaign.
    pub free_ops: u64,
    /// What the processes of a free-running campaign call.
    pub free_workload: Workload,
    /// The check's budget of a free-running campaign.
    pub free_budget: Budget,
    /// Stepped plans per mutant at most, seeded `stepped_seed`, `stepped_seed + 1`, ...
    pub stepped_plans: u64,
    pub stepped_seed: u64,
    /// How the stepped plans are drawn.
    pub stepped_config: PlanConfig,
    /// Client-side timeout of every call.
    pub call_timeout: Duration,
}

impl HuntOptions {
    /// The bounded hunt of the CI test: a few campaigns per mode.
    pub fn quick() -> HuntOptions {
        HuntOptions {
            free_campaigns: 8,
            free_seed: 20_261_210,
            free_ops: 1_500,
            free_workload: Workload::shared_owners(),
            free_budget: Budget {
                time: Some(Duration::from_secs(30)),
                states: Some(5_000_000),
                ..Budget::default()
            },
            stepped_plans: 150,
            stepped_seed: 0,
            stepped_config: PlanConfig::contended(),
            call_timeout: Duration::from_secs(10),
        }
    }

    /// The full hunt (`leasecheck mutants --full`): more and longer campaigns.
    pub fn full() -> HuntOptions {
        HuntOptions {
            free_campaigns: 10,
            free_ops: 5_000,
            free_budget: Budget {
                time: Some(Duration::from_secs(60)),
                states: Some(20_000_000),
                ..Budget::default()
            },
            stepped_plans: 300,
            ..HuntOptions::quick()
        }
    }

    /// How many campaigns of `mode` a hunt may run (every race plan).
    pub fn limit(&self, mode: Mode) -> u64 {
        match mode {
            Mode::Free => self.free_campaigns,
            Mode::Races => stepped::race_plans().map_or(0, |p| p.len() as u64),
            Mode::Stepped => self.stepped_plans,
            Mode::Checks | Mode::Matrix(_) => 1,
            Mode::Late => crate::late::plans().len() as u64,
            Mode::Faults(_) => 0,
        }
    }

    /// The seed of the `k`-th campaign of `mode` (of a race plan: its index).
    pub fn seed(&self, mode: Mode, k: u64) -> u64 {
        match mode {
            Mode::Free => self.free_seed.wrapping_add(k),
            Mode::Stepped => self.stepped_seed.wrapping_add(k),
            Mode::Races | Mode::Checks | Mode::Matrix(_) | Mode::Late | Mode::Faults(_) => k,
        }
    }
}

/// One campaign of a hunt.
#[derive(Clone, Debug)]
pub struct Run {
    pub mode: Mode,
    pub seed: u64,
    /// `linearizable`, `violation`, `stall`, ... ([`Outcome::name`]).
    pub outcome: &'static str,
    /// The first line of the verdict.
    pub verdict: String,
    /// The invariant a violation names.
    pub invariant: Option<Invariant>,
    /// The model mutation the checker's diagnosis names, if any.
    pub diagnosis: Option<&'static str>,
    pub judged: Judged,
    pub ops: usize,
    /// Calls recorded per second of recording.
    pub ops_per_s: f64,
    /// Wall-clock time of the check.
    pub check_time: Duration,
    pub elapsed: Duration,
}

/// How a hunt ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Status {
    /// The run at this index of [`HuntReport::runs`] killed it.
    Killed(usize),
    /// Every campaign within the bounds ran and none killed it.
    Survived,
    /// A campaign could not run or finish: the hunt stopped there (not a kill).
    Infrastructure(String),
}

/// A mutant's hunt.
#[derive(Clone, Debug)]
pub struct HuntReport {
    pub target: Target,
    /// What kills it (for pg_lease, the control: nothing may be found).
    pub kill: Option<Kill>,
    pub runs: Vec<Run>,
    pub status: Status,
    pub elapsed: Duration,
}

impl HuntReport {
    pub fn killed(&self) -> bool {
        matches!(self.status, Status::Killed(_))
    }

    /// The one judgement (crate::judgement) of the hunt, a negative control: a killed
    /// mutant passes, a survivor is a finding (about the gate: it let a known bug through),
    /// a hunt that could not run has no verdict. The control (pg_lease, no kill wanted)
    /// passes clean and is a finding when something was found on it.
    pub fn judgement(&self) -> Judgement {
        let line = self.line();
        match (&self.status, self.kill.is_none()) {
            (Status::Infrastructure(why), _) => Judgement::no_verdict_from_text(why.clone()),
            (Status::Killed(_), false) | (Status::Survived, true) => Judgement::Pass,
            (Status::Killed(_), true) | (Status::Survived, false) => Judgement::finding(line),
        }
    }

    /// The run that killed the mutant.
    pub fn killer(&self) -> Option<&Run> {
        match self.status {
            Status::Killed(i) => self.runs.get(i),
            _ => None,
        }
    }

    pub fn ops(&self) -> usize {
        self.runs.iter().map(|r| r.ops).sum()
    }

    /// Campaigns run per mode, as [`control`] takes them: the control of a set of hunts
    /// runs the most any of them ran, so every seed any hunt used.
    pub fn campaigns_run(reports: &[HuntReport]) -> Vec<(Mode, u64)> {
        let matrix: std::collections::BTreeSet<Mode> = reports
            .iter()
            .flat_map(|r| &r.runs)
            .map(|r| r.mode)
            .filter(|m| matches!(m, Mode::Matrix(_)))
            .collect();
        Mode::CAMPAIGNS
            .into_iter()
            .chain(matrix)
            .map(|mode| {
                let most = reports.iter().map(|r| r.runs_of(mode)).max().unwrap_or(0);
                (mode, most as u64)
            })
            .filter(|(_, n)| *n > 0)
            .collect()
    }

    /// Campaigns of `mode` run.
    pub fn runs_of(&self, mode: Mode) -> usize {
        self.runs.iter().filter(|r| r.mode == mode).count()
    }

    /// One line: the name, the status, the seeds tried, and the verdict line that decided.
    pub fn line(&self) -> String {
        let tried = Mode::CAMPAIGNS
            .iter()
            .filter(|m| self.runs_of(**m) > 0)
            .map(|m| format!("{} {m}", self.runs_of(*m)))
            .collect::<Vec<_>>()
            .join(" + ");
        let tried = if tried.is_empty() {
            "no campaign".to_string()
        } else {
            tried
        };
        let how = match (&self.status, self.killer()) {
            // The control: pg_lease must have no finding.
            (Status::Survived, _) if self.kill.is_none() => {
                "CLEAN: linearizable with no stall on every campaign".to_string()
            }
            (Status::Killed(_), Some(r)) if self.kill.is_none() => format!(
                "FINDING on pg_lease by {}: {}",
                r.mode.run_label(r.seed),
                first_line(&r.verdict)
            ),
            (Status::Killed(_), Some(r)) => format!(
                "KILLED by {}: {}",
                r.mode.run_label(r.seed),
                first_line(&r.verdict)
            ),
            (Status::Infrastructure(e), _) => format!("{e} (not a kill)"),
            _ => {
                let seen: Vec<String> = self
                    .runs
                    .iter()
                    .filter(|r| r.judged != Judged::Survived)
                    .map(|r| format!("{}: {}", r.mode.run_label(r.seed), r.judged))
                    .collect();
                if seen.is_empty() {
                    "SURVIVED".to_string()
                } else {
                    format!("SURVIVED ({})", seen.join("; "))
                }
            }
        };
        format!(
            "{}: {how} [{tried}; {} ops; {:.1?}]",
            self.target,
            self.ops(),
            self.elapsed
        )
    }
}

fn first_line(s: &str) -> &str {
    s.lines().next().unwrap_or_default()
}

/// Hunts `mutant` on `cluster` within `options`.
pub async fn hunt(cluster: &Cluster, mutant: &'static Mutant, options: &HuntOptions) -> HuntReport {
    hunt_with(cluster, mutant, options, &|_| {}).await
}

/// [`hunt`], telling `on_run` of every campaign as it ends (for progress output).
pub async fn hunt_with(
    cluster: &Cluster,
    mutant: &'static Mutant,
    options: &HuntOptions,
    on_run: &(dyn Fn(&Run) + Sync),
) -> HuntReport {
    let started = Instant::now();
    let target = Target::Mutant(mutant);
    let mut runs = Vec::new();
    let mut status = Status::Survived;
    if !mutant.hunted_by_campaigns() {
        status = Status::Infrastructure(format!(
            "hunted by the fault checks ({}: `leasecheck faults --controls`), not by campaigns",
            mutant.fault_checks().join(", ")
        ));
    }
    let campaigns = mutant.hunt.iter().filter(|m| m.is_campaign());
    'modes: for &mode in campaigns {
        let mut campaigns = Campaigns::new(cluster, target, mode, options).await;
        for k in 0..options.limit(mode) {
            let run = campaigns.run(k, Some(mutant.kill)).await;
            on_run(&run);
            let judged = run.judged.clone();
            runs.push(run);
            match judged {
                Judged::Killed => {
                    status = Status::Killed(runs.len() - 1);
                    break 'modes;
                }
                Judged::Infrastructure => {
                    let last = runs.last().map(|r| r.verdict.clone()).unwrap_or_default();
                    status = Status::Infrastructure(last);
                    break 'modes;
                }
                _ => {}
            }
        }
    }
    HuntReport {
        target,
        kill: Some(mutant.kill),
        runs,
        status,
        elapsed: started.elapsed(),
    }
}

/// The control: pg_lease through the first `campaigns[mode]` campaigns of each mode (the
/// same seeds the hunts used). Every run must be linearizable with no stall; the report's
/// status is [`Status::Survived`] when all were, else the first that was not is
/// [`Status::Killed`] (a finding on pg_lease) or an infrastructure failure.
pub async fn control(
    cluster: &Cluster,
    campaigns: &[(Mode, u64)],
    options: &HuntOptions,
    on_run: &(dyn Fn(&Run) + Sync),
) -> HuntReport {
    let started = Instant::now();
    let mut runs = Vec::new();
    let mut status = Status::Survived;
    'modes: for &(mode, count) in campaigns {
        let mut c = Campaigns::new(cluster, Target::PgLease, mode, options).await;
        for k in 0..count {
            let run = c.run(k, None).await;
            on_run(&run);
            let judged = run.judged.clone();
            runs.push(run);
            match judged {
                Judged::Survived => {}
                Judged::Infrastructure => {
                    let last = runs.last().map(|r| r.verdict.clone()).unwrap_or_default();
                    status = Status::Infrastructure(last);
                    break 'modes;
                }
                _ => {
                    status = Status::Killed(runs.len() - 1);
                    break 'modes;
                }
            }
        }
    }
    HuntReport {
        target: Target::PgLease,
        kill: None,
        runs,
        status,
        elapsed: started.elapsed(),
    }
}

/// The campaigns of one mode against one target: free-running campaigns each on a fresh
/// database, or stepped plans (race or drawn) on one stage.
struct Campaigns<'c> {
    cluster: &'c Cluster,
    target: Target,
    mode: Mode,
    options: &'c HuntOptions,
    /// The race plans (race mode).
    races: Vec<Plan>,
    /// The stepped plans' stage (stepped mode), or why it could not be set up (reported by
    /// the first run, which ends the hunt).
    stage: Option<Stage>,
    stage_error: Option<InfraError>,
}

impl<'c> Campaigns<'c> {
    async fn new(
        cluster: &'c Cluster,
        target: Target,
        mode: Mode,
        options: &'c HuntOptions,
    ) -> Campaigns<'c> {
        let (stage, mut stage_error) = match mode {
            Mode::Free | Mode::Checks | Mode::Matrix(_) | Mode::Late | Mode::Faults(_) => {
                (None, None)
            }
            Mode::Races | Mode::Stepped => match Stage::new(cluster, target).await {
                Ok(stage) => (Some(stage), None),
                Err(e) => (None, Some(e)),
            },
        };
        let races = match (mode, stepped::race_plans()) {
            (Mode::Races, Ok(plans)) => plans,
            (Mode::Races, Err(e)) => {
                stage_error = stage_error.or(Some(e.into()));
                Vec::new()
            }
            _ => Vec::new(),
        };
        Campaigns {
            cluster,
            target,
            mode,
            options,
            races,
            stage,
            stage_error,
        }
    }

    /// The `k`-th campaign, judged against `kill` (none: the control, where only a
    /// linearizable run with no stall survives).
    async fn run(&mut self, k: u64, kill: Option<Kill>) -> Run {
        let seed = self.options.seed(self.mode, k);
        let started = Instant::now();
        if let Some((judged, verdict)) =
            checks::run(self.cluster, self.target, self.mode, kill).await
        {
            return Run {
                mode: self.mode,
                seed,
                outcome: judged.outcome_name(),
                verdict: first_line(&verdict).to_string(),
                invariant: None,
                diagnosis: None,
                judged,
                ops: 0,
                ops_per_s: 0.0,
                check_time: Duration::ZERO,
                elapsed: started.elapsed(),
            };
        }
        let (outcome, figures) = match self.mode {
            Mode::Free => self.free(seed).await,
            Mode::Races => match self.races.get(seed as usize).cloned() {
                Some(plan) => self.plan(&plan, seed).await,
                None => (
                    Outcome::Infrastructure(InfraError::Task(format!("no race plan {seed}"))),
                    Figures::default(),
                ),
            },
            Mode::Stepped => match Plan::from_seed(&self.options.stepped_config, seed) {
                Ok(plan) => self.plan(&plan, seed).await,
                Err(e) => (Outcome::Infrastructure(e.into()), Figures::default()),
            },
            Mode::Late => match crate::late::plans().get(seed as usize) {
                Some(plan) => {
                    let report = crate::late::run(
                        self.cluster,
                        self.target,
                        plan,
                        self.options.call_timeout,
                    )
                    .await;
                    (report.outcome, report.figures)
                }
                None => (
                    Outcome::Infrastructure(InfraError::Task(format!("no late plan {seed}"))),
                    Figures::default(),
                ),
            },
            // Judged by `checks::run` above.
            Mode::Checks | Mode::Matrix(_) => (
                Outcome::Infrastructure(InfraError::Task("a check run is not a campaign".into())),
                Figures::default(),
            ),
            // Never reached: hunts and controls run campaign modes only.
            Mode::Faults(fault) => (
                Outcome::Infrastructure(InfraError::Task(format!(
                    "the {fault} fault check is not a campaign"
                ))),
                Figures::default(),
            ),
        };
        let judged = match kill {
            Some(kill) => judge(kill, &outcome),
            None => judge_control(&outcome),
        };
        let (invariant, diagnosis) = match &outcome {
            Outcome::Violation(v) => (Some(v.invariant), v.diagnosis.map(|m| m.name())),
            _ => (None, None),
        };
        Run {
            mode: self.mode,
            seed,
            outcome: outcome.name(),
            verdict: first_line(&outcome.to_string()).to_string(),
            invariant,
            diagnosis,
            judged,
            ops: figures.ops,
            ops_per_s: figures.ops_per_s(),
            check_time: figures.check_time,
            elapsed: started.elapsed(),
        }
    }

    /// A free-running campaign from `seed`, on a fresh database.
    async fn free(&self, seed: u64) -> (Outcome, Figures) {
        let campaign = Campaign {
            workload: self.options.free_workload.clone(),
            budget: self.options.free_budget,
            call_timeout: self.options.call_timeout,
            history_file: campaign::history_file_from_env(&format!("{}-free", self.target), seed),
            ..Campaign::new(self.target, Length::Ops(self.options.free_ops), seed)
        };
        let report = campaign::run(self.cluster, &campaign, Arc::new(Silent)).await;
        (report.outcome, report.figures)
    }

    /// `plan` (race plan or drawn plan `seed`), on the stage.
    async fn plan(&mut self, plan: &Plan, seed: u64) -> (Outcome, Figures) {
        let Some(stage) = &self.stage else {
            let error = self
                .stage_error
                .take()
                .unwrap_or_else(|| InfraError::Task("no stage for the stepped plans".into()));
            return (Outcome::Infrastructure(error), Figures::default());
        };
        let options = RunOptions {
            call_timeout: self.options.call_timeout,
            history_file: campaign::history_file_from_env(
                &format!("{}-{}", self.target, self.mode.name()),
                seed,
            ),
            ..RunOptions::default()
        };
        let report = stepped::run(stage, plan, &options, Arc::new(Silent)).await;
        (report.run.outcome, report.run.figures)
    }
}
