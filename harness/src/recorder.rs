//! The history recorder: runs pg_lease calls on real connections and records every one as
//! history format v2 (specs/HISTORY.md).
//!
//! - One monotonic clock: invoke and complete instants are nanoseconds since the recorder
//!   was created ([`Recorder::now`]).
//! - The server-time window of a call is read in the same round trip as the call:
//!   `statement_timestamp()` (set when the server received the statement, before the call
//!   read its clock) and `clock_timestamp()` after the call returned, in one SELECT.
//! - Outcomes go through the one fate table ([`crate::fate::fate`]): an unknown fate is
//!   [`OpResult::Unknown`], a definite failure is [`OpResult::Fail`], a harness bug is a
//!   [`RecorderError`] that stops the run and is never recorded as an answer.
//! - A [`Session`] is one process id on one connection. After a call whose outcome is
//!   unknown the process is retired: the connection is dropped and the next call runs as a
//!   new process on a new connection (the Jepsen convention the format requires).
//! - Explicit transactions: BEGIN, ops carrying the transaction id, COMMIT or ROLLBACK as a
//!   txn record. A COMMIT whose answer is lost is resolved with `pg_xact_status` on a fresh
//!   connection when the transaction id is known.
//! - Every call has a client-side timeout; a call that times out is cancelled and recorded
//!   unknown.
//! - Restarts ([`Recorder::nemesis_start_restart`]): every connection opened before a
//!   restart began belongs to the old server. A session whose connection is that old is
//!   retired before its next statement is sent (its open transaction, which the restart
//!   rolled back, is recorded `rollback`), and new connections wait until the restart has
//!   ended. So the only calls a restart leaves unknown are those in flight when it began,
//!   which the checker knows cannot take effect after it.
//! - Session settings ([`RecorderOptions::session`]): every connection starts with them,
//!   and keys and owners reach the calls through their collation when they name one
//!   (on the argument or from a source column), in the same single SELECT.
//!
//! Records stream to a JSON Lines file through [`model::history::jsonl::Writer`] on a thread of their own
//! (file writes never block the async workers), which also keeps the in-memory [`History`].

pub mod late;
mod sql;
mod store;
pub mod wal;

pub use store::RecordError;

use crate::fate;
use crate::session::{Collated, SessionSettings};
use model::fate::{BugCause, Condition, Fate};
use model::history::{WalEnded, WalWriter};
use model::{
    History, Isolation, Nanos, NemesisEffect, NemesisRecord, Op, OpId, OpRecord, OpResult,
    ProcessId, TxnEnd, TxnId, TxnRecord,
};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio_postgres::{CancelToken, Client, NoTls};

/// Why recording could not go on. None of these is an answer of the target: a run that
/// ends with one is an infrastructure failure (or, for [`RecorderError::Malformed`], a
/// target that broke the shape of its own API).
#[derive(Debug, thiserror::Error)]
pub enum RecorderError {
    /// A new session could not connect (or prepare its statements against the database).
    #[error("cannot open a session: {detail}")]
    Connect {
        detail: String,
        #[source]
        source: Option<tokio_postgres::Error>,
    },
    /// The fate table calls the error the harness's own bug (bad SQL, a misused driver).
    #[error("harness bug ({cause:?}) in {what}: {detail}")]
    HarnessBug {
        what: &'static str,
        cause: BugCause,
        detail: String,
    },
    /// The target answered something its API never returns (a row count or a column shape
    /// outside the contract, an error its contract does not have, a catalog that declares
    /// another API). It cannot be written as an answer in history format v2: a finding.
    #[error("{call} answered outside the documented shape of pg_lease's API: {detail}")]
    Malformed { call: &'static str, detail: String },
    /// A call got no answer within the call timeout while the server was executing it (on
    /// the CPU or sleeping, not waiting for another transaction's lock): the target hangs,
    /// a finding (liveness).
    #[error("{call} hangs: {detail}")]
    Hang { call: &'static str, detail: String },
    /// The history could not be written or is not a valid history (a recorder bug).
    #[error(transparent)]
    Record(#[from] RecordError),
    /// An injected lapse was refused (e.g. the role may not write `lease.leases`).
    #[error("cannot inject a lapse of {key:?}: {detail}")]
    Lapse { key: String, detail: String },
    /// A plan's probe of the server (a fact the model does not decide) got no answer.
    #[error("cannot probe {probe}: {detail}")]
    Probe { probe: &'static str, detail: String },
    /// A plan's setting of a session was refused (an unknown name, a bad value).
    #[error("cannot set {setting}: {detail}")]
    Setting { setting: String, detail: String },
}

/// How the reason of a call the recorder cancelled at its call timeout begins (its result
/// is unknown): the call did not end within the bound.
pub const CLIENT_TIMEOUT: &str = "no answer within the client timeout";

/// How the recorder runs its calls.
#[derive(Clone, Debug)]
pub struct RecorderOptions {
    /// A call, BEGIN, COMMIT or ROLLBACK without an answer after this long is cancelled
    /// and its outcome recorded unknown.
    pub call_timeout: Duration,
    /// The JSON Lines file every record is streamed to (none: in memory only).
    pub history_file: Option<PathBuf>,
    /// The header's `meta`: facts about the run.
    pub meta: BTreeMap<String, serde_json::Value>,
    /// How long a new connection keeps being tried (every [`RETRY_INTERVAL`]) before the
    /// session gives up with [`RecorderError::Connect`]: zero tries once. Runs with faults
    /// that make the server unreachable for a while (a pause, a blackhole) set it above
    /// the longest such fault.
    pub connect_patience: Duration,
    /// Every session (and the fresh connection that resolves a lost COMMIT) starts with
    /// these settings, and passes keys and owners through their collation if they name
    /// one. Their `setup` is not run here: the database must already have it.
    pub session: SessionSettings,
    /// A connection to the server that bypasses the sessions' route (a proxy that faults
    /// cut): the recorder's own looks at the server (a lost call's backend) use it. `None`:
    /// the sessions' config.
    pub direct: Option<tokio_postgres::Config>,
}

impl Default for RecorderOptions {
    fn default() -> Self {
        RecorderOptions {
            call_timeout: Duration::from_secs(10),
            history_file: None,
            meta: BTreeMap::new(),
            connect_patience: Duration::ZERO,
            session: SessionSettings::none(),
            direct: None,
        }
    }
}

/// The pause between two attempts to connect while [`RecorderOptions::connect_patience`]
/// lasts.
pub const RETRY_INTERVAL: Duration = Duration::from_millis(50);

/// Records one history against one database. Its sessions share it through an `Arc`;
/// [`Recorder::finish`] ends the history.
pub struct Recorder {
    clock: Instant,
    /// The connection config, without the session settings.
    config: tokio_postgres::Config,
    /// The settings every connection gets (a rotating one per connection).
    session: SessionSettings,
    collation: Option<Collated>,
    call_timeout: Duration,
    next_process: AtomicU32,
    next_op: AtomicU64,
    next_txn: AtomicU64,
    next_nemesis: AtomicU64,
    store: Mutex<Option<store::Store>>,
    connect_patience: Duration,
    /// Restarts begun so far: a connection opened in an earlier generation belongs to a
    /// server that has since gone away.
    generation: AtomicU64,
    /// `true` while a restart is in progress: new connections wait for its end.
    restarting: tokio::sync::watch::Sender<bool>,
    /// The record each transaction id (its low 32 bits, as decoding shows it) an answer
    /// reported belongs to: what claims a decoded commit ([`wal`]).
    claims: Mutex<BTreeMap<u32, WalWriter>>,
    /// The backend pid of every session connection, and the restart generation it was
    /// opened in.
    backends: Mutex<Vec<(i32, u64)>>,
    /// Lost calls whose backend was seen gone, and the server time by which it was.
    ended: Mutex<Vec<WalEnded>>,
    /// [`RecorderOptions::direct`], or the sessions' config.
    direct: tokio_postgres::Config,
    /// The highest transaction id claimed in each restart generation.
    highest_xid: Mutex<BTreeMap<u64, u32>>,
    /// A claimed id was at or below one claimed before a restart ([`wal`]).
    xids_reused: std::sync::atomic::AtomicBool,
}

/// A nemesis event that has started and not yet ended ([`Recorder::nemesis_start`]).
#[derive(Debug)]
#[must_use = "a started nemesis is recorded only when it ends"]
pub struct NemesisStarted {
    id: u64,
    fault: String,
    start: Nanos,
    /// Started by [`Recorder::nemesis_start_restart`]: its end reopens connections.
    restart: bool,
}

impl NemesisStarted {
    /// When the fault started, on the recorder's clock.
    pub fn start(&self) -> Nanos {
        self.start
    }
}

impl Recorder {
    /// A recorder whose sessions connect with `config` under `options.session`. Writes the
    /// header line when `options.history_file` is set.
    pub fn new(
        config: tokio_postgres::Config,
        options: RecorderOptions,
    ) -> Result<Recorder, RecorderError> {
        let store = store::Store::open(options.history_file, options.meta)?;
        let direct = options.direct.unwrap_or_else(|| config.clone());
        Ok(Recorder {
            direct,
            clock: Instant::now(),
            config,
            session: options.session.clone(),
            collation: options.session.collation,
            call_timeout: options.call_timeout,
            next_process: AtomicU32::new(1),
            next_op: AtomicU64::new(1),
            next_txn: AtomicU64::new(1),
            next_nemesis: AtomicU64::new(1),
            store: Mutex::new(Some(store)),
            connect_patience: options.connect_patience,
            generation: AtomicU64::new(0),
            restarting: tokio::sync::watch::channel(false).0,
            claims: Mutex::new(BTreeMap::new()),
            backends: Mutex::new(Vec::new()),
            ended: Mutex::new(Vec::new()),
            highest_xid: Mutex::new(BTreeMap::new()),
            xids_reused: std::sync::atomic::AtomicBool::new(false),
        })
    }

    /// Now on the recorder's monotonic clock (nanoseconds since it was created).
    pub fn now(&self) -> Nanos {
        u64::try_from(self.clock.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }

    /// The client-side timeout of every call.
    pub fn call_timeout(&self) -> Duration {
        self.call_timeout
    }

    /// A new session (it connects on its first call).
    pub fn session(self: &Arc<Self>) -> Session {
        Session {
            recorder: Arc::clone(self),
            conn: None,
            txn: None,
        }
    }

    /// A fault injector starts fault `fault` now.
    pub fn nemesis_start(&self, fault: &str) -> NemesisStarted {
        NemesisStarted {
            id: self.next_nemesis.fetch_add(1, Ordering::Relaxed),
            fault: fault.to_string(),
            start: self.now(),
            restart: false,
        }
    }

    /// A fault injector is about to stop the server (a crash, a shutdown) and start it
    /// again: every connection opened so far is stale from now on, and new ones wait until
    /// [`Recorder::nemesis_end`] of the returned event. End it with a
    /// [`NemesisEffect::Restart`], or with [`NemesisEffect::None`] if the server was never
    /// stopped.
    pub fn nemesis_start_restart(&self, fault: &str) -> NemesisStarted {
        self.restarting.send_replace(true);
        // The generation moves before the start instant is taken: a call whose invoke is
        // later than the start sees the new generation and is not sent on an old
        // connection (see `Session::fresh_conn`).
        self.generation.fetch_add(1, Ordering::SeqCst);
        NemesisStarted {
            restart: true,
            ..self.nemesis_start(fault)
        }
    }

    /// The fault ended now, with `effect` on lease state; records it.
    pub fn nemesis_end(
        &self,
        started: NemesisStarted,
        effect: NemesisEffect,
        detail: impl Into<String>,
    ) -> Result<(), RecorderError> {
        let restart = started.restart;
        let record = NemesisRecord {
            id: started.id,
            fault: started.fault,
            start: started.start,
            end: self.now(),
            effect,
            detail: detail.into(),
        };
        let recorded = self.with_store(|s| s.nemesis(record));
        if restart {
            self.restarting.send_replace(false);
        }
        recorded
    }

    /// Restarts begun so far.
    fn generation(&self) -> u64 {
        self.generation.load(Ordering::SeqCst)
    }

    /// Waits until no restart is in progress (at most `limit`); whether none is.
    async fn server_up(&self, limit: Duration) -> bool {
        let mut down = self.restarting.subscribe();
        let up = tokio::time::timeout(limit, down.wait_for(|restarting| !*restarting)).await;
        matches!(up, Ok(Ok(_)))
    }

    /// The clock-independent lapse on a connection of the recorder's own (its role must be
    /// allowed to write `lease.leases`): see [`Recorder::lapse_on`].
    pub async fn lapse(&self, key: &str) -> Result<Option<bool>, RecorderError> {
        let client = self.open().await.map_err(|e| RecorderError::Lapse {
            key: key.to_string(),
            detail: format!("cannot connect: {}", describe(&e)),
        })?;
        self.lapse_on(&client, key).await
    }

    /// A connection of the recorder's own to lapse `key` on with [`Recorder::lapse_on`]: its
    /// role, without its sessions' settings (the injection is the harness's, not a call
    /// under test: a read-only, timed-out or other session setting must not refuse it);
    /// failing to connect is the lapse's [`RecorderError::Lapse`].
    pub async fn lapse_client(&self, key: &str) -> Result<Client, RecorderError> {
        let opened = async {
            let (client, connection) = self.config.connect(NoTls).await?;
            tokio::spawn(async move {
                let _ = connection.await;
            });
            Ok::<_, tokio_postgres::Error>(client)
        };
        opened.await.map_err(|e| RecorderError::Lapse {
            key: key.to_string(),
            detail: format!("cannot connect: {}", describe(&e)),
        })
    }

    /// The clock-independent lapse: the lease on `key`, if held and live, expires at the
    /// server's current time ([`crate::client::expire`] on `admin`, a role that may write
    /// `lease.leases`). Recorded as a `lapse` nemesis event with the server window around
    /// the step; returns whether a live lease was found (`None`: the answer was lost, which
    /// the checker allows for). A definite refusal is recorded as not applied and returned
    /// as [`RecorderError::Lapse`]: the injector's own failure, never an answer.
    pub async fn lapse_on(&self, admin: &Client, key: &str) -> Result<Option<bool>, RecorderError> {
        let started = self.nemesis_start("lapse");
        let limit = self.call_timeout;
        let now = || async {
            match tokio::time::timeout(limit, crate::client::server_now(admin)).await {
                Ok(Ok(t)) => Some(model::Ts(t.timestamp_micros())),
                _ => None,
            }
        };
        let t0 = now().await;
        let expired = tokio::time::timeout(limit, crate::client::expire(admin, key)).await;
        let t1 = now().await;
        let lapse = |server, applied| NemesisEffect::Lapse {
            key: key.to_string(),
            server,
            applied,
        };
        let (effect, applied, detail) = match expired {
            Ok(Ok(applied)) => {
                let server = t0.zip(t1).and_then(|(a, b)| model::Span::new(a, b).ok());
                let detail = format!("expire {key:?} (injected lapse)");
                (lapse(server, Some(applied)), Some(applied), detail)
            }
            Ok(Err(e)) if !e.is_unknown() => {
                self.nemesis_end(started, lapse(None, Some(false)), format!("refused: {e}"))?;
                return Err(RecorderError::Lapse {
                    key: key.to_string(),
                    detail: e.to_string(),
                });
            }
            Ok(Err(e)) => (
                lapse(None, None),
                None,
                format!("expire {key:?}: answer lost ({e})"),
            ),
            Err(_) => {
                let detail = format!("expire {key:?}: no answer within {:?}", self.call_timeout);
                (lapse(None, None), None, detail)
            }
        };
        self.nemesis_end(started, effect, detail)?;
        Ok(applied)
    }

    /// Ends the history: waits for every record to be written, checks the history obeys
    /// the format's rules, and returns it.
    pub fn finish(&self) -> Result<History, RecorderError> {
        let store = self
            .store
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
            .ok_or(RecordError::Finished)?;
        Ok(store.finish()?)
    }

    fn with_store(
        &self,
        f: impl FnOnce(&store::Store) -> Result<(), RecordError>,
    ) -> Result<(), RecorderError> {
        let guard = self.store.lock().unwrap_or_else(|p| p.into_inner());
        let store = guard.as_ref().ok_or(RecordError::Finished)?;
        Ok(f(store)?)
    }

    fn record_op(&self, op: OpRecord) -> Result<(), RecorderError> {
        self.with_store(|s| s.op(op))
    }

    fn record_txn(&self, txn: TxnRecord) -> Result<(), RecorderError> {
        self.with_store(|s| s.txn(txn))
    }

    /// A plain connection to the database (its driver task spawned).
    async fn open(&self) -> Result<Client, tokio_postgres::Error> {
        let (client, connection) = self.session.apply(&self.config).connect(NoTls).await?;
        tokio::spawn(async move {
            // The connection's own error shows as the next call's error.
            let _ = connection.await;
        });
        Ok(client)
    }

    /// A plain connection, tried every [`RETRY_INTERVAL`] until the connect patience is
    /// spent; the last error.
    async fn open_patiently(&self) -> Result<Client, tokio_postgres::Error> {
        let deadline = Instant::now() + self.connect_patience;
        loop {
            match self.open().await {
                Ok(client) => return Ok(client),
                Err(e) if Instant::now() >= deadline => return Err(e),
                Err(_) => tokio::time::sleep(RETRY_INTERVAL).await,
            }
        }
    }

    /// A session's connection, tried until the connect patience is spent (waiting first
    /// for a restart in progress to end).
    async fn connect(&self) -> Result<Conn, RecorderError> {
        let deadline = Instant::now() + self.connect_patience;
        loop {
            let waited = self
                .server_up(self.connect_patience + self.call_timeout)
                .await;
            let generation = self.generation();
            let attempt = match waited {
                true => self.connect_once(generation).await,
                false => Err(RecorderError::Connect {
                    detail: "a restart of the server did not end in time".into(),
                    source: None,
                }),
            };
            match attempt {
                Ok(conn) => return Ok(conn),
                Err(RecorderError::Connect { .. }) if Instant::now() < deadline => {
                    tokio::time::sleep(RETRY_INTERVAL).await;
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// One attempt at a session's connection: a new process id, with the calls prepared.
    async fn connect_once(&self, generation: u64) -> Result<Conn, RecorderError> {
        let connect_error = |e: tokio_postgres::Error| RecorderError::Connect {
            detail: describe(&e),
            source: Some(e),
        };
        let client = self.open().await.map_err(connect_error)?;
        let prepared = tokio::time::timeout(
            self.call_timeout,
            sql::Statements::prepare(&client, self.collation.as_ref()),
        )
        .await
        .map_err(|_| RecorderError::Connect {
            detail: format!(
                "preparing the calls took longer than {:?}",
                self.call_timeout
            ),
            source: None,
        })?;
        let (statements, backend_pid) = match prepared {
            Ok(prepared) => prepared,
            Err(e) => match fate::fate(&e) {
                Fate::HarnessBug(cause) => {
                    let bug = harness_bug("preparing the calls", cause, &e);
                    return Err(self.attribute_bug("preparing the calls", bug).await);
                }
                _ => return Err(connect_error(e)),
            },
        };
        self.backends
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push((backend_pid, generation));
        Ok(Conn {
            cancel: client.cancel_token(),
            client,
            process: self.next_process.fetch_add(1, Ordering::Relaxed),
            backend_pid,
            statements,
            generation,
        })
    }

    /// A harness bug the fate table gave for a call of the API (the server refused the
    /// statement's SQL, or a column did not decode), attributed: when the build's catalog
    /// declares another API than the contract ([`crate::contract::differences`], on a fresh
    /// connection), the statement was the harness's plain call of the documented API and
    /// the build is at fault (a finding, [`RecorderError::Malformed`]); else it stays the
    /// harness's bug.
    async fn attribute_bug(&self, call: &'static str, bug: RecorderError) -> RecorderError {
        let probe = async {
            let client = self.open().await.ok()?;
            crate::contract::differences(&client).await.ok()
        };
        match tokio::time::timeout(self.call_timeout, probe).await {
            Ok(Some(differences)) if !differences.is_empty() => RecorderError::Malformed {
                call,
                detail: format!(
                    "the harness's call of the documented API failed ({bug}) because the build \
                     declares another API: {}",
                    differences.join("; ")
                ),
            },
            _ => bug,
        }
    }

    /// What backend `pid` is doing when the server is executing its statement itself (on
    /// the CPU or in a sleep, not waiting for a lock, a client or I/O): its state, wait
    /// event and running time; `None` when it is not, or the server cannot say (asked on a
    /// fresh connection, within the call timeout).
    pub async fn executing(&self, pid: i32) -> Option<String> {
        let ask = async {
            let client = self.open().await.ok()?;
            let backend = crate::liveness::still_executing(&client, pid, self.call_timeout).await?;
            Some(backend.shown)
        };
        let limit = self.call_timeout * 2 + crate::liveness::SECOND_LOOK;
        tokio::time::timeout(limit, ask).await.ok().flatten()
    }

    /// The fate of the transaction `xid` as the server tells it on a fresh connection:
    /// `Commit` or `Rollback`, or `None` when it cannot tell (no connection, the id is too
    /// old, or the transaction is still in progress after the call timeout).
    pub async fn resolve_xact(&self, xid: &str) -> Option<TxnEnd> {
        // A COMMIT lost in a crash is resolved once the server is back.
        if !self
            .server_up(self.connect_patience + self.call_timeout)
            .await
        {
            return None;
        }
        let client = self.open_patiently().await.ok()?;
        let deadline = Instant::now() + self.call_timeout;
        loop {
            let status = tokio::time::timeout(
                self.call_timeout,
                client.query_one(sql::XACT_STATUS, &[&xid]),
            )
            .await
            .ok()?
            .ok()?;
            let status: Option<String> = status.try_get(0).ok()?;
            match status.as_deref() {
                Some("committed") => return Some(TxnEnd::Commit),
                Some("aborted") => return Some(TxnEnd::Rollback),
                // The dropped session may still be ending its transaction.
                Some("in progress") if Instant::now() < deadline => {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                _ => return None,
            }
        }
    }
}

/// One connection of a session, and the process id it records as.
struct Conn {
    client: Client,
    cancel: CancelToken,
    process: ProcessId,
    backend_pid: i32,
    statements: sql::Statements,
    /// The recorder's restart generation when it connected.
    generation: u64,
}

/// The explicit transaction a session has open.
#[derive(Clone, Debug)]
struct OpenTxn {
    id: TxnId,
    /// The process that began it (its ops and its end are this process's).
    process: ProcessId,
    isolation: Isolation,
    begin: Nanos,
    /// The transaction id (`xid8` as text), once the server assigned one.
    xid: Option<String>,
}

/// How BEGIN came back.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Begun {
    /// The transaction is open with this id.
    Open(TxnId),
    /// BEGIN got no answer: the process is retired and no transaction is open (a lost
    /// BEGIN changes no lease state, so nothing is recorded).
    Lost,
}

/// How one statement came back.
enum Answered<T> {
    Yes(T),
    /// The server or driver reported an error.
    Error(tokio_postgres::Error),
    /// No answer within the call timeout: the statement was cancelled and the process
    /// retired.
    TimedOut,
}

/// How a COMMIT ended its transaction ([`Session::commit_ended`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CommitEnd {
    pub end: TxnEnd,
    /// Whether the COMMIT itself answered; else its answer was lost (or a restart came
    /// before it was sent) and `end` is what `pg_xact_status` resolved.
    pub answered: bool,
}

impl CommitEnd {
    fn answered(end: TxnEnd) -> CommitEnd {
        CommitEnd {
            end,
            answered: true,
        }
    }

    fn lost(end: TxnEnd) -> CommitEnd {
        CommitEnd {
            end,
            answered: false,
        }
    }
}

/// A client session: one process at a time on one connection. Calls run one at a time.
pub struct Session {
    recorder: Arc<Recorder>,
    conn: Option<Conn>,
    txn: Option<OpenTxn>,
}

impl Session {
    /// The process id the session records as now (`None` before it connected and after
    /// it was retired).
    pub fn process(&self) -> Option<ProcessId> {
        self.conn.as_ref().map(|c| c.process)
    }

    /// The server process (backend pid) of the session's connection.
    pub fn backend_pid(&self) -> Option<i32> {
        self.conn.as_ref().map(|c| c.backend_pid)
    }

    /// The session's connection, for statements outside the recorded calls (e.g. a
    /// setting, or a look at the transaction's own state); `None` before it connected.
    pub fn connection(&self) -> Option<&Client> {
        self.conn.as_ref().map(|c| &c.client)
    }

    /// The open transaction's id.
    pub fn txn(&self) -> Option<TxnId> {
        self.txn.as_ref().map(|t| t.id)
    }

    /// Connects if the session has no connection (its first call, or after a retirement):
    /// a new connection is a new process.
    pub async fn connect(&mut self) -> Result<(), RecorderError> {
        self.retire_if_stale()?;
        if self.conn.is_none() {
            self.conn = Some(self.recorder.connect().await?);
        }
        Ok(())
    }

    /// Whether the session's connection was opened before the latest restart began.
    fn is_stale(&self) -> bool {
        self.conn
            .as_ref()
            .is_some_and(|c| c.generation != self.recorder.generation())
    }

    /// Retires a stale connection; its open transaction was rolled back by the restart
    /// (nothing more is sent on it), and is recorded so.
    fn retire_if_stale(&mut self) -> Result<(), RecorderError> {
        if !self.is_stale() {
            return Ok(());
        }
        self.retire();
        match self.txn.take() {
            Some(txn) => self.record_end(&txn, TxnEnd::Rollback, self.recorder.now()),
            None => Ok(()),
        }
    }

    /// Connects as needed and returns the invoke instant of the statement about to be
    /// sent. The generation is read again after the instant is taken: a restart that began
    /// before the invoke always makes the statement go to a new connection, so that only
    /// statements already in flight when a restart begins are lost in it.
    async fn fresh_conn(&mut self) -> Result<Nanos, RecorderError> {
        loop {
            self.connect().await?;
            let invoke = self.recorder.now();
            if !self.is_stale() {
                return Ok(invoke);
            }
        }
    }

    /// Runs `op`, records it and returns the record.
    pub async fn call(&mut self, op: &Op<String, String>) -> Result<OpRecord, RecorderError> {
        let invoke = self.fresh_conn().await?;
        let Some(conn) = self.conn.as_ref() else {
            return Err(not_connected("a call"));
        };
        let process = conn.process;
        let backend_pid = conn.backend_pid;
        let id: OpId = self.recorder.next_op.fetch_add(1, Ordering::Relaxed);
        let sent = Instant::now();
        let answered = tokio::time::timeout(self.recorder.call_timeout, sql::call(conn, op)).await;
        let complete = self.recorder.now();
        let call = sql::call_name(op);
        let (server, result, xid) = match answered {
            Ok(Ok(answer)) => (answer.server, OpResult::Ok(answer.outcome), answer.xid),
            Ok(Err(sql::CallError::Malformed { call, detail })) => {
                return Err(RecorderError::Malformed { call, detail })
            }
            Ok(Err(sql::CallError::Db(e))) => match failed_result(&e, call) {
                Ok(result) => (None, result, None),
                Err(bug @ RecorderError::HarnessBug { .. }) => {
                    return Err(self.recorder.attribute_bug(call, bug).await)
                }
                Err(other) => return Err(other),
            },
            Err(_) => {
                let backend = conn.backend_pid;
                let hang = if within_its_wait(op, sent.elapsed()) {
                    None
                } else {
                    self.recorder.executing(backend).await
                };
                if let Some(detail) = hang {
                    self.cancel_and_retire().await;
                    return Err(RecorderError::Hang {
                        call,
                        detail: format!(
                            "no answer within the call timeout of {:?} while the server was \
                             executing it ({detail})",
                            self.recorder.call_timeout
                        ),
                    });
                }
                self.cancel_and_retire().await;
                (None, self.timed_out_result(), None)
            }
        };
        let record = OpRecord {
            id,
            process,
            txn: self.txn.as_ref().map(|t| t.id),
            call: op.clone(),
            invoke,
            complete,
            server,
            result,
        };
        if record.txn.is_none() && wal::lost_with_connection(&record.result) {
            self.recorder.watch_end(id, backend_pid).await;
        }
        self.recorder.record_op(record.clone())?;
        self.after_call(&record, xid).await?;
        Ok(record)
    }

    /// Starts an explicit transaction at `isolation`.
    pub async fn begin(&mut self, isolation: Isolation) -> Result<Begun, RecorderError> {
        if self.txn.is_some() {
            return Err(misuse("BEGIN", "a transaction is already open"));
        }
        let begin = self.fresh_conn().await?;
        let process = self.process().ok_or_else(|| not_connected("BEGIN"))?;
        let statement = format!("BEGIN ISOLATION LEVEL {}", isolation.sql().to_uppercase());
        match self.batch(&statement).await {
            Answered::Yes(()) => {
                let id = self.recorder.next_txn.fetch_add(1, Ordering::Relaxed);
                self.txn = Some(OpenTxn {
                    id,
                    process,
                    isolation,
                    begin,
                    xid: None,
                });
                Ok(Begun::Open(id))
            }
            Answered::Error(e) => match fate::fate(&e) {
                Fate::Unknown(_) => {
                    self.retire();
                    Ok(Begun::Lost)
                }
                // BEGIN has no lease semantics: a refusal is the harness's doing.
                Fate::HarnessBug(cause) => Err(harness_bug("BEGIN", cause, &e)),
                Fate::Failed(_) | Fate::Ok | Fate::OutsideContract => {
                    Err(harness_bug("BEGIN", BugCause::BadSql, &e))
                }
            },
            Answered::TimedOut => Ok(Begun::Lost),
        }
    }

    /// Commits the open transaction; records and returns how it ended. A COMMIT whose
    /// answer is lost is resolved through `pg_xact_status` when the transaction id is
    /// known, and ends `unknown` otherwise.
    pub async fn commit(&mut self) -> Result<TxnEnd, RecorderError> {
        self.commit_ended().await.map(|c| c.end)
    }

    /// Commits as [`Session::commit`] does, and says whether the COMMIT itself answered.
    pub async fn commit_ended(&mut self) -> Result<CommitEnd, RecorderError> {
        let txn = self.take_txn("COMMIT")?;
        let end_invoke = self.recorder.now();
        if self.is_stale() {
            // A restart began before COMMIT would be sent: it rolled the transaction back.
            self.retire();
            self.record_end(&txn, TxnEnd::Rollback, end_invoke)?;
            return Ok(CommitEnd::lost(TxnEnd::Rollback));
        }
        let ended = match self.batch("COMMIT").await {
            Answered::Yes(()) => CommitEnd::answered(TxnEnd::Commit),
            Answered::Error(e) => match fate::fate(&e) {
                // e.g. a serialization failure at commit: the transaction rolled back.
                Fate::Failed(_) => CommitEnd::answered(TxnEnd::Rollback),
                Fate::Unknown(_) | Fate::Ok => {
                    self.retire();
                    CommitEnd::lost(self.resolve(&txn).await)
                }
                Fate::HarnessBug(cause) => return Err(harness_bug("COMMIT", cause, &e)),
                // The target's code runs at COMMIT too (a deferred trigger on its table).
                Fate::OutsideContract => {
                    self.record_end(&txn, TxnEnd::Rollback, end_invoke)?;
                    return Err(RecorderError::Malformed {
                        call: "COMMIT",
                        detail: e.as_db_error().map(outside_contract).unwrap_or_default(),
                    });
                }
            },
            Answered::TimedOut => CommitEnd::lost(self.resolve(&txn).await),
        };
        self.record_end(&txn, ended.end, end_invoke)?;
        Ok(ended)
    }

    /// Rolls the open transaction back and records it.
    pub async fn rollback(&mut self) -> Result<TxnEnd, RecorderError> {
        let txn = self.take_txn("ROLLBACK")?;
        let end_invoke = self.recorder.now();
        if self.is_stale() {
            self.retire();
        } else {
            self.abort_on_server().await?;
        }
        self.record_end(&txn, TxnEnd::Rollback, end_invoke)?;
        Ok(TxnEnd::Rollback)
    }

    fn take_txn(&mut self, what: &'static str) -> Result<OpenTxn, RecorderError> {
        self.txn
            .take()
            .ok_or_else(|| misuse(what, "no transaction is open"))
    }

    /// Sends ROLLBACK. Whatever the answer, the transaction can no longer commit (no
    /// COMMIT was sent); a lost answer retires the process.
    async fn abort_on_server(&mut self) -> Result<(), RecorderError> {
        match self.batch("ROLLBACK").await {
            Answered::Yes(()) | Answered::TimedOut => Ok(()),
            Answered::Error(e) => match fate::fate(&e) {
                Fate::HarnessBug(cause) => Err(harness_bug("ROLLBACK", cause, &e)),
                _ => {
                    self.retire();
                    Ok(())
                }
            },
        }
    }

    /// What became of a transaction whose COMMIT got no answer.
    async fn resolve(&self, txn: &OpenTxn) -> TxnEnd {
        match &txn.xid {
            Some(xid) => self
                .recorder
                .resolve_xact(xid)
                .await
                .unwrap_or(TxnEnd::Unknown),
            // No id was assigned, so it wrote nothing; still, nobody saw how it ended.
            None => TxnEnd::Unknown,
        }
    }

    fn record_end(
        &self,
        txn: &OpenTxn,
        end: TxnEnd,
        end_invoke: Nanos,
    ) -> Result<(), RecorderError> {
        if let (TxnEnd::Commit | TxnEnd::Unknown, Some(xid)) = (end, &txn.xid) {
            self.recorder.claim(xid, WalWriter::Txn(txn.id));
        }
        self.recorder.record_txn(TxnRecord {
            id: txn.id,
            process: txn.process,
            isolation: txn.isolation,
            begin: txn.begin,
            end,
            end_invoke,
            end_complete: self.recorder.now(),
        })
    }

    /// Bookkeeping after a recorded call: the transaction id learnt; a transaction ended by
    /// an error (which aborts it) or by a lost answer (no COMMIT will be sent); the process
    /// retired after an unknown outcome.
    async fn after_call(
        &mut self,
        record: &OpRecord,
        xid: Option<String>,
    ) -> Result<(), RecorderError> {
        match (self.txn.as_mut(), xid) {
            (Some(txn), Some(xid)) => txn.xid = Some(xid),
            (None, Some(xid)) => self.recorder.claim(&xid, WalWriter::Op(record.id)),
            _ => {}
        }
        let unknown = record.result.is_unknown();
        let failed = !unknown && matches!(record.result, OpResult::Fail { .. });
        if unknown || failed {
            if let Some(txn) = self.txn.take() {
                if failed {
                    self.abort_on_server().await?;
                }
                // The server aborts the transaction (and drops its row locks) at the error,
                // during the call, not when ROLLBACK is sent: its end starts with the call.
                self.record_end(&txn, TxnEnd::Rollback, record.invoke)?;
            }
        }
        if unknown {
            self.retire();
        }
        Ok(())
    }

    fn timed_out_result(&self) -> OpResult {
        // The fate table's verdict on a client timeout is "unknown"; the reason says why.
        debug_assert!(model::fate::of(Condition::ClientTimeout).is_unknown());
        unknown(format!(
            "{CLIENT_TIMEOUT} of {:?} (cancelled)",
            self.recorder.call_timeout
        ))
    }

    /// Runs a statement without results (BEGIN, COMMIT, ROLLBACK) with the call timeout.
    async fn batch(&mut self, statement: &str) -> Answered<()> {
        let Some(conn) = self.conn.as_ref() else {
            return Answered::TimedOut;
        };
        let run = conn.client.batch_execute(statement);
        match tokio::time::timeout(self.recorder.call_timeout, run).await {
            Ok(Ok(())) => Answered::Yes(()),
            Ok(Err(e)) => Answered::Error(e),
            Err(_) => {
                self.cancel_and_retire().await;
                Answered::TimedOut
            }
        }
    }

    /// Cancels the statement in flight (best effort, bounded) and drops the connection.
    async fn cancel_and_retire(&mut self) {
        if let Some(conn) = self.conn.take() {
            let cancel = conn.cancel.cancel_query(NoTls);
            // The cancel opens a connection of its own; a server that does not answer it
            // must not hang the run: dropping the connection ends the session anyway.
            let _ = tokio::time::timeout(self.recorder.call_timeout, cancel).await;
        }
    }

    /// Drops the connection: the next call runs as a new process.
    fn retire(&mut self) {
        self.conn = None;
    }
}

/// The result of a call `what` that failed with `e`, by the fate table: a definite failure
/// or an unknown outcome is recorded; an error the target raised outside its contract is a
/// finding ([`RecorderError::Malformed`]); the harness's bug stops the run.
fn failed_result(e: &tokio_postgres::Error, what: &'static str) -> Result<OpResult, RecorderError> {
    match (fate::fate(e), e.as_db_error()) {
        (Fate::Failed(_), Some(db)) => Ok(OpResult::Fail {
            sqlstate: db.code().code().to_string(),
            message: db.message().to_string(),
        }),
        (Fate::OutsideContract, Some(db)) => Err(RecorderError::Malformed {
            call: what,
            detail: outside_contract(db),
        }),
        (Fate::HarnessBug(cause), _) => Err(harness_bug(what, cause, e)),
        // Unknown, or (never from the table) a failure without a SQLSTATE or a success
        // class as an error: no answer either way.
        _ => Ok(unknown(describe(e))),
    }
}

/// An error the target raised outside its contract, for people: code, message, detail and
/// where in the target.
pub fn outside_contract(db: &tokio_postgres::error::DbError) -> String {
    let detail = db
        .detail()
        .map(|d| format!(" (DETAIL: {d})"))
        .unwrap_or_default();
    format!(
        "it raised SQLSTATE {} inside the target's code ({}): {}{detail}; a call answered an \
         error outside the contract (specs/SEMANTICS.md section 7, invariant 9)",
        db.code().code(),
        fate::target_frames(db),
        db.message()
    )
}

fn unknown(reason: String) -> OpResult {
    OpResult::Unknown { reason }
}

fn misuse(what: &'static str, detail: &str) -> RecorderError {
    RecorderError::HarnessBug {
        what,
        cause: BugCause::DriverMisuse,
        detail: detail.to_string(),
    }
}

fn not_connected(what: &'static str) -> RecorderError {
    misuse(what, "the session has no connection")
}

fn harness_bug(what: &'static str, cause: BugCause, e: &tokio_postgres::Error) -> RecorderError {
    RecorderError::HarnessBug {
        what,
        cause,
        detail: describe(e),
    }
}

/// A driver error for people: the server's code and message, or the driver's kind and its
/// cause.
fn describe(e: &tokio_postgres::Error) -> String {
    if let Some(db) = e.as_db_error() {
        return format!("{}: {}", db.code().code(), db.message());
    }
    match std::error::Error::source(e) {
        Some(cause) => format!("{e}: {cause}"),
        None => e.to_string(),
    }
}

/// Whether `op` is a blocking acquire still inside its own wait after `elapsed`: a server
/// executing it then (sleeping between its probes) is doing what it was asked, so a call
/// timeout shorter than the wait ends in an unknown outcome, not in a finding that it hangs.
fn within_its_wait(op: &Op<String, String>, elapsed: Duration) -> bool {
    let Op::Acquire { wait: Some(w), .. } = op else {
        return false;
    };
    // The longest the wait can last: a month of 31 days (the waits drawn are seconds).
    const DAY_MICROS: i64 = 86_400_000_000;
    let longest = i64::from(w.months.max(0))
        .saturating_mul(31 * DAY_MICROS)
        .saturating_add(i64::from(w.days.max(0)).saturating_mul(DAY_MICROS))
        .saturating_add(w.micros.max(0));
    elapsed < Duration::from_micros(longest.max(0) as u64)
}
