//! Hand-written tricky histories and the verdicts they must get.

mod common;

use common::*;
use model::checker::check;
use model::{CheckOptions, Invariant, Outcome, TxnEnd, Verdict};

fn verdict(h: &H) -> Verdict {
    let v = check(&h.build(), &CheckOptions::default());
    println!("{v}");
    v
}

fn assert_linearizable(h: &H) {
    let v = verdict(h);
    assert!(v.is_linearizable(), "expected linearizable, got:\n{v}");
}

fn assert_violates(h: &H, inv: Invariant) {
    let v = verdict(h);
    assert_eq!(
        v.invariant(),
        Some(inv),
        "expected a violation of {inv}, got:\n{v}"
    );
}

#[test]
fn sequential_grant_renew_release() {
    let mut h = H::new();
    h.op(1, acq("k", "a", us(100)), 0, 1, acquired(1, 100))
        .op(1, renew("k", "a", 1, us(100)), 10, 11, renewed(110))
        .op(1, release("k", "a", 1), 20, 21, ok(Outcome::Released))
        .op(2, inspect("k"), 30, 31, free(2));
    assert_linearizable(&h);
}

#[test]
fn concurrent_acquires_one_winner() {
    let mut h = H::new();
    h.op(1, acq("k", "a", us(100)), 0, 10, acquired(1, 105)).op(
        2,
        acq("k", "b", us(100)),
        0,
        10,
        ok(Outcome::Denied),
    );
    assert_linearizable(&h);
}

#[test]
fn two_winners_break_mutual_exclusion() {
    let mut h = H::new();
    h.op(1, acq("k", "a", us(100)), 0, 10, acquired(1, 105)).op(
        2,
        acq("k", "b", us(100)),
        0,
        10,
        acquired(2, 106),
    );
    assert_violates(&h, Invariant::MutualExclusion);
}

#[test]
fn unknown_acquire_that_took_effect_late() {
    // a's acquire is lost; b is denied long after, so it must have taken effect
    let mut h = H::new();
    h.op(1, acq("k", "a", us(1000)), 0, 5, unknown())
        .op(2, inspect("k"), 10, 11, no_row())
        .op(3, acq("k", "b", us(100)), 20, 21, ok(Outcome::Denied))
        .op(3, inspect("k"), 30, 31, held("a", 1, 1015));
    assert_linearizable(&h);
}

#[test]
fn unknown_acquire_that_never_took_effect() {
    let mut h = H::new();
    h.op(1, acq("k", "a", us(1000)), 0, 5, unknown()).op(
        2,
        acq("k", "b", us(100)),
        20,
        21,
        acquired(1, 120),
    );
    assert_linearizable(&h);
}

#[test]
fn rolled_back_acquire_has_no_effect() {
    let mut h = H::new();
    h.op_in(1, Some(1), acq("k", "a", us(1000)), 0, 1, acquired(1, 1000))
        .txn(1, 1, 0, 2, 3, TxnEnd::Rollback)
        .op(2, inspect("k"), 10, 11, no_row());
    assert_linearizable(&h);
    let mut bad = H::new();
    bad.op_in(1, Some(1), acq("k", "a", us(1000)), 0, 1, acquired(1, 1000))
        .txn(1, 1, 0, 2, 3, TxnEnd::Rollback)
        .op(2, inspect("k"), 10, 11, held("a", 1, 1000));
    assert!(!verdict(&bad).is_linearizable());
}

#[test]
fn expiry_at_the_window_edge() {
    // grant expires at exactly 100: an inspect in [100, 100] must see it lapsed
    let mut h = H::new();
    h.op(1, acq("k", "a", us(100)), 0, 0, acquired(1, 100))
        .op(2, inspect("k"), 100, 100, free(1));
    assert_linearizable(&h);
    let mut bad = H::new();
    bad.op(1, acq("k", "a", us(100)), 0, 0, acquired(1, 100))
        .op(2, inspect("k"), 100, 100, held("a", 1, 100));
    assert_violates(&bad, Invariant::InspectConsistent);
    // in [99, 100] either is possible
    let mut either = H::new();
    either
        .op(1, acq("k", "a", us(100)), 0, 0, acquired(1, 100))
        .op(2, inspect("k"), 99, 100, held("a", 1, 100));
    assert_linearizable(&either);
}

#[test]
fn renew_after_definite_lapse_is_caught() {
    let mut h = H::new();
    h.op(1, acq("k", "a", us(100)), 0, 0, acquired(1, 100)).op(
        1,
        renew("k", "a", 1, us(100)),
        150,
        151,
        renewed(250),
    );
    assert_violates(&h, Invariant::LapseIsFinal);
}

#[test]
fn idempotent_reacquire() {
    let mut h = H::new();
    h.op(1, acq("k", "a", us(100)), 0, 0, acquired(1, 100)).op(
        1,
        acq("k", "a", us(500)),
        10,
        11,
        acquired(1, 100),
    );
    assert_linearizable(&h);
    let mut bad = H::new();
    bad.op(1, acq("k", "a", us(100)), 0, 0, acquired(1, 100))
        .op(1, acq("k", "a", us(500)), 10, 11, acquired(2, 510));
    assert_violates(&bad, Invariant::ReacquireIdempotent);
}

#[test]
fn blocking_acquire_granted_after_release() {
    let mut h = H::new();
    h.op(1, acq("k", "a", us(10_000)), 0, 1, acquired(1, 10_000))
        .op(
            2,
            acq_wait("k", "b", us(100), us(5_000)),
            10,
            60,
            acquired(3, 150),
        )
        .op(1, release("k", "a", 1), 40, 45, ok(Outcome::Released));
    assert_linearizable(&h);
}

#[test]
fn backdated_grant_is_caught() {
    // b's grant reports an expiry that puts its effect at 30, before a released at 40
    let mut h = H::new();
    h.op(1, acq("k", "a", us(10_000)), 0, 1, acquired(1, 10_000))
        .op(1, release("k", "a", 1), 40, 45, ok(Outcome::Released))
        .op(2, acq("k", "b", us(100)), 20, 60, acquired(3, 130));
    assert_violates(&h, Invariant::MutualExclusion);
}

#[test]
fn reader_in_a_commit_window_may_see_the_old_state() {
    // a's renew decided at 50 (expiry 150) but committed late; c's inspect at 60 still
    // sees the old row
    let mut h = H::new();
    h.op(1, acq("k", "a", us(100)), 0, 0, acquired(1, 100))
        .op(1, renew("k", "a", 1, us(100)), 50, 70, renewed(150))
        .op(2, inspect("k"), 60, 65, held("a", 1, 100));
    assert_linearizable(&h);
}

#[test]
fn crash_keeps_committed_state() {
    let mut h = H::new();
    h.op(1, acq("k", "a", us(1000)), 0, 1, acquired(1, 1000))
        .restart(10, 20)
        .op(2, inspect("k"), 30, 31, held("a", 1, 1000));
    assert_linearizable(&h);
    let mut lost = H::new();
    lost.op(1, acq("k", "a", us(1000)), 0, 1, acquired(1, 1000))
        .restart(10, 20)
        .op(2, inspect("k"), 30, 31, no_row());
    assert!(!verdict(&lost).is_linearizable());
}

#[test]
fn lapse_nemesis_makes_a_lease_takeoverable() {
    let mut h = H::new();
    h.op(1, acq("k", "a", us(100_000)), 0, 1, acquired(1, 100_000))
        .lapse("k", 10, 11)
        .op(2, acq("k", "b", us(100)), 20, 21, acquired(2, 120));
    assert_linearizable(&h);
}

#[test]
fn lapse_that_found_no_live_lease() {
    // the lease lapsed on its own at 100; an injected lapse at 150 finds nothing to do
    let mut h = H::new();
    h.op(1, acq("k", "a", us(100)), 0, 0, acquired(1, 100))
        .lapse_applied("k", 150, 151, false);
    assert_linearizable(&h);
    // claiming it applied to a lease that had lapsed is impossible
    let mut bad = H::new();
    bad.op(1, acq("k", "a", us(100)), 0, 0, acquired(1, 100))
        .lapse_applied("k", 150, 151, true);
    assert!(!verdict(&bad).is_linearizable());
    // and claiming it found nothing while the lease was live too
    let mut live = H::new();
    live.op(1, acq("k", "a", us(1000)), 0, 0, acquired(1, 1000))
        .lapse_applied("k", 150, 151, false);
    assert!(!verdict(&live).is_linearizable());
}

#[test]
fn a_read_cannot_see_a_write_made_after_it_ended() {
    // a's grant took effect at exactly 100; an inspect whose server window ended at 99
    // cannot have seen it (found by the pre-check author)
    let mut h = H::new();
    h.op(1, acq("k", "a", us(100)), 100, 150, acquired(1, 200));
    h.h.ops[0].server = Some(model::Span::new(model::Ts(100), model::Ts(100)).expect("span"));
    h.op(2, inspect("k"), 95, 160, held("a", 1, 200));
    h.h.ops[1].server = Some(model::Span::new(model::Ts(95), model::Ts(99)).expect("span"));
    assert!(!verdict(&h).is_linearizable());
}

#[test]
fn a_record_completing_before_its_invoke_does_not_panic() {
    let mut h = H::new();
    h.op(1, acq("k", "a", us(100)), 0, 1, acquired(1, 100));
    h.h.ops[0].invoke = 5_000;
    h.h.ops[0].complete = 1_000;
    let v = check(
        &h.build(),
        &CheckOptions {
            prechecks: false,
            ..CheckOptions::default()
        },
    );
    assert!(v.is_linearizable(), "{v}");
}

/// Process 2's renew was invoked (real time 75) after transaction 1 ended (72), yet its
/// expiry puts its effect at 50, before transaction 1's renew (60): it read the clock
/// before waiting for transaction 1's row lock.
fn renew_after_a_transaction(end: TxnEnd) -> H {
    let mut h = H::new();
    h.op(1, acq("k", "a", us(1000)), 0, 1, acquired(1, 1000))
        .op_in(
            3,
            Some(1),
            renew("k", "a", 1, us(500)),
            55,
            61,
            renewed(560),
        )
        .txn(1, 3, 54, 70, 72, end)
        .op(2, renew("k", "a", 1, us(1000)), 75, 90, renewed(1050));
    h.h.ops[2].server = Some(model::Span::new(model::Ts(45), model::Ts(90)).expect("span"));
    h
}

#[test]
fn a_write_that_waited_for_a_rolled_back_transaction_keeps_its_earlier_clock() {
    // no committed write comes between: nothing is out of order
    assert_linearizable(&renew_after_a_transaction(TxnEnd::Rollback));
    // had the transaction committed, the renew at 50 would follow a write at 60
    assert_violates(
        &renew_after_a_transaction(TxnEnd::Commit),
        Invariant::LapseIsFinal,
    );
}

#[test]
fn an_error_aborts_a_transaction_and_frees_its_row_lock_at_once() {
    // transaction 1 grants k (pending), then a call in it fails at some instant of [30, 60]:
    // the server aborts the transaction there and drops the row lock. Process 2's acquire,
    // which waited for that lock, completes at 58, before ROLLBACK was even sent (70).
    let mut h = H::new();
    h.op_in(
        1,
        Some(1),
        acq("k", "a", us(1000)),
        0,
        10,
        acquired(1, 1000),
    )
    .op_in(1, Some(1), inspect(""), 30, 60, fail("22023"))
    .txn(1, 1, 0, 30, 75, TxnEnd::Rollback)
    .op(2, acq("k", "b", us(100)), 20, 58, acquired(1, 156));
    assert_linearizable(&h);
    // had the transaction committed instead, b's grant would break mutual exclusion
    let mut committed = H::new();
    committed
        .op_in(
            1,
            Some(1),
            acq("k", "a", us(1000)),
            0,
            10,
            acquired(1, 1000),
        )
        .txn(1, 1, 0, 30, 75, TxnEnd::Commit)
        .op(2, acq("k", "b", us(100)), 20, 80, acquired(2, 156));
    assert!(!verdict(&committed).is_linearizable());
}
