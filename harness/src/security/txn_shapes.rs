//! Transaction shapes a caller builds around lease calls: savepoints and ON COMMIT actions
//! (SEMANTICS section 8). Each check judges what a real server did: the state inspect shows,
//! and whether another session's call answers at once (no row lock or other lock was left
//! behind).
use super::*;
use crate::client::{Acquire, LeaseError, Status};

const HOUR: Duration = Duration::from_secs(3600);

/// The bound of a call that waits for no other transaction: it answers in milliseconds on
/// the test machine; 2 s leaves a margin of 100x and more for a loaded machine's fsync,
/// while a call queued behind a leftover lock never answers until its holder ends.
pub(super) const PROMPT: &str = "2s";

/// Runs `call` on `c` under `statement_timeout = PROMPT` (a call that waits for a lock is
/// cancelled at the bound, 57014).
pub(super) async fn promptly<T, F>(c: &Client, call: F) -> Result<Result<T, LeaseError>, Failure>
where
    F: Future<Output = Result<T, LeaseError>>,
{
    c.batch_execute(&format!("SET statement_timeout = '{PROMPT}'"))
        .await?;
    let r = call.await;
    c.batch_execute("RESET statement_timeout").await?;
    Ok(r)
}

/// A grant at a key of its own (committed), or no verdict.
async fn granted(c: &Client, key: &str, owner: &str, ttl: Duration) -> Result<i64, Failure> {
    match crate::client::acquire(c, key, owner, ttl, Duration::ZERO).await? {
        Acquire::Acquired { epoch, .. } => Ok(epoch),
        Acquire::Denied => infra!("the first acquire of {key} was denied"),
    }
}

/// Savepoints (SEMANTICS section 8, "Savepoints"): a grant, renew or release made after a
/// SAVEPOINT and undone by ROLLBACK TO SAVEPOINT is undone entirely (the same transaction and,
/// after COMMIT, everyone sees the state before it) and keeps no lock (another session's
/// call of the key answers within [`PROMPT`] while the caller's transaction is still open);
/// RELEASE SAVEPOINT keeps it; a call that fails inside a savepoint (invalid input, or a
/// lock_timeout while it waits for another transaction's row lock), rolled back to the
/// savepoint, leaves the transaction usable, the state unchanged and no lock behind.
pub(super) async fn savepoints_undo_a_lease_call_and_keep_no_lock(ctx: &Ctx<'_>) -> CheckResult {
    let f = Fixture::create(ctx.cluster, ctx.extension).await?;
    let result = savepoints(&f).await;
    finish(f, result).await
}

async fn savepoints(f: &Fixture<'_>) -> CheckResult {
    let a = f.connect_as(&f.user).await?;
    let b = f.connect_as(&f.user).await?;
    let c = f.connect_as(&f.hostile).await?;

    // A grant rolled back to its savepoint.
    a.batch_execute("BEGIN; SAVEPOINT s").await?;
    granted(&a, "sp_grant", "alice", HOUR).await?;
    a.batch_execute("ROLLBACK TO SAVEPOINT s").await?;
    let seen = crate::client::inspect(&a, "sp_grant").await?;
    if seen.is_some() {
        violated!("after ROLLBACK TO SAVEPOINT of a first grant, inspect in the same transaction shows {seen:?}; expected no row");
    }
    let other = promptly(
        &b,
        crate::client::acquire(&b, "sp_grant", "bob", HOUR, Duration::ZERO),
    )
    .await?;
    if !matches!(other, Ok(Acquire::Acquired { epoch: 1, .. })) {
        violated!("after ROLLBACK TO SAVEPOINT of alice's first grant (her transaction still open), bob's wait = 0 acquire gave {other:?} within {PROMPT}; expected a grant at epoch 1: the rolled-back grant left a lock or a row");
    }
    a.batch_execute("COMMIT").await?;

    // A renew rolled back to its savepoint.
    let epoch = granted(&a, "sp_renew", "alice", HOUR).await?;
    let before = crate::client::inspect(&a, "sp_renew").await?;
    a.batch_execute("BEGIN; SAVEPOINT s").await?;
    let renewed = crate::client::renew(&a, "sp_renew", "alice", epoch, 2 * HOUR).await?;
    if renewed.status != Status::Ok {
        infra!("alice's renew of her live lease answered {renewed:?}");
    }
    a.batch_execute("ROLLBACK TO SAVEPOINT s").await?;
    let seen = crate::client::inspect(&a, "sp_renew").await?;
    if seen != before {
        violated!("after ROLLBACK TO SAVEPOINT of a renew, inspect in the same transaction shows {seen:?}; before the renew it showed {before:?}");
    }
    let other = promptly(
        &b,
        crate::client::renew(&b, "sp_renew", "alice", epoch, HOUR),
    )
    .await?;
    let Ok(crate::client::Renew {
        status: Status::Ok,
        expires_at: Some(kept),
    }) = other
    else {
        violated!("after ROLLBACK TO SAVEPOINT of a renew (the transaction still open), the same lease's renew from another session gave {other:?} within {PROMPT}; expected ok: the rolled-back renew left its row lock");
    };
    a.batch_execute("COMMIT").await?;
    let after = crate::client::inspect(&a, "sp_renew").await?;
    if !matches!(&after, Some(r) if r.held && r.epoch == epoch && r.expires_at == Some(kept)) {
        violated!("after a rolled-back renew, a renew from another session to {kept} and COMMIT, inspect shows {after:?}");
    }

    // A release rolled back to its savepoint.
    let epoch = granted(&a, "sp_release", "alice", HOUR).await?;
    let before = crate::client::inspect(&a, "sp_release").await?;
    a.batch_execute("BEGIN; SAVEPOINT s").await?;
    let released = crate::client::release(&a, "sp_release", "alice", epoch).await?;
    if released != Status::Ok {
        infra!("alice's release of her live lease answered {released:?}");
    }
    a.batch_execute("ROLLBACK TO SAVEPOINT s").await?;
    let seen = crate::client::inspect(&a, "sp_release").await?;
    if seen != before {
        violated!("after ROLLBACK TO SAVEPOINT of a release, inspect in the same transaction shows {seen:?}; before the release it showed {before:?}");
    }
    let other = promptly(&b, crate::client::release(&b, "sp_release", "alice", epoch)).await?;
    if !matches!(other, Ok(Status::Ok)) {
        violated!("after ROLLBACK TO SAVEPOINT of a release (the transaction still open), the same lease's release from another session gave {other:?} within {PROMPT}; expected ok: the rolled-back release left its row lock or its write");
    }
    a.batch_execute("COMMIT").await?;
    let after = crate::client::inspect(&a, "sp_release").await?;
    if !matches!(&after, Some(r) if !r.held && r.epoch == epoch + 1) {
        violated!("after a rolled-back release, a release from another session and COMMIT, inspect shows {after:?}; expected free at epoch {}", epoch + 1);
    }

    // RELEASE SAVEPOINT keeps the call; an outer ROLLBACK TO undoes a released inner one.
    a.batch_execute("BEGIN; SAVEPOINT s").await?;
    let epoch = granted(&a, "sp_kept", "alice", HOUR).await?;
    a.batch_execute("RELEASE SAVEPOINT s; SAVEPOINT outer_s; SAVEPOINT inner_s")
        .await?;
    let undone = crate::client::release(&a, "sp_kept", "alice", epoch).await?;
    if undone != Status::Ok {
        infra!("alice's release of her grant in the same transaction answered {undone:?}");
    }
    a.batch_execute("RELEASE SAVEPOINT inner_s; ROLLBACK TO SAVEPOINT outer_s; COMMIT")
        .await?;
    let after = crate::client::inspect(&a, "sp_kept").await?;
    if !matches!(&after, Some(r) if r.held && r.epoch == epoch && r.owner.as_deref() == Some("alice"))
    {
        violated!("a grant kept by RELEASE SAVEPOINT, then a release in a savepoint released into one rolled back, then COMMIT: inspect shows {after:?}; expected alice holding epoch {epoch}");
    }

    // A call that fails on invalid input inside a savepoint.
    a.batch_execute("BEGIN").await?;
    let epoch = granted(&a, "sp_err", "alice", HOUR).await?;
    a.batch_execute("SAVEPOINT s").await?;
    let bad = crate::client::acquire(&a, "", "alice", HOUR, Duration::ZERO).await;
    if !matches!(bad, Err(LeaseError::InvalidInput { .. })) {
        infra!("an acquire of the empty key gave {bad:?}, not 22023");
    }
    a.batch_execute("ROLLBACK TO SAVEPOINT s").await?;
    let usable = crate::client::acquire(&a, "sp_err_next", "alice", HOUR, Duration::ZERO).await;
    if !matches!(usable, Ok(Acquire::Acquired { epoch: 1, .. })) {
        violated!("after a 22023 inside a savepoint and ROLLBACK TO SAVEPOINT, the next acquire in the transaction gave {usable:?}; expected a first grant");
    }
    a.batch_execute("COMMIT").await?;
    for key in ["sp_err", "sp_err_next"] {
        let after = crate::client::inspect(&a, key).await?;
        let want = if key == "sp_err" { epoch } else { 1 };
        if !matches!(&after, Some(r) if r.held && r.epoch == want) {
            violated!("after a 22023 inside a savepoint rolled back and COMMIT, {key} shows {after:?}; expected alice holding epoch {want}");
        }
    }

    failed_wait_in_a_savepoint(&a, &b, &c).await
}

/// A call that fails while it waits for another transaction's row lock (lock_timeout,
/// 55P03) inside a savepoint: rolled back to the savepoint, the caller's transaction goes
/// on and a third session takes the key at once once the row's writer rolled back.
async fn failed_wait_in_a_savepoint(a: &Client, b: &Client, c: &Client) -> CheckResult {
    granted(a, "sp_wait", "alice", Duration::from_millis(200)).await?;
    tokio::time::sleep(Duration::from_millis(300)).await;
    b.batch_execute("BEGIN").await?;
    let carol = crate::client::acquire(b, "sp_wait", "carol", HOUR, Duration::ZERO).await?;
    if carol.epoch() != Some(2) {
        let _ = b.batch_execute("ROLLBACK").await;
        infra!("carol's acquire of the lapsed key gave {carol:?}");
    }
    a.batch_execute("BEGIN; SAVEPOINT s; SET LOCAL lock_timeout = '300ms'")
        .await?;
    let failed = crate::client::acquire(a, "sp_wait", "bob", HOUR, Duration::ZERO).await;
    let code = failed
        .as_ref()
        .err()
        .and_then(|e| e.code())
        .map(str::to_string);
    a.batch_execute("ROLLBACK TO SAVEPOINT s").await?;
    b.batch_execute("ROLLBACK").await?;
    if code.as_deref() != Some("55P03") {
        let _ = a.batch_execute("ROLLBACK").await;
        infra!("bob's acquire of the key whose row carol's open grant locks gave {failed:?}, not a lock_timeout (55P03)");
    }
    let seen = crate::client::inspect(a, "sp_wait").await?;
    if !matches!(&seen, Some(r) if !r.held && r.epoch == 1) {
        violated!("after bob's acquire failed with 55P03 inside a savepoint and was rolled back to it, inspect in his transaction shows {seen:?}; expected alice's lapsed lease at epoch 1");
    }
    let dave = promptly(
        c,
        crate::client::acquire(c, "sp_wait", "dave", HOUR, Duration::ZERO),
    )
    .await?;
    a.batch_execute("COMMIT").await?;
    if !matches!(dave, Ok(Acquire::Acquired { epoch: 2, .. })) {
        violated!("after bob's acquire failed (55P03) inside a savepoint that was rolled back (his transaction still open) and carol's grant rolled back, dave's wait = 0 acquire gave {dave:?} within {PROMPT}; expected a grant at epoch 2: the failed call left a lock behind");
    }
    Ok(())
}

/// What the caller's transaction runs after its grant: temporary tables with ON COMMIT DROP
/// and ON COMMIT DELETE ROWS, written in the transaction, and `synchronous_commit = off`.
pub const ON_COMMIT_SETUP: &str = "SET LOCAL synchronous_commit = off; \
     CREATE TEMP TABLE oc_dropped (i int) ON COMMIT DROP; INSERT INTO oc_dropped VALUES (1); \
     CREATE TEMP TABLE oc_emptied (i int) ON COMMIT DELETE ROWS; INSERT INTO oc_emptied VALUES (1)";

/// ON COMMIT actions (SEMANTICS section 8, "ON COMMIT actions"): temporary tables that
/// PostgreSQL drops or empties at COMMIT, in the transaction of a grant whose caller set
/// `synchronous_commit = off`, change neither the grant's answer (epoch 1, checked by the
/// reproduction) nor its durability: a crash right after the acknowledged COMMIT (WAL
/// writer stopped) keeps it.
pub(super) async fn on_commit_actions_do_not_change_a_lease_write(ctx: &Ctx<'_>) -> CheckResult {
    let after = super::commit_time::grant_then_crash(
        ctx.cluster.install()?,
        ctx.extension,
        ON_COMMIT_SETUP,
    )
    .await?;
    if after.grant_was_lost() {
        violated!(
            "a grant committed with temporary tables ON COMMIT DROP / DELETE ROWS and synchronous_commit = off was lost in a crash: {after:?}"
        );
    }
    Ok(())
}
