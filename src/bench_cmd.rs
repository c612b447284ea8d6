//! `leasecheck bench`: runs the bench on one major, writes result.json, report.md and SVG
//! plots under `--out/<timestamp>/`, and with `--compare` checks the run against a baseline
//! (exit 1 when a figure's ratio to its floor worsened beyond the threshold).

use anyhow::{bail, Context};
use bench::{BenchResult, Config};
use harness::extension::ExtensionFiles;
use indicatif::{ProgressBar, ProgressStyle};
use std::path::{Path, PathBuf};

#[derive(Debug, clap::Args)]
pub struct BenchArgs {
    /// PostgreSQL major to run against (14 or 15, or any installed major).
    #[arg(long = "pg", default_value_t = harness::pg::DEFAULT_MAJOR)]
    major: u32,
    /// A few seconds per point (1 s warm-up, 1 s measured, 1 repeat, 10 wake samples).
    #[arg(long)]
    quick: bool,
    /// Client counts (comma separated).
    #[arg(long, value_delimiter = ',', default_value = "1,4,16")]
    clients: Vec<u32>,
    /// Only these workloads (comma separated; default all).
    #[arg(long, value_delimiter = ',')]
    workloads: Vec<String>,
    /// Repeats per point (default 3, or 1 with --quick).
    #[arg(long)]
    repeats: Option<u32>,
    /// Skip the open-loop (fixed-rate) runs.
    #[arg(long)]
    no_open_loop: bool,
    /// Skip pgbench (Rust driver only).
    #[arg(long)]
    no_pgbench: bool,
    /// Measure this extension instead of the shipped pg_lease: a directory holding one
    /// `<name>.control` and its `<name>--*.sql` scripts.
    #[arg(long)]
    extension_dir: Option<PathBuf>,
    /// Where run directories are created.
    #[arg(long, default_value = "results/bench")]
    out: PathBuf,
    /// A baseline run directory (with result.json) to compare with.
    #[arg(long)]
    compare: Option<PathBuf>,
    /// Only re-render report.md and the plots of an existing run directory from its
    /// result.json (nothing is measured).
    #[arg(long, conflicts_with = "compare")]
    render: Option<PathBuf>,
    /// Instead of the bench: where a lease write's time goes (grant, renew, release and the
    /// floor UPDATE, per statement and function, with pg_stat_statements and
    /// track_functions), printed and written to `--out/breakdown-<UTC time>.md`.
    #[arg(long, conflicts_with_all = ["compare", "render"])]
    breakdown: bool,
    /// Calls per op of the breakdown.
    #[arg(long, default_value_t = 2000, requires = "breakdown")]
    iterations: u32,
    /// How much a figure's ratio to its floor may grow over the baseline's.
    #[arg(long, default_value_t = bench::DEFAULT_THRESHOLD)]
    threshold: f64,
}

pub fn run(args: &BenchArgs) -> anyhow::Result<i32> {
    if args.breakdown {
        return breakdown(args);
    }
    if let Some(dir) = &args.render {
        let result =
            BenchResult::read(dir).with_context(|| format!("reading {}", dir.display()))?;
        bench::write(&result, dir).with_context(|| format!("writing {}", dir.display()))?;
        println!("bench: re-rendered {}", dir.display());
        return Ok(crate::EXIT_OK);
    }
    let baseline = match &args.compare {
        Some(dir) => Some(
            BenchResult::read(dir)
                .with_context(|| format!("reading the baseline {}", dir.display()))?,
        ),
        None => None,
    };
    let config = config(args)?;
    let progress = ProgressBar::new(0);
    progress.set_style(
        ProgressStyle::with_template("{elapsed_precise} [{bar:30}] {pos}/{len} {msg}")
            .context("the progress template")?,
    );
    let result = bench::run(&config, &progress).context("running the bench")?;
    let dir = bench::run_dir(&args.out, &result);
    bench::write(&result, &dir).with_context(|| format!("writing {}", dir.display()))?;
    println!(
        "bench: PostgreSQL {}, results in {}",
        result.environment.server_version,
        dir.display()
    );
    let missed: Vec<String> = result
        .targets
        .iter()
        .filter(|t| !t.met)
        .map(|t| format!("{} ({:.3} > {})", t.name, t.value, t.limit))
        .collect();
    println!(
        "targets: {} met, {} not met",
        result.targets.len() - missed.len(),
        missed.len()
    );
    for m in &missed {
        println!("  not met: {m}");
    }
    let Some(baseline) = baseline else {
        return Ok(crate::EXIT_OK);
    };
    let comparison = bench::compare(&baseline, &result, args.threshold)
        .context("comparing with the baseline")?;
    print!("{}", comparison.render());
    let regressed = comparison.regressions().count();
    if regressed > 0 {
        println!(
            "{regressed} figure(s) regressed against {}",
            args.compare
                .as_deref()
                .map(Path::display)
                .map(|d| d.to_string())
                .unwrap_or_default()
        );
        return Ok(model::Exit::Finding.code());
    }
    Ok(crate::EXIT_OK)
}

fn breakdown(args: &BenchArgs) -> anyhow::Result<i32> {
    let extension = match &args.extension_dir {
        Some(dir) => extension_files(dir)?,
        None => ExtensionFiles::pg_lease(),
    };
    let config = bench::breakdown::Config {
        major: args.major,
        extension,
        iterations: args.iterations,
    };
    eprintln!(
        "breakdown: {} calls per op on a throwaway PostgreSQL {} (about a minute)",
        config.iterations, config.major
    );
    let breakdown = bench::breakdown::run(&config).context("running the breakdown")?;
    let text = breakdown.render();
    print!("{text}");
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("creating {}", args.out.display()))?;
    let path = args.out.join(format!(
        "breakdown-{}.md",
        chrono::Utc::now().format("%Y%m%dT%H%M%SZ")
    ));
    std::fs::write(&path, &text).with_context(|| format!("writing {}", path.display()))?;
    println!("\nbreakdown written to {}", path.display());
    Ok(crate::EXIT_OK)
}

fn config(args: &BenchArgs) -> anyhow::Result<Config> {
    let mut config = if args.quick {
        Config::quick(args.major)
    } else {
        Config::full(args.major)
    };
    config.clients = args.clients.clone();
    config.workloads = args.workloads.clone();
    config.open_loop = !args.no_open_loop;
    config.pgbench = !args.no_pgbench;
    if let Some(r) = args.repeats {
        if r == 0 {
            bail!("--repeats must be at least 1");
        }
        config.repeats = r;
    }
    if let Some(dir) = &args.extension_dir {
        config.extension = extension_files(dir)?;
    }
    Ok(config)
}

/// The control file and scripts of the one extension in `dir`.
fn extension_files(dir: &Path) -> anyhow::Result<ExtensionFiles> {
    let mut controls = Vec::new();
    for entry in std::fs::read_dir(dir).with_context(|| format!("listing {}", dir.display()))? {
        let path = entry
            .with_context(|| format!("listing {}", dir.display()))?
            .path();
        if path.extension().is_some_and(|e| e == "control") {
            controls.push(path);
        }
    }
    let [control] = controls.as_slice() else {
        bail!(
            "{} must hold exactly one .control file, found {}",
            dir.display(),
            controls.len()
        );
    };
    let name = control
        .file_stem()
        .and_then(|s| s.to_str())
        .context("the control file's name")?
        .to_string();
    let mut scripts = Vec::new();
    for entry in std::fs::read_dir(dir).with_context(|| format!("listing {}", dir.display()))? {
        let path = entry
            .with_context(|| format!("listing {}", dir.display()))?
            .path();
        let file = path
            .file_name()
            .and_then(|f| f.to_str())
            .unwrap_or_default()
            .to_string();
        if file.starts_with(&format!("{name}--")) && file.ends_with(".sql") {
            let text = std::fs::read_to_string(&path)
                .with_context(|| format!("reading {}", path.display()))?;
            scripts.push((file, text));
        }
    }
    if scripts.is_empty() {
        bail!("{} has no {name}--*.sql script", dir.display());
    }
    let control_text = std::fs::read_to_string(control)
        .with_context(|| format!("reading {}", control.display()))?;
    Ok(ExtensionFiles {
        name,
        control: control_text,
        scripts,
    })
}
