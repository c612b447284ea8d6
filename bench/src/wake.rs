//! Blocking-acquire wake latency: from the instant a holder's release returns to the instant
//! a blocked waiter's acquire of the same key returns. The release is issued only once the
//! waiter is seen asleep in its poll (wait_event PgSleep), at a phase spread across the
//! documented poll interval.

use crate::error::{BenchError, Result};
use crate::stats::Latencies;
use std::time::Duration;
use tokio::time::Instant;
use tokio_postgres::Client;

/// The poll interval of a blocking acquire, as specs/SEMANTICS.md §acquire documents it
/// ("sleeps at most 50 ms"); the wake target is this plus 10 ms at p99.
pub const DOCUMENTED_POLL_BOUND: Duration = Duration::from_millis(50);
/// How long a waiter may wait before the sample is an infrastructure failure.
const WAIT_BOUND: &str = "10 s";

async fn connect(config: &tokio_postgres::Config, who: &str) -> Result<Client> {
    let (client, connection) =
        config
            .connect(tokio_postgres::NoTls)
            .await
            .map_err(BenchError::sql(format!(
                "wake latency: connecting the {who}"
            )))?;
    tokio::spawn(async move {
        let _ = connection.await;
    });
    Ok(client)
}

/// Takes `samples` wake latencies on database `config` points at.
pub async fn measure(config: &tokio_postgres::Config, samples: u32) -> Result<Latencies> {
    let holder = connect(config, "holder").await?;
    let waiter = std::sync::Arc::new(connect(config, "waiter").await?);
    let waiter_pid: i32 = waiter
        .query_one("SELECT pg_backend_pid()", &[])
        .await
        .and_then(|r| r.try_get(0))
        .map_err(BenchError::sql("wake latency: the waiter's pid"))?;
    let mut latencies = Latencies::new();
    for sample in 0..samples {
        let epoch = grant(&holder, "holder", "0 s").await?;
        let w = std::sync::Arc::clone(&waiter);
        let blocked = tokio::spawn(async move {
            let epoch = grant(&w, "waiter", WAIT_BOUND).await;
            (Instant::now(), epoch)
        });
        wait_until_asleep(&holder, waiter_pid).await?;
        // Spread the release across the poll interval (golden-ratio steps cover it evenly).
        let phase = (f64::from(sample) * 0.618_034).fract();
        tokio::time::sleep(DOCUMENTED_POLL_BOUND.mul_f64(phase)).await;
        release(&holder, "holder", epoch).await?;
        let released = Instant::now();
        let (woke, waiter_epoch) = blocked.await?;
        latencies.record(woke.saturating_duration_since(released));
        release(&waiter, "waiter", waiter_epoch?).await?;
    }
    Ok(latencies)
}

/// A granted acquire of key `wake` by `owner` (waiting up to `wait`); its epoch.
async fn grant(client: &Client, owner: &str, wait: &str) -> Result<i64> {
    let row = client
        .query_one(
            "SELECT acquired, epoch FROM lease.acquire('wake', $1::text, interval '1 min', $2::text::interval)",
            &[&owner, &wait],
        )
        .await
        .map_err(BenchError::sql(format!("wake latency: acquire by the {owner}")))?;
    let epoch: Option<i64> = row
        .try_get(1)
        .map_err(BenchError::sql("wake latency: reading the epoch"))?;
    epoch.ok_or_else(|| BenchError::Step {
        workload: crate::workloads::WAKE.into(),
        step: format!("acquire by the {owner}"),
        message: "not granted: the key is not free between samples".into(),
    })
}

async fn release(client: &Client, owner: &str, epoch: i64) -> Result<()> {
    client
        .query_one(
            "SELECT status FROM lease.release('wake', $1::text, $2)",
            &[&owner, &epoch],
        )
        .await
        .map_err(BenchError::sql(format!(
            "wake latency: release by the {owner}"
        )))?;
    Ok(())
}

/// Polls pg_stat_activity until backend `pid` sleeps (PgSleep) inside its acquire.
async fn wait_until_asleep(monitor: &Client, pid: i32) -> Result<()> {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let row = monitor
            .query_one(
                "SELECT coalesce(wait_event, '') = 'PgSleep' FROM pg_stat_activity WHERE pid = $1",
                &[&pid],
            )
            .await
            .map_err(BenchError::sql("wake latency: watching the waiter"))?;
        let asleep: bool = row
            .try_get(0)
            .map_err(BenchError::sql("wake latency: watching the waiter"))?;
        if asleep {
            return Ok(());
        }
        if Instant::now() >= deadline {
            return Err(BenchError::Step {
                workload: crate::workloads::WAKE.into(),
                step: "blocking acquire".into(),
                message: "the waiter was not seen asleep in its poll within 5 s".into(),
            });
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}
