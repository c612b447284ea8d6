//! The pg_lease builds the checks install. The PostgreSQL install's extension directory is
//! shared with other checkouts whose tests rewrite `pg_lease`'s files, so every build is
//! installed under an extension name of its own (and its `extversion` checked when it is
//! created).

use harness::extension::{ExtensionFiles, Mutant};
use harness::mutants::Kill;
use model::Invariant;

/// This checkout's pg_lease, unchanged, under a name of its own.
pub const UNDER_TEST: &str = "pg_lease_nemesis_under_test";

/// pg_lease as shipped (0.2.0), as extension [`UNDER_TEST`].
pub fn under_test() -> ExtensionFiles {
    ExtensionFiles::renamed(UNDER_TEST)
}

/// A broken build of 0.2.0 used as a negative control: one of the mutants (the shared
/// [`Mutant`] form, installed as `pg_lease_<name>` by [`ExtensionFiles::mutant`]).
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

/// The mutants only the fault checks catch (`caught_by` names the fault checks; `hunt` is
/// empty: no fault-free campaign of `harness::mutants` can kill them).
pub const MUTANTS: &[Mutant] = &[
    Mutant {
        name: "nemesis_no_durable_commit",
        breaks: "the durability trigger is not created: synchronous_commit = off commits lease writes asynchronously",
        edits: &[(
            "CREATE CONSTRAINT TRIGGER leases_commit_durably\n    AFTER INSERT OR UPDATE ON lease.leases\n    DEFERRABLE INITIALLY DEFERRED\n    FOR EACH ROW EXECUTE FUNCTION lease._commit_durably();\n",
            "",
        )],
        kill: Kill::Breaks(Invariant::DurabilityAndTimeAuthority),
        hunt: &[],
        caught_by: &["sync-commit-off-crash"],
    },
    Mutant {
        name: "nemesis_unlogged_table",
        breaks: "the lease table is UNLOGGED: crash recovery empties it",
        edits: &[(
            "REVOKE ALL ON FUNCTION lease._commit_durably() FROM PUBLIC;\n",
            "REVOKE ALL ON FUNCTION lease._commit_durably() FROM PUBLIC;\nALTER TABLE lease.leases SET UNLOGGED;\n",
        )],
        kill: Kill::Breaks(Invariant::DurabilityAndTimeAuthority),
        hunt: &[],
        caught_by: &["crash", "restart-immediate"],
    },
    Mutant {
        name: "nemesis_cancelled_wait_grants",
        breaks: "a blocking acquire whose wait is cancelled takes the key anyway and answers a grant",
        edits: &[(
            "            PERFORM pg_sleep(GREATEST(0.0, LEAST(0.05,
                extract(epoch FROM v_deadline - v_now),
                extract(epoch FROM v_expires - v_now))));
            CONTINUE;",
            "            BEGIN
                PERFORM pg_sleep(GREATEST(0.0, LEAST(0.05,
                    extract(epoch FROM v_deadline - v_now),
                    extract(epoch FROM v_expires - v_now))));
            EXCEPTION WHEN query_canceled THEN
                UPDATE lease.leases AS l
                   SET owner = acquire.owner, epoch = l.epoch + 1,
                       expires_at = clock_timestamp() + acquire.ttl
                 WHERE l.key = acquire.key COLLATE \"C\"
                RETURNING l.epoch, l.expires_at INTO v_epoch, v_expires;
                acquired := true;
                epoch := v_epoch;
                expires_at := v_expires;
                RETURN NEXT;
                RETURN;
            END;
            CONTINUE;",
        )],
        kill: Kill::Breaks(Invariant::FailClosed),
        hunt: &[],
        caught_by: &["cancel", "statement-timeout"],
    },
    Mutant {
        name: "nemesis_slow_wake",
        breaks: "a blocking acquire sleeps up to 2 s between probes instead of 50 ms",
        edits: &[("LEAST(0.05,", "LEAST(2.0,")],
        kill: Kill::Stall,
        hunt: &[],
        caught_by: &["wait-wake"],
    },
];

impl BrokenBuild {
    pub const ALL: [BrokenBuild; 5] = [
        BrokenBuild::NoDurableCommit,
        BrokenBuild::UnloggedTable,
        BrokenBuild::CancelledWaitGrants,
        BrokenBuild::SlowWake,
        BrokenBuild::RenewIgnoresExpiry,
    ];

    /// Its mutant.
    pub fn mutant(self) -> Option<&'static Mutant> {
        let (list, name) = match self {
            BrokenBuild::NoDurableCommit => (MUTANTS, "nemesis_no_durable_commit"),
            BrokenBuild::UnloggedTable => (MUTANTS, "nemesis_unlogged_table"),
            BrokenBuild::CancelledWaitGrants => (MUTANTS, "nemesis_cancelled_wait_grants"),
            BrokenBuild::SlowWake => (MUTANTS, "nemesis_slow_wake"),
            BrokenBuild::RenewIgnoresExpiry => {
                (harness::extension::MUTANTS, "renew_ignores_expiry")
            }
        };
        list.iter().find(|m| m.name == name)
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
            assert_ne!(files.scripts[1].1, shipped.scripts[1].1, "{b:?}");
            assert_eq!(files.scripts[0].1, shipped.scripts[0].1, "{b:?}");
        }
    }

    /// The gate's quick fault set meets every fault-only mutant with a check that catches it.
    #[test]
    fn the_quick_fault_set_has_a_check_catching_each_mutant() {
        use crate::fault::Fault;
        for m in MUTANTS {
            let caught = m.caught_by.iter().any(|name| {
                let fault: Fault = name.parse().unwrap_or_else(|e| panic!("{}: {e}", m.name));
                Fault::QUICK.contains(&fault)
            });
            assert!(caught, "{} is caught by none of Fault::QUICK", m.name);
        }
    }

    /// Each fault check a mutant names as catching it has that mutant's build as its control.
    #[test]
    fn caught_by_names_the_checks_whose_control_it_is() {
        use crate::checks::{control, Breakage};
        use crate::fault::Fault;
        for m in MUTANTS {
            for name in m.caught_by {
                let fault: Fault = name.parse().unwrap_or_else(|e| panic!("{}: {e}", m.name));
                let Breakage::Build(b) = control(fault).breakage else {
                    panic!("{fault}'s control is not a build");
                };
                assert_eq!(b.mutant().map(|x| x.name), Some(m.name), "{fault}");
            }
        }
    }
}
