//! Transaction shapes a caller controls: prepared transactions (two-phase commit) across a
//! crash.
use super::*;

/// The gid of the prepared transactions this check makes.
const GID: &str = "pg_lease_security_prepared";

/// A lease write in a prepared transaction would keep the key's row lock and its decided
/// write across disconnects and crashes: every later call of the key waits for it (a
/// `wait = 0` acquire included), and a `COMMIT PREPARED` long after commits a renew decided
/// before, reviving a lease that lapsed meanwhile. pg_lease 0.3.0 makes `PREPARE
/// TRANSACTION` fail (0A000) for a transaction that took a key's row lock; a transaction
/// that only read may still be prepared (the positive control: the cluster allows prepared
/// transactions). On a build that lets the write be prepared, the check crashes the server
/// and shows both effects.
pub(super) async fn prepared_transactions_never_hold_a_key(ctx: &Ctx<'_>) -> CheckResult {
    let mut cluster = own_cluster(
        ctx.cluster.install()?,
        &[("max_prepared_transactions", "4")],
    )
    .await?;
    let db = cluster
        .fresh_database_with("prepared", ctx.extension)
        .await?;
    let c = cluster.connect(&db).await?;
    let second = Duration::from_secs(1);
    let granted = crate::client::acquire(&c, "p", "alice", second, Duration::ZERO).await?;
    let Some(epoch) = granted.epoch() else {
        infra!("the first grant of a new key was denied: {granted:?}");
    };
    // Positive control: a transaction that only read lease state is prepared.
    c.batch_execute("BEGIN").await?;
    crate::client::inspect(&c, "p").await?;
    if let Err(e) = c
        .batch_execute(&format!("PREPARE TRANSACTION '{GID}_read'"))
        .await
    {
        infra!(
            "a transaction that only inspected could not be prepared (the cluster must allow \
             prepared transactions): {}",
            describe_db(&e)
        );
    }
    c.batch_execute(&format!("ROLLBACK PREPARED '{GID}_read'"))
        .await?;
    // The write: a renew of the 1 s lease to an hour, then PREPARE.
    c.batch_execute("BEGIN").await?;
    let renewed = crate::client::renew(&c, "p", "alice", epoch, Duration::from_secs(3600)).await?;
    if renewed.status != crate::client::Status::Ok {
        let _ = c.batch_execute("ROLLBACK").await;
        infra!("the renew of a live lease answered {renewed:?}");
    }
    let prepared = c
        .batch_execute(&format!("PREPARE TRANSACTION '{GID}'"))
        .await;
    match prepared {
        Err(e) if e.code() == Some(&SqlState::FEATURE_NOT_SUPPORTED) => {
            refused_prepare_left_nothing(&c, epoch).await
        }
        Err(e) => violated!(
            "PREPARE TRANSACTION after a renew failed with {} instead of 0A000",
            describe_db(&e)
        ),
        Ok(()) => {
            let found = prepared_write_across_a_crash(&mut cluster, &db, epoch).await;
            let _ = cleanup_prepared(&cluster, &db).await;
            Err(Failure::Violation(found?))
        }
    }
}

/// After a refused PREPARE: the renew was rolled back (the lease still lapses after its
/// second) and nothing is prepared or locked: another owner takes the key at once.
async fn refused_prepare_left_nothing(c: &Client, epoch: i64) -> CheckResult {
    let prepared: i64 = c
        .query_one(
            "SELECT count(*) FROM pg_catalog.pg_prepared_xacts WHERE gid LIKE 'pg_lease%'",
            &[],
        )
        .await?
        .try_get(0)?;
    if prepared != 0 {
        violated!("the refused PREPARE left {prepared} prepared transaction(s)");
    }
    tokio::time::sleep(Duration::from_millis(1100)).await;
    c.batch_execute("SET lock_timeout = '2s'").await?;
    let taken =
        crate::client::acquire(c, "p", "bob", Duration::from_secs(60), Duration::ZERO).await;
    c.batch_execute("RESET lock_timeout").await?;
    match taken {
        Ok(crate::client::Acquire::Acquired { epoch: e, .. }) if e == epoch + 1 => Ok(()),
        other => violated!(
            "after the refused PREPARE of alice's renew and its lease's 1 s, bob's acquire \
             gave {other:?}; expected a takeover at epoch {}",
            epoch + 1
        ),
    }
}

/// The prepared renew across a crash: whether a `wait = 0` acquire of the lapsed key hangs
/// and whether COMMIT PREPARED revives the lease. The violation text.
async fn prepared_write_across_a_crash(
    cluster: &mut Cluster,
    db: &str,
    epoch: i64,
) -> Result<String, Failure> {
    cluster.crash_async().await?;
    cluster.resume_async().await?;
    let c = cluster.connect(db).await?;
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let lapsed = crate::client::inspect(&c, "p").await?;
    // The bound of a call that waits for nothing (a denied or granting acquire answers in
    // milliseconds); one that waits for the prepared transaction never answers.
    c.batch_execute("SET statement_timeout = '2s'").await?;
    let started = Instant::now();
    let taken =
        crate::client::acquire(&c, "p", "bob", Duration::from_secs(60), Duration::ZERO).await;
    let waited = started.elapsed();
    c.batch_execute("RESET statement_timeout").await?;
    c.batch_execute(&format!("COMMIT PREPARED '{GID}'")).await?;
    let after = crate::client::inspect(&c, "p").await?;
    let mut found = vec![format!(
        "a renew was prepared (PREPARE TRANSACTION succeeded) and the prepared transaction \
         survived a crash"
    )];
    if taken.is_err() {
        found.push(format!(
            "bob's wait = 0 acquire of the lapsed key (inspect: {lapsed:?}) did not answer \
             within {waited:?} ({taken:?}): it waited for the prepared transaction"
        ));
    }
    if matches!(&after, Some(r) if r.held && r.epoch == epoch && r.owner.as_deref() == Some("alice"))
    {
        found.push(format!(
            "COMMIT PREPARED after the lease had lapsed revived alice's lease at epoch \
             {epoch}: {after:?}"
        ));
    }
    Ok(found.join("; "))
}

/// Ends any prepared transaction of this check (a failed check must not leave one).
async fn cleanup_prepared(cluster: &Cluster, db: &str) -> Result<(), SecurityError> {
    let c = cluster.connect(db).await?;
    for gid in [GID, &format!("{GID}_read")] {
        let _ = c.batch_execute(&format!("ROLLBACK PREPARED '{gid}'")).await;
    }
    Ok(())
}
