//! The linear pre-checks: each one catches the violations it is for (naming the invariant),
//! the search alone rejects the same histories (the pre-checks only find sooner what the
//! search finds), near-miss valid histories pass with and without them, and on random
//! histories they never report what the search accepts.

mod common;

use common::*;
use model::checker::{check, partition, precheck, FoundBy, Windows};
use model::history::{History, NemesisEffect, NemesisRecord, OpResult, TxnEnd};
use model::{CheckOptions, Interval, Invariant, Op, Outcome, Spec, Store, Ts, Verdict};

/// Pre-checks on or off; no diagnosis, so the verdict names what the pre-check or the
/// search found (diagnosis may name another invariant the same history also breaks).
fn options(prechecks: bool) -> CheckOptions {
    CheckOptions {
        prechecks,
        diagnosis: None,
        ..CheckOptions::default()
    }
}

/// The pre-check `name` catches `h` first, with `offending` as its first op and naming
/// `invariant`; the search alone rejects `h` too.
fn assert_caught(h: &H, name: &'static str, invariant: Invariant, offending: u64) {
    let history = h.build();
    let verdict = check(&history, &options(true));
    println!("{verdict}");
    let Some(v) = verdict.violation() else {
        panic!("expected the pre-check {name} to catch it, got:\n{verdict}");
    };
    assert_eq!(v.found_by, FoundBy::Precheck(name), "{v}");
    assert_eq!(v.invariant, invariant, "{v}");
    assert_eq!(v.ops.first(), Some(&offending), "{v}");
    assert!(v.ops.len() >= 2, "names the op it conflicts with: {v}");
    assert!(v.prefix.is_empty());
    assert_eq!(v.keys, vec![k("k")]);
    assert!(v.explanation.contains(invariant.statement()), "{v}");
    let search = check(&history, &options(false));
    println!("search alone: {search}");
    assert!(
        matches!(&search, Verdict::Violation(s) if s.found_by == FoundBy::Search),
        "the search alone must reject it too, got:\n{search}"
    );
}

/// The search rejects `h` and no pre-check does: a violation left to the search.
fn assert_left_to_search(h: &H) {
    let verdict = check(&h.build(), &options(true));
    println!("{verdict}");
    assert!(
        matches!(&verdict, Verdict::Violation(v) if v.found_by == FoundBy::Search),
        "expected the search to find it, got:\n{verdict}"
    );
}

/// `h` is linearizable with and without the pre-checks.
fn assert_valid(h: &H) {
    let history = h.build();
    for prechecks in [true, false] {
        let verdict = check(&history, &options(prechecks));
        println!("prechecks {prechecks}: {verdict}");
        assert!(
            verdict.is_linearizable(),
            "expected linearizable:\n{verdict}"
        );
    }
}

const MONTH: Interval = Interval {
    months: 1,
    days: 0,
    micros: 0,
};
const DAY_US: i64 = 86_400_000_000;

// --- invariant 3: grant epochs -----------------------------------------------------------

#[test]
fn one_epoch_granted_to_two_owners_is_caught() {
    let mut h = H::new();
    h.op(1, acq("k", "a", us(100)), 0, 1, acquired(1, 100))
        .op(1, release("k", "a", 1), 10, 11, ok(Outcome::Released))
        .op(2, acq("k", "b", us(100)), 20, 21, acquired(1, 120));
    assert_caught(&h, "grant-epoch-owner", Invariant::GrantEpochFresh, 3);
}

#[test]
fn one_epoch_granted_in_a_committed_transaction_and_again_is_caught() {
    let mut h = H::new();
    h.op_in(1, Some(7), acq("k", "a", us(100)), 0, 1, acquired(1, 100))
        .txn(7, 1, 0, 2, 3, TxnEnd::Commit)
        .op(2, acq("k", "b", us(100)), 200, 201, acquired(1, 300));
    assert_caught(&h, "grant-epoch-owner", Invariant::GrantEpochFresh, 2);
}

#[test]
fn smaller_epoch_after_a_committed_grant_is_caught() {
    // b's epoch 2 commits at 13; a's acquire invoked at 20 reports epoch 1
    let mut h = H::new();
    h.op(1, acq("k", "a", us(5)), 0, 1, acquired(1, 6))
        .op_in(2, Some(7), acq("k", "b", us(5)), 10, 11, acquired(2, 16))
        .txn(7, 2, 10, 12, 13, TxnEnd::Commit)
        .op(1, acq("k", "a", us(5)), 20, 21, acquired(1, 26));
    assert_caught(&h, "grant-epoch-order", Invariant::GrantEpochFresh, 3);
}

#[test]
fn reader_during_an_open_transaction_may_see_the_older_epoch() {
    // Transaction 7 releases a's lease and grants epoch 3 to b; a's re-acquire runs before
    // the commit and idempotently sees the committed epoch 1: epochs "go back" in real time
    // only because the grant of epoch 3 is not visible until the commit.
    let mut h = H::new();
    h.op(1, acq("k", "a", us(1000)), 0, 1, acquired(1, 1000))
        .op_in(
            2,
            Some(7),
            release("k", "a", 1),
            10,
            11,
            ok(Outcome::Released),
        )
        .op_in(2, Some(7), acq("k", "b", us(100)), 20, 21, acquired(3, 120))
        .op(1, acq("k", "a", us(1000)), 25, 26, acquired(1, 1000))
        .txn(7, 2, 9, 30, 31, TxnEnd::Commit);
    assert_valid(&h);
}

#[test]
fn rolled_back_grant_with_a_reused_epoch_is_valid() {
    let mut h = H::new();
    h.op_in(1, Some(7), acq("k", "a", us(1000)), 0, 1, acquired(1, 1000))
        .txn(7, 1, 0, 2, 3, TxnEnd::Rollback)
        .op(2, acq("k", "b", us(100)), 10, 11, acquired(1, 110));
    assert_valid(&h);
}

#[test]
fn grant_lost_by_a_restart_before_its_commit_may_be_reused() {
    // The checker drops a transaction's pending writes at a restart, so the commit that
    // follows commits nothing and epoch 1 is granted again.
    let mut h = H::new();
    h.op_in(1, Some(7), acq("k", "a", us(1000)), 0, 1, acquired(1, 1000))
        .restart(5, 6)
        .txn(7, 1, 0, 10, 11, TxnEnd::Commit)
        .op(2, acq("k", "b", us(100)), 20, 21, acquired(1, 120));
    assert_valid(&h);
}

#[test]
fn idempotent_reacquire_is_not_a_new_grant() {
    let mut h = H::new();
    h.op(1, acq("k", "a", us(100)), 0, 0, acquired(1, 100))
        .op(1, acq("k", "a", us(500)), 10, 11, acquired(1, 100))
        .op(2, acq("k", "b", us(500)), 20, 21, ok(Outcome::Denied))
        .op(1, acq("k", "a", us(50)), 90, 91, acquired(1, 100))
        .op(2, acq("k", "b", us(100)), 150, 151, acquired(2, 250));
    assert_valid(&h);
}

// --- invariant 1: mutual exclusion ---------------------------------------------------------

#[test]
fn concurrent_winners_are_caught() {
    let mut h = H::new();
    h.op(1, acq("k", "a", us(100)), 0, 10, acquired(1, 105)).op(
        2,
        acq("k", "b", us(100)),
        0,
        10,
        acquired(2, 106),
    );
    assert_caught(&h, "grant-overlap", Invariant::MutualExclusion, 2);
}

#[test]
fn grant_backdated_before_a_release_is_caught() {
    // b's grant reports an expiry that puts its effect at 30, before a released at 40
    let mut h = H::new();
    h.op(1, acq("k", "a", us(10_000)), 0, 1, acquired(1, 10_000))
        .op(1, release("k", "a", 1), 40, 45, ok(Outcome::Released))
        .op(2, acq("k", "b", us(100)), 20, 60, acquired(3, 130));
    assert_caught(&h, "grant-overlap", Invariant::MutualExclusion, 3);
}

/// a's lease, released in transaction 7 whose COMMIT is sent at 40 (`end`); an inspect at
/// [35, 36] still sees a's lease, so the COMMIT came after 36; b's grant is dated `b_at`
/// by its expiry.
fn release_in_a_transaction(end: TxnEnd, b_at: i64) -> H {
    let mut h = H::new();
    h.op(1, acq("k", "a", us(10_000)), 0, 1, acquired(1, 10_000))
        .op_in(
            2,
            Some(7),
            release("k", "a", 1),
            10,
            11,
            ok(Outcome::Released),
        )
        .op(4, inspect("k"), 35, 36, held("a", 1, 10_000))
        .txn(7, 2, 9, 40, 41, end)
        .op(3, acq("k", "b", us(100)), 20, 60, acquired(3, b_at + 100));
    h
}

#[test]
fn grant_before_the_commit_of_a_release_is_caught() {
    // b's grant waited for the row lock of a's release and is dated 30, before the COMMIT
    // (issue 17 (b)): the pre-check orders it from the COMMIT's window as the search does
    assert_caught(
        &release_in_a_transaction(TxnEnd::Commit, 30),
        "grant-overlap",
        Invariant::MutualExclusion,
        4,
    );
}

#[test]
fn grant_before_an_unknown_commit_of_a_release_is_caught() {
    // the same with the COMMIT's answer lost: committed, b came too early; not committed,
    // a's lease was still live
    assert_caught(
        &release_in_a_transaction(TxnEnd::Unknown, 30),
        "grant-overlap",
        Invariant::MutualExclusion,
        4,
    );
}

#[test]
fn a_grant_in_the_releasing_transaction_may_precede_its_commit() {
    // the control of the pre-check's rule: a transaction that releases and then acquires
    // the key itself grants before its own COMMIT
    let mut h = H::new();
    h.op(1, acq("k", "a", us(10_000)), 0, 1, acquired(1, 10_000))
        .op_in(
            2,
            Some(7),
            release("k", "a", 1),
            10,
            11,
            ok(Outcome::Released),
        )
        .op_in(2, Some(7), acq("k", "b", us(100)), 20, 21, acquired(3, 120))
        .txn(7, 2, 9, 40, 41, TxnEnd::Commit);
    assert_valid(&h);
}

#[test]
fn grant_after_the_commit_of_a_release_is_valid() {
    // the controls: b's grant dated 50, after the COMMIT's window (committed for sure, or
    // with its answer lost)
    assert_valid(&release_in_a_transaction(TxnEnd::Commit, 50));
    assert_valid(&release_in_a_transaction(TxnEnd::Unknown, 50));
}

/// a holds the key until 10,000; b's acquire invoked at 10 loses its answer and a crash
/// ([20, 30]) ends b's session; after it b reports epoch 2 expiring at `b_expiry` (ttl
/// 10,000): the lost acquire's grant, dated by that expiry.
fn lost_acquire_then_crash(b_expiry: i64) -> H {
    let mut h = H::new();
    h.op(1, acq("k", "a", us(10_000)), 0, 1, acquired(1, 10_000))
        .op(2, acq("k", "b", us(10_000)), 10, 11, unknown())
        .restart(20, 30)
        .op(3, acq("k", "b", us(10_000)), 40, 41, acquired(2, b_expiry));
    h
}

#[test]
fn lost_acquire_before_a_crash_that_overlaps_is_caught() {
    // the lost acquire can have granted only before the crash (issue 17 (c)), while a's
    // lease was live: the pre-check sees it without searching
    let history = lost_acquire_then_crash(10_015).build();
    let v = check(&history, &options(true));
    let found = v.violation().expect("a violation");
    assert_eq!(found.found_by, FoundBy::Precheck("grant-overlap"), "{v}");
    assert_eq!(found.invariant, Invariant::MutualExclusion, "{v}");
    assert!(check(&history, &options(false)).violation().is_some());
}

#[test]
fn lost_acquire_granted_after_the_lease_lapsed_is_valid() {
    // the control: b's acquire after a's lease lapsed is granted epoch 2 (the lost one
    // never took effect)
    let mut h = H::new();
    h.op(1, acq("k", "a", us(10_000)), 0, 1, acquired(1, 10_000))
        .op(2, acq("k", "b", us(10_000)), 10, 11, unknown())
        .restart(20, 30)
        .op(
            3,
            acq("k", "b", us(10_000)),
            10_040,
            10_041,
            acquired(2, 20_040),
        );
    assert_valid(&h);
}

#[test]
fn grant_before_an_injected_lapse_is_caught() {
    let mut h = H::new();
    h.op(1, acq("k", "a", us(100_000)), 0, 1, acquired(1, 100_000))
        .op(2, acq("k", "b", us(100)), 30, 31, acquired(2, 130))
        .lapse("k", 50, 51);
    assert_caught(&h, "grant-overlap", Invariant::MutualExclusion, 2);
}

#[test]
fn grant_during_a_month_long_lease_is_caught() {
    let mut h = H::new();
    h.op(1, acq("k", "a", MONTH), 0, 1, acquired(1, 28 * DAY_US))
        .op(2, acq("k", "b", us(100)), 1000, 1001, acquired(2, 1100));
    assert_caught(&h, "grant-overlap", Invariant::MutualExclusion, 2);
}

#[test]
fn new_grant_to_the_live_holder_is_caught_as_non_idempotent() {
    let mut h = H::new();
    h.op(1, acq("k", "a", us(100)), 0, 0, acquired(1, 100)).op(
        1,
        acq("k", "a", us(500)),
        10,
        11,
        acquired(2, 510),
    );
    assert_caught(&h, "grant-overlap", Invariant::ReacquireIdempotent, 2);
}

#[test]
fn lapse_nemesis_then_takeover_is_valid() {
    let mut h = H::new();
    h.op(1, acq("k", "a", us(100_000)), 0, 1, acquired(1, 100_000))
        .lapse("k", 10, 11)
        .op(2, acq("k", "b", us(100)), 20, 21, acquired(2, 120))
        .op(
            1,
            renew("k", "a", 1, us(100)),
            30,
            31,
            ok(Outcome::NotOwner),
        );
    assert_valid(&h);
}

#[test]
fn lapse_with_a_lost_answer_then_takeover_is_valid() {
    // The fault's answer was lost: it may have cut a's lease at any instant after it began.
    let mut h = H::new();
    h.op(1, acq("k", "a", us(100_000)), 0, 1, acquired(1, 100_000))
        .op(2, acq("k", "b", us(100)), 20, 21, acquired(2, 120));
    h.h.nemeses.push(NemesisRecord {
        id: 1,
        fault: "lapse".to_string(),
        start: 10_000,
        end: 11_000,
        effect: NemesisEffect::Lapse {
            key: k("k"),
            server: None,
            applied: None,
        },
        detail: String::new(),
    });
    assert_valid(&h);
}

#[test]
fn release_then_new_grant_is_valid() {
    let mut h = H::new();
    h.op(1, acq("k", "a", us(1000)), 0, 1, acquired(1, 1000))
        .op(1, release("k", "a", 1), 10, 11, ok(Outcome::Released))
        .op(2, acq("k", "b", us(100)), 20, 21, acquired(3, 120))
        .op(2, inspect("k"), 30, 31, held("b", 3, 120));
    assert_valid(&h);
}

#[test]
fn month_long_ttls_are_valid() {
    // A month is the calendar's: from 2026-01-31 it ends on 2026-02-28 (28 days later,
    // clamped), from 2026-02-28 on 2026-03-28, from 1970-01-01 after 31 days.
    let jan31 = 1_769_817_600_000_000;
    let mut h = H::new();
    h.op(
        1,
        acq("k", "a", MONTH),
        jan31,
        jan31 + 1,
        acquired(1, jan31 + 28 * DAY_US),
    )
    .op(
        1,
        renew("k", "a", 1, MONTH),
        jan31 + 1000,
        jan31 + 1001,
        renewed(jan31 + 1000 + 28 * DAY_US),
    )
    .op(
        1,
        release("k", "a", 1),
        jan31 + 2000,
        jan31 + 2001,
        ok(Outcome::Released),
    )
    .op(
        2,
        acq("k", "b", MONTH),
        jan31 + 28 * DAY_US,
        jan31 + 28 * DAY_US + 1,
        acquired(3, jan31 + 56 * DAY_US),
    );
    assert_valid(&h);
    let mut epoch_start = H::new();
    epoch_start.op(1, acq("k", "a", MONTH), 0, 1, acquired(1, 31 * DAY_US));
    assert_valid(&epoch_start);
}

#[test]
fn a_month_is_not_any_28_to_31_days() {
    // 30 days after 2026-01-31 is no month after any instant of the window (issue 17 (a))
    let jan31 = 1_769_817_600_000_000;
    for days in [27, 29, 30, 31] {
        let mut h = H::new();
        h.op(
            1,
            acq("k", "a", MONTH),
            jan31,
            jan31 + 1,
            acquired(1, jan31 + days * DAY_US),
        );
        let v = check(&h.build(), &options(true));
        assert!(!v.is_linearizable(), "{days} days: {v}");
    }
}

#[test]
fn grant_inside_the_expiry_straddle_is_valid() {
    // a's lease expires at 100; b's window [95, 105] may put its grant at 100
    let mut h = H::new();
    h.op(1, acq("k", "a", us(100)), 0, 0, acquired(1, 100)).op(
        2,
        acq("k", "b", us(50)),
        95,
        105,
        acquired(2, 150),
    );
    assert_valid(&h);
}

// --- invariant 7: lapse is final -----------------------------------------------------------

#[test]
fn renew_after_a_definite_lapse_is_caught() {
    let mut h = H::new();
    h.op(1, acq("k", "a", us(100)), 0, 0, acquired(1, 100)).op(
        1,
        renew("k", "a", 1, us(100)),
        150,
        151,
        renewed(250),
    );
    assert_caught(&h, "success-after-lapse", Invariant::LapseIsFinal, 2);
}

#[test]
fn release_after_a_definite_lapse_is_caught() {
    let mut h = H::new();
    h.op(1, acq("k", "a", us(100)), 0, 0, acquired(1, 100)).op(
        1,
        release("k", "a", 1),
        150,
        151,
        ok(Outcome::Released),
    );
    assert_caught(&h, "success-after-lapse", Invariant::LapseIsFinal, 2);
}

#[test]
fn renew_after_the_last_extension_lapsed_is_caught() {
    let mut h = H::new();
    h.op(1, acq("k", "a", us(100)), 0, 0, acquired(1, 100))
        .op(1, renew("k", "a", 1, us(100)), 50, 51, renewed(150))
        .op(1, renew("k", "a", 1, us(100)), 200, 201, renewed(300));
    assert_caught(&h, "success-after-lapse", Invariant::LapseIsFinal, 3);
}

#[test]
fn committed_renew_after_a_lapse_is_caught() {
    let mut h = H::new();
    h.op(1, acq("k", "a", us(100)), 0, 0, acquired(1, 100))
        .op_in(
            1,
            Some(7),
            renew("k", "a", 1, us(100)),
            150,
            151,
            renewed(250),
        )
        .txn(7, 1, 149, 152, 153, TxnEnd::Commit);
    assert_caught(&h, "success-after-lapse", Invariant::LapseIsFinal, 2);
}

#[test]
fn renew_after_an_injected_lapse_is_left_to_the_search() {
    // An injected lapse may set a later expiry than a lapsed lease had (it stores the
    // lapse instant), so the pre-check only ever raises its bound and cannot use it here.
    let mut h = H::new();
    h.op(1, acq("k", "a", us(100_000)), 0, 1, acquired(1, 100_000))
        .lapse("k", 10, 11)
        .op(1, renew("k", "a", 1, us(100)), 20, 21, renewed(120));
    assert_left_to_search(&h);
}

#[test]
fn unknown_renew_that_extended_the_lease_is_valid() {
    let mut h = H::new();
    h.op(1, acq("k", "a", us(100)), 0, 0, acquired(1, 100))
        .op(1, renew("k", "a", 1, us(1000)), 50, 60, unknown())
        .op(2, renew("k", "a", 1, us(100)), 150, 151, renewed(250))
        .op(2, release("k", "a", 1), 200, 201, ok(Outcome::Released));
    assert_valid(&h);
}

#[test]
fn unknown_acquire_that_granted_late_is_valid() {
    // a's lost acquire took effect at 10 (epoch 1 until 1010); a's later acquire is its
    // idempotent re-acquire and the renew at 500 extends that lease
    let mut h = H::new();
    h.op(1, acq("k", "a", us(1000)), 0, 5, unknown())
        .op(2, acq("k", "a", us(100)), 20, 21, acquired(1, 1010))
        .op(2, renew("k", "a", 1, us(100)), 500, 501, renewed(600))
        .op(3, acq("k", "b", us(100)), 700, 701, acquired(2, 800));
    assert_valid(&h);
}

#[test]
fn renew_straddling_the_expiry_is_valid() {
    let mut h = H::new();
    h.op(1, acq("k", "a", us(100)), 0, 0, acquired(1, 100)).op(
        1,
        renew("k", "a", 1, us(100)),
        99,
        100,
        renewed(199),
    );
    assert_valid(&h);
}

#[test]
fn prechecks_stay_silent_for_a_mutated_spec() {
    // Under takeover-reuses-epoch the search accepts a reused epoch; the pre-checks, which
    // encode the correct semantics, must not overrule it.
    let mut h = H::new();
    h.op(1, acq("k", "a", us(10)), 0, 0, acquired(1, 10)).op(
        2,
        acq("k", "b", us(10)),
        20,
        21,
        acquired(1, 30),
    );
    let history = h.build();
    let mutant = CheckOptions {
        spec: Spec::new(model::Mutation::TakeoverReusesEpoch),
        ..CheckOptions::default()
    };
    assert!(check(&history, &mutant).is_linearizable());
    assert_caught(&h, "grant-epoch-owner", Invariant::GrantEpochFresh, 2);
}

// --- random histories: the pre-checks never overrule the search -----------------------

/// A small deterministic random source (splitmix64).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n`.
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }

    /// Uniform in `0..=n`.
    fn upto(&mut self, n: i64) -> i64 {
        self.below(n.max(0) as u64 + 1) as i64
    }

    fn percent(&mut self, p: u64) -> bool {
        self.below(100) < p
    }
}

/// Builds a random history: calls take effect at increasing server instants (the true
/// linearization) with the outcome `Spec::step` gives there, inside random windows around
/// them; some outcomes are lost, some calls run in transactions, lapses and restarts are
/// injected, and some results are tampered with.
struct Gen {
    rng: Rng,
    keys: Vec<String>,
    /// Largest distance of a window edge from its instant.
    spread: i64,
    /// Percent of calls whose reported result is tampered with.
    tamper: u64,
    store: Store<String, String>,
    h: H,
    now: i64,
    /// Per process (id = index + 1): when it is free again; `None` once retired.
    processes: Vec<Option<i64>>,
    next_txn: u64,
    tampered: bool,
    /// When the last restart ended: no session opened before it survives it.
    restarted_at: i64,
}

impl Gen {
    fn new(seed: u64) -> Gen {
        let mut rng = Rng(seed);
        let keys = if rng.percent(50) { 1 } else { 2 };
        let spread = [2, 10, 40][rng.below(3) as usize];
        let tamper = [0, 0, 5, 15][rng.below(4) as usize];
        Gen {
            rng,
            keys: ["k", "j"][..keys].iter().map(|s| s.to_string()).collect(),
            spread,
            tamper,
            store: Store::new(),
            h: H::new(),
            // far enough from 0 that no window reaches a negative instant
            now: 1000,
            processes: Vec::new(),
            next_txn: 1,
            tampered: false,
            restarted_at: 0,
        }
    }

    fn history(mut self, steps: u64) -> (History, bool) {
        for _ in 0..steps {
            self.now += 1 + self.rng.upto(25);
            match self.rng.below(100) {
                0..=5 => self.lapse(),
                6..=7 => self.restart(),
                _ => self.call(),
            }
        }
        // Some answered calls come without a server window: the checker derives one.
        let mut history = self.h.build();
        for op in &mut history.ops {
            if self.rng.percent(5) {
                op.server = None;
            }
        }
        (history, self.tampered)
    }

    fn key(&mut self) -> String {
        let i = self.rng.below(self.keys.len() as u64) as usize;
        self.keys[i].clone()
    }

    /// A window around the current instant, opened after the last restart.
    fn window(&mut self) -> (i64, i64) {
        let t = self.now;
        let a = (t - self.rng.upto(self.spread)).max(self.restarted_at + 1);
        (a.min(t), t + self.rng.upto(self.spread))
    }

    /// A process free at `invoke` (sometimes a new one).
    fn process(&mut self, invoke: i64, busy_until: i64) -> u32 {
        let free: Vec<usize> = (0..self.processes.len())
            .filter(|p| self.processes[*p].is_some_and(|f| f < invoke))
            .collect();
        let p = if free.is_empty() || self.rng.percent(20) {
            self.processes.push(None);
            self.processes.len() - 1
        } else {
            free[self.rng.below(free.len() as u64) as usize]
        };
        self.processes[p] = Some(busy_until);
        p as u32 + 1
    }

    fn ttl(&mut self) -> Interval {
        match self.rng.below(100) {
            0..=4 => MONTH,
            5..=9 => Interval {
                months: 0,
                days: 1,
                micros: 0,
            },
            _ => us(5 + self.rng.upto(80)),
        }
    }

    fn random_op(&mut self, key: &str) -> Op<String, String> {
        let owner = ["a", "b", "c"][self.rng.below(3) as usize];
        let ttl = self.ttl();
        let st = self.store.state(&key.to_string());
        let (o, e) = match st.holder() {
            Some((holder, epoch, _)) if self.rng.percent(70) => (holder.clone(), epoch),
            _ => (owner.to_string(), st.epoch() + self.rng.upto(2) - 1),
        };
        match self.rng.below(100) {
            0..=39 => acq(key, owner, ttl),
            40..=64 => renew(key, &o, e, ttl),
            65..=79 => release(key, &o, e),
            _ => inspect(key),
        }
    }

    fn call(&mut self) {
        if self.rng.percent(12) {
            return self.txn();
        }
        let key = self.key();
        let op = self.random_op(&key);
        let (a, b) = self.window();
        let (outcome, after) = Spec::CORRECT.step(&self.store, &op, Ts(self.now));
        let (a, b) = self.maybe_shift(a, b);
        if self.rng.percent(7) {
            return self.lost(op, a, b, after);
        }
        let op = self.maybe_swap_owner(op);
        let result = OpResult::Ok(self.maybe_tamper(outcome, &op));
        let p = self.process(a, b);
        self.h.op(p, op, a, b, result);
        self.store = after;
    }

    /// The call as recorded: when tampering, an acquire by another owner.
    fn maybe_swap_owner(&mut self, op: Op<String, String>) -> Op<String, String> {
        match op {
            Op::Acquire {
                key,
                owner: Some(o),
                ttl,
                wait,
            } if self.rng.percent(self.tamper / 3) => {
                self.tampered = true;
                let other = if o == "a" { "b" } else { "a" };
                Op::Acquire {
                    key,
                    owner: Some(other.to_string()),
                    ttl,
                    wait,
                }
            }
            other => other,
        }
    }

    /// A window shifted by a few microseconds when tampering: the true instant may fall
    /// just outside it.
    fn maybe_shift(&mut self, a: i64, b: i64) -> (i64, i64) {
        if !self.rng.percent(self.tamper) {
            return (a, b);
        }
        self.tampered = true;
        let d = self.rng.upto(6) - 3;
        (a + d, b + d)
    }

    /// A call whose answer is lost: it took effect or not; its process retires.
    fn lost(&mut self, op: Op<String, String>, a: i64, b: i64, after: Store<String, String>) {
        let p = self.process(a, b);
        self.processes[p as usize - 1] = None;
        self.h.op(p, op, a, b, unknown());
        if self.rng.percent(50) {
            self.store = after;
        }
    }

    /// One to three calls in a transaction that commits, rolls back or ends unknown (and
    /// then committed or not). Nothing else takes effect before its end, as the row lock
    /// would ensure for writes.
    fn txn(&mut self) {
        let txn = self.next_txn;
        self.next_txn += 1;
        let end = match self.rng.below(10) {
            0..=4 => TxnEnd::Commit,
            5..=7 => TxnEnd::Rollback,
            _ => TxnEnd::Unknown,
        };
        let before = self.store.clone();
        let (begin, _) = self.window();
        let p = self.process(begin, i64::MAX);
        let mut last = begin;
        for _ in 0..1 + self.rng.below(3) {
            self.now = self.now.max(last + 1);
            let key = self.key();
            let op = self.random_op(&key);
            let (a, b) = self.window();
            let (outcome, after) = Spec::CORRECT.step(&self.store, &op, Ts(self.now));
            let result = OpResult::Ok(self.maybe_tamper(outcome, &op));
            self.h.op_in(p, Some(txn), op, a.max(last + 1), b, result);
            self.store = after;
            last = b;
        }
        let committed = match end {
            TxnEnd::Commit => true,
            TxnEnd::Rollback => false,
            TxnEnd::Unknown => self.rng.percent(50),
        };
        if !committed {
            self.store = before;
        }
        self.h.txn(txn, p, begin, last + 1, last + 2, end);
        self.processes[p as usize - 1] = (end != TxnEnd::Unknown).then_some(last + 2);
        self.now = self.now.max(last + 2);
    }

    fn lapse(&mut self) {
        let key = self.key();
        let (a, b) = self.window();
        let (outcome, after) =
            Spec::CORRECT.step(&self.store, &Op::expire(key.clone()), Ts(self.now));
        if self.rng.percent(80) {
            self.h
                .lapse_applied(&key, a, b, outcome == Outcome::Injected);
            self.store = after;
            return;
        }
        // the fault's answer was lost: it may or may not have applied
        let id = self.h.h.nemeses.len() as u64 + 1;
        self.h.h.nemeses.push(NemesisRecord {
            id,
            fault: "lapse".to_string(),
            start: (a * 1000) as u64,
            end: (b * 1000) as u64,
            effect: NemesisEffect::Lapse {
                key,
                server: None,
                applied: None,
            },
            detail: String::new(),
        });
        if self.rng.percent(50) {
            self.store = after;
        }
    }

    fn restart(&mut self) {
        let start = self.now;
        let end = start + 1 + self.rng.upto(10);
        self.h.restart(start, end);
        self.restarted_at = end;
        self.now = end + 1;
    }

    /// The outcome as reported: usually the true one.
    fn maybe_tamper(&mut self, o: Outcome<String>, op: &Op<String, String>) -> Outcome<String> {
        if !self.rng.percent(self.tamper) {
            return o;
        }
        self.tampered = true;
        let shift = if self.rng.percent(50) {
            self.rng.upto(6) - 3
        } else {
            self.rng.upto(60) - 30
        };
        let expiry = |t: i64| match op {
            Op::Acquire { ttl: Some(ttl), .. } | Op::Renew { ttl: Some(ttl), .. } => {
                ttl.advance(Ts(t))
            }
            _ => Ts(t),
        };
        let coin = self.rng.percent(50);
        match (o, op) {
            (Outcome::Acquired { epoch, expires_at }, _) if coin => Outcome::Acquired {
                epoch: epoch + if shift < 0 { -1 } else { 1 },
                expires_at,
            },
            (Outcome::Acquired { epoch, expires_at }, _) => Outcome::Acquired {
                epoch,
                expires_at: expires_at.plus(shift),
            },
            (Outcome::Denied, Op::Acquire { key: Some(k), .. }) => Outcome::Acquired {
                epoch: self.store.epoch(k) + i64::from(coin),
                expires_at: expiry(self.now),
            },
            (Outcome::Renewed { expires_at }, _) if coin => Outcome::Renewed {
                expires_at: expires_at.plus(shift),
            },
            (Outcome::Renewed { .. }, _) => Outcome::Lapsed,
            (Outcome::Lapsed | Outcome::NotOwner | Outcome::EpochMismatch, Op::Renew { .. }) => {
                Outcome::Renewed {
                    expires_at: expiry(self.now),
                }
            }
            (Outcome::Lapsed | Outcome::NotOwner | Outcome::EpochMismatch, _) => Outcome::Released,
            (Outcome::Released, _) => Outcome::Lapsed,
            (Outcome::Inspected(_), _) => Outcome::Inspected(None),
            (other, _) => other,
        }
    }
}

/// The first pre-check finding over the partitions of `history`.
fn precheck_finding(history: &History) -> Option<model::checker::Violation> {
    let windows = Windows::derive(history);
    partition(history, &windows)
        .iter()
        .find_map(|part| precheck::run(&Spec::CORRECT, history, part))
}

#[derive(Debug, Default)]
struct Tally {
    accepted: u32,
    rejected: u32,
    unknown: u32,
    caught_first: u32,
    /// Findings by pre-check name.
    by_check: std::collections::BTreeMap<&'static str, u32>,
    tampered_accepted: u32,
    /// Seeds of histories told as they happened that the search rejects (must be none).
    untampered_violations: Vec<u64>,
}

#[test]
fn prechecks_never_report_what_the_search_accepts() {
    let search_only = CheckOptions {
        prechecks: false,
        budget: model::Budget {
            time: Some(std::time::Duration::from_secs(5)),
            states: Some(200_000),
            ..model::Budget::default()
        },
        ..CheckOptions::default()
    };
    let mut tally = Tally::default();
    for seed in std::env::var("SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .map_or(0..3000u64, |s: u64| s..s + 1)
    {
        let mut gen = Gen::new(seed);
        let steps = 6 + gen.rng.below(18);
        let (history, tampered) = gen.history(steps);
        let search = check(&history, &search_only);
        let finding = precheck_finding(&history);
        match (&search, &finding) {
            (Verdict::Linearizable(_), Some(v)) => panic!(
                "seed {seed}: a pre-check reports a history the search accepts:\n{v}\n{history:#?}"
            ),
            (Verdict::Linearizable(_), None) => tally.accepted += 1,
            (Verdict::Violation(_), _) => tally.rejected += 1,
            (Verdict::Unknown(_), _) => tally.unknown += 1,
        }
        tally.caught_first += u32::from(finding.is_some());
        if let Some(FoundBy::Precheck(name)) = finding.map(|v| v.found_by) {
            *tally.by_check.entry(name).or_default() += 1;
        }
        tally.tampered_accepted += u32::from(tampered && search.is_linearizable());
        if !tampered && search.violation().is_some() {
            tally.untampered_violations.push(seed);
        }
    }
    println!("{tally:#?}");
    assert!(
        tally.untampered_violations.is_empty(),
        "the generator must tell valid histories when it does not tamper: {tally:#?}"
    );
    assert!(
        tally.tampered_accepted >= 100,
        "tampering must also give near misses the search accepts: {tally:#?}"
    );
    for name in [
        "grant-epoch-owner",
        "grant-epoch-order",
        "grant-overlap",
        "success-after-lapse",
    ] {
        assert!(
            tally.by_check.get(name).is_some_and(|n| *n >= 5),
            "the pre-check {name} must fire on tampered histories: {tally:#?}"
        );
    }
    assert!(
        tally.caught_first >= 100,
        "the random histories must exercise the pre-checks: {tally:#?}"
    );
}
