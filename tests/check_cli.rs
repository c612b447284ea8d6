//! `leasecheck check`: what it refuses before starting anything, a stepped run's files,
//! and a written plan (`--plan`) run and written back (the campaigns and plans themselves
//! are tested in harness/tests/campaign.rs and harness/tests/stepped.rs).

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
    assert!(
        verdict["coverage"].is_null(),
        "a violation has no linearization to count"
    );
    assert!(std::fs::read_to_string(page)
        .unwrap()
        .contains("VIOLATION of invariant 1"));

    // Negative control: the same plan on pg_lease exits 0 and draws no page unasked.
    let runs = tempfile::tempdir().unwrap();
    let dir = runs.path().to_str().unwrap();
    let (code, err, out) = check_out(&["--mode", "stepped", "--seed", "30", "--history-dir", dir]);
    assert_eq!(code, 0, "{err}\n{out}");
    let run = run_dir(runs.path());
    let verdict: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(run.join("verdict.json")).unwrap()).unwrap();
    // The pass says which spec branches its linearization took, and which it missed.
    let coverage = &verdict["coverage"];
    let (reached, of) = (&coverage["reached"], &coverage["of"]);
    let missing = coverage["missing"].as_array().expect("missing branches");
    assert!(reached.as_u64().is_some_and(|n| n > 0), "{coverage}");
    assert_eq!(
        reached.as_u64().unwrap() + missing.len() as u64,
        of.as_u64().unwrap(),
        "{coverage}"
    );
    assert!(!run.join("timeline.html").exists());
    assert!(!out.contains("timeline of this verdict"), "{out}");
}

/// Two owners on one key: p1's acquire is denied while p0's lease lives (a mutant that
/// ignores the holder grants it, breaking invariant 1); then a look in a transaction.
const WRITTEN_PLAN: &str = "\
# two owners, one key
processes 2
keys 1
p0 acquire k0 as own ttl 5s
p1 acquire k0 as own ttl 5s
p1 begin
p1 inspect k0
p1 rollback
p0 release k0 as own epoch own
";

/// `--plan FILE` runs a written plan: on a mutant it finds the violation (exit 1), writes
/// the plan's text form as plan.txt beside the verdict and says how to repeat it; that file
/// runs again on pg_lease and passes (exit 0, no plan.txt: it passed).
/// Bounded: two throwaway clusters and a plan of 6 steps.
#[test]
fn a_written_plan_runs_and_a_failing_one_is_written_back_as_plan_txt() {
    let work = tempfile::tempdir().unwrap();
    let file = work.path().join("race.plan");
    std::fs::write(&file, WRITTEN_PLAN).unwrap();
    let runs = work.path().join("runs");
    let (file_arg, runs_arg) = (file.to_str().unwrap(), runs.to_str().unwrap());
    let mutant = "mutant:acquire_ignores_holder";
    let args = [
        "--mode",
        "stepped",
        "--plan",
        file_arg,
        "--target",
        mutant,
        "--history-dir",
        runs_arg,
    ];
    let (code, err, out) = check_out(&args);
    assert_eq!(code, 1, "{err}\n{out}");
    let run = run_dir(&runs);
    let written = run.join("plan.txt");
    assert!(
        out.contains(&format!(
            "repeat this plan with --mode stepped --plan {}",
            written.display()
        )),
        "{out}"
    );
    let verdict: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(run.join("verdict.json")).unwrap()).unwrap();
    assert_eq!(verdict["verdict"], "violation");
    assert_eq!(verdict["plan"]["origin"], "written");
    assert_eq!(verdict["seed"], serde_json::Value::Null);
    assert_eq!(verdict["first_seed"], serde_json::Value::Null);
    assert_eq!(verdict["plan"]["steps"].as_array().map(Vec::len), Some(6));
    let text = std::fs::read_to_string(&written).unwrap();
    assert!(
        text.starts_with("# plan written by hand\nprocesses 2\nkeys 1\n"),
        "{text}"
    );
    assert!(text.contains("\np1 acquire k0 as own ttl 5s\n"), "{text}");

    // Negative control: the written-back plan on pg_lease passes and writes no plan.txt.
    let again = work.path().join("again");
    let (written_arg, again_arg) = (written.to_str().unwrap(), again.to_str().unwrap());
    let args = [
        "--mode",
        "stepped",
        "--plan",
        written_arg,
        "--history-dir",
        again_arg,
    ];
    let (code, err, out) = check_out(&args);
    assert_eq!(code, 0, "{err}\n{out}");
    let run = run_dir(&again);
    assert!(run.join("verdict.json").is_file());
    assert!(!run.join("plan.txt").exists());
    assert!(
        out.contains(&format!(
            "repeat this plan with --mode stepped --plan {}",
            written.display()
        )),
        "{out}"
    );
}

/// p0's lease of 800 ms runs out while the server is down (a fast shutdown, 1.2 s down):
/// lapsed after it, and taken over.
const RESTART_PLAN: &str = "\
processes 2
keys 1
p0 acquire k0 ttl 800ms expect granted
p0 restart fast 1200ms
p0 renew k0 ttl 1min expect lapsed
p1 acquire k0 ttl 1min expect granted
";

/// A written plan's restart step restarts the run's throwaway cluster: the plan passes
/// (exit 0) and its history records the restart. Control: the same plan expecting the
/// renew to succeed across the downtime is a finding (exit 1) naming the step.
/// Bounded: two throwaway clusters, a plan of 4 steps with 1.2 s of downtime.
#[test]
fn a_written_plan_restarts_the_throwaway_cluster() {
    let work = tempfile::tempdir().unwrap();
    for (name, text, want) in [
        ("restart.plan", RESTART_PLAN.to_string(), 0),
        (
            "wrong.plan",
            RESTART_PLAN.replace("expect lapsed", "expect ok"),
            1,
        ),
    ] {
        let file = work.path().join(name);
        std::fs::write(&file, &text).unwrap();
        let runs = work.path().join(format!("runs-{name}"));
        let args = [
            "--mode",
            "stepped",
            "--plan",
            file.to_str().unwrap(),
            "--history-dir",
            runs.to_str().unwrap(),
        ];
        let (code, err, out) = check_out(&args);
        assert_eq!(code, want, "{name}: {err}\n{out}");
        let history = std::fs::read_to_string(run_dir(&runs).join("history.jsonl")).unwrap();
        assert!(history.contains("\"restart\""), "{name}: {history}");
        if want == 1 {
            assert!(
                out.contains("EXPECTATION NOT MET: step 2 (`p0 renew k0 as own epoch own ttl 1min expect ok`): expected ok, came back lapsed"),
                "{out}"
            );
        }
    }
}

/// A malformed plan file, and `--plan` beside options that draw plans, are refused before
/// anything starts: exit 2 (no verdict), the message naming the line or saying what to do.
#[test]
fn a_malformed_plan_file_or_a_plan_with_drawing_options_is_refused() {
    let work = tempfile::tempdir().unwrap();
    let file = work.path().join("bad.plan");
    std::fs::write(&file, "processes 2\nkeys 1\n\np0 acquire k1 ttl 5s\n").unwrap();
    let path = file.to_str().unwrap();
    let (code, err) = check(&["--mode", "stepped", "--plan", path]);
    assert_eq!(code, 2, "{err}");
    let want = format!("plan file {path}: line 4: key k1 is out of range: the plan has 1 key (k0)");
    assert!(err.contains(&want), "{err}");
    std::fs::write(&file, "processes 2\n# no steps\n").unwrap();
    let (code, err) = check(&["--mode", "stepped", "--plan", path]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("the plan has no steps"), "{err}");
    let missing = work.path().join("missing.plan");
    let (code, err) = check(&["--mode", "stepped", "--plan", missing.to_str().unwrap()]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("reading the plan file"), "{err}");
    for (args, want) in [
        (
            &["--plan", path][..],
            "--plan runs a written plan one step at a time: add --mode stepped",
        ),
        (
            &["--mode", "stepped", "--plan", path, "--seed", "3"][..],
            "--seed cannot be used with --plan: --seed draws a plan, --plan runs the file's",
        ),
        (
            &["--mode", "stepped", "--plan", path, "--plans", "3"][..],
            "--plans cannot be used with --plan",
        ),
        (
            &["--mode", "stepped", "--plan", path, "--keys", "2"][..],
            "--keys cannot be used with --plan: the file's `keys N` line sets them",
        ),
    ] {
        let (code, err) = check(args);
        assert_eq!(code, 2, "{args:?}: {err}");
        assert!(err.contains(want), "{args:?}: {err}");
    }
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
