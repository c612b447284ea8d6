//! tokio-postgres errors as conditions of the one error-fate table ([`model::fate`]): the
//! adapter shared by the harness (`harness::fate` re-exports it) and the lock store.
//!
//! The driver's error kind is private, so a condition is read from what the error exposes
//! about its kind: the server's error ([`tokio_postgres::Error::as_db_error`]), the closed
//! flag ([`tokio_postgres::Error::is_closed`]) and the type of its `source()`. Never from
//! its message text, which is for people and may change between driver versions.
//!
//! What each kind of tokio-postgres 0.7 error carries, and the condition it becomes:
//!
//! | kind | source | condition |
//! | --- | --- | --- |
//! | `Db` | the server's `DbError`, raised while a routine of the target ran | `InTarget(code)` |
//! | `Db` | the server's `DbError`, any other | `Sql(code)` |
//! | `Closed` | none | `ConnectionLost` |
//! | `Io` (socket read or write), `Connect` (refused, connect timeout) | `io::Error` | `ConnectionLost` |
//! | `Parse` (an unparsable message) | `io::Error` | `ConnectionLost` |
//! | `Encode` (e.g. a NUL in the SQL text) | `io::Error` | `ConnectionLost` (see below) |
//! | `Tls`, `Authentication` | an `io::Error` or a plain error | `ConnectionLost` or `DriverMisuse` |
//! | `ToSql`, `FromSql` (wrong Rust type for a parameter or column) | the type's error | `DriverMisuse` |
//! | `Config`, `ConfigParse` | a plain error | `DriverMisuse` |
//! | `UnexpectedMessage`, `Column`, `ColumnCount`, `Parameters`, `RowCount` | none | `DriverMisuse` |
//! | `Timeout` (built only by a hidden constructor that tokio-postgres itself never calls) | none | `DriverMisuse` |
//!
//! An error without a source that is not `Closed` is the calling code asking for a column,
//! a row count or a parameter count the statement does not have, or a protocol stream that
//! no longer matches the calls made on it. Either way the harness's own view of the
//! conversation is wrong, so it must be loud (a harness bug), never a silent "unknown".
//!
//! `Encode` shares its `io::Error` source with `Parse` and cannot be told apart from it
//! without the message; it is judged "unknown" with the rest. Nothing was sent in that case,
//! so the judgement errs on the side of claiming less, and the pinned statements of this
//! project never contain a NUL.

//!
//! **Where an error was raised.** The server's report says it: an error raised inside a
//! function carries the function call stack as its context (`where`), innermost first, one
//! line per frame (`PL/pgSQL function lease_internal._take(text,text,interval,boolean) line
//! 12 at SQL statement`, `SQL function "_text_bad" statement 1`). Which routines are the
//! target's is read from the catalog, not from a schema name: the functions `pg_depend`
//! records as members of the installed extension ([`learn_target`], run wherever the
//! harness creates a build's extension), whatever schemas the build keeps them in
//! (`lease` in 0.1.0 and 0.2.0, `lease` and `lease_internal` from 0.3.0). An error whose
//! context names one of them is [`Condition::InTarget`]; one without (a syntax error of the
//! harness's statement, with its position in the statement's text; a parameter the server
//! could not convert; the harness's DO block, `inline_code_block`; a function the harness
//! planted) is the statement's own, [`Condition::Sql`].

use model::fate::{self, Condition, Fate};
use std::collections::BTreeSet;
use std::sync::{OnceLock, RwLock};
use tokio_postgres::error::DbError;

/// The condition of the one fate table that `err` reports.
pub fn condition(err: &tokio_postgres::Error) -> Condition<'_> {
    if let Some(db) = err.as_db_error() {
        let code = db.code().code();
        return match raised_in_target(db) {
            true => Condition::InTarget(code),
            false => Condition::Sql(code),
        };
    }
    if err.is_closed() {
        return Condition::ConnectionLost;
    }
    match std::error::Error::source(err) {
        Some(source) if source.is::<std::io::Error>() => Condition::ConnectionLost,
        _ => Condition::DriverMisuse,
    }
}

/// Whether the server raised `db` while a routine of the target ran: a frame of its
/// context names a routine of an installed build ([`learn_target`]).
pub fn raised_in_target(db: &DbError) -> bool {
    db.where_()
        .is_some_and(|context| context.lines().any(names_a_target_routine))
}

/// One line of an error's context names a routine of an installed build of the target.
fn names_a_target_routine(frame: &str) -> bool {
    learnt()
        .read()
        .unwrap_or_else(|p| p.into_inner())
        .names(frame)
}

/// The routines of builds of the target, as an error's context names them: a PL/pgSQL
/// frame names its function schema-qualified (`lease_internal._take`) unless the function
/// was visible on the search_path it was compiled under (`_take`), quoted as an
/// identifier; an SQL-language frame names it bare and unquoted (`SQL function "_text_bad"`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TargetRoutines {
    /// `schema.name` and `name`, each quoted as an identifier.
    plpgsql: BTreeSet<String>,
    /// `name` as stored.
    sql: BTreeSet<String>,
}

impl TargetRoutines {
    /// The routines of the given (schema, name, stored name) triples: schema and name
    /// quoted as identifiers the server's way (`quote_ident`, as its frames print them),
    /// the name also as stored.
    pub fn of<'a>(
        routines: impl IntoIterator<Item = (&'a str, &'a str, &'a str)>,
    ) -> TargetRoutines {
        let mut out = TargetRoutines::default();
        for (schema, name, stored) in routines {
            out.plpgsql.insert(format!("{schema}.{name}"));
            out.plpgsql.insert(name.to_string());
            out.sql.insert(stored.to_string());
        }
        out
    }

    /// Whether the context line `frame` names one of these routines.
    pub fn names(&self, frame: &str) -> bool {
        let frame = frame.trim_start();
        if let Some(rest) = frame.strip_prefix("PL/pgSQL function ") {
            // `name(argument types) line N at ...`; a DO block is `inline_code_block line N`.
            let name = rest.split_once('(').map_or("", |(name, _)| name);
            return self.plpgsql.contains(name);
        }
        if let Some(rest) = frame.strip_prefix("SQL function \"") {
            let name = rest.split_once('"').map_or("", |(name, _)| name);
            return self.sql.contains(name);
        }
        false
    }

    /// How many routines are known.
    pub fn len(&self) -> usize {
        self.sql.len()
    }

    /// True when no routine is known.
    pub fn is_empty(&self) -> bool {
        self.sql.is_empty()
    }
}

/// The functions `pg_depend` records as members of extension `$1` (deptype `e`): schema
/// and name quoted as identifiers, and the name as stored.
pub const TARGET_ROUTINES_SQL: &str = "SELECT pg_catalog.quote_ident(n.nspname), \
            pg_catalog.quote_ident(p.proname), p.proname::text \
     FROM pg_catalog.pg_extension AS e \
     JOIN pg_catalog.pg_depend AS d ON d.refclassid = 'pg_catalog.pg_extension'::pg_catalog.regclass \
      AND d.refobjid = e.oid AND d.deptype = 'e' \
      AND d.classid = 'pg_catalog.pg_proc'::pg_catalog.regclass \
     JOIN pg_catalog.pg_proc AS p ON p.oid = d.objid \
     JOIN pg_catalog.pg_namespace AS n ON n.oid = p.pronamespace \
    WHERE e.extname = $1::text::pg_catalog.name";

/// The routines of extension `extension` as installed in the database `client` is
/// connected to (none when it is not created there).
pub async fn target_routines<C: tokio_postgres::GenericClient>(
    client: &C,
    extension: &str,
) -> Result<TargetRoutines, tokio_postgres::Error> {
    let rows = client.query(TARGET_ROUTINES_SQL, &[&extension]).await?;
    let triples: Vec<(String, String, String)> = rows
        .iter()
        .map(|r| Ok((r.try_get(0)?, r.try_get(1)?, r.try_get(2)?)))
        .collect::<Result<_, tokio_postgres::Error>>()?;
    Ok(TargetRoutines::of(
        triples
            .iter()
            .map(|(s, n, r)| (s.as_str(), n.as_str(), r.as_str())),
    ))
}

/// Adds the routines of extension `extension`, installed in the database `client` is
/// connected to, to those this process attributes errors to; how many it has. Every place
/// the harness creates a build's extension calls it: which routines are the target's is
/// the catalog's word, for any build's layout. (One process may gate several builds: a
/// routine of any of them is a target's; the harness's own statements call none of them by
/// accident, and its planted functions are never extension members.)
pub async fn learn_target<C: tokio_postgres::GenericClient>(
    client: &C,
    extension: &str,
) -> Result<usize, tokio_postgres::Error> {
    let found = target_routines(client, extension).await?;
    let mut all = learnt().write().unwrap_or_else(|p| p.into_inner());
    all.plpgsql.extend(found.plpgsql);
    all.sql.extend(found.sql);
    Ok(all.len())
}

/// The routines this process learnt ([`learn_target`]).
fn learnt() -> &'static RwLock<TargetRoutines> {
    static LEARNT: OnceLock<RwLock<TargetRoutines>> = OnceLock::new();
    LEARNT.get_or_init(|| RwLock::new(TargetRoutines::default()))
}

/// The routine frames of `db`'s context that are the target's, innermost first, joined by
/// ` <- ` (empty when there are none): where in the target the error was raised.
pub fn target_frames(db: &DbError) -> String {
    db.where_()
        .map(|context| {
            context
                .lines()
                .filter(|l| names_a_target_routine(l))
                .map(str::trim)
                .collect::<Vec<_>>()
                .join(" <- ")
        })
        .unwrap_or_default()
}

/// Whether the call that failed with `err` took effect.
pub fn fate(err: &tokio_postgres::Error) -> Fate {
    fate::of(condition(err))
}

#[cfg(test)]
mod tests {
    use super::*;
    use model::fate::{BugCause, UnknownCause};
    use std::str::FromStr;

    #[test]
    fn an_unparsable_connection_string_is_driver_misuse() {
        let err = tokio_postgres::Config::from_str("port=not-a-number")
            .expect_err("a port must be a number");
        assert_eq!(condition(&err), Condition::DriverMisuse);
        assert_eq!(fate(&err), Fate::HarnessBug(BugCause::DriverMisuse));
    }

    #[tokio::test]
    async fn a_config_without_a_host_is_driver_misuse() {
        let err = tokio_postgres::Config::new()
            .connect(tokio_postgres::NoTls)
            .await
            .map(|_| ())
            .expect_err("a config without a host cannot connect");
        assert_eq!(condition(&err), Condition::DriverMisuse);
    }

    #[tokio::test]
    async fn a_refused_connection_is_connection_lost() {
        // A port that was free a moment ago: nobody listens there.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let err = tokio_postgres::Config::new()
            .host("127.0.0.1")
            .port(port)
            .user("nobody")
            .connect(tokio_postgres::NoTls)
            .await
            .map(|_| ())
            .expect_err("nobody listens on the port");
        assert!(err.as_db_error().is_none());
        assert_eq!(condition(&err), Condition::ConnectionLost);
        assert_eq!(fate(&err), Fate::Unknown(UnknownCause::ConnectionLost));
    }

    /// The routines of 0.2.0's layout (all in schema `lease`) and of 0.3.0's (the API in
    /// `lease`, the helpers in `lease_internal`): a frame is the target's when it names one
    /// of the build's own routines, whatever its schema.
    #[test]
    fn a_frame_naming_a_routine_of_the_build_is_the_targets() {
        let v020 = TargetRoutines::of([
            ("lease", "acquire", "acquire"),
            ("lease", "_failure_status", "_failure_status"),
            ("lease", "_text_bad", "_text_bad"),
        ]);
        let v030 = TargetRoutines::of([
            ("lease", "acquire", "acquire"),
            ("lease_internal", "_failure_status", "_failure_status"),
            ("lease_internal", "_text_bad", "_text_bad"),
            ("\"Odd Schema\"", "_take", "_take"),
        ]);
        for (routines, frame) in [
            (&v020, "PL/pgSQL function lease._failure_status(text,text,bigint) line 9 at EXECUTE"),
            (&v020, "PL/pgSQL function lease.acquire(text,text,interval,interval) line 12 at RAISE"),
            (&v020, "SQL function \"_text_bad\" statement 1"),
            (&v030, "PL/pgSQL function lease_internal._failure_status(text,text,bigint) line 9 at EXECUTE"),
            (&v030, "PL/pgSQL function _failure_status(text,text,bigint) line 9 at EXECUTE"),
            (&v030, "PL/pgSQL function \"Odd Schema\"._take(text) line 1 at RETURN"),
            (&v030, "SQL function \"_text_bad\" during startup"),
        ] {
            assert!(routines.names(frame), "{frame}");
        }
        // Negative controls: the harness's DO block, functions of another schema or not of
        // the build (a helper of 0.3.0's layout is not 0.2.0's, and the reverse).
        for (routines, frame) in [
            (&v030, "PL/pgSQL function inline_code_block line 3 at PERFORM"),
            (&v030, "PL/pgSQL function public.nemesis_slow_commit() line 1 at PERFORM"),
            (&v030, "PL/pgSQL function evil.lease_like() line 1 at RETURN"),
            (&v030, "PL/pgSQL function lease._failure_status(text,text,bigint) line 9 at EXECUTE"),
            (&v020, "PL/pgSQL function lease_internal._failure_status(text,text,bigint) line 9 at EXECUTE"),
            (&v030, "SQL function \"planted\" statement 1"),
            (&v030, "SQL statement \"SELECT lease_internal._take(k, o, t, true)\""),
        ] {
            assert!(!routines.names(frame), "{frame}");
        }
        assert!(!TargetRoutines::default().names("PL/pgSQL function lease.acquire(text) line 1"));
    }

    /// The driver's `Timeout` kind has no source and is not `Closed`; tokio-postgres never
    /// builds it (only its hidden constructor does), so it is judged with the other
    /// source-less kinds.
    #[test]
    fn the_drivers_source_less_timeout_kind_is_driver_misuse() {
        let err = tokio_postgres::Error::__private_api_timeout();
        assert!(std::error::Error::source(&err).is_none());
        assert_eq!(condition(&err), Condition::DriverMisuse);
    }
}
