//! The one mutant catalogue, hunted: the catalogue itself is pure data and lives in the
//! planning crate ([`planning::mutants`]: [`Mode`], [`Kill`], [`Mutant`], [`ModelOnly`],
//! [`Entry`], [`catalogue`], [`find`], [`apply`]), re-exported here under its old names.
//! A SQL mutant's edits apply to the 0.3.0 install script ([`crate::extension::SCRIPT`]),
//! installed as an extension of its own, `pg_lease_<name>` (a stale edit is a typed error,
//! [`StaleMutant`]).
//!
//! [`hunt()`] runs the campaigns that kill a SQL mutant (I/O); [`judge`] decides, purely,
//! whether a campaign's outcome kills it.

pub mod hunt;
mod judge;

pub use hunt::{control, hunt, hunt_with, HuntOptions, HuntReport, Run, Status};
pub use judge::{judge, judge_control, judge_finding, Judged};
pub use planning::mutants::{
    apply, catalogue, find, Entry, Kill, Mode, ModelOnly, Mutant, StaleMutant, MODEL_ONLY, MUTANTS,
    NO_INTERVAL_CAP,
};

// The catalogue's edits against the script the harness installs (`crate::extension::SCRIPT`):
// here, next to that script, rather than in the planning crate, which does not know it.
#[cfg(test)]
mod tests {
    use super::*;
    use crate::extension::SCRIPT;

    #[test]
    fn every_edit_applies_to_the_script_exactly_once() {
        let mut stale = Vec::new();
        for m in MUTANTS {
            for edit in m.edits {
                if let Err(e) = apply(m.name, SCRIPT, std::slice::from_ref(edit)) {
                    stale.push(e.to_string());
                }
            }
            if let Ok(mutated) = apply(m.name, SCRIPT, m.edits) {
                assert_ne!(mutated, SCRIPT, "{}: no change", m.name);
            }
        }
        assert!(stale.is_empty(), "{stale:#?}");
    }

    #[test]
    fn a_stale_edit_is_a_typed_error() {
        static EDITS: &[(&str, &str)] = &[("no such text in the script", "")];
        let err = apply("stale", SCRIPT, EDITS).unwrap_err();
        assert_eq!((err.mutant, err.count), ("stale", 0));
        static TWICE: &[(&str, &str)] = &[("lease_internal.leases", "x")];
        assert!(apply("twice", SCRIPT, TWICE).unwrap_err().count > 1);
    }
}
