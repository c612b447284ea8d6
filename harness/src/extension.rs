//! The pg_lease extension files, embedded from `extension/`, and their installation
//! into a PostgreSQL install's extension directory.

use crate::pg::{PgError, PgInstall, Result};
use std::fs;
use std::path::Path;

/// The extension's name, as in `CREATE EXTENSION pg_lease`.
pub const NAME: &str = "pg_lease";
/// The extension name under which [`ExtensionFiles::version_0_1_0`] installs pg_lease 0.1.0.
pub const NAME_0_1_0: &str = "pg_lease_v0_1_0";
/// The version `CREATE EXTENSION` installs by default.
pub const VERSION: &str = "0.2.0";
/// `pg_lease.control`.
pub const CONTROL: &str = include_str!("../../extension/pg_lease.control");
/// `pg_lease--0.1.0.sql`: the base script (0.1.0).
pub const BASE_SCRIPT: &str = include_str!("../../extension/pg_lease--0.1.0.sql");
/// `pg_lease--0.1.0--0.2.0.sql`: every definition of 0.2.0. `CREATE EXTENSION` runs the
/// base script, then this update.
pub const SCRIPT: &str = include_str!("../../extension/pg_lease--0.1.0--0.2.0.sql");

/// The released version whose base script is [`BASE_SCRIPT`].
pub const BASE_VERSION: &str = "0.1.0";

/// [`CONTROL`] with `default_version` set to `version` (every other line as shipped).
fn control_for(version: &str) -> String {
    CONTROL
        .lines()
        .map(|line| {
            if line.trim_start().starts_with("default_version") {
                format!("default_version = '{version}'\n")
            } else {
                format!("{line}\n")
            }
        })
        .collect()
}

/// The script files of an extension named `name`, with `update` as its 0.1.0 -> 0.2.0
/// script.
fn scripts(name: &str, update: String) -> Vec<(String, String)> {
    vec![
        (format!("{name}--0.1.0.sql"), BASE_SCRIPT.to_string()),
        (format!("{name}--0.1.0--{VERSION}.sql"), update),
    ]
}

/// One extension to install: its control file and versioned scripts.
#[derive(Debug, Clone)]
pub struct ExtensionFiles {
    pub name: String,
    pub control: String,
    /// (file name, content), e.g. ("pg_lease--0.1.0.sql", SCRIPT)
    pub scripts: Vec<(String, String)>,
}

impl ExtensionFiles {
    /// pg_lease as shipped in `extension/`.
    pub fn pg_lease() -> ExtensionFiles {
        ExtensionFiles {
            name: NAME.to_string(),
            control: CONTROL.to_string(),
            scripts: scripts(NAME, SCRIPT.to_string()),
        }
    }

    /// pg_lease 0.1.0 as released (the base script alone, `default_version = '0.1.0'`),
    /// under the extension name `pg_lease_v0_1_0`: the version the 0.2.0 fixes are
    /// compared with. Its objects live in schema `lease` like pg_lease's, so the two
    /// cannot be created in the same database.
    pub fn version_0_1_0() -> ExtensionFiles {
        let name = NAME_0_1_0.to_string();
        ExtensionFiles {
            control: control_for(BASE_VERSION),
            scripts: vec![(
                format!("{name}--{BASE_VERSION}.sql"),
                BASE_SCRIPT.to_string(),
            )],
            name,
        }
    }

    /// Writes the files into `install`'s extension directory (atomically per
    /// file, and only when the content differs, so concurrent test binaries
    /// never see a half-written script).
    pub fn install(&self, install: &PgInstall) -> Result<()> {
        let dir = install.extension_dir();
        let mut files = vec![(format!("{}.control", self.name), self.control.as_str())];
        files.extend(self.scripts.iter().map(|(n, c)| (n.clone(), c.as_str())));
        for (name, content) in files {
            write_if_changed(&dir, &name, content)?;
        }
        Ok(())
    }
}

/// A deliberately broken pg_lease, used as a negative control: the checks
/// named in `caught_by` must fail against it.
#[derive(Debug, Clone, Copy)]
pub struct Mutant {
    pub name: &'static str,
    /// What the mutation breaks.
    pub breaks: &'static str,
    /// Exact (unique) text replacements applied to the 0.2.0 definitions ([`SCRIPT`]).
    pub edits: &'static [(&'static str, &'static str)],
    /// Conformance checks that must fail against this mutant.
    pub caught_by: &'static [&'static str],
}

/// A mutant edit that no longer matches the script (the script changed).
#[derive(Debug, thiserror::Error)]
#[error("mutant {mutant}: the text {pattern:?} occurs {count} times in the script, expected exactly once")]
pub struct StaleMutant {
    pub mutant: &'static str,
    pub pattern: &'static str,
    pub count: usize,
}

/// The negative controls of the conformance suite.
pub const MUTANTS: &[Mutant] = &[
    Mutant {
        name: "release_keeps_epoch",
        breaks: "release frees the key without advancing the epoch",
        edits: &[(
            "SET owner = NULL,\n                   expires_at = NULL,\n                   epoch = l.epoch + 1",
            "SET owner = NULL,\n                   expires_at = NULL,\n                   epoch = l.epoch",
        )],
        caught_by: &["release_frees_and_advances_the_epoch"],
    },
    Mutant {
        name: "renew_ignores_expiry",
        breaks: "renew (and release) succeed on a lapsed lease: neither the lock-free read nor the check under the lock looks at the expiry",
        edits: &[
            ("        WHEN v_expires <= clock_timestamp() THEN 'lapsed'\n", ""),
            (
                "AND v_epoch = p_epoch AND v_expires > v_now THEN",
                "AND v_epoch = p_epoch THEN",
            ),
        ],
        caught_by: &[
            "renew_and_release_statuses_follow_precedence",
            "lapsed_lease_is_taken_over_at_once_with_a_greater_epoch",
            "downtime_never_extends_ownership",
        ],
    },
    Mutant {
        name: "takeover_reuses_epoch",
        breaks: "a grant over a free or lapsed row keeps the old epoch",
        edits: &[(
            "SET owner = p_owner,\n               epoch = l.epoch + 1,",
            "SET owner = p_owner,\n               epoch = l.epoch,",
        )],
        caught_by: &[
            "release_frees_and_advances_the_epoch",
            "lapsed_lease_is_taken_over_at_once_with_a_greater_epoch",
        ],
    },
    Mutant {
        name: "acquire_ignores_holder",
        breaks: "acquire takes a key away from its live holder",
        edits: &[
            (
                "IF v_found AND v_owner IS NOT NULL AND v_expires > v_now THEN",
                "IF v_found AND v_owner IS NOT NULL AND v_expires > v_now AND v_owner = acquire.owner COLLATE \"C\" THEN",
            ),
            (
                "IF v_owner IS NULL OR v_expires <= v_now THEN",
                "IF true THEN",
            ),
        ],
        caught_by: &[
            "denied_acquire_returns_nulls_and_writes_nothing",
            "exactly_one_of_concurrent_acquirers_wins",
        ],
    },
    Mutant {
        name: "probe_locks_the_row",
        breaks: "the acquire probe takes a row lock (denied acquires write; waiters stall the holder)",
        edits: &[(
            "WHERE l.key = acquire.key COLLATE \"C\";\n        v_found := FOUND;",
            "WHERE l.key = acquire.key COLLATE \"C\" FOR UPDATE;\n        v_found := FOUND;",
        )],
        caught_by: &[
            "denied_acquire_returns_nulls_and_writes_nothing",
            "blocking_waiters_never_stall_the_holders_renew",
        ],
    },
    Mutant {
        name: "lost_race_keeps_row_lock",
        breaks: "a lost write attempt of a blocking acquire is not rolled back: its row lock is kept across the waiter's sleeps",
        edits: &[(
            "                    RAISE EXCEPTION USING ERRCODE = 'LE001';",
            "                    NULL;",
        )],
        caught_by: &["a_waiter_that_lost_a_race_never_stalls_the_holders_renew"],
    },
    Mutant {
        name: "inspect_shows_lapsed_as_held",
        breaks: "inspect reports a lapsed lease as held",
        edits: &[(
            "LATERAL (SELECT l.owner IS NOT NULL AND l.expires_at > clock_timestamp() AS live)",
            "LATERAL (SELECT l.owner IS NOT NULL AS live)",
        )],
        caught_by: &["inspect_tells_never_leased_free_held_and_lapsed_apart"],
    },
    Mutant {
        name: "no_key_length_limit",
        breaks: "oversized keys reach the btree and fail with 54000 instead of 22023",
        edits: &[(
            "SELECT value IS NULL OR pg_catalog.octet_length(value) NOT BETWEEN 1 AND 1024",
            "SELECT value IS NULL OR pg_catalog.octet_length(value) NOT BETWEEN 1 AND 1000000",
        )],
        caught_by: &["invalid_input_is_22023_naming_every_violation_and_changes_nothing"],
    },
];

impl ExtensionFiles {
    /// pg_lease unchanged, under another extension name (the control for mutant runs).
    pub fn renamed(name: &str) -> ExtensionFiles {
        ExtensionFiles {
            name: name.to_string(),
            control: CONTROL.to_string(),
            scripts: scripts(name, SCRIPT.to_string()),
        }
    }

    /// The mutant as an extension of its own, `pg_lease_<mutant name>`.
    pub fn mutant(m: &Mutant) -> Result<ExtensionFiles, StaleMutant> {
        let mut script = SCRIPT.to_string();
        for (from, to) in m.edits {
            let count = script.matches(from).count();
            if count != 1 {
                return Err(StaleMutant {
                    mutant: m.name,
                    pattern: from,
                    count,
                });
            }
            script = script.replacen(from, to, 1);
        }
        let name = format!("{NAME}_{}", m.name);
        Ok(ExtensionFiles {
            scripts: scripts(&name, script),
            control: CONTROL.to_string(),
            name,
        })
    }
}

/// The `extversion` of extension `name` in the database `client` is connected to (none
/// when it is not created there).
pub async fn installed_version(
    client: &tokio_postgres::Client,
    name: &str,
) -> Result<Option<String>, tokio_postgres::Error> {
    let row = client
        .query_opt(
            "SELECT extversion FROM pg_catalog.pg_extension WHERE extname = $1::text::name",
            &[&name],
        )
        .await?;
    row.map(|r| r.try_get(0)).transpose()
}

fn write_if_changed(dir: &Path, name: &str, content: &str) -> Result<()> {
    let path = dir.join(name);
    if fs::read_to_string(&path)
        .map(|c| c == content)
        .unwrap_or(false)
    {
        return Ok(());
    }
    let err = |source| PgError::ExtensionInstall {
        dir: dir.to_path_buf(),
        source,
    };
    fs::create_dir_all(dir).map_err(err)?;
    let tmp = dir.join(format!(".{name}.{}.tmp", std::process::id()));
    fs::write(&tmp, content).map_err(err)?;
    use std::os::unix::fs::PermissionsExt;
    fs::set_permissions(&tmp, fs::Permissions::from_mode(0o644)).map_err(err)?;
    fs::rename(&tmp, &path).map_err(|e| {
        let _ = fs::remove_file(&tmp);
        err(e)
    })
}
