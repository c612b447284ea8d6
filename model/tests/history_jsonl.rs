//! History format v2, JSON Lines (specs/HISTORY.md): the documented lines map to the
//! documented records, writing then reading gives the same history, every malformed line
//! is reported at its line and field, every validity rule rejects what breaks it, and no
//! input makes the reader panic.

use model::history::jsonl::{self, ParseError, Problem, Writer};
use model::history::{
    validate, History, Isolation, NemesisEffect, NemesisRecord, OpRecord, OpResult, RecordRef,
    Rule, TxnEnd, TxnRecord,
};
use model::{Interval, Op, Outcome, Row, Span, Ts};
use proptest::prelude::*;
use serde_json::Value;
use std::collections::BTreeMap;

// ---- a documented history and the records it stands for --------------------------------

const BASE: [&str; 10] = [
    r#"{"format":"leasecheck-history","version":2,"meta":{"seed":7,"target":"pg_lease 0.1.0"}}"#,
    r#"{"type":"op","id":1,"process":1,"txn":null,"call":"acquire","args":{"key":"job-42","owner":"worker-a1","ttl":30000000,"wait":0},"invoke_ns":1000,"complete_ns":2000,"server":{"t0":1764750000000000,"t1":1764750000000400},"result":{"ok":{"acquired":true,"epoch":1,"expires_at":1764750030000200}}}"#,
    r#"{"type":"txn","id":5,"process":2,"isolation":"read committed","begin_ns":3000,"end":"commit","end_invoke_ns":3700,"end_complete_ns":3800}"#,
    "",
    r#"{"type":"op","id":2,"process":2,"txn":5,"call":"renew","args":{"key":"job-42","owner":"worker-b","epoch":1,"ttl":{"months":0,"days":1,"us":0}},"invoke_ns":3100,"complete_ns":3200,"server":{"t0":1764750000001000,"t1":1764750000001100},"result":{"ok":{"status":"not_owner"}}}"#,
    r#"{"type":"op","id":3,"process":2,"txn":5,"call":"inspect","args":{"key":"job-42"},"invoke_ns":3500,"complete_ns":3600,"server":null,"result":{"ok":{"row":{"held":true,"owner":"worker-a1","epoch":1,"expires_at":1764750030000200}}}}"#,
    r#"{"type":"nemesis","id":1,"fault":"lapse","start_ns":4000,"end_ns":4100,"effect":{"lapse":{"key":"job-42","server":{"t0":1764750000002000,"t1":1764750000002050},"applied":true}},"detail":"expire job-42"}"#,
    r#"{"type":"op","id":4,"process":3,"call":"release","args":{"key":"job-42","owner":"worker-a1","epoch":1},"invoke_ns":5000,"complete_ns":5100,"server":null,"result":{"unknown":{"reason":"connection closed"}}}"#,
    r#"{"type":"nemesis","id":2,"fault":"crash","start_ns":6000,"end_ns":7000,"effect":{"restart":{"clean":false,"down":null}},"detail":""}"#,
    r#"{"type":"op","id":5,"process":1,"txn":null,"call":"acquire","args":{"key":null,"owner":"w","ttl":null,"wait":{"months":1,"days":-2,"us":3}},"invoke_ns":8000,"complete_ns":8100,"server":{"t0":1764750000009000,"t1":1764750000009100},"result":{"fail":{"sqlstate":"22023","message":"invalid input"}}}"#,
];

fn base_text() -> String {
    BASE.join("\n") + "\n"
}

fn span(t0: i64, t1: i64) -> Span {
    Span::new(Ts(t0), Ts(t1)).expect("ordered span")
}

fn s(text: &str) -> Option<String> {
    Some(text.to_string())
}

fn base_history() -> History {
    let meta = BTreeMap::from([
        ("target".to_string(), Value::from("pg_lease 0.1.0")),
        ("seed".to_string(), Value::from(7)),
    ]);
    History {
        meta,
        ops: vec![
            OpRecord {
                id: 1,
                process: 1,
                txn: None,
                call: Op::Acquire {
                    key: s("job-42"),
                    owner: s("worker-a1"),
                    ttl: Some(Interval::secs(30)),
                    wait: Some(Interval::ZERO),
                },
                invoke: 1000,
                complete: 2000,
                server: Some(span(1_764_750_000_000_000, 1_764_750_000_000_400)),
                result: OpResult::Ok(Outcome::Acquired {
                    epoch: 1,
                    expires_at: Ts(1_764_750_030_000_200),
                }),
            },
            OpRecord {
                id: 2,
                process: 2,
                txn: Some(5),
                call: Op::Renew {
                    key: s("job-42"),
                    owner: s("worker-b"),
                    epoch: Some(1),
                    ttl: Some(Interval {
                        months: 0,
                        days: 1,
                        micros: 0,
                    }),
                },
                invoke: 3100,
                complete: 3200,
                server: Some(span(1_764_750_000_001_000, 1_764_750_000_001_100)),
                result: OpResult::Ok(Outcome::NotOwner),
            },
            OpRecord {
                id: 3,
                process: 2,
                txn: Some(5),
                call: Op::Inspect { key: s("job-42") },
                invoke: 3500,
                complete: 3600,
                server: None,
                result: OpResult::Ok(Outcome::Inspected(Some(Row {
                    held: true,
                    owner: s("worker-a1"),
                    epoch: 1,
                    expires_at: Some(Ts(1_764_750_030_000_200)),
                }))),
            },
            OpRecord {
                id: 4,
                process: 3,
                txn: None,
                call: Op::Release {
                    key: s("job-42"),
                    owner: s("worker-a1"),
                    epoch: Some(1),
                },
                invoke: 5000,
                complete: 5100,
                server: None,
                result: OpResult::Unknown {
                    reason: "connection closed".to_string(),
                },
            },
            OpRecord {
                id: 5,
                process: 1,
                txn: None,
                call: Op::Acquire {
                    key: None,
                    owner: s("w"),
                    ttl: None,
                    wait: Some(Interval {
                        months: 1,
                        days: -2,
                        micros: 3,
                    }),
                },
                invoke: 8000,
                complete: 8100,
                server: Some(span(1_764_750_000_009_000, 1_764_750_000_009_100)),
                result: OpResult::Fail {
                    sqlstate: "22023".to_string(),
                    message: "invalid input".to_string(),
                },
            },
        ],
        txns: vec![TxnRecord {
            id: 5,
            process: 2,
            isolation: Isolation::ReadCommitted,
            begin: 3000,
            end: TxnEnd::Commit,
            end_invoke: 3700,
            end_complete: 3800,
        }],
        nemeses: vec![
            NemesisRecord {
                id: 1,
                fault: "lapse".to_string(),
                start: 4000,
                end: 4100,
                effect: NemesisEffect::Lapse {
                    key: "job-42".to_string(),
                    server: Some(span(1_764_750_000_002_000, 1_764_750_000_002_050)),
                    applied: Some(true),
                },
                detail: "expire job-42".to_string(),
            },
            NemesisRecord {
                id: 2,
                fault: "crash".to_string(),
                start: 6000,
                end: 7000,
                effect: NemesisEffect::Restart {
                    clean: false,
                    down: None,
                },
                detail: String::new(),
            },
        ],
        wal: None,
    }
}

fn parse_ok(text: &str) -> History {
    match jsonl::parse(text) {
        Ok(h) => h,
        Err(e) => panic!("expected to parse, got: {e}\n{text}"),
    }
}

fn parse_err(text: &str) -> ParseError {
    match jsonl::parse(text) {
        Ok(h) => panic!("expected an error, parsed: {h:?}\n{text}"),
        Err(e) => e,
    }
}

#[test]
fn documented_lines_are_the_documented_records() {
    assert_eq!(parse_ok(&base_text()), base_history());
}

#[test]
fn the_writer_writes_the_documented_lines() {
    // The base text has a blank line, an omitted txn and records in another order than
    // to_string writes; its records, written again, are exactly its non-blank lines
    // (the omitted "txn" written as null).
    let written = jsonl::to_string(&base_history());
    let mut expected: Vec<String> = BASE
        .iter()
        .filter(|l| !l.is_empty())
        .map(|l| l.replace(r#""process":3,"call""#, r#""process":3,"txn":null,"call""#))
        .collect();
    let mut got: Vec<String> = written.lines().map(str::to_string).collect();
    // header first, then ops, txns, nemeses
    assert_eq!(got[0], expected[0]);
    expected.sort();
    got.sort();
    assert_eq!(got, expected);
}

#[test]
fn day_intervals_stay_days() {
    // negative control for the round trip: two intervals PostgreSQL compares equal must
    // not collapse into one form on the wire
    let day = Interval {
        months: 0,
        days: 1,
        micros: 0,
    };
    let micros = Interval::micros(86_400_000_000);
    assert_eq!(day.cmp_value(), micros.cmp_value());
    let with_ttl = |ttl| {
        let mut h = base_history();
        h.ops[0].call = Op::acquire("k".to_string(), "o".to_string(), ttl);
        h
    };
    let (a, b) = (with_ttl(day), with_ttl(micros));
    assert_ne!(jsonl::to_string(&a), jsonl::to_string(&b));
    assert_eq!(parse_ok(&jsonl::to_string(&a)), a);
    assert_eq!(parse_ok(&jsonl::to_string(&b)), b);
    assert_ne!(parse_ok(&jsonl::to_string(&a)), b);
}

#[test]
fn streaming_writer_keeps_completion_order() {
    let h = base_history();
    let mut writer = Writer::new(Vec::new(), &h.meta).expect("header");
    // completion order: op 2 and 3 complete before op 1 here
    writer.write_op(&h.ops[1]).expect("op");
    writer.write_nemesis(&h.nemeses[0]).expect("nemesis");
    writer.write_op(&h.ops[2]).expect("op");
    writer.write_txn(&h.txns[0]).expect("txn");
    writer.write_op(&h.ops[0]).expect("op");
    writer.flush().expect("flush");
    let bytes = writer.into_inner();
    let read = jsonl::read(bytes.as_slice()).expect("reads back");
    let ids: Vec<u64> = read.ops.iter().map(|o| o.id).collect();
    assert_eq!(ids, vec![2, 3, 1]);
    assert_eq!(read.ops[2], h.ops[0]);
    assert_eq!(read.txns, h.txns);
    assert_eq!(read.nemeses, vec![h.nemeses[0].clone()]);
}

#[test]
fn a_txn_without_its_line_is_allowed() {
    let text: Vec<&str> = BASE
        .iter()
        .copied()
        .filter(|l| !l.contains(r#""type":"txn""#))
        .collect();
    let h = parse_ok(&text.join("\n"));
    assert!(h.txns.is_empty());
    assert_eq!(h.ops[1].txn, Some(5));
}

// ---- malformed input: the right line and field --------------------------------------------

/// The base text with `from` replaced by `to` on line `line` (1-based). Fails when `from`
/// is not on that line, so a case cannot silently test the unchanged text.
fn with_line(line: usize, from: &str, to: &str) -> String {
    let mut lines: Vec<String> = BASE.iter().map(|l| l.to_string()).collect();
    let target = &mut lines[line - 1];
    assert!(target.contains(from), "line {line} has no {from:?}");
    *target = target.replacen(from, to, 1);
    lines.join("\n")
}

struct Malformed {
    text: String,
    line: usize,
    field: Option<&'static str>,
    /// A piece of the message.
    says: &'static str,
}

fn case(text: String, line: usize, field: Option<&'static str>, says: &'static str) -> Malformed {
    Malformed {
        text,
        line,
        field,
        says,
    }
}

fn malformed_cases() -> Vec<Malformed> {
    vec![
        case(
            with_line(2, r#""epoch":1,"#, r#""epoch":"x","#),
            2,
            Some("result.ok.epoch"),
            r#"expected an integer, got "x""#,
        ),
        case(
            with_line(1, "leasecheck-history", "jepsen-history"),
            1,
            Some("format"),
            "leasecheck-history",
        ),
        case(
            with_line(1, r#""version":2"#, r#""version":3"#),
            1,
            Some("version"),
            "supports version 2",
        ),
        case(
            with_line(1, r#","meta":{"seed":7,"target":"pg_lease 0.1.0"}"#, ""),
            1,
            Some("meta"),
            "missing",
        ),
        case(with_line(5, r#"}}}"#, r#"}}"#), 5, None, "not valid JSON"),
        case(with_line(6, "{", "["), 6, None, "not valid JSON"),
        case(
            with_line(2, r#""process":1"#, r#""procss":1"#),
            2,
            Some("procss"),
            "unknown field",
        ),
        case(
            with_line(2, r#""owner":"worker-a1""#, r#""ownr":"worker-a1""#),
            2,
            Some("args.ownr"),
            "unknown field",
        ),
        case(
            with_line(2, r#","wait":0"#, ""),
            2,
            Some("args.wait"),
            "missing",
        ),
        case(
            with_line(5, r#""days":1,"us":0"#, r#""days":1"#),
            5,
            Some("args.ttl.us"),
            "missing",
        ),
        case(
            with_line(2, r#""ttl":30000000"#, r#""ttl":"30s""#),
            2,
            Some("args.ttl"),
            "an integer of microseconds or an object",
        ),
        case(
            with_line(2, r#""call":"acquire""#, r#""call":"expire""#),
            2,
            Some("call"),
            r#"got "expire""#,
        ),
        case(
            with_line(3, r#""type":"txn""#, r#""type":"transaction""#),
            3,
            Some("type"),
            r#""op", "txn", "nemesis""#,
        ),
        case(
            with_line(8, r#""unknown":"#, r#""maybe":"#),
            8,
            Some("result"),
            r#"got "maybe""#,
        ),
        case(
            with_line(8, r#"}}}"#, r#"},"ok":{"status":"ok"}}}"#),
            8,
            Some("result"),
            "one key",
        ),
        case(
            with_line(2, r#""acquired":true,"epoch":1,"#, r#""acquired":true,"#),
            2,
            Some("result.ok.epoch"),
            "required when acquired is true",
        ),
        case(
            with_line(5, r#""status":"not_owner""#, r#""status":"fine""#),
            5,
            Some("result.ok.status"),
            r#"got "fine""#,
        ),
        case(
            with_line(6, r#"{"row":{"#, r#"{"rows":{"#),
            6,
            Some("result.ok.rows"),
            "unknown field",
        ),
        case(
            with_line(2, r#""t1":1764750000000400"#, r#""t1":1764749999999999"#),
            2,
            Some("server"),
            "is after its end",
        ),
        case(
            with_line(3, "read committed", "snapshot"),
            3,
            Some("isolation"),
            r#"got "snapshot""#,
        ),
        case(
            with_line(3, r#""end":"commit""#, r#""end":"committed""#),
            3,
            Some("end"),
            r#""commit", "rollback", "unknown""#,
        ),
        case(
            with_line(9, r#"{"restart":"#, r#"{"reboot":"#),
            9,
            Some("effect"),
            r#"got "reboot""#,
        ),
        case(
            with_line(7, r#""applied":true"#, r#""applied":"yes""#),
            7,
            Some("effect.lapse.applied"),
            "expected true or false",
        ),
        case(
            with_line(7, r#""t0":1764750000002000"#, r#""t0":1764750000002051"#),
            7,
            Some("effect.lapse.server"),
            "is after its end",
        ),
        case(
            with_line(2, r#""id":1,"#, r#""id":-1,"#),
            2,
            Some("id"),
            "expected a non-negative integer",
        ),
        case(
            with_line(2, r#""process":1"#, r#""process":4294967296"#),
            2,
            Some("process"),
            "below 2^32",
        ),
        case(
            with_line(5, r#""invoke_ns":3100"#, r#""invoke_ns":3100.5"#),
            5,
            Some("invoke_ns"),
            "got 3100.5",
        ),
        case(
            with_line(2, r#""id":1,"#, r#""id":1,"id":9,"#),
            2,
            Some("id"),
            "more than once",
        ),
        case(
            with_line(
                10,
                r#""wait":{"months":1,"days":-2,"us":3}"#,
                r#""wait":[]"#,
            ),
            10,
            Some("args.wait"),
            "got an array",
        ),
        case(
            with_line(7, r#""detail":"expire job-42""#, r#""detail":null"#),
            7,
            Some("detail"),
            "expected a string, got null",
        ),
        case(
            with_line(8, r#""server":null,"#, ""),
            8,
            Some("server"),
            "missing",
        ),
        // a second header is a line without a type
        case(
            format!("{}{}", base_text(), BASE[0]),
            11,
            Some("type"),
            "missing",
        ),
    ]
}

#[test]
fn malformed_lines_are_named_by_line_and_field() {
    let cases = malformed_cases();
    assert!(cases.len() >= 15);
    for c in cases {
        let e = parse_err(&c.text);
        let shown = e.to_string();
        assert_eq!(
            (e.line, e.field.as_deref()),
            (c.line, c.field),
            "wrong place for: {shown}"
        );
        assert!(shown.starts_with(&format!("line {}", c.line)), "{shown}");
        if let Some(field) = c.field {
            assert!(shown.contains(&format!("field \"{field}\"")), "{shown}");
        }
        assert!(
            shown.contains(c.says),
            "{shown:?} does not say {:?}",
            c.says
        );
    }
}

#[test]
fn the_documented_example_error_reads_as_documented() {
    let text = format!("{}\n{}\n", BASE[0], BASE[1]).replace(r#""epoch":1,"#, r#""epoch":"x","#);
    assert_eq!(
        parse_err(&text).to_string(),
        r#"line 2, field "result.ok.epoch": expected an integer, got "x""#
    );
}

#[test]
fn a_history_needs_its_header() {
    for text in ["", "\n\n", BASE[1]] {
        let e = parse_err(text);
        assert!(
            matches!(e.problem, Problem::NoHeader) || e.field.as_deref() == Some("format"),
            "{e}"
        );
    }
}

#[test]
fn unreadable_bytes_are_an_error_at_their_line() {
    let mut bytes = format!("{}\n", BASE[0]).into_bytes();
    bytes.extend_from_slice(b"{\"type\":\"op\xff\"}\n");
    let e = jsonl::read(bytes.as_slice()).expect_err("invalid UTF-8");
    assert_eq!(e.line, 2);
    assert!(matches!(e.problem, Problem::Io(_)), "{e}");
}

// ---- validity rules -------------------------------------------------------------------------

#[test]
fn the_base_history_is_valid() {
    // the control for every rule below: each starts from this history
    assert_eq!(validate(&base_history()), Ok(()));
}

fn broken(edit: impl FnOnce(&mut History)) -> (RecordRef, Rule) {
    let mut h = base_history();
    edit(&mut h);
    match validate(&h) {
        Ok(()) => panic!("expected a validation error for {h:?}"),
        Err(e) => (e.record, e.rule),
    }
}

#[test]
fn duplicate_ids_are_rejected() {
    let (record, rule) = broken(|h| h.ops[2].id = 1);
    assert_eq!(record, RecordRef::Op { index: 2, id: 1 });
    assert_eq!(rule, Rule::DuplicateId);
    let (record, rule) = broken(|h| {
        let mut t = h.txns[0].clone();
        t.process = 9;
        h.txns.push(t);
    });
    assert_eq!(record, RecordRef::Txn { index: 1, id: 5 });
    assert_eq!(rule, Rule::DuplicateId);
    let (record, rule) = broken(|h| h.nemeses[1].id = 1);
    assert_eq!(record, RecordRef::Nemesis { index: 1, id: 1 });
    assert_eq!(rule, Rule::DuplicateId);
}

#[test]
fn ends_before_starts_are_rejected() {
    let (record, rule) = broken(|h| h.ops[0].complete = 999);
    assert_eq!(record, RecordRef::Op { index: 0, id: 1 });
    assert!(
        matches!(
            rule,
            Rule::EndsBeforeStart {
                end_field: "complete_ns",
                ..
            }
        ),
        "{rule}"
    );
    let (_, rule) = broken(|h| h.txns[0].end_invoke = 2999);
    assert!(matches!(
        rule,
        Rule::EndsBeforeStart {
            end_field: "end_invoke_ns",
            ..
        }
    ));
    let (_, rule) = broken(|h| h.txns[0].end_complete = 3699);
    assert!(matches!(
        rule,
        Rule::EndsBeforeStart {
            end_field: "end_complete_ns",
            ..
        }
    ));
    let (record, rule) = broken(|h| h.nemeses[1].end = 5999);
    assert_eq!(record, RecordRef::Nemesis { index: 1, id: 2 });
    assert!(matches!(
        rule,
        Rule::EndsBeforeStart {
            end_field: "end_ns",
            ..
        }
    ));
}

#[test]
fn an_expire_call_is_rejected() {
    let (record, rule) = broken(|h| h.ops[3].call = Op::expire("job-42".to_string()));
    assert_eq!(record, RecordRef::Op { index: 3, id: 4 });
    assert_eq!(rule, Rule::ExpireCall);
}

#[test]
fn ok_results_must_fit_their_call() {
    let row = Outcome::Inspected(None);
    let (record, rule) = broken(|h| h.ops[1].result = OpResult::Ok(row));
    assert_eq!(record, RecordRef::Op { index: 1, id: 2 });
    assert!(
        matches!(rule, Rule::ResultMismatch { call: "renew", .. }),
        "{rule}"
    );
    for wrong in [
        Outcome::Released,
        Outcome::Renewed { expires_at: Ts(1) },
        Outcome::Unknown,
        Outcome::InvalidInput,
        Outcome::Timeout,
        Outcome::Failed,
        Outcome::Injected,
    ] {
        let (_, rule) = broken(|h| h.ops[0].result = OpResult::Ok(wrong));
        assert!(
            matches!(
                rule,
                Rule::ResultMismatch {
                    call: "acquire",
                    ..
                }
            ),
            "{rule}"
        );
    }
    let (_, rule) = broken(|h| h.ops[3].result = OpResult::Ok(Outcome::Denied));
    assert!(
        matches!(
            rule,
            Rule::ResultMismatch {
                call: "release",
                ..
            }
        ),
        "{rule}"
    );
    let (_, rule) = broken(|h| h.ops[2].result = OpResult::Ok(Outcome::Lapsed));
    assert!(
        matches!(
            rule,
            Rule::ResultMismatch {
                call: "inspect",
                ..
            }
        ),
        "{rule}"
    );
}

#[test]
fn a_process_runs_one_call_at_a_time() {
    // op 5 of process 1 starts before op 1 of process 1 completed
    let (record, rule) = broken(|h| h.ops[4].invoke = 1500);
    assert_eq!(record, RecordRef::Op { index: 4, id: 5 });
    assert_eq!(
        rule,
        Rule::Overlaps {
            process: 1,
            previous: 1
        }
    );
    // touching is not overlapping
    let mut h = base_history();
    h.ops[4].invoke = 2000;
    assert_eq!(validate(&h), Ok(()));
}

#[test]
fn a_process_is_retired_after_an_unknown_outcome() {
    let (record, rule) = broken(|h| h.ops[4].process = 3);
    assert_eq!(record, RecordRef::Op { index: 4, id: 5 });
    assert_eq!(
        rule,
        Rule::AfterRetirement {
            process: 3,
            unknown: 4
        }
    );
    // a fail whose fate is unknown (a lost connection) retires it too
    let (_, rule) = broken(|h| {
        h.ops[3].result = OpResult::Fail {
            sqlstate: "08006".to_string(),
            message: "connection failure".to_string(),
        };
        h.ops[4].process = 3;
    });
    assert!(matches!(rule, Rule::AfterRetirement { .. }), "{rule}");
    // a definite failure does not
    let mut h = base_history();
    h.ops[3].result = OpResult::Fail {
        sqlstate: "40001".to_string(),
        message: "could not serialize access".to_string(),
    };
    h.ops[4].process = 3;
    assert_eq!(validate(&h), Ok(()));
}

#[test]
fn an_op_belongs_to_its_txns_process() {
    let (record, rule) = broken(|h| h.ops[0].txn = Some(5));
    assert_eq!(record, RecordRef::Op { index: 0, id: 1 });
    assert_eq!(
        rule,
        Rule::TxnOfOtherProcess {
            txn: 5,
            txn_process: 2
        }
    );
}

#[test]
fn an_op_lies_within_its_txn() {
    let (record, rule) = broken(|h| h.txns[0].begin = 3150);
    assert_eq!(record, RecordRef::Op { index: 1, id: 2 });
    assert_eq!(rule, Rule::OutsideTxn { txn: 5 });
    let (_, rule) = broken(|h| {
        h.txns[0].end_invoke = 3550;
        h.txns[0].end_complete = 3550;
    });
    assert_eq!(rule, Rule::OutsideTxn { txn: 5 });
}

#[test]
fn a_validation_error_names_its_line_and_both_ops() {
    // process 3's op 4 ended unknown; op 5 (line 10) moved to process 3
    let text = with_line(10, r#""process":1"#, r#""process":3"#);
    let e = parse_err(&text);
    assert_eq!((e.line, e.field.as_deref()), (10, Some("process")));
    let shown = e.to_string();
    assert!(shown.contains("op 5") && shown.contains("op 4"), "{shown}");
    assert!(matches!(e.problem, Problem::Invalid(_)));
    // a duplicate id is reported at the later line
    let e = parse_err(&with_line(6, r#""id":3"#, r#""id":2"#));
    assert_eq!((e.line, e.field.as_deref()), (6, Some("id")));
    let e = parse_err(&with_line(5, r#""txn":5"#, r#""txn":1"#).replace(
        r#""type":"txn","id":5,"process":2"#,
        r#""type":"txn","id":1,"process":1"#,
    ));
    assert_eq!((e.line, e.field.as_deref()), (5, Some("txn")));
}

// ---- round trip and fuzzing -----------------------------------------------------------------

fn name() -> impl Strategy<Value = String> {
    prop_oneof!["[a-c]{1,3}", "(?s).{0,8}"]
}

fn interval() -> impl Strategy<Value = Interval> {
    prop_oneof![
        any::<i64>().prop_map(Interval::micros),
        (any::<i32>(), any::<i32>(), any::<i64>()).prop_map(|(months, days, micros)| {
            Interval {
                months,
                days,
                micros,
            }
        }),
    ]
}

fn ts() -> impl Strategy<Value = Ts> {
    any::<i64>().prop_map(Ts)
}

fn any_span() -> impl Strategy<Value = Span> {
    (any::<i64>(), any::<i64>()).prop_map(|(a, b)| span(a.min(b), a.max(b)))
}

fn row() -> impl Strategy<Value = Row<String>> {
    (
        any::<bool>(),
        proptest::option::of(name()),
        any::<i64>(),
        proptest::option::of(ts()),
    )
        .prop_map(|(held, owner, epoch, expires_at)| Row {
            held,
            owner,
            epoch,
            expires_at,
        })
}

fn status_outcome() -> impl Strategy<Value = Outcome<String>> {
    prop_oneof![
        Just(Outcome::NotOwner),
        Just(Outcome::Lapsed),
        Just(Outcome::EpochMismatch),
    ]
}

/// A call and an ok-outcome it can return.
fn call_and_outcome() -> impl Strategy<Value = (Op<String, String>, Outcome<String>)> {
    use proptest::option::of;
    prop_oneof![
        (
            (of(name()), of(name()), of(interval()), of(interval())),
            prop_oneof![
                (any::<i64>(), ts())
                    .prop_map(|(epoch, expires_at)| Outcome::Acquired { epoch, expires_at }),
                Just(Outcome::Denied),
            ]
        )
            .prop_map(|((key, owner, ttl, wait), o)| (
                Op::Acquire {
                    key,
                    owner,
                    ttl,
                    wait
                },
                o
            )),
        (
            (of(name()), of(name()), of(any::<i64>()), of(interval())),
            prop_oneof![
                ts().prop_map(|expires_at| Outcome::Renewed { expires_at }),
                status_outcome(),
            ]
        )
            .prop_map(|((key, owner, epoch, ttl), o)| (
                Op::Renew {
                    key,
                    owner,
                    epoch,
                    ttl
                },
                o
            )),
        (
            (of(name()), of(name()), of(any::<i64>())),
            prop_oneof![Just(Outcome::Released), status_outcome()]
        )
            .prop_map(|((key, owner, epoch), o)| (Op::Release { key, owner, epoch }, o)),
        (of(name()), of(row()))
            .prop_map(|(key, row)| (Op::Inspect { key }, Outcome::Inspected(row))),
    ]
}

/// One op to lay out: its call, its result if it is not the process's last, the gap
/// before it and its duration (ns), and its server window.
#[derive(Clone, Debug)]
struct OpPlan {
    call: Op<String, String>,
    result: OpResult,
    gap: u64,
    duration: u64,
    server: Option<Span>,
}

fn op_plan() -> impl Strategy<Value = OpPlan> {
    let definite_fail = (
        prop::sample::select(vec!["22023", "40001", "57014", "XX000", "23505"]),
        "(?s).{0,10}",
    )
        .prop_map(|(code, message)| OpResult::Fail {
            sqlstate: code.to_string(),
            message,
        });
    (
        call_and_outcome(),
        prop_oneof![3 => Just(None), 1 => definite_fail.prop_map(Some)],
        0..1000u64,
        0..1000u64,
        proptest::option::of(any_span()),
    )
        .prop_map(|((call, outcome), fail, gap, duration, server)| OpPlan {
            call,
            result: fail.unwrap_or(OpResult::Ok(outcome)),
            gap,
            duration,
            server,
        })
}

/// A run of a process's ops, autocommit or in one transaction.
#[derive(Clone, Debug)]
struct Segment {
    ops: Vec<OpPlan>,
    txn: Option<(Isolation, TxnEnd, bool)>,
}

fn segment() -> impl Strategy<Value = Segment> {
    let isolation = prop::sample::select(vec![
        Isolation::ReadCommitted,
        Isolation::RepeatableRead,
        Isolation::Serializable,
    ]);
    let end = prop::sample::select(vec![TxnEnd::Commit, TxnEnd::Rollback, TxnEnd::Unknown]);
    (
        prop::collection::vec(op_plan(), 1..4),
        proptest::option::of((isolation, end, any::<bool>())),
    )
        .prop_map(|(ops, txn)| Segment { ops, txn })
}

/// A process: its segments, and how its last op ended if unknown.
type ProcessPlan = (Vec<Segment>, Option<OpResult>);

fn process_plan() -> impl Strategy<Value = ProcessPlan> {
    let unknown = prop_oneof![
        "(?s).{0,10}".prop_map(|reason| OpResult::Unknown { reason }),
        Just(OpResult::Fail {
            sqlstate: "08006".to_string(),
            message: "connection failure".to_string()
        }),
    ];
    (
        prop::collection::vec(segment(), 0..4),
        proptest::option::of(unknown),
    )
}

fn nemesis_plan() -> impl Strategy<Value = (String, u64, u64, NemesisEffect, String)> {
    let effect = prop_oneof![
        Just(NemesisEffect::None),
        (any::<bool>(), proptest::option::of(any_span()))
            .prop_map(|(clean, down)| NemesisEffect::Restart { clean, down }),
        (
            name(),
            proptest::option::of(any_span()),
            proptest::option::of(any::<bool>())
        )
            .prop_map(|(key, server, applied)| NemesisEffect::Lapse {
                key,
                server,
                applied
            }),
    ];
    (name(), 0..1_000_000u64, 0..1000u64, effect, "(?s).{0,10}")
}

fn meta() -> impl Strategy<Value = BTreeMap<String, Value>> {
    let value = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        "(?s).{0,6}".prop_map(Value::String),
    ];
    prop::collection::btree_map("(?s).{0,5}", value, 0..3)
}

/// Lays out one process's plan from `start` on, assigning ids from the counters.
fn lay_out(
    h: &mut History,
    process: u32,
    (segments, unknown): ProcessPlan,
    start: u64,
    ids: &mut (u64, u64),
) {
    let last = segments.iter().map(|s| s.ops.len()).sum::<usize>();
    let mut at = start;
    let mut n = 0;
    for seg in segments {
        let txn_id = seg.txn.map(|_| {
            ids.1 += 1;
            ids.1
        });
        let begin = at;
        for plan in seg.ops {
            n += 1;
            ids.0 += 1;
            let invoke = at + plan.gap;
            let complete = invoke + plan.duration;
            at = complete;
            let result = match (&unknown, n == last) {
                (Some(u), true) => u.clone(),
                _ => plan.result,
            };
            h.ops.push(OpRecord {
                id: ids.0 * 7,
                process,
                txn: txn_id,
                call: plan.call,
                invoke,
                complete,
                server: plan.server,
                result,
            });
        }
        if let (Some(id), Some((isolation, end, recorded))) = (txn_id, seg.txn) {
            let end_invoke = at + 3;
            at = end_invoke + 5;
            if recorded {
                h.txns.push(TxnRecord {
                    id,
                    process,
                    isolation,
                    begin,
                    end,
                    end_invoke,
                    end_complete: at,
                });
            }
        }
    }
}

prop_compose! {
    fn valid_history()(
        processes in prop::collection::vec((process_plan(), 0..1_000_000u64), 0..4),
        nemeses in prop::collection::vec(nemesis_plan(), 0..3),
        meta in meta(),
    ) -> History {
        let mut h = History { meta, ..History::default() };
        let mut ids = (0, 0);
        for (p, (plan, start)) in processes.into_iter().enumerate() {
            lay_out(&mut h, p as u32 + 1, plan, start, &mut ids);
        }
        for (i, (fault, start, duration, effect, detail)) in nemeses.into_iter().enumerate() {
            h.nemeses.push(NemesisRecord {
                id: i as u64 * 3 + 1,
                fault,
                start,
                end: start + duration,
                effect,
                detail,
            });
        }
        h
    }
}

/// `text` with each edit applied: (position, what: 0 delete / 1 insert / 2 replace, char).
fn mutated(text: &str, edits: &[(usize, u8, char)]) -> String {
    let mut chars: Vec<char> = text.chars().collect();
    for (pos, what, c) in edits {
        if chars.is_empty() {
            chars.push(*c);
            continue;
        }
        let at = pos % chars.len();
        match what % 3 {
            0 => {
                chars.remove(at);
            }
            1 => chars.insert(at, *c),
            _ => chars[at] = *c,
        }
    }
    chars.into_iter().collect()
}

/// Characters that matter to JSON and to the format, so edits reach past the syntax check.
fn edit_char() -> impl Strategy<Value = char> {
    prop_oneof![
        prop::sample::select(vec![
            '{', '}', '[', ']', '"', ':', ',', '-', '.', '0', '1', '9', 'e', 'n', ' ', '\n', '\\'
        ]),
        any::<char>(),
    ]
}

/// Text built from the format's own tokens.
fn token_soup() -> impl Strategy<Value = String> {
    let tokens = prop::sample::select(vec![
        "{",
        "}",
        "[",
        "]",
        ":",
        ",",
        "\n",
        "null",
        "true",
        "0",
        "-1",
        "1.5",
        "18446744073709551616",
        "\"type\"",
        "\"op\"",
        "\"txn\"",
        "\"nemesis\"",
        "\"call\"",
        "\"acquire\"",
        "\"inspect\"",
        "\"args\"",
        "\"key\"",
        "\"ttl\"",
        "\"result\"",
        "\"ok\"",
        "\"row\"",
        "\"effect\"",
        "\"lapse\"",
        "\"none\"",
        "\"server\"",
        "\"t0\"",
        "\"months\"",
    ]);
    prop::collection::vec(tokens, 0..60).prop_map(|t| format!("{}\n{}", BASE[0], t.concat()))
}

proptest! {
    #[test]
    fn write_then_read_gives_the_same_history(h in valid_history()) {
        prop_assert_eq!(validate(&h), Ok(()));
        let text = jsonl::to_string(&h);
        let read = jsonl::parse(&text);
        prop_assert!(read.is_ok(), "{:?}\n{}", read.err().map(|e| e.to_string()), text);
        prop_assert_eq!(read.ok(), Some(h));
    }

    #[test]
    fn arbitrary_text_never_panics(text in "(?s).{0,300}") {
        let _ = jsonl::parse(&text);
        let _ = jsonl::parse(&format!("{}\n{text}", BASE[0]));
    }

    #[test]
    fn token_soup_never_panics(text in token_soup()) {
        let _ = jsonl::parse(&text);
    }

    #[test]
    fn mutated_histories_read_or_fail_cleanly(
        h in valid_history(),
        edits in prop::collection::vec((any::<usize>(), any::<u8>(), edit_char()), 1..4),
    ) {
        let text = mutated(&jsonl::to_string(&h), &edits);
        if let Ok(read) = jsonl::parse(&text) {
            // what reads is valid and survives a round trip of its own
            prop_assert_eq!(validate(&read), Ok(()));
            prop_assert_eq!(jsonl::parse(&jsonl::to_string(&read)).ok(), Some(read));
        }
    }

    #[test]
    fn mutated_base_lines_read_or_fail_cleanly(
        edits in prop::collection::vec((any::<usize>(), any::<u8>(), edit_char()), 1..6),
    ) {
        let _ = jsonl::parse(&mutated(&base_text(), &edits));
    }
}

#[test]
fn the_fuzzing_reaches_past_the_syntax_check() {
    // control for the no-panic fuzzing: mutated lines must exercise the field checks and
    // the validity rules, not only the JSON syntax check
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;
    let edits = prop::collection::vec((any::<usize>(), any::<u8>(), edit_char()), 1..3);
    let mut runner = TestRunner::deterministic();
    let (mut ok, mut syntax, mut field, mut invalid) = (0, 0, 0, 0);
    for _ in 0..2000 {
        let Ok(tree) = edits.new_tree(&mut runner) else {
            continue;
        };
        match jsonl::parse(&mutated(&base_text(), &tree.current())) {
            Ok(_) => ok += 1,
            Err(e) => match e.problem {
                Problem::Syntax { .. } => syntax += 1,
                Problem::Field(_) => field += 1,
                Problem::Invalid(_) => invalid += 1,
                Problem::NoHeader | Problem::Io(_) => {}
            },
        }
    }
    println!("ok {ok}, syntax {syntax}, field {field}, invalid {invalid}");
    assert!(ok > 0 && syntax > 0 && field > 0 && invalid > 0);
}
