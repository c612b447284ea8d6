//! Commit-time routes around the durability trigger: user code that runs at COMMIT after
//! pg_lease's deferred trigger and sets `synchronous_commit = off` again. PostgreSQL runs,
//! at COMMIT, the deferred triggers in the order they were queued and then materializes
//! holdable cursors (CommitTransaction: AfterTriggerFireDeferred, then PreCommit_Portals),
//! so a caller's own deferred trigger queued after the lease write, or a WITH HOLD cursor
//! whose query sets the setting, has the last word on how the commit is flushed. SEMANTICS
//! section 8 documents each as a limitation; [`commit_time_bypass`] reproduces one.

use super::durable::{durability_cluster, grant_after_crash};
use super::{DurabilityBypass, SecurityError};

/// A way a caller's own transaction turns its lease write's commit asynchronous.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CommitRoute {
    /// `SET CONSTRAINTS ALL IMMEDIATE` fires the durability trigger early, then
    /// `SET LOCAL synchronous_commit = off`.
    SetConstraints,
    /// A deferred constraint trigger of the caller's, queued after the lease write, sets
    /// `synchronous_commit = off` when it fires at COMMIT.
    DeferredTrigger,
    /// A WITH HOLD cursor declared after the lease write, whose query sets
    /// `synchronous_commit = off`: PostgreSQL runs it at COMMIT, after the deferred triggers.
    HoldCursor,
}

impl CommitRoute {
    pub const ALL: [CommitRoute; 3] = [
        CommitRoute::SetConstraints,
        CommitRoute::DeferredTrigger,
        CommitRoute::HoldCursor,
    ];

    /// What the caller runs after its acquire, before COMMIT.
    pub fn setup(self) -> &'static str {
        match self {
            CommitRoute::SetConstraints => {
                "SET CONSTRAINTS ALL IMMEDIATE; SET LOCAL synchronous_commit = off"
            }
            CommitRoute::DeferredTrigger => {
                "CREATE TEMP TABLE at_commit (i int); \
                 CREATE FUNCTION pg_temp.async_commit() RETURNS trigger LANGUAGE plpgsql AS \
                 $f$ BEGIN PERFORM pg_catalog.set_config('synchronous_commit', 'off', true); \
                 RETURN NULL; END $f$; \
                 CREATE CONSTRAINT TRIGGER async_commit AFTER INSERT ON at_commit \
                 DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION pg_temp.async_commit(); \
                 INSERT INTO at_commit VALUES (1)"
            }
            CommitRoute::HoldCursor => {
                "DECLARE async_commit CURSOR WITH HOLD FOR \
                 SELECT pg_catalog.set_config('synchronous_commit', 'off', true)"
            }
        }
    }
}

/// Reproduces `route` on a cluster of its own (on `install`) against `extension`: a grant
/// acknowledged by COMMIT, a crash right after, what inspect and another owner see.
pub async fn commit_time_bypass(
    install: &crate::pg::PgInstall,
    extension: &str,
    route: CommitRoute,
) -> Result<DurabilityBypass, SecurityError> {
    grant_then_crash(install, extension, route.setup()).await
}

/// The same with any `setup` (the controls: what does not run at COMMIT keeps the grant).
pub async fn grant_then_crash(
    install: &crate::pg::PgInstall,
    extension: &str,
    setup: &str,
) -> Result<DurabilityBypass, SecurityError> {
    let mut cluster = durability_cluster(install).await?;
    let (after_crash, next_epoch) = grant_after_crash(&mut cluster, extension, setup).await?;
    Ok(DurabilityBypass {
        after_crash,
        next_epoch,
    })
}
