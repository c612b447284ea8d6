//! Recorded histories re-judged on every change of the model, each with its committed
//! verdict: the runs kept in `results/histories/` (gzipped, beside their `verdict.json`),
//! the examples of specs/HISTORY.md (`specs/examples/`), and the regression cases of
//! `tests/histories/` (each names its expected verdict in its header's `meta.expect`).
//!
//! Histories over `CORPUS_OPS` ops are judged only with `LEASECHECK_CORPUS_FULL=1` (none
//! is today: the largest has 10,000 ops and takes about a second).

use flate2::read::GzDecoder;
use model::checker::check;
use model::history::jsonl;
use model::{CheckOptions, History, Verdict};
use serde_json::Value;
use std::io::Read;
use std::path::{Path, PathBuf};

const CORPUS_OPS: usize = 20_000;

/// What a file must be judged.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Expected {
    Linearizable,
    Violation(u8),
}

impl Expected {
    fn of(verdict: &str, invariant: Option<u64>) -> Expected {
        match (verdict, invariant) {
            ("linearizable", _) => Expected::Linearizable,
            ("violation", Some(n)) => Expected::Violation(n as u8),
            other => panic!("no expected verdict in {other:?}"),
        }
    }

    fn matches(&self, v: &Verdict) -> bool {
        match self {
            Expected::Linearizable => v.is_linearizable(),
            Expected::Violation(n) => v.invariant().map(|i| i.number()) == Some(*n),
        }
    }
}

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn read(path: &Path) -> History {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let text = if path.extension().is_some_and(|e| e == "gz") {
        let mut s = String::new();
        GzDecoder::new(&bytes[..])
            .read_to_string(&mut s)
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        s
    } else {
        String::from_utf8(bytes).expect("UTF-8")
    };
    jsonl::parse(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Every history of the corpus with its expected verdict.
fn corpus() -> Vec<(PathBuf, Expected)> {
    let mut out = Vec::new();
    let runs = root().join("results/histories");
    for dir in std::fs::read_dir(&runs).expect("results/histories") {
        let dir = dir.expect("entry").path();
        let history = dir.join("history.jsonl.gz");
        if !history.exists() {
            continue;
        }
        let verdict: Value = serde_json::from_str(
            &std::fs::read_to_string(dir.join("verdict.json")).expect("verdict.json"),
        )
        .expect("verdict.json is JSON");
        let name = verdict["verdict"].as_str().expect("verdict");
        out.push((
            history,
            Expected::of(name, verdict["invariant"]["number"].as_u64()),
        ));
    }
    // specs/HISTORY.md says what its two examples are judged
    let examples = root().join("specs/examples");
    out.push((
        examples.join("history-linearizable.jsonl"),
        Expected::Linearizable,
    ));
    out.push((
        examples.join("history-violation.jsonl"),
        Expected::Violation(1),
    ));
    let cases = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/histories");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&cases)
        .expect("tests/histories")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "jsonl"))
        .collect();
    files.sort();
    for file in files {
        let h = read(&file);
        let expect = &h.meta["expect"];
        let verdict = expect["verdict"].as_str().expect("meta.expect.verdict");
        out.push((file, Expected::of(verdict, expect["invariant"].as_u64())));
    }
    out
}

#[test]
fn the_corpus_keeps_its_verdicts() {
    let full = std::env::var_os("LEASECHECK_CORPUS_FULL").is_some();
    let corpus = corpus();
    assert!(corpus.len() >= 16, "{} files", corpus.len());
    let mut wrong = Vec::new();
    for (path, expected) in &corpus {
        let h = read(path);
        if h.ops.len() > CORPUS_OPS && !full {
            println!("{}: {} ops, skipped", path.display(), h.ops.len());
            continue;
        }
        let started = std::time::Instant::now();
        let v = check(&h, &CheckOptions::default());
        println!(
            "{}: {} ops, {:.2?}: {}",
            path.strip_prefix(root()).unwrap_or(path).display(),
            h.ops.len(),
            started.elapsed(),
            v.to_string().lines().next().unwrap_or("")
        );
        if !expected.matches(&v) {
            wrong.push(format!(
                "{}: expected {expected:?}, got\n{v}",
                path.display()
            ));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n\n"));
}
