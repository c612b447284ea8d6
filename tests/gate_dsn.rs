//! `leasecheck gate --dsn URL` against a server the gate does not start: a throwaway PG 15
//! cluster started here, with the build installed into its extension directory the way a
//! server's owner would (`make install`). The suites that need a managed server are reported
//! skipped, never passed; a catalogued mutant installed on the server fails the gate naming
//! its invariant; nothing the gate created stays on the server.

mod common;
use common::{killing_invariants, leasecheck, listed_with_needs, mutant, summary};

use harness::extension::ExtensionFiles;
use harness::pg::{Cluster, ClusterOptions, PgInstall};
use serde_json::Value;
use std::collections::BTreeSet;

/// A PG 15 cluster with `files` installed into its install's extension directory (this
/// process's private copy), standing for a server whose owner installed the build.
fn server_with(files: ExtensionFiles) -> Cluster {
    let install = PgInstall::ensure(15).expect("PostgreSQL 15");
    let options = ClusterOptions {
        extensions: vec![files],
        ..ClusterOptions::default()
    };
    Cluster::start_with(&install, options).expect("a cluster")
}

/// The password the URLs carry (the cluster trusts local connections, so it is not
/// checked): it must never be printed or written to the report.
const PASSWORD: &str = "pw-never-printed";

fn url(cluster: &Cluster) -> String {
    format!(
        "postgres://{}:{PASSWORD}@{}:{}/postgres",
        cluster.superuser(),
        cluster.host(),
        cluster.port()
    )
}

/// Every database and role on the server.
fn inventory(cluster: &Cluster) -> (BTreeSet<String>, BTreeSet<String>) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    runtime.block_on(async {
        let c = cluster.connect("postgres").await.expect("connect");
        let names = |sql: &'static str| {
            let c = &c;
            async move {
                c.query(sql, &[])
                    .await
                    .expect("catalog query")
                    .iter()
                    .map(|r| r.get::<_, String>(0))
                    .collect::<BTreeSet<String>>()
            }
        };
        (
            names("SELECT datname::text FROM pg_database").await,
            names("SELECT rolname::text FROM pg_roles").await,
        )
    })
}

/// (suite, check, status) of every check.
fn checks(summary: &Value) -> Vec<(String, String, String)> {
    let mut out = Vec::new();
    for major in summary["majors"].as_array().expect("majors") {
        for suite in major["suites"].as_array().expect("suites") {
            for check in suite["checks"].as_array().expect("checks") {
                out.push((
                    suite["suite"].as_str().unwrap_or("").to_string(),
                    check["name"].as_str().unwrap_or("").to_string(),
                    check["status"].as_str().unwrap_or("").to_string(),
                ));
            }
        }
    }
    out
}

/// What `args --list` says needs a managed server: the suites whose every check does,
/// and the checks that do.
fn needing_a_managed_server(args: &[&str]) -> (BTreeSet<String>, BTreeSet<String>) {
    let (mut suites, mut checks) = (BTreeSet::new(), BTreeSet::new());
    for (_, suite, listed) in listed_with_needs(args) {
        if listed.iter().all(|(_, managed)| *managed) {
            suites.insert(suite);
        }
        checks.extend(listed.into_iter().filter(|(_, m)| *m).map(|(n, _)| n));
    }
    (suites, checks)
}

/// The shipped extension on an existing server: the conformance checks that need no
/// restart, the campaign and the stepped plans pass; the restart/crash checks, installcheck and security are
/// skipped (not passed), and the run exits 0 saying so; the server's scripts are verified
/// against the build; the server has the same databases and roles afterwards.
/// About 60 seconds.
#[test]
fn an_existing_server_is_gated_on_the_checks_that_need_no_restart() {
    let cluster = server_with(ExtensionFiles::pg_lease());
    let before = inventory(&cluster);
    let report = tempfile::tempdir().unwrap();
    let report_arg = report.path().display().to_string();
    let dsn = url(&cluster);
    let args = [
        "gate",
        "--dsn",
        &dsn,
        "--quick",
        "--seed",
        "7",
        "--report",
        &report_arg,
    ];
    let (code, out) = leasecheck(&args);
    println!("{out}");
    let summary = summary(report.path());
    assert_eq!(code, 0, "{out}");
    assert_eq!(summary["status"], "passed", "{out}");
    assert_eq!(summary["majors"][0]["backend"], "dsn");
    let suites: Vec<(&str, &str)> = summary["majors"][0]["suites"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| (s["suite"].as_str().unwrap(), s["status"].as_str().unwrap()))
        .collect();
    // These suites with these statuses, in this order; a suite added later is skipped
    // exactly when `--list` marks every check of it as needing a managed server.
    let known = [
        ("liveness", "passed"),
        ("installcheck", "skipped"),
        ("conformance", "passed"),
        ("campaign", "passed"),
        ("stepped", "passed"),
        ("matrix", "skipped"),
        ("security", "skipped"),
        ("faults", "skipped"),
        ("bench", "skipped"),
    ];
    let is_known = |name: &str| known.iter().any(|(k, _)| *k == name);
    let ran_known: Vec<(&str, &str)> = suites
        .iter()
        .copied()
        .filter(|(n, _)| is_known(n))
        .collect();
    assert_eq!(ran_known, known);
    let (managed_only, managed) = needing_a_managed_server(&args);
    for (name, status) in suites.iter().filter(|(n, _)| !is_known(n)) {
        let want = if managed_only.contains(*name) {
            "skipped"
        } else {
            "passed"
        };
        assert_eq!(*status, want, "{name}: {out}");
    }
    // The conformance checks the harness marks as restarting the server are the skipped ones.
    let restarting: BTreeSet<&str> = harness::conformance::checks()
        .iter()
        .filter(|c| c.needs == harness::judgement::Needs::ManagedServer)
        .map(|c| c.name)
        .collect();
    assert!(!restarting.is_empty());
    for (suite, check, status) in checks(&summary) {
        let want = match suite.as_str() {
            "conformance" if restarting.contains(check.as_str()) => "skipped",
            "liveness" | "conformance" | "campaign" | "stepped" => "passed",
            s if is_known(s) => "skipped",
            _ if managed.contains(&check) => "skipped",
            _ => "passed",
        };
        assert_eq!(status, want, "{suite} / {check}: {out}");
    }
    assert!(
        out.contains("skipped (needs a managed server, not passed)"),
        "{out}"
    );
    assert_eq!(summary["server"]["scripts_verified"], true, "{out}");
    let junit = std::fs::read_to_string(report.path().join("junit.xml")).unwrap();
    assert!(
        junit.contains("<skipped message=\"needs a managed server"),
        "{junit}"
    );
    let html = std::fs::read_to_string(report.path().join("index.html")).unwrap();
    assert!(html.contains("class=\"skipped\""), "{html}");
    assert_eq!(
        inventory(&cluster),
        before,
        "the gate left databases or roles"
    );
    let json = std::fs::read_to_string(report.path().join("summary.json")).unwrap();
    assert!(!out.contains(PASSWORD) && !json.contains(PASSWORD), "{out}");
    assert!(
        !summary["server"]["removed_databases"]
            .as_array()
            .unwrap()
            .is_empty(),
        "the gate created no database to remove: {out}"
    );
}

/// Negative control: a catalogued mutant's SQL installed on the server (under an extension
/// name of its own, as one install script) fails the gate with exit 1, the campaign naming
/// the invariant the model gives the mutation, and the server is left as found. The server
/// is given as a `key=value` connection string.
/// About 20 seconds.
#[test]
fn a_mutant_installed_on_an_existing_server_fails_the_gate_naming_the_invariant() {
    let m = mutant("takeover_reuses_epoch");
    let mutant = ExtensionFiles::mutant(m).expect("the mutant applies");
    let name = "pg_lease_dsn_mutant";
    let sql = mutant.install_script();
    let version = harness::extension::default_version(&mutant.control).expect("a version");
    let on_server = ExtensionFiles {
        name: name.to_string(),
        control: mutant.control.clone(),
        scripts: vec![(format!("{name}--{version}.sql"), sql.clone())],
    };
    let cluster = server_with(on_server);
    let before = inventory(&cluster);
    let work = tempfile::tempdir().unwrap();
    let (sql_path, control_path) = (
        work.path().join("mutant.sql"),
        work.path().join(format!("{name}.control")),
    );
    std::fs::write(&sql_path, &sql).unwrap();
    std::fs::write(&control_path, &mutant.control).unwrap();
    let report = work.path().join("report");
    // The key=value form of a connection string.
    let dsn = format!(
        "host={} port={} user={} dbname=postgres",
        cluster.host(),
        cluster.port(),
        cluster.superuser()
    );
    let (code, out) = leasecheck(&[
        "gate",
        "--dsn",
        &dsn,
        "--quick",
        "--seed",
        "11",
        "--extension-sql",
        sql_path.to_str().unwrap(),
        "--control",
        control_path.to_str().unwrap(),
        "--suite",
        "campaign",
        "--report",
        report.to_str().unwrap(),
    ]);
    println!("{out}");
    assert_eq!(code, 1, "{out}");
    let summary = summary(&report);
    let campaign = &summary["majors"][0]["suites"][0];
    assert_eq!(campaign["suite"], "campaign");
    assert_eq!(campaign["checks"][0]["status"], "failed", "{out}");
    let named = campaign["checks"][0]["invariant"]
        .as_str()
        .unwrap_or_default();
    let expected = killing_invariants(m);
    assert!(!expected.is_empty(), "the catalogue names the invariants");
    assert!(
        expected.iter().any(|i| i == named),
        "named {named:?}, expected one of {expected:?}: {out}"
    );
    assert_eq!(summary["server"]["scripts_verified"], true, "{out}");
    assert_eq!(
        inventory(&cluster),
        before,
        "the gate left databases or roles"
    );
}

/// The server's files are compared with the build's: the shipped build given against a
/// server running a mutant under the same name is refused as another build (no verdict,
/// exit 2), and an unreachable server is an infrastructure error, not a pass; `--pg` and a
/// malformed string are refused (without printing the password).
#[test]
fn a_server_running_another_build_or_none_gives_no_verdict() {
    let m = mutant("acquire_ignores_holder");
    let mutant = ExtensionFiles::mutant(m).expect("the mutant applies");
    // The mutant under the name pg_lease_other, the shipped build given under that name.
    let name = "pg_lease_other";
    let rename = |files: &ExtensionFiles| ExtensionFiles {
        name: name.to_string(),
        control: files.control.clone(),
        scripts: files
            .scripts
            .iter()
            .map(|(file, text)| {
                let versions = file.split_once("--").map_or("", |(_, v)| v);
                (format!("{name}--{versions}"), text.clone())
            })
            .collect(),
    };
    // The server has the shipped build's files with the mutant's install script: the same
    // file names, another build.
    let mut server_files = rename(&ExtensionFiles::pg_lease());
    let mutated = rename(&mutant);
    for (file, text) in &mutated.scripts {
        if let Some(slot) = server_files.scripts.iter_mut().find(|(f, _)| f == file) {
            slot.1 = text.clone();
        }
    }
    let cluster = server_with(server_files);
    let build = tempfile::tempdir().unwrap();
    for (file, text) in rename(&ExtensionFiles::pg_lease()).scripts.iter().chain(
        [(
            format!("{name}.control"),
            ExtensionFiles::pg_lease().control,
        )]
        .iter(),
    ) {
        std::fs::write(build.path().join(file), text).unwrap();
    }
    let dsn = url(&cluster);
    let build_dir = build.path().to_str().unwrap();
    let (code, out) = leasecheck(&[
        "gate",
        "--dsn",
        &dsn,
        "--extension",
        build_dir,
        "--suite",
        "campaign",
    ]);
    println!("{out}");
    assert_eq!(code, 2, "{out}");
    assert!(out.contains("the server runs another build"), "{out}");
    drop(cluster);
    let (code, out) = leasecheck(&["gate", "--dsn", &dsn, "--suite", "campaign"]);
    println!("{out}");
    assert_eq!(code, 2, "{out}");
    assert!(out.contains("INFRA"), "{out}");
    // The server's major is the server's: --pg is refused with --dsn, as is a bad string.
    let (code, out) = leasecheck(&["gate", "--dsn", &dsn, "--pg", "14"]);
    assert_eq!(code, 2, "{out}");
    assert!(out.contains("cannot be used with"), "{out}");
    let (code, out) = leasecheck(&["gate", "--dsn", "postgres://u:secret@h:notaport/db"]);
    assert_eq!(code, 2, "{out}");
    assert!(out.contains("--dsn: not a libpq URL"), "{out}");
    assert!(!out.contains("secret"), "the password was printed: {out}");
}

/// A role with CREATEDB but not superuser: the campaign runs (pg_lease is a trusted
/// extension), but the server's files cannot be read, and the summary says the digests are
/// of the local build only; the server is left as found.
#[test]
fn without_superuser_the_server_files_are_reported_not_verified() {
    let cluster = server_with(ExtensionFiles::pg_lease());
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    runtime.block_on(async {
        let c = cluster.connect("postgres").await.expect("connect");
        c.batch_execute("CREATE ROLE gate_creator LOGIN CREATEDB")
            .await
            .expect("a CREATEDB role");
    });
    let before = inventory(&cluster);
    let report = tempfile::tempdir().unwrap();
    let dsn = format!(
        "postgres://gate_creator@{}:{}/postgres",
        cluster.host(),
        cluster.port()
    );
    let (code, out) = leasecheck(&[
        "gate",
        "--dsn",
        &dsn,
        "--seed",
        "5",
        "--suite",
        "campaign",
        "--report",
        report.path().to_str().unwrap(),
    ]);
    println!("{out}");
    assert_eq!(code, 0, "{out}");
    let summary = summary(report.path());
    assert_eq!(summary["server"]["role"], "gate_creator");
    assert_eq!(summary["server"]["scripts_verified"], false, "{out}");
    let note = summary["server"]["scripts"].as_str().unwrap_or("");
    assert!(
        note.contains("not verified: the SHA-256 printed is of the local build"),
        "{note}"
    );
    assert!(out.contains(note), "{out}");
    assert_eq!(
        inventory(&cluster),
        before,
        "the gate left databases or roles"
    );
}
