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

/// The summary row of `op` in a breakdown: (round trip p50, mean, executing the call).
fn breakdown_row(text: &str, op: &str) -> (f64, f64, f64) {
    let line = text
        .lines()
        .find(|l| l.starts_with(&format!("| {op} |")))
        .unwrap_or_else(|| panic!("no row of {op} in:\n{text}"));
    let cells: Vec<f64> = line
        .split('|')
        .filter_map(|c| c.trim().parse().ok())
        .collect();
    (cells[0], cells[1], cells[2])
}

/// `bench --breakdown` profiles W1's grant, renew and release and the floor UPDATE on a
/// throwaway cluster: each op's server execution is part of its round trip, and each
/// write's API function ran once per call (pg_stat_user_functions). Every call must answer
/// what its phase measures: the control, a build whose renew changes the epoch, fails the
/// release phase (its calls carry the grant's epoch) instead of profiling a refusal.
#[test]
fn the_breakdown_profiles_each_write_and_refuses_to_profile_a_refusal() {
    let out = tempfile::tempdir().expect("a temp dir");
    let out_arg = out.path().to_str().expect("utf-8 path");
    let (code, stdout, stderr) = bench(&["--breakdown", "--iterations", "200", "--out", out_arg]);
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    for op in ["grant", "renew", "release", "floor-update"] {
        let (p50, mean, executed) = breakdown_row(&stdout, op);
        assert!(p50 > 0.0 && executed > 0.0, "{op}: {stdout}");
        assert!(
            executed <= mean,
            "{op} executed {executed} of a {mean} round trip"
        );
    }
    for function in ["lease.acquire", "lease.renew", "lease.release"] {
        let row = stdout
            .lines()
            .find(|l| l.starts_with(&format!("| {function} |")))
            .unwrap_or_else(|| panic!("{function} not profiled:\n{stdout}"));
        assert!(row.starts_with(&format!("| {function} | 1.00 |")), "{row}");
    }
    let written = std::fs::read_dir(out.path()).unwrap().count();
    assert_eq!(written, 1, "the breakdown's markdown file");

    let mutant = harness::extension::ExtensionFiles::mutant(common::mutant("renew_changes_epoch"))
        .expect("the mutant applies");
    let dir = tempfile::tempdir().expect("a temp dir");
    let control = dir.path().join(format!("{}.control", mutant.name));
    std::fs::write(control, &mutant.control).unwrap();
    for (name, text) in &mutant.scripts {
        std::fs::write(dir.path().join(name), text).unwrap();
    }
    let (code, stdout, stderr) = bench(&[
        "--breakdown",
        "--iterations",
        "20",
        "--extension-dir",
        dir.path().to_str().unwrap(),
        "--out",
        out_arg,
    ]);
    assert_eq!(code, 2, "{stdout}\n{stderr}");
    assert!(stderr.contains("release call 0: answered"), "{stderr}");
}
