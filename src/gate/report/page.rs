//! The report's HTML page (`index.html`): the verdict and what failed first, the majors x
//! suites table, every check that did not pass with its explanation and its timeline
//! inline, the spec branches the judged histories took, and the bench figures as plots.
//! Self-contained: no script, and nothing loaded from anywhere (a timeline is inlined as
//! its own page in an `iframe`'s `srcdoc`).

use super::{bench_plot, cell, coverage, html_text};
use crate::gate::outcome::{GateRun, Status};
use std::fmt::Write as _;
use std::path::Path;

/// Most timelines inlined in one page; the rest are linked. A timeline draws at most 5,000
/// ops in a few hundred bytes each (planning::timeline), so a page stays within a few MB.
const MAX_INLINED: usize = 3;
/// Largest timeline inlined, in bytes (larger ones are linked).
const MAX_INLINED_BYTES: u64 = 4 << 20;

/// `<p>`: the first check, in the run's order, that did not pass, or that all passed.
fn first_failure(run: &GateRun) -> String {
    let mut not_passed = run.majors.iter().flat_map(|m| {
        m.suites.iter().flat_map(move |s| {
            s.checks
                .iter()
                .filter(|c| matches!(c.status, Status::Failed | Status::Infrastructure))
                .map(move |c| (m.major, &s.suite, c))
        })
    });
    let first_finding = not_passed
        .clone()
        .find(|(_, _, c)| c.status == Status::Failed);
    match first_finding.or_else(|| not_passed.next()) {
        None => "<p class=\"verdict\">Every check that ran passed.</p>\n".to_string(),
        Some((major, suite, c)) => format!(
            "<p class=\"verdict\">First {}: <a href=\"#{}\">PG {major} {} / {}</a>: {}</p>\n",
            if c.status == Status::Failed {
                "finding"
            } else {
                "check without a verdict"
            },
            anchor(major, suite, &c.name),
            html_text(suite),
            html_text(&c.name),
            html_text(c.message.lines().next().unwrap_or(""))
        ),
    }
}

/// The id of a check's heading.
fn anchor(major: u32, suite: &str, check: &str) -> String {
    let name = format!("{major}-{suite}-{check}");
    let safe = name
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' });
    format!("check-{}", safe.collect::<String>())
}

/// The timeline page at `relative` (to the report directory), when small enough to inline.
fn inline_timeline(dir: &Path, relative: &str) -> Option<String> {
    let path = dir.join(relative);
    let size = std::fs::metadata(&path).ok()?.len();
    (size <= MAX_INLINED_BYTES).then(|| std::fs::read_to_string(&path).ok())?
}

/// A check's timeline: inline (its page as an `iframe`'s `srcdoc`) when given, with a link
/// to its file either way.
fn timeline(relative: &str, page: Option<String>) -> String {
    let link = format!(
        "<p><a href=\"{}\">timeline</a> (the offending op is linked at its top)</p>\n",
        html_text(relative)
    );
    match page {
        Some(page) => format!(
            "{link}<iframe class=\"timeline\" title=\"timeline\" sandbox=\"allow-same-origin\" \
             srcdoc=\"{}\"></iframe>\n",
            html_text(&page)
        ),
        None => link,
    }
}

/// The self-contained page of `run`, whose report directory is `dir` (the timelines it
/// inlines are read from there).
pub fn html(run: &GateRun, dir: &Path) -> String {
    let mut out = String::new();
    let _ = write!(
        out,
        "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>leasecheck gate: {}</title>\n\
         <style>body{{font-family:sans-serif;margin:2em}}table{{border-collapse:collapse}}\
         td,th{{border:1px solid #999;padding:4px 8px}}.passed{{background:#cfc}}\
         .failed{{background:#fcc}}.infrastructure{{background:#ffd9a0}}.skipped{{background:#ddd}}\
         .never{{background:#fcc;color:#900}}.reached{{text-align:right}}\
         iframe.timeline{{width:100%;height:480px;border:1px solid #999}}\
         pre{{background:#f4f4f4;padding:8px;white-space:pre-wrap}}</style></head><body>\n",
        run.status.word()
    );
    let _ = writeln!(
        out,
        "<h1>leasecheck gate: <span class=\"{}\">{}</span></h1>\n<p>{} {} ({} sizes), leasecheck {}, started {}, {:.0}s</p>",
        status_class(run.status),
        run.status.word(),
        html_text(&run.extension),
        html_text(&run.version),
        html_text(&run.size),
        html_text(&run.leasecheck),
        html_text(&run.started),
        run.seconds
    );
    out.push_str(&first_failure(run));
    if let Some(seed) = run.seed {
        let _ = write!(out, "<p>seed {seed}");
        match (&run.shard, run.merged_shards) {
            (Some(s), _) => {
                let _ = write!(out, ", shard {}/{} of this run", s.index, s.count);
            }
            (None, Some(n)) => {
                let _ = write!(out, ", merged from {n} shards");
            }
            (None, None) => {}
        }
        out.push_str("</p>\n");
    }
    out.push_str("<h2>Scripts</h2><ul>");
    for s in &run.scripts {
        let _ = write!(
            out,
            "<li><code>{}</code> sha256 <code>{}</code></li>",
            html_text(&s.file),
            s.sha256
        );
    }
    out.push_str("</ul>\n");
    if let Some(server) = &run.server {
        let _ = writeln!(
            out,
            "<h2>Existing server</h2>\n<p><code>{}</code> as <code>{}</code>: {}</p>",
            html_text(&server.address),
            html_text(&server.role),
            html_text(&server.scripts)
        );
    }
    out.push_str("<h2>Majors × suites</h2>\n");
    out.push_str(&html_table(run));
    out.push_str("<h2>Checks that did not pass</h2>\n");
    out.push_str(&html_problems(run, dir));
    let covered = coverage::html(run);
    if !covered.is_empty() {
        out.push_str("<h2>Spec branches the judged histories took (calls)</h2>\n");
        out.push_str(&covered);
    }
    let figures = super::figures(run);
    if !figures.is_empty() {
        let _ = write!(
            out,
            "<h2>Bench figures (Rust closed loop, median of the repeats)</h2>\n{}\
             <details><summary>as text</summary><pre>{}</pre></details>\n",
            bench_plot::html(run),
            html_text(&figures)
        );
    }
    out.push_str("</body></html>\n");
    out
}

fn status_class(s: Status) -> &'static str {
    match s {
        Status::Passed => "passed",
        Status::Skipped => "skipped",
        Status::Failed => "failed",
        Status::Infrastructure => "infrastructure",
    }
}

fn html_table(run: &GateRun) -> String {
    let mut out = String::from("<table><tr><th>major</th>");
    let mut suites: Vec<&str> = Vec::new();
    for s in run.majors.iter().flat_map(|m| &m.suites) {
        if !suites.contains(&s.suite.as_str()) {
            suites.push(&s.suite);
        }
    }
    for s in &suites {
        let _ = write!(out, "<th>{}</th>", html_text(s));
    }
    out.push_str("<th>gate</th></tr>\n");
    for m in &run.majors {
        let _ = write!(
            out,
            "<tr><td>PG {} ({})</td>",
            m.postgres.as_deref().map(html_text).unwrap_or_default(),
            m.backend
        );
        for name in &suites {
            match m.suites.iter().find(|s| s.suite == *name) {
                Some(s) => {
                    let _ = write!(
                        out,
                        "<td class=\"{}\">{}</td>",
                        status_class(s.status),
                        html_text(&cell(s))
                    );
                }
                None => out.push_str("<td>-</td>"),
            }
        }
        let _ = writeln!(
            out,
            "<td class=\"{}\">{}</td></tr>",
            status_class(m.status),
            m.status.word()
        );
    }
    out.push_str("</table>\n");
    out
}

fn html_problems(run: &GateRun, dir: &Path) -> String {
    let mut out = String::new();
    let mut inlined = 0;
    for m in &run.majors {
        for s in &m.suites {
            for c in s.checks.iter().filter(|c| c.status != Status::Passed) {
                let _ = writeln!(
                    out,
                    "<h3 id=\"{}\" class=\"{}\">{} · PG {} · {} · {}</h3>",
                    anchor(m.major, &s.suite, &c.name),
                    status_class(c.status),
                    c.status.word(),
                    m.major,
                    html_text(&s.suite),
                    html_text(&c.name)
                );
                if let Some(inv) = &c.invariant {
                    let _ = writeln!(out, "<p>Invariant: <b>{}</b></p>", html_text(inv));
                }
                let _ = writeln!(out, "<pre>{}</pre>", html_text(&c.message));
                if let Some(t) = &c.timeline {
                    let page = (inlined < MAX_INLINED).then(|| inline_timeline(dir, t));
                    inlined += usize::from(matches!(page, Some(Some(_))));
                    out.push_str(&timeline(t, page.flatten()));
                }
            }
        }
    }
    if out.is_empty() {
        out.push_str("<p>None.</p>\n");
    }
    out
}
