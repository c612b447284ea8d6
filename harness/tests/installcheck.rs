//! The extension's PGXS suites (`make installcheck`: REGRESS + ISOLATION) on
//! every tested major, each against its own throwaway cluster.

use harness::pg::{test_majors, Cluster, PgInstall};

#[test]
fn pgxs_regression_and_isolation_suites_pass_on_every_tested_major() {
    let mut failed = Vec::new();
    for major in test_majors() {
        let install = PgInstall::ensure(major).unwrap();
        let cluster = Cluster::start(&install).unwrap();
        let report =
            harness::installcheck::run(&cluster, &harness::installcheck::default_extension_dir())
                .unwrap();
        println!("PG {}:\n{}", report.server_version, report.output);
        assert!(
            report.output.contains("waiter_does_not_stall_renew")
                && report.output.contains("pg_lease"),
            "PG {major}: the suites did not run:\n{}",
            report.output
        );
        if !report.passed {
            failed.push(format!(
                "PG {}:\n{}\n{}",
                report.server_version, report.output, report.diffs
            ));
        }
    }
    assert!(
        failed.is_empty(),
        "make installcheck failed:\n{}",
        failed.join("\n")
    );
}

/// Negative control: the suites fail against broken pg_leases, and pass
/// against an unchanged copy installed under another name (so the renaming
/// itself cannot be what makes them fail).
#[test]
fn pgxs_suites_fail_against_mutants() {
    use harness::extension::{ExtensionFiles, MUTANTS};
    let major = test_majors()[0];
    let install = PgInstall::ensure(major).unwrap();
    let cluster = Cluster::start(&install).unwrap();
    let dir = harness::installcheck::default_extension_dir();
    let same = ExtensionFiles::renamed("pg_lease_unchanged");
    install.install_extension(&same).unwrap();
    let report = harness::installcheck::run_against(&cluster, &dir, &same.name).unwrap();
    assert!(
        report.passed,
        "an unchanged copy failed:\n{}\n{}",
        report.output, report.diffs
    );
    for name in ["release_keeps_epoch", "lost_race_keeps_row_lock"] {
        let mutant = MUTANTS.iter().find(|m| m.name == name).unwrap();
        let files = ExtensionFiles::mutant(mutant).unwrap();
        install.install_extension(&files).unwrap();
        let report = harness::installcheck::run_against(&cluster, &dir, &files.name).unwrap();
        assert!(
            !report.passed,
            "mutant {name} passed the PGXS suites:\n{}",
            report.output
        );
        assert!(!report.diffs.is_empty(), "mutant {name}: no diffs recorded");
    }
}
