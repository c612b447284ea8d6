//! Speed of the linearizability checker (issue item 6), on the histories of `common`:
//!
//! - `valid_10k_ops_16_processes_8_keys`: target under 1 s;
//! - `invalid_100_ops`: per-history time to reject, per mutation, with the default options
//!   (`diagnosis_on`) and without diagnosis (`diagnosis_off`): target under 50 ms;
//! - `valid_1m_ops_1000_keys`: target under 30 s (its memory is measured by
//!   `examples/checker_figures.rs`, which runs it in a process of its own).
//!
//! Generating a history is never timed. Run: `cargo bench -p model` (or
//! `cargo bench -p model -- invalid_100_ops` for one group). The figures recorded in
//! `results/checker/` come from `cargo run --release -p model --example checker_figures`.

mod common;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, SamplingMode};
use model::checker::check;
use model::{CheckOptions, Verdict};
use std::hint::black_box;
use std::time::{Duration, Instant};

fn expect_linearizable(name: &str, verdict: &Verdict) {
    assert!(
        verdict.is_linearizable(),
        "{name}: the generated valid history is not accepted: {verdict}"
    );
}

fn valid_10k(c: &mut Criterion) {
    let history = common::valid(common::VALID_10K);
    let options = CheckOptions::default();
    let name = "valid_10k_ops_16_processes_8_keys";
    expect_linearizable(name, &check(&history, &options));
    let mut group = c.benchmark_group(name);
    group.sample_size(20);
    group.measurement_time(Duration::from_secs(8));
    group.bench_function("check", |b| b.iter(|| check(black_box(&history), &options)));
    group.finish();
}

fn invalid_100(c: &mut Criterion) {
    // Confirms every history is a violation (panics otherwise) before anything is timed.
    let set = common::invalid_set();
    let mut group = c.benchmark_group("invalid_100_ops");
    // Flat: criterion's iteration estimate does not know an iteration is several checks.
    group.sampling_mode(SamplingMode::Flat);
    group.sample_size(50);
    group.measurement_time(Duration::from_secs(3));
    group.warm_up_time(Duration::from_millis(500));
    for (setting, options) in [
        ("diagnosis_on", CheckOptions::default()),
        ("diagnosis_off", common::no_diagnosis()),
    ] {
        for &(mutation, _) in common::INVALID_SEEDS {
            let cases: Vec<_> = set.iter().filter(|c| c.mutation == mutation).collect();
            let per = cases.len() as u32;
            // One iteration checks each of the mutation's histories once; the time reported
            // is per history (the iteration's time divided by their number).
            group.bench_function(BenchmarkId::new(setting, mutation.name()), |b| {
                b.iter_custom(|iters| {
                    let start = Instant::now();
                    for _ in 0..iters {
                        for case in &cases {
                            black_box(check(black_box(&case.history), &options));
                        }
                    }
                    start.elapsed() / per
                })
            });
        }
    }
    group.finish();
}

fn valid_1m(c: &mut Criterion) {
    let history = common::valid(common::VALID_1M);
    let options = CheckOptions::default();
    let name = "valid_1m_ops_1000_keys";
    expect_linearizable(name, &check(&history, &options));
    let mut group = c.benchmark_group(name);
    group.sample_size(10);
    group.sampling_mode(SamplingMode::Flat);
    group.warm_up_time(Duration::from_secs(1));
    group.measurement_time(Duration::from_secs(80));
    group.bench_function("check", |b| b.iter(|| check(black_box(&history), &options)));
    group.finish();
}

/// Issue 17, point 8: lost calls and crashes, then the same with one double grant.
fn lost_calls_20k(c: &mut Criterion) {
    let history = common::lost_calls(common::LOST_20K);
    let doubled = common::with_double_grant(history.clone());
    let options = CheckOptions::default();
    let name = "lost_calls_20k_ops_crash_per_200";
    expect_linearizable(name, &check(&history, &options));
    assert_eq!(
        check(&doubled, &options).invariant(),
        Some(model::Invariant::MutualExclusion),
        "the double grant is named"
    );
    let mut group = c.benchmark_group(name);
    group.sample_size(10);
    group.measurement_time(Duration::from_secs(10));
    group.bench_function("linearizable", |b| {
        b.iter(|| check(black_box(&history), &options))
    });
    group.bench_function("double_grant", |b| {
        b.iter(|| check(black_box(&doubled), &options))
    });
    group.finish();
}

criterion_group!(benches, valid_10k, invalid_100, valid_1m, lost_calls_20k);
criterion_main!(benches);
