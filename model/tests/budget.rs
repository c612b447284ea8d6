//! Every bound of the search comes from the caller's budget (issue 17, point 4): a history
//! the old fixed closure limit (20,000 states) ended UNKNOWN is judged, and an UNKNOWN names
//! the bound that ended it and the command-line flag that raises it; the memory bound holds.

use model::checker::{check, Exhausted};
use model::history::jsonl;
use model::{Budget, CheckOptions, History, Verdict};
use std::path::Path;
use std::time::Duration;

fn case(name: &str) -> History {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/histories")
        .join(name);
    let text = std::fs::read_to_string(&path).expect("a regression case");
    jsonl::parse(&text).expect("parses")
}

/// The search alone (no pre-check decides these), under `budget`.
fn judge(h: &History, budget: Budget) -> Verdict {
    check(
        h,
        &CheckOptions {
            budget,
            prechecks: false,
            diagnosis: None,
            ..CheckOptions::default()
        },
    )
}

/// `v` is UNKNOWN for the bound `bound` names, and says which flag raises it.
fn assert_unknown(v: &Verdict, bound: fn(&Exhausted) -> bool, flag: &str) {
    let Verdict::Unknown(spent) = v else {
        panic!("expected UNKNOWN, got:\n{v}");
    };
    assert!(bound(&spent.exhausted), "{v}");
    assert_eq!(spent.exhausted.flag(), flag);
    let text = v.to_string();
    assert!(text.contains(flag), "{text}");
    assert!(text.contains(&spent.exhausted.what()), "{text}");
    // Without a wal line it says how lost calls would resolve.
    assert!(spent.stats.resolved.is_none());
    assert!(text.contains("wal_level = logical"), "{text}");
}

#[test]
fn twelve_lost_renews_are_judged_not_cut_off_by_a_fixed_limit() {
    // a grant, 12 renews that lost their answers, an inspect showing the original expiry:
    // trivially linearizable; it ended UNKNOWN at the fixed 20,000-state closure
    let v = judge(&case("twelve-lost-renews.jsonl"), Budget::default());
    assert!(v.is_linearizable(), "{v}");
}

#[test]
fn an_exhausted_state_budget_is_named_with_max_states() {
    let h = case("crash-resolves-22-lost-calls.jsonl");
    let budget = Budget {
        states: Some(3),
        ..Budget::UNLIMITED
    };
    assert_unknown(
        &judge(&h, budget),
        |e| matches!(e, Exhausted::States(3)),
        "--max-states",
    );
}

#[test]
fn an_exhausted_time_budget_is_named_with_budget() {
    let h = case("crash-resolves-22-lost-calls.jsonl");
    let budget = Budget {
        time: Some(Duration::ZERO),
        ..Budget::UNLIMITED
    };
    assert_unknown(
        &judge(&h, budget),
        |e| matches!(e, Exhausted::Time(_)),
        "--budget",
    );
}

#[test]
fn an_exhausted_memory_budget_is_named_with_max_memory_and_holds() {
    let h = case("crash-resolves-22-lost-calls.jsonl");
    let limit = 4 << 10;
    let budget = Budget {
        memory: Some(limit),
        ..Budget::UNLIMITED
    };
    let v = judge(&h, budget);
    assert_unknown(&v, |e| matches!(e, Exhausted::Memory(_)), "--max-memory");
    let Verdict::Unknown(spent) = &v else {
        unreachable!()
    };
    // it stops at the first step past the bound: within one step's states of it (a step
    // keeps at most a few KiB of states here)
    assert!(
        spent.stats.bytes < limit + (64 << 10),
        "peak {} bytes for a {limit}-byte budget",
        spent.stats.bytes
    );
}

#[test]
fn the_same_history_with_room_enough_gets_its_verdict() {
    // the control: unlimited, the search finds the violation the budgets above cut short
    let v = judge(
        &case("crash-resolves-22-lost-calls.jsonl"),
        Budget::UNLIMITED,
    );
    assert!(v.violation().is_some(), "{v}");
}
