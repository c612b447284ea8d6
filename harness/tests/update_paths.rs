//! The install script and the update scripts define the same objects: a fresh install of
//! the current version and installs updated to it from 0.1.0 (one step and through 0.2.0)
//! and from 0.2.0 have the same catalog digest (harness::security::surface::digest: every
//! member's definition, owner, privileges, comment, and every dependency on the build), and
//! an update keeps every lease and epoch. The digest's negative control: an update script
//! with one grant left out is told apart from the fresh install.

use harness::client::{self, Acquire};
use harness::extension::{ExtensionFiles, Release};
use harness::pg::{quote_ident, shared, test_majors, Cluster, PgInstall};
use harness::security::surface::digest;
use std::time::Duration;

const NAME: &str = "pg_lease_update_paths";
const DAY: Duration = Duration::from_secs(86_400);

/// How an install reaches the current version: `CREATE EXTENSION .. VERSION`, then each
/// `ALTER EXTENSION .. UPDATE TO`.
struct Path {
    what: &'static str,
    create: Option<&'static str>,
    updates: &'static [&'static str],
}

const FRESH: Path = Path {
    what: "a fresh install of 0.3.0",
    create: None,
    updates: &[],
};

const PATHS: &[Path] = &[
    Path {
        what: "0.1.0 updated in one step",
        create: Some("0.1.0"),
        updates: &["0.3.0"],
    },
    Path {
        what: "0.1.0 updated through 0.2.0",
        create: Some("0.1.0"),
        updates: &["0.2.0", "0.3.0"],
    },
    Path {
        what: "0.2.0 updated",
        create: Some("0.2.0"),
        updates: &["0.3.0"],
    },
];

/// The files of the current build plus the released install scripts, under `name`.
fn files(name: &str) -> ExtensionFiles {
    ExtensionFiles::pg_lease().updatable_from(Release::V0_2_0, name)
}

/// Installs `name` along `path` in a new database; its digest, and the epoch and holder of
/// a lease granted before the first update (`None` for a fresh install).
async fn installed(
    cluster: &Cluster,
    name: &str,
    path: &Path,
    n: usize,
) -> (Vec<String>, Option<(i64, Option<String>)>) {
    let db = format!("update_paths_{}_{n}", std::process::id());
    let admin = cluster.connect("postgres").await.expect("connect");
    admin
        .batch_execute(&format!("CREATE DATABASE {}", quote_ident(&db)))
        .await
        .expect("create database");
    let c = cluster.connect(&db).await.expect("connect");
    let version = path
        .create
        .map(|v| format!(" VERSION '{v}'"))
        .unwrap_or_default();
    c.batch_execute(&format!("CREATE EXTENSION {}{version}", quote_ident(name)))
        .await
        .unwrap_or_else(|e| panic!("{}: create: {e:?}", path.what));
    let mut before = None;
    if path.create.is_some() {
        let granted = client::acquire(&c, "kept", "holder", DAY, Duration::ZERO)
            .await
            .expect("a grant before the update");
        assert!(matches!(granted, Acquire::Acquired { epoch: 1, .. }));
        before = Some(());
    }
    for to in path.updates {
        c.batch_execute(&format!(
            "ALTER EXTENSION {} UPDATE TO '{to}'",
            quote_ident(name)
        ))
        .await
        .unwrap_or_else(|e| panic!("{}: update to {to}: {e:?}", path.what));
    }
    let kept = match before {
        Some(()) => {
            let row = client::inspect(&c, "kept").await.expect("inspect");
            row.map(|r| (r.epoch, r.owner.filter(|_| r.held)))
        }
        None => None,
    };
    let mut lines: Vec<String> = digest(&c, name)
        .await
        .expect("the digest")
        .iter()
        .map(|l| without_toast_oids(l))
        .collect();
    lines.sort();
    drop(c);
    admin
        .batch_execute(&format!("DROP DATABASE {} WITH (FORCE)", quote_ident(&db)))
        .await
        .expect("drop database");
    (lines, kept)
}

/// `line` with the OID in each TOAST table's name (`pg_toast.pg_toast_<oid of its table>`)
/// replaced by `N`: OIDs differ between two installs.
fn without_toast_oids(line: &str) -> String {
    let mut out = String::new();
    let mut rest = line;
    while let Some(at) = rest.find("pg_toast_") {
        out.push_str(&rest[..at + "pg_toast_".len()]);
        rest = rest[at + "pg_toast_".len()..].trim_start_matches(|c: char| c.is_ascii_digit());
        out.push('N');
    }
    out.push_str(rest);
    out
}

/// The lines of sorted `a` and `b` not matched one for one in the other.
fn difference(a: &[String], b: &[String]) -> Vec<String> {
    let (mut i, mut j) = (0, 0);
    let mut out = Vec::new();
    while i < a.len() || j < b.len() {
        match (a.get(i), b.get(j)) {
            (Some(x), Some(y)) if x == y => (i, j) = (i + 1, j + 1),
            (Some(x), None) => {
                out.push(format!("only in the fresh install: {x}"));
                i += 1;
            }
            (Some(x), Some(y)) if x < y => {
                out.push(format!("only in the fresh install: {x}"));
                i += 1;
            }
            (_, Some(y)) => {
                out.push(format!("only in the updated one: {y}"));
                j += 1;
            }
            (None, None) => break,
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_update_path_defines_what_the_install_script_defines() {
    for major in test_majors() {
        let install = PgInstall::ensure(major).expect("the tested major");
        install
            .install_extension(&files(NAME))
            .expect("install the files");
        let cluster = shared(major).expect("a cluster");
        let (fresh, _) = installed(cluster, NAME, &FRESH, 0).await;
        assert!(fresh
            .iter()
            .any(|l| l.starts_with("function lease.acquire")));
        for (i, path) in PATHS.iter().enumerate() {
            let (updated, kept) = installed(cluster, NAME, path, i + 1).await;
            let diff = difference(&fresh, &updated);
            assert!(diff.is_empty(), "PG {major}: {}: {diff:#?}", path.what);
            assert_eq!(
                kept,
                Some((1, Some("holder".to_string()))),
                "PG {major}: {}: the lease granted before the update",
                path.what
            );
        }
    }
}

/// The negative control: the 0.2.0 -> 0.3.0 update without the grant of `lease_dump` to
/// the database owner is told apart from the fresh install, by that grant.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_update_script_missing_a_grant_is_told_apart() {
    let major = test_majors()[0];
    let install = PgInstall::ensure(major).expect("the tested major");
    let name = "pg_lease_update_missing_grant";
    let grant = "GRANT USAGE ON SCHEMA lease_dump TO pg_database_owner;\n";
    let mut broken = files(name);
    let script = format!("{name}--0.2.0--0.3.0.sql");
    let (_, text) = broken
        .scripts
        .iter_mut()
        .find(|(f, _)| *f == script)
        .expect("the 0.2.0 -> 0.3.0 update");
    assert!(text.contains(grant), "the update grants lease_dump");
    *text = text.replacen(grant, "", 1);
    install
        .install_extension(&broken)
        .expect("install the files");
    let cluster = shared(major).expect("a cluster");
    let (fresh, _) = installed(cluster, name, &FRESH, 10).await;
    let (updated, _) = installed(cluster, name, &PATHS[2], 11).await;
    let diff = difference(&fresh, &updated);
    assert!(
        diff.len() == 2 && diff.iter().all(|l| l.contains("schema lease_dump")),
        "{diff:#?}"
    );
}
