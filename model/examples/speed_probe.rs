use model::checker::check;
use model::gen::{generate, GenConfig};
use model::CheckOptions;
use std::time::Instant;
fn main() {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .map(|a| a.parse().unwrap())
        .collect();
    let (clients, keys, ops) = (args[0] as u32, args[1] as u32, args[2]);
    let t = Instant::now();
    let h = generate(&GenConfig::bench(clients, keys, ops), 1);
    println!("generated {} ops in {:?}", h.ops.len(), t.elapsed());
    let t = Instant::now();
    let v = check(&h, &CheckOptions::default());
    println!(
        "checked in {:?}: {}",
        t.elapsed(),
        v.to_string().lines().next().unwrap()
    );
}
