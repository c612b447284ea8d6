//! The pg_lease extension files, embedded from `extension/`, and their installation
//! into a PostgreSQL install's extension directory.

use std::fs;
use std::path::Path;

/// The extension's name, as in `CREATE EXTENSION pg_lease`.
pub const NAME: &str = "pg_lease";
/// The extension name under which [`ExtensionFiles::version_0_1_0`] installs pg_lease 0.1.0.
pub const NAME_0_1_0: &str = "pg_lease_v0_1_0";
/// The extension name under which [`ExtensionFiles::version_0_2_0`] installs pg_lease 0.2.0.
pub const NAME_0_2_0: &str = "pg_lease_v0_2_0";
/// The version `CREATE EXTENSION` installs by default.
pub const VERSION: &str = "0.3.0";
/// `pg_lease.control`.
pub const CONTROL: &str = include_str!("../../extension/pg_lease.control");
/// `pg_lease--0.3.0.sql`: every definition of 0.3.0, the script `CREATE EXTENSION` runs.
pub const SCRIPT: &str = include_str!("../../extension/pg_lease--0.3.0.sql");
/// `pg_lease--0.2.0--0.3.0.sql`.
pub const UPDATE_0_2_0_TO_0_3_0: &str = include_str!("../../extension/pg_lease--0.2.0--0.3.0.sql");
/// `pg_lease--0.1.0--0.3.0.sql`: the update PostgreSQL takes from 0.1.0 (one step).
pub const UPDATE_0_1_0_TO_0_3_0: &str = include_str!("../../extension/pg_lease--0.1.0--0.3.0.sql");
/// `pg_lease--0.1.0--0.2.0.sql` as released (every definition of 0.2.0; still shipped).
pub const UPDATE_0_1_0_TO_0_2_0: &str = include_str!("../../extension/pg_lease--0.1.0--0.2.0.sql");
/// `released/pg_lease--0.1.0.sql`: the install script of 0.1.0 as released (not shipped:
/// no install of a version with known contract bugs).
pub const BASE_SCRIPT: &str = include_str!("../../extension/released/pg_lease--0.1.0.sql");

/// The released version whose install script is [`BASE_SCRIPT`].
pub const BASE_VERSION: &str = "0.1.0";

/// A released version older than [`VERSION`], rebuilt from the released scripts kept in the
/// repository (never edited).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Release {
    V0_1_0,
    V0_2_0,
}

impl Release {
    /// Every older release, oldest first.
    pub const ALL: [Release; 2] = [Release::V0_1_0, Release::V0_2_0];

    pub fn version(self) -> &'static str {
        match self {
            Release::V0_1_0 => "0.1.0",
            Release::V0_2_0 => "0.2.0",
        }
    }

    /// The release named by its version.
    pub fn from_version(version: &str) -> Option<Release> {
        Release::ALL.into_iter().find(|r| r.version() == version)
    }

    /// The scripts `CREATE EXTENSION` runs to install it, as (file name, text) under the
    /// extension name `name`: 0.1.0's install script, and for 0.2.0 the update after it.
    pub fn scripts(self, name: &str) -> Vec<(String, String)> {
        let mut scripts = vec![(format!("{name}--0.1.0.sql"), BASE_SCRIPT.to_string())];
        if self == Release::V0_2_0 {
            scripts.push((
                format!("{name}--0.1.0--0.2.0.sql"),
                UPDATE_0_1_0_TO_0_2_0.to_string(),
            ));
        }
        scripts
    }

    /// The release as an extension of its own named `name` (`default_version` its version).
    pub fn files(self, name: &str) -> ExtensionFiles {
        ExtensionFiles {
            name: name.to_string(),
            control: control_for(self.version()),
            scripts: self.scripts(name),
        }
    }
}

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

/// The script files of pg_lease as shipped, under the extension name `name`, with
/// `install` as its 0.3.0 install script.
fn scripts(name: &str, install: String) -> Vec<(String, String)> {
    vec![
        (format!("{name}--{VERSION}.sql"), install),
        (
            format!("{name}--0.1.0--0.2.0.sql"),
            UPDATE_0_1_0_TO_0_2_0.to_string(),
        ),
        (
            format!("{name}--0.2.0--{VERSION}.sql"),
            UPDATE_0_2_0_TO_0_3_0.to_string(),
        ),
        (
            format!("{name}--0.1.0--{VERSION}.sql"),
            UPDATE_0_1_0_TO_0_3_0.to_string(),
        ),
    ]
}

/// One extension to install: its control file and versioned scripts.
#[derive(Debug, Clone)]
pub struct ExtensionFiles {
    pub name: String,
    pub control: String,
    /// (file name, content), e.g. ("pg_lease--0.3.0.sql", SCRIPT)
    pub scripts: Vec<(String, String)>,
}

impl ExtensionFiles {
    /// The control file's `default_version`.
    pub fn default_version(&self) -> Option<String> {
        default_version(&self.control)
    }

    /// The version `CREATE EXTENSION` of these files must install: the control file's
    /// `default_version` (a user's 0.2.0 build is at 0.2.0), else this checkout's.
    pub fn created_version(&self) -> String {
        self.default_version()
            .unwrap_or_else(|| VERSION.to_string())
    }

    /// What `CREATE EXTENSION` runs for the default version, as one script (for a gate
    /// given one SQL file and the control file): the version's install script, or, when
    /// there is none, an older version's install script followed by the update from it
    /// (how 0.2.0 is installed).
    pub fn install_script(&self) -> String {
        let Some(version) = self.default_version() else {
            return String::new();
        };
        let script = |file: &str| {
            self.scripts
                .iter()
                .find(|(n, _)| n == file)
                .map(|(_, t)| t.clone())
        };
        if let Some(direct) = script(&format!("{}--{version}.sql", self.name)) {
            return direct;
        }
        let suffix = format!("--{version}.sql");
        for (file, update) in &self.scripts {
            let Some(from) = file
                .strip_prefix(&format!("{}--", self.name))
                .and_then(|rest| rest.strip_suffix(&suffix))
                .filter(|from| !from.contains("--") && !from.is_empty())
            else {
                continue;
            };
            if let Some(base) = script(&format!("{}--{from}.sql", self.name)) {
                return format!("{base}\n{update}");
            }
        }
        String::new()
    }

    /// pg_lease as shipped in `extension/`.
    pub fn pg_lease() -> ExtensionFiles {
        ExtensionFiles::renamed(NAME)
    }

    /// pg_lease 0.1.0 as released (its install script alone, `default_version = '0.1.0'`),
    /// under the extension name `pg_lease_v0_1_0`. Its objects live in schema `lease` like
    /// pg_lease's, so the two cannot be created in the same database.
    pub fn version_0_1_0() -> ExtensionFiles {
        Release::V0_1_0.files(NAME_0_1_0)
    }

    /// pg_lease 0.2.0 as released (0.1.0's install script and the update to 0.2.0,
    /// `default_version = '0.2.0'`), under the extension name `pg_lease_v0_2_0`: the
    /// version the 0.3.0 fixes are compared with.
    pub fn version_0_2_0() -> ExtensionFiles {
        Release::V0_2_0.files(NAME_0_2_0)
    }

    /// These files under the name `name`, plus the install scripts of `release` (when not
    /// there already): an extension that can be created at `release` and then updated with
    /// this build's update scripts (`CREATE EXTENSION name VERSION '0.1.0'`, then
    /// `ALTER EXTENSION name UPDATE`).
    pub fn updatable_from(&self, release: Release, name: &str) -> ExtensionFiles {
        let mut scripts: Vec<(String, String)> = self
            .scripts
            .iter()
            .map(|(file, text)| {
                let rest = file.strip_prefix(self.name.as_str()).unwrap_or(file);
                (format!("{name}{rest}"), text.clone())
            })
            .collect();
        for (file, text) in release.scripts(name) {
            if !scripts.iter().any(|(f, _)| *f == file) {
                scripts.push((file, text));
            }
        }
        ExtensionFiles {
            name: name.to_string(),
            control: self.control.clone(),
            scripts,
        }
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

    /// pg_lease with `edits` applied to its 0.3.0 definitions ([`SCRIPT`]), each to exactly
    /// one occurrence of its text, as an extension of its own, `pg_lease_<name>`: the
    /// edited install script alone (a build, not an update).
    pub fn edited(
        name: &'static str,
        edits: &'static [(&'static str, &'static str)],
    ) -> Result<ExtensionFiles, StaleMutant> {
        let script = crate::mutants::apply(name, SCRIPT, edits)?;
        let name = format!("{NAME}_{name}");
        Ok(ExtensionFiles {
            scripts: vec![(format!("{name}--{VERSION}.sql"), script)],
            control: CONTROL.to_string(),
            name,
        })
    }
}

/// The lease table of the pg_lease build created in the current database, schema-qualified,
/// whatever its version (`lease.leases` in 0.1.0 and 0.2.0, `lease_internal.leases` from
/// 0.3.0): the extension member table named `leases` that no table inherits from (0.3.0's
/// `lease_dump.leases` is its parent). Readable by the superuser.
pub const LEASE_TABLE_SQL: &str = "SELECT pg_catalog.format('%I.%I', n.nspname, c.relname) \
     FROM pg_catalog.pg_class AS c \
     JOIN pg_catalog.pg_namespace AS n ON n.oid = c.relnamespace \
     JOIN pg_catalog.pg_depend AS d ON d.classid = 'pg_catalog.pg_class'::pg_catalog.regclass \
      AND d.objid = c.oid AND d.deptype = 'e' \
    WHERE c.relname = 'leases' AND c.relkind = 'r' \
      AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_inherits AS i WHERE i.inhparent = c.oid)";

/// The lease table ([`LEASE_TABLE_SQL`]) of the database `client` is connected to; an
/// error when there is none or more than one.
pub async fn lease_table<C: tokio_postgres::GenericClient>(
    client: &C,
) -> Result<String, tokio_postgres::Error> {
    client.query_one(LEASE_TABLE_SQL, &[]).await?.try_get(0)
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
                "pg_lease_under_test--0.1.0--0.3.0.sql",
                "pg_lease_under_test--0.2.0--0.3.0.sql",
                "pg_lease_under_test--0.3.0.sql",
            ]
        );
        // No install script of an older version is shipped.
        assert!(!names.contains(&"pg_lease_under_test--0.1.0.sql"));
        let digests = build.script_digests();
        assert_eq!(digests.len(), 4);
        assert!(digests.iter().all(|(_, hex)| hex.len() == 64));
    }

    #[test]
    fn the_install_script_is_what_create_extension_runs_for_the_default_version() {
        assert_eq!(ExtensionFiles::pg_lease().install_script(), SCRIPT);
        let v020 = ExtensionFiles::version_0_2_0().install_script();
        assert_eq!(v020, format!("{BASE_SCRIPT}\n{UPDATE_0_1_0_TO_0_2_0}"));
        assert_eq!(
            ExtensionFiles::version_0_1_0().install_script(),
            BASE_SCRIPT
        );
        let upd = ExtensionFiles::pg_lease().updatable_from(Release::V0_2_0, "x");
        let names: Vec<&str> = upd.scripts.iter().map(|(n, _)| n.as_str()).collect();
        assert!(names.contains(&"x--0.1.0.sql") && names.contains(&"x--0.3.0.sql"));
        assert_eq!(
            names
                .iter()
                .filter(|n| **n == "x--0.1.0--0.2.0.sql")
                .count(),
            1
        );
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
