//! Negative controls: for every mutation the checker must find a counterexample to the
//! invariant the mutation is designed to break, so the model is shown able to fail.

use model::check::{control_config, run, run_negative_control, RunOptions};
use model::{Invariant, Mutation};

fn assert_caught(mutation: Mutation) {
    let expected: Invariant = mutation.expected().expect("a mutation");
    let cfg = control_config(mutation);
    let report = run_negative_control(&cfg, mutation, &RunOptions::default()).expect("config");
    let prop = report
        .property(expected.property_name())
        .expect("property exists");
    assert!(
        prop.discovered,
        "{mutation}: no counterexample to {expected}\n{report}"
    );
    assert!(!prop.path.is_empty(), "{mutation}: empty counterexample");
    println!(
        "{mutation}: {expected} violated after {} actions ({} states, {} unique, {:.2?}); also violated: {:?}",
        prop.path.len(),
        report.states,
        report.unique_states,
        report.elapsed,
        report
            .violated()
            .into_iter()
            .filter(|n| *n != expected.property_name())
            .collect::<Vec<_>>()
    );
}

macro_rules! control {
    ($($name:ident => $m:ident,)*) => {
        $(
            #[test]
            fn $name() {
                assert_caught(Mutation::$m);
            }
        )*

        #[test]
        fn every_mutation_has_a_test() {
            let tested = [$(Mutation::$m),*];
            for m in Mutation::ALL {
                assert!(tested.contains(&m), "no negative-control test for {m}");
            }
        }
    };
}

control! {
    acquire_ignores_holder_breaks_mutual_exclusion => AcquireIgnoresHolder,
    release_deletes_row_breaks_epoch_monotonicity => ReleaseDeletesRow,
    takeover_reusing_epoch_breaks_grant_freshness => TakeoverReusesEpoch,
    renew_changing_epoch_is_caught => RenewChangesEpoch,
    release_keeping_epoch_is_caught => ReleaseKeepsEpoch,
    reacquire_bumping_epoch_breaks_idempotence => ReacquireBumpsEpoch,
    renew_ignoring_expiry_breaks_lapse_finality => RenewIgnoresExpiry,
    wrong_precedence_is_caught => WrongPrecedence,
    write_ignoring_key_breaks_isolation => WriteIgnoresKey,
    invalid_input_writing_breaks_fail_closed => InvalidInputWrites,
    abort_keeping_effects_breaks_fail_closed => AbortKeepsEffects,
    inspect_showing_lapsed_as_held_is_caught => InspectShowsLapsedAsHeld,
    crash_losing_committed_breaks_durability => CrashLosesCommitted,
    downtime_extending_lease_breaks_time_authority => DowntimeExtendsLease,
}

/// The correct spec under the same configurations finds nothing: the controls fail because
/// of their mutation, not because of the configuration.
#[test]
fn correct_spec_passes_the_control_configurations() {
    let report = run(&control_config(Mutation::None), &RunOptions::default()).expect("config");
    assert!(report.ok(), "{report}");
    let two = control_config(Mutation::WriteIgnoresKey);
    let mut correct = two.clone();
    correct.mutation = Mutation::None;
    let report = run(&correct, &RunOptions::default()).expect("config");
    assert!(report.violated().is_empty(), "{report}");
}
