//! The conformance suite: every documented pg_lease behaviour, checked against
//! a real server. Used by `cargo test` (per major) and by `leasecheck run`.
//!
//! Each check gets its own database on a shared cluster; checks that restart
//! or crash the server start a cluster of their own from the same install.

use crate::client::{self, Acquire, Calls, LeaseError, Status};
use crate::pg::{Cluster, ClusterOptions, PgInstall};
use crate::session::SessionSettings;
use chrono::{DateTime, Utc};
use std::future::Future;
use std::pin::Pin;
use std::time::{Duration, Instant};
use tokio_postgres::Client;

/// Why a check failed.
pub type Failure = String;
type CheckResult = Result<(), Failure>;
type CheckFuture<'a> = Pin<Box<dyn Future<Output = CheckResult> + Send + 'a>>;

/// One named behaviour check.
#[derive(Clone, Copy)]
pub struct Check {
    pub name: &'static str,
    run: for<'a> fn(&'a Ctx<'a>) -> CheckFuture<'a>,
}

impl std::fmt::Debug for Check {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name)
    }
}

/// What a check can use.
pub struct Ctx<'a> {
    pub install: &'a PgInstall,
    pub cluster: &'a Cluster,
    /// The extension under test: pg_lease or a mutant of it.
    pub extension: &'a str,
    pub check: &'static str,
    /// The session settings every connection the check opens runs under (their setup
    /// runs in every database the check creates).
    pub session: &'a SessionSettings,
    /// The calls, keys and owners through the session's collation if it names one.
    pub calls: Calls,
}

impl Ctx<'_> {
    /// A fresh database with pg_lease (and the session setup), and a connection to it.
    async fn db(&self) -> Result<(String, Client), Failure> {
        let name = self.fresh_database_on(self.cluster, self.check).await?;
        let client = self.connect(&name).await?;
        Ok((name, client))
    }

    /// A fresh database with pg_lease on `cluster`, with the session setup run in it.
    async fn fresh_database_on(&self, cluster: &Cluster, prefix: &str) -> Result<String, Failure> {
        let name = cluster
            .fresh_database_with(prefix, self.extension)
            .await
            .map_err(|e| e.to_string())?;
        self.setup_on(cluster, &name).await?;
        Ok(name)
    }

    /// Runs the session setup in `db` of `cluster` (as the superuser, without the settings).
    async fn setup_on(&self, cluster: &Cluster, db: &str) -> Result<(), Failure> {
        if self.session.setup.is_empty() {
            return Ok(());
        }
        let admin = cluster.connect(db).await.map_err(|e| e.to_string())?;
        self.session
            .run_setup(&admin)
            .await
            .map_err(|e| format!("the session setup: {}", pg(e)))
    }

    /// A connection to `db` of the shared cluster, under the session settings.
    async fn connect(&self, db: &str) -> Result<Client, Failure> {
        self.connect_on(self.cluster, db).await
    }

    /// A connection to `db` of `cluster`, under the session settings.
    async fn connect_on(&self, cluster: &Cluster, db: &str) -> Result<Client, Failure> {
        self.session
            .connect(&cluster.config(db))
            .await
            .map_err(|e| format!("connecting under the session settings: {}", pg(e)))
    }

    /// `lease.acquire` with no wait, which must grant: the epoch and expiry.
    async fn acquired(
        &self,
        c: &impl tokio_postgres::GenericClient,
        key: &str,
        owner: &str,
        ttl: Duration,
    ) -> Result<(i64, DateTime<Utc>), Failure> {
        acquired(&self.calls, c, key, owner, ttl).await
    }
}

/// The outcome of one check.
#[derive(Debug, Clone)]
pub struct CheckOutcome {
    pub name: &'static str,
    pub result: CheckResult,
    pub elapsed: Duration,
}

/// The outcome of a suite run.
#[derive(Debug, Clone)]
pub struct Report {
    pub version: String,
    pub outcomes: Vec<CheckOutcome>,
}

impl Report {
    pub fn failures(&self) -> impl Iterator<Item = &CheckOutcome> {
        self.outcomes.iter().filter(|o| o.result.is_err())
    }

    pub fn passed(&self) -> bool {
        self.failures().next().is_none()
    }

    /// A line per check, then a summary line.
    pub fn render(&self) -> String {
        let mut out = String::new();
        for o in &self.outcomes {
            let mark = if o.result.is_ok() { "ok  " } else { "FAIL" };
            out.push_str(&format!(
                "{mark} {:<62} {:>7.2}s\n",
                o.name,
                o.elapsed.as_secs_f64()
            ));
            if let Err(why) = &o.result {
                for line in why.lines() {
                    out.push_str(&format!("       {line}\n"));
                }
            }
        }
        let failed = self.failures().count();
        out.push_str(&format!(
            "PostgreSQL {}: {} checks, {} passed, {} failed\n",
            self.version,
            self.outcomes.len(),
            self.outcomes.len() - failed,
            failed
        ));
        out
    }
}

/// Runs the checks whose name contains `filter` (all when None), one after
/// another, against pg_lease (already installed on `cluster`'s install).
pub async fn run(install: &PgInstall, cluster: &Cluster, filter: Option<&str>) -> Report {
    run_against(install, cluster, crate::extension::NAME, |name| {
        filter.is_none_or(|f| name.contains(f))
    })
    .await
}

/// Runs the selected checks against the named extension (pg_lease or a mutant).
pub async fn run_against(
    install: &PgInstall,
    cluster: &Cluster,
    extension: &str,
    select: impl Fn(&str) -> bool,
) -> Report {
    run_with(
        install,
        cluster,
        extension,
        &SessionSettings::none(),
        select,
    )
    .await
}

/// Runs the selected checks against the named extension with every connection they open
/// under `session` (specs/SEMANTICS.md section 10): its settings on connect, keys and
/// owners of the typed calls through its collation, its setup in every database.
pub async fn run_with(
    install: &PgInstall,
    cluster: &Cluster,
    extension: &str,
    session: &SessionSettings,
    select: impl Fn(&str) -> bool,
) -> Report {
    let mut outcomes = Vec::new();
    let calls = Calls::new(session.collation.as_ref());
    for check in checks() {
        if !select(check.name) {
            continue;
        }
        let ctx = Ctx {
            install,
            cluster,
            extension,
            check: check.name,
            session,
            calls: calls.clone(),
        };
        let start = Instant::now();
        let result = (check.run)(&ctx).await;
        outcomes.push(CheckOutcome {
            name: check.name,
            result,
            elapsed: start.elapsed(),
        });
    }
    Report {
        version: install.version.full.clone(),
        outcomes,
    }
}

macro_rules! ensure {
    ($cond:expr, $($fmt:tt)+) => {
        if !$cond {
            return Err(format!($($fmt)+));
        }
    };
}

macro_rules! check {
    ($name:ident) => {
        Check {
            name: stringify!($name),
            run: |ctx| Box::pin($name(ctx)),
        }
    };
}

/// Every check, in the order of the README.
pub fn checks() -> Vec<Check> {
    vec![
        check!(acquire_grants_epoch_1_expiring_at_server_time_plus_ttl),
        check!(denied_acquire_returns_nulls_and_writes_nothing),
        check!(same_owner_acquire_is_idempotent_and_writes_nothing),
        check!(renew_extends_expiry_and_keeps_the_epoch),
        check!(release_frees_and_advances_the_epoch),
        check!(renew_and_release_statuses_follow_precedence),
        check!(inspect_tells_never_leased_free_held_and_lapsed_apart),
        check!(lapsed_lease_is_taken_over_at_once_with_a_greater_epoch),
        check!(blocking_acquire_is_woken_by_release),
        check!(blocking_acquire_takes_over_at_expiry),
        check!(wait_exhaustion_is_57014_and_distinct_from_a_cancel),
        check!(invalid_input_is_22023_naming_every_violation_and_changes_nothing),
        check!(aborted_transactions_change_nothing),
        check!(distinct_keys_never_interact),
        check!(exactly_one_of_concurrent_acquirers_wins),
        check!(blocking_waiters_never_stall_the_holders_renew),
        check!(a_waiter_that_lost_a_race_never_stalls_the_holders_renew),
        check!(committed_state_survives_restart_and_crash),
        check!(downtime_never_extends_ownership),
        check!(functions_are_security_definer_volatile_with_pinned_search_path),
        check!(table_is_private_and_functions_are_public),
        check!(trusted_install_by_a_non_superuser_and_drop_destroys_state),
    ]
}

fn e(err: LeaseError) -> Failure {
    err.to_string()
}

fn pg(err: tokio_postgres::Error) -> Failure {
    match err.as_db_error() {
        Some(db) => format!("{}: {}", db.code().code(), db.message()),
        None => err.to_string(),
    }
}

const S: fn(u64) -> Duration = Duration::from_secs;
const MS: fn(u64) -> Duration = Duration::from_millis;

fn chrono_of(d: Duration) -> chrono::Duration {
    chrono::Duration::from_std(d).unwrap_or(chrono::Duration::MAX)
}

async fn acquired(
    calls: &Calls,
    c: &impl tokio_postgres::GenericClient,
    key: &str,
    owner: &str,
    ttl: Duration,
) -> Result<(i64, DateTime<Utc>), Failure> {
    match calls
        .acquire(c, key, owner, ttl, Duration::ZERO)
        .await
        .map_err(e)?
    {
        Acquire::Acquired { epoch, expires_at } => Ok((epoch, expires_at)),
        Acquire::Denied => Err(format!(
            "acquire({key}, {owner}) was denied, expected a grant"
        )),
    }
}

async fn xid_assigned(c: &impl tokio_postgres::GenericClient) -> Result<bool, Failure> {
    let row = c
        .query_one(
            "SELECT pg_catalog.pg_current_xact_id_if_assigned() IS NOT NULL",
            &[],
        )
        .await
        .map_err(pg)?;
    Ok(row.get(0))
}

async fn acquire_grants_epoch_1_expiring_at_server_time_plus_ttl(ctx: &Ctx<'_>) -> CheckResult {
    let (_, c) = ctx.db().await?;
    let before = client::server_now(&c).await.map_err(e)?;
    let (epoch, expires_at) = ctx.acquired(&c, "job-42", "worker-a1", S(30)).await?;
    let after = client::server_now(&c).await.map_err(e)?;
    ensure!(epoch == 1, "first grant has epoch {epoch}, expected 1");
    let ttl = chrono_of(S(30));
    ensure!(
        before + ttl <= expires_at && expires_at <= after + ttl,
        "expires_at {expires_at} is not server time + 30s (server time was in [{before}, {after}])"
    );
    let row = ctx.calls.inspect(&c, "job-42").await.map_err(e)?;
    ensure!(
        row.as_ref()
            .is_some_and(|r| r.held && r.owner.as_deref() == Some("worker-a1") && r.epoch == 1),
        "inspect after grant: {row:?}"
    );
    Ok(())
}

async fn denied_acquire_returns_nulls_and_writes_nothing(ctx: &Ctx<'_>) -> CheckResult {
    let (_, mut c) = ctx.db().await?;
    ctx.acquired(&c, "k", "a", S(60)).await?;
    let tx = c.transaction().await.map_err(pg)?;
    let got = ctx
        .calls
        .acquire(&tx, "k", "b", S(60), Duration::ZERO)
        .await
        .map_err(e)?;
    ensure!(
        got == Acquire::Denied,
        "acquire by another owner: {got:?}, expected denied"
    );
    ensure!(
        !xid_assigned(&tx).await?,
        "a denied acquire assigned a transaction id (it wrote)"
    );
    tx.rollback().await.map_err(pg)?;
    // The raw row: acquired = false with NULL epoch and expiry.
    let row = c
        .query_one("SELECT acquired, epoch IS NULL, expires_at IS NULL FROM lease.acquire('k', 'b', '1 min')", &[])
        .await
        .map_err(pg)?;
    ensure!(
        (
            row.get::<_, bool>(0),
            row.get::<_, bool>(1),
            row.get::<_, bool>(2)
        ) == (false, true, true),
        "denied row is not (false, NULL, NULL)"
    );
    Ok(())
}

async fn same_owner_acquire_is_idempotent_and_writes_nothing(ctx: &Ctx<'_>) -> CheckResult {
    let (_, mut c) = ctx.db().await?;
    let (epoch, expires_at) = ctx.acquired(&c, "job-42", "worker-a1", S(30)).await?;
    let tx = c.transaction().await.map_err(pg)?;
    let again = ctx
        .calls
        .acquire(&tx, "job-42", "worker-a1", S(300), S(5))
        .await
        .map_err(e)?;
    ensure!(
        again == Acquire::Acquired { epoch, expires_at },
        "re-acquire by the holder returned {again:?}, expected the same epoch {epoch} and expiry {expires_at}"
    );
    ensure!(
        !xid_assigned(&tx).await?,
        "an idempotent acquire assigned a transaction id (it wrote)"
    );
    tx.commit().await.map_err(pg)?;
    Ok(())
}

async fn renew_extends_expiry_and_keeps_the_epoch(ctx: &Ctx<'_>) -> CheckResult {
    let (_, c) = ctx.db().await?;
    let (epoch, first) = ctx.acquired(&c, "job-42", "worker-a1", S(1)).await?;
    let before = client::server_now(&c).await.map_err(e)?;
    let renewed = ctx
        .calls
        .renew(&c, "job-42", "worker-a1", epoch, S(60))
        .await
        .map_err(e)?;
    let after = client::server_now(&c).await.map_err(e)?;
    ensure!(renewed.status == Status::Ok, "renew: {renewed:?}");
    let new = renewed.expires_at.ok_or("renew ok without expires_at")?;
    ensure!(new > first, "renew did not extend: {new} <= {first}");
    let ttl = chrono_of(S(60));
    ensure!(
        before + ttl <= new && new <= after + ttl,
        "renewed expiry {new} is not server time + 60s"
    );
    let row = ctx
        .calls
        .inspect(&c, "job-42")
        .await
        .map_err(e)?
        .ok_or("inspect: no row")?;
    ensure!(
        row.epoch == epoch && row.expires_at == Some(new),
        "after renew inspect shows {row:?}"
    );
    Ok(())
}

async fn release_frees_and_advances_the_epoch(ctx: &Ctx<'_>) -> CheckResult {
    let (_, c) = ctx.db().await?;
    let (epoch, _) = ctx.acquired(&c, "job-42", "worker-a1", S(30)).await?;
    let st = ctx
        .calls
        .release(&c, "job-42", "worker-a1", epoch)
        .await
        .map_err(e)?;
    ensure!(st == Status::Ok, "release: {st:?}");
    let row = ctx
        .calls
        .inspect(&c, "job-42")
        .await
        .map_err(e)?
        .ok_or("inspect after release: no row")?;
    ensure!(
        !row.held && row.owner.is_none() && row.expires_at.is_none() && row.epoch == epoch + 1,
        "after release inspect shows {row:?}, expected free with epoch {}",
        epoch + 1
    );
    let (next, _) = ctx.acquired(&c, "job-42", "worker-b2", S(30)).await?;
    ensure!(
        next > row.epoch,
        "the next grant's epoch {next} does not exceed the watermark {}",
        row.epoch
    );
    Ok(())
}

async fn renew_and_release_statuses_follow_precedence(ctx: &Ctx<'_>) -> CheckResult {
    let (_, c) = ctx.db().await?;
    let ttl = S(60);
    let mut cases: Vec<(&str, Status, Status)> = Vec::new();
    // Unknown key.
    let r = ctx
        .calls
        .renew(&c, "unknown", "a", 1, ttl)
        .await
        .map_err(e)?
        .status;
    let l = ctx.calls.release(&c, "unknown", "a", 1).await.map_err(e)?;
    cases.push(("unknown key", r, l));
    // Free key (released).
    let (ep, _) = ctx.acquired(&c, "free", "a", ttl).await?;
    ctx.calls.release(&c, "free", "a", ep).await.map_err(e)?;
    let r = ctx
        .calls
        .renew(&c, "free", "a", ep, ttl)
        .await
        .map_err(e)?
        .status;
    let l = ctx.calls.release(&c, "free", "a", ep).await.map_err(e)?;
    cases.push(("free key", r, l));
    // Live lease of another owner (even with the right epoch).
    let (ep, _) = ctx.acquired(&c, "other", "b", ttl).await?;
    let r = ctx
        .calls
        .renew(&c, "other", "a", ep, ttl)
        .await
        .map_err(e)?
        .status;
    let l = ctx.calls.release(&c, "other", "a", ep).await.map_err(e)?;
    cases.push(("another owner's live lease", r, l));
    // Lapsed lease of another owner: not_owner beats lapsed.
    let (ep, _) = ctx.acquired(&c, "other-lapsed", "b", ttl).await?;
    client::expire(&c, "other-lapsed").await.map_err(e)?;
    let r = ctx
        .calls
        .renew(&c, "other-lapsed", "a", ep, ttl)
        .await
        .map_err(e)?
        .status;
    let l = ctx
        .calls
        .release(&c, "other-lapsed", "a", ep)
        .await
        .map_err(e)?;
    cases.push(("another owner's lapsed lease", r, l));
    // Own lapsed lease with a wrong epoch: lapsed beats epoch_mismatch.
    let (ep, _) = ctx.acquired(&c, "own-lapsed", "a", ttl).await?;
    client::expire(&c, "own-lapsed").await.map_err(e)?;
    let r = ctx
        .calls
        .renew(&c, "own-lapsed", "a", ep + 7, ttl)
        .await
        .map_err(e)?
        .status;
    let l = ctx
        .calls
        .release(&c, "own-lapsed", "a", ep + 7)
        .await
        .map_err(e)?;
    cases.push(("own lapsed lease, wrong epoch", r, l));
    let r = ctx
        .calls
        .renew(&c, "own-lapsed", "a", ep, ttl)
        .await
        .map_err(e)?
        .status;
    let l = ctx
        .calls
        .release(&c, "own-lapsed", "a", ep)
        .await
        .map_err(e)?;
    cases.push(("own lapsed lease, right epoch", r, l));
    // Own live lease with a stale epoch.
    let (ep, _) = ctx.acquired(&c, "own-live", "a", ttl).await?;
    let r = ctx
        .calls
        .renew(&c, "own-live", "a", ep - 1, ttl)
        .await
        .map_err(e)?
        .status;
    let l = ctx
        .calls
        .release(&c, "own-live", "a", ep + 1)
        .await
        .map_err(e)?;
    cases.push(("own live lease, wrong epoch", r, l));

    let expected = [
        ("unknown key", Status::NotOwner),
        ("free key", Status::NotOwner),
        ("another owner's live lease", Status::NotOwner),
        ("another owner's lapsed lease", Status::NotOwner),
        ("own lapsed lease, wrong epoch", Status::Lapsed),
        ("own lapsed lease, right epoch", Status::Lapsed),
        ("own live lease, wrong epoch", Status::EpochMismatch),
    ];
    for ((what, renew, release), (want_what, want)) in cases.iter().zip(expected) {
        ensure!(*what == want_what, "case order");
        ensure!(
            *renew == want && *release == want,
            "{what}: renew {renew:?}, release {release:?}; expected {want:?}"
        );
    }
    // None of those failures changed anything.
    let row = ctx
        .calls
        .inspect(&c, "own-live")
        .await
        .map_err(e)?
        .ok_or("no row")?;
    ensure!(
        row.held && row.epoch == ep,
        "failed calls changed own-live: {row:?}"
    );
    let row = ctx
        .calls
        .inspect(&c, "own-lapsed")
        .await
        .map_err(e)?
        .ok_or("no row")?;
    ensure!(
        !row.held && row.epoch == 1,
        "failed calls changed own-lapsed: {row:?}"
    );
    Ok(())
}

async fn inspect_tells_never_leased_free_held_and_lapsed_apart(ctx: &Ctx<'_>) -> CheckResult {
    let (_, c) = ctx.db().await?;
    let never = ctx.calls.inspect(&c, "never").await.map_err(e)?;
    ensure!(
        never.is_none(),
        "never-leased key: {never:?}, expected zero rows"
    );
    let (ep, exp) = ctx.acquired(&c, "k", "a", MS(300)).await?;
    let held = ctx.calls.inspect(&c, "k").await.map_err(e)?;
    ensure!(
        held == Some(client::Inspect {
            held: true,
            owner: Some("a".into()),
            epoch: ep,
            expires_at: Some(exp)
        }),
        "held key: {held:?}"
    );
    tokio::time::sleep(MS(400)).await;
    let lapsed = ctx.calls.inspect(&c, "k").await.map_err(e)?;
    ensure!(
        lapsed
            == Some(client::Inspect {
                held: false,
                owner: None,
                epoch: ep,
                expires_at: None
            }),
        "lapsed key: {lapsed:?}, expected unowned with the watermark {ep}"
    );
    let (ep2, _) = ctx.acquired(&c, "k", "b", S(60)).await?;
    ctx.calls.release(&c, "k", "b", ep2).await.map_err(e)?;
    let free = ctx.calls.inspect(&c, "k").await.map_err(e)?;
    ensure!(
        free == Some(client::Inspect {
            held: false,
            owner: None,
            epoch: ep2 + 1,
            expires_at: None
        }),
        "released key: {free:?}"
    );
    Ok(())
}

async fn lapsed_lease_is_taken_over_at_once_with_a_greater_epoch(ctx: &Ctx<'_>) -> CheckResult {
    let (_, c) = ctx.db().await?;
    let (e1, _) = ctx.acquired(&c, "job-42", "worker-a1", MS(300)).await?;
    tokio::time::sleep(MS(400)).await;
    let r = ctx
        .calls
        .renew(&c, "job-42", "worker-a1", e1, S(30))
        .await
        .map_err(e)?;
    ensure!(r.status == Status::Lapsed, "renew of a lapsed lease: {r:?}");
    let (e2, _) = ctx.acquired(&c, "job-42", "worker-b2", S(30)).await?;
    ensure!(e2 > e1, "takeover epoch {e2} is not greater than {e1}");
    let r = ctx
        .calls
        .renew(&c, "job-42", "worker-a1", e1, S(30))
        .await
        .map_err(e)?;
    ensure!(
        r.status == Status::NotOwner,
        "old holder's renew after takeover: {r:?}"
    );
    let l = ctx
        .calls
        .release(&c, "job-42", "worker-a1", e1)
        .await
        .map_err(e)?;
    ensure!(
        l == Status::NotOwner,
        "old holder's release after takeover: {l:?}"
    );
    // The same owner re-acquiring its own lapsed lease also gets a new epoch.
    client::expire(&c, "job-42").await.map_err(e)?;
    let (e3, _) = ctx.acquired(&c, "job-42", "worker-b2", S(30)).await?;
    ensure!(
        e3 > e2,
        "re-acquire of an own lapsed lease kept epoch {e3} (was {e2})"
    );
    let r = ctx
        .calls
        .renew(&c, "job-42", "worker-b2", e2, S(30))
        .await
        .map_err(e)?;
    ensure!(
        r.status == Status::EpochMismatch,
        "renew with the pre-lapse epoch: {r:?}"
    );
    Ok(())
}

async fn blocking_acquire_is_woken_by_release(ctx: &Ctx<'_>) -> CheckResult {
    let (db, c) = ctx.db().await?;
    let (e1, _) = ctx.acquired(&c, "k", "a", S(60)).await?;
    let waiter = ctx.connect(&db).await?;
    let calls = ctx.calls.clone();
    let task = tokio::spawn(async move {
        let start = Instant::now();
        let r = calls.acquire(&waiter, "k", "b", S(60), S(10)).await;
        (r, start.elapsed())
    });
    tokio::time::sleep(MS(300)).await;
    let released_at = Instant::now();
    let st = ctx.calls.release(&c, "k", "a", e1).await.map_err(e)?;
    ensure!(st == Status::Ok, "release: {st:?}");
    let (r, waited) = task.await.map_err(|e| e.to_string())?;
    let woke_after = released_at.elapsed();
    let got = r.map_err(e)?;
    ensure!(
        got.epoch() == Some(e1 + 2),
        "woken acquire: {got:?}, expected epoch {}",
        e1 + 2
    );
    ensure!(
        waited >= MS(250),
        "the waiter returned after {waited:?}, before the release"
    );
    ensure!(
        woke_after < S(2),
        "the waiter took {woke_after:?} to notice the release"
    );
    Ok(())
}

async fn blocking_acquire_takes_over_at_expiry(ctx: &Ctx<'_>) -> CheckResult {
    let (_, c) = ctx.db().await?;
    let (e1, exp) = ctx.acquired(&c, "k", "a", MS(500)).await?;
    let got = ctx
        .calls
        .acquire(&c, "k", "b", S(60), S(5))
        .await
        .map_err(e)?;
    let now = client::server_now(&c).await.map_err(e)?;
    let Acquire::Acquired { epoch, expires_at } = got else {
        return Err(format!("blocking acquire over a lapsing lease: {got:?}"));
    };
    ensure!(
        epoch == e1 + 1,
        "takeover epoch {epoch}, expected {}",
        e1 + 1
    );
    let granted_at = expires_at - chrono_of(S(60));
    ensure!(
        granted_at >= exp,
        "granted at {granted_at}, before the old expiry {exp}"
    );
    ensure!(
        now - exp < chrono_of(S(2)),
        "takeover came {} after the old expiry",
        now - exp
    );
    Ok(())
}

async fn wait_exhaustion_is_57014_and_distinct_from_a_cancel(ctx: &Ctx<'_>) -> CheckResult {
    let (_, c) = ctx.db().await?;
    let (e1, _) = ctx.acquired(&c, "k", "a", S(60)).await?;
    let start = Instant::now();
    let r = ctx.calls.acquire(&c, "k", "b", S(60), MS(300)).await;
    let waited = start.elapsed();
    match r {
        Err(LeaseError::WaitExhausted { .. }) => {}
        other => {
            return Err(format!(
                "exhausted wait: {other:?}, expected 57014 wait exhausted"
            ))
        }
    }
    ensure!(
        waited >= MS(300),
        "the wait ended after {waited:?}, before its bound of 300ms"
    );
    c.batch_execute("SET statement_timeout = '200ms'")
        .await
        .map_err(pg)?;
    let r = ctx.calls.acquire(&c, "k", "b", S(60), S(10)).await;
    c.batch_execute("RESET statement_timeout")
        .await
        .map_err(pg)?;
    match &r {
        Err(LeaseError::Canceled { message })
            if !message.starts_with(model::fate::WAIT_EXHAUSTED_PREFIX) => {}
        other => {
            return Err(format!(
                "statement_timeout during a wait: {other:?}, expected a plain cancel"
            ))
        }
    }
    ensure!(
        r.as_ref().err().and_then(|e| e.code()) == Some("57014"),
        "cancel code"
    );
    let row = ctx
        .calls
        .inspect(&c, "k")
        .await
        .map_err(e)?
        .ok_or("no row")?;
    ensure!(
        row.held && row.owner.as_deref() == Some("a") && row.epoch == e1,
        "a failed wait changed the lease: {row:?}"
    );
    Ok(())
}

async fn invalid_input_is_22023_naming_every_violation_and_changes_nothing(
    ctx: &Ctx<'_>,
) -> CheckResult {
    let (_, c) = ctx.db().await?;
    ctx.acquired(&c, "k", "a", S(60)).await?;
    // Incompressible, so that without pg_lease's own limit it would reach the
    // btree's row-size limit (54000) instead of being rejected as 22023.
    let long = incompressible(3000);
    let cases: Vec<(String, Vec<&str>)> = vec![
        (
            "SELECT * FROM lease.acquire(NULL, '', interval '-1 s', interval '-1 s')".into(),
            vec![
                "key must not be NULL",
                "owner must not be empty",
                "ttl",
                "wait",
            ],
        ),
        (
            format!("SELECT * FROM lease.acquire('{long}', 'o', interval '1 s')"),
            vec!["key must be at most 1024 bytes"],
        ),
        (
            format!("SELECT * FROM lease.acquire('k2', '{long}', interval '1 s')"),
            vec!["owner must be at most 1024 bytes"],
        ),
        (
            "SELECT * FROM lease.acquire('k2', 'o', interval '1000 years')".into(),
            vec!["ttl must be at most 100 years"],
        ),
        (
            "SELECT * FROM lease.acquire('k2', 'o', interval '0')".into(),
            vec!["ttl must be positive"],
        ),
        (
            "SELECT * FROM lease.acquire('k2', 'o', interval '1 mon -29 days')".into(),
            vec!["ttl must not have a negative field"],
        ),
        (
            "SELECT * FROM lease.acquire('k2', 'o', NULL)".into(),
            vec!["ttl must not be NULL"],
        ),
        (
            "SELECT * FROM lease.renew('k', 'a', NULL, interval '-5 min')".into(),
            vec!["epoch must not be NULL", "ttl"],
        ),
        (
            format!("SELECT * FROM lease.renew('{long}', NULL, 1, interval '10000 years')"),
            vec![
                "key must be at most 1024 bytes",
                "owner must not be NULL",
                "ttl must be at most",
            ],
        ),
        (
            "SELECT * FROM lease.release('', 'a', NULL)".into(),
            vec!["key must not be empty", "epoch must not be NULL"],
        ),
        (
            "SELECT * FROM lease.inspect(NULL)".into(),
            vec!["key must not be NULL"],
        ),
    ];
    for (sql, wants) in &cases {
        let shown: String = sql.chars().take(90).collect();
        match c.query(sql.as_str(), &[]).await.map_err(client::classify) {
            Err(LeaseError::InvalidInput { detail, .. }) => {
                for want in wants {
                    ensure!(
                        detail.contains(want),
                        "{shown}: DETAIL {detail:?} does not name {want:?}"
                    );
                }
            }
            other => return Err(format!("{shown}: {other:?}, expected 22023")),
        }
    }
    let row = ctx
        .calls
        .inspect(&c, "k")
        .await
        .map_err(e)?
        .ok_or("no row")?;
    ensure!(
        row.held && row.owner.as_deref() == Some("a") && row.epoch == 1,
        "state changed: {row:?}"
    );
    ensure!(
        ctx.calls.inspect(&c, "k2").await.map_err(e)?.is_none(),
        "an invalid acquire created k2"
    );
    let n: i64 = c
        .query_one("SELECT count(*) FROM lease.leases", &[])
        .await
        .map_err(pg)?
        .get(0);
    ensure!(n == 1, "{n} rows after invalid calls, expected 1");
    Ok(())
}

/// A pseudo-random alphanumeric string that TOAST compression cannot shrink.
fn incompressible(len: usize) -> String {
    const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            ALPHABET[(x % ALPHABET.len() as u64) as usize] as char
        })
        .collect()
}

async fn aborted_transactions_change_nothing(ctx: &Ctx<'_>) -> CheckResult {
    let (_, mut c) = ctx.db().await?;
    // A rolled-back acquire leaves a never-leased key never-leased.
    let tx = c.transaction().await.map_err(pg)?;
    let (ep, _) = ctx.acquired(&tx, "k", "a", S(60)).await?;
    ensure!(ep == 1, "epoch {ep}");
    tx.rollback().await.map_err(pg)?;
    let row = ctx.calls.inspect(&c, "k").await.map_err(e)?;
    ensure!(row.is_none(), "rolled-back acquire left {row:?}");
    // Rolled-back renew and release leave the lease as it was.
    let (ep, exp) = ctx.acquired(&c, "k", "a", S(60)).await?;
    let tx = c.transaction().await.map_err(pg)?;
    let r = ctx
        .calls
        .renew(&tx, "k", "a", ep, S(600))
        .await
        .map_err(e)?;
    ensure!(r.status == Status::Ok, "renew in tx: {r:?}");
    let l = ctx.calls.release(&tx, "k", "a", ep).await.map_err(e)?;
    ensure!(l == Status::Ok, "release in tx: {l:?}");
    tx.rollback().await.map_err(pg)?;
    let row = ctx
        .calls
        .inspect(&c, "k")
        .await
        .map_err(e)?
        .ok_or("no row")?;
    ensure!(
        row.held && row.epoch == ep && row.expires_at == Some(exp),
        "rolled-back renew/release changed the lease: {row:?}"
    );
    // A transaction aborted by an error after a grant rolls the grant back too.
    let tx = c.transaction().await.map_err(pg)?;
    ctx.acquired(&tx, "k3", "a", S(60)).await?;
    let failed = tx.batch_execute("SELECT 1/0").await;
    ensure!(failed.is_err(), "division by zero succeeded");
    drop(tx);
    let row = ctx.calls.inspect(&c, "k3").await.map_err(e)?;
    ensure!(
        row.is_none(),
        "an aborted transaction kept its grant: {row:?}"
    );
    Ok(())
}

async fn distinct_keys_never_interact(ctx: &Ctx<'_>) -> CheckResult {
    let (_, c) = ctx.db().await?;
    let (e42, _) = ctx.acquired(&c, "job-42", "worker-a1", S(30)).await?;
    let (e43, _) = ctx.acquired(&c, "job-43", "worker-a1", S(30)).await?;
    ensure!(e43 == 1, "job-43 got epoch {e43}: keys share a counter");
    let (e44, _) = ctx.acquired(&c, "job-44", "worker-b2", S(30)).await?;
    ensure!(e44 == 1, "job-44 got epoch {e44}");
    ctx.calls
        .release(&c, "job-42", "worker-a1", e42)
        .await
        .map_err(e)?;
    client::expire(&c, "job-44").await.map_err(e)?;
    let row = ctx
        .calls
        .inspect(&c, "job-43")
        .await
        .map_err(e)?
        .ok_or("no row")?;
    ensure!(
        row.held && row.epoch == 1 && row.owner.as_deref() == Some("worker-a1"),
        "job-43 changed when other keys were released/lapsed: {row:?}"
    );
    Ok(())
}

async fn exactly_one_of_concurrent_acquirers_wins(ctx: &Ctx<'_>) -> CheckResult {
    let (db, c) = ctx.db().await?;
    let contenders = 8;
    let mut clients = Vec::new();
    for _ in 0..contenders {
        clients.push(std::sync::Arc::new(ctx.connect(&db).await?));
    }
    for round in 0..6 {
        let key = format!("race-{round}");
        if round % 2 == 1 {
            // Odd rounds race for a lapsed lease instead of a never-leased key.
            ctx.acquired(&c, &key, "previous", S(60)).await?;
            client::expire(&c, &key).await.map_err(e)?;
        }
        let barrier = std::sync::Arc::new(tokio::sync::Barrier::new(contenders));
        let mut tasks = Vec::new();
        for (i, cl) in clients.iter().enumerate() {
            let (cl, barrier, key) = (cl.clone(), barrier.clone(), key.clone());
            let calls = ctx.calls.clone();
            tasks.push(tokio::spawn(async move {
                barrier.wait().await;
                calls
                    .acquire(&*cl, &key, &format!("w{i}"), S(60), Duration::ZERO)
                    .await
            }));
        }
        let mut winners = Vec::new();
        for (i, t) in tasks.into_iter().enumerate() {
            match t.await.map_err(|e| e.to_string())?.map_err(e)? {
                Acquire::Acquired { epoch, .. } => winners.push((i, epoch)),
                Acquire::Denied => {}
            }
        }
        ensure!(
            winners.len() == 1,
            "round {round}: winners {winners:?}, expected exactly one"
        );
        let row = ctx
            .calls
            .inspect(&c, &key)
            .await
            .map_err(e)?
            .ok_or("no row")?;
        let (w, epoch) = winners[0];
        ensure!(
            row.owner == Some(format!("w{w}")) && row.epoch == epoch,
            "round {round}: inspect {row:?} disagrees with winner w{w} epoch {epoch}"
        );
    }
    Ok(())
}

async fn blocking_waiters_never_stall_the_holders_renew(ctx: &Ctx<'_>) -> CheckResult {
    let (db, c) = ctx.db().await?;
    let (ep, _) = ctx.acquired(&c, "k", "holder", S(60)).await?;
    let mut waiters = Vec::new();
    for i in 0..3 {
        let w = ctx.connect(&db).await?;
        let calls = ctx.calls.clone();
        waiters.push(tokio::spawn(async move {
            calls
                .acquire(&w, "k", &format!("waiter{i}"), S(60), S(2))
                .await
        }));
    }
    tokio::time::sleep(MS(100)).await;
    let mut slowest = Duration::ZERO;
    for _ in 0..10 {
        let start = Instant::now();
        let r = ctx
            .calls
            .renew(&c, "k", "holder", ep, S(60))
            .await
            .map_err(e)?;
        slowest = slowest.max(start.elapsed());
        ensure!(r.status == Status::Ok, "renew while waiters poll: {r:?}");
        tokio::time::sleep(MS(100)).await;
    }
    ensure!(
        slowest < MS(500),
        "a renew took {slowest:?} while waiters were polling"
    );
    for w in waiters {
        match w.await.map_err(|e| e.to_string())? {
            Err(LeaseError::WaitExhausted { .. }) => {}
            other => {
                return Err(format!(
                    "waiter ended with {other:?}, expected wait exhausted"
                ))
            }
        }
    }
    Ok(())
}

async fn a_waiter_that_lost_a_race_never_stalls_the_holders_renew(ctx: &Ctx<'_>) -> CheckResult {
    // s1's lease lapses; s2 takes it over in an open transaction; s3's
    // blocking acquire probes "lapsed", tries to write and blocks on s2's row
    // lock; s2 commits, so s3's re-check fails. s2's renew must not wait for
    // s3: the failed attempt may not keep its row lock while s3 sleeps.
    let (db, c1) = ctx.db().await?;
    ctx.acquired(&c1, "k", "s1", MS(1)).await?;
    tokio::time::sleep(MS(10)).await;
    let mut c2 = ctx.connect(&db).await?;
    let c3 = ctx.connect(&db).await?;
    let pid3: i32 = c3
        .query_one("SELECT pg_catalog.pg_backend_pid()", &[])
        .await
        .map_err(pg)?
        .get(0);
    let tx = c2.transaction().await.map_err(pg)?;
    let (ep, _) = ctx.acquired(&tx, "k", "s2", S(60)).await?;
    let calls = ctx.calls.clone();
    let waiter = tokio::spawn(async move { calls.acquire(&c3, "k", "s3", S(60), S(3)).await });
    let deadline = Instant::now() + S(5);
    loop {
        let row = c1
            .query_one(
                "SELECT coalesce(wait_event_type, '') OPERATOR(pg_catalog.=) 'Lock' \
                 FROM pg_catalog.pg_stat_activity WHERE pid = $1",
                &[&pid3],
            )
            .await
            .map_err(pg)?;
        if row.get::<_, bool>(0) {
            break;
        }
        ensure!(
            Instant::now() < deadline,
            "the waiter never blocked on the takeover's row lock"
        );
        tokio::time::sleep(MS(10)).await;
    }
    tx.commit().await.map_err(pg)?;
    tokio::time::sleep(MS(300)).await;
    let start = Instant::now();
    let r = ctx
        .calls
        .renew(&c2, "k", "s2", ep, S(60))
        .await
        .map_err(e)?;
    let took = start.elapsed();
    ensure!(r.status == Status::Ok, "the new holder's renew: {r:?}");
    ensure!(
        took < MS(500),
        "the new holder's renew waited {took:?} for a waiter that lost a race"
    );
    match waiter.await.map_err(|e| e.to_string())? {
        Err(LeaseError::WaitExhausted { .. }) => Ok(()),
        other => Err(format!(
            "the waiter ended with {other:?}, expected wait exhausted"
        )),
    }
}

/// A cluster of the check's own from the same install (the extension under test is
/// already installed there).
fn own_cluster(ctx: &Ctx<'_>) -> Result<Cluster, Failure> {
    let options = ClusterOptions {
        extensions: Vec::new(),
        ..ClusterOptions::default()
    };
    Cluster::start_with(ctx.install, options).map_err(|e| e.to_string())
}

async fn committed_state_survives_restart_and_crash(ctx: &Ctx<'_>) -> CheckResult {
    let mut cluster = own_cluster(ctx)?;
    let db = ctx.fresh_database_on(&cluster, "durable").await?;
    let mut c = ctx.connect_on(&cluster, &db).await?;
    let (held_epoch, held_exp) = ctx.acquired(&c, "held", "a", S(3600)).await?;
    let (ep, _) = ctx.acquired(&c, "freed", "a", S(3600)).await?;
    ctx.calls.release(&c, "freed", "a", ep).await.map_err(e)?;
    // An open, uncommitted grant at crash time must vanish.
    let tx = c.transaction().await.map_err(pg)?;
    ctx.acquired(&tx, "uncommitted", "a", S(3600)).await?;
    std::mem::forget(tx);
    let expect = |c: Client, when: &'static str| async move {
        let held = ctx.calls.inspect(&c, "held").await.map_err(e)?;
        ensure!(
            held.as_ref()
                .is_some_and(|r| r.held && r.epoch == held_epoch && r.expires_at == Some(held_exp)),
            "after {when}: held is {held:?}"
        );
        let freed = ctx.calls.inspect(&c, "freed").await.map_err(e)?;
        ensure!(
            freed.as_ref().is_some_and(|r| !r.held && r.epoch == ep + 1),
            "after {when}: freed is {freed:?}"
        );
        let unc = ctx.calls.inspect(&c, "uncommitted").await.map_err(e)?;
        ensure!(
            unc.is_none(),
            "after {when}: an uncommitted grant survived: {unc:?}"
        );
        Ok::<(), Failure>(())
    };
    cluster.crash().map_err(|e| e.to_string())?;
    cluster.resume().map_err(|e| e.to_string())?;
    expect(ctx.connect_on(&cluster, &db).await?, "crash").await?;
    cluster.restart().map_err(|e| e.to_string())?;
    expect(ctx.connect_on(&cluster, &db).await?, "restart").await?;
    cluster.stop_immediate().map_err(|e| e.to_string())?;
    cluster.resume().map_err(|e| e.to_string())?;
    let c = ctx.connect_on(&cluster, &db).await?;
    expect(c, "immediate shutdown").await?;
    let c = ctx.connect_on(&cluster, &db).await?;
    let (next, _) = ctx.acquired(&c, "freed", "b", S(60)).await?;
    ensure!(
        next == ep + 2,
        "grant after recovery has epoch {next}, expected {}",
        ep + 2
    );
    Ok(())
}

async fn downtime_never_extends_ownership(ctx: &Ctx<'_>) -> CheckResult {
    let mut cluster = own_cluster(ctx)?;
    let db = ctx.fresh_database_on(&cluster, "downtime").await?;
    let c = ctx.connect_on(&cluster, &db).await?;
    let (ep, exp) = ctx.acquired(&c, "k", "a", MS(800)).await?;
    drop(c);
    cluster.stop_fast().map_err(|e| e.to_string())?;
    tokio::time::sleep(MS(1200)).await;
    cluster.resume().map_err(|e| e.to_string())?;
    let c = ctx.connect_on(&cluster, &db).await?;
    let now = client::server_now(&c).await.map_err(e)?;
    ensure!(
        now > exp,
        "the server clock {now} has not passed the expiry {exp}"
    );
    let row = ctx
        .calls
        .inspect(&c, "k")
        .await
        .map_err(e)?
        .ok_or("no row")?;
    ensure!(
        !row.held,
        "a lease that expired during downtime is still held: {row:?}"
    );
    let r = ctx.calls.renew(&c, "k", "a", ep, S(60)).await.map_err(e)?;
    ensure!(r.status == Status::Lapsed, "renew after downtime: {r:?}");
    let (next, _) = ctx.acquired(&c, "k", "b", S(60)).await?;
    ensure!(next == ep + 1, "takeover after downtime: epoch {next}");
    Ok(())
}

async fn functions_are_security_definer_volatile_with_pinned_search_path(
    ctx: &Ctx<'_>,
) -> CheckResult {
    let (_, c) = ctx.db().await?;
    let rows = c
        .query(
            "SELECT proname, prosecdef, provolatile::text, coalesce(array_to_string(proconfig, ','), '') \
             FROM pg_proc WHERE pronamespace = 'lease'::regnamespace AND proname NOT LIKE '\\_%' ORDER BY proname",
            &[],
        )
        .await
        .map_err(pg)?;
    let names: Vec<String> = rows.iter().map(|r| r.get(0)).collect();
    ensure!(
        names == ["acquire", "inspect", "release", "renew"],
        "public functions are {names:?}"
    );
    for r in &rows {
        let (name, secdef, vol, config): (String, bool, String, String) =
            (r.get(0), r.get(1), r.get(2), r.get(3));
        ensure!(secdef, "lease.{name} is not SECURITY DEFINER");
        ensure!(
            vol == "v",
            "lease.{name} has volatility {vol}, expected VOLATILE"
        );
        ensure!(
            config == "search_path=pg_catalog, pg_temp",
            "lease.{name} has config {config:?}, expected a pinned search_path"
        );
    }
    Ok(())
}

async fn table_is_private_and_functions_are_public(ctx: &Ctx<'_>) -> CheckResult {
    let (db, c) = ctx.db().await?;
    // Roles are cluster-wide: one per database keeps concurrent runs apart.
    let role = format!("{db}_user");
    c.batch_execute(&format!(
        "DROP ROLE IF EXISTS {role}; CREATE ROLE {role}; SET ROLE {role}"
    ))
    .await
    .map_err(pg)?;
    let direct = c.query("SELECT * FROM lease.leases", &[]).await;
    let write = c.execute("DELETE FROM lease.leases", &[]).await;
    let via_api = ctx.acquired(&c, "k", "a", S(60)).await;
    let inspect = ctx.calls.inspect(&c, "k").await;
    c.batch_execute(&format!(
        "RESET ROLE; DROP OWNED BY {role}; DROP ROLE {role}"
    ))
    .await
    .map_err(pg)?;
    for (what, r) in [("SELECT", direct.map(|_| 0)), ("DELETE", write.map(|_| 0))] {
        match r {
            Err(err)
                if err.code() == Some(&tokio_postgres::error::SqlState::INSUFFICIENT_PRIVILEGE) => {
            }
            other => {
                return Err(format!(
                    "{what} on lease.leases by an ordinary role: {other:?}, expected 42501"
                ))
            }
        }
    }
    via_api?;
    ensure!(
        inspect.map_err(e)?.is_some_and(|r| r.held),
        "inspect by an ordinary role"
    );
    Ok(())
}

async fn trusted_install_by_a_non_superuser_and_drop_destroys_state(ctx: &Ctx<'_>) -> CheckResult {
    let db = ctx
        .cluster
        .fresh_empty_database(&format!(
            "{}_plain",
            ctx.check.chars().take(30).collect::<String>()
        ))
        .await
        .map_err(|e| e.to_string())?;
    ctx.setup_on(ctx.cluster, &db).await?;
    let c = ctx.connect(&db).await?;
    // Roles are cluster-wide: one per database keeps concurrent runs apart.
    let role = format!("{db}_installer");
    c.batch_execute(&format!(
        "DROP ROLE IF EXISTS {role}; CREATE ROLE {role}; GRANT CREATE ON DATABASE {db} TO {role}; SET ROLE {role}"
    ))
    .await
    .map_err(pg)?;
    let create = format!("CREATE EXTENSION {}", crate::pg::quote_ident(ctx.extension));
    let drop = format!("DROP EXTENSION {}", crate::pg::quote_ident(ctx.extension));
    c.batch_execute(&create).await.map_err(pg)?;
    let (ep, _) = ctx.acquired(&c, "k", "a", S(60)).await?;
    ctx.calls.release(&c, "k", "a", ep).await.map_err(e)?;
    let owner_write = c.execute("UPDATE lease.leases SET epoch = 1", &[]).await;
    ensure!(
        owner_write.is_err(),
        "the non-superuser who installed pg_lease could rewrite epochs directly"
    );
    c.batch_execute(&drop).await.map_err(pg)?;
    let schema: bool = c
        .query_one(
            "SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = 'lease')",
            &[],
        )
        .await
        .map_err(pg)?
        .get(0);
    ensure!(!schema, "DROP EXTENSION left schema lease");
    c.batch_execute(&create).await.map_err(pg)?;
    let row = ctx.calls.inspect(&c, "k").await.map_err(e)?;
    ensure!(
        row.is_none(),
        "after re-install the key still has state: {row:?}"
    );
    c.batch_execute(&format!(
        "{drop}; RESET ROLE; REVOKE CREATE ON DATABASE {db} FROM {role}; DROP ROLE {role}"
    ))
    .await
    .map_err(pg)?;
    Ok(())
}
