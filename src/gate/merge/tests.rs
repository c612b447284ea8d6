//! The merge's unit tests: a run split as `--shard` splits it merges back to itself.

use super::*;
use crate::gate::outcome::{CheckResult, Status};
use crate::gate::shard::{self, Shard};
use std::time::Duration;

const SUITES: [&str; 4] = ["liveness", "conformance", "campaign", "faults"];

fn suite(name: &str, failed: bool) -> SuiteResult {
    let d = Duration::from_secs(1);
    let mut checks = vec![CheckResult::passed(format!("{name} a"), d)];
    if failed {
        checks.push(CheckResult::failed(format!("{name} b"), "inv04".into(), d));
    }
    SuiteResult::of(name, checks, d)
}

/// An unsharded run on 14 and 15; `failing` names (major, suite) with a finding.
fn unsharded(failing: &[(u32, &str)]) -> GateRun {
    let majors = [14, 15]
        .map(|m| {
            let suites = SUITES
                .iter()
                .map(|s| suite(s, failing.contains(&(m, s))))
                .collect();
            MajorResult::of(m, Some(format!("{m}.1")), "local", suites)
        })
        .to_vec();
    GateRun {
        started: "2026-12-05T00:00:00Z".into(),
        seconds: 10.0,
        ..GateRun::of_majors(majors)
    }
}

/// `run` split into `count` shards as `--shard` splits it.
fn split(run: &GateRun, count: u32) -> Vec<ShardReport> {
    let units: Vec<(Unit, u32)> = run
        .majors
        .iter()
        .flat_map(|m| {
            m.suites.iter().enumerate().map(|(i, s)| {
                let unit = Unit {
                    major: m.major,
                    suite: s.suite.clone(),
                };
                (unit, [2, 20, 5, 33][i])
            })
        })
        .collect();
    (1..=count)
        .map(|index| {
            let mine = shard::select(Shard { index, count }, &units).unwrap();
            let majors: Vec<MajorResult> = run
                .majors
                .iter()
                .map(|m| {
                    let mut suites: Vec<SuiteResult> = m
                        .suites
                        .iter()
                        .filter(|s| {
                            mine.iter()
                                .any(|u| u.major == m.major && u.suite == s.suite)
                        })
                        .cloned()
                        .collect();
                    // As the gate runs a shard: the liveness guard first, and
                    // nothing after a hang.
                    if !suites.is_empty() && suites[0].suite != LIVENESS {
                        suites.insert(0, m.suites[0].clone());
                    }
                    let hang = suites
                        .iter()
                        .position(|s| s.checks.iter().any(crate::gate::ctx::is_hang));
                    if let Some(k) = hang {
                        suites.truncate(k + 1);
                    }
                    MajorResult::of(m.major, m.postgres.clone(), "local", suites)
                })
                .filter(|m| !m.suites.is_empty())
                .collect();
            let record = shard::ShardRun {
                index,
                count,
                majors: vec![14, 15],
                suites: SUITES.map(String::from).to_vec(),
                faults: vec!["crash".into()],
                units: mine,
            };
            ShardReport {
                dir: PathBuf::from(format!("shard{index}")),
                run: GateRun {
                    shard: Some(record),
                    status: GateRun::overall(&majors),
                    majors,
                    ..run.clone()
                },
            }
        })
        .collect()
}

/// (major, suite, check, status) of every check.
fn checks(run: &GateRun) -> Vec<(u32, String, String, Status)> {
    run.majors
        .iter()
        .flat_map(|m| {
            m.suites.iter().flat_map(move |s| {
                s.checks
                    .iter()
                    .map(move |c| (m.major, s.suite.clone(), c.name.clone(), c.status))
            })
        })
        .collect()
}

#[test]
fn merged_shards_have_the_unsharded_verdict_and_checks() {
    for failing in [
        vec![],
        vec![(15, "campaign")],
        vec![(14, "faults"), (15, "liveness")],
    ] {
        let whole = unsharded(&failing);
        for count in 1..=4 {
            let (merged, cut) = merge(&split(&whole, count)).unwrap();
            assert_eq!(merged.status, whole.status, "{failing:?} in {count}");
            assert_eq!(checks(&merged), checks(&whole), "{failing:?} in {count}");
            assert_eq!(merged.merged_shards, Some(count));
            assert!(cut.is_empty());
        }
    }
    // The control: a merge that lost a suite's finding is told apart.
    let whole = unsharded(&[(15, "campaign")]);
    let mut shards = split(&whole, 3);
    for s in &mut shards {
        for m in &mut s.run.majors {
            m.suites.retain(|s| s.suite != "campaign" || m.major != 15);
        }
    }
    let err = merge(&shards).unwrap_err().to_string();
    assert!(err.contains("pg15 campaign"), "{err}");
}

#[test]
fn suites_after_a_hang_are_cut_as_an_unsharded_run_never_runs_them() {
    // A hang in liveness: every shard's guard stops there; in conformance: the shards
    // owning later suites ran them, and the merge does not count them.
    for (at, kept, cut_want) in [
        (0, vec!["liveness"], Vec::<&str>::new()),
        (
            1,
            vec!["liveness", "conformance"],
            vec!["PG 15 campaign", "PG 15 faults"],
        ),
    ] {
        let mut whole = unsharded(&[]);
        let name = SUITES[at];
        let hang = format!("{name}: {}", harness::liveness::HANGS);
        whole.majors[1].suites[at] = SuiteResult::of(
            name,
            vec![CheckResult::failed("calls answer", hang, Duration::ZERO)],
            Duration::ZERO,
        );
        let mut cut_somewhere = false;
        for count in 2..=4 {
            let (merged, cut) = merge(&split(&whole, count)).unwrap();
            cut_somewhere |= !cut.is_empty();
            assert_eq!(merged.status, Status::Failed);
            let on_15: Vec<&str> = merged.majors[1]
                .suites
                .iter()
                .map(|s| s.suite.as_str())
                .collect();
            assert_eq!(on_15, kept, "hang in {name}, {count} shards");
            // What the conformance shard itself did not run is not cut: never run.
            let cut: Vec<&str> = cut.iter().map(String::as_str).collect();
            assert!(
                cut.iter().all(|c| cut_want.contains(c)),
                "hang in {name}, {count} shards: {cut:?}"
            );
            assert_eq!(merged.majors[0].suites.len(), 4);
        }
        assert_eq!(cut_somewhere, !cut_want.is_empty(), "hang in {name}");
    }
}

#[test]
fn shards_that_are_not_one_whole_run_are_refused() {
    let whole = unsharded(&[]);
    let missing = &split(&whole, 3)[..2];
    assert!(matches!(merge(missing), Err(MergeError::Missing { .. })));
    let mut twice = split(&whole, 3);
    twice[2] = split(&whole, 3).remove(0);
    assert!(matches!(
        merge(&twice),
        Err(MergeError::Twice { index: 1, .. })
    ));
    let mut other_seed = split(&whole, 3);
    other_seed[1].run.seed = Some(8);
    let err = merge(&other_seed).unwrap_err();
    assert!(
        matches!(err, MergeError::OtherRun { what: "seed", .. }),
        "{err}"
    );
    let mut mixed = split(&whole, 3);
    mixed[2] = split(&whole, 4).remove(2);
    assert!(matches!(merge(&mixed), Err(MergeError::Count { .. })));
    let not_a_shard = [ShardReport {
        dir: "whole".into(),
        run: whole.clone(),
    }];
    assert!(matches!(merge(&not_a_shard), Err(MergeError::NotAShard(_))));
    assert!(matches!(merge(&[]), Err(MergeError::Empty)));
}
