//! Why a check has no verdict: its cause, outside the target, and the proof that it is not
//! the target's (specs/GATE.md, "No verdict"). A bug in the build under test is a finding,
//! never one of these: an error raised inside the target, an answer outside its API, a
//! call that hangs while the server executes it, a situation its calls kept from arising.

use harness::campaign::InfraError;
use harness::recorder::RecorderError;
use harness::stepped::RunError;

/// A cause of no verdict.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cause {
    /// PostgreSQL could not be found, fetched or started, or a cluster of a check could
    /// not be started or stopped.
    Server,
    /// The build did not install: `CREATE EXTENSION` failed, or installed another version.
    Install,
    /// The container backend (engine, image, container).
    Container,
    /// The server or the machine failed under a check: no connection, a lost one, a
    /// resource (SQLSTATE classes 08, 53, 57P, 58), a tool missing, the server unable to say
    /// what a backend was doing.
    Machine,
    /// The harness's own statement or protocol use failed: an error whose context names no
    /// routine of the target, while the build's catalog declares the contract's API.
    Harness,
    /// The checker's budget ran out before it could decide.
    Budget,
    /// A check did not finish while no statement of the target was being executed (its
    /// backends waited for something else, or for nothing of the target's).
    Stalled,
    /// A hostile setting did not bite in the matrix's campaigns (no evidence either way).
    NotExercised,
}

impl Cause {
    /// What happened, in a few words.
    pub fn what(self) -> &'static str {
        match self {
            Cause::Server => "the server could not be started or stopped",
            Cause::Install => "the build did not install",
            Cause::Container => "the container backend failed",
            Cause::Machine => "the server or the machine failed under the check",
            Cause::Harness => "the harness's own statement failed",
            Cause::Budget => "the checker's budget ran out",
            Cause::Stalled => "the check stalled outside the target",
            Cause::NotExercised => "the hostile setting did not bite",
        }
    }

    /// Why it is not the target's.
    pub fn proof(self) -> &'static str {
        match self {
            Cause::Server | Cause::Container => "no call of the target was made",
            Cause::Install => "no call of the target could be made",
            Cause::Machine => {
                "the failure carries no error raised inside the target, or its SQLSTATE is the \
                 server's or the connection's"
            }
            Cause::Harness => {
                "its error names no routine of the target in its context, and the build's \
                 catalog declares the contract's API"
            }
            Cause::Budget => "the history was recorded; only its judgement is missing",
            Cause::Stalled => {
                "no backend was executing a statement of the target when the bound ran out"
            }
            Cause::NotExercised => "every call answered as the contract allows",
        }
    }

    /// A no-verdict message: the cause, why it is not the target's, and the detail.
    pub fn message(self, detail: impl std::fmt::Display) -> String {
        format!(
            "NO VERDICT ({}; not the target's: {}): {detail}",
            self.what(),
            self.proof()
        )
    }
}

/// The cause of a campaign's or a stepped plan's infrastructure failure.
pub fn of_infra(e: &InfraError) -> Cause {
    match e {
        InfraError::Install { .. } | InfraError::Database { .. } | InfraError::Version { .. } => {
            Cause::Install
        }
        InfraError::Recorder(r) => of_recorder(r),
        InfraError::Stepped(RunError::Recorder(r)) => of_recorder(r),
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

fn of_recorder(r: &RecorderError) -> Cause {
    match r {
        RecorderError::Connect { .. } => Cause::Machine,
        _ => Cause::Harness,
    }
}

/// The cause a free-text no-verdict message of a check names (conformance, security,
/// fault checks), by what the harness wrote: a budget, a hang, a server that did not
/// start, else the machine or the harness.
pub fn of_text(text: &str) -> Cause {
    let has = |s: &str| text.contains(s);
    if has("could not decide") || has("budget") || has("UNKNOWN") {
        Cause::Budget
    } else if has("harness bug") || has("harness's own statement") {
        Cause::Harness
    } else if has("did not end within") || has("did not finish within") || has("hung") {
        Cause::Stalled
    } else if has("cannot install") || has("CREATE EXTENSION") || has("installed version") {
        Cause::Install
    } else if has("starting") || has("cluster") || has("initdb") {
        Cause::Server
    } else {
        Cause::Machine
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_message_names_its_cause_and_why_it_is_not_the_targets() {
        for cause in [
            Cause::Server,
            Cause::Install,
            Cause::Container,
            Cause::Machine,
            Cause::Harness,
            Cause::Budget,
            Cause::Stalled,
            Cause::NotExercised,
        ] {
            let m = cause.message("detail");
            assert!(m.starts_with("NO VERDICT ("), "{m}");
            assert!(m.contains(cause.what()) && m.contains(cause.proof()), "{m}");
        }
        assert_eq!(
            of_text("the checker could not decide: spent"),
            Cause::Budget
        );
        assert_eq!(of_text("harness bug (BadSql) in BEGIN"), Cause::Harness);
    }
}
