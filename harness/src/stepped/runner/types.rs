//! The runner's vocabulary: how it paces steps ([`StepOptions`]), how a step went
//! ([`StepLog`], [`Waiting`]) and why a plan could not run to its end ([`RunError`]).

use super::monitor::MonitorError;
use crate::recorder::RecorderError;
use model::OpId;
use std::time::Duration;

/// How the runner paces and bounds steps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StepOptions {
    /// How long to wait for a step's answer before asking whether it is waiting.
    pub answer_wait: Duration,
    /// Between two questions to the monitor while a step is neither answered nor waiting.
    pub poll: Duration,
    /// A step neither answered nor waiting for this long is cancelled: a hang.
    pub step_timeout: Duration,
    /// A sleeping waiter blocking a call counts as a stall only when seen this far apart.
    pub confirm: Duration,
}

impl Default for StepOptions {
    /// Answers on a local server take 1-3 ms; 20 ms leaves room for a loaded machine
    /// before the monitor is asked. A step that runs 5 s without waiting is hung (no call
    /// of a plan computes that long). 20 ms between sightings: a waiter sleeps up to 50 ms.
    fn default() -> Self {
        StepOptions {
            answer_wait: Duration::from_millis(20),
            poll: Duration::from_millis(10),
            step_timeout: Duration::from_secs(5),
            confirm: Duration::from_millis(20),
        }
    }
}

/// How the monitor found a step that had not answered.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Waiting {
    /// Asleep in `pg_sleep` (a blocking acquire between probes).
    Sleeping,
    /// Blocked by the sessions of these processes.
    BlockedBy(Vec<u32>),
    /// A COMMIT waiting for a synchronous standby (`SyncRep`).
    Standby,
}

/// How one step went.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StepLog {
    pub step: usize,
    pub process: u32,
    /// The step as a person reads it (with the call's arguments once issued).
    pub what: String,
    /// The SQL sent (none for a step never issued).
    pub sql: Option<String>,
    /// Its place in the order of issue (none: never issued).
    pub issued: Option<usize>,
    /// Issued after later steps: its process waited for a session only a later step frees.
    pub deferred: bool,
    /// How the monitor first found it before it answered (none: answered at once).
    pub waited: Option<Waiting>,
    /// Its answer, briefly.
    pub answer: Option<String>,
    /// The op it recorded.
    pub op: Option<OpId>,
}

/// Why a plan could not be run to its end. Never a finding about the target (except a
/// recorder's [`RecorderError::Malformed`], which the caller reports as such).
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error(transparent)]
    Recorder(RecorderError),
    #[error(transparent)]
    Monitor(#[from] MonitorError),
    #[error(
        "hang: step {step} (process {process}) was neither answered nor waiting for another \
         session of the plan for {after:.1?}, and was cancelled; its SQL: {sql}"
    )]
    Hang {
        step: usize,
        process: u32,
        sql: String,
        after: Duration,
        /// What its backend was doing, when the server was executing the step itself (not
        /// waiting for a lock, a client or I/O): then the target hangs, a finding.
        executing: Option<String>,
    },
    #[error("steps {steps:?} wait for sessions that no step of the plan is left to free")]
    Stuck { steps: Vec<usize> },
    /// A signal step found no backend to signal (its process's connection had already
    /// ended), or a terminated one outlived 5 s: the fault was not injected.
    #[error(
        "step {step} ({signal} p{process}): the server found no backend {pid} to signal, or \
         it did not end within 5 s"
    )]
    NotSignalled {
        step: usize,
        process: u32,
        signal: &'static str,
        pid: i32,
    },
    /// A restart step in a plan run without the caller's control of the server.
    #[error(
        "step {step} restarts the server, which only a run on a server it manages can do (the \
         fault checks, the conformance checks that restart, `leasecheck check --plan` on its \
         throwaway cluster); this run has no control of the server"
    )]
    NoServerControl { step: usize },
    /// The server could not be restarted, or reached again after it.
    #[error("step {step} (restart): {why}")]
    Restart { step: usize, why: String },
    /// A statement of the plan's `setup` or `teardown` failed.
    #[error("the plan's {which} statement `{statement}` failed: {why}")]
    ServerSql {
        which: &'static str,
        statement: String,
        why: String,
    },
    #[error("the session task of process {process} stopped")]
    SessionGone { process: u32 },
    #[error("every session task stopped before the plan's steps were answered")]
    SessionsGone,
}
