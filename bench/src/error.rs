//! The bench's errors.

use std::path::PathBuf;

/// Everything a bench run can fail with. None of these is a finding about pg_lease: a run
/// that fails measured nothing.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    #[error(transparent)]
    Pg(#[from] harness::pg::PgError),
    #[error("{context}: {source}")]
    Sql {
        context: String,
        #[source]
        source: tokio_postgres::Error,
    },
    #[error("lock store {context}: {source}")]
    LockStore {
        context: String,
        #[source]
        source: lockstore::StoreError,
    },
    #[error("script of {workload}, line {line}: {message}")]
    Script {
        workload: String,
        line: usize,
        message: String,
    },
    #[error("step {step} of {workload}: {message}")]
    Step {
        workload: String,
        step: String,
        message: String,
    },
    #[error("{what} at {path}: {source}")]
    Io {
        what: String,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("pgbench ({program}) failed ({status}): {output}")]
    Pgbench {
        program: String,
        status: String,
        output: String,
    },
    #[error("no pgbench found (looked in the bin directories of PostgreSQL {tried})")]
    NoPgbench { tried: String },
    #[error("pgbench log {path}, line {line}: {message}")]
    PgbenchLog {
        path: PathBuf,
        line: usize,
        message: String,
    },
    #[error("{workload}: no operation completed in the measured window")]
    NothingMeasured { workload: String },
    #[error("reading a result: {0}")]
    Json(#[from] serde_json::Error),
    #[error("drawing {path}: {message}")]
    Plot { path: PathBuf, message: String },
    #[error("starting the async runtime: {0}")]
    Runtime(std::io::Error),
    #[error("a client task failed: {0}")]
    Join(#[from] tokio::task::JoinError),
    #[error("comparison: {0}")]
    Compare(String),
    #[error("bench settings: {0}")]
    Config(String),
}

impl BenchError {
    pub(crate) fn sql(context: impl Into<String>) -> impl FnOnce(tokio_postgres::Error) -> Self {
        let context = context.into();
        move |source| BenchError::Sql { context, source }
    }

    pub(crate) fn io(
        what: impl Into<String>,
        path: impl Into<PathBuf>,
    ) -> impl FnOnce(std::io::Error) -> Self {
        let (what, path) = (what.into(), path.into());
        move |source| BenchError::Io { what, path, source }
    }
}

pub type Result<T, E = BenchError> = std::result::Result<T, E>;
