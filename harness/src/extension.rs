//! The pg_lease extension files, embedded from `extension/`, and their installation
//! into a PostgreSQL install's extension directory.

use crate::pg::{PgError, PgInstall, Result};
use std::fs;
use std::path::Path;

/// The extension's name, as in `CREATE EXTENSION pg_lease`.
pub const NAME: &str = "pg_lease";
/// The version `CREATE EXTENSION` installs by default.
pub const VERSION: &str = "0.1.0";
/// `pg_lease.control`.
pub const CONTROL: &str = include_str!("../../extension/pg_lease.control");
/// `pg_lease--0.1.0.sql`.
pub const SCRIPT: &str = include_str!("../../extension/pg_lease--0.1.0.sql");

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
            scripts: vec![(format!("{NAME}--{VERSION}.sql"), SCRIPT.to_string())],
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
