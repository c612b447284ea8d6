//! `leasecheck bench --compare`: passes for an unchanged build and fails, naming renew, for
//! a mutant whose renew sleeps 1 ms (`pg_sleep(0.001)` edited into the shipped SQL). The
//! three runs (baseline, unchanged, mutant) are quick runs of W1-cycle and its floor at one
//! client by the Rust driver (pgbench's figures are reported, never compared), 3 repeats
//! each, their clusters in /dev/shm (`common::bench`; the committed baselines record the
//! disk).

mod common;

use common::only_dir;
use harness::extension::{CONTROL, SCRIPT, VERSION};
use std::path::Path;

const RUN: &[&str] = &[
    "--quick",
    "--clients",
    "1",
    "--repeats",
    "3",
    "--workloads",
    "W1-cycle,floor-update",
    "--no-open-loop",
    "--no-pgbench",
];

fn bench(extra: &[&str]) -> (i32, String, String) {
    common::bench(&[RUN, extra].concat())
}

/// pg_lease whose successful renew sleeps 1 ms first, as extension `pg_lease_renew_sleeps`.
fn renew_sleeps(dir: &Path) {
    let marker = "            status := 'ok';\n            expires_at := v_expires;";
    assert_eq!(
        SCRIPT.matches(marker).count(),
        1,
        "the renew success path moved"
    );
    let script = SCRIPT.replacen(
        marker,
        &format!("            PERFORM pg_sleep(0.001);\n{marker}"),
        1,
    );
    let name = "pg_lease_renew_sleeps";
    let files = [
        (format!("{name}.control"), CONTROL.to_string()),
        (format!("{name}--{VERSION}.sql"), script),
    ];
    for (file, text) in files {
        std::fs::write(dir.join(file), text).expect("writing the mutant");
    }
}

#[test]
fn compare_passes_an_unchanged_build_and_flags_a_renew_that_sleeps() {
    let tmp = tempfile::tempdir().expect("a temp dir");
    let path = |p: &str| tmp.path().join(p);
    let arg = |p: &Path| p.to_str().expect("utf-8 path").to_string();
    let (code, stdout, stderr) = bench(&["--out", &arg(&path("base"))]);
    assert_eq!(code, 0, "baseline: {stdout}\n{stderr}");
    let baseline = arg(&only_dir(&path("base")));

    let (code, stdout, stderr) = bench(&["--out", &arg(&path("same")), "--compare", &baseline]);
    assert_eq!(code, 0, "unchanged build flagged:\n{stdout}\n{stderr}");
    assert!(
        stdout.contains("ok        W1-cycle/renew @1 [rust-closed]"),
        "{stdout}"
    );

    std::fs::create_dir(path("mutant")).expect("mkdir");
    renew_sleeps(&path("mutant"));
    let (code, stdout, stderr) = bench(&[
        "--out",
        &arg(&path("mutant-out")),
        "--extension-dir",
        &arg(&path("mutant")),
        "--compare",
        &baseline,
    ]);
    assert_eq!(
        code, 1,
        "the mutant was not flagged (exit 2 would be a failed run):\n{stdout}\n{stderr}"
    );
    assert!(
        stdout.contains("REGRESSED W1-cycle/renew @1 [rust-closed]"),
        "{stdout}"
    );
    let result =
        bench::BenchResult::read(&only_dir(&path("mutant-out"))).expect("the mutant's result");
    assert_eq!(result.environment.extension, "pg_lease_renew_sleeps");
}
