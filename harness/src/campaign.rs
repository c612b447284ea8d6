//! Free-running campaigns: real concurrency against a real server, judged by the model.
//!
//! A [`Campaign`] runs the processes of a [`Workload`] as tokio tasks, each a recorder
//! [`Session`](crate::recorder::Session) drawing its steps from its own RNG (seeded from
//! the campaign seed), against a fresh database with the target extension (pg_lease or a
//! SQL mutant of it), for a number of ops or a time. The recorded history is then judged
//! by [`model::checker::check`] within a budget.
//!
//! The [`Outcome`] is typed: linearizable, a violation, unknown (the check's budget ran
//! out), an answer outside the API's shape, or an infrastructure failure (the target
//! could not be installed, a session could not connect, a harness bug). An infrastructure
//! failure is never a violation.

mod judged;
mod process;

use process::{Process, Quota};

use crate::extension::{Build, ExtensionFiles, Mutant, StaleMutant, MUTANTS};
use crate::pg::{Cluster, PgError};
pub use crate::progress::{Progress, Silent};
use crate::recorder::wal::Decoding;
use crate::recorder::{Recorder, RecorderError, RecorderOptions};
use crate::session::SessionSettings;
// Below the stepped runner: its leaf types only (the runner's errors, the pure plan and
// stall types), never the runner itself, which reports in this module's terms.
use crate::stepped::runner::types::RunError;
use crate::workload::{Memory, ProcessPlan, Workload, WorkloadError};
use model::checker::{Spent, Stats, Violation};
use model::{Budget, CheckOptions, History, Verdict};
use planning::plan::PlanError;
use planning::stall::Stall;
use std::collections::BTreeMap;
use std::fmt;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::str::FromStr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::watch;

/// The environment variable naming a directory in which every campaign keeps its history.
pub const HISTORY_DIR_ENV: &str = "LEASECHECK_HISTORY_DIR";

/// The extension a campaign runs against.
#[derive(Clone, Copy, Debug)]
pub enum Target {
    /// pg_lease as shipped.
    PgLease,
    /// A SQL mutant of it ([`MUTANTS`]), installed as `pg_lease_<name>`.
    Mutant(&'static Mutant),
    /// pg_lease as built here, installed under this extension name of its own (the
    /// install's extension directory is shared with other checkouts, which rewrite
    /// `pg_lease`'s files; [`ExtensionFiles::renamed`]).
    Renamed(&'static str),
    /// pg_lease 0.1.0 as released ([`ExtensionFiles::version_0_1_0`]).
    Version010,
    /// A user's build of pg_lease (`leasecheck gate --extension ...`), installed under
    /// [`Build::INSTALLED_NAME`].
    Build(&'static Build),
}

/// A target name that is neither `pg_lease` nor `mutant:<a known mutant>`.
#[derive(Debug, thiserror::Error)]
#[error("unknown target {given:?}: expected pg_lease or mutant:NAME with NAME one of {known}")]
pub struct UnknownTarget {
    pub given: String,
    pub known: String,
}

impl FromStr for Target {
    type Err = UnknownTarget;

    fn from_str(s: &str) -> Result<Target, UnknownTarget> {
        if s == crate::extension::NAME {
            return Ok(Target::PgLease);
        }
        s.strip_prefix("mutant:")
            .and_then(|name| MUTANTS.iter().find(|m| m.name == name))
            .map(Target::Mutant)
            .ok_or_else(|| UnknownTarget {
                given: s.to_string(),
                known: MUTANTS
                    .iter()
                    .map(|m| m.name)
                    .collect::<Vec<_>>()
                    .join(", "),
            })
    }
}

/// Targets are the same when they name the same extension.
impl PartialEq for Target {
    fn eq(&self, other: &Target) -> bool {
        self.to_string() == other.to_string()
    }
}

impl Eq for Target {}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Target::PgLease => f.write_str(crate::extension::NAME),
            Target::Mutant(m) => write!(f, "mutant:{}", m.name),
            Target::Renamed(name) => write!(f, "{} as {name}", crate::extension::NAME),
            Target::Version010 => write!(
                f,
                "{} {} as {}",
                crate::extension::NAME,
                crate::extension::BASE_VERSION,
                crate::extension::NAME_0_1_0
            ),
            Target::Build(b) => write!(
                f,
                "{} {} (given files) as {}",
                b.given.name, b.version, b.files.name
            ),
        }
    }
}

impl Target {
    /// The extension files of the target.
    pub fn files(&self) -> Result<ExtensionFiles, StaleMutant> {
        match self {
            Target::PgLease => Ok(ExtensionFiles::pg_lease()),
            Target::Mutant(m) => ExtensionFiles::mutant(m),
            Target::Renamed(name) => Ok(ExtensionFiles::renamed(name)),
            Target::Version010 => Ok(ExtensionFiles::version_0_1_0()),
            Target::Build(b) => Ok(b.files.clone()),
        }
    }

    /// The `extversion` `CREATE EXTENSION` must install.
    pub fn version(&self) -> &'static str {
        match self {
            Target::Version010 => crate::extension::BASE_VERSION,
            Target::Build(b) => &b.version,
            _ => crate::extension::VERSION,
        }
    }
}

/// How long a campaign records.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Length {
    /// This many calls (transaction boundaries not counted).
    Ops(u64),
    /// Calls start until this much time has passed.
    Time(Duration),
}

/// One free-running campaign.
#[derive(Clone, Debug)]
pub struct Campaign {
    pub workload: Workload,
    pub length: Length,
    pub seed: u64,
    pub target: Target,
    /// The check's budget.
    pub budget: Budget,
    /// Client-side timeout of every call.
    pub call_timeout: Duration,
    /// Where to keep the history (none: in memory only).
    pub history_file: Option<PathBuf>,
    /// Install and create this build instead of the target's own files (e.g. a copy of
    /// pg_lease under a name of its own, which other checkouts sharing the extension
    /// directory do not rewrite mid-run). Its `extversion` must be its control file's
    /// `default_version`.
    pub build: Option<ExtensionFiles>,
    /// Where sessions connect (e.g. a fault-injecting proxy in front of the cluster);
    /// none: the cluster itself.
    pub route: Option<SocketAddr>,
    /// How long a session keeps trying to connect ([`RecorderOptions::connect_patience`]).
    pub connect_patience: Duration,
    /// After the processes stop, a fresh session inspects every key, so that the history
    /// ends with what the server holds.
    pub final_inspect: bool,
    /// The session settings every process runs under (their setup SQL runs in the fresh
    /// database before recording).
    pub session: SessionSettings,
    /// After a call whose answer was lost with its connection, the process that takes over
    /// its slot first inspects the keys the loss left in doubt (etcd's robustness traffic
    /// does so): on by default; off only to measure what it buys.
    pub inspect_after_loss: bool,
    /// A logical decoding slot lists the lease table's commits from before the first call
    /// to after the last session ended, and the history carries them (its wal line), so
    /// the checker resolves lost calls exactly: on by default where the server allows it
    /// (`wal_level = logical`, a role with REPLICATION); [`Figures::wal`] says why not.
    pub decode_wal: bool,
}

impl Campaign {
    /// The default workload against `target` for `length`.
    pub fn new(target: Target, length: Length, seed: u64) -> Campaign {
        Campaign {
            workload: Workload::default(),
            length,
            seed,
            target,
            budget: Budget::default(),
            call_timeout: Duration::from_secs(10),
            history_file: None,
            session: SessionSettings::none(),
            build: None,
            route: None,
            connect_patience: Duration::ZERO,
            final_inspect: false,
            inspect_after_loss: true,
            decode_wal: true,
        }
    }

    /// The version the created extension must be at: the build's control file's
    /// `default_version` (a user's 0.2.0 build is at 0.2.0), or the target's.
    pub fn expected_version(&self) -> String {
        match &self.build {
            Some(build) => build.created_version(),
            None => self.target.version().to_string(),
        }
    }

    /// The files installed and the extension created: the build, or the target's own.
    pub fn files(&self) -> Result<ExtensionFiles, StaleMutant> {
        match &self.build {
            Some(build) => Ok(build.clone()),
            None => self.target.files(),
        }
    }
}

/// A failure of the machinery around the target: never a finding about the target.
#[derive(Debug, thiserror::Error)]
pub enum InfraError {
    #[error("invalid workload: {0}")]
    Workload(#[from] WorkloadError),
    #[error(transparent)]
    StaleMutant(#[from] StaleMutant),
    #[error("cannot install {target}: {source}")]
    Install {
        target: String,
        #[source]
        source: PgError,
    },
    #[error("cannot create a database with {target}: {source}")]
    Database {
        target: String,
        #[source]
        source: PgError,
    },
    #[error("CREATE EXTENSION for {target} installed version {found:?}, expected {expected} (another checkout rewrote the files?)")]
    Version {
        target: String,
        expected: String,
        found: Option<String>,
    },
    #[error("the session setup of {target} failed: {source}")]
    Setup {
        target: String,
        #[source]
        source: tokio_postgres::Error,
    },
    #[error(transparent)]
    Recorder(RecorderError),
    #[error("a campaign task failed: {0}")]
    Task(String),
    /// A stepped plan could not be run to its end (a hang, a lost monitor, ...).
    #[error(transparent)]
    Stepped(RunError),
    #[error("cannot reset the stepped runs' database: {0}")]
    Reset(#[source] tokio_postgres::Error),
    #[error("invalid stepped plan: {0}")]
    Plan(#[from] PlanError),
}

/// How a campaign came out.
#[derive(Debug)]
pub enum Outcome {
    Linearizable(Stats),
    Violation(Box<Violation>),
    /// A stepped run saw a call wait for a row lock a blocking acquire held across its
    /// sleep: a finding the history alone cannot show (its answers are linearizable).
    Stall(Box<Stall>),
    /// The check's budget ran out: never a pass.
    Unknown(Box<Spent>),
    /// The target answered outside the documented shape of its API (it cannot even be
    /// written as a history): a finding about the target, like a violation.
    Malformed {
        call: &'static str,
        detail: String,
    },
    /// A call got no answer within its bound while the server was executing it (not
    /// waiting for another transaction): the target hangs, a finding (liveness).
    Hang {
        call: &'static str,
        detail: String,
    },
    /// The campaign could not run or finish: not a finding about the target.
    Infrastructure(InfraError),
}

impl Outcome {
    /// A short name: `linearizable`, `violation`, `unknown`, `malformed`, `infrastructure`.
    pub fn name(&self) -> &'static str {
        match self {
            Outcome::Linearizable(_) => "linearizable",
            Outcome::Violation(_) => "violation",
            Outcome::Stall(_) => "stall",
            Outcome::Unknown(_) => "unknown",
            Outcome::Malformed { .. } => "malformed",
            Outcome::Hang { .. } => "hang",
            Outcome::Infrastructure(_) => "infrastructure",
        }
    }

    /// Exit status convention: 0 linearizable, 1 a finding (violation, stall, malformed
    /// answer), 2 unknown or an infrastructure failure.
    pub fn exit(&self) -> model::Exit {
        match self {
            Outcome::Linearizable(_) => model::Exit::Passed,
            Outcome::Violation(_)
            | Outcome::Stall(_)
            | Outcome::Malformed { .. }
            | Outcome::Hang { .. } => model::Exit::Finding,
            Outcome::Unknown(_) | Outcome::Infrastructure(_) => model::Exit::NoVerdict,
        }
    }

    /// The checker's verdict the outcome carries, if it carries one.
    pub fn verdict(&self) -> Option<Verdict> {
        match self {
            Outcome::Linearizable(s) => Some(Verdict::Linearizable(s.clone())),
            Outcome::Violation(v) => Some(Verdict::Violation(v.clone())),
            Outcome::Unknown(s) => Some(Verdict::Unknown(s.clone())),
            _ => None,
        }
    }

    pub(crate) fn of(verdict: Verdict) -> Outcome {
        match verdict {
            Verdict::Linearizable(s) => Outcome::Linearizable(s),
            Verdict::Violation(v) => Outcome::Violation(v),
            Verdict::Unknown(s) => Outcome::Unknown(s),
        }
    }
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Outcome::Linearizable(s) => write!(f, "{}", Verdict::Linearizable(s.clone())),
            Outcome::Violation(v) => write!(f, "{v}"),
            Outcome::Stall(s) => write!(f, "{s}"),
            Outcome::Unknown(s) => write!(f, "{}", Verdict::Unknown(s.clone())),
            Outcome::Malformed { call, detail } => write!(
                f,
                "MALFORMED ANSWER: {call} answered outside the documented shape of pg_lease's \
                 API: {detail}"
            ),
            Outcome::Hang { call, detail } => write!(
                f,
                "HANG: {call} did not answer: {detail}; {}",
                crate::liveness::HANGS
            ),
            Outcome::Infrastructure(e) => write!(
                f,
                "INFRASTRUCTURE FAILURE (not a finding about the target): {e}"
            ),
        }
    }
}

/// The figures of a campaign.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Figures {
    /// Calls recorded.
    pub ops: usize,
    /// Calls whose outcome is unknown.
    pub unknown_ops: usize,
    /// Calls that failed definitely (invalid input, wait timeouts, deadlocks, ...).
    pub failed_ops: usize,
    pub txns: usize,
    /// Transactions whose end is unknown (a lost COMMIT that could not be resolved).
    pub unknown_txns: usize,
    /// Process ids used (processes plus retirements).
    pub process_ids: usize,
    /// Wall-clock time of recording.
    pub record_time: Duration,
    /// Wall-clock time of the check.
    pub check_time: Duration,
    /// Why the history has no wal line though the campaign asked for one (the server
    /// cannot decode, or decoding failed); `None` when it has one or none was asked for.
    pub wal: Option<String>,
}

impl Figures {
    /// Calls recorded per second of recording.
    pub fn ops_per_s(&self) -> f64 {
        let secs = self.record_time.as_secs_f64();
        if secs > 0.0 {
            self.ops as f64 / secs
        } else {
            0.0
        }
    }

    pub(crate) fn of(history: &History) -> Figures {
        let processes: std::collections::BTreeSet<_> =
            history.ops.iter().map(|o| o.process).collect();
        Figures {
            ops: history.ops.len(),
            unknown_ops: history.ops.iter().filter(|o| o.result.is_unknown()).count(),
            failed_ops: history
                .ops
                .iter()
                .filter(|o| {
                    !o.result.is_unknown() && matches!(o.result, model::OpResult::Fail { .. })
                })
                .count(),
            txns: history.txns.len(),
            unknown_txns: history
                .txns
                .iter()
                .filter(|t| t.end == model::TxnEnd::Unknown)
                .count(),
            process_ids: processes.len(),
            ..Figures::default()
        }
    }
}

/// What a campaign produced.
#[derive(Debug)]
pub struct Report {
    pub outcome: Outcome,
    /// The recorded history (none when recording could not start or finish).
    pub history: Option<History>,
    pub figures: Figures,
    /// The PostgreSQL version of the cluster.
    pub postgres: String,
    /// The database the campaign ran in (none when it could not be created).
    pub database: Option<String>,
}

/// Runs `campaign` on `cluster` and judges its history.
pub async fn run(cluster: &Cluster, campaign: &Campaign, progress: Arc<dyn Progress>) -> Report {
    let postgres = cluster.version().full.clone();
    let mut database = None;
    match prepare(cluster, campaign, &mut database).await {
        Ok(recording) => {
            let stopped = recording.record(progress.clone()).await;
            recording.judge(stopped, progress).await
        }
        Err(e) => Report {
            outcome: Outcome::Infrastructure(e),
            history: None,
            figures: Figures::default(),
            postgres,
            database,
        },
    }
}

/// A campaign ready to record: its target installed in a fresh database and its recorder
/// open. Fault injectors run beside [`Recording::record`] (they reach the server through
/// the recorder's nemesis events and their own connections) and may pause process slots.
pub struct Recording {
    campaign: Campaign,
    recorder: Arc<Recorder>,
    database: String,
    postgres: String,
    /// One pause switch per process slot (`true`: the slot makes no new step).
    pauses: Vec<watch::Sender<bool>>,
    started: Instant,
    /// The slot decoding the lease table (when asked for and allowed), or why there is none.
    decoding: Result<Option<Decoding>, String>,
}

impl Recording {
    /// The recorder: fault injectors record their nemesis events through it.
    pub fn recorder(&self) -> &Arc<Recorder> {
        &self.recorder
    }

    /// The database the campaign runs in.
    pub fn database(&self) -> &str {
        &self.database
    }

    pub fn campaign(&self) -> &Campaign {
        &self.campaign
    }

    /// Pauses (`true`) or resumes (`false`) process slot `slot`: a paused slot finishes
    /// the step it is in, then makes none until resumed, like a client process that
    /// stopped (its leases run on). Whether the slot exists.
    pub fn pause_slot(&self, slot: u32, paused: bool) -> bool {
        match self.pauses.get(slot as usize) {
            Some(switch) => {
                switch.send_replace(paused);
                true
            }
            None => false,
        }
    }

    /// Runs the processes until the quota is spent (then the final inspect, when asked);
    /// the first error that stopped one.
    pub async fn record(&self, progress: Arc<dyn Progress>) -> Option<Stopped> {
        let stopped = record(self, progress).await;
        if stopped.is_some() || !self.campaign.final_inspect {
            return stopped;
        }
        let mut session = self.recorder.session();
        for key in self.campaign.workload.key_names() {
            if let Err(e) = session.call(&model::Op::inspect(key)).await {
                return Some(Stopped::Recorder(e));
            }
        }
        None
    }

    /// Ends the history and judges it.
    pub async fn judge(self, stopped: Option<Stopped>, progress: Arc<dyn Progress>) -> Report {
        let record_time = self.started.elapsed();
        let postgres = self.postgres.clone();
        let database = Some(self.database.clone());
        let report = |outcome, history: Option<History>, figures| Report {
            outcome,
            history,
            figures,
            postgres: postgres.clone(),
            database: database.clone(),
        };
        let wal = match (self.decoding, &stopped) {
            (Ok(Some(decoding)), None) => record_wal(&self.recorder, decoding).await,
            (Ok(Some(decoding)), Some(_)) => {
                decoding.abandon().await;
                None
            }
            (Ok(None), _) => None,
            (Err(why), _) => Some(why),
        };
        let finished = self.recorder.finish();
        let history = match (stopped, finished) {
            (Some(e), finished) => {
                let history = finished.ok();
                let mut figures = history.as_ref().map(Figures::of).unwrap_or_default();
                figures.record_time = record_time;
                figures.wal = wal;
                return report(stopped_by(e), history, figures);
            }
            (None, Err(e)) => {
                return report(
                    Outcome::Infrastructure(InfraError::Recorder(e)),
                    None,
                    Figures::default(),
                )
            }
            (None, Ok(history)) => history,
        };
        progress.checking();
        let mut figures = Figures::of(&history);
        figures.record_time = record_time;
        figures.wal = wal;
        let options = CheckOptions {
            budget: self.campaign.budget,
            ..CheckOptions::default()
        };
        let checked = Instant::now();
        let judged = tokio::task::spawn_blocking(move || {
            let verdict = model::checker::check(&history, &options);
            (history, verdict)
        })
        .await;
        figures.check_time = checked.elapsed();
        match judged {
            Ok((history, verdict)) => report(Outcome::of(verdict), Some(history), figures),
            Err(e) => report(
                Outcome::Infrastructure(InfraError::Task(format!("the check: {e}"))),
                None,
                figures,
            ),
        }
    }
}

/// Reads the slot into the history's wal line once the sessions ended; why not, if it
/// could not.
async fn record_wal(recorder: &Recorder, decoding: Decoding) -> Option<String> {
    let read = decoding
        .read(
            &recorder.live_backends(),
            &recorder.claims(),
            recorder.ended(),
            recorder.xids_reused(),
        )
        .await;
    match read.map(|log| recorder.record_wal(log)) {
        Ok(Ok(())) => None,
        Ok(Err(e)) => Some(e.to_string()),
        Err(e) => Some(e.to_string()),
    }
}

/// Why recording stopped before its quota was spent.
#[derive(Debug)]
pub enum Stopped {
    Recorder(RecorderError),
    /// A process task panicked or was cancelled.
    Task(String),
}

/// The outcome of a campaign whose recording stopped early.
fn stopped_by(e: Stopped) -> Outcome {
    match e {
        Stopped::Recorder(RecorderError::Malformed { call, detail }) => {
            Outcome::Malformed { call, detail }
        }
        Stopped::Recorder(RecorderError::Hang { call, detail }) => Outcome::Hang { call, detail },
        Stopped::Recorder(other) => Outcome::Infrastructure(InfraError::Recorder(other)),
        Stopped::Task(e) => Outcome::Infrastructure(InfraError::Task(e)),
    }
}

/// Installs `target` into a fresh database of `cluster` named after `prefix`; its name.
pub(crate) async fn install_target(
    cluster: &Cluster,
    target: Target,
    prefix: &str,
) -> Result<String, InfraError> {
    let files = target.files()?;
    install_files(cluster, &files, &target.to_string(), prefix).await
}

/// Installs `files` into a fresh database of `cluster` named after `prefix`; its name.
async fn install_files(
    cluster: &Cluster,
    files: &ExtensionFiles,
    name: &str,
    prefix: &str,
) -> Result<String, InfraError> {
    let name = name.to_string();
    cluster
        .provide_extension(files)
        .await
        .map_err(|source| InfraError::Install {
            target: name.clone(),
            source,
        })?;
    cluster
        .fresh_database_with(prefix, &files.name)
        .await
        .map_err(|source| InfraError::Database {
            target: name,
            source,
        })
}

/// Installs the target (or the campaign's build) into a fresh database (checking the
/// version `CREATE EXTENSION` installed), runs the session setup there and opens the
/// recorder on it; `database` is set as soon as the database exists.
pub async fn prepare(
    cluster: &Cluster,
    campaign: &Campaign,
    database: &mut Option<String>,
) -> Result<Recording, InfraError> {
    campaign.workload.validate()?;
    let target = campaign.target.to_string();
    let files = campaign.files()?;
    let db = install_files(cluster, &files, &target, "campaign").await?;
    *database = Some(db.clone());
    let admin = cluster
        .connect(&db)
        .await
        .map_err(|source| InfraError::Database {
            target: target.clone(),
            source,
        })?;
    let found = crate::extension::installed_version(&admin, &files.name)
        .await
        .map_err(|source| InfraError::Database {
            target: target.clone(),
            source: source.into(),
        })?;
    let expected = campaign.expected_version();
    if found.as_deref() != Some(expected.as_str()) {
        return Err(InfraError::Version {
            target,
            expected,
            found,
        });
    }
    campaign
        .session
        .run_setup(&admin)
        .await
        .map_err(|source| InfraError::Setup {
            target: target.clone(),
            source,
        })?;
    let config = match campaign.route {
        Some(route) => routed_config(&db, route),
        None => cluster.config(&db),
    };
    let options = RecorderOptions {
        call_timeout: campaign.call_timeout,
        history_file: campaign.history_file.clone(),
        meta: meta(cluster, campaign),
        connect_patience: campaign.connect_patience,
        session: campaign.session.clone(),
        direct: Some(cluster.config(&db)),
    };
    let recorder = Recorder::new(config, options).map_err(InfraError::Recorder)?;
    let decoding = match campaign.decode_wal {
        true => Decoding::start(cluster.config(&db))
            .await
            .map(Some)
            .map_err(|e| e.to_string()),
        false => Ok(None),
    };
    Ok(Recording {
        campaign: campaign.clone(),
        recorder: Arc::new(recorder),
        database: db,
        postgres: cluster.version().full.clone(),
        pauses: (0..campaign.workload.processes)
            .map(|_| watch::channel(false).0)
            .collect(),
        started: Instant::now(),
        decoding,
    })
}

/// The superuser config of [`Cluster::config`], reaching the cluster through `route`
/// (a config's hosts are a list tried in order: the cluster's own must not be in it).
fn routed_config(db: &str, route: SocketAddr) -> tokio_postgres::Config {
    let mut config = tokio_postgres::Config::new();
    config
        .host(route.ip().to_string())
        .port(route.port())
        .user(crate::pg::SUPERUSER)
        .dbname(db)
        .application_name("leasecheck")
        .connect_timeout(Duration::from_secs(10));
    config
}

/// The facts of the run, for the history's header.
fn meta(cluster: &Cluster, campaign: &Campaign) -> BTreeMap<String, serde_json::Value> {
    let length = match campaign.length {
        Length::Ops(n) => serde_json::json!({"ops": n}),
        Length::Time(t) => serde_json::json!({"seconds": t.as_secs_f64()}),
    };
    let target = match &campaign.build {
        Some(build) => format!("{} (as extension {})", campaign.target, build.name),
        None => campaign.target.to_string(),
    };
    BTreeMap::from([
        ("target".to_string(), target.into()),
        (
            "postgres".to_string(),
            cluster.version().full.clone().into(),
        ),
        ("seed".to_string(), campaign.seed.into()),
        ("mode".to_string(), "free".into()),
        ("length".to_string(), length),
        ("workload".to_string(), campaign.workload.to_json()),
        ("session".to_string(), campaign.session.to_json()),
    ])
}

/// Runs the processes until the quota is spent; the first error that stopped one.
async fn record(recording: &Recording, progress: Arc<dyn Progress>) -> Option<Stopped> {
    let campaign = &recording.campaign;
    let quota = Arc::new(Quota {
        length: campaign.length,
        start: Instant::now(),
        issued: AtomicU64::new(0),
        done: AtomicU64::new(0),
        stop: AtomicBool::new(false),
    });
    let workload = Arc::new(campaign.workload.clone());
    let mut tasks = tokio::task::JoinSet::new();
    for slot in 0..campaign.workload.processes {
        let Some(pause) = recording.pauses.get(slot as usize) else {
            continue;
        };
        let process = Process {
            slot,
            session: recording.recorder.session(),
            plan: ProcessPlan::new(campaign.seed, slot),
            memory: Memory::default(),
            workload: Arc::clone(&workload),
            quota: Arc::clone(&quota),
            progress: Arc::clone(&progress),
            pause: pause.subscribe(),
            inspect_after_loss: campaign.inspect_after_loss,
        };
        tasks.spawn(process.run());
    }
    let mut first = None;
    while let Some(joined) = tasks.join_next().await {
        let error = match joined {
            Ok(Ok(())) => None,
            Ok(Err(e)) => Some(Stopped::Recorder(e)),
            Err(e) => Some(Stopped::Task(e.to_string())),
        };
        if let Some(e) = error {
            quota.stop.store(true, Ordering::Relaxed);
            first.get_or_insert(e);
        }
    }
    first
}

/// How many nemesis events of each fault a history holds.
pub fn fault_counts(history: &History) -> BTreeMap<String, usize> {
    let mut counts = BTreeMap::new();
    for n in &history.nemeses {
        *counts.entry(n.fault.clone()).or_insert(0) += 1;
    }
    counts
}

/// The history file for a run labelled `label` in `$LEASECHECK_HISTORY_DIR`, when that is
/// set: `<dir>/<label>-<UTC timestamp>-seed<seed>.jsonl`.
pub fn history_file_from_env(label: &str, seed: u64) -> Option<PathBuf> {
    let dir = std::env::var_os(HISTORY_DIR_ENV)?;
    let stamp = chrono::Utc::now().format("%Y%m%dT%H%M%S%.3fZ");
    Some(PathBuf::from(dir).join(format!("{label}-{stamp}-seed{seed}.jsonl")))
}

/// What was run, as a verdict file states it.
#[derive(Clone, Debug, PartialEq)]
pub struct RunFacts {
    pub target: String,
    /// The seed that repeats the run (none for a plan written by hand).
    pub seed: Option<u64>,
    /// `"free"` or `"stepped"`.
    pub mode: &'static str,
    pub length: serde_json::Value,
    pub workload: serde_json::Value,
}

impl Campaign {
    /// The facts of this campaign for its verdict file.
    pub fn facts(&self) -> RunFacts {
        RunFacts {
            target: self.target.to_string(),
            seed: Some(self.seed),
            mode: "free",
            length: match self.length {
                Length::Ops(n) => serde_json::json!({"ops": n}),
                Length::Time(t) => serde_json::json!({"seconds": t.as_secs_f64()}),
            },
            workload: self.workload.to_json(),
        }
    }
}

/// The verdict file of a campaign (`verdict.json`, specs/HISTORY.md "Verdict file"):
/// what was run, how it came out, and the figures. `history` names the history file.
pub fn verdict_json(
    report: &Report,
    campaign: &Campaign,
    history: Option<&str>,
) -> serde_json::Value {
    verdict_json_of(report, &campaign.facts(), history)
}

/// The verdict file of any run: `facts` say what was run.
pub fn verdict_json_of(
    report: &Report,
    facts: &RunFacts,
    history: Option<&str>,
) -> serde_json::Value {
    use serde_json::{json, Value};
    let f = &report.figures;
    let (invariant, keys, ops, explanation, diagnosis, found_by) = match &report.outcome {
        Outcome::Violation(v) => (
            json!({"number": v.invariant.number(), "name": v.invariant.to_string()}),
            json!(v.keys),
            json!(v.ops),
            Value::from(v.explanation.clone()),
            v.diagnosis.map_or(
                Value::Null,
                |m| json!({"name": m.name(), "description": m.description()}),
            ),
            Value::from(match v.found_by {
                model::checker::FoundBy::Precheck(name) => format!("precheck:{name}"),
                model::checker::FoundBy::Search => "search".to_string(),
            }),
        ),
        Outcome::Stall(s) => (
            Value::Null,
            json!([s.key]),
            json!([s.blocked_op, s.blocker_op]
                .iter()
                .flatten()
                .collect::<Vec<_>>()),
            Value::from(s.to_string()),
            Value::Null,
            Value::from("stepped:monitor"),
        ),
        other => (
            Value::Null,
            json!([]),
            json!([]),
            match other {
                Outcome::Linearizable(_) => Value::Null,
                _ => Value::from(other.to_string()),
            },
            Value::Null,
            Value::Null,
        ),
    };
    let coverage = match &report.outcome {
        Outcome::Linearizable(s) => s.coverage.to_json(),
        _ => Value::Null,
    };
    let (partitions, states) = match &report.outcome {
        Outcome::Linearizable(s) => (json!(s.partitions), json!(s.states)),
        Outcome::Unknown(s) => (json!(s.stats.partitions), json!(s.stats.states)),
        _ => (Value::Null, Value::Null),
    };
    let resolved = report
        .history
        .as_ref()
        .and_then(model::checker::resolution)
        .map(|r| {
            json!({
                "committed": r.took_effect.len(),
                "wrote_nothing": r.never.len(),
                "open": r.open.len(),
            })
        });
    json!({
        "format": "leasecheck-verdict",
        "version": 1,
        "verdict": report.outcome.name(),
        "exit_status": report.outcome.exit().code(),
        "summary": report.outcome.to_string().lines().next().unwrap_or_default(),
        "invariant": invariant,
        "keys": keys,
        "ops": ops,
        "explanation": explanation,
        "diagnosis": diagnosis,
        "found_by": found_by,
        "coverage": coverage,
        "figures": {
            "ops": f.ops,
            "ops_per_s": f.ops_per_s(),
            "record_seconds": f.record_time.as_secs_f64(),
            "check_seconds": f.check_time.as_secs_f64(),
            "unknown_ops": f.unknown_ops,
            "failed_ops": f.failed_ops,
            "txns": f.txns,
            "unknown_txns": f.unknown_txns,
            "process_ids": f.process_ids,
            "partitions": partitions,
            "search_states": states,
            "faults": report.history.as_ref().map(fault_counts).unwrap_or_default(),
            "wal_resolved": resolved,
            "wal_missing": f.wal,
        },
        "target": facts.target,
        "postgres": report.postgres,
        "seed": facts.seed,
        "mode": facts.mode,
        "length": facts.length,
        "workload": facts.workload,
        "history": history,
    })
}
