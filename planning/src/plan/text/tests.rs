use super::print::INVALID_INPUTS;
use super::*;
use crate::plan::{Origin, PlanConfig, PlanStrategy};
use crate::races::race_plans;
use crate::workload::InvalidInput;
use crate::workload::{step_strategy, Memory};
use proptest::prelude::*;
use proptest::strategy::ValueTree;
use proptest::test_runner::TestRunner;
use std::time::Duration;

/// `plan` printed and read back: [`Plan::as_written`] of it, written by hand, making the
/// same calls.
fn assert_reads_back(plan: &Plan) {
    let text = plan.to_text();
    let back = Plan::from_text(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    let want = Plan {
        origin: Origin::Written,
        ..plan.as_written()
    };
    assert_eq!(back, want, "{text}");
    assert_eq!(calls(&back), calls(plan), "{text}");
}

/// The calls a plan's call steps make for a process that knows nothing yet.
fn calls(plan: &Plan) -> Vec<model::Op<String, String>> {
    plan.steps
        .iter()
        .filter_map(|s| match &s.action {
            Step::Call(c) => Some(c.op(&plan.workload, s.process, &Memory::default())),
            _ => None,
        })
        .collect()
}

fn problem(text: &str) -> PlanTextError {
    match Plan::from_text(text) {
        Ok(plan) => panic!("read {plan:?} from\n{text}"),
        Err(e) => e,
    }
}

/// The line error `text` gives, as printed.
fn error_of(text: &str) -> String {
    problem(text).to_string()
}

#[test]
fn plans_of_seeds_read_back_and_name_their_seed() {
    for config in [PlanConfig::default(), PlanConfig::contended()] {
        for seed in 0..300 {
            let plan = Plan::from_seed(&config, seed).expect("a plan");
            assert_reads_back(&plan);
            let first = plan.to_text().lines().next().map(str::to_owned);
            assert_eq!(first.as_deref(), Some(&*format!("# plan of seed {seed}")));
        }
    }
}

#[test]
fn shrunk_plans_and_the_race_plans_read_back() {
    let strategy = PlanStrategy::new(PlanConfig::default()).expect("a strategy");
    let mut tree = strategy
        .new_tree(&mut TestRunner::deterministic())
        .expect("a tree");
    let seed = tree.current().seed().expect("a seed");
    while tree.simplify() {}
    let shrunk = tree.current();
    assert_reads_back(&shrunk);
    assert!(shrunk
        .to_text()
        .starts_with(&format!("# shrunk from seed {seed}\n")));
    // Written plans: a shared owner, pauses, transactions ending both ways.
    for plan in race_plans().expect("the race plans") {
        assert_reads_back(&plan);
        assert!(plan.to_text().starts_with("# plan written by hand\n"));
    }
}

#[test]
fn a_plan_written_by_hand_reads_as_it_says() {
    let text = "\
# two owners race for one key
processes 2
keys 1   # k0
names shared-owners

p0 acquire k0 ttl 5s
p1 begin repeatable read
p1 renew k0 as p0 epoch -2 ttl 1mon2d1500us invalid null-epoch
p0 acquire k0 as stranger ttl 20ms wait 1s
p1 rollback
p0 pause 300ms
p0 release k0 epoch stale
p1 inspect k0
";
    let plan = Plan::from_text(text).expect("a plan");
    assert_eq!(plan.origin, Origin::Written);
    assert_eq!(
        (plan.workload.processes, plan.workload.keys),
        (2, 1),
        "{plan:?}"
    );
    assert_eq!(plan.workload.names, Names::SharedOwners);
    let call = |call, owner, epoch, ttl, wait, invalid| {
        Step::Call(OpChoice {
            call,
            key: 0,
            owner,
            epoch,
            ttl,
            wait,
            invalid,
        })
    };
    let (own, zero) = (OwnerChoice::Own, Interval::ZERO);
    let odd = Interval {
        months: 1,
        days: 2,
        micros: 1_500,
    };
    let want = [
        (
            0,
            call(
                CallKind::Acquire,
                own,
                EpochChoice::Own,
                Interval::secs(5),
                zero,
                None,
            ),
        ),
        (1, Step::Begin(Isolation::RepeatableRead)),
        (
            1,
            call(
                CallKind::Renew,
                OwnerChoice::Slot(0),
                EpochChoice::Guess(-2),
                odd,
                zero,
                Some(InvalidInput::NullEpoch),
            ),
        ),
        (
            0,
            call(
                CallKind::AcquireWait,
                OwnerChoice::Stranger,
                EpochChoice::Own,
                Interval::millis(20),
                Interval::secs(1),
                None,
            ),
        ),
        (1, Step::Rollback),
        (0, Step::Pause(Duration::from_millis(300))),
        (
            0,
            call(CallKind::Release, own, EpochChoice::Stale, zero, zero, None),
        ),
        (
            1,
            call(CallKind::Inspect, own, EpochChoice::Own, zero, zero, None),
        ),
    ];
    let got: Vec<(u32, Step)> = plan
        .steps
        .iter()
        .map(|s| (s.process, s.action.clone()))
        .collect();
    assert_eq!(got, want);
    assert_reads_back(&plan);
}

/// The example of this module's documentation and of specs/HISTORY.md, "Plan text".
const DOCUMENTED: &str = "\
# p1 holds the row lock in a transaction while a blocking acquire waits for it
processes 2
keys 1
names shared-owners
p0 acquire k0 as own ttl 5s
p1 begin
p1 renew k0 as own epoch seen ttl 20ms
p0 acquire k0 as stranger ttl 5s wait 250ms
p1 commit
p0 pause 300ms
p0 inspect k0
";

#[test]
fn the_documented_example_reads_and_prints_back_as_written() {
    let plan = Plan::from_text(DOCUMENTED).expect("the example reads");
    assert_eq!(plan.steps.len(), 7);
    let printed = plan.to_text();
    let steps = |text: &str| -> Vec<String> {
        let lines = text
            .lines()
            .filter(|l| l.starts_with('p') && !l.starts_with("processes"));
        lines.map(str::to_owned).collect()
    };
    assert_eq!(steps(&printed), steps(DOCUMENTED));
}

#[test]
fn an_omitted_header_takes_the_stepped_workloads_defaults() {
    let plan = Plan::from_text("p7 inspect k1\n").expect("a plan");
    let default = stepped_workload();
    assert_eq!(plan.workload, default);
    assert_eq!((default.processes, default.keys), (8, 2));
}

#[test]
fn printed_plans_say_what_their_keys_are_called() {
    let plan = Plan::from_text("processes 2\nkeys 2\np0 inspect k1\n").expect("a plan");
    let text = plan.to_text();
    assert!(text.contains("# k0 is \"k'quote\\\\back\"\n"), "{text}");
    assert!(text.contains("# k1 is \"max-LLLL"), "{text}");
    assert!(text.contains("... (1024 bytes)\n"), "{text}");
}

#[test]
fn intervals_and_pauses_are_spelt_compactly() {
    let micros = |months, days, micros| Interval {
        months,
        days,
        micros,
    };
    for (i, text) in [
        (Interval::millis(20), "20ms"),
        (Interval::secs(5), "5s"),
        (Interval::secs(120), "2min"),
        (Interval::secs(7200), "2h"),
        (micros(0, 0, 1_500), "1500us"),
        (micros(1, 2, 20_000), "1mon2d20ms"),
        (micros(0, 1, 0), "1d"),
        (micros(0, 1, -3_600_000_000), "1d-1h"),
        (micros(-1, 0, 0), "-1mon"),
        (Interval::ZERO, "0s"),
    ] {
        assert_eq!(interval_text(i), text);
        assert_eq!(interval_of(text), Ok(i), "{text}");
    }
    // Read, though never printed so: units summed, largest first.
    assert_eq!(interval_of("1h30min"), Ok(Interval::secs(5400)));
    for (d, text) in [
        (Duration::from_millis(300), "300ms"),
        (Duration::from_secs(2), "2s"),
        (Duration::new(1, 5), "1000000005ns"),
        (Duration::ZERO, "0s"),
    ] {
        assert_eq!(duration_text(d), text);
        assert_eq!(duration_of(text), Ok(d), "{text}");
    }
    for bad in [
        "", "5", "ms", "5 s", "20ms5s", "5s5s", "1y", "+5s", "5S", "1.5s",
    ] {
        assert!(interval_of(bad).is_err(), "{bad:?}");
    }
    assert!(duration_of("-1s").is_err());
    assert!(duration_of("1d").is_err());
    assert!(interval_of("3000000000d").is_err(), "days overflow i32");
    assert!(
        interval_of("9223372036854775807h").is_err(),
        "micros overflow"
    );
}

/// Negative control of the round-trip property: a printer that spells a TTL in whole
/// milliseconds (as the step descriptions show it) does not read back equal, and makes
/// another call, so the property tests above would fail on it.
#[test]
fn a_lossy_interval_spelling_does_not_read_back_equal() {
    let plan = Plan::from_text("processes 2\nkeys 1\np0 acquire k0 ttl 1500us\n").expect("a plan");
    let lossy = plan.to_text().replace("ttl 1500us", "ttl 1ms");
    let back = Plan::from_text(&lossy).expect("a plan");
    assert_ne!(back, plan);
    assert_ne!(calls(&back), calls(&plan));
    // The intervals the property draws catch it too.
    let mut runner = TestRunner::deterministic();
    let lossy_misses = (0..64).any(|_| {
        let i = any_interval()
            .new_tree(&mut runner)
            .expect("a tree")
            .current();
        let ms = format!("{}mon{}d{}ms", i.months, i.days, i.micros / 1_000);
        interval_of(&ms) != Ok(i)
    });
    assert!(lossy_misses);
}

#[test]
fn misplaced_or_unknown_lines_name_their_line_and_what_to_write() {
    for (text, want) in [
        (
            "processes 2\nkeys 2\n# k0, k1\np0 acquire k5 ttl 5s\n",
            "line 4: key k5 is out of range: the plan has 2 keys (k0-k1)",
        ),
        (
            "keys 1\np0 inspect k1\n",
            "line 2: key k1 is out of range: the plan has 1 key (k0)",
        ),
        (
            "keys 1\np0 inspect x\n",
            "line 2: `x` is not a key: keys are named k0 by their index (set by `keys N`)",
        ),
        (
            "processes 2\np2 commit\n",
            "line 2: process p2 is out of range: the plan has 2 processes (p0-p1)",
        ),
        (
            "lease k0\n",
            "line 1: unknown word `lease`: a line is a header line (`processes N`, `keys N`, \
             `names awkward|case-twins|shared-owners`, `set name=value`, `setup SQL`, `teardown \
             SQL`) or a step of a process (`p0 ...`)",
        ),
        (
            "p0 grab k0\n",
            "line 1: unknown action `grab`: write acquire, renew, release, inspect, begin, \
             commit, rollback, pause, lapse, cancel, terminate, restart, probe or set",
        ),
        (
            "p0\n",
            "line 1: p0 needs an action: acquire, renew, release, inspect, begin, commit, \
             rollback, pause, lapse, cancel, terminate, restart, probe or set",
        ),
        (
            "p0 inspect k0\nkeys 1\n",
            "line 2: `keys` must come before the first step (line 1)",
        ),
        (
            "keys 1\n\nkeys 2\n",
            "line 3: `keys` was already given on line 1",
        ),
        (
            "processes 1\n",
            "line 1: `processes` must be 2 to 32, got `1`",
        ),
        ("keys 9\n", "line 1: `keys` must be 1 to 8, got `9`"),
        ("keys\n", "line 1: `keys` takes one value, e.g. `keys 1`"),
        (
            "names twins\n",
            "line 1: unknown names `twins`: write awkward|case-twins|shared-owners",
        ),
    ] {
        assert_eq!(error_of(text), want, "{text}");
    }
}

#[test]
fn bad_calls_name_their_line_and_what_to_write() {
    let plan = |step: &str| format!("processes 2\nkeys 1\n{step}\n");
    for (step, want) in [
        (
            "p0 release k0 ttl 5s",
            "line 3: `release` takes no `ttl`: after the key it takes `as OWNER`, \
             `epoch EPOCH`, `invalid INPUT`, `expect ANSWER`",
        ),
        (
            "p0 inspect k0 as own",
            "line 3: `inspect` takes no `as`: after the key it takes `invalid INPUT`, \
             `expect ANSWER`",
        ),
        (
            "p0 acquire k0 as own",
            "line 3: `acquire` needs a ttl, e.g. `acquire k0 ttl 5s`",
        ),
        ("p0 renew", "line 3: `renew` needs a key, e.g. `renew k0`"),
        ("p0 acquire k0 ttl", "line 3: `ttl` needs a value after it"),
        (
            "p0 acquire k0 ttl 5s ttl 1s",
            "line 3: `ttl` is given twice",
        ),
        (
            "p0 acquire k0 as p2 ttl 5s",
            "line 3: owner p2 is out of range: the plan has 2 processes (p0-p1); write \
             `as stranger` for an owner no process acts as",
        ),
        (
            "p0 acquire k0 as me ttl 5s",
            "line 3: unknown owner `me`: write `as own`, `as stranger` or another process's \
             owner (`as p0-p1`)",
        ),
        (
            "p0 renew k0 epoch newest ttl 5s",
            "line 3: unknown epoch `newest`: write own, stale, seen or a number, e.g. `epoch 3`",
        ),
        (
            "p0 inspect k0 invalid bad-key",
            "line 3: unknown invalid input `bad-key`: write one of null-key, empty-key, \
             key-too-long, huge-key, null-owner, empty-owner, null-epoch, zero-ttl, \
             negative-ttl-field, ttl-over-hundred-years, negative-wait",
        ),
        (
            "p0 acquire k0 ttl 5",
            "line 3: `5` is not an interval: write e.g. `20ms`, `5s`, `1500us`, `1mon2d20ms` \
             (units mon, d, h, min, s, ms, us, largest first)",
        ),
        (
            "p0 pause -1s",
            "line 3: `-1s` is not a duration: write e.g. `300ms`, `2s`, `1min30s` (units h, \
             min, s, ms, us, ns, largest first; not negative)",
        ),
        (
            "p0 pause",
            "line 3: `pause` takes one duration, e.g. `pause 300ms`",
        ),
        (
            "p0 begin snapshot",
            "line 3: unknown isolation level `snapshot`: write `begin`, `begin read committed`, \
             `begin repeatable read` or `begin serializable`",
        ),
    ] {
        assert_eq!(error_of(&plan(step)), want, "{step}");
    }
}

/// `within D` ends a call line after its expectation: it reads into the step's bound and
/// prints back; anywhere else, or without a duration, it is refused naming its line.
#[test]
fn a_time_bound_follows_a_calls_expectation() {
    let head = "processes 2\nkeys 1\n";
    let line = "p1 acquire k0 ttl 1min wait 10s expect granted within 2300ms";
    let plan = Plan::from_text(&format!("{head}{line}\n")).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(plan.steps[0].within, Some(Duration::from_millis(2300)));
    let printed = plan.to_text();
    assert!(
        printed.contains("wait 10s expect granted within 2300ms\n"),
        "{printed}"
    );
    assert_eq!(
        Plan::from_text(&printed).map(|p| p.steps),
        Ok(plan.steps.clone())
    );
    for (lines, want) in [
        (
            "p0 inspect k0 within 2s\n",
            "line 3: `within` bounds a call's expected answer",
        ),
        (
            "p0 pause 1s within 2s\n",
            "line 3: `within` bounds a call's expected answer",
        ),
        (
            "p0 begin\np0 probe xid expect none within 2s\np0 commit\n",
            "line 4: `within` bounds a call's expected answer",
        ),
        (
            "p0 inspect k0 expect free within\n",
            "line 3: `within` needs a duration",
        ),
        (
            "p0 inspect k0 expect free within soon\n",
            "line 3: `soon` is not a duration",
        ),
    ] {
        let got = error_of(&format!("{head}{lines}"));
        assert!(got.starts_with(want), "{lines}: {got}");
    }
}

/// `pN set name=value` is a setting of one process's session: it reads, prints back, and
/// a malformed one is refused naming its line.
#[test]
fn a_process_sets_a_setting_of_its_session() {
    let head = "processes 2\nkeys 1\n";
    let plan = Plan::from_text(&format!("{head}p1 set lock_timeout=200ms\np1 inspect k0\n"))
        .unwrap_or_else(|e| panic!("{e}"));
    let want = Setting {
        name: "lock_timeout".into(),
        value: "200ms".into(),
    };
    assert_eq!(plan.steps[0].action, Step::Set(want));
    let printed = plan.to_text();
    assert!(
        printed.contains("\np1 set lock_timeout=200ms\n"),
        "{printed}"
    );
    assert_eq!(
        Plan::from_text(&printed).map(|p| p.steps),
        Ok(plan.steps.clone())
    );
    for (lines, want) in [
        (
            "p0 set\n",
            "line 3: `set` takes one setting of the process's session",
        ),
        (
            "p0 set a=1 b=2\n",
            "line 3: `set` takes one setting of the process's session",
        ),
        (
            "p0 set lock_timeout\n",
            "line 3: `lock_timeout` is not a setting",
        ),
        (
            "p0 set lock-timeout=1s\n",
            "line 3: `lock-timeout=1s` is not a setting",
        ),
        (
            "p0 set lock_timeout=\n",
            "line 3: `lock_timeout=` is not a setting",
        ),
        ("p0 set x=1 expect ok\n", "line 3: `set` takes no `expect`"),
    ] {
        let got = error_of(&format!("{head}{lines}"));
        assert!(got.starts_with(want), "{lines}: {got}");
    }
}

/// `setup` and `teardown` lines keep their statement as written (inner blanks, quotes),
/// in order, and print and read back; a COMMIT expects how its transaction ended.
#[test]
fn server_sql_and_a_commits_end_read_back() {
    let text = "processes 2\nkeys 1\n\
                setup CREATE FUNCTION public.f() RETURNS int LANGUAGE sql AS 'SELECT  1' # why\n\
                setup   SELECT pg_catalog.pg_reload_conf()  \n\
                teardown DROP FUNCTION public.f()\n\
                p0 begin\np0 acquire k0 ttl 1min\np0 commit expect lost-committed\n\
                p1 begin\np1 commit expect rolled-back\n";
    let plan = Plan::from_text(text).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        plan.setup,
        [
            "CREATE FUNCTION public.f() RETURNS int LANGUAGE sql AS 'SELECT  1'",
            "SELECT pg_catalog.pg_reload_conf()"
        ]
    );
    assert_eq!(plan.teardown, ["DROP FUNCTION public.f()"]);
    assert_eq!(
        plan.steps[2].expect,
        Some(crate::plan::Expect::LostCommitted)
    );
    assert_eq!(plan.steps[4].expect, Some(crate::plan::Expect::RolledBack));
    let printed = plan.to_text();
    assert!(
        printed.contains("\np0 commit expect lost-committed\n"),
        "{printed}"
    );
    assert_reads_back(&plan);
}

#[test]
fn transactions_must_be_closed_as_written() {
    for (text, want) in [
        (
            "processes 2\np1 commit\n",
            "line 2: p1 has no open transaction to end: add `p1 begin` before this line, or \
             remove it",
        ),
        (
            "processes 2\np0 begin\np0 rollback\np0 rollback\n",
            "line 4: p0 has no open transaction to end: add `p0 begin` before this line, or \
             remove it",
        ),
        (
            "processes 2\np0 begin\np0 begin serializable\n",
            "line 3: p0 already has a transaction open (begun on line 2): end it with \
             `p0 commit` or `p0 rollback` first",
        ),
        (
            "processes 2\np0 inspect k0\np1 begin\np0 begin\np0 commit\n",
            "line 3: p1's transaction begun here is still open at the end of the plan: end it \
             with `p1 commit` or `p1 rollback`",
        ),
        (
            "processes 2\np0 commit now\n",
            "line 2: `commit` takes nothing after it but the end it expects, e.g. `commit \
             expect committed`",
        ),
        (
            "processes 2\np0 begin\np0 rollback expect committed\n",
            "line 3: `rollback` takes no `expect`: only a call (acquire, renew, release, \
             inspect), a probe or a commit expects an answer",
        ),
        (
            "processes 2\np0 begin\np0 commit expect granted\n",
            "line 3: a `commit` never answers `granted`: a `commit` answers `committed`, \
             `rolled-back`, `lost-committed`, `lost-rolled-back`, `unknown`",
        ),
        (
            "processes 2\np0 begin\np0 commit expect committed within 1s\n",
            "line 3: `within` bounds a call's expected answer and ends its line, e.g. `p1 \
             acquire k0 ttl 1min wait 10s expect granted within 2s`",
        ),
        (
            "processes 2\nsetup\n",
            "line 2: `setup` takes one SQL statement to the end of its line, e.g. `setup \
             SELECT pg_catalog.pg_reload_conf()`",
        ),
        (
            "processes 2\np0 inspect k0\nteardown SELECT 1\n",
            "line 3: `teardown` must come before the first step (line 2)",
        ),
    ] {
        assert_eq!(error_of(text), want, "{text}");
    }
    // A text of no steps is a plan of none (as a drawn plan can be).
    let empty = Plan::from_text("# nothing\n\nprocesses 2\n").expect("a plan");
    assert!(empty.steps.is_empty());
    assert_eq!(empty.workload.processes, 2);
    // Line numbers count comments and blank lines, and `\r\n` line ends.
    assert!(error_of("# a\r\n\r\np9 commit\r\n").starts_with("line 3: process p9"));
}

fn any_interval() -> impl Strategy<Value = Interval> {
    prop_oneof![
        (any::<i32>(), any::<i32>(), any::<i64>()).prop_map(|(months, days, micros)| Interval {
            months,
            days,
            micros
        }),
        (0i64..10_000_000).prop_map(Interval::micros),
        (0i64..100_000).prop_map(Interval::millis),
    ]
}

fn any_pause() -> impl Strategy<Value = Duration> {
    prop_oneof![
        (any::<u64>(), 0u32..1_000_000_000).prop_map(|(s, n)| Duration::new(s, n)),
        (0u64..10_000).prop_map(Duration::from_millis),
    ]
}

/// Any call on `keys` keys among `processes` processes, every field drawn (the workload's
/// tables are not consulted).
fn any_call(processes: u32, keys: u32) -> impl Strategy<Value = OpChoice> {
    let kind = proptest::sample::select(vec![
        CallKind::Acquire,
        CallKind::AcquireWait,
        CallKind::Renew,
        CallKind::Release,
        CallKind::Inspect,
    ]);
    let owner = prop_oneof![
        Just(OwnerChoice::Own),
        Just(OwnerChoice::Stranger),
        (0..processes).prop_map(OwnerChoice::Slot),
    ];
    let epoch = prop_oneof![
        Just(EpochChoice::Own),
        Just(EpochChoice::Stale),
        Just(EpochChoice::Seen),
        any::<i64>().prop_map(EpochChoice::Guess),
    ];
    let invalid = proptest::option::of(proptest::sample::select(INVALID_INPUTS.to_vec()));
    let fields = (owner, epoch, any_interval(), any_interval(), invalid);
    (kind, 0..keys as usize, fields).prop_map(|(call, key, (owner, epoch, ttl, wait, invalid))| {
        OpChoice {
            call,
            key,
            owner,
            epoch,
            ttl,
            wait,
            invalid,
        }
    })
}

/// Plans of every kind of step: the workload's drawn steps (invalid inputs among them),
/// calls with any field, pauses, lapses; any names.
fn any_plan() -> impl Strategy<Value = Plan> {
    let shape = (
        crate::workload::PROCESSES,
        crate::workload::KEYS,
        proptest::sample::select(Names::ALL.to_vec()),
        0u32..=100,
    );
    shape
        .prop_flat_map(|(processes, keys, names, invalid_percent)| {
            let workload = Workload {
                processes,
                keys,
                names,
                invalid_percent,
                ..stepped_workload()
            };
            let step = prop_oneof![
                4 => step_strategy(&workload),
                2 => any_call(processes, keys).prop_map(Step::Call),
                1 => any_pause().prop_map(Step::Pause),
                1 => (0..keys as usize).prop_map(Step::Lapse),
            ];
            // An answer to expect, and a time bound on it (kept on calls that expect one).
            let expect = proptest::option::of((any::<usize>(), proptest::option::of(any_pause())));
            let steps = proptest::collection::vec((0..processes, step, expect), 1..24);
            (Just(workload), steps)
        })
        .prop_filter_map("a valid plan", |(workload, steps)| {
            let steps = steps
                .into_iter()
                .map(|(process, action, pick)| {
                    let expect = pick.and_then(|(p, _)| an_answer(&action, p));
                    let bounded = expect.is_some() && matches!(action, Step::Call(_));
                    let within = pick.and_then(|(_, w)| w).filter(|_| bounded);
                    PlanStep {
                        expect,
                        within,
                        process,
                        action,
                    }
                })
                .collect();
            Plan::new(workload, steps).ok()
        })
}

/// The `pick`th answer (modulo their number) a call or commit step can expect; none for
/// another step.
fn an_answer(action: &Step, pick: usize) -> Option<crate::plan::Expect> {
    let asked = match action {
        Step::Call(c) => crate::plan::Asked::Call(c.call),
        Step::Commit => crate::plan::Asked::Commit,
        _ => return None,
    };
    let answers = crate::plan::Expect::answers(asked);
    let words: Vec<&str> = match answers[pick % answers.len()] {
        "error SQLSTATE" => vec!["error", "40P01"],
        word => vec![word],
    };
    crate::plan::Expect::of_words(asked, "call", &words).ok()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn plans_of_every_step_kind_read_back(plan in any_plan()) {
        let text = plan.to_text();
        let want = Plan { origin: Origin::Written, ..plan.as_written() };
        let back = Plan::from_text(&text);
        prop_assert_eq!(back.as_ref(), Ok(&want), "{}", text);
        let back = back.map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(calls(&back), calls(&plan), "{}", text);
    }

    #[test]
    fn every_interval_and_pause_reads_back(i in any_interval(), d in any_pause()) {
        prop_assert_eq!(interval_of(&interval_text(i)), Ok(i));
        prop_assert_eq!(duration_of(&duration_text(d)), Ok(d));
    }
}
