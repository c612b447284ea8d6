//! (A module of tests/stepped.rs, sharing its runtime and stage.) A plan's `setup` and
//! `teardown` statements against a real server: the setup runs before the steps and the
//! teardown after them; a failing setup statement ends the run without a verdict, naming
//! the statement and the server's error, never a pass.

use super::lapse::run_text;
use super::{runtime, stage_for_pg_lease};
use harness::judgement::Judgement;

/// The setup creates a table the teardown drops: a teardown that did not run (or a setup
/// that did not) fails the next run's setup or this run's teardown.
const MARKED: &str = "\
processes 2
keys 1
setup CREATE TABLE public.leasecheck_marker (note text)  # a comment is cut
teardown DROP TABLE public.leasecheck_marker
p0 inspect k0 expect never-leased
";

#[test]
fn setup_runs_before_the_steps_and_teardown_after_them() {
    let rt = runtime();
    let stage = stage_for_pg_lease(&rt);
    for run in 1..=2 {
        let report = run_text(&rt, &stage, MARKED);
        assert_eq!(
            report.judgement(),
            Judgement::Pass,
            "run {run}: {:#?}",
            report.steps
        );
    }

    // Control: a setup the server refuses is no verdict naming it, and the teardown
    // still runs (the marker the next setup creates again is gone).
    let refused = MARKED.replace(
        "setup CREATE TABLE public.leasecheck_marker (note text)",
        "setup CREATE TABLE public.leasecheck_marker (note text)\n\
         setup SELECT public.leasecheck_no_such_function()",
    );
    match run_text(&rt, &stage, &refused).judgement() {
        Judgement::NoVerdict { why, .. } => {
            assert!(
                why.contains(
                    "the plan's setup statement `SELECT public.leasecheck_no_such_function()` \
                     failed"
                ),
                "{why}"
            );
            assert!(why.contains("42883"), "{why}");
        }
        other => panic!("a refused setup was judged {other:?}"),
    }
    let report = run_text(&rt, &stage, MARKED);
    assert_eq!(report.judgement(), Judgement::Pass, "{:#?}", report.steps);
}
