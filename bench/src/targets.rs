//! The targets, evaluated on one run (ratios of p50 medians, same client count,
//! Rust closed loop unless said otherwise).

use crate::result::{BenchResult, Driver, Target};
use crate::wake::DOCUMENTED_POLL_BOUND;
use crate::workloads::{SELECT_1, UPDATE, W1_CYCLE, WAKE};

/// grant, renew and release: at most this times a bare durable UPDATE.
pub const WRITE_PATH_LIMIT: f64 = 1.15;
/// denied acquire, idempotent re-acquire, inspect: at most this times a SELECT 1.
pub const READ_PATH_LIMIT: f64 = 2.0;
/// "Writes no WAL": under one byte per statement (background writes spread over thousands
/// of statements stay far below it; one WAL record is tens of bytes).
pub const NO_WAL_BYTES_PER_STATEMENT: f64 = 1.0;
/// The Rust driver's p50 over pgbench's on the same script.
pub const DRIVER_OVERHEAD_LIMIT: f64 = 1.10;
/// Wake latency p99 above the documented poll bound.
pub const WAKE_SLACK_MS: f64 = 10.0;

pub fn evaluate(r: &BenchResult) -> Vec<Target> {
    let mut out = Vec::new();
    for &clients in &r.settings.clients {
        for op in ["grant", "renew", "release"] {
            ratio(
                r,
                &mut out,
                W1_CYCLE,
                op,
                clients,
                UPDATE,
                "update",
                WRITE_PATH_LIMIT,
            );
        }
        for name in ["denied-acquire", "idempotent-reacquire", "inspect"] {
            ratio(
                r,
                &mut out,
                name,
                name,
                clients,
                SELECT_1,
                "select-1",
                READ_PATH_LIMIT,
            );
            if let Some(f) = r.figure(name, name, clients, Driver::RustClosed) {
                if let Some(wal) = f.wal_bytes_per_statement {
                    out.push(Target {
                        name: format!("{name} writes no WAL"),
                        figure: f.key(),
                        value: wal,
                        limit: NO_WAL_BYTES_PER_STATEMENT,
                        met: wal < NO_WAL_BYTES_PER_STATEMENT,
                        basis:
                            "WAL bytes per statement (pg_current_wal_insert_lsn before and after)"
                                .into(),
                    });
                }
            }
        }
    }
    if let Some(f) = r.figure(WAKE, "wake", 1, Driver::RustClosed) {
        let limit = DOCUMENTED_POLL_BOUND.as_secs_f64() * 1e3 + WAKE_SLACK_MS;
        let p99_ms = f.median.p99_us / 1e3;
        out.push(Target {
            name: "wake latency p99 <= poll bound + 10 ms".into(),
            figure: f.key(),
            value: p99_ms,
            limit,
            met: p99_ms <= limit,
            basis: "ms, release returned -> waiter's acquire returned".into(),
        });
    }
    for f in r.figures.iter().filter(|f| f.driver == Driver::RustClosed) {
        if let Some(p) = r.figure(&f.workload, &f.op, f.clients, Driver::PgbenchClosed) {
            if p.median.p50_us > 0.0 {
                let value = f.median.p50_us / p.median.p50_us;
                out.push(Target {
                    name: format!("driver overhead {}/{} @{}", f.workload, f.op, f.clients),
                    figure: f.key(),
                    value,
                    limit: DRIVER_OVERHEAD_LIMIT,
                    met: value <= DRIVER_OVERHEAD_LIMIT,
                    basis: "Rust closed-loop p50 / pgbench closed-loop p50".into(),
                });
            }
        }
    }
    out
}

#[allow(clippy::too_many_arguments)]
fn ratio(
    r: &BenchResult,
    out: &mut Vec<Target>,
    workload: &str,
    op: &str,
    clients: u32,
    floor: &str,
    floor_op: &str,
    limit: f64,
) {
    let (Some(f), Some(base)) = (
        r.figure(workload, op, clients, Driver::RustClosed),
        r.figure(floor, floor_op, clients, Driver::RustClosed),
    ) else {
        return;
    };
    if base.median.p50_us <= 0.0 {
        return;
    }
    let value = f.median.p50_us / base.median.p50_us;
    out.push(Target {
        name: format!("{op} @{clients} <= {limit}x {floor_op}"),
        figure: f.key(),
        value,
        limit,
        met: value <= limit,
        basis: format!("p50 / p50 of {floor}/{floor_op}"),
    });
}
