//! Where a lease write's time goes: W1's grant, renew and release, and the floor UPDATE,
//! each its own durable transaction, run in phases of one kind on a throwaway cluster with
//! `pg_stat_statements` (`track = all`) and `track_functions = all`. Per op: the client's
//! round trip, the server's execution of the top-level call, every statement and function
//! it ran (per op, nested included), and the remainder: parse/bind, the commit (the WAL
//! flush and deferred triggers) and the protocol. `leasecheck bench --breakdown` prints it.

use crate::error::{BenchError, Result};
use harness::extension::ExtensionFiles;
use harness::pg::{Cluster, ClusterOptions, PgInstall};
use hdrhistogram::Histogram;
use std::fmt::Write as _;
use std::time::{Duration, Instant};
use tokio_postgres::Client;

/// What to profile.
#[derive(Debug, Clone)]
pub struct Config {
    pub major: u32,
    pub extension: ExtensionFiles,
    /// Calls per phase.
    pub iterations: u32,
}

/// The time of one statement or function, per op of its phase.
#[derive(Debug, Clone)]
pub struct Cost {
    pub what: String,
    pub calls_per_op: f64,
    /// Microseconds per op: a statement's execution, a function's own time (its callees'
    /// excluded).
    pub us_per_op: f64,
    /// A function's time with its callees.
    pub total_us_per_op: Option<f64>,
}

/// One op's profile.
#[derive(Debug, Clone)]
pub struct OpProfile {
    pub op: &'static str,
    pub round_trip_p50_us: f64,
    pub round_trip_mean_us: f64,
    /// The top-level statement's execution (pg_stat_statements, `toplevel`).
    pub executed_us: f64,
    pub statements: Vec<Cost>,
    pub functions: Vec<Cost>,
}

impl OpProfile {
    /// What the client waited beyond the statement's execution: parse/bind, the commit
    /// (WAL flush, deferred triggers) and the protocol.
    pub fn remainder_us(&self) -> f64 {
        self.round_trip_mean_us - self.executed_us
    }
}

/// A whole breakdown.
#[derive(Debug, Clone)]
pub struct Breakdown {
    pub server_version: String,
    pub extension: String,
    pub iterations: u32,
    pub ops: Vec<OpProfile>,
}

/// One phase: `iterations` calls of `sql` with the iteration number as `$1` (and the
/// key's epoch from the grant as `$2`), each of which must answer `wanted` in its first
/// column: a phase measures the operation, never a refusal.
struct Phase {
    op: &'static str,
    sql: &'static str,
    takes_epoch: bool,
    wanted: Answer,
}

/// What a phase's call must answer.
#[derive(Clone, Copy)]
enum Answer {
    /// `acquired` true (its epoch is the second column).
    Granted,
    /// `status` = 'ok'.
    Ok,
    /// One row updated.
    Updated,
}

const PHASES: [Phase; 4] = [
    Phase {
        op: "grant",
        sql: "SELECT acquired, epoch FROM lease.acquire('b-' || $1::int::text, 'owner', interval '30 s')",
        takes_epoch: false,
        wanted: Answer::Granted,
    },
    Phase {
        op: "renew",
        sql: "SELECT status FROM lease.renew('b-' || $1::int::text, 'owner', $2::bigint, interval '30 s')",
        takes_epoch: true,
        wanted: Answer::Ok,
    },
    Phase {
        op: "release",
        sql: "SELECT status FROM lease.release('b-' || $1::int::text, 'owner', $2::bigint)",
        takes_epoch: true,
        wanted: Answer::Ok,
    },
    Phase {
        op: "floor-update",
        sql: "UPDATE bench_floor SET n = n + 1 WHERE id = $1::int % 16",
        takes_epoch: false,
        wanted: Answer::Updated,
    },
];

/// How long a closed backend's statistics take to reach the shared counters (PG 15+, at
/// its exit) or the collector (PG 14, within its 500 ms interval), with a margin.
const STATS_FLUSH: Duration = Duration::from_millis(1500);

/// Runs the breakdown (blocking, on a runtime of its own).
pub fn run(config: &Config) -> Result<Breakdown> {
    let runtime = crate::run::runtime()?;
    let install = PgInstall::ensure(config.major)?;
    let setting = |k: &str, v: &str| (k.to_string(), v.to_string());
    let options = ClusterOptions {
        extensions: vec![config.extension.clone()],
        settings: vec![
            setting("shared_preload_libraries", "pg_stat_statements"),
            setting("pg_stat_statements.track", "all"),
            setting("track_functions", "all"),
        ],
        ..ClusterOptions::default()
    };
    let cluster = Cluster::start_with(&install, options)?;
    runtime.block_on(profile(config, &cluster))
}

async fn profile(config: &Config, cluster: &Cluster) -> Result<Breakdown> {
    let db = cluster
        .fresh_database_with("bench_breakdown", &config.extension.name)
        .await?;
    let admin = cluster.connect(&db).await?;
    admin
        .batch_execute(
            "CREATE EXTENSION pg_stat_statements;
             CREATE TABLE bench_floor (id int PRIMARY KEY, n bigint NOT NULL);
             INSERT INTO bench_floor SELECT g, 0 FROM generate_series(0, 15) g;",
        )
        .await
        .map_err(BenchError::sql("setting the breakdown's database up"))?;
    let version: String = admin
        .query_one(
            "SELECT extversion FROM pg_extension WHERE extname = $1",
            &[&config.extension.name],
        )
        .await
        .map_err(BenchError::sql("reading the extension's version"))?
        .get(0);
    // W1's grant is a grant after a release: every key exists, free, at epoch 1.
    prepare_keys(cluster, &db, config.iterations).await?;
    // The preparing connection's statistics must land before the first reset.
    tokio::time::sleep(STATS_FLUSH).await;
    let mut ops = Vec::new();
    let mut epochs = Vec::new();
    for phase in &PHASES {
        let (profile, granted) =
            one_phase(cluster, &db, &admin, phase, config.iterations, &epochs).await?;
        if !granted.is_empty() {
            epochs = granted;
        }
        ops.push(profile);
    }
    Ok(Breakdown {
        server_version: cluster.version().full.clone(),
        extension: format!("{} {version}", config.extension.name),
        iterations: config.iterations,
        ops,
    })
}

async fn prepare_keys(cluster: &Cluster, db: &str, iterations: u32) -> Result<()> {
    let client = cluster.connect(db).await?;
    for i in 0..iterations as i32 {
        client
            .execute(
                "SELECT lease.release(k, 'owner', (lease.acquire(k, 'owner', interval '30 s')).epoch) \
                 FROM (SELECT 'b-' || $1::int::text AS k) s",
                &[&i],
            )
            .await
            .map_err(BenchError::sql("preparing the keys"))?;
    }
    Ok(())
}

/// Resets the statistics, runs the phase on a connection of its own (closed, so its
/// function statistics are flushed) and reads what the server counted; the epochs a grant
/// phase was given.
async fn one_phase(
    cluster: &Cluster,
    db: &str,
    admin: &Client,
    phase: &Phase,
    iterations: u32,
    epochs: &[i64],
) -> Result<(OpProfile, Vec<i64>)> {
    admin
        .batch_execute("SELECT pg_stat_statements_reset(); SELECT pg_stat_reset();")
        .await
        .map_err(BenchError::sql("resetting the statistics"))?;
    let (histogram, granted) = timed_calls(cluster, db, phase, iterations, epochs).await?;
    tokio::time::sleep(STATS_FLUSH).await;
    admin
        .batch_execute("SELECT pg_stat_clear_snapshot()")
        .await
        .map_err(BenchError::sql("clearing the statistics snapshot"))?;
    let n = f64::from(iterations);
    let (executed_us, statements) = statements(admin, n).await?;
    let profile = OpProfile {
        op: phase.op,
        round_trip_p50_us: histogram.value_at_quantile(0.5) as f64,
        round_trip_mean_us: histogram.mean(),
        executed_us,
        statements,
        functions: functions(admin, n).await?,
    };
    Ok((profile, granted))
}

/// The phase's calls, timed, each checked to answer what the phase measures; the epochs
/// granted (a grant phase).
async fn timed_calls(
    cluster: &Cluster,
    db: &str,
    phase: &Phase,
    iterations: u32,
    epochs: &[i64],
) -> Result<(Histogram<u64>, Vec<i64>)> {
    if phase.takes_epoch && epochs.len() < iterations as usize {
        return Err(BenchError::Config(format!(
            "the {} phase needs the grant phase's {iterations} epochs",
            phase.op
        )));
    }
    let client = cluster.connect(db).await?;
    let what = || format!("the {} phase", phase.op);
    let statement = client
        .prepare(phase.sql)
        .await
        .map_err(BenchError::sql(format!("preparing the {} phase", phase.op)))?;
    let mut histogram = Histogram::<u64>::new(3).map_err(|e| BenchError::Config(e.to_string()))?;
    let mut granted = Vec::new();
    for i in 0..iterations as i32 {
        let start = Instant::now();
        let rows = match phase.takes_epoch {
            true => client.query(&statement, &[&i, &epochs[i as usize]]).await,
            false => client.query(&statement, &[&i]).await,
        }
        .map_err(BenchError::sql(what()))?;
        let _ = histogram.record(start.elapsed().as_micros() as u64);
        granted.extend(
            answered(phase, &rows)
                .map_err(|why| BenchError::Config(format!("{} call {i}: {why}", phase.op)))?,
        );
    }
    drop(client);
    Ok((histogram, granted))
}

/// Whether `rows` are the answer `phase` measures; a grant's epoch.
fn answered(
    phase: &Phase,
    rows: &[tokio_postgres::Row],
) -> std::result::Result<Option<i64>, String> {
    let first = |what: &str| {
        rows.first()
            .ok_or_else(|| format!("no row ({what} wanted)"))
    };
    match phase.wanted {
        Answer::Granted => {
            let row = first("a grant")?;
            let (acquired, epoch): (bool, i64) = (row.get(0), row.get(1));
            match acquired {
                true => Ok(Some(epoch)),
                false => Err("not granted: the profile would measure a refusal".into()),
            }
        }
        Answer::Ok => {
            let status: String = first("status ok")?.get(0);
            match status.as_str() {
                "ok" => Ok(None),
                other => Err(format!(
                    "answered {other:?}, not ok: the profile would measure a refusal"
                )),
            }
        }
        Answer::Updated => Ok(None),
    }
}

/// The top-level call's execution per op, and every statement's (nested included).
async fn statements(admin: &Client, n: f64) -> Result<(f64, Vec<Cost>)> {
    let rows = admin
        .query(
            "SELECT query, toplevel, calls::float8, total_exec_time * 1000 \
             FROM pg_stat_statements WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database()) \
             AND query NOT LIKE '%pg_stat%' ORDER BY total_exec_time DESC",
            &[],
        )
        .await
        .map_err(BenchError::sql("reading pg_stat_statements"))?;
    let mut executed = 0.0;
    let mut out = Vec::new();
    for row in rows {
        let (query, toplevel, calls, us): (String, bool, f64, f64) =
            (row.get(0), row.get(1), row.get(2), row.get(3));
        // The phase's connection ran one top-level statement; the others here are this
        // connection's own reads of the statistics, left out above.
        if toplevel {
            executed += us / n;
        }
        out.push(Cost {
            what: format!(
                "{}{}",
                if toplevel { "" } else { "  nested: " },
                one_line(&query)
            ),
            calls_per_op: calls / n,
            us_per_op: us / n,
            total_us_per_op: None,
        });
    }
    Ok((executed, out))
}

async fn functions(admin: &Client, n: f64) -> Result<Vec<Cost>> {
    let rows = admin
        .query(
            "SELECT schemaname || '.' || funcname, calls::float8, self_time * 1000, total_time * 1000 \
             FROM pg_stat_user_functions WHERE calls > 0 AND funcname NOT LIKE 'pg_stat%' \
             ORDER BY self_time DESC",
            &[],
        )
        .await
        .map_err(BenchError::sql("reading pg_stat_user_functions"))?;
    Ok(rows
        .iter()
        .map(|row| Cost {
            what: row.get(0),
            calls_per_op: row.get::<_, f64>(1) / n,
            us_per_op: row.get::<_, f64>(2) / n,
            total_us_per_op: Some(row.get::<_, f64>(3) / n),
        })
        .collect())
}

fn one_line(sql: &str) -> String {
    let flat: String = sql.split_whitespace().collect::<Vec<_>>().join(" ");
    match flat.char_indices().nth(110) {
        Some((i, _)) => format!("{}...", &flat[..i]),
        None => flat,
    }
}

impl Breakdown {
    /// Markdown: a summary table (round trip, execution, remainder, ratio to the floor),
    /// then each op's statements and functions.
    pub fn render(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "# Where a lease write's time goes: {} on PostgreSQL {}\n\n{} calls per op, one \
             connection, each call its own transaction; fsync on, synchronous_commit on. \
             Times in µs per op.\n",
            self.extension, self.server_version, self.iterations
        );
        let floor = self
            .ops
            .iter()
            .find(|o| o.op == "floor-update")
            .map(|o| o.round_trip_p50_us);
        let _ = writeln!(
            s,
            "| op | round trip p50 | mean | executing the call | the rest (parse, commit, protocol) | p50 / floor |\n| --- | ---: | ---: | ---: | ---: | ---: |"
        );
        for op in &self.ops {
            let ratio = floor.map_or("-".to_string(), |f| {
                format!("{:.2}x", op.round_trip_p50_us / f)
            });
            let _ = writeln!(
                s,
                "| {} | {:.0} | {:.0} | {:.0} | {:.0} | {ratio} |",
                op.op,
                op.round_trip_p50_us,
                op.round_trip_mean_us,
                op.executed_us,
                op.remainder_us()
            );
        }
        for op in &self.ops {
            let _ = writeln!(
                s,
                "\n## {}\n\n| statement | calls/op | µs/op |\n| --- | ---: | ---: |",
                op.op
            );
            for c in &op.statements {
                let _ = writeln!(
                    s,
                    "| `{}` | {:.2} | {:.1} |",
                    c.what.replace('|', "\\|"),
                    c.calls_per_op,
                    c.us_per_op
                );
            }
            if op.functions.is_empty() {
                continue;
            }
            let _ = writeln!(s, "\n| function | calls/op | self µs/op | total µs/op |\n| --- | ---: | ---: | ---: |");
            for c in &op.functions {
                let _ = writeln!(
                    s,
                    "| {} | {:.2} | {:.1} | {:.1} |",
                    c.what,
                    c.calls_per_op,
                    c.us_per_op,
                    c.total_us_per_op.unwrap_or_default()
                );
            }
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_statement_is_shown_on_one_line_and_cut_after_110_characters() {
        assert_eq!(one_line("SELECT 1\n   FROM  t"), "SELECT 1 FROM t");
        let long = "x ".repeat(100);
        let shown = one_line(&long);
        assert!(
            shown.ends_with("...") && shown.chars().count() == 113,
            "{shown}"
        );
    }
}
