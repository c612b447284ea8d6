//! The one judgement of a check, whatever its suite: it passed, it is a finding about the
//! target (naming the invariant when one is known), or it has no verdict (with its cause,
//! outside the target). Every suite maps its own result here, once, at the source
//! ([`Judgement`]); the gate and every reporter read only this. A check's own assertions
//! state findings ([`Failure::Violation`]); the machinery's failures (installing,
//! connecting, a lost connection, the harness's own bug) are no verdict, never a finding.

use crate::client::LeaseError;
use crate::pg::PgError;
use std::future::Future;
use std::pin::Pin;
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

/// What a check needs beyond a connection to the server under test: the gate runs on an
/// existing server (`--dsn`) only the checks that need nothing more, and lists the others
/// as skipped with this reason.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Needs {
    /// A connection is enough.
    Connection,
    /// A server the harness manages: the check stops, restarts or crashes it, or logs in as
    /// roles it creates (trust authentication).
    ManagedServer,
}

/// A check's run: a future borrowing the suite's context.
pub type CheckFuture<'a> = Pin<Box<dyn Future<Output = Result<(), Failure>> + Send + 'a>>;

/// One named check of a suite (the conformance checks, the security checks): what it
/// needs and how it runs; `R` is the suite's run function, taking the suite's context.
#[derive(Clone, Copy)]
pub struct Check<R> {
    pub name: &'static str,
    pub needs: Needs,
    pub run: R,
}

impl<R> std::fmt::Debug for Check<R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name)
    }
}

/// Runs check `name`'s future within `bound`, timed: one that does not finish within it
/// has no verdict (a stall, [`Cause::Stalled`]).
pub async fn timed<'a>(name: &'static str, bound: Duration, run: CheckFuture<'a>) -> Outcome {
    let start = std::time::Instant::now();
    let result = match tokio::time::timeout(bound, run).await {
        Ok(result) => result,
        Err(_) => Err(Failure::Infrastructure(format!(
            "hung: {name} did not finish within {bound:?}"
        ))),
    };
    Outcome {
        name,
        result,
        elapsed: start.elapsed(),
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
        Failure::Infrastructure(format!("database error: {}", describe_db(&e)))
    }
}

impl From<PgError> for Failure {
    fn from(e: PgError) -> Self {
        Failure::Infrastructure(e.to_string())
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

/// A database error as a person reads it: its SQLSTATE, message and detail, or the
/// client's error and its cause.
pub fn describe_db(err: &tokio_postgres::Error) -> String {
    match err.as_db_error() {
        Some(db) => {
            let mut s = format!("{}: {}", db.code().code(), db.message());
            if let Some(d) = db.detail() {
                s.push_str(&format!(" (DETAIL: {d})"));
            }
            s
        }
        None => match std::error::Error::source(err) {
            Some(cause) => format!("{err}: {cause}"),
            None => err.to_string(),
        },
    }
}

/// `text` with every run of more than 12 equal characters (a 1024-byte key) written as
/// its first four and a count.
pub fn shorten(text: &str) -> String {
    let mut out = String::with_capacity(text.len().min(4096));
    let chars: Vec<char> = text.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let run = chars[i..].iter().take_while(|&&d| d == c).count();
        if run > 12 {
            out.extend(std::iter::repeat_n(c, 4));
            out.push_str(&format!("...({run} x {c:?})"));
        } else {
            out.extend(std::iter::repeat_n(c, run));
        }
        i += run;
    }
    out
}

/// How a check came out: the one type every suite's result becomes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Judgement {
    Pass,
    /// A finding about the target.
    Finding {
        /// The invariant it violates, as specs/INVARIANTS.md names it, when known.
        invariant: Option<String>,
        message: String,
    },
    /// The check could not reach a verdict, for a cause outside the target.
    NoVerdict {
        cause: Cause,
        why: String,
    },
}

impl Judgement {
    /// A finding that names no invariant.
    pub fn finding(message: impl Into<String>) -> Judgement {
        Judgement::Finding {
            invariant: None,
            message: message.into(),
        }
    }

    /// A no-verdict whose cause its text names ([`Cause::of_text`]).
    pub fn no_verdict_from_text(why: impl Into<String>) -> Judgement {
        let why = why.into();
        Judgement::NoVerdict {
            cause: Cause::of_text(&why),
            why,
        }
    }

    pub fn is_pass(&self) -> bool {
        matches!(self, Judgement::Pass)
    }

    /// What a person reads: empty for a pass, a finding's message, a no-verdict's cause,
    /// why it is not the target's and its detail.
    pub fn message(&self) -> String {
        match self {
            Judgement::Pass => String::new(),
            Judgement::Finding { message, .. } => message.clone(),
            Judgement::NoVerdict { cause, why } => cause.message(why),
        }
    }

    /// The exit status of a command whose whole result this is.
    pub fn exit(&self) -> model::Exit {
        match self {
            Judgement::Pass => model::Exit::Passed,
            Judgement::Finding { .. } => model::Exit::Finding,
            Judgement::NoVerdict { .. } => model::Exit::NoVerdict,
        }
    }

    /// The exit status of a set of judgements that must all pass: any without a verdict
    /// leaves the set without one (it says nothing, whatever the others found), else any
    /// finding is a finding.
    pub fn exit_of<'a>(all: impl IntoIterator<Item = &'a Judgement>) -> model::Exit {
        all.into_iter()
            .map(Judgement::exit)
            .fold(model::Exit::Passed, |worst, e| match (worst, e) {
                (model::Exit::NoVerdict, _) | (_, model::Exit::NoVerdict) => model::Exit::NoVerdict,
                (model::Exit::Finding, _) | (_, model::Exit::Finding) => model::Exit::Finding,
                _ => model::Exit::Passed,
            })
    }

    /// The same judgement with its text rewritten (a suite adding the context a check ran
    /// in).
    pub fn map_text(self, f: impl FnOnce(String) -> String) -> Judgement {
        match self {
            Judgement::Pass => Judgement::Pass,
            Judgement::Finding { invariant, message } => Judgement::Finding {
                invariant,
                message: f(message),
            },
            Judgement::NoVerdict { cause, why } => Judgement::NoVerdict { cause, why: f(why) },
        }
    }
}

/// A harness check's result: a violation is a finding, an infrastructure failure no
/// verdict with the cause its text names.
impl From<Result<(), Failure>> for Judgement {
    fn from(result: Result<(), Failure>) -> Self {
        match result {
            Ok(()) => Judgement::Pass,
            Err(Failure::Violation(why)) => Judgement::finding(why),
            Err(Failure::Infrastructure(why)) => Judgement::no_verdict_from_text(why),
        }
    }
}

/// A cause of no verdict: always outside the target (specs/GATE.md, "No verdict"). A bug
/// in the build under test is a finding, never one of these: an error raised inside the
/// target, an answer outside its API, a call that hangs while the server executes it, a
/// situation its calls kept from arising.
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
    pub const ALL: [Cause; 8] = [
        Cause::Server,
        Cause::Install,
        Cause::Container,
        Cause::Machine,
        Cause::Harness,
        Cause::Budget,
        Cause::Stalled,
        Cause::NotExercised,
    ];

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

    /// The cause a free-text no-verdict message names (conformance, security, fault
    /// checks), by what the harness wrote: a budget, a hang, a server that did not start,
    /// else the machine or the harness.
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
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_message_names_its_cause_and_why_it_is_not_the_targets() {
        for cause in Cause::ALL {
            let m = Judgement::NoVerdict {
                cause,
                why: "detail".into(),
            }
            .message();
            assert!(m.starts_with("NO VERDICT ("), "{m}");
            assert!(m.contains(cause.what()) && m.contains(cause.proof()), "{m}");
            assert!(m.ends_with(": detail"), "{m}");
        }
        assert_eq!(
            Cause::of_text("the checker could not decide: spent"),
            Cause::Budget
        );
        assert_eq!(
            Cause::of_text("harness bug (BadSql) in BEGIN"),
            Cause::Harness
        );
    }

    #[test]
    fn a_violation_is_a_finding_and_an_infrastructure_failure_no_verdict() {
        assert_eq!(Judgement::from(Ok(())), Judgement::Pass);
        assert_eq!(
            Judgement::from(Err(Failure::Violation("epoch 2".into()))),
            Judgement::finding("epoch 2")
        );
        assert_eq!(
            Judgement::from(Err(Failure::Infrastructure("hung: x".into()))),
            Judgement::NoVerdict {
                cause: Cause::Stalled,
                why: "hung: x".into()
            }
        );
        let noted = Judgement::finding("wrong").map_text(|m| format!("setting x: {m}"));
        assert_eq!(noted.message(), "setting x: wrong");
    }

    #[test]
    fn a_set_without_a_verdict_says_nothing_whatever_the_others_found() {
        let pass = Judgement::Pass;
        let finding = Judgement::finding("x");
        let none = Judgement::no_verdict_from_text("hung: y");
        assert_eq!(
            Judgement::exit_of([] as [&Judgement; 0]),
            model::Exit::Passed
        );
        assert_eq!(Judgement::exit_of([&pass, &pass]), model::Exit::Passed);
        assert_eq!(Judgement::exit_of([&pass, &finding]), model::Exit::Finding);
        assert_eq!(
            Judgement::exit_of([&finding, &none]),
            model::Exit::NoVerdict
        );
        assert_eq!(Judgement::exit_of([&none, &pass]), model::Exit::NoVerdict);
    }
}
