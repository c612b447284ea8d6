//! An extension's files in an install's extension directory: read back, or written (the
//! harness installs the builds it tests into its private copy of an install).

use super::{PgError, PgInstall, Result};
use crate::extension::ExtensionFiles;
use std::fs;
use std::path::Path;

impl PgInstall {
    /// The files of extension `name` as installed in the extension directory (the
    /// control file and every `<name>--*.sql`).
    pub fn installed_extension(&self, name: &str) -> Result<ExtensionFiles> {
        let dir = self.extension_dir();
        let err = |source| PgError::ExtensionInstall {
            dir: dir.clone(),
            source,
        };
        let control = fs::read_to_string(dir.join(format!("{name}.control"))).map_err(err)?;
        let prefix = format!("{name}--");
        let mut scripts = Vec::new();
        for entry in fs::read_dir(&dir).map_err(err)?.flatten() {
            let file = entry.file_name().to_string_lossy().into_owned();
            if file.starts_with(&prefix) && file.ends_with(".sql") {
                scripts.push((file, fs::read_to_string(entry.path()).map_err(err)?));
            }
        }
        scripts.sort();
        Ok(ExtensionFiles {
            name: name.to_string(),
            control,
            scripts,
        })
    }

    /// Writes `ext`'s files into the extension directory (atomically per
    /// file, and only when the content differs, so concurrent test binaries
    /// never see a half-written script).
    pub fn install_extension(&self, ext: &ExtensionFiles) -> Result<()> {
        let dir = self.extension_dir();
        let mut files = vec![(format!("{}.control", ext.name), ext.control.as_str())];
        files.extend(ext.scripts.iter().map(|(n, c)| (n.clone(), c.as_str())));
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
