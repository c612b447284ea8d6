//! The conformance suite (harness::conformance) on every tested major.

use harness::conformance::Failure;
use harness::pg::{shared, test_majors, Cluster, PgInstall};

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
        install.install_extension(&files).unwrap();
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
        // Caught only by a violation: an infrastructure failure is no verdict.
        for outcome in &report.outcomes {
            match &outcome.result {
                Err(Failure::Violation(_)) => {}
                other => escaped.push(format!(
                    "{} gave {other:?} on {}; expected a violation",
                    mutant.name, outcome.name
                )),
            }
        }
    }
    assert!(escaped.is_empty(), "mutants not caught: {escaped:#?}");
}

/// A server that does not answer is no verdict about pg_lease: every check run against a
/// stopped cluster fails as an infrastructure failure, never as a violation.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_unreachable_server_is_an_infrastructure_failure_not_a_violation() {
    let major = test_majors()[0];
    let install = PgInstall::ensure(major).unwrap();
    let mut cluster = Cluster::start(&install).unwrap();
    cluster.stop_fast().unwrap();
    let selected = [
        "acquire_grants_epoch_1_expiring_at_server_time_plus_ttl",
        "invalid_input_is_22023_naming_every_violation_and_changes_nothing",
    ];
    let report = harness::conformance::run_against(&cluster, harness::extension::NAME, |n| {
        selected.contains(&n)
    })
    .await;
    println!("{}", report.render());
    assert_eq!(report.outcomes.len(), selected.len());
    for o in &report.outcomes {
        assert!(
            matches!(&o.result, Err(Failure::Infrastructure(_))),
            "{}: {:?}",
            o.name,
            o.result
        );
    }
}
