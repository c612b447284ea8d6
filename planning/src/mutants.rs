//! The one mutant catalogue: the model's spec mutations ([`model::Mutation`]) and the
//! harness's SQL mutants of pg_lease, each naming what it breaks and how it is killed.
//!
//! A SQL mutant ([`Mutant`]) is a set of exact, unique text replacements of the 0.3.0 install
//! script (the harness's `extension::SCRIPT`), installed as an extension of its own,
//! `pg_lease_<name>` (a stale edit is a typed error, [`StaleMutant`]). What kills it is its
//! [`Kill`]:
//! - [`Kill::Realises`]: it is the SQL form of a model mutation; a history verdict must name
//!   that mutation's invariant, [`Mutation::expected`] (referenced, never restated);
//! - [`Kill::RealisesOr`]: the same, where the SQL also breaks a second invariant the
//!   checker may meet first; a verdict must name either;
//! - [`Kill::Breaks`]: a race the model's spec mutations have no counterpart for (the spec
//!   is atomic; these bugs live between the statements of one call); a history verdict must
//!   name this invariant;
//! - [`Kill::Stall`]: lock behaviour. Such a mutant answers as pg_lease does, only later,
//!   and a late answer is linearizable, so the checker cannot see it in a history by
//!   design; a stepped run sees the holder's call wait for a sleeping waiter's row lock
//!   and reports a stall ([`crate::stall::Stall`]);
//! - [`Kill::Finding`]: a bug whose finding is not a history verdict: an error raised
//!   inside the target outside its contract, a call that hangs, a result column of another
//!   type, a check of the conformance suite or the hostile-session matrix that fails; the
//!   finding's text must name what broke (the kill's phrase).
//!
//! Every model mutation is in the catalogue ([`catalogue`]): with the SQL mutants that
//! realise it, or as a [`ModelOnly`] entry saying why it has no SQL form and what kills it
//! (the stateright model's negative controls, `model/tests/negative_controls.rs`).
//!
//! The catalogue is data: the harness (`harness::mutants`) re-exports it, runs the campaigns
//! that kill a SQL mutant (`hunt`, I/O) and decides, purely, whether a campaign's outcome
//! kills it (`judge`, on the harness's campaign outcomes).

mod catalogue;

pub use catalogue::{MODEL_ONLY, MUTANTS, NO_INTERVAL_CAP};

use model::{Invariant, Mutation};
use std::fmt;

/// How a campaign finds a mutant.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Mode {
    /// A free-running campaign: real concurrency on tokio tasks (the harness's `campaign`).
    Free,
    /// The written race plans ([`crate::races::race_plans`]), in order: each interleaving
    /// of a call with a transaction holding the key's row lock, and each kind of call in an
    /// aged transaction, every run (the `seed` of such a run is the plan's index).
    Races,
    /// Stepped plans from seeds ([`crate::plan`], run by the harness's `stepped`): one step
    /// at a time, a blocked step left waiting while the plan goes on, so lock waits last
    /// across other steps.
    Stepped,
    /// The conformance checks its `caught_by` names, run against it (a check that fails
    /// with a finding naming what broke kills it).
    Checks,
    /// A setting of the hostile-session matrix (the harness's `matrix::Setting`, by name): its
    /// campaign and conformance suite under that setting.
    Matrix(&'static str),
    /// The time-read-late plans (the harness's `late`): calls late in a long statement, and
    /// writes that waited for a row lock across their lease's expiry.
    Late,
    /// The named fault check of the fault-injection crate (`nemesis::checks`, a fault
    /// such as `crash`), whose negative control this mutant is: a crash, a cancel or a
    /// wake-up shows what no fault-free campaign can. The harness's hunts do not run it
    /// (nemesis builds on the harness): `leasecheck faults --fault NAME --controls` and the
    /// gate's faults suite do.
    Faults(&'static str),
}

impl Mode {
    pub fn name(self) -> &'static str {
        match self {
            Mode::Free => "free",
            Mode::Races => "race",
            Mode::Stepped => "stepped",
            Mode::Checks => "checks",
            Mode::Matrix(_) => "matrix",
            Mode::Late => "late",
            Mode::Faults(_) => "faults",
        }
    }

    /// Whether the harness's hunts run it (a campaign or a check of the harness, not a
    /// fault check).
    pub fn is_campaign(self) -> bool {
        !matches!(self, Mode::Faults(_))
    }

    /// The campaign modes, in the order reports list them (a matrix mode is counted per
    /// setting).
    pub const CAMPAIGNS: [Mode; 5] = [
        Mode::Free,
        Mode::Races,
        Mode::Stepped,
        Mode::Checks,
        Mode::Late,
    ];

    /// Which run of this mode `seed` is, as a person reads it: `free seed 7`, `race plan 12`.
    pub fn run_label(self, seed: u64) -> String {
        match self {
            Mode::Races => format!("race plan {seed}"),
            Mode::Checks => "its conformance checks".to_string(),
            Mode::Matrix(setting) => format!("the matrix under {setting}"),
            Mode::Late => format!("late plan {seed}"),
            mode => format!("{mode} seed {seed}"),
        }
    }
}

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Mode::Faults(fault) => write!(f, "the {fault} fault check"),
            Mode::Matrix(setting) => write!(f, "matrix {setting}"),
            _ => f.write_str(self.name()),
        }
    }
}

/// What kills a SQL mutant.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kill {
    /// The mutant is this model mutation in SQL: a history verdict must name its invariant
    /// ([`Mutation::expected`]).
    Realises(Mutation),
    /// The SQL form of a model mutation whose histories can also show a second symptom the
    /// model mutation alone has not, which the checker may meet first: a verdict must name
    /// the mutation's invariant or this one.
    RealisesOr(Mutation, Invariant),
    /// A bug with no model-mutation counterpart (a race between the statements of one
    /// call): a history verdict must name this invariant.
    Breaks(Invariant),
    /// A bug whose histories show two symptoms, which the checker names by different
    /// invariants depending on which one it meets first: a verdict must name one of them.
    BreaksEither(Invariant, Invariant),
    /// Lock behaviour a history cannot show: a stepped run must report a stall.
    Stall,
    /// A finding that is not a history verdict (an answer outside the API: an error raised
    /// inside the target outside its contract, a column of another type; a hang; a failed
    /// conformance or matrix check), whose text contains this phrase: what broke.
    Finding(&'static str),
}

impl Kill {
    /// The invariants a killing verdict may name (none for a stall).
    pub fn invariants(self) -> Vec<Invariant> {
        match self {
            Kill::Realises(m) => m.expected().into_iter().collect(),
            Kill::RealisesOr(m, also) => m.expected().into_iter().chain([also]).collect(),
            Kill::Breaks(inv) => vec![inv],
            Kill::BreaksEither(a, b) => vec![a, b],
            Kill::Stall | Kill::Finding(_) => vec![],
        }
    }

    /// The first invariant a killing verdict may name (none for a stall).
    pub fn invariant(self) -> Option<Invariant> {
        self.invariants().first().copied()
    }

    /// Whether a verdict naming `inv` kills the mutant.
    pub fn named_by(self, inv: Invariant) -> bool {
        self.invariants().contains(&inv)
    }

    /// The model mutation realised, if any.
    pub fn mutation(self) -> Option<Mutation> {
        match self {
            Kill::Realises(m) | Kill::RealisesOr(m, _) => Some(m),
            _ => None,
        }
    }

    /// What a killing finding is, as a person reads it.
    pub fn wanted(self) -> String {
        let invariants = self.invariants();
        if let Kill::Finding(phrase) = self {
            return format!("a finding naming {phrase:?}");
        }
        if invariants.is_empty() {
            return "a stall (a row lock held across a blocking acquire's sleep)".to_string();
        }
        let named: Vec<String> = invariants
            .iter()
            .map(|inv| format!("invariant {} ({inv})", inv.number()))
            .collect();
        format!("a violation of {}", named.join(" or "))
    }
}

/// A deliberately broken pg_lease: a negative control of the history campaigns or of the
/// fault checks (its [`Mode`]s), and of the conformance checks named in `caught_by`.
#[derive(Clone, Copy, Debug)]
pub struct Mutant {
    pub name: &'static str,
    /// What the mutation breaks, in one sentence.
    pub breaks: &'static str,
    /// What kills it: the invariant a verdict must name, or a stall.
    pub kill: Kill,
    /// Which campaigns (or fault checks) hunt it, in the order they are tried.
    pub hunt: &'static [Mode],
    /// Exact (unique) text replacements applied to the 0.3.0 install script
    /// (the harness's `extension::SCRIPT`).
    pub edits: &'static [(&'static str, &'static str)],
    /// Conformance checks that must fail against this mutant.
    pub caught_by: &'static [&'static str],
}

impl Mutant {
    /// Whether a history campaign of the harness hunts it (else only fault checks do).
    pub fn hunted_by_campaigns(&self) -> bool {
        self.hunt.iter().any(|m| m.is_campaign())
    }

    /// The fault checks that hunt it (`crash`, ...).
    pub fn fault_checks(&self) -> Vec<&'static str> {
        self.hunt
            .iter()
            .filter_map(|m| match m {
                Mode::Faults(fault) => Some(*fault),
                _ => None,
            })
            .collect()
    }
}

/// A mutant edit that no longer matches the script (the script changed).
#[derive(Debug, thiserror::Error)]
#[error("mutant {mutant}: the text {pattern:?} occurs {count} times in the script, expected exactly once")]
pub struct StaleMutant {
    pub mutant: &'static str,
    pub pattern: &'static str,
    pub count: usize,
}

/// `script` with `edits` applied, each to exactly one occurrence of its text.
pub fn apply(
    mutant: &'static str,
    script: &str,
    edits: &'static [(&'static str, &'static str)],
) -> Result<String, StaleMutant> {
    let mut script = script.to_string();
    for (from, to) in edits {
        let count = script.matches(from).count();
        if count != 1 {
            return Err(StaleMutant {
                mutant,
                pattern: from,
                count,
            });
        }
        script = script.replacen(from, to, 1);
    }
    Ok(script)
}

/// A model mutation with no SQL mutant: why, and what kills it.
#[derive(Clone, Copy, Debug)]
pub struct ModelOnly {
    pub mutation: Mutation,
    /// Why there is no SQL form (or what one would need).
    pub why: &'static str,
    /// What kills it.
    pub killed_by: &'static str,
}

/// One entry of the catalogue.
#[derive(Clone, Copy, Debug)]
pub enum Entry {
    Sql(&'static Mutant),
    ModelOnly(&'static ModelOnly),
}

impl Entry {
    /// The SQL mutant's name, or the model mutation's.
    pub fn name(&self) -> &'static str {
        match self {
            Entry::Sql(m) => m.name,
            Entry::ModelOnly(m) => m.mutation.name(),
        }
    }

    /// The model mutation this entry is or realises.
    pub fn mutation(&self) -> Option<Mutation> {
        match self {
            Entry::Sql(m) => m.kill.mutation(),
            Entry::ModelOnly(m) => Some(m.mutation),
        }
    }

    /// The invariants a verdict that kills it may name (none for a lock-behaviour mutant:
    /// its finding is a stall).
    pub fn invariants(&self) -> Vec<Invariant> {
        match self {
            Entry::Sql(m) => m.kill.invariants(),
            Entry::ModelOnly(m) => m.mutation.expected().into_iter().collect(),
        }
    }

    /// What it breaks, in one sentence.
    pub fn breaks(&self) -> &'static str {
        match self {
            Entry::Sql(m) => m.breaks,
            Entry::ModelOnly(m) => m.mutation.description(),
        }
    }

    /// How it is killed, in one line.
    pub fn killed_by(&self) -> String {
        match self {
            Entry::Sql(m) if !m.hunted_by_campaigns() => format!(
                "the {} fault check, whose negative control it is (`leasecheck faults --controls`)",
                m.fault_checks().join(" or ")
            ),
            Entry::Sql(m) => {
                let modes: Vec<&str> = m.hunt.iter().map(|h| h.name()).collect();
                format!("{} in a {} campaign", m.kill.wanted(), modes.join(" or "))
            }
            Entry::ModelOnly(m) => m.killed_by.to_string(),
        }
    }
}

/// The whole catalogue: every SQL mutant, then the model mutations without one.
pub fn catalogue() -> Vec<Entry> {
    MUTANTS
        .iter()
        .map(Entry::Sql)
        .chain(MODEL_ONLY.iter().map(Entry::ModelOnly))
        .collect()
}

/// The SQL mutant named `name`.
pub fn find(name: &str) -> Option<&'static Mutant> {
    MUTANTS.iter().find(|m| m.name == name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    #[test]
    fn names_are_unique_and_fit_an_extension_name() {
        let names: BTreeSet<&str> = MUTANTS.iter().map(|m| m.name).collect();
        assert_eq!(names.len(), MUTANTS.len());
        for m in MUTANTS {
            // pg_lease_<name> must fit NAMEDATALEN - 1 = 63 bytes.
            assert!(m.name.len() + "pg_lease_".len() <= 63, "{}", m.name);
            assert!(m
                .name
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_'));
            assert!(!m.hunt.is_empty(), "{}: hunted by nothing", m.name);
        }
    }

    /// Every model mutation is in the catalogue once as model-only or realised by at least
    /// one SQL mutant, never both.
    #[test]
    fn every_model_mutation_is_catalogued() {
        for m in Mutation::ALL {
            let realised = MUTANTS.iter().any(|s| s.kill.mutation() == Some(m));
            let only = MODEL_ONLY.iter().filter(|o| o.mutation == m).count();
            assert!(
                realised != (only == 1) || (!realised && only == 1),
                "{m}: realised {realised}, model-only entries {only}"
            );
            assert!(realised || only == 1, "{m} is not in the catalogue");
            assert!(
                !(realised && only > 0),
                "{m} is both realised and model-only"
            );
        }
        assert_eq!(
            catalogue().len(),
            MUTANTS.len() + MODEL_ONLY.len(),
            "one entry per mutant"
        );
    }

    /// A stall is what kills the lock-behaviour mutants, and only a stepped run sees one
    /// (a wake-up too slow is seen by its fault check instead).
    #[test]
    fn stall_mutants_are_hunted_by_stepped_runs() {
        for m in MUTANTS
            .iter()
            .filter(|m| m.kill == Kill::Stall && m.hunted_by_campaigns())
        {
            assert_eq!(m.hunt, &[Mode::Stepped], "{}", m.name);
        }
    }

    #[test]
    fn a_realised_mutation_names_its_model_invariant() {
        let m = find("release_keeps_epoch").unwrap();
        assert_eq!(m.kill, Kill::Realises(Mutation::ReleaseKeepsEpoch));
        assert_eq!(m.kill.invariant(), Mutation::ReleaseKeepsEpoch.expected());
        assert_eq!(Entry::Sql(m).mutation(), Some(Mutation::ReleaseKeepsEpoch));
    }

    /// A mutant that realises a mutation and breaks a second invariant beside it is killed
    /// by a verdict naming either, and still counts as that mutation's SQL form.
    #[test]
    fn a_realised_mutation_with_a_second_symptom_is_killed_by_either() {
        let m = find("acquire_ignores_holder").unwrap();
        assert_eq!(m.kill.mutation(), Some(Mutation::AcquireIgnoresHolder));
        let first = Mutation::AcquireIgnoresHolder.expected().unwrap();
        assert!(m.kill.named_by(first));
        assert!(m.kill.named_by(Invariant::ReacquireIdempotent));
        assert!(!m.kill.named_by(Invariant::LapseIsFinal));
        assert_eq!(m.kill.invariant(), Some(first));
    }
}
