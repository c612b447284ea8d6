//! The text form of a stepped plan: one item a line, as isolationtester's spec files but
//! one line per step, so a plan can be written by hand, printed from a failing run and read
//! back ([`Plan::to_text`], [`Plan::from_text`]; the grammar is in specs/HISTORY.md, "Plan
//! text").
//!
//! ```text
//! # p1 holds the row lock in a transaction while a blocking acquire waits for it
//! processes 2
//! keys 1
//! names shared-owners
//! p0 acquire k0 as own ttl 5s
//! p1 begin
//! p1 renew k0 as own epoch seen ttl 20ms
//! p0 acquire k0 as stranger ttl 5s wait 250ms
//! p1 commit
//! p0 pause 300ms
//! p0 inspect k0
//! ```
//!
//! A call line may end with the answer it expects (`p0 renew k0 ttl 1min expect lapsed`;
//! the vocabulary is in [`super::expect`]).
//!
//! The text holds what a stepped run reads and nothing more: the processes, the keys and
//! the names (the runner reads no other workload field), and of each call the fields its
//! kind uses ([`Uses`]). So a plan reads back as [`Plan::as_written`] of it: equal except
//! for what no run reads.
//!
//! Reading is strict: what is written is what runs. A COMMIT or ROLLBACK outside a
//! transaction, a BEGIN inside one and a transaction still open at the end are refused with
//! their line (where [`Plan::new`] would drop or close them), and so are keys, processes
//! and owners beyond the header's counts. A text of no steps is a plan of no steps (a drawn
//! plan can be one: its only step, a stray COMMIT, dropped); running one is the caller's
//! call (`leasecheck check --plan` refuses it).

use super::expect::{Asked, Expect};
use super::{stepped_workload, Plan, PlanError, PlanStep};
use crate::workload::{
    CallKind, EpochChoice, Names, OpChoice, OwnerChoice, Probe, Setting, Signal, Step, Stop,
    Workload, KEYS, PROCESSES,
};
use model::{Interval, Isolation};
use std::time::Duration;

mod call;
#[cfg(test)]
mod fault_step_tests;
mod print;
#[cfg(test)]
mod tests;
mod units;

use call::{call_of, key_of};
pub use print::step_text;
use print::{header_lines, origin_comment};
pub use units::{duration_of, duration_text, interval_of, interval_text};

/// A plan's text that cannot be read.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum PlanTextError {
    /// Line `line` (from 1) is wrong; `problem` says how and what to write instead.
    #[error("line {line}: {problem}")]
    Line { line: usize, problem: String },
    #[error(transparent)]
    Plan(#[from] PlanError),
}

/// Which of an [`OpChoice`]'s fields a kind of call reads ([`OpChoice::op`]); the others
/// are neither printed nor read, and read back as own, own, zero and zero.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Uses {
    pub owner: bool,
    pub epoch: bool,
    pub ttl: bool,
    pub wait: bool,
}

impl Uses {
    pub fn of(call: CallKind) -> Uses {
        let (owner, epoch, ttl, wait) = match call {
            CallKind::Acquire => (true, false, true, false),
            CallKind::AcquireWait => (true, false, true, true),
            CallKind::Renew => (true, true, true, false),
            CallKind::Release => (true, true, false, false),
            CallKind::Inspect => (false, false, false, false),
        };
        Uses {
            owner,
            epoch,
            ttl,
            wait,
        }
    }

    /// The words that may follow a call's key, for messages.
    fn words(self) -> String {
        let words = [
            (self.owner, "`as OWNER`"),
            (self.epoch, "`epoch EPOCH`"),
            (self.ttl, "`ttl INTERVAL`"),
            (self.wait, "`wait INTERVAL`"),
            (true, "`invalid INPUT`"),
            (true, "`expect ANSWER`"),
        ];
        let given: Vec<&str> = words.iter().filter(|(u, _)| *u).map(|(_, w)| *w).collect();
        given.join(", ")
    }
}

impl Plan {
    /// The plan in its text form (module [`text`](self)); [`Plan::from_text`] reads it back
    /// as [`Plan::as_written`] of this plan, written by hand.
    pub fn to_text(&self) -> String {
        let mut lines = vec![origin_comment(self.origin)];
        lines.extend(header_lines(&self.workload));
        lines.extend(
            self.settings
                .iter()
                .map(|(name, value)| format!("set {name}={value}")),
        );
        lines.extend(self.setup.iter().map(|sql| format!("setup {sql}")));
        lines.extend(self.teardown.iter().map(|sql| format!("teardown {sql}")));
        lines.extend(self.steps.iter().map(step_text));
        lines.join("\n") + "\n"
    }

    /// Reads a plan's text form (module [`text`](self)); the plan is written by hand.
    pub fn from_text(text: &str) -> Result<Plan, PlanTextError> {
        let mut reader = Reader::default();
        for (index, line) in text.lines().enumerate() {
            let words = words_of(line);
            if words.is_empty() {
                continue;
            }
            let number = index + 1;
            let outcome = match words[0] {
                "setup" | "teardown" => reader.server_sql(words[0], statement_of(line)),
                _ => reader.line(number, &words),
            };
            outcome.map_err(|problem| PlanTextError::Line {
                line: number,
                problem,
            })?;
        }
        reader.finish()
    }

    /// This plan as its text reads back: the workload's fields that no stepped run reads
    /// are [`stepped_workload`]'s, and each call's fields its kind does not use ([`Uses`])
    /// are own owner, own epoch, zero TTL and zero wait. Runs the same calls as this plan.
    pub fn as_written(&self) -> Plan {
        Plan {
            workload: Workload {
                processes: self.workload.processes,
                keys: self.workload.keys,
                names: self.workload.names,
                ..stepped_workload()
            },
            steps: self
                .steps
                .iter()
                .map(|s| PlanStep {
                    process: s.process,
                    action: match &s.action {
                        Step::Call(c) => Step::Call(used_fields(c)),
                        other => other.clone(),
                    },
                    expect: s.expect.clone(),
                    within: s.within,
                })
                .collect(),
            origin: self.origin,
            settings: self.settings.clone(),
            setup: self.setup.clone(),
            teardown: self.teardown.clone(),
        }
    }
}

/// `c` with the fields its kind does not use set to what the text reads back.
fn used_fields(c: &OpChoice) -> OpChoice {
    let uses = Uses::of(c.call);
    OpChoice {
        owner: if uses.owner {
            c.owner
        } else {
            OwnerChoice::Own
        },
        epoch: if uses.epoch {
            c.epoch
        } else {
            EpochChoice::Own
        },
        ttl: if uses.ttl { c.ttl } else { Interval::ZERO },
        wait: if uses.wait { c.wait } else { Interval::ZERO },
        ..c.clone()
    }
}

// ---- reading ----

/// A line's words, its comment (from `#`) cut.
fn words_of(line: &str) -> Vec<&str> {
    let text = line.split('#').next().unwrap_or_default();
    text.split_whitespace().collect()
}

/// The statement of a `setup` or `teardown` line: the line after its first word, its
/// comment (from `#`) cut, as written but for the blanks at its ends.
fn statement_of(line: &str) -> &str {
    let text = line.split('#').next().unwrap_or_default().trim_start();
    let after = text.find(char::is_whitespace).map_or("", |at| &text[at..]);
    after.trim()
}

/// The plan read so far.
#[derive(Default)]
struct Reader {
    processes: Option<(u32, usize)>,
    keys: Option<(u32, usize)>,
    names: Option<(Names, usize)>,
    /// `set name=value` lines: the setting and the line it was given on.
    settings: Vec<(String, String, usize)>,
    setup: Vec<String>,
    teardown: Vec<String>,
    /// The line of the first step: the header ends there.
    first_step: Option<usize>,
    steps: Vec<PlanStep>,
    /// Per process, the line of the BEGIN of its open transaction.
    open: Vec<Option<usize>>,
}

impl Reader {
    fn line(&mut self, number: usize, words: &[&str]) -> Result<(), String> {
        match words[0] {
            "processes" | "keys" | "names" => self.header(number, words),
            "set" => self.setting(number, words),
            first => match numbered("p", first) {
                Some(process) => self.step(number, process, &words[1..]),
                None => Err(format!(
                    "unknown word `{first}`: a line is a header line (`processes N`, `keys N`, \
                     `names {}`, `set name=value`, `setup SQL`, `teardown SQL`) or a step of a \
                     process (`p0 ...`)",
                    names_list()
                )),
            },
        }
    }

    fn header(&mut self, number: usize, words: &[&str]) -> Result<(), String> {
        let word = words[0];
        if let Some(first) = self.first_step {
            return Err(format!(
                "`{word}` must come before the first step (line {first})"
            ));
        }
        let [_, value] = words else {
            return Err(format!(
                "`{word}` takes one value, e.g. `{}`",
                example(word)
            ));
        };
        match word {
            "processes" => set_header(
                &mut self.processes,
                (count_of(word, value, &PROCESSES)?, number),
            ),
            "keys" => set_header(&mut self.keys, (count_of(word, value, &KEYS)?, number)),
            _ => set_header(&mut self.names, (names_of(value)?, number)),
        }
        .map_err(|line| format!("`{word}` was already given on line {line}"))
    }

    /// A `set name=value` line: a session setting of every session of the plan.
    fn setting(&mut self, number: usize, words: &[&str]) -> Result<(), String> {
        if let Some(first) = self.first_step {
            return Err(format!(
                "`set` must come before the first step (line {first})"
            ));
        }
        let [_, setting] = words else {
            return Err(
                "`set` takes one setting as name=value, e.g. `set lock_timeout=300ms`".into(),
            );
        };
        let Setting { name, value } = Setting::of(setting)?;
        if let Some((_, _, line)) = self.settings.iter().find(|(n, _, _)| *n == name) {
            return Err(format!("`{name}` was already set on line {line}"));
        }
        self.settings.push((name, value, number));
        Ok(())
    }

    /// A `setup SQL` or `teardown SQL` line (`which`): one statement run on the monitor
    /// connection before or after the steps.
    fn server_sql(&mut self, which: &str, sql: &str) -> Result<(), String> {
        if let Some(first) = self.first_step {
            return Err(format!(
                "`{which}` must come before the first step (line {first})"
            ));
        }
        if sql.is_empty() {
            return Err(format!(
                "`{which}` takes one SQL statement to the end of its line, e.g. `{which} \
                 SELECT pg_catalog.pg_reload_conf()`"
            ));
        }
        match which {
            "setup" => self.setup.push(sql.to_string()),
            _ => self.teardown.push(sql.to_string()),
        }
        Ok(())
    }

    /// The workload the header gives, [`stepped_workload`]'s where it says nothing.
    fn workload(&self) -> Workload {
        let default = stepped_workload();
        Workload {
            processes: self.processes.map_or(default.processes, |(n, _)| n),
            keys: self.keys.map_or(default.keys, |(n, _)| n),
            names: self.names.map_or(default.names, |(n, _)| n),
            ..default
        }
    }

    fn step(&mut self, number: usize, process: u32, words: &[&str]) -> Result<(), String> {
        let workload = self.workload();
        if self.first_step.is_none() {
            self.first_step = Some(number);
            self.open = vec![None; workload.processes as usize];
        }
        if process >= workload.processes {
            return Err(format!(
                "process p{process} is out of range: {}",
                processes_span(workload.processes)
            ));
        }
        let (words, within) = within_of(words)?;
        let (action, expect) = action_of(&workload, process, words)?;
        if within.is_some() && !(matches!(action, Step::Call(_)) && expect.is_some()) {
            return Err(
                "`within` bounds a call's expected answer and ends its line, e.g. `p1 acquire \
                 k0 ttl 1min wait 10s expect granted within 2s`"
                    .into(),
            );
        }
        self.track_transaction(number, process, &action)?;
        self.steps.push(PlanStep {
            process,
            action,
            expect,
            within,
        });
        Ok(())
    }

    /// Refuses a transaction begun twice or ended while none is open.
    fn track_transaction(
        &mut self,
        number: usize,
        process: u32,
        action: &Step,
    ) -> Result<(), String> {
        let Some(open) = self.open.get_mut(process as usize) else {
            return Ok(());
        };
        match (action, *open) {
            (Step::Begin(_), Some(begun)) => Err(format!(
                "p{process} already has a transaction open (begun on line {begun}): end it with \
                 `p{process} commit` or `p{process} rollback` first"
            )),
            (Step::Commit | Step::Rollback, None) => Err(format!(
                "p{process} has no open transaction to end: add `p{process} begin` before this \
                 line, or remove it"
            )),
            (Step::Lapse(_), Some(begun)) => Err(format!(
                "p{process} has a transaction open (begun on line {begun}): a lapse runs on a \
                 connection of its own and could wait for that transaction's row lock; put it \
                 after `p{process} commit` or give it to a process with no transaction open"
            )),
            (Step::Probe(_), None) => Err(format!(
                "p{process} has no open transaction: a probe asks whether the open transaction \
                 wrote; put it between `p{process} begin` and its end"
            )),
            (Step::Begin(_), None) => {
                *open = Some(number);
                Ok(())
            }
            (Step::Commit | Step::Rollback, Some(_)) => {
                *open = None;
                Ok(())
            }
            _ => Ok(()),
        }
    }

    fn finish(self) -> Result<Plan, PlanTextError> {
        let workload = self.workload();
        if let Some((process, line)) = (0..)
            .zip(&self.open)
            .find_map(|(p, begun)| begun.map(|line| (p, line)))
        {
            return Err(PlanTextError::Line {
                line,
                problem: format!(
                    "p{process}'s transaction begun here is still open at the end of the plan: \
                     end it with `p{process} commit` or `p{process} rollback`"
                ),
            });
        }
        let mut plan = Plan::new(workload, self.steps)?;
        plan.settings = self
            .settings
            .into_iter()
            .map(|(name, value, _)| (name, value))
            .collect();
        plan.setup = self.setup;
        plan.teardown = self.teardown;
        Ok(plan)
    }
}

/// Records a header value; the line it was given on before, if it was.
fn set_header<T>(slot: &mut Option<(T, usize)>, value: (T, usize)) -> Result<(), usize> {
    match slot {
        Some((_, line)) => Err(*line),
        None => {
            *slot = Some(value);
            Ok(())
        }
    }
}

fn example(word: &str) -> String {
    match word {
        "processes" => "processes 2".into(),
        "keys" => "keys 1".into(),
        _ => format!("names {}", Names::default().word()),
    }
}

/// `N` of `PREFIXN` (digits only: `p+1` is no process).
fn numbered(prefix: &str, word: &str) -> Option<u32> {
    let digits = word.strip_prefix(prefix)?;
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

fn count_of(word: &str, value: &str, range: &std::ops::RangeInclusive<u32>) -> Result<u32, String> {
    let bounds = format!("{} to {}", range.start(), range.end());
    match numbered("", value) {
        Some(n) if range.contains(&n) => Ok(n),
        _ => Err(format!("`{word}` must be {bounds}, got `{value}`")),
    }
}

fn names_list() -> String {
    let words: Vec<&str> = Names::ALL.iter().map(|n| n.word()).collect();
    words.join("|")
}

fn names_of(value: &str) -> Result<Names, String> {
    Names::ALL
        .into_iter()
        .find(|n| n.word() == value)
        .ok_or_else(|| format!("unknown names `{value}`: write {}", names_list()))
}

/// `the plan has 2 processes (p0-p1)`.
fn processes_span(processes: u32) -> String {
    format!(
        "the plan has {processes} processes ({})",
        span("p", processes)
    )
}

/// `1 key`, `2 keys`.
fn counted(n: u32, noun: &str) -> String {
    match n {
        1 => format!("1 {noun}"),
        n => format!("{n} {noun}s"),
    }
}

/// `p0-p1`, or `p0` for one.
fn span(prefix: &str, count: u32) -> String {
    match count {
        0 | 1 => format!("{prefix}0"),
        n => format!("{prefix}0-{prefix}{}", n - 1),
    }
}

const ACTIONS: &str =
    "acquire, renew, release, inspect, begin, commit, rollback, pause, lapse, cancel, terminate, restart, probe or set";

/// The step of process `process` that `words` (after the process) spell, and the answer
/// it expects.
fn action_of(w: &Workload, process: u32, words: &[&str]) -> Result<(Step, Option<Expect>), String> {
    let Some((&verb, rest)) = words.split_first() else {
        return Err(format!("p{process} needs an action: {ACTIONS}"));
    };
    let call = |kind| call_of(w, kind, verb, rest).map(|(c, e)| (Step::Call(c), e));
    match verb {
        "acquire" | "renew" | "release" | "inspect" | "probe" | "commit" => {}
        _ if rest.contains(&"expect") => {
            return Err(format!(
                "`{verb}` takes no `expect`: only a call (acquire, renew, release, inspect), \
                 a probe or a commit expects an answer"
            ))
        }
        _ => {}
    }
    let step = |s: Result<Step, String>| s.map(|s| (s, None));
    match verb {
        "acquire" => call(CallKind::Acquire),
        "renew" => call(CallKind::Renew),
        "release" => call(CallKind::Release),
        "inspect" => call(CallKind::Inspect),
        "begin" => step(begin_of(rest)),
        "commit" => commit_of(rest),
        "rollback" if !rest.is_empty() => Err(format!("`{verb}` takes nothing after it")),
        "rollback" => Ok((Step::Rollback, None)),
        "pause" => match rest {
            [value] => step(duration_of(value).map(Step::Pause)),
            _ => Err("`pause` takes one duration, e.g. `pause 300ms`".into()),
        },
        "lapse" => match rest {
            [key] => step(key_of(w, key).map(Step::Lapse)),
            _ => Err("`lapse` takes one key and nothing more, e.g. `lapse k0`".into()),
        },
        "cancel" | "terminate" if !rest.is_empty() => Err(format!(
            "`{verb}` takes nothing after it: `p1 {verb}` signals p1's backend"
        )),
        "restart" => match rest {
            [how, down] => step(restart_of(how, down)),
            _ => Err(
                "`restart` takes how the server stops and how long it stays down, e.g. \
                 `restart fast 1800ms` (crash, immediate or fast)"
                    .into(),
            ),
        },
        "probe" => probe_of(rest),
        "set" => match rest {
            [setting] => step(Setting::of(setting).map(Step::Set)),
            _ => Err(
                "`set` takes one setting of the process's session, e.g. `p1 set \
                 lock_timeout=200ms`"
                    .into(),
            ),
        },
        "cancel" => Ok((Step::Signal(Signal::Cancel), None)),
        "terminate" => Ok((Step::Signal(Signal::Terminate), None)),
        other => Err(format!("unknown action `{other}`: write {ACTIONS}")),
    }
}

/// The words of a step line without its time bound (`... within 2s`, after `expect`
/// ANSWER), and the bound.
fn within_of<'a, 'w>(words: &'a [&'w str]) -> Result<(&'a [&'w str], Option<Duration>), String> {
    match words {
        [rest @ .., "within", bound] => Ok((rest, Some(duration_of(bound)?))),
        [.., "within"] => Err("`within` needs a duration, e.g. `within 2s`".into()),
        _ => Ok((words, None)),
    }
}

fn probe_of(rest: &[&str]) -> Result<(Step, Option<Expect>), String> {
    let (what, expect) = match rest.iter().position(|w| *w == "expect") {
        Some(i) => (&rest[..i], Some(&rest[i + 1..])),
        None => (rest, None),
    };
    if what != ["xid"] {
        return Err(
            "`probe` takes what it asks, `xid` (has the open transaction a transaction id?), \
             and may end with `expect none` or `expect assigned`"
                .into(),
        );
    }
    let expect = expect
        .map(|words| Expect::of_words(Asked::ProbeXid, "probe", words))
        .transpose()?;
    Ok((Step::Probe(Probe::Xid), expect))
}

/// A `commit`, and the end it expects (`commit expect lost-committed`).
fn commit_of(rest: &[&str]) -> Result<(Step, Option<Expect>), String> {
    match rest {
        [] => Ok((Step::Commit, None)),
        ["expect", words @ ..] => {
            let expect = Expect::of_words(Asked::Commit, "commit", words)?;
            Ok((Step::Commit, Some(expect)))
        }
        _ => Err(
            "`commit` takes nothing after it but the end it expects, e.g. `commit expect \
             committed`"
                .into(),
        ),
    }
}

fn restart_of(how: &str, down: &str) -> Result<Step, String> {
    let stop = Stop::ALL
        .into_iter()
        .find(|s| s.name() == how)
        .ok_or_else(|| format!("unknown stop `{how}`: write crash, immediate or fast"))?;
    Ok(Step::Restart(stop, duration_of(down)?))
}

fn begin_of(rest: &[&str]) -> Result<Step, String> {
    if rest.is_empty() {
        return Ok(Step::Begin(Isolation::ReadCommitted));
    }
    Isolation::from_sql(&rest.join(" "))
        .map(Step::Begin)
        .ok_or_else(|| {
            format!(
                "unknown isolation level `{}`: write `begin`, `begin read committed`, \
                 `begin repeatable read` or `begin serializable`",
                rest.join(" ")
            )
        })
}
