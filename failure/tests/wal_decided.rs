//! A campaign under crashes and connection cuts, with a tenth or more of its calls left
//! without an answer, decided: the lease table's commits, decoded from the write-ahead log
//! (specs/HISTORY.md, "Wal line"), resolve its lost calls.

use harness::campaign::{Campaign, Length, Outcome, Silent, Target};
use harness::extension::ExtensionFiles;
use harness::pg::{test_majors, Cluster, ClusterOptions, PgInstall};
use harness::workload::{OpMix, Workload};
use model::checker::{resolution, Resolved};
use model::Interval;
use nemesis::mixed;
use nemesis::schedule::{Planned, Schedule};
use nemesis::Fault;
use std::sync::Arc;
use std::time::Duration;

/// Every 120 ms every connection through the proxy reset (18 times), and two crashes between.
fn schedule() -> Schedule {
    let cut = |pick| Planned {
        fault: Fault::CutReset,
        gap: Duration::from_millis(120),
        hold: Duration::ZERO,
        pick,
    };
    let crash = Planned {
        fault: Fault::Crash,
        gap: Duration::from_millis(120),
        hold: Duration::from_millis(200),
        pick: 0,
    };
    let mut planned: Vec<Planned> = (0..18).map(cut).collect();
    planned.insert(6, crash.clone());
    planned.insert(13, crash);
    Schedule(planned)
}

/// The campaign ends with at least a tenth of its calls lost, every fault injected; its
/// history carries the lease table's commits, and with them the checker decides it
/// (linearizable) with at most a quarter of the lost calls left open (a commit two lost calls of one
/// owner could have made stays open: their windows are open-ended). Control: the same
/// history with its commits made unreadable leaves every lost call open.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_campaign_under_crashes_and_cuts_is_decided_by_the_wal() {
    let major = test_majors()[0];
    let install = PgInstall::ensure(major).expect("PostgreSQL");
    let options = ClusterOptions {
        extensions: vec![ExtensionFiles::pg_lease()],
        ..ClusterOptions::default()
    };
    let cluster = Cluster::start_with(&install, options).expect("a cluster");
    // Mostly blocking acquires of one key that wait up to 300 ms: calls stay in flight, so
    // each cut and crash finds several to end without an answer.
    let workload = Workload {
        keys: 1,
        mix: OpMix {
            acquire: 10,
            acquire_wait: 60,
            renew: 10,
            release: 10,
            inspect: 10,
        },
        waits: vec![(Interval::millis(300), 1)],
        // Calls alone, on the one key: lost calls the log leaves open stay in one small
        // partition.
        txn_percent: 0,
        invalid_percent: 0,
        ..Workload::default()
    };
    let campaign = Campaign {
        workload,
        connect_patience: Duration::from_secs(30),
        call_timeout: Duration::from_secs(2),
        final_inspect: true,
        ..Campaign::new(
            Target::PgLease,
            Length::Time(Duration::from_secs(5)),
            20_261_207,
        )
    };
    let (mixed, cluster) = mixed::run(cluster, &campaign, &schedule(), Arc::new(Silent)).await;
    drop(cluster);
    let report = &mixed.report;
    assert!(mixed.failure.is_none(), "{:?}", mixed.failure);
    for (fault, tally) in &mixed.tallies {
        assert!(tally.injected > 0, "{} never injected", fault.name());
    }
    assert_eq!(report.figures.wal, None, "no wal line");
    let history = report.history.as_ref().expect("a history");
    let lost = report.figures.unknown_ops;
    println!(
        "{lost} of {} calls lost, {:?}: {}",
        report.figures.ops, mixed.tallies, report.outcome
    );
    assert!(
        lost * 10 >= report.figures.ops,
        "only {lost} of {} calls lost",
        report.figures.ops
    );
    let r = resolution(history).expect("a wal line");
    if let Some(wal) = &history.wal {
        println!(
            "{} commits, {} unclaimed, {} lost calls seen ended",
            wal.commits.len(),
            wal.commits.iter().filter(|c| c.by.is_none()).count(),
            wal.ended.len()
        );
    }
    println!("{:?}", Resolved::from(&r));
    assert!(
        matches!(report.outcome, Outcome::Linearizable(_)),
        "{}",
        report.outcome
    );
    let lost_autocommit = r.took_effect.len() + r.never.len() + r.open.len();
    assert!(
        r.open.len() * 4 <= lost_autocommit,
        "{} of {lost_autocommit} lost calls left open",
        r.open.len()
    );

    let mut unreadable = history.clone();
    if let Some(wal) = unreadable.wal.as_mut() {
        wal.unreadable.push("control".into());
    }
    let control = resolution(&unreadable).expect("a wal line");
    assert_eq!(control.open.len(), lost_autocommit, "the control");
}
