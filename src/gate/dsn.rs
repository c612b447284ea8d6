//! `leasecheck gate --dsn URL`: the suites that need no restart or crash, on an existing
//! server the gate does not start. The build must already be installed there (its files in
//! the server's extension directory); the gate creates a database per check, compares the
//! server's scripts with the build's when it can read them, and drops what it created.

use super::outcome::{CheckResult, ExistingServer, MajorResult, SuiteResult};
use super::{ctx, run_suites, spinner, suites, GateArgs, Size};
use anyhow::{anyhow, Context};
use harness::extension::{sha256_hex, Build};
use harness::pg::Cluster;
use std::path::Path;
use std::time::Instant;
use tokio_postgres::config::Host;

/// The backend word of a `--dsn` run in the summary.
pub const BACKEND: &str = "dsn";

/// Parses `--dsn`: a libpq URL (`postgres://user[:pw]@host:port/db`) or `key=value` pairs.
pub fn parse(dsn: &str) -> anyhow::Result<tokio_postgres::Config> {
    // The parser's error never repeats the string (which may hold a password).
    dsn.parse()
        .map_err(|e| anyhow!("--dsn: not a libpq URL or key=value connection string: {e}"))
}

/// `host:port/database` of `config`, without its password.
fn address(config: &tokio_postgres::Config) -> String {
    let host = match config.get_hosts().first() {
        Some(Host::Tcp(h)) => h.clone(),
        Some(Host::Unix(dir)) => dir.display().to_string(),
        None => "localhost".into(),
    };
    let port = config.get_ports().first().copied().unwrap_or(5432);
    format!(
        "{host}:{port}/{}",
        config.get_dbname().unwrap_or("postgres")
    )
}

/// Whether the server's scripts are the build's.
enum Scripts {
    /// Every script of the build read from the server, byte for byte the same.
    Identical,
    /// The server's differ: it runs another build.
    Differ(String),
    /// The server's files could not be read (not superuser, another layout).
    Unread(String),
}

/// The run on the server `args.dsn` names: one major (the server's).
pub(super) fn run(
    args: &GateArgs,
    build: &'static Build,
    dsn: &str,
    seed: u64,
    report_dir: &Path,
) -> anyhow::Result<(Vec<MajorResult>, ExistingServer)> {
    let config = parse(dsn)?;
    let mut server = ExistingServer {
        address: address(&config),
        role: config.get_user().unwrap_or_default().to_string(),
        scripts_verified: false,
        scripts: "not compared: the server could not be reached".into(),
        removed_databases: Vec::new(),
        removed_roles: Vec::new(),
    };
    let selected = super::select_suites(&args.suites)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    let bar = spinner();
    bar.set_message(format!("connecting to {}", server.address));
    let start = Instant::now();
    let cluster = match runtime.block_on(Cluster::external(config)) {
        Ok(cluster) => cluster,
        Err(e) => {
            bar.finish_and_clear();
            let check = CheckResult::infrastructure("connect", e.to_string(), start.elapsed());
            let suite = SuiteResult::of("server", vec![check], start.elapsed());
            return Ok((vec![MajorResult::of(0, None, BACKEND, vec![suite])], server));
        }
    };
    server.role = cluster.superuser().to_string();
    let run = ExistingRun {
        args,
        build,
        seed,
        report_dir,
        cluster: &cluster,
    };
    let result = runtime.block_on(run.major(&selected, &bar, &mut server));
    bar.finish_and_clear();
    println!("PG {}: {}", result.major, result.status.word());
    Ok((vec![result], server))
}

struct ExistingRun<'a> {
    args: &'a GateArgs,
    build: &'static Build,
    seed: u64,
    report_dir: &'a Path,
    cluster: &'a Cluster,
}

impl ExistingRun<'_> {
    /// The server's checks, then the suites, then the removal of what they created.
    async fn major(
        &self,
        selected: &[suites::Suite],
        bar: &indicatif::ProgressBar,
        server: &mut ExistingServer,
    ) -> MajorResult {
        let version = self.cluster.version().clone();
        let start = Instant::now();
        bar.set_message(format!("PG {version}: checking the installed extension"));
        let mut results = Vec::new();
        match self.installed_build(server).await {
            Ok(()) => {
                let ctx = ctx::Ctx {
                    cluster: self.cluster,
                    build: self.build,
                    size: self.size(),
                    campaign_ops: self.args.campaign_ops,
                    seed: self.seed,
                    out_dir: self.report_dir.join(format!("pg{}", version.major)),
                    report_dir: self.report_dir.to_path_buf(),
                    tests_dir: super::tests_dir(self.args),
                    faults: &self.args.fault_checks(),
                    bench_baseline: None,
                    bar,
                };
                results = run_suites(&ctx, selected, version.major, bar).await;
            }
            Err(check) => {
                let check = CheckResult {
                    seconds: start.elapsed().as_secs_f64(),
                    ..check
                };
                results.push(SuiteResult::of("server", vec![check], start.elapsed()));
            }
        }
        let start = Instant::now();
        bar.set_message(format!(
            "PG {version}: dropping what the gate created on the server"
        ));
        match self.cluster.remove_created().await {
            Ok(removed) => {
                server.removed_databases = removed.databases;
                server.removed_roles = removed.roles;
            }
            Err(e) => {
                let why = format!("the gate's databases or roles may be left on the server: {e}");
                let check = CheckResult::infrastructure("remove", why, start.elapsed());
                results.push(SuiteResult::of("cleanup", vec![check], start.elapsed()));
            }
        }
        MajorResult::of(version.major, Some(version.full), BACKEND, results)
    }

    fn size(&self) -> Size {
        self.args.size()
    }

    /// The build's version can be created on the server and its scripts there are the
    /// build's (when readable); else the check that says why nothing ran.
    async fn installed_build(&self, server: &mut ExistingServer) -> Result<(), CheckResult> {
        let files = &self.build.files;
        if let Err(e) = self.cluster.provide_extension(files).await {
            server.scripts = "not compared: the extension is not installed".into();
            return Err(CheckResult::infrastructure(
                "extension installed",
                e.to_string(),
                Default::default(),
            ));
        }
        match compare_scripts(self.cluster, self.build).await {
            Scripts::Identical => {
                server.scripts_verified = true;
                server.scripts = format!(
                    "the server's {} scripts are the build's (SHA-256 compared)",
                    files.name
                );
                Ok(())
            }
            Scripts::Unread(why) => {
                server.scripts = format!(
                    "not verified: the SHA-256 printed is of the local build; the server's \
                     files could not be read ({why})"
                );
                Ok(())
            }
            Scripts::Differ(why) => {
                server.scripts = format!("differ: {why}");
                Err(CheckResult::infrastructure(
                    "extension installed",
                    format!(
                        "the server runs another build of {}: {why}; install this build's \
                         files on the server, or give the server's build to --extension",
                        files.name
                    ),
                    Default::default(),
                ))
            }
        }
    }
}

/// Reads each script of the build from the server's extension directory (`SHAREDIR` of
/// `pg_config`, through `pg_read_file`: superuser or `pg_read_server_files`) and compares.
async fn compare_scripts(cluster: &Cluster, build: &Build) -> Scripts {
    let client = match cluster.connect("postgres").await {
        Ok(c) => c,
        Err(e) => return Scripts::Unread(e.to_string()),
    };
    let sharedir: String = match client
        .query_one(
            "SELECT setting FROM pg_catalog.pg_config WHERE name = 'SHAREDIR'",
            &[],
        )
        .await
    {
        Ok(row) => row.get(0),
        Err(e) => return Scripts::Unread(describe(&e)),
    };
    for (file, text) in &build.files.scripts {
        let path = format!("{sharedir}/extension/{file}");
        let server_text: String = match client
            .query_one("SELECT pg_catalog.pg_read_file($1)", &[&path])
            .await
        {
            Ok(row) => row.get(0),
            Err(e) => return Scripts::Unread(format!("{path}: {}", describe(&e))),
        };
        if server_text != *text {
            return Scripts::Differ(format!(
                "{path} has SHA-256 {}, the build's {file} {}",
                sha256_hex(&server_text),
                sha256_hex(text)
            ));
        }
    }
    Scripts::Identical
}

fn describe(e: &tokio_postgres::Error) -> String {
    match e.as_db_error() {
        Some(db) => format!("{}: {}", db.code().code(), db.message()),
        None => e.to_string(),
    }
}
