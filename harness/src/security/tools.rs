//! PostgreSQL's client programs (`pg_dump`, `pg_restore`, `psql`) run as child processes.
//!
//! The install under test provides them when it has them. A build without client programs
//! (the fetched builds have only the server) uses the fetched client programs of its major
//! (`pg::majors`, 16-18), else borrows those of a newer installed major:
//! `pg_dump` dumps older servers, and its archive restores into them for the objects pg_lease
//! has (a schema, a table, functions, an extension).

use crate::pg::{
    client_programs_bin_dir, fetch_client_programs, pinned_client_programs, PgInstall, HOST,
};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

/// How long one client program may run.
const TOOL_TIMEOUT: Duration = Duration::from_secs(60);

#[derive(Debug, thiserror::Error)]
pub enum ToolError {
    #[error(
        "no pg_dump, pg_restore and psql of PostgreSQL {major} or newer found (looked at: {tried}); \
         install the client programs (Debian: postgresql-client-NN) or let the harness fetch them",
        tried = .tried.join(", ")
    )]
    NotFound { major: u32, tried: Vec<String> },
    #[error("fetching the client programs of PostgreSQL {major}: {source}")]
    Fetch {
        major: u32,
        #[source]
        source: crate::pg::PgError,
    },
    #[error("the task fetching the client programs failed: {0}")]
    FetchTask(String),
    #[error("running {program}: {source}")]
    Spawn {
        program: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{program} did not finish within {seconds}s (killed)")]
    Timeout { program: String, seconds: u64 },
}

/// Where and as whom a client program connects.
#[derive(Debug, Clone)]
pub struct Conn {
    pub port: u16,
    pub user: String,
    pub db: String,
}

/// What a client program did.
#[derive(Debug, Clone)]
pub struct ToolOutput {
    /// e.g. "exit status: 1"
    pub status: String,
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

impl ToolOutput {
    pub fn success(&self) -> bool {
        self.code == Some(0)
    }
}

/// The client programs of one PostgreSQL major.
#[derive(Debug, Clone)]
pub struct ClientTools {
    pub bin_dir: PathBuf,
    /// The major of the programs (>= the server's).
    pub major: u32,
}

impl ClientTools {
    /// The install's own client programs, else those of its major fetched before, else those
    /// of the nearest newer installed major (never downloads).
    pub fn find(install: &PgInstall) -> Result<ClientTools, ToolError> {
        let server = install.version.major;
        let mut tried = Vec::new();
        let has_all = |dir: &Path| {
            ["pg_dump", "pg_restore", "psql"]
                .iter()
                .all(|p| dir.join(p).is_file())
        };
        tried.push(install.bin_dir.display().to_string());
        if has_all(&install.bin_dir) {
            return Ok(ClientTools {
                bin_dir: install.bin_dir.clone(),
                major: server,
            });
        }
        if let Some(pin) = pinned_client_programs(server) {
            let fetched = client_programs_bin_dir(pin);
            tried.push(fetched.display().to_string());
            if has_all(&fetched) {
                return Ok(ClientTools {
                    bin_dir: fetched,
                    major: server,
                });
            }
        }
        for major in crate::pg::majors::supported().filter(|&m| m > server) {
            // A server install of that major, or its client programs alone (Debian's
            // postgresql-client-NN installs them without a server).
            let dirs = PgInstall::find(major)
                .map(|other| other.bin_dir)
                .into_iter()
                .chain([PathBuf::from(format!("/usr/lib/postgresql/{major}/bin"))]);
            for dir in dirs {
                tried.push(dir.display().to_string());
                if has_all(&dir) {
                    return Ok(ClientTools {
                        bin_dir: dir,
                        major,
                    });
                }
            }
        }
        Err(ToolError::NotFound {
            major: server,
            tried,
        })
    }

    /// As [`ClientTools::find`], but when none is found, fetches the client programs pinned
    /// for the server's major (16-18).
    pub async fn ensure(install: &PgInstall) -> Result<ClientTools, ToolError> {
        let not_found = match ClientTools::find(install) {
            Ok(tools) => return Ok(tools),
            Err(e) => e,
        };
        let Some(pin) = pinned_client_programs(install.version.major) else {
            return Err(not_found);
        };
        let fetched = tokio::task::spawn_blocking(move || fetch_client_programs(pin))
            .await
            .map_err(|e| ToolError::FetchTask(e.to_string()))?
            .map_err(|source| ToolError::Fetch {
                major: pin.major,
                source,
            })?;
        Ok(ClientTools {
            bin_dir: fetched,
            major: pin.major,
        })
    }

    fn command(&self, program: &str, conn: Option<&Conn>) -> tokio::process::Command {
        let mut cmd = tokio::process::Command::new(self.bin_dir.join(program));
        cmd.env("LC_ALL", "C")
            .env("LANG", "C")
            .env("PGCONNECT_TIMEOUT", "10")
            .env("PGAPPNAME", "leasecheck-security");
        for var in [
            "PGHOST",
            "PGPORT",
            "PGUSER",
            "PGDATABASE",
            "PGPASSWORD",
            "PGSERVICE",
            "PGOPTIONS",
        ] {
            cmd.env_remove(var);
        }
        if let Some(c) = conn {
            cmd.arg("--host")
                .arg(HOST)
                .arg("--port")
                .arg(c.port.to_string())
                .arg("--username")
                .arg(&c.user)
                .arg("--no-password");
        }
        cmd.stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        cmd
    }

    async fn run(
        &self,
        program: &str,
        mut cmd: tokio::process::Command,
    ) -> Result<ToolOutput, ToolError> {
        let child = cmd.spawn().map_err(|source| ToolError::Spawn {
            program: self.bin_dir.join(program),
            source,
        })?;
        match tokio::time::timeout(TOOL_TIMEOUT, child.wait_with_output()).await {
            Ok(Ok(out)) => Ok(ToolOutput {
                status: out.status.to_string(),
                code: out.status.code(),
                stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
                stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
            }),
            Ok(Err(source)) => Err(ToolError::Spawn {
                program: self.bin_dir.join(program),
                source,
            }),
            // Dropping the future dropped the child, which kill_on_drop kills.
            Err(_) => Err(ToolError::Timeout {
                program: program.to_string(),
                seconds: TOOL_TIMEOUT.as_secs(),
            }),
        }
    }

    /// `pg_dump <args> [<file>] <db>` as `conn.user`.
    pub async fn pg_dump(
        &self,
        conn: &Conn,
        args: &[&str],
        file: Option<&Path>,
    ) -> Result<ToolOutput, ToolError> {
        let mut cmd = self.command("pg_dump", Some(conn));
        cmd.args(args);
        if let Some(f) = file {
            cmd.arg(f);
        }
        cmd.arg(&conn.db);
        self.run("pg_dump", cmd).await
    }

    /// `pg_restore <args> --dbname <db> <archive>` as `conn.user`.
    pub async fn pg_restore(
        &self,
        conn: &Conn,
        archive: &Path,
        args: &[&str],
    ) -> Result<ToolOutput, ToolError> {
        let mut cmd = self.command("pg_restore", Some(conn));
        cmd.args(args).arg("--dbname").arg(&conn.db).arg(archive);
        self.run("pg_restore", cmd).await
    }

    /// The data section of an archive as SQL (`pg_restore --data-only --file=-`), without a
    /// server.
    pub async fn pg_restore_to_text(&self, archive: &Path) -> Result<ToolOutput, ToolError> {
        let mut cmd = self.command("pg_restore", None);
        cmd.arg("--data-only").arg("--file=-").arg(archive);
        self.run("pg_restore", cmd).await
    }

    /// `psql -X [-v ON_ERROR_STOP=1] -f <file> <db>` as `conn.user`.
    pub async fn psql_file(
        &self,
        conn: &Conn,
        file: &Path,
        stop_on_error: bool,
    ) -> Result<ToolOutput, ToolError> {
        let mut cmd = self.command("psql", Some(conn));
        cmd.arg("-X").arg("-q");
        if stop_on_error {
            cmd.arg("-v").arg("ON_ERROR_STOP=1");
        }
        cmd.arg("-f").arg(file).arg("--dbname").arg(&conn.db);
        self.run("psql", cmd).await
    }
}

/// The rows of the `COPY <table> (...) FROM stdin;` block of a plain SQL dump, each split
/// into its tab-separated fields (in COPY text format; `\N` is NULL).
pub fn copy_rows(sql: &str, table: &str) -> Vec<Vec<String>> {
    let header = format!("COPY {table} ");
    let mut rows = Vec::new();
    let mut inside = false;
    for line in sql.lines() {
        if inside {
            if line == "\\." {
                break;
            }
            rows.push(line.split('\t').map(str::to_string).collect());
        } else if line.starts_with(&header) && line.ends_with("FROM stdin;") {
            inside = true;
        }
    }
    rows
}

#[cfg(test)]
mod tests {
    use super::copy_rows;

    #[test]
    fn copy_rows_reads_the_named_tables_block_only() {
        let sql = "SET x = 1;\nCOPY other.t (a) FROM stdin;\nz\n\\.\n\
                   COPY lease.leases (key, owner, epoch, expires_at) FROM stdin;\n\
                   a\tbob\t3\t2026-01-01\nb\t\\N\t2\t\\N\n\\.\nSELECT 1;\n";
        let rows = copy_rows(sql, "lease.leases");
        assert_eq!(
            rows,
            vec![
                vec!["a", "bob", "3", "2026-01-01"],
                vec!["b", "\\N", "2", "\\N"]
            ]
        );
        assert!(copy_rows(sql, "lease.missing").is_empty());
    }
}
