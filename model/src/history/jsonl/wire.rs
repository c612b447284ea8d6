//! The wire shapes of history format v2 (specs/HISTORY.md) and their conversion to and from
//! the in-memory records.
//!
//! Reading is two-stage: serde checks shapes and types (with field paths), then the
//! conversions here check what serde cannot (an acquire that says `acquired: true` must
//! carry its epoch). Primitive fields go through the helpers below rather than serde's own
//! impls so that messages read "expected an integer, got \"x\"".

mod op;

pub(super) use op::{
    op_line, AcquireArgs, AcquireOk, ArgsWire, InspectOk, KeyArgs, OkWire, OpLine, ReleaseArgs,
    ReleaseOk, RenewArgs, RenewOk,
};

use crate::history::{Isolation, NemesisEffect, NemesisRecord, TxnEnd, TxnRecord};
use crate::time::{Interval, Span, Ts};
use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde::{Deserialize, Serialize, Serializer};
use serde_json::Value;
use std::collections::BTreeMap;
use std::fmt;

/// A problem with one field of a line, found after serde accepted its shape.
#[derive(Debug)]
pub(super) struct FieldError {
    pub(super) field: String,
    pub(super) message: String,
}

impl FieldError {
    pub(super) fn new(field: &str, message: impl Into<String>) -> FieldError {
        FieldError {
            field: field.to_string(),
            message: message.into(),
        }
    }
}

// ---- primitive fields -------------------------------------------------------------------

/// A JSON value as a message shows it after "got": scalars as written (long strings cut),
/// containers by kind.
pub(super) fn describe(v: &Value) -> String {
    const MAX_CHARS: usize = 40;
    match v {
        Value::String(s) if s.chars().count() > MAX_CHARS => {
            let cut: String = s.chars().take(MAX_CHARS).collect();
            format!("{}...", Value::String(cut))
        }
        Value::Array(_) => "an array".to_string(),
        Value::Object(_) => "an object".to_string(),
        scalar => scalar.to_string(),
    }
}

/// An integer type of the wire, and how messages name its range.
pub(super) trait WireInt: TryFrom<i128> {
    const EXPECTED: &'static str;
}

impl WireInt for u64 {
    const EXPECTED: &'static str = "a non-negative integer";
}

impl WireInt for u32 {
    const EXPECTED: &'static str = "a non-negative integer below 2^32";
}

impl WireInt for i64 {
    const EXPECTED: &'static str = "an integer";
}

impl WireInt for i32 {
    const EXPECTED: &'static str = "an integer from -2^31 to 2^31-1";
}

pub(super) fn as_int<T: WireInt>(v: &Value) -> Result<T, String> {
    let wide = match v {
        Value::Number(n) => n
            .as_i64()
            .map(i128::from)
            .or_else(|| n.as_u64().map(i128::from)),
        _ => None,
    };
    wide.and_then(|w| T::try_from(w).ok())
        .ok_or_else(|| format!("expected {}, got {}", T::EXPECTED, describe(v)))
}

fn as_text(v: &Value) -> Result<String, String> {
    match v {
        Value::String(s) => Ok(s.clone()),
        other => Err(format!("expected a string, got {}", describe(other))),
    }
}

fn as_bool(v: &Value) -> Result<bool, String> {
    match v {
        Value::Bool(b) => Ok(*b),
        other => Err(format!("expected true or false, got {}", describe(other))),
    }
}

fn nullable<T>(v: &Value, convert: fn(&Value) -> Result<T, String>) -> Result<Option<T>, String> {
    match v {
        Value::Null => Ok(None),
        other => convert(other).map(Some),
    }
}

/// The value of keyword `v` in `table`, or a message listing the keywords.
pub(super) fn as_keyword<T: Copy>(v: &Value, table: &[(&str, T)]) -> Result<T, String> {
    let found = v
        .as_str()
        .and_then(|s| table.iter().find(|(name, _)| *name == s));
    found.map(|(_, t)| *t).ok_or_else(|| {
        let names: Vec<String> = table.iter().map(|(n, _)| format!("\"{n}\"")).collect();
        format!("expected one of {}, got {}", names.join(", "), describe(v))
    })
}

fn field_with<'de, D: Deserializer<'de>, T>(
    d: D,
    convert: impl FnOnce(&Value) -> Result<T, String>,
) -> Result<T, D::Error> {
    let v = Value::deserialize(d)?;
    convert(&v).map_err(de::Error::custom)
}

fn int<'de, D: Deserializer<'de>, T: WireInt>(d: D) -> Result<T, D::Error> {
    field_with(d, as_int)
}

fn opt_int<'de, D: Deserializer<'de>, T: WireInt>(d: D) -> Result<Option<T>, D::Error> {
    field_with(d, |v| nullable(v, as_int))
}

fn text<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    field_with(d, as_text)
}

fn opt_text<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    field_with(d, |v| nullable(v, as_text))
}

fn boolean<'de, D: Deserializer<'de>>(d: D) -> Result<bool, D::Error> {
    field_with(d, as_bool)
}

fn opt_bool<'de, D: Deserializer<'de>>(d: D) -> Result<Option<bool>, D::Error> {
    field_with(d, |v| nullable(v, as_bool))
}

fn object<'de, D: Deserializer<'de>>(d: D) -> Result<BTreeMap<String, Value>, D::Error> {
    field_with(d, |v| match v {
        Value::Object(m) => Ok(m.iter().map(|(k, v)| (k.clone(), v.clone())).collect()),
        other => Err(format!("expected an object, got {}", describe(other))),
    })
}

/// Deserializes an `Option` field that must be present (JSON `null` is `None`): serde
/// would otherwise take a missing `Option` field as `None`.
fn present<'de, D: Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<Option<T>, D::Error> {
    Option::<T>::deserialize(d)
}

// ---- intervals ----------------------------------------------------------------------------

/// An interval: an integer of microseconds, or `{"months", "days", "us"}`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct IntervalWire(pub(super) Interval);

#[derive(Deserialize)]
#[serde(
    deny_unknown_fields,
    expecting = "an object {\"months\", \"days\", \"us\"}"
)]
struct IntervalObject {
    #[serde(deserialize_with = "int")]
    months: i32,
    #[serde(deserialize_with = "int")]
    days: i32,
    #[serde(deserialize_with = "int")]
    us: i64,
}

impl Serialize for IntervalWire {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let i = self.0;
        if i.months == 0 && i.days == 0 {
            return s.serialize_i64(i.micros);
        }
        let mut map = s.serialize_map(Some(3))?;
        map.serialize_entry("months", &i.months)?;
        map.serialize_entry("days", &i.days)?;
        map.serialize_entry("us", &i.micros)?;
        map.end()
    }
}

struct IntervalVisitor;

const INTERVAL_EXPECTED: &str =
    "an integer of microseconds or an object {\"months\", \"days\", \"us\"}";

impl<'de> Visitor<'de> for IntervalVisitor {
    type Value = IntervalWire;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(INTERVAL_EXPECTED)
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<IntervalWire, E> {
        Ok(IntervalWire(Interval::micros(v)))
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<IntervalWire, E> {
        i64::try_from(v)
            .map(|v| IntervalWire(Interval::micros(v)))
            .map_err(|_| E::custom(format!("expected {INTERVAL_EXPECTED}, got {v}")))
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<IntervalWire, E> {
        Err(E::custom(format!("expected {INTERVAL_EXPECTED}, got {v}")))
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<IntervalWire, E> {
        let got = describe(&Value::String(v.to_string()));
        Err(E::custom(format!(
            "expected {INTERVAL_EXPECTED}, got {got}"
        )))
    }

    fn visit_bool<E: de::Error>(self, v: bool) -> Result<IntervalWire, E> {
        Err(E::custom(format!("expected {INTERVAL_EXPECTED}, got {v}")))
    }

    fn visit_seq<A: de::SeqAccess<'de>>(self, _: A) -> Result<IntervalWire, A::Error> {
        Err(de::Error::custom(format!(
            "expected {INTERVAL_EXPECTED}, got an array"
        )))
    }

    // Deserializing the object through the map access keeps the field path ("ttl.us").
    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<IntervalWire, A::Error> {
        let o = IntervalObject::deserialize(de::value::MapAccessDeserializer::new(map))?;
        Ok(IntervalWire(Interval {
            months: o.months,
            days: o.days,
            micros: o.us,
        }))
    }
}

impl<'de> Deserialize<'de> for IntervalWire {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(IntervalVisitor)
    }
}

// ---- spans and keywords ---------------------------------------------------------------------

/// A server-time window `{"t0", "t1"}` in Unix microseconds.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields, expecting = "an object {\"t0\", \"t1\"}")]
pub(super) struct SpanWire {
    #[serde(deserialize_with = "int")]
    t0: i64,
    #[serde(deserialize_with = "int")]
    t1: i64,
}

impl SpanWire {
    fn of(span: Span) -> SpanWire {
        SpanWire {
            t0: span.t0().0,
            t1: span.t1().0,
        }
    }

    fn into_span(self, field: &str) -> Result<Span, FieldError> {
        Span::new(Ts(self.t0), Ts(self.t1)).map_err(|e| FieldError::new(field, e.to_string()))
    }
}

fn opt_span(span: Option<SpanWire>, field: &str) -> Result<Option<Span>, FieldError> {
    span.map(|s| s.into_span(field)).transpose()
}

/// The `type` of a line after the header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum LineType {
    Op,
    Txn,
    Nemesis,
    Wal,
}

pub(super) const LINE_TYPES: [(&str, LineType); 4] = [
    ("op", LineType::Op),
    ("txn", LineType::Txn),
    ("nemesis", LineType::Nemesis),
    ("wal", LineType::Wal),
];

/// The `call` of an op line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum CallName {
    Acquire,
    Renew,
    Release,
    Inspect,
}

pub(super) const CALLS: [(&str, CallName); 4] = [
    ("acquire", CallName::Acquire),
    ("renew", CallName::Renew),
    ("release", CallName::Release),
    ("inspect", CallName::Inspect),
];

const ISOLATIONS: [(&str, Isolation); 3] = [
    ("read committed", Isolation::ReadCommitted),
    ("repeatable read", Isolation::RepeatableRead),
    ("serializable", Isolation::Serializable),
];

const TXN_ENDS: [(&str, TxnEnd); 3] = [
    ("commit", TxnEnd::Commit),
    ("rollback", TxnEnd::Rollback),
    ("unknown", TxnEnd::Unknown),
];

/// A renew or release status.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
enum Status {
    Ok,
    NotOwner,
    Lapsed,
    EpochMismatch,
}

const STATUSES: [(&str, Status); 4] = [
    ("ok", Status::Ok),
    ("not_owner", Status::NotOwner),
    ("lapsed", Status::Lapsed),
    ("epoch_mismatch", Status::EpochMismatch),
];

fn status<'de, D: Deserializer<'de>>(d: D) -> Result<Status, D::Error> {
    field_with(d, |v| as_keyword(v, &STATUSES))
}

fn isolation<'de, D: Deserializer<'de>>(d: D) -> Result<Isolation, D::Error> {
    field_with(d, |v| as_keyword(v, &ISOLATIONS))
}

fn ser_isolation<S: Serializer>(i: &Isolation, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(i.sql())
}

fn txn_end<'de, D: Deserializer<'de>>(d: D) -> Result<TxnEnd, D::Error> {
    field_with(d, |v| as_keyword(v, &TXN_ENDS))
}

fn ser_txn_end<S: Serializer>(end: &TxnEnd, s: S) -> Result<S::Ok, S::Error> {
    let name = TXN_ENDS
        .iter()
        .find(|(_, e)| e == end)
        .map_or("", |(n, _)| n);
    s.serialize_str(name)
}

/// The first key of an object that must have exactly one, from `table`.
fn one_key<'de, A: MapAccess<'de>, T: Copy>(
    map: &mut A,
    table: &[(&str, T)],
) -> Result<T, A::Error> {
    match map.next_key::<String>()? {
        Some(key) => as_keyword(&Value::String(key), table).map_err(de::Error::custom),
        None => {
            let names: Vec<String> = table.iter().map(|(n, _)| format!("\"{n}\"")).collect();
            Err(de::Error::custom(format!(
                "expected one key ({}), got an empty object",
                names.join(", ")
            )))
        }
    }
}

fn no_second_key<'de, A: MapAccess<'de>>(map: &mut A) -> Result<(), A::Error> {
    match map.next_key::<String>()? {
        Some(extra) => Err(de::Error::custom(format!(
            "expected one key, got a second one, {}",
            describe(&Value::String(extra))
        ))),
        None => Ok(()),
    }
}

// ---- the header -----------------------------------------------------------------------------

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct Header {
    #[serde(deserialize_with = "text")]
    pub(super) format: String,
    #[serde(deserialize_with = "int")]
    pub(super) version: u32,
    #[serde(deserialize_with = "object")]
    pub(super) meta: BTreeMap<String, Value>,
}

// ---- the wal line --------------------------------------------------------------------------

/// The decoded changes of the lease table: a [`WalLog`] with its line type.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct WalLine {
    #[serde(rename = "type", deserialize_with = "text")]
    kind: String,
    table: String,
    commits: Vec<crate::history::WalCommit>,
    unreadable: Vec<String>,
    absent: Vec<crate::history::WalWriter>,
    ended: Vec<crate::history::WalEnded>,
}

impl WalLine {
    pub(super) fn of(wal: &crate::history::WalLog) -> WalLine {
        WalLine {
            kind: "wal".into(),
            table: wal.table.clone(),
            commits: wal.commits.clone(),
            unreadable: wal.unreadable.clone(),
            absent: wal.absent.clone(),
            ended: wal.ended.clone(),
        }
    }

    pub(super) fn into_log(self) -> crate::history::WalLog {
        crate::history::WalLog {
            table: self.table,
            commits: self.commits,
            unreadable: self.unreadable,
            absent: self.absent,
            ended: self.ended,
        }
    }
}

// ---- txn lines ------------------------------------------------------------------------------

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct TxnLine {
    #[serde(rename = "type", deserialize_with = "text")]
    kind: String,
    #[serde(deserialize_with = "int")]
    id: u64,
    #[serde(deserialize_with = "int")]
    process: u32,
    #[serde(serialize_with = "ser_isolation", deserialize_with = "isolation")]
    isolation: Isolation,
    #[serde(deserialize_with = "int")]
    begin_ns: u64,
    #[serde(serialize_with = "ser_txn_end", deserialize_with = "txn_end")]
    end: TxnEnd,
    #[serde(deserialize_with = "int")]
    end_invoke_ns: u64,
    #[serde(deserialize_with = "int")]
    end_complete_ns: u64,
}

impl TxnLine {
    pub(super) fn of(t: &TxnRecord) -> TxnLine {
        TxnLine {
            kind: "txn".to_string(),
            id: t.id,
            process: t.process,
            isolation: t.isolation,
            begin_ns: t.begin,
            end: t.end,
            end_invoke_ns: t.end_invoke,
            end_complete_ns: t.end_complete,
        }
    }

    pub(super) fn into_record(self) -> TxnRecord {
        TxnRecord {
            id: self.id,
            process: self.process,
            isolation: self.isolation,
            begin: self.begin_ns,
            end: self.end,
            end_invoke: self.end_invoke_ns,
            end_complete: self.end_complete_ns,
        }
    }
}

// ---- nemesis lines --------------------------------------------------------------------------

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct NemesisLine {
    #[serde(rename = "type", deserialize_with = "text")]
    kind: String,
    #[serde(deserialize_with = "int")]
    id: u64,
    #[serde(deserialize_with = "text")]
    fault: String,
    #[serde(deserialize_with = "int")]
    start_ns: u64,
    #[serde(deserialize_with = "int")]
    end_ns: u64,
    effect: EffectWire,
    #[serde(deserialize_with = "text")]
    detail: String,
}

#[derive(Serialize)]
#[serde(rename_all = "lowercase")]
enum EffectWire {
    None,
    Restart(RestartWire),
    Lapse(LapseWire),
}

#[derive(Clone, Copy)]
enum EffectKind {
    Restart,
    Lapse,
}

const EFFECT_KINDS: [(&str, EffectKind); 2] = [
    ("restart", EffectKind::Restart),
    ("lapse", EffectKind::Lapse),
];

const EFFECT_EXPECTED: &str = "\"none\" or an object with one key: \"restart\" or \"lapse\"";

impl<'de> Deserialize<'de> for EffectWire {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(EffectVisitor)
    }
}

/// Reads `"none"`, `{"restart": ..}` or `{"lapse": ..}` by hand, for the same reason as
/// the result of an op line (`op::ResultVisitor`).
struct EffectVisitor;

impl<'de> Visitor<'de> for EffectVisitor {
    type Value = EffectWire;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(EFFECT_EXPECTED)
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<EffectWire, E> {
        if v == "none" {
            return Ok(EffectWire::None);
        }
        let got = describe(&Value::String(v.to_string()));
        Err(E::custom(format!("expected {EFFECT_EXPECTED}, got {got}")))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<EffectWire, A::Error> {
        let effect = match one_key(&mut map, &EFFECT_KINDS)? {
            EffectKind::Restart => EffectWire::Restart(map.next_value()?),
            EffectKind::Lapse => EffectWire::Lapse(map.next_value()?),
        };
        no_second_key(&mut map)?;
        Ok(effect)
    }
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields, expecting = "an object {\"clean\", \"down\"}")]
struct RestartWire {
    #[serde(deserialize_with = "boolean")]
    clean: bool,
    #[serde(deserialize_with = "present")]
    down: Option<SpanWire>,
}

#[derive(Serialize, Deserialize)]
#[serde(
    deny_unknown_fields,
    expecting = "an object {\"key\", \"server\", \"applied\"}"
)]
struct LapseWire {
    #[serde(deserialize_with = "text")]
    key: String,
    #[serde(deserialize_with = "present")]
    server: Option<SpanWire>,
    #[serde(deserialize_with = "opt_bool")]
    applied: Option<bool>,
}

impl NemesisLine {
    pub(super) fn of(n: &NemesisRecord) -> NemesisLine {
        let effect = match &n.effect {
            NemesisEffect::None => EffectWire::None,
            NemesisEffect::Restart { clean, down } => EffectWire::Restart(RestartWire {
                clean: *clean,
                down: down.map(SpanWire::of),
            }),
            NemesisEffect::Lapse {
                key,
                server,
                applied,
            } => EffectWire::Lapse(LapseWire {
                key: key.clone(),
                server: server.map(SpanWire::of),
                applied: *applied,
            }),
        };
        NemesisLine {
            kind: "nemesis".to_string(),
            id: n.id,
            fault: n.fault.clone(),
            start_ns: n.start,
            end_ns: n.end,
            effect,
            detail: n.detail.clone(),
        }
    }

    pub(super) fn into_record(self) -> Result<NemesisRecord, FieldError> {
        let effect = match self.effect {
            EffectWire::None => NemesisEffect::None,
            EffectWire::Restart(r) => NemesisEffect::Restart {
                clean: r.clean,
                down: opt_span(r.down, "effect.restart.down")?,
            },
            EffectWire::Lapse(l) => NemesisEffect::Lapse {
                key: l.key,
                server: opt_span(l.server, "effect.lapse.server")?,
                applied: l.applied,
            },
        };
        Ok(NemesisRecord {
            id: self.id,
            fault: self.fault,
            start: self.start_ns,
            end: self.end_ns,
            effect,
            detail: self.detail,
        })
    }
}
