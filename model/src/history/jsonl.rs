//! The JSON Lines encoding of history format v2 (specs/HISTORY.md).
//!
//! One JSON object per line: a header (`{"format":"leasecheck-history","version":2,
//! "meta":{..}}`), then op, txn and nemesis lines in any order. [`parse`] and [`read`] turn
//! text into a [`History`] and [`validate`] it; [`to_string`] and the streaming [`Writer`]
//! go the other way. Errors name the line and the field.

mod wire;

pub use super::{validate, RecordRef, Rule, ValidationError};
use super::{History, NemesisRecord, OpRecord, TxnRecord, WalLog, FORMAT, VERSION};
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::{Map, Value};
use std::collections::BTreeMap;
use std::fmt;
use std::io::{self, BufRead, Write};
use wire::{CallName, FieldError, LineType};

/// What is wrong with a history's text.
#[derive(Debug, thiserror::Error)]
pub enum Problem {
    /// The line is not one JSON value.
    #[error("not valid JSON: {message} (column {column})")]
    Syntax { message: String, column: usize },
    /// A field is missing, unknown, of the wrong type, or has a value the format forbids.
    #[error("{0}")]
    Field(String),
    /// The text has no header line.
    #[error("no header line: a history starts with {{\"format\":\"{FORMAT}\",\"version\":{VERSION},\"meta\":{{}}}}")]
    NoHeader,
    /// The text could not be read.
    #[error("cannot read: {0}")]
    Io(#[source] io::Error),
    /// The records break a rule of the format (specs/HISTORY.md, "Validity").
    #[error("{0}")]
    Invalid(#[source] ValidationError),
}

/// An error reading a history: the line (from 1) and, when it is about one, the field (a
/// dotted path such as `result.ok.epoch`).
#[derive(Debug, thiserror::Error)]
pub struct ParseError {
    pub line: usize,
    pub field: Option<String>,
    pub problem: Problem,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.field {
            Some(field) => write!(f, "line {}, field \"{field}\": {}", self.line, self.problem),
            None => write!(f, "line {}: {}", self.line, self.problem),
        }
    }
}

impl ParseError {
    fn field(line: usize, field: &str, message: impl Into<String>) -> ParseError {
        ParseError {
            line,
            field: Some(field.to_string()),
            problem: Problem::Field(message.into()),
        }
    }

    fn at(line: usize, e: FieldError) -> ParseError {
        ParseError::field(line, &e.field, e.message)
    }
}

/// Parses and validates a history.
pub fn parse(text: &str) -> Result<History, ParseError> {
    read(text.as_bytes())
}

/// Reads and validates a history, line by line.
pub fn read<R: BufRead>(r: R) -> Result<History, ParseError> {
    let mut reader = Reader::default();
    for (index, line) in r.lines().enumerate() {
        let number = index + 1;
        let text = line.map_err(|e| ParseError {
            line: number,
            field: None,
            problem: Problem::Io(e),
        })?;
        reader.line(number, &text)?;
    }
    reader.finish()
}

/// A history being read, with the line each record came from.
#[derive(Default)]
struct Reader {
    history: History,
    header_seen: bool,
    last_line: usize,
    op_lines: Vec<usize>,
    txn_lines: Vec<usize>,
    nemesis_lines: Vec<usize>,
    wal_line: usize,
}

impl Reader {
    fn line(&mut self, number: usize, text: &str) -> Result<(), ParseError> {
        self.last_line = number;
        if text.trim().is_empty() {
            return Ok(());
        }
        let fields = json_object(number, text)?;
        if !self.header_seen {
            self.history.meta = header(number, text, &fields)?;
            self.header_seen = true;
            return Ok(());
        }
        let kind = keyword(number, &fields, "type", &wire::LINE_TYPES)?;
        match kind {
            LineType::Op => {
                let call = keyword(number, &fields, "call", &wire::CALLS)?;
                self.history.ops.push(op_record(number, text, call)?);
                self.op_lines.push(number);
            }
            LineType::Txn => {
                let line: wire::TxnLine = typed(number, text)?;
                self.history.txns.push(line.into_record());
                self.txn_lines.push(number);
            }
            LineType::Wal => {
                if self.history.wal.is_some() {
                    let message = "a second wal line: a history has at most one";
                    return Err(ParseError::field(number, "type", message));
                }
                let line: wire::WalLine = typed(number, text)?;
                self.history.wal = Some(line.into_log());
                self.wal_line = number;
            }
            LineType::Nemesis => {
                let line: wire::NemesisLine = typed(number, text)?;
                let record = line.into_record().map_err(|e| ParseError::at(number, e))?;
                self.history.nemeses.push(record);
                self.nemesis_lines.push(number);
            }
        }
        Ok(())
    }

    fn finish(self) -> Result<History, ParseError> {
        if !self.header_seen {
            return Err(ParseError {
                line: self.last_line.max(1),
                field: None,
                problem: Problem::NoHeader,
            });
        }
        match validate(&self.history) {
            Ok(()) => Ok(self.history),
            Err(e) => {
                let (lines, index) = match e.record {
                    RecordRef::Op { index, .. } => (&self.op_lines, index),
                    RecordRef::Txn { index, .. } => (&self.txn_lines, index),
                    RecordRef::Nemesis { index, .. } => (&self.nemesis_lines, index),
                    RecordRef::Wal { .. } => (&vec![self.wal_line], 0),
                };
                Err(ParseError {
                    line: lines.get(index).copied().unwrap_or(self.last_line),
                    field: Some(e.rule.field().to_string()),
                    problem: Problem::Invalid(e),
                })
            }
        }
    }
}

/// The line as a JSON object (checks syntax once, for every kind of line).
fn json_object(number: usize, text: &str) -> Result<Map<String, Value>, ParseError> {
    match serde_json::from_str::<Value>(text) {
        Ok(Value::Object(fields)) => Ok(fields),
        Ok(other) => Err(ParseError {
            line: number,
            field: None,
            problem: Problem::Field(format!(
                "expected a JSON object, got {}",
                wire::describe(&other)
            )),
        }),
        Err(e) => Err(ParseError {
            line: number,
            field: None,
            problem: Problem::Syntax {
                message: serde_message(&e),
                column: e.column(),
            },
        }),
    }
}

/// The header's meta, after checking its format and version (first, so that a file of
/// another format or version is named as such rather than as a list of odd fields).
fn header(
    number: usize,
    text: &str,
    fields: &Map<String, Value>,
) -> Result<BTreeMap<String, Value>, ParseError> {
    let format = fields.get("format").unwrap_or(&Value::Null);
    if format.as_str() != Some(FORMAT) {
        let message = format!(
            "expected \"{FORMAT}\" (the first line must be the header), got {}",
            wire::describe(format)
        );
        return Err(ParseError::field(number, "format", message));
    }
    let version = fields.get("version").unwrap_or(&Value::Null);
    if version.as_u64() != Some(u64::from(VERSION)) {
        let message = format!(
            "unsupported version {}: this reader supports version {VERSION} only",
            wire::describe(version)
        );
        return Err(ParseError::field(number, "version", message));
    }
    let header: wire::Header = typed(number, text)?;
    Ok(header.meta)
}

/// The keyword in field `name`, from `table`.
fn keyword<T: Copy>(
    number: usize,
    fields: &Map<String, Value>,
    name: &str,
    table: &[(&str, T)],
) -> Result<T, ParseError> {
    let value = fields.get(name).ok_or_else(|| {
        let names: Vec<String> = table.iter().map(|(n, _)| format!("\"{n}\"")).collect();
        ParseError::field(
            number,
            name,
            format!("missing (one of {})", names.join(", ")),
        )
    })?;
    wire::as_keyword(value, table).map_err(|m| ParseError::field(number, name, m))
}

fn op_record(number: usize, text: &str, call: CallName) -> Result<OpRecord, ParseError> {
    match call {
        CallName::Acquire => op_of::<wire::AcquireArgs, wire::AcquireOk>(number, text),
        CallName::Renew => op_of::<wire::RenewArgs, wire::RenewOk>(number, text),
        CallName::Release => op_of::<wire::ReleaseArgs, wire::ReleaseOk>(number, text),
        CallName::Inspect => op_of::<wire::KeyArgs, wire::InspectOk>(number, text),
    }
}

fn op_of<A: wire::ArgsWire, K: wire::OkWire>(
    number: usize,
    text: &str,
) -> Result<OpRecord, ParseError> {
    let line: wire::OpLine<A, K> = typed(number, text)?;
    line.into_record().map_err(|e| ParseError::at(number, e))
}

/// Deserializes the line into `T`, naming the field of any error. Straight from the text
/// (not from the parsed object) so that a repeated field is an error, not a silent
/// overwrite.
fn typed<T: DeserializeOwned>(number: usize, text: &str) -> Result<T, ParseError> {
    let mut de = serde_json::Deserializer::from_str(text);
    serde_path_to_error::deserialize(&mut de).map_err(|e| {
        let path = e.path().to_string();
        let message = serde_message(e.inner());
        let (field, message) = at_named_field(&path, message);
        ParseError {
            line: number,
            field: (field != ".").then_some(field),
            problem: Problem::Field(message),
        }
    })
}

/// serde reports a missing or repeated field at its parent ("missing field `x`",
/// "duplicate field `x`"); report it at the field itself, which is what a reader looks for.
fn at_named_field(path: &str, message: String) -> (String, String) {
    let named = |prefix: &str| {
        message
            .strip_prefix(prefix)
            .and_then(|rest| rest.strip_suffix('`'))
            .map(str::to_string)
    };
    let (name, problem) = match (named("missing field `"), named("duplicate field `")) {
        (Some(name), _) => (name, "missing"),
        (None, Some(name)) => (name, "appears more than once"),
        (None, None) => return (path.to_string(), message),
    };
    let field = if path == "." {
        name
    } else {
        format!("{path}.{name}")
    };
    (field, problem.to_string())
}

/// serde_json's message without the position it appends (" at line 1 column 7"): the
/// line is ours to report, and it is always 1 within one line of text.
fn serde_message(e: &serde_json::Error) -> String {
    let full = e.to_string();
    let suffix = format!(" at line {} column {}", e.line(), e.column());
    match full.strip_suffix(&suffix) {
        Some(message) => message.to_string(),
        None => full,
    }
}

/// Writes a history as it is recorded: the header first, then each record as it
/// completes, one line each, in whatever order they come. A record is written as given;
/// one that breaks a rule of the format is caught when the history is read.
pub struct Writer<W: Write> {
    out: W,
}

impl<W: Write> Writer<W> {
    /// Writes the header line with `meta`.
    pub fn new(out: W, meta: &BTreeMap<String, Value>) -> io::Result<Writer<W>> {
        let mut writer = Writer { out };
        writer.line(&wire::Header {
            format: FORMAT.to_string(),
            version: VERSION,
            meta: meta.clone(),
        })?;
        Ok(writer)
    }

    pub fn write_op(&mut self, op: &OpRecord) -> io::Result<()> {
        self.line(&wire::op_line(op))
    }

    pub fn write_txn(&mut self, txn: &TxnRecord) -> io::Result<()> {
        self.line(&wire::TxnLine::of(txn))
    }

    pub fn write_nemesis(&mut self, nemesis: &NemesisRecord) -> io::Result<()> {
        self.line(&wire::NemesisLine::of(nemesis))
    }

    pub fn write_wal(&mut self, wal: &WalLog) -> io::Result<()> {
        self.line(&wire::WalLine::of(wal))
    }

    pub fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }

    /// The underlying writer.
    pub fn into_inner(self) -> W {
        self.out
    }

    /// The line is built whole and then written with one `write_all`: an unbuffered file
    /// gets one system call per record, and a record is never left half-built in between.
    fn line(&mut self, value: &impl Serialize) -> io::Result<()> {
        let mut bytes = serde_json::to_vec(value)?;
        bytes.push(b'\n');
        self.out.write_all(&bytes)
    }
}

/// The history as text: the header, then its ops, transactions and nemesis events.
pub fn to_string(h: &History) -> String {
    let mut out = Vec::new();
    match write_all(&mut out, h) {
        Ok(()) => String::from_utf8_lossy(&out).into_owned(),
        // Unreachable: a Vec takes every write and every record serializes (all map keys
        // are strings). Empty text fails to parse, so this could not pass for a history.
        Err(_) => String::new(),
    }
}

fn write_all(out: &mut Vec<u8>, h: &History) -> io::Result<()> {
    let mut writer = Writer::new(out, &h.meta)?;
    for op in &h.ops {
        writer.write_op(op)?;
    }
    for txn in &h.txns {
        writer.write_txn(txn)?;
    }
    for nemesis in &h.nemeses {
        writer.write_nemesis(nemesis)?;
    }
    if let Some(wal) = &h.wal {
        writer.write_wal(wal)?;
    }
    Ok(())
}
