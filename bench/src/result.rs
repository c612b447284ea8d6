//! `result.json`: one schema for every bench run (documented in bench/README.md).

use crate::env::Environment;
use crate::error::{BenchError, Result};
use crate::stats::{Spread, Summary};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::Path;

/// Bumped on any incompatible change of [`BenchResult`].
pub const SCHEMA: u32 = 1;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BenchResult {
    pub schema: u32,
    /// RFC 3339, UTC.
    pub started_at: String,
    pub finished_at: String,
    pub major: u32,
    pub quick: bool,
    pub settings: RunSettings,
    pub environment: Environment,
    pub figures: Vec<Figure>,
    pub targets: Vec<Target>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RunSettings {
    pub warmup_s: f64,
    pub measure_s: f64,
    pub repeats: u32,
    pub clients: Vec<u32>,
    pub wake_samples: u32,
    /// The open loop runs at this share of the closed loop's median throughput.
    pub open_loop_share: f64,
    pub workloads: Vec<String>,
}

/// Which driver measured a figure.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Driver {
    RustClosed,
    RustOpen,
    PgbenchClosed,
    PgbenchOpen,
}

impl Driver {
    pub fn label(self) -> &'static str {
        match self {
            Driver::RustClosed => "rust-closed",
            Driver::RustOpen => "rust-open",
            Driver::PgbenchClosed => "pgbench-closed",
            Driver::PgbenchOpen => "pgbench-open",
        }
    }
}

/// One latency figure: a workload's op at a client count, by one driver, over the repeats.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Figure {
    pub workload: String,
    pub op: String,
    pub clients: u32,
    pub driver: Driver,
    /// Open loop: the set rate (per second, all clients together).
    pub rate_per_s: Option<f64>,
    /// Field-wise median of the repeats.
    pub median: Summary,
    pub spread: Spread,
    pub repeats: Vec<Summary>,
    /// How often each answer came back (first column of the first row), all repeats.
    pub outcomes: BTreeMap<String, u64>,
    /// The floor figure (workload, op) at the same client count and driver.
    pub floor: Option<FloorRef>,
    /// WAL bytes written per statement while the Rust closed loop ran (warm-up included).
    pub wal_bytes_per_statement: Option<f64>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FloorRef {
    pub workload: String,
    pub op: String,
}

impl Figure {
    /// `workload/op @N clients [driver]`.
    pub fn key(&self) -> String {
        format!(
            "{}/{} @{} [{}]",
            self.workload,
            self.op,
            self.clients,
            self.driver.label()
        )
    }
}

/// One of the targets, evaluated on this run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Target {
    pub name: String,
    pub figure: String,
    /// What was measured (a ratio, or µs).
    pub value: f64,
    pub limit: f64,
    pub met: bool,
    pub basis: String,
}

impl BenchResult {
    /// The figure (workload, op, clients, driver), if measured.
    pub fn figure(
        &self,
        workload: &str,
        op: &str,
        clients: u32,
        driver: Driver,
    ) -> Option<&Figure> {
        self.figures.iter().find(|f| {
            f.workload == workload && f.op == op && f.clients == clients && f.driver == driver
        })
    }

    /// The figure's p50 over its floor's p50 (same client count and driver): the median of
    /// the repeats' ratios (repeat i of a figure and of its floor ran back to back), or the
    /// ratio of the medians when the repeat counts differ.
    pub fn floor_ratio(&self, figure: &Figure) -> Option<f64> {
        let floor = figure.floor.as_ref()?;
        let f = self.figure(&floor.workload, &floor.op, figure.clients, figure.driver)?;
        if f.median.p50_us <= 0.0 {
            return None;
        }
        if f.repeats.len() != figure.repeats.len() || f.repeats.iter().any(|r| r.p50_us <= 0.0) {
            return Some(figure.median.p50_us / f.median.p50_us);
        }
        let mut ratios: Vec<f64> = figure
            .repeats
            .iter()
            .zip(&f.repeats)
            .map(|(a, b)| a.p50_us / b.p50_us)
            .collect();
        ratios.sort_by(|a, b| a.total_cmp(b));
        let n = ratios.len();
        Some(if n % 2 == 1 {
            ratios[n / 2]
        } else {
            (ratios[n / 2 - 1] + ratios[n / 2]) / 2.0
        })
    }

    /// Reads `dir/result.json`.
    pub fn read(dir: &Path) -> Result<BenchResult> {
        let path = dir.join("result.json");
        let text = std::fs::read_to_string(&path)
            .map_err(BenchError::io("reading a bench result", &path))?;
        let result: BenchResult = serde_json::from_str(&text)?;
        if result.schema != SCHEMA {
            return Err(BenchError::Compare(format!(
                "{} has schema {}, this build reads {SCHEMA}",
                path.display(),
                result.schema
            )));
        }
        Ok(result)
    }
}
