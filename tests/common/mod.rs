//! Helpers of the CLI tests (gate_cli, gate_dsn, bench_pipeline, bench_compare); each test
//! binary uses some of them.
#![allow(dead_code)]

use harness::extension::{Mutant, MUTANTS};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Exit status and output (stdout, then stderr) of `leasecheck ARGS`.
pub fn leasecheck(args: &[&str]) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_leasecheck"))
        .args(args)
        .output()
        .expect("leasecheck runs");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.code().unwrap_or(-1), text)
}

/// The gate's `summary.json` in `report`.
pub fn summary(report: &Path) -> Value {
    let text = std::fs::read_to_string(report.join("summary.json")).expect("summary.json");
    serde_json::from_str(&text).expect("summary.json is JSON")
}

/// The invariants a finding that kills the SQL mutant `m` may name, as the checker prints
/// them (the mutant catalogue's, [`harness::mutants::Kill::invariants`]).
pub fn killing_invariants(m: &Mutant) -> Vec<String> {
    m.kill.invariants().iter().map(|i| i.to_string()).collect()
}

/// The catalogued mutant `name`.
pub fn mutant(name: &str) -> &'static Mutant {
    MUTANTS
        .iter()
        .find(|m| m.name == name)
        .expect("a catalogued mutant")
}

/// Exit status, stdout and stderr of `leasecheck bench ARGS`. The cluster lives in /dev/shm
/// when it exists: there a commit's fsync costs little and varies little, while on this
/// machine's shared disk it moved the UPDATE floor between 0.3 and 3 ms from one run to the
/// next (which would drown a 1 ms regression) and one stall outlasted a quick run's 1 s
/// window (the run failed with nothing measured).
pub fn bench(args: &[&str]) -> (i32, String, String) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_leasecheck"));
    cmd.arg("bench").args(args);
    if Path::new("/dev/shm").is_dir() {
        cmd.env("LEASECHECK_TMPDIR", "/dev/shm");
    }
    let out = cmd.output().expect("leasecheck runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The one run directory a bench made under `out`.
pub fn only_dir(out: &Path) -> PathBuf {
    let dirs: Vec<PathBuf> = std::fs::read_dir(out)
        .expect("the out directory")
        .map(|e| e.expect("an entry").path())
        .collect();
    assert_eq!(dirs.len(), 1, "{dirs:?}");
    dirs[0].clone()
}

/// The checks `leasecheck gate ... --list` lists, per major and suite, in order (the
/// `[needs ...]` notes cut).
#[allow(dead_code)]
pub fn listed_checks(args: &[&str]) -> Vec<(u32, String, Vec<String>)> {
    let listed = listed_with_needs(args).into_iter();
    let names = |checks: Vec<(String, bool)>| checks.into_iter().map(|(n, _)| n).collect();
    listed.map(|(m, s, c)| (m, s, names(c))).collect()
}

/// A suite as `--list` lists it: major, suite, and each check with whether it needs a
/// server the gate manages.
pub type ListedSuite = (u32, String, Vec<(String, bool)>);

/// What `leasecheck ARGS --list` lists: per major and suite, each check and whether it
/// needs a server the gate manages (`[needs a managed server: ...]`).
#[allow(dead_code)]
pub fn listed_with_needs(args: &[&str]) -> Vec<ListedSuite> {
    let mut with_list = args.to_vec();
    with_list.push("--list");
    let (code, out) = leasecheck(&with_list);
    assert_eq!(code, 0, "{out}");
    let mut listed: Vec<ListedSuite> = Vec::new();
    let mut major = 0;
    for line in out.lines() {
        if let Some(m) = line.strip_prefix("PG ").and_then(|l| l.strip_suffix(':')) {
            major = m.parse().expect("a major");
        } else if let Some(check) = line.strip_prefix("    ") {
            let mut parts = check.split("  [needs a managed server");
            let name = parts.next().unwrap_or(check).to_string();
            let managed = parts.next().is_some();
            if let Some(last) = listed.last_mut() {
                last.2.push((name, managed));
            }
        } else if let Some(suite) = line.strip_prefix("  ").filter(|l| l.ends_with(')')) {
            let name = suite.split(" (").next().unwrap_or(suite);
            listed.push((major, name.to_string(), Vec::new()));
        } else if line.is_empty() {
            break;
        }
    }
    listed
}

/// Every check of a summary.json with its major and suite, in the report's order.
#[allow(dead_code)]
pub fn each_check(summary: &Value) -> Vec<(u64, &str, &Value)> {
    let mut out = Vec::new();
    for major in summary["majors"].as_array().expect("majors") {
        let number = major["major"].as_u64().unwrap_or(0);
        for suite in major["suites"].as_array().expect("suites") {
            let name = suite["suite"].as_str().unwrap_or("");
            for check in suite["checks"].as_array().expect("checks") {
                out.push((number, name, check));
            }
        }
    }
    out
}
