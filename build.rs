//! Generates the gate's registry of suites from the files of `src/gate/suites/`: each file
//! but `mod.rs` is one suite declaring `pub(super) const SUITE: Suite`, so adding a suite
//! is adding its file (CONTRIBUTING.md, "Add a gate suite").

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

const SUITES_DIR: &str = "src/gate/suites";

fn main() {
    let manifest = std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    let out = std::env::var("OUT_DIR").expect("cargo sets OUT_DIR");
    let dir = Path::new(&manifest).join(SUITES_DIR);
    println!("cargo:rerun-if-changed={SUITES_DIR}");
    let files = suite_files(&dir);
    let mut code = String::new();
    for (name, path) in &files {
        let _ = writeln!(
            code,
            "#[path = {:?}]\npub(super) mod {name};",
            path.display().to_string()
        );
    }
    let _ = writeln!(code, "\n/// Every suite's record, in file-name order.");
    let _ = writeln!(code, "const SUITE_FILES: [Suite; {}] = [", files.len());
    for (name, _) in &files {
        let _ = writeln!(code, "    self::{name}::SUITE,");
    }
    let _ = writeln!(code, "];");
    let target = Path::new(&out).join("gate_suites.rs");
    if let Err(e) = std::fs::write(&target, code) {
        panic!("cannot write {}: {e}", target.display());
    }
}

/// The suite files of `dir` (module name, absolute path), sorted by name.
fn suite_files(dir: &Path) -> Vec<(String, PathBuf)> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) => panic!("cannot read {}: {e}", dir.display()),
    };
    let mut files: Vec<(String, PathBuf)> = entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.is_file() && p.extension().is_some_and(|x| x == "rs"))
        .filter_map(|p| {
            let stem = p.file_stem()?.to_str()?.to_string();
            (stem != "mod").then_some((stem, p))
        })
        .collect();
    for (name, path) in &files {
        let ident = name
            .chars()
            .enumerate()
            .all(|(i, c)| c == '_' || c.is_ascii_lowercase() || (i > 0 && c.is_ascii_digit()));
        assert!(
            ident,
            "{}: a suite file's name must be a Rust module name (lowercase, digits, _)",
            path.display()
        );
    }
    files.sort();
    files
}
