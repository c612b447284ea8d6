//! `leasecheck`: the correctness gate and benchmark for pg_lease.

mod bench_cmd;
mod check_cmd;
mod check_history_cmd;
mod faults_cmd;
mod gate;
mod image_cmd;
mod model_cmd;
mod mutants_cmd;

use anyhow::{bail, Context};
use clap::{Parser, Subcommand};
use harness::pg::{Cluster, PgInstall};
use std::path::PathBuf;

#[derive(Debug, Parser)]
#[command(
    name = "leasecheck",
    version,
    about = "Correctness gate and benchmark for the pg_lease extension"
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the conformance suite against throwaway clusters.
    Run(RunArgs),
    /// Run the extension's PGXS suites (make installcheck) against throwaway clusters.
    Installcheck(InstallcheckArgs),
    /// Download the pinned PostgreSQL build of a supported major into the cache.
    FetchPg {
        #[arg(help = format!("A supported major ({})", harness::pg::majors::supported_range()))]
        major: u32,
    },
    /// Show which PostgreSQL install would be used for a major.
    FindPg { major: u32 },
    /// Model-check the spec (the 11 invariants), run its negative controls, or serve the Explorer.
    Model(model_cmd::ModelArgs),
    /// Judge a recorded history (specs/HISTORY.md): exit 0 linearizable, 1 violation, 2 unknown
    /// or unreadable.
    CheckHistory(check_history_cmd::CheckHistoryArgs),
    /// Run a free-running campaign against a throwaway cluster and judge its history: exit 0
    /// linearizable, 1 violation, 2 unknown or infrastructure failure.
    Check(check_cmd::CheckArgs),
    /// The correctness gate: every suite against a build of pg_lease on each major; exit 0
    /// all passed, 1 a finding, 2 an infrastructure error without a finding.
    Gate(gate::GateArgs),
    /// Work with gate reports: `report merge` joins the reports of a run's shards.
    #[command(subcommand)]
    Report(ReportCommand),
    /// Build the container images of the gate's container backend, offline from registries.
    #[command(subcommand)]
    Image(image_cmd::ImageCommand),
    /// Hunt every SQL mutant with history campaigns and print the kill rate (exit 0 all
    /// killed and pg_lease clean, 1 a survivor, 2 an infrastructure failure); --export
    /// writes each mutant as a standalone extension.
    Mutants(mutants_cmd::MutantsArgs),
    /// Benchmark pg_lease against its floors (result.json, report.md, SVG plots); with
    /// --compare, exit 1 when a figure regressed against a baseline run.
    Bench(bench_cmd::BenchArgs),
    /// Run the named fault checks (crash, restart, kill, cancel, pause, cut, lapse, ...),
    /// one summary line each: exit 0 all passed, 1 a finding, 2 a check could not run.
    Faults(faults_cmd::FaultsArgs),
    /// Write a released version of pg_lease (0.1.0 or 0.2.0, from the released scripts kept
    /// in extension/) as a build directory: DIR/pg_lease.control and the scripts CREATE
    /// EXTENSION runs for it, for `leasecheck gate --extension DIR`.
    ExportRelease {
        /// The released version.
        version: String,
        /// The directory to write (created if missing).
        dir: PathBuf,
    },
}

#[derive(Debug, Subcommand)]
enum ReportCommand {
    /// Join the reports of every shard of one gate run (`gate --shard K/N --report DIR`)
    /// into one: summary.json, junit.xml, index.html and the shards' files. Exit as the
    /// gate: 0 all passed, 1 a finding, 2 no verdict (or shards that are not one run).
    Merge {
        /// Where to write the merged report (created if missing).
        #[arg(long)]
        out: PathBuf,
        /// Every shard's report directory.
        #[arg(required = true)]
        shards: Vec<PathBuf>,
    },
}

#[derive(Debug, clap::Args, Default)]
struct RunArgs {
    /// PostgreSQL major(s) to run against (repeatable); fetched if not installed.
    #[arg(long = "pg", default_values_t = [harness::pg::DEFAULT_MAJOR])]
    majors: Vec<u32>,
    /// Only the checks whose name contains this text.
    #[arg(long)]
    filter: Option<String>,
}

#[derive(Debug, clap::Args)]
struct InstallcheckArgs {
    /// PostgreSQL major(s) to run against (repeatable); fetched if not installed.
    #[arg(long = "pg", default_values_t = [harness::pg::DEFAULT_MAJOR])]
    majors: Vec<u32>,
    /// The extension source directory (with Makefile, sql/, expected/, specs/).
    #[arg(long)]
    extension_dir: Option<PathBuf>,
}

/// Exit status of a command that did what it was asked (model::exit lists every status).
pub(crate) const EXIT_OK: i32 = model::Exit::Passed.code();

fn main() {
    let cli = Cli::parse();
    // The default job is the gate with its defaults (this checkout's pg_lease, PG 15, local).
    let command = match cli.command {
        Some(command) => command,
        None => match Cli::parse_from(["leasecheck", "gate"]).command {
            Some(command) => command,
            None => unreachable!("parsing `leasecheck gate` gives the gate command"),
        },
    };
    // A judging command that errs out judged nothing: no verdict, never a finding (an
    // unreadable history is not a violation found in it, a bench that could not run is no
    // regression). The other commands have one way to fail.
    let failed = match command {
        Command::CheckHistory(_)
        | Command::Check(_)
        | Command::Gate(_)
        | Command::Report(_)
        | Command::Mutants(_)
        | Command::Bench(_)
        | Command::Faults(_) => model::Exit::NoVerdict,
        Command::Run(_)
        | Command::Installcheck(_)
        | Command::FetchPg { .. }
        | Command::FindPg { .. }
        | Command::Model(_)
        | Command::Image(_)
        | Command::ExportRelease { .. } => model::Exit::Finding,
    }
    .code();
    match real_main(command) {
        Ok(code) => std::process::exit(code),
        Err(err) => {
            // Plain, whole-chain error report (no backtrace, even with RUST_BACKTRACE set).
            eprintln!("error: {err:#}");
            std::process::exit(failed);
        }
    }
}

/// Runs `command`; the exit status when it did not fail.
fn real_main(command: Command) -> anyhow::Result<i32> {
    match command {
        Command::Run(args) => run(args).map(|()| EXIT_OK),
        Command::Installcheck(args) => installcheck(args).map(|()| EXIT_OK),
        Command::FetchPg { major } => {
            let install = harness::pg::fetch(major)
                .with_context(|| format!("fetching PostgreSQL {major}"))?;
            println!(
                "PostgreSQL {} in {}",
                install.version,
                install.bin_dir.display()
            );
            Ok(EXIT_OK)
        }
        Command::FindPg { major } => {
            let install = PgInstall::find(major)?;
            println!(
                "PostgreSQL {} in {} ({:?}); extension dir {}",
                install.version,
                install.bin_dir.display(),
                install.source,
                install.extension_dir().display()
            );
            Ok(EXIT_OK)
        }
        Command::Model(args) => model_cmd::run(&args).map(|()| EXIT_OK),
        Command::CheckHistory(args) => check_history_cmd::run(&args),
        Command::Check(args) => check_cmd::run(&args),
        Command::Gate(args) => gate::run(&args),
        Command::Report(ReportCommand::Merge { out, shards }) => merge_reports(&out, &shards),
        Command::Image(command) => image_cmd::run(&command).map(|()| EXIT_OK),
        Command::Mutants(args) => mutants_cmd::run(&args),
        Command::Bench(args) => bench_cmd::run(&args),
        Command::Faults(args) => faults_cmd::run(&args),
        Command::ExportRelease { version, dir } => export_release(&version, &dir).map(|()| EXIT_OK),
    }
}

/// `leasecheck report merge`: the merged report of a run's shards, printed and written.
fn merge_reports(out: &std::path::Path, dirs: &[PathBuf]) -> anyhow::Result<i32> {
    let shards = gate::merge::read(dirs)?;
    let (run, cut) = gate::merge::merge(&shards)?;
    gate::merge::copy_files(&shards, out)?;
    println!(
        "merged {} shards of {} {} ({} sizes, seed {})",
        shards.len(),
        run.extension,
        run.version,
        run.size,
        run.seed.map_or("unknown".into(), |s| s.to_string())
    );
    if !cut.is_empty() {
        println!(
            "not counted after the finding that the build hangs (an unsharded run does not run them): {}",
            cut.join(", ")
        );
    }
    gate::finish(Some(out), &run)
}

/// Writes the released `version` as a build directory `dir` (the extension named pg_lease).
fn export_release(version: &str, dir: &std::path::Path) -> anyhow::Result<()> {
    use harness::extension::Release;
    let release = Release::from_version(version).with_context(|| {
        let known: Vec<&str> = Release::ALL.iter().map(|r| r.version()).collect();
        format!(
            "no released version {version:?} (known: {})",
            known.join(", ")
        )
    })?;
    let files = release.files(harness::extension::NAME);
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let control = dir.join(format!("{}.control", files.name));
    std::fs::write(&control, &files.control)
        .with_context(|| format!("writing {}", control.display()))?;
    for (name, text) in &files.scripts {
        let path = dir.join(name);
        std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?;
    }
    println!("pg_lease {version}: {}", dir.display());
    Ok(())
}

pub(crate) fn start(major: u32) -> anyhow::Result<(PgInstall, Cluster)> {
    let install = PgInstall::ensure(major)
        .with_context(|| format!("finding or fetching PostgreSQL {major}"))?;
    let cluster = Cluster::start(&install)
        .with_context(|| format!("starting a PostgreSQL {} cluster", install.version))?;
    Ok((install, cluster))
}

fn run(args: RunArgs) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    let mut failed = 0;
    for major in args.majors {
        let (install, cluster) = start(major)?;
        println!(
            "conformance: pg_lease on PostgreSQL {} ({}), port {}",
            install.version,
            install.bin_dir.display(),
            cluster.port()
        );
        let report = runtime.block_on(harness::conformance::run(&cluster, args.filter.as_deref()));
        print!("{}", report.render());
        failed += report.failures().count();
    }
    if failed > 0 {
        bail!("{failed} conformance check(s) failed");
    }
    Ok(())
}

fn installcheck(args: InstallcheckArgs) -> anyhow::Result<()> {
    let dir = args
        .extension_dir
        .unwrap_or_else(harness::installcheck::default_extension_dir);
    let mut failed = Vec::new();
    for major in args.majors {
        let (install, cluster) = start(major)?;
        let report = harness::installcheck::run(&cluster, &dir)
            .with_context(|| format!("running make installcheck in {}", dir.display()))?;
        println!("== PostgreSQL {}\n{}", install.version, report.output);
        if !report.passed {
            println!("{}", report.diffs);
            failed.push(install.version.full.clone());
        }
    }
    if !failed.is_empty() {
        bail!(
            "make installcheck failed on PostgreSQL {}",
            failed.join(", ")
        );
    }
    Ok(())
}
