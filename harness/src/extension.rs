//! The pg_lease extension files, embedded from `extension/`, and their installation
//! into a PostgreSQL install's extension directory.

use crate::pg::{PgError, PgInstall, Result};
use std::fs;
use std::path::Path;

/// The extension's name, as in `CREATE EXTENSION pg_lease`.
pub const NAME: &str = "pg_lease";
/// The extension name under which [`ExtensionFiles::version_0_1_0`] installs pg_lease 0.1.0.
pub const NAME_0_1_0: &str = "pg_lease_v0_1_0";
/// The version `CREATE EXTENSION` installs by default.
pub const VERSION: &str = "0.2.0";
/// `pg_lease.control`.
pub const CONTROL: &str = include_str!("../../extension/pg_lease.control");
/// `pg_lease--0.1.0.sql`: the base script (0.1.0).
pub const BASE_SCRIPT: &str = include_str!("../../extension/pg_lease--0.1.0.sql");
/// `pg_lease--0.1.0--0.2.0.sql`: every definition of 0.2.0. `CREATE EXTENSION` runs the
/// base script, then this update.
pub const SCRIPT: &str = include_str!("../../extension/pg_lease--0.1.0--0.2.0.sql");

/// The released version whose base script is [`BASE_SCRIPT`].
pub const BASE_VERSION: &str = "0.1.0";

/// [`CONTROL`] with `default_version` set to `version` (every other line as shipped).
fn control_for(version: &str) -> String {
    CONTROL
        .lines()
        .map(|line| {
            if line.trim_start().starts_with("default_version") {
                format!("default_version = '{version}'\n")
            } else {
                format!("{line}\n")
            }
        })
        .collect()
}

/// The script files of an extension named `name`, with `update` as its 0.1.0 -> 0.2.0
/// script.
fn scripts(name: &str, update: String) -> Vec<(String, String)> {
    vec![
        (format!("{name}--0.1.0.sql"), BASE_SCRIPT.to_string()),
        (format!("{name}--0.1.0--{VERSION}.sql"), update),
    ]
}

/// One extension to install: its control file and versioned scripts.
#[derive(Debug, Clone)]
pub struct ExtensionFiles {
    pub name: String,
    pub control: String,
    /// (file name, content), e.g. ("pg_lease--0.1.0.sql", SCRIPT)
    pub scripts: Vec<(String, String)>,
}

impl ExtensionFiles {
    /// The scripts as one install script, in order (the base, then each update: what
    /// `CREATE EXTENSION` runs), for a gate given one SQL file and the control file.
    pub fn install_script(&self) -> String {
        let scripts: Vec<&str> = self.scripts.iter().map(|(_, t)| t.as_str()).collect();
        scripts.join("\n")
    }

    /// pg_lease as shipped in `extension/`.
    pub fn pg_lease() -> ExtensionFiles {
        ExtensionFiles {
            name: NAME.to_string(),
            control: CONTROL.to_string(),
            scripts: scripts(NAME, SCRIPT.to_string()),
        }
    }

    /// pg_lease 0.1.0 as released (the base script alone, `default_version = '0.1.0'`),
    /// under the extension name `pg_lease_v0_1_0`: the version the 0.2.0 fixes are
    /// compared with. Its objects live in schema `lease` like pg_lease's, so the two
    /// cannot be created in the same database.
    pub fn version_0_1_0() -> ExtensionFiles {
        let name = NAME_0_1_0.to_string();
        ExtensionFiles {
            control: control_for(BASE_VERSION),
            scripts: vec![(
                format!("{name}--{BASE_VERSION}.sql"),
                BASE_SCRIPT.to_string(),
            )],
            name,
        }
    }

    /// Writes the files into `install`'s extension directory (atomically per
    /// file, and only when the content differs, so concurrent test binaries
    /// never see a half-written script).
    pub fn install(&self, install: &PgInstall) -> Result<()> {
        let dir = install.extension_dir();
        let mut files = vec![(format!("{}.control", self.name), self.control.as_str())];
        files.extend(self.scripts.iter().map(|(n, c)| (n.clone(), c.as_str())));
        for (name, content) in files {
            write_if_changed(&dir, &name, content)?;
        }
        Ok(())
    }
}

/// A build of the extension that is not this checkout's: a directory with one control file
/// and its `<name>--*.sql` scripts, or one install script with a control file.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    #[error("reading {path}: {source}")]
    Read {
        path: std::path::PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{dir}: expected exactly one .control file, found {found}")]
    Control {
        dir: std::path::PathBuf,
        found: usize,
    },
    #[error("{dir}: no script {name}--*.sql next to {name}.control")]
    NoScripts {
        dir: std::path::PathBuf,
        name: String,
    },
    #[error("{path}: no default_version = '...' line")]
    NoDefaultVersion { path: std::path::PathBuf },
    #[error("{path}: the control file's name must be <extension>.control")]
    ControlName { path: std::path::PathBuf },
}

/// A user's build of the extension: its files as given, renamed to an extension name of
/// its own so nothing this harness installs (pg_lease as shipped) can replace them.
#[derive(Debug, Clone)]
pub struct Build {
    /// The files under their given names (what the digests are of).
    pub given: ExtensionFiles,
    /// The same files under [`Build::INSTALLED_NAME`].
    pub files: ExtensionFiles,
    /// The control file's `default_version`: what `CREATE EXTENSION` must install.
    pub version: String,
}

impl Build {
    /// The extension name a build is installed under.
    pub const INSTALLED_NAME: &'static str = "pg_lease_under_test";

    /// The control file and `<name>--*.sql` scripts of `dir`.
    pub fn from_dir(dir: &Path) -> Result<Build, BuildError> {
        let read_err = |source| BuildError::Read {
            path: dir.to_path_buf(),
            source,
        };
        let mut names: Vec<String> = fs::read_dir(dir)
            .map_err(read_err)?
            .filter_map(|e| e.ok())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        let controls: Vec<&String> = names.iter().filter(|n| n.ends_with(".control")).collect();
        let [control] = controls.as_slice() else {
            return Err(BuildError::Control {
                dir: dir.to_path_buf(),
                found: controls.len(),
            });
        };
        let name = control.trim_end_matches(".control").to_string();
        let prefix = format!("{name}--");
        let mut scripts = Vec::new();
        for file in names
            .iter()
            .filter(|n| n.starts_with(&prefix) && n.ends_with(".sql"))
        {
            scripts.push((file.clone(), read(&dir.join(file))?));
        }
        if scripts.is_empty() {
            return Err(BuildError::NoScripts {
                dir: dir.to_path_buf(),
                name,
            });
        }
        let control_text = read(&dir.join(control.as_str()))?;
        Build::new(name, control_text, scripts, &dir.join(control.as_str()))
    }

    /// One install script (`CREATE EXTENSION` runs it for the control file's
    /// `default_version`) and the control file.
    pub fn from_sql(sql: &Path, control: &Path) -> Result<Build, BuildError> {
        let name = control
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(|n| n.strip_suffix(".control"))
            .filter(|n| !n.is_empty())
            .ok_or_else(|| BuildError::ControlName {
                path: control.to_path_buf(),
            })?
            .to_string();
        let control_text = read(control)?;
        let version =
            default_version(&control_text).ok_or_else(|| BuildError::NoDefaultVersion {
                path: control.to_path_buf(),
            })?;
        let script = (format!("{name}--{version}.sql"), read(sql)?);
        Build::new(name, control_text, vec![script], control)
    }

    fn new(
        name: String,
        control: String,
        scripts: Vec<(String, String)>,
        control_path: &Path,
    ) -> Result<Build, BuildError> {
        let version = default_version(&control).ok_or_else(|| BuildError::NoDefaultVersion {
            path: control_path.to_path_buf(),
        })?;
        let given = ExtensionFiles {
            name: name.clone(),
            control,
            scripts,
        };
        let files = ExtensionFiles {
            name: Build::INSTALLED_NAME.to_string(),
            control: given.control.clone(),
            scripts: given
                .scripts
                .iter()
                .map(|(file, text)| {
                    let rest = file.strip_prefix(name.as_str()).unwrap_or(file);
                    (format!("{}{rest}", Build::INSTALLED_NAME), text.clone())
                })
                .collect(),
        };
        Ok(Build {
            given,
            files,
            version,
        })
    }

    /// The build under its given name: what the owner of an existing server installed
    /// there (its `files` are the files as given).
    pub fn under_given_name(&self) -> Build {
        Build {
            files: self.given.clone(),
            ..self.clone()
        }
    }

    /// SHA-256 (hex) of each script as given, with its file name, in name order.
    pub fn script_digests(&self) -> Vec<(String, String)> {
        self.given
            .scripts
            .iter()
            .map(|(file, text)| (file.clone(), sha256_hex(text)))
            .collect()
    }
}

/// The SHA-256 of `text`, in lower-case hex (the `sha256sum` format).
pub fn sha256_hex(text: &str) -> String {
    use sha2::{Digest, Sha256};
    Sha256::digest(text.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn read(path: &Path) -> Result<String, BuildError> {
    fs::read_to_string(path).map_err(|source| BuildError::Read {
        path: path.to_path_buf(),
        source,
    })
}

/// The `default_version` of a control file's text.
pub fn default_version(control: &str) -> Option<String> {
    control.lines().find_map(|line| {
        let (key, value) = line.split_once('=')?;
        (key.trim() == "default_version").then(|| value.trim().trim_matches('\'').to_string())
    })
}

/// The SQL mutants live in the one catalogue, [`crate::mutants`].
pub use crate::mutants::{Mutant, StaleMutant, MUTANTS};

impl ExtensionFiles {
    /// pg_lease unchanged, under another extension name (the control for mutant runs).
    pub fn renamed(name: &str) -> ExtensionFiles {
        ExtensionFiles {
            name: name.to_string(),
            control: CONTROL.to_string(),
            scripts: scripts(name, SCRIPT.to_string()),
        }
    }

    /// The mutant as an extension of its own, `pg_lease_<mutant name>`.
    pub fn mutant(m: &Mutant) -> Result<ExtensionFiles, StaleMutant> {
        ExtensionFiles::edited(m.name, m.edits)
    }

    /// pg_lease with `edits` applied to its 0.2.0 definitions ([`SCRIPT`]), each to exactly
    /// one occurrence of its text, as an extension of its own, `pg_lease_<name>`.
    pub fn edited(
        name: &'static str,
        edits: &'static [(&'static str, &'static str)],
    ) -> Result<ExtensionFiles, StaleMutant> {
        let script = crate::mutants::apply(name, SCRIPT, edits)?;
        let name = format!("{NAME}_{name}");
        Ok(ExtensionFiles {
            scripts: scripts(&name, script),
            control: CONTROL.to_string(),
            name,
        })
    }
}

/// The `extversion` of extension `name` in the database `client` is connected to (none
/// when it is not created there).
pub async fn installed_version(
    client: &tokio_postgres::Client,
    name: &str,
) -> Result<Option<String>, tokio_postgres::Error> {
    let row = client
        .query_opt(
            "SELECT extversion FROM pg_catalog.pg_extension WHERE extname = $1::text::name",
            &[&name],
        )
        .await?;
    row.map(|r| r.try_get(0)).transpose()
}

fn write_if_changed(dir: &Path, name: &str, content: &str) -> Result<()> {
    let path = dir.join(name);
    if fs::read_to_string(&path)
        .map(|c| c == content)
        .unwrap_or(false)
    {
        return Ok(());
    }
    let err = |source| PgError::ExtensionInstall {
        dir: dir.to_path_buf(),
        source,
    };
    fs::create_dir_all(dir).map_err(err)?;
    // Unique per process and per write: test threads of one process install concurrently.
    static NEXT_TMP: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = NEXT_TMP.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let tmp = dir.join(format!(".{name}.{}.{n}.tmp", std::process::id()));
    fs::write(&tmp, content).map_err(err)?;
    use std::os::unix::fs::PermissionsExt;
    fs::set_permissions(&tmp, fs::Permissions::from_mode(0o644)).map_err(err)?;
    fs::rename(&tmp, &path).map_err(|e| {
        let _ = fs::remove_file(&tmp);
        err(e)
    })
}

#[cfg(test)]
mod build_tests {
    use super::*;

    #[test]
    fn a_build_directory_is_renamed_and_keeps_its_scripts_and_version() {
        let build = Build::from_dir(&crate::installcheck::default_extension_dir()).unwrap();
        assert_eq!(
            (build.given.name.as_str(), build.version.as_str()),
            (NAME, VERSION)
        );
        let names: Vec<&str> = build
            .files
            .scripts
            .iter()
            .map(|(n, _)| n.as_str())
            .collect();
        assert_eq!(
            names,
            [
                "pg_lease_under_test--0.1.0--0.2.0.sql",
                "pg_lease_under_test--0.1.0.sql"
            ]
        );
        let digests = build.script_digests();
        assert_eq!(digests.len(), 2);
        assert!(digests.iter().all(|(_, hex)| hex.len() == 64));
    }

    #[test]
    fn a_directory_without_exactly_one_control_file_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        assert!(matches!(
            Build::from_dir(dir.path()),
            Err(BuildError::Control { found: 0, .. })
        ));
        for name in ["a.control", "b.control"] {
            std::fs::write(dir.path().join(name), "default_version = '1'\n").unwrap();
        }
        assert!(matches!(
            Build::from_dir(dir.path()),
            Err(BuildError::Control { found: 2, .. })
        ));
    }

    #[test]
    fn one_install_script_is_installed_for_the_default_version() {
        let dir = tempfile::tempdir().unwrap();
        let (sql, control) = (
            dir.path().join("x.sql"),
            dir.path().join("pg_lease.control"),
        );
        std::fs::write(&sql, "SELECT 1;\n").unwrap();
        std::fs::write(&control, CONTROL).unwrap();
        let build = Build::from_sql(&sql, &control).unwrap();
        assert_eq!(build.given.scripts[0].0, format!("pg_lease--{VERSION}.sql"));
        assert_eq!(
            build.files.scripts[0].0,
            format!("pg_lease_under_test--{VERSION}.sql")
        );
    }
}
