//! The report page as a person sees it: written for a run with a finding (a real
//! violation's timeline), coverage and bench figures, loaded in a real headless browser
//! (Debian's chromium), its DOM and its pixels read back.

use super::write_all;
use crate::gate::outcome::{
    Branches, CheckResult, GateRun, LatencyFigure, MajorResult, Status, SuiteResult,
};
use model::branch::Branch;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// A violation the checker finds (model/tests/histories): its timeline is the finding's.
const VIOLATION: &str =
    include_str!("../../../model/tests/histories/crash-lost-acquire-then-overlap.jsonl");
const TIMELINE: &str = "pg15/campaign-seed-7/timeline.html";

/// The timeline's colour of the offending op (planning::timeline's `.op.offending`).
const OFFENDING: [u8; 3] = [0xe1, 0x1d, 0x48];
/// The bench plot's bar colour.
const BENCH_BAR: [u8; 3] = [0x4a, 0x7f, 0xd0];

fn chromium() -> PathBuf {
    let found = ["chromium", "chromium-browser"]
        .iter()
        .map(|name| Path::new("/usr/bin").join(name))
        .find(|p| p.exists());
    found.expect("these tests load the report in chromium: apt-get install chromium")
}

/// Runs headless chromium on `page` with `args`; its stdout.
fn browse(page: &Path, args: &[&str]) -> String {
    let out = Command::new(chromium())
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
        ])
        .args(["--window-size=1400,5000", "--virtual-time-budget=5000"])
        .args(args)
        .arg(format!("file://{}", page.display()))
        .output()
        .expect("chromium runs");
    assert!(
        out.status.success(),
        "chromium: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The RGB pixels of a screenshot of `page`.
fn pixels(page: &Path) -> Vec<[u8; 3]> {
    let shot = page.with_extension("png");
    browse(page, &[&format!("--screenshot={}", shot.display())]);
    let decoder = png::Decoder::new(std::fs::File::open(&shot).expect("the screenshot"));
    let mut reader = decoder.read_info().expect("a PNG");
    let mut buf = vec![0; reader.output_buffer_size()];
    let info = reader.next_frame(&mut buf).expect("a frame");
    let step = info.color_type.samples();
    buf[..info.buffer_size()]
        .chunks(step)
        .map(|p| [p[0], p[1], p[2]])
        .collect()
}

fn count(pixels: &[[u8; 3]], colour: [u8; 3]) -> usize {
    pixels.iter().filter(|p| **p == colour).count()
}

fn figure(workload: &str, op: &str, p50: f64) -> LatencyFigure {
    LatencyFigure {
        workload: workload.into(),
        op: op.into(),
        clients: 1,
        driver: "rust-closed".into(),
        count: 100,
        throughput_per_s: 1_000.0,
        p50_us: p50,
        p95_us: p50 * 1.5,
        p99_us: p50 * 2.0,
    }
}

/// A run of one major: a campaign check that found the violation (its timeline at
/// [`TIMELINE`] when `timeline` is written), one that passed with coverage, and bench.
fn run(dir: &Path, timeline: bool) -> GateRun {
    let history = model::history::jsonl::parse(VIOLATION).expect("the fixture parses");
    let verdict = model::checker::check(&history, &model::CheckOptions::default());
    let Some(v) = verdict.violation() else {
        panic!("the fixture must be a violation: {verdict}")
    };
    if timeline {
        let path = dir.join(TIMELINE);
        std::fs::create_dir_all(path.parent().expect("a parent")).expect("mkdir");
        let page = harness::timeline::render(&history, &verdict, "campaign seed 7");
        std::fs::write(path, page).expect("the timeline");
    }
    let found = CheckResult {
        invariant: Some(v.invariant.to_string()),
        timeline: Some(TIMELINE.into()),
        ..CheckResult::failed(
            "4 processes x 1 keys, 9 ops, seed 7",
            verdict.to_string(),
            Duration::ZERO,
        )
    };
    let passed = CheckResult {
        coverage: Some(Branches(
            [(Branch::AcquireFirstGrant.name().to_string(), 12)].into(),
        )),
        ..CheckResult::passed("4 processes x 1 keys, 9 ops, seed 8", Duration::ZERO)
    };
    let campaign = SuiteResult::of("campaign", vec![passed, found], Duration::ZERO);
    let mut bench = SuiteResult::of(
        "bench",
        vec![CheckResult::passed("W1", Duration::ZERO)],
        Duration::ZERO,
    );
    bench.figures = vec![
        figure("W1-cycle", "grant", 600.0),
        figure("floor-update", "update", 400.0),
    ];
    let major = MajorResult::of(15, Some("15.18".into()), "local", vec![campaign, bench]);
    GateRun::of_majors(vec![major])
}

#[test]
fn the_page_shows_the_first_finding_its_timeline_inline_coverage_and_bench_plots() {
    let dir = tempfile::tempdir().expect("a scratch directory");
    let run = run(dir.path(), true);
    assert_eq!(run.status, Status::Failed);
    write_all(&run, dir.path()).expect("the report");
    let page = dir.path().join(super::HTML);
    let dom = browse(&page, &["--dump-dom"]);
    assert!(
        dom.contains("First finding: <a href=\"#check-15-campaign-4-processes-x-1-keys--9-ops--seed-7\">PG 15 campaign / 4 processes x 1 keys, 9 ops, seed 7</a>: VIOLATION"),
        "{dom}"
    );
    assert!(dom.contains("id=\"check-15-campaign-4-processes-x-1-keys--9-ops--seed-7\""));
    assert!(dom.contains("<iframe class=\"timeline\""), "{dom}");
    assert!(dom.contains(">600 us, 1.50x floor</text>"), "{dom}");
    assert!(
        dom.contains("<td>acquire: first grant</td><td class=\"reached\">12</td>"),
        "{dom}"
    );
    let shot = pixels(&page);
    // The inline timeline drew the offending op (and its legend swatch) on screen, and the
    // bench plot its bar.
    assert!(count(&shot, OFFENDING) > 50, "no offending op on screen");
    assert!(count(&shot, BENCH_BAR) > 500, "no bench bar on screen");
}

/// The control: without the timeline's file the page links it, and nothing on screen has
/// the offending op's colour: the pixel check above sees the inlined timeline, not
/// something else of that colour.
#[test]
fn a_page_whose_timeline_is_not_inlined_shows_no_offending_op() {
    let dir = tempfile::tempdir().expect("a scratch directory");
    let run = run(dir.path(), false);
    write_all(&run, dir.path()).expect("the report");
    let page = dir.path().join(super::HTML);
    let dom = browse(&page, &["--dump-dom"]);
    assert!(!dom.contains("<iframe"), "{dom}");
    assert!(
        dom.contains(&format!("<a href=\"{TIMELINE}\">timeline</a>")),
        "{dom}"
    );
    assert_eq!(count(&pixels(&page), OFFENDING), 0);
}
