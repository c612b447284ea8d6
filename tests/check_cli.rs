//! `leasecheck check`: what it refuses before starting anything, and a stepped run's
//! files (the campaigns and plans themselves are tested in harness/tests/campaign.rs and
//! harness/tests/stepped.rs).

use std::path::Path;
use std::process::Command;

/// Exit status, stderr and stdout of `leasecheck check ARGS`.
fn check_out(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_leasecheck"))
        .arg("check")
        .args(args)
        .output()
        .expect("leasecheck runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

fn check(args: &[&str]) -> (i32, String) {
    let (code, err, _) = check_out(args);
    (code, err)
}

#[test]
fn the_options_of_the_other_mode_are_refused() {
    for (args, option) in [
        (&["--mode", "stepped", "--ops", "10"][..], "--ops"),
        (&["--mode", "stepped", "--time", "1s"][..], "--time"),
        (&["--steps", "10"][..], "--steps"),
        (&["--plans", "3"][..], "--plans"),
    ] {
        let (code, err) = check(args);
        assert_eq!(code, 2, "{args:?}: {err}");
        assert!(
            err.contains(&format!("{option} is an option of --mode")),
            "{err}"
        );
    }
    let (code, err) = check(&["--mode", "stepped", "--steps", "0"]);
    assert_eq!(code, 2, "{err}");
}

/// The single directory `leasecheck check` made under `runs`.
fn run_dir(runs: &Path) -> std::path::PathBuf {
    let mut dirs: Vec<_> = std::fs::read_dir(runs)
        .expect("a runs directory")
        .map(|e| e.expect("an entry").path())
        .collect();
    assert_eq!(dirs.len(), 1, "{dirs:?}");
    dirs.remove(0)
}

/// A stepped run that finds a violation exits 1 and writes the history, the verdict and
/// the timeline page, and says where the page is; the seed replays the same plan.
/// Bounded: one throwaway cluster and a plan of 16 steps per run (~2 s each).
#[test]
fn a_stepped_run_writes_its_history_verdict_and_timeline() {
    let runs = tempfile::tempdir().unwrap();
    let dir = runs.path().to_str().unwrap();
    let args = [
        "--mode",
        "stepped",
        "--target",
        "mutant:acquire_ignores_holder",
        "--seed",
        "30",
        "--history-dir",
        dir,
    ];
    let (code, err, out) = check_out(&args);
    assert_eq!(code, 1, "{err}\n{out}");
    let run = run_dir(runs.path());
    for file in ["history.jsonl", "verdict.json", "timeline.html"] {
        assert!(run.join(file).is_file(), "{file} missing in {run:?}");
    }
    let page = run.join("timeline.html");
    assert!(
        out.contains(&format!("timeline of this verdict: {}", page.display())),
        "{out}"
    );
    assert!(out.contains("--mode stepped --seed 30"), "{out}");
    let verdict: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(run.join("verdict.json")).unwrap()).unwrap();
    assert_eq!(verdict["verdict"], "violation");
    assert_eq!(verdict["mode"], "stepped");
    assert_eq!(verdict["seed"], 30);
    assert_eq!(verdict["timeline"], "timeline.html");
    assert_eq!(verdict["plan"]["origin"]["seed"], 30);
    assert!(std::fs::read_to_string(page)
        .unwrap()
        .contains("VIOLATION of invariant 1"));

    // Negative control: the same plan on pg_lease exits 0 and draws no page unasked.
    let runs = tempfile::tempdir().unwrap();
    let dir = runs.path().to_str().unwrap();
    let (code, err, out) = check_out(&["--mode", "stepped", "--seed", "30", "--history-dir", dir]);
    assert_eq!(code, 0, "{err}\n{out}");
    let run = run_dir(runs.path());
    assert!(run.join("verdict.json").is_file());
    assert!(!run.join("timeline.html").exists());
    assert!(!out.contains("timeline of this verdict"), "{out}");
}

#[test]
fn an_unknown_target_or_a_bad_workload_is_refused_with_exit_status_2() {
    let (code, err) = check(&["--target", "mutant:nope"]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("unknown target") && err.contains("release_keeps_epoch"),
        "{err}"
    );
    let (code, err) = check(&["--processes", "1"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("processes must be in 2..=32"), "{err}");
    let (code, err) = check(&["--ops", "5", "--time", "1s"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("cannot be used with"), "{err}");
}
