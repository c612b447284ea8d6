//! tokio-postgres errors as conditions of the one error-fate table ([`model::fate`]).
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
//! line per frame (`PL/pgSQL function lease._take(text,text,interval,boolean) line 12 at
//! SQL statement`, `SQL function "_text_bad" statement 1`). Every entry into pg_lease is a
//! function of its schema `lease` (the API), so an error raised anywhere below one names
//! it; the harness's own statements run no SQL-language function and their DO blocks show
//! as `inline_code_block`. An error whose context names a routine of the target is
//! [`Condition::InTarget`]; one without (a syntax error of the harness's statement, with
//! its position in the statement's text; a parameter the server could not convert) is the
//! statement's own, [`Condition::Sql`].

use model::fate::{self, Condition, Fate};
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
/// context names a function of schema `lease` or an SQL-language function.
pub fn raised_in_target(db: &DbError) -> bool {
    db.where_()
        .is_some_and(|context| context.lines().any(names_a_target_routine))
}

/// One line of an error's context names a routine of the target.
fn names_a_target_routine(frame: &str) -> bool {
    frame.contains(" function lease.") || frame.trim_start().starts_with("SQL function \"")
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

    #[test]
    fn a_frame_of_schema_lease_or_an_sql_function_is_the_targets() {
        for frame in [
            "PL/pgSQL function lease._failure_status(text,text,bigint) line 9 at EXECUTE",
            "PL/pgSQL function lease.acquire(text,text,interval,interval) line 12 at RAISE",
            "SQL function \"_text_bad\" statement 1",
        ] {
            assert!(names_a_target_routine(frame), "{frame}");
        }
        // Negative controls: the harness's DO block, a function of another schema.
        for frame in [
            "PL/pgSQL function inline_code_block line 3 at PERFORM",
            "PL/pgSQL function public.nemesis_slow_commit() line 1 at PERFORM",
            "PL/pgSQL function evil.lease_like() line 1 at RETURN",
        ] {
            assert!(!names_a_target_routine(frame), "{frame}");
        }
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
