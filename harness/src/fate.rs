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
//! | `Db` | the server's `DbError` | `Sql(code)` |
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

use model::fate::{self, Condition, Fate};

/// The condition of the one fate table that `err` reports.
pub fn condition(err: &tokio_postgres::Error) -> Condition<'_> {
    if let Some(db) = err.as_db_error() {
        return Condition::Sql(db.code().code());
    }
    if err.is_closed() {
        return Condition::ConnectionLost;
    }
    match std::error::Error::source(err) {
        Some(source) if source.is::<std::io::Error>() => Condition::ConnectionLost,
        _ => Condition::DriverMisuse,
    }
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
