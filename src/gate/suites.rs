//! The gate's suites: each is named, runs on one major's cluster against the build under
//! test, and returns a typed [`SuiteResult`]. Every check runs under a timeout; a check
//! that runs out of it while the server executes a call of the target is a finding (the
//! target hangs), any other is no verdict naming the SQL the server was running.

use super::outcome::{CheckResult, SuiteResult};
use super::Size;
use harness::campaign::{self, Campaign, Length, Outcome, Target};
use harness::extension::Build;
use harness::judgement::{Cause, Judgement};
use harness::pg::Cluster;
use harness::stepped::{self, Plan, RunOptions, Stage};
use indicatif::ProgressBar;
use model::Budget;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

type SuiteFuture<'a> = Pin<Box<dyn Future<Output = SuiteResult> + Send + 'a>>;

/// What a suite runs against.
pub struct Ctx<'a> {
    pub cluster: &'a Cluster,
    pub build: &'static Build,
    pub size: Size,
    pub seed: u64,
    /// Where the suite may write files the report links to (`<report>/pg<major>`).
    pub out_dir: PathBuf,
    /// The report directory (links are relative to it).
    pub report_dir: PathBuf,
    /// The PGXS sources of the regression and isolation suites.
    pub tests_dir: Option<PathBuf>,
    /// The fault checks of the faults suite.
    pub faults: &'a [nemesis::Fault],
    /// What the bench suite compares with (`--bench-baseline`).
    pub bench_baseline: Option<&'a super::bench_suite::Baseline>,
    pub bar: &'a ProgressBar,
}

impl Ctx<'_> {
    fn target(&self) -> Target {
        Target::Build(self.build)
    }

    fn extension(&self) -> &str {
        &self.build.files.name
    }

    pub(super) fn say(&self, suite: &str, what: &str) {
        self.bar.set_message(format!(
            "PG {} · {suite} · {what}",
            self.cluster.version().major
        ));
    }

    /// On an existing server (`--dsn`), the suite reported skipped, each of its `checks`
    /// because it needs a managed server for `why`.
    pub(super) fn unmanaged_skip(
        &self,
        suite: &str,
        checks: &[&str],
        why: &str,
    ) -> Option<SuiteResult> {
        let skipped = checks
            .iter()
            .map(|c| CheckResult::skipped(*c, why))
            .collect();
        (!self.cluster.is_managed()).then(|| SuiteResult::of(suite, skipped, Duration::ZERO))
    }

    /// `path` relative to the report directory, for links.
    fn link(&self, path: &Path) -> String {
        path.strip_prefix(&self.report_dir)
            .unwrap_or(path)
            .display()
            .to_string()
    }
}

/// The suite that runs first: a build whose calls do not answer gets that verdict in
/// seconds, and nothing else runs on it.
pub const LIVENESS: &str = "liveness";

/// One named suite.
#[derive(Clone, Copy)]
pub struct Suite {
    pub name: &'static str,
    /// About how many seconds it takes at quick and full size on one major (measured on
    /// PG 15 on a 2-core machine, results/gate): only a hint that balances `--shard`.
    cost: [u32; 2],
    run: for<'a> fn(&'a Ctx<'a>) -> SuiteFuture<'a>,
}

impl Suite {
    pub async fn run(&self, ctx: &Ctx<'_>) -> SuiteResult {
        (self.run)(ctx).await
    }

    pub fn cost(&self, size: Size) -> u32 {
        match size {
            Size::Quick => self.cost[0],
            Size::Full => self.cost[1],
        }
    }
}

/// Every suite, in the order they run.
pub fn suites() -> Vec<Suite> {
    vec![
        Suite {
            name: LIVENESS,
            cost: [2, 2],
            run: |c| Box::pin(liveness(c)),
        },
        Suite {
            name: "installcheck",
            cost: [12, 12],
            run: |c| Box::pin(installcheck(c)),
        },
        Suite {
            name: "conformance",
            cost: [20, 24],
            run: |c| Box::pin(conformance(c)),
        },
        Suite {
            name: "campaign",
            cost: [5, 14],
            run: |c| Box::pin(free_campaigns(c)),
        },
        Suite {
            name: "stepped",
            cost: [20, 70],
            run: |c| Box::pin(stepped_plans(c)),
        },
        Suite {
            name: "matrix",
            cost: [40, 215],
            run: |c| Box::pin(super::matrix_suite::matrix(c)),
        },
        Suite {
            name: "security",
            cost: [45, 45],
            run: |c| Box::pin(security(c)),
        },
        Suite {
            name: "faults",
            cost: [33, 70],
            run: |c| Box::pin(super::fault_suite::faults(c)),
        },
        Suite {
            name: "bench",
            cost: [39, 39],
            run: |c| Box::pin(super::bench_suite::bench(c)),
        },
    ]
}

/// The SQL the server is running for clients other than the asker: what a hang was doing.
pub async fn active_sql(cluster: &Cluster) -> String {
    let query = "SELECT datname, pid, state, coalesce(wait_event_type || ':' || wait_event, '-'), \
                 query FROM pg_catalog.pg_stat_activity WHERE pid <> pg_catalog.pg_backend_pid() \
                 AND backend_type = 'client backend' AND state <> 'idle'";
    let ask = async {
        let client = cluster
            .connect("postgres")
            .await
            .map_err(|e| e.to_string())?;
        let rows = client.query(query, &[]).await.map_err(|e| e.to_string())?;
        let lines: Vec<String> = rows
            .iter()
            .map(|r| {
                let get = |i| r.try_get::<_, Option<String>>(i).ok().flatten();
                format!(
                    "  db {} pid {} {} (waiting: {}): {}",
                    get(0).unwrap_or_default(),
                    r.try_get::<_, i32>(1).unwrap_or_default(),
                    get(2).unwrap_or_default(),
                    get(3).unwrap_or_default(),
                    get(4).unwrap_or_default()
                )
            })
            .collect();
        Ok::<_, String>(lines)
    };
    match tokio::time::timeout(Duration::from_secs(10), ask).await {
        Ok(Ok(lines)) if lines.is_empty() => "the server was running no statement".into(),
        Ok(Ok(lines)) => format!("the server was running:\n{}", lines.join("\n")),
        Ok(Err(e)) => format!("could not ask the server what it was running: {e}"),
        Err(_) => "the server did not say what it was running within 10s".into(),
    }
}

/// Runs `check` under `timeout`. A check that runs out of it while a backend is executing
/// a call of the target (on the CPU or in a timed sleep) is the finding that the target
/// hangs; otherwise it is no verdict naming the SQL in flight.
pub(super) async fn bounded<F>(
    ctx: &Ctx<'_>,
    name: &str,
    timeout: Duration,
    check: F,
) -> CheckResult
where
    F: Future<Output = CheckResult>,
{
    let start = Instant::now();
    match tokio::time::timeout(timeout, check).await {
        Ok(result) => result,
        Err(_) => match executing_target(ctx.cluster, Duration::ZERO).await {
            Some((_, backends)) => CheckResult::failed(
                name,
                format!(
                    "{name} did not finish within {timeout:?} while the server was executing \
                     calls of the target:\n{backends}\n{}",
                    harness::liveness::HANGS
                ),
                start.elapsed(),
            ),
            None => CheckResult::infrastructure(
                name,
                Cause::Stalled.message(format!(
                    "{name} did not finish within {timeout:?}; {}",
                    active_sql(ctx.cluster).await
                )),
                start.elapsed(),
            ),
        },
    }
}

/// The backends executing a call of the target (active, on the CPU or in a timed sleep,
/// running a statement that names schema `lease`, started more than `older_than` ago), the
/// same statement at two looks [`harness::liveness::SECOND_LOOK`] apart: their pids, and
/// one line each; none, or the server did not say, is `None`.
async fn executing_target(cluster: &Cluster, older_than: Duration) -> Option<(Vec<i32>, String)> {
    let query = "SELECT pid, coalesce(query_start::text, ''), \
                 pg_catalog.format('  db %s pid %s for %s s (wait event %s): %s', datname, pid, \
                 round(extract(epoch FROM pg_catalog.clock_timestamp() - query_start)::numeric, 1), \
                 coalesce(wait_event_type || ':' || wait_event, 'none, on the CPU'), query) \
                 FROM pg_catalog.pg_stat_activity WHERE pid <> pg_catalog.pg_backend_pid() \
                 AND backend_type = 'client backend' AND state = 'active' \
                 AND (wait_event_type IS NULL OR wait_event_type = 'Timeout') \
                 AND query LIKE '%lease.%' \
                 AND pg_catalog.clock_timestamp() - query_start > $1::float8 * interval '1 second'";
    let older = older_than.as_secs_f64();
    let ask = async {
        let client = cluster.connect("postgres").await.ok()?;
        let look = || async {
            let rows = client.query(query, &[&older]).await.ok()?;
            let seen: Vec<(i32, String, String)> = rows
                .iter()
                .filter_map(|r| Some((r.try_get(0).ok()?, r.try_get(1).ok()?, r.try_get(2).ok()?)))
                .collect();
            Some(seen)
        };
        let first = look().await?;
        tokio::time::sleep(harness::liveness::SECOND_LOOK).await;
        let second = look().await?;
        let still: Vec<(i32, String, String)> = second
            .into_iter()
            .filter(|(pid, start, _)| first.iter().any(|(p, s, _)| p == pid && s == start))
            .collect();
        let pids = still.iter().map(|(pid, _, _)| *pid).collect();
        let lines: Vec<String> = still.into_iter().map(|(_, _, line)| line).collect();
        (!lines.is_empty()).then(|| (pids, lines.join("\n")))
    };
    tokio::time::timeout(Duration::from_secs(15), ask)
        .await
        .ok()
        .flatten()
}

/// Whether a check's failure is the finding that the target hangs: the suite stops there
/// (every later check would wait out its own bound), and so does the gate on this build.
pub fn is_hang(check: &CheckResult) -> bool {
    check.status == super::outcome::Status::Failed
        && check.message.contains(harness::liveness::HANGS)
}

/// The liveness check alone, before every other suite: a build whose calls do not answer
/// gets that verdict in seconds, and the gate runs nothing else on it.
async fn liveness(ctx: &Ctx<'_>) -> SuiteResult {
    let start = Instant::now();
    let name = harness::conformance::LIVENESS_CHECK;
    ctx.say("liveness", name);
    let check = bounded(ctx, name, LIVENESS_TIMEOUT, conformance_check(ctx, name)).await;
    SuiteResult::of("liveness", vec![check], start.elapsed())
}

/// The liveness check makes about 80 calls, each bounded by 5 s (a hang ends it there).
const LIVENESS_TIMEOUT: Duration = Duration::from_secs(120);

// ---------------------------------------------------------------------------------------

async fn installcheck(ctx: &Ctx<'_>) -> SuiteResult {
    const NAME: &str = "make installcheck (regression + isolation)";
    let why = "pg_regress drops and creates a fixed database (contrib_regression) and needs \
               the server's PGXS install on this machine";
    if let Some(skipped) = ctx.unmanaged_skip("installcheck", &[NAME], why) {
        return skipped;
    }
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

/// No conformance check waits longer than its TTLs of a few seconds or a restart (60 s).
const CONFORMANCE_CHECK_TIMEOUT: Duration = Duration::from_secs(180);

/// Every conformance check but the liveness check (the liveness suite runs it first),
/// stopping after a finding that the target hangs.
async fn conformance(ctx: &Ctx<'_>) -> SuiteResult {
    let start = Instant::now();
    let mut checks = Vec::new();
    for check in harness::conformance::checks() {
        if check.name == harness::conformance::LIVENESS_CHECK {
            continue;
        }
        if check.needs == harness::judgement::Needs::ManagedServer && !ctx.cluster.is_managed() {
            let why = "it stops, restarts or crashes the server";
            checks.push(CheckResult::skipped(check.name, why));
            continue;
        }
        ctx.say("conformance", check.name);
        let one = conformance_check(ctx, check.name);
        let result = bounded(ctx, check.name, CONFORMANCE_CHECK_TIMEOUT, one).await;
        let stop = is_hang(&result);
        checks.push(result);
        if stop {
            break;
        }
    }
    SuiteResult::of("conformance", checks, start.elapsed())
}

/// The conformance check `name` against the build.
async fn conformance_check(ctx: &Ctx<'_>, name: &'static str) -> CheckResult {
    let report =
        harness::conformance::run_against(ctx.cluster, ctx.extension(), |n| n == name).await;
    match report.outcomes.into_iter().next() {
        Some(o) => CheckResult::judged(name, o.result, o.elapsed),
        None => CheckResult::infrastructure(
            name,
            Cause::Harness.message("the check did not run"),
            Duration::ZERO,
        ),
    }
}

/// Recording is bounded by the ops and the call timeout; this bounds a harness hang.
const CAMPAIGN_TIMEOUT: Duration = Duration::from_secs(900);

/// Free-running campaigns on the race-hunting workload of the mutant hunts (8 processes on
/// 2 keys, pairs of processes sharing an owner, a fifth of the turns in transactions): quick
/// 3 x 1,500 ops, full 8 x 3,000, seeds S, S+1, ..., stopping at the first that does not pass.
async fn free_campaigns(ctx: &Ctx<'_>) -> SuiteResult {
    let start = Instant::now();
    let (campaigns, ops) = match ctx.size {
        Size::Quick => (3, 1_500),
        Size::Full => (8, 3_000),
    };
    let mut checks = Vec::new();
    for k in 0..campaigns {
        let check = one_campaign(ctx, ctx.seed.wrapping_add(k), ops).await;
        let stop = check.status != super::outcome::Status::Passed;
        checks.push(check);
        if stop {
            break;
        }
    }
    SuiteResult::of("campaign", checks, start.elapsed())
}

async fn one_campaign(ctx: &Ctx<'_>, seed: u64, ops: u64) -> CheckResult {
    let start = Instant::now();
    let dir = ctx.out_dir.join(format!("campaign-seed-{seed}"));
    let campaign = Campaign {
        workload: harness::workload::Workload::shared_owners(),
        budget: Budget {
            time: Some(Duration::from_secs(120)),
            states: Some(20_000_000),
            ..Budget::default()
        },
        history_file: Some(dir.join("history.jsonl")),
        ..Campaign::new(ctx.target(), Length::Ops(ops), seed)
    };
    let name = format!(
        "{} processes x {} keys, {ops} ops, seed {seed}",
        campaign.workload.processes, campaign.workload.keys
    );
    ctx.say("campaign", &name);
    let run = async {
        let report = campaign::run(ctx.cluster, &campaign, Arc::new(campaign::Silent)).await;
        let verdict = report.outcome.verdict();
        let timeline = report.history.as_ref().zip(verdict.as_ref()).map(|(h, v)| {
            let page = harness::timeline::render(h, v, &format!("campaign {name}"));
            write_page(&dir.join("timeline.html"), &page)
        });
        judged(&name, &report.outcome, timeline.flatten(), ctx, start)
    };
    bounded(ctx, &name, CAMPAIGN_TIMEOUT, run).await
}

/// Writes `page` at `path`; the path when written.
fn write_page(path: &Path, page: &str) -> Option<PathBuf> {
    let dir = path.parent()?;
    std::fs::create_dir_all(dir).ok()?;
    std::fs::write(path, page).ok()?;
    Some(path.to_path_buf())
}

/// A check result from a campaign outcome: findings fail (naming the invariant), an
/// unknown verdict or an infrastructure failure is no verdict.
fn judged(
    name: &str,
    outcome: &Outcome,
    timeline: Option<PathBuf>,
    ctx: &Ctx<'_>,
    start: Instant,
) -> CheckResult {
    let judgement = outcome.judgement();
    let shown = !judgement.is_pass();
    let mut result = CheckResult::of(name, judgement, start.elapsed());
    if shown {
        result.timeline = timeline.map(|p| ctx.link(&p));
    }
    result
}

/// Every step has its own timeout (the runner's); this bounds a plan's whole run.
const PLAN_TIMEOUT: Duration = Duration::from_secs(180);

/// The race plans (every call behind a transaction holding the key's row lock), then
/// drawn plans of seeds S, S+1, ... (quick 12, full 150), stopping at the first check that
/// does not pass.
async fn stepped_plans(ctx: &Ctx<'_>) -> SuiteResult {
    let start = Instant::now();
    let drawn_count: u64 = match ctx.size {
        Size::Quick => 12,
        Size::Full => 150,
    };
    let stage = match Stage::new(ctx.cluster, ctx.target()).await {
        Ok(stage) => stage,
        Err(e) => {
            let check =
                CheckResult::infrastructure("stepped stage", e.to_string(), start.elapsed());
            return SuiteResult::of("stepped", vec![check], start.elapsed());
        }
    };
    let races = match stepped::race_plans() {
        Ok(plans) => plans,
        Err(e) => {
            let check = CheckResult::infrastructure("race plans", e.to_string(), start.elapsed());
            return SuiteResult::of("stepped", vec![check], start.elapsed());
        }
    };
    // The mutant hunts' contended plans: 2-3 sessions on one key, transactions holding its
    // row lock across steps, blocking acquires, TTLs short enough to lapse mid-wait.
    let config = harness::stepped::PlanConfig::contended();
    let drawn = (0..drawn_count).map(|k| {
        let seed = ctx.seed.wrapping_add(k);
        let plan = Plan::from_seed(&config, seed).map_err(|e| e.to_string());
        (format!("plan of seed {seed}"), plan)
    });
    let late = harness::late::plans();
    let total = races.len() as u64 + late.len() as u64 + drawn_count;
    let races = (1..)
        .zip(races)
        .map(|(k, p)| (format!("race plan {k}"), Ok(p)));
    let mut checks = Vec::new();
    // The late plans: calls late in a long statement (a batch, a block), judged likewise.
    for (k, plan) in late.iter().enumerate() {
        let name = format!("late plan {} ({})", k + 1, plan.name);
        ctx.say("stepped", &format!("{name} ({}/{total})", k + 1));
        let check = bounded(ctx, &name, PLAN_TIMEOUT, one_late_plan(ctx, &name, plan)).await;
        let stop = check.status != super::outcome::Status::Passed;
        checks.push(check);
        if stop {
            return SuiteResult::of("stepped", checks, start.elapsed());
        }
    }
    for (k, (name, plan)) in races.chain(drawn).enumerate() {
        let k = k + late.len();
        ctx.say("stepped", &format!("{name} ({}/{total})", k + 1));
        let check = match plan {
            Ok(plan) => {
                bounded(
                    ctx,
                    &name,
                    PLAN_TIMEOUT,
                    one_plan(ctx, &stage, &name, &plan),
                )
                .await
            }
            Err(why) => CheckResult::infrastructure(&name, why, start.elapsed()),
        };
        let stop = check.status != super::outcome::Status::Passed;
        checks.push(check);
        if stop {
            break;
        }
    }
    SuiteResult::of("stepped", checks, start.elapsed())
}

async fn one_late_plan(ctx: &Ctx<'_>, name: &str, plan: &harness::late::Plan) -> CheckResult {
    let start = Instant::now();
    let report = harness::late::run(ctx.cluster, ctx.target(), plan, Duration::from_secs(10)).await;
    let verdict = report.outcome.verdict();
    let timeline = report.history.as_ref().zip(verdict.as_ref()).map(|(h, v)| {
        let page = harness::timeline::render(h, v, &format!("stepped {name}"));
        let dir = name.replace([' ', '(', ')'], "-");
        write_page(
            &ctx.out_dir.join(format!("stepped-{dir}/timeline.html")),
            &page,
        )
    });
    judged(name, &report.outcome, timeline.flatten(), ctx, start)
}

async fn one_plan(ctx: &Ctx<'_>, stage: &Stage<'_>, name: &str, plan: &Plan) -> CheckResult {
    let start = Instant::now();
    let report = stepped::run(
        stage,
        plan,
        &RunOptions::default(),
        Arc::new(campaign::Silent),
    )
    .await;
    let timeline = (report.run.outcome.exit() == model::Exit::Finding)
        .then(|| report.timeline(&format!("stepped {name}")))
        .flatten()
        .and_then(|page| {
            let path = ctx
                .out_dir
                .join(format!("stepped-{}/timeline.html", name.replace(' ', "-")));
            write_page(&path, &page)
        });
    let mut result = judged(name, &report.run.outcome, timeline, ctx, start);
    if result.status != super::outcome::Status::Passed {
        result.message = format!("{plan}\n{}", result.message);
    }
    result
}

async fn security(ctx: &Ctx<'_>) -> SuiteResult {
    let why = "it logs in as roles it creates (trust authentication), runs this machine's \
               pg_dump and psql against the server and crashes it";
    let names: Vec<&str> = harness::security::checks().iter().map(|c| c.name).collect();
    if let Some(skipped) = ctx.unmanaged_skip("security", &names, why) {
        return skipped;
    }
    let start = Instant::now();
    let mut checks = Vec::new();
    for check in harness::security::checks() {
        ctx.say("security", check.name);
        let one = async {
            let report =
                harness::security::run_against(ctx.cluster, ctx.extension(), |n| n == check.name)
                    .await;
            match report.outcomes.into_iter().next() {
                Some(o) => CheckResult::judged(check.name, o.result, o.elapsed),
                None => CheckResult::infrastructure(
                    check.name,
                    Cause::Harness.message("the check did not run"),
                    Duration::ZERO,
                ),
            }
        };
        // The suite bounds each check at 60 s itself; this only adds the SQL in flight.
        let result = bounded(ctx, check.name, Duration::from_secs(90), one).await;
        let stop = is_hang(&result);
        checks.push(result);
        if stop {
            break;
        }
    }
    let surface_started = Instant::now();
    let timeout = super::surface_suite::TIMEOUT;
    match tokio::time::timeout(timeout, super::surface_suite::checks(ctx)).await {
        Ok(results) => checks.extend(results),
        Err(_) => checks.push(CheckResult::infrastructure(
            format!("{}the suite", super::surface_suite::PREFIX),
            format!(
                "hung: the attack-surface suite did not finish within {timeout:?}; {}",
                active_sql(ctx.cluster).await
            ),
            surface_started.elapsed(),
        )),
    }
    SuiteResult::of("security", checks, start.elapsed())
}
