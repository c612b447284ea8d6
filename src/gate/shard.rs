//! `--shard K/N`: a gate run's units (one suite on one major) split deterministically into
//! N shares, so N CI runners share one gate; `leasecheck report merge` joins their reports
//! (see [`super::merge`]). A unit is the smallest share because a suite stops at its first
//! finding and its checks share one cluster: a merged run then has exactly the checks an
//! unsharded run has.

use serde::{Deserialize, Serialize};
use std::str::FromStr;

/// The K-th (1-based) of N shards.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Shard {
    pub index: u32,
    pub count: u32,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ShardError {
    #[error("--shard {0:?}: expected K/N with 1 <= K <= N, e.g. 2/3")]
    Syntax(String),
    #[error(
        "--shard {index}/{count}: this run has {units} unit(s) (a suite on a major), fewer \
         than {count} shards; use at most {units} shards or select more suites or majors"
    )]
    TooMany {
        index: u32,
        count: u32,
        units: usize,
    },
}

impl FromStr for Shard {
    type Err = ShardError;

    fn from_str(text: &str) -> Result<Shard, ShardError> {
        let syntax = || ShardError::Syntax(text.to_string());
        let (k, n) = text.split_once('/').ok_or_else(syntax)?;
        let index: u32 = k.trim().parse().map_err(|_| syntax())?;
        let count: u32 = n.trim().parse().map_err(|_| syntax())?;
        if index == 0 || index > count {
            return Err(syntax());
        }
        Ok(Shard { index, count })
    }
}

impl std::fmt::Display for Shard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

/// One suite on one major.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Unit {
    pub major: u32,
    pub suite: String,
}

/// What a shard's summary says about the whole run it is a share of (`leasecheck report
/// merge` checks the shards against it).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShardRun {
    pub index: u32,
    pub count: u32,
    /// The whole run's majors, suites and fault checks, in the order they run.
    pub majors: Vec<u32>,
    pub suites: Vec<String>,
    pub faults: Vec<String>,
    /// This shard's units.
    pub units: Vec<Unit>,
}

/// The shard (1-based) of each of `costs`' units: longest first (ties in the run's order),
/// each to the shard with the least cost so far (ties to the lowest index). Depends only
/// on the costs and N, so every runner computes the same split.
pub fn assign(costs: &[u32], count: u32) -> Vec<u32> {
    let mut order: Vec<usize> = (0..costs.len()).collect();
    order.sort_by_key(|&i| (std::cmp::Reverse(costs[i]), i));
    let mut load = vec![0u64; count as usize];
    let mut shard_of = vec![0u32; costs.len()];
    for i in order {
        let (least, _) = load
            .iter()
            .enumerate()
            .min_by_key(|&(k, l)| (*l, k))
            .unwrap_or((0, &0));
        load[least] += u64::from(costs[i]).max(1);
        shard_of[i] = least as u32 + 1;
    }
    shard_of
}

/// The units of `shard` among `units` (each with its cost), in the run's order.
pub fn select(shard: Shard, units: &[(Unit, u32)]) -> Result<Vec<Unit>, ShardError> {
    if units.len() < shard.count as usize {
        return Err(ShardError::TooMany {
            index: shard.index,
            count: shard.count,
            units: units.len(),
        });
    }
    let costs: Vec<u32> = units.iter().map(|(_, c)| *c).collect();
    Ok(assign(&costs, shard.count)
        .into_iter()
        .zip(units)
        .filter(|(k, _)| *k == shard.index)
        .map(|(_, (u, _))| u.clone())
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn units(n: usize) -> Vec<(Unit, u32)> {
        let costs = [1, 12, 17, 4, 20, 60, 45, 33, 39];
        (0..n)
            .map(|i| {
                let unit = Unit {
                    major: 14 + (i / costs.len()) as u32,
                    suite: format!("s{}", i % costs.len()),
                };
                (unit, costs[i % costs.len()])
            })
            .collect()
    }

    #[test]
    fn every_unit_falls_to_exactly_one_shard() {
        for n in 1..=18 {
            let all = units(n);
            for count in 1..=n as u32 {
                let mut seen: Vec<Unit> = Vec::new();
                for index in 1..=count {
                    let mine = select(Shard { index, count }, &all).unwrap();
                    assert!(!mine.is_empty(), "shard {index}/{count} of {n} is empty");
                    seen.extend(mine);
                }
                seen.sort_by(|a, b| (a.major, &a.suite).cmp(&(b.major, &b.suite)));
                let mut want: Vec<Unit> = all.iter().map(|(u, _)| u.clone()).collect();
                want.sort_by(|a, b| (a.major, &a.suite).cmp(&(b.major, &b.suite)));
                assert_eq!(seen, want, "{n} units in {count} shards");
            }
        }
    }

    #[test]
    fn the_split_is_balanced_within_the_largest_unit() {
        let all = units(18);
        let total: u32 = all.iter().map(|(_, c)| c).sum();
        let largest = all.iter().map(|(_, c)| *c).max().unwrap();
        let shard_of = assign(&all.iter().map(|(_, c)| *c).collect::<Vec<_>>(), 3);
        for k in 1..=3 {
            let load: u32 = shard_of
                .iter()
                .zip(&all)
                .filter(|(s, _)| **s == k)
                .map(|(_, (_, c))| c)
                .sum();
            // Greedy longest-first: no shard exceeds the mean by more than one unit.
            assert!(load <= total / 3 + largest, "shard {k}: {load} of {total}");
        }
    }

    #[test]
    fn k_of_n_is_parsed_and_nonsense_refused() {
        assert_eq!("2/3".parse(), Ok(Shard { index: 2, count: 3 }));
        for bad in ["0/3", "4/3", "3", "a/b", "1/0", "", "/"] {
            assert!(bad.parse::<Shard>().is_err(), "{bad} accepted");
        }
        let too_many = select(Shard { index: 1, count: 4 }, &units(3));
        assert!(matches!(
            too_many,
            Err(ShardError::TooMany { units: 3, .. })
        ));
    }
}
