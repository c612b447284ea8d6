//! Deliberately broken variants of the spec: the negative controls.
//!
//! Each mutation models one plausible implementation bug. The stateright model run with a
//! mutation must find a counterexample to the invariant [`Mutation::expected`] names (tests in
//! `tests/negative_controls.rs`). The harness may reuse the list as mutant targets.

use crate::invariant::Invariant;
use std::fmt;

/// A variant of the lease semantics. [`Mutation::None`] is the correct spec.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Mutation {
    /// The correct semantics.
    #[default]
    None,
    /// acquire grants a key held (unexpired) by another owner (a missing holder check).
    AcquireIgnoresHolder,
    /// release deletes the row (`DELETE` instead of `UPDATE`): the key is never-leased again
    /// and its epoch restarts.
    ReleaseDeletesRow,
    /// a takeover of a lapsed lease keeps the lapsed grant's epoch instead of incrementing it.
    TakeoverReusesEpoch,
    /// a successful renew increments the epoch.
    RenewChangesEpoch,
    /// release frees the key but keeps the epoch.
    ReleaseKeepsEpoch,
    /// a same-owner acquire of its unexpired lease makes a new grant (new epoch, new expiry).
    ReacquireBumpsEpoch,
    /// renew skips the lapse check: a lapsed holder's renew succeeds.
    RenewIgnoresExpiry,
    /// renew/release check the epoch first: a non-owner or lapsed holder with a wrong epoch
    /// gets `epoch_mismatch`.
    WrongPrecedence,
    /// writes (grant, renew, release) miss the key predicate and update every existing row.
    WriteIgnoresKey,
    /// an acquire whose only invalid arguments are `ttl`/`wait` writes the grant before
    /// raising 22023, and the write is not rolled back.
    InvalidInputWrites,
    /// an aborted transaction keeps the effects of its lease operation.
    AbortKeepsEffects,
    /// inspect reports a lapsed lease as held.
    InspectShowsLapsedAsHeld,
    /// a crash loses committed lease state (as an `UNLOGGED` table would).
    CrashLosesCommitted,
    /// expiry is measured on a clock that pauses while the server is down: after a restart
    /// every lease's expires_at is pushed back by the downtime.
    DowntimeExtendsLease,
}

impl Mutation {
    /// Every mutation except [`Mutation::None`].
    pub const ALL: [Mutation; 14] = [
        Mutation::AcquireIgnoresHolder,
        Mutation::ReleaseDeletesRow,
        Mutation::TakeoverReusesEpoch,
        Mutation::RenewChangesEpoch,
        Mutation::ReleaseKeepsEpoch,
        Mutation::ReacquireBumpsEpoch,
        Mutation::RenewIgnoresExpiry,
        Mutation::WrongPrecedence,
        Mutation::WriteIgnoresKey,
        Mutation::InvalidInputWrites,
        Mutation::AbortKeepsEffects,
        Mutation::InspectShowsLapsedAsHeld,
        Mutation::CrashLosesCommitted,
        Mutation::DowntimeExtendsLease,
    ];

    /// The invariant this mutation must be caught violating (`None` for the correct spec).
    pub fn expected(self) -> Option<Invariant> {
        Some(match self {
            Mutation::None => return None,
            Mutation::AcquireIgnoresHolder => Invariant::MutualExclusion,
            Mutation::ReleaseDeletesRow => Invariant::EpochNeverDecreases,
            Mutation::TakeoverReusesEpoch => Invariant::GrantEpochFresh,
            Mutation::RenewChangesEpoch => Invariant::RenewKeepsEpoch,
            Mutation::ReleaseKeepsEpoch => Invariant::ReleaseAdvancesEpoch,
            Mutation::ReacquireBumpsEpoch => Invariant::ReacquireIdempotent,
            Mutation::RenewIgnoresExpiry => Invariant::LapseIsFinal,
            Mutation::WrongPrecedence => Invariant::PrecedenceAndIsolation,
            Mutation::WriteIgnoresKey => Invariant::PrecedenceAndIsolation,
            Mutation::InvalidInputWrites => Invariant::FailClosed,
            Mutation::AbortKeepsEffects => Invariant::FailClosed,
            Mutation::InspectShowsLapsedAsHeld => Invariant::InspectConsistent,
            Mutation::CrashLosesCommitted => Invariant::DurabilityAndTimeAuthority,
            Mutation::DowntimeExtendsLease => Invariant::DurabilityAndTimeAuthority,
        })
    }

    /// What the mutated implementation does wrong, in one sentence.
    pub fn description(self) -> &'static str {
        match self {
            Mutation::None => "the correct semantics",
            Mutation::AcquireIgnoresHolder => {
                "acquire grants a key held (unexpired) by another owner"
            }
            Mutation::ReleaseDeletesRow => {
                "release deletes the row, so the key's epoch restarts at 1"
            }
            Mutation::TakeoverReusesEpoch => {
                "a takeover of a lapsed lease keeps the lapsed grant's epoch"
            }
            Mutation::RenewChangesEpoch => "a successful renew increments the epoch",
            Mutation::ReleaseKeepsEpoch => "release frees the key but keeps the epoch",
            Mutation::ReacquireBumpsEpoch => {
                "a same-owner acquire of its live lease makes a new grant"
            }
            Mutation::RenewIgnoresExpiry => "renew succeeds on a lapsed lease",
            Mutation::WrongPrecedence => "renew and release check the epoch before the owner",
            Mutation::WriteIgnoresKey => "writes change every key, not only their own",
            Mutation::InvalidInputWrites => {
                "an acquire with an invalid ttl or wait writes a grant before raising 22023"
            }
            Mutation::AbortKeepsEffects => "an aborted transaction keeps its lease effects",
            Mutation::InspectShowsLapsedAsHeld => "inspect reports a lapsed lease as held",
            Mutation::CrashLosesCommitted => "a crash loses committed lease state",
            Mutation::DowntimeExtendsLease => {
                "downtime pushes every expiry back (a clock that stops while the server is down)"
            }
        }
    }

    /// A stable kebab-case name (for CLI flags and reports).
    pub fn name(self) -> &'static str {
        match self {
            Mutation::None => "none",
            Mutation::AcquireIgnoresHolder => "acquire-ignores-holder",
            Mutation::ReleaseDeletesRow => "release-deletes-row",
            Mutation::TakeoverReusesEpoch => "takeover-reuses-epoch",
            Mutation::RenewChangesEpoch => "renew-changes-epoch",
            Mutation::ReleaseKeepsEpoch => "release-keeps-epoch",
            Mutation::ReacquireBumpsEpoch => "reacquire-bumps-epoch",
            Mutation::RenewIgnoresExpiry => "renew-ignores-expiry",
            Mutation::WrongPrecedence => "wrong-precedence",
            Mutation::WriteIgnoresKey => "write-ignores-key",
            Mutation::InvalidInputWrites => "invalid-input-writes",
            Mutation::AbortKeepsEffects => "abort-keeps-effects",
            Mutation::InspectShowsLapsedAsHeld => "inspect-shows-lapsed-as-held",
            Mutation::CrashLosesCommitted => "crash-loses-committed",
            Mutation::DowntimeExtendsLease => "downtime-extends-lease",
        }
    }

    /// The mutation named `name` (see [`Mutation::name`]).
    pub fn from_name(name: &str) -> Option<Mutation> {
        std::iter::once(Mutation::None)
            .chain(Mutation::ALL)
            .find(|m| m.name() == name)
    }
}

impl fmt::Display for Mutation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_invariant_has_a_negative_control() {
        for inv in Invariant::ALL {
            assert!(
                Mutation::ALL.iter().any(|m| m.expected() == Some(inv)),
                "no mutation for {inv}"
            );
        }
    }

    #[test]
    fn names_round_trip() {
        for m in std::iter::once(Mutation::None).chain(Mutation::ALL) {
            assert_eq!(Mutation::from_name(m.name()), Some(m));
        }
        assert_eq!(Mutation::from_name("bogus"), None);
    }
}
