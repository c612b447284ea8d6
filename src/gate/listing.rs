//! What a suite lists: its checks for a size, seed and major ([`Listing`]), each with what
//! it needs ([`Planned`]). Below the registry (`suites`) and every suite's file, which
//! name their checks from it.

use super::Size;

/// What a suite lists its checks for.
#[derive(Clone, Copy)]
pub struct Listing<'a> {
    pub size: Size,
    /// `--campaign-ops`: calls per campaign instead of the size's.
    pub campaign_ops: Option<u64>,
    pub seed: u64,
    pub major: u32,
    /// The fault checks of the faults suite.
    pub faults: &'a [nemesis::Fault],
    /// Whether the bench suite compares with a baseline (`--bench-baseline`).
    pub bench_baseline: bool,
}

/// A check a suite runs: all of them on a build that passes, those up to its first finding
/// otherwise (the attack-surface checks: the classes that had a statement to run).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Planned {
    pub name: String,
    /// Why it needs a server the gate manages (a restart, a crash, roles that log in, the
    /// server's install); `None`: a connection is enough.
    pub needs_managed: Option<&'static str>,
}

impl Planned {
    pub fn on_connection(name: impl Into<String>) -> Planned {
        Planned {
            name: name.into(),
            needs_managed: None,
        }
    }

    pub fn on_managed(name: impl Into<String>, why: &'static str) -> Planned {
        Planned {
            name: name.into(),
            needs_managed: Some(why),
        }
    }
}
