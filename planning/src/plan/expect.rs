//! Expected answers of a plan's call steps: `p0 renew k0 ttl 1min expect lapsed` (the
//! grammar is in specs/HISTORY.md, "Plan text"). An expectation sits beside the step
//! ([`super::PlanStep::expect`]), not in the call: a drawn plan has none and runs as before.
//! The stepped runner compares each answered call with its expectation; the model's checker
//! still judges the whole history. An expectation states what the model does not decide
//! (an answer after a lock wait, an error's SQLSTATE) or what the plan is written to show.
//!
//! | answer | the call | comes back as |
//! | --- | --- | --- |
//! | `granted`, `denied` | acquire | a grant; `acquired = false` |
//! | `timeout` | blocking acquire | the wait ran out (57014, the wait-exhausted message) |
//! | `ok` | renew | status `ok` |
//! | `released` | release | status `ok` |
//! | `lapsed`, `not-owner`, `epoch-mismatch` | renew, release | that status |
//! | `held`, `free`, `never-leased` | inspect | a row held; a row not held; no row |
//! | `error SQLSTATE` | any | that error, e.g. `error 22023` (a blocking acquire's wait running out is `timeout`, not `error 57014`) |
//! | `unknown` | any | no answer: the effect is unknown (the backend terminated under it, the connection lost) |
//! | `committed`, `rolled-back` | commit | the COMMIT answered: the transaction committed; it rolled back (an error at commit, or one that had ended it) |
//! | `lost-committed`, `lost-rolled-back` | commit | the COMMIT's answer was lost (its connection ended, e.g. in a crash) and `pg_xact_status` resolved it so; `unknown`: it stayed unresolved |

use crate::workload::CallKind;
use model::{OpResult, Outcome, TxnEnd};

#[cfg(test)]
mod tests;

/// What a call step must answer.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Expect {
    Granted,
    Denied,
    Timeout,
    /// A renew's `ok`.
    Ok,
    /// A release's `ok`.
    Released,
    Lapsed,
    NotOwner,
    EpochMismatch,
    Held,
    Free,
    NeverLeased,
    /// An error with this SQLSTATE (five digits or capital letters).
    Error(String),
    /// No answer: the call's effect is unknown.
    Unknown,
    /// A `probe xid`: the transaction has no transaction id (it wrote nothing).
    NoXid,
    /// A `probe xid`: the transaction has a transaction id (it wrote).
    Xid,
    /// A COMMIT that answered: the transaction committed.
    Committed,
    /// A COMMIT that answered (or found no transaction open): the transaction rolled back.
    RolledBack,
    /// A COMMIT whose answer was lost (its connection ended under it, e.g. in a crash),
    /// resolved committed through `pg_xact_status`.
    LostCommitted,
    /// A COMMIT whose answer was lost, resolved rolled back (it had not committed).
    LostRolledBack,
}

/// The answers without a value, by their words.
const WORDS: [(&str, Expect); 18] = [
    ("granted", Expect::Granted),
    ("denied", Expect::Denied),
    ("timeout", Expect::Timeout),
    ("ok", Expect::Ok),
    ("released", Expect::Released),
    ("lapsed", Expect::Lapsed),
    ("not-owner", Expect::NotOwner),
    ("epoch-mismatch", Expect::EpochMismatch),
    ("held", Expect::Held),
    ("free", Expect::Free),
    ("never-leased", Expect::NeverLeased),
    ("unknown", Expect::Unknown),
    ("none", Expect::NoXid),
    ("assigned", Expect::Xid),
    ("committed", Expect::Committed),
    ("rolled-back", Expect::RolledBack),
    ("lost-committed", Expect::LostCommitted),
    ("lost-rolled-back", Expect::LostRolledBack),
];

/// What an expectation is asked of: a call of a kind, or a `probe xid`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Asked {
    Call(CallKind),
    ProbeXid,
    /// A COMMIT step.
    Commit,
}

/// Whether an expectation was met by what came back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Met {
    Yes,
    /// The call answered, otherwise.
    No,
    /// No answer to compare: the effect is unknown (a lost connection, a client timeout),
    /// or the server or machine failed under it (SQLSTATE class 08, 53, 57P or 58).
    Unanswered,
}

impl Expect {
    /// The words of the expectation, after `expect`.
    pub fn text(&self) -> String {
        match self {
            Expect::Error(code) => format!("error {code}"),
            other => WORDS
                .iter()
                .find(|(_, e)| e == other)
                .map_or_else(String::new, |(w, _)| (*w).to_string()),
        }
    }

    /// The answers `asked` can give, as written after `expect`.
    pub fn answers(asked: Asked) -> &'static [&'static str] {
        let kind = match asked {
            Asked::Call(kind) => kind,
            Asked::ProbeXid => return &["none", "assigned"],
            Asked::Commit => {
                return &[
                    "committed",
                    "rolled-back",
                    "lost-committed",
                    "lost-rolled-back",
                    "unknown",
                ]
            }
        };
        match kind {
            CallKind::Acquire => &["granted", "denied", "error SQLSTATE", "unknown"],
            CallKind::AcquireWait => &["granted", "denied", "timeout", "error SQLSTATE", "unknown"],
            CallKind::Renew => &[
                "ok",
                "lapsed",
                "not-owner",
                "epoch-mismatch",
                "error SQLSTATE",
                "unknown",
            ],
            CallKind::Release => &[
                "released",
                "lapsed",
                "not-owner",
                "epoch-mismatch",
                "error SQLSTATE",
                "unknown",
            ],
            CallKind::Inspect => &["held", "free", "never-leased", "error SQLSTATE", "unknown"],
        }
    }

    /// Whether a `probe xid` that found a transaction id (`assigned`) meets this.
    pub fn met_by_probe(&self, assigned: bool) -> bool {
        matches!(
            (self, assigned),
            (Expect::Xid, true) | (Expect::NoXid, false)
        )
    }

    /// Whether a COMMIT that ended the transaction so (`None`: lost and unresolved)
    /// meets this; `answered`: whether the COMMIT itself answered.
    pub fn met_by_end(&self, end: Option<TxnEnd>, answered: bool) -> bool {
        matches!(
            (self, end, answered),
            (Expect::Committed, Some(TxnEnd::Commit), true)
                | (Expect::RolledBack, Some(TxnEnd::Rollback), true)
                | (Expect::LostCommitted, Some(TxnEnd::Commit), false)
                | (Expect::LostRolledBack, Some(TxnEnd::Rollback), false)
                | (Expect::Unknown, None | Some(TxnEnd::Unknown), false)
        )
    }

    /// Whether `asked` can give this answer.
    pub fn fits(&self, asked: Asked) -> bool {
        let word = match self {
            Expect::Error(_) => "error SQLSTATE".to_string(),
            other => other.text(),
        };
        Expect::answers(asked).contains(&word.as_str())
    }

    /// The expectation `words` (after `expect`) spell for `asked`; `verb` names a call in
    /// messages.
    pub fn of_words(asked: Asked, verb: &str, words: &[&str]) -> Result<Expect, String> {
        let expect = match words {
            [] => return Err(format!("`expect` needs an answer: {}", listed(asked, verb))),
            ["error", code] => error_of(code)?,
            ["error"] => {
                return Err("`expect error` needs a SQLSTATE, e.g. `expect error 22023`".into())
            }
            [word] => WORDS
                .iter()
                .find(|(w, _)| w == word)
                .map(|(_, e)| e.clone())
                .ok_or_else(|| format!("unknown answer `{word}`: {}", listed(asked, verb)))?,
            [first, ..] => {
                return Err(format!(
                    "`expect {first}` takes nothing after it: `expect` ends the line"
                ))
            }
        };
        if !expect.fits(asked) {
            return Err(format!(
                "{} never answers `{}`: {}",
                a(&noun(asked, verb)),
                expect.text(),
                listed(asked, verb)
            ));
        }
        Ok(expect)
    }

    /// Whether `result` is this answer.
    pub fn met_by(&self, result: &OpResult) -> Met {
        let outcome = result.outcome();
        if let (Expect::Error(code), OpResult::Fail { sqlstate, .. }) = (self, result) {
            if code == sqlstate && outcome != Outcome::Timeout {
                return Met::Yes;
            }
        }
        if *self == Expect::Unknown && outcome == Outcome::Unknown {
            return Met::Yes;
        }
        let machine = match result {
            OpResult::Fail { sqlstate, .. } => machine_failure(sqlstate),
            _ => false,
        };
        if outcome == Outcome::Unknown || machine {
            return Met::Unanswered;
        }
        let yes = match (self, &outcome) {
            (Expect::Granted, Outcome::Acquired { .. })
            | (Expect::Denied, Outcome::Denied)
            | (Expect::Timeout, Outcome::Timeout)
            | (Expect::Ok, Outcome::Renewed { .. })
            | (Expect::Released, Outcome::Released)
            | (Expect::Lapsed, Outcome::Lapsed)
            | (Expect::NotOwner, Outcome::NotOwner)
            | (Expect::EpochMismatch, Outcome::EpochMismatch)
            | (Expect::NeverLeased, Outcome::Inspected(None)) => true,
            (Expect::Held, Outcome::Inspected(Some(row))) => row.held,
            (Expect::Free, Outcome::Inspected(Some(row))) => !row.held,
            _ => false,
        };
        if yes {
            Met::Yes
        } else {
            Met::No
        }
    }
}

/// What came back, in the words of an expectation (and the detail a person needs).
pub fn answer_text(result: &OpResult) -> String {
    match result {
        OpResult::Ok(outcome) => match outcome {
            Outcome::Acquired { epoch, .. } => format!("granted (epoch {epoch})"),
            Outcome::Denied => "denied".into(),
            Outcome::Renewed { .. } => "ok".into(),
            Outcome::Released => "released".into(),
            Outcome::Lapsed => "lapsed".into(),
            Outcome::NotOwner => "not-owner".into(),
            Outcome::EpochMismatch => "epoch-mismatch".into(),
            Outcome::Inspected(None) => "never-leased".into(),
            Outcome::Inspected(Some(row)) => format!(
                "{} (owner {:?}, epoch {})",
                if row.held { "held" } else { "free" },
                row.owner.as_deref().unwrap_or("-"),
                row.epoch
            ),
            other => format!("{other:?}"),
        },
        OpResult::Fail { sqlstate, message } if result.outcome() == Outcome::Timeout => {
            format!("timeout (error {sqlstate}: {message})")
        }
        OpResult::Fail { sqlstate, message } => format!("error {sqlstate}: {message}"),
        OpResult::Unknown { reason } => format!("no answer: {reason}"),
    }
}

/// A server error that says nothing about the target: connection exceptions (08),
/// resources (53), operator intervention (57P), system errors (58).
fn machine_failure(sqlstate: &str) -> bool {
    ["08", "53", "57P", "58"]
        .iter()
        .any(|class| sqlstate.starts_with(class))
}

fn error_of(code: &str) -> Result<Expect, String> {
    let valid = code.len() == 5
        && code
            .bytes()
            .all(|b| b.is_ascii_digit() || b.is_ascii_uppercase());
    if valid {
        Ok(Expect::Error(code.to_string()))
    } else {
        Err(format!(
            "`{code}` is not a SQLSTATE: write five digits or capital letters, e.g. \
             `expect error 22023`"
        ))
    }
}

/// `a renew answers ok, lapsed, ...`.
fn listed(asked: Asked, verb: &str) -> String {
    let answers: Vec<String> = Expect::answers(asked)
        .iter()
        .map(|a| format!("`{a}`"))
        .collect();
    format!("{} answers {}", a(&noun(asked, verb)), answers.join(", "))
}

/// What `asked` is called in messages: `verb`, but a blocking acquire or a `probe xid` by
/// that name.
fn noun(asked: Asked, verb: &str) -> String {
    match asked {
        Asked::Call(CallKind::AcquireWait) => "blocking acquire".into(),
        Asked::Call(_) => verb.into(),
        Asked::ProbeXid => "`probe xid`".into(),
        Asked::Commit => "`commit`".into(),
    }
}

/// `a renew`, `an acquire`.
fn a(noun: &str) -> String {
    match noun.chars().next() {
        Some('a' | 'e' | 'i' | 'o' | 'u') => format!("an {noun}"),
        _ => format!("a {noun}"),
    }
}

/// The words of a call after its key, and the words after its `expect` (none: no
/// expectation). `expect` ends the line; it comes where a word of the call may.
pub fn split_expect<'a, 'w>(options: &'a [&'w str]) -> (&'a [&'w str], Option<&'a [&'w str]>) {
    let at = options
        .iter()
        .enumerate()
        .find(|(i, w)| i % 2 == 0 && **w == "expect")
        .map(|(i, _)| i);
    match at {
        Some(i) => (&options[..i], Some(&options[i + 1..])),
        None => (options, None),
    }
}
