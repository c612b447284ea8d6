//! A write that waited for another transaction's row lock decides on what it finds once
//! the lock is its own (specs/SEMANTICS.md sections 3 and 8: it re-checks the committed
//! result, reading the clock again): when the lease it acts on lapsed during the wait and
//! the lock holder then rolled back, a renew or a release answers `lapsed`.

use super::script::{acquire, call, granted, not_granted, release, renew, Script};
use super::{infra, CheckResult, Ctx, Failure, S};
use model::{OpResult, Outcome};
use std::time::Duration;

/// The lease the waiting write acts on, and how long the lock holder keeps its
/// transaction open after the write began waiting: the lease lapses in between.
const LEASE: Duration = Duration::from_millis(300);
const HELD_FOR: Duration = Duration::from_millis(600);

/// For a renew and for a release: the owner's lease of [`LEASE`]; another session of the
/// owner renews it in a transaction (taking the row lock); the write waits for that lock;
/// the lease lapses; the transaction rolls back. The write must answer `lapsed`: a build
/// that read the clock before it took the lock answers from before the lapse.
pub(super) async fn a_write_that_waited_across_its_leases_expiry_answers_lapsed(
    ctx: &Ctx<'_>,
) -> CheckResult {
    let (db, _) = ctx.db().await?;
    let script = Script::on(ctx, &db)?;
    let mut wrong = Vec::new();
    for (n, kind) in ["renew", "release"].into_iter().enumerate() {
        let key = format!("k{n}");
        let mut writer = script.session().await?;
        let mut holder = script.session().await?;
        let got = call(&mut writer, acquire(&key, "a", LEASE, Duration::ZERO)).await?;
        let Some(epoch) = granted(&got) else {
            return Err(script.stop(not_granted(&got)).await);
        };
        holder
            .begin(model::Isolation::ReadCommitted)
            .await
            .map_err(infra)?;
        call(&mut holder, renew(&key, "a", epoch, S(60))).await?;
        let op = match kind {
            "renew" => renew(&key, "a", epoch, S(60)),
            _ => release(&key, "a", epoch),
        };
        let waiter = tokio::spawn(async move { call(&mut writer, op).await });
        tokio::time::sleep(HELD_FOR).await;
        holder.rollback().await.map_err(infra)?;
        let answered = waiter.await.map_err(infra)??;
        if answered.result != OpResult::Ok(Outcome::Lapsed) {
            wrong.push(format!(
                "the {kind} answered {:?}, expected lapsed",
                answered.result
            ));
        }
    }
    script.judge().await?;
    match wrong.is_empty() {
        true => Ok(()),
        false => Err(Failure::Violation(format!(
            "a write that waited for the row lock across its lease's expiry ({LEASE:?} lease, \
             lock held {HELD_FOR:?}, then rolled back) must re-check under the lock: {}",
            wrong.join("; ")
        ))),
    }
}
