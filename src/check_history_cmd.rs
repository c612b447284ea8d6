//! `leasecheck check-history`: judge a recorded history (specs/HISTORY.md) with the
//! linearizability checker of crate `model`.

use anyhow::Context;
use model::checker::check;
use model::history::jsonl;
use model::{Budget, CheckOptions, History, Verdict};
use std::fs::File;
use std::io::{self, BufReader, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Judge a recorded history: exit 0 linearizable, 1 violation, 2 unknown or unreadable.
#[derive(Debug, Clone, clap::Args)]
pub struct CheckHistoryArgs {
    /// The history, in JSON Lines (specs/HISTORY.md).
    #[arg(value_name = "FILE.jsonl")]
    pub file: PathBuf,
    /// Wall-clock time for the search, e.g. 30s, 500ms, 2m [default: 60s].
    #[arg(long, value_parser = humantime::parse_duration)]
    pub budget: Option<Duration>,
    /// Search states to memoise, summed over keys [default: 20000000].
    #[arg(long, value_name = "N")]
    pub max_states: Option<u64>,
    /// Bytes the search's states may take, e.g. 512MiB, 4GiB [default: 2GiB].
    #[arg(long, value_name = "SIZE", value_parser = crate::check_cmd::parse_bytes)]
    pub max_memory: Option<u64>,
}

impl CheckHistoryArgs {
    fn options(&self) -> CheckOptions {
        let default = Budget::default();
        CheckOptions {
            budget: Budget {
                time: self.budget.or(default.time),
                states: self.max_states.or(default.states),
                memory: self.max_memory.or(default.memory),
            },
            ..CheckOptions::default()
        }
    }
}

/// Reads and judges the history, prints the verdict, and returns the exit status.
pub fn run(args: &CheckHistoryArgs) -> anyhow::Result<i32> {
    let history = read(&args.file)?;
    let verdict = check(&history, &args.options());
    print_verdict(&verdict)?;
    Ok(verdict.exit().code())
}

/// Prints the verdict on stdout. A reader that closed the pipe early (`| head -1`) has
/// what it wanted; the exit status still carries the verdict, so that is not an error.
fn print_verdict(verdict: &Verdict) -> anyhow::Result<()> {
    match writeln!(io::stdout().lock(), "{verdict}") {
        Err(e) if e.kind() != io::ErrorKind::BrokenPipe => {
            Err(e).context("writing the verdict to stdout")
        }
        _ => Ok(()),
    }
}

fn read(path: &Path) -> anyhow::Result<History> {
    let file = File::open(path).with_context(|| format!("cannot open {}", path.display()))?;
    let history = jsonl::read(BufReader::new(file))
        .with_context(|| format!("{} is not a readable history", path.display()))?;
    Ok(history)
}
