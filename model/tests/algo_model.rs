//! The algorithm model (`model::algo_model`): pg_lease 0.2.0's step order keeps every
//! property, 0.1.0's grants a backdated lease after a row-lock wait, and a 0.2.0 that keeps a
//! lost race's row lock across its sleep stalls the holder's renew.

use model::algo_model::{
    run, Action, AlgoConfig, AlgoModel, AlgoReport, AlgoState, Pc, Timing, Variant,
    NO_RENEW_STALLED_BY_SLEEPER,
};
use model::Invariant;

type Path = Vec<(AlgoState, Option<Action>)>;

fn inv01() -> &'static str {
    Invariant::MutualExclusion.property_name()
}

fn inv07() -> &'static str {
    Invariant::LapseIsFinal.property_name()
}

fn check_exhaustively(cfg: &AlgoConfig, min_unique: usize) -> AlgoReport {
    let report = run(cfg, &[]).expect("valid config");
    println!("{report}");
    assert!(report.complete, "search stopped early");
    for p in &report.properties {
        assert!(p.holds(), "property {:?} failed:\n{report}", p.name);
    }
    assert!(
        report.unique_states >= min_unique,
        "suspiciously small state space: {}",
        report.unique_states
    );
    report
}

/// Runs `cfg` until `property` has a counterexample, prints its shortest one and returns
/// (the checker's path, the shortest path).
fn counterexample(cfg: &AlgoConfig, property: &'static str) -> (AlgoReport, Path, Path) {
    let report = run(cfg, &[property]).expect("valid config");
    let found = report.property(property).expect("property exists");
    let (Some(path), Some(shortest)) = (found.path.clone(), found.shortest.clone()) else {
        panic!("no counterexample to {property:?}:\n{report}");
    };
    println!("{report}");
    (report, path, shortest)
}

/// The step at which session `who` leaves a row-lock wait by writing a grant of `epoch`.
fn grant_after_wait(path: &Path, who: u8, epoch: u8) -> Option<usize> {
    path.windows(2).position(|w| {
        let (before, action) = &w[0];
        let blocked = before.sessions[usize::from(who)]
            .call
            .is_some_and(|c| c.pc == Pc::Blocked);
        // (an autocommit call commits in the step that writes)
        let wrote = w[1]
            .0
            .visible(who)
            .is_some_and(|r| r.epoch == epoch && r.owner == Some(who));
        *action == Some(Action::Step(who)) && blocked && wrote
    })
}

/// The path ends in two overlapping grants, the later one backdated before the earlier
/// one's release and written by a session right after it waited for the row lock.
fn assert_backdated_grant_after_wait(path: &Path) {
    let last = &path.last().expect("a path").0;
    let (earlier, later) = last.overlapping_grants().expect("two grants overlap");
    let released = last.grants[usize::from(earlier)].expect("earlier grant");
    let backdated = last.grants[usize::from(later)].expect("later grant");
    assert!(released.released, "the earlier grant was released");
    assert!(
        backdated.start < released.end,
        "the later grant's effective instant {} precedes the release at {}",
        backdated.start,
        released.end
    );
    assert!(
        grant_after_wait(path, backdated.owner, later).is_some(),
        "grant e{later} is not written right after a row-lock wait"
    );
}

#[test]
fn v0_2_0_keeps_every_property() {
    let report = check_exhaustively(&AlgoConfig::of(Variant::V0_2_0), 100_000);
    assert!(report.violated().is_empty());
}

#[test]
fn v0_2_0_keeps_every_property_when_steps_take_time() {
    let cfg = AlgoConfig {
        timing: Timing::SlowSteps,
        calls: 2,
        ..AlgoConfig::of(Variant::V0_2_0)
    };
    check_exhaustively(&cfg, 30_000);
}

#[test]
fn v0_1_0_grants_a_backdated_lease_after_a_lock_wait() {
    let cfg = AlgoConfig::of(Variant::V0_1_0);
    let (report, path, shortest) = counterexample(&cfg, inv01());
    assert_backdated_grant_after_wait(&path);
    assert_backdated_grant_after_wait(&shortest);
    let trace = report.counterexample(inv01()).join("\n");
    assert!(trace.contains("waits for"), "{trace}");
    assert!(trace.contains("after the wait, re-checks FREE"), "{trace}");
}

/// With autocommit calls only, a lock wait never spans a tick when steps are instant, so
/// 0.1.0's early clock read does no harm: the backdated grant needs a transaction that
/// holds the row lock while the clock advances (a waiter's `v_now` then predates what the
/// holder does before the waiter re-checks).
#[test]
fn v0_1_0_needs_a_lock_held_across_a_tick() {
    let cfg = AlgoConfig {
        txn_calls: 0,
        ..AlgoConfig::of(Variant::V0_1_0)
    };
    let report = run(&cfg, &[]).expect("valid config");
    println!("{report}");
    assert!(report.complete);
    assert!(report.violated().is_empty(), "{report}");
}

/// 0.1.0's stale `v_now` also lets a renew succeed on a lease an inspect already saw lapsed,
/// once the clock may tick between two steps of a call.
#[test]
fn v0_1_0_revives_a_lapsed_lease_when_steps_take_time() {
    let cfg = AlgoConfig {
        timing: Timing::SlowSteps,
        ..AlgoConfig::of(Variant::V0_1_0)
    };
    let (_, path, shortest) = counterexample(&cfg, inv07());
    for p in [&path, &shortest] {
        assert!(p.last().expect("a path").0.lapse_broken);
    }
}

#[test]
fn lost_race_keeping_its_lock_across_the_sleep_stalls_a_renew() {
    let cfg = AlgoConfig::of(Variant::V0_2_0LostRaceKeepsLock);
    let (report, path, shortest) = counterexample(&cfg, NO_RENEW_STALLED_BY_SLEEPER);
    for p in [&path, &shortest] {
        let (renewing, sleeping) = p
            .last()
            .expect("a path")
            .0
            .renew_stalled_by_sleeper()
            .expect("a stalled renew");
        assert_ne!(renewing, sleeping);
    }
    assert!(
        report.violated() == [NO_RENEW_STALLED_BY_SLEEPER],
        "{report}"
    );
}

#[test]
fn configurations_out_of_bounds_are_rejected() {
    let bad = [
        AlgoConfig {
            sessions: 0,
            ..AlgoConfig::default()
        },
        AlgoConfig {
            sessions: 4,
            ..AlgoConfig::default()
        },
        AlgoConfig {
            max_epoch: 6,
            ..AlgoConfig::default()
        },
        AlgoConfig {
            txn_calls: 3,
            ..AlgoConfig::default()
        },
        AlgoConfig {
            ttl: 0,
            ..AlgoConfig::default()
        },
        AlgoConfig {
            max_time: 254,
            ..AlgoConfig::default()
        },
    ];
    for cfg in bad {
        assert!(AlgoModel::new(cfg.clone()).is_err(), "{cfg:?} accepted");
    }
    assert!(AlgoModel::new(AlgoConfig::default()).is_ok());
}

#[test]
fn variants_are_named_like_the_extension_versions() {
    for v in Variant::ALL {
        assert_eq!(Variant::from_name(v.name()), Some(v));
    }
    assert_eq!(Variant::from_name("0.1.0"), Some(Variant::V0_1_0));
    assert_eq!(Variant::from_name("0.3.0"), None);
}
