//! `leasecheck check-history`: the verdict and its exit status on real files (the examples of
//! specs/HISTORY.md, a malformed file, a history too big for its budget).

use model::history::{jsonl, History, OpRecord, OpResult};
use model::{Interval, Op, Outcome, Span, Ts};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn example(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("specs/examples")
        .join(name)
}

fn check_history(file: &Path, extra: &[&str]) -> (i32, String, String) {
    let out: Output = Command::new(env!("CARGO_BIN_EXE_leasecheck"))
        .arg("check-history")
        .arg(file)
        .args(extra)
        .output()
        .expect("leasecheck runs");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    println!("stdout:\n{stdout}\nstderr:\n{stderr}");
    (out.status.code().unwrap_or(-1), stdout, stderr)
}

#[test]
fn the_linearizable_example_passes() {
    let (code, stdout, _) = check_history(&example("history-linearizable.jsonl"), &[]);
    assert_eq!(code, 0);
    assert!(stdout.starts_with("LINEARIZABLE"), "{stdout}");
}

#[test]
fn the_violation_example_breaks_invariant_1() {
    let (code, stdout, _) = check_history(&example("history-violation.jsonl"), &[]);
    assert_eq!(code, 1);
    assert!(stdout.starts_with("VIOLATION of invariant 1 "), "{stdout}");
    // the explanation names the two grants
    assert!(
        stdout.contains("worker-a") && stdout.contains("worker-b"),
        "{stdout}"
    );
}

#[test]
fn a_malformed_file_is_unreadable_with_its_line_and_field() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("bad.jsonl");
    let good = std::fs::read_to_string(example("history-linearizable.jsonl")).expect("example");
    let bad = good.replacen(
        r#""epoch":1,"expires_at""#,
        r#""epoch":"one","expires_at""#,
        1,
    );
    assert_ne!(bad, good, "the mutation must apply");
    std::fs::write(&path, bad).expect("write");
    let (code, stdout, stderr) = check_history(&path, &[]);
    assert_eq!(code, 2);
    assert!(stdout.is_empty(), "{stdout}");
    assert!(stderr.contains("bad.jsonl"), "{stderr}");
    assert!(
        stderr.contains(r#"line 2, field "result.ok.epoch": expected an integer, got "one""#),
        "{stderr}"
    );
}

#[test]
fn a_missing_file_is_unreadable() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (code, _, stderr) = check_history(&dir.path().join("none.jsonl"), &[]);
    assert_eq!(code, 2);
    assert!(stderr.contains("none.jsonl"), "{stderr}");
}

/// `rounds` grant-release rounds of one owner on one key: linearizable, and long enough
/// that the search consults its budget (it does so every 1024 steps).
fn long_history(rounds: i64) -> History {
    let ttl = 1_000_000;
    let mut h = History::default();
    for r in 0..rounds {
        let t = r * 100;
        let epoch = 2 * r + 1;
        let op = |id: i64, call, at: i64, result| OpRecord {
            id: id as u64,
            process: 1,
            txn: None,
            call,
            invoke: (at * 1000) as u64,
            complete: (at * 1000 + 10_000) as u64,
            server: Some(Span::new(Ts(at), Ts(at + 10)).expect("ordered")),
            result: OpResult::Ok(result),
        };
        let key = || "k".to_string();
        let owner = || "a".to_string();
        h.ops.push(op(
            2 * r + 1,
            Op::acquire(key(), owner(), Interval::micros(ttl)),
            t,
            Outcome::Acquired {
                epoch,
                expires_at: Ts(t + ttl),
            },
        ));
        h.ops.push(op(
            2 * r + 2,
            Op::release(key(), owner(), epoch),
            t + 50,
            Outcome::Released,
        ));
    }
    h
}

#[test]
fn a_spent_budget_is_unknown_not_a_pass() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("long.jsonl");
    std::fs::write(&path, jsonl::to_string(&long_history(1500))).expect("write");
    // control: with its default budget the history passes
    let (code, stdout, _) = check_history(&path, &[]);
    assert_eq!(code, 0, "{stdout}");
    let (code, stdout, _) = check_history(&path, &["--max-states", "0"]);
    assert_eq!(code, 2);
    assert!(stdout.starts_with("UNKNOWN"), "{stdout}");
    assert!(stdout.contains("state budget of 0 states"), "{stdout}");
    let (code, stdout, _) = check_history(&path, &["--budget", "0s"]);
    assert_eq!(code, 2);
    assert!(stdout.contains("time budget"), "{stdout}");
}

#[test]
fn a_bad_budget_is_refused() {
    let (code, _, stderr) = check_history(
        &example("history-linearizable.jsonl"),
        &["--budget", "thirty seconds"],
    );
    assert_eq!(code, 2);
    assert!(stderr.contains("--budget"), "{stderr}");
}

/// Issue 17's classes (calendar intervals, commit floors, crashes ending lost calls, lost
/// renews past the old fixed closure limit): every regression case of
/// model/tests/histories gets its committed verdict from the command, with its exit status.
#[test]
fn the_issue_17_regression_cases_get_their_verdicts() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("model/tests/histories");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("model/tests/histories")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "jsonl"))
        .collect();
    files.sort();
    assert!(files.len() >= 14, "{} cases", files.len());
    for file in files {
        let history: History =
            jsonl::parse(&std::fs::read_to_string(&file).expect("read")).expect("parses");
        let expect = &history.meta["expect"];
        let (code, stdout, _) = check_history(&file, &[]);
        match expect["verdict"].as_str() {
            Some("linearizable") => {
                assert_eq!(code, 0, "{}: {stdout}", file.display());
                assert!(stdout.starts_with("LINEARIZABLE"), "{stdout}");
            }
            Some("violation") => {
                let n = expect["invariant"].as_u64().expect("an invariant");
                assert_eq!(code, 1, "{}: {stdout}", file.display());
                assert!(
                    stdout.starts_with(&format!("VIOLATION of invariant {n} ")),
                    "{}: {stdout}",
                    file.display()
                );
            }
            other => panic!("{}: no expected verdict {other:?}", file.display()),
        }
    }
}
