//! Stepped mode (harness::stepped) against real servers: proptest campaigns of plans,
//! blocked steps, hangs, replay from a seed, shrinking, the timeline of a stepped
//! violation, the lock-behaviour mutants seen as stalls, and the fault steps (lapse,
//! signals, restarts).

#[path = "stepped/lapse.rs"]
mod lapse;
#[path = "stepped/restart.rs"]
mod restart;
#[path = "stepped/server_sql.rs"]
mod server_sql;
#[path = "stepped/signal.rs"]
mod signal;

use harness::campaign::{InfraError, Outcome, Silent, Target};
use harness::pg::{shared, test_majors};
use harness::stepped::{
    self, stepped_workload, Plan, PlanConfig, PlanStep, PlanStrategy, Report, RunError, RunOptions,
    Stage, StepOptions, Waiting,
};
use harness::workload::{CallKind, EpochChoice, OpChoice, OwnerChoice, Step, Workload};
use model::{Interval, Isolation, OpRecord, OpResult, Outcome as Answer};
use proptest::test_runner::{Config, FileFailurePersistence, TestCaseError, TestError, TestRunner};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime")
}

fn target(name: &str) -> Target {
    name.parse().expect("a known target")
}

fn line(report: &Report) -> String {
    let f = &report.run.figures;
    format!(
        "{} ({} ops, {} failed, {} unknown, {} txns, record {:.0?}, check {:.0?})",
        report.run.outcome.name(),
        f.ops,
        f.failed_ops,
        f.unknown_ops,
        f.txns,
        f.record_time,
        f.check_time
    )
}

/// Proptest's configuration for the campaigns: `cases` plans, shrinking bounded, failing
/// seeds kept in `tests/stepped.proptest-regressions` (replayed first on every run).
fn proptest_config(cases: u32) -> Config {
    Config {
        cases,
        source_file: Some(file!()),
        failure_persistence: Some(Box::new(FileFailurePersistence::WithSource(
            "proptest-regressions",
        ))),
        max_shrink_iters: 400,
        max_shrink_time: 40_000,
        ..Config::default()
    }
}

/// 64 proptest-generated plans (2-8 processes, 1-4 keys, up to 32 steps: the workload's
/// op mix with transactions at every isolation level, wrong owners and epochs, TTLs from
/// 5 ms to 2 min, blocking acquires of 10-250 ms) on every tested major: the shipped
/// pg_lease must come out linearizable with no stall. An infrastructure failure fails the
/// test as such (never a pass, and not shrunk: later cases are skipped). Bounded: 60 s per
/// major (measured: see the printed figures).
#[test]
fn a_proptest_campaign_of_stepped_plans_on_pg_lease_is_linearizable() {
    let rt = runtime();
    for major in test_majors() {
        let cluster = shared(major).expect("a PostgreSQL cluster");
        let stage = rt
            .block_on(Stage::new(cluster, Target::PgLease))
            .expect("pg_lease installed");
        let strategy = PlanStrategy::new(PlanConfig::default()).expect("a valid config");
        let infra: Mutex<Option<String>> = Mutex::new(None);
        let counts: Mutex<(u32, usize, usize)> = Mutex::new((0, 0, 0));
        let started = Instant::now();
        let mut runner = TestRunner::new(proptest_config(64));
        let result = runner.run(&strategy, |plan| {
            if infra.lock().unwrap().is_some() {
                return Ok(());
            }
            let report = rt.block_on(stepped::run(
                &stage,
                &plan,
                &RunOptions::default(),
                Arc::new(Silent),
            ));
            let mut c = counts.lock().unwrap();
            c.0 += 1;
            c.1 += report.run.figures.ops;
            c.2 += report.steps.iter().filter(|s| s.waited.is_some()).count();
            match &report.run.outcome {
                Outcome::Linearizable(_) => Ok(()),
                Outcome::Infrastructure(e) => {
                    *infra.lock().unwrap() = Some(format!("{plan}\n{e}"));
                    Ok(())
                }
                other => Err(TestCaseError::fail(format!(
                    "PG {major}, seed {:?}: {}\n{plan}",
                    plan.seed(),
                    other
                ))),
            }
        });
        let elapsed = started.elapsed();
        let (cases, ops, waited) = *counts.lock().unwrap();
        println!(
            "PG {major}: {cases} stepped plans, {ops} ops, {waited} steps seen waiting, {elapsed:.1?}"
        );
        if let Some(e) = infra.lock().unwrap().take() {
            panic!("PG {major}: infrastructure failure (not a finding): {e}");
        }
        if let Err(e) = result {
            panic!("PG {major}: {e}");
        }
        assert!(
            elapsed < Duration::from_secs(60),
            "PG {major}: took {elapsed:?}"
        );
    }
}

/// The first tested major: the single-major tests run there.
fn first_major() -> u32 {
    test_majors()[0]
}

fn stage(rt: &tokio::runtime::Runtime, target: Target) -> Stage {
    let cluster = shared(first_major()).expect("a PostgreSQL cluster");
    rt.block_on(Stage::new(cluster, target))
        .expect("the target installed")
}

fn run(rt: &tokio::runtime::Runtime, stage: &Stage, plan: &Plan, options: &RunOptions) -> Report {
    rt.block_on(stepped::run(stage, plan, options, Arc::new(Silent)))
}

/// A call of process `process` on the plan's first key, as its own owner with its own epoch.
fn call(process: u32, call: CallKind, ttl: Interval, wait: Interval) -> PlanStep {
    let choice = OpChoice {
        call,
        key: 0,
        owner: OwnerChoice::Own,
        epoch: EpochChoice::Own,
        ttl,
        wait,
        invalid: None,
    };
    PlanStep::new(process, Step::Call(choice))
}

fn step(process: u32, action: Step) -> PlanStep {
    PlanStep::new(process, action)
}

/// A hand-written plan of `processes` processes on one key.
fn plan(processes: u32, steps: Vec<PlanStep>) -> Plan {
    let workload = Workload {
        processes,
        keys: 1,
        ..stepped_workload()
    };
    Plan::new(workload, steps).expect("a valid plan")
}

const MINUTE: Interval = Interval::secs(60);
const NO_WAIT: Interval = Interval::ZERO;

/// The op step `step` recorded.
fn op_of(report: &Report, step: usize) -> &OpRecord {
    let id = report.steps[step].op.expect("the step recorded an op");
    let history = report.run.history.as_ref().expect("a history");
    history.ops.iter().find(|o| o.id == id).expect("the op")
}

/// A session blocked by another session of the plan is waiting: the plan goes on. Its
/// later step, which only the other session's COMMIT can let through, is deferred and
/// issued once the blocked step answers.
#[test]
fn a_session_blocked_by_another_waits_and_the_plan_goes_on() {
    let rt = runtime();
    let stage = stage(&rt, Target::PgLease);
    let with_txn = plan(
        2,
        vec![
            step(0, Step::Begin(Isolation::ReadCommitted)),
            call(0, CallKind::Acquire, MINUTE, NO_WAIT), // 1: granted, not yet committed
            call(1, CallKind::Acquire, MINUTE, NO_WAIT), // 2: waits for p0's row lock
            call(1, CallKind::Inspect, MINUTE, NO_WAIT), // 3: p1 is blocked: deferred
            call(0, CallKind::Renew, MINUTE, NO_WAIT),   // 4: p0 goes on
            step(0, Step::Commit),                       // 5: frees p1
        ],
    );
    let report = run(&rt, &stage, &with_txn, &RunOptions::default());
    let s = &report.steps;
    assert!(
        matches!(report.run.outcome, Outcome::Linearizable(_)),
        "{}\n{s:#?}",
        report.run.outcome
    );
    assert_eq!(s[2].waited, Some(Waiting::BlockedBy(vec![0])), "{s:#?}");
    assert!(s[3].deferred && !s[4].deferred, "{s:#?}");
    let order: Vec<usize> = {
        let mut by_issue: Vec<(usize, usize)> = s
            .iter()
            .map(|l| (l.issued.expect("issued"), l.step))
            .collect();
        by_issue.sort();
        by_issue.into_iter().map(|(_, step)| step).collect()
    };
    assert_eq!(order, vec![0, 1, 2, 4, 5, 3]);
    // The blocked acquire answered after the COMMIT was sent, denied: p0 held the key.
    let blocked = op_of(&report, 2);
    let txn = &report.run.history.as_ref().unwrap().txns[0];
    assert_eq!(blocked.result, OpResult::Ok(Answer::Denied));
    assert!(blocked.complete >= txn.end_invoke, "{blocked:?} {txn:?}");

    // Negative control: without the transaction nothing waits and nothing is deferred.
    let autocommit = plan(2, with_txn.steps[1..5].to_vec());
    let report = run(&rt, &stage, &autocommit, &RunOptions::default());
    assert!(matches!(report.run.outcome, Outcome::Linearizable(_)));
    for l in &report.steps {
        assert_eq!(
            (l.waited.clone(), l.deferred, l.issued),
            (None, false, Some(l.step)),
            "{l:?}"
        );
    }
}

/// A step blocked by a backend outside the plan is not waiting (nothing in the plan can
/// free it): after the step timeout it is cancelled on the server and the run ends as an
/// infrastructure failure naming the step and its SQL, never as a verdict.
#[test]
fn a_step_blocked_outside_the_plan_is_cancelled_and_reported_as_a_hang() {
    let rt = runtime();
    let stage = stage(&rt, Target::PgLease);
    let cluster = shared(first_major()).unwrap();
    let outsider = rt.block_on(cluster.connect(stage.database())).unwrap();
    let table = rt
        .block_on(harness::extension::lease_table(&outsider))
        .unwrap();
    rt.block_on(outsider.batch_execute(&format!(
        "BEGIN; LOCK TABLE {table} IN ACCESS EXCLUSIVE MODE"
    )))
    .unwrap();
    let hung = plan(
        2,
        vec![
            call(0, CallKind::Inspect, MINUTE, NO_WAIT),
            call(1, CallKind::Acquire, MINUTE, NO_WAIT),
        ],
    );
    let timeout = Duration::from_millis(500);
    let options = RunOptions {
        steps: StepOptions {
            step_timeout: timeout,
            ..StepOptions::default()
        },
        ..RunOptions::default()
    };
    let started = Instant::now();
    let report = run(&rt, &stage, &hung, &options);
    let elapsed = started.elapsed();
    rt.block_on(outsider.batch_execute("ROLLBACK")).unwrap();
    match &report.run.outcome {
        // Waiting for the outsider's lock, the server was not executing the target's code:
        // no verdict, not the finding that the target hangs.
        Outcome::Infrastructure(InfraError::Stepped(RunError::Hang {
            step,
            process,
            sql,
            after,
            executing: None,
        })) => {
            assert_eq!((*step, *process), (0, 0));
            assert_eq!(sql, "SELECT * FROM lease.inspect('k''quote\\back'::text)");
            assert!(*after > timeout);
        }
        other => panic!("not a hang: {other}"),
    }
    assert_eq!(report.run.outcome.exit(), model::Exit::NoVerdict);
    assert!(report.run.outcome.to_string().contains("lease.inspect("));
    // The margin: the timeout, the monitor's polls (10 ms) and the cancel's round trip;
    // far below the recorder's own 10 s call timeout.
    assert!(elapsed < timeout + Duration::from_secs(3), "{elapsed:?}");
    // The server stopped running it: the call answered the cancel (57014), and the next
    // step was never issued.
    let cancelled = op_of(&report, 0);
    assert!(
        matches!(&cancelled.result, OpResult::Fail { sqlstate, .. } if sqlstate == "57014"),
        "{cancelled:?}"
    );
    assert_eq!(report.steps[1].issued, None);

    // Negative control: without the outsider's lock the same plan runs through.
    let report = run(&rt, &stage, &hung, &options);
    assert!(
        matches!(report.run.outcome, Outcome::Linearizable(_)),
        "{}",
        report.run.outcome
    );
}

/// A seed whose plan fails on the `acquire_ignores_holder` mutant (found by running seeds
/// 0-39: the earlier of its two overlapping grants has a 2-minute TTL, so the overlap does
/// not depend on timing).
const FAILING_SEED: u64 = 30;
/// The step of its offending op and the invariant it breaks, as first recorded.
const FAILING_STEP: usize = 10;
const FAILING_INVARIANT: u8 = 1;

/// A recorded failing seed replays to the same violation: same invariant, same offending
/// step (the op ids follow the order of issue, which the plan fixes).
#[test]
fn a_recorded_failing_seed_replays_to_the_same_violation() {
    let rt = runtime();
    let stage = stage(&rt, target("mutant:acquire_ignores_holder"));
    let plan = Plan::from_seed(&PlanConfig::default(), FAILING_SEED).unwrap();
    for attempt in 0..2 {
        let report = run(&rt, &stage, &plan, &RunOptions::default());
        let Outcome::Violation(v) = &report.run.outcome else {
            panic!("attempt {attempt}: {}\n{plan}", report.run.outcome);
        };
        assert_eq!(v.invariant.number(), FAILING_INVARIANT, "{v}");
        assert_eq!(report.offending_step(), Some(FAILING_STEP), "{v}\n{plan}");
    }
    // Negative control: the same plan on the shipped pg_lease is linearizable.
    let shipped = stage_for_pg_lease(&rt);
    let report = run(&rt, &shipped, &plan, &RunOptions::default());
    assert!(
        matches!(report.run.outcome, Outcome::Linearizable(_)),
        "{}",
        report.run.outcome
    );
}

fn stage_for_pg_lease(rt: &tokio::runtime::Runtime) -> Stage {
    stage(rt, Target::PgLease)
}

/// The HTML timeline of a violation a stepped run found names the invariant and links the
/// offending op to its bar.
#[test]
fn the_timeline_of_a_stepped_violation_marks_the_invariant_and_the_offending_op() {
    let rt = runtime();
    let stage = stage(&rt, target("mutant:acquire_ignores_holder"));
    let plan = Plan::from_seed(&PlanConfig::default(), FAILING_SEED).unwrap();
    let report = run(&rt, &stage, &plan, &RunOptions::default());
    let v = report
        .verdict
        .as_ref()
        .and_then(|v| v.violation())
        .unwrap_or_else(|| panic!("no violation: {}", report.run.outcome));
    let offending = v.ops[0];
    let title = format!("stepped plan of seed {FAILING_SEED}");
    let page = report.timeline(&title).expect("a page");
    assert!(page.contains(&format!("VIOLATION of invariant {FAILING_INVARIANT}:")));
    assert!(page.contains(&format!("Offending op: <a href=\"#op-{offending}\">")));
    assert!(page.contains(&format!("id=\"op-{offending}\" class=\"op ")));
    assert!(page.contains(&title));

    // Negative control: the same plan on pg_lease draws a linearizable page, with no
    // offending op.
    let shipped = stage_for_pg_lease(&rt);
    let report = run(&rt, &shipped, &plan, &RunOptions::default());
    let page = report.timeline(&title).expect("a page");
    assert!(page.contains("<h2>Linearizable</h2>"));
    assert!(!page.contains("Offending op"));
}

/// A failing plan shrinks to a minimal one: proptest finds a violating plan on the
/// `acquire_ignores_holder` mutant and shrinks it to at most 3 steps (two acquires of one
/// key by two owners are enough). Its seed is kept in `tests/stepped.proptest-regressions`
/// and replayed first on later runs. Bounded: a few cases to find it, at most 400 shrink
/// runs of ~30-100 ms (40 s cap; ~11 s measured alone, also when replaying its seed).
#[test]
fn a_failing_stepped_plan_shrinks_to_a_minimal_one() {
    let rt = runtime();
    let stage = stage(&rt, target("mutant:acquire_ignores_holder"));
    // Plans of up to 12 steps: most fail on this mutant anyway, and fewer steps shrink in
    // fewer runs.
    let config = PlanConfig {
        max_steps: 12,
        ..PlanConfig::default()
    };
    let strategy = PlanStrategy::new(config).unwrap();
    let infra: Mutex<Option<String>> = Mutex::new(None);
    let started = Instant::now();
    let mut runner = TestRunner::new(proptest_config(64));
    let result = runner.run(&strategy, |plan| {
        if infra.lock().unwrap().is_some() {
            return Ok(());
        }
        let report = run(&rt, &stage, &plan, &RunOptions::default());
        match &report.run.outcome {
            Outcome::Violation(v) => Err(TestCaseError::fail(format!("{v}"))),
            Outcome::Infrastructure(e) => {
                *infra.lock().unwrap() = Some(e.to_string());
                Ok(())
            }
            _ => Ok(()),
        }
    });
    println!("found and shrunk in {:.1?}", started.elapsed());
    if let Some(e) = infra.lock().unwrap().take() {
        panic!("infrastructure failure (not a finding): {e}");
    }
    let minimal = match result {
        Err(TestError::Fail(_, minimal)) => minimal,
        other => panic!("the mutant was not caught: {other:?}"),
    };
    println!("{minimal}");
    assert!(minimal.steps.len() <= 3, "{minimal}");
    let acquirers: std::collections::BTreeSet<u32> = minimal
        .steps
        .iter()
        .filter(|s| matches!(&s.action, Step::Call(c) if c.call == CallKind::Acquire))
        .map(|s| s.process)
        .collect();
    assert!(acquirers.len() >= 2, "{minimal}");
    // Negative control: the minimal plan is linearizable on the shipped pg_lease.
    let shipped = stage_for_pg_lease(&rt);
    let report = run(&rt, &shipped, &minimal, &RunOptions::default());
    assert!(
        matches!(report.run.outcome, Outcome::Linearizable(_)),
        "{}",
        report.run.outcome
    );
}

/// The lock-behaviour mutants answer like pg_lease, only later: a history cannot show them
/// (the checker's verdict on their histories stays linearizable), but a stepped run sees
/// the holder's renew blocked by a blocking acquire that sleeps between probes while it
/// holds the key's row lock, and reports a stall. The same plans on pg_lease have none.
#[test]
fn the_lock_behaviour_mutants_are_caught_as_stalls() {
    let rt = runtime();
    let waiter = Interval::secs(1);
    // The waiter probes with a row lock (FOR UPDATE) and keeps it while it sleeps.
    let probe = plan(
        2,
        vec![
            call(0, CallKind::Acquire, MINUTE, NO_WAIT),
            call(1, CallKind::AcquireWait, MINUTE, waiter), // 1: sleeps between probes
            call(0, CallKind::Renew, MINUTE, NO_WAIT),      // 2: the holder's renew
        ],
    );
    // The waiter loses a race to a takeover and keeps the lost attempt's row lock.
    let lost_race = plan(
        2,
        vec![
            call(0, CallKind::Acquire, MINUTE, NO_WAIT),
            call(0, CallKind::Release, MINUTE, NO_WAIT),
            step(0, Step::Begin(Isolation::ReadCommitted)),
            call(0, CallKind::Acquire, MINUTE, NO_WAIT), // 3: takes it, not yet committed
            call(1, CallKind::AcquireWait, MINUTE, waiter), // 4: waits for the row lock
            step(0, Step::Commit),                       // 5: the waiter lost the race
            call(0, CallKind::Renew, MINUTE, NO_WAIT),   // 6: the new holder's renew
        ],
    );
    let shipped = stage_for_pg_lease(&rt);
    for (mutant, plan, renew, waiter_step) in [
        ("probe_locks_the_row", &probe, 2, 1),
        ("lost_race_keeps_row_lock", &lost_race, 6, 4),
    ] {
        let stage = stage(&rt, target(&format!("mutant:{mutant}")));
        let report = run(&rt, &stage, plan, &RunOptions::default());
        let Outcome::Stall(stall) = &report.run.outcome else {
            panic!(
                "{mutant}: not caught: {}\n{:#?}",
                report.run.outcome, report.steps
            );
        };
        assert_eq!(
            (stall.blocked, stall.blocker),
            (renew, waiter_step),
            "{mutant}: {stall}"
        );
        assert_eq!(report.run.outcome.exit(), model::Exit::Finding);
        // What the history alone shows: nothing (the renew answered ok, only late).
        assert!(
            report.verdict.as_ref().is_some_and(|v| v.is_linearizable()),
            "{mutant}: {:?}",
            report.verdict
        );
        let answered = op_of(&report, renew);
        assert!(
            matches!(answered.result, OpResult::Ok(Answer::Renewed { .. })),
            "{mutant}: {answered:?}"
        );
        println!("{mutant}: {}; {stall}", line(&report));

        // Negative control: on pg_lease the renew never waits and there is no stall.
        let control = run(&rt, &shipped, plan, &RunOptions::default());
        assert!(
            matches!(control.run.outcome, Outcome::Linearizable(_)) && control.stalls.is_empty(),
            "{mutant} plan on pg_lease: {}",
            control.run.outcome
        );
        assert_eq!(control.steps[renew].waited, None, "{:#?}", control.steps);
    }
}

/// The race plans whose transaction idles before its call (`Step::Pause`): pg_lease passes
/// every one (its aged blocking acquire waits from its own start and takes the key released
/// meanwhile); each catalogued mutant that reads time from the transaction's start
/// (`now()`) fails one of them, naming an invariant its catalogue entry gives. The aged
/// waiter's early timeout is rejected by its window, pinned by the calls around it to a few
/// milliseconds against a 250 ms wait.
#[test]
fn the_aged_plans_pass_on_pg_lease_and_catch_time_read_from_the_transactions_start() {
    let rt = runtime();
    // An aged plan's process idles right after its own step (its BEGIN or a call of its
    // transaction); the plans across a lease's expiry idle the lock holder after another
    // process's waiting call.
    let aged: Vec<Plan> = stepped::race_plans()
        .expect("valid race plans")
        .into_iter()
        .filter(|p| {
            p.steps
                .windows(2)
                .any(|w| matches!(w[1].action, Step::Pause(_)) && w[0].process == w[1].process)
        })
        .collect();
    assert_eq!(aged.len(), 8);
    let shipped = stage_for_pg_lease(&rt);
    for plan in &aged {
        let report = run(&rt, &shipped, plan, &RunOptions::default());
        assert!(
            matches!(report.run.outcome, Outcome::Linearizable(_)),
            "pg_lease: {}\n{:#?}",
            report.run.outcome,
            report.steps
        );
        let waiter = plan
            .steps
            .iter()
            .position(|s| matches!(&s.action, Step::Call(c) if c.call == CallKind::AcquireWait));
        if let Some(waiter) = waiter {
            let waited = op_of(&report, waiter);
            assert!(
                matches!(waited.result, OpResult::Ok(Answer::Acquired { .. })),
                "pg_lease's aged waiter: {waited:?}"
            );
        }
    }
    for name in [
        "wait_deadline_from_transaction_start",
        "inspect_uses_now",
        "grant_dated_from_transaction_start",
        "lapse_judged_from_transaction_start",
        "probe_judged_from_transaction_start",
    ] {
        let mutant = harness::mutants::MUTANTS
            .iter()
            .find(|m| m.name == name)
            .expect("a catalogued mutant");
        let stage = stage(&rt, target(&format!("mutant:{name}")));
        let mut outcomes = Vec::new();
        let caught = aged.iter().find_map(|plan| {
            let report = run(&rt, &stage, plan, &RunOptions::default());
            outcomes.push(report.run.outcome.name());
            match &report.run.outcome {
                Outcome::Violation(v) => Some((v.invariant, line(&report))),
                _ => None,
            }
        });
        let Some((invariant, line)) = caught else {
            panic!("{name} passed every aged plan: {outcomes:?}");
        };
        assert!(
            mutant.kill.named_by(invariant),
            "{name}: caught as {invariant:?}, its catalogue entry wants {}",
            mutant.kill.wanted()
        );
        println!("{name}: {line}, {invariant:?}");
    }
}

/// The control of the expectation comparison: on the shipped pg_lease, a plan whose
/// expectations are right passes, and the same plan expecting a wrong answer (the second
/// owner's acquire `granted`) is a finding naming the step, its line and both answers,
/// though its history is linearizable.
#[test]
fn a_plan_whose_expectation_is_wrong_is_a_finding_on_a_linearizable_history() {
    use harness::judgement::Judgement;
    let rt = runtime();
    let stage = stage_for_pg_lease(&rt);
    let text = |second: &str| {
        format!(
            "processes 2\nkeys 1\np0 acquire k0 ttl 1min expect granted\n\
             p1 acquire k0 ttl 1min expect {second}\np1 inspect k0 expect held\n"
        )
    };
    let right = Plan::from_text(&text("denied")).expect("a plan");
    let report = run(&rt, &stage, &right, &RunOptions::default());
    assert_eq!(report.judgement(), Judgement::Pass, "{}", line(&report));
    let wrong = Plan::from_text(&text("granted")).expect("a plan");
    let report = run(&rt, &stage, &wrong, &RunOptions::default());
    assert!(
        matches!(report.run.outcome, Outcome::Linearizable(_)),
        "{}",
        line(&report)
    );
    let want = "a call did not answer as the plan expects: step 1 (`p1 acquire k0 as own ttl \
                1min expect granted`): expected granted, came back denied";
    assert_eq!(report.judgement(), Judgement::finding(want));
}
