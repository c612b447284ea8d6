//! The conformance suite: every documented pg_lease behaviour, checked against
//! a real server. Used by `cargo test` (per major) and by `leasecheck run`.
//!
//! Each check gets its own database on a shared cluster; checks that restart
//! or crash the server start a cluster of their own from the same install, and so need a
//! managed cluster (`needs: Needs::ManagedServer`; on an external server they end in
//! [`crate::pg::PgError::NotManaged`]).

use crate::client::{self, Acquire, Calls, LeaseError};
use crate::pg::Cluster;
use crate::session::SessionSettings;
use caller_state::*;
use domain::*;
use liveness::*;
use lock_waits::*;
use types::*;

mod caller_state;
pub mod domain;
pub mod liveness;
mod lock_waits;
mod plans;
mod script;
mod types;
use chrono::{DateTime, Utc};
use std::time::Duration;
use tokio_postgres::Client;

use crate::judgement::{self, timed, CheckFuture};
pub use crate::judgement::{Failure, Needs, Outcome};

/// The harness could not do what the check needed.
fn infra(e: impl std::fmt::Display) -> Failure {
    Failure::Infrastructure(e.to_string())
}

/// A server error that says nothing about pg_lease: connection exceptions (08), resources
/// (53), operator intervention ending sessions (57P01-57P05), system errors (58).
fn sqlstate_is_infrastructure(code: &str) -> bool {
    code.starts_with("08")
        || code.starts_with("53")
        || code.starts_with("57P")
        || code.starts_with("58")
}

/// A failure carrying `code`: infrastructure or a violation, by the SQLSTATE.
fn by_sqlstate(code: &str, why: String) -> Failure {
    if sqlstate_is_infrastructure(code) {
        Failure::Infrastructure(why)
    } else {
        Failure::Violation(why)
    }
}
type CheckResult = Result<(), Failure>;

/// One named behaviour check (a check that restarts or crashes a server of its own from
/// the cluster's install needs a managed server).
pub type Check = judgement::Check<for<'a> fn(&'a Ctx<'a>) -> CheckFuture<'a>>;

/// What a check can use.
pub struct Ctx<'a> {
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
            .map_err(infra)?;
        self.setup_on(cluster, &name).await?;
        Ok(name)
    }

    /// Runs the session setup in `db` of `cluster` (as the superuser, without the settings).
    async fn setup_on(&self, cluster: &Cluster, db: &str) -> Result<(), Failure> {
        if self.session.setup.is_empty() {
            return Ok(());
        }
        let admin = cluster.connect(db).await.map_err(infra)?;
        self.session
            .run_setup(&admin)
            .await
            .map_err(|e| infra(format!("the session setup: {}", pg(e))))
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
            .map_err(|e| infra(format!("connecting under the session settings: {}", pg(e))))
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

/// The outcome of a suite run.
#[derive(Debug, Clone)]
pub struct Report {
    pub version: String,
    pub outcomes: Vec<Outcome>,
}

impl Report {
    pub fn failures(&self) -> impl Iterator<Item = &Outcome> {
        self.outcomes.iter().filter(|o| o.result.is_err())
    }

    pub fn passed(&self) -> bool {
        self.failures().next().is_none()
    }

    /// A line per check, then a summary line.
    pub fn render(&self) -> String {
        let mut out = String::new();
        for o in &self.outcomes {
            let mark = match &o.result {
                Ok(()) => "ok  ",
                Err(Failure::Violation(_)) => "FAIL",
                Err(Failure::Infrastructure(_)) => "INFR",
            };
            out.push_str(&format!(
                "{mark} {:<62} {:>7.2}s\n",
                o.name,
                o.elapsed.as_secs_f64()
            ));
            if let Err(why) = &o.result {
                for line in why.to_string().lines() {
                    out.push_str(&format!("       {line}\n"));
                }
            }
        }
        let failed = self.failures().count();
        let infrastructure = self
            .failures()
            .filter(|o| matches!(o.result, Err(Failure::Infrastructure(_))))
            .count();
        out.push_str(&format!(
            "PostgreSQL {}: {} checks, {} passed, {} failed ({} of them infrastructure failures)\n",
            self.version,
            self.outcomes.len(),
            self.outcomes.len() - failed,
            failed,
            infrastructure
        ));
        out
    }
}

/// The bound on one check. No check waits longer than its TTLs of a few seconds, its
/// calls' timeout (30 s) or a server restart (60 s); the gate bounds each check at 180 s
/// and then names the SQL the server was running, so this larger bound only ends a hang
/// outside the gate (`leasecheck run`, the tests).
pub const CHECK_TIMEOUT: Duration = Duration::from_secs(240);

/// Runs the checks whose name contains `filter` (all when None), one after
/// another, against pg_lease (already installed on `cluster`'s install).
pub async fn run(cluster: &Cluster, filter: Option<&str>) -> Report {
    run_against(cluster, crate::extension::NAME, |name| {
        filter.is_none_or(|f| name.contains(f))
    })
    .await
}

/// Runs the selected checks against the named extension (pg_lease or a mutant).
pub async fn run_against(
    cluster: &Cluster,
    extension: &str,
    select: impl Fn(&str) -> bool,
) -> Report {
    run_with(cluster, extension, &SessionSettings::none(), select).await
}

/// Runs the selected checks against the named extension with every connection they open
/// under `session` (specs/SEMANTICS.md section 10): its settings on connect, keys and
/// owners of the typed calls through its collation, its setup in every database.
pub async fn run_with(
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
            cluster,
            extension,
            check: check.name,
            session,
            calls: calls.clone(),
        };
        outcomes.push(timed(check.name, CHECK_TIMEOUT, (check.run)(&ctx)).await);
    }
    Report {
        version: cluster.version().full.clone(),
        outcomes,
    }
}

macro_rules! ensure {
    ($cond:expr, $($fmt:tt)+) => {
        if !$cond {
            return Err(Failure::Violation(format!($($fmt)+)));
        }
    };
}

macro_rules! check {
    ($name:ident) => {
        Check {
            name: stringify!($name),
            needs: Needs::Connection,
            run: |ctx| Box::pin($name(ctx)),
        }
    };
    // A check written as a plan, harness/plans/conformance/NAME.plan (module `plans`),
    // embedded here: a missing file does not compile. One that restarts the server runs
    // on a cluster of its own.
    ($name:ident, plan) => {
        check!($name, plan, Needs::Connection, plans::run)
    };
    ($name:ident, plan, restarts) => {
        check!($name, plan, Needs::ManagedServer, plans::run_restarting)
    };
    ($name:ident, plan, $needs:expr, $run:path) => {
        Check {
            name: stringify!($name),
            needs: $needs,
            run: |ctx| {
                Box::pin($run(
                    ctx,
                    include_str!(concat!(
                        env!("CARGO_MANIFEST_DIR"),
                        "/plans/conformance/",
                        stringify!($name),
                        ".plan"
                    )),
                ))
            },
        }
    };
}

/// Every check, in the order of the README.
pub fn checks() -> Vec<Check> {
    vec![
        check!(
            acquire_grants_epoch_1_expiring_at_server_time_plus_ttl,
            plan
        ),
        check!(denied_acquire_returns_nulls_and_writes_nothing, plan),
        check!(same_owner_acquire_is_idempotent_and_writes_nothing, plan),
        check!(renew_extends_expiry_and_keeps_the_epoch, plan),
        check!(release_frees_and_advances_the_epoch, plan),
        check!(renew_and_release_statuses_follow_precedence, plan),
        check!(inspect_tells_never_leased_free_held_and_lapsed_apart, plan),
        check!(
            lapsed_lease_is_taken_over_at_once_with_a_greater_epoch,
            plan
        ),
        check!(blocking_acquire_is_woken_by_release, plan),
        check!(blocking_acquire_takes_over_at_expiry, plan),
        check!(wait_exhaustion_is_57014_and_distinct_from_a_cancel, plan),
        check!(invalid_input_is_22023_naming_every_violation_and_changes_nothing),
        check!(aborted_transactions_change_nothing, plan),
        check!(distinct_keys_never_interact, plan),
        check!(exactly_one_of_concurrent_acquirers_wins, plan),
        check!(blocking_waiters_never_stall_the_holders_renew, plan),
        check!(
            a_waiter_that_lost_a_race_never_stalls_the_holders_renew,
            plan
        ),
        check!(committed_state_survives_restart_and_crash, plan, restarts),
        check!(downtime_never_extends_ownership, plan, restarts),
        check!(functions_are_security_definer_volatile_with_pinned_search_path),
        check!(table_is_private_and_functions_are_public),
        check!(trusted_install_by_a_non_superuser_and_drop_destroys_state),
        check!(every_call_answers_on_every_state_within_its_bound),
        check!(blocking_waits_end_promptly_at_deadline_and_expiry),
        check!(no_call_changes_the_callers_session_settings),
        check!(a_read_only_transaction_refuses_writes_with_25006, plan),
        check!(lock_timeout_fails_a_waiting_call_with_55p03, plan),
        check!(
            a_write_that_waited_across_its_leases_expiry_answers_lapsed,
            plan
        ),
        check!(a_first_grant_that_waited_for_a_rolled_back_insert_is_dated_after_it),
        check!(the_api_and_the_lease_table_have_the_contracts_types),
        check!(epochs_count_past_2_31),
        check!(every_valid_key_owner_and_interval_is_accepted),
        check!(invalid_input_names_every_violated_constraint_in_order),
    ]
}

/// The liveness check, which the gate runs before everything else on a build: a build
/// that hangs gets that verdict in seconds.
pub const LIVENESS_CHECK: &str = "every_call_answers_on_every_state_within_its_bound";

/// A lease call that failed: a violation, unless the server or connection failed under it
/// or the harness is at fault.
fn e(err: LeaseError) -> Failure {
    match &err {
        LeaseError::Failed { code, .. } => by_sqlstate(code, err.to_string()),
        LeaseError::OutcomeUnknown { .. } | LeaseError::HarnessBug { .. } => infra(err),
        _ => Failure::Violation(err.to_string()),
    }
}

/// A statement that failed: by its SQLSTATE; without one (a lost connection), or by the
/// harness's own fault (the fate table's harness bug: its SQL, a statement sent in an
/// aborted transaction), infrastructure.
fn pg(err: tokio_postgres::Error) -> Failure {
    match err.as_db_error() {
        Some(db) => {
            let why = format!("{}: {}", db.code().code(), db.message());
            match crate::fate::fate(&err) {
                model::fate::Fate::HarnessBug(cause) => infra(format!(
                    "the harness's own statement failed ({cause:?}): {why}"
                )),
                _ => by_sqlstate(db.code().code(), why),
            }
        }
        None => infra(err),
    }
}

const S: fn(u64) -> Duration = Duration::from_secs;
const MS: fn(u64) -> Duration = Duration::from_millis;

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
        Acquire::Denied => Err(Failure::Violation(format!(
            "acquire({key}, {owner}) was denied, expected a grant"
        ))),
    }
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
            other => return Err(format!("{shown}: {other:?}, expected 22023").into()),
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
    let table = crate::extension::lease_table(&c).await.map_err(pg)?;
    let n: i64 = c
        .query_one(&format!("SELECT count(*) FROM {table}"), &[])
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
    let table = crate::extension::lease_table(&c).await.map_err(pg)?;
    c.batch_execute(&format!(
        "DROP ROLE IF EXISTS {role}; CREATE ROLE {role}; SET ROLE {role}"
    ))
    .await
    .map_err(pg)?;
    let direct = c.query(&format!("SELECT * FROM {table}"), &[]).await;
    let write = c.execute(&format!("DELETE FROM {table}"), &[]).await;
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
                return Err(Failure::Violation(format!(
                    "{what} on {table} by an ordinary role: {other:?}, expected 42501"
                )))
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
        .map_err(infra)?;
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
    crate::fate::learn_target(&c, ctx.extension)
        .await
        .map_err(pg)?;
    let (ep, _) = ctx.acquired(&c, "k", "a", S(60)).await?;
    ctx.calls.release(&c, "k", "a", ep).await.map_err(e)?;
    let table = crate::extension::lease_table(&c).await.map_err(pg)?;
    let owner_write = c
        .execute(&format!("UPDATE {table} SET epoch = 1"), &[])
        .await;
    ensure!(
        owner_write.as_ref().err().and_then(|e| e.code())
            == Some(&tokio_postgres::error::SqlState::INSUFFICIENT_PRIVILEGE),
        "the non-superuser who installed pg_lease could rewrite epochs directly ({owner_write:?})"
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
