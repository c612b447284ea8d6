//! The fenced resource on a real server: with the guard, no deposed holder's write is ever
//! accepted (and deposed holders did try: the guard rejected them); without it (the
//! negative control), the same workload accepts stale writes. The lease calls of both runs
//! are judged linearizable by the model.

use harness::campaign::Target;
use harness::fenced::{run, FencedConfig};
use harness::pg::{shared, test_majors};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_guard_rejects_every_deposed_holders_write() {
    for major in test_majors() {
        let cluster = shared(major).expect("a cluster");
        let report = run(cluster, &FencedConfig::short(Target::PgLease, true, 11))
            .await
            .expect("the fenced run completes");
        println!(
            "PG {major} guarded: {} accepted, {} rejected, {} breaches; lease history: {}",
            report.writes_accepted,
            report.writes_rejected,
            report.breaches.len(),
            report.verdict
        );
        assert!(report.verdict.is_linearizable(), "{}", report.verdict);
        assert!(
            report.breaches.is_empty(),
            "PG {major}: the guard accepted stale writes: {:#?}",
            report.breaches
        );
        // the scenario really happened: deposed holders wrote and were refused
        assert!(
            report.writes_rejected > 0,
            "PG {major}: no deposed holder ever wrote; the run proves nothing"
        );
        assert!(report.judgement().is_pass(), "{:?}", report.judgement());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_guard_deposed_holders_overwrite_the_new_holder() {
    let major = test_majors()[0];
    let cluster = shared(major).expect("a cluster");
    let report = run(cluster, &FencedConfig::short(Target::PgLease, false, 11))
        .await
        .expect("the fenced run completes");
    println!(
        "PG {major} unguarded: {} accepted, {} breaches; first: {:?}",
        report.writes_accepted,
        report.breaches.len(),
        report.breaches.first().map(|b| b.to_string())
    );
    assert!(report.verdict.is_linearizable(), "{}", report.verdict);
    assert!(
        !report.breaches.is_empty(),
        "an unguarded resource accepted no stale write: the pauses did not depose anyone"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pg_lease_that_reuses_epochs_lets_two_holders_through_the_guard() {
    let major = test_majors()[0];
    let cluster = shared(major).expect("a cluster");
    let mutant = harness::extension::MUTANTS
        .iter()
        .find(|m| m.name == "takeover_reuses_epoch")
        .expect("the mutant is catalogued");
    let report = run(
        cluster,
        &FencedConfig::short(Target::Mutant(mutant), true, 11),
    )
    .await
    .expect("the fenced run completes");
    println!(
        "PG {major} takeover_reuses_epoch: {} breaches; lease history: {}",
        report.breaches.len(),
        report.verdict.to_string().lines().next().unwrap_or("")
    );
    // the guard trusts epochs: with one epoch handed to two holders, both get through
    assert!(
        !report.breaches.is_empty(),
        "no two holders shared an epoch at the guard"
    );
    assert!(report.verdict.violation().is_some(), "{}", report.verdict);
    // The gate's judgement of the run is the finding, naming the violated invariant.
    assert!(
        matches!(
            report.judgement(),
            harness::judgement::Judgement::Finding {
                invariant: Some(_),
                ..
            }
        ),
        "{:?}",
        report.judgement()
    );
}
