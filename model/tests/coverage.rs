//! What a history covered (specs/HISTORY.md, "Coverage"): the spec branch each call of the
//! checker's linearization took, counted, also inside a transaction and after a restart.

mod common;

use common::*;
use model::branch::Branch;
use model::checker::{check, CheckOptions, Coverage, Verdict};
use model::{Outcome, TxnEnd};

fn coverage(h: &H) -> Coverage {
    match check(&h.build(), &CheckOptions::default()) {
        Verdict::Linearizable(stats) => stats.coverage,
        other => panic!("expected a linearizable history: {other}"),
    }
}

/// One process calls one key through most branches, one call each: a minute-long TTL
/// (6e7 us), a lease of 1 ms that lapses, a wait that times out, an invalid TTL.
fn one_of_each() -> H {
    let min = 60_000_000;
    let mut h = H::new();
    h.op(1, inspect("k"), 0, 10, no_row())
        .op(1, acq("k", "a", ms(60_000)), 20, 30, acquired(1, 25 + min))
        .op(1, inspect("k"), 40, 50, held("a", 1, 25 + min))
        .op(1, acq("k", "a", ms(60_000)), 60, 70, acquired(1, 25 + min))
        .op(1, acq("k", "b", ms(60_000)), 80, 90, ok(Outcome::Denied))
        .op(
            1,
            renew("k", "b", 1, ms(60_000)),
            100,
            110,
            ok(Outcome::NotOwner),
        )
        .op(
            1,
            renew("k", "a", 7, ms(60_000)),
            120,
            130,
            ok(Outcome::EpochMismatch),
        )
        .op(
            1,
            renew("k", "a", 1, ms(60_000)),
            140,
            150,
            renewed(145 + min),
        )
        .op(1, release("k", "a", 1), 160, 170, ok(Outcome::Released))
        .op(1, inspect("k"), 180, 190, free(2))
        .op(1, acq("k", "b", ms(1)), 200, 210, acquired(3, 1_205))
        .op(1, inspect("k"), 5_000, 5_010, free(3))
        .op(
            1,
            renew("k", "b", 3, ms(1)),
            6_000,
            6_010,
            ok(Outcome::Lapsed),
        )
        .op(1, release("k", "b", 3), 7_000, 7_010, ok(Outcome::Lapsed))
        .op(
            1,
            acq("k", "c", ms(60_000)),
            8_000,
            8_010,
            acquired(4, 8_005 + min),
        )
        .op(
            1,
            acq_wait("k", "a", ms(1_000), ms(10)),
            9_000,
            19_100,
            fail("57014"),
        )
        .op(1, acq("k", "a", ms(0)), 20_000, 20_010, fail("22023"));
    h
}

#[test]
fn each_call_counts_under_the_branch_it_took() {
    let c = coverage(&one_of_each());
    let expected = [
        Branch::InspectNeverLeased,
        Branch::AcquireFirstGrant,
        Branch::InspectLive,
        Branch::AcquireIdempotent,
        Branch::AcquireDenied,
        Branch::RenewNotOwner,
        Branch::RenewStaleEpoch,
        Branch::RenewOk,
        Branch::ReleaseOk,
        Branch::InspectFree,
        Branch::AcquireAfterRelease,
        Branch::InspectLapsed,
        Branch::RenewLapsed,
        Branch::ReleaseLapsed,
        Branch::AcquireTakeover,
        Branch::AcquireWaitTimedOut,
        Branch::AcquireInvalid,
    ];
    let reached: Vec<Branch> = c.branches.keys().copied().collect();
    let mut sorted = expected.to_vec();
    sorted.sort();
    assert_eq!(reached, sorted, "{c:#?}");
    for b in expected {
        assert_eq!(c.branches[&b].calls, 1, "{b}: {c:#?}");
    }
    assert_eq!(c.uncertain, 0);
    assert!(!c.partial);
    // Control: what the history never did is missing, not reached.
    let missing = c.missing();
    for b in [
        Branch::AcquireWaitGranted,
        Branch::AcquireWaitCancelled,
        Branch::ReleaseNotOwner,
        Branch::ReleaseStaleEpoch,
        Branch::RenewInvalid,
    ] {
        assert!(missing.contains(&b), "{b} reached: {c:#?}");
    }
    assert_eq!(c.reached() + missing.len(), Branch::ALL.len());
}

#[test]
fn calls_in_a_transaction_and_after_a_restart_are_counted_so() {
    let min = 60_000_000;
    let mut h = H::new();
    h.txn(1, 1, 0, 40, 50, TxnEnd::Commit)
        .op_in(
            1,
            Some(1),
            acq("k", "a", ms(60_000)),
            10,
            20,
            acquired(1, 15 + min),
        )
        .restart(100, 200)
        .op(2, inspect("k"), 300, 310, held("a", 1, 15 + min))
        .op(2, acq("k", "b", ms(60_000)), 320, 330, ok(Outcome::Denied));
    let c = coverage(&h);
    let grant = c.branches[&Branch::AcquireFirstGrant];
    assert_eq!((grant.calls, grant.in_txn, grant.after_restart), (1, 1, 0));
    let live = c.branches[&Branch::InspectLive];
    assert_eq!((live.calls, live.in_txn, live.after_restart), (1, 0, 1));
    let denied = c.branches[&Branch::AcquireDenied];
    assert_eq!((denied.calls, denied.after_restart), (1, 1));
}

/// After a restart the first answered call on each key in the linearization counts as
/// after a fault; after a lapse only the first on its key, and a lapse that found nothing
/// live counts nothing; after a pause (no effect on state) the first answered call invoked
/// after it on each key.
#[test]
fn the_first_answered_call_on_a_key_after_a_fault_is_counted_so() {
    let min = 60_000_000;
    let mut h = H::new();
    h.op(1, acq("k", "a", ms(60_000)), 10, 20, acquired(1, 15 + min))
        .restart(100, 200)
        .op(2, inspect("k"), 300, 310, held("a", 1, 15 + min))
        .op(2, acq("k", "b", ms(60_000)), 320, 330, ok(Outcome::Denied))
        .op(3, inspect("j"), 400, 410, no_row())
        .lapse("k", 500, 510)
        .op(3, inspect("j"), 550, 560, no_row())
        .op(
            2,
            acq("k", "b", ms(60_000)),
            600,
            610,
            acquired(2, 605 + min),
        )
        .lapse_applied("j", 700, 710, false)
        .op(3, inspect("j"), 800, 810, no_row())
        .op(2, inspect("k"), 820, 830, held("b", 2, 605 + min))
        .pause(900, 950)
        .op(2, inspect("k"), 940, 990, held("b", 2, 605 + min))
        .op(
            2,
            renew("k", "b", 2, ms(60_000)),
            1_000,
            1_010,
            renewed(1_005 + min),
        )
        .op(
            3,
            acq("j", "c", ms(60_000)),
            1_020,
            1_030,
            acquired(1, 1_025 + min),
        );
    let c = coverage(&h);
    let after = |b: Branch| c.branches[&b].after_fault;
    assert_eq!(after(Branch::InspectLive), 1, "{c:#?}");
    assert_eq!(
        after(Branch::AcquireDenied),
        0,
        "not the first on k: {c:#?}"
    );
    assert_eq!(after(Branch::InspectNeverLeased), 1, "{c:#?}");
    assert_eq!(c.branches[&Branch::InspectNeverLeased].calls, 3);
    assert_eq!(after(Branch::AcquireTakeover), 1, "{c:#?}");
    assert_eq!(
        after(Branch::AcquireFirstGrant),
        1,
        "after the pause: {c:#?}"
    );
    assert_eq!(after(Branch::RenewOk), 1, "after the pause: {c:#?}");
    assert_eq!(c.branches[&Branch::AcquireFirstGrant].calls, 2);
}

#[test]
fn the_verdict_line_says_how_many_branches_were_reached() {
    let verdict = check(&one_of_each().build(), &CheckOptions::default());
    let line = verdict.to_string();
    assert!(
        line.ends_with(&format!(
            "; its linearization took 17 of the spec's {} branches",
            Branch::ALL.len()
        )),
        "{line}"
    );
}

#[test]
fn branch_names_are_unique_and_read_back() {
    for b in Branch::ALL {
        assert_eq!(Branch::from_name(b.name()), Some(b));
    }
    assert_eq!(Branch::from_name("acquire: teleported"), None);
}
