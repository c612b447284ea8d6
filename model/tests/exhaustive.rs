//! Exhaustive BFS of the default configurations: every invariant holds, every `sometimes`
//! property is reached.

use model::check::{run, RunOptions, Strategy};
use model::Config;

fn check_exhaustively(cfg: &Config, min_unique: usize) {
    let report = run(cfg, &RunOptions::default()).expect("valid config");
    println!("{report}");
    assert!(report.complete, "search stopped early");
    for p in &report.properties {
        assert!(p.holds(), "property {:?} failed:\n{report}", p.name);
    }
    assert!(report.ok());
    assert!(
        report.unique_states >= min_unique,
        "suspiciously small state space: {}",
        report.unique_states
    );
}

#[test]
fn default_config_is_checked_exhaustively() {
    check_exhaustively(&Config::default(), 10_000);
}

#[test]
fn two_key_config_is_checked_exhaustively() {
    check_exhaustively(&Config::two_keys(), 10_000);
}

#[test]
fn dfs_agrees_with_bfs_on_the_default_config() {
    let bfs = run(&Config::default(), &RunOptions::default()).expect("config");
    let dfs = run(
        &Config::default(),
        &RunOptions {
            strategy: Strategy::Dfs,
            ..RunOptions::default()
        },
    )
    .expect("config");
    assert!(dfs.ok(), "{dfs}");
    assert_eq!(bfs.unique_states, dfs.unique_states);
}
