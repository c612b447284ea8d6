//! A campaign's outcome as the one judgement (crate::judgement): mapped here, at the
//! source, once.

use super::{InfraError, Outcome};
use crate::judgement::{Cause, Judgement};
use crate::recorder::RecorderError;
use crate::stepped::runner::types::RunError;

impl Outcome {
    /// A violation is a finding naming its invariant; a stall, an answer outside the API
    /// or a hang is a finding; a spent budget or an infrastructure failure is no verdict.
    pub fn judgement(&self) -> Judgement {
        match self {
            Outcome::Linearizable(_) => Judgement::Pass,
            Outcome::Violation(v) => Judgement::Finding {
                invariant: Some(v.invariant.to_string()),
                message: self.to_string(),
            },
            Outcome::Stall(_) | Outcome::Malformed { .. } | Outcome::Hang { .. } => {
                Judgement::finding(self.to_string())
            }
            Outcome::Unknown(_) => Judgement::NoVerdict {
                cause: Cause::Budget,
                why: self.to_string(),
            },
            Outcome::Infrastructure(e) => Judgement::NoVerdict {
                cause: e.cause(),
                why: self.to_string(),
            },
        }
    }
}

impl InfraError {
    /// The cause of a campaign's or a stepped plan's infrastructure failure.
    pub fn cause(&self) -> Cause {
        match self {
            InfraError::Install { .. }
            | InfraError::Database { .. }
            | InfraError::Version { .. } => Cause::Install,
            InfraError::Recorder(r) => recorder_cause(r),
            InfraError::Stepped(RunError::Recorder(r)) => recorder_cause(r),
            InfraError::Stepped(RunError::Monitor(_)) | InfraError::Reset(_) => Cause::Machine,
            InfraError::Stepped(RunError::Hang { .. }) => Cause::Stalled,
            InfraError::Stepped(_)
            | InfraError::Workload(_)
            | InfraError::StaleMutant(_)
            | InfraError::Setup { .. }
            | InfraError::Task(_)
            | InfraError::Plan(_) => Cause::Harness,
        }
    }
}

fn recorder_cause(r: &RecorderError) -> Cause {
    match r {
        RecorderError::Connect { .. } => Cause::Machine,
        _ => Cause::Harness,
    }
}
