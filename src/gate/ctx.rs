//! What every suite of the gate runs against ([`Ctx`]) and how each check is bounded: a
//! check that runs out of its timeout while the server executes a call of the target is a
//! finding (the target hangs), any other is no verdict naming the SQL the server was
//! running.

use super::outcome::CheckResult;
use super::Size;
use harness::campaign::{Outcome, Target};
use harness::extension::Build;
use harness::judgement::Cause;
use harness::pg::Cluster;
use indicatif::ProgressBar;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// A bench result the bench suite compares with (`--bench-baseline`), and the threshold.
#[derive(Debug, Clone)]
pub struct Baseline {
    pub dir: PathBuf,
    pub result: bench::BenchResult,
    pub threshold: f64,
}

/// What a suite runs against.
pub struct Ctx<'a> {
    pub cluster: &'a Cluster,
    pub build: &'static Build,
    pub size: Size,
    /// `--campaign-ops`: calls per campaign instead of the size's.
    pub campaign_ops: Option<u64>,
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
    pub bench_baseline: Option<&'a Baseline>,
    pub bar: &'a ProgressBar,
}

impl Ctx<'_> {
    pub(super) fn target(&self) -> Target {
        Target::Build(self.build)
    }

    pub(super) fn extension(&self) -> &str {
        &self.build.files.name
    }

    pub(super) fn say(&self, suite: &str, what: &str) {
        self.bar.set_message(format!(
            "PG {} · {suite} · {what}",
            self.cluster.version().major
        ));
    }

    /// What the suites list their checks for on this run's major.
    pub(super) fn listing(&self) -> super::listing::Listing<'_> {
        super::listing::Listing {
            size: self.size,
            campaign_ops: self.campaign_ops,
            seed: self.seed,
            major: self.cluster.version().major,
            faults: self.faults,
            bench_baseline: self.bench_baseline.is_some(),
        }
    }

    /// `path` relative to the report directory, for links.
    pub(super) fn link(&self, path: &Path) -> String {
        path.strip_prefix(&self.report_dir)
            .unwrap_or(path)
            .display()
            .to_string()
    }
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
pub(super) async fn executing_target(
    cluster: &Cluster,
    older_than: Duration,
) -> Option<(Vec<i32>, String)> {
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

/// Writes `page` at `path`; the path when written.
pub(super) fn write_page(path: &Path, page: &str) -> Option<PathBuf> {
    let dir = path.parent()?;
    std::fs::create_dir_all(dir).ok()?;
    std::fs::write(path, page).ok()?;
    Some(path.to_path_buf())
}

/// A check result from a campaign outcome: findings fail (naming the invariant), an
/// unknown verdict or an infrastructure failure is no verdict; a pass carries the spec
/// branches its linearization took.
pub(super) fn judged(
    name: &str,
    outcome: &Outcome,
    timeline: Option<PathBuf>,
    ctx: &Ctx<'_>,
    start: Instant,
) -> CheckResult {
    let judgement = outcome.judgement();
    let shown = !judgement.is_pass();
    let coverage = match outcome {
        Outcome::Linearizable(stats) => Some(&stats.coverage),
        _ => None,
    };
    let mut result = CheckResult::of(name, judgement, start.elapsed()).covering(coverage);
    if shown {
        result.timeline = timeline.map(|p| ctx.link(&p));
    }
    result
}
