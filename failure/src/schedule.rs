//! When faults start and how long they last in a campaign: a [`Schedule`] drawn by
//! proptest ([`schedule_strategy`]): which fault, after how long a gap, held how long, and
//! which victim. Faults run one at a time, in order.

use crate::fault::Fault;
use proptest::prelude::*;
use proptest::strategy::ValueTree;
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};
use std::time::Duration;

/// One planned fault.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Planned {
    pub fault: Fault,
    /// Quiet time before it starts (after the previous fault ended).
    pub gap: Duration,
    /// How long it lasts: a restart's downtime, a pause, a blackhole (instant faults
    /// ignore it).
    pub hold: Duration,
    /// Which victim (a backend, a process slot, a key), reduced modulo the candidates.
    pub pick: u32,
}

/// Faults in the order they are injected.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Schedule(pub Vec<Planned>);

impl Schedule {
    /// The time the schedule takes if every fault takes no longer than planned.
    pub fn span(&self) -> Duration {
        self.0.iter().map(|p| p.gap + p.hold).sum()
    }

    /// The faults it names, each once.
    pub fn faults(&self) -> Vec<Fault> {
        let mut faults: Vec<Fault> = self.0.iter().map(|p| p.fault).collect();
        faults.sort();
        faults.dedup();
        faults
    }
}

/// The longest hold of `fault`, in ms: restarts down up to 1.5 s (leases of up to 1 s
/// lapse across them), pauses up to 1.5 s (longer than most TTLs of the default
/// workload), blackholes up to 3 s (past a 2 s call timeout).
fn max_hold_ms(fault: Fault) -> u64 {
    fault.spec().max_hold_ms
}

/// One planned fault of `faults`: gaps of 0.2-3 s.
fn planned_strategy(faults: Vec<Fault>) -> impl Strategy<Value = Planned> {
    (
        proptest::sample::select(faults),
        200u64..3_000,
        0u64..=1_000,
        any::<u32>(),
    )
        .prop_map(|(fault, gap, hold_permille, pick)| Planned {
            fault,
            gap: Duration::from_millis(gap),
            hold: Duration::from_millis(max_hold_ms(fault) * hold_permille / 1_000),
            pick,
        })
}

/// Schedules of faults drawn from `faults` (non-empty) that fit in `within`: as many
/// faults as fit, each once at least when they fit. Shrinks toward fewer, shorter faults.
pub fn schedule_strategy(faults: Vec<Fault>, within: Duration) -> impl Strategy<Value = Schedule> {
    let n = faults.len();
    let most = (within.as_millis() / 1_000).max(1) as usize;
    proptest::collection::vec(planned_strategy(faults.clone()), n.min(most).max(1)..=most).prop_map(
        move |mut planned| {
            // Every named fault appears when there is room: the first ones cycle through
            // them.
            for (i, p) in planned.iter_mut().enumerate().take(n) {
                p.fault = faults[i];
                p.hold = p.hold.min(Duration::from_millis(max_hold_ms(p.fault)));
            }
            let mut total = Duration::ZERO;
            planned.retain(|p| {
                total += p.gap + p.hold;
                total <= within
            });
            Schedule(planned)
        },
    )
}

/// The schedule seed `seed` draws for `faults` within `within` (deterministic).
pub fn draw(faults: &[Fault], within: Duration, seed: u64) -> Schedule {
    if faults.is_empty() {
        return Schedule::default();
    }
    let mut bytes = [0u8; 32];
    bytes[..8].copy_from_slice(&seed.to_le_bytes());
    let rng = TestRng::from_seed(RngAlgorithm::ChaCha, &bytes);
    let mut runner = TestRunner::new_with_rng(Config::default(), rng);
    schedule_strategy(faults.to_vec(), within)
        .new_tree(&mut runner)
        .map(|tree| tree.current())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    proptest! {
        #[test]
        fn schedules_fit_and_hold_within_bounds(
            s in schedule_strategy(Fault::CAMPAIGN.to_vec(), Duration::from_secs(20))
        ) {
            prop_assert!(s.span() <= Duration::from_secs(20));
            for p in &s.0 {
                prop_assert!(p.hold <= Duration::from_millis(max_hold_ms(p.fault)));
                prop_assert!(p.gap >= Duration::from_millis(200));
            }
        }
    }

    #[test]
    fn a_seed_draws_the_same_schedule_and_long_runs_name_every_fault() {
        let within = Duration::from_secs(300);
        let a = draw(&Fault::CAMPAIGN, within, 7);
        assert_eq!(a, draw(&Fault::CAMPAIGN, within, 7));
        assert_ne!(a, draw(&Fault::CAMPAIGN, within, 8));
        assert_eq!(a.faults().len(), Fault::CAMPAIGN.len(), "{a:?}");
        assert!(a.span() <= within);
        assert!(draw(&[], within, 7).0.is_empty());
    }
}
