//! `leasecheck mutants`: hunts every SQL mutant of the one catalogue (`harness::mutants`)
//! that campaigns hunt (the fault-only ones are hunted by `leasecheck faults --controls`)
//! with history campaigns on a throwaway cluster, runs pg_lease itself through the same
//! campaigns (the control), prints one line per mutant and the kill rate, and writes the
//! kill table under `results/mutants/<timestamp>/`. `--export DIR` writes each mutant as a
//! standalone extension directory instead.

use anyhow::Context;
use harness::extension::ExtensionFiles;
use harness::judgement::Judgement;
use harness::mutants::{self, HuntOptions, HuntReport, Mutant, Run, Status};
use indicatif::{ProgressBar, ProgressStyle};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// Hunt the SQL mutants with history campaigns: each must be killed by a verdict naming its
/// invariant (or, for lock behaviour, a stall), and pg_lease must pass the same campaigns.
/// Exit 0 all killed and the control clean, 1 a survivor or a finding on pg_lease, 2 an
/// infrastructure failure.
#[derive(Debug, Clone, clap::Args)]
pub struct MutantsArgs {
    /// PostgreSQL major(s) (repeatable); fetched if not installed.
    #[arg(long = "pg", default_values_t = [harness::pg::DEFAULT_MAJOR])]
    pub majors: Vec<u32>,
    /// Only these mutants (repeatable) [default: the whole catalogue].
    #[arg(long = "mutant", value_name = "NAME")]
    pub mutants: Vec<String>,
    /// More and longer campaigns per mutant (10 free-running of 5,000 calls, 300 plans).
    #[arg(long)]
    pub full: bool,
    /// Write each mutant as a standalone extension, DIR/pg_lease_<name>/ (the control file,
    /// the versioned scripts CREATE EXTENSION runs, and the same as one install.sql), and
    /// exit.
    #[arg(long, value_name = "DIR")]
    pub export: Option<PathBuf>,
    /// Print the whole catalogue (SQL mutants and model mutations without one) as a
    /// Markdown table, and exit.
    #[arg(long, conflicts_with = "export")]
    pub list: bool,
    /// Where the run directory goes [default: results/mutants].
    #[arg(long, value_name = "DIR", default_value = "results/mutants")]
    pub results_dir: PathBuf,
}

pub fn run(args: &MutantsArgs) -> anyhow::Result<i32> {
    if args.list {
        print!("{}", catalogue_table());
        return Ok(0);
    }
    let selected = select(&args.mutants)?;
    if let Some(dir) = &args.export {
        export(&selected, dir)?;
        return Ok(0);
    }
    let selected = hunted_here(selected)?;
    let options = if args.full {
        HuntOptions::full()
    } else {
        HuntOptions::quick()
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    let stamp = chrono::Utc::now().format("%Y%m%dT%H%M%SZ").to_string();
    let out = args.results_dir.join(&stamp);
    std::fs::create_dir_all(&out).with_context(|| format!("creating {}", out.display()))?;
    let mut code = 0;
    for &major in &args.majors {
        let (install, cluster) = crate::start(major)?;
        println!(
            "mutants: {} SQL mutant(s) on PostgreSQL {}, port {}",
            selected.len(),
            install.version,
            cluster.port()
        );
        let outcome = runtime.block_on(hunt_all(&cluster, &selected, &options));
        // The hunts' lines were printed as they ended.
        let summary = render_summary(&outcome);
        print!("{summary}");
        let table = format!("{}{summary}", render_hunts(&outcome));
        let file = out.join(format!("pg{major}.txt"));
        std::fs::write(&file, &table).with_context(|| format!("writing {}", file.display()))?;
        let json = out.join(format!("pg{major}.json"));
        let text = serde_json::to_string_pretty(&to_json(&outcome, &install.version.full))?;
        std::fs::write(&json, text).with_context(|| format!("writing {}", json.display()))?;
        code = code.max(outcome.exit_code());
    }
    println!("results in {}", out.display());
    Ok(code)
}

/// The mutants named (all when none is).
fn select(names: &[String]) -> anyhow::Result<Vec<&'static Mutant>> {
    if names.is_empty() {
        return Ok(mutants::MUTANTS.iter().collect());
    }
    names
        .iter()
        .map(|n| {
            mutants::find(n).ok_or_else(|| {
                let known: Vec<&str> = mutants::MUTANTS.iter().map(|m| m.name).collect();
                anyhow::anyhow!("no mutant {n:?}; known: {}", known.join(", "))
            })
        })
        .collect()
}

/// The selected mutants the campaigns hunt; the fault-only ones are named with the
/// command that hunts them (refused when nothing is left).
fn hunted_here(selected: Vec<&'static Mutant>) -> anyhow::Result<Vec<&'static Mutant>> {
    let (here, by_faults): (Vec<&'static Mutant>, Vec<&'static Mutant>) =
        selected.into_iter().partition(|m| m.hunted_by_campaigns());
    for m in &by_faults {
        println!(
            "{}: hunted by the fault checks, not here: leasecheck faults --controls --fault {}",
            m.name,
            m.fault_checks().join(" --fault ")
        );
    }
    if here.is_empty() {
        anyhow::bail!("no selected mutant is hunted by campaigns");
    }
    Ok(here)
}

/// The catalogue as a Markdown table: one row per SQL mutant, then the model mutations
/// that have none.
fn catalogue_table() -> String {
    let mut s = String::from(
        "| entry | model mutation | invariant | killed by | breaks |\n| --- | --- | --- | --- | --- |\n",
    );
    for e in mutants::catalogue() {
        let name = match e {
            mutants::Entry::Sql(m) => format!("`{}`", m.name),
            mutants::Entry::ModelOnly(_) => "(model only)".to_string(),
        };
        let _ = writeln!(
            s,
            "| {name} | {} | {} | {} | {}{} |",
            e.mutation()
                .map_or("-".to_string(), |m| format!("`{}`", m.name())),
            invariants(&e),
            e.killed_by().replace('|', "\\|"),
            e.breaks().replace('|', "\\|"),
            match e {
                mutants::Entry::ModelOnly(m) => format!(". No SQL form: {}", m.why),
                mutants::Entry::Sql(_) => String::new(),
            }
        );
    }
    s
}

/// "10 or 11"; "- (stall)" or "- (finding)" when there is none.
fn invariants(e: &mutants::Entry) -> String {
    let list = e.invariants();
    if let mutants::Entry::Sql(m) = e {
        if matches!(m.kill, mutants::Kill::Finding(_)) {
            return "- (finding)".to_string();
        }
    }
    if list.is_empty() {
        return "- (stall)".to_string();
    }
    let numbers: Vec<String> = list.iter().map(|i| i.number().to_string()).collect();
    numbers.join(" or ")
}

/// The one-file install script of an exported mutant (not named `<extension>--*.sql`, so a
/// reader of the directory's versioned scripts ignores it).
const INSTALL_SQL: &str = "install.sql";

/// Writes each mutant's control file and scripts into `dir/pg_lease_<name>/`, and both
/// scripts as one, `install.sql`.
fn export(selected: &[&'static Mutant], dir: &Path) -> anyhow::Result<()> {
    for m in selected {
        let files = ExtensionFiles::mutant(m)?;
        let sub = dir.join(&files.name);
        std::fs::create_dir_all(&sub).with_context(|| format!("creating {}", sub.display()))?;
        let control = sub.join(format!("{}.control", files.name));
        std::fs::write(&control, &files.control)
            .with_context(|| format!("writing {}", control.display()))?;
        for (name, text) in &files.scripts {
            let path = sub.join(name);
            std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?;
        }
        let install = files.install_script();
        let path = sub.join(INSTALL_SQL);
        std::fs::write(&path, install).with_context(|| format!("writing {}", path.display()))?;
        println!("{}: {}", sub.display(), m.breaks);
    }
    Ok(())
}

/// Every hunt and the control of one cluster.
struct Outcome {
    hunts: Vec<HuntReport>,
    control: HuntReport,
}

impl Outcome {
    fn killed(&self) -> usize {
        self.hunts.iter().filter(|h| h.killed()).count()
    }

    /// The hunts that ended without a verdict (a mutant that did not install, a harness
    /// failure, a hang outside the target): the catalogue's gate-strength figure beside
    /// the kill rate, whose goal is 0.
    fn no_verdict(&self) -> Vec<&HuntReport> {
        self.hunts
            .iter()
            .filter(|h| matches!(h.status, Status::Infrastructure(_)))
            .collect()
    }

    /// A hunt that could not run (a mutant that does not install, a hang) says nothing
    /// about the catalogue, whatever the others found.
    fn exit_code(&self) -> i32 {
        let all: Vec<Judgement> = self
            .hunts
            .iter()
            .chain([&self.control])
            .map(HuntReport::judgement)
            .collect();
        Judgement::exit_of(&all).code()
    }
}

async fn hunt_all(
    cluster: &harness::pg::Cluster,
    selected: &[&'static Mutant],
    options: &HuntOptions,
) -> Outcome {
    let bar = ProgressBar::new(selected.len() as u64 + 1);
    bar.set_style(
        ProgressStyle::with_template("{bar:30} {pos}/{len} {elapsed} {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let mut hunts = Vec::new();
    for m in selected {
        bar.set_message(m.name);
        let tell = |r: &Run| {
            bar.set_message(format!(
                "{}: {} {}",
                m.name,
                r.mode.run_label(r.seed),
                r.judged
            ))
        };
        let report = mutants::hunt_with(cluster, m, options, &tell).await;
        // println of a hidden bar (no terminal) prints nothing: suspend it instead.
        bar.suspend(|| println!("{}", report.line()));
        bar.inc(1);
        hunts.push(report);
    }
    bar.set_message("control: pg_lease through the same campaigns");
    let campaigns = HuntReport::campaigns_run(&hunts);
    let tell = |r: &Run| {
        bar.set_message(format!(
            "control: {} {}",
            r.mode.run_label(r.seed),
            r.judged
        ))
    };
    let control = mutants::control(cluster, &campaigns, options, &tell).await;
    bar.inc(1);
    bar.finish_and_clear();
    Outcome { hunts, control }
}

/// One line per mutant.
fn render_hunts(o: &Outcome) -> String {
    o.hunts.iter().map(|h| format!("{}\n", h.line())).collect()
}

/// The control, the kill rate and the campaign figures.
fn render_summary(o: &Outcome) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "control {}", o.control.line());
    let n = o.hunts.len();
    let rate = if n > 0 {
        100.0 * o.killed() as f64 / n as f64
    } else {
        0.0
    };
    let _ = writeln!(s, "kill rate: {}/{n} ({rate:.0}%)", o.killed());
    let none = o.no_verdict();
    let _ = writeln!(
        s,
        "no verdict: {}/{n} (goal 0){}",
        none.len(),
        match none.is_empty() {
            true => String::new(),
            false => format!(
                ": {}",
                none.iter()
                    .map(|h| h.target.to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        }
    );
    let free: Vec<&Run> = o
        .hunts
        .iter()
        .chain([&o.control])
        .flat_map(|h| &h.runs)
        .filter(|r| r.mode == mutants::Mode::Free && r.ops > 0)
        .collect();
    if !free.is_empty() {
        let rates: Vec<f64> = free.iter().map(|r| r.ops_per_s).collect();
        let min = rates.iter().cloned().fold(f64::INFINITY, f64::min);
        let max = rates.iter().cloned().fold(0.0, f64::max);
        let mean = rates.iter().sum::<f64>() / rates.len() as f64;
        let _ = writeln!(
            s,
            "free-running campaigns: {} recorded and checked, {:.0} ops/s mean (min {min:.0}, max {max:.0})",
            free.len(),
            mean
        );
    }
    s
}

fn run_json(r: &Run) -> serde_json::Value {
    serde_json::json!({
        "mode": r.mode.name(),
        "seed": r.seed,
        "outcome": r.outcome,
        "verdict": r.verdict,
        "invariant": r.invariant.map(|i| i.number()),
        "diagnosis": r.diagnosis,
        "judged": r.judged.to_string(),
        "ops": r.ops,
        "ops_per_s": r.ops_per_s,
        "check_ms": r.check_time.as_millis() as u64,
        "elapsed_ms": r.elapsed.as_millis() as u64,
    })
}

fn hunt_json(h: &HuntReport) -> serde_json::Value {
    let status = match &h.status {
        Status::Killed(_) => "killed".to_string(),
        Status::Survived => "survived".to_string(),
        Status::Infrastructure(e) => format!("infrastructure: {e}"),
    };
    serde_json::json!({
        "target": h.target.to_string(),
        "wanted": h.kill.map(|k| k.wanted()),
        "status": status,
        "killer": h.killer().map(run_json),
        "runs": h.runs.iter().map(run_json).collect::<Vec<_>>(),
        "elapsed_ms": h.elapsed.as_millis() as u64,
    })
}

fn to_json(o: &Outcome, postgres: &str) -> serde_json::Value {
    serde_json::json!({
        "postgres": postgres,
        "killed": o.killed(),
        "no_verdict": o.no_verdict().len(),
        "mutants": o.hunts.len(),
        "hunts": o.hunts.iter().map(hunt_json).collect::<Vec<_>>(),
        "control": hunt_json(&o.control),
    })
}
