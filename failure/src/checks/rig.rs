//! What every check stands on: its own throwaway cluster with a build installed under its
//! own name (version checked), a recorder on a fresh database, and the fault's reach.

use crate::error::FaultError;
use crate::inject::Reach;
use crate::server::Server;
use harness::extension::ExtensionFiles;
use harness::pg::{Cluster, ClusterOptions, PgInstall};
use harness::recorder::{Recorder, RecorderOptions};
use model::History;
use std::sync::Arc;
use std::time::Duration;

/// Server settings and session options of a check.
#[derive(Clone, Debug, Default)]
pub(crate) struct Setup {
    /// Cluster settings (`-c name=value`).
    pub settings: Vec<(String, String)>,
    /// Session options of the recorder's connections (`-c name=value ...`).
    pub session_options: Option<String>,
}

/// Starts a cluster with `files` installed (on the blocking pool: initdb and start block).
pub(crate) async fn cluster(
    install: &PgInstall,
    files: &ExtensionFiles,
    settings: Vec<(String, String)>,
) -> Result<Cluster, FaultError> {
    let install = install.clone();
    let options = ClusterOptions {
        settings,
        extensions: vec![files.clone()],
        ..ClusterOptions::default()
    };
    tokio::task::spawn_blocking(move || Cluster::start_with(&install, options))
        .await
        .map_err(|e| FaultError::Task(format!("starting a cluster: {e}")))?
        .map_err(|source| FaultError::Server {
            what: "start a cluster",
            source,
        })
}

/// Drops a cluster (stops it, removes its directory) on the blocking pool.
pub(crate) async fn discard(cluster: Option<Cluster>) {
    if let Some(c) = cluster {
        let _ = tokio::task::spawn_blocking(move || drop(c)).await;
    }
}

/// A cluster, a database with the build, and a recorder on it.
pub(crate) struct Rig {
    pub server: Server,
    pub database: String,
    pub recorder: Arc<Recorder>,
    pub postgres: String,
}

impl Rig {
    pub async fn start(
        install: &PgInstall,
        files: &ExtensionFiles,
        setup: &Setup,
    ) -> Result<Rig, FaultError> {
        let cluster = cluster(install, files, setup.settings.clone()).await?;
        let database = match created(&cluster, files).await {
            Ok(db) => db,
            Err(e) => {
                discard(Some(cluster)).await;
                return Err(e);
            }
        };
        let mut config = cluster.config(&database);
        if let Some(options) = &setup.session_options {
            config.options(options);
        }
        let options = RecorderOptions {
            call_timeout: Duration::from_secs(10),
            connect_patience: Duration::from_secs(30),
            ..RecorderOptions::default()
        };
        let postgres = cluster.version().full.clone();
        let server = Server::new(cluster);
        let recorder = match Recorder::new(config, options) {
            Ok(r) => Arc::new(r),
            Err(e) => {
                discard(server.into_cluster()).await;
                return Err(e.into());
            }
        };
        Ok(Rig {
            server,
            database,
            recorder,
            postgres,
        })
    }

    pub fn reach(&self) -> Reach<'_> {
        Reach {
            server: &self.server,
            recorder: &self.recorder,
            database: &self.database,
            proxy: None,
            recording: None,
        }
    }

    /// Ends the history and removes the cluster.
    pub async fn finish(self) -> Result<History, FaultError> {
        let history = self.recorder.finish();
        discard(self.server.into_cluster()).await;
        Ok(history?)
    }
}

/// A fresh database with `files`' extension created at its control file's version.
async fn created(cluster: &Cluster, files: &ExtensionFiles) -> Result<String, FaultError> {
    let db = cluster
        .fresh_database_with("nemesis", &files.name)
        .await
        .map_err(|source| FaultError::Server {
            what: "create the database",
            source,
        })?;
    let client = cluster
        .connect(&db)
        .await
        .map_err(|source| FaultError::Server {
            what: "connect",
            source,
        })?;
    let version: Option<String> = client
        .query_opt(
            "SELECT extversion FROM pg_extension WHERE extname = $1",
            &[&files.name],
        )
        .await
        .map_err(FaultError::db("reading extversion"))?
        .and_then(|r| r.try_get(0).ok());
    let expected = files.created_version();
    if version.as_deref() != Some(expected.as_str()) {
        return Err(FaultError::Version {
            name: files.name.clone(),
            found: version,
            expected,
        });
    }
    Ok(db)
}
