//! `leasecheck report merge DIR...`: the reports of the N shards of one gate run
//! (`--shard K/N`) joined into one whose verdict and checks are the unsharded run's. The
//! shards must be the same run (build, options, seed) and all of them, each once. Checks
//! are not re-judged: each suite ran whole in exactly one shard.

use super::outcome::{GateRun, MajorResult, SuiteResult};
use super::report;
use super::shard::{ShardRun, Unit};
use super::suites::LIVENESS;
use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum MergeError {
    #[error("nothing to merge: give the report directories of every shard")]
    Empty,
    #[error("{0} is not a shard's report (its gate ran without --shard K/N)")]
    NotAShard(String),
    #[error(
        "{dir} is shard {index}/{count} but {first} is of {first_count}: merge the shards of \
         one run"
    )]
    Count {
        dir: String,
        index: u32,
        count: u32,
        first: String,
        first_count: u32,
    },
    #[error("shard {index} is given twice ({a} and {b})")]
    Twice { index: u32, a: String, b: String },
    #[error("shard(s) {missing:?} of {count} missing: a merge without them would not be the run")]
    Missing { missing: Vec<u32>, count: u32 },
    #[error(
        "{dir} is of another run than {first}: its {what} is {theirs}, not {ours} (give every \
         shard the same build, options and --seed)"
    )]
    OtherRun {
        dir: String,
        first: String,
        what: &'static str,
        ours: String,
        theirs: String,
    },
    #[error(
        "the shards' units are not the run's: {0} (were the shards run by different \
         leasecheck versions?)"
    )]
    Units(String),
}

/// One shard's report: where it was read from, and its summary.
pub struct ShardReport {
    pub dir: PathBuf,
    pub run: GateRun,
}

impl ShardReport {
    fn name(&self) -> String {
        self.dir.display().to_string()
    }

    fn shard(&self) -> Result<&ShardRun, MergeError> {
        self.run
            .shard
            .as_ref()
            .ok_or_else(|| MergeError::NotAShard(self.name()))
    }
}

/// The merged run: every major of the run in its order, each with the suites its shards
/// ran in the run's order, cut like an unsharded run after a finding that the build hangs;
/// and the suites so cut (`PG <major> <suite>`).
pub fn merge(shards: &[ShardReport]) -> Result<(GateRun, Vec<String>), MergeError> {
    let first = shards.first().ok_or(MergeError::Empty)?;
    let plan = first.shard()?;
    check_complete(shards, plan)?;
    for other in &shards[1..] {
        same_run(first, other)?;
    }
    check_units(shards, plan)?;
    let parts: Vec<(&ShardRun, &[MajorResult])> = shards
        .iter()
        .filter_map(|s| Some((s.run.shard.as_ref()?, s.run.majors.as_slice())))
        .collect();
    let (majors, cut) = join(plan, &parts);
    let run = GateRun {
        started: shards
            .iter()
            .map(|s| s.run.started.clone())
            .min()
            .unwrap_or_default(),
        seconds: shards.iter().map(|s| s.run.seconds).fold(0.0, f64::max),
        shard: None,
        merged_shards: Some(plan.count),
        status: GateRun::overall(&majors),
        majors,
        ..first.run.clone()
    };
    Ok((run, cut))
}

/// The majors of a run from its shares' results (each share's record and majors), in the
/// run's order: each share's results for its own units (a guard's liveness run is not
/// one), cut like an unsharded run after a finding that the build hangs; and the suites
/// so cut (`PG <major> <suite>`).
pub fn join(
    plan: &ShardRun,
    parts: &[(&ShardRun, &[MajorResult])],
) -> (Vec<MajorResult>, Vec<String>) {
    let mut cut = Vec::new();
    let mut majors = Vec::new();
    for &major in &plan.majors {
        let ran: Vec<MajorResult> = parts
            .iter()
            .flat_map(|(share, results)| {
                results.iter().filter(move |m| m.major == major).map(|m| {
                    let suites = m
                        .suites
                        .iter()
                        .filter(|r| owned(share, major, r, &plan.suites));
                    MajorResult {
                        suites: suites.cloned().collect(),
                        ..m.clone()
                    }
                })
            })
            .collect();
        majors.push(merge_major(major, &ran, &plan.suites, &mut cut));
    }
    (majors, cut)
}

/// Every shard of the count, each once.
fn check_complete(shards: &[ShardReport], plan: &ShardRun) -> Result<(), MergeError> {
    let mut seen: Vec<Option<&ShardReport>> = vec![None; plan.count as usize];
    for s in shards {
        let this = s.shard()?;
        if this.count != plan.count {
            return Err(MergeError::Count {
                dir: s.name(),
                index: this.index,
                count: this.count,
                first: shards[0].name(),
                first_count: plan.count,
            });
        }
        let slot = &mut seen[this.index as usize - 1];
        if let Some(earlier) = slot {
            return Err(MergeError::Twice {
                index: this.index,
                a: earlier.name(),
                b: s.name(),
            });
        }
        *slot = Some(s);
    }
    let missing: Vec<u32> = (1..=plan.count)
        .filter(|k| seen[*k as usize - 1].is_none())
        .collect();
    match missing.is_empty() {
        true => Ok(()),
        false => Err(MergeError::Missing {
            missing,
            count: plan.count,
        }),
    }
}

/// Whether `other` is a shard of the same run as `first`.
fn same_run(first: &ShardReport, other: &ShardReport) -> Result<(), MergeError> {
    let (a, b) = (&first.run, &other.run);
    let (pa, pb) = (first.shard()?, other.shard()?);
    let differs = |what: &'static str, ours: String, theirs: String| {
        (ours != theirs).then(|| MergeError::OtherRun {
            dir: other.name(),
            first: first.name(),
            what,
            ours,
            theirs,
        })
    };
    let digests = |r: &GateRun| {
        format!(
            "{:?}",
            r.scripts.iter().map(|d| &d.sha256).collect::<Vec<_>>()
        )
    };
    let found = [
        differs(
            "leasecheck version",
            a.leasecheck.clone(),
            b.leasecheck.clone(),
        ),
        differs("extension", a.extension.clone(), b.extension.clone()),
        differs("version", a.version.clone(), b.version.clone()),
        differs("scripts' SHA-256", digests(a), digests(b)),
        differs("size", a.size.clone(), b.size.clone()),
        differs("seed", format!("{:?}", a.seed), format!("{:?}", b.seed)),
        differs(
            "majors",
            format!("{:?}", pa.majors),
            format!("{:?}", pb.majors),
        ),
        differs(
            "suites",
            format!("{:?}", pa.suites),
            format!("{:?}", pb.suites),
        ),
        differs(
            "fault checks",
            format!("{:?}", pa.faults),
            format!("{:?}", pb.faults),
        ),
    ];
    match found.into_iter().flatten().next() {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

/// The shards' units are the run's (every suite on every major), each in one shard, and
/// each shard ran the units it names.
fn check_units(shards: &[ShardReport], plan: &ShardRun) -> Result<(), MergeError> {
    let mut all: Vec<&Unit> = shards
        .iter()
        .filter_map(|s| s.run.shard.as_ref())
        .flat_map(|s| &s.units)
        .collect();
    for major in &plan.majors {
        for suite in &plan.suites {
            let unit = Unit {
                major: *major,
                suite: suite.clone(),
            };
            match all.iter().filter(|u| ***u == unit).count() {
                1 => all.retain(|u| **u != unit),
                0 => {
                    return Err(MergeError::Units(format!(
                        "pg{major} {suite} is in no shard"
                    )))
                }
                n => {
                    return Err(MergeError::Units(format!(
                        "pg{major} {suite} is in {n} shards"
                    )))
                }
            }
        }
    }
    if let Some(extra) = all.first() {
        let why = format!("pg{} {} is not in the run", extra.major, extra.suite);
        return Err(MergeError::Units(why));
    }
    for s in shards {
        for unit in s.run.shard.iter().flat_map(|p| &p.units) {
            if !reported(&s.run, unit, &plan.suites) {
                let why = format!(
                    "{} names pg{} {} as its own but has no result for it (did its gate end \
                     early?)",
                    s.name(),
                    unit.major,
                    unit.suite
                );
                return Err(MergeError::Units(why));
            }
        }
        let share = s.shard()?;
        for m in &s.run.majors {
            let named = |suite: &SuiteResult| {
                owned(share, m.major, suite, &plan.suites) || suite.suite == LIVENESS
            };
            if let Some(suite) = m.suites.iter().find(|suite| !named(suite)) {
                let why = format!(
                    "{} ran pg{} {}, not its unit",
                    s.name(),
                    m.major,
                    suite.suite
                );
                return Err(MergeError::Units(why));
            }
        }
    }
    Ok(())
}

/// Whether `suite`, a result of `run` on `major`, is of one of its units, or of none of
/// the run's suites (its major could not run: `server`, `container`).
fn owned(share: &ShardRun, major: u32, suite: &SuiteResult, plan_suites: &[String]) -> bool {
    let unit = |u: &Unit| u.major == major && u.suite == suite.suite;
    share.units.iter().any(unit) || !plan_suites.contains(&suite.suite)
}

/// Whether `run` has a result for `unit`, or says why it has none as an unsharded run
/// would: its major could not run (a `server` or `container` suite) or hung earlier.
fn reported(run: &GateRun, unit: &Unit, plan_suites: &[String]) -> bool {
    let Some(major) = run.majors.iter().find(|m| m.major == unit.major) else {
        return false;
    };
    let position = |name: &str| plan_suites.iter().position(|p| p == name);
    major.suites.iter().any(|s| {
        let hung_before =
            s.checks.iter().any(super::ctx::is_hang) && position(&s.suite) < position(&unit.suite);
        s.suite == unit.suite || position(&s.suite).is_none() || hung_before
    })
}

/// One major from the shards that ran some of its suites: the suites in the run's order
/// (a major that could not start names that first), cut after a finding that it hangs.
fn merge_major(
    major: u32,
    ran: &[MajorResult],
    order: &[String],
    cut: &mut Vec<String>,
) -> MajorResult {
    let mut suites: Vec<SuiteResult> = Vec::new();
    for s in ran.iter().flat_map(|m| m.suites.iter()) {
        // Every shard that could not start the major says so; once is the run's.
        let outside_the_run = !order.contains(&s.suite);
        if !(outside_the_run && suites.iter().any(|k| k.suite == s.suite)) {
            suites.push(s.clone());
        }
    }
    let position = |s: &SuiteResult| order.iter().position(|o| *o == s.suite);
    suites.sort_by_key(|s| position(s).map_or(0, |p| p + 1));
    if let Some(hung) = suites
        .iter()
        .position(|s| s.checks.iter().any(super::ctx::is_hang))
    {
        for s in suites.drain(hung + 1..) {
            cut.push(format!("PG {major} {}", s.suite));
        }
    }
    let mut postgres: Vec<String> = ran.iter().filter_map(|m| m.postgres.clone()).collect();
    postgres.dedup();
    let backend = ran.first().map_or("local", |m| m.backend.as_str());
    let postgres = (!postgres.is_empty()).then(|| postgres.join(" / "));
    MajorResult::of(major, postgres, backend, suites)
}

/// Reads every shard's summary.
pub fn read(dirs: &[PathBuf]) -> anyhow::Result<Vec<ShardReport>> {
    dirs.iter()
        .map(|dir| {
            Ok(ShardReport {
                dir: dir.clone(),
                run: report::read_summary(dir)?,
            })
        })
        .collect()
}

/// Copies every shard's files (histories, timelines, bench results) but its three report
/// files into `out`, so the merged report's links resolve; a file two shards wrote
/// differently is refused.
pub fn copy_files(shards: &[ShardReport], out: &Path) -> anyhow::Result<()> {
    for s in shards {
        copy_tree(&s.dir, out, true)?;
    }
    Ok(())
}

fn copy_tree(from: &Path, to: &Path, top: bool) -> anyhow::Result<()> {
    use anyhow::Context;
    std::fs::create_dir_all(to).with_context(|| format!("creating {}", to.display()))?;
    let entries = std::fs::read_dir(from).with_context(|| format!("reading {}", from.display()))?;
    for entry in entries {
        let entry = entry.with_context(|| format!("reading {}", from.display()))?;
        let name = entry.file_name();
        let reports = [report::SUMMARY, report::JUNIT, report::HTML];
        if top && reports.iter().any(|r| name == *r) {
            continue;
        }
        let (src, dst) = (entry.path(), to.join(&name));
        if entry.file_type()?.is_dir() {
            copy_tree(&src, &dst, false)?;
            continue;
        }
        if dst.exists() {
            let same = std::fs::read(&src).ok() == std::fs::read(&dst).ok();
            anyhow::ensure!(
                same,
                "two shards wrote {} differently (the second is {})",
                dst.display(),
                src.display()
            );
            continue;
        }
        std::fs::copy(&src, &dst)
            .with_context(|| format!("copying {} to {}", src.display(), dst.display()))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests;
