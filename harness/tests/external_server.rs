//! [`Cluster::external`]: an existing server reached by a connection string (here a
//! throwaway PG 15 cluster standing for it). Connections work as on a managed cluster;
//! what needs the server's process or files is the typed `NotManaged` error; what the
//! harness created there is dropped by `remove_created`, and nothing else.

use harness::pg::{Cluster, PgError, PgInstall};

fn managed() -> Cluster {
    Cluster::start(&PgInstall::ensure(15).expect("PostgreSQL 15")).expect("a cluster")
}

fn dsn(cluster: &Cluster, user: &str) -> tokio_postgres::Config {
    format!(
        "host={} port={} user={user} dbname=postgres",
        cluster.host(),
        cluster.port()
    )
    .parse()
    .expect("a connection string")
}

async fn names(cluster: &Cluster, sql: &str) -> Vec<String> {
    let c = cluster.connect("postgres").await.expect("connect");
    let rows = c.query(sql, &[]).await.expect("query");
    rows.iter().map(|r| r.get(0)).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_external_server_connects_refuses_process_work_and_removes_only_its_own() {
    let server = managed();
    // A role of the server's own, named like one the harness would create (its first
    // database is `lc<pid>_ext_0`), there before the harness connected: kept.
    let admin = server.connect("postgres").await.unwrap();
    let pre_existing = format!("lc{}_ext_0_owned_by_the_server", std::process::id());
    admin
        .batch_execute(&format!("CREATE ROLE {pre_existing}"))
        .await
        .unwrap();
    let mut external = Cluster::external(dsn(&server, "postgres")).await.unwrap();
    assert!(!external.is_managed());
    assert_eq!(external.version(), server.version());

    // The process and files are not the harness's: typed errors, and the server stays up.
    for result in [
        external.crash(),
        external.restart(),
        external.stop_fast(),
        external.resume(),
        external.pause(true),
    ] {
        assert!(
            matches!(result, Err(PgError::NotManaged { .. })),
            "{result:?}"
        );
    }
    assert!(matches!(
        external.install(),
        Err(PgError::NotManaged { .. })
    ));
    assert!(matches!(
        external.data_dir(),
        Err(PgError::NotManaged { .. })
    ));
    assert!(server.is_running());

    // pg_lease is on the server (the managed cluster installed it): CREATE EXTENSION works.
    let db = external.fresh_database("ext").await.unwrap();
    assert!(
        db.starts_with(&format!("lc{}_", std::process::id())),
        "{db}"
    );
    assert!(pre_existing.starts_with(&db), "{db}");
    let c = external.connect(&db).await.unwrap();
    c.batch_execute(&format!("CREATE ROLE {db}_user"))
        .await
        .unwrap();
    let removed = external.remove_created().await.unwrap();
    assert_eq!(removed.databases, std::slice::from_ref(&db));
    assert_eq!(removed.roles, [format!("{db}_user")]);
    let databases = names(&server, "SELECT datname::text FROM pg_database").await;
    assert!(!databases.contains(&db), "{databases:?}");
    let roles = names(&server, "SELECT rolname::text FROM pg_roles").await;
    assert!(roles.contains(&pre_existing), "{roles:?}");
    assert!(!roles.contains(&format!("{db}_user")), "{roles:?}");

    // An extension the server does not have is named as such.
    let mut missing = harness::extension::ExtensionFiles::pg_lease();
    missing.name = "pg_lease_not_installed".into();
    assert!(matches!(
        external.provide_extension(&missing).await,
        Err(PgError::ExtensionNotAvailable { .. })
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_role_that_cannot_create_databases_is_refused_saying_so() {
    let server = managed();
    let admin = server.connect("postgres").await.unwrap();
    admin
        .batch_execute("CREATE ROLE plain LOGIN; CREATE ROLE creator LOGIN CREATEDB")
        .await
        .unwrap();
    match Cluster::external(dsn(&server, "plain")).await {
        Err(e @ PgError::Privilege { .. }) => assert!(e.to_string().contains("CREATEDB"), "{e}"),
        other => panic!("expected a privilege error, got {other:?}"),
    }
    // The control: the same server with CREATEDB is accepted.
    let creator = Cluster::external(dsn(&server, "creator")).await.unwrap();
    assert_eq!(creator.superuser(), "creator");
}
