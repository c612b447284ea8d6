//! Explanations in the user's terms (issue 17, point 5): one canonical violation of every
//! invariant, each judged naming that invariant, with an explanation that shows keys and
//! owners as written, server instants as RFC 3339 UTC with their offset from the history's
//! start, and every observation as recorded.

mod common;

use common::*;
use model::checker::check;
use model::history::OpResult;
use model::{CheckOptions, Invariant, Outcome, Row, Ts, Verdict};

/// The canonical violation of `inv`: the shortest history whose first contradicting
/// observation breaks it (or that the catalogue's bug class for it explains).
fn canonical(inv: Invariant) -> H {
    let mut h = H::new();
    let lease = |h: &mut H| {
        h.op(
            1,
            acq("key-α", "owner-a", us(1000)),
            0,
            1,
            acquired(1, 1000),
        );
    };
    match inv {
        Invariant::MutualExclusion => {
            h.op(1, acq("key-α", "owner-a", us(100)), 0, 10, acquired(1, 105))
                .op(2, acq("key-α", "owner-b", us(100)), 0, 10, acquired(2, 106));
        }
        Invariant::EpochNeverDecreases => {
            // release deleted the row: the epoch went back to none
            lease(&mut h);
            h.op(
                1,
                release("key-α", "owner-a", 1),
                10,
                11,
                ok(Outcome::Released),
            )
            .op(2, inspect("key-α"), 20, 21, no_row());
        }
        Invariant::GrantEpochFresh => {
            // a takeover after the lease lapsed reuses epoch 1
            lease(&mut h);
            h.op(
                2,
                acq("key-α", "owner-b", us(100)),
                2000,
                2001,
                acquired(1, 2100),
            );
        }
        Invariant::RenewKeepsEpoch => {
            lease(&mut h);
            h.op(
                1,
                renew("key-α", "owner-a", 1, us(1000)),
                10,
                11,
                renewed(1010),
            )
            .op(2, inspect("key-α"), 20, 21, held("owner-a", 2, 1010));
        }
        Invariant::ReleaseAdvancesEpoch => {
            lease(&mut h);
            h.op(
                1,
                release("key-α", "owner-a", 1),
                10,
                11,
                ok(Outcome::Released),
            )
            .op(2, inspect("key-α"), 20, 21, free(1));
        }
        Invariant::ReacquireIdempotent => {
            lease(&mut h);
            h.op(
                1,
                acq("key-α", "owner-a", us(1000)),
                10,
                11,
                acquired(2, 1010),
            );
        }
        Invariant::LapseIsFinal => {
            h.op(1, acq("key-α", "owner-a", us(100)), 0, 0, acquired(1, 100))
                .op(
                    1,
                    renew("key-α", "owner-a", 1, us(100)),
                    150,
                    151,
                    renewed(250),
                );
        }
        Invariant::PrecedenceAndIsolation => {
            // another owner's release succeeds
            lease(&mut h);
            h.op(
                2,
                release("key-α", "owner-b", 1),
                10,
                11,
                ok(Outcome::Released),
            );
        }
        Invariant::FailClosed => {
            // a valid acquire rejected as invalid input
            h.op(1, acq("key-α", "owner-a", us(1000)), 0, 1, fail("22023"));
        }
        Invariant::InspectConsistent => {
            // held, with no owner: exactly as recorded
            lease(&mut h);
            h.op(
                2,
                inspect("key-α"),
                10,
                11,
                OpResult::Ok(Outcome::Inspected(Some(Row {
                    held: true,
                    owner: None,
                    epoch: 1,
                    expires_at: Some(Ts(1000)),
                }))),
            );
        }
        Invariant::DurabilityAndTimeAuthority => {
            // the expiry is not the grant's instant plus its ttl
            h.op(1, acq("key-α", "owner-a", us(100)), 0, 1, acquired(1, 500));
        }
    }
    h
}

fn judged(h: &H) -> Verdict {
    let v = check(&h.build(), &CheckOptions::default());
    println!("{v}\n");
    v
}

#[test]
fn every_invariants_canonical_violation_names_it() {
    let mut wrong = Vec::new();
    for inv in Invariant::ALL {
        let v = judged(&canonical(inv));
        if v.invariant() != Some(inv) {
            wrong.push(format!("{inv}: got {:?}", v.invariant()));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn explanations_speak_the_users_terms() {
    for inv in Invariant::ALL {
        let v = judged(&canonical(inv));
        let text = v.to_string();
        assert!(text.contains("\"key-α\""), "{inv}: key as written:\n{text}");
        assert!(
            text.contains("\"owner-a\""),
            "{inv}: owner as written:\n{text}"
        );
        assert!(!text.contains("Sym"), "{inv}: interned ids leak:\n{text}");
        // server instants as RFC 3339 UTC with their offset from the start
        assert!(
            text.contains("1970-01-01T00:00:00.00") && text.contains("Z (+0.00"),
            "{inv}: instants:\n{text}"
        );
        assert!(!text.contains("us]"), "{inv}: raw microseconds:\n{text}");
    }
}

#[test]
fn an_inconsistent_inspect_row_is_rendered_as_recorded() {
    let v = judged(&canonical(Invariant::InspectConsistent));
    let text = v.to_string();
    assert!(
        text.contains("row {held: true, owner: NULL, epoch: 1, expires_at: 1970-01-01T00:00:00.001000Z (+0.001000s)}"),
        "{text}"
    );
    assert!(!text.contains("not held"), "{text}");
}

#[test]
fn a_rejected_observation_is_shown_beside_what_the_spec_allows() {
    // the inspect saw held without an owner; the spec allows a's lease, as written
    let v = judged(&canonical(Invariant::InspectConsistent));
    let text = v.to_string();
    assert!(
        text.contains(
            "the spec allows there: held by \"owner-a\" epoch 1 until 1970-01-01T00:00:00.001000Z (+0.001000s)"
        ),
        "{text}"
    );
}
