//! (A module of tests/campaign.rs.) Lost calls resolved from the write-ahead log: a
//! campaign whose calls are terminated mid-flight, so that a tenth or more of them end
//! without an answer, is decided, and its history's wal line says which of them committed.

use super::lost_calls::{kill_marked_calls, marking};
use harness::campaign::{self, Campaign, Length, Outcome, Silent, Target};
use harness::pg::{shared, test_majors};
use model::checker::{check, resolution, CheckOptions, Resolved, Verdict, Windows};
use model::history::{jsonl, WalChange, WalCommit, WalRow};
use model::{History, Op, Outcome as Answer};
use std::sync::Arc;
use std::time::Duration;

const MARK: &str = "leasecheck-wal-resolved";

/// A history with a forged commit: the lost acquire `id` granted at an epoch no grant
/// could have had.
fn forged_grant(history: &History, id: u64) -> Option<History> {
    let index = history.ops.iter().position(|o| o.id == id)?;
    let op = &history.ops[index];
    let Op::Acquire {
        key: Some(key),
        owner: Some(owner),
        ttl: Some(ttl),
        ..
    } = &op.call
    else {
        return None;
    };
    let window = Windows::derive(history).ops[index];
    let expires = ttl.add_to(window.t0()).ok()?;
    let mut forged = history.clone();
    let wal = forged.wal.as_mut()?;
    wal.commits.push(WalCommit {
        xid: u64::from(u32::MAX),
        by: None,
        changes: vec![WalChange {
            key: key.clone(),
            row: Some(WalRow {
                owner: Some(owner.clone()),
                epoch: 1_000_000_000,
                expires_at: Some(expires.0),
            }),
        }],
    });
    Some(forged)
}

/// 600 calls by 8 processes on 2 keys while every call running is terminated every 15 ms:
/// at least a tenth end without an answer; the history carries the lease table's commits,
/// the checker resolves (at least three quarters of) the lost calls from them and
/// decides (linearizable), and
/// `check-history`'s reading of the file judges it alike. Control: a forged commit that
/// grants a lost acquire at an impossible epoch makes the same history a violation.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_campaign_with_a_tenth_of_its_calls_lost_is_decided_by_the_wal() {
    let major = test_majors()[0];
    let cluster = shared(major).expect("a cluster");
    let campaign = Campaign {
        session: marking(MARK),
        connect_patience: Duration::from_secs(5),
        ..Campaign::new(Target::PgLease, Length::Ops(600), 20_261_208)
    };
    let killer = tokio::spawn(kill_marked_calls(
        major,
        MARK,
        200,
        8,
        Duration::from_millis(15),
    ));
    let report = campaign::run(cluster, &campaign, Arc::new(Silent)).await;
    let killed = killer.await.expect("the killer");
    let history = report.history.as_ref().expect("a history");
    assert_eq!(report.figures.wal, None, "the slot was not read");
    assert!(history.wal.is_some(), "no wal line");
    let lost = report.figures.unknown_ops;
    println!(
        "{killed} backends terminated; {lost} of {} calls lost: {}",
        report.figures.ops, report.outcome
    );
    assert!(
        lost * 10 >= report.figures.ops,
        "only {lost} of {} calls lost",
        report.figures.ops
    );
    assert!(
        matches!(report.outcome, Outcome::Linearizable(_)),
        "{}",
        report.outcome
    );
    let r = resolution(history).expect("a resolution");
    println!("{:?}", Resolved::from(&r));
    assert!(
        r.open.len() * 4 <= lost,
        "{} of {lost} lost calls left open",
        r.open.len()
    );

    let reread = jsonl::parse(&jsonl::to_string(history)).expect("the file reads back");
    assert!(check(&reread, &CheckOptions::default()).is_linearizable());

    // A lost acquire with a key, an owner and a TTL, whose window starts at an instant
    // (after some answer), so that a grant can be forged within it, and that no other lost
    // call could have made (the first lost acquire of its key and owner: a later one's
    // window starts after the forged instant).
    let (acquire, forged) = history
        .ops
        .iter()
        .filter(|o| r.never.contains(&o.id) && matches!(o.call, Op::Acquire { .. }))
        .find_map(|o| {
            let forged = forged_grant(history, o.id)?;
            let resolved = resolution(&forged)?;
            resolved
                .took_effect
                .contains_key(&o.id)
                .then_some((o, forged))
        })
        .expect("a lost acquire that wrote nothing, to forge a grant of");
    let forged_resolution = resolution(&forged).expect("a resolution");
    assert!(
        matches!(
            forged_resolution
                .took_effect
                .get(&acquire.id)
                .map(|e| &e.outcome),
            Some(Answer::Acquired {
                epoch: 1_000_000_000,
                ..
            })
        ),
        "the forged commit was not the lost acquire's: {forged_resolution:?}"
    );
    match check(&forged, &CheckOptions::default()) {
        Verdict::Violation(v) => println!("control: {}", v.invariant),
        other => panic!("the forged grant was judged {other}"),
    }
}
