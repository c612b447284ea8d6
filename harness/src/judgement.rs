//! Why a check of a suite did not pass, one type for every suite of the harness (the
//! conformance checks, the security checks, the attack-surface classes): a finding about
//! the target, or no verdict. A check's own assertions state findings; the machinery's
//! failures (installing, connecting, a lost connection, the harness's own bug) are no
//! verdict, never a finding.

use crate::client::LeaseError;
use crate::pg::PgError;
use std::time::Duration;

/// Why a check failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Failure {
    /// The target broke the behaviour or property the check names (a finding about it).
    #[error("{0}")]
    Violation(String),
    /// The check could not reach a verdict: installing, connecting, starting or stopping a
    /// cluster, recording, a call without an answer, a lost connection.
    #[error("infrastructure failure: {0}")]
    Infrastructure(String),
}

impl Failure {
    pub fn is_violation(&self) -> bool {
        matches!(self, Failure::Violation(_))
    }

    /// The explanation, without the kind.
    pub fn message(&self) -> &str {
        match self {
            Failure::Violation(m) | Failure::Infrastructure(m) => m,
        }
    }
}

/// What one check of a suite came to, and how long it took.
#[derive(Debug, Clone)]
pub struct Outcome {
    pub name: &'static str,
    pub result: Result<(), Failure>,
    pub elapsed: Duration,
}

/// A check's own assertion, as text, states a finding.
impl From<String> for Failure {
    fn from(why: String) -> Self {
        Failure::Violation(why)
    }
}

impl From<&str> for Failure {
    fn from(why: &str) -> Self {
        Failure::Violation(why.to_string())
    }
}

/// A statement of the check's own that failed: no verdict (a check that judges a
/// statement's SQLSTATE maps it itself).
impl From<tokio_postgres::Error> for Failure {
    fn from(e: tokio_postgres::Error) -> Self {
        Failure::Infrastructure(format!(
            "database error: {}",
            crate::security::describe_db(&e)
        ))
    }
}

impl From<PgError> for Failure {
    fn from(e: PgError) -> Self {
        Failure::Infrastructure(e.to_string())
    }
}

impl From<crate::security::tools::ToolError> for Failure {
    fn from(e: crate::security::tools::ToolError) -> Self {
        Failure::Infrastructure(e.to_string())
    }
}

/// The security checks' own errors: a lease call by its answer (below), the rest no verdict.
impl From<crate::security::SecurityError> for Failure {
    fn from(e: crate::security::SecurityError) -> Self {
        match e {
            crate::security::SecurityError::Lease(e) => Failure::from(e),
            other => Failure::Infrastructure(other.to_string()),
        }
    }
}

/// A lease call that failed: an answer outside the API (an error the target raised outside
/// its contract, a result of another shape or type) is a finding; the rest (a lost
/// connection, the harness's own bug, a refusal the check did not expect) is no verdict.
impl From<LeaseError> for Failure {
    fn from(e: LeaseError) -> Self {
        match e {
            LeaseError::OutsideContract { .. } | LeaseError::Unexpected(_) => {
                Failure::Violation(format!("lease call: {e}"))
            }
            e => Failure::Infrastructure(format!("lease call: {e}")),
        }
    }
}
