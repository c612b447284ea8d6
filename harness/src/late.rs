//! Time read late: plans whose calls come late in a long statement, after work in the same
//! statement (a sleep first, then the calls: a batch over many keys in one SELECT, or a DO
//! block), for every kind of call, judged by the model's checker. A build that dates a
//! grant or a renew, judges an expiry or counts a wait from the statement's start
//! (`statement_timestamp()`) instead of the clock answers from before the work, which the
//! checker rejects: each call's server window starts after the sleep
//! ([`crate::recorder::late`]).
//!
//! The plans that put a write behind a row lock held across its lease's expiry are race
//! plans of the stepped runner ([`crate::stepped::race_plans`]).

use crate::campaign::{self, Campaign, Length, Outcome, Report, Silent, Target};
use crate::pg::Cluster;
use crate::recorder::late::Form;
use crate::recorder::{RecorderError, Session};
use model::{Interval, Isolation, Op};
use std::sync::Arc;
use std::time::Duration;

/// How long each late statement works (sleeps) before its calls: far longer than the
/// clock's resolution and a call's own duration, so a date from the statement's start is
/// outside every call's window by this much.
pub const WORK_FIRST: Duration = Duration::from_millis(300);

/// One statement of a plan: its calls (one kind) and the work before them.
#[derive(Clone, Debug)]
pub struct Statement {
    pub ops: Vec<Op<String, String>>,
    pub sleep: Duration,
}

/// A plan: statements made one after another by one session, each in a transaction of its
/// own, in one form.
#[derive(Clone, Debug)]
pub struct Plan {
    pub name: &'static str,
    pub form: Form,
    pub statements: Vec<Statement>,
}

fn key(n: u32) -> String {
    match n {
        // One awkward key: quotes and a backslash reach the calls as data.
        9 => "late-9'q\\".to_string(),
        n => format!("late-{n}"),
    }
}

fn keys(ns: &[u32]) -> Vec<String> {
    ns.iter().map(|n| key(*n)).collect()
}

fn acquire(ns: &[u32], owner: &str, ttl: Interval, wait: Interval) -> Vec<Op<String, String>> {
    keys(ns)
        .into_iter()
        .map(|k| Op::acquire_wait(k, owner.to_string(), ttl, wait))
        .collect()
}

fn renew(ns: &[u32], owner: &str, epoch: i64, ttl: Interval) -> Vec<Op<String, String>> {
    keys(ns)
        .into_iter()
        .map(|k| Op::renew(k, owner.to_string(), epoch, ttl))
        .collect()
}

fn release(ns: &[u32], owner: &str, epoch: i64) -> Vec<Op<String, String>> {
    keys(ns)
        .into_iter()
        .map(|k| Op::release(k, owner.to_string(), epoch))
        .collect()
}

fn inspect(ns: &[u32]) -> Vec<Op<String, String>> {
    keys(ns).into_iter().map(Op::inspect).collect()
}

/// The statements of every plan: first grants late in a statement; short leases; a
/// statement that meets a held key (denied), two lapsed ones (taken over) and a new one; renews of
/// live leases and of one taken over (not_owner); releases; grants over FREE keys;
/// inspects of every key (one never leased); idempotent acquires; a blocking acquire whose
/// wait runs out late in its statement.
fn statements() -> Vec<Statement> {
    let long = Interval::secs(60);
    let short = Interval::millis(50);
    let zero = Interval::ZERO;
    let late = |ops| Statement {
        ops,
        sleep: WORK_FIRST,
    };
    vec![
        late(acquire(&[1, 2, 3, 4, 5, 6], "a", long, zero)),
        Statement {
            ops: acquire(&[7, 8], "a", short, zero),
            sleep: Duration::ZERO,
        },
        late(acquire(&[1, 7, 8, 9], "b", long, zero)),
        late(renew(&[1, 2, 3, 7], "a", 1, long)),
        late(release(&[4, 5, 6], "a", 1)),
        late(acquire(&[4, 5, 6], "c", long, zero)),
        late(inspect(&[1, 2, 3, 4, 5, 6, 7, 8, 9, 10])),
        late(acquire(&[1, 2], "a", long, zero)),
        late(acquire(&[1], "c", long, Interval::millis(100))),
        late(inspect(&[1, 4, 9])),
    ]
}

/// The late plans: the statements as batches, then as blocks.
pub fn plans() -> Vec<Plan> {
    vec![
        Plan {
            name: "batch",
            form: Form::Batch,
            statements: statements(),
        },
        Plan {
            name: "block",
            form: Form::Block,
            statements: statements(),
        },
    ]
}

/// Runs `plan` against `target` in a fresh database of `cluster` and judges its history.
pub async fn run(cluster: &Cluster, target: Target, plan: &Plan, call_timeout: Duration) -> Report {
    let campaign = Campaign {
        call_timeout,
        ..Campaign::new(target, Length::Ops(0), 0)
    };
    let recording = match campaign::prepare(cluster, &campaign, &mut None).await {
        Ok(r) => r,
        Err(e) => {
            return Report {
                outcome: Outcome::Infrastructure(e),
                history: None,
                figures: Default::default(),
                postgres: cluster.version().full.clone(),
                database: None,
            }
        }
    };
    let mut session = recording.recorder().session();
    let stopped = play(&mut session, plan).await.err();
    recording
        .judge(stopped.map(campaign::Stopped::Recorder), Arc::new(Silent))
        .await
}

/// Each statement in a transaction of its own (a failed one ends it).
async fn play(s: &mut Session, plan: &Plan) -> Result<(), RecorderError> {
    for statement in &plan.statements {
        s.begin(Isolation::ReadCommitted).await?;
        s.call_late(&statement.ops, plan.form, statement.sleep)
            .await?;
        if s.txn().is_some() {
            s.commit().await?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_of_call_comes_late_in_both_forms() {
        let plans = plans();
        assert_eq!(plans.len(), 2);
        for p in &plans {
            let late: Vec<&Statement> = p
                .statements
                .iter()
                .filter(|s| s.sleep >= WORK_FIRST)
                .collect();
            for kind in ["Acquire", "Renew", "Release", "Inspect"] {
                assert!(
                    late.iter()
                        .any(|s| format!("{:?}", s.ops[0]).starts_with(kind)),
                    "{}: no late {kind}",
                    p.name
                );
            }
            assert!(p.statements.iter().all(|s| !s.ops.is_empty()));
        }
    }
}
