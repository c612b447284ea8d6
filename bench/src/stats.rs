//! Latency histograms (HdrHistogram, microseconds) and their summaries across repeats.

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

/// Highest latency a histogram holds (60 s, in µs); longer samples are clamped to it.
const MAX_MICROS: u64 = 60_000_000;

/// A latency histogram in microseconds, 3 significant figures.
#[derive(Debug, Clone)]
pub struct Latencies {
    histogram: Histogram<u64>,
}

impl Default for Latencies {
    fn default() -> Self {
        Latencies::new()
    }
}

impl Latencies {
    pub fn new() -> Latencies {
        // Constant bounds that Histogram accepts (1 <= low, high >= 2 * low, sigfig <= 5).
        let histogram =
            Histogram::new_with_bounds(1, MAX_MICROS, 3).expect("constant histogram bounds");
        Latencies { histogram }
    }

    pub fn record_micros(&mut self, micros: u64) {
        self.histogram
            .saturating_record(micros.clamp(1, MAX_MICROS));
    }

    pub fn record(&mut self, latency: std::time::Duration) {
        self.record_micros(latency.as_micros().min(u128::from(MAX_MICROS)) as u64);
    }

    pub fn merge(&mut self, other: &Latencies) {
        // Same bounds on both sides: add cannot fail.
        let _ = self.histogram.add(&other.histogram);
    }

    pub fn count(&self) -> u64 {
        self.histogram.len()
    }

    /// The summary of the samples taken over `seconds` of measurement.
    pub fn summary(&self, seconds: f64) -> Summary {
        let h = &self.histogram;
        let q = |q: f64| h.value_at_quantile(q) as f64;
        Summary {
            count: h.len(),
            duration_s: seconds,
            throughput_per_s: if seconds > 0.0 {
                h.len() as f64 / seconds
            } else {
                0.0
            },
            p50_us: q(0.50),
            p95_us: q(0.95),
            p99_us: q(0.99),
            p999_us: q(0.999),
            max_us: h.max() as f64,
            mean_us: h.mean(),
        }
    }
}

/// One measurement: the percentiles of its samples, their count and the measured duration.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    pub count: u64,
    pub duration_s: f64,
    pub throughput_per_s: f64,
    pub p50_us: f64,
    pub p95_us: f64,
    pub p99_us: f64,
    pub p999_us: f64,
    pub max_us: f64,
    pub mean_us: f64,
}

/// How far the repeats of one figure lie apart (minimum and maximum across repeats).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Spread {
    pub p50_us_min: f64,
    pub p50_us_max: f64,
    pub p99_us_min: f64,
    pub p99_us_max: f64,
    pub throughput_min: f64,
    pub throughput_max: f64,
}

/// The field-wise median of the repeats, and their spread.
pub fn median_and_spread(repeats: &[Summary]) -> Option<(Summary, Spread)> {
    if repeats.is_empty() {
        return None;
    }
    let med = |f: fn(&Summary) -> f64| median(repeats.iter().map(f).collect());
    let lo = |f: fn(&Summary) -> f64| repeats.iter().map(f).fold(f64::INFINITY, f64::min);
    let hi = |f: fn(&Summary) -> f64| repeats.iter().map(f).fold(f64::NEG_INFINITY, f64::max);
    let counts: Vec<f64> = repeats.iter().map(|s| s.count as f64).collect();
    let summary = Summary {
        count: median(counts) as u64,
        duration_s: med(|s| s.duration_s),
        throughput_per_s: med(|s| s.throughput_per_s),
        p50_us: med(|s| s.p50_us),
        p95_us: med(|s| s.p95_us),
        p99_us: med(|s| s.p99_us),
        p999_us: med(|s| s.p999_us),
        max_us: med(|s| s.max_us),
        mean_us: med(|s| s.mean_us),
    };
    let spread = Spread {
        p50_us_min: lo(|s| s.p50_us),
        p50_us_max: hi(|s| s.p50_us),
        p99_us_min: lo(|s| s.p99_us),
        p99_us_max: hi(|s| s.p99_us),
        throughput_min: lo(|s| s.throughput_per_s),
        throughput_max: hi(|s| s.throughput_per_s),
    };
    Some((summary, spread))
}

/// The median (the mean of the middle two for an even count).
fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(|a, b| a.total_cmp(b));
    let n = values.len();
    match n {
        0 => 0.0,
        _ if n % 2 == 1 => values[n / 2],
        _ => (values[n / 2 - 1] + values[n / 2]) / 2.0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_of_known_samples() {
        let mut l = Latencies::new();
        for v in 1..=1000 {
            l.record_micros(v);
        }
        let s = l.summary(2.0);
        assert_eq!(s.count, 1000);
        assert_eq!(s.throughput_per_s, 500.0);
        assert_eq!(s.p50_us, 500.0);
        assert_eq!(s.p99_us, 990.0);
        assert_eq!(s.max_us, 1000.0);
    }

    #[test]
    fn median_of_repeats_and_spread() {
        let mk = |p50| Summary {
            count: 10,
            duration_s: 1.0,
            throughput_per_s: 10.0,
            p50_us: p50,
            p95_us: p50,
            p99_us: p50,
            p999_us: p50,
            max_us: p50,
            mean_us: p50,
        };
        let (m, s) = median_and_spread(&[mk(3.0), mk(1.0), mk(100.0)]).expect("repeats");
        assert_eq!(m.p50_us, 3.0);
        assert_eq!((s.p50_us_min, s.p50_us_max), (1.0, 100.0));
        assert!(median_and_spread(&[]).is_none());
    }
}
