//! The security suite: pg_lease installed as a trusted extension by a non-superuser that
//! owns its database, attacked and used by other non-superusers.
//!
//! Every check starts from a [`Fixture`]: three fresh roles (the database `owner`, who
//! installs the extension; an ordinary `user`; a `hostile` role) and a database owned by
//! `owner`, in which `owner` ran `CREATE EXTENSION`. The checks read the catalogs as the
//! cluster superuser, act as the three roles, and judge real behaviour: a privilege is
//! missing when the server refuses the statement (SQLSTATE 42501) *and* lease state is
//! unchanged; a planted object has no effect when a lease call answers as if it were not
//! there while an unqualified use of the same name in the same session does reach it.
//!
//! A check ends in [`CheckError::Violated`] when pg_lease does something the check forbids,
//! and in [`CheckError::Infrastructure`] when the check could not be carried out (a
//! statement of the harness failed, a tool is missing or hung): never a pass.
//!
//! [`hostile`] is the hostile-input property (arbitrary arguments give a result or 22023
//! with a DETAIL and change nothing the spec does not allow); [`tools`] runs the install's
//! `pg_dump`, `pg_restore` and `psql`.

pub mod hostile;
pub mod tools;

use crate::extension::{ExtensionFiles, StaleMutant};
use crate::pg::{quote_ident, Cluster, PgError};
use chrono::{DateTime, Utc};
use std::collections::BTreeSet;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};
use tokio_postgres::error::SqlState;
use tokio_postgres::Client;

/// What went wrong setting up or running a check (never a verdict on pg_lease).
#[derive(Debug, thiserror::Error)]
pub enum SecurityError {
    #[error(transparent)]
    Pg(#[from] PgError),
    #[error("database error: {}", describe_db(.0))]
    Db(#[from] tokio_postgres::Error),
    #[error(transparent)]
    Tool(#[from] tools::ToolError),
    #[error("lease call: {0}")]
    Lease(#[from] crate::client::LeaseError),
    #[error("{0}")]
    Unexpected(String),
}

/// A driver error with the server's code, message and detail, when it has them.
pub fn describe_db(err: &tokio_postgres::Error) -> String {
    match err.as_db_error() {
        Some(db) => {
            let mut s = format!("{}: {}", db.code().code(), db.message());
            if let Some(d) = db.detail() {
                s.push_str(&format!(" (DETAIL: {d})"));
            }
            s
        }
        None => match std::error::Error::source(err) {
            Some(cause) => format!("{err}: {cause}"),
            None => err.to_string(),
        },
    }
}

/// Why a check did not pass.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CheckError {
    /// pg_lease broke the property the check names.
    Violated(String),
    /// The check could not be carried out; no verdict.
    Infrastructure(String),
}

impl fmt::Display for CheckError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CheckError::Violated(why) => write!(f, "violated: {why}"),
            CheckError::Infrastructure(why) => write!(f, "infrastructure failure: {why}"),
        }
    }
}

impl From<SecurityError> for CheckError {
    fn from(e: SecurityError) -> Self {
        match e {
            SecurityError::Lease(e) => CheckError::from(e),
            other => CheckError::Infrastructure(other.to_string()),
        }
    }
}

impl From<tokio_postgres::Error> for CheckError {
    fn from(e: tokio_postgres::Error) -> Self {
        CheckError::Infrastructure(format!("database error: {}", describe_db(&e)))
    }
}

impl From<PgError> for CheckError {
    fn from(e: PgError) -> Self {
        CheckError::Infrastructure(e.to_string())
    }
}

impl From<tools::ToolError> for CheckError {
    fn from(e: tools::ToolError) -> Self {
        CheckError::Infrastructure(e.to_string())
    }
}

/// A lease call that failed: an answer outside the API (an error the target raised outside
/// its contract, a result of another shape or type) is a finding; the rest (a lost
/// connection, the harness's own bug, a refusal the check did not expect) is no verdict.
impl From<crate::client::LeaseError> for CheckError {
    fn from(e: crate::client::LeaseError) -> Self {
        use crate::client::LeaseError;
        match e {
            LeaseError::OutsideContract { .. } | LeaseError::Unexpected(_) => {
                CheckError::Violated(format!("lease call: {e}"))
            }
            e => CheckError::Infrastructure(format!("lease call: {e}")),
        }
    }
}

type CheckResult = Result<(), CheckError>;
type CheckFuture<'a> = Pin<Box<dyn Future<Output = CheckResult> + Send + 'a>>;

macro_rules! violated {
    ($($fmt:tt)+) => {
        return Err(CheckError::Violated(format!($($fmt)+)))
    };
}

macro_rules! infra {
    ($($fmt:tt)+) => {
        return Err(CheckError::Infrastructure(format!($($fmt)+)))
    };
}

/// One named security check.
#[derive(Clone, Copy)]
pub struct Check {
    pub name: &'static str,
    run: for<'a> fn(&'a Ctx<'a>) -> CheckFuture<'a>,
}

impl fmt::Debug for Check {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name)
    }
}

/// What a check runs against.
pub struct Ctx<'a> {
    pub cluster: &'a Cluster,
    /// The extension under test (pg_lease, pg_lease 0.1.0 or a mutant), already installed
    /// into the cluster's install.
    pub extension: &'a str,
}

impl Ctx<'_> {
    /// The major of the server under test (some catalog contents and messages depend on it).
    pub fn server_major(&self) -> u32 {
        self.cluster.version().major
    }
}

/// The outcome of one check.
#[derive(Debug, Clone)]
pub struct Outcome {
    pub name: &'static str,
    pub result: CheckResult,
    pub elapsed: Duration,
}

/// The outcomes of a suite run against one extension on one server.
#[derive(Debug, Clone)]
pub struct Report {
    pub server_version: String,
    pub extension: String,
    pub outcomes: Vec<Outcome>,
}

impl Report {
    /// The outcome of the named check, if it ran.
    pub fn outcome(&self, name: &str) -> Option<&Outcome> {
        self.outcomes.iter().find(|o| o.name == name)
    }

    pub fn passed(&self) -> bool {
        self.outcomes.iter().all(|o| o.result.is_ok())
    }

    /// A line per check (and the reason of each failure), then a summary line.
    pub fn render(&self) -> String {
        let mut out = String::new();
        for o in &self.outcomes {
            let mark = match &o.result {
                Ok(()) => "ok  ",
                Err(CheckError::Violated(_)) => "FAIL",
                Err(CheckError::Infrastructure(_)) => "INFR",
            };
            out.push_str(&format!(
                "{mark} {:<72} {:>6.2}s\n",
                o.name,
                o.elapsed.as_secs_f64()
            ));
            if let Err(why) = &o.result {
                for line in why.to_string().lines() {
                    out.push_str(&format!("       {line}\n"));
                }
            }
        }
        let failed = self.outcomes.iter().filter(|o| o.result.is_err()).count();
        out.push_str(&format!(
            "PostgreSQL {}, extension {}: {} security checks, {} passed, {} failed\n",
            self.server_version,
            self.extension,
            self.outcomes.len(),
            self.outcomes.len() - failed,
            failed
        ));
        out
    }
}

macro_rules! check {
    ($name:ident) => {
        Check {
            name: stringify!($name),
            run: |ctx| Box::pin($name(ctx)),
        }
    };
}

/// Every security check.
pub fn checks() -> Vec<Check> {
    vec![
        check!(extension_objects_owners_and_acls_match_the_reviewed_list),
        check!(only_the_api_is_security_definer_and_every_search_path_is_pinned),
        check!(the_table_has_only_the_durability_trigger_and_it_only_sets_synchronous_commit),
        check!(a_hostile_role_is_denied_everything_but_the_api),
        check!(the_installer_reaches_lease_state_only_through_the_api),
        check!(planted_functions_and_operators_never_run_inside_lease_calls),
        check!(a_squatted_lease_schema_makes_the_install_fail),
        check!(the_owner_dumps_the_epochs_and_only_a_superuser_restore_loads_them),
        check!(drop_extension_by_the_owner_destroys_live_leases),
        check!(synchronous_commit_off_does_not_make_a_lease_write_asynchronous),
    ]
}

/// Runs the checks selected by `select` against `extension` on `cluster`, one after another.
pub async fn run_against(
    cluster: &Cluster,
    extension: &str,
    select: impl Fn(&str) -> bool,
) -> Report {
    let ctx = Ctx { cluster, extension };
    let mut outcomes = Vec::new();
    for check in checks() {
        if !select(check.name) {
            continue;
        }
        let start = Instant::now();
        let result = match tokio::time::timeout(CHECK_TIMEOUT, (check.run)(&ctx)).await {
            Ok(r) => r,
            Err(_) => Err(CheckError::Infrastructure(format!(
                "the check did not finish within {CHECK_TIMEOUT:?}"
            ))),
        };
        outcomes.push(Outcome {
            name: check.name,
            result,
            elapsed: start.elapsed(),
        });
    }
    Report {
        server_version: cluster.version().full.clone(),
        extension: extension.to_string(),
        outcomes,
    }
}

/// No check may take longer (a hang is an infrastructure failure).
const CHECK_TIMEOUT: Duration = Duration::from_secs(60);

/// A deliberately weakened pg_lease build: a negative control of this suite (not a lease
/// bug, so not in the mutant catalogue of [`crate::mutants`]).
#[derive(Clone, Copy, Debug)]
pub struct SecurityMutant {
    pub name: &'static str,
    /// What the weakening breaks.
    pub breaks: &'static str,
    /// Exact (unique) text replacements applied to the 0.2.0 definitions.
    pub edits: &'static [(&'static str, &'static str)],
    /// Security checks that must fail against it.
    pub caught_by: &'static [&'static str],
}

impl SecurityMutant {
    /// The build as an extension of its own, `pg_lease_<name>`.
    pub fn files(&self) -> Result<ExtensionFiles, StaleMutant> {
        ExtensionFiles::edited(self.name, self.edits)
    }
}

/// Deliberately weakened pg_lease builds: each must fail exactly the named security checks,
/// by a violation (the negative controls of this suite).
pub const MUTANTS: &[SecurityMutant] = &[
    SecurityMutant {
        name: "sec_acquire_search_path_unpinned",
        breaks: "lease.acquire runs as its owner with the caller's search_path",
        edits: &[(
            "CREATE OR REPLACE FUNCTION lease.acquire(key text, owner text, ttl interval, wait interval DEFAULT interval '0')\n\
             RETURNS TABLE (acquired boolean, epoch bigint, expires_at timestamptz)\n\
             LANGUAGE plpgsql VOLATILE SECURITY DEFINER\n\
             SET search_path = pg_catalog, pg_temp\n",
            "CREATE OR REPLACE FUNCTION lease.acquire(key text, owner text, ttl interval, wait interval DEFAULT interval '0')\n\
             RETURNS TABLE (acquired boolean, epoch bigint, expires_at timestamptz)\n\
             LANGUAGE plpgsql VOLATILE SECURITY DEFINER\n",
        )],
        caught_by: &[
            "only_the_api_is_security_definer_and_every_search_path_is_pinned",
            "planted_functions_and_operators_never_run_inside_lease_calls",
        ],
    },
    SecurityMutant {
        name: "sec_installer_may_update",
        breaks: "the installing role may UPDATE lease.leases (rewind epochs)",
        edits: &[(
            "GRANT SELECT ON lease.leases TO @extowner@;",
            "GRANT SELECT, UPDATE ON lease.leases TO @extowner@;",
        )],
        caught_by: &[
            "extension_objects_owners_and_acls_match_the_reviewed_list",
            "the_installer_reaches_lease_state_only_through_the_api",
        ],
    },
    SecurityMutant {
        name: "sec_helper_executable_by_public",
        breaks: "PUBLIC may execute the internal helper lease._take",
        edits: &[(
            "REVOKE ALL ON FUNCTION lease._take(text, text, interval, boolean) FROM PUBLIC;",
            "",
        )],
        caught_by: &[
            "extension_objects_owners_and_acls_match_the_reviewed_list",
            "a_hostile_role_is_denied_everything_but_the_api",
        ],
    },
    SecurityMutant {
        name: "sec_trigger_runs_as_definer",
        breaks: "the durability trigger function is SECURITY DEFINER",
        edits: &[(
            "CREATE FUNCTION lease._commit_durably()\nRETURNS trigger\nLANGUAGE plpgsql VOLATILE\n",
            "CREATE FUNCTION lease._commit_durably()\nRETURNS trigger\nLANGUAGE plpgsql VOLATILE SECURITY DEFINER\n",
        )],
        caught_by: &[
            "only_the_api_is_security_definer_and_every_search_path_is_pinned",
            "the_table_has_only_the_durability_trigger_and_it_only_sets_synchronous_commit",
        ],
    },
];

// ---------------------------------------------------------------------------------------
// Fixture

static NEXT_FIXTURE: AtomicU64 = AtomicU64::new(1);

/// Fresh roles and a database owned by `owner`, who installed the extension in it.
pub struct Fixture<'a> {
    pub cluster: &'a Cluster,
    pub extension: String,
    pub db: String,
    /// Owns the database and installed the extension (a non-superuser).
    pub owner: String,
    /// An ordinary role that uses the API.
    pub user: String,
    /// A role that attacks.
    pub hostile: String,
    databases: Vec<String>,
}

impl<'a> Fixture<'a> {
    /// Creates the roles and the database, and installs `extension` as the owner.
    pub async fn create(
        cluster: &'a Cluster,
        extension: &str,
    ) -> Result<Fixture<'a>, SecurityError> {
        let f = Fixture::bare(cluster, extension).await?;
        let installed = async {
            let owner = f.connect_as(&f.owner).await?;
            owner
                .batch_execute(&format!("CREATE EXTENSION {}", quote_ident(extension)))
                .await?;
            Ok::<_, SecurityError>(())
        }
        .await;
        match installed {
            Ok(()) => Ok(f),
            Err(e) => {
                let _ = f.drop_all().await;
                Err(e)
            }
        }
    }

    /// The roles and the database, without the extension.
    pub async fn bare(cluster: &'a Cluster, extension: &str) -> Result<Fixture<'a>, SecurityError> {
        let n = NEXT_FIXTURE.fetch_add(1, Ordering::Relaxed);
        let tag = format!("sec{}_{n}", std::process::id());
        let f = Fixture {
            cluster,
            extension: extension.to_string(),
            db: format!("{tag}_db"),
            owner: format!("{tag}_owner"),
            user: format!("{tag}_user"),
            hostile: format!("{tag}_hostile"),
            databases: vec![format!("{tag}_db")],
        };
        let admin = cluster.connect("postgres").await?;
        admin
            .batch_execute(&format!(
                "CREATE ROLE {o} LOGIN; CREATE ROLE {u} LOGIN; CREATE ROLE {h} LOGIN",
                o = quote_ident(&f.owner),
                u = quote_ident(&f.user),
                h = quote_ident(&f.hostile)
            ))
            .await?;
        admin
            .batch_execute(&format!(
                "CREATE DATABASE {} OWNER {}",
                quote_ident(&f.db),
                quote_ident(&f.owner)
            ))
            .await?;
        Ok(f)
    }

    /// Another empty database owned by the owner (a restore target); dropped with the fixture.
    pub async fn another_database(&mut self, suffix: &str) -> Result<String, SecurityError> {
        let name = format!("{}_{suffix}", self.db);
        let admin = self.cluster.connect("postgres").await?;
        admin
            .batch_execute(&format!(
                "CREATE DATABASE {} OWNER {}",
                quote_ident(&name),
                quote_ident(&self.owner)
            ))
            .await?;
        self.databases.push(name.clone());
        Ok(name)
    }

    /// Connects to the fixture's database as `role`.
    pub async fn connect_as(&self, role: &str) -> Result<Client, SecurityError> {
        self.connect_to(&self.db, role).await
    }

    /// Connects to `db` as `role`.
    pub async fn connect_to(&self, db: &str, role: &str) -> Result<Client, SecurityError> {
        let mut config = self.cluster.config(db);
        config.user(role);
        let (client, connection) = config.connect(tokio_postgres::NoTls).await?;
        tokio::spawn(async move {
            let _ = connection.await;
        });
        Ok(client)
    }

    /// Connects to the fixture's database as the cluster superuser.
    pub async fn superuser(&self) -> Result<Client, SecurityError> {
        Ok(self.cluster.connect(&self.db).await?)
    }

    /// Drops the databases and the roles.
    pub async fn drop_all(self) -> Result<(), SecurityError> {
        let admin = self.cluster.connect("postgres").await?;
        for db in &self.databases {
            admin
                .batch_execute(&format!(
                    "DROP DATABASE IF EXISTS {} WITH (FORCE)",
                    quote_ident(db)
                ))
                .await?;
        }
        admin
            .batch_execute(&format!(
                "DROP ROLE IF EXISTS {}; DROP ROLE IF EXISTS {}; DROP ROLE IF EXISTS {}",
                quote_ident(&self.owner),
                quote_ident(&self.user),
                quote_ident(&self.hostile)
            ))
            .await?;
        Ok(())
    }
}

/// Declares a check that runs `$body` on a fresh [`Fixture`] and then drops the fixture,
/// whatever the body's result.
macro_rules! fixture_check {
    ($name:ident, $body:ident) => {
        async fn $name(ctx: &Ctx<'_>) -> CheckResult {
            let mut f = Fixture::create(ctx.cluster, ctx.extension).await?;
            let result = $body(ctx, &mut f).await;
            finish(f, result).await
        }
    };
}

/// The check's result, unless dropping the fixture failed after a pass.
async fn finish(f: Fixture<'_>, result: CheckResult) -> CheckResult {
    let cleanup = f.drop_all().await;
    match (result, cleanup) {
        (Err(e), _) => Err(e),
        (Ok(()), Err(e)) => Err(e.into()),
        (Ok(()), Ok(())) => Ok(()),
    }
}

// ---------------------------------------------------------------------------------------
// Shared helpers

/// One row of `lease.leases`, read as the superuser.
pub type LeaseRow = (String, Option<String>, i64, Option<DateTime<Utc>>);

/// Every row of `lease.leases` (as the superuser), in byte order of the key.
pub async fn table_rows(su: &Client) -> Result<Vec<LeaseRow>, SecurityError> {
    let rows = su
        .query(
            "SELECT key, owner, epoch, expires_at FROM lease.leases ORDER BY key COLLATE \"C\"",
            &[],
        )
        .await?;
    rows.iter()
        .map(|r| Ok((r.try_get(0)?, r.try_get(1)?, r.try_get(2)?, r.try_get(3)?)))
        .collect::<Result<Vec<_>, tokio_postgres::Error>>()
        .map_err(SecurityError::from)
}

/// The SQLSTATE of a statement's outcome ("ok" when it succeeded).
fn outcome_code<T>(r: &Result<T, tokio_postgres::Error>) -> String {
    match r {
        Ok(_) => "ok".to_string(),
        Err(e) => match e.code() {
            Some(c) => c.code().to_string(),
            None => format!("no SQLSTATE ({e})"),
        },
    }
}

/// A statement that must be refused with 42501 (insufficient_privilege), with a message
/// containing `names` (what the refusal is about), e.g. "permission denied for table leases".
async fn expect_denied(c: &Client, sql: &str, names: &str, who: &str, out: &mut Vec<String>) {
    let r = c.batch_execute(sql).await;
    match &r {
        Err(e) if e.code() == Some(&SqlState::INSUFFICIENT_PRIVILEGE) => {
            let msg = e.as_db_error().map(|d| d.message()).unwrap_or_default();
            if !msg.contains(names) {
                out.push(format!(
                    "{who}: `{sql}` was refused for another reason than expected: {msg:?} (expected a message naming {names:?})"
                ));
            }
        }
        Err(e) => out.push(format!(
            "{who}: `{sql}` failed with {} instead of 42501 ({names})",
            describe_db(e)
        )),
        Ok(()) => out.push(format!(
            "{who}: `{sql}` succeeded; expected 42501 ({names})"
        )),
    }
}

// ---------------------------------------------------------------------------------------
// 1. Objects, owners and ACLs

/// Every object the extension creates (members, and the relations and types that come with
/// its tables), with its owner and each `aclexplode` entry, as lines
/// `<object>: owner <role>` and `<object>: <grantee> <privilege>[ WITH GRANT OPTION]`.
/// Roles read `bootstrap superuser`, `installer` (the extension's owner) or `PUBLIC`.
pub async fn extension_acl_lines(
    su: &Client,
    extension: &str,
) -> Result<Vec<String>, SecurityError> {
    let rows = su
        .query(
            r#"
WITH ext AS (SELECT oid, extowner FROM pg_extension WHERE extname = $1),
mem AS (
    SELECT d.classid, d.objid FROM pg_depend d, ext
     WHERE d.refclassid = 'pg_extension'::regclass AND d.refobjid = ext.oid AND d.deptype = 'e'),
memrel AS (SELECT objid AS oid FROM mem WHERE classid = 'pg_class'::regclass),
obj(classid, objid) AS (
          SELECT classid, objid FROM mem
    UNION SELECT 'pg_class'::regclass, i.indexrelid FROM pg_index i JOIN memrel r ON i.indrelid = r.oid
    UNION SELECT 'pg_class'::regclass, c.reltoastrelid FROM pg_class c JOIN memrel r ON c.oid = r.oid
           WHERE c.reltoastrelid <> 0
    UNION SELECT 'pg_class'::regclass, i.indexrelid FROM pg_index i
            JOIN pg_class c ON i.indrelid = c.reltoastrelid JOIN memrel r ON c.oid = r.oid
    UNION SELECT 'pg_class'::regclass, d.objid FROM pg_depend d JOIN memrel r
              ON d.refclassid = 'pg_class'::regclass AND d.refobjid = r.oid
           WHERE d.classid = 'pg_class'::regclass AND d.deptype IN ('a', 'i')
    UNION SELECT 'pg_type'::regclass, t.oid FROM pg_type t JOIN memrel r ON t.typrelid = r.oid
    UNION SELECT 'pg_type'::regclass, a.oid FROM pg_type a JOIN pg_type t ON a.oid = t.typarray
            JOIN memrel r ON t.typrelid = r.oid
),
info AS (
    SELECT o.classid, o.objid, pg_describe_object(o.classid, o.objid, 0) AS label,
           CASE o.classid
             WHEN 'pg_namespace'::regclass THEN (SELECT nspowner FROM pg_namespace WHERE oid = o.objid)
             WHEN 'pg_class'::regclass THEN (SELECT relowner FROM pg_class WHERE oid = o.objid)
             WHEN 'pg_proc'::regclass THEN (SELECT proowner FROM pg_proc WHERE oid = o.objid)
             WHEN 'pg_type'::regclass THEN (SELECT typowner FROM pg_type WHERE oid = o.objid)
           END AS owner,
           CASE o.classid
             WHEN 'pg_namespace'::regclass THEN
               (SELECT coalesce(nspacl, acldefault('n'::"char", nspowner)) FROM pg_namespace WHERE oid = o.objid)
             WHEN 'pg_class'::regclass THEN
               (SELECT CASE WHEN relkind IN ('i', 'I') THEN NULL
                            ELSE coalesce(relacl, acldefault((CASE relkind WHEN 'S' THEN 's' ELSE 'r' END)::"char", relowner))
                       END FROM pg_class WHERE oid = o.objid)
             WHEN 'pg_proc'::regclass THEN
               (SELECT coalesce(proacl, acldefault('f'::"char", proowner)) FROM pg_proc WHERE oid = o.objid)
             WHEN 'pg_type'::regclass THEN
               (SELECT coalesce(typacl, acldefault('T'::"char", typowner)) FROM pg_type WHERE oid = o.objid)
           END AS acl
      FROM obj o
),
named AS (
    SELECT label, owner, acl,
           (SELECT extowner FROM ext) AS installer
      FROM info
)
SELECT label,
       CASE WHEN owner IS NULL THEN 'unknown (not a schema, relation, function or type)'
            WHEN owner = 10 THEN 'bootstrap superuser'
            WHEN owner = installer THEN 'installer'
            ELSE owner::regrole::text END AS owner,
       CASE WHEN a.grantee IS NULL THEN NULL
            WHEN a.grantee = 0 THEN 'PUBLIC'
            WHEN a.grantee = 10 THEN 'bootstrap superuser'
            WHEN a.grantee = installer THEN 'installer'
            ELSE a.grantee::regrole::text END AS grantee,
       a.privilege_type, a.is_grantable
  FROM named LEFT JOIN LATERAL aclexplode(acl) a ON true
"#,
            &[&extension],
        )
        .await?;
    // A toast table's name carries its table's OID: name it by its table instead.
    let toast: Vec<(String, String)> = su
        .query(
            "SELECT c.oid::text, c.oid::regclass::text FROM pg_class c \
             JOIN pg_depend d ON d.classid = 'pg_class'::regclass AND d.objid = c.oid \
             JOIN pg_extension e ON d.refclassid = 'pg_extension'::regclass AND d.refobjid = e.oid \
             WHERE e.extname = $1 AND d.deptype = 'e' AND c.reltoastrelid <> 0",
            &[&extension],
        )
        .await?
        .iter()
        .map(|r| Ok((r.try_get(0)?, r.try_get(1)?)))
        .collect::<Result<_, tokio_postgres::Error>>()?;
    let mut lines = BTreeSet::new();
    for r in rows {
        let mut label: String = r.try_get(0)?;
        for (oid, table) in &toast {
            label = label.replace(&format!("pg_toast_{oid}"), &format!("pg_toast_<{table}>"));
        }
        let owner: String = r.try_get(1)?;
        lines.insert(format!("{label}: owner {owner}"));
        let grantee: Option<String> = r.try_get(2)?;
        if let Some(grantee) = grantee {
            let privilege: String = r.try_get(3)?;
            let grantable: bool = r.try_get(4)?;
            let option = if grantable { " WITH GRANT OPTION" } else { "" };
            lines.insert(format!("{label}: {grantee} {privilege}{option}"));
        }
    }
    Ok(lines.into_iter().collect())
}

/// The reviewed objects, owners and privileges of pg_lease 0.2.0 on a server of `major`.
///
/// - Everything is owned by the bootstrap superuser (the extension is trusted), who holds
///   the owner's implicit privileges (on tables, MAINTAIN too from PostgreSQL 17, which
///   added that privilege).
/// - PUBLIC: USAGE on schema `lease` and on the row types of its table, EXECUTE on the four
///   API functions, nothing else (the helpers are not executable by PUBLIC).
/// - The installer: SELECT on `lease.leases` (so that it can pg_dump its database), nothing
///   else.
pub fn reviewed_acl_0_2_0(major: u32) -> Vec<String> {
    const SU: &str = "bootstrap superuser";
    let mut lines = BTreeSet::new();
    let mut add = |object: &str, entries: &[(&str, &str)]| {
        lines.insert(format!("{object}: owner {SU}"));
        for (grantee, privilege) in entries {
            lines.insert(format!("{object}: {grantee} {privilege}"));
        }
    };
    add(
        "schema lease",
        &[(SU, "USAGE"), (SU, "CREATE"), ("PUBLIC", "USAGE")],
    );
    let mut table_owner: Vec<(&str, &str)> = [
        "INSERT",
        "SELECT",
        "UPDATE",
        "DELETE",
        "TRUNCATE",
        "REFERENCES",
        "TRIGGER",
    ]
    .iter()
    .map(|p| (SU, *p))
    .collect();
    if major >= 17 {
        table_owner.push((SU, "MAINTAIN"));
    }
    let mut table = table_owner.clone();
    table.push(("installer", "SELECT"));
    add("table lease.leases", &table);
    add("index lease.leases_pkey", &[]);
    add("toast table pg_toast.pg_toast_<lease.leases>", &table_owner);
    add("index pg_toast.pg_toast_<lease.leases>_index", &[]);
    for ty in ["type lease.leases", "type lease.leases[]"] {
        add(ty, &[(SU, "USAGE"), ("PUBLIC", "USAGE")]);
    }
    for api in [
        "function lease.acquire(text,text,interval,interval)",
        "function lease.renew(text,text,bigint,interval)",
        "function lease.release(text,text,bigint)",
        "function lease.inspect(text)",
    ] {
        add(api, &[(SU, "EXECUTE"), ("PUBLIC", "EXECUTE")]);
    }
    for helper in [
        "function lease._commit_durably()",
        "function lease._failure_status(text,text,bigint)",
        "function lease._interval_bad(interval,boolean)",
        "function lease._interval_problem(text,interval,boolean)",
        "function lease._interval_text(interval)",
        "function lease._lock_live(text,text,bigint)",
        "function lease._raise_invalid(text,text[])",
        "function lease._refuse_isolation(text)",
        "function lease._take(text,text,interval,boolean)",
        "function lease._text_bad(text)",
        "function lease._text_problem(text,text)",
    ] {
        add(helper, &[(SU, "EXECUTE")]);
    }
    lines.into_iter().collect()
}

/// The four functions PUBLIC may call.
pub const API_FUNCTIONS: [&str; 4] = [
    "lease.acquire(text,text,interval,interval)",
    "lease.inspect(text)",
    "lease.release(text,text,bigint)",
    "lease.renew(text,text,bigint,interval)",
];

fn diff_lines(actual: &[String], expected: &[String]) -> Option<String> {
    let a: BTreeSet<&String> = actual.iter().collect();
    let e: BTreeSet<&String> = expected.iter().collect();
    let unexpected: Vec<&&String> = a.difference(&e).collect();
    let missing: Vec<&&String> = e.difference(&a).collect();
    if unexpected.is_empty() && missing.is_empty() {
        return None;
    }
    let mut s = String::new();
    for u in unexpected {
        s.push_str(&format!("\n  unexpected: {u}"));
    }
    for m in missing {
        s.push_str(&format!("\n  missing:    {m}"));
    }
    Some(s)
}

fixture_check!(
    extension_objects_owners_and_acls_match_the_reviewed_list,
    extension_objects_owners_and_acls_match_the_reviewed_list_body
);

async fn extension_objects_owners_and_acls_match_the_reviewed_list_body(
    ctx: &Ctx<'_>,
    f: &mut Fixture<'_>,
) -> CheckResult {
    let su = f.superuser().await?;
    let actual = extension_acl_lines(&su, ctx.extension).await?;
    if actual.is_empty() {
        infra!("the extension {} has no member objects", ctx.extension);
    }
    if let Some(diff) = diff_lines(&actual, &reviewed_acl_0_2_0(ctx.server_major())) {
        violated!("the objects, owners and privileges differ from the reviewed list:{diff}");
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------
// 2. SECURITY DEFINER and search_path

fixture_check!(
    only_the_api_is_security_definer_and_every_search_path_is_pinned,
    only_the_api_is_security_definer_and_every_search_path_is_pinned_body
);

async fn only_the_api_is_security_definer_and_every_search_path_is_pinned_body(
    ctx: &Ctx<'_>,
    f: &mut Fixture<'_>,
) -> CheckResult {
    let su = f.superuser().await?;
    let rows = su
        .query(
            "SELECT p.oid::regprocedure::text, p.prosecdef, l.lanname, \
                    coalesce(p.proconfig, '{}'), \
                    EXISTS (SELECT 1 FROM aclexplode(coalesce(p.proacl, acldefault('f'::\"char\", p.proowner))) a \
                            WHERE a.grantee = 0 AND a.privilege_type = 'EXECUTE') \
               FROM pg_proc p JOIN pg_language l ON l.oid = p.prolang \
               JOIN pg_depend d ON d.classid = 'pg_proc'::regclass AND d.objid = p.oid \
               JOIN pg_extension e ON d.refclassid = 'pg_extension'::regclass AND d.refobjid = e.oid \
              WHERE e.extname = $1 AND d.deptype = 'e' ORDER BY 1",
            &[&ctx.extension],
        )
        .await?;
    if rows.is_empty() {
        infra!("the extension {} has no functions", ctx.extension);
    }
    let pinned = vec!["search_path=pg_catalog, pg_temp".to_string()];
    let mut problems = Vec::new();
    let mut api_seen = 0;
    for r in &rows {
        let name: String = r.try_get(0)?;
        let secdef: bool = r.try_get(1)?;
        let language: String = r.try_get(2)?;
        let config: Vec<String> = r.try_get(3)?;
        let public_exec: bool = r.try_get(4)?;
        let is_api = API_FUNCTIONS.contains(&name.as_str());
        if is_api {
            api_seen += 1;
            if !secdef {
                problems.push(format!("{name} is not SECURITY DEFINER"));
            }
            if config != pinned {
                problems.push(format!(
                    "{name} runs with settings {config:?}, expected exactly {pinned:?}"
                ));
            }
            if !public_exec {
                problems.push(format!("{name} is not executable by PUBLIC"));
            }
            continue;
        }
        if secdef {
            problems.push(format!("helper {name} is SECURITY DEFINER"));
        }
        if public_exec {
            problems.push(format!("helper {name} is executable by PUBLIC"));
        }
        let path: Vec<&String> = config
            .iter()
            .filter(|c| c.starts_with("search_path="))
            .collect();
        match path.as_slice() {
            [p] if p.as_str() == pinned[0] => {}
            [] if language == "sql" => {
                // Inlinable SQL helpers carry no SET clause: they are parsed inside their
                // (pinned) callers, and PUBLIC cannot call them directly (checked above).
            }
            other => problems.push(format!(
                "helper {name} ({language}) has search_path {other:?}, expected {:?}",
                pinned[0]
            )),
        }
    }
    if api_seen != API_FUNCTIONS.len() {
        problems.push(format!(
            "found {api_seen} of the API functions {API_FUNCTIONS:?}"
        ));
    }
    if !problems.is_empty() {
        violated!("{}", problems.join("; "));
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------
// 3. Triggers, rules, policies

fixture_check!(
    the_table_has_only_the_durability_trigger_and_it_only_sets_synchronous_commit,
    the_table_has_only_the_durability_trigger_and_it_only_sets_synchronous_commit_body
);

async fn the_table_has_only_the_durability_trigger_and_it_only_sets_synchronous_commit_body(
    _ctx: &Ctx<'_>,
    f: &mut Fixture<'_>,
) -> CheckResult {
    let su = f.superuser().await?;
    let mut problems = Vec::new();
    let meta = su
        .query_one(
            "SELECT c.relrowsecurity, c.relforcerowsecurity, \
                    (SELECT count(*) FROM pg_policy WHERE polrelid = c.oid), \
                    (SELECT count(*) FROM pg_rewrite WHERE ev_class = c.oid) \
               FROM pg_class c WHERE c.oid = 'lease.leases'::regclass",
            &[],
        )
        .await?;
    let (rls, force, policies, rules): (bool, bool, i64, i64) = (
        meta.try_get(0)?,
        meta.try_get(1)?,
        meta.try_get(2)?,
        meta.try_get(3)?,
    );
    if rls || force || policies != 0 || rules != 0 {
        problems.push(format!(
            "lease.leases has row security {rls}/{force}, {policies} policies, {rules} rules"
        ));
    }
    let triggers = su
        .query(
            "SELECT t.tgname::text, t.tgfoid::regprocedure::text, t.tgenabled::text, t.tgdeferrable, \
                    t.tginitdeferred, t.tgconstraint <> 0, t.tgtype::int, p.prosecdef, \
                    coalesce(p.proconfig, '{}') \
               FROM pg_trigger t JOIN pg_proc p ON p.oid = t.tgfoid \
              WHERE t.tgrelid = 'lease.leases'::regclass AND NOT t.tgisinternal ORDER BY 1",
            &[],
        )
        .await?;
    // tgtype: ROW (1) | INSERT (4) | UPDATE (16), AFTER (no BEFORE bit).
    let expected = (
        "leases_commit_durably".to_string(),
        "lease._commit_durably()".to_string(),
        "O".to_string(),
        true,
        true,
        true,
        1 | 4 | 16,
        false,
        vec!["search_path=pg_catalog, pg_temp".to_string()],
    );
    match triggers.as_slice() {
        [t] => {
            let actual = (
                t.try_get::<_, String>(0)?,
                t.try_get::<_, String>(1)?,
                t.try_get::<_, String>(2)?,
                t.try_get::<_, bool>(3)?,
                t.try_get::<_, bool>(4)?,
                t.try_get::<_, bool>(5)?,
                t.try_get::<_, i32>(6)?,
                t.try_get::<_, bool>(7)?,
                t.try_get::<_, Vec<String>>(8)?,
            );
            if actual != expected {
                problems.push(format!(
                    "the trigger is {actual:?}; expected (name, function, enabled, deferrable, \
                     initially deferred, constraint trigger, AFTER ROW INSERT|UPDATE, not \
                     SECURITY DEFINER, pinned search_path) = {expected:?}"
                ));
            }
        }
        other => {
            let names: Vec<String> = other.iter().filter_map(|t| t.try_get(0).ok()).collect();
            problems.push(format!(
                "lease.leases has the triggers {names:?}; expected only the durability trigger leases_commit_durably"
            ));
        }
    }
    if !problems.is_empty() {
        violated!("{}", problems.join("; "));
    }
    // What the trigger does as the caller: fire it early, inside the caller's
    // transaction, and compare every setting before and after.
    let user = f.connect_as(&f.user).await?;
    // A first call loads PL/pgSQL (and its settings) into the session.
    crate::client::inspect(&user, "trigger-probe").await?;
    user.batch_execute("BEGIN; SET LOCAL synchronous_commit = off")
        .await?;
    let settings = "SELECT name, setting FROM pg_settings ORDER BY name";
    let before = settings_of(&user, settings).await?;
    let who_before: String = user
        .query_one("SELECT current_user::text", &[])
        .await?
        .try_get(0)?;
    crate::client::acquire(
        &user,
        "trigger-probe",
        "u",
        Duration::from_secs(60),
        Duration::ZERO,
    )
    .await?;
    user.batch_execute("SET CONSTRAINTS ALL IMMEDIATE").await?;
    let after = settings_of(&user, settings).await?;
    let who_after: String = user
        .query_one("SELECT current_user::text", &[])
        .await?
        .try_get(0)?;
    user.batch_execute("ROLLBACK").await?;
    let changed: Vec<String> = after
        .iter()
        .filter(|(n, v)| before.iter().find(|(bn, _)| bn == n).map(|(_, bv)| bv) != Some(v))
        .map(|(n, v)| format!("{n}={v}"))
        .collect();
    // off becomes local: the commit record is flushed before COMMIT returns
    if changed != ["synchronous_commit=local"] {
        violated!(
            "firing the durability trigger in the caller's transaction changed the settings {changed:?}; expected only synchronous_commit=local"
        );
    }
    if who_before != who_after || who_after != f.user {
        violated!("the caller's identity changed from {who_before} to {who_after}");
    }
    Ok(())
}

async fn settings_of(c: &Client, sql: &str) -> Result<Vec<(String, String)>, SecurityError> {
    c.query(sql, &[])
        .await?
        .iter()
        .map(|r| {
            Ok((
                r.try_get(0)?,
                r.try_get::<_, Option<String>>(1)?.unwrap_or_default(),
            ))
        })
        .collect::<Result<_, tokio_postgres::Error>>()
        .map_err(SecurityError::from)
}

// ---------------------------------------------------------------------------------------
// 4. A hostile role

/// Puts some lease state in place through the API as `user`: a held key, a free key and a
/// key held by another owner.
async fn seed_leases(f: &Fixture<'_>) -> Result<(), SecurityError> {
    let user = f.connect_as(&f.user).await?;
    let hour = Duration::from_secs(3600);
    crate::client::acquire(&user, "held", "alice", hour, Duration::ZERO).await?;
    let free = crate::client::acquire(&user, "free", "alice", hour, Duration::ZERO).await?;
    let epoch = free
        .epoch()
        .ok_or_else(|| SecurityError::Unexpected("acquire of a new key was denied".into()))?;
    crate::client::release(&user, "free", "alice", epoch).await?;
    crate::client::acquire(&user, "other", "bob", hour, Duration::ZERO).await?;
    Ok(())
}

/// The hostile role's attempts at everything but the API, each with what its refusal names
/// on a server of `major`.
fn hostile_statements(extension: &str, major: u32) -> Vec<(String, &'static str)> {
    let ext = quote_ident(extension);
    // PostgreSQL 16 reworded the refusal to act for a role one lacks the privileges of.
    let not_that_role = if major >= 16 {
        "permission denied to change default privileges"
    } else {
        "must be member of role"
    };
    vec![
        ("SELECT * FROM lease.leases".into(), "table leases"),
        ("INSERT INTO lease.leases VALUES ('held', 'mallory', 1, now() + interval '1 hour')".into(), "table leases"),
        ("UPDATE lease.leases SET epoch = 1".into(), "table leases"),
        ("DELETE FROM lease.leases".into(), "table leases"),
        ("TRUNCATE lease.leases".into(), "table leases"),
        ("COPY lease.leases TO STDOUT".into(), "table leases"),
        ("SELECT 1 FROM lease.leases FOR UPDATE".into(), "table leases"),
        ("BEGIN; LOCK TABLE lease.leases IN ACCESS EXCLUSIVE MODE; COMMIT".into(), "table leases"),
        ("CREATE TABLE lease.planted (i int)".into(), "schema lease"),
        ("CREATE FUNCTION lease.acquire(text) RETURNS int LANGUAGE sql AS 'SELECT 1'".into(), "schema lease"),
        ("CREATE FUNCTION lease.clock_timestamp() RETURNS timestamptz LANGUAGE sql AS 'SELECT now()'".into(), "schema lease"),
        ("CREATE VIEW lease.v AS SELECT 1 AS one".into(), "schema lease"),
        ("ALTER TABLE lease.leases ADD COLUMN planted int".into(), "table leases"),
        ("ALTER TABLE lease.leases OWNER TO CURRENT_USER".into(), "table leases"),
        ("ALTER TABLE lease.leases DISABLE TRIGGER ALL".into(), "table leases"),
        ("ALTER TABLE lease.leases ENABLE ROW LEVEL SECURITY".into(), "table leases"),
        ("CREATE INDEX ON lease.leases (owner)".into(), "table leases"),
        ("CREATE TRIGGER planted BEFORE UPDATE ON lease.leases FOR EACH ROW EXECUTE FUNCTION suppress_redundant_updates_trigger()".into(), "table leases"),
        ("CREATE POLICY planted ON lease.leases USING (true)".into(), "table leases"),
        ("CREATE RULE planted AS ON UPDATE TO lease.leases DO INSTEAD NOTHING".into(), "table leases"),
        ("ALTER FUNCTION lease.acquire(text, text, interval, interval) SECURITY INVOKER".into(), "function lease.acquire"),
        ("ALTER FUNCTION lease.inspect(text) SET search_path = public".into(), "function lease.inspect"),
        ("ALTER FUNCTION lease.renew(text, text, bigint, interval) OWNER TO CURRENT_USER".into(), "function renew"),
        ("CREATE OR REPLACE FUNCTION lease.inspect(key text) RETURNS TABLE (held boolean, owner text, epoch bigint, expires_at timestamptz) LANGUAGE sql AS 'SELECT true, NULL::text, 0::bigint, NULL::timestamptz'".into(), "schema lease"),
        ("COMMENT ON FUNCTION lease.release(text, text, bigint) IS 'planted'".into(), "function lease.release"),
        ("ALTER SCHEMA lease RENAME TO planted".into(), "schema lease"),
        ("ALTER SCHEMA lease OWNER TO CURRENT_USER".into(), "schema lease"),
        ("DROP TABLE lease.leases".into(), "table leases"),
        ("DROP FUNCTION lease.inspect(text)".into(), "function lease.inspect"),
        ("DROP SCHEMA lease CASCADE".into(), "schema lease"),
        (format!("DROP EXTENSION {ext}"), "extension"),
        (format!("ALTER EXTENSION {ext} UPDATE"), "extension"),
        (format!("ALTER EXTENSION {ext} DROP FUNCTION lease.inspect(text)"), "extension"),
        ("GRANT INSERT ON lease.leases TO PUBLIC".into(), "table leases"),
        ("REINDEX TABLE lease.leases".into(), "table leases"),
        ("CLUSTER lease.leases USING leases_pkey".into(), "table leases"),
        ("ALTER DEFAULT PRIVILEGES FOR ROLE postgres IN SCHEMA lease GRANT ALL ON TABLES TO PUBLIC".into(), not_that_role),
    ]
}

/// Calls of every helper function (those PUBLIC must not execute), with NULL arguments.
async fn helper_calls(
    su: &Client,
    extension: &str,
) -> Result<Vec<(String, String)>, SecurityError> {
    let rows = su
        .query(
            "SELECT p.proname::text, \
                    'SELECT lease.' || quote_ident(p.proname) || '(' || \
                    coalesce((SELECT string_agg('NULL::' || format_type(t, NULL), ', ' ORDER BY i) \
                                FROM unnest(p.proargtypes::oid[]) WITH ORDINALITY AS a(t, i)), '') || ')', \
                    p.prorettype = 'trigger'::regtype \
               FROM pg_proc p \
               JOIN pg_depend d ON d.classid = 'pg_proc'::regclass AND d.objid = p.oid \
               JOIN pg_extension e ON d.refclassid = 'pg_extension'::regclass AND d.refobjid = e.oid \
              WHERE e.extname = $1 AND d.deptype = 'e' ORDER BY 1",
            &[&extension],
        )
        .await?;
    let mut out = Vec::new();
    for r in rows {
        let name: String = r.try_get(0)?;
        let call: String = r.try_get(1)?;
        let is_trigger: bool = r.try_get(2)?;
        if API_FUNCTIONS
            .iter()
            .any(|a| a.starts_with(&format!("lease.{name}(")))
            || is_trigger
        {
            continue;
        }
        out.push((name, call));
    }
    Ok(out)
}

fixture_check!(
    a_hostile_role_is_denied_everything_but_the_api,
    a_hostile_role_is_denied_everything_but_the_api_body
);

async fn a_hostile_role_is_denied_everything_but_the_api_body(
    ctx: &Ctx<'_>,
    f: &mut Fixture<'_>,
) -> CheckResult {
    seed_leases(f).await?;
    let su = f.superuser().await?;
    let rows_before = table_rows(&su).await?;
    let acl_before = extension_acl_lines(&su, ctx.extension).await?;
    let hostile = f.connect_as(&f.hostile).await?;
    let mut problems = Vec::new();
    for (sql, names) in hostile_statements(ctx.extension, ctx.server_major()) {
        expect_denied(&hostile, &sql, names, "hostile", &mut problems).await;
        let _ = hostile.batch_execute("ROLLBACK").await;
    }
    let helpers = helper_calls(&su, ctx.extension).await?;
    if helpers.is_empty() {
        infra!("found no helper functions to call");
    }
    for (name, call) in &helpers {
        expect_denied(
            &hostile,
            call,
            &format!("function {name}"),
            "hostile",
            &mut problems,
        )
        .await;
    }
    // Without privileges (or without the grant option), GRANT and REVOKE refuse or only
    // warn; either way no privilege may change (compared below).
    for sql in [
        "GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA lease TO PUBLIC",
        "REVOKE EXECUTE ON ALL FUNCTIONS IN SCHEMA lease FROM PUBLIC",
        "REVOKE USAGE ON SCHEMA lease FROM PUBLIC",
        "GRANT ALL ON ALL TABLES IN SCHEMA lease TO PUBLIC",
    ] {
        let _ = hostile.batch_execute(sql).await;
    }
    // The trigger function cannot be called at all, whoever calls it.
    let trigger_call = hostile
        .batch_execute("SELECT lease._commit_durably()")
        .await;
    if trigger_call.is_ok() {
        problems.push("hostile: SELECT lease._commit_durably() succeeded".into());
    }
    // Positive control: the API works for the hostile role (EXECUTE is granted to PUBLIC).
    match crate::client::inspect(&hostile, "held").await {
        Ok(Some(row)) if row.held && row.owner.as_deref() == Some("alice") => {}
        other => infra!(
            "the hostile role's lease.inspect('held') gave {other:?}; the API must work for it"
        ),
    }
    let rows_after = table_rows(&su).await?;
    let acl_after = extension_acl_lines(&su, ctx.extension).await?;
    if rows_after != rows_before {
        problems.push(format!(
            "lease state changed: {rows_before:?} -> {rows_after:?}"
        ));
    }
    if let Some(diff) = diff_lines(&acl_after, &acl_before) {
        problems.push(format!(
            "the extension's objects or privileges changed:{diff}"
        ));
    }
    if !problems.is_empty() {
        violated!("{}", problems.join("\n"));
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------
// 5. The installer

fixture_check!(
    the_installer_reaches_lease_state_only_through_the_api,
    the_installer_reaches_lease_state_only_through_the_api_body
);

async fn the_installer_reaches_lease_state_only_through_the_api_body(
    ctx: &Ctx<'_>,
    f: &mut Fixture<'_>,
) -> CheckResult {
    seed_leases(f).await?;
    let su = f.superuser().await?;
    let rows_before = table_rows(&su).await?;
    let owner = f.connect_as(&f.owner).await?;
    let ext = quote_ident(ctx.extension);
    let statements: Vec<(String, &str)> = vec![
        ("INSERT INTO lease.leases VALUES ('new', 'mallory', 1, now() + interval '1 hour')".into(), "table leases"),
        ("UPDATE lease.leases SET epoch = 1".into(), "table leases"),
        ("DELETE FROM lease.leases".into(), "table leases"),
        ("TRUNCATE lease.leases".into(), "table leases"),
        ("SELECT 1 FROM lease.leases FOR UPDATE".into(), "table leases"),
        ("SELECT 1 FROM lease.leases FOR SHARE".into(), "table leases"),
        ("BEGIN; LOCK TABLE lease.leases IN EXCLUSIVE MODE; COMMIT".into(), "table leases"),
        ("COPY lease.leases FROM STDIN".into(), "table leases"),
        ("ALTER TABLE lease.leases DISABLE TRIGGER ALL".into(), "table leases"),
        ("CREATE TRIGGER planted BEFORE UPDATE ON lease.leases FOR EACH ROW EXECUTE FUNCTION suppress_redundant_updates_trigger()".into(), "table leases"),
        ("CREATE TABLE lease.planted (i int)".into(), "schema lease"),
        ("ALTER FUNCTION lease.acquire(text, text, interval, interval) SET search_path = public".into(), "function lease.acquire"),
        (format!("ALTER EXTENSION {ext} DROP TABLE lease.leases"), "table leases"),
        (format!("ALTER EXTENSION {ext} DROP FUNCTION lease.acquire(text, text, interval, interval)"), "function lease.acquire"),
        ("DROP SCHEMA lease CASCADE".into(), "schema lease"),
    ];
    let acl_before = extension_acl_lines(&su, ctx.extension).await?;
    let mut problems = Vec::new();
    for (sql, names) in &statements {
        expect_denied(&owner, sql, names, "installer", &mut problems).await;
        let _ = owner.batch_execute("ROLLBACK").await;
    }
    for (name, call) in helper_calls(&su, ctx.extension).await? {
        expect_denied(
            &owner,
            &call,
            &format!("function {name}"),
            "installer",
            &mut problems,
        )
        .await;
    }
    // Holding SELECT without the grant option, the installer's GRANTs only warn; they
    // must not change any privilege.
    for sql in [
        "GRANT UPDATE ON lease.leases TO CURRENT_USER",
        "GRANT SELECT ON lease.leases TO PUBLIC",
        "GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA lease TO CURRENT_USER",
        "REVOKE EXECUTE ON FUNCTION lease.acquire(text, text, interval, interval) FROM PUBLIC",
    ] {
        let _ = owner.batch_execute(sql).await;
    }
    let acl_after = extension_acl_lines(&su, ctx.extension).await?;
    if let Some(diff) = diff_lines(&acl_after, &acl_before) {
        problems.push(format!(
            "the installer's GRANT/REVOKE attempts changed privileges:{diff}"
        ));
    }
    // Positive control: the installer may read the table (0.2.0, for pg_dump) and use the API.
    let read = owner
        .query("SELECT key, epoch FROM lease.leases", &[])
        .await;
    let api = crate::client::inspect(&owner, "held").await;
    let rows_after = table_rows(&su).await?;
    if rows_after != rows_before {
        problems.push(format!(
            "lease state changed: {rows_before:?} -> {rows_after:?}"
        ));
    }
    if !problems.is_empty() {
        violated!("{}", problems.join("\n"));
    }
    if let Err(e) = read {
        violated!(
            "the installer cannot read lease.leases (it needs SELECT to pg_dump): {}",
            describe_db(&e)
        );
    }
    if !matches!(api, Ok(Some(ref r)) if r.held) {
        infra!("the installer's lease.inspect('held') gave {api:?}");
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------
// 6. Planted functions and operators

/// One planted object: SQL run by the planter to create it, a query in the planter's
/// session showing that unqualified names reach it, and the SQL that removes it.
struct Plant {
    what: &'static str,
    create: &'static str,
    reached_by: &'static str,
    drop: &'static str,
}

const PLANTS: &[Plant] = &[
    Plant {
        what: "public.clock_timestamp() returning the year 3000",
        create: "CREATE FUNCTION public.clock_timestamp() RETURNS timestamptz LANGUAGE plpgsql AS $$ \
                 BEGIN PERFORM public.planted_ran(); RETURN timestamptz '3000-01-01 00:00:00+00'; END $$",
        reached_by: "SELECT clock_timestamp() > timestamptz '2999-01-01 00:00:00+00'",
        drop: "DROP FUNCTION public.clock_timestamp()",
    },
    Plant {
        what: "operator public.= (text, text) that is never true",
        create: "CREATE FUNCTION public.planted_texteq(text, text) RETURNS boolean LANGUAGE plpgsql AS $$ \
                 BEGIN PERFORM public.planted_ran(); RETURN false; END $$; \
                 CREATE OPERATOR public.= (LEFTARG = text, RIGHTARG = text, FUNCTION = public.planted_texteq)",
        reached_by: "SELECT NOT ('x'::text = 'x'::text)",
        drop: "DROP OPERATOR public.= (text, text); DROP FUNCTION public.planted_texteq(text, text)",
    },
    Plant {
        what: "operator public.< (double precision, integer) that is always true (an exact match where pg_catalog needs a cast)",
        create: "CREATE FUNCTION public.planted_lt(double precision, integer) RETURNS boolean LANGUAGE plpgsql AS $$ \
                 BEGIN PERFORM public.planted_ran(); RETURN true; END $$; \
                 CREATE OPERATOR public.< (LEFTARG = double precision, RIGHTARG = integer, FUNCTION = public.planted_lt)",
        reached_by: "SELECT 1.0::double precision < 0",
        drop: "DROP OPERATOR public.< (double precision, integer); DROP FUNCTION public.planted_lt(double precision, integer)",
    },
    Plant {
        what: "operator public.<> (text, text) that is always true",
        create: "CREATE FUNCTION public.planted_textne(text, text) RETURNS boolean LANGUAGE plpgsql AS $$ \
                 BEGIN PERFORM public.planted_ran(); RETURN true; END $$; \
                 CREATE OPERATOR public.<> (LEFTARG = text, RIGHTARG = text, FUNCTION = public.planted_textne)",
        reached_by: "SELECT 'x'::text <> 'x'::text",
        drop: "DROP OPERATOR public.<> (text, text); DROP FUNCTION public.planted_textne(text, text)",
    },
];

/// The search_path a victim (or the attacker itself) uses so that planted objects in
/// `public` take precedence over pg_catalog.
const HOSTILE_PATH: &str = "SET search_path = public, pg_catalog, pg_temp";

fixture_check!(
    planted_functions_and_operators_never_run_inside_lease_calls,
    planted_functions_and_operators_never_run_inside_lease_calls_body
);

async fn planted_functions_and_operators_never_run_inside_lease_calls_body(
    _ctx: &Ctx<'_>,
    f: &mut Fixture<'_>,
) -> CheckResult {
    let su = f.superuser().await?;
    // The hostile role may create objects in public (as on PostgreSQL 14 by default).
    // Every planted object reports each run through two sequences, which nextval
    // advances even when the statement that ran it is rolled back.
    su.batch_execute(&format!(
        "GRANT CREATE ON SCHEMA public TO {h}",
        h = quote_ident(&f.hostile)
    ))
    .await?;
    let hostile = f.connect_as(&f.hostile).await?;
    hostile
        .batch_execute(
            "CREATE SEQUENCE public.planted_runs; CREATE SEQUENCE public.planted_runs_elevated; \
             GRANT USAGE, UPDATE ON SEQUENCE public.planted_runs, public.planted_runs_elevated TO PUBLIC; \
             CREATE FUNCTION public.planted_ran() RETURNS void LANGUAGE plpgsql AS $$ BEGIN \
               PERFORM pg_catalog.nextval('public.planted_runs'); \
               IF pg_catalog.\"current_user\"() OPERATOR(pg_catalog.<>) pg_catalog.\"session_user\"() THEN \
                 PERFORM pg_catalog.nextval('public.planted_runs_elevated'); \
               END IF; END $$",
        )
        .await?;
    let hour = Duration::from_secs(3600);
    let user = f.connect_as(&f.user).await?;
    let granted =
        crate::client::acquire(&user, "victim-key", "victim", hour, Duration::ZERO).await?;
    let epoch = granted
        .epoch()
        .ok_or_else(|| SecurityError::Unexpected("acquire of a new key was denied".into()))?;
    let mut problems = Vec::new();
    for (i, plant) in PLANTS.iter().enumerate() {
        let new_key = format!("victim-new-{i}");
        hostile.batch_execute(plant.create).await?;
        let counts = "SELECT pg_catalog.nextval('public.planted_runs'), pg_catalog.nextval('public.planted_runs_elevated')";
        let start = hostile.query_one(counts, &[]).await?;
        let (runs0, elevated0): (i64, i64) = (start.try_get(0)?, start.try_get(1)?);
        // Each session that calls the API puts public before pg_catalog.
        let attacker = f.connect_as(&f.hostile).await?;
        let victim = f.connect_as(&f.user).await?;
        for c in [&attacker, &victim] {
            c.batch_execute(HOSTILE_PATH).await?;
            c.batch_execute("SET statement_timeout = '1s'").await?;
        }
        // Positive control: in these sessions the unqualified name reaches the plant.
        let reached: bool = attacker
            .query_one(plant.reached_by, &[])
            .await?
            .try_get(0)?;
        let reached_victim: bool = victim.query_one(plant.reached_by, &[]).await?.try_get(0)?;
        if !reached || !reached_victim {
            infra!(
                "the planted {} is not reached by `{}` in the callers' sessions",
                plant.what,
                plant.reached_by
            );
        }
        let before_calls = hostile.query_one(counts, &[]).await?;
        let (runs1, elevated1): (i64, i64) = (before_calls.try_get(0)?, before_calls.try_get(1)?);
        // The calls. A planted clock would make the live lease look lapsed: inspect
        // would say not held and the attacker's acquire would take the key over.
        let mut answers = Vec::new();
        let inspect_a = crate::client::inspect(&attacker, "victim-key").await;
        answers.push(format!("attacker inspect: {inspect_a:?}"));
        let take =
            crate::client::acquire(&attacker, "victim-key", "mallory", hour, Duration::ZERO).await;
        answers.push(format!("attacker acquire: {take:?}"));
        let renew = crate::client::renew(&victim, "victim-key", "victim", epoch, hour).await;
        answers.push(format!("victim renew: {renew:?}"));
        let inspect_v = crate::client::inspect(&victim, "victim-key").await;
        answers.push(format!("victim inspect: {inspect_v:?}"));
        let fresh = crate::client::acquire(&victim, &new_key, "victim", hour, Duration::ZERO).await;
        answers.push(format!("victim acquire of a new key: {fresh:?}"));
        let release_wrong = crate::client::release(&attacker, "victim-key", "mallory", epoch).await;
        answers.push(format!("attacker release: {release_wrong:?}"));
        let end = hostile.query_one(counts, &[]).await?;
        let (runs2, elevated2): (i64, i64) = (end.try_get(0)?, end.try_get(1)?);
        // nextval in `counts` itself advances each sequence once per read.
        let runs_in_calls = runs2 - runs1 - 1;
        let elevated_in_calls = elevated2 - elevated1 - 1;
        if runs1 - runs0 - 1 < 1 {
            infra!(
                "the positive control did not run the planted {}",
                plant.what
            );
        }
        let _ = elevated0;
        let correct = matches!(&inspect_a, Ok(Some(r)) if r.held && r.epoch == epoch && r.owner.as_deref() == Some("victim"))
            && matches!(&take, Ok(crate::client::Acquire::Denied))
            && matches!(&renew, Ok(r) if r.status == crate::client::Status::Ok)
            && matches!(&inspect_v, Ok(Some(r)) if r.held && r.epoch == epoch)
            && matches!(
                &fresh,
                Ok(crate::client::Acquire::Acquired { epoch: 1, .. })
            )
            && matches!(&release_wrong, Ok(crate::client::Status::NotOwner));
        if runs_in_calls != 0 || elevated_in_calls != 0 || !correct {
            problems.push(format!(
                "with the planted {} on the callers' search_path: it ran {runs_in_calls} times inside lease calls \
                 ({elevated_in_calls} of them as another role than the session's); answers: {}",
                plant.what,
                answers.join("; ")
            ));
        }
        hostile.batch_execute(plant.drop).await?;
    }
    // A function in the caller's own pg_temp: never looked up for unqualified calls.
    let attacker = f.connect_as(&f.hostile).await?;
    attacker
        .batch_execute(
            "CREATE FUNCTION pg_temp.clock_timestamp() RETURNS timestamptz LANGUAGE sql \
             AS $$ SELECT timestamptz '3000-01-01 00:00:00+00' $$; \
             SET search_path = pg_temp, public, pg_catalog",
        )
        .await?;
    let temp_reached: bool = attacker
        .query_one(
            "SELECT pg_temp.clock_timestamp() > timestamptz '2999-01-01 00:00:00+00'",
            &[],
        )
        .await?
        .try_get(0)?;
    if !temp_reached {
        infra!("the pg_temp clock does not answer the far future when called qualified");
    }
    let temp_inspect = crate::client::inspect(&attacker, "victim-key").await;
    let temp_take =
        crate::client::acquire(&attacker, "victim-key", "mallory", hour, Duration::ZERO).await;
    if !matches!(&temp_inspect, Ok(Some(r)) if r.held)
        || !matches!(&temp_take, Ok(crate::client::Acquire::Denied))
    {
        problems.push(format!(
            "with pg_temp.clock_timestamp() planted by the caller: inspect {temp_inspect:?}, acquire {temp_take:?}"
        ));
    }
    if !problems.is_empty() {
        violated!("{}", problems.join("\n"));
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------
// 7. A squatted schema

async fn a_squatted_lease_schema_makes_the_install_fail(ctx: &Ctx<'_>) -> CheckResult {
    let f = Fixture::bare(ctx.cluster, ctx.extension).await?;
    let result = async {
        let su = f.superuser().await?;
        su.batch_execute(&format!(
            "GRANT CREATE ON DATABASE {} TO {}",
            quote_ident(&f.db),
            quote_ident(&f.hostile)
        ))
        .await?;
        let hostile = f.connect_as(&f.hostile).await?;
        hostile
            .batch_execute(
                "CREATE SCHEMA lease; GRANT USAGE, CREATE ON SCHEMA lease TO PUBLIC; \
                 CREATE TABLE lease.leases (key text PRIMARY KEY, owner text, epoch bigint, expires_at timestamptz); \
                 GRANT ALL ON lease.leases TO PUBLIC",
            )
            .await?;
        let owner = f.connect_as(&f.owner).await?;
        let install = owner
            .batch_execute(&format!("CREATE EXTENSION {}", quote_ident(ctx.extension)))
            .await;
        let installed: bool = su
            .query_one(
                "SELECT EXISTS (SELECT 1 FROM pg_extension WHERE extname = $1)",
                &[&ctx.extension],
            )
            .await?
            .try_get(0)?;
        match install {
            Err(e) if e.code() == Some(&SqlState::DUPLICATE_SCHEMA) && !installed => Ok(()),
            Err(e) if !installed => violated!(
                "the install into a squatted schema failed, but with {} instead of 42P06",
                describe_db(&e)
            ),
            other => violated!(
                "CREATE EXTENSION with a schema lease created by another role: {:?}, installed: {installed}",
                other.map_err(|e| describe_db(&e))
            ),
        }
    }
    .await;
    let cleanup = f.drop_all().await;
    result.and(cleanup.map_err(CheckError::from))
}

// ---------------------------------------------------------------------------------------
// 8. pg_dump / pg_restore

/// Lease rows as (key, owner, epoch) read back through inspect in `db`, for `keys`.
async fn inspected(
    c: &Client,
    keys: &[&str],
) -> Result<Vec<(String, Option<crate::client::Inspect>)>, SecurityError> {
    let mut out = Vec::new();
    for k in keys {
        out.push((k.to_string(), crate::client::inspect(c, k).await?));
    }
    Ok(out)
}

fixture_check!(
    the_owner_dumps_the_epochs_and_only_a_superuser_restore_loads_them,
    the_owner_dumps_the_epochs_and_only_a_superuser_restore_loads_them_body
);

async fn the_owner_dumps_the_epochs_and_only_a_superuser_restore_loads_them_body(
    ctx: &Ctx<'_>,
    f: &mut Fixture<'_>,
) -> CheckResult {
    let tools = tools::ClientTools::ensure(ctx.cluster.install()?).await?;
    let user = f.connect_as(&f.user).await?;
    let hour = Duration::from_secs(3600);
    // Three keys with distinct epochs: held at 5, free at 2, held at 1.
    for _ in 0..2 {
        let e = crate::client::acquire(&user, "three", "alice", hour, Duration::ZERO).await?;
        let ep = e
            .epoch()
            .ok_or_else(|| SecurityError::Unexpected("denied".into()))?;
        crate::client::release(&user, "three", "alice", ep).await?;
    }
    crate::client::acquire(&user, "three", "alice", hour, Duration::ZERO).await?;
    let e = crate::client::acquire(&user, "two", "bob", hour, Duration::ZERO).await?;
    let ep = e
        .epoch()
        .ok_or_else(|| SecurityError::Unexpected("denied".into()))?;
    crate::client::release(&user, "two", "bob", ep).await?;
    crate::client::acquire(&user, "one", "carol", hour, Duration::ZERO).await?;
    let keys = ["one", "three", "two"];
    let original = inspected(&user, &keys).await?;
    let su = f.superuser().await?;
    let rows = table_rows(&su).await?;
    let expected_epochs: Vec<(String, i64)> = rows.iter().map(|r| (r.0.clone(), r.2)).collect();
    if expected_epochs
        != [
            ("one".to_string(), 1),
            ("three".to_string(), 5),
            ("two".to_string(), 2),
        ]
    {
        infra!("the seeded lease state is {rows:?}");
    }

    let dir =
        tempfile::tempdir().map_err(|e| SecurityError::Unexpected(format!("tempdir: {e}")))?;
    let archive = dir.path().join("owner.dump");
    let conn = tools::Conn {
        port: ctx.cluster.port(),
        user: f.owner.clone(),
        db: f.db.clone(),
    };
    // The owner's dump.
    let dump = tools
        .pg_dump(&conn, &["--format=custom", "--file"], Some(&archive))
        .await?;
    if !dump.success() {
        violated!(
            "pg_dump by the database owner (who installed {}) failed ({}): {}",
            ctx.extension,
            dump.status,
            dump.stderr.trim()
        );
    }
    // The archive holds the epochs: its data section as SQL.
    let data = tools.pg_restore_to_text(&archive).await?;
    if !data.success() {
        infra!(
            "pg_restore --data-only -f - of the owner's archive failed: {}",
            data.stderr
        );
    }
    let dumped = tools::copy_rows(&data.stdout, "lease.leases");
    let dumped_epochs: Vec<(String, String)> = dumped
        .iter()
        .filter_map(|cols| Some((cols.first()?.clone(), cols.get(2)?.clone())))
        .collect();
    let want: Vec<(String, String)> = expected_epochs
        .iter()
        .map(|(k, e)| (k.clone(), e.to_string()))
        .collect();
    let mut sorted = dumped_epochs.clone();
    sorted.sort();
    if sorted != want {
        violated!("the owner's dump holds the lease rows {dumped_epochs:?}; expected (key, epoch) {want:?}");
    }

    // A restore by the owner into a fresh database it owns: loud, never a silent reset.
    let mut problems = Vec::new();
    let owner_db = f.another_database("owner_restore").await?;
    let owner_target = tools::Conn {
        db: owner_db.clone(),
        ..conn.clone()
    };
    let restore = tools.pg_restore(&owner_target, &archive, &[]).await?;
    let loud = !restore.success()
        && restore
            .stderr
            .contains("permission denied for table leases");
    if !loud {
        problems.push(format!(
            "pg_restore by the owner: {} with stderr {:?}; expected a non-zero exit naming permission denied for table leases",
            restore.status,
            restore.stderr.trim()
        ));
    }
    // What that failed restore leaves: report it (an installed extension without state).
    let left = f.connect_to(&owner_db, &f.user).await?;
    let left_state = inspected(&left, &keys).await;
    if let Ok(state) = &left_state {
        if state.iter().any(|(_, row)| row.is_some()) {
            problems.push(format!(
                "the owner's failed restore still loaded lease rows: {state:?}"
            ));
        }
    }
    // The same restore in one transaction, stopping at the first error: nothing remains.
    let single_db = f.another_database("owner_single").await?;
    let single_target = tools::Conn {
        db: single_db.clone(),
        ..conn.clone()
    };
    let single = tools
        .pg_restore(
            &single_target,
            &archive,
            &["--single-transaction", "--exit-on-error"],
        )
        .await?;
    let single_su = f.connect_to(&single_db, &f.owner).await?;
    let single_ext: bool = single_su
        .query_one(
            "SELECT EXISTS (SELECT 1 FROM pg_extension WHERE extname = $1)",
            &[&ctx.extension],
        )
        .await?
        .try_get(0)?;
    if single.success() || single_ext {
        problems.push(format!(
            "pg_restore --single-transaction --exit-on-error by the owner: {}, extension left installed: {single_ext}",
            single.status
        ));
    }
    // A plain-format restore through psql, stopping on error.
    let plain = dir.path().join("owner.sql");
    let plain_dump = tools
        .pg_dump(&conn, &["--format=plain", "--file"], Some(&plain))
        .await?;
    if !plain_dump.success() {
        infra!(
            "the owner's plain pg_dump failed after the custom one succeeded: {}",
            plain_dump.stderr
        );
    }
    let psql_db = f.another_database("owner_psql").await?;
    let psql = tools
        .psql_file(
            &tools::Conn {
                db: psql_db,
                ..conn.clone()
            },
            &plain,
            true,
        )
        .await?;
    if psql.success() || !psql.stderr.contains("permission denied for table leases") {
        problems.push(format!(
            "psql -v ON_ERROR_STOP=1 -f <owner's plain dump> as the owner: {} with stderr {:?}",
            psql.status,
            psql.stderr.trim()
        ));
    }

    // A restore by the superuser keeps every epoch, owner and expiry.
    let su_db = f.another_database("su_restore").await?;
    let su_target = tools::Conn {
        db: su_db.clone(),
        user: crate::pg::SUPERUSER.to_string(),
        port: ctx.cluster.port(),
    };
    let su_restore = tools
        .pg_restore(&su_target, &archive, &["--exit-on-error"])
        .await?;
    if !su_restore.success() {
        infra!(
            "pg_restore by the superuser failed ({}): {}",
            su_restore.status,
            su_restore.stderr.trim()
        );
    }
    let restored = inspected(&f.connect_to(&su_db, &f.user).await?, &keys).await?;
    if restored != original {
        problems.push(format!(
            "after a superuser restore inspect shows {restored:?}; before the dump it showed {original:?}"
        ));
    }
    if !problems.is_empty() {
        violated!("{}", problems.join("\n"));
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------
// 9. DROP EXTENSION by the owner

fixture_check!(
    drop_extension_by_the_owner_destroys_live_leases,
    drop_extension_by_the_owner_destroys_live_leases_body
);

async fn drop_extension_by_the_owner_destroys_live_leases_body(
    ctx: &Ctx<'_>,
    f: &mut Fixture<'_>,
) -> CheckResult {
    let ext = quote_ident(ctx.extension);
    let user = f.connect_as(&f.user).await?;
    let hour = Duration::from_secs(3600);
    // A live lease at epoch 5 (two grants and two releases before it).
    for _ in 0..2 {
        let e = crate::client::acquire(&user, "job", "alice", hour, Duration::ZERO).await?;
        let ep = e
            .epoch()
            .ok_or_else(|| SecurityError::Unexpected("denied".into()))?;
        crate::client::release(&user, "job", "alice", ep).await?;
    }
    let held = crate::client::acquire(&user, "job", "alice", hour, Duration::ZERO).await?;
    if held.epoch() != Some(5) {
        infra!("the seeded lease is {held:?}, expected epoch 5");
    }
    let mut problems = Vec::new();
    // Only the extension's owner may drop it.
    let hostile = f.connect_as(&f.hostile).await?;
    expect_denied(
        &hostile,
        &format!("DROP EXTENSION {ext}"),
        "extension",
        "hostile",
        &mut problems,
    )
    .await;
    expect_denied(
        &user,
        &format!("DROP EXTENSION {ext}"),
        "extension",
        "user",
        &mut problems,
    )
    .await;
    // An open transaction that wrote lease state holds DROP EXTENSION off until it ends.
    let writer = f.connect_as(&f.user).await?;
    writer.batch_execute("BEGIN").await?;
    crate::client::acquire(&writer, "open", "dave", hour, Duration::ZERO).await?;
    let owner = f.connect_as(&f.owner).await?;
    let blocked = owner
        .batch_execute(&format!("SET lock_timeout = '300ms'; DROP EXTENSION {ext}"))
        .await;
    if blocked.as_ref().err().and_then(|e| e.code()) != Some(&SqlState::LOCK_NOT_AVAILABLE) {
        problems.push(format!(
            "DROP EXTENSION while another transaction has written lease state: {}; expected to wait (lock_timeout, 55P03)",
            outcome_code(&blocked)
        ));
    }
    writer.batch_execute("COMMIT").await?;
    // The owner drops it while the lease is live: allowed, and the state is gone.
    owner.batch_execute("RESET lock_timeout").await?;
    if let Err(e) = owner.batch_execute(&format!("DROP EXTENSION {ext}")).await {
        violated!(
            "the owner could not DROP EXTENSION while a lease was live: {}",
            describe_db(&e)
        );
    }
    let renew = crate::client::renew(&user, "job", "alice", 5, hour).await;
    let renew_code = renew
        .as_ref()
        .err()
        .and_then(|e| e.code().map(str::to_string));
    if !matches!(renew_code.as_deref(), Some("3F000") | Some("42883")) {
        problems.push(format!("the holder's renew after DROP EXTENSION gave {renew:?}; expected schema lease to be gone (3F000 or 42883)"));
    }
    owner
        .batch_execute(&format!("CREATE EXTENSION {ext}"))
        .await?;
    let after = crate::client::inspect(&user, "job").await?;
    let regrant = crate::client::acquire(&user, "job", "erin", hour, Duration::ZERO).await?;
    let old_renew = crate::client::renew(&user, "job", "alice", 5, hour).await?;
    if after.is_some()
        || regrant.epoch() != Some(1)
        || old_renew.status != crate::client::Status::NotOwner
    {
        problems.push(format!(
            "after DROP and CREATE EXTENSION: inspect {after:?}, a new acquire {regrant:?}, the old holder's renew {old_renew:?}; \
             expected never-leased, epoch 1 and not_owner"
        ));
    }
    if !problems.is_empty() {
        violated!("{}", problems.join("\n"));
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------
// 10. Durable commit

/// Whether a grant acknowledged in a transaction that ran `setup` after its acquire
/// survives a crash of a cluster whose WAL writer is stopped (so that only the commit
/// itself can flush it). Returns the inspect row after the crash and the epoch another
/// owner then gets.
async fn grant_after_crash(
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
async fn durability_cluster(install: &crate::pg::PgInstall) -> Result<Cluster, SecurityError> {
    let options = crate::pg::ClusterOptions {
        settings: vec![("wal_writer_delay".into(), "10s".into())],
        extensions: Vec::new(),
        ..Default::default()
    };
    // initdb and the start block: off the runtime's threads.
    let install = install.clone();
    let cluster = tokio::task::spawn_blocking(move || Cluster::start_with(&install, options))
        .await
        .map_err(|e| SecurityError::Unexpected(format!("starting the cluster: {e}")))??;
    cluster
        .connect("postgres")
        .await?
        .batch_execute(&format!("CREATE ROLE {DURABLE_USER} LOGIN"))
        .await?;
    Ok(cluster)
}

async fn synchronous_commit_off_does_not_make_a_lease_write_asynchronous(
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
        "SET CONSTRAINTS ALL IMMEDIATE; SET LOCAL synchronous_commit = off",
    )
    .await?;
    Ok(DurabilityBypass {
        after_crash,
        next_epoch,
    })
}
