//! Helpers of the gate's CLI tests (gate_cli, gate_dsn).

use harness::extension::{Mutant, MUTANTS};
use model::mutation::Mutation;
use serde_json::Value;
use std::path::Path;
use std::process::Command;

/// Exit status and output (stdout, then stderr) of `leasecheck ARGS`.
pub fn leasecheck(args: &[&str]) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_leasecheck"))
        .args(args)
        .output()
        .expect("leasecheck runs");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.code().unwrap_or(-1), text)
}

/// The gate's `summary.json` in `report`.
pub fn summary(report: &Path) -> Value {
    let text = std::fs::read_to_string(report.join("summary.json")).expect("summary.json");
    serde_json::from_str(&text).expect("summary.json is JSON")
}

/// The invariant the model says a mutant of this name breaks (the model's catalogue names
/// its mutations with dashes).
pub fn expected_invariant(m: &Mutant) -> Option<String> {
    let name = m.name.replace('_', "-");
    Mutation::ALL
        .iter()
        .find(|x| x.name() == name)
        .and_then(|x| x.expected())
        .map(|i| i.to_string())
}

/// The catalogued mutant `name`.
pub fn mutant(name: &str) -> &'static Mutant {
    MUTANTS
        .iter()
        .find(|m| m.name == name)
        .expect("a catalogued mutant")
}
