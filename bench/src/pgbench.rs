//! pgbench running the same scripts (`-M prepared`, per-transaction logs with `-l`), its
//! logs read into the same histograms as the Rust driver's.

use crate::driver::{Pace, Window};
use crate::error::{BenchError, Result};
use crate::stats::Latencies;
use crate::workloads::Workload;
use harness::pg::{Cluster, PgInstall};
use std::path::{Path, PathBuf};

/// The pgbench a run uses.
#[derive(Debug, Clone)]
pub struct Pgbench {
    pub path: PathBuf,
    /// `pgbench --version`, e.g. "pgbench (PostgreSQL) 15.18 (Debian 15.18-0+deb12u1)".
    pub version: String,
}

/// The server install's own pgbench, else that of the newest other install found (the npm
/// builds of PostgreSQL 14 ship none).
pub fn find(install: &PgInstall) -> Result<Pgbench> {
    let mut tried = vec![install.version.major.to_string()];
    let mut candidates = vec![install.bin("pgbench")];
    for major in [18, 17, 16, 15, 14] {
        if major == install.version.major {
            continue;
        }
        tried.push(major.to_string());
        if let Ok(other) = PgInstall::find(major) {
            candidates.push(other.bin("pgbench"));
        }
    }
    let path = candidates
        .into_iter()
        .find(|p| p.is_file())
        .ok_or_else(|| BenchError::NoPgbench {
            tried: tried.join(", "),
        })?;
    let out = std::process::Command::new(&path)
        .arg("--version")
        .output()
        .map_err(BenchError::io("running pgbench --version", &path))?;
    Ok(Pgbench {
        version: String::from_utf8_lossy(&out.stdout).trim().to_string(),
        path,
    })
}

impl Pgbench {
    /// Runs `workload`'s script for the warm-up plus the measured window (whole seconds:
    /// pgbench's `-T`), and returns the latencies of the transactions that completed in the
    /// measured window. With an open-loop pace pgbench's `-R` schedules transactions and
    /// its latencies count from the scheduled start.
    pub async fn run(
        &self,
        cluster: &Cluster,
        db: &str,
        workload: &Workload,
        clients: u32,
        window: Window,
        pace: Pace,
    ) -> Result<Logged> {
        let dir = tempfile::Builder::new()
            .prefix("leasecheck-pgbench-")
            .tempdir()
            .map_err(BenchError::io("creating a directory", std::env::temp_dir()))?;
        let script = dir.path().join("script.sql");
        std::fs::write(&script, workload.script)
            .map_err(BenchError::io("writing the script", &script))?;
        let seconds = (window.warmup + window.measure).as_secs().max(1);
        let threads = clients.min(2);
        let mut cmd = tokio::process::Command::new(&self.path);
        cmd.args(["-n", "-M", "prepared", "-l"])
            .arg(format!("--log-prefix={}", dir.path().join("log").display()))
            .arg("-f")
            .arg(&script)
            .args(["-c", &clients.to_string(), "-j", &threads.to_string()])
            .args(["-T", &seconds.to_string()])
            .args(["-h", cluster.host(), "-p", &cluster.port().to_string()])
            .args(["-U", cluster.superuser(), db])
            .env("LC_ALL", "C")
            .current_dir(dir.path());
        if let Pace::Open { rate_per_s } = pace {
            cmd.args(["-R", &format!("{rate_per_s:.1}")]);
        }
        let out = cmd
            .output()
            .await
            .map_err(BenchError::io("running pgbench", &self.path))?;
        if !out.status.success() {
            return Err(BenchError::Pgbench {
                program: self.path.display().to_string(),
                status: out.status.to_string(),
                output: format!(
                    "{}{}",
                    String::from_utf8_lossy(&out.stdout),
                    String::from_utf8_lossy(&out.stderr)
                ),
            });
        }
        let transactions = read_logs(dir.path())?;
        Ok(measured_window(&transactions, window))
    }
}

/// What pgbench measured in the window.
#[derive(Debug, Clone, Default)]
pub struct Logged {
    pub latencies: Latencies,
    /// Transactions logged with a latency of 0 µs, left out of `latencies`: pgbench 15
    /// refreshes its clock lazily, and with one client on this machine it logged a fifth of
    /// `SELECT 1` transactions as taking 0 µs (its own summary's average was 58 µs).
    pub zero_latency: u64,
}

impl Pgbench {}

/// One logged transaction: when it completed (µs since the epoch) and its latency (µs).
#[derive(Debug, Clone, Copy, PartialEq)]
struct Transaction {
    completed_us: u64,
    latency_us: u64,
}

/// Every `log.*` file in `dir` (one per pgbench thread).
fn read_logs(dir: &Path) -> Result<Vec<Transaction>> {
    let mut all = Vec::new();
    let entries = std::fs::read_dir(dir).map_err(BenchError::io("listing pgbench logs", dir))?;
    for entry in entries {
        let path = entry
            .map_err(BenchError::io("listing pgbench logs", dir))?
            .path();
        let is_log = path
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.starts_with("log."));
        if is_log {
            let text = std::fs::read_to_string(&path)
                .map_err(BenchError::io("reading a pgbench log", &path))?;
            all.extend(parse_log(&path, &text)?);
        }
    }
    Ok(all)
}

/// pgbench's per-transaction log: `client_id transaction_no time script_no time_epoch
/// time_us [schedule_lag]`, `time` the latency in µs.
fn parse_log(path: &Path, text: &str) -> Result<Vec<Transaction>> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let err = |message: String| BenchError::PgbenchLog {
            path: path.to_path_buf(),
            line: i + 1,
            message,
        };
        if fields.len() < 6 {
            return Err(err(format!("expected at least 6 fields: {line:?}")));
        }
        let num = |k: usize| {
            fields[k]
                .parse::<u64>()
                .map_err(|e| err(format!("field {} {:?}: {e}", k + 1, fields[k])))
        };
        out.push(Transaction {
            latency_us: num(2)?,
            completed_us: num(4)? * 1_000_000 + num(5)?,
        });
    }
    Ok(out)
}

/// The latencies of the transactions that completed inside the measured window, the run
/// taken to start when its first transaction did.
fn measured_window(transactions: &[Transaction], window: Window) -> Logged {
    let mut logged = Logged::default();
    let Some(start) = transactions
        .iter()
        .map(|t| t.completed_us.saturating_sub(t.latency_us))
        .min()
    else {
        return logged;
    };
    let from = start + window.warmup.as_micros() as u64;
    let to = from + window.measure.as_micros() as u64;
    for t in transactions {
        if t.completed_us >= from && t.completed_us <= to {
            if t.latency_us == 0 {
                logged.zero_latency += 1;
            } else {
                logged.latencies.record_micros(t.latency_us);
            }
        }
    }
    logged
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn log_lines_and_the_warmup_window() {
        let text =
            "0 0 500 0 100 0\n0 1 700 0 101 500000\n0 2 0 0 101 600000\n1 0 900 0 102 0 12\n";
        let logged = parse_log(Path::new("log.1"), text).expect("parses");
        assert_eq!(logged.len(), 4);
        assert_eq!(logged[1].completed_us, 101_500_000);
        let window = Window {
            warmup: Duration::from_secs(1),
            measure: Duration::from_secs(1),
        };
        // Start = 100 s - 500 µs; counted: completions in [start + 1 s, start + 2 s].
        let l = measured_window(&logged, window);
        assert_eq!((l.latencies.count(), l.zero_latency), (1, 1));
        assert!(parse_log(Path::new("log.1"), "0 0 x 0 1 2\n").is_err());
    }
}
