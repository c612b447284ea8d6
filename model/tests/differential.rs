//! The search against a brute-force linearizer on many small random histories: identical
//! verdicts. The brute force tries every order of every entry, places an unknown op at any
//! point or nowhere, and sees all keys as one partition, so it checks the search's
//! memoisation, its pending-op closure and the per-key partitioning; both judge each step
//! with the same rules (`checker::state::apply`).

use model::checker::intern::{Ctx, Prepared};
use model::checker::state::{apply, PState};
use model::checker::{check, merge, partition, EntryKind, Partition, Windows};
use model::gen::{generate, GenConfig, Rng};
use model::history::{History, TxnEnd};
use model::{Budget, CheckOptions, Interval, Mutation, Op, OpResult, Outcome, Row, Spec, Ts};

/// True when some order of the entries (each placed once, unknown ones optional) respects
/// real time and every step is allowed.
fn brute_force(history: &History) -> bool {
    let windows = Windows::derive(history);
    let part = merge(&partition(history, &windows));
    let prepared = Prepared::new(history);
    let spec = Spec::CORRECT;
    let cx = Ctx {
        spec: &spec,
        history,
        prepared: &prepared,
        part: &part,
    };
    let mut placed = vec![false; part.entries.len()];
    search(cx, &part, &mut placed, &PState::default())
}

fn search(cx: Ctx<'_>, part: &Partition, placed: &mut [bool], state: &PState) -> bool {
    let n = part.entries.len();
    let unplaced = |i: usize, placed: &[bool]| !placed[i];
    if (0..n).all(|i| placed[i] || part.entries[i].ret.is_none()) {
        return true;
    }
    for i in 0..n {
        if !unplaced(i, placed) {
            continue;
        }
        let e = &part.entries[i];
        // every entry that returned before this one was called must come first
        let blocked = (0..n).any(|j| {
            unplaced(j, placed) && j != i && part.entries[j].ret.is_some_and(|r| r < e.call)
        });
        if blocked {
            continue;
        }
        let ended = match e.kind {
            EntryKind::Op(_) => e
                .txn
                .and_then(|t| part.txn_end.get(&t))
                .is_some_and(|end| placed[*end]),
            _ => false,
        };
        let Ok(next) = apply(cx, i, state, ended, false) else {
            continue;
        };
        placed[i] = true;
        for s in &next {
            if search(cx, part, placed, s) {
                placed[i] = false;
                return true;
            }
        }
        placed[i] = false;
    }
    false
}

/// Changes one answer of `h` the way a buggy server might.
fn perturb(h: &mut History, rng: &mut Rng) {
    let oks: Vec<usize> = (0..h.ops.len())
        .filter(|i| matches!(h.ops[*i].result, OpResult::Ok(_)))
        .collect();
    if oks.is_empty() {
        return;
    }
    let i = *rng.pick(&oks);
    let OpResult::Ok(o) = &h.ops[i].result else {
        return;
    };
    let d = if rng.chance(50) { 1 } else { -1 };
    let changed = match o.clone() {
        Outcome::Acquired { epoch, expires_at } if rng.chance(50) => Outcome::Acquired {
            epoch: epoch + d,
            expires_at,
        },
        // an expiry an hour off: a day of 23 or 25 hours (local time arithmetic)
        Outcome::Acquired { epoch, expires_at } if rng.chance(30) => Outcome::Acquired {
            epoch,
            expires_at: Ts(expires_at.0 + 3_600_000_000 * d),
        },
        Outcome::Acquired { .. } => Outcome::Denied,
        Outcome::Denied => Outcome::Acquired {
            epoch: rng.range(1, 4),
            expires_at: Ts(h.ops[i].invoke as i64 / 1000 + 60),
        },
        Outcome::Renewed { expires_at } => Outcome::Renewed {
            expires_at: Ts(expires_at.0 + 7 * d),
        },
        Outcome::Released | Outcome::Lapsed => Outcome::NotOwner,
        Outcome::NotOwner | Outcome::EpochMismatch => Outcome::Released,
        Outcome::Inspected(Some(r)) => Outcome::Inspected(Some(Row {
            epoch: r.epoch + d,
            ..r
        })),
        Outcome::Inspected(None) => Outcome::Inspected(Some(Row {
            held: false,
            owner: None,
            epoch: 1,
            expires_at: None,
        })),
        other => other,
    };
    h.ops[i].result = OpResult::Ok(changed);
}

fn ttl_of(op: &Op<String, String>) -> Option<Interval> {
    match op {
        Op::Acquire { ttl, .. } | Op::Renew { ttl, .. } => *ttl,
        _ => None,
    }
}

fn small_history(seed: u64) -> History {
    let mut rng = Rng::new(seed);
    let mutation = if rng.chance(25) {
        *rng.pick(&Mutation::ALL)
    } else {
        Mutation::None
    };
    let mut cfg = GenConfig::small(Spec::new(mutation), rng.range(2, 5) as usize);
    cfg.clients = rng.range(1, 3) as u32;
    cfg.keys = rng.range(1, 2) as u32;
    cfg.unknown_pct = 15;
    cfg.lapse_permille = 80;
    cfg.restart_permille = 40;
    cfg.txn_pct = 15;
    cfg.calendar_pct = 15;
    let mut h = generate(&cfg, seed);
    if rng.chance(30) {
        perturb(&mut h, &mut rng);
    }
    h
}

#[test]
fn small_histories_are_what_the_test_needs() {
    let (mut unknowns, mut lapses, mut restarts, mut txns, mut ops) = (0, 0, 0, 0, 0);
    let (mut processes, mut calendar, mut rollbacks, mut unknown_ends) = (0, 0, 0, 0);
    let (mut crashes_after_lost, mut waits, mut timeouts) = (0, 0, 0);
    for seed in 0..10_000 {
        let h = small_history(seed);
        calendar += h
            .ops
            .iter()
            .filter(|o| ttl_of(&o.call).is_some_and(|t| t.months != 0 || t.days != 0))
            .count();
        rollbacks += h.txns.iter().filter(|t| t.end == TxnEnd::Rollback).count();
        unknown_ends += h.txns.iter().filter(|t| t.end == TxnEnd::Unknown).count();
        waits += h
            .ops
            .iter()
            .filter(
                |o| matches!(&o.call, Op::Acquire { wait: Some(w), .. } if *w != Interval::ZERO),
            )
            .count();
        timeouts += h
            .ops
            .iter()
            .filter(|o| o.result.outcome() == Outcome::Timeout)
            .count();
        // a crash after a call that lost its answer
        let first_lost = h
            .ops
            .iter()
            .filter(|o| o.result.is_unknown())
            .map(|o| o.invoke)
            .min();
        if first_lost.is_some_and(|l| h.nemeses.iter().any(|n| n.fault == "crash" && n.start > l)) {
            crashes_after_lost += 1;
        }
        assert!(h.ops.len() <= 8, "seed {seed}: {} ops", h.ops.len());
        ops += h.ops.len();
        unknowns += h.ops.iter().filter(|o| o.result.is_unknown()).count();
        lapses += h.nemeses.iter().filter(|n| n.fault == "lapse").count();
        restarts += h.nemeses.iter().filter(|n| n.fault == "crash").count();
        txns += h.txns.len();
        let mut ps: Vec<u32> = h.ops.iter().map(|o| o.process).collect();
        ps.sort();
        ps.dedup();
        processes += ps.len();
    }
    println!(
        "ops {ops} unknown {unknowns} lapses {lapses} restarts {restarts} txns {txns} \
         (rolled back {rollbacks}, unknown end {unknown_ends}) processes {processes} \
         calendar ttls {calendar} crashes after a lost call {crashes_after_lost} \
         waits {waits} timeouts {timeouts}"
    );
    assert!(unknowns > 1000 && lapses > 500 && restarts > 200 && txns > 500);
    assert!(calendar > 500 && rollbacks > 100 && unknown_ends > 50);
    assert!(crashes_after_lost > 100 && waits > 500 && timeouts > 50);
}

/// Histories the agreement test draws: 10,000 in CI, `LEASECHECK_DIFFERENTIAL=N` for more
/// (the bar is >= 100,000: `LEASECHECK_DIFFERENTIAL=100000 cargo test --release -p
/// model --test differential`).
fn histories() -> u64 {
    std::env::var("LEASECHECK_DIFFERENTIAL")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(10_000)
}

/// Seeds of `small_history` on which the search and the brute force disagreed, named by
/// what was wrong: each stays here once fixed, whatever `histories()` is. (A seed's history
/// depends on the generator: after a change of `small_history` or `model::gen` these are
/// re-found and replaced by the same classes' new seeds.) No run of the released search has
/// disagreed (200,000 histories with `LEASECHECK_DIFFERENTIAL=200000`); the seeds below
/// are those a search that never fired the calls a restart deferred got wrong (issue 17
/// (c)'s class), found by breaking `checker::fire` on purpose.
const REGRESSIONS: &[(&str, u64)] = &[
    ("restart-deferred-call-never-fired", 51),
    ("restart-deferred-call-never-fired", 573),
    ("restart-deferred-call-never-fired", 637),
    ("restart-deferred-call-never-fired", 832),
    ("restart-deferred-call-never-fired", 991),
    ("restart-deferred-call-never-fired", 1623),
];

fn opts() -> CheckOptions {
    CheckOptions {
        budget: Budget::UNLIMITED,
        prechecks: false,
        diagnosis: None,
        ..CheckOptions::default()
    }
}

/// The search's verdict on `seed`'s history equals the brute force's: `Err` names a
/// mismatch.
fn agree(seed: u64) -> Result<bool, String> {
    let h = small_history(seed);
    let expected = brute_force(&h);
    let verdict = check(&h, &opts());
    if verdict.is_linearizable() != expected {
        return Err(format!(
            "seed {seed}: brute force says {expected}, search says:\n{verdict}\n{h:#?}"
        ));
    }
    Ok(expected)
}

#[test]
fn search_agrees_with_brute_force_on_small_histories() {
    let n = histories();
    let (mut valid, mut invalid) = (0, 0);
    let mut mismatches = Vec::new();
    for seed in 0..n {
        match agree(seed) {
            Ok(true) => valid += 1,
            Ok(false) => invalid += 1,
            Err(e) => mismatches.push(e),
        }
    }
    println!(
        "{n} histories: {valid} linearizable, {invalid} not, {} mismatches",
        mismatches.len()
    );
    assert!(
        mismatches.is_empty(),
        "{} mismatches (keep each in REGRESSIONS):\n{}",
        mismatches.len(),
        mismatches
            .iter()
            .take(3)
            .cloned()
            .collect::<Vec<_>>()
            .join("\n\n")
    );
    // the generator must exercise both verdicts
    assert!(valid > n / 5 && invalid > n / 5, "{valid} / {invalid}");
}

#[test]
fn every_mismatch_ever_found_stays_agreed() {
    for (name, seed) in REGRESSIONS {
        if let Err(e) = agree(*seed) {
            panic!("{name}: {e}");
        }
    }
}
