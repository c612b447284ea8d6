//! Times the lost-calls case of `benches/common` once, without the figures' bookkeeping:
//! `cargo run --release -p model --example lost_calls_probe [-- double]`.
#[path = "../benches/common/mod.rs"]
mod common;

use model::checker::check;
use model::CheckOptions;
use std::time::Instant;

fn main() {
    let mut h = common::lost_calls(common::LOST_20K);
    if std::env::args().any(|a| a == "double") {
        h = common::with_double_grant(h);
    }
    let lost = h.ops.iter().filter(|o| o.result.is_unknown()).count();
    let crashes = h.nemeses.iter().filter(|n| n.fault == "crash").count();
    println!("{} ops, {lost} lost, {crashes} crashes", h.ops.len());
    let t = Instant::now();
    let v = check(&h, &CheckOptions::default());
    println!(
        "checked in {:?}: {}",
        t.elapsed(),
        v.to_string().lines().next().unwrap_or("")
    );
}
