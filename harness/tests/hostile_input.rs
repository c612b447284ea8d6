//! Hostile input as a property (harness::security::hostile), on every tested major, called
//! by a non-superuser on a trusted install: any text, interval or bigint argument gives a
//! result or SQLSTATE 22023 with the DETAIL the spec names, never another error, and lease
//! state changes only as the spec allows (the table read by the superuser and inspect of
//! watched keys, before and after each call). Negative controls: pg_lease builds without
//! the key-length or interval bound fail the property by the violation each names.

use harness::extension::{ExtensionFiles, MUTANTS};
use harness::judgement::Failure;
use harness::pg::{shared, test_majors, Cluster, PgInstall};
use harness::security::hostile::{self, run_case, Call, CaseOutcome, IntervalInput, Target};
use harness::security::Fixture;
use model::time::Interval;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use std::collections::BTreeMap;

/// pg_lease as built here, installed under a name of its own (the install's extension
/// directory is shared with every other checkout on the machine); returns the name.
fn under_test(cluster: &Cluster) -> String {
    let files = ExtensionFiles::renamed("pg_lease_hostile_under_test");
    cluster
        .install()
        .expect("a managed cluster")
        .install_extension(&files)
        .expect("install pg_lease's files");
    files.name
}

/// Cases per major.
const CASES: u32 = 256;

fn text(s: &str) -> Option<String> {
    Some(s.to_string())
}

fn fields(months: i32, days: i32, micros: i64) -> Option<IntervalInput> {
    Some(IntervalInput::Fields(Interval {
        months,
        days,
        micros,
    }))
}

fn cast(s: &str) -> Option<IntervalInput> {
    Some(IntervalInput::Text(s.to_string()))
}

/// Cases that must always run, whatever the random draw: the edges the issue names.
fn fixed_cases() -> Vec<Call> {
    let acquire = |key: Option<String>, ttl, wait| Call::Acquire {
        key,
        owner: text("alice"),
        ttl,
        wait,
    };
    let hour = fields(0, 0, 3_600_000_000);
    let zero = fields(0, 0, 0);
    vec![
        acquire(text(&"k".repeat(1024)), hour.clone(), zero.clone()),
        acquire(text(&"k".repeat(1025)), hour.clone(), zero.clone()),
        acquire(text(&"\u{20ac}".repeat(342)), hour.clone(), zero.clone()),
        acquire(text(""), hour.clone(), zero.clone()),
        acquire(text(" \t\n"), hour.clone(), zero.clone()),
        acquire(text("\u{1}\u{1b}[2J\u{7f}"), hour.clone(), zero.clone()),
        acquire(text("w-free"), cast("infinity"), zero.clone()),
        acquire(text("w-free"), cast("-infinity"), zero.clone()),
        acquire(text("w-free"), cast("1 year -1 month"), zero.clone()),
        acquire(text("w-free"), cast("@ 1 hour ago"), zero.clone()),
        acquire(text("w-free"), cast("2200000000 hours"), zero.clone()),
        acquire(
            text("w-free"),
            cast("100 years 1 microsecond"),
            zero.clone(),
        ),
        acquire(text("w-free"), fields(0, 0, i64::MAX), zero.clone()),
        acquire(text("w-free"), fields(0, 0, i64::MIN), zero.clone()),
        acquire(
            text("w-free"),
            fields(i32::MAX, i32::MAX, i64::MAX),
            zero.clone(),
        ),
        acquire(text("w-free"), fields(0, 1, -3_600_000_000), zero.clone()),
        acquire(text("w-free"), hour.clone(), fields(-1, 0, 0)),
        acquire(text("w-held"), hour.clone(), fields(0, 0, 20_000)),
        acquire(None, None, None),
        Call::Renew {
            key: None,
            owner: None,
            epoch: None,
            ttl: None,
        },
        Call::Renew {
            key: text("w-held"),
            owner: text("alice"),
            epoch: Some(i64::MIN),
            ttl: hour.clone(),
        },
        Call::Release {
            key: text("w-held"),
            owner: text("alice"),
            epoch: Some(0),
        },
        Call::Release {
            key: text("w-held"),
            owner: text("bob"),
            epoch: Some(-1),
        },
        Call::Release {
            key: None,
            owner: None,
            epoch: None,
        },
        Call::Inspect { key: None },
        Call::Inspect {
            key: text(&"x".repeat(4000)),
        },
    ]
}

/// Runs the fixed cases and `cases` random ones against `extension` on `cluster`, as a
/// non-superuser of a trusted install; returns a summary of the outcomes, or the first
/// failure (shrunk).
fn property(
    rt: &tokio::runtime::Runtime,
    cluster: &Cluster,
    extension: &str,
    cases: u32,
) -> Result<BTreeMap<String, usize>, String> {
    let fixture = rt
        .block_on(Fixture::create(cluster, extension))
        .expect("a trusted install by the database owner");
    let (su, caller) = rt.block_on(async {
        (
            fixture.superuser().await.expect("superuser connection"),
            fixture
                .connect_as(&fixture.user)
                .await
                .expect("caller connection"),
        )
    });
    let target = Target {
        su: &su,
        caller: &caller,
    };
    rt.block_on(target.seed()).expect("seed the watched keys");
    let mut summary = BTreeMap::new();
    let mut tally = |o: &CaseOutcome| {
        let kind = match o {
            CaseOutcome::Answered(_) => "answered".to_string(),
            CaseOutcome::Invalid { .. } => "22023".to_string(),
            CaseOutcome::CastRefused { code, .. } => format!("cast refused ({code})"),
        };
        *summary.entry(kind).or_insert(0) += 1;
    };
    let mut result = Ok(());
    for call in fixed_cases() {
        match rt.block_on(run_case(&target, &call)) {
            Ok(o) => tally(&o),
            Err(f) => {
                result = Err(format!("fixed case {call:?}: {f}"));
                break;
            }
        }
    }
    if result.is_ok() && cases > 0 {
        let mut runner = TestRunner::new(Config {
            cases,
            max_shrink_iters: 200,
            failure_persistence: None,
            ..Config::default()
        });
        let outcomes = std::cell::RefCell::new(Vec::new());
        let run = runner.run(&hostile::call_strategy(), |call| {
            match rt.block_on(run_case(&target, &call)) {
                Ok(o) => {
                    outcomes.borrow_mut().push(o);
                    Ok(())
                }
                // An infrastructure failure fails the run too (never a pass); its text says
                // which it was.
                Err(f) => Err(TestCaseError::fail(f.to_string())),
            }
        });
        for o in outcomes.borrow().iter() {
            tally(o);
        }
        if let Err(e) = run {
            result = Err(e.to_string());
        }
    }
    rt.block_on(fixture.drop_all()).expect("drop the fixture");
    result.map(|()| summary)
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime")
}

#[test]
fn hostile_arguments_give_a_result_or_22023_and_change_only_what_the_spec_allows() {
    let rt = runtime();
    let mut failures = Vec::new();
    for major in test_majors() {
        let cluster = shared(major).expect("a cluster of the tested major");
        match property(&rt, cluster, &under_test(cluster), CASES) {
            Ok(summary) => {
                println!("PG {major}: {summary:?}");
                // The property saw every kind of outcome (the draw is not degenerate).
                for kind in ["answered", "22023"] {
                    assert!(
                        summary.get(kind).copied().unwrap_or(0) > 10,
                        "PG {major}: too few {kind} cases: {summary:?}"
                    );
                }
                assert!(
                    summary.keys().any(|k| k.starts_with("cast refused")),
                    "PG {major}: no text interval was refused: {summary:?}"
                );
            }
            Err(e) => failures.push(format!("PG {major}: {e}")),
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}

/// A NUL cannot be part of PostgreSQL text: the server refuses the parameter while binding
/// it (22021, invalid byte sequence), before pg_lease runs, and nothing changes.
#[test]
fn a_nul_byte_is_refused_before_pg_lease_runs() {
    let rt = runtime();
    for major in test_majors() {
        let cluster = shared(major).expect("a cluster of the tested major");
        rt.block_on(async {
            let f = Fixture::create(cluster, &under_test(cluster))
                .await
                .expect("a trusted install");
            let su = f.superuser().await.expect("superuser");
            let caller = f.connect_as(&f.user).await.expect("caller");
            let before = harness::security::table_rows(&su).await.expect("rows");
            for sql in [
                "SELECT * FROM lease.acquire($1, 'o', interval '1 hour')",
                "SELECT * FROM lease.inspect($1)",
            ] {
                let err = caller
                    .query(sql, &[&"a\0b"])
                    .await
                    .expect_err("a NUL in a text parameter must be refused");
                let db = err.as_db_error().expect("a server error");
                assert_eq!(db.code().code(), "22021", "PG {major}: {db:?}");
                assert!(
                    db.message().contains("0x00"),
                    "PG {major}: {}",
                    db.message()
                );
                assert!(
                    !db.where_().unwrap_or_default().contains("lease."),
                    "PG {major}: the NUL reached pg_lease: {db:?}"
                );
            }
            let after = harness::security::table_rows(&su).await.expect("rows");
            assert_eq!(before, after, "PG {major}");
            f.drop_all().await.expect("drop the fixture");
        });
    }
}

/// Negative controls: without the key-length bound a 3000-byte key reaches the btree
/// (54000); without the interval bound a 200-year ttl is granted instead of 22023.
#[test]
fn builds_without_the_input_bounds_fail_the_property() {
    let rt = runtime();
    let major = test_majors()[0];
    let install = PgInstall::ensure(major).expect("the tested major");
    let cluster = shared(major).expect("a cluster of the tested major");
    let no_key_limit = MUTANTS
        .iter()
        .find(|m| m.name == "no_key_length_limit")
        .expect("the no_key_length_limit mutant");
    // Incompressible text: the btree cannot shrink it below its row limit.
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let key: String = (0..3000)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            char::from(b'!' + (x % 90) as u8)
        })
        .collect();
    let controls = [
        (
            *no_key_limit,
            Call::Acquire {
                key: Some(key),
                owner: text("alice"),
                ttl: fields(0, 0, 3_600_000_000),
                wait: fields(0, 0, 0),
            },
            "SQLSTATE 54000",
        ),
        (
            hostile::NO_INTERVAL_CAP,
            Call::Acquire {
                key: text("k"),
                owner: text("alice"),
                ttl: fields(2400, 0, 0),
                wait: fields(0, 0, 0),
            },
            "instead of 22023",
        ),
    ];
    for (mutant, call, named) in controls {
        let files = ExtensionFiles::mutant(&mutant).expect("the mutant's edits match");
        install
            .install_extension(&files)
            .expect("install the mutant");
        rt.block_on(async {
            let f = Fixture::create(cluster, &files.name)
                .await
                .expect("a trusted install of the mutant");
            let su = f.superuser().await.expect("superuser");
            let caller = f.connect_as(&f.user).await.expect("caller");
            let target = Target {
                su: &su,
                caller: &caller,
            };
            target.seed().await.expect("seed");
            let verdict = run_case(&target, &call).await;
            f.drop_all().await.expect("drop the fixture");
            match verdict {
                Err(Failure::Violation(why)) if why.contains(named) => {}
                other => panic!(
                    "{}: {other:?}; expected a violation naming {named:?}",
                    mutant.name
                ),
            }
        });
        // The same case passes on pg_lease itself.
        rt.block_on(async {
            let f = Fixture::create(cluster, &under_test(cluster))
                .await
                .expect("a trusted install");
            let su = f.superuser().await.expect("superuser");
            let caller = f.connect_as(&f.user).await.expect("caller");
            let target = Target {
                su: &su,
                caller: &caller,
            };
            target.seed().await.expect("seed");
            let verdict = run_case(&target, &call).await;
            f.drop_all().await.expect("drop the fixture");
            assert!(
                matches!(verdict, Ok(CaseOutcome::Invalid { .. })),
                "pg_lease: {verdict:?}"
            );
        });
    }
}
