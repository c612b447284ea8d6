//! `leasecheck gate`: installs a build of pg_lease (a user's, or this checkout's) and runs
//! every suite on every asked major, locally or each major in its own container; prints a
//! summary table, writes the reports, and exits 0 only if everything passed.

mod container;
mod ctx;
pub mod dsn;
mod lanes;
mod listing;
pub mod merge;
pub mod outcome;
mod plan;
pub mod report;
pub mod shard;
mod suites;

use anyhow::{bail, Context};
use harness::extension::Build;
use harness::pg::{Cluster, ClusterOptions, PgInstall};
use indicatif::{ProgressBar, ProgressStyle};
use outcome::{CheckResult, GateRun, MajorResult, ScriptDigest, Status, SuiteResult};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Backend {
    /// Throwaway clusters on this machine.
    Local,
    /// Each major in its own container (images from `leasecheck image build`).
    Container,
}

/// How much each suite runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum Size {
    Quick,
    Full,
}

impl Size {
    fn word(self) -> &'static str {
        match self {
            Size::Quick => "quick",
            Size::Full => "full",
        }
    }
}

/// Run every suite against a build of pg_lease on PostgreSQL majors: exit 0 all passed,
/// 1 a finding, 2 an infrastructure error without a finding.
#[derive(Debug, Clone, clap::Args)]
pub struct GateArgs {
    /// A directory with the extension's control file and scripts (and, for installcheck,
    /// its Makefile, sql/, expected/, specs/) [default: this checkout's extension/].
    #[arg(long, conflicts_with_all = ["extension_sql", "control"])]
    pub extension: Option<PathBuf>,
    /// One install script for the control file's default_version (with --control).
    #[arg(long, requires = "control")]
    pub extension_sql: Option<PathBuf>,
    /// The control file of --extension-sql.
    #[arg(long, requires = "extension_sql")]
    pub control: Option<PathBuf>,
    /// The PGXS test sources (Makefile, sql/, expected/, specs/) of the installcheck suite
    /// [default: --extension DIR when it has them, else this checkout's extension/].
    #[arg(long)]
    pub tests: Option<PathBuf>,
    #[arg(
        long = "pg",
        default_value_t = harness::pg::DEFAULT_MAJOR.to_string(),
        help = format!(
            "PostgreSQL majors, comma separated, or `all` (every supported major, {})",
            harness::pg::majors::supported_range()
        )
    )]
    pub majors: String,
    #[arg(long, value_enum, default_value_t = Backend::Local)]
    pub backend: Backend,
    /// Small sizes (the default): a few minutes per major.
    #[arg(long, conflicts_with = "full")]
    pub quick: bool,
    /// Full sizes: longer campaigns, more stepped plans.
    #[arg(long)]
    pub full: bool,
    /// Only these suites (repeatable) [default: all].
    #[arg(long = "suite")]
    pub suites: Vec<String>,
    /// Print what the selected suites run on the --pg majors (each suite's checks at the
    /// size and seed, those needing a managed server marked; the attack-surface statement
    /// classes) and exit.
    #[arg(long)]
    pub list: bool,
    /// Only these fault checks in the faults suite (repeatable) [default: --quick one per
    /// class, --full all; `leasecheck faults --list` names them].
    #[arg(long = "fault", value_name = "NAME")]
    pub faults: Vec<nemesis::Fault>,
    /// A bench result directory (`results/bench/<ts>`, or `<report>/pg<N>/bench` of an
    /// earlier gate): the bench suite fails when a figure's ratio to its floor grew
    /// beyond --bench-threshold times the baseline's.
    #[arg(long)]
    pub bench_baseline: Option<PathBuf>,
    /// The bench regression threshold (see bench::compare).
    #[arg(long, default_value_t = bench::DEFAULT_THRESHOLD, requires = "bench_baseline")]
    pub bench_threshold: f64,
    /// Where to write summary.json, junit.xml and index.html [default: none written].
    #[arg(long)]
    pub report: Option<PathBuf>,
    /// Seed of the campaigns and plans [default: from the clock, printed].
    #[arg(long)]
    pub seed: Option<u64>,
    /// Calls per campaign of the campaign suite [default: 1500 quick, 3000 full]. Fewer
    /// may leave a spec branch the suite requires unreached: then it has no verdict.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub campaign_ops: Option<u64>,
    /// Container backend: the image repository (tag = major) [default: leasecheck-pg, or
    /// postgres with --official-images].
    #[arg(long)]
    pub image: Option<String>,
    /// Container backend: use the registry's official postgres:<major> images.
    #[arg(long)]
    pub official_images: bool,
    /// Gate an existing server instead of starting one: a libpq URL
    /// (postgres://user[:pw]@host:port/db) or key=value string. The build must be installed
    /// there (under its own name, default pg_lease); the role needs CREATEDB (superuser for
    /// every check). Checks that need a restart or crash are skipped.
    #[arg(long, conflicts_with_all = ["majors", "backend", "image", "official_images"])]
    pub dsn: Option<String>,
    /// Run only share K of N of this run's units (a suite on a major), split the same way
    /// on every runner; `leasecheck report merge` joins the N reports into one whose
    /// verdict and checks are the unsharded run's. Give every shard the same options and
    /// --seed.
    #[arg(long, value_name = "K/N", conflicts_with = "dsn")]
    pub shard: Option<shard::Shard>,
    /// Local backend: run the units in N lanes at once, each on clusters of its own (split
    /// as --shard splits them), the bench suite alone after them; the verdict and checks are
    /// a one-lane run's. Default: 2, or 1 on a machine with one core (one lane with --shard).
    #[arg(long, default_value_t = default_jobs(), value_parser = clap::value_parser!(u32).range(1..=8),
          conflicts_with_all = ["dsn", "shard"])]
    pub jobs: u32,
}

impl GateArgs {
    fn size(&self) -> Size {
        if self.full {
            Size::Full
        } else {
            Size::Quick
        }
    }

    /// The fault checks of the faults suite.
    fn fault_checks(&self) -> Vec<nemesis::Fault> {
        match self.faults.is_empty() {
            true => suites::faults::of_size(self.size()).to_vec(),
            false => self.faults.clone(),
        }
    }

    /// The bench baseline, read (an unreadable one is refused before anything runs).
    fn bench_baseline(&self) -> anyhow::Result<Option<ctx::Baseline>> {
        let Some(dir) = &self.bench_baseline else {
            return Ok(None);
        };
        let result = bench::BenchResult::read(dir)
            .with_context(|| format!("--bench-baseline {}", dir.display()))?;
        Ok(Some(ctx::Baseline {
            dir: dir.clone(),
            result,
            threshold: self.bench_threshold,
        }))
    }
}

/// Lanes by default: two where the machine has two cores or more (the quick gate on PG 15
/// took 147 s in one lane and 96 s in two on 2 cores, results/gate/timing-quick-pg15).
fn default_jobs() -> u32 {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    cores.min(2) as u32
}

/// The suites each major runs: every selected one on every major, or with `--shard` this
/// shard's units ([`plan::of_shard`]); and what a shard's summary records of the run.
fn plan(args: &GateArgs, majors: &[u32]) -> anyhow::Result<(plan::Plan, Option<shard::ShardRun>)> {
    let selected = select_suites(&args.suites)?;
    let Some(which) = args.shard else {
        return Ok((plan::whole(majors, &selected), None));
    };
    let faults = args
        .fault_checks()
        .iter()
        .map(|f| f.name().into())
        .collect();
    let (plan, record) = plan::of_shard(which, majors, &selected, args.size(), faults)?;
    Ok((plan, Some(record)))
}

/// `14,15` or `all` ([`harness::pg::majors::parse_list`]).
pub fn parse_majors(text: &str) -> anyhow::Result<Vec<u32>> {
    harness::pg::majors::parse_list(text).with_context(|| format!("--pg {text:?}"))
}

/// The build under test, from the options.
fn load_build(args: &GateArgs) -> anyhow::Result<Build> {
    let build = match (&args.extension, &args.extension_sql, &args.control) {
        (Some(dir), _, _) => Build::from_dir(dir)?,
        (None, Some(sql), Some(control)) => Build::from_sql(sql, control)?,
        _ => Build::from_dir(&harness::installcheck::default_extension_dir())
            .context("no --extension given and this checkout's extension/ is not readable")?,
    };
    Ok(build)
}

/// The PGXS test sources: the given directory when it has them, else this checkout's.
pub(crate) fn tests_dir(args: &GateArgs) -> Option<PathBuf> {
    let has_suites = |d: &Path| d.join("Makefile").is_file() && d.join("sql").is_dir();
    args.tests
        .clone()
        .or_else(|| args.extension.clone().filter(|d| has_suites(d)))
        .or_else(|| Some(harness::installcheck::default_extension_dir()).filter(|d| has_suites(d)))
}

fn clock_seed() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

/// Runs the gate; the exit status.
pub fn run(args: &GateArgs) -> anyhow::Result<i32> {
    let majors = parse_majors(&args.majors)?;
    let (plan, shard) = plan(args, &majors)?;
    let seed = args.seed.unwrap_or_else(clock_seed);
    if args.list {
        // A reader that stops early (`| head`) is not an error.
        let text = list(args, &plan, shard.as_ref(), seed);
        let _ = std::io::Write::write_all(&mut std::io::stdout().lock(), text.as_bytes());
        return Ok(model::Exit::Passed.code());
    }
    let mut build = load_build(args)?;
    if let Some(dsn) = &args.dsn {
        // Its owner installed the build on the server under its own name.
        build = build.under_given_name();
        dsn::parse(dsn)?;
    }
    let build: &'static Build = Box::leak(Box::new(build));
    let on = match &args.dsn {
        Some(_) => "an existing server (--dsn)".to_string(),
        None => format!(
            "PostgreSQL {}, {:?} backend",
            majors
                .iter()
                .map(u32::to_string)
                .collect::<Vec<_>>()
                .join(", "),
            args.backend
        ),
    };
    let installed = match &args.dsn {
        Some(_) => format!("installed on the server as {}", build.files.name),
        None => format!("installed as {}", build.files.name),
    };
    let baseline = args.bench_baseline()?;
    let share = match &shard {
        Some(s) => format!(
            ", shard {}/{} ({} unit(s))",
            s.index,
            s.count,
            s.units.len()
        ),
        None => String::new(),
    };
    println!(
        "gate: {} {} ({installed}), {} sizes, {on}, seed {seed}{share}",
        build.given.name,
        build.version,
        args.size().word(),
    );
    for (file, sha) in build.script_digests() {
        println!("sha256 {sha}  {file}");
    }
    let started = chrono::Utc::now();
    let clock = Instant::now();
    // Without --report the run's files (histories, timelines) go to a directory removed
    // at the end.
    let scratch = tempfile::Builder::new()
        .prefix("leasecheck-gate-")
        .tempdir()
        .context("creating a scratch directory")?;
    let report_dir = args
        .report
        .clone()
        .unwrap_or_else(|| scratch.path().to_path_buf());
    let mut server = None;
    let results = match (&args.dsn, args.backend) {
        (Some(url), _) => {
            let (results, existing) = dsn::run(args, build, url, seed, &report_dir)?;
            server = Some(existing);
            results
        }
        (None, Backend::Local) if args.jobs > 1 && args.shard.is_none() => {
            // Unsharded, every major runs the same selected suites.
            let selected = plan.first().map(|(_, s)| s.clone()).unwrap_or_default();
            let baseline = baseline.as_ref();
            let jobs = args.jobs;
            lanes::run(
                args,
                build,
                &majors,
                &selected,
                seed,
                &report_dir,
                baseline,
                jobs,
            )?
        }
        (None, Backend::Local) => {
            let multi = indicatif::MultiProgress::new();
            let baseline = baseline.as_ref();
            run_local(args, build, &plan, seed, &report_dir, baseline, &multi)?
        }
        (None, Backend::Container) => container::run(args, &plan, seed, &report_dir)?,
    };
    let run = GateRun {
        schema: outcome::SCHEMA,
        leasecheck: env!("CARGO_PKG_VERSION").to_string(),
        extension: build.given.name.clone(),
        version: build.version.clone(),
        scripts: build
            .script_digests()
            .into_iter()
            .map(|(file, sha256)| ScriptDigest { file, sha256 })
            .collect(),
        size: args.size().word().to_string(),
        started: started.to_rfc3339(),
        seconds: clock.elapsed().as_secs_f64(),
        seed: Some(seed),
        shard,
        merged_shards: None,
        status: GateRun::overall(&results),
        majors: results,
        server,
    };
    finish(args.report.as_deref(), &run)
}

/// Prints the table and the problems, writes the reports into `report`; the exit status.
pub fn finish(report: Option<&Path>, run: &GateRun) -> anyhow::Result<i32> {
    println!("\n{}", report::table(run));
    print!("{}", report::figures(run));
    print!("{}", report::coverage_lines(run));
    print!("{}", report::problems(run));
    if let Some(server) = &run.server {
        println!(
            "server {} as {}: scripts {}",
            server.address, server.role, server.scripts
        );
        println!(
            "removed from the server: {} database(s), {} role(s)",
            server.removed_databases.len(),
            server.removed_roles.len()
        );
    }
    let skipped = run.skipped();
    if !skipped.is_empty() {
        println!("skipped ({}, not passed):", outcome::SKIPPED_NEEDS);
        for check in skipped {
            println!("    {check}");
        }
    }
    if let Some(dir) = report {
        report::write_all(run, dir)?;
        println!(
            "report: {} ({}, {})",
            dir.join(report::HTML).display(),
            report::JUNIT,
            report::SUMMARY
        );
    }
    println!("gate: {}", run.status.word());
    Ok(match run.status {
        // A finding stands whatever else happened.
        Status::Passed => model::Exit::Passed,
        Status::Failed => model::Exit::Finding,
        // Everything was skipped: nothing was checked.
        Status::Infrastructure | Status::Skipped => model::Exit::NoVerdict,
    }
    .code())
}

fn spinner() -> ProgressBar {
    let bar = ProgressBar::new_spinner();
    if let Ok(style) = ProgressStyle::with_template("{spinner} [{elapsed_precise}] {msg}") {
        bar.set_style(style);
    }
    bar.enable_steady_tick(Duration::from_millis(200));
    bar
}

/// Every major's suites of `plan`, on throwaway clusters here.
fn run_local(
    args: &GateArgs,
    build: &'static Build,
    plan: &plan::Plan,
    seed: u64,
    report_dir: &Path,
    baseline: Option<&ctx::Baseline>,
    multi: &indicatif::MultiProgress,
) -> anyhow::Result<Vec<MajorResult>> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    let faults = args.fault_checks();
    let mut results = Vec::new();
    for (major, suites) in plan {
        let major = *major;
        let bar = multi.add(spinner());
        let local = LocalMajor {
            major,
            build,
            seed,
            size: args.size(),
            campaign_ops: args.campaign_ops,
            suites,
            tests_dir: tests_dir(args),
            report_dir,
            faults: &faults,
            bench_baseline: baseline,
        };
        let result = runtime.block_on(local.run(&bar));
        bar.finish_and_clear();
        multi.remove(&bar);
        multi.suspend(|| println!("PG {major}: {}", result.status.word()));
        results.push(result);
    }
    Ok(results)
}

/// What `plan` runs (`--list`): with `--shard`, the shard's units first; then each major's
/// suites with the checks each lists for the run's size and seed (a suite stops at its
/// first finding), those that need a managed server marked; then the security suite's
/// statement classes with their controls.
fn list(args: &GateArgs, plan: &plan::Plan, shard: Option<&shard::ShardRun>, seed: u64) -> String {
    let mut out = String::new();
    if let Some(s) = shard {
        out.push_str(&format!("shard {}/{}:\n", s.index, s.count));
        for unit in &s.units {
            out.push_str(&format!("  pg{} {}\n", unit.major, unit.suite));
        }
    }
    let drawn = match args.seed {
        Some(_) => String::new(),
        None => format!(" (drawn now: pass --seed {seed} to run these)"),
    };
    out.push_str(&format!("seed {seed}{drawn}\n"));
    let faults = args.fault_checks();
    for (major, suites) in plan {
        out.push_str(&format!("PG {major}:\n"));
        let listing = listing::Listing {
            size: args.size(),
            campaign_ops: args.campaign_ops,
            seed,
            major: *major,
            faults: &faults,
            bench_baseline: args.bench_baseline.is_some(),
        };
        for suite in suites {
            out.push_str(&list_suite(suite, &listing));
        }
    }
    let on_security: Vec<u32> = plan
        .iter()
        .filter(|(_, s)| s.iter().any(|s| s.name == "security"))
        .map(|(m, _)| *m)
        .collect();
    if !on_security.is_empty() {
        out.push('\n');
        out.push_str(&suites::security::surface::list(&on_security));
    }
    out
}

/// A suite's lines of `--list`.
fn list_suite(suite: &suites::Suite, listing: &listing::Listing<'_>) -> String {
    let checks = suite.checks(listing);
    let count = match checks.len() {
        1 => "1 check".to_string(),
        n => format!("{n} checks"),
    };
    let mut out = format!("  {} ({count})\n", suite.name);
    for check in checks {
        match check.needs_managed {
            None => out.push_str(&format!("    {}\n", check.name)),
            Some(why) => out.push_str(&format!(
                "    {}  [needs a managed server: {why}]\n",
                check.name
            )),
        }
    }
    out
}

/// The suites named (all when none); an unknown name is refused.
fn select_suites(names: &[String]) -> anyhow::Result<Vec<suites::Suite>> {
    let all = suites::suites();
    for name in names {
        if !all.iter().any(|s| s.name == name) {
            let known: Vec<&str> = all.iter().map(|s| s.name).collect();
            bail!(
                "unknown suite {name:?}: expected one of {}",
                known.join(", ")
            );
        }
    }
    Ok(all
        .into_iter()
        .filter(|s| names.is_empty() || names.iter().any(|n| n == s.name))
        .collect())
}

/// Runs `selected` one after another on `ctx`'s server, a line per suite. After a finding
/// that the target hangs the remaining suites are not run on this build (each would wait
/// out its own bounds); they are named.
async fn run_suites(
    ctx: &ctx::Ctx<'_>,
    selected: &[suites::Suite],
    major: u32,
    bar: &ProgressBar,
) -> Vec<SuiteResult> {
    let mut results = Vec::new();
    let mut api: Option<Vec<String>> = None;
    for (i, suite) in selected.iter().enumerate() {
        let mut result = suite.run(ctx).await;
        attribute_to_the_api(ctx, &mut result, &mut api).await;
        bar.suspend(|| {
            println!(
                "PG {major} {:<14} {} ({:.0}s)",
                result.suite,
                result.status.word(),
                result.seconds
            )
        });
        let hung = result.checks.iter().any(ctx::is_hang);
        results.push(result);
        let rest: Vec<&str> = selected[i + 1..].iter().map(|s| s.name).collect();
        if hung && !rest.is_empty() {
            bar.suspend(|| {
                println!(
                    "PG {major}: not run on this build after the finding that it hangs: {}",
                    rest.join(", ")
                )
            });
            break;
        }
    }
    results
}

/// Checks without a verdict because the harness's own statement or decoding failed (its
/// plain call of the documented API, which the shipped build answers), on a build whose
/// catalog declares another API than the contract: the build's API is the cause, a
/// finding naming the difference. `api` caches the build's differences.
async fn attribute_to_the_api(
    ctx: &ctx::Ctx<'_>,
    result: &mut SuiteResult,
    api: &mut Option<Vec<String>>,
) {
    let harness_side = |c: &CheckResult| {
        c.status == Status::Infrastructure
            && (c.message.contains("harness bug")
                || c.message.contains("harness's own statement")
                || c.message.contains("error deserializing"))
    };
    if !result.checks.iter().any(harness_side) {
        return;
    }
    if api.is_none() {
        *api = Some(api_differences(ctx).await);
    }
    let differences = api.as_deref().unwrap_or_default();
    if differences.is_empty() {
        return;
    }
    for c in result.checks.iter_mut().filter(|c| harness_side(c)) {
        c.status = Status::Failed;
        c.message = format!(
            "the build declares another API than the contract ({}), so the harness's call of \
             the documented API failed: {}",
            differences.join("; "),
            c.message
        );
    }
    result.status = Status::of_group(result.checks.iter().map(|c| c.status));
}

/// How the build's catalog differs from the contract (none when it cannot be read).
async fn api_differences(ctx: &ctx::Ctx<'_>) -> Vec<String> {
    let ask = async {
        let db = ctx
            .cluster
            .fresh_database_with("api", &ctx.build.files.name)
            .await
            .ok()?;
        let c = ctx.cluster.connect(&db).await.ok()?;
        harness::contract::differences(&c).await.ok()
    };
    tokio::time::timeout(Duration::from_secs(60), ask)
        .await
        .ok()
        .flatten()
        .unwrap_or_default()
}

/// One major on the local backend.
struct LocalMajor<'a> {
    major: u32,
    build: &'static Build,
    seed: u64,
    size: Size,
    campaign_ops: Option<u64>,
    suites: &'a [suites::Suite],
    tests_dir: Option<PathBuf>,
    report_dir: &'a Path,
    faults: &'a [nemesis::Fault],
    bench_baseline: Option<&'a ctx::Baseline>,
}

impl LocalMajor<'_> {
    async fn run(&self, bar: &ProgressBar) -> MajorResult {
        bar.set_message(format!(
            "PG {}: finding or fetching PostgreSQL, starting a cluster",
            self.major
        ));
        let start = Instant::now();
        let server = tokio::task::block_in_place(|| self.start_server());
        let (install, cluster) = match server {
            Ok(pair) => pair,
            Err(e) => {
                let why = harness::judgement::Cause::Server.message(format!("{e:#}"));
                let check = CheckResult::infrastructure("start", why, start.elapsed());
                let suite = SuiteResult::of("server", vec![check], start.elapsed());
                return MajorResult::of(self.major, None, "local", vec![suite]);
            }
        };
        let ctx = ctx::Ctx {
            cluster: &cluster,
            build: self.build,
            size: self.size,
            campaign_ops: self.campaign_ops,
            seed: self.seed,
            out_dir: self.report_dir.join(format!("pg{}", self.major)),
            report_dir: self.report_dir.to_path_buf(),
            tests_dir: self.tests_dir.clone(),
            faults: self.faults,
            bench_baseline: self.bench_baseline,
            bar,
        };
        let results = run_suites(&ctx, self.suites, self.major, bar).await;
        let postgres = Some(install.version.full.clone());
        drop(ctx);
        tokio::task::block_in_place(|| drop(cluster));
        MajorResult::of(self.major, postgres, "local", results)
    }

    /// This process's private copy of the major's install, with the build installed into
    /// it, and a cluster on it.
    fn start_server(&self) -> anyhow::Result<(PgInstall, Cluster)> {
        let install = PgInstall::ensure(self.major)
            .with_context(|| format!("finding or fetching PostgreSQL {}", self.major))?;
        let options = ClusterOptions {
            extensions: vec![
                harness::extension::ExtensionFiles::pg_lease(),
                self.build.files.clone(),
            ],
            ..ClusterOptions::default()
        };
        let cluster = Cluster::start_with(&install, options)
            .with_context(|| format!("starting a PostgreSQL {} cluster", install.version))?;
        Ok((install, cluster))
    }
}
