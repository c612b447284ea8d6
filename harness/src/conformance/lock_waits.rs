//! A write that waited for another transaction's row lock decides on what it finds once
//! the lock is its own (specs/SEMANTICS.md sections 3 and 8: it re-checks the committed
//! result, reading the clock again): a first grant that waited for another transaction's
//! insert of the key, which rolled back, is dated after that wait. (A renew or release
//! that waited across its lease's expiry answering `lapsed` is a plan:
//! harness/plans/conformance/a_write_that_waited_across_its_leases_expiry_answers_lapsed.plan.)

use super::script::{acquire, call, granted, not_granted, Script};
use super::{infra, pg, CheckResult, Ctx, Failure, MS, S};
use chrono::{DateTime, Utc};
use model::{OpResult, Outcome};
use std::time::{Duration, Instant};

/// The first grant's ttl, and how long the inserter keeps its transaction open after the
/// waiter is seen waiting: a grant dated before the wait (call start + ttl) is then
/// expired at least `INSERT_HELD_FOR - FIRST_TTL` = 500 ms before the rollback, whatever
/// the machine's load; a grant dated after it expires at least `FIRST_TTL` after.
const FIRST_TTL: Duration = Duration::from_millis(500);
const INSERT_HELD_FOR: Duration = Duration::from_millis(1000);

/// The first-grant clock class (SEMANTICS section 8: a first grant reads the clock for its
/// expiry after its insert): a session inserts a never-leased key's first grant in an open
/// transaction; another's wait = 0 acquire of the key waits for that insert; the
/// transaction rolls back. The waiter's grant must expire at least its ttl after the
/// rollback: a build that dated it from before the wait (pg_lease 0.2.0) hands out a grant
/// that is already expired when it is returned.
pub(super) async fn a_first_grant_that_waited_for_a_rolled_back_insert_is_dated_after_it(
    ctx: &Ctx<'_>,
) -> CheckResult {
    let (db, _) = ctx.db().await?;
    let script = Script::on(ctx, &db)?;
    let mut inserter = script.session().await?;
    let mut waiter = script.session().await?;
    inserter
        .begin(model::Isolation::ReadCommitted)
        .await
        .map_err(infra)?;
    let first = call(
        &mut inserter,
        acquire("k", "inserter", S(60), Duration::ZERO),
    )
    .await?;
    if granted(&first).is_none() {
        return Err(script.stop(not_granted(&first)).await);
    }
    let pid = waiter
        .backend_pid()
        .ok_or("the waiter's session has no backend")?;
    let call_k = tokio::spawn(async move {
        call(
            &mut waiter,
            acquire("k", "waiter", FIRST_TTL, Duration::ZERO),
        )
        .await
    });
    let waited = lock_wait_seen(ctx, &db, pid, || call_k.is_finished())
        .await?
        .ok_or_else(|| {
            infra("the waiter's acquire neither waited for a lock nor answered within 5 s")
        })?;
    if !waited {
        // It answered without waiting (a timeout setting cancelled it, or the build does
        // not wait): its answer below is the verdict.
        inserter.rollback().await.map_err(infra)?;
        let answered = call_k.await.map_err(infra)??;
        script.judge().await?;
        return Err(Failure::Violation(format!(
            "a wait = 0 acquire of a key another transaction was inserting answered {:?} \
             without waiting for that insert; expected it to wait and then be granted",
            answered.result
        )));
    }
    tokio::time::sleep(INSERT_HELD_FOR).await;
    let rolled_back_after: DateTime<Utc> = inserter
        .connection()
        .ok_or_else(|| infra("the inserter's session has no connection"))?
        .query_one("SELECT pg_catalog.clock_timestamp()", &[])
        .await
        .map_err(pg)?
        .get(0);
    inserter.rollback().await.map_err(infra)?;
    let answered = call_k.await.map_err(infra)??;
    script.judge().await?;
    let rollback = model::Ts(rolled_back_after.timestamp_micros());
    let earliest = rollback.plus(i64::try_from(FIRST_TTL.as_micros()).map_err(infra)?);
    match &answered.result {
        OpResult::Ok(Outcome::Acquired { expires_at, .. }) if *expires_at >= earliest => Ok(()),
        OpResult::Ok(Outcome::Acquired { expires_at, .. }) => Err(Failure::Violation(format!(
            "first-grant clock class: a wait = 0 acquire that waited {INSERT_HELD_FOR:?} for \
             another transaction's insert of the never-leased key, which then rolled back \
             (server clock {} just before the ROLLBACK), was granted with a {FIRST_TTL:?} \
             ttl expiring at {}: dated before its wait, not after it (expected an expiry at \
             or after {})",
            rollback.rfc3339(),
            expires_at.rfc3339(),
            earliest.rfc3339()
        ))),
        other => Err(Failure::Violation(format!(
            "a wait = 0 acquire of a key whose only insert rolled back answered {other:?}, \
             expected a grant at epoch 1"
        ))),
    }
}

/// Polls every 10 ms whether backend `pid` waits for a lock, for at most 5 s or until
/// `answered()`: `Some(true)` once it is seen waiting, `Some(false)` when it answered
/// first, `None` when neither happened within 5 s.
async fn lock_wait_seen(
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
