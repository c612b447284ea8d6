//! (A module of tests/stepped.rs, sharing its runtime and stage.) The plan step `pN lapse
//! kK` against a real server: the lease on the key expires at the
//! server's current time, recorded as a `lapse` nemesis event, and the checker judges the
//! calls after it against it. Its controls: the same history without the event is a
//! violation, and the same plan without the lapse does not answer as it expects.

use super::{runtime, stage_for_pg_lease};
use harness::campaign::{Outcome, Silent};
use harness::judgement::Judgement;
use harness::stepped::{self, Plan, Report, RunOptions, Stage, Waiting};
use model::checker::{check, Verdict};
use model::history::NemesisEffect;
use model::CheckOptions;
use std::sync::Arc;

pub(super) fn run_text(rt: &tokio::runtime::Runtime, stage: &Stage, text: &str) -> Report {
    let plan = Plan::from_text(text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    rt.block_on(stepped::run(
        stage,
        &plan,
        &RunOptions::default(),
        Arc::new(Silent),
    ))
}

/// p0 holds k0 for an hour; only the lapse lets its renew answer `lapsed`, p1 take the key
/// over and p0's release find it another owner's.
const TAKEOVER: &str = "\
processes 2
keys 1
p0 acquire k0 ttl 1h expect granted
p1 acquire k0 ttl 1h expect denied
p0 lapse k0
p0 renew k0 ttl 1h expect lapsed
p1 inspect k0 expect free
p1 acquire k0 ttl 1h expect granted
p0 release k0 expect not-owner
p1 renew k0 ttl 1h expect ok
";

#[test]
fn a_lapse_step_is_recorded_and_judged_and_the_check_fails_without_it() {
    let rt = runtime();
    let stage = stage_for_pg_lease(&rt);
    let report = run_text(&rt, &stage, TAKEOVER);
    assert_eq!(report.judgement(), Judgement::Pass, "{:#?}", report.steps);
    assert!(matches!(report.run.outcome, Outcome::Linearizable(_)));
    assert_eq!(
        report.steps[2].answer.as_deref(),
        Some("lapse injected: the live lease expired now")
    );
    let sql = report.steps[2].sql.as_deref().unwrap_or_default();
    assert!(
        sql.starts_with("UPDATE lease.leases SET expires_at = pg_catalog.clock_timestamp()"),
        "{sql}"
    );
    let history = report.run.history.clone().expect("the history");
    let lapses: Vec<_> = history
        .nemeses
        .iter()
        .filter(|n| n.fault == "lapse")
        .collect();
    assert_eq!(lapses.len(), 1, "{:?}", history.nemeses);
    assert!(
        matches!(
            &lapses[0].effect,
            NemesisEffect::Lapse {
                server: Some(_),
                applied: Some(true),
                ..
            }
        ),
        "{:?}",
        lapses[0]
    );

    // Control 1: the same history without the lapse event is a violation (p1 granted a
    // key p0 holds for an hour, p0's renew `lapsed` within its hour).
    let without = model::History {
        nemeses: Vec::new(),
        ..history
    };
    match check(&without, &CheckOptions::default()) {
        Verdict::Violation(v) => println!("without the lapse: {}: {}", v.invariant, v.explanation),
        other => panic!("the history without its lapse was judged {other:?}"),
    }

    // Control 2: the same plan without the lapse step does not answer as it expects.
    let no_lapse = TAKEOVER.replace("p0 lapse k0\n", "");
    let report = run_text(&rt, &stage, &no_lapse);
    match report.judgement() {
        Judgement::Finding { message, .. } => {
            for want in [
                "expected lapsed, came back ok",
                "expected free, came back held",
                "expected granted, came back denied",
            ] {
                assert!(message.contains(want), "{want}: {message}");
            }
        }
        other => panic!("the plan without its lapse was judged {other:?}"),
    }
}

/// A lapse is a write: made while another process's transaction holds the key's row lock,
/// it waits for that transaction (the runner sees it blocked and goes on), then applies.
#[test]
fn a_lapse_waits_for_a_transaction_holding_the_row_lock() {
    let rt = runtime();
    let stage = stage_for_pg_lease(&rt);
    let text = "\
processes 2
keys 1
p0 acquire k0 ttl 1h expect granted
p0 begin
p0 renew k0 ttl 1h expect ok
p1 lapse k0
p0 commit
p1 acquire k0 ttl 1h expect granted
p0 renew k0 ttl 1h expect not-owner
";
    let report = run_text(&rt, &stage, text);
    assert_eq!(report.judgement(), Judgement::Pass, "{:#?}", report.steps);
    let lapse = &report.steps[3];
    assert_eq!(lapse.waited, Some(Waiting::BlockedBy(vec![0])), "{lapse:?}");
    assert_eq!(
        lapse.answer.as_deref(),
        Some("lapse injected: the live lease expired now")
    );
}
