//! Stepped plans: which process does what, in which order ([`Plan`], [`PlanStep`]), their
//! checks when written by hand, and how a step reads; drawn from a seed or by proptest in
//! [`draw`], printed and read as text in [`text`].

mod draw;
pub mod expect;
mod sql;
pub mod text;

pub use draw::{stepped_workload, PlanConfig, PlanStrategy, PlanTree, KEYS, MAX_STEPS, PROCESSES};
pub use expect::{Asked, Expect};
pub use sql::call_sql;
pub use text::PlanTextError;

use crate::workload::{OpChoice, Step, Workload, WorkloadError};
use model::Interval;
use std::fmt;
use std::time::Duration;

/// One step of a plan: process slot `process` runs `action`, a call of which must answer
/// `expect` when one is given ([`expect`]; a drawn plan gives none), and within `within`
/// of being sent when that is given too.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlanStep {
    pub process: u32,
    pub action: Step,
    pub expect: Option<Expect>,
    /// The longest the call may take from sent to answered (`expect granted within 2s`):
    /// what the model does not decide, how promptly a waiter wakes or a renew runs.
    pub within: Option<Duration>,
}

impl PlanStep {
    /// A step without an expectation.
    pub fn new(process: u32, action: Step) -> PlanStep {
        PlanStep {
            process,
            action,
            expect: None,
            within: None,
        }
    }
}

/// Where a plan came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Origin {
    /// Generated from this seed ([`Plan::from_seed`]).
    Seed(u64),
    /// Shrunk by proptest from the plan of this seed.
    Shrunk(u64),
    /// Written by hand ([`Plan::new`]).
    Written,
}

impl Origin {
    /// The seed the plan was generated or shrunk from.
    pub fn seed(self) -> Option<u64> {
        match self {
            Origin::Seed(s) | Origin::Shrunk(s) => Some(s),
            Origin::Written => None,
        }
    }
}

/// A sequence of steps, each a call, BEGIN, COMMIT, ROLLBACK, pause or lapse of one
/// process. Every transaction a process begins ends within the plan.
#[derive(Clone, PartialEq, Eq)]
pub struct Plan {
    /// The shape of the run: processes, keys, TTLs and waits the calls draw from.
    pub workload: Workload,
    pub steps: Vec<PlanStep>,
    pub origin: Origin,
    /// `(name, value)`: server settings every session of the plan starts with (`-c
    /// name=value`, after the run's own), e.g. `lock_timeout` for a fault check's plan. A
    /// drawn plan has none.
    pub settings: Vec<(String, String)>,
    /// SQL statements run on the runner's monitor connection (the caller's own connection
    /// to the plan's database, a superuser's on a throwaway cluster), in order, before the
    /// sessions connect: the
    /// server-side traps a situation needs (a trigger, `ALTER SYSTEM`), as isolationtester's
    /// `setup`. A drawn plan has none.
    pub setup: Vec<String>,
    /// SQL statements run on the monitor connection after every step, however the run
    /// ended: what undoes `setup`.
    pub teardown: Vec<String>,
}

/// A plan that cannot run.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum PlanError {
    #[error("invalid workload: {0}")]
    Workload(#[from] WorkloadError),
    #[error("step {step} names process {process}, but the plan has {processes} processes")]
    Process {
        step: usize,
        process: u32,
        processes: u32,
    },
    #[error("proptest could not generate a plan: {0}")]
    Generate(String),
    /// An expectation on a step that is no call, or that its call never answers.
    #[error("step {step} expects `{expect}`, which {why}")]
    Expect {
        step: usize,
        expect: String,
        why: String,
    },
    /// A time bound on a step that is no call with an expectation.
    #[error(
        "step {step} must answer within {within:?}, but only a call's expectation takes a \
         time bound (`expect granted within 2s`)"
    )]
    Within { step: usize, within: Duration },
    /// A lapse of a key beyond the plan's keys, or by a process in a transaction.
    #[error("step {step} (a lapse by p{process}) {why}")]
    Lapse {
        step: usize,
        process: u32,
        why: String,
    },
}
impl Plan {
    /// A plan written by hand. Transactions are closed as in a generated plan (a COMMIT
    /// or ROLLBACK outside a transaction and a BEGIN inside one are dropped, a transaction
    /// left open is committed at the end).
    pub fn new(workload: Workload, steps: Vec<PlanStep>) -> Result<Plan, PlanError> {
        workload.validate()?;
        if let Some((step, s)) = steps
            .iter()
            .enumerate()
            .find(|(_, s)| s.process >= workload.processes)
        {
            return Err(PlanError::Process {
                step,
                process: s.process,
                processes: workload.processes,
            });
        }
        if let Some(e) = steps.iter().enumerate().find_map(|(i, s)| misplaced(i, s)) {
            return Err(e);
        }
        if let Some(e) = misplaced_lapse(&workload, &steps) {
            return Err(e);
        }
        Ok(Plan {
            steps: close_transactions(workload.processes, steps),
            workload,
            origin: Origin::Written,
            settings: Vec::new(),
            setup: Vec::new(),
            teardown: Vec::new(),
        })
    }

    /// The seed to print for this plan.
    pub fn seed(&self) -> Option<u64> {
        self.origin.seed()
    }

    /// The steps, one per line, numbered from 0 (with the answer a step expects).
    pub fn lines(&self) -> Vec<String> {
        let keys = self.workload.key_names();
        self.steps
            .iter()
            .enumerate()
            .map(|(i, s)| {
                let expect = s
                    .expect
                    .as_ref()
                    .map(|e| format!(" (expect {})", e.text()))
                    .unwrap_or_default();
                format!("{i}: p{} {}{expect}", s.process, describe(&s.action, &keys))
            })
            .collect()
    }

    /// The plan as JSON for a history's header and a verdict file.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "origin": match self.origin {
                Origin::Seed(s) => serde_json::json!({"seed": s}),
                Origin::Shrunk(s) => serde_json::json!({"shrunk_from_seed": s}),
                Origin::Written => serde_json::json!("written"),
            },
            "steps": self.lines(),
            "settings": self
                .settings
                .iter()
                .map(|(name, value)| format!("{name}={value}"))
                .collect::<Vec<_>>(),
            "setup": self.setup,
            "teardown": self.teardown,
        })
    }
}

/// The error of step `i` when it expects an answer its action never gives.
fn misplaced(i: usize, s: &PlanStep) -> Option<PlanError> {
    let bounds_a_call = matches!(s.action, Step::Call(_)) && s.expect.is_some();
    if let (Some(within), false) = (s.within, bounds_a_call) {
        return Some(PlanError::Within { step: i, within });
    }
    let expect = s.expect.as_ref()?;
    let why = match &s.action {
        Step::Call(c) if expect.fits(Asked::Call(c.call)) => return None,
        Step::Call(c) => format!("its call never answers ({:?})", c.call),
        Step::Probe(_) if expect.fits(Asked::ProbeXid) => return None,
        Step::Probe(probe) => format!("its probe never answers ({})", probe.name()),
        Step::Commit if expect.fits(Asked::Commit) => return None,
        Step::Commit => "a commit never answers so".to_string(),
        _ => "a step that is no call, probe or commit never answers".to_string(),
    };
    Some(PlanError::Expect {
        step: i,
        expect: expect.text(),
        why,
    })
}
/// The error of the first lapse of a key beyond the plan's keys or made by a process in a
/// transaction (as [`close_transactions`] keeps them): a lapse runs beside its process's
/// session, on a connection of its own, and would wait for the row lock that process's
/// own open transaction may hold, which only a later step of the same process frees.
fn misplaced_lapse(workload: &Workload, steps: &[PlanStep]) -> Option<PlanError> {
    let mut open = vec![false; workload.processes as usize];
    for (step, s) in steps.iter().enumerate() {
        let in_txn = open.get_mut(s.process as usize)?;
        let why = match s.action {
            Step::Begin(_) => {
                *in_txn = true;
                continue;
            }
            Step::Commit | Step::Rollback => {
                *in_txn = false;
                continue;
            }
            Step::Lapse(k) if k >= workload.keys as usize => {
                format!("names key k{k}, but the plan has {} keys", workload.keys)
            }
            Step::Lapse(_) if *in_txn => {
                "comes while the process has a transaction open: a lapse runs on a \
                 connection of its own and could wait for that transaction's row lock"
                    .to_string()
            }
            _ => continue,
        };
        return Some(PlanError::Lapse {
            step,
            process: s.process,
            why,
        });
    }
    None
}

/// Drops a BEGIN inside a transaction and an end outside one, and ends every transaction
/// still open (with COMMIT, in process order): a plan never leaves a session waiting for a
/// step that does not come.
fn close_transactions(processes: u32, steps: Vec<PlanStep>) -> Vec<PlanStep> {
    let mut open = vec![false; processes as usize];
    let mut kept: Vec<PlanStep> = Vec::with_capacity(steps.len());
    for s in steps {
        let Some(in_txn) = open.get_mut(s.process as usize) else {
            continue;
        };
        match s.action {
            Step::Begin(_) if *in_txn => continue,
            Step::Commit | Step::Rollback if !*in_txn => continue,
            Step::Begin(_) => *in_txn = true,
            Step::Commit | Step::Rollback => *in_txn = false,
            Step::Call(_)
            | Step::Pause(_)
            | Step::Lapse(_)
            | Step::Signal(_)
            | Step::Restart(..)
            | Step::Probe(_)
            | Step::Set(_) => {}
        }
        kept.push(s);
    }
    for (process, _) in open.iter().enumerate().filter(|(_, o)| **o) {
        kept.push(PlanStep::new(process as u32, Step::Commit));
    }
    kept
}

/// A step as a person reads it, before it runs (the epoch is resolved at run time).
pub fn describe(action: &Step, keys: &[String]) -> String {
    match action {
        Step::Begin(i) => format!("BEGIN ISOLATION LEVEL {}", i.sql().to_uppercase()),
        Step::Commit => "COMMIT".into(),
        Step::Rollback => "ROLLBACK".into(),
        Step::Pause(idle) => format!("(idle for {} ms)", idle.as_millis()),
        Step::Lapse(k) => {
            let key: String = keys
                .get(*k)
                .map_or("?", String::as_str)
                .chars()
                .take(16)
                .collect();
            format!("LAPSE {key:?} (injected: its live lease expires now)")
        }
        Step::Probe(probe) => format!(
            "PROBE {} (has the open transaction a transaction id?)",
            probe.name()
        ),
        Step::Set(setting) => format!("SET {} = {} (the session's)", setting.name, setting.value),
        Step::Restart(stop, down) => format!(
            "RESTART ({} stop, down {} ms; injected: every connection ends)",
            stop.name(),
            down.as_millis()
        ),
        Step::Signal(signal) => format!(
            "{} (injected: the backend is signalled)",
            signal.name().to_uppercase()
        ),
        Step::Call(c) => describe_call(c, keys),
    }
}

fn describe_call(c: &OpChoice, keys: &[String]) -> String {
    use crate::workload::{CallKind, EpochChoice, OwnerChoice};
    let key = keys.get(c.key).map_or("?", String::as_str);
    let key: String = key.chars().take(16).collect();
    let owner = match c.owner {
        OwnerChoice::Own => "own".to_string(),
        OwnerChoice::Slot(s) => format!("p{s}'s"),
        OwnerChoice::Stranger => "stranger".to_string(),
    };
    let epoch = match c.epoch {
        EpochChoice::Own => "own epoch".to_string(),
        EpochChoice::Stale => "stale epoch".to_string(),
        EpochChoice::Seen => "seen epoch".to_string(),
        EpochChoice::Guess(e) => format!("epoch {e}"),
    };
    let ttl = short_interval(c.ttl);
    let call = match c.call {
        CallKind::Acquire => format!("acquire {key:?} as {owner}, ttl {ttl}"),
        CallKind::AcquireWait => format!(
            "acquire {key:?} as {owner}, ttl {ttl}, wait {}",
            short_interval(c.wait)
        ),
        CallKind::Renew => format!("renew {key:?} as {owner}, {epoch}, ttl {ttl}"),
        CallKind::Release => format!("release {key:?} as {owner}, {epoch}"),
        CallKind::Inspect => format!("inspect {key:?}"),
    };
    match c.invalid {
        Some(bad) => format!("{call} [invalid: {bad:?}]"),
        None => call,
    }
}

/// `20ms`, `5s`, `2min`, or the interval's fields.
fn short_interval(i: Interval) -> String {
    match (i.months, i.days, i.micros) {
        (0, 0, us) if us % 60_000_000 == 0 && us >= 60_000_000 => format!("{}min", us / 60_000_000),
        (0, 0, us) if us % 1_000_000 == 0 && us > 0 => format!("{}s", us / 1_000_000),
        (0, 0, 0) => "0".into(),
        (0, 0, us) if us % 1_000 == 0 => format!("{}ms", us / 1_000),
        _ => i.to_string(),
    }
}

impl fmt::Debug for Plan {
    /// One line (proptest writes it into its regression file).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "Plan {{ origin: {:?}, processes: {}, keys: {}, steps: [{}] }}",
            self.origin,
            self.workload.processes,
            self.workload.keys,
            self.lines().join("; ")
        )
    }
}

impl fmt::Display for Plan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let origin = match self.origin {
            Origin::Seed(s) => format!("seed {s}"),
            Origin::Shrunk(s) => format!("shrunk from seed {s}"),
            Origin::Written => "written by hand".into(),
        };
        writeln!(
            f,
            "plan ({origin}): {} processes, {} keys, {} steps",
            self.workload.processes,
            self.workload.keys,
            self.steps.len()
        )?;
        for line in self.lines() {
            writeln!(f, "  {line}")?;
        }
        Ok(())
    }
}
#[cfg(test)]
mod tests {
    use super::*;
    use model::Isolation;

    #[test]
    fn hand_written_plans_are_checked_and_closed() {
        let w = Workload {
            processes: 2,
            keys: 1,
            ..stepped_workload()
        };
        let begin = PlanStep::new(1, Step::Begin(Isolation::ReadCommitted));
        let plan = Plan::new(w.clone(), vec![begin.clone()]).unwrap();
        assert_eq!(plan.steps.len(), 2);
        assert!(plan.steps[1].action == Step::Commit && plan.steps[1].process == 1);
        let stray = PlanStep::new(2, Step::Commit);
        assert_eq!(
            Plan::new(w, vec![begin, stray]),
            Err(PlanError::Process {
                step: 1,
                process: 2,
                processes: 2
            })
        );
    }
}
