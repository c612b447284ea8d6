//! The error translation (`specs/LOCKSTORE.md` §6; the task's §4 table).
//!
//! A pure function in two steps, so that a test can run it over every input:
//! [`Fault::of`] extracts what matters from a driver error (its SQLSTATE, or
//! how it failed without one) by the error's kind, through
//! [`pgfate::condition`], never by its message text; and [`classify`]
//! maps a [`Fault`] to a [`Verdict`] by the one error-fate table
//! ([`model::fate`]): contention exactly when the fate is retryable (the
//! outcome is unknown, or the failure transient), a programming error
//! otherwise. `Verdict` has two values; there is no "lost" value, so nothing
//! here can claim that a lock is gone. Only a statement that matched zero
//! rows may say that, and it is not an error.
//!
//! The rows as they come out of `model::fate`:
//!
//! | fault | fate | verdict (reason) |
//! | ----- | ---- | ---------------- |
//! | 40001, 40P01 | failed, transient | contention (`Serialization`, `Deadlock`) |
//! | 40000 (class 40 but 40002, 40003) | failed, transient | contention (`OtherRetryable`) |
//! | 57014, 55P03 | failed, transient | contention (`QueryCanceled`, `LockTimeout`) |
//! | class 53 (53300, disk full, out of memory, ...) | failed, transient | contention (`ServerUnavailable`) |
//! | class 08 | unknown | contention (`ConnectionFailure`) |
//! | 57P01, 57P02, 57P03, 57P05, 25P03 | unknown, the session ended | contention (`SessionTerminated`) |
//! | 40003 | unknown | contention (`CompletionUnknown`) |
//! | connection closed without a SQLSTATE | unknown | contention (`ConnectionClosed`) |
//! | socket or connect error, unparsable message | unknown | contention (`ConnectionIo`) |
//! | the store's per-call timeout | unknown | contention (`ClientTimeout`) |
//! | 23503, 23514 (all of class 23), 22023, 40002, 42501, any other SQLSTATE | failed | programming error, unchanged |
//! | class 42 but 42501, 0A000 | harness bug (bad SQL) | programming error, unchanged |
//! | a parameter or column of the wrong type, a row or column count, an unexpected message, a bad config | harness bug (driver misuse) | programming error, unchanged |
//! | class 00, 01 (not an error at all) | ok | programming error, unchanged |

use crate::spi::{Contention, ContentionReason, StoreError};
use model::fate::{self, Condition, Fate, UnknownCause};
use std::time::Duration;
use tokio_postgres::error::SqlState;

/// What the translation looks at: a condition of the fate table, with what
/// the store reports about it (the SQLSTATE, closed or I/O, the timeout).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fault {
    /// The server sent an error with this SQLSTATE.
    Sql(SqlState),
    /// The connection closed without a SQLSTATE.
    Closed,
    /// Connecting, communicating or parsing the server's answer failed,
    /// without a SQLSTATE.
    Io,
    /// A client-side timeout: the store's per-call timeout (with its
    /// length), or one of unknown length.
    Timeout(Option<Duration>),
    /// The call was dropped before its answer arrived.
    Abandoned,
    /// The driver refused the call or its answer (a parameter or column type
    /// mismatch, an unexpected row count, a configuration error, a message
    /// out of step with the calls made).
    DriverMisuse,
}

/// The translation's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Retryable: outcome unknown, the lock may still be ours.
    Contention(ContentionReason),
    /// A bug or bad input: hand the error on unchanged.
    Programming,
}

impl Fault {
    /// Extracts the fault from a driver error.
    pub fn of(err: &tokio_postgres::Error) -> Fault {
        match pgfate::condition(err) {
            Condition::Sql(code) | Condition::InTarget(code) => {
                Fault::Sql(SqlState::from_code(code))
            }
            Condition::ConnectionLost if err.is_closed() => Fault::Closed,
            Condition::ConnectionLost => Fault::Io,
            Condition::ClientTimeout => Fault::Timeout(None),
            Condition::Abandoned => Fault::Abandoned,
            Condition::DriverMisuse => Fault::DriverMisuse,
        }
    }

    /// The condition of the fate table this fault is.
    pub fn condition(&self) -> Condition<'_> {
        match self {
            Fault::Sql(code) => Condition::Sql(code.code()),
            Fault::Closed | Fault::Io => Condition::ConnectionLost,
            Fault::Timeout(_) => Condition::ClientTimeout,
            Fault::Abandoned => Condition::Abandoned,
            Fault::DriverMisuse => Condition::DriverMisuse,
        }
    }
}

/// The §6 table: contention exactly when the fate is retryable.
pub fn classify(fault: &Fault) -> Verdict {
    let fate = fate::of(fault.condition());
    if fate.is_retryable() {
        Verdict::Contention(reason(fault, fate))
    } else {
        Verdict::Programming
    }
}

/// Names a retryable fate. A fault without a SQLSTATE is one condition, so
/// it names itself; a SQLSTATE is named by the fate's cause when the outcome
/// is unknown, and by the code when the failure is transient.
fn reason(fault: &Fault, fate: Fate) -> ContentionReason {
    match (fault, fate) {
        (Fault::Sql(code), Fate::Unknown(cause)) => unknown_outcome(code, cause),
        (Fault::Sql(code), _) => transient_failure(code, fate),
        (Fault::Closed, _) => ContentionReason::ConnectionClosed,
        (Fault::Io, _) => ContentionReason::ConnectionIo,
        (Fault::Timeout(after), _) => ContentionReason::ClientTimeout { after: *after },
        (Fault::Abandoned, _) => ContentionReason::Abandoned,
        (Fault::DriverMisuse, _) => ContentionReason::OtherRetryable { fate, code: None },
    }
}

/// A SQLSTATE whose outcome is unknown, named by the fate's cause.
fn unknown_outcome(code: &SqlState, cause: UnknownCause) -> ContentionReason {
    match cause {
        UnknownCause::ConnectionLost => ContentionReason::ConnectionFailure(code.clone()),
        UnknownCause::SessionEnded => ContentionReason::SessionTerminated(code.clone()),
        UnknownCause::CompletionUnknown => ContentionReason::CompletionUnknown,
        // The client's own causes; the table never gives them for a SQLSTATE.
        UnknownCause::ClientTimeout | UnknownCause::Abandoned => ContentionReason::OtherRetryable {
            fate: Fate::Unknown(cause),
            code: Some(code.clone()),
        },
    }
}

/// A transient failure, named by its SQLSTATE (the fate carries no cause).
fn transient_failure(code: &SqlState, fate: Fate) -> ContentionReason {
    match code.code() {
        "40001" => ContentionReason::Serialization,
        "40P01" => ContentionReason::Deadlock,
        fate::QUERY_CANCELED => ContentionReason::QueryCanceled,
        "55P03" => ContentionReason::LockTimeout,
        class_53 if class_53.starts_with("53") => ContentionReason::ServerUnavailable(code.clone()),
        _ => ContentionReason::OtherRetryable {
            fate,
            code: Some(code.clone()),
        },
    }
}

/// Translates a driver error: contention, or the error itself unchanged as a
/// programming error.
pub fn translate(err: tokio_postgres::Error) -> StoreError {
    match classify(&Fault::of(&err)) {
        Verdict::Contention(reason) => StoreError::Contention(Contention::new(reason, Some(err))),
        Verdict::Programming => StoreError::Programming(err),
    }
}

/// The error for a call that got no answer within `after` (the store's
/// per-call timeout): contention, since the statement may still run.
pub fn timed_out(after: Duration) -> StoreError {
    StoreError::Contention(Contention::new(
        ContentionReason::ClientTimeout { after: Some(after) },
        None,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every SQLSTATE PostgreSQL defines (errcodes.txt, as tokio-postgres
    /// 0.7.18 knows them).
    const ALL_CODES: &str = "
        00000 01000 01003 01004 01006 01007 01008 0100C 01P01 02000 02001 03000 08000 08001 08003 08004 
        08006 08007 08P01 09000 0A000 0B000 0F000 0F001 0L000 0LP01 0P000 0Z000 0Z002 20000 21000 22000 
        22001 22002 22003 22004 22005 22007 22008 22009 2200B 2200C 2200D 2200F 2200G 2200H 2200L 2200M 
        2200N 2200S 2200T 22010 22011 22012 22013 22014 22015 22016 22018 22019 2201B 2201E 2201F 2201G 
        2201W 2201X 22021 22022 22023 22024 22025 22026 22027 2202E 2202G 2202H 22030 22031 22032 22033 
        22034 22035 22036 22037 22038 22039 2203A 2203B 2203C 2203D 2203E 2203F 2203G 22P01 22P02 22P03 
        22P04 22P05 22P06 23000 23001 23502 23503 23505 23514 23P01 24000 25000 25001 25002 25003 25004 
        25005 25006 25007 25008 25P01 25P02 25P03 26000 27000 28000 28P01 2B000 2BP01 2D000 2F000 2F002 
        2F003 2F004 2F005 34000 38000 38001 38002 38003 38004 39000 39001 39004 39P01 39P02 39P03 3B000 
        3B001 3D000 3F000 40000 40001 40002 40003 40P01 42000 42501 42601 42602 42611 42622 42701 42702 
        42703 42704 42710 42712 42723 42725 42803 42804 42809 42830 42846 42883 428C9 42939 42P01 42P02 
        42P03 42P04 42P05 42P06 42P07 42P08 42P09 42P10 42P11 42P12 42P13 42P14 42P15 42P16 42P17 42P18 
        42P19 42P20 42P21 42P22 44000 53000 53100 53200 53300 53400 54000 54001 54011 54023 55000 55006 
        55P02 55P03 55P04 57000 57014 57P01 57P02 57P03 57P04 57P05 58000 58030 58P01 58P02 72000 F0000 
        F0001 HV000 HV001 HV002 HV004 HV005 HV006 HV007 HV008 HV009 HV00A HV00B HV00C HV00D HV00J HV00K 
        HV00L HV00M HV00N HV00P HV00Q HV00R HV010 HV014 HV021 HV024 HV090 HV091 P0000 P0001 P0002 P0003 
        P0004 XX000 XX001 XX002     ";

    fn all_codes() -> Vec<&'static str> {
        ALL_CODES.split_whitespace().collect()
    }

    fn sql(code: &str) -> Fault {
        Fault::Sql(SqlState::from_code(code))
    }

    fn contention(code: &str) -> Option<ContentionReason> {
        match classify(&sql(code)) {
            Verdict::Contention(reason) => Some(reason),
            Verdict::Programming => None,
        }
    }

    #[test]
    fn the_code_list_is_complete_and_known() {
        let codes = all_codes();
        assert_eq!(codes.len(), 260);
        for code in &codes {
            assert_eq!(code.len(), 5);
            // A code tokio-postgres does not know would come back as Other.
            assert!(
                !format!("{:?}", SqlState::from_code(code)).contains("Other"),
                "{code}"
            );
        }
    }

    /// Row 1: 40001 and 40P01.
    #[test]
    fn serialization_failure_and_deadlock_are_contention() {
        assert_eq!(contention("40001"), Some(ContentionReason::Serialization));
        assert_eq!(contention("40P01"), Some(ContentionReason::Deadlock));
    }

    /// Row 2: every class 08 code, 57014, and the timeouts.
    #[test]
    fn connection_failures_cancels_and_timeouts_are_contention() {
        let class_08: Vec<_> = all_codes()
            .into_iter()
            .filter(|c| c.starts_with("08"))
            .collect();
        assert_eq!(class_08.len(), 7);
        for code in class_08 {
            assert_eq!(
                contention(code),
                Some(ContentionReason::ConnectionFailure(SqlState::from_code(
                    code
                ))),
                "{code}"
            );
        }
        // A class 08 code PostgreSQL may add later is still class 08.
        assert!(matches!(
            contention("08ZZZ"),
            Some(ContentionReason::ConnectionFailure(_))
        ));
        assert_eq!(contention("57014"), Some(ContentionReason::QueryCanceled));
        let after = Duration::from_millis(250);
        assert_eq!(
            classify(&Fault::Timeout(Some(after))),
            Verdict::Contention(ContentionReason::ClientTimeout { after: Some(after) })
        );
        assert_eq!(
            classify(&Fault::Timeout(None)),
            Verdict::Contention(ContentionReason::ClientTimeout { after: None })
        );
        match timed_out(after) {
            StoreError::Contention(c) => {
                assert_eq!(
                    c.reason,
                    ContentionReason::ClientTimeout { after: Some(after) }
                );
                assert!(c.source.is_none());
            }
            other => panic!("timed_out gave {other:?}"),
        }
    }

    /// Row 2 continued: faults without a SQLSTATE that leave the outcome unknown.
    #[test]
    fn connection_loss_without_a_code_is_contention() {
        assert_eq!(
            classify(&Fault::Closed),
            Verdict::Contention(ContentionReason::ConnectionClosed)
        );
        assert_eq!(
            classify(&Fault::Io),
            Verdict::Contention(ContentionReason::ConnectionIo)
        );
        assert_eq!(
            classify(&Fault::Abandoned),
            Verdict::Contention(ContentionReason::Abandoned)
        );
    }

    /// Row 3: 23503 and 23514 are programming errors (and so is the rest of class 23).
    #[test]
    fn constraint_violations_are_programming_errors() {
        for code in [
            "23503", "23514", "23505", "23502", "23P01", "23000", "23001",
        ] {
            assert_eq!(classify(&sql(code)), Verdict::Programming, "{code}");
        }
    }

    /// Row 4: anything else, with or without a code, is a programming error;
    /// the additions of spec §6 are the only other contention codes: the
    /// rest of class 40 but 40002 (a constraint), class 53, and the codes
    /// that end the session.
    #[test]
    fn everything_else_is_a_programming_error() {
        let spirit = [
            "40000", "40003", "55P03", "57P01", "57P02", "57P03", "57P05", "25P03",
        ];
        let task = ["40001", "40P01", "57014"];
        for code in all_codes() {
            let expected_contention = code.starts_with("08")
                || code.starts_with("53")
                || task.contains(&code)
                || spirit.contains(&code);
            assert_eq!(
                contention(code).is_some(),
                expected_contention,
                "{code} classified as {:?}",
                classify(&sql(code))
            );
        }
        assert_eq!(classify(&Fault::DriverMisuse), Verdict::Programming);
        for code in [
            "25P02", "25006", "57P04", "42P01", "22008", "22023", "40002", "42501", "54000",
            "XX000", "00000", "01000",
        ] {
            assert_eq!(classify(&sql(code)), Verdict::Programming, "{code}");
        }
    }

    /// Nothing the translation can be given yields a lost lock: every known
    /// SQLSTATE, every class with an unknown subclass, a spread of arbitrary
    /// five-character codes, and every fault without a code all land in one
    /// of the two verdicts, and `Verdict` has no third value. (Translating a
    /// real driver error is covered against a live server in
    /// `tests/faults.rs`.)
    #[test]
    fn no_input_means_lost() {
        const CHARS: &[u8] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ";
        let mut inputs: Vec<Fault> = all_codes().into_iter().map(sql).collect();
        for &a in CHARS {
            for &b in CHARS {
                let class = format!("{}{}", a as char, b as char);
                inputs.push(sql(&format!("{class}000")));
                inputs.push(sql(&format!("{class}P99")));
            }
        }
        // A deterministic spread of arbitrary codes (xorshift).
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        for _ in 0..20_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let code: String = (0..5)
                .map(|i| CHARS[((x >> (i * 6)) % CHARS.len() as u64) as usize] as char)
                .collect();
            inputs.push(sql(&code));
        }
        inputs.extend([
            Fault::Closed,
            Fault::Io,
            Fault::Abandoned,
            Fault::Timeout(None),
            Fault::Timeout(Some(Duration::ZERO)),
            Fault::DriverMisuse,
        ]);
        for fault in &inputs {
            // Exhaustive on purpose: a third verdict would not compile here
            // without deciding what it means.
            let contention = match classify(fault) {
                Verdict::Contention(_) => true,
                Verdict::Programming => false,
            };
            // And the one table decides, nothing of the translator's own.
            assert_eq!(
                contention,
                fate::of(fault.condition()).is_retryable(),
                "{fault:?}"
            );
        }
        assert!(inputs.len() > 20_000);
    }

    /// The reasons name what the table says: the fate's cause for an unknown
    /// outcome, the code for a transient failure.
    #[test]
    fn reasons_name_the_fate() {
        let terminated = |code| {
            Some(ContentionReason::SessionTerminated(SqlState::from_code(
                code,
            )))
        };
        for code in ["57P01", "57P02", "57P03", "57P05", "25P03"] {
            assert_eq!(contention(code), terminated(code), "{code}");
        }
        assert_eq!(
            contention("40003"),
            Some(ContentionReason::CompletionUnknown)
        );
        assert_eq!(contention("55P03"), Some(ContentionReason::LockTimeout));
        for code in ["53000", "53100", "53200", "53300", "53400"] {
            assert_eq!(
                contention(code),
                Some(ContentionReason::ServerUnavailable(SqlState::from_code(
                    code
                ))),
                "{code}"
            );
        }
        assert_eq!(
            contention("40000"),
            Some(ContentionReason::OtherRetryable {
                fate: Fate::Failed(fate::Failure { transient: true }),
                code: Some(SqlState::TRANSACTION_ROLLBACK),
            })
        );
    }

    /// Driver errors that need no server: read by their kind.
    #[tokio::test]
    async fn driver_errors_without_a_server_are_read_by_kind() {
        let misuse = "port=not-a-number"
            .parse::<tokio_postgres::Config>()
            .expect_err("a port must be a number");
        assert_eq!(Fault::of(&misuse), Fault::DriverMisuse);
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let refused = tokio_postgres::Config::new()
            .host("127.0.0.1")
            .port(port)
            .user("nobody")
            .connect(tokio_postgres::NoTls)
            .await
            .map(|_| ())
            .expect_err("nobody listens on the port");
        assert_eq!(Fault::of(&refused), Fault::Io);
    }
}
