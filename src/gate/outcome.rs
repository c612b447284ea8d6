//! What a gate run found: per major, per suite, per check; passed, skipped (it needs a
//! server the gate manages, and the run was against an existing one), failed (a finding
//! about the extension) or an infrastructure error (no verdict). The JSON summary is these types
//! serialised (schema in specs/GATE.md).

use harness::judgement::Judgement;
use model::branch::Branch;
use model::checker::Coverage;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::time::Duration;

/// How a check, a suite, a major or the whole gate came out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    Passed,
    /// Not run: the check needs a managed server (a restart, a crash, roles that log in)
    /// and the gate ran against an existing one (`--dsn`). Never a pass.
    Skipped,
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

    /// The status of a group from its members': the worst of those that ran, skipped ones
    /// aside (they are listed, not passed); skipped when none ran, and an infrastructure
    /// error when it has no members (nothing ran).
    pub fn of_group(members: impl IntoIterator<Item = Status>) -> Status {
        let mut ran = None;
        let mut skipped = false;
        for status in members {
            match status {
                Status::Skipped => skipped = true,
                s => ran = Some(ran.map_or(s, |r: Status| r.worst(s))),
            }
        }
        match (ran, skipped) {
            (Some(status), _) => status,
            (None, true) => Status::Skipped,
            (None, false) => Status::Infrastructure,
        }
    }

    pub fn word(self) -> &'static str {
        match self {
            Status::Passed => "passed",
            Status::Skipped => "skipped",
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
    /// The spec branches the check's judged history took, when it judged one and passed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub coverage: Option<Branches>,
}

/// The spec branches judged histories took: calls per branch name ([`Branch::name`]), the
/// branches never taken absent. A check's from its checker's coverage; a suite's and a
/// major's the sums of theirs.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Branches(pub BTreeMap<String, u64>);

impl Branches {
    pub fn of(coverage: &Coverage) -> Branches {
        let calls = coverage.branches.iter();
        Branches(
            calls
                .map(|(b, t)| (b.name().to_string(), t.calls))
                .collect(),
        )
    }

    /// The sum of `parts`, `None` when none has any.
    pub fn sum<'a>(parts: impl IntoIterator<Item = Option<&'a Branches>>) -> Option<Branches> {
        let mut parts = parts.into_iter().flatten().peekable();
        parts.peek()?;
        let mut sum = Branches::default();
        for part in parts {
            for (name, calls) in &part.0 {
                *sum.0.entry(name.clone()).or_default() += calls;
            }
        }
        Some(sum)
    }

    /// The spec's branches never taken, in [`Branch::ALL`]'s order.
    pub fn missing(&self) -> Vec<&'static str> {
        let names = Branch::ALL.into_iter().map(Branch::name);
        names.filter(|n| !self.0.contains_key(*n)).collect()
    }

    /// `reached N of the spec's M branches (never: ...)`.
    pub fn line(&self) -> String {
        let missing = self.missing();
        format!(
            "reached {} of the spec's {} branches (never: {})",
            Branch::ALL.len() - missing.len(),
            Branch::ALL.len(),
            if missing.is_empty() {
                "none".to_string()
            } else {
                missing.join(", ")
            }
        )
    }
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
            coverage: None,
        }
    }

    /// This result with the branches its judged history took.
    pub fn covering(self, coverage: Option<&Coverage>) -> CheckResult {
        CheckResult {
            coverage: coverage.map(Branches::of),
            ..self
        }
    }

    pub fn failed(name: impl Into<String>, message: String, elapsed: Duration) -> CheckResult {
        CheckResult {
            status: Status::Failed,
            message,
            ..CheckResult::passed(name, elapsed)
        }
    }

    /// Not run because it needs a managed server; `why` says what it needs one for.
    pub fn skipped(name: impl Into<String>, why: &str) -> CheckResult {
        CheckResult {
            status: Status::Skipped,
            message: format!("{SKIPPED_NEEDS}: {why}"),
            ..CheckResult::passed(name, Duration::ZERO)
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

impl CheckResult {
    /// The gate's record of a check's judgement, the one type every suite maps its result
    /// to at its source (harness::judgement).
    pub fn of(name: impl Into<String>, judgement: Judgement, elapsed: Duration) -> CheckResult {
        let message = judgement.message();
        match judgement {
            Judgement::Pass => CheckResult::passed(name, elapsed),
            Judgement::Finding { invariant, .. } => CheckResult {
                invariant,
                ..CheckResult::failed(name, message, elapsed)
            },
            Judgement::NoVerdict { .. } => CheckResult::infrastructure(name, message, elapsed),
        }
    }

    /// A harness check's result (conformance, security, attack surface).
    pub fn judged(
        name: impl Into<String>,
        result: Result<(), harness::judgement::Failure>,
        elapsed: Duration,
    ) -> CheckResult {
        CheckResult::of(name, result.into(), elapsed)
    }
}

/// How every skipped check's message starts.
pub const SKIPPED_NEEDS: &str = "needs a managed server";

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
    /// The sum of its checks' branches (none when no check judged a history).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub coverage: Option<Branches>,
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
    /// The suite's status is its checks' ([`Status::of_group`]; a suite without checks
    /// did not run).
    pub fn of(suite: &str, checks: Vec<CheckResult>, elapsed: Duration) -> SuiteResult {
        let status = Status::of_group(checks.iter().map(|c| c.status));
        SuiteResult {
            suite: suite.to_string(),
            status,
            seconds: elapsed.as_secs_f64(),
            coverage: Branches::sum(checks.iter().map(|c| c.coverage.as_ref())),
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
    /// `local`, `container` or `dsn` (an existing server).
    pub backend: String,
    pub status: Status,
    pub suites: Vec<SuiteResult>,
    /// The sum of its suites' branches.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub coverage: Option<Branches>,
}

impl MajorResult {
    pub fn of(
        major: u32,
        postgres: Option<String>,
        backend: &str,
        suites: Vec<SuiteResult>,
    ) -> MajorResult {
        let status = Status::of_group(suites.iter().map(|s| s.status));
        MajorResult {
            major,
            postgres,
            backend: backend.to_string(),
            status,
            coverage: Branches::sum(suites.iter().map(|s| s.coverage.as_ref())),
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
    /// Wall-clock seconds (of a merged report: its longest shard's).
    pub seconds: f64,
    /// The seed of the campaigns and plans (absent in schema 2 summaries).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
    /// A `--shard K/N` run: which share, of what run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shard: Option<super::shard::ShardRun>,
    /// A report merged by `leasecheck report merge`: how many shards it joins.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub merged_shards: Option<u32>,
    pub status: Status,
    pub majors: Vec<MajorResult>,
    /// The existing server of a `--dsn` run (absent otherwise).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<ExistingServer>,
}

/// The existing server a `--dsn` run gated, and whether its files are the build's.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ExistingServer {
    /// `host:port/database` (never the password).
    pub address: String,
    /// The role the gate connected as.
    pub role: String,
    /// Whether the server's installed scripts were read and found identical to the build's
    /// (when false, the digests are of the local build only).
    pub scripts_verified: bool,
    /// What the comparison found, or why it could not be made.
    pub scripts: String,
    /// What the gate created on the server and dropped at the end.
    pub removed_databases: Vec<String>,
    pub removed_roles: Vec<String>,
}

/// The summary format this build writes (2: the `skipped` status and `server`; 3: `seed`,
/// `shard` and `merged_shards`; 4: `coverage` of checks, suites and majors).
pub const SCHEMA: u32 = 4;

impl GateRun {
    /// The status over all majors ([`Status::of_group`]; no major run is an
    /// infrastructure error).
    pub fn overall(majors: &[MajorResult]) -> Status {
        Status::of_group(majors.iter().map(|m| m.status))
    }

    /// A quick local run of pg_lease 0.3.0 over `majors`, for the reporters' tests.
    #[cfg(test)]
    pub fn of_majors(majors: Vec<MajorResult>) -> GateRun {
        GateRun {
            schema: SCHEMA,
            leasecheck: "0".into(),
            extension: "pg_lease".into(),
            version: "0.3.0".into(),
            scripts: Vec::new(),
            size: "quick".into(),
            started: String::new(),
            seconds: 1.0,
            seed: Some(7),
            shard: None,
            merged_shards: None,
            status: GateRun::overall(&majors),
            majors,
            server: None,
        }
    }

    /// Every skipped check, as `PG <major> <suite> / <check>`.
    pub fn skipped(&self) -> Vec<String> {
        let mut out = Vec::new();
        for m in &self.majors {
            for s in &m.suites {
                for c in s.checks.iter().filter(|c| c.status == Status::Skipped) {
                    out.push(format!("PG {} {} / {}", m.major, s.suite, c.name));
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::Status::{self, *};

    #[test]
    fn a_skip_is_never_a_pass_and_never_hides_a_finding() {
        assert_eq!(Status::of_group([Passed, Skipped]), Passed);
        assert_eq!(Status::of_group([Skipped, Skipped]), Skipped);
        assert_eq!(Status::of_group([Skipped, Infrastructure]), Infrastructure);
        assert_eq!(Status::of_group([Passed, Skipped, Failed]), Failed);
        // The control: without members a group did not run, and is not passed either.
        assert_eq!(Status::of_group([]), Infrastructure);
        assert_eq!(Status::of_group([Passed, Infrastructure]), Infrastructure);
    }
}
