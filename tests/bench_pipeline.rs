//! `leasecheck bench --quick` end to end (a pipeline test, not a timing assertion): every
//! workload measured at two client counts by both drivers, result.json readable with the
//! environment recorded, report.md and the SVG plots written, the cluster in /dev/shm
//! (`common::bench`). About 90 s.

mod common;

use bench::result::Driver;
use bench::workloads::{self, WORKLOADS};
use bench::BenchResult;
use common::{bench, only_dir};

#[test]
fn a_quick_run_measures_every_workload_and_writes_result_report_and_plots() {
    let out = tempfile::tempdir().expect("a temp dir");
    let out_arg = out.path().to_str().expect("utf-8 path");
    let (code, stdout, stderr) = bench(&["--quick", "--clients", "1,4", "--out", out_arg]);
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    let dir = only_dir(out.path());
    let r = BenchResult::read(&dir).expect("result.json");
    assert!(r.quick);
    assert_eq!(r.major, 15);
    let e = &r.environment;
    assert!(
        e.server_version.starts_with("PostgreSQL 15."),
        "{}",
        e.server_version
    );
    assert!(
        e.pgbench_version.starts_with("pgbench (PostgreSQL)"),
        "{}",
        e.pgbench_version
    );
    assert_eq!(e.gucs.get("fsync").map(String::as_str), Some("on"));
    assert_eq!(
        e.gucs.get("synchronous_commit").map(String::as_str),
        Some("on")
    );
    assert_eq!(e.gucs.len(), bench::env::GUCS.len());
    assert!(e.cpu_cores >= 1 && !e.cpu_model.is_empty() && !e.kernel.is_empty());
    assert!(!e.storage.filesystem.is_empty() && e.storage.filesystem != "unknown");
    assert_eq!(e.extension_version, harness::extension::VERSION);

    for clients in [1, 4] {
        for w in WORKLOADS {
            let has = |d: Driver| r.figure(w.name, w.script_op, clients, d).is_some();
            assert!(
                has(Driver::RustClosed) && has(Driver::PgbenchClosed),
                "{} @{clients}",
                w.name
            );
            assert_eq!(has(Driver::RustOpen), w.open_loop, "{} @{clients}", w.name);
            assert_eq!(
                has(Driver::PgbenchOpen),
                w.open_loop,
                "{} @{clients}",
                w.name
            );
            for step in w.steps {
                let f = r.figure(w.name, step, clients, Driver::RustClosed);
                let answers: u64 = f.map(|f| f.outcomes.values().sum()).unwrap_or(0);
                assert!(
                    answers > 0,
                    "{}/{step} @{clients}: no answers counted",
                    w.name
                );
            }
        }
        for op in bench::lockstore_ops::OPS {
            assert!(r
                .figure(workloads::LOCKSTORE, op, clients, Driver::RustClosed)
                .is_some());
        }
    }
    assert!(r
        .figure(workloads::WAKE, "wake", 1, Driver::RustClosed)
        .is_some());
    for f in &r.figures {
        let m = &f.median;
        assert!(m.count > 0, "{}", f.key());
        assert!(
            m.p50_us <= m.p95_us
                && m.p95_us <= m.p99_us
                && m.p99_us <= m.p999_us
                && m.p999_us <= m.max_us,
            "{}: {m:?}",
            f.key()
        );
    }
    assert!(!r.targets.is_empty());

    let report = std::fs::read_to_string(dir.join("report.md")).expect("report.md");
    for section in ["## Environment", "## Targets", "## Figures", "## Plots"] {
        assert!(report.contains(section), "report.md lacks {section}");
    }
    let plots: Vec<&str> = report
        .lines()
        .filter_map(|l| {
            l.strip_prefix("![")
                .and_then(|l| l.split_once(']'))
                .map(|(name, _)| name)
        })
        .collect();
    assert!(plots.contains(&"throughput.svg"), "{plots:?}");
    assert!(plots.contains(&"latency-W1-cycle-cycle.svg"), "{plots:?}");
    for p in plots {
        let svg = std::fs::read_to_string(dir.join(p)).expect("the plot");
        assert!(
            svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"),
            "{p}"
        );
    }
}

#[test]
fn an_unreadable_baseline_is_an_infrastructure_failure_not_a_regression() {
    let empty = tempfile::tempdir().expect("a temp dir");
    let (code, stdout, stderr) = bench(&[
        "--quick",
        "--compare",
        empty.path().to_str().expect("utf-8"),
    ]);
    assert_eq!(code, 2, "{stdout}\n{stderr}");
    assert!(stderr.contains("reading the baseline"), "{stderr}");
}
