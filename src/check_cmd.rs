//! `leasecheck check`: a campaign against a throwaway cluster, judged by the model.
//! Writes `<dir>/<UTC timestamp>/history.jsonl` and `verdict.json` (specs/HISTORY.md), and
//! `timeline.html` on a finding or with `--timeline` (stepped mode: `plan.txt` too when the
//! plan did not pass); exits 0 linearizable, 1 violation (or stall, or malformed answer), 2
//! unknown or infrastructure failure.

mod stepped;
mod under_faults;

use anyhow::{bail, Context};
use harness::campaign::{self, Campaign, Length, Progress, Target};
use harness::workload::Workload;
use indicatif::{ProgressBar, ProgressStyle};
use model::{Budget, Isolation};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// How processes run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Mode {
    /// Real concurrency on tokio tasks.
    Free,
    /// One step at a time, as isolationtester runs: a blocked step is left waiting
    /// (detected through pg_blocking_pids and pg_sleep) while the plan goes on.
    Stepped,
}

/// Run a campaign: concurrent processes against a throwaway cluster, the history judged by
/// the linearizability checker. Exit 0 linearizable, 1 violation, 2 unknown or
/// infrastructure failure.
#[derive(Debug, Clone, clap::Args)]
pub struct CheckArgs {
    /// PostgreSQL major; fetched if not installed.
    #[arg(long = "pg", default_value_t = harness::pg::DEFAULT_MAJOR)]
    pub major: u32,
    /// pg_lease, or mutant:NAME for one of the SQL mutants.
    #[arg(long, default_value = "pg_lease")]
    pub target: String,
    /// Concurrent processes (2-32) [default: 8; stepped: drawn from 2-8 per plan].
    #[arg(long)]
    pub processes: Option<u32>,
    /// Keys (1-8), valid but awkward ones [default: 2; stepped: drawn from 1-4 per plan].
    #[arg(long)]
    pub keys: Option<u32>,
    /// Calls to record (free mode) [default: 1500].
    #[arg(long, conflicts_with = "time")]
    pub ops: Option<u64>,
    /// Record for this long instead (free mode), e.g. 30s, 2m.
    #[arg(long, value_parser = humantime::parse_duration)]
    pub time: Option<Duration>,
    /// free (real concurrency) or stepped (one step at a time, replayable from --seed).
    #[arg(long, value_enum, default_value_t = Mode::Free)]
    pub mode: Mode,
    /// Longest plan, in steps (stepped mode) [default: 32].
    #[arg(long, value_name = "N")]
    pub steps: Option<usize>,
    /// Plans to run, seeded S, S+1, ...; stops at the first finding (stepped mode)
    /// [default: 1].
    #[arg(long, value_name = "M")]
    pub plans: Option<u64>,
    /// Run this written plan instead of drawn ones (stepped mode; the text form of
    /// specs/HISTORY.md, "Plan text"; a failing run writes its plan so as plan.txt).
    #[arg(long, value_name = "FILE")]
    pub plan: Option<PathBuf>,
    /// A step neither answered nor waiting for this long is a hang (stepped mode), e.g. 5s.
    #[arg(long, value_parser = humantime::parse_duration)]
    pub step_timeout: Option<Duration>,
    /// Seed of the processes' plans [default: from the clock, printed].
    #[arg(long)]
    pub seed: Option<u64>,
    /// Where run directories go [default: $LEASECHECK_HISTORY_DIR, else results/histories].
    #[arg(long)]
    pub history_dir: Option<PathBuf>,
    /// Isolation levels transactions use (repeatable) [default: read-committed; stepped:
    /// all three, mostly read-committed].
    #[arg(long = "isolation", value_parser = parse_isolation)]
    pub isolations: Vec<Isolation>,
    /// Write timeline.html even when the run is linearizable (it is written on a finding).
    #[arg(long)]
    pub timeline: bool,
    /// Wall-clock budget of the check, e.g. 60s.
    #[arg(long, value_parser = humantime::parse_duration, default_value = "60s")]
    pub budget: Duration,
    /// Search states the check may memoise.
    #[arg(long, value_name = "N", default_value_t = 20_000_000)]
    pub max_states: u64,
    /// Bytes the check's search states may take, e.g. 512MiB, 4GiB.
    #[arg(long, value_name = "SIZE", value_parser = parse_bytes, default_value = "2GiB")]
    pub max_memory: u64,
    /// Inject faults while the campaign runs (free mode): names or groups, e.g.
    /// crash,pause,cut,lapse (see `leasecheck faults`); the schedule is drawn from the seed
    /// and the run lasts --time [default: 60s].
    #[arg(long, value_name = "FAULTS")]
    pub nemesis: Option<String>,
    /// Client-side timeout of every call, e.g. 10s.
    #[arg(long, value_parser = humantime::parse_duration, default_value = "10s")]
    pub call_timeout: Duration,
    /// Do not decode the lease table's commits (free mode): lost calls stay as recorded
    /// instead of being resolved from the write-ahead log (to measure what it costs).
    #[arg(long)]
    pub no_decode: bool,
}

fn parse_isolation(s: &str) -> Result<Isolation, String> {
    Isolation::from_sql(&s.replace('-', " "))
        .ok_or_else(|| format!("{s:?}: expected read-committed, repeatable-read or serializable"))
}

const DEFAULT_OPS: u64 = 1_500;
const DEFAULT_PROCESSES: u32 = 8;
const DEFAULT_KEYS: u32 = 2;

impl CheckArgs {
    /// Refuses the options of the other mode.
    fn check_mode_options(&self) -> anyhow::Result<()> {
        if self.plan.is_some() && self.mode == Mode::Free {
            bail!("--plan runs a written plan one step at a time: add --mode stepped");
        }
        self.check_plan_options()?;
        let (others, mode) = match self.mode {
            Mode::Free => (
                vec![
                    ("--steps", self.steps.is_some()),
                    ("--plans", self.plans.is_some()),
                    ("--step-timeout", self.step_timeout.is_some()),
                ],
                "stepped",
            ),
            Mode::Stepped => (
                vec![
                    ("--ops", self.ops.is_some()),
                    ("--time", self.time.is_some()),
                    ("--nemesis", self.nemesis.is_some()),
                    ("--no-decode", self.no_decode),
                ],
                "free",
            ),
        };
        if let Some((option, _)) = others.iter().find(|(_, given)| *given) {
            bail!("{option} is an option of --mode {mode}");
        }
        Ok(())
    }

    /// Refuses, beside `--plan`, the options that shape drawn plans: the file says it all.
    fn check_plan_options(&self) -> anyhow::Result<()> {
        if self.plan.is_none() {
            return Ok(());
        }
        let drawn = [
            (
                "--seed",
                self.seed.is_some(),
                "--seed draws a plan, --plan runs the file's: give one of them",
            ),
            (
                "--plans",
                self.plans.is_some(),
                "--plans runs drawn plans of seeds S, S+1, ...: leave it out to run the file's plan",
            ),
            (
                "--steps",
                self.steps.is_some(),
                "--steps bounds drawn plans: the file's plan runs every step it has",
            ),
            (
                "--processes",
                self.processes.is_some(),
                "the file's `processes N` line sets them: leave --processes out",
            ),
            (
                "--keys",
                self.keys.is_some(),
                "the file's `keys N` line sets them: leave --keys out",
            ),
            (
                "--isolation",
                !self.isolations.is_empty(),
                "the file's `begin` lines name their levels: leave --isolation out",
            ),
        ];
        match drawn.iter().find(|(_, given, _)| *given) {
            Some((option, _, why)) => bail!("{option} cannot be used with --plan: {why}"),
            None => Ok(()),
        }
    }

    fn budget(&self) -> Budget {
        Budget {
            time: Some(self.budget),
            states: Some(self.max_states),
            memory: Some(self.max_memory),
        }
    }

    fn campaign(&self, history_file: PathBuf, seed: u64) -> anyhow::Result<Campaign> {
        let target: Target = self.target.parse()?;
        let workload = Workload {
            processes: self.processes.unwrap_or(DEFAULT_PROCESSES),
            keys: self.keys.unwrap_or(DEFAULT_KEYS),
            isolations: if self.isolations.is_empty() {
                Workload::default().isolations
            } else {
                self.isolations.clone()
            },
            ..Workload::default()
        };
        workload.validate()?;
        let length = match self.time {
            Some(t) => Length::Time(t),
            None => Length::Ops(self.ops.unwrap_or(DEFAULT_OPS)),
        };
        Ok(Campaign {
            workload,
            length,
            seed,
            target,
            budget: self.budget(),
            call_timeout: self.call_timeout,
            history_file: Some(history_file),
            decode_wal: !self.no_decode,
            ..Campaign::new(target, length, seed)
        })
    }
}

/// The progress bar of a run.
struct Bar(ProgressBar);

impl Progress for Bar {
    fn recorded(&self, ops: u64) {
        self.0.set_position(ops);
    }

    fn checking(&self) {
        self.0.set_message("recorded; checking the history");
    }
}

fn bar(length: Length) -> Bar {
    let (bar, template) = match length {
        Length::Ops(n) => (
            ProgressBar::new(n),
            "{spinner} [{elapsed_precise}] {bar:40} {pos}/{len} ops ({per_sec}) {msg}",
        ),
        Length::Time(_) => (
            ProgressBar::no_length(),
            "{spinner} [{elapsed_precise}] {pos} ops ({per_sec}) {msg}",
        ),
    };
    if let Ok(style) = ProgressStyle::with_template(template) {
        bar.set_style(style);
    }
    bar.enable_steady_tick(Duration::from_millis(200));
    Bar(bar)
}

/// The directory runs go into.
fn runs_dir(args: &CheckArgs) -> PathBuf {
    args.history_dir
        .clone()
        .or_else(|| std::env::var_os(campaign::HISTORY_DIR_ENV).map(PathBuf::from))
        .unwrap_or_else(|| PathBuf::from("results/histories"))
}

fn clock_seed() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

fn async_runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .enable_all()
        .build()
        .context("starting the async runtime")
}

/// Runs the campaign; the exit status.
pub fn run(args: &CheckArgs) -> anyhow::Result<i32> {
    args.check_mode_options()?;
    let seed = args.seed.unwrap_or_else(clock_seed);
    let dir = runs_dir(args).join(chrono::Utc::now().format("%Y%m%dT%H%M%SZ").to_string());
    match args.mode {
        Mode::Free => match &args.nemesis {
            Some(list) => under_faults::run(args, list, seed, &dir),
            None => run_free(args, seed, &dir),
        },
        Mode::Stepped => stepped::run(args, seed, &dir),
    }
}

fn run_free(args: &CheckArgs, seed: u64, dir: &Path) -> anyhow::Result<i32> {
    let campaign = args.campaign(dir.join("history.jsonl"), seed)?;
    println!(
        "check: {} on PostgreSQL {}, {} processes x {} keys, {}, seed {seed} (repeat with --seed {seed})",
        campaign.target,
        args.major,
        campaign.workload.processes,
        campaign.workload.keys,
        match campaign.length {
            Length::Ops(n) => format!("{n} ops"),
            Length::Time(t) => format!("for {t:?}"),
        }
    );
    let (_install, cluster) = crate::start(args.major)?;
    let runtime = async_runtime()?;
    let bar = Arc::new(bar(campaign.length));
    let report = runtime.block_on(campaign::run(&cluster, &campaign, bar.clone()));
    bar.0.finish_and_clear();
    let files = RunFiles::new(dir);
    let history = files.history_name();
    let timeline = files.write_timeline(
        args.timeline,
        &report,
        None,
        &format!("{} seed {seed}", campaign.target),
    )?;
    let mut verdict = campaign::verdict_json(&report, &campaign, history);
    if let Some(fields) = verdict.as_object_mut() {
        fields.insert("timeline".into(), timeline.into());
    }
    files.write_verdict(&verdict)?;
    println!("{}", report.outcome);
    files.print_timeline(timeline);
    print_figures(&report.figures);
    files.print_paths(&report, &format!("seed {seed}"));
    Ok(report.outcome.exit().code())
}

fn print_figures(f: &campaign::Figures) {
    println!(
        "{} ops recorded in {:.1?} ({:.0} ops/s; {} unknown, {} failed, {} txns, {} process ids); check {:.1?}",
        f.ops,
        f.record_time,
        f.ops_per_s(),
        f.unknown_ops,
        f.failed_ops,
        f.txns,
        f.process_ids,
        f.check_time
    );
}

/// The files of one run directory.
struct RunFiles {
    dir: PathBuf,
}

const HISTORY: &str = "history.jsonl";
const VERDICT: &str = "verdict.json";
const TIMELINE: &str = "timeline.html";
const PLAN: &str = "plan.txt";

impl RunFiles {
    fn new(dir: &Path) -> RunFiles {
        RunFiles {
            dir: dir.to_path_buf(),
        }
    }

    /// The history file's name, when one was written (a run that failed before recording
    /// started has none).
    fn history_name(&self) -> Option<&'static str> {
        self.dir.join(HISTORY).exists().then_some(HISTORY)
    }

    /// Writes the timeline page on a finding, or when asked; its name when written.
    fn write_timeline(
        &self,
        asked: bool,
        report: &campaign::Report,
        verdict: Option<&model::Verdict>,
        title: &str,
    ) -> anyhow::Result<Option<&'static str>> {
        let finding = report.outcome.exit() == model::Exit::Finding;
        let (Some(history), true) = (report.history.as_ref(), asked || finding) else {
            return Ok(None);
        };
        let from_outcome = report.outcome.verdict();
        let Some(verdict) = verdict.or(from_outcome.as_ref()) else {
            return Ok(None);
        };
        let page = harness::timeline::render(history, verdict, title);
        let path = self.dir.join(TIMELINE);
        std::fs::create_dir_all(&self.dir)
            .with_context(|| format!("creating {}", self.dir.display()))?;
        std::fs::write(&path, page).with_context(|| format!("writing {}", path.display()))?;
        Ok(Some(TIMELINE))
    }

    fn write_verdict(&self, verdict: &serde_json::Value) -> anyhow::Result<()> {
        std::fs::create_dir_all(&self.dir)
            .with_context(|| format!("creating {}", self.dir.display()))?;
        let path = self.dir.join(VERDICT);
        let text = serde_json::to_string_pretty(verdict).context("encoding the verdict")?;
        std::fs::write(&path, text + "\n").with_context(|| format!("writing {}", path.display()))
    }

    /// Writes a stepped plan's text form (specs/HISTORY.md, "Plan text"); its path.
    fn write_plan(&self, plan: &harness::stepped::Plan) -> anyhow::Result<PathBuf> {
        std::fs::create_dir_all(&self.dir)
            .with_context(|| format!("creating {}", self.dir.display()))?;
        let path = self.dir.join(PLAN);
        std::fs::write(&path, plan.to_text())
            .with_context(|| format!("writing {}", path.display()))?;
        Ok(path)
    }

    /// Says where the timeline page is, right under the verdict, when one was written.
    fn print_timeline(&self, timeline: Option<&str>) {
        if let Some(name) = timeline {
            println!(
                "timeline of this verdict: {}",
                self.dir.join(name).display()
            );
        }
    }

    /// The last line: where everything is, and what ran (`seed S`, `plan FILE`).
    fn print_paths(&self, report: &campaign::Report, what_ran: &str) {
        let shown = |name: &str| {
            let path = self.dir.join(name);
            if path.exists() {
                path.display().to_string()
            } else {
                "none".to_string()
            }
        };
        println!(
            "PostgreSQL {}; history {}; verdict {}; timeline {}; {what_ran}",
            report.postgres,
            shown(HISTORY),
            shown(VERDICT),
            shown(TIMELINE)
        );
    }
}

/// A size as `123`, `512KiB`, `512MiB` or `4GiB` (bytes; binary units).
pub fn parse_bytes(text: &str) -> Result<u64, String> {
    let text = text.trim();
    let digits = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(digits);
    let n: u64 = number
        .parse()
        .map_err(|_| format!("{text:?}: expected a number of bytes, e.g. 512MiB"))?;
    let shift = match unit.trim() {
        "" | "B" => 0,
        "KiB" => 10,
        "MiB" => 20,
        "GiB" => 30,
        "TiB" => 40,
        other => return Err(format!("{other:?}: expected B, KiB, MiB, GiB or TiB")),
    };
    n.checked_mul(1 << shift)
        .ok_or_else(|| format!("{text:?}: too large"))
}
