//! Stalls: what a stepped run sees and a history cannot show.
//!
//! pg_lease promises that no row lock is held across a blocking acquire's sleep, so a
//! waiter never delays the holder's renew (specs/SEMANTICS.md 4.1). A history cannot show
//! a broken promise: the stalled renew answers correctly, only later, and a late answer is
//! linearizable (its window just grows). The stepped runner sees it directly: the monitor
//! finds the renew's backend blocked (`pg_blocking_pids`) by the backend of a blocking
//! acquire of the same key that sleeps in `pg_sleep` between probes.
//!
//! [`judge`] decides which sightings are such a stall. It is pure: the facts are what the
//! runner knew when it issued each step, and the sightings what the monitor saw.

use model::OpId;
use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

/// What the runner knew about a step when it issued it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StepFacts {
    /// The key of its call (none for BEGIN, COMMIT, ROLLBACK and a NULL key).
    pub key: Option<String>,
    /// A blocking acquire (wait > 0).
    pub blocking_acquire: bool,
    /// Its explicit transaction had already called this key: a row lock it holds may come
    /// from that earlier call (a write, or a write attempt that lost its re-check), not from
    /// the sleep.
    pub key_called_earlier_in_txn: bool,
}

/// One monitor snapshot in which step `blocked` waited for the backend running step
/// `blocker`, and that backend slept in `pg_sleep`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sighting {
    pub blocked: usize,
    pub blocker: usize,
    /// When, since the run started.
    pub at: Duration,
}

/// A call that waited for a row lock held by a blocking acquire of its key while that
/// acquire slept: the lock was held across the sleep.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Stall {
    pub key: String,
    /// The step that waited, and the op it recorded (none if it never answered).
    pub blocked: usize,
    pub blocked_op: Option<OpId>,
    /// The sleeping blocking acquire's step and op.
    pub blocker: usize,
    pub blocker_op: Option<OpId>,
    /// The first and last sighting (the stall lasted at least their distance).
    pub first_seen: Duration,
    pub last_seen: Duration,
    /// The two steps as a person reads them.
    pub blocked_call: String,
    pub blocker_call: String,
}

impl Stall {
    /// How long the stall was seen at least.
    pub fn seen_for(&self) -> Duration {
        self.last_seen.saturating_sub(self.first_seen)
    }
}

impl fmt::Display for Stall {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let op = |o: Option<OpId>| o.map_or("no op".to_string(), |id| format!("op {id}"));
        write!(
            f,
            "STALL: a row lock held across a blocking acquire's sleep (specs/SEMANTICS.md 4.1: \
             no row lock is held across a sleep, so a waiter never delays the holder's renew): \
             step {} ({}, {}) waited for step {} \
             ({}, {}) while it slept in pg_sleep between probes of key {:?} (seen for at least \
             {:.0?}). The history alone is linearizable: the wait shows there only as a delay.",
            self.blocked,
            self.blocked_call,
            op(self.blocked_op),
            self.blocker,
            self.blocker_call,
            op(self.blocker_op),
            self.key,
            self.seen_for()
        )
    }
}

/// A pair of steps the sightings show stalled: `blocked` waited for `blocker` from at
/// least `first_seen` to `last_seen`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Confirmed {
    pub blocked: usize,
    pub blocker: usize,
    pub first_seen: Duration,
    pub last_seen: Duration,
}

/// The stalls among `sightings`: a pair of steps counts when the blocked step calls the
/// key the blocker's blocking acquire waits for, the blocker's transaction had not called
/// that key before, and the pair was seen at least `confirm` apart (one snapshot may catch
/// a waiter in the instant between rolling back a lost attempt and sleeping; a lock held
/// across the sleep lasts the whole sleep). The result is ordered by the blocked step.
pub fn judge(steps: &[StepFacts], sightings: &[Sighting], confirm: Duration) -> Vec<Confirmed> {
    let mut pairs: BTreeMap<(usize, usize), (Duration, Duration)> = BTreeMap::new();
    for s in sightings {
        let seen = pairs.entry((s.blocked, s.blocker)).or_insert((s.at, s.at));
        seen.0 = seen.0.min(s.at);
        seen.1 = seen.1.max(s.at);
    }
    pairs
        .into_iter()
        .map(|((blocked, blocker), (first_seen, last_seen))| Confirmed {
            blocked,
            blocker,
            first_seen,
            last_seen,
        })
        .filter(|c| {
            c.last_seen.saturating_sub(c.first_seen) >= confirm
                && lock_held_across_sleep(steps, c.blocked, c.blocker)
        })
        .collect()
}

/// Whether step `blocker`'s lock on `blocked`'s key can only have been taken by the
/// blocking acquire itself (so it was held while it slept).
fn lock_held_across_sleep(steps: &[StepFacts], blocked: usize, blocker: usize) -> bool {
    let (Some(waiting), Some(sleeper)) = (steps.get(blocked), steps.get(blocker)) else {
        return false;
    };
    sleeper.blocking_acquire
        && !sleeper.key_called_earlier_in_txn
        && waiting.key.is_some()
        && waiting.key == sleeper.key
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: fn(u64) -> Duration = Duration::from_millis;

    fn call(key: &str) -> StepFacts {
        StepFacts {
            key: Some(key.into()),
            ..StepFacts::default()
        }
    }

    fn waiter(key: &str) -> StepFacts {
        StepFacts {
            blocking_acquire: true,
            ..call(key)
        }
    }

    fn seen(blocked: usize, blocker: usize, at: &[u64]) -> Vec<Sighting> {
        at.iter()
            .map(|&ms| Sighting {
                blocked,
                blocker,
                at: MS(ms),
            })
            .collect()
    }

    #[test]
    fn a_call_blocked_by_a_sleeping_waiter_of_its_key_is_a_stall() {
        let steps = [call("k"), waiter("k"), call("k")];
        let found = judge(&steps, &seen(2, 1, &[100, 130]), MS(20));
        let want = Confirmed {
            blocked: 2,
            blocker: 1,
            first_seen: MS(100),
            last_seen: MS(130),
        };
        assert_eq!(found, vec![want]);
    }

    #[test]
    fn what_is_not_a_stall() {
        let confirm = MS(20);
        let steps = [call("k"), waiter("k"), call("k"), call("other"), call("k")];
        // Negative controls, each one condition short of a stall:
        // seen once, or twice too close together;
        assert!(judge(&steps, &seen(2, 1, &[100]), confirm).is_empty());
        assert!(judge(&steps, &seen(2, 1, &[100, 110]), confirm).is_empty());
        // blocked on another key than the waiter's;
        assert!(judge(&steps, &seen(3, 1, &[100, 150]), confirm).is_empty());
        // the blocker is no blocking acquire;
        assert!(judge(&steps, &seen(2, 0, &[100, 150]), confirm).is_empty());
        // the waiter's transaction had called the key before (its lock may be that call's).
        let mut in_txn = steps.to_vec();
        in_txn[1].key_called_earlier_in_txn = true;
        assert!(judge(&in_txn, &seen(2, 1, &[100, 150]), confirm).is_empty());
        // A step without a key never matches.
        let keyless = [StepFacts::default(), waiter("k")];
        assert!(judge(&keyless, &seen(0, 1, &[100, 150]), confirm).is_empty());
    }
}
