//! The pg_lease builds the checks install. The PostgreSQL install's extension directory is
//! shared with other checkouts whose tests rewrite `pg_lease`'s files, so every build is
//! installed under an extension name of its own (and its `extversion` checked when it is
//! created).

use harness::extension::{ExtensionFiles, NAME, VERSION};

/// This checkout's pg_lease, unchanged, under a name of its own.
pub const UNDER_TEST: &str = "pg_lease_nemesis_under_test";

/// pg_lease as shipped (0.2.0), as extension [`UNDER_TEST`].
pub fn under_test() -> ExtensionFiles {
    ExtensionFiles::renamed(UNDER_TEST)
}

/// A broken build of 0.2.0 used as a negative control: what it breaks and the SQL that
/// breaks it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BrokenBuild {
    /// The durability trigger dropped: with `synchronous_commit = off` an acknowledged
    /// commit may not be on disk when the server crashes.
    NoDurableCommit,
    /// The lease table made UNLOGGED: crash recovery empties it.
    UnloggedTable,
    /// A blocking acquire whose wait is cancelled (user cancel, statement_timeout) takes
    /// the key anyway and answers a grant.
    CancelledWaitGrants,
    /// A blocking acquire sleeps up to 2 s between probes instead of 50 ms: a release does
    /// not wake it within the poll bound.
    SlowWake,
    /// renew succeeds on a lapsed lease (the lapse checks removed).
    RenewIgnoresExpiry,
}

impl BrokenBuild {
    pub const ALL: [BrokenBuild; 5] = [
        BrokenBuild::NoDurableCommit,
        BrokenBuild::UnloggedTable,
        BrokenBuild::CancelledWaitGrants,
        BrokenBuild::SlowWake,
        BrokenBuild::RenewIgnoresExpiry,
    ];

    /// The extension name it is installed under.
    pub fn extension_name(self) -> String {
        format!("{NAME}_nemesis_{}", self.name().replace('-', "_"))
    }

    pub fn name(self) -> &'static str {
        match self {
            BrokenBuild::NoDurableCommit => "no-durable-commit",
            BrokenBuild::UnloggedTable => "unlogged-table",
            BrokenBuild::CancelledWaitGrants => "cancelled-wait-grants",
            BrokenBuild::SlowWake => "slow-wake",
            BrokenBuild::RenewIgnoresExpiry => "renew-ignores-expiry",
        }
    }

    /// (text to replace exactly once, replacement) in the 0.2.0 update script; an empty
    /// pattern appends the replacement.
    fn edits(self) -> &'static [(&'static str, &'static str)] {
        match self {
            BrokenBuild::NoDurableCommit => &[(
                "",
                "\nDROP TRIGGER leases_commit_durably ON lease.leases;\n",
            )],
            BrokenBuild::UnloggedTable => &[("", "\nALTER TABLE lease.leases SET UNLOGGED;\n")],
            BrokenBuild::CancelledWaitGrants => &[(
                "            PERFORM pg_sleep(GREATEST(0.0, LEAST(0.05,
                extract(epoch FROM v_deadline - v_now),
                extract(epoch FROM v_expires - v_now))));
            CONTINUE;",
                "            BEGIN
                PERFORM pg_sleep(GREATEST(0.0, LEAST(0.05,
                    extract(epoch FROM v_deadline - v_now),
                    extract(epoch FROM v_expires - v_now))));
            EXCEPTION WHEN query_canceled THEN
                UPDATE lease.leases AS l
                   SET owner = acquire.owner, epoch = l.epoch + 1,
                       expires_at = clock_timestamp() + acquire.ttl
                 WHERE l.key = acquire.key COLLATE \"C\"
                RETURNING l.epoch, l.expires_at INTO v_epoch, v_expires;
                acquired := true;
                epoch := v_epoch;
                expires_at := v_expires;
                RETURN NEXT;
                RETURN;
            END;
            CONTINUE;",
            )],
            BrokenBuild::SlowWake => &[("LEAST(0.05,", "LEAST(2.0,")],
            BrokenBuild::RenewIgnoresExpiry => &[
                (
                    "        WHEN v_expires <= clock_timestamp() THEN 'lapsed'\n",
                    "",
                ),
                (
                    "AND v_epoch = p_epoch AND v_expires > v_now THEN",
                    "AND v_epoch = p_epoch THEN",
                ),
            ],
        }
    }

    /// The build's files; `None` when an edit no longer matches the shipped script
    /// exactly once (the script changed: the control must be re-ported).
    pub fn files(self) -> Option<ExtensionFiles> {
        let mut files = ExtensionFiles::renamed(&self.extension_name());
        let update_name = format!("{}--0.1.0--{VERSION}.sql", files.name);
        let (_, script) = files.scripts.iter_mut().find(|(n, _)| *n == update_name)?;
        for (from, to) in self.edits() {
            if from.is_empty() {
                script.push_str(to);
            } else if script.matches(from).count() == 1 {
                *script = script.replacen(from, to, 1);
            } else {
                return None;
            }
        }
        Some(files)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_broken_build_applies_to_the_shipped_script_and_changes_it() {
        let shipped = under_test();
        for b in BrokenBuild::ALL {
            let files = b.files().unwrap_or_else(|| panic!("{} is stale", b.name()));
            assert_ne!(files.scripts[1].1, shipped.scripts[1].1, "{}", b.name());
            assert_eq!(files.scripts[0].1, shipped.scripts[0].1, "{}", b.name());
            assert!(
                files.name.starts_with("pg_lease_nemesis_"),
                "{}",
                files.name
            );
        }
    }
}
