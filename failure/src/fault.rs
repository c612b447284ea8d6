//! The named faults: each one a check of its own (specs/FAILURE-MODEL.md maps each to the
//! invariant it defends).

use model::Invariant;
use std::fmt;
use std::str::FromStr;

/// One named fault.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Fault {
    /// SIGKILL of the postmaster (every backend dies at once), then start.
    Crash,
    /// Immediate shutdown (no checkpoint), then start (crash recovery).
    RestartImmediate,
    /// Fast shutdown (sessions terminated, checkpoint), then start.
    RestartFast,
    /// `synchronous_commit = off` for every session, then a crash: pg_lease 0.2.0 commits
    /// lease writes durably anyway.
    SyncCommitOffCrash,
    /// A client's backend terminated (`pg_terminate_backend`).
    Terminate,
    /// An in-flight call cancelled (`pg_cancel_backend`), a blocking acquire mid-wait and a
    /// renew waiting for a row lock.
    Cancel,
    /// `statement_timeout` fires inside a blocking acquire's wait.
    StatementTimeout,
    /// `lock_timeout` fires while a blocking acquire waits for a row lock.
    LockTimeout,
    /// A client holding a lease stops for longer than its TTL.
    ClientPause,
    /// SIGSTOP of the whole server, SIGCONT later.
    ServerPause,
    /// Every connection through the proxy closed cleanly (FIN).
    CutClose,
    /// Every connection through the proxy reset (RST).
    CutReset,
    /// The proxy stops forwarding without closing anything.
    CutBlackhole,
    /// The server is down across a lease's expiry.
    DowntimeExpiry,
    /// A TTL too short for the work: the lease lapses mid-work.
    ShortTtl,
    /// A transaction acquires, then rolls back.
    AbortAfterAcquire,
    /// The server crashes while COMMIT is in flight; the outcome is resolved through
    /// `pg_xact_status`.
    CommitCrash,
    /// A release wakes a blocked waiter within the poll bound.
    WaitWake,
    /// A chosen lease is made to lapse now (clock-independent, by the superuser).
    Lapse,
}

impl Fault {
    pub const ALL: [Fault; 19] = [
        Fault::Crash,
        Fault::RestartImmediate,
        Fault::RestartFast,
        Fault::SyncCommitOffCrash,
        Fault::Terminate,
        Fault::Cancel,
        Fault::StatementTimeout,
        Fault::LockTimeout,
        Fault::ClientPause,
        Fault::ServerPause,
        Fault::CutClose,
        Fault::CutReset,
        Fault::CutBlackhole,
        Fault::DowntimeExpiry,
        Fault::ShortTtl,
        Fault::AbortAfterAcquire,
        Fault::CommitCrash,
        Fault::WaitWake,
        Fault::Lapse,
    ];

    /// The faults a mixed campaign draws from (the others are scripted situations).
    pub const CAMPAIGN: [Fault; 11] = [
        Fault::Crash,
        Fault::RestartImmediate,
        Fault::RestartFast,
        Fault::Terminate,
        Fault::Cancel,
        Fault::ClientPause,
        Fault::ServerPause,
        Fault::CutClose,
        Fault::CutReset,
        Fault::CutBlackhole,
        Fault::Lapse,
    ];

    /// The gate's quick set, about 40 s on PG 15 here: one fault of each class (a
    /// crash, a backend killed, a call cancelled, a cut, a pause, the lapse, a crash with
    /// COMMIT in flight), and the crash under `synchronous_commit = off` and the wake-up,
    /// so that each fault-only mutant of the catalogue (`harness::mutants`) meets the check
    /// that catches it. The full gate runs [`Fault::ALL`].
    pub const QUICK: [Fault; 9] = [
        Fault::Crash,
        Fault::SyncCommitOffCrash,
        Fault::Terminate,
        Fault::Cancel,
        Fault::CutReset,
        Fault::ClientPause,
        Fault::Lapse,
        Fault::CommitCrash,
        Fault::WaitWake,
    ];

    /// The name used on the command line and in histories.
    pub fn name(self) -> &'static str {
        match self {
            Fault::Crash => "crash",
            Fault::RestartImmediate => "restart-immediate",
            Fault::RestartFast => "restart-fast",
            Fault::SyncCommitOffCrash => "sync-commit-off-crash",
            Fault::Terminate => "terminate",
            Fault::Cancel => "cancel",
            Fault::StatementTimeout => "statement-timeout",
            Fault::LockTimeout => "lock-timeout",
            Fault::ClientPause => "client-pause",
            Fault::ServerPause => "server-pause",
            Fault::CutClose => "cut-close",
            Fault::CutReset => "cut-reset",
            Fault::CutBlackhole => "cut-blackhole",
            Fault::DowntimeExpiry => "downtime-expiry",
            Fault::ShortTtl => "short-ttl",
            Fault::AbortAfterAcquire => "abort-after-acquire",
            Fault::CommitCrash => "commit-crash",
            Fault::WaitWake => "wait-wake",
            Fault::Lapse => "lapse",
        }
    }

    /// The invariants the fault's check defends.
    pub fn defends(self) -> &'static [Invariant] {
        use Invariant as I;
        match self {
            Fault::Crash
            | Fault::RestartImmediate
            | Fault::RestartFast
            | Fault::SyncCommitOffCrash => &[
                I::DurabilityAndTimeAuthority,
                I::EpochNeverDecreases,
                I::GrantEpochFresh,
            ],
            Fault::CommitCrash => &[I::DurabilityAndTimeAuthority, I::FailClosed],
            Fault::Terminate | Fault::AbortAfterAcquire => &[I::FailClosed, I::MutualExclusion],
            Fault::Cancel | Fault::StatementTimeout | Fault::LockTimeout => {
                &[I::FailClosed, I::MutualExclusion]
            }
            Fault::ClientPause | Fault::ShortTtl | Fault::Lapse => {
                &[I::LapseIsFinal, I::GrantEpochFresh, I::MutualExclusion]
            }
            Fault::ServerPause | Fault::DowntimeExpiry => {
                &[I::DurabilityAndTimeAuthority, I::LapseIsFinal]
            }
            Fault::CutClose | Fault::CutReset | Fault::CutBlackhole => {
                &[I::FailClosed, I::MutualExclusion]
            }
            Fault::WaitWake => &[I::MutualExclusion],
        }
    }

    /// Whether the fault's check runs on PostgreSQL 14 in `cargo test` (crash, restart,
    /// cut and lapse: the faults that rest most on the server's own recovery and
    /// connection handling; `leasecheck faults --pg 14` runs them all).
    pub fn on_pg14_in_tests(self) -> bool {
        matches!(
            self,
            Fault::Crash | Fault::RestartImmediate | Fault::CutReset | Fault::Lapse
        )
    }
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A fault name that names no fault.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("unknown fault {given:?}: expected one of {known} (or a group: crash, restart, cut, pause, lapse, kill, all)")]
pub struct UnknownFault {
    pub given: String,
    pub known: String,
}

impl FromStr for Fault {
    type Err = UnknownFault;

    fn from_str(s: &str) -> Result<Fault, UnknownFault> {
        Fault::ALL
            .into_iter()
            .find(|f| f.name() == s)
            .ok_or_else(|| unknown(s))
    }
}

fn unknown(s: &str) -> UnknownFault {
    UnknownFault {
        given: s.to_string(),
        known: Fault::ALL.map(Fault::name).join(", "),
    }
}

/// The faults a name or group names, for `--nemesis crash,pause,cut,...`: a fault's own
/// name, or a group (`restart`: both shutdowns; `cut`: the three cuts; `pause`: client and
/// server pauses; `kill`: terminate and cancel; `all`: every campaign fault and lapse).
pub fn parse_group(s: &str) -> Result<Vec<Fault>, UnknownFault> {
    let group: &[Fault] = match s {
        "restart" => &[Fault::RestartImmediate, Fault::RestartFast],
        "cut" => &[Fault::CutClose, Fault::CutReset, Fault::CutBlackhole],
        "pause" => &[Fault::ClientPause, Fault::ServerPause],
        "kill" => &[Fault::Terminate, Fault::Cancel],
        "all" => &Fault::CAMPAIGN,
        _ => return s.parse::<Fault>().map(|f| vec![f]),
    };
    Ok(group.to_vec())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_are_unique() {
        let mut names: Vec<&str> = Fault::ALL.iter().map(|f| f.name()).collect();
        for f in Fault::ALL {
            assert_eq!(f.name().parse::<Fault>(), Ok(f));
            assert!(!f.defends().is_empty());
        }
        names.sort();
        names.dedup();
        assert_eq!(names.len(), Fault::ALL.len());
        assert!(Fault::ALL.len() >= 15);
        assert!("nope".parse::<Fault>().is_err());
    }

    #[test]
    fn groups_expand() {
        assert_eq!(parse_group("cut").map(|v| v.len()), Ok(3));
        assert_eq!(parse_group("crash"), Ok(vec![Fault::Crash]));
        assert!(parse_group("crashes").is_err());
    }
}
