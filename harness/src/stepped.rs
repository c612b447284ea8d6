//! Stepped mode, like PostgreSQL's isolationtester: a [`Plan`] is a sequence of steps (a
//! process and what it does: a lease call, BEGIN at an isolation level, COMMIT, ROLLBACK,
//! a pause, or a written plan's injected fault, the lapse of a key or a cancel or
//! terminate of the process's backend, recorded as a nemesis event),
//! issued one at a time on the processes' recorder sessions; a step that blocks is left
//! waiting while the plan goes on, and everything is recorded as history format v2 and
//! judged by the model's checker, as a free-running campaign is.
//!
//! - [`plan`](Plan): plans, their proptest strategy ([`PlanStrategy`]: shrinking drops steps
//!   and simplifies calls) and their generation from a seed ([`Plan::from_seed`]).
//! - The runner ([`StepOptions`], [`StepLog`], [`RunError`]): one task per process, a
//!   monitor connection that tells a waiting session (blocked by another session of the
//!   plan, or asleep in a blocking acquire) from a hung one, deferral of the steps of a
//!   process that only a later step can free, hangs cancelled and reported as
//!   infrastructure failures naming the step and its SQL.
//! - [`race_plans`]: written plans putting every kind of call behind a transaction that
//!   holds the key's row lock (isolationtester's permutations for pg_lease).
//! - [`Stall`]s: a call seen waiting for a blocking acquire of its key that holds the row
//!   lock while it sleeps. A history cannot show this (the late answer is linearizable);
//!   the monitor can, so a stepped run reports it as a finding of its own
//!   ([`Outcome::Stall`]).
//!
//! A [`Stage`] is a database with the target installed; each [`run`] starts from every key
//! never leased (a used stage is reset), so many plans run on one database.

mod control;
mod expect;
mod monitor;
pub(crate) use planning::plan;
use planning::races;
pub(crate) mod runner;
pub(crate) use planning::stall;

pub use control::{Boxed, ClusterControl, ServerControl};
pub use expect::{answers_judgement, Unmet};
pub use monitor::{Backend, MonitorError, Snapshot, PG_SLEEP};
pub use plan::{
    call_sql, describe, stepped_workload, Origin, Plan, PlanConfig, PlanError, PlanStep,
    PlanStrategy, PlanTree, KEYS, MAX_STEPS, PROCESSES,
};
pub use races::race_plans;
pub use runner::{RunError, StepLog, StepOptions, Waiting};
pub use stall::{judge, Confirmed, Sighting, Stall, StepFacts};

use crate::campaign::{self, install_target, Figures, InfraError, Outcome, Progress, Target};
use crate::judgement::Judgement;
use crate::pg::Cluster;
use crate::recorder::{Recorder, RecorderError, RecorderOptions};
use crate::session::SessionSettings;
use model::checker::Verdict;
use model::{Budget, CheckOptions, History, OpId};
use runner::{Outputs, Runner};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::{Mutex, MutexGuard};
use tokio_postgres::Client;

/// A database with the target installed, on which plans run one after another.
pub struct Stage {
    /// How the recorder's sessions connect to the stage's database.
    config: tokio_postgres::Config,
    /// The server's version, e.g. `15.18`.
    postgres: String,
    /// The target's name, for the history's header.
    target: String,
    db: String,
    /// The settings every session of a plan runs under.
    session: SessionSettings,
    /// Resets the database between plans, and is the runner's monitor (reopened after a
    /// plan's restart ended it).
    admin: Mutex<Client>,
    /// A plan has run here: the next one needs a reset.
    used: AtomicBool,
}

impl Stage {
    /// Installs `target` into a fresh database of `cluster`.
    pub async fn new(cluster: &Cluster, target: Target) -> Result<Stage, InfraError> {
        let db = install_target(cluster, target, "stepped").await?;
        Stage::on(cluster, target.to_string(), db, SessionSettings::none()).await
    }

    /// A stage on database `db` of `cluster`, where the target named `target` is already
    /// installed (and the session setup run); every session of a plan runs under
    /// `session` (the conformance checks' plans: their session settings).
    pub async fn on(
        cluster: &Cluster,
        target: String,
        db: String,
        session: SessionSettings,
    ) -> Result<Stage, InfraError> {
        let config = cluster.config(&db);
        let admin = connect_admin(&config, &target).await?;
        Ok(Stage {
            config,
            postgres: cluster.version().full.clone(),
            target,
            db,
            session,
            admin: Mutex::new(admin),
            used: AtomicBool::new(false),
        })
    }

    /// The target's name.
    pub fn target(&self) -> &str {
        &self.target
    }

    /// The database's name.
    pub fn database(&self) -> &str {
        &self.db
    }

    /// The server's version, e.g. `15.18`.
    pub fn postgres(&self) -> &str {
        &self.postgres
    }

    /// Every key never leased again (the state a fresh install has). A fresh stage is
    /// already so, and is left alone: a test may hold locks on it before its first plan.
    async fn reset(&self, admin: &Client) -> Result<(), InfraError> {
        if !self.used.swap(true, Ordering::AcqRel) {
            return Ok(());
        }
        let table = crate::extension::lease_table(admin)
            .await
            .map_err(InfraError::Reset)?;
        admin
            .batch_execute(&format!("TRUNCATE {table}"))
            .await
            .map_err(InfraError::Reset)
    }

    /// The stage's own connection, opened anew if a plan's restart ended it.
    async fn admin(&self) -> Result<MutexGuard<'_, Client>, InfraError> {
        let mut admin = self.admin.lock().await;
        if admin.is_closed() {
            *admin = connect_admin(&self.config, &self.target).await?;
        }
        Ok(admin)
    }
}

/// The stage's own connection to its database: it resets the database between plans and
/// is the runner's monitor.
async fn connect_admin(
    config: &tokio_postgres::Config,
    target: &str,
) -> Result<Client, InfraError> {
    let (admin, connection) =
        config
            .connect(tokio_postgres::NoTls)
            .await
            .map_err(|e| InfraError::Database {
                target: target.to_string(),
                source: e.into(),
            })?;
    tokio::spawn(async move {
        let _ = connection.await;
    });
    // A reset that waits for a lock of a session that did not end must not hang.
    admin
        .batch_execute("SET lock_timeout = '10s'")
        .await
        .map_err(InfraError::Reset)?;
    Ok(admin)
}

/// How a plan runs and is judged.
#[derive(Clone, Debug)]
pub struct RunOptions {
    pub steps: StepOptions,
    /// Client-side timeout of every call (the recorder cancels and records it unknown).
    pub call_timeout: Duration,
    /// The check's budget.
    pub budget: Budget,
    /// Where to keep the history (none: in memory only).
    pub history_file: Option<PathBuf>,
}

impl Default for RunOptions {
    /// A plan of a few dozen steps checks in milliseconds; 30 s and 5 million states are
    /// far beyond it and still bound a runaway search.
    fn default() -> Self {
        RunOptions {
            steps: StepOptions::default(),
            call_timeout: Duration::from_secs(10),
            budget: Budget {
                time: Some(Duration::from_secs(30)),
                states: Some(5_000_000),
                ..Budget::default()
            },
            history_file: None,
        }
    }
}

/// What a stepped run produced.
#[derive(Debug)]
pub struct Report {
    /// The outcome, the history and the figures, as a campaign reports them.
    pub run: campaign::Report,
    /// The checker's verdict on the history alone (none when it was not judged). A stall
    /// is found beside it: its verdict stays linearizable.
    pub verdict: Option<Verdict>,
    /// How each step went.
    pub steps: Vec<StepLog>,
    pub stalls: Vec<Stall>,
    /// The calls that did not answer as their step expects (the plan's `expect`s).
    pub unmet: Vec<Unmet>,
}

impl Report {
    /// The run's one judgement: the outcome's (the checker's verdict, a stall, a hang, no
    /// verdict), with the calls that did not answer as expected ([`expect::judgement`]).
    pub fn judgement(&self) -> Judgement {
        expect::judgement(&self.run.outcome, &self.unmet)
    }

    /// The step that recorded op `id`.
    pub fn step_of_op(&self, id: OpId) -> Option<usize> {
        self.steps.iter().find(|s| s.op == Some(id)).map(|s| s.step)
    }

    /// The step of the violation's offending op.
    pub fn offending_step(&self) -> Option<usize> {
        let v = self.verdict.as_ref()?.violation()?;
        self.step_of_op(*v.ops.first()?)
    }

    /// The report of a plan that could not run at all (e.g. its stage could not be made).
    pub fn infrastructure(e: InfraError, postgres: String, plan: &Plan) -> Report {
        Report {
            run: campaign::Report {
                outcome: Outcome::Infrastructure(e),
                history: None,
                figures: Figures::default(),
                postgres,
                database: None,
            },
            verdict: None,
            steps: Outputs::none(plan).logs,
            stalls: Vec::new(),
            unmet: Vec::new(),
        }
    }

    /// The HTML timeline of the history and its verdict (none without both).
    pub fn timeline(&self, title: &str) -> Option<String> {
        let history = self.run.history.as_ref()?;
        let verdict = self.verdict.as_ref()?;
        Some(crate::timeline::render(history, verdict, title))
    }
}

/// Runs `plan` on `stage` (after resetting it) and judges its history.
pub async fn run(
    stage: &Stage,
    plan: &Plan,
    options: &RunOptions,
    progress: Arc<dyn Progress>,
) -> Report {
    run_controlled(stage, None, plan, options, progress).await
}

/// Runs `plan` on `stage` as [`run`] does, its restart steps made through `control`, the
/// caller's control of the stage's server (none: a restart step stops the run without a
/// verdict).
pub async fn run_controlled(
    stage: &Stage,
    control: Option<&dyn ServerControl>,
    plan: &Plan,
    options: &RunOptions,
    progress: Arc<dyn Progress>,
) -> Report {
    let prepared = match stage.admin().await {
        Ok(admin) => prepare(stage, &admin, plan, options)
            .await
            .map(|recorder| (admin, recorder)),
        Err(e) => Err(e),
    };
    let (admin, recorder) = match prepared {
        Ok(prepared) => prepared,
        Err(e) => return failed(stage, Outcome::Infrastructure(e), None, Outputs::none(plan)),
    };
    let started = Instant::now();
    let (result, outputs) =
        record(&recorder, &admin, control, plan, options, progress.clone()).await;
    let record_time = started.elapsed();
    let finished = recorder.finish();
    let history = match (result, finished) {
        (Err(e), finished) => {
            let mut figures = finished.as_ref().map(Figures::of).unwrap_or_default();
            figures.record_time = record_time;
            let mut report = failed(stage, stopped_by(e), finished.ok(), outputs);
            report.run.figures = figures;
            return report;
        }
        (Ok(()), Err(e)) => {
            let outcome = Outcome::Infrastructure(InfraError::Recorder(e));
            return failed(stage, outcome, None, outputs);
        }
        (Ok(()), Ok(history)) => history,
    };
    progress.checking();
    judge_run(stage, options, history, outputs, record_time).await
}

/// Resets the stage and opens the recorder.
async fn prepare(
    stage: &Stage,
    admin: &Client,
    plan: &Plan,
    options: &RunOptions,
) -> Result<Arc<Recorder>, InfraError> {
    plan.workload.validate()?;
    stage.reset(admin).await?;
    let recorder_options = RecorderOptions {
        call_timeout: options.call_timeout,
        history_file: options.history_file.clone(),
        meta: meta(stage, plan),
        session: with_plan_settings(&stage.session, plan),
        ..RecorderOptions::default()
    };
    let recorder =
        Recorder::new(stage.config.clone(), recorder_options).map_err(InfraError::Recorder)?;
    Ok(Arc::new(recorder))
}

/// What playing a plan on a caller's recorder gave ([`play`]).
#[derive(Debug)]
pub struct Played {
    /// How each step went.
    pub steps: Vec<StepLog>,
    /// The calls that did not answer as their step expects.
    pub unmet: Vec<Unmet>,
    /// How the run ended: every step answered, or why not.
    pub ended: Result<(), RunError>,
}

/// Plays `plan` on `recorder`'s sessions, as [`run`] does but on the caller's recorder and
/// database as they are (not reset), with `monitor` a connection of the caller's to the
/// same server (it reads pg_stat_activity and signals backends) and `control` the caller's
/// control of the server (its restart steps). The caller ends the history and judges it:
/// the failure crate's fault checks, whose situations are plans.
pub async fn play(
    recorder: &Arc<Recorder>,
    monitor: &Client,
    control: &dyn ServerControl,
    plan: &Plan,
    options: &RunOptions,
    progress: Arc<dyn Progress>,
) -> Played {
    let (ended, outputs) = record(recorder, monitor, Some(control), plan, options, progress).await;
    Played {
        steps: outputs.logs,
        unmet: outputs.unmet,
        ended,
    }
}

/// The stage's session settings, then the plan's own (`set name=value`; a later `-c`
/// of the same name wins, so the plan's do).
pub fn with_plan_settings(session: &SessionSettings, plan: &Plan) -> SessionSettings {
    let mut session = session.clone();
    session.settings.extend(plan.settings.iter().cloned());
    session
}

/// Runs the plan's setup, its steps and its teardown; how it ended and what the runner saw.
async fn record(
    recorder: &Arc<Recorder>,
    monitor: &Client,
    control: Option<&dyn ServerControl>,
    plan: &Plan,
    options: &RunOptions,
    progress: Arc<dyn Progress>,
) -> (Result<(), RunError>, Outputs) {
    if let Err(e) = server_sql(monitor, "setup", &plan.setup).await {
        // Undoes what part of the setup ran; its own failures are the setup's.
        let _ = server_sql(monitor, "teardown", &plan.teardown).await;
        return (Err(e), Outputs::none(plan));
    }
    let mut runner =
        match Runner::start(recorder, plan, options.steps, monitor, control, progress).await {
            Ok(r) => r,
            Err(e) => {
                let _ = server_sql(monitor, "teardown", &plan.teardown).await;
                return (Err(e), Outputs::none(plan));
            }
        };
    let result = runner.run().await;
    // Every call ends within the call timeout (the recorder cancels it); a margin for the
    // cancel's own round trip.
    let bound = options.call_timeout + Duration::from_secs(5);
    let (outputs, fresh) = runner.close(result.is_err(), bound).await;
    // After a restart, the caller's monitor connection is gone: the runner's new one.
    let torn = server_sql(
        fresh.as_ref().unwrap_or(monitor),
        "teardown",
        &plan.teardown,
    )
    .await;
    (result.and(torn), outputs)
}

/// Runs `statements` (a plan's `which`: setup or teardown) in order on `monitor`, each in
/// a round trip of its own (`ALTER SYSTEM` runs in no transaction block).
async fn server_sql(
    monitor: &Client,
    which: &'static str,
    statements: &[String],
) -> Result<(), RunError> {
    for statement in statements {
        monitor
            .batch_execute(statement)
            .await
            .map_err(|e| RunError::ServerSql {
                which,
                statement: statement.clone(),
                why: crate::judgement::describe_db(&e),
            })?;
    }
    Ok(())
}

/// Checks the history, looks for stalls, and decides the outcome.
async fn judge_run(
    stage: &Stage,
    options: &RunOptions,
    history: History,
    outputs: Outputs,
    record_time: Duration,
) -> Report {
    let mut figures = Figures::of(&history);
    figures.record_time = record_time;
    let check = CheckOptions {
        budget: options.budget,
        ..CheckOptions::default()
    };
    let checked = Instant::now();
    let judged = tokio::task::spawn_blocking(move || {
        let verdict = model::checker::check(&history, &check);
        (history, verdict)
    })
    .await;
    figures.check_time = checked.elapsed();
    let (history, verdict) = match judged {
        Ok(pair) => pair,
        Err(e) => {
            let e = InfraError::Task(format!("the check: {e}"));
            return failed(stage, Outcome::Infrastructure(e), None, outputs);
        }
    };
    let stalls = stalls_of(&outputs, options.steps.confirm);
    let outcome = match (&verdict, stalls.first()) {
        (Verdict::Violation(_), _) | (_, None) => Outcome::of(verdict.clone()),
        (_, Some(stall)) => Outcome::Stall(Box::new(stall.clone())),
    };
    Report {
        run: campaign::Report {
            outcome,
            history: Some(history),
            figures,
            postgres: stage.postgres().to_string(),
            database: Some(stage.db.clone()),
        },
        verdict: Some(verdict),
        steps: outputs.logs,
        stalls,
        unmet: outputs.unmet,
    }
}

/// The stalls the runner's sightings show, with their ops and calls.
fn stalls_of(outputs: &Outputs, confirm: Duration) -> Vec<Stall> {
    judge(&outputs.facts, &outputs.sightings, confirm)
        .into_iter()
        .map(|c| Stall {
            key: outputs.facts[c.blocked].key.clone().unwrap_or_default(),
            blocked: c.blocked,
            blocked_op: outputs.logs[c.blocked].op,
            blocker: c.blocker,
            blocker_op: outputs.logs[c.blocker].op,
            first_seen: c.first_seen,
            last_seen: c.last_seen,
            blocked_call: outputs.logs[c.blocked].what.clone(),
            blocker_call: outputs.logs[c.blocker].what.clone(),
        })
        .collect()
}

/// The outcome of a run that stopped before its end.
fn stopped_by(e: RunError) -> Outcome {
    match e {
        RunError::Recorder(RecorderError::Malformed { call, detail }) => {
            Outcome::Malformed { call, detail }
        }
        RunError::Recorder(RecorderError::Hang { call, detail }) => Outcome::Hang { call, detail },
        // A step the server kept executing (not waiting for another session, a lock, a
        // client or I/O) past the step timeout: the target's code did not return.
        RunError::Hang {
            step,
            process,
            sql,
            after,
            executing: Some(backend),
        } => Outcome::Hang {
            call: "a stepped call",
            detail: format!(
                "step {step} (process {process}) ran {after:.1?} while the server was executing \
                 it ({backend}), and was cancelled; its SQL: {sql}"
            ),
        },
        other => Outcome::Infrastructure(InfraError::Stepped(other)),
    }
}

/// A report without a verdict.
fn failed(stage: &Stage, outcome: Outcome, history: Option<History>, outputs: Outputs) -> Report {
    Report {
        run: campaign::Report {
            outcome,
            history,
            figures: Figures::default(),
            postgres: stage.postgres().to_string(),
            database: Some(stage.db.clone()),
        },
        verdict: None,
        steps: outputs.logs,
        stalls: Vec::new(),
        unmet: outputs.unmet,
    }
}

/// The facts of the run, for the history's header.
fn meta(stage: &Stage, plan: &Plan) -> BTreeMap<String, serde_json::Value> {
    let facts = facts_named(stage.target.clone(), plan);
    BTreeMap::from([
        ("target".to_string(), facts.target.into()),
        ("postgres".to_string(), stage.postgres().into()),
        ("seed".to_string(), facts.seed.into()),
        ("mode".to_string(), facts.mode.into()),
        ("length".to_string(), facts.length),
        ("workload".to_string(), facts.workload),
        ("plan".to_string(), plan.to_json()),
    ])
}

/// What a stepped run of `plan` against `target` is, for its verdict file.
pub fn facts(target: Target, plan: &Plan) -> campaign::RunFacts {
    facts_named(target.to_string(), plan)
}

fn facts_named(target: String, plan: &Plan) -> campaign::RunFacts {
    campaign::RunFacts {
        target,
        seed: plan.seed(),
        mode: "stepped",
        length: serde_json::json!({"steps": plan.steps.len()}),
        workload: plan.workload.to_json(),
    }
}

/// The verdict file of a stepped run: a campaign's (specs/HISTORY.md "Verdict file") with
/// the plan, how each step went, the stall if one was seen, and the timeline page's name.
pub fn verdict_json(
    report: &Report,
    target: Target,
    plan: &Plan,
    history: Option<&str>,
    timeline: Option<&str>,
) -> serde_json::Value {
    let mut verdict = campaign::verdict_json_of(&report.run, &facts(target, plan), history);
    if let Some(fields) = verdict.as_object_mut() {
        fields.insert("plan".into(), plan.to_json());
        let steps = report.steps.iter().map(|log| step_json(log, plan));
        fields.insert("steps".into(), steps.collect());
        let unmet: Vec<String> = report.unmet.iter().map(Unmet::to_string).collect();
        fields.insert("unmet_expectations".into(), unmet.into());
        fields.insert("timeline".into(), timeline.into());
    }
    verdict
}

fn step_json(log: &StepLog, plan: &Plan) -> serde_json::Value {
    let waited = match &log.waited {
        None => serde_json::Value::Null,
        Some(Waiting::Sleeping) => "asleep in a blocking acquire".into(),
        Some(Waiting::BlockedBy(p)) => serde_json::json!({"blocked_by_processes": p}),
        Some(Waiting::Standby) => "its COMMIT waits for a synchronous standby".into(),
    };
    serde_json::json!({
        "step": log.step,
        "process": log.process,
        "what": log.what,
        "sql": log.sql,
        "issued": log.issued,
        "deferred": log.deferred,
        "waited": waited,
        "answer": log.answer,
        "expect": plan.steps.get(log.step).and_then(|s| s.expect.as_ref()).map(|e| e.text()),
        "op": log.op,
    })
}
