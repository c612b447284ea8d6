//! An existing PostgreSQL server the harness did not start (`leasecheck gate --dsn`): only
//! connections, no process. What it creates there is remembered so it can be dropped.

use super::{PgError, PgVersion, Result};
use std::collections::BTreeSet;
use std::sync::Mutex;
use std::time::Duration;
use tokio_postgres::config::Host;

/// A server reached through a connection string.
pub(crate) struct External {
    /// The connection as given (its database is the one [`External::admin_db`] names).
    base: tokio_postgres::Config,
    pub(crate) host: String,
    pub(crate) port: u16,
    pub(crate) user: String,
    pub(crate) version: PgVersion,
    /// The database connected to for creating and dropping databases.
    pub(crate) admin_db: String,
    /// Databases the harness created, to drop at the end.
    pub(crate) created: Mutex<Vec<String>>,
    /// Every role that existed when the harness connected (never dropped).
    pub(crate) roles_before: BTreeSet<String>,
}

impl External {
    /// Connects through `base`, reads the server's version and checks that the role can
    /// create databases.
    pub(crate) async fn connect(mut base: tokio_postgres::Config) -> Result<External> {
        let (host, port) = address(&base)?;
        let user = base
            .get_user()
            .map(str::to_string)
            .or_else(|| std::env::var("USER").ok())
            .ok_or_else(|| PgError::BadDsn("the connection string names no user".into()))?;
        base.user(&user);
        if base.get_connect_timeout().is_none() {
            base.connect_timeout(Duration::from_secs(10));
        }
        let admin_db = base.get_dbname().unwrap_or("postgres").to_string();
        base.application_name("leasecheck");
        let (client, connection) = base.connect(tokio_postgres::NoTls).await?;
        tokio::spawn(async move {
            let _ = connection.await;
        });
        let row = client
            .query_one(
                "SELECT current_setting('server_version_num')::int, current_setting('server_version'), \
                 rolsuper, rolcreatedb FROM pg_catalog.pg_roles WHERE rolname = current_user",
                &[],
            )
            .await?;
        let (num, text, superuser, createdb): (i32, String, bool, bool) =
            (row.get(0), row.get(1), row.get(2), row.get(3));
        if !superuser && !createdb {
            return Err(PgError::Privilege {
                user,
                needs: "CREATEDB (or superuser): the checks create a database each".into(),
            });
        }
        let full: String = text
            .chars()
            .take_while(|c| c.is_ascii_digit() || *c == '.')
            .collect();
        let roles = client
            .query("SELECT rolname::text FROM pg_catalog.pg_roles", &[])
            .await?
            .iter()
            .map(|r| r.get(0))
            .collect();
        Ok(External {
            base,
            host,
            port,
            user,
            version: PgVersion {
                major: (num / 10_000) as u32,
                full,
            },
            admin_db,
            created: Mutex::new(Vec::new()),
            roles_before: roles,
        })
    }

    /// The config for `db`.
    pub(crate) fn config(&self, db: &str) -> tokio_postgres::Config {
        let mut config = self.base.clone();
        config.dbname(db);
        config
    }

    /// `host:port`, for messages.
    pub(crate) fn address(&self) -> String {
        format!("{}:{}", self.host, self.port)
    }

    pub(crate) fn not_managed(&self, what: &'static str) -> PgError {
        PgError::NotManaged {
            what,
            server: self.address(),
        }
    }
}

/// The one host and port of `config` (a TCP host or a Unix socket directory).
fn address(config: &tokio_postgres::Config) -> Result<(String, u16)> {
    let host = match config.get_hosts() {
        [] => "localhost".to_string(),
        [Host::Tcp(h)] => h.clone(),
        [Host::Unix(dir)] => dir.display().to_string(),
        _ => {
            return Err(PgError::BadDsn(
                "the connection string names several hosts; give one".into(),
            ))
        }
    };
    let port = match config.get_ports() {
        [] => 5432,
        [p] => *p,
        _ => {
            return Err(PgError::BadDsn(
                "the connection string names several ports; give one".into(),
            ))
        }
    };
    Ok((host, port))
}

/// What [`super::Cluster::remove_created`] dropped.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Removed {
    pub databases: Vec<String>,
    pub roles: Vec<String>,
}
