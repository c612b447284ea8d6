//! The regression check: every figure with a floor measured by the Rust closed loop and
//! present in both runs; its p50 over its floor's p50 (same run, client count and driver)
//! must not grow beyond `threshold` times the baseline's ratio. Ratios, not absolute
//! figures, so that a baseline from a faster or slower moment of the machine still
//! compares. pgbench's figures are reported, not compared: its logs put some µs-scale
//! transactions at 0 µs (see `crate::pgbench::Logged`), and on an unchanged build its
//! inspect ratio at 4 clients moved 2.1x between two runs where no Rust figure moved more
//! than 1.26x.

use crate::error::{BenchError, Result};
use crate::result::{BenchResult, Driver};
use serde::Serialize;

/// The default threshold: a ratio may double before it is a regression. On the shared
/// 2-core machine of results/bench, repeated runs of an unchanged build moved single ratios
/// by up to 1.55x (quick runs, 3 repeats); a tighter threshold needs a quieter machine.
pub const DEFAULT_THRESHOLD: f64 = 2.0;

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
    for f in current
        .figures
        .iter()
        .filter(|f| f.driver == Driver::RustClosed)
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::result::{Figure, FloorRef};
    use crate::stats::{median_and_spread, Summary};

    fn summary(p50_us: f64) -> Summary {
        Summary {
            count: 100,
            duration_s: 1.0,
            throughput_per_s: 100.0,
            p50_us,
            p95_us: p50_us,
            p99_us: p50_us,
            p999_us: p50_us,
            max_us: p50_us,
            mean_us: p50_us,
        }
    }

    fn figure(workload: &str, op: &str, floor: bool, p50s: &[f64]) -> Figure {
        let repeats: Vec<Summary> = p50s.iter().map(|&p| summary(p)).collect();
        let (median, spread) = median_and_spread(&repeats).expect("repeats");
        Figure {
            workload: workload.into(),
            op: op.into(),
            clients: 1,
            driver: Driver::RustClosed,
            rate_per_s: None,
            median,
            spread,
            repeats,
            outcomes: Default::default(),
            floor: floor.then(|| FloorRef {
                workload: "floor-update".into(),
                op: "update".into(),
            }),
            wal_bytes_per_statement: None,
        }
    }

    /// A run whose renew repeats took `renew` µs next to UPDATE repeats of `update` µs.
    fn run(renew: &[f64], update: &[f64]) -> BenchResult {
        BenchResult {
            schema: crate::result::SCHEMA,
            started_at: String::new(),
            finished_at: String::new(),
            major: 15,
            quick: true,
            settings: Default::default(),
            environment: Default::default(),
            figures: vec![
                figure("W1-cycle", "renew", true, renew),
                figure("floor-update", "update", false, update),
            ],
            targets: Vec::new(),
        }
    }

    #[test]
    fn a_ratio_that_grew_beyond_the_threshold_is_flagged_and_a_slower_machine_is_not() {
        let base = run(&[100.0, 110.0, 90.0], &[100.0, 100.0, 100.0]);
        // Everything twice as slow, ratios unchanged: no regression.
        let slower = run(&[200.0, 220.0, 180.0], &[200.0, 200.0, 200.0]);
        let c = compare(&base, &slower, 1.3).expect("compares");
        assert_eq!(c.regressions().count(), 0, "{}", c.render());
        // renew 2.5x its floor where it was 1x: flagged.
        let worse = run(&[250.0, 250.0, 250.0], &[100.0, 100.0, 100.0]);
        let c = compare(&base, &worse, 2.0).expect("compares");
        let flagged: Vec<&str> = c.regressions().map(|r| r.figure.as_str()).collect();
        assert_eq!(flagged, ["W1-cycle/renew @1 [rust-closed]"]);
        assert!(compare(&base, &worse, 0.5).is_err());
    }

    #[test]
    fn the_ratio_is_the_median_of_back_to_back_repeats() {
        // One disturbed repeat (the floor slow while renew was not) does not move it.
        let r = run(&[100.0, 100.0, 100.0], &[100.0, 400.0, 100.0]);
        assert_eq!(r.floor_ratio(&r.figures[0]), Some(1.0));
    }

    #[test]
    fn runs_without_a_common_figure_do_not_compare() {
        let mut other = run(&[100.0], &[100.0]);
        other.figures[0].clients = 4;
        other.figures[1].clients = 4;
        assert!(compare(&run(&[100.0], &[100.0]), &other, 2.0).is_err());
    }
}
