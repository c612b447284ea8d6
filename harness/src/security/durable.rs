//! Check 10 and the documented durability limitation.
use super::*;

// ---------------------------------------------------------------------------------------
// 10. Durable commit

/// Whether a grant acknowledged in a transaction that ran `setup` after its acquire
/// survives a crash of a cluster whose WAL writer is stopped (so that only the commit
/// itself can flush it). Returns the inspect row after the crash and the epoch another
/// owner then gets.
pub(super) async fn grant_after_crash(
    cluster: &mut Cluster,
    extension: &str,
    setup: &str,
) -> Result<(Option<crate::client::Inspect>, Option<i64>), SecurityError> {
    let db = cluster.fresh_database_with("durable", extension).await?;
    let su = cluster.connect(&db).await?;
    su.batch_execute("CHECKPOINT").await?;
    let mut config = cluster.config(&db);
    config.user(DURABLE_USER);
    let (user, connection) = config.connect(tokio_postgres::NoTls).await?;
    tokio::spawn(async move {
        let _ = connection.await;
    });
    // Only the committing backend itself may flush the WAL: stop the WAL writer and the
    // background writer (children of our own postmaster) until the crash, each while it
    // sleeps in its main loop (so that it holds no lock a backend could wait for).
    let postmaster = cluster
        .postmaster_pid()
        .ok_or_else(|| SecurityError::Unexpected("the cluster is not running".into()))?;
    for (backend_type, idle) in [
        ("walwriter", &["WalWriterMain"][..]),
        (
            "background writer",
            // PostgreSQL 17 renamed them BgwriterMain and BgwriterHibernate.
            &[
                "BgWriterMain",
                "BgWriterHibernate",
                "BgwriterMain",
                "BgwriterHibernate",
            ][..],
        ),
    ] {
        stop_while_idle(&su, postmaster, backend_type, idle).await?;
    }
    let txn = async {
        user.batch_execute("BEGIN").await?;
        let granted = crate::client::acquire(
            &user,
            "durable",
            "alice",
            Duration::from_secs(3600),
            Duration::ZERO,
        )
        .await?;
        user.batch_execute(setup).await?;
        user.batch_execute("COMMIT").await?;
        Ok::<_, SecurityError>(granted)
    }
    .await;
    cluster.crash_async().await?;
    cluster.resume_async().await?;
    let granted = txn?;
    if granted.epoch() != Some(1) {
        return Err(SecurityError::Unexpected(format!(
            "the grant was {granted:?}"
        )));
    }
    let c = cluster.connect(&db).await?;
    let row = crate::client::inspect(&c, "durable").await?;
    let next = crate::client::acquire(
        &c,
        "durable",
        "bob",
        Duration::from_secs(3600),
        Duration::ZERO,
    )
    .await?;
    Ok((row, next.epoch()))
}

/// SIGSTOPs our postmaster's child of `backend_type` at a moment it waits in one of the
/// `idle` wait events (its main loop's sleep), retrying for up to 5 s.
async fn stop_while_idle(
    su: &Client,
    postmaster: u32,
    backend_type: &str,
    idle: &[&str],
) -> Result<(), SecurityError> {
    let pid: i32 = su
        .query_one(
            "SELECT pid FROM pg_stat_activity WHERE backend_type = $1",
            &[&backend_type],
        )
        .await?
        .try_get(0)?;
    if parent_of(pid) != Some(postmaster) {
        return Err(SecurityError::Unexpected(format!(
            "process {pid} ({backend_type}) is not a child of our postmaster {postmaster}"
        )));
    }
    for _ in 0..1000 {
        // SAFETY: signalling a child of our own postmaster (killed with it at the crash).
        unsafe { libc::kill(pid, libc::SIGSTOP) };
        let event: Option<String> = su
            .query_one(
                "SELECT wait_event::text FROM pg_stat_activity WHERE pid = $1",
                &[&pid],
            )
            .await?
            .try_get(0)?;
        if event.as_deref().is_some_and(|e| idle.contains(&e)) {
            return Ok(());
        }
        // SAFETY: as above.
        unsafe { libc::kill(pid, libc::SIGCONT) };
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    Err(SecurityError::Unexpected(format!(
        "the {backend_type} never waited in {idle:?} when stopped"
    )))
}

/// The login role of the durability check (its cluster is its own).
const DURABLE_USER: &str = "durable_user";

/// The parent pid of `pid` (from /proc).
fn parent_of(pid: i32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = stat.rsplit(')').next()?;
    rest.split_whitespace().nth(1)?.parse().ok()
}

/// A cluster of its own for the durability checks: the WAL writer flushes only every 10 s,
/// so a commit that did not flush its own record is lost by a crash right after it.
pub(super) async fn durability_cluster(
    install: &crate::pg::PgInstall,
) -> Result<Cluster, SecurityError> {
    let cluster = own_cluster(install, &[("wal_writer_delay", "10s")]).await?;
    cluster
        .connect("postgres")
        .await?
        .batch_execute(&format!("CREATE ROLE {DURABLE_USER} LOGIN"))
        .await?;
    Ok(cluster)
}

pub(super) async fn synchronous_commit_off_does_not_make_a_lease_write_asynchronous(
    ctx: &Ctx<'_>,
) -> CheckResult {
    let mut cluster = durability_cluster(ctx.cluster.install()?).await?;
    let (after, _) = grant_after_crash(
        &mut cluster,
        ctx.extension,
        "SET LOCAL synchronous_commit = off",
    )
    .await?;
    if !matches!(&after, Some(r) if r.held && r.epoch == 1) {
        violated!(
            "a grant committed with SET LOCAL synchronous_commit = off was lost in a crash (inspect after: {after:?})"
        );
    }
    Ok(())
}

/// What a crash right after the commit left of a grant whose caller fired the deferred
/// durability trigger early (`SET CONSTRAINTS ALL IMMEDIATE`) and then set
/// `synchronous_commit = off` again: the documented limitation of SEMANTICS section 8.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DurabilityBypass {
    /// inspect(key) after the crash; `None` when the key has no row.
    pub after_crash: Option<crate::client::Inspect>,
    /// The epoch another owner's acquire got after the crash.
    pub next_epoch: Option<i64>,
}

impl DurabilityBypass {
    /// The acknowledged grant (epoch 1) is gone.
    pub fn grant_was_lost(&self) -> bool {
        !matches!(&self.after_crash, Some(r) if r.held && r.epoch == 1)
    }
}

/// Reproduces the durability limitation on a cluster of its own (on `install`) against
/// `extension`.
pub async fn durability_bypass(
    install: &crate::pg::PgInstall,
    extension: &str,
) -> Result<DurabilityBypass, SecurityError> {
    let mut cluster = durability_cluster(install).await?;
    let (after_crash, next_epoch) = grant_after_crash(
        &mut cluster,
        extension,
        super::CommitRoute::SetConstraints.setup(),
    )
    .await?;
    Ok(DurabilityBypass {
        after_crash,
        next_epoch,
    })
}
