//! A whole bench run: a throwaway cluster (fsync=on, synchronous_commit=on), every selected
//! workload at every client count, both drivers, repeated; the environment; the targets.

use crate::driver::{self, Measured, Pace, Window};
use crate::env;
use crate::error::{BenchError, Result};
use crate::lockstore_ops;
use crate::pgbench::{self, Pgbench};
use crate::result::{BenchResult, Driver, Figure, FloorRef, RunSettings};
use crate::stats::{median_and_spread, Summary};
use crate::targets;
use crate::wake;
use crate::workloads::{self, Workload, LOCKSTORE, WAKE, WORKLOADS};
use harness::extension::ExtensionFiles;
use harness::pg::{Cluster, ClusterOptions, PgInstall};
use indicatif::ProgressBar;
use std::collections::BTreeMap;
use std::time::Duration;

/// What a run measures and how long.
#[derive(Debug, Clone)]
pub struct Config {
    pub major: u32,
    /// The pg_lease build to measure: shipped, or any extension files set (e.g. a mutant).
    pub extension: ExtensionFiles,
    pub clients: Vec<u32>,
    pub warmup: Duration,
    /// Whole seconds: pgbench's `-T` runs warm-up plus this.
    pub measure: Duration,
    pub repeats: u32,
    pub wake_samples: u32,
    /// Workload names (see [`workloads::all_names`]); empty means all.
    pub workloads: Vec<String>,
    pub pgbench: bool,
    pub open_loop: bool,
    pub quick: bool,
}

/// The open loop's rate as a share of the closed loop's median throughput.
pub const OPEN_LOOP_SHARE: f64 = 0.5;

impl Config {
    /// The full run: 1 s warm-up, 3 s measured, 3 repeats, 1/4/16 clients (about 13
    /// minutes with pgbench and the open loop).
    pub fn full(major: u32) -> Config {
        Config {
            major,
            extension: ExtensionFiles::pg_lease(),
            clients: vec![1, 4, 16],
            warmup: Duration::from_secs(1),
            measure: Duration::from_secs(3),
            repeats: 3,
            wake_samples: 100,
            workloads: Vec::new(),
            pgbench: true,
            open_loop: true,
            quick: false,
        }
    }

    /// A few seconds per point: 1 s warm-up, 1 s measured, 1 repeat.
    pub fn quick(major: u32) -> Config {
        Config {
            warmup: Duration::from_secs(1),
            measure: Duration::from_secs(1),
            repeats: 1,
            wake_samples: 10,
            quick: true,
            ..Config::full(major)
        }
    }

    /// The gate's bench of `extension`: W1-cycle and W2-contend next to their floor
    /// (floor-update) at 1 and 4 clients, by the Rust closed loop, `repeats` of 1 s after
    /// 1 s of warm-up (about 13 s a repeat). A regression check against a baseline needs
    /// 3 repeats (its threshold was measured on 3); one shows that every op is measured.
    pub fn gate(major: u32, extension: ExtensionFiles, repeats: u32) -> Config {
        Config {
            extension,
            clients: vec![1, 4],
            repeats,
            workloads: [
                workloads::W1_CYCLE,
                workloads::W2_CONTEND,
                workloads::UPDATE,
            ]
            .map(String::from)
            .to_vec(),
            pgbench: false,
            open_loop: false,
            ..Config::quick(major)
        }
    }

    fn selected(&self, name: &str) -> bool {
        self.workloads.is_empty() || self.workloads.iter().any(|w| w == name)
    }

    fn window(&self) -> Window {
        Window {
            warmup: self.warmup,
            measure: self.measure,
        }
    }

    fn check(&self) -> Result<()> {
        let known = workloads::all_names();
        if let Some(bad) = self.workloads.iter().find(|w| !known.contains(&w.as_str())) {
            return Err(BenchError::Config(format!(
                "unknown workload {bad:?} (known: {})",
                known.join(", ")
            )));
        }
        if self.clients.is_empty()
            || self
                .clients
                .iter()
                .any(|&c| c == 0 || c > workloads::MAX_CLIENTS)
        {
            return Err(BenchError::Config(format!(
                "client counts must be 1..={}",
                workloads::MAX_CLIENTS
            )));
        }
        Ok(())
    }

    /// How many measurements the run takes (for the progress bar).
    fn points(&self) -> u64 {
        let c = self.clients.len() as u64;
        let r = u64::from(self.repeats.max(1));
        let drivers = if self.pgbench { 2 } else { 1 };
        let mut n = 0;
        for w in WORKLOADS.iter().filter(|w| self.selected(w.name)) {
            let loops = if w.open_loop && self.open_loop { 2 } else { 1 };
            n += c * r * drivers * loops;
        }
        if self.selected(LOCKSTORE) {
            n += c * r;
        }
        if self.selected(WAKE) {
            n += 1;
        }
        n
    }
}

/// The runtime a bench or a breakdown runs on: two workers, as the machine's cores.
pub(crate) fn runtime() -> Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(BenchError::Runtime)
}

/// Runs the bench on a runtime of its own (blocking).
pub fn run(config: &Config, progress: &ProgressBar) -> Result<BenchResult> {
    config.check()?;
    let runtime = runtime()?;
    let install = PgInstall::ensure(config.major)?;
    let options = ClusterOptions {
        extensions: vec![config.extension.clone()],
        ..ClusterOptions::default()
    };
    progress.set_message(format!("starting PostgreSQL {}", install.version));
    let cluster = Cluster::start_with(&install, options)?;
    let pgbench = if config.pgbench {
        Some(pgbench::find(&install)?)
    } else {
        None
    };
    progress.set_length(config.points());
    runtime.block_on(run_on(
        config,
        &install,
        &cluster,
        pgbench.as_ref(),
        progress,
    ))
}

/// Figures under construction: the repeats of each (workload, op, clients, driver).
#[derive(Default)]
struct Collector {
    repeats: BTreeMap<(String, String, u32, Driver), Vec<Summary>>,
    outcomes: BTreeMap<(String, String, u32, Driver), BTreeMap<String, u64>>,
    rates: BTreeMap<(String, String, u32, Driver), f64>,
    wal: BTreeMap<(String, String, u32), (f64, u64)>,
}

impl Collector {
    fn add(&mut self, workload: &str, op: &str, clients: u32, driver: Driver, summary: Summary) {
        self.repeats
            .entry((workload.into(), op.into(), clients, driver))
            .or_default()
            .push(summary);
    }

    /// Counts pgbench's 0 µs log entries (left out of its histogram) among the answers.
    fn zero_latency(&mut self, w: &Workload, clients: u32, driver: Driver, n: u64) {
        if n > 0 {
            let key = (w.name.into(), w.script_op.into(), clients, driver);
            *self
                .outcomes
                .entry(key)
                .or_default()
                .entry("pgbench logged 0 us (excluded)".into())
                .or_default() += n;
        }
    }

    fn median_throughput(&self, workload: &str, op: &str, clients: u32, driver: Driver) -> f64 {
        self.repeats
            .get(&(workload.into(), op.into(), clients, driver))
            .and_then(|r| median_and_spread(r))
            .map(|(m, _)| m.throughput_per_s)
            .unwrap_or(0.0)
    }

    fn figures(self) -> Vec<Figure> {
        let mut out = Vec::new();
        for ((workload, op, clients, driver), repeats) in self.repeats {
            let Some((median, spread)) = median_and_spread(&repeats) else {
                continue;
            };
            let key = (workload.clone(), op.clone(), clients, driver);
            let wal = (driver == Driver::RustClosed)
                .then(|| self.wal.get(&(workload.clone(), op.clone(), clients)))
                .flatten()
                .map(|(bytes, statements)| bytes / (*statements).max(1) as f64);
            out.push(Figure {
                floor: workloads::floor_of(&workload).map(|(w, o)| FloorRef {
                    workload: w.into(),
                    op: o.into(),
                }),
                outcomes: self.outcomes.get(&key).cloned().unwrap_or_default(),
                rate_per_s: self.rates.get(&key).copied(),
                wal_bytes_per_statement: wal,
                workload,
                op,
                clients,
                driver,
                median,
                spread,
                repeats,
            });
        }
        out
    }
}

async fn run_on(
    config: &Config,
    install: &PgInstall,
    cluster: &Cluster,
    pgbench: Option<&Pgbench>,
    progress: &ProgressBar,
) -> Result<BenchResult> {
    let started_at = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let mut c = Collector::default();
    scripted_all(config, cluster, pgbench, &mut c, progress).await?;
    if config.selected(LOCKSTORE) {
        lock_store(config, cluster, &mut c, progress).await?;
    }
    if config.selected(WAKE) {
        progress.set_message(format!("{WAKE}: {} samples", config.wake_samples));
        let db = cluster
            .fresh_database_with("bench_wake", &config.extension.name)
            .await?;
        let started = std::time::Instant::now();
        let l = wake::measure(&cluster.config(&db), config.wake_samples).await?;
        c.add(
            WAKE,
            "wake",
            1,
            Driver::RustClosed,
            l.summary(started.elapsed().as_secs_f64()),
        );
        progress.inc(1);
    }
    let environment = environment(config, install, cluster, pgbench).await?;
    let figures = c.figures();
    let mut result = BenchResult {
        schema: crate::result::SCHEMA,
        started_at,
        finished_at: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
        major: config.major,
        quick: config.quick,
        settings: RunSettings {
            warmup_s: config.warmup.as_secs_f64(),
            measure_s: config.measure.as_secs_f64(),
            repeats: config.repeats,
            clients: config.clients.clone(),
            wake_samples: config.wake_samples,
            open_loop_share: OPEN_LOOP_SHARE,
            workloads: config.workloads.clone(),
        },
        environment,
        figures,
        targets: Vec::new(),
    };
    result.targets = targets::evaluate(&result);
    progress.finish_with_message("done");
    Ok(result)
}

/// A scripted workload's database, set up.
struct Prepared {
    workload: &'static Workload,
    db: String,
    admin: tokio_postgres::Client,
}

/// Every selected scripted workload, interleaved: for each client count and repeat, each
/// workload in turn, so that a figure and its floor are measured close together in time
/// (the ratio is what the regression check compares).
async fn scripted_all(
    config: &Config,
    cluster: &Cluster,
    pgbench: Option<&Pgbench>,
    c: &mut Collector,
    progress: &ProgressBar,
) -> Result<()> {
    let mut prepared = Vec::new();
    for w in WORKLOADS.iter().filter(|w| config.selected(w.name)) {
        let db = cluster
            .fresh_database_with(&format!("bench_{}", w.name), &config.extension.name)
            .await?;
        let admin = cluster.connect(&db).await?;
        if !w.setup.is_empty() {
            admin
                .batch_execute(w.setup)
                .await
                .map_err(BenchError::sql(format!("{}: setup", w.name)))?;
        }
        prepared.push(Prepared {
            workload: w,
            db,
            admin,
        });
    }
    for &clients in &config.clients {
        for repeat in 1..=config.repeats {
            for p in &prepared {
                closed(config, cluster, pgbench, p, clients, repeat, c, progress).await?;
            }
        }
        for p in prepared
            .iter()
            .filter(|p| p.workload.open_loop && config.open_loop)
        {
            open(config, cluster, pgbench, p, clients, c, progress).await?;
        }
    }
    Ok(())
}

/// One closed-loop repeat of a workload at a client count, by both drivers.
#[allow(clippy::too_many_arguments)]
async fn closed(
    config: &Config,
    cluster: &Cluster,
    pgbench: Option<&Pgbench>,
    p: &Prepared,
    clients: u32,
    repeat: u32,
    c: &mut Collector,
    progress: &ProgressBar,
) -> Result<()> {
    let w = p.workload;
    let seconds = config.measure.as_secs_f64();
    let point = |d: Driver| {
        format!(
            "{} @{clients} {} ({repeat}/{})",
            w.name,
            d.label(),
            config.repeats
        )
    };
    progress.set_message(point(Driver::RustClosed));
    let before = wal_lsn(&p.admin).await?;
    let m = driver::run(
        &cluster.config(&p.db),
        w,
        clients,
        config.window(),
        Pace::Closed,
    )
    .await?;
    let wal = wal_lsn(&p.admin).await? - before;
    record_rust(c, w, clients, &m, seconds, wal, Driver::RustClosed);
    progress.inc(1);
    if let Some(pgbench) = pgbench {
        progress.set_message(point(Driver::PgbenchClosed));
        let l = pgbench
            .run(cluster, &p.db, w, clients, config.window(), Pace::Closed)
            .await?;
        c.add(
            w.name,
            w.script_op,
            clients,
            Driver::PgbenchClosed,
            l.latencies.summary(seconds),
        );
        c.zero_latency(w, clients, Driver::PgbenchClosed, l.zero_latency);
        progress.inc(1);
    }
    Ok(())
}

/// The open loop at [`OPEN_LOOP_SHARE`] of the closed loop's median throughput, every repeat.
async fn open(
    config: &Config,
    cluster: &Cluster,
    pgbench: Option<&Pgbench>,
    p: &Prepared,
    clients: u32,
    c: &mut Collector,
    progress: &ProgressBar,
) -> Result<()> {
    let w = p.workload;
    let seconds = config.measure.as_secs_f64();
    let rate = (OPEN_LOOP_SHARE
        * c.median_throughput(w.name, w.script_op, clients, Driver::RustClosed))
    .max(1.0);
    let pace = Pace::Open { rate_per_s: rate };
    for repeat in 1..=config.repeats {
        progress.set_message(format!(
            "{} @{clients} open loop at {rate:.0}/s ({repeat}/{})",
            w.name, config.repeats
        ));
        let m = driver::run(&cluster.config(&p.db), w, clients, config.window(), pace).await?;
        c.add(
            w.name,
            w.script_op,
            clients,
            Driver::RustOpen,
            m.script.summary(seconds),
        );
        c.rates.insert(
            (w.name.into(), w.script_op.into(), clients, Driver::RustOpen),
            rate,
        );
        progress.inc(1);
        if let Some(pgbench) = pgbench {
            let l = pgbench
                .run(cluster, &p.db, w, clients, config.window(), pace)
                .await?;
            c.add(
                w.name,
                w.script_op,
                clients,
                Driver::PgbenchOpen,
                l.latencies.summary(seconds),
            );
            c.zero_latency(w, clients, Driver::PgbenchOpen, l.zero_latency);
            c.rates.insert(
                (
                    w.name.into(),
                    w.script_op.into(),
                    clients,
                    Driver::PgbenchOpen,
                ),
                rate,
            );
            progress.inc(1);
        }
    }
    Ok(())
}

/// The Rust closed loop's step and script figures, outcomes and WAL.
fn record_rust(
    c: &mut Collector,
    w: &Workload,
    clients: u32,
    m: &Measured,
    seconds: f64,
    wal_bytes: f64,
    driver: Driver,
) {
    let multi = w.steps.len() > 1;
    for (i, name) in w.steps.iter().enumerate() {
        if multi {
            if let Some(h) = m.steps.get(i) {
                c.add(w.name, name, clients, driver, h.summary(seconds));
            }
        }
        if let Some(o) = m.outcomes.get(i) {
            let slot = c
                .outcomes
                .entry((w.name.into(), (*name).into(), clients, driver))
                .or_default();
            for (k, v) in o {
                *slot.entry(k.clone()).or_default() += v;
            }
        }
        let wal = c
            .wal
            .entry((w.name.into(), (*name).into(), clients))
            .or_default();
        wal.0 += wal_bytes / w.steps.len() as f64;
        wal.1 += m.statements_total / w.steps.len() as u64;
    }
    c.add(
        w.name,
        w.script_op,
        clients,
        driver,
        m.script.summary(seconds),
    );
}

async fn wal_lsn(client: &tokio_postgres::Client) -> Result<f64> {
    let row = client
        .query_one(
            "SELECT (pg_current_wal_insert_lsn() - '0/0'::pg_lsn)::float8",
            &[],
        )
        .await
        .map_err(BenchError::sql("reading the WAL position"))?;
    row.try_get(0)
        .map_err(BenchError::sql("reading the WAL position"))
}

async fn lock_store(
    config: &Config,
    cluster: &Cluster,
    c: &mut Collector,
    progress: &ProgressBar,
) -> Result<()> {
    let db = cluster.fresh_empty_database("bench_lockstore").await?;
    lockstore_ops::setup(&cluster.connect(&db).await?).await?;
    let seconds = config.measure.as_secs_f64();
    for &clients in &config.clients {
        for repeat in 1..=config.repeats {
            progress.set_message(format!(
                "{LOCKSTORE} @{clients} ({repeat}/{})",
                config.repeats
            ));
            let m = lockstore_ops::run(&cluster.config(&db), clients, config.window()).await?;
            for (op, h) in lockstore_ops::OPS.iter().zip(&m.ops) {
                c.add(
                    LOCKSTORE,
                    op,
                    clients,
                    Driver::RustClosed,
                    h.summary(seconds),
                );
            }
            c.add(
                LOCKSTORE,
                "cycle",
                clients,
                Driver::RustClosed,
                m.cycle.summary(seconds),
            );
            progress.inc(1);
        }
    }
    Ok(())
}

async fn environment(
    config: &Config,
    install: &PgInstall,
    cluster: &Cluster,
    pgbench: Option<&Pgbench>,
) -> Result<env::Environment> {
    let db = cluster
        .fresh_database_with("bench_env", &config.extension.name)
        .await?;
    let client = cluster.connect(&db).await?;
    let (server_version, gucs) = env::server(&client).await?;
    let extension_version = harness::extension::installed_version(&client, &config.extension.name)
        .await
        .map_err(BenchError::sql("reading the extension version"))?
        .unwrap_or_default();
    let (os, kernel, cpu_model, cpu_cores, memory_total) = env::machine();
    let (pgbench_version, pgbench_path, pgbench_note) = match pgbench {
        None => (String::new(), String::new(), "pgbench not run".to_string()),
        Some(p) => {
            let own = p.path.starts_with(&install.bin_dir);
            let note = if own {
                "the server install's own pgbench".to_string()
            } else {
                format!(
                    "the PostgreSQL {} install has no pgbench; this pgbench drives the {} server",
                    install.version, install.version
                )
            };
            (p.version.clone(), p.path.display().to_string(), note)
        }
    };
    Ok(env::Environment {
        server_version,
        server_bin_dir: install.bin_dir.display().to_string(),
        pgbench_version,
        pgbench_path,
        pgbench_note,
        extension: config.extension.name.clone(),
        extension_version,
        os,
        kernel,
        cpu_model,
        cpu_cores,
        memory_total,
        storage: env::storage(cluster.data_dir()?)?,
        gucs,
        leasecheck_version: env!("CARGO_PKG_VERSION").to_string(),
    })
}
