//! The attack surface as a generated suite: every object of the installed build (read from
//! pg_catalog) times every statement class PostgreSQL accepts against an object of its kind
//! ([`CLASSES`]), run as each threat role ([`Role`]) inside a transaction held open while a
//! lease workload runs on other sessions.
//!
//! A statement passes when it is refused, or harmless: the workload's calls kept their
//! latency bound ([`BOUND`]), no lease state changed, the build's objects did not change, and
//! no object of another role came to depend on one of the build's internals (which would
//! make an update or a drop of the extension fail). Stalls show only when a lease call holds
//! a lock the statement wants, so an *anchor* transaction of the workload holds, for the
//! whole run, the locks lease calls take (a read and a write of the table, its index, its
//! TOAST table and index): a statement that queues a lock behind it stalls every later call,
//! as the issue's `CREATE TEMP TABLE .. PARTITION OF lease.leases` did on 0.2.0.
//!
//! What a role may do by PostgreSQL's own rules (the database owner's `VACUUM FULL`, the
//! extension owner's `DROP EXTENSION`) is a documented limitation ([`LIMITATIONS`]): the
//! suite checks that it still behaves as documented.

mod classes;
mod objects;
mod run;
mod world;

pub use classes::{Class, Shape, CLASSES, REGCLASS_FUNCTIONS};
pub use objects::{Kind, Object};
pub use run::{classes_on, run, ClassOutcome, SurfaceOptions};
pub use world::digest;

use std::fmt;
use std::time::Duration;

/// The latency bound of a lease call while a statement of the suite is in flight: 2 s.
/// A call here answers in 1-30 ms (a write waits for its commit's fsync; the slowest seen
/// under a parallel `cargo build` on this 2-core machine: about 300 ms), so the bound leaves a
/// margin of 6x over the slowest. A stalled call waits as long as the statement's lock stays
/// queued (or held), and the suite keeps it so until the probe's call is over the bound.
pub const BOUND: Duration = Duration::from_secs(2);

/// A threat role.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Role {
    /// An application role with PUBLIC's privileges only (it creates nothing but
    /// temporary objects).
    App,
    /// Another ordinary role, which owns a schema of its own.
    Other,
    /// The database's owner, who installed the (trusted) extension and owns it.
    Owner,
}

impl Role {
    pub const ALL: [Role; 3] = [Role::App, Role::Other, Role::Owner];

    pub fn name(self) -> &'static str {
        match self {
            Role::App => "a PUBLIC-only application role",
            Role::Other => "another ordinary role",
            Role::Owner => "the database owner who installed the extension",
        }
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The negative control of a class: where its statements must be found harmful.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Control {
    /// pg_lease 0.2.0 as released (its table and helpers in schema `lease`, which PUBLIC may
    /// use), as this role.
    V020(Role),
    /// A surface mutant of this build ([`MUTANTS`]), as this role.
    Mutant(&'static str, Role),
    /// Only the extension's (or the database's) owner may run it, by PostgreSQL's rules: the
    /// owner's documented effect ([`LIMITATIONS`]) is what the suite must see.
    OwnerOnly,
    /// No build can make it harmful, by PostgreSQL's rules (the reason).
    Never(&'static str),
}

/// What a role may do by PostgreSQL's rules, which the suite pins instead of refusing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Effect {
    /// Its lock, queued behind an open lease call, stalls every later call while it waits.
    Stalls,
    /// It succeeds (and is rolled back by the suite); nothing but its documented effect.
    Succeeds,
}

/// A documented limitation: a class a role may run with an effect the contract tolerates
/// (specs/SEMANTICS.md section 13 says why).
#[derive(Clone, Copy, Debug)]
pub struct Limitation {
    pub class: &'static str,
    pub role: Role,
    /// The objects it applies to (a part of their label), or every object of the class.
    pub object: Option<&'static str>,
    /// The majors it applies to (first, last).
    pub majors: (u32, u32),
    pub effect: Effect,
    pub why: &'static str,
}

/// The documented limitations, for every build (they are PostgreSQL's rules for owners).
pub const LIMITATIONS: &[Limitation] = &[
    Limitation {
        class: "vacuum full database",
        role: Role::Owner,
        object: None,
        majors: (14, 99),
        effect: Effect::Stalls,
        why: "a database's owner may VACUUM FULL every table in it (an ACCESS EXCLUSIVE lock)",
    },
    Limitation {
        class: "reindex database",
        role: Role::Owner,
        object: None,
        majors: (14, 99),
        effect: Effect::Stalls,
        why: "a database's owner may REINDEX DATABASE; on every tested major (17 and 18 \
              too, seen here) it queues a lock on the lease table",
    },
    Limitation {
        class: "vacuum full table",
        role: Role::Owner,
        object: Some("lease_dump.leases"),
        majors: (18, 99),
        effect: Effect::Stalls,
        why: "PostgreSQL 18 vacuums a table's inheritance children with it: the database's \
              owner (who may VACUUM FULL the whole database anyway) reaches the lease table \
              through lease_dump.leases, its parent",
    },
    Limitation {
        class: "drop extension",
        role: Role::Owner,
        object: None,
        majors: (14, 99),
        effect: Effect::Stalls,
        why: "the extension's owner may drop it; while its lock waits for a lease call, it \
              stalls the calls after it",
    },
    Limitation {
        class: "drop extension cascade",
        role: Role::Owner,
        object: None,
        majors: (14, 99),
        effect: Effect::Stalls,
        why: "as drop extension",
    },
    Limitation {
        class: "alter extension update",
        role: Role::Owner,
        object: None,
        majors: (14, 99),
        effect: Effect::Succeeds,
        why: "the extension's owner may update it (to its installed version: nothing happens)",
    },
    Limitation {
        class: "comment on extension",
        role: Role::Owner,
        object: None,
        majors: (14, 99),
        effect: Effect::Succeeds,
        why: "the extension's owner may comment on it",
    },
    Limitation {
        class: "alter extension add schema",
        role: Role::Owner,
        object: None,
        majors: (14, 99),
        effect: Effect::Succeeds,
        why: "the extension's owner may add an object it owns to it",
    },
    dump_read("create temp view over"),
    dump_read("create materialized view over"),
    dump_read("temp table column of type"),
    dump_read("function of type"),
    dump_read("domain over type"),
    dump_read("composite type with type"),
];

/// The database owner reads `lease_dump.leases` (for pg_dump), so it may make objects of
/// its own depend on that table or its row type.
const fn dump_read(class: &'static str) -> Limitation {
    Limitation {
        class,
        role: Role::Owner,
        object: Some("lease_dump.leases"),
        majors: (14, 99),
        effect: Effect::Succeeds,
        why: "the database owner may read lease_dump.leases (to pg_dump its database), so \
              its own objects may depend on that table or its row type (an update that must \
              change that table fails until it drops them)",
    }
}

/// The limitation of `class` for `role` on `object` (its label) on `major`, if any.
pub fn limitation(
    class: &str,
    role: Role,
    object: &str,
    major: u32,
) -> Option<&'static Limitation> {
    LIMITATIONS.iter().find(|l| {
        l.class == class
            && l.role == role
            && l.object.is_none_or(|o| object.contains(o))
            && (l.majors.0..=l.majors.1).contains(&major)
    })
}

/// A deliberately exposed build: a negative control of the classes whose [`Control`] names it
/// (edits of the 0.3.0 install script, like the security mutants).
#[derive(Clone, Copy, Debug)]
pub struct SurfaceMutant {
    pub name: &'static str,
    pub exposes: &'static str,
    pub edits: &'static [(&'static str, &'static str)],
}

impl SurfaceMutant {
    /// The build as an extension of its own, `pg_lease_<name>`.
    pub fn files(&self) -> Result<crate::extension::ExtensionFiles, crate::extension::StaleMutant> {
        crate::extension::ExtensionFiles::edited(self.name, self.edits)
    }
}

/// The last lines of the 0.3.0 install script.
const LAST_LINES: &str = "         WHERE l.key = inspect.key COLLATE \"C\";\nEND\n$$;\n";

/// The negative controls of the suite.
pub const MUTANTS: &[SurfaceMutant] = &[
    SurfaceMutant {
        name: "surface_helpers_executable_by_public",
        exposes: "USAGE on lease_internal and EXECUTE on every helper for PUBLIC, and _take \
                  SECURITY DEFINER (a helper that takes a key as its owner)",
        edits: &[(
            LAST_LINES,
            "         WHERE l.key = inspect.key COLLATE \"C\";\nEND\n$$;\n\
             GRANT USAGE ON SCHEMA lease_internal TO PUBLIC;\n\
             GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA lease_internal TO PUBLIC;\n\
             ALTER FUNCTION lease_internal._take(text, text, interval, boolean) SECURITY DEFINER;\n",
        )],
    },
    SurfaceMutant {
        name: "surface_table_granted_to_public",
        exposes: "every privilege on the lease table for PUBLIC",
        edits: &[(
            "REVOKE ALL ON lease_internal.leases FROM PUBLIC;\n",
            "GRANT USAGE ON SCHEMA lease_internal TO PUBLIC;\n\
             GRANT ALL ON lease_internal.leases TO PUBLIC;\n",
        )],
    },
    SurfaceMutant {
        name: "surface_owned_by_installer",
        exposes: "every object owned by the installing role (the database owner)",
        edits: &[(
            LAST_LINES,
            "         WHERE l.key = inspect.key COLLATE \"C\";\nEND\n$$;\n\
             DO $owned$\n\
             DECLARE r record;\n\
             BEGIN\n\
                 FOR r IN SELECT format('ALTER %s %s OWNER TO @extowner@', k, o) AS sql FROM (\n\
                     SELECT 'SCHEMA' AS k, quote_ident(nspname) AS o FROM pg_namespace WHERE nspname LIKE 'lease%'\n\
                     UNION ALL SELECT 'TABLE', oid::regclass::text FROM pg_class\n\
                      WHERE relkind = 'r' AND relnamespace::regnamespace::text LIKE 'lease%'\n\
                     UNION ALL SELECT 'ROUTINE', oid::regprocedure::text FROM pg_proc\n\
                      WHERE pronamespace::regnamespace::text LIKE 'lease%') AS x\n\
                 LOOP EXECUTE r.sql; END LOOP;\n\
             END\n\
             $owned$;\n\
             GRANT USAGE ON SCHEMA lease_internal, lease_dump TO @extowner@;\n",
        )],
    },
];

#[cfg(test)]
mod tests {
    use super::*;

    /// Every surface mutant's edits apply to the current install script (exactly once each),
    /// and every mutant a class's control names exists: a stale one fails here, without a
    /// server, rather than in the negative-control test.
    #[test]
    fn every_surface_mutant_applies_and_every_named_one_exists() {
        for m in MUTANTS {
            m.files().unwrap_or_else(|e| panic!("{}: {e:?}", m.name));
        }
        for class in CLASSES {
            if let Control::Mutant(name, _) = class.control {
                assert!(
                    MUTANTS.iter().any(|m| m.name == name),
                    "{}: no surface mutant {name}",
                    class.name
                );
            }
        }
    }
}
