//! The checker's speed and memory figures (issue item 6), written to `results/checker/`.
//!
//! ```text
//! cargo run --release -p model --example checker_figures [-- --out DIR]
//! ```
//!
//! Each case runs in a child process of this program (`--case NAME`), so each peak RSS is
//! that case's own. A child generates its histories (not timed), checks them once untimed
//! where that is cheap (the warm-up; not for the 1M-op case), then times one check of each
//! and prints its figures as one JSON object; the parent adds the host and writes
//! `<UTC date>.json` and `<UTC date>.md` (an existing file of the same date is replaced).
//!
//! # JSON schema (`"schema": "leasecheck/checker-figures/v1"`)
//!
//! ```text
//! {
//!   "schema": "leasecheck/checker-figures/v1",
//!   "date": "YYYY-MM-DDTHH:MM:SSZ",          // UTC, when the run started
//!   "host": {
//!     "cpu": string,                          // first "model name" of /proc/cpuinfo
//!     "cores": int,                           // available parallelism
//!     "memory_bytes": int | null,             // MemTotal
//!     "kernel": string | null,
//!     "rustc": string | null,                 // `rustc -V` on PATH at run time
//!     "loadavg": string | null                // /proc/loadavg at start (a shared machine)
//!   },
//!   "cases": [{
//!     "name": string,                         // as the benches/checker.rs group
//!     "histories": int,                       // histories checked (1 but for invalid sets)
//!     "ops": int,                             // ops of the history (a set: the most of one)
//!     "processes": int,                       // distinct processes (a set: the most of one)
//!     "keys": int,                            // distinct non-empty keys (a set: the most of one)
//!     "diagnosis": bool,                      // CheckOptions::diagnosis on (pre-checks always on)
//!     "elapsed_ms": float,                    // one check; for a set: its slowest history
//!     "mean_ms": float,                       // mean over the set's histories (= elapsed_ms for one)
//!     "cpu_ms": float,                        // CPU time of the timed check(s), all histories
//!     "wall_ms": float,                       // wall time of the timed check(s), all histories
//!     "peak_rss_bytes": int | null,           // VmHWM of the case's process: generation and check
//!     "rss_before_check_bytes": int | null,   // VmRSS after generation and warm-up
//!     "check_peak_rss_bytes": int | null,     // VmHWM reset after generation: peak while checking
//!     "verdict": "linearizable" | "violation" | "unknown" | "mixed",
//!     "expected_verdict": "linearizable" | "violation",
//!     "search_states": int | null,            // Stats::states of a linearizable verdict
//!     "target": { "elapsed_ms": float, "peak_rss_bytes": int | null },
//!     "pass": bool,                           // verdict as expected, and every target met
//!     "details": [{                           // one per history of an invalid set, else []
//!       "label": string, "mutation": string, "seed": int, "ops": int,
//!       "elapsed_ms": float, "found_by": string, "diagnosis": string | null
//!     }]
//!   }],
//!   "all_pass": bool
//! }
//! ```

#[path = "../benches/common/mod.rs"]
mod common;

use model::checker::{check, FoundBy};
use model::{CheckOptions, History, Verdict};
use serde::{Deserialize, Serialize};
use std::error::Error;
use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

type Res<T> = Result<T, Box<dyn Error>>;

const SCHEMA: &str = "leasecheck/checker-figures/v1";
const GIB: u64 = 1 << 30;

/// The cases, in the order they run: name, expected verdict, diagnosis on, target ms,
/// target peak RSS.
const CASES: &[(&str, &str, bool, f64, Option<u64>)] = &[
    (
        "valid_10k_ops_16_processes_8_keys",
        "linearizable",
        true,
        1_000.0,
        None,
    ),
    ("invalid_100_ops", "violation", true, 50.0, None),
    (
        "invalid_100_ops_no_diagnosis",
        "violation",
        false,
        50.0,
        None,
    ),
    (
        "valid_1m_ops_1000_keys",
        "linearizable",
        true,
        30_000.0,
        Some(2 * GIB),
    ),
    (
        "lost_calls_20k_ops_crash_per_200",
        "linearizable",
        true,
        2_000.0,
        Some(GIB),
    ),
    (
        "lost_calls_20k_ops_crash_per_200_double_grant",
        "violation",
        true,
        5_000.0,
        Some(GIB),
    ),
];

#[derive(Serialize, Deserialize)]
struct Figures {
    schema: String,
    date: String,
    host: Host,
    cases: Vec<Case>,
    all_pass: bool,
}

#[derive(Serialize, Deserialize)]
struct Host {
    cpu: String,
    cores: usize,
    memory_bytes: Option<u64>,
    kernel: Option<String>,
    rustc: Option<String>,
    loadavg: Option<String>,
}

#[derive(Serialize, Deserialize)]
struct Case {
    name: String,
    histories: usize,
    ops: usize,
    processes: usize,
    keys: usize,
    diagnosis: bool,
    elapsed_ms: f64,
    mean_ms: f64,
    cpu_ms: f64,
    wall_ms: f64,
    peak_rss_bytes: Option<u64>,
    rss_before_check_bytes: Option<u64>,
    check_peak_rss_bytes: Option<u64>,
    verdict: String,
    expected_verdict: String,
    search_states: Option<u64>,
    target: Target,
    pass: bool,
    details: Vec<Detail>,
}

#[derive(Serialize, Deserialize)]
struct Target {
    elapsed_ms: f64,
    peak_rss_bytes: Option<u64>,
}

#[derive(Serialize, Deserialize)]
struct Detail {
    label: String,
    mutation: String,
    seed: u64,
    ops: usize,
    elapsed_ms: f64,
    found_by: String,
    diagnosis: Option<String>,
}

fn main() -> Res<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args
        .iter()
        .map(String::as_str)
        .collect::<Vec<_>>()
        .as_slice()
    {
        ["--case", name] => child(name),
        [] => parent(default_out()),
        ["--out", dir] => parent(PathBuf::from(dir)),
        _ => Err("usage: checker_figures [--out DIR] | --case NAME".into()),
    }
}

fn default_out() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join("results")
        .join("checker")
}

// ---------------------------------------------------------------- the parent

fn parent(out: PathBuf) -> Res<()> {
    let started = SystemTime::now().duration_since(UNIX_EPOCH)?.as_secs();
    let host = host();
    let exe = std::env::current_exe()?;
    let mut cases = Vec::new();
    for &(name, ..) in CASES {
        eprintln!("checker_figures: {name} ...");
        let output = Command::new(&exe)
            .args(["--case", name])
            .stderr(Stdio::inherit())
            .output()?;
        if !output.status.success() {
            return Err(format!("case {name} failed: {}", output.status).into());
        }
        let case: Case = serde_json::from_slice(&output.stdout)?;
        eprintln!(
            "checker_figures: {name}: {:.3} ms (mean {:.3} ms), peak RSS {}, {}, {}",
            case.elapsed_ms,
            case.mean_ms,
            mib(case.peak_rss_bytes),
            case.verdict,
            if case.pass { "pass" } else { "MISSED" }
        );
        cases.push(case);
    }
    let all_pass = cases.iter().all(|c| c.pass);
    let figures = Figures {
        schema: SCHEMA.into(),
        date: utc_timestamp(started),
        host,
        cases,
        all_pass,
    };
    std::fs::create_dir_all(&out)?;
    let out = std::fs::canonicalize(&out)?;
    let day = &figures.date[..10];
    let json = out.join(format!("{day}.json"));
    let md = out.join(format!("{day}.md"));
    std::fs::write(&json, serde_json::to_string_pretty(&figures)? + "\n")?;
    std::fs::write(&md, markdown(&figures))?;
    eprintln!(
        "checker_figures: wrote {} and {}",
        json.display(),
        md.display()
    );
    if all_pass {
        Ok(())
    } else {
        Err("a target was missed (see the table)".into())
    }
}

fn markdown(f: &Figures) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "# Checker speed, {}\n", f.date);
    let _ = writeln!(
        s,
        "Host: {}, {} cores, {} memory, kernel {}, {}; load average at start {}.\n",
        f.host.cpu,
        f.host.cores,
        mib(f.host.memory_bytes),
        f.host.kernel.as_deref().unwrap_or("?"),
        f.host.rustc.as_deref().unwrap_or("rustc ?"),
        f.host.loadavg.as_deref().unwrap_or("?"),
    );
    let _ = writeln!(
        s,
        "`cargo run --release -p model --example checker_figures`: each case once in a process \
         of its own, after an untimed warm-up check (not for the 1M-op case); histories \
         generated by `model::gen` from fixed seeds (`model/benches/common/mod.rs`), \
         generation not timed. Default `CheckOptions` (pre-checks and diagnosis on) unless \
         the case says otherwise. Peak RSS is the case process's `VmHWM` (generation and \
         check); \"while checking\" is `VmHWM` reset after generation (the history resident), \
         \"before\" the RSS just before the timed check. Targets are judged on wall time; CPU \
         is the process's CPU time over the timed checks (a set's: all its histories), steadier \
         than wall time on a shared machine.\n"
    );
    let _ = writeln!(
        s,
        "| case | histories | ops | processes | keys | wall time | CPU | target | peak RSS | while checking | before | target | verdict | met |"
    );
    let _ = writeln!(
        s,
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- |"
    );
    for c in &f.cases {
        let time = if c.histories > 1 {
            format!("{:.3} ms worst, {:.3} ms mean", c.elapsed_ms, c.mean_ms)
        } else {
            format!("{:.1} ms", c.elapsed_ms)
        };
        let _ = writeln!(
            s,
            "| `{}` | {} | {}{} | {} | {} | {} | {:.1} ms | < {} ms{} | {} | {} | {} | {} | {} | {} |",
            c.name,
            c.histories,
            if c.histories > 1 { "≤ " } else { "" },
            c.ops,
            c.processes,
            c.keys,
            time,
            c.cpu_ms,
            c.target.elapsed_ms,
            if c.histories > 1 { " each" } else { "" },
            mib(c.peak_rss_bytes),
            mib(c.check_peak_rss_bytes),
            mib(c.rss_before_check_bytes),
            c.target
                .peak_rss_bytes
                .map_or("—".to_string(), |b| format!("< {}", mib(Some(b)))),
            c.verdict,
            if c.pass { "yes" } else { "**no**" }
        );
    }
    let sets: Vec<&Case> = f.cases.iter().filter(|c| !c.details.is_empty()).collect();
    if !sets.is_empty() {
        let _ = writeln!(s, "\nPer invalid history (ms):\n");
        let mut head = "| history | ops | found by | diagnosis |".to_string();
        let mut rule = "| --- | ---: | --- | --- |".to_string();
        for c in &sets {
            head.push_str(&format!(" {} |", c.name));
            rule.push_str(" ---: |");
        }
        let _ = writeln!(s, "{head}\n{rule}");
        for (i, d) in sets[0].details.iter().enumerate() {
            let _ = write!(
                s,
                "| {} | {} | {} | {} |",
                d.label,
                d.ops,
                d.found_by,
                d.diagnosis.as_deref().unwrap_or("—")
            );
            for c in &sets {
                let ms = c.details.get(i).map_or(f64::NAN, |d| d.elapsed_ms);
                let _ = write!(s, " {ms:.3} |");
            }
            let _ = writeln!(s);
        }
    }
    let _ = writeln!(
        s,
        "\nAll targets met: {}.",
        if f.all_pass { "yes" } else { "**no**" }
    );
    s
}

fn mib(bytes: Option<u64>) -> String {
    match bytes {
        Some(b) if b >= GIB => format!("{:.2} GiB", b as f64 / GIB as f64),
        Some(b) => format!("{:.1} MiB", b as f64 / (1 << 20) as f64),
        None => "?".into(),
    }
}

fn host() -> Host {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let cpu = cpuinfo
        .lines()
        .find_map(|l| {
            let (k, v) = l.split_once(':')?;
            (k.trim() == "model name").then(|| v.trim().to_string())
        })
        .unwrap_or_else(|| "unknown".into());
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    let rustc = Command::new("rustc")
        .arg("-V")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty());
    let read = |p: &str| {
        std::fs::read_to_string(p)
            .ok()
            .map(|s| s.trim().to_string())
    };
    Host {
        cpu,
        cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
        memory_bytes: kib_field(&meminfo, "MemTotal"),
        kernel: read("/proc/sys/kernel/osrelease"),
        rustc,
        loadavg: read("/proc/loadavg"),
    }
}

/// `secs` since the epoch as `YYYY-MM-DDTHH:MM:SSZ` (proleptic Gregorian, UTC).
fn utc_timestamp(secs: u64) -> String {
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3_600,
        rem % 3_600 / 60,
        rem % 60
    )
}

// ---------------------------------------------------------------- a child: one case

fn child(name: &str) -> Res<()> {
    let &(_, expected, diagnosis, target_ms, target_rss) = CASES
        .iter()
        .find(|c| c.0 == name)
        .ok_or_else(|| format!("no case {name}"))?;
    let options = if diagnosis {
        CheckOptions::default()
    } else {
        common::no_diagnosis()
    };
    let mut case = match name {
        "valid_10k_ops_16_processes_8_keys" => {
            one_valid(name, &common::valid(common::VALID_10K), &options, true)
        }
        "valid_1m_ops_1000_keys" => {
            one_valid(name, &common::valid(common::VALID_1M), &options, false)
        }
        "lost_calls_20k_ops_crash_per_200" => {
            one_valid(name, &common::lost_calls(common::LOST_20K), &options, true)
        }
        "lost_calls_20k_ops_crash_per_200_double_grant" => one_valid(
            name,
            &common::with_double_grant(common::lost_calls(common::LOST_20K)),
            &options,
            true,
        ),
        _ => invalid(name, &options),
    };
    case.diagnosis = diagnosis;
    case.expected_verdict = expected.into();
    case.target = Target {
        elapsed_ms: target_ms,
        peak_rss_bytes: target_rss,
    };
    case.pass = case.verdict == expected
        && case.elapsed_ms < target_ms
        && target_rss.is_none_or(|t| case.peak_rss_bytes.is_some_and(|p| p < t));
    println!("{}", serde_json::to_string(&case)?);
    Ok(())
}

fn blank(name: &str) -> Case {
    Case {
        name: name.into(),
        histories: 0,
        ops: 0,
        processes: 0,
        keys: 0,
        diagnosis: true,
        elapsed_ms: 0.0,
        mean_ms: 0.0,
        cpu_ms: 0.0,
        wall_ms: 0.0,
        peak_rss_bytes: None,
        rss_before_check_bytes: None,
        check_peak_rss_bytes: None,
        verdict: String::new(),
        expected_verdict: String::new(),
        search_states: None,
        target: Target {
            elapsed_ms: 0.0,
            peak_rss_bytes: None,
        },
        pass: false,
        details: Vec::new(),
    }
}

fn one_valid(name: &str, history: &History, options: &CheckOptions, warm_up: bool) -> Case {
    if warm_up {
        std::hint::black_box(check(history, options));
    }
    let generation_peak = status_bytes("VmHWM");
    let before = status_bytes("VmRSS");
    let reset = reset_peak();
    let cpu = cpu_ms();
    let start = Instant::now();
    let verdict = check(history, options);
    let elapsed = ms(start);
    let cpu = cpu_ms() - cpu;
    let check_peak = status_bytes("VmHWM");
    let (processes, keys) = common::shape_of(history);
    let mut case = blank(name);
    case.histories = 1;
    case.ops = history.ops.len();
    case.processes = processes;
    case.keys = keys;
    case.elapsed_ms = elapsed;
    case.mean_ms = elapsed;
    case.cpu_ms = cpu;
    case.wall_ms = elapsed;
    case.peak_rss_bytes = generation_peak.max(check_peak);
    case.rss_before_check_bytes = before;
    case.check_peak_rss_bytes = if reset { check_peak } else { None };
    case.verdict = verdict_name(&verdict).into();
    // the injected double grant must be named as what it is
    if verdict
        .invariant()
        .is_some_and(|i| i != model::Invariant::MutualExclusion)
    {
        case.verdict = format!("violation of {:?}", verdict.invariant());
    }
    if let Verdict::Linearizable(stats) = &verdict {
        case.search_states = Some(stats.states);
    }
    case
}

fn invalid(name: &str, options: &CheckOptions) -> Case {
    // Confirms each history is a violation (panics otherwise) and warms up.
    let set = common::invalid_set();
    let generation_peak = status_bytes("VmHWM");
    let before = status_bytes("VmRSS");
    let reset = reset_peak();
    let mut case = blank(name);
    let mut verdicts = Vec::new();
    let cpu = cpu_ms();
    for inv in &set {
        let start = Instant::now();
        let verdict = check(&inv.history, options);
        let elapsed = ms(start);
        let (processes, keys) = common::shape_of(&inv.history);
        case.ops = case.ops.max(inv.history.ops.len());
        case.processes = case.processes.max(processes);
        case.keys = case.keys.max(keys);
        let v = verdict.violation();
        case.details.push(Detail {
            label: inv.label(),
            mutation: inv.mutation.name().into(),
            seed: inv.seed,
            ops: inv.history.ops.len(),
            elapsed_ms: elapsed,
            found_by: match v.map(|v| v.found_by) {
                Some(FoundBy::Precheck(p)) => format!("pre-check {p}"),
                Some(FoundBy::Search) => "search".into(),
                None => "-".into(),
            },
            diagnosis: v.and_then(|v| v.diagnosis).map(|m| m.name().to_string()),
        });
        verdicts.push(verdict_name(&verdict));
    }
    case.cpu_ms = cpu_ms() - cpu;
    let check_peak = status_bytes("VmHWM");
    case.histories = set.len();
    let times: Vec<f64> = case.details.iter().map(|d| d.elapsed_ms).collect();
    case.elapsed_ms = times.iter().copied().fold(0.0, f64::max);
    case.wall_ms = times.iter().sum::<f64>();
    case.mean_ms = case.wall_ms / times.len().max(1) as f64;
    case.peak_rss_bytes = generation_peak.max(check_peak);
    case.rss_before_check_bytes = before;
    case.check_peak_rss_bytes = if reset { check_peak } else { None };
    case.verdict = match verdicts.first() {
        Some(first) if verdicts.iter().all(|v| v == first) => (*first).into(),
        _ => "mixed".into(),
    };
    case
}

fn verdict_name(v: &Verdict) -> &'static str {
    match v {
        Verdict::Linearizable(_) => "linearizable",
        Verdict::Violation(_) => "violation",
        Verdict::Unknown(_) => "unknown",
    }
}

fn ms(start: Instant) -> f64 {
    start.elapsed().as_secs_f64() * 1e3
}

/// CPU time this process has used, in milliseconds (0 if the clock cannot be read).
fn cpu_ms() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec for the duration of the call.
    if unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut ts) } != 0 {
        return 0.0;
    }
    ts.tv_sec as f64 * 1e3 + ts.tv_nsec as f64 / 1e6
}

/// A `kB` field of /proc/self/status, in bytes.
fn status_bytes(field: &str) -> Option<u64> {
    kib_field(&std::fs::read_to_string("/proc/self/status").ok()?, field)
}

fn kib_field(text: &str, field: &str) -> Option<u64> {
    text.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        if k != field {
            return None;
        }
        let kib: u64 = v.trim().trim_end_matches("kB").trim().parse().ok()?;
        Some(kib * 1024)
    })
}

/// Resets this process's peak RSS to its current RSS (Linux: "5" to clear_refs).
fn reset_peak() -> bool {
    std::fs::write("/proc/self/clear_refs", "5").is_ok()
}
