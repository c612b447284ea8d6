//! The fault and probe steps' text (lapse, cancel, terminate, restart, probe) and the `set`
//! header: each reads back, is refused with its line when malformed, and
//! drawn plans never contain it.

use super::*;
use crate::plan::{Origin, PlanConfig};

const TAKEOVER: &str = "\
processes 2
keys 1
names shared-owners
p0 acquire k0 ttl 1h expect granted
p0 lapse k0
p1 acquire k0 ttl 1h expect granted
p0 renew k0 ttl 1h expect lapsed
";

#[test]
fn a_lapse_reads_as_written_and_prints_back() {
    let plan = Plan::from_text(TAKEOVER).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(plan.steps.len(), 4);
    assert_eq!(plan.steps[1], PlanStep::new(0, Step::Lapse(0)));
    let text = plan.to_text();
    assert!(text.contains("\np0 lapse k0\n"), "{text}");
    let back = Plan::from_text(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    assert_eq!(back, plan);
    assert!(
        plan.lines()[1].starts_with("1: p0 LAPSE "),
        "{:?}",
        plan.lines()
    );
}

#[test]
fn malformed_lapses_are_refused_with_their_line() {
    let head = "processes 2\nkeys 1\np0 acquire k0 ttl 1h\n";
    let cases = [
        (
            "p0 lapse",
            "line 4: `lapse` takes one key and nothing more, e.g. `lapse k0`",
        ),
        (
            "p0 lapse k0 k0",
            "line 4: `lapse` takes one key and nothing more",
        ),
        (
            "p0 lapse k0 ttl 1s",
            "line 4: `lapse` takes one key and nothing more",
        ),
        (
            "p0 lapse k1",
            "line 4: key k1 is out of range: the plan has 1 key (k0)",
        ),
        ("p0 lapse x", "line 4: `x` is not a key"),
        ("p2 lapse k0", "line 4: process p2 is out of range"),
        ("p0 lapse k0 expect ok", "line 4: `lapse` takes no `expect`"),
        (
            "p1 begin\np1 lapse k0\np1 commit",
            "line 5: p1 has a transaction open (begun on line 4): a lapse runs on a connection \
             of its own",
        ),
    ];
    for (lines, want) in cases {
        let text = format!("{head}{lines}\n");
        match Plan::from_text(&text) {
            Err(e) => assert!(e.to_string().starts_with(want), "{e}\nwanted: {want}"),
            Ok(plan) => panic!("read {plan:?} from\n{text}"),
        }
    }
    // Another process's transaction does not stop a lapse (it may wait for its lock).
    let other = format!("{head}p1 begin\np0 lapse k0\np1 commit\n");
    assert!(Plan::from_text(&other).is_ok());
}

#[test]
fn a_plan_built_in_code_refuses_a_lapse_it_cannot_run() {
    let w = Workload {
        processes: 2,
        keys: 1,
        ..stepped_workload()
    };
    let begin = PlanStep::new(0, Step::Begin(Isolation::ReadCommitted));
    let lapse = PlanStep::new(0, Step::Lapse(0));
    let in_txn = Plan::new(w.clone(), vec![begin, lapse.clone()]);
    assert!(
        matches!(
            in_txn,
            Err(PlanError::Lapse {
                step: 1,
                process: 0,
                ..
            })
        ),
        "{in_txn:?}"
    );
    let beyond = Plan::new(w.clone(), vec![PlanStep::new(1, Step::Lapse(3))]);
    assert!(
        matches!(
            beyond,
            Err(PlanError::Lapse {
                step: 0,
                process: 1,
                ..
            })
        ),
        "{beyond:?}"
    );
    // A lapse expects no answer.
    let expecting = PlanStep {
        expect: Some(
            Expect::of_words(Asked::Call(CallKind::Renew), "renew", &["ok"])
                .unwrap_or_else(|e| panic!("{e}")),
        ),
        ..lapse
    };
    assert!(matches!(
        Plan::new(w, vec![expecting]),
        Err(PlanError::Expect { step: 0, .. })
    ));
}

#[test]
fn drawn_plans_never_lapse() {
    for config in [PlanConfig::default(), PlanConfig::contended()] {
        for seed in 0..300 {
            let plan = Plan::from_seed(&config, seed).unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(plan.origin, Origin::Seed(seed));
            assert!(
                !plan
                    .steps
                    .iter()
                    .any(|s| matches!(s.action, Step::Lapse(_))),
                "{plan:?}"
            );
        }
    }
}

/// A signal step (`p1 cancel`, `p0 terminate`) reads back as written, in or out of a
/// transaction, and is refused with its line when given words after it.
#[test]
fn signal_steps_read_as_written_and_print_back() {
    use crate::workload::Signal;
    let text = "\
processes 2
keys 1
p0 begin
p0 acquire k0 ttl 1min expect granted
p0 terminate
p0 commit
p1 acquire k0 ttl 1min wait 30s expect unknown
p1 cancel
";
    let plan = Plan::from_text(text).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        plan.steps[2],
        PlanStep::new(0, Step::Signal(Signal::Terminate))
    );
    assert_eq!(
        plan.steps[5],
        PlanStep::new(1, Step::Signal(Signal::Cancel))
    );
    let printed = plan.to_text();
    assert!(printed.contains("\np0 terminate\n"), "{printed}");
    assert!(printed.contains("\np1 cancel\n"), "{printed}");
    assert_eq!(Plan::from_text(&printed), Ok(plan.clone()));
    assert!(
        plan.lines()[5].starts_with("5: p1 CANCEL"),
        "{:?}",
        plan.lines()
    );
    let refused = Plan::from_text("processes 2\nkeys 1\np0 cancel p0\n");
    assert_eq!(
        refused.map_err(|e| e.to_string()),
        Err("line 3: `cancel` takes nothing after it: `p1 cancel` signals p1's backend".into())
    );
}

/// A restart step reads as written (how the server stops, how long it stays down) and
/// prints back; an unknown stop or a missing downtime is refused with its line.
#[test]
fn restart_steps_read_as_written_and_print_back() {
    use crate::workload::Stop;
    use std::time::Duration;
    let text = "\
processes 2
keys 1
p0 acquire k0 ttl 1500ms expect granted
p0 restart fast 1800ms
p1 restart crash 0ms
p0 renew k0 ttl 1500ms expect lapsed
";
    let plan = Plan::from_text(text).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        plan.steps[1],
        PlanStep::new(0, Step::Restart(Stop::Fast, Duration::from_millis(1_800)))
    );
    assert_eq!(
        plan.steps[2],
        PlanStep::new(1, Step::Restart(Stop::Crash, Duration::ZERO))
    );
    let printed = plan.to_text();
    assert!(printed.contains("\np0 restart fast 1800ms\n"), "{printed}");
    assert_eq!(Plan::from_text(&printed), Ok(plan));
    let head = "processes 2\nkeys 1\n";
    for (line, want) in [
        (
            "p0 restart gently 1s",
            "line 3: unknown stop `gently`: write crash, immediate or fast",
        ),
        (
            "p0 restart fast",
            "line 3: `restart` takes how the server stops and how long it stays down",
        ),
    ] {
        let got = Plan::from_text(&format!("{head}{line}\n")).map_err(|e| e.to_string());
        match got {
            Err(e) => assert!(e.starts_with(want), "{line}: {e}"),
            Ok(p) => panic!("{line} read as {p:?}"),
        }
    }
}

/// `set name=value` header lines are the plan's session settings, in order; they print
/// back; a malformed, repeated or late one is refused with its line.
#[test]
fn session_settings_read_as_written_and_print_back() {
    let text = "\
processes 2
keys 1
set lock_timeout=300
set TimeZone=Europe/Berlin
p0 acquire k0 ttl 1min expect granted
";
    let plan = Plan::from_text(text).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        plan.settings,
        vec![
            ("lock_timeout".to_string(), "300".to_string()),
            ("TimeZone".to_string(), "Europe/Berlin".to_string()),
        ]
    );
    let printed = plan.to_text();
    assert!(
        printed.contains("\nset lock_timeout=300\nset TimeZone=Europe/Berlin\n"),
        "{printed}"
    );
    assert_eq!(Plan::from_text(&printed), Ok(plan));
    let head = "processes 2\nkeys 1\n";
    for (lines, want) in [
        (
            "set lock_timeout\n",
            "line 3: `lock_timeout` is not a setting: a setting is written name=value",
        ),
        ("set =1\n", "line 3: `=1` is not a setting"),
        (
            "set a=1\nset a=2\n",
            "line 4: `a` was already set on line 3",
        ),
        (
            "p0 inspect k0\nset a=1\n",
            "line 4: `set` must come before the first step (line 3)",
        ),
    ] {
        let got = Plan::from_text(&format!("{head}{lines}")).map_err(|e| e.to_string());
        match got {
            Err(e) => assert!(e.starts_with(want), "{lines}: {e}"),
            Ok(p) => panic!("{lines} read as {p:?}"),
        }
    }
}

/// `probe xid` reads inside a transaction, with or without `expect none|assigned`, and
/// prints back; outside a transaction, with another word or another answer it is refused.
#[test]
fn probe_steps_read_as_written_and_print_back() {
    use crate::plan::Expect;
    use crate::workload::Probe;
    let text = "\
processes 2
keys 1
p0 acquire k0 ttl 1min expect granted
p1 begin
p1 acquire k0 ttl 1min expect denied
p1 probe xid expect none
p1 probe xid
p1 rollback
";
    let plan = Plan::from_text(text).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(plan.steps[3].action, Step::Probe(Probe::Xid));
    assert_eq!(plan.steps[3].expect, Some(Expect::NoXid));
    assert_eq!(plan.steps[4].expect, None);
    let printed = plan.to_text();
    assert!(
        printed.contains("\np1 probe xid expect none\np1 probe xid\n"),
        "{printed}"
    );
    assert_eq!(Plan::from_text(&printed), Ok(plan));
    let head = "processes 2\nkeys 1\n";
    for (lines, want) in [
        (
            "p0 probe xid\n",
            "line 3: p0 has no open transaction: a probe asks",
        ),
        (
            "p0 begin\np0 probe wal\np0 commit\n",
            "line 4: `probe` takes what it asks, `xid`",
        ),
        (
            "p0 begin\np0 probe xid expect held\np0 commit\n",
            "line 4: a `probe xid` never answers `held`: a `probe xid` answers `none`, `assigned`",
        ),
        (
            "p0 inspect k0 expect none\n",
            "line 3: an inspect never answers `none`",
        ),
    ] {
        let got = Plan::from_text(&format!("{head}{lines}")).map_err(|e| e.to_string());
        match got {
            Err(e) => assert!(e.starts_with(want), "{lines}: {e}"),
            Ok(p) => panic!("{lines} read as {p:?}"),
        }
    }
}
