//! The wire shapes of history format v2 (specs/HISTORY.md) and their conversion to and from
//! the in-memory records.
//!
//! Reading is two-stage: serde checks shapes and types (with field paths), then the
//! conversions here check what serde cannot (an acquire that says `acquired: true` must
//! carry its epoch). Primitive fields go through the helpers below rather than serde's own
//! impls so that messages read "expected an integer, got \"x\"".

use crate::history::{Isolation, NemesisEffect, NemesisRecord, OpRecord, OpResult};
use crate::history::{TxnEnd, TxnRecord};
use crate::spec::{Op, Outcome, Row};
use crate::time::{Interval, Span, Ts};
use serde::de::{self, DeserializeOwned, Deserializer, MapAccess, Visitor};
use serde::{Deserialize, Serialize, Serializer};
use serde_json::Value;
use std::collections::BTreeMap;
use std::fmt;
use std::marker::PhantomData;

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
}

pub(super) const LINE_TYPES: [(&str, LineType); 3] = [
    ("op", LineType::Op),
    ("txn", LineType::Txn),
    ("nemesis", LineType::Nemesis),
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

// ---- op lines -------------------------------------------------------------------------------

/// An op line whose `args` are `A` and whose ok-result body is `K` (both depend on `call`).
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct OpLine<A, K> {
    #[serde(rename = "type", deserialize_with = "text")]
    kind: String,
    #[serde(deserialize_with = "int")]
    id: u64,
    #[serde(deserialize_with = "int")]
    process: u32,
    #[serde(default, deserialize_with = "opt_int")]
    txn: Option<u64>,
    #[serde(deserialize_with = "text")]
    call: String,
    args: A,
    #[serde(deserialize_with = "int")]
    invoke_ns: u64,
    #[serde(deserialize_with = "int")]
    complete_ns: u64,
    #[serde(deserialize_with = "present")]
    server: Option<SpanWire>,
    result: ResultWire<K>,
}

#[derive(Serialize)]
#[serde(rename_all = "lowercase")]
enum ResultWire<K> {
    Ok(K),
    Fail(FailWire),
    Unknown(UnknownWire),
}

#[derive(Clone, Copy)]
enum ResultKind {
    Ok,
    Fail,
    Unknown,
}

const RESULT_KINDS: [(&str, ResultKind); 3] = [
    ("ok", ResultKind::Ok),
    ("fail", ResultKind::Fail),
    ("unknown", ResultKind::Unknown),
];

impl<'de, K: Deserialize<'de>> Deserialize<'de> for ResultWire<K> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(ResultVisitor(PhantomData))
    }
}

/// Reads `{"ok": ..}`, `{"fail": ..}` or `{"unknown": ..}` by hand: serde's derived enums
/// report an extra key as "expected value", which does not say what is wrong.
struct ResultVisitor<K>(PhantomData<K>);

impl<'de, K: Deserialize<'de>> Visitor<'de> for ResultVisitor<K> {
    type Value = ResultWire<K>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an object with one key: \"ok\", \"fail\" or \"unknown\"")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let result = match one_key(&mut map, &RESULT_KINDS)? {
            ResultKind::Ok => ResultWire::Ok(map.next_value()?),
            ResultKind::Fail => ResultWire::Fail(map.next_value()?),
            ResultKind::Unknown => ResultWire::Unknown(map.next_value()?),
        };
        no_second_key(&mut map)?;
        Ok(result)
    }
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

#[derive(Serialize, Deserialize)]
#[serde(
    deny_unknown_fields,
    expecting = "an object {\"sqlstate\", \"message\"}"
)]
struct FailWire {
    #[serde(deserialize_with = "text")]
    sqlstate: String,
    #[serde(deserialize_with = "text")]
    message: String,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields, expecting = "an object {\"reason\"}")]
struct UnknownWire {
    #[serde(deserialize_with = "text")]
    reason: String,
}

/// The `args` of one call.
pub(super) trait ArgsWire: DeserializeOwned {
    fn into_op(self) -> Op<String, String>;
}

/// The body of an ok-result of one call.
pub(super) trait OkWire: DeserializeOwned {
    fn into_outcome(self) -> Result<Outcome<String>, FieldError>;
}

#[derive(Serialize, Deserialize)]
#[serde(
    deny_unknown_fields,
    expecting = "an object {\"key\", \"owner\", \"ttl\", \"wait\"}"
)]
pub(super) struct AcquireArgs {
    #[serde(deserialize_with = "opt_text")]
    key: Option<String>,
    #[serde(deserialize_with = "opt_text")]
    owner: Option<String>,
    #[serde(deserialize_with = "present")]
    ttl: Option<IntervalWire>,
    #[serde(deserialize_with = "present")]
    wait: Option<IntervalWire>,
}

impl ArgsWire for AcquireArgs {
    fn into_op(self) -> Op<String, String> {
        Op::Acquire {
            key: self.key,
            owner: self.owner,
            ttl: self.ttl.map(|i| i.0),
            wait: self.wait.map(|i| i.0),
        }
    }
}

#[derive(Serialize, Deserialize)]
#[serde(
    deny_unknown_fields,
    expecting = "an object {\"key\", \"owner\", \"epoch\", \"ttl\"}"
)]
pub(super) struct RenewArgs {
    #[serde(deserialize_with = "opt_text")]
    key: Option<String>,
    #[serde(deserialize_with = "opt_text")]
    owner: Option<String>,
    #[serde(deserialize_with = "opt_int")]
    epoch: Option<i64>,
    #[serde(deserialize_with = "present")]
    ttl: Option<IntervalWire>,
}

impl ArgsWire for RenewArgs {
    fn into_op(self) -> Op<String, String> {
        Op::Renew {
            key: self.key,
            owner: self.owner,
            epoch: self.epoch,
            ttl: self.ttl.map(|i| i.0),
        }
    }
}

#[derive(Serialize, Deserialize)]
#[serde(
    deny_unknown_fields,
    expecting = "an object {\"key\", \"owner\", \"epoch\"}"
)]
pub(super) struct ReleaseArgs {
    #[serde(deserialize_with = "opt_text")]
    key: Option<String>,
    #[serde(deserialize_with = "opt_text")]
    owner: Option<String>,
    #[serde(deserialize_with = "opt_int")]
    epoch: Option<i64>,
}

impl ArgsWire for ReleaseArgs {
    fn into_op(self) -> Op<String, String> {
        Op::Release {
            key: self.key,
            owner: self.owner,
            epoch: self.epoch,
        }
    }
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields, expecting = "an object {\"key\"}")]
pub(super) struct KeyArgs {
    #[serde(deserialize_with = "opt_text")]
    key: Option<String>,
}

impl ArgsWire for KeyArgs {
    fn into_op(self) -> Op<String, String> {
        Op::Inspect { key: self.key }
    }
}

#[derive(Serialize, Deserialize)]
#[serde(
    deny_unknown_fields,
    expecting = "an object {\"acquired\", \"epoch\", \"expires_at\"}"
)]
pub(super) struct AcquireOk {
    #[serde(deserialize_with = "boolean")]
    acquired: bool,
    #[serde(
        default,
        deserialize_with = "opt_int",
        skip_serializing_if = "Option::is_none"
    )]
    epoch: Option<i64>,
    #[serde(
        default,
        deserialize_with = "opt_int",
        skip_serializing_if = "Option::is_none"
    )]
    expires_at: Option<i64>,
}

impl OkWire for AcquireOk {
    fn into_outcome(self) -> Result<Outcome<String>, FieldError> {
        match (self.acquired, self.epoch, self.expires_at) {
            (true, Some(epoch), Some(t)) => Ok(Outcome::Acquired {
                epoch,
                expires_at: Ts(t),
            }),
            (true, None, _) => Err(missing_when("result.ok.epoch", "acquired is true")),
            (true, _, None) => Err(missing_when("result.ok.expires_at", "acquired is true")),
            (false, None, None) => Ok(Outcome::Denied),
            (false, Some(_), _) => Err(null_when("result.ok.epoch", "acquired is false")),
            (false, _, Some(_)) => Err(null_when("result.ok.expires_at", "acquired is false")),
        }
    }
}

fn missing_when(field: &str, condition: &str) -> FieldError {
    FieldError::new(field, format!("required when {condition}"))
}

fn null_when(field: &str, condition: &str) -> FieldError {
    FieldError::new(field, format!("must be absent or null when {condition}"))
}

#[derive(Serialize, Deserialize)]
#[serde(
    deny_unknown_fields,
    expecting = "an object {\"status\", \"expires_at\"}"
)]
pub(super) struct RenewOk {
    #[serde(deserialize_with = "status")]
    status: Status,
    #[serde(
        default,
        deserialize_with = "opt_int",
        skip_serializing_if = "Option::is_none"
    )]
    expires_at: Option<i64>,
}

impl OkWire for RenewOk {
    fn into_outcome(self) -> Result<Outcome<String>, FieldError> {
        match (self.status, self.expires_at) {
            (Status::Ok, Some(t)) => Ok(Outcome::Renewed { expires_at: Ts(t) }),
            (Status::Ok, None) => Err(missing_when("result.ok.expires_at", "status is ok")),
            (other, None) => Ok(status_outcome(other)),
            (_, Some(_)) => Err(null_when("result.ok.expires_at", "status is not ok")),
        }
    }
}

fn status_outcome(status: Status) -> Outcome<String> {
    match status {
        Status::Ok => Outcome::Released,
        Status::NotOwner => Outcome::NotOwner,
        Status::Lapsed => Outcome::Lapsed,
        Status::EpochMismatch => Outcome::EpochMismatch,
    }
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields, expecting = "an object {\"status\"}")]
pub(super) struct ReleaseOk {
    #[serde(deserialize_with = "status")]
    status: Status,
}

impl OkWire for ReleaseOk {
    fn into_outcome(self) -> Result<Outcome<String>, FieldError> {
        Ok(status_outcome(self.status))
    }
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields, expecting = "an object {\"row\"}")]
pub(super) struct InspectOk {
    #[serde(deserialize_with = "present")]
    row: Option<RowWire>,
}

#[derive(Serialize, Deserialize)]
#[serde(
    deny_unknown_fields,
    expecting = "an object {\"held\", \"owner\", \"epoch\", \"expires_at\"}"
)]
struct RowWire {
    #[serde(deserialize_with = "boolean")]
    held: bool,
    #[serde(deserialize_with = "opt_text")]
    owner: Option<String>,
    #[serde(deserialize_with = "int")]
    epoch: i64,
    #[serde(deserialize_with = "opt_int")]
    expires_at: Option<i64>,
}

impl OkWire for InspectOk {
    fn into_outcome(self) -> Result<Outcome<String>, FieldError> {
        Ok(Outcome::Inspected(self.row.map(|r| Row {
            held: r.held,
            owner: r.owner,
            epoch: r.epoch,
            expires_at: r.expires_at.map(Ts),
        })))
    }
}

impl<A: ArgsWire, K: OkWire> OpLine<A, K> {
    pub(super) fn into_record(self) -> Result<OpRecord, FieldError> {
        let result = match self.result {
            ResultWire::Ok(body) => OpResult::Ok(body.into_outcome()?),
            ResultWire::Fail(f) => OpResult::Fail {
                sqlstate: f.sqlstate,
                message: f.message,
            },
            ResultWire::Unknown(u) => OpResult::Unknown { reason: u.reason },
        };
        Ok(OpRecord {
            id: self.id,
            process: self.process,
            txn: self.txn,
            call: self.args.into_op(),
            invoke: self.invoke_ns,
            complete: self.complete_ns,
            server: opt_span(self.server, "server")?,
            result,
        })
    }
}

/// The `args` of any op, for writing (the writer writes whatever it is given, an
/// [`Op::Expire`] included; the reader rejects what the format does not allow).
#[derive(Serialize)]
#[serde(untagged)]
enum AnyArgs {
    Acquire(AcquireArgs),
    Renew(RenewArgs),
    Release(ReleaseArgs),
    Key(KeyArgs),
}

/// The ok-result body of any outcome, for writing. Outcomes that are never ok-results are
/// written as `{"outcome": name}`, which the reader rejects.
#[derive(Serialize)]
#[serde(untagged)]
enum AnyOk {
    Acquire(AcquireOk),
    Renew(RenewOk),
    Release(ReleaseOk),
    Inspect(InspectOk),
    Other { outcome: &'static str },
}

fn wire_interval(i: Option<Interval>) -> Option<IntervalWire> {
    i.map(IntervalWire)
}

fn any_args(op: &Op<String, String>) -> (&'static str, AnyArgs) {
    match op.clone() {
        Op::Acquire {
            key,
            owner,
            ttl,
            wait,
        } => (
            "acquire",
            AnyArgs::Acquire(AcquireArgs {
                key,
                owner,
                ttl: wire_interval(ttl),
                wait: wire_interval(wait),
            }),
        ),
        Op::Renew {
            key,
            owner,
            epoch,
            ttl,
        } => (
            "renew",
            AnyArgs::Renew(RenewArgs {
                key,
                owner,
                epoch,
                ttl: wire_interval(ttl),
            }),
        ),
        Op::Release { key, owner, epoch } => (
            "release",
            AnyArgs::Release(ReleaseArgs { key, owner, epoch }),
        ),
        Op::Inspect { key } => ("inspect", AnyArgs::Key(KeyArgs { key })),
        Op::Expire { key } => ("expire", AnyArgs::Key(KeyArgs { key: Some(key) })),
    }
}

fn any_ok(outcome: &Outcome<String>) -> AnyOk {
    let status = |status| AnyOk::Release(ReleaseOk { status });
    match outcome.clone() {
        Outcome::Acquired { epoch, expires_at } => AnyOk::Acquire(AcquireOk {
            acquired: true,
            epoch: Some(epoch),
            expires_at: Some(expires_at.0),
        }),
        Outcome::Denied => AnyOk::Acquire(AcquireOk {
            acquired: false,
            epoch: None,
            expires_at: None,
        }),
        Outcome::Renewed { expires_at } => AnyOk::Renew(RenewOk {
            status: Status::Ok,
            expires_at: Some(expires_at.0),
        }),
        Outcome::Released => status(Status::Ok),
        Outcome::NotOwner => status(Status::NotOwner),
        Outcome::Lapsed => status(Status::Lapsed),
        Outcome::EpochMismatch => status(Status::EpochMismatch),
        Outcome::Inspected(row) => AnyOk::Inspect(InspectOk {
            row: row.map(|r| RowWire {
                held: r.held,
                owner: r.owner,
                epoch: r.epoch,
                expires_at: r.expires_at.map(|t| t.0),
            }),
        }),
        Outcome::InvalidInput => AnyOk::Other {
            outcome: "invalid_input",
        },
        Outcome::Timeout => AnyOk::Other { outcome: "timeout" },
        Outcome::Injected => AnyOk::Other {
            outcome: "injected",
        },
        Outcome::Failed => AnyOk::Other { outcome: "failed" },
        Outcome::Unknown => AnyOk::Other { outcome: "unknown" },
    }
}

/// The wire line of `op`.
pub(super) fn op_line(op: &OpRecord) -> impl Serialize {
    let (call, args) = any_args(&op.call);
    let result = match &op.result {
        OpResult::Ok(o) => ResultWire::Ok(any_ok(o)),
        OpResult::Fail { sqlstate, message } => ResultWire::Fail(FailWire {
            sqlstate: sqlstate.clone(),
            message: message.clone(),
        }),
        OpResult::Unknown { reason } => ResultWire::Unknown(UnknownWire {
            reason: reason.clone(),
        }),
    };
    OpLine {
        kind: "op".to_string(),
        id: op.id,
        process: op.process,
        txn: op.txn,
        call: call.to_string(),
        args,
        invoke_ns: op.invoke,
        complete_ns: op.complete,
        server: op.server.map(SpanWire::of),
        result,
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

/// Reads `"none"`, `{"restart": ..}` or `{"lapse": ..}` (see [`ResultVisitor`]).
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
