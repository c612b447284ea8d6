//! The environment a result was measured in: versions, machine, storage and the settings
//! that decide what a commit costs.

use crate::error::{BenchError, Result};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::Path;

/// The server settings recorded with every result.
pub const GUCS: &[&str] = &[
    "fsync",
    "synchronous_commit",
    "wal_sync_method",
    "full_page_writes",
    "shared_buffers",
    "wal_level",
    "max_connections",
];

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Environment {
    /// `SELECT version()`.
    pub server_version: String,
    pub server_bin_dir: String,
    pub pgbench_version: String,
    pub pgbench_path: String,
    /// Why this pgbench (e.g. the server's own build has none).
    pub pgbench_note: String,
    pub extension: String,
    pub extension_version: String,
    pub os: String,
    pub kernel: String,
    pub cpu_model: String,
    pub cpu_cores: usize,
    pub memory_total: String,
    /// The file system holding the data directory.
    pub storage: Storage,
    pub gucs: BTreeMap<String, String>,
    pub leasecheck_version: String,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Storage {
    pub data_dir: String,
    pub mount_point: String,
    pub filesystem: String,
    pub device: String,
    /// `/sys/block/<dev>/queue/rotational` when the device is a block device ("0" SSD,
    /// "1" spinning), else "unknown".
    pub rotational: String,
}

/// The machine's side (no server needed).
pub fn machine() -> (String, String, String, usize, String) {
    let os = read("/etc/os-release")
        .lines()
        .find_map(|l| l.strip_prefix("PRETTY_NAME="))
        .map(|v| v.trim_matches('"').to_string())
        .unwrap_or_else(|| "unknown".into());
    let kernel = read("/proc/sys/kernel/osrelease").trim().to_string();
    let cpu = read("/proc/cpuinfo")
        .lines()
        .find_map(|l| l.strip_prefix("model name"))
        .map(|v| v.trim_start_matches([' ', '\t', ':']).trim().to_string())
        .unwrap_or_else(|| "unknown".into());
    let cores = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(0);
    let memory = read("/proc/meminfo")
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .map(|v| v.trim().to_string())
        .unwrap_or_else(|| "unknown".into());
    (os, kernel, cpu, cores, memory)
}

fn read(path: &str) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

/// The mount holding `data_dir` (the longest mount point that is a prefix of its real
/// path, from /proc/self/mountinfo).
pub fn storage(data_dir: &Path) -> Result<Storage> {
    let real = data_dir
        .canonicalize()
        .map_err(BenchError::io("resolving the data directory", data_dir))?;
    let mut best: Option<(String, String, String)> = None;
    for line in read("/proc/self/mountinfo").lines() {
        // id parent major:minor root mount-point options... - fstype source super-options
        let Some((left, right)) = line.split_once(" - ") else {
            continue;
        };
        let Some(mount) = left.split_whitespace().nth(4) else {
            continue;
        };
        let mut r = right.split_whitespace();
        let (fs, source) = (r.next().unwrap_or(""), r.next().unwrap_or(""));
        let longer = best.as_ref().is_none_or(|(m, _, _)| mount.len() >= m.len());
        if real.starts_with(mount) && longer {
            best = Some((mount.to_string(), fs.to_string(), source.to_string()));
        }
    }
    let (mount_point, filesystem, device) =
        best.unwrap_or_else(|| ("unknown".into(), "unknown".into(), "unknown".into()));
    Ok(Storage {
        data_dir: real.display().to_string(),
        rotational: rotational(&device),
        mount_point,
        filesystem,
        device,
    })
}

fn rotational(device: &str) -> String {
    let Some(name) = device.strip_prefix("/dev/") else {
        return "unknown".into();
    };
    // A partition's queue lives under its disk: try the name, then without trailing digits.
    let disk = name.trim_end_matches(|c: char| c.is_ascii_digit());
    let disk = disk
        .strip_suffix('p')
        .filter(|d| d.starts_with("nvme"))
        .unwrap_or(disk);
    [name, disk]
        .iter()
        .map(|d| read(&format!("/sys/block/{d}/queue/rotational")))
        .find(|v| !v.trim().is_empty())
        .map(|v| v.trim().to_string())
        .unwrap_or_else(|| "unknown".into())
}

/// `SELECT version()` and the recorded settings.
pub async fn server(client: &tokio_postgres::Client) -> Result<(String, BTreeMap<String, String>)> {
    let version: String = client
        .query_one("SELECT version()", &[])
        .await
        .and_then(|r| r.try_get(0))
        .map_err(BenchError::sql("reading the server version"))?;
    let mut gucs = BTreeMap::new();
    for name in GUCS {
        let value: String = client
            .query_one("SELECT current_setting($1)", &[name])
            .await
            .and_then(|r| r.try_get(0))
            .map_err(BenchError::sql(format!("reading setting {name}")))?;
        gucs.insert(name.to_string(), value);
    }
    Ok((version, gucs))
}
