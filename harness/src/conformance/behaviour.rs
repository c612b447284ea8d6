//! The behaviour checks as scripted histories ([`Script`]): each runs the calls that show
//! one documented behaviour on recorded sessions, and the model's checker judges what came
//! back. What the model does not cover is asserted by hand, each saying why: the error a
//! failure carried, how long a call took.
//! The checks that are only sessions doing steps and expecting answers are plans
//! (module `plans`, harness/plans/conformance/).

use super::script::{acquire, call, granted, inspect, not_granted, release, renew, Script};
use super::{infra, pg, CheckResult, Ctx, Failure, MS, S};
use model::Isolation;
use std::time::{Duration, Instant};

/// The epoch `record` was granted, or the check stops (with the checker's finding if the
/// history already breaks an invariant).
macro_rules! grant {
    ($script:expr, $record:expr) => {
        match granted(&$record) {
            Some(epoch) => epoch,
            None => return Err($script.stop(not_granted(&$record)).await),
        }
    };
}

/// How far past its bound a waiting call may answer and still count as prompt: the
/// blocking acquire polls every 100 ms at most (specs/SEMANTICS.md section 5), and a
/// loaded 2-core CI machine adds scheduling delay; 2 s is ten poll periods beyond that.
const PROMPT: Duration = Duration::from_secs(2);

/// The longest a holder's renew may take while blocking acquires of its key poll: waiters
/// never hold the row lock while they sleep, so a renew never waits a poll period (100 ms)
/// for them; 500 ms is five periods, room for a loaded machine. Not in the model: a slow
/// renew is still linearizable.
const RENEW_UNSTALLED: Duration = Duration::from_millis(500);

/// A fresh database for the check and a script recording on it.
async fn script(ctx: &Ctx<'_>) -> Result<(String, Script), Failure> {
    let (db, _) = ctx.db().await?;
    let script = Script::on(ctx, &db)?;
    Ok((db, script))
}

pub(super) async fn blocking_acquire_is_woken_by_release(ctx: &Ctx<'_>) -> CheckResult {
    let (_, script) = script(ctx).await?;
    let mut a = script.session().await?;
    let mut b = script.session().await?;
    let got = call(&mut a, acquire("k", "a", S(60), Duration::ZERO)).await?;
    let e1 = grant!(script, got);
    let waiter = tokio::spawn(async move {
        let r = call(&mut b, acquire("k", "b", S(60), S(10))).await;
        (r, Instant::now())
    });
    tokio::time::sleep(MS(300)).await;
    let released = Instant::now();
    call(&mut a, release("k", "a", e1)).await?;
    let (r, answered) = waiter.await.map_err(infra)?;
    let r = r?;
    script.judge().await?;
    // Not in the model (a late grant is still linearizable): the waiter notices promptly.
    let took = answered.saturating_duration_since(released);
    if granted(&r).is_none() || took > PROMPT {
        return Err(Failure::Violation(format!(
            "the waiter answered {:?} {took:?} after the release (at most {PROMPT:?} expected)",
            r.result
        )));
    }
    Ok(())
}

pub(super) async fn blocking_acquire_takes_over_at_expiry(ctx: &Ctx<'_>) -> CheckResult {
    let (_, script) = script(ctx).await?;
    let mut s = script.session().await?;
    let got = call(&mut s, acquire("k", "a", MS(500), Duration::ZERO)).await?;
    grant!(script, got);
    let asked = Instant::now();
    let r = call(&mut s, acquire("k", "b", S(60), S(5))).await?;
    let answered = Instant::now();
    script.judge().await?;
    // Not in the model: the takeover comes promptly after the 500 ms lease ran out.
    let took = answered.saturating_duration_since(asked);
    if granted(&r).is_none() || took > MS(500) + PROMPT {
        return Err(Failure::Violation(format!(
            "the blocking acquire over a 500ms lease answered {:?} after {took:?}",
            r.result
        )));
    }
    Ok(())
}

pub(super) async fn exactly_one_of_concurrent_acquirers_wins(ctx: &Ctx<'_>) -> CheckResult {
    let (_, script) = script(ctx).await?;
    let contenders = 8;
    let mut sessions = Vec::new();
    for _ in 0..contenders {
        sessions.push(script.session().await?);
    }
    let mut setup = script.session().await?;
    for round in 0..6 {
        let key = format!("race-{round}");
        if round % 2 == 1 {
            // Odd rounds race for a lapsed lease instead of a never-leased key.
            let got = call(&mut setup, acquire(&key, "previous", S(60), Duration::ZERO)).await?;
            grant!(script, got);
            script.lapse(&key).await?;
        }
        let barrier = std::sync::Arc::new(tokio::sync::Barrier::new(contenders));
        let mut tasks = Vec::new();
        for (i, mut s) in sessions.drain(..).enumerate() {
            let (barrier, key) = (barrier.clone(), key.clone());
            tasks.push(tokio::spawn(async move {
                barrier.wait().await;
                let r = call(
                    &mut s,
                    acquire(&key, &format!("w{i}"), S(60), Duration::ZERO),
                )
                .await;
                (s, r)
            }));
        }
        for t in tasks {
            let (s, r) = t.await.map_err(infra)?;
            r?;
            sessions.push(s);
        }
        call(&mut setup, inspect(&key)).await?;
    }
    script.judge().await
}

pub(super) async fn blocking_waiters_never_stall_the_holders_renew(ctx: &Ctx<'_>) -> CheckResult {
    let (_, script) = script(ctx).await?;
    let mut holder = script.session().await?;
    let got = call(&mut holder, acquire("k", "holder", S(60), Duration::ZERO)).await?;
    let ep = grant!(script, got);
    let mut waiters = Vec::new();
    for i in 0..3 {
        let mut w = script.session().await?;
        waiters.push(tokio::spawn(async move {
            call(&mut w, acquire("k", &format!("waiter{i}"), S(60), S(2))).await
        }));
    }
    tokio::time::sleep(MS(100)).await;
    let mut slowest = Duration::ZERO;
    for _ in 0..10 {
        let start = Instant::now();
        call(&mut holder, renew("k", "holder", ep, S(60))).await?;
        slowest = slowest.max(start.elapsed());
        tokio::time::sleep(MS(100)).await;
    }
    for w in waiters {
        w.await.map_err(infra)??;
    }
    script.judge().await?;
    if slowest >= RENEW_UNSTALLED {
        return Err(Failure::Violation(format!(
            "a renew took {slowest:?} while waiters were polling"
        )));
    }
    Ok(())
}

/// Waits until the backend `pid` waits for a lock (at most 5 s); `what` names the lock in
/// the failure when it never does.
async fn until_lock_wait(ctx: &Ctx<'_>, db: &str, pid: i32, what: &str) -> CheckResult {
    match lock_wait_seen(ctx, db, pid, || false).await? {
        Some(true) => Ok(()),
        _ => Err(format!("the waiter never blocked on {what} within 5 s").into()),
    }
}

/// Polls every 10 ms whether backend `pid` waits for a lock, for at most 5 s or until
/// `answered()`: `Some(true)` once it is seen waiting, `Some(false)` when it answered
/// first, `None` when neither happened within 5 s.
pub(super) async fn lock_wait_seen(
    ctx: &Ctx<'_>,
    db: &str,
    pid: i32,
    answered: impl Fn() -> bool,
) -> Result<Option<bool>, Failure> {
    let c = ctx.connect(db).await?;
    let deadline = Instant::now() + S(5);
    while !answered() {
        // No row: the backend is gone (its session closed the connection after a
        // refused call), so it is not waiting; `answered()` will say so shortly.
        let waiting = c
            .query_opt(
                "SELECT coalesce(wait_event_type, '') OPERATOR(pg_catalog.=) 'Lock' \
                 FROM pg_catalog.pg_stat_activity WHERE pid = $1",
                &[&pid],
            )
            .await
            .map_err(pg)?
            .is_some_and(|row| row.get::<_, bool>(0));
        if waiting {
            return Ok(Some(true));
        }
        if Instant::now() >= deadline {
            return Ok(None);
        }
        tokio::time::sleep(MS(10)).await;
    }
    Ok(Some(false))
}

pub(super) async fn a_waiter_that_lost_a_race_never_stalls_the_holders_renew(
    ctx: &Ctx<'_>,
) -> CheckResult {
    // s1's lease lapses; s2 takes it over in an open transaction; s3's blocking acquire
    // probes "lapsed", tries to write and blocks on s2's row lock; s2 commits, so s3's
    // re-check fails. s2's renew must not wait for s3: the failed attempt may not keep
    // its row lock while s3 sleeps.
    let (db, script) = script(ctx).await?;
    let mut s1 = script.session().await?;
    let mut s2 = script.session().await?;
    let mut s3 = script.session().await?;
    call(&mut s1, acquire("k", "s1", MS(1), Duration::ZERO)).await?;
    tokio::time::sleep(MS(10)).await;
    let pid3 = s3
        .backend_pid()
        .ok_or("the waiter's session has no backend")?;
    s2.begin(Isolation::ReadCommitted).await.map_err(infra)?;
    let got = call(&mut s2, acquire("k", "s2", S(60), Duration::ZERO)).await?;
    let ep = grant!(script, got);
    let waiter = tokio::spawn(async move { call(&mut s3, acquire("k", "s3", S(60), S(3))).await });
    until_lock_wait(ctx, &db, pid3, "the takeover's row lock").await?;
    s2.commit().await.map_err(infra)?;
    tokio::time::sleep(MS(300)).await;
    let start = Instant::now();
    call(&mut s2, renew("k", "s2", ep, S(60))).await?;
    let took = start.elapsed();
    waiter.await.map_err(infra)??;
    script.judge().await?;
    if took >= RENEW_UNSTALLED {
        return Err(Failure::Violation(format!(
            "the new holder's renew waited {took:?} for a waiter that lost a race"
        )));
    }
    Ok(())
}
