//! The gate's suites: each is named, runs on one major's cluster against the build under
//! test, and returns a typed [`SuiteResult`]. Every check runs under a timeout; a hang is
//! an infrastructure error naming the check and the SQL the server was running.

use super::outcome::{CheckResult, SuiteResult};
use super::Size;
use harness::campaign::{self, Campaign, Length, Outcome, Target};
use harness::extension::Build;
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

/// One named suite.
#[derive(Clone, Copy)]
pub struct Suite {
    pub name: &'static str,
    run: for<'a> fn(&'a Ctx<'a>) -> SuiteFuture<'a>,
}

impl Suite {
    pub async fn run(&self, ctx: &Ctx<'_>) -> SuiteResult {
        (self.run)(ctx).await
    }
}

/// Every suite, in the order they run.
pub fn suites() -> Vec<Suite> {
    vec![
        Suite {
            name: "installcheck",
            run: |c| Box::pin(installcheck(c)),
        },
        Suite {
            name: "conformance",
            run: |c| Box::pin(conformance(c)),
        },
        Suite {
            name: "campaign",
            run: |c| Box::pin(free_campaigns(c)),
        },
        Suite {
            name: "stepped",
            run: |c| Box::pin(stepped_plans(c)),
        },
        Suite {
            name: "security",
            run: |c| Box::pin(security(c)),
        },
        Suite {
            name: "faults",
            run: |c| Box::pin(super::fault_suite::faults(c)),
        },
        Suite {
            name: "bench",
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

/// Runs `check` under `timeout`; a hang is an infrastructure error naming the check and
/// the SQL in flight.
async fn bounded<F>(ctx: &Ctx<'_>, name: &str, timeout: Duration, check: F) -> CheckResult
where
    F: Future<Output = CheckResult>,
{
    let start = Instant::now();
    match tokio::time::timeout(timeout, check).await {
        Ok(result) => result,
        Err(_) => CheckResult::infrastructure(
            name,
            format!(
                "hung: {name} did not finish within {timeout:?}; {}",
                active_sql(ctx.cluster).await
            ),
            start.elapsed(),
        ),
    }
}

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
    let run = tokio::task::block_in_place(|| {
        harness::installcheck::run_within(
            ctx.cluster,
            dir,
            ctx.extension(),
            harness::installcheck::DEFAULT_TIMEOUT,
        )
    });
    let check = match run {
        Ok(report) if report.passed => CheckResult::passed(NAME, start.elapsed()),
        Ok(report) => CheckResult::failed(
            NAME,
            format!("{}\n{}", tail(&report.output, 40), tail(&report.diffs, 200)),
            start.elapsed(),
        ),
        Err(e) => CheckResult::infrastructure(NAME, e.to_string(), start.elapsed()),
    };
    SuiteResult::of("installcheck", vec![check], start.elapsed())
}

/// The last `n` lines of `text`.
fn tail(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// No conformance check waits longer than its TTLs of a few seconds or a restart (60 s).
const CONFORMANCE_CHECK_TIMEOUT: Duration = Duration::from_secs(180);

async fn conformance(ctx: &Ctx<'_>) -> SuiteResult {
    use harness::conformance::Failure;
    let start = Instant::now();
    let mut checks = Vec::new();
    for check in harness::conformance::checks() {
        if check.needs_managed_server && !ctx.cluster.is_managed() {
            let why = "it stops, restarts or crashes the server";
            checks.push(CheckResult::skipped(check.name, why));
            continue;
        }
        ctx.say("conformance", check.name);
        let one = async {
            let report = harness::conformance::run_against(ctx.cluster, ctx.extension(), |n| {
                n == check.name
            })
            .await;
            match report.outcomes.into_iter().next() {
                Some(o) => match o.result {
                    Ok(()) => CheckResult::passed(check.name, o.elapsed),
                    Err(Failure::Violation(why)) => CheckResult::failed(check.name, why, o.elapsed),
                    Err(Failure::Infrastructure(why)) => {
                        CheckResult::infrastructure(check.name, why, o.elapsed)
                    }
                },
                None => CheckResult::infrastructure(
                    check.name,
                    "the check did not run".into(),
                    Duration::ZERO,
                ),
            }
        };
        checks.push(bounded(ctx, check.name, CONFORMANCE_CHECK_TIMEOUT, one).await);
    }
    SuiteResult::of("conformance", checks, start.elapsed())
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
    let elapsed = start.elapsed();
    let mut result = match outcome {
        Outcome::Linearizable(_) => return CheckResult::passed(name, elapsed),
        Outcome::Violation(v) => {
            let mut r = CheckResult::failed(name, outcome.to_string(), elapsed);
            r.invariant = Some(v.invariant.to_string());
            r
        }
        Outcome::Stall(_) | Outcome::Malformed { .. } => {
            CheckResult::failed(name, outcome.to_string(), elapsed)
        }
        Outcome::Unknown(_) | Outcome::Infrastructure(_) => {
            CheckResult::infrastructure(name, outcome.to_string(), elapsed)
        }
    };
    result.timeline = timeline.map(|p| ctx.link(&p));
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
    let total = races.len() as u64 + drawn_count;
    let races = (1..)
        .zip(races)
        .map(|(k, p)| (format!("race plan {k}"), Ok(p)));
    let mut checks = Vec::new();
    for (k, (name, plan)) in races.chain(drawn).enumerate() {
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

async fn one_plan(ctx: &Ctx<'_>, stage: &Stage<'_>, name: &str, plan: &Plan) -> CheckResult {
    let start = Instant::now();
    let report = stepped::run(
        stage,
        plan,
        &RunOptions::default(),
        Arc::new(campaign::Silent),
    )
    .await;
    let timeline = (report.run.outcome.exit_code() == 1)
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
    use harness::security::CheckError;
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
                Some(o) => match o.result {
                    Ok(()) => CheckResult::passed(check.name, o.elapsed),
                    Err(CheckError::Violated(why)) => {
                        CheckResult::failed(check.name, why, o.elapsed)
                    }
                    Err(CheckError::Infrastructure(why)) => {
                        CheckResult::infrastructure(check.name, why, o.elapsed)
                    }
                },
                None => CheckResult::infrastructure(
                    check.name,
                    "the check did not run".into(),
                    Duration::ZERO,
                ),
            }
        };
        // The suite bounds each check at 60 s itself; this only adds the SQL in flight.
        checks.push(bounded(ctx, check.name, Duration::from_secs(90), one).await);
    }
    SuiteResult::of("security", checks, start.elapsed())
}
