//! Op lines: `args` and the ok-result body depend on `call`, so the line type is generic
//! over both and the reader picks them from `call` before deserializing.

use super::{
    boolean, int, no_second_key, one_key, opt_int, opt_span, opt_text, present, status, text,
    FieldError, IntervalWire, SpanWire, Status,
};
use crate::history::{OpRecord, OpResult};
use crate::spec::{Op, Outcome, Row};
use crate::time::{Interval, Ts};
use serde::de::{DeserializeOwned, Deserializer, MapAccess, Visitor};
use serde::{Deserialize, Serialize};
use std::fmt;
use std::marker::PhantomData;

/// An op line whose `args` are `A` and whose ok-result body is `K` (both depend on `call`).
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct OpLine<A, K> {
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
pub(crate) trait ArgsWire: DeserializeOwned {
    fn into_op(self) -> Op<String, String>;
}

/// The body of an ok-result of one call.
pub(crate) trait OkWire: DeserializeOwned {
    fn into_outcome(self) -> Result<Outcome<String>, FieldError>;
}

#[derive(Serialize, Deserialize)]
#[serde(
    deny_unknown_fields,
    expecting = "an object {\"key\", \"owner\", \"ttl\", \"wait\"}"
)]
pub(crate) struct AcquireArgs {
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
pub(crate) struct RenewArgs {
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
pub(crate) struct ReleaseArgs {
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
pub(crate) struct KeyArgs {
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
pub(crate) struct AcquireOk {
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
pub(crate) struct RenewOk {
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
pub(crate) struct ReleaseOk {
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
pub(crate) struct InspectOk {
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
    pub(crate) fn into_record(self) -> Result<OpRecord, FieldError> {
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
        Outcome::NotInjected => AnyOk::Other {
            outcome: "not_injected",
        },
        Outcome::Failed => AnyOk::Other { outcome: "failed" },
        Outcome::Unknown => AnyOk::Other { outcome: "unknown" },
    }
}

/// The wire line of `op`.
pub(crate) fn op_line(op: &OpRecord) -> impl Serialize {
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
