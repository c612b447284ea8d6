//! Race plans: written stepped plans that put every kind of call behind a transaction
//! holding the key's row lock, in the manner of isolationtester's permutations. A call that
//! waits for the row lock must decide again on what it finds once the lock is its own: the
//! lease may have lapsed (a short TTL written by the holder), been released, or be back as
//! it was (ROLLBACK). A build that decides before the lock, or does not re-check under it,
//! answers from the state before the wait, which the checker rejects. Random plans reach
//! these interleavings only now and then; these reach each of them every run. The aged
//! plans make each kind of call in a transaction that idled far longer than a lapsing
//! lease and a blocking acquire's wait: a build that reads time from the transaction's
//! start (`now()`) instead of the clock answers from the past.

use crate::plan::{stepped_workload, Plan, PlanError, PlanStep};
use crate::workload::{CallKind, EpochChoice, Names, OpChoice, OwnerChoice, Step, Workload};
use model::{Interval, Isolation};

/// The holder's transaction: a lease of `setup_ttl` granted to p0 in autocommit first,
/// then, inside p0's transaction, `write` (which takes the row lock), the waiting call, and
/// `then` (a second write while the waiter waits: a grant released again, a renew undone).
#[derive(Clone, Copy, Debug)]
struct Holder {
    setup_ttl: Interval,
    write: (CallKind, Interval),
    then: Option<(CallKind, Interval)>,
}

impl Holder {
    const fn one(setup_ttl: Interval, call: CallKind, ttl: Interval) -> Holder {
        Holder {
            setup_ttl,
            write: (call, ttl),
            then: None,
        }
    }

    const fn two(setup_ttl: Interval, first: CallKind, then: CallKind, ttl: Interval) -> Holder {
        Holder {
            setup_ttl,
            write: (first, LONG),
            then: Some((then, ttl)),
        }
    }
}

/// Leases that lapse while the waiter waits: the step that blocks takes longer than the
/// shortest; the longer ones also outlast the start of the waiting call on a slow machine.
const LAPSING: [Interval; 3] = [
    Interval::millis(5),
    Interval::millis(15),
    Interval::millis(40),
];
const LONG: Interval = Interval::secs(5);
const WAIT: Interval = Interval::millis(250);

/// What p0's transaction does under the row lock: renew to a lapsing or a long lease,
/// release, or re-grant a lapsed lease (to a lapsing or a long one).
fn holders() -> Vec<Holder> {
    let lapsed = LAPSING[0];
    let mut holders = vec![
        Holder::one(LONG, CallKind::Renew, LONG),
        Holder::one(LONG, CallKind::Release, LONG),
        Holder::one(lapsed, CallKind::Acquire, LONG),
        Holder::two(lapsed, CallKind::Acquire, CallKind::Release, LONG),
        Holder::two(LONG, CallKind::Renew, CallKind::Release, LONG),
        Holder::two(lapsed, CallKind::Acquire, CallKind::Renew, LAPSING[1]),
    ];
    for ttl in LAPSING {
        holders.push(Holder::one(LONG, CallKind::Renew, ttl));
        holders.push(Holder::one(lapsed, CallKind::Acquire, ttl));
    }
    holders
}

/// The waiting call: p1 acts as p0's owner (another session of one client), p2 as
/// another owner; each calls with the latest epoch it saw.
const WAITERS: [(u32, CallKind); 7] = [
    (1, CallKind::Renew),
    (1, CallKind::Release),
    (1, CallKind::Acquire),
    (2, CallKind::Acquire),
    (2, CallKind::AcquireWait),
    (2, CallKind::Renew),
    (2, CallKind::Release),
];

/// Every race plan: each holder's write, each waiting call, each end (COMMIT, ROLLBACK);
/// then the aged plans.
pub fn race_plans() -> Result<Vec<Plan>, PlanError> {
    let mut plans = Vec::new();
    for holder in holders() {
        for waiter in WAITERS {
            for end in [Step::Commit, Step::Rollback] {
                plans.push(Plan::new(race_workload(), steps(holder, waiter, end))?);
            }
        }
    }
    for steps in aged_steps() {
        plans.push(Plan::new(race_workload(), steps)?);
    }
    for steps in across_expiry_steps() {
        plans.push(Plan::new(race_workload(), steps)?);
    }
    Ok(plans)
}

/// A lease that lapses while a write waits for the row lock p0's transaction holds.
const ACROSS: Interval = Interval::millis(150);
/// How long p0 keeps its transaction open once the waiting call was issued: past
/// [`ACROSS`].
const HOLD: std::time::Duration = std::time::Duration::from_millis(300);

/// Writes that wait for p0's row lock across the expiry of the lease they act on, p0 then
/// rolling back: p0 holds a lease of [`ACROSS`], renews it in a transaction, each waiting
/// call is issued, p0 idles [`HOLD`] (the lease lapses) and rolls back, so the waiter
/// finds the lapsed lease once the lock is its own. And the first grant of a never-leased
/// key waiting for p0's uncommitted first grant, which p0 rolls back after [`HOLD`].
fn across_expiry_steps() -> Vec<Vec<PlanStep>> {
    let mut plans = Vec::new();
    for waiter in WAITERS {
        plans.push(vec![
            step(0, call_of(CallKind::Acquire, ACROSS)),
            step(1, call_of(CallKind::Inspect, LONG)),
            step(2, call_of(CallKind::Inspect, LONG)),
            step(0, Step::Begin(Isolation::ReadCommitted)),
            step(0, call_of(CallKind::Renew, LONG)),
            step(waiter.0, call_of(waiter.1, LONG)),
            step(0, Step::Pause(HOLD)),
            step(0, Step::Rollback),
            step(1, call_of(CallKind::Inspect, LONG)),
        ]);
    }
    for (process, kind) in [
        (1, CallKind::Acquire),
        (2, CallKind::Acquire),
        (2, CallKind::AcquireWait),
    ] {
        plans.push(vec![
            step(0, Step::Begin(Isolation::ReadCommitted)),
            step(0, call_of(CallKind::Acquire, LONG)),
            step(process, call_of(kind, LONG)),
            step(0, Step::Pause(HOLD)),
            step(0, Step::Rollback),
            step(1, call_of(CallKind::Inspect, LONG)),
        ]);
    }
    plans
}

/// How long an aged transaction idles before its call: far longer than a lapsing lease
/// and than a blocking acquire's wait, so `now()` (the transaction's start) is far behind
/// the clock the call must read.
const AGE: std::time::Duration = std::time::Duration::from_millis(400);

/// Calls made in a transaction that idled [`AGE`]: each must judge expiry and date what it
/// writes by the clock, not by the transaction's start. A grant of a fresh key and a
/// takeover must expire `ttl` after the call and a renew `ttl` after its own clock read;
/// a lease granted after the transaction began and lapsed while it idled must be seen
/// lapsed by a renew, a release, an inspect and another owner's acquire; and the aged
/// waiter's plans ([`aged_waiter_steps`]).
fn aged_steps() -> Vec<Vec<PlanStep>> {
    let lapsing = LAPSING[1];
    let begin = |p| step(p, Step::Begin(Isolation::ReadCommitted));
    let age = |p| step(p, Step::Pause(AGE));
    let call = |p, kind, ttl| step(p, call_of(kind, ttl));
    let commit = |p| step(p, Step::Commit);
    let mut plans = vec![
        // A first grant (the key's row inserted), then a renew, each in an aged transaction.
        vec![
            begin(2),
            age(2),
            call(2, CallKind::Acquire, LONG),
            commit(2),
            begin(2),
            age(2),
            call(2, CallKind::Renew, LONG),
            commit(2),
            call(1, CallKind::Inspect, LONG),
        ],
        // A takeover of a lapsed lease in an aged transaction.
        vec![
            call(1, CallKind::Acquire, lapsing),
            begin(2),
            age(2),
            call(2, CallKind::Acquire, LONG),
            commit(2),
            call(1, CallKind::Inspect, LONG),
        ],
    ];
    // p1 (p0's owner) is granted a lapsing lease after p0's (or p2's) transaction began.
    for (process, kind) in [
        (0, CallKind::Renew),
        (0, CallKind::Release),
        (0, CallKind::Inspect),
        (2, CallKind::Acquire),
    ] {
        plans.push(vec![
            begin(process),
            call(1, CallKind::Acquire, lapsing),
            call(process, CallKind::Inspect, LONG),
            age(process),
            call(process, kind, LONG),
            commit(process),
            call(1, CallKind::Inspect, LONG),
        ]);
    }
    for end in [Step::Commit, Step::Rollback] {
        plans.push(aged_waiter_steps(end));
    }
    plans
}

/// A blocking acquire in a transaction older than its wait, on a key held by another owner
/// and released while it waits: it must wait the whole bound from its own start and take
/// the key. A build that counts the deadline from the transaction's start (`now()`) times
/// out at once; p1's inspect just before and p0's release just after pin its server window
/// to a few milliseconds, shorter than the wait a timeout needs.
fn aged_waiter_steps(end: Step) -> Vec<PlanStep> {
    vec![
        step(0, call_of(CallKind::Acquire, LONG)),
        step(2, Step::Begin(Isolation::ReadCommitted)),
        step(2, Step::Pause(AGE)),
        step(1, call_of(CallKind::Inspect, LONG)),
        step(2, call_of(CallKind::AcquireWait, LONG)),
        step(0, call_of(CallKind::Release, LONG)),
        step(2, end),
        step(1, call_of(CallKind::Inspect, LONG)),
    ]
}

/// Three processes on one key; p0 and p1 share an owner.
fn race_workload() -> Workload {
    Workload {
        processes: 3,
        keys: 1,
        names: Names::SharedOwners,
        isolations: vec![Isolation::ReadCommitted],
        ..stepped_workload()
    }
}

fn steps(holder: Holder, (process, call): (u32, CallKind), end: Step) -> Vec<PlanStep> {
    let mut steps = vec![
        step(0, call_of(CallKind::Acquire, holder.setup_ttl)),
        step(1, call_of(CallKind::Inspect, LONG)),
        step(2, call_of(CallKind::Inspect, LONG)),
        step(0, Step::Begin(Isolation::ReadCommitted)),
        step(0, call_of(holder.write.0, holder.write.1)),
        step(process, call_of(call, LONG)),
    ];
    if let Some((then, ttl)) = holder.then {
        steps.push(step(0, call_of(then, ttl)));
    }
    steps.push(step(0, end));
    steps.push(step(1, call_of(CallKind::Inspect, LONG)));
    steps
}

fn step(process: u32, action: Step) -> PlanStep {
    PlanStep::new(process, action)
}

/// A call on the plan's key as the process's owner, with the latest epoch it saw.
fn call_of(call: CallKind, ttl: Interval) -> Step {
    Step::Call(OpChoice {
        call,
        key: 0,
        owner: OwnerChoice::Own,
        epoch: EpochChoice::Seen,
        ttl,
        wait: match call {
            CallKind::AcquireWait => WAIT,
            _ => Interval::ZERO,
        },
        invalid: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_holder_waiter_and_end_is_a_valid_plan() {
        let plans = race_plans().expect("valid plans");
        assert_eq!(
            plans.len(),
            holders().len() * WAITERS.len() * 2 + aged_steps().len() + across_expiry_steps().len()
        );
        assert!(plans.iter().all(|p| p.steps.len() >= 6));
        assert!(AGE.as_micros() > WAIT.micros as u128);
    }
}
