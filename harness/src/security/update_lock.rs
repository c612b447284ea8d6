//! Update class: no role can make `ALTER EXTENSION .. UPDATE` freeze every lease call.
//!
//! Any role may call the API, and a call inside a transaction keeps its lock on the lease
//! table until that transaction ends (PostgreSQL keeps relation locks to the end of the
//! transaction; SEMANTICS section 8). An update that needs a stronger lock on the table
//! queues behind that transaction, and every later lease call queues behind the update: all
//! calls wait as long as the ordinary role keeps its transaction open. The update may fail
//! fast (and run again later) or wait without making calls wait; it must not freeze them.
use super::*;
use crate::extension::Release;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

/// How long a lease call may take while the update runs. The 0.3.0 update scripts wait at
/// most 100 ms for the lease table's lock (and a call behind them as long); a call alone
/// takes a few milliseconds here. 1 s leaves a margin of 10x over the guard for a loaded
/// machine (2 shared cores), and is a third of [`HOLD`], which a frozen call waits out.
pub const BOUND: Duration = Duration::from_secs(1);

/// How long the ordinary role keeps its transaction open after the update started.
pub const HOLD: Duration = Duration::from_secs(3);

/// How long the harness waits for one probe call or the update before it gives up.
const GIVE_UP: Duration = Duration::from_secs(20);

/// For each older release the build has an update path from: the owner installs that
/// release (the build's update scripts plus the released install scripts, as an extension
/// of its own), the hostile role opens a transaction and takes a grant in it and keeps it
/// open for [`HOLD`], the owner runs `ALTER EXTENSION .. UPDATE`, and meanwhile the
/// ordinary role's lease calls (acquires of new keys and inspects) must each finish within
/// [`BOUND`]. The update may fail while the transaction is open, only with 55P03
/// (lock_not_available), changing nothing; after the transaction ended it must succeed.
pub(super) async fn an_open_transaction_cannot_freeze_lease_calls_behind_an_extension_update(
    ctx: &Ctx<'_>,
) -> CheckResult {
    let install = ctx.cluster.install()?;
    let files = install.installed_extension(ctx.extension)?;
    let Some(target) = files.default_version() else {
        infra!(
            "the control file of {} has no default_version",
            ctx.extension
        );
    };
    let name = format!("{}_upd", ctx.extension);
    for release in Release::ALL {
        if release.version() == target {
            continue;
        }
        let updatable = files.updatable_from(release, &name);
        install.install_extension(&updatable)?;
        let f = Fixture::bare(ctx.cluster, &name).await?;
        let result = update_while_held(&f, release.version(), &target).await;
        finish(f, result).await?;
    }
    Ok(())
}

/// One lease call of the probe and how long it took.
struct Probe {
    what: String,
    took: Duration,
    error: Option<String>,
}

async fn update_while_held(f: &Fixture<'_>, from: &str, target: &str) -> CheckResult {
    let ext = quote_ident(&f.extension);
    let owner = f.connect_as(&f.owner).await?;
    owner
        .batch_execute(&format!("CREATE EXTENSION {ext} VERSION '{from}'"))
        .await?;
    let su = f.superuser().await?;
    let path: Option<String> = su
        .query_opt(
            "SELECT path FROM pg_catalog.pg_extension_update_paths($1::text::name) \
              WHERE source = $2 AND target = $3",
            &[&f.extension, &from, &target],
        )
        .await?
        .map(|r| r.try_get(0))
        .transpose()?
        .flatten();
    if path.is_none() {
        // The build cannot be updated from this release: nothing to freeze.
        return Ok(());
    }
    let hostile = f.connect_as(&f.hostile).await?;
    hostile.batch_execute("BEGIN").await?;
    crate::client::acquire(
        &hostile,
        "hostile",
        "mallory",
        Duration::from_secs(60),
        Duration::ZERO,
    )
    .await?;

    let stop = Arc::new(AtomicBool::new(false));
    let user = f.connect_as(&f.user).await?;
    let probes = tokio::spawn(probe(user, stop.clone()));
    tokio::time::sleep(Duration::from_millis(200)).await;
    let update_sql = format!("ALTER EXTENSION {ext} UPDATE");
    let updater = {
        let sql = update_sql.clone();
        tokio::spawn(async move {
            let r = tokio::time::timeout(GIVE_UP, update(&owner, &sql)).await;
            (owner, r)
        })
    };
    tokio::time::sleep(HOLD).await;
    let ended = hostile.batch_execute("COMMIT").await;
    let joined = updater.await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    stop.store(true, Ordering::Relaxed);
    let probes = probes
        .await
        .map_err(|e| Failure::Infrastructure(format!("the probe task failed: {e}")))?;
    ended?;
    let (owner, updated) =
        joined.map_err(|e| Failure::Infrastructure(format!("the update task failed: {e}")))?;
    let what = format!(
        "while the hostile role kept a transaction that had taken a grant open for {HOLD:?}, \
         `{update_sql}` (from {from} to {target})"
    );
    let updated = match updated {
        Err(_) => violated!(
            "update class: {what} had not finished {GIVE_UP:?} after the transaction ended"
        ),
        Ok(r) => r,
    };
    // A call that queued behind the update for the table the update then moved or dropped
    // fails (42P01, nothing changed): a definite failure, not a finding of this check;
    // how long it waited is.
    let failed: Vec<&Probe> = probes.iter().filter(|p| p.error.is_some()).collect();
    if probes.len() - failed.len() < 3 {
        infra!(
            "only {} of {} probe calls answered (first failure: {:?})",
            probes.len() - failed.len(),
            probes.len(),
            failed.first().and_then(|p| p.error.as_deref())
        );
    }
    let slow: Vec<&Probe> = probes.iter().filter(|p| p.took > BOUND).collect();
    if let Some(worst) = slow.iter().max_by_key(|p| p.took) {
        violated!(
            "update class: {what} made lease calls wait behind it: {} of {} calls of the \
             ordinary role took over {BOUND:?} (the slowest, {}, {:.2} s{})",
            slow.len(),
            probes.len(),
            worst.what,
            worst.took.as_secs_f64(),
            match &worst.error {
                Some(e) => format!(", then failed: {e}"),
                None => String::new(),
            }
        );
    }
    match updated {
        Ok(after) => restored(&update_sql, &after)?,
        Err(e) if e.code() == Some(&SqlState::LOCK_NOT_AVAILABLE) => {
            let left = crate::extension::installed_version(&su, &f.extension).await?;
            if left.as_deref() != Some(from) {
                violated!(
                    "update class: {what} failed ({}) but left version {left:?}",
                    describe_db(&e)
                );
            }
            // Once the transaction ended, the update runs.
            match update(&owner, &update_sql).await {
                Ok(after) => restored(&update_sql, &after)?,
                Err(e) => violated!(
                    "update class: `{update_sql}` failed after the hostile transaction ended: {}",
                    describe_db(&e)
                ),
            }
        }
        Err(e) => violated!(
            "update class: {what} failed with another error than 55P03: {}",
            describe_db(&e)
        ),
    }
    let now = crate::extension::installed_version(&su, &f.extension).await?;
    if now.as_deref() != Some(target) {
        infra!("after the update the installed version is {now:?}, not {target}");
    }
    Ok(())
}

/// The caller's `lock_timeout` inside the update's transaction (the guard lowers it while it
/// waits for the lock).
const CALLERS_LOCK_TIMEOUT: &str = "7s";

/// Runs `sql` (the update) in a transaction that first sets `lock_timeout` to
/// [`CALLERS_LOCK_TIMEOUT`]; commits it and returns the `lock_timeout` seen after the update
/// (the update must leave the caller's setting as it was), or rolls back on failure.
async fn update(owner: &Client, sql: &str) -> Result<String, tokio_postgres::Error> {
    owner
        .batch_execute(&format!(
            "BEGIN; SET LOCAL lock_timeout = '{CALLERS_LOCK_TIMEOUT}'"
        ))
        .await?;
    let after = async {
        owner.batch_execute(sql).await?;
        owner
            .query_one("SHOW lock_timeout", &[])
            .await?
            .try_get::<_, String>(0)
    }
    .await;
    match after {
        Ok(v) => {
            owner.batch_execute("COMMIT").await?;
            Ok(v)
        }
        Err(e) => {
            let _ = owner.batch_execute("ROLLBACK").await;
            Err(e)
        }
    }
}

/// The update left the caller's `lock_timeout` as it found it.
fn restored(sql: &str, after: &str) -> CheckResult {
    if after != CALLERS_LOCK_TIMEOUT {
        violated!(
            "update class: `{sql}` run after `SET LOCAL lock_timeout = '{CALLERS_LOCK_TIMEOUT}'` \
             left lock_timeout = {after:?} in the caller's transaction"
        );
    }
    Ok(())
}

/// The ordinary role's calls, one after another until `stop`: an acquire of a new key, then
/// an inspect of it.
async fn probe(user: Client, stop: Arc<AtomicBool>) -> Vec<Probe> {
    let mut out = Vec::new();
    let minute = Duration::from_secs(60);
    let mut i = 0u32;
    while !stop.load(Ordering::Relaxed) {
        i += 1;
        let key = format!("probe-{i}");
        let start = Instant::now();
        let r = tokio::time::timeout(
            GIVE_UP,
            crate::client::acquire(&user, &key, "u", minute, Duration::ZERO),
        )
        .await;
        out.push(Probe {
            what: format!("lease.acquire('{key}', 'u', '1 min')"),
            took: start.elapsed(),
            error: match r {
                Ok(Ok(_)) => None,
                Ok(Err(e)) => Some(e.to_string()),
                Err(_) => None, // over GIVE_UP: judged by its time
            },
        });
        let start = Instant::now();
        let r = tokio::time::timeout(GIVE_UP, crate::client::inspect(&user, &key)).await;
        out.push(Probe {
            what: format!("lease.inspect('{key}')"),
            took: start.elapsed(),
            error: match r {
                Ok(Ok(_)) => None,
                Ok(Err(e)) => Some(e.to_string()),
                Err(_) => None,
            },
        });
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    out
}
