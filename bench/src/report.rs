//! `report.md`: the environment, the targets, every figure and the driver comparison.

use crate::result::{BenchResult, Figure};
use crate::workloads;
use std::fmt::Write;

pub fn render(r: &BenchResult, plots: &[String]) -> String {
    let mut s = String::new();
    let e = &r.environment;
    let _ = writeln!(
        s,
        "# pg_lease bench, PostgreSQL {} ({})\n",
        r.major, r.started_at
    );
    let _ = writeln!(
        s,
        "{} run: {} s warm-up (excluded), {} s measured, {} repeat(s) (figures are medians; spread = min..max), clients {:?}, wake samples {}; open loop at {:.0} % of the closed loop's throughput.\n",
        if r.quick { "Quick" } else { "Full" },
        r.settings.warmup_s,
        r.settings.measure_s,
        r.settings.repeats,
        r.settings.clients,
        r.settings.wake_samples,
        r.settings.open_loop_share * 100.0
    );
    s.push_str("## Environment\n\n| | |\n|---|---|\n");
    let rows = [
        ("server", e.server_version.clone()),
        ("server binaries", e.server_bin_dir.clone()),
        (
            "pgbench",
            format!(
                "{} ({}; {})",
                e.pgbench_version, e.pgbench_path, e.pgbench_note
            ),
        ),
        (
            "extension",
            format!("{} {}", e.extension, e.extension_version),
        ),
        ("OS / kernel", format!("{} / {}", e.os, e.kernel)),
        ("CPU", format!("{} ({} cores)", e.cpu_model, e.cpu_cores)),
        ("memory", e.memory_total.clone()),
        (
            "data directory",
            format!(
                "{} on {} ({}, device {}, rotational {})",
                e.storage.data_dir,
                e.storage.mount_point,
                e.storage.filesystem,
                e.storage.device,
                e.storage.rotational
            ),
        ),
    ];
    for (k, v) in rows {
        let _ = writeln!(s, "| {k} | {v} |");
    }
    for (k, v) in &e.gucs {
        let _ = writeln!(s, "| {k} | {v} |");
    }
    s.push_str("\n## Targets\n\n| target | value | limit | met | basis |\n|---|---|---|---|---|\n");
    for t in &r.targets {
        let _ = writeln!(
            s,
            "| {} | {:.3} | {} | {} | {} |",
            t.name,
            t.value,
            t.limit,
            if t.met { "yes" } else { "**no**" },
            t.basis
        );
    }
    s.push_str("\n## Figures (µs)\n\n");
    s.push_str("| workload/op | clients | driver | p50 | p95 | p99 | p99.9 | max | count | per s | p50 spread | p99 spread | / floor p50 | WAL B/stmt |\n");
    s.push_str("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
    for f in ordered(r) {
        let m = &f.median;
        let _ = writeln!(
            s,
            "| {}/{} | {} | {}{} | {:.0} | {:.0} | {:.0} | {:.0} | {:.0} | {} | {:.0} | {:.0}..{:.0} | {:.0}..{:.0} | {} | {} |",
            f.workload,
            f.op,
            f.clients,
            f.driver.label(),
            f.rate_per_s.map(|r| format!(" at {r:.0}/s")).unwrap_or_default(),
            m.p50_us,
            m.p95_us,
            m.p99_us,
            m.p999_us,
            m.max_us,
            m.count,
            m.throughput_per_s,
            f.spread.p50_us_min,
            f.spread.p50_us_max,
            f.spread.p99_us_min,
            f.spread.p99_us_max,
            r.floor_ratio(f).map(|x| format!("{x:.2}x")).unwrap_or_default(),
            f.wal_bytes_per_statement.map(|w| format!("{w:.1}")).unwrap_or_default(),
        );
    }
    s.push_str(
        "\n## Answers counted (Rust closed loop, all repeats; pgbench: its 0 µs log entries)\n\n",
    );
    for f in ordered(r).filter(|f| !f.outcomes.is_empty()) {
        let answers: Vec<String> = f
            .outcomes
            .iter()
            .map(|(k, v)| format!("{k}: {v}"))
            .collect();
        let _ = writeln!(
            s,
            "- {}/{} @{} [{}]: {}",
            f.workload,
            f.op,
            f.clients,
            f.driver.label(),
            answers.join(", ")
        );
    }
    s.push_str("\n## Workloads\n\n");
    for w in workloads::WORKLOADS {
        let _ = writeln!(
            s,
            "- **{}**: {}. Script:\n\n```\n{}```",
            w.name, w.about, w.script
        );
    }
    let _ = writeln!(s, "- **{}**: the lockstore crate's try_insert + extend + delete_if_owner on a private key (Rust driver only).", workloads::LOCKSTORE);
    let _ = writeln!(s, "- **{}**: a blocking acquire woken by the holder's release; latency from the release's return to the acquire's return.", workloads::WAKE);
    if !plots.is_empty() {
        s.push_str("\n## Plots\n\n");
        for p in plots {
            let _ = writeln!(s, "![{p}]({p})");
        }
    }
    s
}

/// Workloads in catalogue order, then op, clients, driver.
fn ordered(r: &BenchResult) -> impl Iterator<Item = &Figure> {
    let names = workloads::all_names();
    let rank = move |f: &Figure| {
        names
            .iter()
            .position(|n| *n == f.workload)
            .unwrap_or(usize::MAX)
    };
    let mut v: Vec<&Figure> = r.figures.iter().collect();
    v.sort_by(|a, b| {
        (rank(a), &a.op, a.clients, a.driver).cmp(&(rank(b), &b.op, b.clients, b.driver))
    });
    v.into_iter()
}
