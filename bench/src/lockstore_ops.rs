//! The lock store's operations (the `lockstore` crate's pinned statements) as a floor:
//! try_insert + extend + delete_if_owner on each client's private key, in a closed loop.

use crate::driver::Window;
use crate::error::{BenchError, Result};
use crate::stats::Latencies;
use lockstore::{LockStore, PostgresLockStore, StoreOptions};
use std::time::Duration;
use tokio::time::Instant;

/// The names of the measured operations, in order.
pub const OPS: [&str; 3] = ["acquire", "renew", "release"];
const TTL: Duration = Duration::from_secs(30);

/// Per op and for the whole cycle.
#[derive(Debug, Clone, Default)]
pub struct Measured {
    pub ops: [Latencies; 3],
    pub cycle: Latencies,
}

/// Creates the store's schema and one session per client in the database `client` is on.
pub async fn setup(client: &tokio_postgres::Client) -> Result<()> {
    lockstore::install_schema(client)
        .await
        .map_err(|source| BenchError::LockStore {
            context: "installing the schema".into(),
            source,
        })?;
    client
        .batch_execute(
            "INSERT INTO lock_session (session_id, owner_id, expires_at)
             SELECT 's-' || i, 'o-' || i, now() + interval '1 day' FROM generate_series(0, 63) AS i",
        )
        .await
        .map_err(BenchError::sql("lock store: creating the sessions"))
}

pub async fn run(
    config: &tokio_postgres::Config,
    clients: u32,
    window: Window,
) -> Result<Measured> {
    let mut stores = Vec::new();
    for _ in 0..clients {
        let store = PostgresLockStore::connect(config, StoreOptions::default())
            .await
            .map_err(|source| BenchError::LockStore {
                context: "connecting".into(),
                source,
            })?;
        stores.push(store);
    }
    let start = Instant::now() + Duration::from_millis(20);
    let mut tasks = Vec::new();
    for (id, store) in stores.into_iter().enumerate() {
        tasks.push(tokio::spawn(client_loop(store, id, start, window)));
    }
    let mut total = Measured::default();
    for task in tasks {
        let m = task.await??;
        for (mine, theirs) in total.ops.iter_mut().zip(&m.ops) {
            mine.merge(theirs);
        }
        total.cycle.merge(&m.cycle);
    }
    Ok(total)
}

fn lost(step: &str) -> BenchError {
    BenchError::Step {
        workload: crate::workloads::LOCKSTORE.into(),
        step: step.into(),
        message: "the private key's grant was not there".into(),
    }
}

fn store_error(step: &'static str) -> impl FnOnce(lockstore::StoreError) -> BenchError {
    move |source| BenchError::LockStore {
        context: step.into(),
        source,
    }
}

async fn client_loop(
    store: PostgresLockStore,
    id: usize,
    start: Instant,
    window: Window,
) -> Result<Measured> {
    let (key, owner, session) = (format!("ls-{id}"), format!("o-{id}"), format!("s-{id}"));
    let warm_end = start + window.warmup;
    let end = warm_end + window.measure;
    let mut m = Measured::default();
    tokio::time::sleep_until(start).await;
    loop {
        let began = Instant::now();
        if began >= end {
            return Ok(m);
        }
        let t0 = Instant::now();
        let handle = store
            .try_insert(&key, &owner, &session, TTL)
            .await
            .map_err(store_error("acquire"))?
            .ok_or_else(|| lost("acquire"))?;
        let t1 = Instant::now();
        store
            .extend(&key, handle.fencing_token, TTL)
            .await
            .map_err(store_error("renew"))?
            .ok_or_else(|| lost("renew"))?;
        let t2 = Instant::now();
        if !store
            .delete_if_owner(&key, handle.fencing_token)
            .await
            .map_err(store_error("release"))?
        {
            return Err(lost("release"));
        }
        let t3 = Instant::now();
        if began >= warm_end && t3 <= end {
            m.ops[0].record(t1 - t0);
            m.ops[1].record(t2 - t1);
            m.ops[2].record(t3 - t2);
            m.cycle.record(t3 - began);
        }
    }
}
