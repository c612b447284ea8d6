//! Reading a call's line: its key and the `WORD VALUE` pairs after it, and the answer it
//! expects.

use super::print::{invalid_word, INVALID_INPUTS};
use super::{counted, interval_of, numbered, processes_span, span, Uses};
use crate::plan::expect::{split_expect, Asked, Expect};
use crate::workload::{CallKind, EpochChoice, InvalidInput, OpChoice, OwnerChoice, Workload};
use model::Interval;

/// The words after a call's key, as given.
#[derive(Default)]
struct CallWords {
    owner: Option<OwnerChoice>,
    epoch: Option<EpochChoice>,
    ttl: Option<Interval>,
    wait: Option<Interval>,
    invalid: Option<InvalidInput>,
}

/// A call `verb` (an `acquire` with a `wait` is a blocking one), and the answer it expects.
pub(super) fn call_of(
    w: &Workload,
    kind: CallKind,
    verb: &str,
    rest: &[&str],
) -> Result<(OpChoice, Option<Expect>), String> {
    let Some((&key_word, options)) = rest.split_first() else {
        return Err(format!("`{verb}` needs a key, e.g. `{verb} k0`"));
    };
    let key = key_of(w, key_word)?;
    let (options, expect) = split_expect(options);
    let (kind, uses) = match kind {
        CallKind::Acquire => (CallKind::Acquire, Uses::of(CallKind::AcquireWait)),
        other => (other, Uses::of(other)),
    };
    let given = call_words(w, verb, uses, options)?;
    let kind = match (kind, given.wait) {
        (CallKind::Acquire, Some(_)) => CallKind::AcquireWait,
        (kind, _) => kind,
    };
    if Uses::of(kind).ttl && given.ttl.is_none() {
        return Err(format!("`{verb}` needs a ttl, e.g. `{verb} k{key} ttl 5s`"));
    }
    let expect = match expect {
        Some(words) => Some(Expect::of_words(Asked::Call(kind), verb, words)?),
        None => None,
    };
    let call = OpChoice {
        call: kind,
        key,
        owner: given.owner.unwrap_or(OwnerChoice::Own),
        epoch: given.epoch.unwrap_or(EpochChoice::Own),
        ttl: given.ttl.unwrap_or(Interval::ZERO),
        wait: given.wait.unwrap_or(Interval::ZERO),
        invalid: given.invalid,
    };
    Ok((call, expect))
}

pub(super) fn key_of(w: &Workload, word: &str) -> Result<usize, String> {
    match numbered("k", word) {
        Some(k) if k < w.keys => Ok(k as usize),
        Some(k) => Err(format!(
            "key k{k} is out of range: the plan has {} ({})",
            counted(w.keys, "key"),
            span("k", w.keys)
        )),
        None => Err(format!(
            "`{word}` is not a key: keys are named {} by their index (set by `keys N`)",
            span("k", w.keys)
        )),
    }
}

/// Reads the `WORD VALUE` pairs after a call's key.
fn call_words(w: &Workload, verb: &str, uses: Uses, options: &[&str]) -> Result<CallWords, String> {
    let mut given = CallWords::default();
    for pair in options.chunks(2) {
        let &[word, value] = pair else {
            return Err(format!("`{}` needs a value after it", pair[0]));
        };
        let allowed = match word {
            "as" => uses.owner,
            "epoch" => uses.epoch,
            "ttl" => uses.ttl,
            "wait" => uses.wait,
            "invalid" => true,
            _ => false,
        };
        if !allowed {
            return Err(format!(
                "`{verb}` takes no `{word}`: after the key it takes {}",
                uses.words()
            ));
        }
        let twice = match word {
            "as" => once(&mut given.owner, owner_of(w, value)?),
            "epoch" => once(&mut given.epoch, epoch_of(value)?),
            "ttl" => once(&mut given.ttl, interval_of(value)?),
            "wait" => once(&mut given.wait, interval_of(value)?),
            _ => once(&mut given.invalid, invalid_of(value)?),
        };
        if twice {
            return Err(format!("`{word}` is given twice"));
        }
    }
    Ok(given)
}

/// Sets `slot`; true when it was already set.
fn once<T>(slot: &mut Option<T>, value: T) -> bool {
    let twice = slot.is_some();
    *slot = Some(value);
    twice
}

fn owner_of(w: &Workload, value: &str) -> Result<OwnerChoice, String> {
    match (value, numbered("p", value)) {
        ("own", _) => Ok(OwnerChoice::Own),
        ("stranger", _) => Ok(OwnerChoice::Stranger),
        (_, Some(p)) if p < w.processes => Ok(OwnerChoice::Slot(p)),
        (_, Some(p)) => Err(format!(
            "owner p{p} is out of range: {}; write `as stranger` for an owner no process acts as",
            processes_span(w.processes)
        )),
        (_, None) => Err(format!(
            "unknown owner `{value}`: write `as own`, `as stranger` or another process's owner \
             (`as {}`)",
            span("p", w.processes)
        )),
    }
}

fn epoch_of(value: &str) -> Result<EpochChoice, String> {
    match value {
        "own" => Ok(EpochChoice::Own),
        "stale" => Ok(EpochChoice::Stale),
        "seen" => Ok(EpochChoice::Seen),
        number => number.parse().map(EpochChoice::Guess).map_err(|_| {
            format!("unknown epoch `{value}`: write own, stale, seen or a number, e.g. `epoch 3`")
        }),
    }
}

fn invalid_of(value: &str) -> Result<InvalidInput, String> {
    INVALID_INPUTS
        .into_iter()
        .find(|bad| invalid_word(*bad) == value)
        .ok_or_else(|| {
            let names: Vec<&str> = INVALID_INPUTS.into_iter().map(invalid_word).collect();
            format!(
                "unknown invalid input `{value}`: write one of {}",
                names.join(", ")
            )
        })
}
