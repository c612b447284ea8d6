//! Runs the extension's PGXS suites (`make installcheck`: the REGRESS and
//! ISOLATION suites) against a throwaway cluster.
//!
//! The extension directory is copied to a temporary directory first, so runs
//! against several clusters never share `results/` and the source tree stays
//! clean. PGXS comes from any install that has it (Debian ships it in
//! `postgresql-client-NN`); its pg_regress and isolationtester drive servers
//! of other majors too.

use crate::pg::{Cluster, PgError, Result};
use std::fs;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// The result of one `make installcheck`.
#[derive(Debug, Clone)]
pub struct InstallcheckReport {
    pub server_version: String,
    pub passed: bool,
    /// make's combined output.
    pub output: String,
    /// regression.diffs of the failing suites (empty when passed).
    pub diffs: String,
}

/// The source `extension/` directory of this workspace.
pub fn default_extension_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../extension")
}

/// A `pg_config` whose `--pgxs` makefile exists: `LEASECHECK_PG_CONFIG`, the
/// cluster's own install, `pg_config` on PATH, then `/usr/lib/postgresql/*/bin`.
pub fn find_pgxs_pg_config(cluster: &Cluster) -> Result<PathBuf> {
    let mut candidates: Vec<PathBuf> = Vec::new();
    if let Some(p) = std::env::var_os("LEASECHECK_PG_CONFIG") {
        candidates.push(PathBuf::from(p));
    }
    if let Ok(install) = cluster.install() {
        candidates.push(install.bin("pg_config"));
    }
    candidates.push(PathBuf::from("pg_config"));
    if let Ok(dir) = fs::read_dir("/usr/lib/postgresql") {
        let mut dirs: Vec<PathBuf> = dir
            .flatten()
            .map(|e| e.path().join("bin/pg_config"))
            .collect();
        dirs.sort();
        dirs.reverse();
        candidates.extend(dirs);
    }
    let mut tried = Vec::new();
    for cand in candidates {
        tried.push(cand.display().to_string());
        let Ok(out) = Command::new(&cand).arg("--pgxs").output() else {
            continue;
        };
        let pgxs = String::from_utf8_lossy(&out.stdout).trim().to_string();
        if out.status.success() && Path::new(&pgxs).is_file() {
            return Ok(cand);
        }
    }
    Err(PgError::NotFound {
        major: cluster.version().major,
        tried,
        hint: "no PGXS (pg_config --pgxs) found; install postgresql-client-15 (Debian) or \
               postgresql-server-dev, or set LEASECHECK_PG_CONFIG"
            .into(),
    })
}

/// `make installcheck` of the extension in `extension_dir` against `cluster`.
pub fn run(cluster: &Cluster, extension_dir: &Path) -> Result<InstallcheckReport> {
    run_against(cluster, extension_dir, crate::extension::NAME)
}

/// Like [`run`], but the suites install and use the extension `extension`
/// (e.g. a mutant of pg_lease, already installed on the cluster's install):
/// `EXTENSION pg_lease` and `extname = 'pg_lease'` are renamed in the copied
/// tests and expected outputs, so only behaviour can make the suites differ.
pub fn run_against(
    cluster: &Cluster,
    extension_dir: &Path,
    extension: &str,
) -> Result<InstallcheckReport> {
    run_within(cluster, extension_dir, extension, DEFAULT_TIMEOUT)
}

/// Both suites take under a minute on this machine; ten minutes only bounds a hang.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(600);

/// Like [`run_against`], ended after `timeout`: a hang is [`PgError::Hung`], naming the
/// test pg_regress or isolationtester was running (the last line of make's output).
pub fn run_within(
    cluster: &Cluster,
    extension_dir: &Path,
    extension: &str,
    timeout: Duration,
) -> Result<InstallcheckReport> {
    let pg_config = find_pgxs_pg_config(cluster)?;
    let work = tempfile::Builder::new()
        .prefix("leasecheck-installcheck-")
        .tempdir()
        .map_err(|e| PgError::io("creating a temp directory", std::env::temp_dir(), e))?;
    copy_sources(extension_dir, work.path())?;
    if extension != crate::extension::NAME {
        rename_extension(work.path(), extension)?;
    }
    let log_path = work.path().join("installcheck.log");
    let log = fs::File::create(&log_path).map_err(|e| PgError::io("creating", &log_path, e))?;
    let log_err = log
        .try_clone()
        .map_err(|e| PgError::io("opening", &log_path, e))?;
    let child = Command::new("make")
        .arg("-C")
        .arg(work.path())
        .arg("installcheck")
        .arg(format!("PG_CONFIG={}", pg_config.display()))
        .env("PGHOST", cluster.host())
        .env("PGPORT", cluster.port().to_string())
        .env("PGUSER", cluster.superuser())
        .env_remove("PGDATABASE")
        .env("LC_ALL", "C")
        .stdin(std::process::Stdio::null())
        .stdout(log)
        .stderr(log_err)
        // Its own process group, so a hang can be ended with everything make started.
        .process_group(0)
        .spawn()
        .map_err(|e| PgError::io("running make (is it installed?)", "make", e))?;
    let status = wait_within(child, timeout, &log_path)?;
    let output = fs::read_to_string(&log_path).unwrap_or_default();
    let mut diffs = String::new();
    if !status.success() {
        for name in ["regression.diffs", "output_iso/regression.diffs"] {
            if let Ok(text) = fs::read_to_string(work.path().join(name)) {
                diffs.push_str(&format!("=== {name}\n{text}"));
            }
        }
    }
    Ok(InstallcheckReport {
        server_version: cluster.version().full.clone(),
        passed: status.success(),
        output,
        diffs,
    })
}

/// Waits for `child` until `timeout`; then kills its process group and reports the hang.
fn wait_within(
    mut child: std::process::Child,
    timeout: Duration,
    log_path: &Path,
) -> Result<std::process::ExitStatus> {
    let deadline = Instant::now() + timeout;
    loop {
        match child.try_wait() {
            Ok(Some(status)) => return Ok(status),
            Ok(None) if Instant::now() < deadline => {
                // Synchronous code on its own thread: polling is the simplest bounded wait.
                std::thread::sleep(Duration::from_millis(100));
            }
            Ok(None) => break,
            Err(e) => return Err(PgError::io("waiting for make", "make", e)),
        }
    }
    // SAFETY: killpg only sends a signal; process_group(0) made make's pid its group id.
    let pgid = child.id() as libc::pid_t;
    unsafe {
        libc::killpg(pgid, libc::SIGKILL);
    }
    let _ = child.wait();
    let output = fs::read_to_string(log_path).unwrap_or_default();
    let running = output
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("(no output)")
        .trim()
        .to_string();
    Err(PgError::Hung {
        what: "make installcheck".into(),
        seconds: timeout.as_secs(),
        detail: format!("it was at: {running}"),
    })
}

fn rename_extension(dir: &Path, extension: &str) -> Result<()> {
    let name = crate::extension::NAME;
    for sub in ["sql", "specs", "expected"] {
        let Ok(entries) = fs::read_dir(dir.join(sub)) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            let text = fs::read_to_string(&path).map_err(|e| PgError::io("reading", &path, e))?;
            let renamed = text
                .replace(
                    &format!("EXTENSION {name}"),
                    &format!("EXTENSION {extension}"),
                )
                .replace(
                    &format!("extname = '{name}'"),
                    &format!("extname = '{extension}'"),
                );
            fs::write(&path, renamed).map_err(|e| PgError::io("writing", &path, e))?;
        }
    }
    Ok(())
}

fn copy_sources(from: &Path, to: &Path) -> Result<()> {
    let entries =
        fs::read_dir(from).map_err(|e| PgError::io("reading the extension directory", from, e))?;
    for entry in entries {
        let entry = entry.map_err(|e| PgError::io("reading the extension directory", from, e))?;
        let name = entry.file_name();
        let name_str = name.to_string_lossy();
        // Leave behind the outputs of earlier in-tree runs.
        if matches!(
            name_str.as_ref(),
            "results" | "output_iso" | "log" | "tmp_check"
        ) || name_str.starts_with("regression.")
        {
            continue;
        }
        let src = entry.path();
        let dst = to.join(&name);
        if src.is_dir() {
            fs::create_dir_all(&dst).map_err(|e| PgError::io("creating", &dst, e))?;
            copy_sources(&src, &dst)?;
        } else {
            fs::copy(&src, &dst).map_err(|e| PgError::io("copying", &src, e))?;
        }
    }
    Ok(())
}
