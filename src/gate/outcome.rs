//! What a gate run found: per major, per suite, per check; passed, failed (a finding about
//! the extension) or an infrastructure error (no verdict). The JSON summary is these types
//! serialised (schema in specs/GATE.md).

use serde::{Deserialize, Serialize};
use std::time::Duration;

/// How a check, a suite, a major or the whole gate came out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    Passed,
    /// The machinery could not produce a verdict (install, connect, a hang, a budget that
    /// ran out): never a pass, never a finding.
    Infrastructure,
    /// A finding about the extension under test.
    Failed,
}

impl Status {
    /// The worst of two: a finding outweighs an infrastructure error, which outweighs a pass.
    pub fn worst(self, other: Status) -> Status {
        self.max(other)
    }

    pub fn word(self) -> &'static str {
        match self {
            Status::Passed => "passed",
            Status::Failed => "FAILED",
            Status::Infrastructure => "INFRA",
        }
    }
}

/// One check of a suite.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CheckResult {
    pub name: String,
    pub status: Status,
    /// Why it failed or could not run (empty when it passed).
    pub message: String,
    /// The invariant a failure violates, as `specs/INVARIANTS.md` names it, when known.
    pub invariant: Option<String>,
    /// A file of the report (relative to its directory) showing the failure: a timeline.
    pub timeline: Option<String>,
    pub seconds: f64,
}

impl CheckResult {
    pub fn passed(name: impl Into<String>, elapsed: Duration) -> CheckResult {
        CheckResult {
            name: name.into(),
            status: Status::Passed,
            message: String::new(),
            invariant: None,
            timeline: None,
            seconds: elapsed.as_secs_f64(),
        }
    }

    pub fn failed(name: impl Into<String>, message: String, elapsed: Duration) -> CheckResult {
        CheckResult {
            status: Status::Failed,
            message,
            ..CheckResult::passed(name, elapsed)
        }
    }

    pub fn infrastructure(
        name: impl Into<String>,
        message: String,
        elapsed: Duration,
    ) -> CheckResult {
        CheckResult {
            status: Status::Infrastructure,
            message,
            ..CheckResult::passed(name, elapsed)
        }
    }
}

/// One suite on one major.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SuiteResult {
    pub suite: String,
    pub status: Status,
    pub seconds: f64,
    pub checks: Vec<CheckResult>,
    /// The latencies the bench suite measured (empty for the other suites).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub figures: Vec<LatencyFigure>,
}

/// One latency figure of the bench suite: a workload's op at a client count (the median
/// of the repeats).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LatencyFigure {
    pub workload: String,
    pub op: String,
    pub clients: u32,
    /// Which driver measured it (`rust-closed`).
    pub driver: String,
    /// Calls measured (the median repeat's).
    pub count: u64,
    pub throughput_per_s: f64,
    pub p50_us: f64,
    pub p95_us: f64,
    pub p99_us: f64,
}

impl SuiteResult {
    /// The suite's status is its worst check's (a suite without checks did not run).
    pub fn of(suite: &str, checks: Vec<CheckResult>, elapsed: Duration) -> SuiteResult {
        let status = if checks.is_empty() {
            Status::Infrastructure
        } else {
            checks.iter().fold(Status::Passed, |s, c| s.worst(c.status))
        };
        SuiteResult {
            suite: suite.to_string(),
            status,
            seconds: elapsed.as_secs_f64(),
            checks,
            figures: Vec::new(),
        }
    }
}

/// Every suite on one major.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct MajorResult {
    pub major: u32,
    /// The server's full version (none when no server could be started).
    pub postgres: Option<String>,
    /// `local` or `container`.
    pub backend: String,
    pub status: Status,
    pub suites: Vec<SuiteResult>,
}

impl MajorResult {
    pub fn of(
        major: u32,
        postgres: Option<String>,
        backend: &str,
        suites: Vec<SuiteResult>,
    ) -> MajorResult {
        let status = if suites.is_empty() {
            Status::Infrastructure
        } else {
            suites.iter().fold(Status::Passed, |s, r| s.worst(r.status))
        };
        MajorResult {
            major,
            postgres,
            backend: backend.to_string(),
            status,
            suites,
        }
    }
}

/// One script of the extension under test and its SHA-256.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ScriptDigest {
    pub file: String,
    pub sha256: String,
}

/// A whole gate run: `summary.json`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct GateRun {
    /// The summary's format version (specs/GATE.md).
    pub schema: u32,
    pub leasecheck: String,
    /// The extension's name as given and its default version.
    pub extension: String,
    pub version: String,
    pub scripts: Vec<ScriptDigest>,
    /// `quick` or `full`.
    pub size: String,
    pub started: String,
    pub seconds: f64,
    pub status: Status,
    pub majors: Vec<MajorResult>,
}

/// The summary format this build writes.
pub const SCHEMA: u32 = 1;

impl GateRun {
    /// The status over all majors (no major run is an infrastructure error).
    pub fn overall(majors: &[MajorResult]) -> Status {
        if majors.is_empty() {
            return Status::Infrastructure;
        }
        majors.iter().fold(Status::Passed, |s, m| s.worst(m.status))
    }
}
