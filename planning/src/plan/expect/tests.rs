use super::*;
use crate::plan::{Plan, PlanError, PlanStep};
use crate::workload::{EpochChoice, OpChoice, OwnerChoice, Step};
use model::{Interval, Row, Ts};

/// Every answer of the vocabulary on a call that gives it, in one plan.
const EXPECTING: &str = "\
processes 2
keys 2
p0 acquire k0 as own ttl 300ms expect granted
p1 acquire k0 as own ttl 5s expect denied
p1 acquire k0 as own ttl 5s wait 50ms expect timeout
p1 begin
p1 renew k0 as p0 epoch 1 ttl 1min expect ok
p0 renew k0 as own epoch own ttl 1min expect lapsed
p1 rollback
p0 release k0 as p1 epoch own expect not-owner
p0 release k0 as own epoch 7 expect epoch-mismatch
p1 inspect k0 expect held
p0 release k0 as own epoch own expect released
p1 inspect k0 expect free
p1 inspect k1 expect never-leased
p0 acquire k1 as own ttl 0s expect error 22023
";

#[test]
fn expectations_read_back_and_print_as_written() {
    let plan = Plan::from_text(EXPECTING).expect("a plan");
    let expects: Vec<Option<String>> = plan
        .steps
        .iter()
        .map(|s| s.expect.as_ref().map(Expect::text))
        .collect();
    let want = [
        Some("granted"),
        Some("denied"),
        Some("timeout"),
        None,
        Some("ok"),
        Some("lapsed"),
        None,
        Some("not-owner"),
        Some("epoch-mismatch"),
        Some("held"),
        Some("released"),
        Some("free"),
        Some("never-leased"),
        Some("error 22023"),
    ];
    let want: Vec<Option<String>> = want.iter().map(|w| w.map(str::to_owned)).collect();
    assert_eq!(expects, want);
    let printed = plan.to_text();
    let steps: Vec<&str> = printed.lines().filter(|l| l.starts_with("p")).collect();
    let written: Vec<&str> = EXPECTING
        .lines()
        .filter(|l| l.starts_with("p") && !l.starts_with("processes"))
        .collect();
    assert_eq!(steps[1..], written[..], "{printed}");
    assert_eq!(Plan::from_text(&printed), Ok(plan));
}

fn error_of(step: &str) -> String {
    let text = format!("processes 2\nkeys 1\n{step}\n");
    match Plan::from_text(&text) {
        Ok(plan) => panic!("read {plan:?} from\n{text}"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn a_wrong_expectation_names_its_line_and_the_answers_the_call_gives() {
    for (step, want) in [
        (
            "p0 renew k0 ttl 5s expect granted",
            "line 3: a renew never answers `granted`: a renew answers `ok`, `lapsed`, \
             `not-owner`, `epoch-mismatch`, `error SQLSTATE`, `unknown`",
        ),
        (
            "p0 acquire k0 ttl 5s expect timeout",
            "line 3: an acquire never answers `timeout`: an acquire answers `granted`, \
             `denied`, `error SQLSTATE`, `unknown`",
        ),
        (
            "p0 inspect k0 expect",
            "line 3: `expect` needs an answer: an inspect answers `held`, `free`, \
             `never-leased`, `error SQLSTATE`, `unknown`",
        ),
        (
            "p0 release k0 expect freed",
            "line 3: unknown answer `freed`: a release answers `released`, `lapsed`, \
             `not-owner`, `epoch-mismatch`, `error SQLSTATE`, `unknown`",
        ),
        (
            "p0 release k0 expect error",
            "line 3: `expect error` needs a SQLSTATE, e.g. `expect error 22023`",
        ),
        (
            "p0 release k0 expect error 2202",
            "line 3: `2202` is not a SQLSTATE: write five digits or capital letters, e.g. \
             `expect error 22023`",
        ),
        (
            "p0 release k0 expect lapsed epoch 2",
            "line 3: `expect lapsed` takes nothing after it: `expect` ends the line",
        ),
        (
            "p0 pause 1s expect ok",
            "line 3: `pause` takes no `expect`: only a call (acquire, renew, release, \
             inspect), a probe or a commit expects an answer",
        ),
        (
            "p0 begin expect ok",
            "line 3: `begin` takes no `expect`: only a call (acquire, renew, release, \
             inspect), a probe or a commit expects an answer",
        ),
    ] {
        assert_eq!(error_of(step), want, "{step}");
    }
}

#[test]
fn a_plan_refuses_an_expectation_its_step_never_gives() {
    let workload = crate::plan::stepped_workload();
    let inspect = OpChoice {
        call: CallKind::Inspect,
        key: 0,
        owner: OwnerChoice::Own,
        epoch: EpochChoice::Own,
        ttl: Interval::ZERO,
        wait: Interval::ZERO,
        invalid: None,
    };
    let step = |action, expect| PlanStep {
        process: 0,
        action,
        expect: Some(expect),
        within: None,
    };
    let wrong = step(Step::Call(inspect.clone()), Expect::Granted);
    assert!(matches!(
        Plan::new(workload.clone(), vec![wrong]),
        Err(PlanError::Expect { step: 0, .. })
    ));
    let on_commit = step(Step::Commit, Expect::Ok);
    let err = Plan::new(
        workload.clone(),
        vec![PlanStep::new(0, Step::Rollback), on_commit],
    );
    assert!(matches!(err, Err(PlanError::Expect { step: 1, .. })));
    // A time bound needs a call's expectation to bound.
    let unbounded = PlanStep {
        within: Some(std::time::Duration::from_secs(2)),
        ..PlanStep::new(0, Step::Call(inspect))
    };
    assert!(matches!(
        Plan::new(workload, vec![unbounded]),
        Err(PlanError::Within { step: 0, .. })
    ));
}

fn ok(outcome: Outcome<String>) -> OpResult {
    OpResult::Ok(outcome)
}

fn fail(sqlstate: &str, message: &str) -> OpResult {
    OpResult::Fail {
        sqlstate: sqlstate.into(),
        message: message.into(),
    }
}

#[test]
fn an_answer_meets_only_its_own_expectation_and_a_lost_one_none() {
    let row = |held| {
        Some(Row {
            held,
            owner: held.then(|| "w0".to_string()),
            epoch: 2,
            expires_at: held.then_some(Ts(5)),
        })
    };
    let exhausted = format!("{}: waited", model::fate::WAIT_EXHAUSTED_PREFIX);
    let cases = [
        (
            Expect::Granted,
            ok(Outcome::Acquired {
                epoch: 1,
                expires_at: Ts(9),
            }),
        ),
        (Expect::Denied, ok(Outcome::Denied)),
        (Expect::Timeout, fail("57014", &exhausted)),
        (Expect::Ok, ok(Outcome::Renewed { expires_at: Ts(9) })),
        (Expect::Released, ok(Outcome::Released)),
        (Expect::Lapsed, ok(Outcome::Lapsed)),
        (Expect::NotOwner, ok(Outcome::NotOwner)),
        (Expect::EpochMismatch, ok(Outcome::EpochMismatch)),
        (Expect::Held, ok(Outcome::Inspected(row(true)))),
        (Expect::Free, ok(Outcome::Inspected(row(false)))),
        (Expect::NeverLeased, ok(Outcome::Inspected(None))),
        (
            Expect::Error("22023".into()),
            fail("22023", "invalid input"),
        ),
    ];
    for (i, (expect, _)) in cases.iter().enumerate() {
        for (j, (_, result)) in cases.iter().enumerate() {
            let want = if i == j { Met::Yes } else { Met::No };
            assert_eq!(expect.met_by(result), want, "{expect:?} by {result:?}");
        }
    }
    // A plain cancel is no exhausted wait; no answer and a machine failure are no answer.
    assert_eq!(
        Expect::Timeout.met_by(&fail(
            "57014",
            "canceling statement due to statement timeout"
        )),
        Met::No
    );
    let lost = OpResult::Unknown {
        reason: "connection closed".into(),
    };
    assert_eq!(Expect::Lapsed.met_by(&lost), Met::Unanswered);
    assert_eq!(
        Expect::Lapsed.met_by(&fail("53200", "out of memory")),
        Met::Unanswered
    );
    assert_eq!(
        Expect::Error("53200".into()).met_by(&fail("53200", "out of memory")),
        Met::Yes
    );
    assert_eq!(
        answer_text(&ok(Outcome::Renewed { expires_at: Ts(9) })),
        "ok"
    );
    assert_eq!(
        answer_text(&fail("55000", "pg_lease needs READ COMMITTED")),
        "error 55000: pg_lease needs READ COMMITTED"
    );
}

/// `unknown` is met by a call whose effect is unknown and by nothing that answered;
/// `error 57014` is not met by a blocking acquire's wait running out (that is `timeout`),
/// but is by a cancelled statement.
#[test]
fn unknown_and_a_cancel_are_told_from_answers_and_a_wait_running_out() {
    let unknown = OpResult::Unknown {
        reason: "connection lost".into(),
    };
    assert_eq!(Expect::Unknown.met_by(&unknown), Met::Yes);
    assert_eq!(
        Expect::Unknown.met_by(&OpResult::Ok(model::Outcome::Denied)),
        Met::No
    );
    let cancelled = OpResult::Fail {
        sqlstate: "57014".into(),
        message: "canceling statement due to user request".into(),
    };
    let code = Expect::Error("57014".into());
    assert_eq!(code.met_by(&cancelled), Met::Yes);
    assert_eq!(Expect::Unknown.met_by(&cancelled), Met::No);
    let ran_out = OpResult::Fail {
        sqlstate: "57014".into(),
        message: format!("{} after 50 ms", model::fate::WAIT_EXHAUSTED_PREFIX),
    };
    assert_eq!(ran_out.outcome(), model::Outcome::Timeout, "{ran_out:?}");
    assert_eq!(code.met_by(&ran_out), Met::No);
    assert_eq!(Expect::Timeout.met_by(&ran_out), Met::Yes);
    for kind in [CallKind::Acquire, CallKind::Renew, CallKind::Inspect] {
        assert!(Expect::Unknown.fits(Asked::Call(kind)), "{kind:?}");
    }
}

/// A COMMIT's expectation says how its transaction ended and whether the COMMIT itself
/// answered: a COMMIT that answered never meets a `lost-` one, nor the other way round.
#[test]
fn a_commits_end_is_met_by_the_end_and_by_whether_it_answered() {
    use model::TxnEnd;
    let ends = [
        (Some(TxnEnd::Commit), true),
        (Some(TxnEnd::Rollback), true),
        (Some(TxnEnd::Commit), false),
        (Some(TxnEnd::Rollback), false),
        (Some(TxnEnd::Unknown), false),
        (None, false),
    ];
    for (expect, meets) in [
        (Expect::Committed, [true, false, false, false, false, false]),
        (
            Expect::RolledBack,
            [false, true, false, false, false, false],
        ),
        (
            Expect::LostCommitted,
            [false, false, true, false, false, false],
        ),
        (
            Expect::LostRolledBack,
            [false, false, false, true, false, false],
        ),
        (Expect::Unknown, [false, false, false, false, true, true]),
    ] {
        for ((end, answered), want) in ends.iter().zip(meets) {
            assert_eq!(
                expect.met_by_end(*end, *answered),
                want,
                "{expect:?} {end:?} answered {answered}"
            );
        }
        assert!(expect.fits(Asked::Commit), "{expect:?}");
    }
    assert!(!Expect::Granted.fits(Asked::Commit));
    assert!(!Expect::Committed.fits(Asked::Call(CallKind::Renew)));
}
