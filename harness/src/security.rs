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
//! A check ends in [`Failure::Violation`] when pg_lease does something the check forbids,
//! and in [`Failure::Infrastructure`] when the check could not be carried out (a
//! statement of the harness failed, a tool is missing or hung): never a pass.
//!
//! [`hostile`] is the hostile-input property (arbitrary arguments give a result or 22023
//! with a DETAIL and change nothing the spec does not allow); [`tools`] runs the install's
//! `pg_dump`, `pg_restore` and `psql`.

use crate::extension::{ExtensionFiles, StaleMutant};
use crate::pg::{quote_ident, Cluster, PgError};
use chrono::{DateTime, Utc};
use std::collections::BTreeSet;
use std::future::Future;
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

use crate::judgement::{self, timed, CheckFuture};
pub use crate::judgement::{describe_db, Failure, Needs, Outcome};

type CheckResult = Result<(), Failure>;

impl From<tools::ToolError> for Failure {
    fn from(e: tools::ToolError) -> Self {
        Failure::Infrastructure(e.to_string())
    }
}

/// The security checks' own errors: a lease call by its answer, the rest no verdict.
impl From<SecurityError> for Failure {
    fn from(e: SecurityError) -> Self {
        match e {
            SecurityError::Lease(e) => Failure::from(e),
            other => Failure::Infrastructure(other.to_string()),
        }
    }
}

macro_rules! violated {
    ($($fmt:tt)+) => {
        return Err(Failure::Violation(format!($($fmt)+)))
    };
}

macro_rules! infra {
    ($($fmt:tt)+) => {
        return Err(Failure::Infrastructure(format!($($fmt)+)))
    };
}

/// One named security check: each needs a managed server (it logs in as roles it creates,
/// runs this machine's pg_dump and psql against the server, or crashes it).
pub type Check = judgement::Check<for<'a> fn(&'a Ctx<'a>) -> CheckFuture<'a>>;

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
                Err(Failure::Violation(_)) => "FAIL",
                Err(Failure::Infrastructure(_)) => "INFR",
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
    ($module:ident, $name:ident) => {
        Check {
            name: stringify!($name),
            needs: Needs::ManagedServer,
            run: |ctx| Box::pin($module::$name(ctx)),
        }
    };
}

/// Declares a check that runs `$body` on a fresh [`Fixture`] and then drops the fixture,
/// whatever the body's result.
macro_rules! fixture_check {
    ($name:ident, $body:ident) => {
        pub(super) async fn $name(ctx: &Ctx<'_>) -> CheckResult {
            let mut f = Fixture::create(ctx.cluster, ctx.extension).await?;
            let result = $body(ctx, &mut f).await;
            finish(f, result).await
        }
    };
}

mod call_shapes;
mod commit_time;
mod dump;
mod durable;
mod fixture;
pub mod hostile;
mod objects;
mod planted;
mod roles;
mod shapes;
pub mod surface;
pub mod tools;
mod txn_shapes;
mod update_lock;
mod versions;

pub use commit_time::{commit_time_bypass, grant_then_crash, CommitRoute};
pub use durable::{durability_bypass, DurabilityBypass};
use fixture::{config_tables, expect_denied, finish, outcome_code, own_cluster, LeaseTable};
pub use fixture::{table_rows, Fixture, LeaseRow};
use objects::diff_lines;
pub use objects::{extension_acl_lines, reviewed_acl, API_FUNCTIONS};
pub use txn_shapes::ON_COMMIT_SETUP;
pub use update_lock::{BOUND as UPDATE_CALL_BOUND, HOLD as UPDATE_HOLD};
pub use versions::VERSIONS_WITH_KNOWN_BUGS;

/// Every security check.
pub fn checks() -> Vec<Check> {
    vec![
        check!(
            objects,
            extension_objects_owners_and_acls_match_the_reviewed_list
        ),
        check!(
            objects,
            only_the_api_is_security_definer_and_every_search_path_is_pinned
        ),
        check!(
            objects,
            the_table_has_only_the_durability_trigger_and_it_only_sets_synchronous_commit
        ),
        check!(roles, a_hostile_role_is_denied_everything_but_the_api),
        check!(
            roles,
            the_installer_reaches_lease_state_only_through_the_api
        ),
        check!(
            planted,
            planted_functions_and_operators_never_run_inside_lease_calls
        ),
        check!(planted, a_squatted_lease_schema_makes_the_install_fail),
        check!(
            dump,
            the_owner_dumps_the_epochs_and_only_a_superuser_restore_loads_them
        ),
        check!(dump, drop_extension_by_the_owner_destroys_live_leases),
        check!(
            durable,
            synchronous_commit_off_does_not_make_a_lease_write_asynchronous
        ),
        check!(shapes, prepared_transactions_never_hold_a_key),
        check!(
            versions,
            no_version_with_known_contract_bugs_can_be_installed
        ),
        check!(
            versions,
            invalid_input_comes_before_the_isolation_refusal_and_read_uncommitted_runs
        ),
        check!(
            update_lock,
            an_open_transaction_cannot_freeze_lease_calls_behind_an_extension_update
        ),
        check!(txn_shapes, savepoints_undo_a_lease_call_and_keep_no_lock),
        check!(txn_shapes, on_commit_actions_do_not_change_a_lease_write),
        check!(
            call_shapes,
            lease_calls_in_the_callers_triggers_are_calls_of_the_statement
        ),
        check!(call_shapes, lease_calls_in_ctes_are_calls_of_the_statement),
        check!(call_shapes, cursors_over_the_api_call_when_fetched),
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
        outcomes.push(timed(check.name, CHECK_TIMEOUT, (check.run)(&ctx)).await);
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
    /// Exact (unique) text replacements applied to the 0.3.0 install script.
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
            "CREATE FUNCTION lease.acquire(key text, owner text, ttl interval, wait interval DEFAULT interval '0')\n\
             RETURNS TABLE (acquired boolean, epoch bigint, expires_at timestamptz)\n\
             LANGUAGE plpgsql VOLATILE SECURITY DEFINER\n\
             SET search_path = pg_catalog, pg_temp\n",
            "CREATE FUNCTION lease.acquire(key text, owner text, ttl interval, wait interval DEFAULT interval '0')\n\
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
        breaks: "the installing role may UPDATE the lease table (rewind epochs)",
        edits: &[(
            "REVOKE ALL ON lease_internal.leases FROM PUBLIC;\n",
            "REVOKE ALL ON lease_internal.leases FROM PUBLIC;\n\
             GRANT USAGE ON SCHEMA lease_internal TO @extowner@;\n\
             GRANT SELECT, UPDATE ON lease_internal.leases TO @extowner@;\n",
        )],
        caught_by: &[
            "extension_objects_owners_and_acls_match_the_reviewed_list",
            "the_installer_reaches_lease_state_only_through_the_api",
        ],
    },
    SecurityMutant {
        name: "sec_helper_executable_by_public",
        breaks: "PUBLIC may use schema lease_internal and execute the internal helper _take",
        edits: &[(
            "REVOKE ALL ON FUNCTION lease_internal._take(text, text, interval, boolean) FROM PUBLIC;",
            "GRANT USAGE ON SCHEMA lease_internal TO PUBLIC;",
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
            "CREATE FUNCTION lease_internal._commit_durably()\nRETURNS trigger\nLANGUAGE plpgsql VOLATILE\n",
            "CREATE FUNCTION lease_internal._commit_durably()\nRETURNS trigger\nLANGUAGE plpgsql VOLATILE SECURITY DEFINER\n",
        )],
        caught_by: &[
            "only_the_api_is_security_definer_and_every_search_path_is_pinned",
            "the_table_has_only_the_durability_trigger_and_it_only_sets_synchronous_commit",
        ],
    },
    SecurityMutant {
        name: "sec_take_session_advisory_lock",
        breaks: "a write attempt serializes on a session-level advisory lock of the key, unlocked \
                 after the attempt returns: an attempt that fails keeps it past its savepoint \
                 and its transaction",
        edits: &[
            (
                "    PERFORM lease_internal._no_prepare();\n    IF NOT p_exists THEN\n",
                "    PERFORM lease_internal._no_prepare();\n    PERFORM pg_catalog.pg_advisory_lock(pg_catalog.hashtext(p_key));\n    IF NOT p_exists THEN\n",
            ),
            (
                "        IF v_epoch IS NOT NULL THEN\n            acquired := true;",
                "        PERFORM pg_catalog.pg_advisory_unlock_all();\n        IF v_epoch IS NOT NULL THEN\n            acquired := true;",
            ),
        ],
        caught_by: &["savepoints_undo_a_lease_call_and_keep_no_lock"],
    },
    SecurityMutant {
        name: "sec_inspect_stable",
        breaks: "lease.inspect is STABLE: it reads the calling statement's snapshot, which a \
                 cursor takes at DECLARE",
        edits: &[(
            "RETURNS TABLE (held boolean, owner text, epoch bigint, expires_at timestamptz)\nLANGUAGE plpgsql VOLATILE SECURITY DEFINER",
            "RETURNS TABLE (held boolean, owner text, epoch bigint, expires_at timestamptz)\nLANGUAGE plpgsql STABLE SECURITY DEFINER",
        )],
        caught_by: &["cursors_over_the_api_call_when_fetched"],
    },
];
