//! The named checks: one per [`Fault`], each with its negative control. What a check
//! drives is its fault's record's [`Situation`] (a plan played by `scripted`, or a
//! [`CampaignPlan`] run by `campaigns`) and its control is the record's [`Control`]
//! ([`crate::fault::SPECS`]).
//!
//! A check starts its own throwaway cluster, installs the build under test (this checkout's
//! pg_lease under a name of its own, [`crate::builds::UNDER_TEST`], or a user's build given
//! to the gate), drives a situation with its fault injected
//! into a recorded history, and passes only when
//! - the fault was really injected (else [`CheckFailure::Infrastructure`], never a pass),
//! - the checker judges the whole history linearizable, and
//! - the situation's own expectations hold (the evidence lines say what was seen).
//!
//! A negative control ([`control`]) runs the same check against a broken build, or judges
//! the history with one answer changed to what a broken server would have answered, or
//! makes the fault miss; it passes only by the failure it names ([`Expect`]).

mod campaigns;
mod rig;
mod scripted;

pub use crate::situation::{Breakage, CampaignPlan, Control, Doctor, Expect, Shows, Situation};

use crate::error::FaultError;
use crate::fault::Fault;
use harness::extension::ExtensionFiles;
use harness::judgement::{Cause, Judgement};
use harness::pg::PgInstall;
use model::checker::Coverage;
use model::checker::Violation;
use model::{History, Verdict};
use std::fmt;

/// What a passing check saw.
#[derive(Debug)]
pub struct Passed {
    pub fault: Fault,
    pub postgres: String,
    /// The checker's verdict line.
    pub verdict: String,
    /// What the fault hit and what the situation showed.
    pub evidence: Vec<String>,
    pub history: Option<History>,
    /// The spec branches the judged history's linearization took.
    pub coverage: Coverage,
}

/// A linearizable history's verdict line and the branches its linearization took.
#[derive(Debug)]
pub(crate) struct Judged {
    pub verdict: String,
    pub coverage: Coverage,
}

/// Why a check did not pass.
#[derive(Debug)]
pub enum CheckFailure {
    /// The checker found the history not linearizable.
    Violation(Box<Violation>),
    /// An expectation of the situation broke (a finding about the target).
    Unexpected(String),
    /// The checker's budget ran out: never a pass.
    Unknown(String),
    /// The fault could not be injected, or the machinery failed: not a finding.
    Infrastructure(FaultError),
}

impl From<FaultError> for CheckFailure {
    fn from(e: FaultError) -> Self {
        match e {
            // The target answered outside its API, or hung, while the check ran.
            FaultError::Recorder(
                harness::recorder::RecorderError::Malformed { .. }
                | harness::recorder::RecorderError::Hang { .. },
            ) => CheckFailure::Unexpected(e.to_string()),
            e => CheckFailure::Infrastructure(e),
        }
    }
}

impl fmt::Display for CheckFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CheckFailure::Violation(v) => write!(f, "{v}"),
            CheckFailure::Unexpected(what) => write!(f, "UNEXPECTED: {what}"),
            CheckFailure::Unknown(what) => write!(f, "{what}"),
            CheckFailure::Infrastructure(e) => {
                write!(
                    f,
                    "INFRASTRUCTURE FAILURE (not a finding about the target): {e}"
                )
            }
        }
    }
}

impl CheckFailure {
    /// The one judgement (harness::judgement): a violation is a finding naming its
    /// invariant, a broken expectation of the situation a finding, a spent budget or a
    /// failure of the machinery no verdict.
    pub fn judgement(&self) -> Judgement {
        match self {
            CheckFailure::Violation(v) => Judgement::Finding {
                invariant: Some(v.invariant.to_string()),
                message: self.to_string(),
            },
            CheckFailure::Unexpected(_) => Judgement::finding(self.to_string()),
            CheckFailure::Unknown(_) => Judgement::NoVerdict {
                cause: Cause::Budget,
                why: self.to_string(),
            },
            CheckFailure::Infrastructure(_) => Judgement::no_verdict_from_text(self.to_string()),
        }
    }

    /// `violation`, `unexpected`, `unknown` or `infrastructure`.
    pub fn name(&self) -> &'static str {
        match self {
            CheckFailure::Violation(_) => "violation",
            CheckFailure::Unexpected(_) => "unexpected",
            CheckFailure::Unknown(_) => "unknown",
            CheckFailure::Infrastructure(_) => "infrastructure",
        }
    }
}

pub type CheckResult = Result<Passed, CheckFailure>;

impl fmt::Display for Expect {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Expect::Violation(list) => {
                let numbers: Vec<String> = list.iter().map(|i| i.number().to_string()).collect();
                write!(f, "a violation of inv {}", numbers.join("/"))
            }
            Expect::Unexpected(text) => write!(f, "a broken expectation ({text:?})"),
            Expect::NotInjected => f.write_str("fault not injected (typed infrastructure failure)"),
        }
    }
}

impl fmt::Display for Breakage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Breakage::Build(b) => match b.mutant() {
                Some(m) => write!(f, "mutant {}", m.name),
                None => write!(f, "{b:?} (stale)"),
            },
            Breakage::Doctored(d) => write!(f, "history doctored ({d:?})"),
            Breakage::FaultMisses => f.write_str("clients around the proxy"),
        }
    }
}

/// The negative control of `fault`'s check (its record's, [`crate::fault::Spec::control`]).
pub fn control(fault: Fault) -> Control {
    fault.spec().control
}

/// Whether `result` is the failure `expects` names.
pub fn caught(expects: Expect, result: &CheckResult) -> bool {
    match (expects, result) {
        (Expect::Violation(allowed), Err(CheckFailure::Violation(v))) => {
            allowed.contains(&v.invariant)
        }
        (Expect::Unexpected(text), Err(CheckFailure::Unexpected(what))) => what.contains(text),
        (
            Expect::NotInjected,
            Err(CheckFailure::Infrastructure(FaultError::NotInjected { .. })),
        ) => true,
        _ => false,
    }
}

/// Runs `fault`'s check on `install` against `build` (the build under test: this
/// checkout's [`crate::builds::under_test`], or a user's), or its negative control (a
/// broken build replaces `build`; a doctored or missed fault runs on `build`).
pub async fn run(
    fault: Fault,
    install: &PgInstall,
    build: &ExtensionFiles,
    breakage: Option<Breakage>,
) -> CheckResult {
    match fault.spec().situation {
        Situation::Campaign(plan) => campaigns::run(fault, plan, install, build, breakage).await,
        Situation::Plan { plan, shows } => {
            scripted::run(fault, plan, shows, install, build, breakage).await
        }
    }
}

/// `fault`'s doctored control judged on the history of its passed check (the doctored
/// controls need no run of their own); `None` when its control is not a doctored one.
pub fn doctored_control(fault: Fault, passed: &Passed) -> Option<CheckResult> {
    let Breakage::Doctored(d) = control(fault).breakage else {
        return None;
    };
    let mut history = passed.history.clone()?;
    if !doctor(&mut history, d) {
        return Some(Err(FaultError::not_injected(
            fault.name(),
            "the history has nothing the doctored control applies to",
        )
        .into()));
    }
    Some(judge(&history).map(|judged| Passed {
        fault,
        postgres: passed.postgres.clone(),
        verdict: judged.verdict,
        evidence: vec![format!("{d:?} applied to the check's history")],
        history: Some(history),
        coverage: judged.coverage,
    }))
}

/// Judges `history`; linearizable or the failure.
pub(crate) fn judge(history: &History) -> Result<Judged, CheckFailure> {
    let options = model::CheckOptions {
        budget: model::Budget {
            time: Some(std::time::Duration::from_secs(60)),
            states: Some(5_000_000),
            ..model::Budget::default()
        },
        ..model::CheckOptions::default()
    };
    match model::checker::check(history, &options) {
        Verdict::Linearizable(s) => Ok(Judged {
            coverage: s.coverage.clone(),
            verdict: Verdict::Linearizable(s).to_string(),
        }),
        Verdict::Violation(v) => Err(CheckFailure::Violation(v)),
        unknown @ Verdict::Unknown(_) => Err(CheckFailure::Unknown(unknown.to_string())),
    }
}

/// The edit of `doctor` applied to `history`; false when the history has nothing it
/// applies to (the control cannot be made: an infrastructure failure).
pub(crate) fn doctor(history: &mut History, doctor: Doctor) -> bool {
    use model::{NemesisEffect, OpResult, Outcome, TxnEnd};
    match doctor {
        Doctor::LostInRestart => {
            let Some(restart) = history
                .nemeses
                .iter()
                .filter(|n| matches!(n.effect, NemesisEffect::Restart { .. }))
                .map(|n| n.end)
                .min()
            else {
                return false;
            };
            let first_held_inspect = history
                .ops
                .iter_mut()
                .filter(|o| o.invoke > restart)
                .filter(|o| {
                    matches!(&o.result, OpResult::Ok(Outcome::Inspected(Some(r))) if r.epoch > 0)
                })
                .min_by_key(|o| o.invoke);
            match first_held_inspect {
                Some(op) => {
                    op.result = OpResult::Ok(Outcome::Inspected(None));
                    true
                }
                None => false,
            }
        }
        Doctor::AbortedKept => match history.txns.iter_mut().find(|t| t.end == TxnEnd::Rollback) {
            Some(t) => {
                t.end = TxnEnd::Commit;
                true
            }
            None => false,
        },
        Doctor::ResolutionSwapped => {
            let mut swapped = 0;
            for t in history.txns.iter_mut() {
                t.end = match t.end {
                    TxnEnd::Commit => TxnEnd::Rollback,
                    TxnEnd::Rollback => TxnEnd::Commit,
                    TxnEnd::Unknown => TxnEnd::Unknown,
                };
                swapped += 1;
            }
            swapped > 0
        }
        Doctor::LapseIgnored => lapse_ignored(history),
        Doctor::CancelledWriteKept => {
            let Some(cancelled) = history
                .ops
                .iter()
                .find(|o| matches!(&o.result, OpResult::Fail { sqlstate, .. } if sqlstate == "55P03" || sqlstate == "57014"))
                .cloned()
            else {
                return false;
            };
            let owner = match &cancelled.call {
                model::Op::Acquire { owner, .. } => owner.clone(),
                _ => None,
            };
            let last_inspect = history
                .ops
                .iter_mut()
                .filter(|o| o.invoke > cancelled.complete && o.call.key() == cancelled.call.key())
                .filter(|o| matches!(&o.result, OpResult::Ok(Outcome::Inspected(Some(_)))))
                .max_by_key(|o| o.invoke);
            match (last_inspect, owner) {
                (Some(op), Some(owner)) => {
                    if let OpResult::Ok(Outcome::Inspected(Some(row))) = &mut op.result {
                        row.owner = Some(owner);
                        row.held = true;
                    }
                    true
                }
                _ => false,
            }
        }
    }
}

/// [`Doctor::LapseIgnored`]: whether a takeover to change was found.
fn lapse_ignored(history: &mut History) -> bool {
    match takeovers(history).first() {
        Some(takeover) => {
            ignore_lapse(history, takeover);
            true
        }
        None => false,
    }
}

/// The first grant of a lapsed key to an owner other than the lapsed lease's holder.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Takeover {
    key: String,
    grant: model::OpId,
}

/// Every takeover after an applied lapse whose holder the history shows for certain: no
/// call on the key was in flight across the lapse and no transaction that wrote it was
/// open then, and the holder is the owner of the last grant or renew before it.
pub(crate) fn takeovers(history: &History) -> Vec<Takeover> {
    use model::{NemesisEffect, Op, OpResult, Outcome};
    let on = |key: &str, o: &&model::OpRecord| o.call.key().is_some_and(|k| k == key);
    let mut found = Vec::new();
    for n in &history.nemeses {
        let NemesisEffect::Lapse {
            key,
            applied: Some(true),
            ..
        } = &n.effect
        else {
            continue;
        };
        let ops_on_key = || history.ops.iter().filter(|o| on(key, o));
        let holder = ops_on_key()
            .filter(|o| o.complete < n.start && o.txn.is_none())
            .filter(|o| {
                matches!(
                    o.result,
                    OpResult::Ok(Outcome::Acquired { .. } | Outcome::Renewed { .. })
                )
            })
            .max_by_key(|o| o.complete)
            .and_then(|o| o.call.owner());
        let grant = ops_on_key()
            .filter(|o| o.invoke > n.end && o.txn.is_none())
            .filter(|o| matches!(o.call, Op::Acquire { .. }))
            .min_by_key(|o| o.invoke);
        if let (Some(holder), Some(grant)) = (holder, grant) {
            let granted = matches!(grant.result, OpResult::Ok(Outcome::Acquired { .. }));
            if granted && grant.call.owner().is_some_and(|o| o != holder) {
                found.push(Takeover {
                    key: key.clone(),
                    grant: grant.id,
                });
            }
        }
    }
    found
}

/// `takeover` answered as a server ignoring the lapse would have: `denied` (a blocking
/// acquire: its wait timed out). What followed on the key (its later calls and lapses) is
/// dropped: it followed a grant the doctored server never made, and left in, the checker
/// would name whichever contradiction with it it met first rather than the ignored lapse.
pub(crate) fn ignore_lapse(history: &mut History, takeover: &Takeover) {
    use model::{NemesisEffect, Op, OpResult, Outcome};
    let Some(grant) = history.ops.iter_mut().find(|o| o.id == takeover.grant) else {
        return;
    };
    let blocking = matches!(&grant.call, Op::Acquire { wait: Some(w), .. }
        if w.micros != 0 || w.days != 0 || w.months != 0);
    grant.result = OpResult::Ok(match blocking {
        true => Outcome::Timeout,
        false => Outcome::Denied,
    });
    let cut = grant.complete;
    let key = takeover.key.as_str();
    history
        .ops
        .retain(|o| o.invoke <= cut || o.call.key().is_none_or(|k| k != key));
    history.nemeses.retain(|n| {
        n.start <= cut || !matches!(&n.effect, NemesisEffect::Lapse { key: k, .. } if k == key)
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: i64 = 1_796_323_757_000_000;

    fn op(id: u64, process: u64, call: &str, args: &str, at_ms: i64, result: &str) -> String {
        let (invoke, t0) = (at_ms * 1_000_000, T + at_ms * 1_000);
        format!(
            r#"{{"type":"op","id":{id},"process":{process},"txn":null,"call":"{call}","args":{{{args}}},"invoke_ns":{invoke},"complete_ns":{},"server":{{"t0":{t0},"t1":{}}},"result":{{"ok":{result}}}}}"#,
            invoke + 500_000,
            t0 + 100
        )
    }

    fn acquire(id: u64, owner: &str, ttl_s: i64, at_ms: i64, epoch: u64, expires: i64) -> String {
        let args = format!(
            r#""key":"k","owner":"{owner}","ttl":{},"wait":0"#,
            ttl_s * 1_000_000
        );
        let result = format!(r#"{{"acquired":true,"epoch":{epoch},"expires_at":{expires}}}"#);
        op(
            id,
            if owner == "w0" { 2 } else { 1 },
            "acquire",
            &args,
            at_ms,
            &result,
        )
    }

    /// w1 holds `k` (60 s), the lease lapses at +3 ms, then `next_owner` takes it over
    /// (epoch 2, 60 s) at +5 ms, re-acquires it with a 5 s ttl (the same lease), releases
    /// it (the stored epoch becomes 3) and is granted epoch 4.
    fn history(next_owner: &str) -> History {
        let granted = |at_ms: i64, ttl_s: i64| T + at_ms * 1_000 + 50 + ttl_s * 1_000_000;
        let lines = [
            r#"{"format":"leasecheck-history","version":2,"meta":{}}"#.to_string(),
            acquire(1, "w1", 60, 1, 1, granted(1, 60)),
            format!(
                r#"{{"type":"nemesis","id":1,"fault":"lapse","start_ns":3000000,"end_ns":3500000,"effect":{{"lapse":{{"key":"k","server":{{"t0":{},"t1":{}}},"applied":true}}}},"detail":"lapse"}}"#,
                T + 3_000,
                T + 3_100
            ),
            acquire(2, next_owner, 60, 5, 2, granted(5, 60)),
            acquire(3, next_owner, 5, 7, 2, granted(5, 60)),
            op(
                4,
                if next_owner == "w0" { 2 } else { 1 },
                "release",
                &format!(r#""key":"k","owner":"{next_owner}","epoch":2"#),
                9,
                r#"{"status":"ok"}"#,
            ),
            acquire(5, next_owner, 5, 11, 4, granted(11, 5)),
        ];
        model::history::jsonl::parse(&lines.join("\n")).expect("a valid history")
    }

    #[test]
    fn the_history_before_doctoring_is_linearizable() {
        assert!(judge(&history("w0")).is_ok());
    }

    /// The takeover's owner later re-acquires, releases and is granted again: left in,
    /// those calls made the checker name invariant 6 (a CI run of the lapse check did).
    #[test]
    fn an_ignored_lapse_is_caught_as_the_lapse_whatever_followed_the_takeover() {
        let mut doctored = history("w0");
        assert!(doctor(&mut doctored, Doctor::LapseIgnored));
        assert_eq!(
            doctored.ops.len(),
            2,
            "the takeover's later calls are dropped"
        );
        match judge(&doctored) {
            Err(CheckFailure::Violation(v)) => assert!(
                crate::situation::LAPSE_IGNORED.contains(&v.invariant),
                "named {:?}: {v}",
                v.invariant
            ),
            other => panic!("the doctored history must be a violation, got {other:?}"),
        }
    }

    /// A server that ignores a lapse answers its holder `acquired` with the old lease, so
    /// the holder's own re-grant is not a takeover to doctor.
    #[test]
    fn the_lapsed_holders_own_grant_is_not_a_takeover() {
        let mut h = history("w1");
        assert!(judge(&h).is_ok());
        assert!(takeovers(&h).is_empty());
        assert!(!doctor(&mut h, Doctor::LapseIgnored));
    }
}
