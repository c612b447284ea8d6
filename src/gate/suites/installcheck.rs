//! The gate's "installcheck" suite: the PGXS regression and isolation suites against the
//! build, with a watchdog that cancels calls of the target the server executes too long.

use crate::gate::ctx::{executing_target, Ctx};
use crate::gate::listing::{Listing, Planned};
use crate::gate::outcome::{CheckResult, SuiteResult};
use harness::judgement::Judgement;
use harness::pg::Cluster;
use std::time::{Duration, Instant};

pub(super) const SUITE: super::Suite = super::Suite {
    name: "installcheck",
    order: 20,
    cost: [12, 12],
    checks,
    run: |c| Box::pin(installcheck(c)),
};

const NAME: &str = "make installcheck (regression + isolation)";

/// The suite's one check, which needs a managed server.
pub(super) fn checks(_: &Listing<'_>) -> Vec<Planned> {
    let why = "pg_regress drops and creates a fixed database (contrib_regression) and needs \
               the server's PGXS install on this machine";
    vec![Planned::on_managed(NAME, why)]
}

pub(super) async fn installcheck(ctx: &Ctx<'_>) -> SuiteResult {
    let start = Instant::now();
    ctx.say("installcheck", "make installcheck");
    let Some(dir) = ctx.tests_dir.as_deref() else {
        let why = "no PGXS test sources (Makefile, sql/, expected/, specs/): pass --extension DIR \
                   with them, or run from a checkout of leasecheck"
            .to_string();
        let check = CheckResult::infrastructure(NAME, why, start.elapsed());
        return SuiteResult::of("installcheck", vec![check], start.elapsed());
    };
    // make runs on a thread of its own; beside it a watchdog cancels any statement of the
    // target the server has been executing for longer than any test's waits (the test then
    // fails with a diff, and the suite with the finding that the target hangs).
    let done = std::sync::atomic::AtomicBool::new(false);
    let (run, hung) = tokio::task::block_in_place(|| {
        std::thread::scope(|scope| {
            let make = scope.spawn(|| {
                let run = harness::installcheck::run_within(
                    ctx.cluster,
                    dir,
                    ctx.extension(),
                    harness::installcheck::DEFAULT_TIMEOUT,
                );
                done.store(true, std::sync::atomic::Ordering::Relaxed);
                run
            });
            let hung = tokio::runtime::Handle::current()
                .block_on(cancel_hanging_calls(ctx.cluster, &done));
            let run = match make.join() {
                Ok(run) => run.map_err(|e| e.to_string()),
                Err(_) => Err("the installcheck thread panicked".to_string()),
            };
            (run, hung)
        })
    });
    let check = match (run, hung) {
        (Ok(report), Some(hang)) => CheckResult::failed(
            NAME,
            format!(
                "{hang}\n{}\n{}\n{}",
                harness::liveness::HANGS,
                tail(&report.output, 40),
                tail(&report.diffs, 200)
            ),
            start.elapsed(),
        ),
        (Err(_), Some(hang)) => CheckResult::failed(
            NAME,
            format!("{hang}\n{}", harness::liveness::HANGS),
            start.elapsed(),
        ),
        (Ok(report), None) if report.passed => CheckResult::passed(NAME, start.elapsed()),
        (Ok(report), None) => CheckResult::failed(
            NAME,
            format!("{}\n{}", tail(&report.output, 40), tail(&report.diffs, 200)),
            start.elapsed(),
        ),
        (Err(e), None) => {
            CheckResult::of(NAME, Judgement::no_verdict_from_text(e), start.elapsed())
        }
    };
    SuiteResult::of("installcheck", vec![check], start.elapsed())
}

/// No statement of the regression and isolation suites runs this long (their waits are a
/// few seconds): one of the target's that the server executes past it hangs.
const INSTALLCHECK_CALL_BOUND: Duration = Duration::from_secs(60);

/// Until `done`, every 5 s: the calls of the target the server has been executing for
/// longer than [`INSTALLCHECK_CALL_BOUND`] are cancelled; what they were, if any.
async fn cancel_hanging_calls(
    cluster: &Cluster,
    done: &std::sync::atomic::AtomicBool,
) -> Option<String> {
    let mut seen = None;
    while !done.load(std::sync::atomic::Ordering::Relaxed) {
        tokio::time::sleep(Duration::from_secs(5)).await;
        if let Some((pids, lines)) = executing_target(cluster, INSTALLCHECK_CALL_BOUND).await {
            if let Ok(client) = cluster.connect("postgres").await {
                for pid in pids {
                    let _ = client
                        .query("SELECT pg_catalog.pg_cancel_backend($1)", &[&pid])
                        .await;
                }
            }
            seen.get_or_insert_with(|| {
                format!(
                    "calls of the target the server executed for more than \
                     {INSTALLCHECK_CALL_BOUND:?} (cancelled):\n{lines}"
                )
            });
        }
    }
    seen
}

/// The last `n` lines of `text`.
fn tail(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}
