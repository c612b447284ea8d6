//! The pg_lease builds the checks install. The PostgreSQL install's extension directory is
//! shared with other checkouts whose tests rewrite `pg_lease`'s files, so every build is
//! installed under an extension name of its own (and its `extversion` checked when it is
//! created).

use harness::extension::{ExtensionFiles, Mutant};

/// This checkout's pg_lease, unchanged, under a name of its own.
pub const UNDER_TEST: &str = "pg_lease_nemesis_under_test";

/// pg_lease as shipped, as extension [`UNDER_TEST`].
pub fn under_test() -> ExtensionFiles {
    ExtensionFiles::renamed(UNDER_TEST)
}

/// A broken build of pg_lease used as a negative control: a mutant of the one catalogue
/// (`harness::mutants`; the fault-only ones are hunted there by [`harness::mutants::Mode::Faults`] naming
/// the fault check that kills them), installed as `pg_lease_<name>` by
/// [`ExtensionFiles::mutant`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BrokenBuild {
    /// The durability trigger dropped (as 0.1.0, which never had it): with
    /// `synchronous_commit = off` an acknowledged commit may not be on disk when the server
    /// crashes.
    NoDurableCommit,
    /// The lease table made UNLOGGED: crash recovery empties it.
    UnloggedTable,
    /// A blocking acquire whose wait is cancelled (user cancel, statement_timeout) takes
    /// the key anyway and answers a grant.
    CancelledWaitGrants,
    /// A blocking acquire sleeps up to 2 s between probes instead of 50 ms: a release does
    /// not wake it within the poll bound.
    SlowWake,
    /// renew succeeds on a lapsed lease: the conformance suite's mutant
    /// `renew_ignores_expiry` ([`harness::extension::MUTANTS`]).
    RenewIgnoresExpiry,
}

impl BrokenBuild {
    pub const ALL: [BrokenBuild; 5] = [
        BrokenBuild::NoDurableCommit,
        BrokenBuild::UnloggedTable,
        BrokenBuild::CancelledWaitGrants,
        BrokenBuild::SlowWake,
        BrokenBuild::RenewIgnoresExpiry,
    ];

    /// Its mutant in the one catalogue.
    pub fn mutant(self) -> Option<&'static Mutant> {
        harness::mutants::find(match self {
            BrokenBuild::NoDurableCommit => "nemesis_no_durable_commit",
            BrokenBuild::UnloggedTable => "nemesis_unlogged_table",
            BrokenBuild::CancelledWaitGrants => "nemesis_cancelled_wait_grants",
            BrokenBuild::SlowWake => "nemesis_slow_wake",
            BrokenBuild::RenewIgnoresExpiry => "renew_ignores_expiry",
        })
    }

    /// The build's files; `None` when an edit no longer matches the shipped script
    /// exactly once (the script changed: the control must be re-ported).
    pub fn files(self) -> Option<ExtensionFiles> {
        ExtensionFiles::mutant(self.mutant()?).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_broken_build_applies_to_the_shipped_script_and_changes_it() {
        let shipped = under_test();
        for b in BrokenBuild::ALL {
            let files = b.files().unwrap_or_else(|| panic!("{b:?} is stale"));
            // One install script, the shipped one with the mutant's edits.
            assert_eq!(files.scripts.len(), 1, "{b:?}");
            assert_ne!(files.install_script(), shipped.install_script(), "{b:?}");
        }
    }

    /// The catalogue's fault-only mutants (hunted by `Mode::Faults` alone; a mutant that
    /// other modes hunt too, e.g. a leaked setting the checks find, names fault checks whose
    /// control is another build).
    fn fault_only() -> Vec<&'static Mutant> {
        use harness::mutants::Mode;
        harness::mutants::MUTANTS
            .iter()
            .filter(|m| !m.hunt.is_empty() && m.hunt.iter().all(|h| matches!(h, Mode::Faults(_))))
            .collect()
    }

    /// The gate's quick fault set meets every fault-only mutant with a check that catches it.
    #[test]
    fn the_quick_fault_set_has_a_check_catching_each_mutant() {
        use crate::fault::Fault;
        for m in fault_only() {
            let caught = m.fault_checks().iter().any(|name| {
                let fault: Fault = name.parse().unwrap_or_else(|e| panic!("{}: {e}", m.name));
                Fault::QUICK.contains(&fault)
            });
            assert!(caught, "{} is caught by none of Fault::QUICK", m.name);
        }
    }

    /// Each fault check a catalogue mutant names as hunting it has that mutant's build as
    /// its control, and every broken-build control is such a mutant or a campaign one.
    #[test]
    fn the_fault_checks_a_mutant_names_have_it_as_their_control() {
        use crate::checks::{control, Breakage};
        use crate::fault::Fault;
        let fault_only = fault_only();
        assert_eq!(fault_only.len(), 4);
        for m in fault_only {
            for name in m.fault_checks() {
                let fault: Fault = name.parse().unwrap_or_else(|e| panic!("{}: {e}", m.name));
                let Breakage::Build(b) = control(fault).breakage else {
                    panic!("{fault}'s control is not a build");
                };
                assert_eq!(b.mutant().map(|x| x.name), Some(m.name), "{fault}");
            }
        }
        for b in BrokenBuild::ALL {
            assert!(b.mutant().is_some(), "{b:?} is not in the catalogue");
        }
    }

    /// What the catalogue says kills a fault-only mutant is what its fault checks'
    /// controls accept: a violation of one of the invariants, or, for a stall, a broken
    /// expectation of the situation.
    #[test]
    fn a_fault_only_mutants_kill_is_what_its_controls_accept() {
        use crate::checks::{control, Expect};
        use crate::fault::Fault;
        use harness::mutants::Kill;
        for m in fault_only() {
            for name in m.fault_checks() {
                let fault: Fault = name.parse().unwrap_or_else(|e| panic!("{}: {e}", m.name));
                match (m.kill, control(fault).expects) {
                    (Kill::Stall, Expect::Unexpected(_)) => {}
                    (kill, Expect::Violation(accepted)) if kill != Kill::Stall => {
                        for inv in kill.invariants() {
                            assert!(accepted.contains(&inv), "{}: {inv} via {fault}", m.name);
                        }
                    }
                    (kill, expects) => panic!("{}: {kill:?} but {fault} expects {expects}", m.name),
                }
            }
        }
    }
}
