//! The gate's outputs: the summary table on stdout, and in `--report DIR` the JSON summary
//! (`summary.json`, specs/GATE.md), JUnit XML (`junit.xml`) and a self-contained HTML page
//! (`index.html`) linking each failure's timeline.

mod bench_plot;
#[cfg(test)]
mod browser_tests;
mod coverage;
mod page;
use super::outcome::{CheckResult, GateRun, Status, SuiteResult};
use anyhow::Context;
pub use coverage::lines as coverage_lines;
use std::fmt::Write as _;
use std::path::Path;

pub const SUMMARY: &str = "summary.json";
pub const JUNIT: &str = "junit.xml";
pub const HTML: &str = "index.html";

/// The summary table: a row per major, a column per suite (status and seconds).
pub fn table(run: &GateRun) -> String {
    let mut suites: Vec<&str> = Vec::new();
    for m in &run.majors {
        for s in &m.suites {
            if !suites.contains(&s.suite.as_str()) {
                suites.push(&s.suite);
            }
        }
    }
    let cells: Vec<Vec<String>> = run
        .majors
        .iter()
        .map(|m| {
            suites
                .iter()
                .map(|name| {
                    m.suites
                        .iter()
                        .find(|s| s.suite == *name)
                        .map(cell)
                        .unwrap_or_else(|| "-".into())
                })
                .collect()
        })
        .collect();
    // Columns are 16 wide, wider when a cell needs it (a count of skipped checks).
    let width = cells
        .iter()
        .flatten()
        .map(String::len)
        .max()
        .unwrap_or(0)
        .max(16);
    let mut out = format!("{:<16}", "major");
    for s in &suites {
        let _ = write!(out, " | {s:<width$}");
    }
    out.push_str(" | gate\n");
    for (m, row) in run.majors.iter().zip(&cells) {
        let label = format!("PG {}", m.postgres.as_deref().unwrap_or("?"));
        let _ = write!(
            out,
            "{:<16}",
            format!("{label} ({})", m.major)
                .chars()
                .take(16)
                .collect::<String>()
        );
        for cell in row {
            let _ = write!(out, " | {cell:<width$}");
        }
        let _ = writeln!(out, " | {}", m.status.word());
    }
    out
}

/// A suite's status and time, with how many of its checks were skipped when some ran.
fn cell(s: &SuiteResult) -> String {
    let skipped = s
        .checks
        .iter()
        .filter(|c| c.status == Status::Skipped)
        .count();
    if skipped > 0 && s.status != Status::Skipped {
        format!("{} {:.0}s, {skipped} skipped", s.status.word(), s.seconds)
    } else {
        format!("{} {:.0}s", s.status.word(), s.seconds)
    }
}

/// Every check that failed or could not run, with its reason: what to read after the
/// table (skipped checks are listed apart, [`GateRun::skipped`]).
pub fn problems(run: &GateRun) -> String {
    let mut out = String::new();
    for m in &run.majors {
        for s in &m.suites {
            let shown = |c: &&CheckResult| !matches!(c.status, Status::Passed | Status::Skipped);
            for c in s.checks.iter().filter(shown) {
                let _ = writeln!(
                    out,
                    "{} PG {} {} / {}",
                    c.status.word(),
                    m.major,
                    s.suite,
                    c.name
                );
                if let Some(inv) = &c.invariant {
                    let _ = writeln!(out, "    invariant: {inv}");
                }
                if let Some(t) = &c.timeline {
                    let _ = writeln!(out, "    timeline: {t}");
                }
                for line in c.message.lines().take(30) {
                    let _ = writeln!(out, "    {line}");
                }
            }
        }
    }
    out
}

/// The bench suite's latencies per major: one line per figure.
pub fn figures(run: &GateRun) -> String {
    let mut out = String::new();
    for m in &run.majors {
        for f in m.suites.iter().flat_map(|s| &s.figures) {
            let _ = writeln!(
                out,
                "PG {} bench {:<24} @{:<2} p50 {:>8.0} us  p95 {:>8.0} us  p99 {:>8.0} us  {:>7.0}/s",
                m.major,
                format!("{}/{}", f.workload, f.op),
                f.clients,
                f.p50_us,
                f.p95_us,
                f.p99_us,
                f.throughput_per_s
            );
        }
    }
    out
}

/// Writes the three report files into `dir`.
pub fn write_all(run: &GateRun, dir: &Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let json = serde_json::to_string_pretty(run).context("encoding the summary")?;
    write(dir, SUMMARY, &(json + "\n"))?;
    write(dir, JUNIT, &junit(run))?;
    write(dir, HTML, &page::html(run, dir))
}

fn write(dir: &Path, name: &str, text: &str) -> anyhow::Result<()> {
    let path = dir.join(name);
    std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))
}

/// Reads a summary written by [`write_all`] (a container's run).
pub fn read_summary(dir: &Path) -> anyhow::Result<GateRun> {
    let path = dir.join(SUMMARY);
    let text =
        std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    serde_json::from_str(&text).with_context(|| format!("parsing {}", path.display()))
}

/// `text` escaped for XML and HTML text and attributes.
fn html_text(text: &str) -> String {
    xml(text)
}

fn xml(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for ch in text.chars() {
        match ch {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            // XML 1.0 allows no other control characters.
            c if (c as u32) < 0x20 && !matches!(c, '\n' | '\r' | '\t') => out.push('?'),
            c => out.push(c),
        }
    }
    out
}

/// JUnit XML: a testsuite per major and suite, a testcase per check; a finding is a
/// `<failure>` whose message names the invariant, an infrastructure error an `<error>`.
pub fn junit(run: &GateRun) -> String {
    let count = |s: Status| {
        run.majors
            .iter()
            .flat_map(|m| &m.suites)
            .flat_map(|s| &s.checks)
            .filter(|c| c.status == s)
            .count()
    };
    let tests: usize = run
        .majors
        .iter()
        .flat_map(|m| &m.suites)
        .map(|s| s.checks.len())
        .sum();
    let mut out = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let _ = writeln!(
        out,
        "<testsuites name=\"leasecheck gate\" tests=\"{tests}\" failures=\"{}\" errors=\"{}\" skipped=\"{}\" time=\"{:.3}\">",
        count(Status::Failed),
        count(Status::Infrastructure),
        count(Status::Skipped),
        run.seconds
    );
    for m in &run.majors {
        for s in &m.suites {
            let failed = s
                .checks
                .iter()
                .filter(|c| c.status == Status::Failed)
                .count();
            let errors = s
                .checks
                .iter()
                .filter(|c| c.status == Status::Infrastructure)
                .count();
            let skipped = s
                .checks
                .iter()
                .filter(|c| c.status == Status::Skipped)
                .count();
            let _ = writeln!(
                out,
                "  <testsuite name=\"pg{}.{}\" tests=\"{}\" failures=\"{failed}\" errors=\"{errors}\" skipped=\"{skipped}\" time=\"{:.3}\">",
                m.major,
                xml(&s.suite),
                s.checks.len(),
                s.seconds
            );
            for c in &s.checks {
                out.push_str(&testcase(m.major, &s.suite, c));
            }
            out.push_str("  </testsuite>\n");
        }
    }
    out.push_str("</testsuites>\n");
    out
}

fn testcase(major: u32, suite: &str, c: &CheckResult) -> String {
    let mut out = format!(
        "    <testcase classname=\"pg{major}.{}\" name=\"{}\" time=\"{:.3}\"",
        xml(suite),
        xml(&c.name),
        c.seconds
    );
    let first_line = c.message.lines().next().unwrap_or("");
    match c.status {
        Status::Passed => out.push_str("/>\n"),
        Status::Skipped => {
            let _ = write!(
                out,
                ">\n      <skipped message=\"{}\"/>\n    </testcase>\n",
                xml(first_line)
            );
        }
        Status::Failed => {
            let message = match &c.invariant {
                Some(inv) => format!("violates {inv}: {first_line}"),
                None => first_line.to_string(),
            };
            let _ = write!(
                out,
                ">\n      <failure type=\"{}\" message=\"{}\">{}</failure>\n    </testcase>\n",
                xml(c.invariant.as_deref().unwrap_or("finding")),
                xml(&message),
                xml(&body(c))
            );
        }
        Status::Infrastructure => {
            let _ = write!(
                out,
                ">\n      <error type=\"infrastructure\" message=\"{}\">{}</error>\n    </testcase>\n",
                xml(first_line),
                xml(&body(c))
            );
        }
    }
    out
}

/// The text of a failure: the invariant, the explanation, where the timeline is.
fn body(c: &CheckResult) -> String {
    let mut text = String::new();
    if let Some(inv) = &c.invariant {
        let _ = writeln!(text, "invariant: {inv}");
    }
    text.push_str(&c.message);
    if let Some(t) = &c.timeline {
        let _ = write!(text, "\ntimeline: {t}");
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gate::outcome::{MajorResult, SuiteResult};
    use std::time::Duration;

    #[test]
    fn a_skipped_check_is_a_junit_skip_and_a_skipped_table_cell() {
        let checks = vec![
            CheckResult::passed("ran", Duration::from_secs(1)),
            CheckResult::skipped("restarts", "it restarts the server"),
        ];
        let suite = SuiteResult::of("conformance", checks, Duration::from_secs(1));
        let major = MajorResult::of(15, Some("15.18".into()), "dsn", vec![suite]);
        let run = GateRun::of_majors(vec![major]);
        assert_eq!(run.status, Status::Passed);
        let xml = junit(&run);
        assert!(xml.contains("skipped=\"1\""), "{xml}");
        assert!(
            xml.contains("<skipped message=\"needs a managed server: it restarts the server\"/>"),
            "{xml}"
        );
        // The control: the check that ran is a plain testcase.
        assert!(xml.contains("name=\"ran\" time=\"1.000\"/>"), "{xml}");
        assert!(
            table(&run).contains("passed 1s, 1 skipped"),
            "{}",
            table(&run)
        );
        assert_eq!(run.skipped(), ["PG 15 conformance / restarts"]);
    }
}
