//! The regression check: every figure with a floor, closed loop, present in both runs; its
//! p50 over its floor's p50 (same run, client count and driver) must not grow beyond
//! `threshold` times the baseline's ratio. Ratios, not absolute figures, so that a
//! baseline from a faster or slower moment of the machine still compares.

use crate::error::{BenchError, Result};
use crate::result::{BenchResult, Driver};
use serde::Serialize;

/// The default threshold: a ratio may grow by 30 % before it is a regression.
pub const DEFAULT_THRESHOLD: f64 = 1.30;

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Row {
    pub figure: String,
    pub baseline_ratio: f64,
    pub current_ratio: f64,
    /// current / baseline.
    pub change: f64,
    pub regressed: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Comparison {
    pub threshold: f64,
    pub rows: Vec<Row>,
}

impl Comparison {
    pub fn regressions(&self) -> impl Iterator<Item = &Row> {
        self.rows.iter().filter(|r| r.regressed)
    }

    pub fn render(&self) -> String {
        let mut s = format!(
            "compare: {} figures, threshold {:.2}x of the baseline's ratio to its floor\n",
            self.rows.len(),
            self.threshold
        );
        for r in &self.rows {
            s.push_str(&format!(
                "{} {:<60} ratio {:>6.3} -> {:>6.3} ({:+.1} %)\n",
                if r.regressed {
                    "REGRESSED"
                } else {
                    "ok       "
                },
                r.figure,
                r.baseline_ratio,
                r.current_ratio,
                (r.change - 1.0) * 100.0
            ));
        }
        s
    }
}

pub fn compare(
    baseline: &BenchResult,
    current: &BenchResult,
    threshold: f64,
) -> Result<Comparison> {
    if threshold.is_nan() || threshold < 1.0 {
        return Err(BenchError::Compare(format!(
            "threshold {threshold} is below 1"
        )));
    }
    let mut rows = Vec::new();
    let closed = [Driver::RustClosed, Driver::PgbenchClosed];
    for f in current
        .figures
        .iter()
        .filter(|f| closed.contains(&f.driver))
    {
        let Some(current_ratio) = current.floor_ratio(f) else {
            continue;
        };
        let Some(b) = baseline.figure(&f.workload, &f.op, f.clients, f.driver) else {
            continue;
        };
        let Some(baseline_ratio) = baseline.floor_ratio(b) else {
            continue;
        };
        let change = current_ratio / baseline_ratio;
        rows.push(Row {
            figure: f.key(),
            baseline_ratio,
            current_ratio,
            change,
            regressed: change > threshold,
        });
    }
    if rows.is_empty() {
        return Err(BenchError::Compare(
            "no figure with a floor is in both runs (different workloads or client counts?)".into(),
        ));
    }
    Ok(Comparison { threshold, rows })
}
