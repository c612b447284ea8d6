//! The gate's "bench" suite: `bench::Config::gate` on the build under test (W1-cycle and
//! W2-contend next to their floor, 1 and 4 clients). It passes when every figure of both
//! workloads was measured, and, with `--bench-baseline DIR`, when no figure's ratio to its
//! floor grew beyond the threshold (`bench::compare`). The figures go into the summary and
//! the whole bench result into `<report>/pg<major>/bench/`.

use crate::gate::ctx::{Baseline, Ctx};
use crate::gate::listing::{Listing, Planned};
use crate::gate::outcome::{CheckResult, LatencyFigure, SuiteResult};
use bench::result::{BenchResult, Driver};
use bench::workloads::{self, W1_CYCLE, W2_CONTEND};
use std::time::{Duration, Instant};

pub(super) const SUITE: super::Suite = super::Suite {
    name: "bench",
    order: 90,
    cost: [39, 39],
    checks,
    run: |c| Box::pin(bench(c)),
};

/// The bench measures for a fixed time (about 40 s); this bounds a hang (a driver stuck on
/// a connection). A bench that hangs keeps its thread and cluster until the gate exits.
const BENCH_TIMEOUT: Duration = Duration::from_secs(600);

/// The name of the comparison with `--bench-baseline` (the failure names its directory and
/// threshold).
const COMPARED: &str = "no regression against the baseline";

/// The pg_lease workloads whose figures the suite requires.
const MEASURED: [&str; 2] = [W1_CYCLE, W2_CONTEND];

/// Repeats per point: 3 where the figures are compared or kept as a baseline (a full gate,
/// or `--bench-baseline`: the threshold was measured on 3 repeats), 1 in a quick gate
/// that only shows every op measured (24 s less per major).
fn repeats(ctx: &Ctx<'_>) -> u32 {
    if ctx.size == crate::gate::Size::Full || ctx.bench_baseline.is_some() {
        3
    } else {
        1
    }
}

/// A check per required workload, and the comparison with a baseline when there is one.
pub(super) fn checks(listing: &Listing<'_>) -> Vec<Planned> {
    let why = "the bench measures a throwaway cluster it starts with fsync and \
               synchronous_commit on, not a server it cannot configure";
    let mut names: Vec<String> = MEASURED.iter().map(|w| measured_name(w)).collect();
    if listing.bench_baseline {
        names.push(COMPARED.into());
    }
    names
        .into_iter()
        .map(|name| Planned::on_managed(name, why))
        .collect()
}

fn measured_name(workload: &str) -> String {
    format!("{workload} measured")
}

pub async fn bench(ctx: &Ctx<'_>) -> SuiteResult {
    let start = Instant::now();
    let what = format!(
        "W1-cycle, W2-contend and floor-update at 1 and 4 clients, {} repeat(s)",
        repeats(ctx)
    );
    ctx.say("bench", &what);
    let result = match measured(ctx).await {
        Ok(result) => result,
        // A call the target answered with an error from inside its code: the build's
        // answer outside its API kept the bench from measuring, a finding.
        Err(why) if why.contains("raised inside the target") => {
            let check = CheckResult::failed("bench", why, start.elapsed());
            return SuiteResult::of("bench", vec![check], start.elapsed());
        }
        Err(why) => {
            let why = harness::judgement::Judgement::no_verdict_from_text(why).message();
            let check = CheckResult::infrastructure("bench", why, start.elapsed());
            return SuiteResult::of("bench", vec![check], start.elapsed());
        }
    };
    let mut checks: Vec<CheckResult> = MEASURED
        .iter()
        .map(|w| all_measured(&result, w, start.elapsed()))
        .collect();
    if let Some(baseline) = ctx.bench_baseline {
        checks.push(compared(baseline, &result, start.elapsed()));
    }
    let dir = ctx.out_dir.join("bench");
    if let Err(e) = bench::write(&result, &dir) {
        checks.push(CheckResult::infrastructure(
            "bench result written",
            format!("{}: {e}", dir.display()),
            start.elapsed(),
        ));
    }
    let mut suite = SuiteResult::of("bench", checks, start.elapsed());
    suite.figures = figures(&result);
    suite
}

/// Runs the bench on a thread of its own (it blocks on a runtime of its own).
async fn measured(ctx: &Ctx<'_>) -> Result<BenchResult, String> {
    let major = ctx.cluster.version().major;
    let files = ctx.build.files.clone();
    let repeats = repeats(ctx);
    let (tx, rx) = tokio::sync::oneshot::channel();
    std::thread::spawn(move || {
        let _ = tx.send(bench::gate_suite(major, files, repeats));
    });
    match tokio::time::timeout(BENCH_TIMEOUT, rx).await {
        Ok(Ok(Ok(result))) => Ok(result),
        Ok(Ok(Err(e))) => Err(e.to_string()),
        Ok(Err(_)) => Err("the bench thread ended without a result (it panicked)".into()),
        Err(_) => Err(format!(
            "hung: the bench did not finish within {BENCH_TIMEOUT:?}"
        )),
    }
}

/// Every op of `workload` (its steps and its whole script) was measured at every client
/// count of the run; the check's message lists what was not.
fn all_measured(result: &BenchResult, workload: &str, elapsed: Duration) -> CheckResult {
    let name = measured_name(workload);
    let Some(w) = workloads::workload(workload) else {
        return CheckResult::infrastructure(&name, "no such bench workload".into(), elapsed);
    };
    let mut ops: Vec<&str> = w.steps.to_vec();
    if !ops.contains(&w.script_op) {
        ops.push(w.script_op);
    }
    let mut missing = Vec::new();
    for &clients in &result.settings.clients {
        for op in &ops {
            let figure = result.figure(workload, op, clients, Driver::RustClosed);
            if !figure.is_some_and(|f| f.median.count > 0 && f.median.p50_us > 0.0) {
                missing.push(format!("{workload}/{op} @{clients}"));
            }
        }
    }
    match missing.is_empty() {
        true => CheckResult::passed(name, elapsed),
        false => CheckResult::infrastructure(
            name,
            format!("not measured: {}", missing.join(", ")),
            elapsed,
        ),
    }
}

/// The regression check against the baseline: a finding when a ratio regressed.
fn compared(baseline: &Baseline, current: &BenchResult, elapsed: Duration) -> CheckResult {
    match bench::compare(&baseline.result, current, baseline.threshold) {
        Ok(c) if c.regressions().count() == 0 => CheckResult::passed(COMPARED, elapsed),
        Ok(c) => CheckResult::failed(
            COMPARED,
            format!(
                "baseline {} (PG {}), this run PG {}, threshold {:.2}x\n{}",
                baseline.dir.display(),
                baseline.result.major,
                current.major,
                baseline.threshold,
                c.render()
            ),
            elapsed,
        ),
        Err(e) => CheckResult::infrastructure(COMPARED, e.to_string(), elapsed),
    }
}

/// The run's figures for the summary.
fn figures(result: &BenchResult) -> Vec<LatencyFigure> {
    result
        .figures
        .iter()
        .map(|f| LatencyFigure {
            workload: f.workload.clone(),
            op: f.op.clone(),
            clients: f.clients,
            driver: f.driver.label().to_string(),
            count: f.median.count,
            throughput_per_s: f.median.throughput_per_s,
            p50_us: f.median.p50_us,
            p95_us: f.median.p95_us,
            p99_us: f.median.p99_us,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gate::outcome::Status;
    use std::path::PathBuf;

    /// The committed bench baseline of PG 15 (a real run).
    fn committed() -> (PathBuf, BenchResult) {
        let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("results/bench/20261203T132112Z");
        let result = BenchResult::read(&dir).expect("the committed baseline reads");
        (dir, result)
    }

    fn baseline(dir: PathBuf, result: BenchResult) -> Baseline {
        Baseline {
            dir,
            result,
            threshold: bench::DEFAULT_THRESHOLD,
        }
    }

    /// A run equal to its baseline passes; the same run with W1-cycle's renew three times
    /// slower (its floor unchanged) fails naming that figure (the negative control).
    #[test]
    fn a_regressed_figure_fails_the_comparison_and_an_unchanged_run_passes() {
        let (dir, base) = committed();
        let same = compared(&baseline(dir.clone(), base.clone()), &base, Duration::ZERO);
        assert_eq!(same.status, Status::Passed, "{}", same.message);
        let mut slower = base.clone();
        for f in slower
            .figures
            .iter_mut()
            .filter(|f| f.workload == W1_CYCLE && f.op == "renew")
        {
            f.median.p50_us *= 3.0;
            for r in f.repeats.iter_mut() {
                r.p50_us *= 3.0;
            }
        }
        let regressed = compared(&baseline(dir, base), &slower, Duration::ZERO);
        assert_eq!(regressed.status, Status::Failed, "{}", regressed.message);
        assert!(
            regressed.message.contains("REGRESSED W1-cycle/renew"),
            "{}",
            regressed.message
        );
    }

    /// Every op of both workloads measured at every client count passes; a missing figure
    /// is no verdict, named.
    #[test]
    fn a_figure_not_measured_is_named() {
        let (_, mut result) = committed();
        let all = all_measured(&result, W1_CYCLE, Duration::ZERO);
        assert_eq!(all.status, Status::Passed, "{}", all.message);
        result
            .figures
            .retain(|f| !(f.workload == W1_CYCLE && f.op == "release" && f.clients == 4));
        let missing = all_measured(&result, W1_CYCLE, Duration::ZERO);
        assert_eq!(missing.status, Status::Infrastructure);
        assert!(
            missing.message.contains("W1-cycle/release @4"),
            "{}",
            missing.message
        );
    }
}
