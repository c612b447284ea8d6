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
    let tmp = dir.join(format!(".{name}.{}.tmp", std::process::id()));
    fs::write(&tmp, content).map_err(err)?;
    use std::os::unix::fs::PermissionsExt;
    fs::set_permissions(&tmp, fs::Permissions::from_mode(0o644)).map_err(err)?;
    fs::rename(&tmp, &path).map_err(|e| {
        let _ = fs::remove_file(&tmp);
        err(e)
    })
}
