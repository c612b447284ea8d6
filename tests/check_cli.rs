//! `leasecheck check`: what it refuses before starting anything (the campaigns themselves
//! are tested in harness/tests/campaign.rs).

use std::process::Command;

fn check(args: &[&str]) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_leasecheck"))
        .arg("check")
        .args(args)
        .output()
        .expect("leasecheck runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn the_stepped_mode_is_refused_plainly_for_now() {
    let (code, err) = check(&["--mode", "stepped"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--mode stepped is not available yet"), "{err}");
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
