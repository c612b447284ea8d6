//! Turning the deepest point of a failed search into a [`Violation`] a person can follow:
//! the longest linearizable prefix, the state after it, the op that could not be placed
//! next, and why.

use super::fire::{resolve, Scopes};
use super::intern::{Ctx, Sym, Symbols};
use super::partition::{EntryKind, Partition};
use super::search::{txn_ended, Deepest};
use super::state::{apply, PState, Reject};
use super::{Budget, FoundBy, Meter, Step, Violation};
use crate::history::{History, OpRecord, OpResult};
use crate::invariant::Invariant;
use crate::spec::{KeyState, Op, Outcome, Row};
use crate::time::{Interval, Span, Ts, Window};
use std::fmt::Write;

/// How many placed entries of the prefix the explanation lists (the last ones).
const PREFIX_SHOWN: usize = 12;

pub(crate) fn violation(cx: Ctx<'_>, d: &Deepest, budget: Budget) -> Violation {
    let (history, part) = (cx.history, cx.part);
    let symbols = &cx.prepared.symbols;
    let base = time_base(history);
    let bits = &d.bits;
    let blocking_ret = part.entries[d.blocking].ret;
    // Entries that could have been placed next: not placed, started before the blocking
    // entry returned.
    let candidates: Vec<usize> = (0..part.entries.len())
        .filter(|i| !bits.get(*i))
        .filter(|i| blocking_ret.is_none_or(|r| part.entries[*i].call <= r))
        .collect();
    let mut rejected: Vec<(usize, Reject)> = Vec::new();
    // (past the budget, explain from the states before any pending op fired)
    let scopes = Scopes::of(cx);
    let mut meter = Meter::new(budget);
    for &i in candidates
        .iter()
        .filter(|i| !part.entries[**i].is_open_ended())
    {
        // (past the budget, explain from the states before any pending op fired)
        let states = resolve(cx, &scopes, &d.states, scopes.before(i), &mut meter)
            .unwrap_or_else(|_| d.states.clone());
        let ended = txn_ended(history, part, bits, i);
        let mut first = None;
        let mut placeable = false;
        for s in &states {
            match apply(cx, i, s, ended, true) {
                Ok(_) => placeable = true,
                Err(r) => {
                    first.get_or_insert(r);
                }
            }
        }
        if let (false, Some(r)) = (placeable, first) {
            rejected.push((i, r));
        }
    }
    let offending = rejected
        .iter()
        .position(|(i, _)| *i == d.blocking)
        .or(if rejected.is_empty() { None } else { Some(0) });
    let op_of = |i: usize| match part.entries[i].kind {
        EntryKind::Op(o) => Some(&history.ops[o]),
        _ => None,
    };
    let invariant = offending.map_or(Invariant::PrecedenceAndIsolation, |k| {
        let (i, r) = &rejected[k];
        r.invariant(op_of(*i).map(|o| &o.call))
    });
    let mut ops = Vec::new();
    if let Some(k) = offending {
        if let Some(o) = op_of(rejected[k].0) {
            ops.push(o.id);
        }
    }
    for (i, _) in &rejected {
        if let Some(o) = op_of(*i) {
            if !ops.contains(&o.id) {
                ops.push(o.id);
            }
        }
    }
    if let Some(o) = op_of(d.blocking) {
        if !ops.contains(&o.id) {
            ops.push(o.id);
        }
    }
    let prefix: Vec<Step> = d
        .placed
        .iter()
        .map(|i| step_of(history, part, *i))
        .collect();

    let mut text = String::new();
    let keys = if part.keys.is_empty() {
        "calls naming no key".to_string()
    } else {
        format!("key {}", quoted_list(&part.keys))
    };
    let _ = writeln!(
        text,
        "{keys}: no linearization explains the history ({} entries).",
        part.entries.len()
    );
    let _ = writeln!(
        text,
        "Longest linearizable prefix: {} of {} entries.",
        d.placed.len(),
        part.entries.len()
    );
    let skip = d.placed.len().saturating_sub(PREFIX_SHOWN);
    if skip > 0 {
        let _ = writeln!(text, "  ... {skip} earlier entries");
    }
    for i in &d.placed[skip..] {
        let _ = writeln!(text, "  {}", describe_entry(history, part, *i, base));
    }
    let _ = writeln!(text, "After it, the state is one of:");
    for s in d.states.iter().take(4) {
        let _ = writeln!(text, "  {}", describe_state(s, base, symbols));
    }
    if d.states.len() > 4 {
        let _ = writeln!(text, "  ... and {} more", d.states.len() - 4);
    }
    match offending {
        Some(k) => {
            let (i, r) = &rejected[k];
            let _ = writeln!(
                text,
                "Next, {} cannot take effect:\n  {}\n  because {}",
                describe_entry(history, part, *i, base),
                invariant_line(invariant),
                describe_reject(r, base, symbols)
            );
            if matches!(r, Reject::Spec(_)) {
                if let Some(line) = allowed_line(cx, *i, &d.states, base) {
                    let _ = writeln!(text, "  {line}");
                }
            }
            for (j, r) in rejected.iter().filter(|(j, _)| j != i).take(4) {
                let _ = writeln!(
                    text,
                    "Nor can {}: {}",
                    describe_entry(history, part, *j, base),
                    describe_reject(r, base, symbols)
                );
            }
        }
        None => {
            let _ = writeln!(
                text,
                "Every op that could come next can be placed, but no order of the remaining \
                 entries works; {} must have taken effect before its return at the latest.",
                describe_entry(history, part, d.blocking, base)
            );
        }
    }
    Violation {
        keys: part.keys.clone(),
        invariant,
        ops,
        prefix,
        explanation: text,
        found_by: FoundBy::Search,
        diagnosis: None,
        also_consistent_with: Vec::new(),
    }
}

pub(crate) fn invariant_line(inv: Invariant) -> String {
    format!(
        "it breaks invariant {} ({}): {}",
        inv.number(),
        inv,
        inv.statement()
    )
}

fn step_of(history: &History, part: &Partition, i: usize) -> Step {
    match part.entries[i].kind {
        EntryKind::Op(o) => Step::Op(history.ops[o].id),
        EntryKind::TxnEnd { txn, .. } => Step::TxnEnd(txn),
        EntryKind::Nemesis(n) => Step::Nemesis(history.nemeses[n].id),
    }
}

/// The earliest server instant of the history: times are shown relative to it.
pub(crate) fn time_base(history: &History) -> Ts {
    history
        .ops
        .iter()
        .filter_map(|o| o.server.map(|s| s.t0()))
        .min()
        .unwrap_or(Ts(0))
}

/// A server instant as RFC 3339 UTC with its offset from `base` (the history's first
/// server instant): `2026-12-03T09:38:50.000100Z (+0.000100s)`; `-inf`/`+inf` for a bound
/// the checker does not know.
pub(crate) fn fmt_ts(t: Ts, base: Ts) -> String {
    if t <= super::partition::FAR_PAST {
        return "-inf".to_string();
    }
    if t >= super::partition::FAR_FUTURE {
        return "+inf".to_string();
    }
    let d = t.0.saturating_sub(base.0);
    let sign = if d < 0 { "-" } else { "+" };
    let a = d.unsigned_abs();
    format!(
        "{} ({sign}{}.{:06}s)",
        t.rfc3339(),
        a / 1_000_000,
        a % 1_000_000
    )
}

/// An expiry: as [`fmt_ts`], and "never" for an unbounded one.
pub(crate) fn fmt_expiry(t: Ts, base: Ts) -> String {
    if t >= super::partition::FAR_FUTURE {
        return "never".to_string();
    }
    fmt_ts(t, base)
}

fn fmt_span(s: Span, base: Ts) -> String {
    format!("[{}, {}]", fmt_ts(s.t0(), base), fmt_ts(s.t1(), base))
}

fn fmt_interval(i: &Option<Interval>) -> String {
    match i {
        None => "NULL".to_string(),
        Some(i) if i.months == 0 && i.days == 0 => {
            format!("{}ms", i.micros as f64 / 1000.0)
        }
        Some(i) => format!("{} mons {} days {}us", i.months, i.days, i.micros),
    }
}

/// Texts longer than this are cut in explanations (hostile keys can be kilobytes).
const TEXT_SHOWN: usize = 40;

fn fmt_text(t: &Option<String>) -> String {
    match t {
        None => "NULL".to_string(),
        Some(s) if s.chars().count() > TEXT_SHOWN => {
            let head: String = s.chars().take(TEXT_SHOWN - 8).collect();
            format!("{head:?}…({} chars)", s.chars().count())
        }
        Some(s) => format!("{s:?}"),
    }
}

fn fmt_epoch(e: &Option<i64>) -> String {
    e.map_or("NULL".to_string(), |e| e.to_string())
}

/// A call as a person reads it: `acquire("k", "a", ttl 30000ms, wait 0ms)` (long texts cut,
/// with their length). The one rendering of a call, used by explanations and step logs.
pub fn describe_call(op: &Op<String, String>) -> String {
    match op {
        Op::Acquire {
            key,
            owner,
            ttl,
            wait,
        } => format!(
            "acquire({}, {}, ttl {}, wait {})",
            fmt_text(key),
            fmt_text(owner),
            fmt_interval(ttl),
            fmt_interval(wait)
        ),
        Op::Renew {
            key,
            owner,
            epoch,
            ttl,
        } => format!(
            "renew({}, {}, epoch {}, ttl {})",
            fmt_text(key),
            fmt_text(owner),
            fmt_epoch(epoch),
            fmt_interval(ttl)
        ),
        Op::Release { key, owner, epoch } => format!(
            "release({}, {}, epoch {})",
            fmt_text(key),
            fmt_text(owner),
            fmt_epoch(epoch)
        ),
        Op::Inspect { key } => format!("inspect({})", fmt_text(key)),
        Op::Expire { key } => format!("lapse({})", fmt_text(&Some(key.clone()))),
    }
}

/// `acquired epoch 3 until +1.5s`, `fail 22023 (...)`, `unknown (connection closed)`.
pub(crate) fn describe_result(r: &OpResult, base: Ts) -> String {
    match r {
        OpResult::Ok(o) => describe_outcome(o, base),
        OpResult::Fail { sqlstate, message } => format!("fail {sqlstate} ({message})"),
        OpResult::Unknown { reason } => format!("unknown ({reason})"),
    }
}

fn describe_outcome(o: &Outcome<String>, base: Ts) -> String {
    match o {
        Outcome::Acquired { epoch, expires_at } => {
            format!(
                "acquired epoch {epoch} until {}",
                fmt_expiry(*expires_at, base)
            )
        }
        Outcome::Denied => "denied".to_string(),
        Outcome::Timeout => "wait exhausted".to_string(),
        Outcome::Renewed { expires_at } => format!("ok until {}", fmt_expiry(*expires_at, base)),
        Outcome::Released => "ok".to_string(),
        Outcome::NotOwner => "not_owner".to_string(),
        Outcome::Lapsed => "lapsed".to_string(),
        Outcome::EpochMismatch => "epoch_mismatch".to_string(),
        Outcome::Inspected(None) => "no row".to_string(),
        Outcome::Inspected(Some(Row {
            held,
            owner,
            epoch,
            expires_at,
        })) => match (held, owner, expires_at) {
            (true, Some(o), Some(e)) => {
                format!("held by {o:?} epoch {epoch} until {}", fmt_expiry(*e, base))
            }
            (false, None, None) => format!("not held, epoch {epoch}"),
            // anything else exactly as recorded (an inconsistent row is a finding)
            _ => format!(
                "row {{held: {held}, owner: {}, epoch: {epoch}, expires_at: {}}}",
                fmt_text(owner),
                expires_at.map_or("NULL".to_string(), |e| fmt_expiry(e, base))
            ),
        },
        Outcome::InvalidInput => "invalid input".to_string(),
        Outcome::Injected => "applied".to_string(),
        Outcome::NotInjected => "found no live lease".to_string(),
        Outcome::Failed => "failed".to_string(),
        Outcome::Unknown => "unknown".to_string(),
    }
}

pub(crate) fn describe_op(op: &OpRecord, window: Span, base: Ts) -> String {
    let txn = op.txn.map(|t| format!(", txn {t}")).unwrap_or_default();
    format!(
        "op {} (process {}{txn}): {} -> {}; real time [{}, {}] ns, server window {}",
        op.id,
        op.process,
        describe_call(&op.call),
        describe_result(&op.result, base),
        op.invoke,
        op.complete,
        fmt_span(window, base)
    )
}

pub(crate) fn describe_entry(history: &History, part: &Partition, i: usize, base: Ts) -> String {
    let e = &part.entries[i];
    match e.kind {
        EntryKind::Op(o) => describe_op(&history.ops[o], e.window, base),
        EntryKind::TxnEnd { txn, end } => format!(
            "end of transaction {txn} ({end:?}) at real time {} ns",
            e.call
        ),
        EntryKind::Nemesis(n) => {
            let r = &history.nemeses[n];
            format!(
                "nemesis {} ({}: {:?}) real time [{}, {}] ns, server window {}",
                r.id,
                r.fault,
                r.effect,
                r.start,
                r.end,
                fmt_span(e.window, base)
            )
        }
    }
}

fn describe_reject(r: &Reject, base: Ts, symbols: &Symbols) -> String {
    match r {
        // (the spec's own detail speaks in interned ids and raw microseconds: the states
        // are listed above in the user's terms)
        Reject::Spec(m) => format!(
            "in no state listed above, at no instant of its server window, does the spec \
             allow what it observed; that contradicts {}",
            m.invariant
        ),
        Reject::Locked { txn, key } => format!(
            "it writes key {:?}, which open transaction {txn} has row-locked",
            symbols.name(*key)
        ),
        Reject::TooEarly { at, floor } => format!(
            "its observation places it at {}, before {}, the commit of a write to the key \
             placed before it",
            fmt_ts(*at, base),
            fmt_ts(*floor, base)
        ),
    }
}

/// What the spec allows an autocommit op `i` in the listed states (its expiries as the
/// windows its own window allows), or `None` for an op in a transaction (its own pending
/// writes would count too) or when nothing is listed.
fn allowed_line(cx: Ctx<'_>, i: usize, states: &[PState], base: Ts) -> Option<String> {
    let entry = &cx.part.entries[i];
    let EntryKind::Op(o) = entry.kind else {
        return None;
    };
    if entry.txn.is_some() {
        return None;
    }
    let op = &cx.prepared.ops[o].0;
    let mut allowed: Vec<String> = Vec::new();
    for s in states.iter().take(4) {
        for e in cx.spec.allowed(&s.committed, op, entry.window) {
            let text = describe_expected(&e, base, &cx.prepared.symbols);
            if !allowed.contains(&text) {
                allowed.push(text);
            }
        }
    }
    (!allowed.is_empty()).then(|| format!("the spec allows there: {}", allowed.join("; or ")))
}

fn fmt_expiry_window(w: &Window, base: Ts) -> String {
    match w.as_exact() {
        Some(t) => fmt_expiry(t, base),
        None => format!(
            "some instant in [{}, {}]",
            fmt_expiry(w.lo, base),
            fmt_expiry(w.hi, base)
        ),
    }
}

/// An outcome the spec allows, in the terms of [`describe_outcome`].
fn describe_expected(e: &Outcome<Sym, Window>, base: Ts, symbols: &Symbols) -> String {
    match e {
        Outcome::Acquired { epoch, expires_at } => format!(
            "acquired epoch {epoch} until {}",
            fmt_expiry_window(expires_at, base)
        ),
        Outcome::Renewed { expires_at } => {
            format!("ok until {}", fmt_expiry_window(expires_at, base))
        }
        Outcome::Inspected(Some(Row {
            held: true,
            owner: Some(o),
            epoch,
            expires_at: Some(w),
        })) => format!(
            "held by {:?} epoch {epoch} until {}",
            symbols.name(*o),
            fmt_expiry_window(w, base)
        ),
        Outcome::Inspected(Some(Row { epoch, .. })) => format!("not held, epoch {epoch}"),
        Outcome::Inspected(None) => "no row".to_string(),
        Outcome::Denied => "denied".to_string(),
        Outcome::Timeout => "wait exhausted".to_string(),
        Outcome::Released => "ok".to_string(),
        Outcome::NotOwner => "not_owner".to_string(),
        Outcome::Lapsed => "lapsed".to_string(),
        Outcome::EpochMismatch => "epoch_mismatch".to_string(),
        Outcome::InvalidInput => "invalid input".to_string(),
        Outcome::Injected => "applied".to_string(),
        Outcome::NotInjected => "found no live lease".to_string(),
        Outcome::Failed => "failed".to_string(),
        Outcome::Unknown => "unknown".to_string(),
    }
}

fn describe_state(s: &PState, base: Ts, symbols: &Symbols) -> String {
    let key_state = |k: &Sym, st: &KeyState<Sym>| {
        format!(
            "{:?} {}",
            symbols.name(*k),
            describe_key_state(st, base, symbols)
        )
    };
    let mut parts: Vec<String> = s.committed.rows().map(|(k, st)| key_state(k, st)).collect();
    if parts.is_empty() {
        parts.push("no key ever leased".to_string());
    }
    for (t, p) in &s.open {
        let keys: Vec<String> = p.writes.iter().map(|(k, st)| key_state(k, st)).collect();
        parts.push(format!("transaction {t} pending: {}", keys.join(", ")));
    }
    if !s.pending.is_empty() {
        parts.push(format!(
            "{} unknown op(s) may still take effect",
            s.pending.len()
        ));
    }
    parts.join("; ")
}

fn describe_key_state(st: &KeyState<Sym>, base: Ts, symbols: &Symbols) -> String {
    match st {
        KeyState::NeverLeased => "never leased".to_string(),
        KeyState::Free { epoch } => format!("FREE, epoch {epoch}"),
        KeyState::Held {
            owner,
            epoch,
            expires,
        } => {
            let owner = symbols.name(*owner);
            format!(
                "HELD by {owner:?}, epoch {epoch}, until {}",
                fmt_expiry_window(expires, base)
            )
        }
    }
}

/// Keys quoted, each cut as [`fmt_text`] cuts it.
pub(crate) fn quoted_list(keys: &[String]) -> String {
    keys.iter()
        .map(|k| fmt_text(&Some(k.clone())))
        .collect::<Vec<_>>()
        .join(", ")
}
