//! A plan's expected answers against what came back ([`planning::plan::expect`]): each call
//! step that answered is compared with the answer it expects, and the run's judgement
//! adds what did not come back as expected to the checker's verdict ([`judgement`]).

use super::plan::expect::{answer_text, Expect, Met};
use super::plan::text::step_text;
use super::plan::Plan;
use crate::campaign::Outcome;
use crate::judgement::{Cause, Judgement};
use crate::recorder::CommitEnd;
use crate::recorder::CLIENT_TIMEOUT;
use model::{OpRecord, OpResult, TxnEnd};
use std::fmt;
use std::time::Duration;

/// A call step whose answer was not the one it expects.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Unmet {
    pub step: usize,
    /// The step's line in the plan's text form.
    pub line: String,
    pub expected: String,
    pub came_back: String,
    /// Whether the call answered (else its answer could not be compared).
    pub answered: bool,
    /// Whether the call was still running when the recorder gave up on it, at its call
    /// timeout (10 s): nothing the plan expects takes that long, so the target did not end
    /// the call (a lock wait a timeout should have ended, a signal it ignored, a lost wake-up).
    pub outlived_client_timeout: bool,
}

impl fmt::Display for Unmet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "step {} (`{}`): expected {}, came back {}",
            self.step, self.line, self.expected, self.came_back
        )
    }
}

/// `record`, the call of `step`, against the answer the step expects and how soon (none
/// when it expects none or got it in time).
pub(super) fn compare(plan: &Plan, step: usize, record: &OpRecord) -> Option<Unmet> {
    let s = plan.steps.get(step)?;
    let expect = s.expect.as_ref()?;
    let result = &record.result;
    let took = Duration::from_nanos(record.complete.saturating_sub(record.invoke));
    let late = s.within.is_some_and(|within| took > within);
    let answered = match expect.met_by(result) {
        Met::Yes if !late => return None,
        Met::Yes | Met::No => true,
        Met::Unanswered => false,
    };
    let expected = match s.within {
        Some(within) => format!("{} within {within:?}", expect.text()),
        None => expect.text(),
    };
    let came_back = match late {
        true => format!("{} after {took:.1?}", answer_text(result)),
        false => answer_text(result),
    };
    Some(Unmet {
        step,
        line: step_text(s),
        expected,
        came_back,
        answered,
        outlived_client_timeout: matches!(
            result,
            OpResult::Unknown { reason } if reason.starts_with(CLIENT_TIMEOUT)
        ),
    })
}

/// What a `probe xid` of `step` found (`assigned`; `None`: no transaction was open)
/// against the answer the step expects.
pub(super) fn compare_probe(plan: &Plan, step: usize, assigned: Option<bool>) -> Option<Unmet> {
    let s = plan.steps.get(step)?;
    let expect = s.expect.as_ref()?;
    let came_back = match assigned {
        Some(true) => "assigned (the transaction wrote)",
        Some(false) => "none (the transaction wrote nothing)",
        None => "no answer: no transaction was open (an error had ended it)",
    };
    match assigned {
        Some(a) if expect.met_by_probe(a) => None,
        _ => Some(Unmet {
            step,
            line: step_text(s),
            expected: expect.text(),
            came_back: came_back.into(),
            answered: assigned.is_some(),
            outlived_client_timeout: false,
        }),
    }
}

/// How a COMMIT step ended its transaction (`None`: it found none open, an error had
/// ended it: rolled back, answered) against the end the step expects.
pub(super) fn compare_commit(plan: &Plan, step: usize, ended: Option<CommitEnd>) -> Option<Unmet> {
    let s = plan.steps.get(step)?;
    let expect = s.expect.as_ref()?;
    let (end, answered) = match ended {
        Some(CommitEnd { end, answered }) => (end, answered),
        None => (TxnEnd::Rollback, true),
    };
    if expect.met_by_end(Some(end), answered) {
        return None;
    }
    // A `lost-` expectation is a plan waiting for its COMMIT to be in flight when its
    // connection ends: an answer means that never happened.
    let lost = matches!(expect, Expect::LostCommitted | Expect::LostRolledBack);
    let came_back = match (end, answered, ended.is_some()) {
        (TxnEnd::Commit, true, _) if lost => {
            "committed (the COMMIT answered: it was not in flight when its connection ended, \
             so the situation never arose)"
        }
        (_, true, true) if lost => {
            "rolled-back (the COMMIT answered: it was not in flight when its connection \
             ended, so the situation never arose)"
        }
        (TxnEnd::Commit, true, _) => "committed (the COMMIT answered)",
        (_, true, true) => "rolled-back (the COMMIT answered)",
        (_, true, false) => "rolled-back (no transaction was open: an error had ended it)",
        (TxnEnd::Commit, false, _) => "lost-committed (resolved through pg_xact_status)",
        (TxnEnd::Rollback, false, _) => "lost-rolled-back (resolved through pg_xact_status)",
        (TxnEnd::Unknown, false, _) => "unknown (the COMMIT's answer was lost, unresolved)",
    };
    Some(Unmet {
        step,
        line: step_text(s),
        expected: expect.text(),
        came_back: came_back.into(),
        // An end pg_xact_status could not resolve cannot be compared (unless expected).
        answered: end != TxnEnd::Unknown,
        outlived_client_timeout: false,
    })
}

/// The judgement of a run whose outcome is `outcome` and whose calls answered `unmet`
/// otherwise than expected: the checker's finding (with the answers' finding after it),
/// else the answers' finding, else the outcome's no verdict, else the answers' judgement.
pub fn judgement(outcome: &Outcome, unmet: &[Unmet]) -> Judgement {
    match (outcome.judgement(), answers_judgement(unmet)) {
        (
            Judgement::Finding { invariant, message },
            Judgement::Finding {
                message: answers, ..
            },
        ) => Judgement::Finding {
            invariant,
            message: format!("{}\n{answers}", message.trim_end()),
        },
        (finding @ Judgement::Finding { .. }, _) => finding,
        (_, finding @ Judgement::Finding { .. }) => finding,
        (no_verdict @ Judgement::NoVerdict { .. }, _) => no_verdict,
        (_, Judgement::NoVerdict { cause, why }) => Judgement::NoVerdict {
            cause,
            why: format!("the history is linearizable, but {why}"),
        },
        (_, answers) => answers,
    }
}

/// What the answers alone say, whatever the history: a finding when a call answered
/// otherwise than expected or outlived the client timeout; no verdict when an expected
/// answer never came, so it could not be compared; else a pass.
pub fn answers_judgement(unmet: &[Unmet]) -> Judgement {
    let (wrong, unanswered): (Vec<&Unmet>, Vec<&Unmet>) = unmet.iter().partition(|u| u.answered);
    let (late, unanswered): (Vec<&Unmet>, Vec<&Unmet>) = unanswered
        .into_iter()
        .partition(|u| u.outlived_client_timeout);
    match (wrong.is_empty(), late.is_empty()) {
        (false, _) => return Judgement::finding(listed(&wrong)),
        (true, false) => {
            return Judgement::finding(format!(
                "the target did not end {} it should have ended: {}",
                calls(late.len(), "a call", "calls"),
                joined(&late)
            ))
        }
        (true, true) => {}
    }
    if unanswered.is_empty() {
        return Judgement::Pass;
    }
    Judgement::NoVerdict {
        cause: Cause::Machine,
        why: format!(
            "{} expected answer(s) could not be compared: {}",
            unanswered.len(),
            joined(&unanswered)
        ),
    }
}

/// One line: how many calls did not answer as expected, and each.
fn listed(wrong: &[&Unmet]) -> String {
    format!(
        "{} answer as the plan expects: {}",
        calls(wrong.len(), "a call did not", "calls did not"),
        joined(wrong)
    )
}

/// `one` when `n` is 1, else `n` and `many`.
fn calls(n: usize, one: &str, many: &str) -> String {
    match n {
        1 => one.to_string(),
        n => format!("{n} {many}"),
    }
}

fn joined(unmet: &[&Unmet]) -> String {
    let each: Vec<String> = unmet.iter().map(|u| u.to_string()).collect();
    each.join("; ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use model::checker::Stats;

    /// A plan whose one call expects what `text` says, and the answer `result`.
    fn unmet_of(text: &str, result: &OpResult) -> Option<Unmet> {
        unmet_after(text, result, Duration::from_millis(3))
    }

    /// As [`unmet_of`], the answer coming `took` after the call was sent.
    fn unmet_after(text: &str, result: &OpResult, took: Duration) -> Option<Unmet> {
        let plan = Plan::from_text(&format!("processes 2\nkeys 1\n{text}\n")).expect("a plan");
        let record = OpRecord {
            id: 0,
            process: 0,
            txn: None,
            call: model::Op::Inspect {
                key: Some("k".into()),
            },
            invoke: 1_000,
            complete: 1_000 + took.as_nanos() as u64,
            server: None,
            result: result.clone(),
        };
        compare(&plan, 0, &record)
    }

    /// A right answer that came later than its bound is a finding saying how late; one in
    /// time passes; a wrong one names its bound beside the answer.
    #[test]
    fn a_right_answer_after_its_time_bound_is_a_finding() {
        let granted = OpResult::Ok(model::Outcome::Acquired {
            epoch: 2,
            expires_at: model::Ts(9),
        });
        let line = "p1 acquire k0 ttl 1min wait 10s expect granted within 2s";
        let late = unmet_after(line, &granted, Duration::from_millis(2_600)).expect("late");
        assert!(late.answered);
        assert_eq!(late.expected, "granted within 2s");
        assert_eq!(late.came_back, "granted (epoch 2) after 2.6s");
        let pass = Outcome::Linearizable(Stats::default());
        assert!(matches!(
            judgement(&pass, &[late]),
            Judgement::Finding { .. }
        ));
        assert_eq!(
            unmet_after(line, &granted, Duration::from_millis(1_900)),
            None
        );
        let denied = OpResult::Ok(model::Outcome::Denied);
        let wrong = unmet_after(line, &denied, Duration::from_millis(5)).expect("wrong");
        assert_eq!(
            (wrong.expected.as_str(), wrong.came_back.as_str()),
            ("granted within 2s", "denied")
        );
    }

    #[test]
    fn a_wrong_expectation_is_a_finding_naming_its_step_line_and_both_answers() {
        let renewed = OpResult::Ok(model::Outcome::Renewed {
            expires_at: model::Ts(9),
        });
        let line = "p0 renew k0 as own epoch own ttl 1min expect lapsed";
        let unmet = unmet_of(line, &renewed).expect("unmet");
        assert!(unmet.answered);
        let pass = Outcome::Linearizable(Stats::default());
        let j = judgement(&pass, std::slice::from_ref(&unmet));
        let want = format!(
            "a call did not answer as the plan expects: step 0 (`{line}`): expected lapsed, \
             came back ok"
        );
        assert_eq!(j, Judgement::finding(want));
        // The right expectation passes; none at all is never compared.
        assert_eq!(unmet_of("p0 renew k0 ttl 1min expect ok", &renewed), None);
        assert_eq!(unmet_of("p0 renew k0 ttl 1min", &renewed), None);
        assert_eq!(judgement(&pass, &[]), Judgement::Pass);
    }

    /// A call still running at the recorder's call timeout was not ended by the target: a
    /// finding, where another lost answer (a cut connection) is no verdict.
    #[test]
    fn a_call_that_outlived_the_client_timeout_is_a_finding() {
        let late = OpResult::Unknown {
            reason: format!("{CLIENT_TIMEOUT} of 10s (cancelled)"),
        };
        let unmet =
            unmet_of("p0 acquire k0 ttl 1min wait 300ms expect timeout", &late).expect("unmet");
        assert!(unmet.outlived_client_timeout && !unmet.answered);
        let pass = Outcome::Linearizable(Stats::default());
        let j = judgement(&pass, std::slice::from_ref(&unmet));
        assert!(
            matches!(&j, Judgement::Finding { message, .. } if message.starts_with("the target did not end a call it should have ended: step 0")),
            "{j:?}"
        );
        let cut = OpResult::Unknown {
            reason: "connection closed".into(),
        };
        let unmet =
            unmet_of("p0 acquire k0 ttl 1min wait 300ms expect timeout", &cut).expect("unmet");
        assert!(!unmet.outlived_client_timeout);
        assert!(matches!(
            answers_judgement(&[unmet]),
            Judgement::NoVerdict { .. }
        ));
    }

    #[test]
    fn an_expected_answer_that_never_came_is_no_verdict_not_a_pass() {
        let lost = OpResult::Unknown {
            reason: "connection closed".into(),
        };
        let unmet = unmet_of("p0 inspect k0 expect held", &lost).expect("unmet");
        assert!(!unmet.answered);
        let pass = Outcome::Linearizable(Stats::default());
        let j = judgement(&pass, &[unmet]);
        assert!(
            matches!(&j, Judgement::NoVerdict { cause: Cause::Machine, why } if why.contains("no answer: connection closed")),
            "{j:?}"
        );
    }

    /// A COMMIT compared with the end it expects: a `lost-` one that answered is a finding
    /// saying the situation never arose; an end pg_xact_status left unknown cannot be
    /// compared (no verdict); the right end passes.
    #[test]
    fn a_commits_end_is_compared_with_the_end_it_expects() {
        let plan = Plan::from_text(
            "processes 2\nkeys 1\np0 begin\np0 acquire k0 ttl 1min\np0 commit expect lost-committed\n",
        )
        .expect("a plan");
        let end = |end, answered| Some(CommitEnd { end, answered });
        assert_eq!(compare_commit(&plan, 2, end(TxnEnd::Commit, false)), None);
        let answered = compare_commit(&plan, 2, end(TxnEnd::Commit, true)).expect("unmet");
        assert!(answered.answered, "{answered}");
        assert!(
            answered.to_string().contains(
                "expected lost-committed, came back committed (the COMMIT answered: it was not \
                 in flight when its connection ended, so the situation never arose)"
            ),
            "{answered}"
        );
        let unresolved = compare_commit(&plan, 2, end(TxnEnd::Unknown, false)).expect("unmet");
        assert!(!unresolved.answered, "{unresolved}");
        let judged = answers_judgement(&[answered]);
        assert!(matches!(judged, Judgement::Finding { .. }), "{judged:?}");
        // No transaction open at the COMMIT (an error had ended it): rolled back, answered.
        let skipped = compare_commit(&plan, 2, None).expect("unmet");
        assert!(
            skipped.came_back.starts_with("rolled-back (no transaction"),
            "{skipped}"
        );
        // A step that expects nothing is never compared.
        assert_eq!(compare_commit(&plan, 0, end(TxnEnd::Rollback, true)), None);
    }
}
