//! The conformance suite (harness::conformance) on every tested major.

use harness::pg::{shared, test_majors, PgInstall};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_documented_behaviour_holds_on_every_tested_major() {
    let mut failed = Vec::new();
    for major in test_majors() {
        let cluster = shared(major).unwrap();
        let report = harness::conformance::run(cluster, None).await;
        println!("{}", report.render());
        assert_eq!(report.outcomes.len(), harness::conformance::checks().len());
        failed.extend(report.failures().map(|f| format!("PG {major}: {}", f.name)));
    }
    assert!(failed.is_empty(), "failed checks: {failed:#?}");
}

/// Negative controls: each deliberately broken pg_lease must fail exactly the
/// checks that guard the behaviour it breaks.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_mutant_is_caught_by_the_checks_that_guard_it() {
    use harness::extension::{ExtensionFiles, MUTANTS};
    let major = test_majors()[0];
    let install = PgInstall::ensure(major).unwrap();
    let cluster = shared(major).unwrap();
    let names: Vec<&str> = harness::conformance::checks()
        .iter()
        .map(|c| c.name)
        .collect();
    let mut escaped = Vec::new();
    for mutant in MUTANTS {
        let files = ExtensionFiles::mutant(mutant).unwrap();
        files.install(&install).unwrap();
        for want in mutant.caught_by {
            assert!(
                names.contains(want),
                "{}: no check named {want}",
                mutant.name
            );
        }
        let report = harness::conformance::run_against(cluster, &files.name, |n| {
            mutant.caught_by.contains(&n)
        })
        .await;
        println!(
            "mutant {} ({}):\n{}",
            mutant.name,
            mutant.breaks,
            report.render()
        );
        assert_eq!(report.outcomes.len(), mutant.caught_by.len());
        for outcome in &report.outcomes {
            if outcome.result.is_ok() {
                escaped.push(format!("{} passed {}", mutant.name, outcome.name));
            }
        }
    }
    assert!(escaped.is_empty(), "mutants not caught: {escaped:#?}");
}
