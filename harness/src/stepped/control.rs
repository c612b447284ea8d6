//! What a plan's restart step is made with: the caller's control of the server. The
//! stepped runner does not manage the server it runs on; its caller may: the failure
//! crate's checks hand theirs ([`super::play`]), the conformance checks that restart a
//! cluster of their own hand a [`ClusterControl`] ([`super::run_controlled`]).

use crate::pg::Cluster;
use crate::recorder::Recorder;
use crate::workload::Stop;
use model::{NemesisEffect, Span, Ts};
use std::future::Future;
use std::pin::Pin;
use std::time::Duration;
use tokio::sync::Mutex;
use tokio_postgres::Client;

/// A future a [`ServerControl`] returns.
pub type Boxed<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// The server a plan runs on, as its caller controls it.
pub trait ServerControl: Send + Sync {
    /// Stops the server as `stop` says, keeps it down for `down`, starts it again, and
    /// records the restart on `recorder`, the plan's (a restart nemesis event with its
    /// downtime: the sessions then reconnect): what happened, in a line, or why it failed.
    fn restart<'a>(
        &'a self,
        recorder: &'a Recorder,
        stop: Stop,
        down: Duration,
    ) -> Boxed<'a, Result<String, String>>;

    /// A new connection for the runner's monitor (the old one ended with the server).
    fn monitor(&self) -> Boxed<'_, Result<Client, String>>;
}

/// A managed local cluster of the caller's, restarted by plans run on it: the caller's
/// alone, so no other check sees its server go down.
pub struct ClusterControl {
    cluster: Mutex<Cluster>,
    /// The database the monitor connects to.
    db: String,
}

impl ClusterControl {
    pub fn new(cluster: Cluster, db: String) -> ClusterControl {
        ClusterControl {
            cluster: Mutex::new(cluster),
            db,
        }
    }

    /// The server's clock, on a new connection.
    async fn server_now(&self, cluster: &Cluster) -> Result<Ts, String> {
        let client = cluster.connect(&self.db).await.map_err(|e| e.to_string())?;
        crate::client::server_now(&client)
            .await
            .map(|t| Ts(t.timestamp_micros()))
            .map_err(|e| e.to_string())
    }

    /// Stops the cluster as `stop` says, waits `down`, starts it: the server-time window
    /// from before the stop to after the start.
    async fn bounce(&self, stop: Stop, down: Duration) -> Result<Span, String> {
        let mut cluster = self.cluster.lock().await;
        let t0 = self.server_now(&cluster).await?;
        let stopped = match stop {
            Stop::Crash => cluster.crash_async().await,
            Stop::Immediate => cluster.stop_immediate_async().await,
            Stop::Fast => cluster.stop_fast_async().await,
        };
        stopped.map_err(|e| format!("the {} stop: {e}", stop.name()))?;
        tokio::time::sleep(down).await;
        cluster
            .resume_async()
            .await
            .map_err(|e| format!("the start: {e}"))?;
        let t1 = self.server_now(&cluster).await?;
        Span::new(t0, t1).map_err(|_| "the server's clock went back across the restart".into())
    }
}

impl ServerControl for ClusterControl {
    fn restart<'a>(
        &'a self,
        recorder: &'a Recorder,
        stop: Stop,
        down: Duration,
    ) -> Boxed<'a, Result<String, String>> {
        Box::pin(async move {
            let started = recorder.nemesis_start_restart(stop.name());
            let bounced = self.bounce(stop, down).await;
            // Ended either way: the end reopens the recorder's connections.
            let (effect, detail) = match &bounced {
                Ok(window) => (
                    NemesisEffect::Restart {
                        clean: stop.is_clean(),
                        down: Some(*window),
                    },
                    format!(
                        "{} stop, down {} ms of server time",
                        stop.name(),
                        (window.t1().0 - window.t0().0) / 1_000
                    ),
                ),
                Err(e) => (
                    NemesisEffect::Restart {
                        clean: false,
                        down: None,
                    },
                    format!("failed: {e}"),
                ),
            };
            recorder
                .nemesis_end(started, effect, detail.clone())
                .map_err(|e| e.to_string())?;
            bounced.map(|_| detail)
        })
    }

    fn monitor(&self) -> Boxed<'_, Result<Client, String>> {
        Box::pin(async move {
            let cluster = self.cluster.lock().await;
            cluster.connect(&self.db).await.map_err(|e| e.to_string())
        })
    }
}
