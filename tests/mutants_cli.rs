//! `leasecheck mutants`: the catalogue listing, the export of each mutant as a standalone
//! extension, and what it refuses (the hunts themselves are tested in
//! harness/tests/mutants.rs).

use std::path::Path;
use std::process::Command;

/// Exit status, stdout and stderr of `leasecheck mutants ARGS`.
fn mutants(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_leasecheck"))
        .arg("mutants")
        .args(args)
        .output()
        .expect("leasecheck runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Every entry of the catalogue is a row: each SQL mutant, and each model mutation that has
/// no SQL form.
#[test]
fn the_list_has_a_row_per_entry_of_the_catalogue() {
    let (code, out, err) = mutants(&["--list"]);
    assert_eq!(code, 0, "{err}");
    let rows: Vec<&str> = out.lines().skip(2).collect();
    assert_eq!(rows.len(), harness::mutants::catalogue().len(), "{out}");
    for m in harness::mutants::MUTANTS {
        assert!(
            rows.iter()
                .any(|r| r.starts_with(&format!("| `{}` |", m.name))),
            "{} missing:\n{out}",
            m.name
        );
    }
    for m in harness::mutants::MODEL_ONLY {
        let name = format!("`{}`", m.mutation.name());
        assert!(
            rows.iter()
                .any(|r| r.starts_with("| (model only) |") && r.contains(&name)),
            "{name} missing:\n{out}"
        );
    }
}

/// `--export DIR` writes each mutant as an extension directory of its own: one control
/// file and the scripts `CREATE EXTENSION` runs, the update script being the mutated one.
#[test]
fn export_writes_each_mutant_as_a_standalone_extension() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let out_dir = dir.path().to_str().expect("a UTF-8 path");
    let (code, out, err) = mutants(&["--export", out_dir]);
    assert_eq!(code, 0, "{err}");
    for m in harness::mutants::MUTANTS {
        let name = format!("pg_lease_{}", m.name);
        let sub = dir.path().join(&name);
        assert!(out.contains(&name), "{out}");
        let files = names(&sub);
        assert_eq!(
            files,
            vec![
                "install.sql".to_string(),
                format!("{name}--0.3.0.sql"),
                format!("{name}.control"),
            ],
            "{name}"
        );
        let install = std::fs::read_to_string(sub.join("install.sql")).expect("install.sql");
        let script = update_text(&sub, &files[1]);
        assert_eq!(install, script, "{name}: install.sql is the install script");
        assert_ne!(script, harness::extension::SCRIPT, "{name}: not mutated");
        for (_, to) in m.edits {
            assert!(script.contains(to), "{name}: edit not applied");
        }
        let control = std::fs::read_to_string(sub.join(&files[2])).expect("the control file");
        assert!(control.contains("default_version = '0.3.0'"), "{control}");
    }
    // One mutant only, by name.
    let one = tempfile::tempdir().expect("a temp dir");
    let one_dir = one.path().to_str().expect("a UTF-8 path");
    let (code, _, err) = mutants(&["--export", one_dir, "--mutant", "release_keeps_epoch"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(names(one.path()), vec!["pg_lease_release_keeps_epoch"]);
}

/// An unknown mutant is refused before anything starts, naming the known ones.
#[test]
fn an_unknown_mutant_is_refused_with_the_known_names() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let out_dir = dir.path().to_str().expect("a UTF-8 path");
    let (code, _, err) = mutants(&["--export", out_dir, "--mutant", "nope"]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("no mutant \"nope\"") && err.contains("release_keeps_epoch"),
        "{err}"
    );
    assert!(names(dir.path()).is_empty());
}

fn update_text(dir: &Path, file: &str) -> String {
    std::fs::read_to_string(dir.join(file)).expect("the script")
}

fn names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .expect("a directory")
        .map(|e| {
            e.expect("an entry")
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    names.sort();
    names
}

/// An exported `install.sql` is one whole install: given as the only script of an
/// extension, `CREATE EXTENSION` installs 0.3.0 with the mutant's definitions on a real
/// server (a throwaway cluster of the first tested major).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_exported_install_sql_installs_the_mutant() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let out_dir = dir.path().to_str().expect("a UTF-8 path");
    let (code, _, err) = mutants(&["--export", out_dir, "--mutant", "release_keeps_epoch"]);
    assert_eq!(code, 0, "{err}");
    let sub = dir.path().join("pg_lease_release_keeps_epoch");
    let name = "pg_lease_export_install_sql";
    let files = harness::extension::ExtensionFiles {
        name: name.to_string(),
        control: std::fs::read_to_string(sub.join("pg_lease_release_keeps_epoch.control"))
            .expect("the control file"),
        scripts: vec![(
            format!("{name}--0.3.0.sql"),
            std::fs::read_to_string(sub.join("install.sql")).expect("install.sql"),
        )],
    };
    let cluster = harness::pg::shared(harness::pg::test_majors()[0]).expect("a cluster");
    cluster
        .install()
        .expect("a managed cluster")
        .install_extension(&files)
        .expect("the files installed");
    let db = cluster
        .fresh_database_with("export", name)
        .await
        .expect("CREATE EXTENSION from install.sql");
    let client = cluster.connect(&db).await.expect("a connection");
    let version = harness::extension::installed_version(&client, name)
        .await
        .expect("the version query");
    assert_eq!(version.as_deref(), Some("0.3.0"));
    let release: String = client
        .query_one(
            "SELECT prosrc FROM pg_catalog.pg_proc WHERE oid = 'lease.release(text,text,bigint)'::regprocedure",
            &[],
        )
        .await
        .expect("lease.release exists")
        .get(0);
    let mutant = harness::mutants::find("release_keeps_epoch").expect("catalogued");
    assert!(release.contains(mutant.edits[0].1), "{release}");
    // Negative control: the shipped definition is not what was installed.
    assert!(!release.contains(mutant.edits[0].0), "{release}");
}
