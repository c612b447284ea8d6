//! The faults suite: every named check (and, when asked, its negative control) on one
//! PostgreSQL install, with a typed result and the time each took. `leasecheck faults`
//! prints it; the gate runs it as its "faults" suite.

use crate::checks::{self, caught, control, Breakage, CheckFailure, CheckResult, Control};
use crate::error::FaultError;
use crate::fault::Fault;
use harness::extension::ExtensionFiles;
use harness::judgement::Judgement;
use harness::pg::PgInstall;
use std::fmt;
use std::time::{Duration, Instant};

/// What is run for a fault: its check, or its negative control.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Run {
    Check,
    Control(Control),
}

/// How one run came out, for a summary.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    /// The check passed, or the control failed by the failure it names.
    Passed,
    /// A finding: the check saw a violation or a broken expectation, or the control was
    /// not caught.
    Failed,
    /// The checker's budget ran out, the fault could not be injected or the machinery
    /// failed: no pass, and no finding either.
    Infrastructure,
}

/// One run of the suite.
#[derive(Debug)]
pub struct CheckRun {
    pub fault: Fault,
    pub run: Run,
    pub result: CheckResult,
    pub duration: Duration,
}

impl CheckRun {
    pub fn status(&self) -> Status {
        match (self.run, &self.result) {
            (Run::Check, Ok(_)) => Status::Passed,
            (Run::Check, Err(CheckFailure::Violation(_) | CheckFailure::Unexpected(_))) => {
                Status::Failed
            }
            (Run::Check, Err(_)) => Status::Infrastructure,
            (Run::Control(c), result) if caught(c.expects, result) => Status::Passed,
            // A control that could not run is no evidence either way.
            (Run::Control(c), Err(CheckFailure::Infrastructure(_) | CheckFailure::Unknown(_)))
                if c.expects != checks::Expect::NotInjected =>
            {
                Status::Infrastructure
            }
            (Run::Control(_), _) => Status::Failed,
        }
    }

    /// The spec branches a passing check's judged history took (none for a control: its
    /// history is of a broken build or doctored).
    pub fn coverage(&self) -> Option<&model::checker::Coverage> {
        match (self.run, &self.result) {
            (Run::Check, Ok(passed)) => Some(&passed.coverage),
            _ => None,
        }
    }

    /// The one judgement (harness::judgement) of this run: a check's by its result; a
    /// control passes when caught by the failure it names, has no verdict when it could
    /// not run, and is otherwise a finding (about the check: it let the breakage through).
    pub fn judgement(&self) -> Judgement {
        let failure = match &self.result {
            Ok(_) => None,
            Err(e) => Some(e.judgement()),
        };
        match (self.status(), self.run, failure) {
            (Status::Passed, _, _) => Judgement::Pass,
            (_, Run::Check, Some(judgement)) => judgement,
            (Status::Infrastructure, _, Some(judgement)) => judgement,
            (_, Run::Control(c), _) => Judgement::finding(format!(
                "control not caught: {} must fail with {}; {self}",
                c.breakage, c.expects
            )),
            (_, Run::Check, None) => Judgement::Pass,
        }
    }

    /// The checker's explanation of a violation, when there is one.
    pub fn explanation(&self) -> Option<&str> {
        match &self.result {
            Err(CheckFailure::Violation(v)) => Some(&v.explanation),
            _ => None,
        }
    }

    /// The infrastructure error, when the run failed on one.
    pub fn infrastructure(&self) -> Option<&FaultError> {
        match &self.result {
            Err(CheckFailure::Infrastructure(e)) => Some(e),
            _ => None,
        }
    }
}

/// One summary line: `PASS crash (check) 4.1 s: linearizable ...`.
impl fmt::Display for CheckRun {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let status = match self.status() {
            Status::Passed => "PASS",
            Status::Failed => "FAIL",
            Status::Infrastructure => "INFRA",
        };
        let what = match self.run {
            Run::Check => format!("check defending {}", defended(self.fault)),
            Run::Control(c) => format!("control: {} must fail with {}", c.breakage, c.expects),
        };
        let outcome = match &self.result {
            Ok(p) => format!("{}; {}", first_line(&p.verdict), p.evidence.join("; ")),
            Err(e) => format!("{}: {}", e.name(), first_line(&e.to_string())),
        };
        write!(
            f,
            "{status} {} ({what}) {:.1} s: {outcome}",
            self.fault,
            self.duration.as_secs_f64()
        )
    }
}

fn first_line(s: &str) -> &str {
    s.lines().next().unwrap_or("")
}

fn defended(fault: Fault) -> String {
    fault
        .defends()
        .iter()
        .map(|i| format!("#{}", i.number()))
        .collect::<Vec<_>>()
        .join(",")
}

/// Runs `fault`'s check (or its control) on `install` against `build`, timed.
pub async fn run_one(
    fault: Fault,
    run: Run,
    install: &PgInstall,
    build: &ExtensionFiles,
) -> CheckRun {
    let started = Instant::now();
    let breakage = match run {
        Run::Check => None,
        Run::Control(c) => Some(c.breakage),
    };
    let result = checks::run(fault, install, build, breakage).await;
    CheckRun {
        fault,
        run,
        result,
        duration: started.elapsed(),
    }
}

/// Runs the checks of `faults` on `install` against `build` one after the other (each on
/// a cluster of its own), each followed by its negative control when `controls`; `each` sees every run as
/// it ends (progress, a summary line).
pub async fn run_all(
    install: &PgInstall,
    build: &ExtensionFiles,
    faults: &[Fault],
    controls: bool,
    mut each: impl FnMut(&CheckRun),
) -> Vec<CheckRun> {
    let mut runs = Vec::new();
    for &fault in faults {
        let check = run_one(fault, Run::Check, install, build).await;
        each(&check);
        let control_run = match controls {
            true => Some(control_of(fault, &check, install, build).await),
            false => None,
        };
        runs.push(check);
        if let Some(done) = control_run {
            each(&done);
            runs.push(done);
        }
    }
    runs
}

/// `fault`'s negative control: a doctored one is judged on the check's history, the
/// others run on their own.
async fn control_of(
    fault: Fault,
    check: &CheckRun,
    install: &PgInstall,
    build: &ExtensionFiles,
) -> CheckRun {
    let c = control(fault);
    let run = Run::Control(c);
    if !matches!(c.breakage, Breakage::Doctored(_)) {
        return run_one(fault, run, install, build).await;
    }
    let started = Instant::now();
    let result = match &check.result {
        Ok(passed) => checks::doctored_control(fault, passed).unwrap_or_else(|| {
            Err(FaultError::Task("a doctored control that is not one".into()).into())
        }),
        Err(_) => Err(FaultError::not_injected(
            fault.name(),
            "the check did not pass: no history to doctor",
        )
        .into()),
    };
    CheckRun {
        fault,
        run,
        result,
        duration: started.elapsed(),
    }
}

/// Every named check (and control) on PostgreSQL `major` (found or fetched) against
/// `build`.
pub async fn run_major(
    major: u32,
    build: &ExtensionFiles,
    controls: bool,
    each: impl FnMut(&CheckRun),
) -> Result<Vec<CheckRun>, FaultError> {
    let install = tokio::task::spawn_blocking(move || PgInstall::ensure(major))
        .await
        .map_err(|e| FaultError::Task(format!("finding PostgreSQL {major}: {e}")))?
        .map_err(|source| FaultError::Server {
            what: "find or fetch the PostgreSQL install",
            source,
        })?;
    Ok(run_all(&install, build, &Fault::ALL, controls, each).await)
}
