//! (A module of tests/stepped.rs, sharing its runtime.) The plan step `pN restart STOP D`
//! made through a [`ClusterControl`], the control of a cluster of the test's own (as the
//! conformance checks that restart run): every restart is recorded with its server-time
//! downtime, what committed survives it, a transaction open at a crash is gone; the stage
//! reopens its own connection for the next plan. Its control: a wrong expectation after
//! the crash is a finding naming its step. (Without a control the run stops at the restart
//! step without a verdict: the module `signal`.)

use super::{first_major, runtime};
use harness::campaign::{Silent, Target};
use harness::judgement::Judgement;
use harness::pg::{shared, Cluster, ClusterOptions};
use harness::stepped::{self, ClusterControl, Plan, Report, RunOptions, Stage};
use model::NemesisEffect;
use std::sync::Arc;

/// p0 holds k0 and released k1; p1's grant of k2 is open at the crash; every restart
/// leaves k0 held, k1 free and k2 never leased.
const SURVIVES: &str = "\
processes 3
keys 3
p0 acquire k0 ttl 1h expect granted
p0 acquire k1 ttl 1h expect granted
p0 release k1 expect released
p1 begin
p1 acquire k2 ttl 1h expect granted
p2 restart crash 0ms
p1 commit
p2 inspect k0 expect held
p2 inspect k1 expect free
p2 inspect k2 expect never-leased
p2 restart immediate 0ms
p2 inspect k0 expect held
p2 restart fast 300ms
p2 inspect k1 expect free
p2 acquire k1 ttl 1min expect granted
";

/// A cluster of the test's own from the shared cluster's install (pg_lease installed), a
/// stage on it, and its control; dropped, the cluster is stopped and removed.
fn own_stage(rt: &tokio::runtime::Runtime) -> (Stage, ClusterControl) {
    let install = shared(first_major())
        .expect("a PostgreSQL cluster")
        .install()
        .expect("a managed install")
        .clone();
    let options = ClusterOptions {
        extensions: Vec::new(),
        ..ClusterOptions::default()
    };
    let cluster = Cluster::start_with(&install, options).expect("a cluster of the test's own");
    let stage = rt
        .block_on(Stage::new(&cluster, Target::PgLease))
        .expect("pg_lease installed");
    let db = stage.database().to_string();
    (stage, ClusterControl::new(cluster, db))
}

fn run_controlled(
    rt: &tokio::runtime::Runtime,
    stage: &Stage,
    control: Option<&ClusterControl>,
    text: &str,
) -> Report {
    let plan = Plan::from_text(text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    let control = control.map(|c| c as &dyn stepped::ServerControl);
    rt.block_on(stepped::run_controlled(
        stage,
        control,
        &plan,
        &RunOptions::default(),
        Arc::new(Silent),
    ))
}

#[test]
fn restart_steps_are_made_through_the_control_and_recorded_with_their_downtime() {
    let rt = runtime();
    let (stage, control) = own_stage(&rt);
    let report = run_controlled(&rt, &stage, Some(&control), SURVIVES);
    assert_eq!(report.judgement(), Judgement::Pass, "{:#?}", report.steps);
    let history = report.run.history.clone().expect("the history");
    let downs: Vec<_> = history
        .nemeses
        .iter()
        .filter_map(|n| match n.effect {
            NemesisEffect::Restart { clean, down } => Some((clean, down)),
            _ => None,
        })
        .collect();
    assert_eq!(downs.len(), 3, "{:?}", history.nemeses);
    assert_eq!(
        downs.iter().map(|(clean, _)| *clean).collect::<Vec<_>>(),
        [false, false, true]
    );
    // The fast restart stayed down its 300 ms at least, by the server's clock.
    let fast = downs[2].1.expect("the fast restart's downtime");
    assert!(fast.t1().0 - fast.t0().0 >= 300_000, "{fast:?}");

    // Control: after the crash, k2's uncommitted grant is not there to be held.
    let wrong = SURVIVES.replacen(
        "p2 inspect k2 expect never-leased",
        "p2 inspect k2 expect held",
        1,
    );
    let report = run_controlled(&rt, &stage, Some(&control), &wrong);
    match report.judgement() {
        Judgement::Finding { message, .. } => assert!(
            message.contains("`p2 inspect k2 expect held`): expected held, came back never-leased"),
            "{message}"
        ),
        other => panic!("the wrong expectation was judged {other:?}"),
    }
}
