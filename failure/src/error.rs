//! Why a fault could not be injected or a check could not run: never a finding about the
//! target, never a pass.

use harness::campaign::InfraError;
use harness::pg::PgError;
use harness::recorder::RecorderError;

/// A failure of the machinery around the target (the fault, the server's lifecycle, the
/// recorder, a connection of the injector's own).
#[derive(Debug, thiserror::Error)]
pub enum FaultError {
    /// The fault could not be made to happen (nothing to hit, a race lost, a setting the
    /// server refused): the check that needed it proves nothing.
    #[error("fault {fault} could not be injected: {why}")]
    NotInjected { fault: &'static str, why: String },
    /// Stopping, killing or starting the server failed.
    #[error("server lifecycle ({what}): {source}")]
    Server {
        what: &'static str,
        #[source]
        source: PgError,
    },
    /// A connection or statement of the injector's own failed.
    #[error("{what}: {}", describe(source))]
    Db {
        what: &'static str,
        #[source]
        source: tokio_postgres::Error,
    },
    /// The build created is not this checkout's version (another checkout rewrote its
    /// files, or the build is wrong).
    #[error("extension {name} is at version {found:?}, expected {expected}")]
    Version {
        name: String,
        found: Option<String>,
        expected: String,
    },
    /// The proxy could not start.
    #[error("the fault proxy: {0}")]
    Proxy(#[source] std::io::Error),
    #[error(transparent)]
    Recorder(#[from] RecorderError),
    #[error(transparent)]
    Campaign(#[from] InfraError),
    /// Something that must end did not, within its bound.
    #[error("{what} did not end within {seconds} s")]
    Hang { what: &'static str, seconds: u64 },
    /// A campaign answered no call before its first fault or after its last: it exercised
    /// nothing around its faults.
    #[error("the campaign made no progress around its faults: {why}")]
    NoProgress { why: String },
    /// A task of the check panicked or was cancelled.
    #[error("a task failed: {0}")]
    Task(String),
}

/// A driver error with the server's code and message, or the driver's cause.
fn describe(e: &tokio_postgres::Error) -> String {
    if let Some(db) = e.as_db_error() {
        return format!("{}: {}", db.code().code(), db.message());
    }
    match std::error::Error::source(e) {
        Some(cause) => format!("{e}: {cause}"),
        None => e.to_string(),
    }
}

impl FaultError {
    pub(crate) fn db(what: &'static str) -> impl FnOnce(tokio_postgres::Error) -> FaultError {
        move |source| FaultError::Db { what, source }
    }

    pub(crate) fn not_injected(fault: &'static str, why: impl Into<String>) -> FaultError {
        FaultError::NotInjected {
            fault,
            why: why.into(),
        }
    }
}
