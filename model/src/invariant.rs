//! The 11 invariants of pg_lease (specs/INVARIANTS.md).

use std::fmt;

/// One of the 11 invariants. The discriminant is the invariant's number.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Invariant {
    /// 1: at most one holder per key at every server-time instant.
    MutualExclusion = 1,
    /// 2: a key's epoch never decreases (lapse, release, restart, crash).
    EpochNeverDecreases = 2,
    /// 3: each grant's epoch exceeds every earlier epoch of the key and the inspect watermark.
    GrantEpochFresh = 3,
    /// 4: renew keeps the epoch.
    RenewKeepsEpoch = 4,
    /// 5: release frees the key and advances the epoch.
    ReleaseAdvancesEpoch = 5,
    /// 6: a same-owner re-acquire of a live lease is idempotent.
    ReacquireIdempotent = 6,
    /// 7: lapse is final: no renew/release under a lapsed grant; a lapsed key is acquirable at once.
    LapseIsFinal = 7,
    /// 8: outcomes follow the precedence rules and distinct keys never interact.
    PrecedenceAndIsolation = 8,
    /// 9: fail closed: invalid input and aborted transactions change nothing.
    FailClosed = 9,
    /// 10: inspect is consistent: held iff unexpired grant; zero rows only for never-leased keys.
    InspectConsistent = 10,
    /// 11: committed state survives restart and crash, downtime never extends ownership, only
    /// the server clock decides.
    DurabilityAndTimeAuthority = 11,
}

impl Invariant {
    /// All invariants in numeric order.
    pub const ALL: [Invariant; 11] = [
        Invariant::MutualExclusion,
        Invariant::EpochNeverDecreases,
        Invariant::GrantEpochFresh,
        Invariant::RenewKeepsEpoch,
        Invariant::ReleaseAdvancesEpoch,
        Invariant::ReacquireIdempotent,
        Invariant::LapseIsFinal,
        Invariant::PrecedenceAndIsolation,
        Invariant::FailClosed,
        Invariant::InspectConsistent,
        Invariant::DurabilityAndTimeAuthority,
    ];

    /// The invariant's number, 1 to 11.
    pub fn number(self) -> u8 {
        self as u8
    }

    /// The invariant with number `n`.
    pub fn from_number(n: u8) -> Option<Invariant> {
        Invariant::ALL.get(usize::from(n).checked_sub(1)?).copied()
    }

    /// The name of the stateright `always` property that checks this invariant.
    pub fn property_name(self) -> &'static str {
        match self {
            Invariant::MutualExclusion => "inv01 mutual exclusion per key at every instant",
            Invariant::EpochNeverDecreases => "inv02 epoch never decreases",
            Invariant::GrantEpochFresh => "inv03 each grant's epoch exceeds every earlier epoch",
            Invariant::RenewKeepsEpoch => "inv04 renew keeps the epoch",
            Invariant::ReleaseAdvancesEpoch => "inv05 release frees and advances the epoch",
            Invariant::ReacquireIdempotent => "inv06 same-owner re-acquire is idempotent",
            Invariant::LapseIsFinal => "inv07 lapse is final",
            Invariant::PrecedenceAndIsolation => {
                "inv08 outcomes follow precedence, keys never interact"
            }
            Invariant::FailClosed => "inv09 fail closed",
            Invariant::InspectConsistent => "inv10 inspect is consistent",
            Invariant::DurabilityAndTimeAuthority => "inv11 durability and time authority",
        }
    }

    /// The invariant's exact statement (as in specs/INVARIANTS.md).
    pub fn statement(self) -> &'static str {
        match self {
            Invariant::MutualExclusion => "For every key and every server-time instant, at most one owner holds an unexpired grant of the key.",
            Invariant::EpochNeverDecreases => "A key's epoch never decreases: not by lapse, release, restart or crash.",
            Invariant::GrantEpochFresh => "Every new grant of a key carries an epoch strictly greater than every epoch the key carried before and than every epoch inspect reported for it (the inspect watermark).",
            Invariant::RenewKeepsEpoch => "A renew never changes the key's epoch.",
            Invariant::ReleaseAdvancesEpoch => "A successful release leaves the key FREE with epoch = released epoch + 1.",
            Invariant::ReacquireIdempotent => "An acquire by the owner of an unexpired lease succeeds with the same epoch and the same expires_at and writes nothing.",
            Invariant::LapseIsFinal => "No renew or release succeeds under a lapsed grant, and an acquire of a lapsed, free or never-leased key succeeds at once.",
            Invariant::PrecedenceAndIsolation => "renew/release report not_owner, then lapsed, then epoch_mismatch, else ok; a non-ok result, a denial and a wait timeout change nothing; an operation on one key never changes another key.",
            Invariant::FailClosed => "An invalid input raises 22023 and changes nothing; a valid input is never rejected as invalid; an aborted transaction changes nothing.",
            Invariant::InspectConsistent => "inspect reports held = true exactly for an unexpired grant (with its owner, epoch and expires_at), held = false with the key's epoch otherwise, and zero rows only for a never-leased key.",
            Invariant::DurabilityAndTimeAuthority => "Committed state survives clean restart and crash unchanged; downtime never extends ownership; expiry is decided by the server clock only (a grant or renew expires at server time + ttl).",
        }
    }
}

impl fmt::Display for Invariant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.property_name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statements_match_specs_invariants_md() {
        let md: String = include_str!("../../specs/INVARIANTS.md")
            .replace('`', "")
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ");
        for inv in Invariant::ALL {
            assert!(
                md.contains(inv.statement()),
                "statement of {inv} differs from specs/INVARIANTS.md"
            );
            assert!(
                md.contains(inv.property_name()),
                "{inv} not named in INVARIANTS.md"
            );
        }
    }

    #[test]
    fn numbers_round_trip() {
        for (i, inv) in Invariant::ALL.iter().enumerate() {
            assert_eq!(usize::from(inv.number()), i + 1);
            assert_eq!(Invariant::from_number(inv.number()), Some(*inv));
            assert!(inv
                .property_name()
                .starts_with(&format!("inv{:02}", inv.number())));
        }
        assert_eq!(Invariant::from_number(0), None);
        assert_eq!(Invariant::from_number(12), None);
    }
}
