//! Recorded histories and their sequential check against the spec.
//!
//! A history recorder (harness) fills one [`Event`] per call: who called, what was sent, the
//! server-time span within which it took effect, what came back, and whether its transaction
//! committed. [`check_sequential`] judges events that are totally ordered (one client, or
//! spans that do not overlap), tracking every store the observations so far allow.

use crate::invariant::Invariant;
use crate::spec::{Mismatch, Name, Op, Outcome, Spec, Store};
use crate::time::Span;

/// A client (session) of a history.
pub type ClientId = u32;

/// What became of the transaction an operation ran in.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Commit {
    /// committed (also: autocommit statement that returned)
    #[default]
    Committed,
    /// rolled back (explicit ROLLBACK, or an error aborted the transaction)
    RolledBack,
    /// unknown: the COMMIT (or the connection) was lost; resolvable with `pg_xact_status`
    Unknown,
}

/// One call in a history.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Event<K, O> {
    pub client: ClientId,
    pub op: Op<K, O>,
    /// server-time span within which the call took effect
    pub span: Span,
    pub outcome: Outcome<O>,
    pub commit: Commit,
}

/// A recorded history: events in the order they are to be judged.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct History<K, O> {
    pub events: Vec<Event<K, O>>,
}

/// Limit on the number of stores [`check_sequential`] tracks at once.
pub const MAX_FRONTIER: usize = 4096;

/// Why a history was rejected.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum HistoryError {
    /// event `index` is impossible after the events before it
    #[error("event {index} (client {client}): {mismatch}")]
    Mismatch {
        index: usize,
        client: ClientId,
        mismatch: Mismatch,
    },
    /// too many unknown outcomes: the set of possible stores outgrew [`MAX_FRONTIER`]
    #[error("event {index}: more than {MAX_FRONTIER} possible states; too many unknown outcomes")]
    TooManyStates { index: usize },
}

impl HistoryError {
    /// The invariant a mismatch contradicts.
    pub fn invariant(&self) -> Option<Invariant> {
        match self {
            HistoryError::Mismatch { mismatch, .. } => Some(mismatch.invariant),
            HistoryError::TooManyStates { .. } => None,
        }
    }
}

impl Spec {
    /// Judges one event from `store`: every store consistent with its outcome and commit.
    pub fn check_event<K: Name, O: Name>(
        &self,
        store: &Store<K, O>,
        event: &Event<K, O>,
    ) -> Result<Vec<Store<K, O>>, Mismatch> {
        let after = self.check(store, &event.op, event.span, &event.outcome)?;
        Ok(match event.commit {
            Commit::Committed => after,
            Commit::RolledBack => vec![store.clone()],
            Commit::Unknown => {
                let mut all = after;
                if !all.contains(store) {
                    all.push(store.clone());
                }
                all
            }
        })
    }
}

/// Judges `events` in order from `initial`. Returns the stores consistent with the whole
/// history, or the first impossible event.
pub fn check_sequential<K: Name, O: Name>(
    spec: &Spec,
    initial: Store<K, O>,
    events: &[Event<K, O>],
) -> Result<Vec<Store<K, O>>, HistoryError> {
    let mut frontier = vec![initial];
    for (index, event) in events.iter().enumerate() {
        let mut next: Vec<Store<K, O>> = Vec::new();
        let mut first_err = None;
        for store in &frontier {
            match spec.check_event(store, event) {
                Ok(stores) => {
                    for s in stores {
                        if !next.contains(&s) {
                            next.push(s);
                        }
                    }
                }
                Err(m) => {
                    first_err.get_or_insert(m);
                }
            }
        }
        if next.is_empty() {
            let mismatch = first_err.unwrap_or(Mismatch {
                invariant: Invariant::PrecedenceAndIsolation,
                detail: "no state to judge the event from".to_string(),
            });
            return Err(HistoryError::Mismatch {
                index,
                client: event.client,
                mismatch,
            });
        }
        if next.len() > MAX_FRONTIER {
            return Err(HistoryError::TooManyStates { index });
        }
        frontier = next;
    }
    Ok(frontier)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::{KeyState, Row};
    use crate::time::{Interval, Ts, Window};

    type E = Event<String, String>;

    fn span(a: i64, b: i64) -> Span {
        Span::new(Ts(a), Ts(b)).expect("ordered")
    }

    fn ev(client: ClientId, op: Op<String, String>, s: Span, outcome: Outcome<String>) -> E {
        Event {
            client,
            op,
            span: s,
            outcome,
            commit: Commit::Committed,
        }
    }

    fn k() -> String {
        "job-42".to_string()
    }

    fn a() -> String {
        "worker-a1".to_string()
    }

    fn b() -> String {
        "worker-b2".to_string()
    }

    #[test]
    fn readme_takeover_story_is_accepted() {
        let ttl10 = Interval::micros(10);
        let ttl30 = Interval::micros(30);
        let events = vec![
            ev(
                1,
                Op::acquire(k(), a(), ttl10),
                span(0, 1),
                Outcome::Acquired {
                    epoch: 1,
                    expires_at: Ts(10),
                },
            ),
            ev(2, Op::acquire(k(), b(), ttl30), span(2, 3), Outcome::Denied),
            ev(
                2,
                Op::acquire_wait(k(), b(), ttl30, Interval::micros(15)),
                span(4, 12),
                Outcome::Acquired {
                    epoch: 2,
                    expires_at: Ts(41),
                },
            ),
            ev(
                1,
                Op::renew(k(), a(), 1, ttl30),
                span(13, 14),
                Outcome::NotOwner,
            ),
            ev(
                1,
                Op::inspect(k()),
                span(15, 16),
                Outcome::Inspected(Some(Row {
                    held: true,
                    owner: Some(b()),
                    epoch: 2,
                    expires_at: Some(Ts(41)),
                })),
            ),
        ];
        let end = check_sequential(&Spec::CORRECT, Store::new(), &events).expect("valid history");
        assert_eq!(end.len(), 1);
        assert_eq!(
            end[0].state(&k()),
            KeyState::Held {
                owner: b(),
                epoch: 2,
                expires: Window::exact(Ts(41))
            }
        );
    }

    #[test]
    fn rejected_history_names_event_and_invariant() {
        let ttl = Interval::micros(10);
        let events = vec![
            ev(
                1,
                Op::acquire(k(), a(), ttl),
                span(0, 0),
                Outcome::Acquired {
                    epoch: 1,
                    expires_at: Ts(10),
                },
            ),
            // b is granted while a's lease is live: mutual exclusion broken
            ev(
                2,
                Op::acquire(k(), b(), ttl),
                span(5, 5),
                Outcome::Acquired {
                    epoch: 2,
                    expires_at: Ts(15),
                },
            ),
        ];
        let err = check_sequential(&Spec::CORRECT, Store::new(), &events).expect_err("invalid");
        match &err {
            HistoryError::Mismatch { index, client, .. } => {
                assert_eq!((*index, *client), (1, 2));
            }
            other => panic!("unexpected {other:?}"),
        }
        assert_eq!(err.invariant(), Some(Invariant::MutualExclusion));
    }

    #[test]
    fn unknown_outcome_branches_and_is_resolved_later() {
        let ttl = Interval::micros(10);
        let mut lost = ev(1, Op::acquire(k(), a(), ttl), span(0, 2), Outcome::Unknown);
        lost.commit = Commit::Unknown;
        // A later inspect shows the lost acquire took effect; its expiry lies in [10, 12].
        let seen = ev(
            2,
            Op::inspect(k()),
            span(3, 3),
            Outcome::Inspected(Some(Row {
                held: true,
                owner: Some(a()),
                epoch: 1,
                expires_at: Some(Ts(11)),
            })),
        );
        let after_lost =
            check_sequential(&Spec::CORRECT, Store::new(), &[lost.clone()]).expect("ok");
        assert_eq!(after_lost.len(), 2);
        let end = check_sequential(&Spec::CORRECT, Store::new(), &[lost.clone(), seen])
            .expect("consistent");
        assert_eq!(end.len(), 1);
        // An expiry outside [10, 12] is impossible.
        let bad = ev(
            2,
            Op::inspect(k()),
            span(3, 3),
            Outcome::Inspected(Some(Row {
                held: true,
                owner: Some(a()),
                epoch: 1,
                expires_at: Some(Ts(13)),
            })),
        );
        let err = check_sequential(&Spec::CORRECT, Store::new(), &[lost, bad]).expect_err("bad");
        assert_eq!(err.invariant(), Some(Invariant::InspectConsistent));
    }

    #[test]
    fn rolled_back_acquire_changes_nothing() {
        let ttl = Interval::micros(10);
        let mut aborted = ev(
            1,
            Op::acquire(k(), a(), ttl),
            span(0, 0),
            Outcome::Acquired {
                epoch: 1,
                expires_at: Ts(10),
            },
        );
        aborted.commit = Commit::RolledBack;
        let none = ev(2, Op::inspect(k()), span(1, 1), Outcome::Inspected(None));
        check_sequential(&Spec::CORRECT, Store::new(), &[aborted, none]).expect("fail closed");
    }
}
