//! Lost calls resolved by the lease table's decoded commits (specs/HISTORY.md, "Wal line"):
//! a lost write found committed is judged as what it did, one whose key has no commit it
//! could have made as never run, and anything ambiguous stays lost.

mod common;

use common::*;
use model::checker::{check, resolution, CheckOptions, Verdict};
use model::history::{jsonl, WalChange, WalCommit, WalLog, WalRow, WalWriter};
use model::{History, Invariant, TxnEnd};

const MIN: i64 = 60_000_000;

fn commit(
    xid: u64,
    by: Option<WalWriter>,
    key: &str,
    owner: Option<&str>,
    epoch: i64,
    expires: Option<i64>,
) -> WalCommit {
    WalCommit {
        xid,
        by,
        changes: vec![WalChange {
            key: k(key),
            row: Some(WalRow {
                owner: owner.map(k),
                epoch,
                expires_at: expires,
            }),
        }],
    }
}

fn with_wal(h: &H, commits: Vec<WalCommit>) -> History {
    let mut h = h.build();
    h.wal = Some(WalLog {
        table: "lease_internal.leases".into(),
        commits,
        unreadable: Vec::new(),
        absent: Vec::new(),
        ended: Vec::new(),
    });
    h
}

/// The commit of op 1's grant of k to a, claimed.
fn a_grant() -> WalCommit {
    commit(
        700,
        Some(WalWriter::Op(1)),
        "k",
        Some("a"),
        1,
        Some(5 + MIN),
    )
}

/// a holds k for a minute; b's acquire of k is lost.
fn a_holds_b_lost() -> H {
    let mut h = H::new();
    h.op(1, acq("k", "a", ms(60_000)), 0, 10, acquired(1, 5 + MIN));
    h.op(2, acq("k", "b", ms(60_000)), 20, 30, unknown());
    h.op(3, inspect("k"), 40, 50, held("a", 1, 5 + MIN));
    h
}

#[test]
fn a_lost_grant_found_committed_is_judged_as_granted() {
    let h = a_holds_b_lost();
    // Without the log the lost acquire may never have run: a pass.
    assert!(check(&h.build(), &CheckOptions::default()).is_linearizable());
    // The log shows it granted b the key while a held it: two holders at once.
    let history = with_wal(
        &h,
        vec![
            a_grant(),
            commit(701, None, "k", Some("b"), 2, Some(25 + MIN)),
        ],
    );
    let r = resolution(&history).expect("a wal line");
    assert!(r.took_effect.contains_key(&2), "{r:?}");
    match check(&history, &CheckOptions::default()) {
        Verdict::Violation(v) => {
            assert_eq!(v.invariant, Invariant::MutualExclusion, "{}", v.explanation);
            assert!(
                v.explanation.contains("Op 2's answer was lost"),
                "{}",
                v.explanation
            );
        }
        other => panic!("the committed grant to b was judged {other}"),
    }
}

#[test]
fn a_lost_call_without_a_commit_wrote_nothing() {
    let h = a_holds_b_lost();
    let history = with_wal(&h, vec![a_grant()]);
    let r = resolution(&history).expect("a wal line");
    assert!(r.never.contains(&2) && r.open.is_empty(), "{r:?}");
    match check(&history, &CheckOptions::default()) {
        Verdict::Linearizable(s) => {
            let resolved = s.resolved.expect("resolution counted");
            assert_eq!(
                (resolved.took_effect, resolved.never, resolved.open),
                (0, 1, 0)
            );
        }
        other => panic!("judged {other}"),
    }
}

#[test]
fn a_commit_two_lost_calls_could_have_made_stays_undecided() {
    let mut h = H::new();
    h.op(1, acq("k", "b", ms(60_000)), 0, 10, unknown());
    h.op(2, renew("k", "b", 1, ms(60_000)), 20, 30, unknown());
    let history = with_wal(
        &h,
        vec![commit(700, None, "k", Some("b"), 1, Some(5 + MIN))],
    );
    let r = resolution(&history).expect("a wal line");
    assert!(r.took_effect.is_empty() && r.never.is_empty(), "{r:?}");
    assert_eq!(r.open.len(), 2);
}

#[test]
fn a_commit_no_call_fits_leaves_its_key_undecided() {
    // Someone (not in the history) wrote k for c: b's lost call could be anything.
    let h = a_holds_b_lost();
    let history = with_wal(
        &h,
        vec![
            a_grant(),
            commit(701, None, "k", Some("c"), 2, Some(25 + MIN)),
        ],
    );
    let r = resolution(&history).expect("a wal line");
    assert_eq!(r.open.len(), 1, "{r:?}");
}

#[test]
fn a_transaction_of_unknown_end_leaves_its_keys_undecided() {
    let mut h = H::new();
    h.txn(1, 1, 0, 30, 40, TxnEnd::Unknown);
    h.op_in(
        1,
        Some(1),
        acq("k", "b", ms(60_000)),
        10,
        20,
        acquired(1, 15 + MIN),
    );
    h.op(2, acq("k", "b", ms(60_000)), 50, 60, unknown());
    let history = with_wal(
        &h,
        vec![commit(700, None, "k", Some("b"), 1, Some(15 + MIN))],
    );
    let r = resolution(&history).expect("a wal line");
    assert_eq!(r.open.len(), 1, "{r:?}");
}

#[test]
fn a_transaction_of_unknown_end_the_log_resolves_no_longer_blocks_its_keys() {
    let mut h = H::new();
    h.txn(1, 1, 0, 30, 40, TxnEnd::Unknown);
    h.op_in(
        1,
        Some(1),
        acq("j", "b", ms(60_000)),
        10,
        20,
        acquired(1, 15 + MIN),
    );
    h.op_in(1, Some(1), inspect("k"), 21, 25, no_row());
    h.op(2, acq("k", "c", ms(60_000)), 50, 60, unknown());
    let mut absent = with_wal(
        &h,
        vec![commit(700, None, "k", Some("c"), 1, Some(55 + MIN))],
    );
    if let Some(wal) = absent.wal.as_mut() {
        wal.absent.push(WalWriter::Txn(1));
    }
    let r = resolution(&absent).expect("a wal line");
    assert!(r.took_effect.contains_key(&3), "{r:?}");
    assert!(r.committed_txns.is_empty());

    let claimed = with_wal(
        &h,
        vec![
            commit(
                699,
                Some(WalWriter::Txn(1)),
                "j",
                Some("b"),
                1,
                Some(15 + MIN),
            ),
            commit(700, None, "k", Some("c"), 1, Some(55 + MIN)),
        ],
    );
    let r = resolution(&claimed).expect("a wal line");
    assert!(r.took_effect.contains_key(&3), "{r:?}");
    assert!(r.committed_txns.contains(&1), "{r:?}");
    let verdict = check(&claimed, &CheckOptions::default());
    assert!(verdict.is_linearizable(), "{verdict}");
}

#[test]
fn a_lapse_nobody_claimed_takes_the_commit_dated_in_its_window() {
    let mut h = H::new();
    h.op(1, acq("k", "a", ms(60_000)), 0, 10, acquired(1, 5 + MIN));
    h.lapse("k", 20, 30);
    h.op(2, renew("k", "a", 1, ms(60_000)), 40, 50, unknown());
    let history = with_wal(
        &h,
        vec![a_grant(), commit(701, None, "k", Some("a"), 1, Some(25))],
    );
    let r = resolution(&history).expect("a wal line");
    // The one unclaimed commit is dated inside the lapse's window: the lapse's, not the
    // renew's, which therefore wrote nothing.
    assert!(r.never.contains(&2), "{r:?}");
}

#[test]
fn unreadable_changes_resolve_nothing() {
    let h = a_holds_b_lost();
    let mut history = with_wal(&h, Vec::new());
    if let Some(wal) = history.wal.as_mut() {
        wal.unreadable
            .push("table lease_internal.leases: UPDATE: ???".into());
    }
    let r = resolution(&history).expect("a wal line");
    assert_eq!(r.open.len(), 1, "{r:?}");
    // The verdict says why the log resolved nothing.
    let line = check(&history, &CheckOptions::default()).to_string();
    assert!(
        line.contains(
            "; the write-ahead log resolved none of 1 lost calls: 1 of its changes of the \
             lease table could not be read"
        ),
        "{line}"
    );
    // The control: with a readable log the same lost call is resolved (it wrote nothing).
    let readable = with_wal(&h, vec![a_grant()]);
    let line = check(&readable, &CheckOptions::default()).to_string();
    assert!(
        line.contains("; the write-ahead log resolved 1 of 1 lost calls"),
        "{line}"
    );
}

#[test]
fn the_wal_line_round_trips_and_its_claims_are_checked() {
    let h = a_holds_b_lost();
    let history = with_wal(&h, vec![a_grant()]);
    let text = jsonl::to_string(&history);
    assert!(text.contains("\"type\":\"wal\""), "{text}");
    assert_eq!(jsonl::parse(&text).expect("reads back"), history);

    let bad = with_wal(
        &h,
        vec![
            a_grant(),
            commit(
                701,
                Some(WalWriter::Op(1)),
                "k",
                Some("a"),
                1,
                Some(5 + MIN),
            ),
        ],
    );
    let e = jsonl::parse(&jsonl::to_string(&bad)).expect_err("claimed twice");
    assert!(e.to_string().contains("wal commit 1"), "{e}");
    let missing = with_wal(
        &h,
        vec![commit(700, Some(WalWriter::Txn(9)), "k", None, 2, None)],
    );
    let e = jsonl::parse(&jsonl::to_string(&missing)).expect_err("no txn 9");
    assert!(e.to_string().contains("txn 9"), "{e}");
    let twice = format!(
        "{}{}",
        jsonl::to_string(&history),
        jsonl::to_string(&history)
            .lines()
            .last()
            .unwrap_or_default()
    );
    let e = jsonl::parse(&twice).expect_err("two wal lines");
    assert!(e.to_string().contains("second wal line"), "{e}");
}

#[test]
fn a_lost_call_whose_session_ended_before_a_commit_did_not_make_it() {
    let mut h = H::new();
    h.op(1, acq("k", "b", ms(60_000)), 20, 30, unknown());
    h.op(2, inspect("k"), 80, 90, no_row());
    h.op(3, acq("k", "b", ms(60_000)), 100, 110, unknown());
    let log = vec![commit(700, None, "k", Some("b"), 1, Some(150 + MIN))];
    // Both lost acquires could have granted at 150: undecided.
    let r = resolution(&with_wal(&h, log.clone())).expect("a wal line");
    assert_eq!(r.open.len(), 2, "{r:?}");
    // The first one's backend was gone by 60: the grant is the second's.
    let mut ended = with_wal(&h, log);
    if let Some(wal) = ended.wal.as_mut() {
        wal.ended.push(model::history::WalEnded {
            op: 1,
            by: 60,
            seen_ns: 70_000,
        });
    }
    let r = resolution(&ended).expect("a wal line");
    assert!(
        r.took_effect.contains_key(&3) && r.never.contains(&1),
        "{r:?}"
    );
    assert!(check(&ended, &CheckOptions::default()).is_linearizable());
}
