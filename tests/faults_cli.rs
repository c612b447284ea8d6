//! `leasecheck faults` and `leasecheck check --nemesis`: what they refuse, a named check's
//! summary line, and a short run under faults with its fault counts in verdict.json (the
//! checks themselves are tested in failure/tests/faults.rs).

use std::process::Command;

/// Exit status, stderr and stdout of `leasecheck ARGS`.
fn leasecheck(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_leasecheck"))
        .args(args)
        .output()
        .expect("leasecheck runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

#[test]
fn unknown_faults_and_scripted_ones_in_a_campaign_are_refused() {
    let (code, err, _) = leasecheck(&["faults", "--fault", "meteor"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("unknown fault \"meteor\""), "{err}");
    let (code, err, _) = leasecheck(&["check", "--nemesis", "crash,meteor"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("unknown fault \"meteor\""), "{err}");
    let (code, err, _) = leasecheck(&["check", "--nemesis", "wait-wake"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("wait-wake is a scripted situation"), "{err}");
    let (code, err, _) = leasecheck(&["check", "--nemesis", "crash", "--ops", "10"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("use --time, not --ops"), "{err}");
}

#[test]
fn the_list_names_every_fault_with_its_control() {
    let (code, err, out) = leasecheck(&["faults", "--list"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(out.lines().count(), nemesis::Fault::ALL.len(), "{out}");
    for line in out.lines() {
        assert!(line.contains("defends inv"), "{line}");
        assert!(line.contains("must fail with"), "{line}");
    }
}

/// One scripted check (a cluster and a few calls, ~2-4 s) prints one PASS line and the
/// totals, and exits 0.
#[test]
fn a_named_check_prints_its_summary_line() {
    let (code, err, out) = leasecheck(&["faults", "--fault", "terminate"]);
    assert_eq!(code, 0, "{err}\n{out}");
    let lines: Vec<&str> = out.lines().filter(|l| l.contains("terminate")).collect();
    assert_eq!(lines.len(), 1, "{out}");
    assert!(lines[0].starts_with("PASS terminate"), "{out}");
    assert!(out.contains("1 passed, 0 failed, 0 could not run"), "{out}");
}

/// A 6-second campaign on one key under injected lapses (TTLs of the default workload, up
/// to a month: the key is mostly held): linearizable, and verdict.json has the schedule and how often lapse was injected.
#[test]
fn a_run_under_faults_writes_its_fault_counts() {
    let runs = tempfile::tempdir().expect("a temp dir");
    let dir = runs.path().to_str().expect("a UTF-8 path");
    let (code, err, out) = leasecheck(&[
        "check",
        "--nemesis",
        "lapse",
        "--time",
        "6s",
        "--processes",
        "3",
        "--keys",
        "1",
        "--seed",
        "7",
        "--history-dir",
        dir,
    ]);
    assert_eq!(code, 0, "{err}\n{out}");
    let run = std::fs::read_dir(runs.path())
        .expect("the runs directory")
        .next()
        .expect("one run")
        .expect("an entry")
        .path();
    let verdict: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(run.join("verdict.json")).expect("verdict.json"),
    )
    .expect("JSON");
    assert_eq!(verdict["verdict"], "linearizable", "{verdict}");
    let injected = verdict["nemesis"]["injected"]["lapse"]["injected"]
        .as_u64()
        .expect("a lapse count");
    assert!(injected >= 1, "{verdict}");
    assert!(
        !verdict["nemesis"]["schedule"]
            .as_array()
            .expect("a schedule")
            .is_empty(),
        "{verdict}"
    );
}
