//! Printing a plan's text form ([`Plan::to_text`](super::Plan::to_text)).

use super::units::{duration_text, interval_text};
use super::Uses;
use crate::plan::{Origin, PlanStep};
use crate::workload::{CallKind, EpochChoice, InvalidInput, OpChoice, OwnerChoice, Step, Workload};
use model::Isolation;

pub(super) fn origin_comment(origin: Origin) -> String {
    match origin {
        Origin::Seed(s) => format!("# plan of seed {s}"),
        Origin::Shrunk(s) => format!("# shrunk from seed {s}"),
        Origin::Written => "# plan written by hand".into(),
    }
}

/// The header, with the keys' real names as comments (they are often awkward strings).
pub(super) fn header_lines(w: &Workload) -> Vec<String> {
    let mut lines = vec![
        format!("processes {}", w.processes),
        format!("keys {}", w.keys),
        format!("names {}", w.names.word()),
    ];
    for (k, name) in w.key_names().iter().enumerate() {
        lines.push(format!("# k{k} is {}", shown_name(name)));
    }
    lines
}

/// A name quoted, cut after 24 characters (the longest key has 1024 bytes).
fn shown_name(name: &str) -> String {
    let cut: String = name.chars().take(24).collect();
    if cut.len() == name.len() {
        format!("{name:?}")
    } else {
        format!("{cut:?}... ({} bytes)", name.len())
    }
}

/// A step as its line in the text form, e.g. `p0 renew k0 epoch 1 ttl 1min expect lapsed`.
pub fn step_text(s: &PlanStep) -> String {
    let action = match &s.action {
        Step::Call(c) => call_text(c),
        Step::Begin(Isolation::ReadCommitted) => "begin".into(),
        Step::Begin(level) => format!("begin {}", level.sql()),
        Step::Commit => "commit".into(),
        Step::Rollback => "rollback".into(),
        Step::Pause(idle) => format!("pause {}", duration_text(*idle)),
        Step::Lapse(k) => format!("lapse k{k}"),
        Step::Signal(signal) => signal.name().to_string(),
        Step::Restart(stop, down) => format!("restart {} {}", stop.name(), duration_text(*down)),
        Step::Probe(probe) => format!("probe {}", probe.name()),
        Step::Set(setting) => format!("set {setting}"),
    };
    match (&s.action, &s.expect, s.within) {
        (Step::Call(_), Some(expect), Some(within)) => format!(
            "p{} {action} expect {} within {}",
            s.process,
            expect.text(),
            duration_text(within)
        ),
        (Step::Call(_) | Step::Probe(_) | Step::Commit, Some(expect), _) => {
            format!("p{} {action} expect {}", s.process, expect.text())
        }
        _ => format!("p{} {action}", s.process),
    }
}

fn call_text(c: &OpChoice) -> String {
    let uses = Uses::of(c.call);
    let verb = match c.call {
        CallKind::Acquire | CallKind::AcquireWait => "acquire",
        CallKind::Renew => "renew",
        CallKind::Release => "release",
        CallKind::Inspect => "inspect",
    };
    let mut words = vec![verb.to_string(), format!("k{}", c.key)];
    let fields = [
        (uses.owner, "as", owner_text(c.owner)),
        (uses.epoch, "epoch", epoch_text(c.epoch)),
        (uses.ttl, "ttl", interval_text(c.ttl)),
        (uses.wait, "wait", interval_text(c.wait)),
    ];
    for (used, word, value) in fields {
        if used {
            words.push(format!("{word} {value}"));
        }
    }
    if let Some(bad) = c.invalid {
        words.push(format!("invalid {}", invalid_word(bad)));
    }
    words.join(" ")
}

fn owner_text(owner: OwnerChoice) -> String {
    match owner {
        OwnerChoice::Own => "own".into(),
        OwnerChoice::Slot(s) => format!("p{s}"),
        OwnerChoice::Stranger => "stranger".into(),
    }
}

fn epoch_text(epoch: EpochChoice) -> String {
    match epoch {
        EpochChoice::Own => "own".into(),
        EpochChoice::Stale => "stale".into(),
        EpochChoice::Seen => "seen".into(),
        EpochChoice::Guess(e) => e.to_string(),
    }
}

/// Every invalid input, in the order of their names in messages.
pub(super) const INVALID_INPUTS: [InvalidInput; 11] = [
    InvalidInput::NullKey,
    InvalidInput::EmptyKey,
    InvalidInput::KeyTooLong,
    InvalidInput::HugeKey,
    InvalidInput::NullOwner,
    InvalidInput::EmptyOwner,
    InvalidInput::NullEpoch,
    InvalidInput::ZeroTtl,
    InvalidInput::NegativeTtlField,
    InvalidInput::TtlOverHundredYears,
    InvalidInput::NegativeWait,
];

/// The kebab-case name of an invalid input.
pub(super) fn invalid_word(bad: InvalidInput) -> &'static str {
    match bad {
        InvalidInput::NullKey => "null-key",
        InvalidInput::EmptyKey => "empty-key",
        InvalidInput::KeyTooLong => "key-too-long",
        InvalidInput::HugeKey => "huge-key",
        InvalidInput::NullOwner => "null-owner",
        InvalidInput::EmptyOwner => "empty-owner",
        InvalidInput::NullEpoch => "null-epoch",
        InvalidInput::ZeroTtl => "zero-ttl",
        InvalidInput::NegativeTtlField => "negative-ttl-field",
        InvalidInput::TtlOverHundredYears => "ttl-over-hundred-years",
        InvalidInput::NegativeWait => "negative-wait",
    }
}
