//! The algorithm model (`model::algo_model`): pg_lease 0.3.0's step order keeps every
//! property; 0.2.0's first grant, dated before it waits for a concurrent inserter, comes back
//! already expired once that inserter rolls back; 0.1.0's grants a backdated lease after a
//! row-lock wait; and a 0.2.0 that keeps a lost race's row lock across its sleep stalls the
//! holder's renew.

use model::algo_model::{
    run, Action, AlgoConfig, AlgoModel, AlgoReport, AlgoState, CallKind, Pc, Timing, Variant,
    NO_GRANT_EXPIRED_WHEN_WRITTEN, NO_RENEW_STALLED_BY_SLEEPER,
};
use model::stateright::Model;
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

/// The step at which session `who`, having waited for another session's uncommitted insert
/// of the never-leased key, inserts it after that session's transaction rolled back: the
/// path rolls the other inserter back while `who` waits for it.
fn rolled_back_insert_waited_for(path: &Path, who: u8) -> Option<usize> {
    let rollback = path.iter().position(|(state, action)| {
        let Some(Action::Rollback(inserter)) = *action else {
            return false;
        };
        let inserted = state
            .lock
            .is_some_and(|l| l.holder == inserter && l.pending.is_some());
        let waiting = state.sessions[usize::from(who)]
            .call
            .is_some_and(|c| c.pc == Pc::Blocked);
        inserter != who && inserted && state.committed.is_none() && waiting
    })?;
    let inserts = path[rollback..].windows(2).position(|w| {
        let blocked = w[0].0.sessions[usize::from(who)]
            .call
            .is_some_and(|c| c.pc == Pc::Blocked);
        let wrote = w[1].0.visible(who).is_some_and(|r| r.owner == Some(who));
        w[0].1 == Some(Action::Step(who)) && blocked && wrote
    })?;
    Some(rollback + inserts)
}

/// The path ends in a first grant written already expired (its expiry at or before the clock
/// of its write) by a session that waited for a concurrent insert rolled back meanwhile.
fn assert_expired_first_grant_after_rolled_back_insert(path: &Path, ttl: u8) {
    let last = &path.last().expect("a path").0;
    let g = last.expired_grant.expect("an expired grant");
    assert_eq!(g.epoch, 1, "the first grant of the key");
    assert_eq!(g.expires, g.start + ttl);
    assert!(
        g.expires <= g.written_at,
        "{g:?} is not expired when written"
    );
    assert!(
        rolled_back_insert_waited_for(path, g.owner).is_some(),
        "s{} did not insert after waiting for a rolled-back insert",
        g.owner
    );
}

#[test]
fn v0_3_0_keeps_every_property() {
    let report = check_exhaustively(&AlgoConfig::of(Variant::V0_3_0), 100_000);
    assert!(report.violated().is_empty());
}

#[test]
fn v0_3_0_keeps_every_property_when_steps_take_time() {
    let cfg = AlgoConfig {
        timing: Timing::SlowSteps,
        calls: 2,
        ..AlgoConfig::of(Variant::V0_3_0)
    };
    check_exhaustively(&cfg, 30_000);
}

/// Bigger bounds than CI runs (minutes in the test profile; `cargo test --release -p model
/// --test algo_model -- --ignored` runs them).
#[test]
#[ignore = "minutes: bigger bounds, run with --release -- --ignored"]
fn v0_3_0_keeps_every_property_with_bigger_bounds() {
    let longer_clock = AlgoConfig {
        max_time: 3,
        ..AlgoConfig::of(Variant::V0_3_0)
    };
    check_exhaustively(&longer_clock, 100_000);
    let slow = AlgoConfig {
        timing: Timing::SlowSteps,
        ..AlgoConfig::of(Variant::V0_3_0)
    };
    check_exhaustively(&slow, 100_000);
    let three = AlgoConfig {
        sessions: 3,
        calls: 2,
        ..AlgoConfig::of(Variant::V0_3_0)
    };
    check_exhaustively(&three, 100_000);
}

/// The schedule of 0.2.0's counterexample, played on 0.3.0: the waiter inserts after the
/// rollback and dates its row with the clock read after the wait (two versions: the
/// INSERT's, then the UPDATE's), so its grant runs from the end of the wait.
#[test]
fn v0_3_0_dates_a_first_grant_after_waiting_for_a_rolled_back_insert() {
    let model = AlgoModel::new(AlgoConfig::of(Variant::V0_3_0)).expect("valid config");
    let nonblocking = CallKind::Acquire { blocking: false };
    let schedule = [
        Action::Start(0, nonblocking),
        Action::Step(0), // probe: never leased
        Action::Begin(1),
        Action::Start(1, nonblocking),
        Action::Step(1), // probe: never leased
        Action::Step(1), // INSERT
        Action::Step(1), // clock, UPDATE: dated
        Action::Step(0), // INSERT waits for s1's uncommitted insert
        Action::Tick,
        Action::Tick,
        Action::Rollback(1),
        Action::Step(0), // INSERT after the wait
        Action::Step(0), // clock, UPDATE: dated, commits
    ];
    let mut s = model.init_states().remove(0);
    let mut actions = Vec::new();
    let mut inserted_before_dating = None;
    for (i, action) in schedule.into_iter().enumerate() {
        actions.clear();
        model.actions(&s, &mut actions);
        assert!(
            actions.contains(&action),
            "step {i}: {action:?} not enabled in {s:?}"
        );
        s = model.next_state(&s, action).expect("a successor");
        if i == 11 {
            inserted_before_dating = s.lock.and_then(|l| l.pending);
        }
    }
    let inserted = inserted_before_dating.expect("s0's inserted version");
    assert_eq!(
        inserted.expires, 2,
        "the INSERT's VALUES are dated before the wait"
    );
    let grant = s.grants[1].expect("s0's first grant");
    assert_eq!((grant.owner, grant.start, grant.end), (0, 2, 4));
    assert_eq!(s.expired_grant, None);
    assert!(s
        .committed
        .is_some_and(|r| r.expires == 4 && r.owner == Some(0)));
}

/// Plays `action` on `s`, which must enable it.
fn play(model: &AlgoModel, s: &AlgoState, action: Action) -> AlgoState {
    let mut enabled = Vec::new();
    model.actions(s, &mut enabled);
    assert!(enabled.contains(&action), "{action:?} not enabled in {s:?}");
    model.next_state(s, action).expect("a successor")
}

/// s0 holds e1, renews it inside a transaction at 1; at 2 s1 (inside a transaction) finds the
/// committed version lapsed and waits for s0's row lock; s0 commits the renew; s1's re-check
/// after the wait fails and its non-blocking acquire is denied. Returns the state once s1's
/// call has returned, its transaction still open.
fn lost_recheck_in_a_transaction(variant: Variant) -> AlgoState {
    let model = AlgoModel::new(AlgoConfig::of(variant)).expect("valid config");
    let nonblocking = CallKind::Acquire { blocking: false };
    let mut s = model.init_states().remove(0);
    let finish = |mut s: AlgoState, who: u8| {
        while s.sessions[usize::from(who)].call.is_some() {
            s = play(&model, &s, Action::Step(who));
        }
        s
    };
    s = finish(play(&model, &s, Action::Start(0, nonblocking)), 0);
    for action in [Action::Tick, Action::Begin(0)] {
        s = play(&model, &s, action);
    }
    s = finish(play(&model, &s, Action::Start(0, CallKind::Renew)), 0);
    for action in [
        Action::Tick,
        Action::Begin(1),
        Action::Start(1, nonblocking),
    ] {
        s = play(&model, &s, action);
    }
    while s.sessions[1].call.is_some_and(|c| c.pc != Pc::Blocked) {
        s = play(&model, &s, Action::Step(1));
    }
    s = play(&model, &s, Action::Commit(0));
    assert!(s
        .committed
        .is_some_and(|r| r.owner == Some(0) && r.expires == 3));
    s = finish(s, 1);
    assert!(
        s.sessions[1].txn_calls.is_some(),
        "s1's transaction is still open"
    );
    assert_eq!(s.grants[2], None, "s1 was not granted");
    s
}

/// 0.3.0 rolls back the subtransaction in which a lost re-check took the row lock: the
/// denied acquire's transaction keeps no lock. 0.2.0 (the control) keeps it until that
/// transaction ends.
#[test]
fn v0_3_0_keeps_no_lock_after_a_lost_recheck() {
    let s = lost_recheck_in_a_transaction(Variant::V0_3_0);
    assert_eq!(s.lock, None, "0.3.0 kept a lock");
    let s = lost_recheck_in_a_transaction(Variant::V0_2_0);
    assert!(
        s.lock.is_some_and(|l| l.holder == 1 && l.pending.is_none()),
        "0.2.0 does not keep the lost race's lock: {:?}",
        s.lock
    );
}

/// Negative control: 0.2.0's INSERT dates the first grant with the clock of its VALUES, read
/// before it waits for another transaction inserting the key; when that transaction rolls
/// back, the insert goes ahead with the stale expiry.
#[test]
fn v0_2_0_grants_an_already_expired_first_lease_after_a_rolled_back_insert() {
    let cfg = AlgoConfig::of(Variant::V0_2_0);
    let (report, path, shortest) = counterexample(&cfg, NO_GRANT_EXPIRED_WHEN_WRITTEN);
    assert_eq!(
        report.violated(),
        [NO_GRANT_EXPIRED_WHEN_WRITTEN],
        "{report}"
    );
    assert_expired_first_grant_after_rolled_back_insert(&path, cfg.ttl);
    assert_expired_first_grant_after_rolled_back_insert(&shortest, cfg.ttl);
    let trace = report
        .counterexample(NO_GRANT_EXPIRED_WHEN_WRITTEN)
        .join("\n");
    assert!(
        trace.contains("ROLLBACK (discards its uncommitted"),
        "{trace}"
    );
    assert!(trace.contains("uncommitted insert of the key"), "{trace}");
}

/// Explored completely, 0.2.0 breaks inv11 and nothing else, and reaches every `sometimes`.
#[test]
fn v0_2_0_breaks_only_the_first_grant_dating() {
    let report = run(&AlgoConfig::of(Variant::V0_2_0), &[]).expect("valid config");
    println!("{report}");
    assert!(report.complete);
    assert_eq!(
        report.violated(),
        [NO_GRANT_EXPIRED_WHEN_WRITTEN],
        "{report}"
    );
    let sometimes = report.properties.iter().filter(|p| !p.always);
    for p in sometimes {
        assert!(p.holds(), "{:?} not reached:\n{report}", p.name);
    }
}

/// Without explicit transactions nothing rolls an insert back (an autocommit insert commits
/// in its step), and 0.2.0 keeps every property: the break needs the rollback.
#[test]
fn v0_2_0_needs_a_rolled_back_insert() {
    let cfg = AlgoConfig {
        txn_calls: 0,
        ..AlgoConfig::of(Variant::V0_2_0)
    };
    let report = run(&cfg, &[]).expect("valid config");
    println!("{report}");
    assert!(report.complete);
    assert!(report.violated().is_empty(), "{report}");
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
    // The mutant keeps 0.2.0's insert path, so the search may also have met inv11's break.
    let violated = report.violated();
    let others = violated
        .iter()
        .filter(|p| ![NO_RENEW_STALLED_BY_SLEEPER, NO_GRANT_EXPIRED_WHEN_WRITTEN].contains(p));
    assert_eq!(others.count(), 0, "{report}");
    assert!(violated.contains(&NO_RENEW_STALLED_BY_SLEEPER), "{report}");
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
    assert_eq!(Variant::from_name("0.3.0"), Some(Variant::V0_3_0));
    assert_eq!(Variant::from_name("0.4.0"), None);
}
