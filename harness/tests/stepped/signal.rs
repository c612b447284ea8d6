//! (A module of tests/stepped.rs, sharing its runtime and stage.) The plan steps `pN
//! cancel` and `pN terminate` against a real server: the process's backend is signalled
//! whatever it waits for, recorded as a nemesis event named after the signal, and the
//! call it had in flight answers 57014 or no answer. Controls: without the signal the same
//! plan does not answer as it expects; a second terminate with no backend left to signal
//! is an infrastructure failure (the fault was not injected), never a pass.

use super::lapse::run_text;
use super::{runtime, stage_for_pg_lease};
use harness::campaign::{InfraError, Outcome};
use harness::judgement::Judgement;
use harness::stepped::RunError;

/// p1's blocking acquire is cancelled mid-wait (its 2 s wait never runs out); p0 still
/// holds the key.
const CANCELLED_WAIT: &str = "\
processes 2
keys 1
p0 acquire k0 ttl 1h expect granted
p1 acquire k0 ttl 1h wait 2s expect error 57014
p1 cancel
p1 inspect k0 expect held
";

#[test]
fn a_cancel_step_cancels_a_waiting_call_and_is_recorded() {
    let rt = runtime();
    let stage = stage_for_pg_lease(&rt);
    let report = run_text(&rt, &stage, CANCELLED_WAIT);
    assert_eq!(report.judgement(), Judgement::Pass, "{:#?}", report.steps);
    let answer = report.steps[1].answer.as_deref().unwrap_or_default();
    assert!(answer.contains("due to user request"), "{answer}");
    let history = report.run.history.clone().expect("the history");
    let cancels: Vec<_> = history
        .nemeses
        .iter()
        .filter(|n| n.fault == "cancel")
        .collect();
    assert_eq!(cancels.len(), 1, "{:?}", history.nemeses);

    // Control: without the cancel the wait runs out, which is `timeout`, not 57014.
    let report = run_text(&rt, &stage, &CANCELLED_WAIT.replace("p1 cancel\n", ""));
    match report.judgement() {
        Judgement::Finding { message, .. } => {
            assert!(
                message.contains("expected error 57014, came back timeout"),
                "{message}"
            );
        }
        other => panic!("the plan without its cancel was judged {other:?}"),
    }
}

/// A terminated transaction is rolled back (its grant gone: p1 is granted the key); a
/// second terminate of the same process, whose backend is already gone, injects nothing:
/// the run stops as an infrastructure failure naming the step.
#[test]
fn a_terminate_step_rolls_back_and_a_second_one_injects_nothing() {
    let rt = runtime();
    let stage = stage_for_pg_lease(&rt);
    let text = "\
processes 2
keys 1
p0 begin
p0 acquire k0 ttl 1h expect granted
p0 terminate
p0 commit
p1 acquire k0 ttl 1h expect granted
";
    let report = run_text(&rt, &stage, text);
    assert_eq!(report.judgement(), Judgement::Pass, "{:#?}", report.steps);
    assert_eq!(
        report.steps[3].answer.as_deref(),
        Some("COMMIT's answer lost: transaction resolved Rollback")
    );

    let twice = "processes 2\nkeys 1\np0 acquire k0 ttl 1h\np0 terminate\np0 terminate\n";
    let report = run_text(&rt, &stage, twice);
    match &report.run.outcome {
        Outcome::Infrastructure(InfraError::Stepped(RunError::NotSignalled { step, .. })) => {
            assert_eq!(*step, 2)
        }
        other => panic!("a terminate with no backend to signal was judged {other:?}"),
    }
    assert!(
        matches!(report.judgement(), Judgement::NoVerdict { .. }),
        "{:?}",
        report.judgement()
    );
}

/// A restart step needs the caller's control of the server (a fault check's): a plain
/// stepped run of a plan that restarts stops there with no verdict, naming the step.
#[test]
fn a_restart_step_without_a_managed_server_is_no_verdict() {
    let rt = runtime();
    let stage = stage_for_pg_lease(&rt);
    let text = "processes 2\nkeys 1\np0 acquire k0 ttl 1h\np0 restart fast 1s\n";
    let report = run_text(&rt, &stage, text);
    match &report.run.outcome {
        Outcome::Infrastructure(InfraError::Stepped(RunError::NoServerControl { step })) => {
            assert_eq!(*step, 1)
        }
        other => panic!("a restart without control of the server was judged {other:?}"),
    }
    assert!(
        matches!(report.judgement(), Judgement::NoVerdict { .. }),
        "{:?}",
        report.judgement()
    );
}

/// A plan's `set` lines are its sessions' settings in a plain stepped run too: under
/// `statement_timeout=300` a blocking acquire of 2 s fails with 57014; without the line
/// its wait runs out (`timeout`), which the plan does not expect.
#[test]
fn a_plans_settings_reach_its_sessions() {
    let rt = runtime();
    let stage = stage_for_pg_lease(&rt);
    let text = "\
processes 2
keys 1
set statement_timeout=300
p0 acquire k0 ttl 1h expect granted
p1 acquire k0 ttl 1h wait 2s expect error 57014
";
    let report = run_text(&rt, &stage, text);
    assert_eq!(report.judgement(), Judgement::Pass, "{:#?}", report.steps);
    let answer = report.steps[1].answer.as_deref().unwrap_or_default();
    assert!(answer.contains("statement timeout"), "{answer}");
    let report = run_text(
        &rt,
        &stage,
        &text.replace("set statement_timeout=300\n", ""),
    );
    assert!(
        matches!(report.judgement(), Judgement::Finding { .. }),
        "{:?}",
        report.judgement()
    );
}

/// A process's `set` reaches its session (`statement_timeout` cancels its blocking acquire,
/// 57014, where p0's own wait runs out as `timeout`); a setting the server refuses ends the
/// run without a verdict, naming it.
#[test]
fn a_process_setting_reaches_its_session_and_a_refused_one_is_no_verdict() {
    let rt = runtime();
    let stage = stage_for_pg_lease(&rt);
    let text = "\
processes 3
keys 1
p2 acquire k0 ttl 1h expect granted
p1 set statement_timeout=300
p1 acquire k0 ttl 1h wait 2s expect error 57014
p0 acquire k0 ttl 1h wait 500ms expect timeout
";
    let report = run_text(&rt, &stage, text);
    assert_eq!(report.judgement(), Judgement::Pass, "{:#?}", report.steps);
    let refused = run_text(
        &rt,
        &stage,
        "processes 2\nkeys 1\np0 set leasecheck_no_such_setting=1\np0 inspect k0\n",
    );
    match &refused.run.outcome {
        Outcome::Infrastructure(InfraError::Stepped(RunError::Recorder(e))) => {
            let e = e.to_string();
            assert!(
                e.starts_with("cannot set leasecheck_no_such_setting=1"),
                "{e}"
            )
        }
        other => panic!("a refused setting was judged {other:?}"),
    }
}
