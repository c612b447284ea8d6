//! A private copy of an install for this process, so that nothing ever writes into a shared
//! PostgreSQL install (extension files of pg_lease, its mutants and test builds go into the
//! copy, and other processes' copies never see them).
//!
//! The copy is a mirror of the install's directories under one temporary root: the binaries
//! are hard links (PostgreSQL resolves symbolic links to find its own location, from which
//! it derives the share and library directories), the share directory's `extension/` is a
//! real directory of symbolic links to the original files (our files are written beside
//! them), and every other entry is a symbolic link. It is removed at process exit, or by a
//! watchdog if the process dies.

use super::procs::{self, Watchdog};
use super::{PgError, PgInstall, Result};
use std::collections::HashMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

/// The private copy of every install this process uses, by the original's bin directory.
static COPIES: OnceLock<Mutex<HashMap<PathBuf, PgInstall>>> = OnceLock::new();
/// The watchdogs of the copies (kept for the whole process).
static WATCHDOGS: Mutex<Vec<Watchdog>> = Mutex::new(Vec::new());
/// Registry ids of the copies, counting down from the top (clusters count up from 1).
static NEXT_ID: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(u64::MAX);

/// This process's private copy of `install`, made on first use.
pub(crate) fn private_copy(install: &PgInstall) -> Result<PgInstall> {
    let copies = COPIES.get_or_init(|| Mutex::new(HashMap::new()));
    let mut guard = copies.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(copy) = guard.get(&install.bin_dir) {
        return Ok(copy.clone());
    }
    let copy = make_copy(install)?;
    guard.insert(install.bin_dir.clone(), copy.clone());
    Ok(copy)
}

fn make_copy(install: &PgInstall) -> Result<PgInstall> {
    let canon = |p: &Path| fs::canonicalize(p).map_err(|e| PgError::io("resolving", p, e));
    let (bin, share) = (canon(&install.bin_dir)?, canon(&install.share_dir)?);
    let common = common_ancestor(&bin, &share);
    let root = make_root(install.version.major)?;
    let id = NEXT_ID.fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
    procs::register(id, &root);
    WATCHDOGS
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .push(Watchdog::spawn(&root));
    let layout = Layout {
        bin: &bin,
        extensions: &share.join("extension"),
    };
    mirror(&common, &root, &layout).map_err(|e| PgError::io("mirroring the install", &root, e))?;
    let relative = |p: &Path| root.join(p.strip_prefix(&common).unwrap_or(p));
    Ok(PgInstall {
        bin_dir: relative(&bin),
        share_dir: relative(&share),
        version: install.version.clone(),
        source: install.source,
    })
}

/// The deepest directory containing both paths.
fn common_ancestor(a: &Path, b: &Path) -> PathBuf {
    a.ancestors()
        .find(|p| b.starts_with(p))
        .map_or_else(|| PathBuf::from("/"), Path::to_path_buf)
}

fn make_root(major: u32) -> Result<PathBuf> {
    let root = procs::scratch_path(&format!(
        "leasecheck-pg-install-{}-{major}",
        std::process::id()
    ));
    fs::create_dir_all(&root).map_err(|e| PgError::io("creating the private install", &root, e))?;
    Ok(root)
}

/// What the mirror must make real rather than link.
struct Layout<'a> {
    /// Hard-linked file by file.
    bin: &'a Path,
    /// A real directory of links, where extension files are written.
    extensions: &'a Path,
}

/// Mirrors directory `src` at `dst`.
fn mirror(src: &Path, dst: &Path, layout: &Layout<'_>) -> std::io::Result<()> {
    fs::create_dir_all(dst)?;
    for entry in fs::read_dir(src)? {
        let path = entry?.path();
        let Some(name) = path.file_name() else {
            continue;
        };
        let target = dst.join(name);
        if path == layout.bin {
            link_files(&path, &target)?;
        } else if path == layout.extensions {
            symlink_entries(&path, &target)?;
        } else if layout.bin.starts_with(&path) || layout.extensions.starts_with(&path) {
            mirror(&path, &target, layout)?;
        } else {
            std::os::unix::fs::symlink(&path, &target)?;
        }
    }
    Ok(())
}

/// A real directory whose files are hard links (copies across file systems) of `src`'s.
fn link_files(src: &Path, dst: &Path) -> std::io::Result<()> {
    fs::create_dir_all(dst)?;
    for entry in fs::read_dir(src)? {
        let path = entry?.path();
        let Some(name) = path.file_name() else {
            continue;
        };
        let target = dst.join(name);
        if fs::hard_link(&path, &target).is_err() {
            fs::copy(&path, &target)?;
        }
    }
    Ok(())
}

/// A real directory of symbolic links to `src`'s entries.
fn symlink_entries(src: &Path, dst: &Path) -> std::io::Result<()> {
    fs::create_dir_all(dst)?;
    for entry in fs::read_dir(src)? {
        let path = entry?.path();
        if let Some(name) = path.file_name() {
            std::os::unix::fs::symlink(&path, dst.join(name))?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn common_ancestor_of_debian_and_npm_layouts() {
        assert_eq!(
            common_ancestor(
                Path::new("/usr/lib/postgresql/15/bin"),
                Path::new("/usr/share/postgresql/15")
            ),
            PathBuf::from("/usr")
        );
        assert_eq!(
            common_ancestor(
                Path::new("/c/pg14/bin"),
                Path::new("/c/pg14/share/postgresql")
            ),
            PathBuf::from("/c/pg14")
        );
    }
}
