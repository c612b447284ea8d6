//! A cluster under fault injection: its lifecycle (crash, shutdowns, start) runs on the
//! blocking pool, so async code around it never blocks a runtime thread.

use crate::error::FaultError;
use harness::pg::{Cluster, PgError};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};

/// How the server is stopped before it is started again: the plan step's vocabulary, one
/// list for plans and fault records.
pub use harness::workload::Stop;

/// A cluster shared by a check's tasks.
#[derive(Clone)]
pub struct Server {
    cluster: Arc<Mutex<Cluster>>,
}

impl Server {
    pub fn new(cluster: Cluster) -> Server {
        Server {
            cluster: Arc::new(Mutex::new(cluster)),
        }
    }

    /// The cluster; a panic elsewhere while it was held leaves it usable.
    fn lock(&self) -> MutexGuard<'_, Cluster> {
        self.cluster.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Where the server listens.
    pub fn addr(&self) -> SocketAddr {
        let c = self.lock();
        SocketAddr::from(([127, 0, 0, 1], c.port()))
    }

    /// A superuser connection config for `db`.
    pub fn config(&self, db: &str) -> tokio_postgres::Config {
        self.lock().config(db)
    }

    /// The postmaster's pid while the server runs.
    pub fn postmaster_pid(&self) -> Option<u32> {
        self.lock().postmaster_pid()
    }

    /// The last lines of the server log.
    pub fn log_tail(&self) -> String {
        self.lock().log_tail()
    }

    /// A superuser connection to `db` (its driver task spawned).
    pub async fn admin(&self, db: &str) -> Result<tokio_postgres::Client, FaultError> {
        let (client, connection) = self
            .config(db)
            .connect(tokio_postgres::NoTls)
            .await
            .map_err(FaultError::db("connecting as the superuser"))?;
        tokio::spawn(async move {
            // Its error shows as the next statement's.
            let _ = connection.await;
        });
        Ok(client)
    }

    /// Runs a blocking lifecycle step of the cluster on the blocking pool.
    async fn lifecycle(
        &self,
        what: &'static str,
        step: fn(&mut Cluster) -> Result<(), PgError>,
    ) -> Result<(), FaultError> {
        let cluster = Arc::clone(&self.cluster);
        let ran = tokio::task::spawn_blocking(move || {
            let mut c = cluster.lock().unwrap_or_else(|p| p.into_inner());
            step(&mut c)
        })
        .await;
        match ran {
            Ok(result) => result.map_err(|source| FaultError::Server { what, source }),
            Err(e) => Err(FaultError::Task(format!("{what}: {e}"))),
        }
    }

    /// Stops the server as `stop` says.
    pub async fn stop(&self, stop: Stop) -> Result<(), FaultError> {
        match stop {
            Stop::Crash => self.lifecycle("crash (SIGKILL)", Cluster::crash).await,
            Stop::Immediate => {
                self.lifecycle("immediate shutdown", Cluster::stop_immediate)
                    .await
            }
            Stop::Fast => self.lifecycle("fast shutdown", Cluster::stop_fast).await,
        }
    }

    /// Starts the stopped server again on the same port (crash recovery as needed).
    pub async fn start(&self) -> Result<(), FaultError> {
        self.lifecycle("start", Cluster::resume).await
    }

    /// SIGSTOPs (`true`) or SIGCONTs (`false`) the postmaster and all its children.
    pub fn pause(&self, paused: bool) -> Result<(), FaultError> {
        self.lock()
            .pause(paused)
            .map_err(|source| FaultError::Server {
                what: if paused { "SIGSTOP" } else { "SIGCONT" },
                source,
            })
    }

    /// The cluster back, when no other handle is left (to drop it, which removes it).
    pub fn into_cluster(self) -> Option<Cluster> {
        Arc::try_unwrap(self.cluster)
            .ok()
            .map(|m| m.into_inner().unwrap_or_else(|p| p.into_inner()))
    }
}
