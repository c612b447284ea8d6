//! Every check's fixture: fresh roles and a database owned by the installer, and the
//! helpers the checks share.
use super::*;

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
            crate::fate::learn_target(&owner, extension).await?;
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

/// The check's result, unless dropping the fixture failed after a pass.
pub(super) async fn finish(f: Fixture<'_>, result: CheckResult) -> CheckResult {
    let cleanup = f.drop_all().await;
    match (result, cleanup) {
        (Err(e), _) => Err(e),
        (Ok(()), Err(e)) => Err(e.into()),
        (Ok(()), Ok(())) => Ok(()),
    }
}

// ---------------------------------------------------------------------------------------
// Shared helpers

/// One row of the lease table, read as the superuser.
pub type LeaseRow = (String, Option<String>, i64, Option<DateTime<Utc>>);

/// Every row of the lease table ([`crate::extension::lease_table`]; as the superuser), in
/// byte order of the key.
pub async fn table_rows(su: &Client) -> Result<Vec<LeaseRow>, SecurityError> {
    let table = crate::extension::lease_table(su).await?;
    let rows = su
        .query(
            &format!(
                "SELECT key, owner, epoch, expires_at FROM {table} ORDER BY key COLLATE \"C\""
            ),
            &[],
        )
        .await?;
    rows.iter()
        .map(|r| Ok((r.try_get(0)?, r.try_get(1)?, r.try_get(2)?, r.try_get(3)?)))
        .collect::<Result<Vec<_>, tokio_postgres::Error>>()
        .map_err(SecurityError::from)
}

/// The SQLSTATE of a statement's outcome ("ok" when it succeeded).
pub(super) fn outcome_code<T>(r: &Result<T, tokio_postgres::Error>) -> String {
    match r {
        Ok(_) => "ok".to_string(),
        Err(e) => match e.code() {
            Some(c) => c.code().to_string(),
            None => format!("no SQLSTATE ({e})"),
        },
    }
}

/// A statement that must be refused with 42501 (insufficient_privilege), with a message
/// containing one of `names` (what the refusal is about), e.g. "permission denied for table
/// leases" or, for an object in a schema the role may not use, "... for schema ...".
pub(super) async fn expect_denied(
    c: &Client,
    sql: &str,
    names: &[&str],
    who: &str,
    out: &mut Vec<String>,
) {
    let r = c.batch_execute(sql).await;
    match &r {
        Err(e) if e.code() == Some(&SqlState::INSUFFICIENT_PRIVILEGE) => {
            let msg = e.as_db_error().map(|d| d.message()).unwrap_or_default();
            if !names.iter().any(|n| msg.contains(n)) {
                out.push(format!(
                    "{who}: `{sql}` was refused for another reason than expected: {msg:?} (expected a message naming one of {names:?})"
                ));
            }
        }
        Err(e) => out.push(format!(
            "{who}: `{sql}` failed with {} instead of 42501 ({names:?})",
            describe_db(e)
        )),
        Ok(()) => out.push(format!(
            "{who}: `{sql}` succeeded; expected 42501 ({names:?})"
        )),
    }
}

/// The lease table of the build created in the fixture's database and its schema: what the
/// checks address (`lease.leases` up to 0.2.0, `lease_internal.leases` from 0.3.0).
pub struct LeaseTable {
    /// Schema-qualified.
    pub name: String,
    pub schema: String,
}

impl LeaseTable {
    pub async fn of(su: &Client) -> Result<LeaseTable, SecurityError> {
        let name = crate::extension::lease_table(su).await?;
        let schema = name.split('.').next().unwrap_or_default().to_string();
        Ok(LeaseTable { name, schema })
    }

    /// What a refusal to touch it names: the table, or its schema when the role may not
    /// use that.
    pub fn refusal(&self) -> [String; 2] {
        [
            "table leases".to_string(),
            format!("schema {}", self.schema),
        ]
    }
}

/// The configuration tables of `extension` (what pg_dump dumps the data of), schema-qualified.
pub async fn config_tables(su: &Client, extension: &str) -> Result<Vec<String>, SecurityError> {
    let rows = su
        .query(
            "SELECT pg_catalog.format('%I.%I', n.nspname, c.relname) \
               FROM pg_catalog.pg_extension AS e, pg_catalog.unnest(e.extconfig) AS t(oid) \
               JOIN pg_catalog.pg_class AS c ON c.oid = t.oid \
               JOIN pg_catalog.pg_namespace AS n ON n.oid = c.relnamespace \
              WHERE e.extname = $1 ORDER BY 1",
            &[&extension],
        )
        .await?;
    rows.iter()
        .map(|r| r.try_get(0))
        .collect::<Result<_, _>>()
        .map_err(SecurityError::from)
}

/// A cluster of its own on `install` with `settings` (a check that restarts or crashes its
/// server, or needs a setting the shared one does not have). Started off the runtime's
/// threads (initdb and the start block).
pub(super) async fn own_cluster(
    install: &crate::pg::PgInstall,
    settings: &[(&str, &str)],
) -> Result<Cluster, SecurityError> {
    let options = crate::pg::ClusterOptions {
        settings: settings
            .iter()
            .map(|(n, v)| (n.to_string(), v.to_string()))
            .collect(),
        extensions: Vec::new(),
        ..Default::default()
    };
    let install = install.clone();
    tokio::task::spawn_blocking(move || Cluster::start_with(&install, options))
        .await
        .map_err(|e| SecurityError::Unexpected(format!("starting the cluster: {e}")))?
        .map_err(SecurityError::from)
}
