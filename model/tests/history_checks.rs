//! The history check against generated histories: every history the correct spec produces
//! (with spans widened around the true instant, lost outcomes, rolled-back transactions,
//! crashes and the expire fault) is accepted, and every mutant produces histories the
//! correct check rejects.

use model::{
    check_sequential, Commit, Event, Interval, Mutation, Op, Outcome, Span, Spec, Store, Ts,
};
use std::collections::BTreeMap;

/// xorshift64*: deterministic, dependency-free.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }

    fn pick<T: Copy>(&mut self, xs: &[T]) -> T {
        xs[(self.below(xs.len() as u64)) as usize]
    }
}

const KEYS: [&str; 2] = ["k0", "k1"];
const OWNERS: [&str; 3] = ["a", "b", "c"];

fn s(x: &str) -> String {
    x.to_string()
}

/// A random history of `len` events produced by `spec`.
fn generate(spec: &Spec, seed: u64, len: usize) -> Vec<Event<String, String>> {
    let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
    let mut store: Store<String, String> = Store::new();
    let mut epochs: BTreeMap<(String, String), i64> = BTreeMap::new();
    let mut t: i64 = 0;
    let mut events = Vec::new();
    while events.len() < len {
        t += rng.below(3) as i64;
        if rng.chance(4) {
            // crash, downtime, restart: invisible to the history
            store = spec.crash(&store);
            let down = rng.below(6) as i64;
            if let Ok(span) = Span::new(Ts(t), Ts(t + down)) {
                store = spec.restart(&store, span);
            }
            t += down;
            continue;
        }
        let key = s(rng.pick(&KEYS));
        let owner = s(rng.pick(&OWNERS));
        let ttl = Interval::micros(rng.pick(&[2_i64, 3, 5]));
        let known = epochs.get(&(key.clone(), owner.clone())).copied();
        let epoch = if rng.chance(75) {
            known.unwrap_or(1)
        } else {
            rng.below(4) as i64
        };
        let mut start = t;
        let op: Op<String, String> = match rng.below(100) {
            0..=29 => Op::acquire(key.clone(), owner.clone(), ttl),
            30..=37 => {
                let wait = 1 + rng.below(4) as i64;
                // decided at the last poll, once the wait passed (or at once if acquirable)
                let op = Op::acquire_wait(key.clone(), owner.clone(), ttl, Interval::micros(wait));
                let (now, _) = spec.step(&store, &op, Ts(t));
                if !matches!(now, Outcome::Acquired { .. }) {
                    start = t;
                    t += wait;
                }
                op
            }
            38..=57 => Op::renew(key.clone(), owner.clone(), epoch, ttl),
            58..=72 => Op::release(key.clone(), owner.clone(), epoch),
            73..=89 => Op::inspect(key.clone()),
            90..=94 => Op::expire(key.clone()),
            _ => Op::Acquire {
                key: Some(if rng.chance(50) {
                    String::new()
                } else {
                    key.clone()
                }),
                owner: Some(owner.clone()),
                ttl: Some(if rng.chance(50) { Interval::ZERO } else { ttl }),
                wait: Some(Interval::ZERO),
            },
        };
        let (outcome, after) = spec.step(&store, &op, Ts(t));
        // the observed span: the true instant, widened a little on either side
        let lo = start.min(t)
            - if rng.chance(30) {
                rng.below(2) as i64
            } else {
                0
            };
        let hi = t + if rng.chance(30) {
            rng.below(2) as i64
        } else {
            0
        };
        let span = match Span::new(Ts(lo), Ts(hi)) {
            Ok(span) => span,
            Err(_) => Span::point(Ts(t)),
        };
        let in_txn = !matches!(op, Op::Expire { .. }) && rng.chance(10);
        let (commit, reported) = if in_txn && rng.chance(50) {
            store = spec.abort(&store, &store.diff(&after));
            (Commit::RolledBack, outcome.clone())
        } else {
            store = after;
            if rng.chance(5) {
                (Commit::Unknown, Outcome::Unknown)
            } else {
                (Commit::Committed, outcome.clone())
            }
        };
        if commit == Commit::Committed {
            if let Outcome::Acquired { epoch, .. } = outcome {
                epochs.insert((key.clone(), owner.clone()), epoch);
            }
        }
        events.push(Event {
            client: 0,
            op,
            span,
            outcome: reported,
            commit,
        });
    }
    events
}

#[test]
fn correct_histories_are_accepted() {
    for seed in 0..300 {
        let events = generate(&Spec::CORRECT, seed, 40);
        if let Err(e) = check_sequential(&Spec::CORRECT, Store::new(), &events) {
            panic!("seed {seed}: {e}\n{events:#?}");
        }
    }
}

#[test]
fn every_mutant_yields_a_rejected_history() {
    for m in Mutation::ALL {
        let spec = Spec::new(m);
        let mut rejected = BTreeMap::new();
        for seed in 0..300 {
            let events = generate(&spec, seed, 40);
            if let Err(e) = check_sequential(&Spec::CORRECT, Store::new(), &events) {
                if let Some(inv) = e.invariant() {
                    *rejected.entry(inv.number()).or_insert(0_u32) += 1;
                }
            }
        }
        println!("{m}: rejected histories by invariant {rejected:?}");
        assert!(!rejected.is_empty(), "{m}: no history rejected");
    }
}
