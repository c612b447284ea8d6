//! (A module of tests/campaign.rs.) etcd-shaped traffic: after a call whose answer was
//! lost with its connection, the process that takes over the slot first inspects the key
//! the loss left in doubt.

use harness::campaign::{self, Campaign, Length, Silent, Target};
use harness::pg::{shared, test_majors};
use harness::recorder::CLIENT_TIMEOUT;
use harness::session::SessionSettings;
use model::{History, Op, OpRecord, OpResult};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The comment on the campaign's database, which tells its sessions apart from the other
/// tests' on the shared cluster.
const MARK: &str = "leasecheck-lost-calls";

/// The calls (the target's statements, not the recorder's own) running in the marked
/// database.
const MARKED_CALLS: &str = "FROM pg_catalog.pg_stat_activity AS a \
     JOIN pg_catalog.pg_shdescription AS s ON s.objoid = a.datid \
      AND s.classoid = 'pg_catalog.pg_database'::pg_catalog.regclass \
     WHERE s.description = $1 AND a.state = 'active' AND a.query LIKE '%lease.%' \
      AND a.pid <> pg_catalog.pg_backend_pid()";

/// The lost calls of `history` that name a key (answer lost with the connection, not a
/// client timeout), and those whose key no later process inspected before any other call
/// of its own: each as its op id.
fn uninspected_losses(history: &History) -> (Vec<u64>, Vec<u64>) {
    let mut by_process: BTreeMap<u32, Vec<&OpRecord>> = BTreeMap::new();
    for op in &history.ops {
        by_process.entry(op.process).or_default().push(op);
    }
    // Each process's leading inspects: (first invoke, keys).
    let leading: Vec<(u64, Vec<&String>)> = by_process
        .values_mut()
        .map(|ops| {
            ops.sort_by_key(|o| o.invoke);
            let keys = ops
                .iter()
                .map_while(|o| match &o.call {
                    Op::Inspect { key: Some(k) } => Some(k),
                    _ => None,
                })
                .collect();
            (ops.first().map_or(0, |o| o.invoke), keys)
        })
        .collect();
    let lost: Vec<&OpRecord> = history
        .ops
        .iter()
        .filter(|o| o.call.key().is_some())
        .filter(|o| {
            matches!(&o.result, OpResult::Unknown { reason } if !reason.starts_with(CLIENT_TIMEOUT))
        })
        .collect();
    let inspected = |u: &OpRecord| {
        let key = u.call.key();
        leading
            .iter()
            .any(|(first, keys)| *first >= u.complete && key.is_some_and(|k| keys.contains(&k)))
    };
    let missed = lost
        .iter()
        .filter(|u| !inspected(u))
        .map(|u| u.id)
        .collect();
    (lost.iter().map(|u| u.id).collect(), missed)
}

/// The history with every inspect removed: what the check must find uninspected.
fn without_inspects(history: &History) -> History {
    let mut doctored = history.clone();
    doctored
        .ops
        .retain(|o| !matches!(o.call, Op::Inspect { .. }));
    doctored
}

/// Once the campaign's calls are seen (at most 30 s), terminates one backend running a
/// call every 60 ms, six times (few lost calls: each is a call the checker must place
/// anywhere after its start); how many it terminated.
async fn kill_calls(major: u32) -> u64 {
    kill_marked_calls(major, MARK, 6, 1, Duration::from_millis(60)).await
}

/// The setup that marks a campaign's database with `mark` (its sessions are told apart
/// from other tests' by it).
pub(crate) fn marking(mark: &str) -> SessionSettings {
    SessionSettings {
        setup: vec![format!(
            "DO $$ BEGIN EXECUTE pg_catalog.format('COMMENT ON DATABASE %I IS %L', \
             pg_catalog.current_database(), '{mark}'); END $$"
        )],
        ..SessionSettings::none()
    }
}

/// Once the calls of the database marked `mark` are seen (at most 30 s), terminates up to
/// `each` backends running a call every `every`, `rounds` times; how many it terminated.
pub(crate) async fn kill_marked_calls(
    major: u32,
    mark: &str,
    rounds: u32,
    each: u32,
    every: Duration,
) -> u64 {
    let cluster = shared(major).expect("a cluster");
    let admin = cluster.connect("postgres").await.expect("connect");
    let seen = format!("SELECT count(*) {MARKED_CALLS}");
    let deadline = Instant::now() + Duration::from_secs(30);
    while admin
        .query_one(&seen, &[&mark])
        .await
        .expect("looking")
        .get::<_, i64>(0)
        == 0
    {
        assert!(
            Instant::now() < deadline,
            "the campaign's sessions never came"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let mut killed = 0;
    for _ in 0..rounds {
        let rows = admin
            .query(
                &format!(
                    "SELECT pg_catalog.pg_terminate_backend(a.pid) {MARKED_CALLS} LIMIT {each}"
                ),
                &[&mark],
            )
            .await
            .expect("terminating the campaign's calls");
        killed += rows.iter().filter(|r| r.get::<_, bool>(0)).count() as u64;
        tokio::time::sleep(every).await;
    }
    killed
}

/// A campaign of 1,500 calls whose active calls are terminated during 400 ms from when its
/// sessions appear:
/// every lost call's key is inspected first by a process that took over after it (the
/// campaign goes on for about a second more, so every slot's successor has calls left).
/// Control: the same history without its inspects is found wanting, naming the losses.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_lost_call_the_next_process_inspects_its_key_first() {
    let major = test_majors()[0];
    let cluster = shared(major).expect("a cluster");
    let campaign = Campaign {
        session: marking(MARK),
        // A session whose preparation is terminated connects again, as under cuts.
        connect_patience: Duration::from_secs(5),
        ..Campaign::new(Target::PgLease, Length::Ops(1_500), 20_261_207)
    };
    let killer = tokio::spawn(kill_calls(major));
    let report = campaign::run(cluster, &campaign, Arc::new(Silent)).await;
    let killed = killer.await.expect("the killer");
    let history = report.history.as_ref().expect("a history");
    let (lost, missed) = uninspected_losses(history);
    println!(
        "{killed} backends terminated, calls lost {lost:?}: {}",
        report.outcome
    );
    assert!(
        !lost.is_empty(),
        "no call was lost ({killed} backends terminated)"
    );
    let shown: Vec<String> = missed.iter().map(|&id| around(history, id)).collect();
    assert!(
        missed.is_empty(),
        "lost ops never inspected after:\n{}",
        shown.join("\n")
    );
    assert!(
        !matches!(report.outcome, campaign::Outcome::Violation(_)),
        "{}",
        report.outcome
    );

    let (lost, missed) = uninspected_losses(&without_inspects(history));
    assert!(!lost.is_empty());
    assert_eq!(missed, lost, "the control");
}

/// Op `id` and the next ops on its key, for a failure's message.
fn around(history: &History, id: u64) -> String {
    let Some(op) = history.ops.iter().find(|o| o.id == id) else {
        return format!("op {id}: not in the history");
    };
    let later: Vec<String> = history
        .ops
        .iter()
        .filter(|o| o.invoke >= op.complete && o.call.key() == op.call.key())
        .take(4)
        .map(|o| format!("op {} p{} {:?} -> {:?}", o.id, o.process, o.call, o.result))
        .collect();
    format!(
        "op {id} p{} {:?} -> {:?}; then {}",
        op.process,
        op.call,
        op.result,
        later.join("; ")
    )
}
