//! Which suites run on which major: the whole selection, or one share of it
//! ([`super::shard`]) with the liveness guard first.

use super::shard::{self, Shard, ShardRun, Unit};
use super::suites::{Suite, LIVENESS};
use super::Size;

/// The suites each major runs, in order.
pub type Plan = Vec<(u32, Vec<Suite>)>;

/// Every selected suite on every major.
pub fn whole(majors: &[u32], selected: &[Suite]) -> Plan {
    majors.iter().map(|&m| (m, selected.to_vec())).collect()
}

/// The run's units (a suite on a major, in the run's order), each with its cost hint.
pub fn units(majors: &[u32], selected: &[Suite], size: Size) -> Vec<(Unit, u32)> {
    majors
        .iter()
        .flat_map(|&major| {
            selected.iter().map(move |s| {
                let unit = Unit {
                    major,
                    suite: s.name.to_string(),
                };
                (unit, s.cost(size))
            })
        })
        .collect()
}

/// Share `which` of the run: its units, each major's preceded by the liveness suite even
/// when another share reports it (on a build that hangs a share stops there in seconds, as
/// an unsharded run does; the merge counts the owner's result only); and the record of the
/// run it is a share of.
pub fn of_shard(
    which: Shard,
    majors: &[u32],
    selected: &[Suite],
    size: Size,
    faults: Vec<String>,
) -> Result<(Plan, ShardRun), shard::ShardError> {
    let mine = shard::select(which, &units(majors, selected, size))?;
    let guard = selected.iter().find(|s| s.name == LIVENESS);
    let plan = majors
        .iter()
        .map(|&m| {
            let mut suites: Vec<Suite> = selected
                .iter()
                .filter(|s| mine.iter().any(|u| u.major == m && u.suite == s.name))
                .copied()
                .collect();
            if let Some(guard) = guard.filter(|_| !suites.is_empty()) {
                if suites.first().map(|s| s.name) != Some(guard.name) {
                    suites.insert(0, *guard);
                }
            }
            (m, suites)
        })
        .filter(|(_, suites)| !suites.is_empty())
        .collect();
    let record = ShardRun {
        index: which.index,
        count: which.count,
        majors: majors.to_vec(),
        suites: selected.iter().map(|s| s.name.to_string()).collect(),
        faults,
        units: mine,
    };
    Ok((plan, record))
}
