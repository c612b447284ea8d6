//! `leasecheck export-release VERSION DIR`: a released version as a build directory the gate
//! takes with `--extension DIR` (its installs are tested by the gate's suites on 0.2.0).

use harness::extension::{Build, BASE_SCRIPT, UPDATE_0_1_0_TO_0_2_0};
use std::process::Command;

fn export(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_leasecheck"))
        .arg("export-release")
        .args(args)
        .output()
        .expect("leasecheck runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn a_release_is_written_as_a_build_directory_of_its_released_scripts() {
    let tmp = tempfile::tempdir().expect("a temp dir");
    let dir = tmp.path().join("pg_lease-0.2.0");
    let (code, out, err) = export(&["0.2.0", dir.to_str().expect("utf-8")]);
    assert_eq!(code, 0, "{out}{err}");
    let build = Build::from_dir(&dir).expect("a build directory");
    assert_eq!(
        (build.given.name.as_str(), build.version.as_str()),
        ("pg_lease", "0.2.0")
    );
    let scripts: Vec<(&str, &str)> = build
        .given
        .scripts
        .iter()
        .map(|(n, t)| (n.as_str(), t.as_str()))
        .collect();
    assert_eq!(
        scripts,
        vec![
            ("pg_lease--0.1.0--0.2.0.sql", UPDATE_0_1_0_TO_0_2_0),
            ("pg_lease--0.1.0.sql", BASE_SCRIPT),
        ]
    );
    assert_eq!(
        build.given.install_script(),
        format!("{BASE_SCRIPT}\n{UPDATE_0_1_0_TO_0_2_0}")
    );
}

#[test]
fn an_unknown_version_is_refused_naming_the_released_ones() {
    let tmp = tempfile::tempdir().expect("a temp dir");
    let (code, _, err) = export(&["0.9.0", tmp.path().to_str().expect("utf-8")]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("0.1.0, 0.2.0"), "{err}");
}
