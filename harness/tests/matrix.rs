//! The hostile-session matrix (harness::matrix) on every tested major: this checkout's
//! pg_lease (0.3.0, installed under a name of its own) passes every suite under every
//! session setting a caller controls (specs/SEMANTICS.md section 10), each setting shown
//! to bite by its control; pg_lease 0.1.0 fails the matrix under the settings it gets
//! wrong (collations, REPEATABLE READ, SERIALIZABLE, a TimeZone with DST), by a finding.
//!
//! One line per (major, setting, suite, version). `synchronous_commit = off` with a crash
//! is the fault-injection suite's. A setting that came out with no verdict (it did not bite,
//! a budget ran out) or with 0.1.0 passing is run once more on other seeds; a finding about
//! this checkout is final.
//!
//! Bounded: per major, 15 campaigns of 600 ops (one at a time, a few seconds each) and 12
//! conformance runs (15-25 s each, four settings at a time); about 1.5 minutes per major.

use harness::extension::ExtensionFiles;
use harness::matrix::{
    self, CampaignSize, MatrixOptions, Row, Setting, Suite, Verdict, Version, UNDER_TEST,
};
use harness::pg::{test_majors, Cluster, ClusterOptions, PgInstall};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The problems of one major's rows.
fn judge(major: u32, rows: &[Row], settings: &[Setting]) -> Vec<String> {
    let mut problems = Vec::new();
    for &setting in settings {
        let of = |suite: Suite, version: Option<Version>| {
            rows.iter()
                .filter(|r| r.setting == setting && r.suite == suite && r.version == version)
                .collect::<Vec<_>>()
        };
        // This checkout's pg_lease: the control bit, the campaign and the suite passed.
        for (suite, version) in [
            (Suite::Control, None),
            (Suite::Campaign, Some(Version::UnderTest)),
            (Suite::Conformance, Some(Version::UnderTest)),
        ] {
            match of(suite, version).as_slice() {
                [row] if row.verdict.is_pass() => {}
                [row] => problems.push(format!("must pass:\n{row}")),
                other => problems.push(format!(
                    "PG {major} {setting} {}: {} rows, expected 1",
                    suite.name(),
                    other.len()
                )),
            }
        }
        // pg_lease 0.1.0: a finding under each setting it gets wrong, and nothing that is
        // not a finding about it (an infrastructure failure is never counted as one).
        let old: Vec<&Row> = rows
            .iter()
            .filter(|r| r.setting == setting && r.version == Some(Version::V010))
            .collect();
        if setting.fixed_in_0_2_0() {
            if !old.iter().any(|r| r.verdict.is_finding()) {
                problems.push(format!(
                    "PG {major} {setting}: pg_lease 0.1.0 passed every suite (the matrix cannot \
                     fail it there)"
                ));
            }
            for r in &old {
                if matches!(
                    r.verdict,
                    Verdict::Infrastructure(_) | Verdict::NotExercised(_)
                ) {
                    problems.push(format!("pg_lease 0.1.0 neither passed nor failed:\n{r}"));
                }
            }
        } else if !old.is_empty() {
            problems.push(format!(
                "PG {major} {setting}: pg_lease 0.1.0 ran where it is not compared"
            ));
        }
    }
    problems
}

/// Whether a row of this checkout's pg_lease under `setting` is a finding: never run again.
fn finding_about_this_checkout(rows: &[Row], setting: Setting) -> bool {
    rows.iter().any(|r| {
        r.setting == setting && r.version == Some(Version::UnderTest) && r.verdict.is_finding()
    })
}

/// A setting whose problems are no verdict (a control or campaign that did not show the
/// setting at work, a checker budget spent on a loaded machine) or pg_lease 0.1.0 passing
/// where its races did not fall wrong: run once more, alone, on the next seeds; its problems
/// are the second run's, and both are printed. A finding about this checkout is never run
/// again.
async fn once_more(
    major: u32,
    setting: Setting,
    cluster: &Cluster,
    first: &[String],
) -> Vec<String> {
    println!(
        "PG {major} {setting}: run once more after:\n{}",
        first.join("\n")
    );
    let defaults = MatrixOptions::default();
    let size = CampaignSize {
        seed: defaults.size.seed.wrapping_add(1_000),
        ..defaults.size
    };
    let options = MatrixOptions { size, ..defaults };
    let rows = matrix::run_one_setting(major, setting, cluster, &options).await;
    for row in &rows {
        println!("(once more) {row}");
    }
    judge(major, &rows, &[setting])
}

/// The settings to run: all, or those named in `LEASECHECK_MATRIX_SETTINGS` (comma
/// separated; a partial run for development, whose judgement covers only them).
fn settings() -> Vec<Setting> {
    match std::env::var("LEASECHECK_MATRIX_SETTINGS") {
        Ok(names) => Setting::ALL
            .into_iter()
            .filter(|s| names.split(',').any(|n| n.trim() == s.name()))
            .collect(),
        Err(_) => Setting::ALL.to_vec(),
    }
}

/// One test per major, so a runner can run the majors side by side (each has its own
/// cluster); a major not in `LEASECHECK_PG_MAJORS` is skipped with a line saying so.
macro_rules! per_major {
    ($($name:ident: $major:literal),* $(,)?) => {$(
        #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
        async fn $name() {
            every_session_setting_passes_and_0_1_0_fails_the_settings_it_gets_wrong($major).await;
        }
    )*};
}

per_major!(pg15: 15, pg14: 14);

#[test]
fn every_tested_major_has_its_test() {
    for major in test_majors() {
        assert!(
            [15, 14].contains(&major),
            "PG {major} is tested but has no matrix test: add it to per_major!"
        );
    }
}

async fn every_session_setting_passes_and_0_1_0_fails_the_settings_it_gets_wrong(major: u32) {
    if !test_majors().contains(&major) {
        eprintln!("PG {major} is not among LEASECHECK_PG_MAJORS: skipped");
        return;
    }
    let started = Instant::now();
    let mut problems = Vec::new();
    {
        let install = PgInstall::ensure(major).expect("the tested major");
        // Only this test's own extension names: nothing rewrites `pg_lease`'s files.
        let options = ClusterOptions {
            extensions: vec![
                ExtensionFiles::renamed(UNDER_TEST),
                ExtensionFiles::version_0_1_0(),
            ],
            ..ClusterOptions::default()
        };
        let cluster = Cluster::start_with(&install, options).expect("a cluster");
        for version in [Version::UnderTest, Version::V010] {
            if let Err(e) = matrix::check_version(&cluster, version).await {
                panic!("PG {major}: infrastructure, not a finding: {e}");
            }
        }
        let major_started = Instant::now();
        let cluster = Arc::new(cluster);
        let rows = matrix::run_major(
            Arc::new(install),
            Arc::clone(&cluster),
            &settings(),
            MatrixOptions::default(),
        )
        .await;
        for row in &rows {
            println!("{row}");
        }
        println!("PG {major}: matrix took {:.1?}", major_started.elapsed());
        for setting in settings() {
            let found = judge(major, &rows, &[setting]);
            if found.is_empty() || finding_about_this_checkout(&rows, setting) {
                problems.extend(found);
                continue;
            }
            problems.extend(once_more(major, setting, &cluster, &found).await);
        }
    }
    println!("Conformance checks not run, by setting:");
    for (setting, check, why) in matrix::not_run() {
        println!("  {setting}: {check}: {why}");
    }
    let elapsed = started.elapsed();
    println!("the matrix took {elapsed:.1?}");
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    // A hang guard, not a performance claim: about 1.5 minutes per major on a quiet
    // machine, 4.6 minutes with two cargo builds beside it; 10 minutes leaves room for a
    // loaded machine and still ends a hang well before CI's own limit.
    assert!(elapsed < Duration::from_secs(600), "took {elapsed:?}");
}
