//! Judges one history file with the default options and prints the time taken, the
//! partitions and the start of the verdict: `cargo run --release -p model --example
//! check_file FILE.jsonl [SECONDS] [--no-diagnosis] [--no-prechecks]`.
use model::checker::{check, partition, Windows};
use model::history::jsonl;
use model::{Budget, CheckOptions};
use std::time::{Duration, Instant};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let path = args.first().expect("a history file");
    let secs: u64 = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(20);
    let flag = |f: &str| args.iter().any(|a| a == f);
    let h = jsonl::parse(&std::fs::read_to_string(path).expect("read")).expect("parse");
    let parts = partition(&h, &Windows::derive(&h));
    for p in &parts {
        println!(
            "partition keys {} entries {}",
            p.keys.len(),
            p.entries.len()
        );
    }
    let t = Instant::now();
    let v = check(
        &h,
        &CheckOptions {
            budget: Budget {
                time: Some(Duration::from_secs(secs)),
                ..Budget::default()
            },
            diagnosis: if flag("--no-diagnosis") {
                None
            } else {
                CheckOptions::default().diagnosis
            },
            prechecks: !flag("--no-prechecks"),
            ..CheckOptions::default()
        },
    );
    println!(
        "{:?} {}",
        t.elapsed(),
        v.to_string().chars().take(300).collect::<String>()
    );
}
