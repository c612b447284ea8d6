//! Every named fault's check on PostgreSQL 15 (and on 14 where the fault's record asks for
//! it), each with its negative control, which must fail by the failure it names. Each check
//! starts and removes its own cluster. The tests are generated from the fault table
//! (libtest-mimic, `harness = false`): `cargo test -p nemesis --test faults -- pg15::crash`
//! runs one, `-- --list` lists them.
//!
//! Bounded: a check takes 2-13 s here (a cluster start, a few seconds of recording, the
//! check); the tests took about 120 s with 2 test threads on the 2 shared cores.
//! `LEASECHECK_PG_MAJORS` limits the majors.

use harness::pg::{test_majors, PgInstall};
use libtest_mimic::{Arguments, Failed, Trial};
use nemesis::checks::{self, caught, control, Breakage, CheckResult};
use nemesis::{builds, Fault};

/// Whether to print each check's evidence (`--nocapture` or `--show-output`: the
/// generated tests' output is not captured, so a passing check is quiet by default; a
/// failing one says it all in its message).
static VERBOSE: std::sync::OnceLock<bool> = std::sync::OnceLock::new();

fn say(line: String) {
    if VERBOSE.get().copied().unwrap_or(false) {
        println!("{line}");
    }
}

fn install(major: u32) -> Option<PgInstall> {
    if !test_majors().contains(&major) {
        eprintln!("PG {major} is not among LEASECHECK_PG_MAJORS: skipped");
        return None;
    }
    Some(PgInstall::ensure(major).unwrap_or_else(|e| panic!("PostgreSQL {major}: {e}")))
}

fn summary(fault: Fault, result: &CheckResult) -> String {
    match result {
        Ok(p) => format!(
            "{fault} on PG {}: {}\n  {}",
            p.postgres,
            p.verdict,
            p.evidence.join("\n  ")
        ),
        Err(e) => format!("{fault}: {} {e}", e.name()),
    }
}

/// The check passes; a doctored control (the history edited to what a broken server would
/// have answered) is judged on its history right away.
async fn passes(fault: Fault, major: u32) {
    let Some(install) = install(major) else {
        return;
    };
    let result = checks::run(fault, &install, &builds::under_test(), None).await;
    say(summary(fault, &result));
    let Ok(passed) = &result else {
        panic!("{}", summary(fault, &result));
    };
    if let Some(doctored) = checks::doctored_control(fault, passed) {
        let c = control(fault);
        say(format!(
            "control of {fault} ({:?}): {}",
            c.breakage,
            summary(fault, &doctored)
        ));
        assert!(
            caught(c.expects, &doctored),
            "the control of {fault} ({:?}) must fail with {:?}, got: {}",
            c.breakage,
            c.expects,
            summary(fault, &doctored)
        );
    }
}

/// How often a control that runs on its own may run before it must have failed: its
/// failure depends on races falling within the fault's window (the server-pause control
/// once came out linearizable in CI: 2 pauses, 6 calls across them, no violation), so it
/// must fail by the failure it names in one of two runs. Each run is printed.
const CONTROL_RUNS: usize = 2;

/// A control that runs on its own (a broken build, or the fault made to miss); a doctored
/// one is judged in its check's test.
async fn control_is_caught(fault: Fault, major: u32) {
    let c = control(fault);
    if matches!(c.breakage, Breakage::Doctored(_)) {
        say(format!(
            "the doctored control of {fault} is judged in its check's test"
        ));
        return;
    }
    let Some(install) = install(major) else {
        return;
    };
    let mut missed = Vec::new();
    for run in 1..=CONTROL_RUNS {
        let result = checks::run(fault, &install, &builds::under_test(), Some(c.breakage)).await;
        let said = summary(fault, &result);
        say(format!(
            "control of {fault} ({:?}), run {run}: {said}",
            c.breakage
        ));
        if caught(c.expects, &result) {
            if run > 1 {
                eprintln!("control of {fault}: caught on run {run}; missed before: {missed:?}");
            }
            return;
        }
        missed.push(said);
    }
    panic!(
        "the control of {fault} ({:?}) must fail with {:?} in one of {CONTROL_RUNS} runs, got: {}",
        c.breakage,
        c.expects,
        missed.join("\n  then: ")
    );
}

/// A test's body on its own runtime (each test starts and removes its own cluster).
fn on_runtime(
    check: impl std::future::Future<Output = ()> + Send + 'static,
) -> impl FnOnce() -> Result<(), Failed> + Send + 'static {
    move || {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .map_err(|e| Failed::from(format!("a tokio runtime: {e}")))?
            .block_on(check);
        Ok(())
    }
}

/// One test per fault and module, generated from the table (`nemesis::fault::SPECS`), so a
/// new fault's record is all it takes for its tests to run here; each test is named after
/// its fault (`-` as `_`) so that a failure names the fault, and the PG 14 runs are those
/// the record asks for.
fn trials() -> Vec<Trial> {
    let mut trials = Vec::new();
    for fault in Fault::ALL {
        let name = fault.name().replace('-', "_");
        trials.push(Trial::test(
            format!("pg15::{name}"),
            on_runtime(passes(fault, 15)),
        ));
        trials.push(Trial::test(
            format!("pg15_control::{name}"),
            on_runtime(control_is_caught(fault, 15)),
        ));
        if fault.on_pg14_in_tests() {
            trials.push(Trial::test(
                format!("pg14::{name}"),
                on_runtime(passes(fault, 14)),
            ));
        }
    }
    // In name order, as libtest runs tests (and as these ran before they were generated):
    // the PG 14 checks, then the checks, then the controls, so a check and its own control
    // (both pausing, crashing or cutting a server) do not run side by side.
    trials.sort_by(|a, b| a.name().cmp(b.name()));
    trials
}

fn main() {
    let args = Arguments::from_args();
    let _ = VERBOSE.set(args.nocapture || args.show_output);
    libtest_mimic::run(&args, trials()).exit();
}
