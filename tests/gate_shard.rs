//! `leasecheck gate --shard K/N` and `leasecheck report merge` end to end on PostgreSQL 15:
//! three shards of a run, run side by side as three CI runners would, merge to the
//! unsharded run's verdict and checks, on the shipped extension and on two mutants (one
//! with a finding, one that hangs); so does the same run in three lanes of one gate
//! (`--jobs 3`). Bounded to three cheap suites (liveness, campaign, matrix: one unit per
//! shard); the full quick gate sharded is recorded in results/gate.

mod common;
use common::{each_check, leasecheck, mutant, summary};

use harness::extension::ExtensionFiles;
use serde_json::Value;
use std::path::{Path, PathBuf};

/// The suites of the test run in CI (one unit per shard; the cheapest three, about 10 s
/// in all on the shipped build).
const SUITES: [&str; 3] = ["liveness", "campaign", "matrix"];

/// (major, suite, check, status, invariant) of every check, in the report's order.
type Check = (u64, String, String, String, Option<String>);

fn checks(summary: &Value) -> Vec<Check> {
    let text = |v: &Value| v.as_str().unwrap_or("").to_string();
    each_check(summary)
        .into_iter()
        .map(|(major, suite, check)| {
            let invariant = check["invariant"].as_str().map(String::from);
            (
                major,
                suite.to_string(),
                text(&check["name"]),
                text(&check["status"]),
                invariant,
            )
        })
        .collect()
}

/// The build's options: this checkout's extension, or a mutant written into `dir` as one
/// install script and its control file.
fn build_options(name: Option<&str>, dir: &Path) -> Vec<String> {
    let Some(name) = name else {
        return Vec::new();
    };
    let files = ExtensionFiles::mutant(mutant(name)).expect("the mutant applies");
    let sql = dir.join(format!("{name}.sql"));
    let control = dir.join("pg_lease.control");
    std::fs::write(&sql, files.install_script()).unwrap();
    std::fs::write(&control, &files.control).unwrap();
    vec![
        "--extension-sql".into(),
        sql.display().to_string(),
        "--control".into(),
        control.display().to_string(),
    ]
}

/// `leasecheck gate` on PG 15 with `suites` (all when empty) and the test's seed, `more`
/// options, writing its report into `report`.
fn gate(suites: &[&str], build: &[String], more: &[String], report: &Path) -> (i32, String) {
    let mut args: Vec<String> = ["gate", "--pg", "15", "--quick", "--seed", "5"]
        .map(String::from)
        .to_vec();
    for s in suites {
        args.extend(["--suite".into(), s.to_string()]);
    }
    args.extend(build.iter().cloned());
    args.extend(more.iter().cloned());
    args.extend(["--report".into(), report.display().to_string()]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    leasecheck(&args)
}

/// `got` has `want`'s verdict, check names and suite statuses, and with
/// [`Exactness::Checks`] every check's status and invariant; the checks of another status
/// are printed.
fn assert_same(got: &Value, want: &Value, exactness: Exactness, what: &str) {
    assert_eq!(got["status"], want["status"], "{what}");
    let name = |c: &Check| (c.0, c.1.clone(), c.2.clone());
    let names = |s: &Value| checks(s).iter().map(name).collect::<Vec<_>>();
    assert_eq!(names(got), names(want), "{what}");
    assert_eq!(suite_statuses(got), suite_statuses(want), "{what}");
    match exactness {
        Exactness::Checks => assert_eq!(checks(got), checks(want), "{what}"),
        Exactness::Suites => {
            let differ: Vec<_> = checks(got)
                .into_iter()
                .zip(checks(want))
                .filter(|(g, w)| g != w)
                .map(|(g, w)| {
                    let (gi, wi) = (g.4.unwrap_or_default(), w.4.unwrap_or_default());
                    format!("{} / {}: {} {gi}, unsharded {} {wi}", g.1, g.2, g.3, w.3)
                })
                .collect();
            println!(
                "{what}: {} check(s) of another status:\n{}",
                differ.len(),
                differ.join("\n")
            );
        }
    }
}

/// (major, suite, status) of every suite.
fn suite_statuses(summary: &Value) -> Vec<(u64, String, String)> {
    let mut out = Vec::new();
    for major in summary["majors"].as_array().expect("majors") {
        for suite in major["suites"].as_array().expect("suites") {
            out.push((
                major["major"].as_u64().unwrap_or(0),
                suite["suite"].as_str().unwrap_or("").to_string(),
                suite["status"].as_str().unwrap_or("").to_string(),
            ));
        }
    }
    out
}

/// Every timeline the merged report links to is in it.
fn assert_links_resolve(report: &Path, summary: &Value) {
    for (_, _, check) in each_check(summary) {
        if let Some(t) = check["timeline"].as_str() {
            assert!(report.join(t).is_file(), "{t} is not in {report:?}");
        }
    }
}

#[test]
fn three_shards_merge_to_the_unsharded_verdict_and_checks() {
    // The matrix's settings on a build without mutual exclusion fail by how its races
    // fall: there the checks' names and the suites' statuses are compared.
    let builds = [
        (None, 0, Exactness::Checks),
        (Some("acquire_ignores_holder"), 1, Exactness::Suites),
        (Some("renew_spins_on_a_free_key"), 1, Exactness::Checks),
    ];
    for (build, code_wanted, exactness) in builds {
        sharded_equals_unsharded(&SUITES, build, code_wanted, exactness);
    }
}

/// The whole quick gate on PG 15 in three shards, run one after another (about 10 minutes
/// a build): the shipped extension, a mutant every suite catches and one only the faults
/// suite catches. On a mutant some checks' outcomes depend on how its races fall (the
/// attack-surface statements on a build without mutual exclusion), so there the verdict,
/// the check names and every suite's status are compared, and the checks whose status
/// differs are printed. `SHARD_BUILDS=shipped,NAME` picks builds; with `SHARD_REPORTS=DIR`
/// the unsharded and merged summaries are kept there (results/gate/sharded-quick-pg15).
#[test]
#[ignore]
fn the_quick_gate_in_three_shards_merges_to_the_unsharded_run() {
    let builds = [
        (None, 0, Exactness::Checks),
        (Some("acquire_ignores_holder"), 1, Exactness::Suites),
        (Some("nemesis_unlogged_table"), 1, Exactness::Suites),
    ];
    let picked = std::env::var("SHARD_BUILDS").ok();
    for (build, code_wanted, exactness) in builds {
        let name = build.unwrap_or("shipped");
        if picked
            .as_ref()
            .is_some_and(|p| !p.split(',').any(|b| b == name))
        {
            continue;
        }
        sharded_equals_unsharded(&[], build, code_wanted, exactness);
    }
}

/// What must be equal beyond the verdict and the check names.
#[derive(Clone, Copy, PartialEq)]
enum Exactness {
    /// Every check's status and invariant.
    Checks,
    /// Every suite's status.
    Suites,
}

/// Gates `build` with `suites` unsharded and in three shards (side by side or one after
/// another), merges the shards' reports and compares.
fn sharded_equals_unsharded(
    suites: &[&str],
    build: Option<&str>,
    code_wanted: i32,
    exactness: Exactness,
) {
    // The CI-sized runs go side by side, as three runners would run them.
    let side_by_side = !suites.is_empty();
    let work = tempfile::tempdir().unwrap();
    let options = build_options(build, work.path());
    let whole = work.path().join("whole");
    // The reference is one lane, one suite at a time.
    let one_lane = ["--jobs".to_string(), "1".to_string()];
    let (code, out) = gate(suites, &options, &one_lane, &whole);
    println!("{build:?} unsharded: {out}");
    assert_eq!(code, code_wanted, "{build:?}: {out}");
    let dirs: Vec<PathBuf> = (1..=3)
        .map(|k| work.path().join(format!("shard{k}")))
        .collect();
    let shard = |k: usize, dir: &Path| {
        let shard = vec!["--shard".to_string(), format!("{}/3", k + 1)];
        gate(suites, &options, &shard, dir)
    };
    let shard_runs: Vec<(i32, String)> = match side_by_side {
        true => std::thread::scope(|scope| {
            let runs: Vec<_> = dirs
                .iter()
                .enumerate()
                .map(|(k, dir)| scope.spawn(move || shard(k, dir)))
                .collect();
            runs.into_iter().map(|r| r.join().unwrap()).collect()
        }),
        false => dirs.iter().enumerate().map(|(k, d)| shard(k, d)).collect(),
    };
    for (k, (_, out)) in shard_runs.iter().enumerate() {
        println!("{build:?} shard {}/3: {out}", k + 1);
        assert!(out.contains(&format!("shard {}/3 (", k + 1)), "{out}");
    }
    let merged = work.path().join("merged");
    let mut args = vec![
        "report".to_string(),
        "merge".into(),
        "--out".into(),
        merged.display().to_string(),
    ];
    args.extend(dirs.iter().map(|d| d.display().to_string()));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let (merged_code, out) = leasecheck(&args);
    println!("{build:?} merged: {out}");
    let (want, got) = (summary(&whole), summary(&merged));
    if let Ok(keep) = std::env::var("SHARD_REPORTS") {
        let keep = Path::new(&keep).join(build.unwrap_or("shipped"));
        std::fs::create_dir_all(&keep).unwrap();
        std::fs::copy(whole.join("summary.json"), keep.join("unsharded.json")).unwrap();
        std::fs::copy(merged.join("summary.json"), keep.join("merged.json")).unwrap();
    }
    assert_eq!(merged_code, code, "{build:?}: {out}");
    assert_same(&got, &want, exactness, &format!("{build:?} merged"));
    assert_eq!(got["merged_shards"], 3);
    assert!(merged.join("junit.xml").is_file() && merged.join("index.html").is_file());
    assert_links_resolve(&merged, &got);
    if side_by_side {
        // The same run in three lanes of one gate (`--jobs 3`): the unsharded checks.
        let lanes = work.path().join("lanes");
        let jobs = ["--jobs".to_string(), "3".to_string()];
        let (lanes_code, out) = gate(suites, &options, &jobs, &lanes);
        println!("{build:?} in three lanes: {out}");
        assert!(out.contains("3 lanes: lane 1: "), "{out}");
        let in_lanes = summary(&lanes);
        assert_eq!(lanes_code, code, "{build:?}: {out}");
        assert_same(&in_lanes, &want, exactness, &format!("{build:?} in lanes"));
        assert_links_resolve(&lanes, &in_lanes);
    }
}

/// The control: two of three shards are not the run, and a shard of another seed is not
/// one of its shards; both are refused (exit 2), naming what is wrong.
#[test]
fn an_incomplete_or_mixed_set_of_shards_is_refused() {
    let work = tempfile::tempdir().unwrap();
    let dirs: Vec<PathBuf> = (1..=3).map(|k| work.path().join(format!("s{k}"))).collect();
    // Summaries of shards 1-3 of a run on nothing (the refusals come before any
    // result is read), the third of another seed.
    for (k, dir) in dirs.iter().enumerate() {
        std::fs::create_dir_all(dir).unwrap();
        let summary = serde_json::json!({
            "schema": 3, "leasecheck": "0", "extension": "pg_lease", "version": "0.3.0",
            "scripts": [], "size": "quick", "started": "x", "seconds": 1.0,
            "seed": if k == 2 { 6 } else { 5 }, "status": "passed", "majors": [],
            "shard": {"index": k + 1, "count": 3, "majors": [15], "suites": SUITES,
                      "faults": [], "units": []}
        });
        std::fs::write(dir.join("summary.json"), summary.to_string()).unwrap();
    }
    let out = work.path().join("out");
    let (code, text) = leasecheck(&[
        "report",
        "merge",
        "--out",
        out.to_str().unwrap(),
        dirs[0].to_str().unwrap(),
    ]);
    assert_eq!(code, 2, "{text}");
    assert!(text.contains("shard(s) [2, 3] of 3 missing"), "{text}");
    let (code, text) = leasecheck(&[
        "report",
        "merge",
        "--out",
        out.to_str().unwrap(),
        dirs[0].to_str().unwrap(),
        dirs[1].to_str().unwrap(),
        dirs[2].to_str().unwrap(),
    ]);
    assert_eq!(code, 2, "{text}");
    assert!(text.contains("its seed is Some(6), not Some(5)"), "{text}");
    assert!(!out.join("summary.json").exists());
}
