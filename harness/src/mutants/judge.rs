//! Whether a campaign's outcome kills a mutant: pure.

use super::Kill;
use crate::campaign::Outcome;
use model::Invariant;
use std::fmt;

/// What one campaign's outcome means for a mutant.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Judged {
    /// The verdict names the mutant's invariant (or, for a lock-behaviour mutant, the run
    /// saw a stall): killed.
    Killed,
    /// A violation that names another invariant: a finding, but not this mutant's kill.
    OtherInvariant(Invariant),
    /// A finding of another kind than the one wanted (a stall where a violation was wanted
    /// or the reverse, or an answer outside the API's shape): not a kill.
    OtherFinding(&'static str),
    /// Linearizable with no stall: the mutant survived this campaign.
    Survived,
    /// The check's budget ran out: neither a pass nor a kill.
    Unknown,
    /// The campaign could not run or finish (the mutant failed to install, a hang, a harness
    /// error): never a kill.
    Infrastructure,
}

impl Judged {
    pub fn is_kill(&self) -> bool {
        *self == Judged::Killed
    }

    /// A short name of what a check run (not a history) ended in.
    pub fn outcome_name(&self) -> &'static str {
        match self {
            Judged::Killed | Judged::OtherInvariant(_) | Judged::OtherFinding(_) => "finding",
            Judged::Survived => "passed",
            Judged::Unknown => "unknown",
            Judged::Infrastructure => "infrastructure",
        }
    }
}

/// Whether a check's finding, `text`, kills a mutant that `kill` describes: it names the
/// kill's phrase, or one of its invariants (as the checker prints it). For the control
/// (`None`, pg_lease) any finding is one about pg_lease.
pub fn judge_finding(kill: Option<Kill>, text: &str) -> Judged {
    let Some(kill) = kill else {
        return Judged::OtherFinding("a failed check");
    };
    let named = match kill {
        Kill::Finding(phrase) => text.contains(phrase),
        _ => kill
            .invariants()
            .iter()
            .any(|inv| text.contains(&inv.to_string())),
    };
    if named {
        Judged::Killed
    } else {
        Judged::OtherFinding("a failed check naming something else")
    }
}

impl fmt::Display for Judged {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Judged::Killed => f.write_str("killed"),
            Judged::OtherInvariant(inv) => {
                write!(f, "violation of another invariant ({})", inv.number())
            }
            Judged::OtherFinding(what) => write!(f, "another finding ({what})"),
            Judged::Survived => f.write_str("survived"),
            Judged::Unknown => f.write_str("unknown (budget spent)"),
            Judged::Infrastructure => f.write_str("infrastructure failure"),
        }
    }
}

/// Whether `outcome` kills a mutant that `kill` describes.
pub fn judge(kill: Kill, outcome: &Outcome) -> Judged {
    let names = |phrase: &str| outcome.to_string().contains(phrase);
    match (outcome, kill) {
        (Outcome::Violation(v), _) if kill.named_by(v.invariant) => Judged::Killed,
        (Outcome::Violation(_), Kill::Stall | Kill::Finding(_)) => {
            Judged::OtherFinding("violation")
        }
        (Outcome::Violation(v), _) => Judged::OtherInvariant(v.invariant),
        (Outcome::Stall(_), Kill::Stall) => Judged::Killed,
        (Outcome::Stall(_), _) => Judged::OtherFinding("stall"),
        (Outcome::Malformed { .. } | Outcome::Hang { .. }, Kill::Finding(phrase))
            if names(phrase) =>
        {
            Judged::Killed
        }
        (Outcome::Malformed { .. }, _) => Judged::OtherFinding("malformed answer"),
        (Outcome::Hang { .. }, _) => Judged::OtherFinding("hang"),
        (Outcome::Linearizable(_), _) => Judged::Survived,
        (Outcome::Unknown(_), _) => Judged::Unknown,
        (Outcome::Infrastructure(_), _) => Judged::Infrastructure,
    }
}

/// What `outcome` means for the control, pg_lease itself: only a linearizable run with no
/// stall passes ([`Judged::Survived`]); any finding is one about pg_lease.
pub fn judge_control(outcome: &Outcome) -> Judged {
    match outcome {
        Outcome::Linearizable(_) => Judged::Survived,
        Outcome::Infrastructure(_) => Judged::Infrastructure,
        Outcome::Unknown(_) => Judged::Unknown,
        Outcome::Violation(v) => Judged::OtherInvariant(v.invariant),
        Outcome::Stall(_) => Judged::OtherFinding("stall"),
        Outcome::Malformed { .. } => Judged::OtherFinding("malformed answer"),
        Outcome::Hang { .. } => Judged::OtherFinding("hang"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::campaign::InfraError;
    use crate::stepped::Stall;
    use model::checker::{FoundBy, Stats, Violation};
    use model::Mutation;
    use std::time::Duration;

    fn violation(inv: Invariant) -> Outcome {
        Outcome::Violation(Box::new(Violation {
            keys: vec!["k".into()],
            invariant: inv,
            ops: vec![1],
            prefix: vec![],
            explanation: String::new(),
            found_by: FoundBy::Search,
            diagnosis: None,
            also_consistent_with: vec![],
        }))
    }

    fn stall() -> Outcome {
        Outcome::Stall(Box::new(Stall {
            key: "k".into(),
            blocked: 2,
            blocked_op: Some(2),
            blocker: 1,
            blocker_op: Some(1),
            first_seen: Duration::from_millis(10),
            last_seen: Duration::from_millis(40),
            blocked_call: "renew".into(),
            blocker_call: "acquire".into(),
        }))
    }

    #[test]
    fn only_the_named_invariant_or_a_stall_kills() {
        let epoch = Kill::Realises(Mutation::ReleaseKeepsEpoch);
        assert_eq!(
            judge(epoch, &violation(Invariant::ReleaseAdvancesEpoch)),
            Judged::Killed
        );
        // Negative controls: another invariant, a stall, a pass.
        assert_eq!(
            judge(epoch, &violation(Invariant::MutualExclusion)),
            Judged::OtherInvariant(Invariant::MutualExclusion)
        );
        assert_eq!(judge(epoch, &stall()), Judged::OtherFinding("stall"));
        let pass = Outcome::Linearizable(Stats::default());
        assert_eq!(judge(epoch, &pass), Judged::Survived);

        let race = Kill::Breaks(Invariant::LapseIsFinal);
        assert!(judge(race, &violation(Invariant::LapseIsFinal)).is_kill());
        assert!(!judge(race, &violation(Invariant::InspectConsistent)).is_kill());

        let either = Kill::BreaksEither(Invariant::InspectConsistent, Invariant::FailClosed);
        assert!(judge(either, &violation(Invariant::InspectConsistent)).is_kill());
        assert!(judge(either, &violation(Invariant::FailClosed)).is_kill());
        assert!(!judge(either, &violation(Invariant::LapseIsFinal)).is_kill());

        assert_eq!(judge(Kill::Stall, &stall()), Judged::Killed);
        assert_eq!(
            judge(Kill::Stall, &violation(Invariant::MutualExclusion)),
            Judged::OtherFinding("violation")
        );
        assert_eq!(judge(Kill::Stall, &pass), Judged::Survived);
    }

    #[test]
    fn the_control_passes_only_a_linearizable_run_without_a_stall() {
        let pass = Outcome::Linearizable(Stats::default());
        assert_eq!(judge_control(&pass), Judged::Survived);
        assert_eq!(
            judge_control(&violation(Invariant::LapseIsFinal)),
            Judged::OtherInvariant(Invariant::LapseIsFinal)
        );
        assert_eq!(judge_control(&stall()), Judged::OtherFinding("stall"));
        let infra = Outcome::Infrastructure(InfraError::Task("a hang".into()));
        assert_eq!(judge_control(&infra), Judged::Infrastructure);
    }

    #[test]
    fn an_infrastructure_failure_or_a_malformed_answer_is_never_a_kill() {
        let infra = Outcome::Infrastructure(InfraError::Task("a hang".into()));
        let malformed = Outcome::Malformed {
            call: "acquire",
            detail: "two rows".into(),
        };
        for kill in [
            Kill::Stall,
            Kill::Breaks(Invariant::MutualExclusion),
            Kill::Realises(Mutation::AcquireIgnoresHolder),
        ] {
            assert_eq!(judge(kill, &infra), Judged::Infrastructure);
            assert!(!judge(kill, &malformed).is_kill());
        }
    }
}
