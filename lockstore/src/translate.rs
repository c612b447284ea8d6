//! The error translation (`specs/LOCKSTORE.md` §6; the task's §4 table).
//!
//! A pure function in two steps, so that a test can run it over every input:
//! [`Fault::of`] extracts what matters from a driver error (its SQLSTATE, or
//! how it failed without one), and [`classify`] maps a [`Fault`] to a
//! [`Verdict`]. `Verdict` has two values, contention and programming
//! error; there is no "lost" value, so nothing here can claim that a lock is
//! gone. Only a statement that matched zero rows may say that, and it is not
//! an error.
//!
//! | fault | verdict |
//! | ----- | ------- |
//! | 40001, 40P01 (and 40003) | contention |
//! | class 08, 57014 (and 55P03, 57P01, 57P02, 57P03, 57P05, 53300) | contention |
//! | client or driver timeout | contention |
//! | connection closed, socket I/O error, broken protocol stream | contention |
//! | 23503, 23514, any other SQLSTATE | programming error, unchanged |
//! | any other client-side error | programming error, unchanged |

use crate::spi::{Contention, ContentionReason, StoreError};
use std::time::Duration;
use tokio_postgres::error::SqlState;

/// What the translation looks at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fault {
    /// The server sent an error with this SQLSTATE.
    Sql(SqlState),
    /// The connection closed without a SQLSTATE.
    Closed,
    /// Connecting or communicating failed at the socket, without a SQLSTATE.
    Io,
    /// An unexpected or unparsable message from the server.
    Protocol,
    /// A client-side timeout: the store's per-call timeout (with its length),
    /// or the driver's own.
    Timeout(Option<Duration>),
    /// Any other client-side error (a parameter or column type mismatch, an
    /// unexpected row count, a configuration error, ...).
    Client,
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
        if let Some(code) = err.code() {
            return Fault::Sql(code.clone());
        }
        if err.is_closed() {
            return Fault::Closed;
        }
        // tokio-postgres 0.7 exposes its error kind only through Display,
        // which prints the kind alone (the cause is `source()`).
        match err.to_string().as_str() {
            "error communicating with the server" | "error connecting to server" => Fault::Io,
            "unexpected message from server" | "error parsing response from server" => {
                Fault::Protocol
            }
            "timeout waiting for server" => Fault::Timeout(None),
            "error encoding message to server" => Fault::Client,
            _ if std::error::Error::source(err)
                .is_some_and(|s| s.downcast_ref::<std::io::Error>().is_some()) =>
            {
                Fault::Io
            }
            _ => Fault::Client,
        }
    }
}

/// The §6 table.
pub fn classify(fault: &Fault) -> Verdict {
    match fault {
        Fault::Sql(code) => classify_sqlstate(code),
        Fault::Closed => Verdict::Contention(ContentionReason::ConnectionClosed),
        Fault::Io => Verdict::Contention(ContentionReason::ConnectionIo),
        Fault::Protocol => Verdict::Contention(ContentionReason::Protocol),
        Fault::Timeout(after) => {
            Verdict::Contention(ContentionReason::ClientTimeout { after: *after })
        }
        Fault::Client => Verdict::Programming,
    }
}

/// The SQLSTATE rows of the §6 table.
pub fn classify_sqlstate(code: &SqlState) -> Verdict {
    let reason = match code.code() {
        // The task's table.
        "40001" => ContentionReason::Serialization,
        "40P01" => ContentionReason::Deadlock,
        "57014" => ContentionReason::QueryCanceled,
        class_08 if class_08.starts_with("08") => ContentionReason::ConnectionFailure(code.clone()),
        // Not in the task's table; classified in its spirit (spec §6).
        "40003" => ContentionReason::CompletionUnknown,
        "55P03" => ContentionReason::LockTimeout,
        "57P01" | "57P02" | "57P05" => ContentionReason::SessionTerminated(code.clone()),
        "57P03" | "53300" => ContentionReason::ServerUnavailable(code.clone()),
        // 23503, 23514 and everything else.
        _ => return Verdict::Programming,
    };
    Verdict::Contention(reason)
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
            classify(&Fault::Protocol),
            Verdict::Contention(ContentionReason::Protocol)
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
    /// the additions of spec §6 are the only other contention codes.
    #[test]
    fn everything_else_is_a_programming_error() {
        let spirit = [
            "40003", "55P03", "57P01", "57P02", "57P03", "57P05", "53300",
        ];
        let task = ["40001", "40P01", "57014"];
        for code in all_codes() {
            let expected_contention =
                code.starts_with("08") || task.contains(&code) || spirit.contains(&code);
            assert_eq!(
                contention(code).is_some(),
                expected_contention,
                "{code} classified as {:?}",
                classify(&sql(code))
            );
        }
        assert_eq!(classify(&Fault::Client), Verdict::Programming);
        for code in [
            "25P02", "25P03", "25006", "57P04", "42P01", "22008", "54000", "XX000",
        ] {
            assert_eq!(classify(&sql(code)), Verdict::Programming, "{code}");
        }
    }

    /// Nothing the translation can be given yields a lost lock: every known
    /// SQLSTATE, every class with an unknown subclass, a spread of arbitrary
    /// five-character codes, and every fault without a code all land in one
    /// of the two verdicts, and `Verdict` has no third value. (Translating a
    /// real driver error is covered against a live server in
    /// `tests/translate_real.rs`.)
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
            Fault::Protocol,
            Fault::Timeout(None),
            Fault::Timeout(Some(Duration::ZERO)),
            Fault::Client,
        ]);
        for fault in &inputs {
            // Exhaustive on purpose: a third verdict would not compile here
            // without deciding what it means.
            match classify(fault) {
                Verdict::Contention(_) | Verdict::Programming => {}
            }
        }
        assert!(inputs.len() > 20_000);
    }
}
