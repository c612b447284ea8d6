use model::checker::{check, partition, Windows};
use model::history::jsonl;
use model::{Budget, CheckOptions};
use std::time::{Duration, Instant};
fn main() {
    let path = std::env::args().nth(1).expect("file");
    let secs: u64 = std::env::args()
        .nth(2)
        .and_then(|s| s.parse().ok())
        .unwrap_or(20);
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
                states: None,
            },
            ..CheckOptions::default()
        },
    );
    println!(
        "{:?} {}",
        t.elapsed(),
        v.to_string().chars().take(300).collect::<String>()
    );
}
