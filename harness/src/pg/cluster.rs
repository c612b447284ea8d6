//! Throwaway PostgreSQL clusters.

use super::external::{External, Removed};
use super::procs::{self, scratch_base, scratch_path, RunAs, Watchdog};
use super::{PgError, PgInstall, PgVersion, Result};
use crate::extension::ExtensionFiles;
use std::collections::HashMap;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

/// The superuser every cluster is initialised with.
pub const SUPERUSER: &str = "postgres";
/// Clusters listen on loopback TCP only (no Unix socket).
pub const HOST: &str = "127.0.0.1";

static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// How to start a cluster.
#[derive(Debug, Clone)]
pub struct ClusterOptions {
    /// Extra server settings (`-c name=value`), after the defaults.
    pub settings: Vec<(String, String)>,
    /// Extensions to install into the install's extension directory.
    pub extensions: Vec<ExtensionFiles>,
    /// How long startup (including crash recovery) may take.
    pub start_timeout: Duration,
}

impl Default for ClusterOptions {
    fn default() -> Self {
        ClusterOptions {
            settings: Vec::new(),
            extensions: vec![ExtensionFiles::pg_lease()],
            start_timeout: Duration::from_secs(60),
        }
    }
}

/// A PostgreSQL server the harness runs checks on: either a throwaway cluster it manages
/// (in its own temporary directory, listening on 127.0.0.1 on a free port with
/// `fsync=on`; dropping it stops the postmaster and removes the directory, and so do
/// process exit and, through a watchdog process, our own death), or an existing server
/// reached through a connection string ([`Cluster::external`]), which it can only connect
/// to: what needs the server's process (stop, restart, crash, its files) is
/// [`PgError::NotManaged`] there.
pub struct Cluster {
    server: Server,
    databases: AtomicU64,
}

enum Server {
    Managed(Managed),
    External(External),
}

/// The process and files of a cluster the harness started.
struct Managed {
    id: u64,
    install: PgInstall,
    root: PathBuf,
    data: PathBuf,
    log: PathBuf,
    port: u16,
    run_as: Option<RunAs>,
    settings: Vec<(String, String)>,
    start_timeout: Duration,
    postmaster: Option<Child>,
    watchdog: Watchdog,
}

impl std::fmt::Debug for Cluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.server {
            Server::Managed(m) => f
                .debug_struct("Cluster")
                .field("version", &m.install.version.full)
                .field("port", &m.port)
                .field("data", &m.data)
                .field("running", &m.postmaster.is_some())
                .finish(),
            Server::External(e) => f
                .debug_struct("Cluster")
                .field("version", &e.version.full)
                .field("server", &e.address())
                .finish(),
        }
    }
}

impl Cluster {
    /// initdb + start with the default options (pg_lease installed).
    pub fn start(install: &PgInstall) -> Result<Cluster> {
        Cluster::start_with(install, ClusterOptions::default())
    }

    pub fn start_with(install: &PgInstall, options: ClusterOptions) -> Result<Cluster> {
        let run_as = procs::run_as()?;
        let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
        let root = make_root(id)?;
        procs::register(id, &root);
        let watchdog = Watchdog::spawn(&root);
        let data = root.join("data");
        let log = root.join("postgres.log");
        // Built before the files are installed, so that an error removes the directory.
        let mut managed = Managed {
            id,
            install: install.clone(),
            root,
            data,
            log,
            port: 0,
            run_as,
            settings: options.settings,
            start_timeout: options.start_timeout,
            postmaster: None,
            watchdog,
        };
        for ext in &options.extensions {
            install.install_extension(ext)?;
        }
        managed.initdb()?;
        managed.start_on_free_port()?;
        Ok(Cluster {
            server: Server::Managed(managed),
            databases: AtomicU64::new(0),
        })
    }

    /// An existing server reached through `config` (its database is where the harness
    /// connects to create and drop databases; `postgres` when it names none). Checks that
    /// the server answers and that the role may create databases.
    pub async fn external(config: tokio_postgres::Config) -> Result<Cluster> {
        let external = External::connect(config).await?;
        Ok(Cluster {
            server: Server::External(external),
            databases: AtomicU64::new(0),
        })
    }

    /// Whether the harness started this server (and so can stop, restart or crash it).
    pub fn is_managed(&self) -> bool {
        matches!(self.server, Server::Managed(_))
    }

    fn managed(&self, what: &'static str) -> Result<&Managed> {
        match &self.server {
            Server::Managed(m) => Ok(m),
            Server::External(e) => Err(e.not_managed(what)),
        }
    }

    fn managed_mut(&mut self, what: &'static str) -> Result<&mut Managed> {
        match &mut self.server {
            Server::Managed(m) => Ok(m),
            Server::External(e) => Err(e.not_managed(what)),
        }
    }

    /// The last lines of the server log (an external server's log is not ours to read).
    pub fn log_tail(&self) -> String {
        match &self.server {
            Server::Managed(m) => m.log_since(0),
            Server::External(_) => {
                "(no server log: the server is not managed by leasecheck)".into()
            }
        }
    }

    /// Clean "fast" shutdown (SIGINT): sessions are terminated, a shutdown
    /// checkpoint is written.
    pub fn stop_fast(&mut self) -> Result<()> {
        self.managed_mut("stop the server")?
            .stop_with(libc::SIGINT, FAST_STOP_TIMEOUT)
    }

    /// "Immediate" shutdown (SIGQUIT): no checkpoint; the next start runs crash recovery.
    pub fn stop_immediate(&mut self) -> Result<()> {
        self.managed_mut("stop the server")?
            .stop_with(libc::SIGQUIT, IMMEDIATE_STOP_TIMEOUT)
    }

    /// Simulates a server crash: SIGKILL of the postmaster and every backend
    /// at once. Committed transactions survive (WAL); the next start recovers.
    pub fn crash(&mut self) -> Result<()> {
        let managed = self.managed_mut("crash the server")?;
        if managed.postmaster.is_none() {
            return Err(PgError::NotRunning);
        }
        managed.kill_postmaster();
        Ok(())
    }

    /// Starts the stopped or crashed cluster again on the same port.
    pub fn resume(&mut self) -> Result<()> {
        self.managed_mut("start the server")?.spawn_and_wait()
    }

    /// `stop_fast` then `resume`.
    pub fn restart(&mut self) -> Result<()> {
        self.stop_fast()?;
        self.resume()
    }

    /// [`Cluster::stop_fast`] for async code (waits without blocking the runtime's thread).
    pub async fn stop_fast_async(&mut self) -> Result<()> {
        self.managed_mut("stop the server")?
            .stop_with_async(libc::SIGINT, FAST_STOP_TIMEOUT)
            .await
    }

    /// [`Cluster::stop_immediate`] for async code.
    pub async fn stop_immediate_async(&mut self) -> Result<()> {
        self.managed_mut("stop the server")?
            .stop_with_async(libc::SIGQUIT, IMMEDIATE_STOP_TIMEOUT)
            .await
    }

    /// [`Cluster::crash`] for async code.
    pub async fn crash_async(&mut self) -> Result<()> {
        self.managed_mut("crash the server")?.crash_async().await
    }

    /// [`Cluster::resume`] for async code.
    pub async fn resume_async(&mut self) -> Result<()> {
        self.managed_mut("start the server")?
            .spawn_and_wait_async()
            .await
    }

    /// [`Cluster::restart`] for async code.
    pub async fn restart_async(&mut self) -> Result<()> {
        self.stop_fast_async().await?;
        self.resume_async().await
    }

    /// Whether the server is up (an external server is taken to be).
    pub fn is_running(&self) -> bool {
        match &self.server {
            Server::Managed(m) => m.postmaster.is_some(),
            Server::External(_) => true,
        }
    }

    /// The postmaster's pid, while running (none for an external server).
    pub fn postmaster_pid(&self) -> Option<u32> {
        match &self.server {
            Server::Managed(m) => m.postmaster.as_ref().map(|c| c.id()),
            Server::External(_) => None,
        }
    }

    /// SIGSTOPs (`true`) or SIGCONTs (`false`) the postmaster and all its
    /// children: the server hangs without dying, as under a stalled host.
    pub fn pause(&self, paused: bool) -> Result<()> {
        self.managed("pause the server")?;
        let pid = self.postmaster_pid().ok_or(PgError::NotRunning)? as i32;
        procs::signal_tree(pid, if paused { libc::SIGSTOP } else { libc::SIGCONT });
        Ok(())
    }

    pub fn port(&self) -> u16 {
        match &self.server {
            Server::Managed(m) => m.port,
            Server::External(e) => e.port,
        }
    }

    pub fn host(&self) -> &str {
        match &self.server {
            Server::Managed(_) => HOST,
            Server::External(e) => &e.host,
        }
    }

    /// The role the harness connects as: the cluster's superuser, or the external
    /// server's connection role.
    pub fn superuser(&self) -> &str {
        match &self.server {
            Server::Managed(_) => SUPERUSER,
            Server::External(e) => &e.user,
        }
    }

    /// The server's version.
    pub fn version(&self) -> &PgVersion {
        match &self.server {
            Server::Managed(m) => &m.install.version,
            Server::External(e) => &e.version,
        }
    }

    /// The install the cluster runs from (an external server's is not known here).
    pub fn install(&self) -> Result<&PgInstall> {
        Ok(&self.managed("use the server's install")?.install)
    }

    pub fn data_dir(&self) -> Result<&Path> {
        Ok(&self.managed("read the data directory")?.data)
    }

    pub fn log_path(&self) -> Result<&Path> {
        Ok(&self.managed("read the server log")?.log)
    }

    /// Makes `files` available to `CREATE EXTENSION`: written into a managed cluster's
    /// install; on an external server they must already be there (installed by its
    /// owner), which is checked (the control file's `default_version` is available).
    pub async fn provide_extension(&self, files: &ExtensionFiles) -> Result<()> {
        match &self.server {
            Server::Managed(m) => m.install.install_extension(files),
            Server::External(_) => {
                let version = crate::extension::default_version(&files.control).unwrap_or_default();
                let admin = self.connect_admin().await?;
                let available: Vec<String> = admin
                    .query(
                        "SELECT version FROM pg_catalog.pg_available_extension_versions \
                         WHERE name = $1 ORDER BY version",
                        &[&files.name],
                    )
                    .await?
                    .iter()
                    .map(|r| r.get(0))
                    .collect();
                if available.contains(&version) {
                    Ok(())
                } else {
                    Err(PgError::ExtensionNotAvailable {
                        name: files.name.clone(),
                        version,
                        available,
                    })
                }
            }
        }
    }

    /// A libpq-style connection string for `db` as [`Cluster::superuser`] (without a
    /// password).
    pub fn conn_string(&self, db: &str) -> String {
        format!(
            "host={} port={} user={} dbname='{}'",
            self.host(),
            self.port(),
            self.superuser(),
            db.replace('\\', "\\\\").replace('\'', "\\'")
        )
    }

    /// A tokio-postgres config for `db` as [`Cluster::superuser`].
    pub fn config(&self, db: &str) -> tokio_postgres::Config {
        match &self.server {
            Server::Managed(m) => {
                let mut config = tokio_postgres::Config::new();
                config
                    .host(HOST)
                    .port(m.port)
                    .user(SUPERUSER)
                    .dbname(db)
                    .application_name("leasecheck")
                    .connect_timeout(Duration::from_secs(10));
                config
            }
            Server::External(e) => e.config(db),
        }
    }

    /// Connects to `db` as [`Cluster::superuser`]; the connection runs on a spawned tokio task.
    pub async fn connect(&self, db: &str) -> Result<tokio_postgres::Client> {
        let (client, connection) = self.config(db).connect(tokio_postgres::NoTls).await?;
        tokio::spawn(async move {
            let _ = connection.await;
        });
        Ok(client)
    }

    /// A connection to the database databases are created from.
    async fn connect_admin(&self) -> Result<tokio_postgres::Client> {
        match &self.server {
            Server::Managed(_) => self.connect("postgres").await,
            Server::External(e) => self.connect(&e.admin_db).await,
        }
    }

    /// Creates an empty database (on an external server, remembered for
    /// [`Cluster::remove_created`]).
    pub async fn create_database(&self, name: &str) -> Result<()> {
        let admin = self.connect_admin().await?;
        admin
            .batch_execute(&format!("CREATE DATABASE {}", quote_ident(name)))
            .await?;
        if let Server::External(e) = &self.server {
            e.created
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push(name.to_string());
        }
        Ok(())
    }
    /// Creates a new database named `<prefix>_<n>` with pg_lease installed,
    /// and returns its name. One per test keeps tests independent on a shared cluster.
    pub async fn fresh_database(&self, prefix: &str) -> Result<String> {
        self.fresh_database_with(prefix, crate::extension::NAME)
            .await
    }

    /// Like [`Cluster::fresh_database`], with the named extension (e.g. a mutant) installed;
    /// its routines are learnt as the target's ([`crate::fate::learn_target`]).
    pub async fn fresh_database_with(&self, prefix: &str, extension: &str) -> Result<String> {
        let name = self.fresh_empty_database(prefix).await?;
        let client = self.connect(&name).await?;
        client
            .batch_execute(&format!("CREATE EXTENSION {}", quote_ident(extension)))
            .await?;
        // Errors raised in its routines are the target's (crate::fate).
        crate::fate::learn_target(&client, extension).await?;
        Ok(name)
    }

    /// Creates a new empty database named `<prefix>_<n>` (lower case, at most 40
    /// characters of the prefix, unique in this cluster) and returns its name.
    /// On an external server the name starts with `lc<process id>_`, apart from the
    /// server's own databases and other runs'.
    pub async fn fresh_empty_database(&self, prefix: &str) -> Result<String> {
        let n = self.databases.fetch_add(1, Ordering::Relaxed);
        let mut name = match &self.server {
            Server::Managed(_) => String::new(),
            Server::External(_) => format!("lc{}_", std::process::id()),
        };
        name.extend(
            prefix
                .chars()
                .map(|c| {
                    if c.is_ascii_alphanumeric() {
                        c.to_ascii_lowercase()
                    } else {
                        '_'
                    }
                })
                .take(40),
        );
        name.push_str(&format!("_{n}"));
        self.create_database(&name).await?;
        Ok(name)
    }

    /// Drops what the harness created on an external server: its databases, and the
    /// roles that did not exist when it connected and are named after one of them (the
    /// checks name their roles `<database>_...`). Nothing to do on a managed cluster,
    /// which is removed whole.
    pub async fn remove_created(&self) -> Result<Removed> {
        let Server::External(e) = &self.server else {
            return Ok(Removed::default());
        };
        let databases: Vec<String> =
            std::mem::take(&mut *e.created.lock().unwrap_or_else(|p| p.into_inner()));
        let admin = self.connect_admin().await?;
        let mut removed = Removed::default();
        for db in &databases {
            // FORCE (PostgreSQL 13+) ends sessions a hung check left behind.
            admin
                .batch_execute(&format!(
                    "DROP DATABASE IF EXISTS {} WITH (FORCE)",
                    quote_ident(db)
                ))
                .await?;
            removed.databases.push(db.clone());
        }
        let roles: Vec<String> = admin
            .query("SELECT rolname::text FROM pg_catalog.pg_roles", &[])
            .await?
            .iter()
            .map(|r| r.get(0))
            .collect();
        for role in roles {
            let ours = databases
                .iter()
                .any(|db| role.starts_with(&format!("{db}_")));
            if ours && !e.roles_before.contains(&role) {
                admin
                    .batch_execute(&format!("DROP ROLE IF EXISTS {}", quote_ident(&role)))
                    .await?;
                removed.roles.push(role);
            }
        }
        Ok(removed)
    }
}

impl Managed {
    fn initdb(&self) -> Result<()> {
        fs::create_dir(&self.data)
            .map_err(|e| PgError::io("creating the data directory", &self.data, e))?;
        fs::set_permissions(&self.data, fs::Permissions::from_mode(0o700))
            .map_err(|e| PgError::io("chmod", &self.data, e))?;
        if let Some(who) = self.run_as {
            procs::chown(&self.data, who)?;
            procs::check_reachable(&self.data, who)?;
            procs::check_reachable(&self.install.bin("postgres"), who)?;
        }
        let mut cmd = self.command("initdb");
        cmd.arg("-D").arg(&self.data).args([
            "-U",
            SUPERUSER,
            "--auth=trust",
            "--encoding=UTF8",
            "--locale=C",
            "--no-sync",
        ]);
        let out = cmd
            .stdin(Stdio::null())
            .output()
            .map_err(|e| PgError::io("running initdb", self.install.bin("initdb"), e))?;
        if !out.status.success() {
            return Err(PgError::Command {
                program: "initdb".into(),
                status: out.status.to_string(),
                output: format!(
                    "{}{}",
                    String::from_utf8_lossy(&out.stdout),
                    String::from_utf8_lossy(&out.stderr)
                ),
            });
        }
        Ok(())
    }

    /// A command for one of the install's programs, run as the unprivileged
    /// user when we are root, in its own process group, with a C locale.
    fn command(&self, program: &str) -> Command {
        let mut cmd = Command::new(self.install.bin(program));
        cmd.env("LC_ALL", "C")
            .env_remove("PGDATA")
            .env_remove("PGHOST")
            .env_remove("PGPORT")
            .current_dir(&self.root)
            .process_group(0);
        if let Some(who) = self.run_as {
            cmd.uid(who.uid).gid(who.gid);
        }
        cmd
    }

    fn start_on_free_port(&mut self) -> Result<()> {
        let mut last = None;
        for _ in 0..8 {
            self.port = free_port()?;
            match self.spawn_and_wait() {
                Ok(()) => return Ok(()),
                Err(PgError::StartFailed { status, log }) if log.contains("could not bind") => {
                    last = Some(PgError::StartFailed { status, log });
                }
                Err(e) => return Err(e),
            }
        }
        Err(last.unwrap_or(PgError::NotRunning))
    }

    fn spawn_and_wait(&mut self) -> Result<()> {
        let log_start = self.spawn_postmaster()?;
        let deadline = Instant::now() + self.start_timeout;
        let ready = poll_blocking(READY_POLL, || self.ready_step(log_start, deadline));
        self.kill_unless_ready(ready)
    }

    /// As `spawn_and_wait`, waiting on the runtime's timer instead of blocking its thread.
    async fn spawn_and_wait_async(&mut self) -> Result<()> {
        let log_start = self.spawn_postmaster()?;
        let deadline = Instant::now() + self.start_timeout;
        let ready = poll_async(READY_POLL, || self.ready_step(log_start, deadline)).await;
        self.kill_unless_ready(ready)
    }

    /// A postmaster that did not become ready is killed.
    fn kill_unless_ready(&mut self, ready: Result<()>) -> Result<()> {
        if ready.is_err() {
            self.kill_postmaster();
        }
        ready
    }

    /// Starts the postmaster (not waiting for it); the server log's length before it.
    fn spawn_postmaster(&mut self) -> Result<u64> {
        if self.postmaster.is_some() {
            return Err(PgError::AlreadyRunning);
        }
        let log = fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .map_err(|e| PgError::io("opening the server log", &self.log, e))?;
        let log_err = log
            .try_clone()
            .map_err(|e| PgError::io("opening the server log", &self.log, e))?;
        let log_start = fs::metadata(&self.log).map(|m| m.len()).unwrap_or(0);
        let mut cmd = self.command("postgres");
        cmd.arg("-D")
            .arg(&self.data)
            .arg("-p")
            .arg(self.port.to_string());
        let defaults = [
            ("listen_addresses", HOST),
            ("unix_socket_directories", ""),
            ("fsync", "on"),
            ("synchronous_commit", "on"),
            ("max_connections", "200"),
            // Campaigns decode the lease table's commits to resolve lost calls exactly.
            ("wal_level", "logical"),
            ("logging_collector", "off"),
            // Dynamic shared memory in files under the data directory (pg_dynshmem), not in
            // /dev/shm: a killed server's segments, including those no process maps at the
            // kill (a pinned DSA segment), go with its directory or its next start.
            ("dynamic_shared_memory_type", "mmap"),
        ];
        for (name, value) in defaults
            .iter()
            .map(|(n, v)| (n.to_string(), v.to_string()))
            .chain(self.settings.iter().cloned())
        {
            cmd.arg("-c").arg(format!("{name}={value}"));
        }
        let child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::from(log))
            .stderr(Stdio::from(log_err))
            .spawn()
            .map_err(|e| PgError::io("starting postgres", self.install.bin("postgres"), e))?;
        let pid = child.id() as i32;
        self.postmaster = Some(child);
        procs::set_postmaster(self.id, Some(pid));
        self.watchdog.tell(pid);
        Ok(log_start)
    }

    /// One look at a starting server: `None` while it is starting, else whether it became
    /// ready (it exited, or `deadline` passed).
    fn ready_step(&mut self, log_start: u64, deadline: Instant) -> Option<Result<()>> {
        if let Some(child) = self.postmaster.as_mut() {
            if let Ok(Some(status)) = child.try_wait() {
                self.postmaster = None;
                procs::set_postmaster(self.id, None);
                self.watchdog.tell(0);
                return Some(Err(PgError::StartFailed {
                    status: status.to_string(),
                    log: self.log_since(log_start),
                }));
            }
        }
        let ready = fs::read_to_string(self.data.join("postmaster.pid"))
            .map(|text| {
                text.lines()
                    .nth(7)
                    .map(|l| l.trim() == "ready")
                    .unwrap_or(false)
            })
            .unwrap_or(false);
        if ready && std::net::TcpStream::connect((HOST, self.port)).is_ok() {
            return Some(Ok(()));
        }
        if Instant::now() >= deadline {
            return Some(Err(PgError::StartTimeout {
                seconds: self.start_timeout.as_secs(),
                log: self.log_since(log_start),
            }));
        }
        None
    }

    fn log_since(&self, start: u64) -> String {
        let text = fs::read(&self.log).unwrap_or_default();
        let from = (start as usize).min(text.len());
        let text = String::from_utf8_lossy(&text[from..]);
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(30)..].join("\n")
    }

    /// Kills the postmaster and all its children (SIGKILL) and reaps it.
    fn kill_postmaster(&mut self) {
        if let Some(mut child) = self.postmaster.take() {
            procs::kill_tree(child.id() as i32);
            let _ = child.wait();
        }
        self.forget_postmaster();
    }

    /// `kill_postmaster` for async code.
    async fn kill_postmaster_async(&mut self) {
        if let Some(mut child) = self.postmaster.take() {
            procs::kill_tree_async(child.id() as i32).await;
            // Reaping a SIGKILLed process whose children are gone does not wait.
            let _ = child.wait();
        }
        self.forget_postmaster();
    }

    fn forget_postmaster(&mut self) {
        procs::set_postmaster(self.id, None);
        self.watchdog.tell(0);
    }

    /// A crash: SIGKILL of the postmaster and all its children.
    async fn crash_async(&mut self) -> Result<()> {
        if self.postmaster.is_none() {
            return Err(PgError::NotRunning);
        }
        self.kill_postmaster_async().await;
        Ok(())
    }

    fn stop_with(&mut self, sig: i32, timeout: Duration) -> Result<()> {
        let deadline = self.signal_postmaster(sig, timeout)?;
        poll_blocking(STOP_POLL, || self.stopped_step(deadline, timeout))
    }

    /// As `stop_with`, waiting on the runtime's timer instead of blocking its thread.
    async fn stop_with_async(&mut self, sig: i32, timeout: Duration) -> Result<()> {
        let deadline = self.signal_postmaster(sig, timeout)?;
        poll_async(STOP_POLL, || self.stopped_step(deadline, timeout)).await
    }

    /// Sends `sig` to the postmaster; the deadline for it to exit.
    fn signal_postmaster(&mut self, sig: i32, timeout: Duration) -> Result<Instant> {
        let Some(child) = self.postmaster.as_mut() else {
            return Err(PgError::NotRunning);
        };
        // SAFETY: signalling our own child.
        unsafe { libc::kill(child.id() as i32, sig) };
        Ok(Instant::now() + timeout)
    }

    /// One look at a stopping server: `None` while it runs; past `deadline` it is killed.
    fn stopped_step(&mut self, deadline: Instant, timeout: Duration) -> Option<Result<()>> {
        let child = self.postmaster.as_mut()?;
        match child.try_wait() {
            Ok(Some(_)) | Err(_) => {}
            Ok(None) if Instant::now() >= deadline => {
                self.kill_postmaster();
                return Some(Err(PgError::StopTimeout {
                    seconds: timeout.as_secs(),
                }));
            }
            Ok(None) => return None,
        }
        self.postmaster = None;
        self.forget_postmaster();
        Some(Ok(()))
    }
}

impl Drop for Managed {
    fn drop(&mut self) {
        if self.postmaster.is_some()
            && self
                .stop_with(libc::SIGQUIT, Duration::from_secs(10))
                .is_err()
        {
            self.kill_postmaster();
        }
        let _ = fs::remove_dir_all(&self.root);
        procs::unregister(self.id);
        self.watchdog.dismiss();
    }
}

/// Double-quotes an SQL identifier.
pub fn quote_ident(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

fn make_root(id: u64) -> Result<PathBuf> {
    let base = scratch_base();
    let root = scratch_path(&format!("leasecheck-pg-{}-{id}", std::process::id()));
    fs::create_dir_all(&base).map_err(|e| PgError::io("creating the temp directory", &base, e))?;
    fs::create_dir(&root).map_err(|e| PgError::io("creating the cluster directory", &root, e))?;
    fs::set_permissions(&root, fs::Permissions::from_mode(0o755))
        .map_err(|e| PgError::io("chmod", &root, e))?;
    Ok(root)
}

fn free_port() -> Result<u16> {
    let listener = std::net::TcpListener::bind((HOST, 0))
        .map_err(|e| PgError::io("finding a free port", "127.0.0.1:0", e))?;
    listener
        .local_addr()
        .map(|a| a.port())
        .map_err(|e| PgError::io("finding a free port", "127.0.0.1:0", e))
}

/// How long a fast shutdown (a checkpoint) and an immediate one may take before the
/// postmaster is killed.
const FAST_STOP_TIMEOUT: Duration = Duration::from_secs(60);
const IMMEDIATE_STOP_TIMEOUT: Duration = Duration::from_secs(30);
/// How often a starting or stopping server is looked at.
const READY_POLL: Duration = Duration::from_millis(20);
const STOP_POLL: Duration = Duration::from_millis(10);

/// Calls `step` every `period` until it answers, sleeping the thread in between (for
/// synchronous callers, including a cluster dropped in async code: see
/// [`procs::blocking_section`]).
fn poll_blocking<T>(period: Duration, mut step: impl FnMut() -> Option<Result<T>>) -> Result<T> {
    procs::blocking_section(|| loop {
        if let Some(answer) = step() {
            return answer;
        }
        std::thread::sleep(period);
    })
}

/// [`poll_blocking`] for async callers: sleeps on the runtime's timer, so a runtime
/// thread is never blocked.
async fn poll_async<T>(period: Duration, mut step: impl FnMut() -> Option<Result<T>>) -> Result<T> {
    loop {
        if let Some(answer) = step() {
            return answer;
        }
        tokio::time::sleep(period).await;
    }
}

/// One cluster per major for the whole process (a test binary), started on
/// first use and removed at process exit.
pub fn shared(major: u32) -> Result<&'static Cluster> {
    static SHARED: OnceLock<Mutex<HashMap<u32, &'static Cluster>>> = OnceLock::new();
    let map = SHARED.get_or_init(|| Mutex::new(HashMap::new()));
    let mut guard = map.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(cluster) = guard.get(&major) {
        return Ok(cluster);
    }
    let install = PgInstall::ensure(major)?;
    let cluster: &'static Cluster = Box::leak(Box::new(Cluster::start(&install)?));
    guard.insert(major, cluster);
    Ok(cluster)
}

/// The majors the tests run against: `LEASECHECK_PG_MAJORS` (comma separated), default
/// [`super::majors::DEFAULT_TEST_MAJORS`].
pub fn test_majors() -> Vec<u32> {
    std::env::var("LEASECHECK_PG_MAJORS")
        .ok()
        .map(|s| {
            s.split(',')
                .filter_map(|m| m.trim().parse().ok())
                .collect::<Vec<u32>>()
        })
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| super::majors::DEFAULT_TEST_MAJORS.to_vec())
}
