//! `leasecheck check --nemesis crash,pause,cut,...`: a free-running campaign under a fault
//! schedule drawn from the seed (faults one at a time, each recorded in the history as a
//! nemesis event), the whole history judged across every restart. verdict.json carries
//! the schedule and the fault counts.

use super::{async_runtime, bar, print_figures, CheckArgs, RunFiles};
use anyhow::{bail, Context};
use harness::campaign::{self, Campaign, Length};
use nemesis::fault::parse_group;
use nemesis::mixed::{self, MixedReport};
use nemesis::schedule::{self, Schedule};
use nemesis::Fault;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

/// The length of a run under faults when `--time` is not given.
const DEFAULT_TIME: Duration = Duration::from_secs(60);

/// A session keeps trying to connect this long: longer than any fault holds the server
/// out of reach (restarts, pauses and blackholes hold at most 3 s, specs/FAILURE-MODEL.md).
const CONNECT_PATIENCE: Duration = Duration::from_secs(30);

/// The faults a `--nemesis` list names (names or groups), each once, in order.
pub fn faults(list: &str) -> anyhow::Result<Vec<Fault>> {
    let mut faults = Vec::new();
    for name in list.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        for fault in parse_group(name)? {
            if !fault.spec().in_campaign {
                bail!(
                    "{fault} is a scripted situation (run it with `leasecheck faults --fault {fault}`); \
                     a campaign can inject: {}",
                    Fault::CAMPAIGN.map(Fault::name).join(", ")
                );
            }
            if !faults.contains(&fault) {
                faults.push(fault);
            }
        }
    }
    if faults.is_empty() {
        bail!("--nemesis names no fault");
    }
    Ok(faults)
}

fn schedule_json(schedule: &Schedule) -> serde_json::Value {
    schedule
        .0
        .iter()
        .map(|p| {
            serde_json::json!({
                "fault": p.fault.name(),
                "gap_ms": p.gap.as_millis() as u64,
                "hold_ms": p.hold.as_millis() as u64,
                "pick": p.pick,
            })
        })
        .collect()
}

/// Runs the campaign under `list`'s faults; the exit status.
pub fn run(args: &CheckArgs, list: &str, seed: u64, dir: &Path) -> anyhow::Result<i32> {
    if args.ops.is_some() {
        bail!("--nemesis runs for a time: use --time, not --ops");
    }
    let faults = faults(list)?;
    let time = args.time.unwrap_or(DEFAULT_TIME);
    let plain = args.campaign(dir.join(super::HISTORY), seed)?;
    let campaign = Campaign {
        length: Length::Time(time),
        connect_patience: CONNECT_PATIENCE,
        final_inspect: true,
        ..plain
    };
    let schedule = schedule::draw(&faults, time, seed);
    println!(
        "check: {} on PostgreSQL {}, {} processes x {} keys, for {time:?}, {} faults of {} scheduled, seed {seed} (repeat with --seed {seed})",
        campaign.target,
        args.major,
        campaign.workload.processes,
        campaign.workload.keys,
        schedule.0.len(),
        faults.iter().map(|f| f.name()).collect::<Vec<_>>().join(",")
    );
    let (_install, cluster) = crate::start(args.major)?;
    let runtime = async_runtime()?;
    let progress = Arc::new(bar(campaign.length));
    let (report, cluster) =
        runtime.block_on(mixed::run(cluster, &campaign, &schedule, progress.clone()));
    progress.0.finish_and_clear();
    drop(cluster);
    write_and_print(args, &campaign, &schedule, &report, seed, dir)?;
    Ok(report.exit().code())
}

fn write_and_print(
    args: &CheckArgs,
    campaign: &Campaign,
    schedule: &Schedule,
    report: &MixedReport,
    seed: u64,
    dir: &Path,
) -> anyhow::Result<()> {
    let files = RunFiles::new(dir);
    let timeline = files.write_timeline(
        args.timeline,
        &report.report,
        None,
        &format!("{} seed {seed} under faults", campaign.target),
    )?;
    let mut verdict = campaign::verdict_json(&report.report, campaign, files.history_name());
    let fields = verdict
        .as_object_mut()
        .context("the verdict file is not an object")?;
    fields.insert("timeline".into(), timeline.into());
    fields.insert("verdict".into(), report.verdict_name().into());
    fields.insert("exit_status".into(), report.exit().code().into());
    fields.insert(
        "nemesis".into(),
        serde_json::json!({
            "schedule": schedule_json(schedule),
            "injected": report.tallies_json(),
            "failure": report.failure.as_ref().map(|e| e.to_string()),
        }),
    );
    files.write_verdict(&verdict)?;
    println!("{report}");
    files.print_timeline(timeline);
    print_figures(&report.report.figures);
    files.print_paths(&report.report, &format!("seed {seed}"));
    Ok(())
}
