//! The pg_lease bench: W1-cycle, W2-contend, the single-op paths (grant, renew, release,
//! denied acquire, idempotent re-acquire, inspect, blocking-acquire wake latency) and the
//! floors they are compared with (SELECT 1, a bare durable UPDATE, pg_advisory_xact_lock,
//! the lock store's operations), measured on a throwaway cluster by a tokio-postgres driver
//! (closed and open loop) and by pgbench running the same scripts; HdrHistogram
//! percentiles, the environment, `result.json`, `report.md`, SVG plots and the regression
//! check against a baseline. bench/README.md documents the result schema.

pub mod breakdown;
pub mod compare;
pub mod driver;
pub mod env;
pub mod error;
pub mod lockstore_ops;
pub mod pgbench;
pub mod plot;
pub mod report;
pub mod result;
pub mod run;
pub mod script;
pub mod stats;
pub mod targets;
pub mod wake;
pub mod workloads;

pub use compare::{compare, Comparison, DEFAULT_THRESHOLD};
pub use error::BenchError;
pub use result::BenchResult;
pub use run::{run, Config};

use error::Result;
use std::path::{Path, PathBuf};

/// The gate's bench ([`Config::gate`]) of `extension` on one major, `repeats` per point,
/// no progress shown, nothing written.
pub fn gate_suite(
    major: u32,
    extension: harness::extension::ExtensionFiles,
    repeats: u32,
) -> Result<BenchResult> {
    run(
        &Config::gate(major, extension, repeats),
        &indicatif::ProgressBar::hidden(),
    )
}

/// Writes `result.json`, `report.md` and the SVG plots into `dir` (created).
pub fn write(result: &BenchResult, dir: &Path) -> Result<()> {
    std::fs::create_dir_all(dir)
        .map_err(error::BenchError::io("creating the result directory", dir))?;
    let plots = plot::draw_all(result, dir)?;
    let json = serde_json::to_string_pretty(result)?;
    let path = dir.join("result.json");
    std::fs::write(&path, json + "\n").map_err(error::BenchError::io("writing", &path))?;
    let path = dir.join("report.md");
    std::fs::write(&path, report::render(result, &plots))
        .map_err(error::BenchError::io("writing", &path))?;
    Ok(())
}

/// `base/<UTC timestamp of the run's start>`.
pub fn run_dir(base: &Path, result: &BenchResult) -> PathBuf {
    let started = chrono::DateTime::parse_from_rfc3339(&result.started_at)
        .map(|t| t.with_timezone(&chrono::Utc))
        .unwrap_or_else(|_| chrono::Utc::now());
    base.join(started.format("%Y%m%dT%H%M%SZ").to_string())
}
