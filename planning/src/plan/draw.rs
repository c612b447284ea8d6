//! Drawing plans: their configuration, their proptest strategy and their generation from
//! a seed.
//!
//! A plan is drawn as plain integers ([`crate::workload::Draw`] and a few more) mapped
//! through the workload's weight tables, as the free-running mode draws its calls, so that
//! proptest shrinks a failing plan by dropping steps and by moving every draw toward the
//! first entry of its table (fewer processes, fewer keys, plain acquires, own owners and
//! epochs, the shortest TTL).
//!
//! A plan always drawn from the same seed is the same plan: [`Plan::from_seed`] builds a
//! proptest [`TestRunner`] on a [`TestRng`] seeded from it and takes the first value of the
//! strategy. [`PlanStrategy`] draws such a seed per case from proptest's own RNG, so every
//! case a proptest run generates replays with `leasecheck check --mode stepped --seed S`.

use super::{close_transactions, Origin, Plan, PlanError, PlanStep};
use crate::workload::{Draw, Names, OpChoice, OpMix, Step, Workload};
use model::{Interval, Isolation};
use proptest::prelude::Rng;
use proptest::strategy::{BoxedStrategy, NewTree, Strategy, ValueTree};
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};
use std::ops::RangeInclusive;
use std::sync::Arc;

/// Fewest and most processes of a generated plan.
pub const PROCESSES: RangeInclusive<u32> = 2..=8;
/// Fewest and most keys of a generated plan.
pub const KEYS: RangeInclusive<u32> = 1..=4;
/// The default longest generated plan, in steps.
pub const MAX_STEPS: usize = 32;
/// How plans are generated.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlanConfig {
    pub processes: RangeInclusive<u32>,
    pub keys: RangeInclusive<u32>,
    /// Plans have 1 to this many steps (before the ends of open transactions are added).
    pub max_steps: usize,
    /// Mix, TTLs, waits, rollbacks and invalid inputs (its processes and keys are drawn).
    pub workload: Workload,
    /// Weights of BEGIN's isolation levels.
    pub isolations: Vec<(Isolation, u32)>,
}

impl Default for PlanConfig {
    fn default() -> Self {
        PlanConfig {
            processes: PROCESSES,
            keys: KEYS,
            max_steps: MAX_STEPS,
            workload: stepped_workload(),
            isolations: vec![
                (Isolation::ReadCommitted, 8),
                (Isolation::RepeatableRead, 1),
                (Isolation::Serializable, 1),
            ],
        }
    }
}

impl PlanConfig {
    /// The plans of the stepped hunts and of the gate's drawn plans: 2-3 processes on one key, so every call contends for one
    /// row, the first two acting as one owner (two sessions of one client, so one can hold the
    /// lease's row lock in a transaction while the other calls on the lease); a transaction in
    /// half of a process's turns (READ COMMITTED, the only level pg_lease's calls accept), so
    /// a call waits on a row lock held across steps; blocking acquires in a quarter of the
    /// calls, mostly waiting 1 s; TTLs of 20 ms (lapses while calls wait) to 5 s (a waiter
    /// outlasts its sleeps); no invalid input (the free-running campaigns have it).
    pub fn contended() -> PlanConfig {
        let mut workload = stepped_workload();
        workload.ttls = vec![
            (Interval::millis(20), 2),
            (Interval::millis(60), 2),
            (Interval::millis(250), 2),
            (Interval::secs(5), 4),
        ];
        // Long waits keep a waiter asleep across many steps, however slow a loaded machine
        // makes them (a stall is only seen while the waiter sleeps).
        workload.waits = vec![
            (Interval::millis(50), 1),
            (Interval::millis(250), 1),
            (Interval::secs(1), 2),
        ];
        workload.mix = OpMix {
            acquire: 25,
            acquire_wait: 25,
            renew: 25,
            release: 15,
            inspect: 10,
        };
        workload.txn_percent = 50;
        workload.rollback_percent = 15;
        workload.invalid_percent = 0;
        workload.isolations = vec![Isolation::ReadCommitted];
        workload.names = Names::SharedOwners;
        PlanConfig {
            processes: 2..=3,
            keys: 1..=1,
            isolations: vec![(Isolation::ReadCommitted, 1)],
            workload,
            ..PlanConfig::default()
        }
    }
}

/// The workload stepped plans draw from: TTLs from 5 ms (leases lapse between steps) to
/// two minutes, waits of 10 to 250 ms (a blocking acquire sleeps between steps, briefly),
/// every isolation level (pg_lease must refuse all but READ COMMITTED and change nothing).
/// The longest TTL comes first: shrinking moves toward it, so a minimal failing plan does
/// not depend on a lease outliving the few milliseconds between two steps.
pub fn stepped_workload() -> Workload {
    Workload {
        ttls: vec![
            (Interval::secs(120), 2),
            (Interval::secs(5), 2),
            (Interval::secs(1), 3),
            (Interval::millis(250), 2),
            (Interval::millis(60), 3),
            (Interval::millis(20), 3),
            (Interval::millis(5), 3),
        ],
        waits: vec![
            (Interval::millis(10), 3),
            (Interval::millis(50), 3),
            (Interval::millis(250), 1),
        ],
        isolations: vec![
            Isolation::ReadCommitted,
            Isolation::RepeatableRead,
            Isolation::Serializable,
        ],
        ..Workload::default()
    }
}

impl PlanConfig {
    /// Checks the bounds (each end of the ranges must make a valid workload).
    pub fn validate(&self) -> Result<(), PlanError> {
        for (processes, keys) in [
            (*self.processes.start(), *self.keys.start()),
            (*self.processes.end(), *self.keys.end()),
        ] {
            Workload {
                processes,
                keys,
                ..self.workload.clone()
            }
            .validate()?;
        }
        if self.max_steps == 0 || self.processes.is_empty() || self.keys.is_empty() {
            return Err(PlanError::Generate(
                "empty ranges of processes, keys or steps".into(),
            ));
        }
        Ok(())
    }
}

/// What a plan's step is before the mapping through the workload's tables.
#[derive(Clone, Debug)]
enum RawAction {
    Call(Draw),
    Begin(u32),
    /// Below the workload's `rollback_percent` (of 100): ROLLBACK, else COMMIT.
    End(u32),
}

/// A plan as drawn.
#[derive(Clone, Debug)]
struct RawPlan {
    processes: u32,
    keys: u32,
    steps: Vec<(u32, RawAction)>,
}

/// Every draw is reduced modulo its table's total weight (or the number of processes or
/// keys), so a small range serves as well as the whole `u32` range, and shrinks in about
/// 10 steps instead of 32. 840 is a multiple of every count of processes (2-8) and keys
/// (1-4), so those stay uniform.
const DRAW_RANGE: u32 = 840;

fn small_draw() -> impl Strategy<Value = Draw> {
    crate::workload::draw_strategy_of(|| 0..DRAW_RANGE)
}

fn raw_action() -> impl Strategy<Value = RawAction> {
    proptest::prop_oneof![
        8 => small_draw().prop_map(RawAction::Call),
        1 => (0..DRAW_RANGE).prop_map(RawAction::Begin),
        1 => (0u32..100).prop_map(RawAction::End),
    ]
}

fn raw_plan(config: &PlanConfig) -> BoxedStrategy<RawPlan> {
    let step = (0..DRAW_RANGE, raw_action());
    // Steps first: proptest shrinks a tuple's elements in order, and fewer processes or
    // keys shrink best once the steps that need them are gone.
    (
        proptest::collection::vec(step, 1..=config.max_steps.max(1)),
        config.processes.clone(),
        config.keys.clone(),
    )
        .prop_map(|(steps, processes, keys)| RawPlan {
            processes,
            keys,
            steps,
        })
        .boxed()
}

/// The proptest RNG of `seed` (ChaCha, proptest's default algorithm).
fn rng_of(seed: u64) -> TestRng {
    let mut bytes = [0u8; 32];
    let mut state = seed;
    for chunk in bytes.chunks_mut(8) {
        // splitmix64: spreads one u64 over the 32 bytes ChaCha needs.
        state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        chunk.copy_from_slice(&(z ^ (z >> 31)).to_le_bytes());
    }
    TestRng::from_seed(RngAlgorithm::ChaCha, &bytes)
}

/// The value tree of the plan of `seed`.
fn tree_of(
    config: &PlanConfig,
    seed: u64,
) -> Result<Box<dyn ValueTree<Value = RawPlan>>, PlanError> {
    let mut runner = TestRunner::new_with_rng(Config::default(), rng_of(seed));
    raw_plan(config)
        .new_tree(&mut runner)
        .map_err(|reason| PlanError::Generate(reason.to_string()))
}
impl Plan {
    /// The plan generated from `seed`: the same seed always gives the same plan.
    pub fn from_seed(config: &PlanConfig, seed: u64) -> Result<Plan, PlanError> {
        config.validate()?;
        let raw = tree_of(config, seed)?.current();
        Ok(Plan::from_raw(config, raw, Origin::Seed(seed)))
    }
    fn from_raw(config: &PlanConfig, raw: RawPlan, origin: Origin) -> Plan {
        let workload = Workload {
            processes: raw.processes,
            keys: raw.keys,
            ..config.workload.clone()
        };
        let steps = raw
            .steps
            .into_iter()
            .map(|(process, action)| {
                PlanStep::new(
                    process % raw.processes.max(1),
                    step_of(config, &workload, action),
                )
            })
            .collect();
        Plan {
            steps: close_transactions(raw.processes, steps),
            workload,
            origin,
            settings: Vec::new(),
            setup: Vec::new(),
            teardown: Vec::new(),
        }
    }
}

/// The step `action` draws in `workload`.
fn step_of(config: &PlanConfig, workload: &Workload, action: RawAction) -> Step {
    match action {
        RawAction::Call(draw) => Step::Call(OpChoice::from_draw(workload, draw)),
        RawAction::Begin(draw) => {
            Step::Begin(weighted(&config.isolations, draw).unwrap_or(Isolation::ReadCommitted))
        }
        RawAction::End(roll) if roll % 100 < workload.rollback_percent => Step::Rollback,
        RawAction::End(_) => Step::Commit,
    }
}

/// The entry of `table` that `draw` falls on.
fn weighted<T: Copy>(table: &[(T, u32)], draw: u32) -> Option<T> {
    let total: u64 = table.iter().map(|(_, w)| u64::from(*w)).sum();
    let mut at = u64::from(draw) % total.max(1);
    for (value, w) in table {
        if at < u64::from(*w) {
            return Some(*value);
        }
        at -= u64::from(*w);
    }
    None
}
/// Stepped plans as proptest values: each case is the plan of a seed drawn from proptest's
/// RNG ([`Plan::from_seed`]), so it replays from that seed; shrinking simplifies it
/// (fewer steps, processes and keys, simpler calls).
#[derive(Clone, Debug)]
pub struct PlanStrategy {
    config: Arc<PlanConfig>,
}

impl PlanStrategy {
    pub fn new(config: PlanConfig) -> Result<PlanStrategy, PlanError> {
        config.validate()?;
        Ok(PlanStrategy {
            config: Arc::new(config),
        })
    }
}

impl Strategy for PlanStrategy {
    type Tree = PlanTree;
    type Value = Plan;

    fn new_tree(&self, runner: &mut TestRunner) -> NewTree<Self> {
        let seed = runner.rng().next_u64();
        let raw = tree_of(&self.config, seed).map_err(|e| e.to_string())?;
        Ok(PlanTree {
            config: Arc::clone(&self.config),
            seed,
            raw,
            shrunk: false,
        })
    }
}

/// A plan being shrunk.
pub struct PlanTree {
    config: Arc<PlanConfig>,
    seed: u64,
    raw: Box<dyn ValueTree<Value = RawPlan>>,
    shrunk: bool,
}

impl ValueTree for PlanTree {
    type Value = Plan;

    fn current(&self) -> Plan {
        let origin = if self.shrunk {
            Origin::Shrunk(self.seed)
        } else {
            Origin::Seed(self.seed)
        };
        Plan::from_raw(&self.config, self.raw.current(), origin)
    }

    fn simplify(&mut self) -> bool {
        let simpler = self.raw.simplify();
        self.shrunk |= simpler;
        simpler
    }

    fn complicate(&mut self) -> bool {
        self.raw.complicate()
    }
}
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_seed_gives_the_same_plan_and_another_seed_another() {
        let config = PlanConfig::default();
        let a = Plan::from_seed(&config, 42).unwrap();
        let b = Plan::from_seed(&config, 42).unwrap();
        let c = Plan::from_seed(&config, 43).unwrap();
        assert_eq!(a, b);
        assert_ne!(a.steps, c.steps);
        assert_eq!(a.seed(), Some(42));
    }

    #[test]
    fn generated_plans_stay_within_bounds_and_close_their_transactions() {
        let config = PlanConfig::default();
        let mut kinds = std::collections::BTreeSet::new();
        for seed in 0..300 {
            let plan = Plan::from_seed(&config, seed).unwrap();
            assert!(PROCESSES.contains(&plan.workload.processes));
            assert!(KEYS.contains(&plan.workload.keys));
            let mut open = vec![false; plan.workload.processes as usize];
            for s in &plan.steps {
                let slot = &mut open[s.process as usize];
                match &s.action {
                    Step::Begin(_) => {
                        assert!(!*slot, "{plan:?}");
                        *slot = true;
                        kinds.insert("begin".to_string());
                    }
                    Step::Commit | Step::Rollback => {
                        assert!(*slot, "{plan:?}");
                        *slot = false;
                    }
                    Step::Pause(_) => panic!("a drawn plan paused: {plan:?}"),
                    Step::Lapse(_) => panic!("a drawn plan lapsed: {plan:?}"),
                    Step::Signal(_) => panic!("a drawn plan signalled: {plan:?}"),
                    Step::Restart(..) => panic!("a drawn plan restarted: {plan:?}"),
                    Step::Probe(_) => panic!("a drawn plan probed: {plan:?}"),
                    Step::Set(_) => panic!("a drawn plan set a setting: {plan:?}"),
                    Step::Call(c) => {
                        assert!(c.key < plan.workload.keys as usize);
                        kinds.insert(format!("{:?}", c.call));
                    }
                }
            }
            assert!(open.iter().all(|o| !o), "{plan:?}");
        }
        // Every kind of call and transactions show up in 300 plans.
        assert_eq!(kinds.len(), 6, "{kinds:?}");
    }

    #[test]
    fn the_strategy_replays_its_cases_from_their_seeds_and_shrinks_them() {
        let strategy = PlanStrategy::new(PlanConfig::default()).unwrap();
        let mut runner = TestRunner::deterministic();
        let mut tree = strategy.new_tree(&mut runner).unwrap();
        let first = tree.current();
        let seed = first.seed().unwrap();
        assert_eq!(
            first,
            Plan::from_seed(&PlanConfig::default(), seed).unwrap()
        );
        while tree.simplify() {}
        let simplest = tree.current();
        assert_eq!(simplest.origin, Origin::Shrunk(seed));
        assert!(simplest.steps.len() <= first.steps.len());
        assert_eq!(simplest.workload.processes, *PROCESSES.start());
    }
}
