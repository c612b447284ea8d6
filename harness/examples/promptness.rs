//! Measures how promptly a correct build's blocking acquire ends its wait: the overshoot
//! of its 57014 past the deadline and its takeover lag after the holder's expiry, in
//! server time, on this machine idle (as it is) and under load (CPU hogs on every core),
//! and writes `results/promptness/<UTC timestamp>.{json,md}`. The conformance check
//! `blocking_waits_end_promptly_at_deadline_and_expiry` judges the median of 5 waits
//! against a margin set from these figures (`conformance::liveness::PROMPT_MARGIN`).
//!
//! `cargo run --release -p harness --example promptness [-- SAMPLES]` (default 100 of
//! each kind per condition; about 1 minute).

use harness::client::Calls;
use harness::conformance::liveness::{measure_on, PROMPT_MARGIN, PROMPT_SAMPLES};
use harness::extension::ExtensionFiles;
use harness::pg::{Cluster, ClusterOptions, PgInstall};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

const EXTENSION: &str = "pg_lease_promptness";

fn percentile(sorted: &[f64], p: f64) -> f64 {
    let i = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted[i]
}

/// Medians of consecutive groups of `k` (what the check judges), sorted.
fn medians_of(samples: &[f64], k: usize) -> Vec<f64> {
    let mut out: Vec<f64> = samples
        .chunks(k)
        .filter(|c| c.len() == k)
        .map(|c| {
            let mut c = c.to_vec();
            c.sort_by(f64::total_cmp);
            c[k / 2]
        })
        .collect();
    out.sort_by(f64::total_cmp);
    out
}

fn summary(samples: &[f64]) -> serde_json::Value {
    let mut sorted = samples.to_vec();
    sorted.sort_by(f64::total_cmp);
    let medians = medians_of(samples, PROMPT_SAMPLES);
    serde_json::json!({
        "n": sorted.len(),
        "min_ms": sorted[0],
        "p50_ms": percentile(&sorted, 0.5),
        "p90_ms": percentile(&sorted, 0.9),
        "p99_ms": percentile(&sorted, 0.99),
        "max_ms": sorted[sorted.len() - 1],
        "median_of_5": {
            "n": medians.len(),
            "p50_ms": percentile(&medians, 0.5),
            "max_ms": medians[medians.len() - 1],
        },
    })
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

async fn measure(client: &tokio_postgres::Client, n: usize, condition: &str) -> serde_json::Value {
    let before = load_average();
    // Fresh keys per condition: the measurement uses `prompt-*` keys of its own.
    client
        .batch_execute("DELETE FROM lease.leases WHERE key LIKE 'prompt-%'")
        .await
        .expect("a clean slate");
    let (overshoots, lags) = measure_on(Calls::plain(), client, n)
        .await
        .expect("the measurement runs");
    serde_json::json!({
        "condition": condition,
        "load_average_before": before,
        "load_average_after": load_average(),
        "deadline_overshoot": summary(&overshoots),
        "takeover_lag": summary(&lags),
    })
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(100);
    let install = PgInstall::ensure(15).expect("PostgreSQL 15");
    let options = ClusterOptions {
        extensions: vec![ExtensionFiles::renamed(EXTENSION)],
        ..ClusterOptions::default()
    };
    let cluster = Cluster::start_with(&install, options).expect("a cluster");
    let db = cluster
        .fresh_database_with("promptness", EXTENSION)
        .await
        .expect("a database");
    let client = cluster.connect(&db).await.expect("a connection");
    let idle = measure(&client, n, "idle (the machine as it is)").await;
    let cores = std::thread::available_parallelism().map_or(2, |c| c.get());
    let stop = Arc::new(AtomicBool::new(false));
    let hogs: Vec<_> = (0..2 * cores)
        .map(|_| {
            let stop = Arc::clone(&stop);
            std::thread::spawn(move || {
                let mut x = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
                }
                x
            })
        })
        .collect();
    let loaded = measure(
        &client,
        n,
        &format!("loaded ({} CPU-bound threads on {cores} cores)", 2 * cores),
    )
    .await;
    stop.store(true, Ordering::Relaxed);
    for h in hogs {
        let _ = h.join();
    }
    let stamp = chrono::Utc::now().format("%Y%m%dT%H%M%SZ").to_string();
    let result = serde_json::json!({
        "format": "leasecheck-promptness",
        "version": 1,
        "postgres": cluster.version().full,
        "build": "pg_lease 0.2.0 (this checkout)",
        "wait_ms": 200,
        "lease_ms": 150,
        "samples_judged": PROMPT_SAMPLES,
        "margin_ms": PROMPT_MARGIN.as_secs_f64() * 1000.0,
        "conditions": [idle, loaded],
    });
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../results/promptness");
    std::fs::create_dir_all(&dir).expect("results/promptness");
    let json = dir.join(format!("{stamp}.json"));
    std::fs::write(&json, serde_json::to_string_pretty(&result).unwrap()).expect("written");
    let mut md = format!(
        "# Blocking-wait promptness, {stamp} (PostgreSQL {})\n\nA correct build (this checkout's pg_lease 0.2.0): a blocking acquire of 200 ms on a \
         held key (its 57014 past the deadline) and of a key whose 150 ms lease expires \
         (its grant after the expiry), {n} of each per condition, in server time.\n\n\
         | condition | load before/after | measure | p50 | p90 | p99 | max | max median of {PROMPT_SAMPLES} |\n\
         | --- | --- | --- | ---: | ---: | ---: | ---: | ---: |\n",
        cluster.version().full
    );
    for c in result["conditions"].as_array().unwrap() {
        for measure in ["deadline_overshoot", "takeover_lag"] {
            let m = &c[measure];
            md.push_str(&format!(
                "| {} | {} / {} | {measure} | {:.2} ms | {:.2} ms | {:.2} ms | {:.2} ms | {:.2} ms |\n",
                c["condition"].as_str().unwrap_or(""),
                c["load_average_before"].as_str().unwrap_or(""),
                c["load_average_after"].as_str().unwrap_or(""),
                m["p50_ms"].as_f64().unwrap_or(0.0),
                m["p90_ms"].as_f64().unwrap_or(0.0),
                m["p99_ms"].as_f64().unwrap_or(0.0),
                m["max_ms"].as_f64().unwrap_or(0.0),
                m["median_of_5"]["max_ms"].as_f64().unwrap_or(0.0),
            ));
        }
    }
    md.push_str(&format!(
        "\nThe check's margin: {} ms on the median of {PROMPT_SAMPLES} waits. A build that \
         sleeps one poll interval (50 ms) too long is at least 50 ms late on every wait.\n",
        PROMPT_MARGIN.as_millis()
    ));
    std::fs::write(dir.join(format!("{stamp}.md")), md).expect("written");
    println!("{}", serde_json::to_string_pretty(&result).unwrap());
    println!("written: {}", json.display());
}
