//! Generates the table of the fault checks' plans from the files of `plans/`: each
//! `NAME.plan` is the situation a fault record names as `Situation::Plan { name: "NAME", .. }`,
//! so adding a situation written as a plan is adding its file (CONTRIBUTING.md, "Add a
//! fault").

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

const PLANS_DIR: &str = "plans";

fn main() {
    let manifest = std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    let out = std::env::var("OUT_DIR").expect("cargo sets OUT_DIR");
    println!("cargo:rerun-if-changed={PLANS_DIR}");
    let plans = plan_files(&Path::new(&manifest).join(PLANS_DIR));
    let mut code =
        String::from("/// Every plan file of `failure/plans/`: (name, text), by name.\n");
    let _ = writeln!(
        code,
        "pub(crate) const PLANS: [(&str, &str); {}] = [",
        plans.len()
    );
    for (name, path) in &plans {
        println!("cargo:rerun-if-changed={}", path.display());
        let _ = writeln!(
            code,
            "    ({name:?}, include_str!({:?})),",
            path.display().to_string()
        );
    }
    let _ = writeln!(code, "];");
    let target = Path::new(&out).join("fault_plans.rs");
    if let Err(e) = std::fs::write(&target, code) {
        panic!("cannot write {}: {e}", target.display());
    }
}

/// The `.plan` files of `dir` (name without the extension, absolute path), sorted by name.
fn plan_files(dir: &Path) -> Vec<(String, PathBuf)> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) => panic!("cannot read {}: {e}", dir.display()),
    };
    let mut files: Vec<(String, PathBuf)> = entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.is_file() && p.extension().is_some_and(|x| x == "plan"))
        .filter_map(|p| Some((p.file_stem()?.to_str()?.to_string(), p)))
        .collect();
    files.sort();
    files
}
