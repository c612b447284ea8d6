//! The one error-fate table: what a call's failure says about whether it took effect.
//!
//! Every client of the project (the lease client, the history recorder, the lock store's
//! translator, the checker reading a history) asks this table; none keeps its own. The input
//! is a [`Condition`]: a SQLSTATE the server reported, or a driver-level condition without
//! one. Driver errors are mapped to conditions by their kind, never by their message text.
//!
//! | condition | fate |
//! | --- | --- |
//! | class 00, 01 (success, warning) | ok |
//! | class 08 (connection exception) | unknown |
//! | 57P01 admin shutdown, 57P02 crash shutdown, 57P03 cannot connect now, 57P05 idle session timeout, 25P03 idle-in-transaction timeout | unknown (the session ended; a commit may have happened before the reply was lost) |
//! | 40003 statement completion unknown | unknown |
//! | 40001 serialization failure, 40P01 deadlock (and 40000, the rest of class 40) | failed, transient |
//! | 40002 transaction integrity constraint violation | failed (a constraint: a retry repeats it) |
//! | 55P03 lock not available, 57014 query canceled, 53xxx insufficient resources | failed, transient |
//! | 22023 invalid parameter value | failed (pg_lease's invalid input) |
//! | 42501 insufficient privilege | failed |
//! | other class 42 (syntax error, undefined object), 0A000 | harness bug (bad SQL) |
//! | 25P02 in failed SQL transaction (a statement sent after an error aborted the transaction) | harness bug (bad SQL) |
//! | any other SQLSTATE | failed (the statement, and its transaction, did not take effect) |
//! | connection closed, socket error, broken protocol stream | unknown |
//! | client timeout, call abandoned by the client | unknown |
//! | driver programming error (bad parameter type, wrong column, bad row count) | harness bug |
//!
//! **Attribution.** The rows above are for an error raised by the caller's own statement
//! ([`Condition::Sql`]): its text, parameters or protocol use. An error raised while the
//! server ran the target's code ([`Condition::InTarget`]: the error's context names a
//! routine of the target) is judged by the target's contract (specs/SEMANTICS.md section 7)
//! instead, and is never the caller's bug:
//!
//! | raised inside the target | fate |
//! | --- | --- |
//! | a contract error: 22023, 57014, 55P03, 55000, 40001, 40P01, 25006 ([`CONTRACT_ERRORS`]) | as above (failed) |
//! | the session or connection ended (class 08, 57P01-57P05, 25P03, 40003) | unknown |
//! | the machine (class 53 resources, 58 system error, XX internal error) | failed |
//! | any other SQLSTATE (a syntax error of SQL the target built, a unique violation, an overflow, ...) | outside the contract: a finding about the target |

use std::fmt;

/// SQLSTATE 22023, pg_lease's invalid input.
pub const INVALID_PARAMETER_VALUE: &str = "22023";
/// SQLSTATE 57014, a cancel or a statement timeout, and pg_lease's exhausted wait.
pub const QUERY_CANCELED: &str = "57014";
/// How the message of pg_lease's exhausted-wait error (SQLSTATE 57014) starts; a user
/// cancel or `statement_timeout` never has this message.
pub const WAIT_EXHAUSTED_PREFIX: &str = "lease.acquire: wait of ";

/// The SQLSTATEs a valid or invalid call of pg_lease may answer from inside its code
/// (specs/SEMANTICS.md section 7): invalid input, a cancel, a statement or lock timeout,
/// the refusal outside READ COMMITTED, a serialization failure or deadlock of the caller's
/// transaction, a write in a READ ONLY transaction.
pub const CONTRACT_ERRORS: [&str; 7] = [
    INVALID_PARAMETER_VALUE,
    QUERY_CANCELED,
    "55P03",
    "55000",
    "40001",
    "40P01",
    READ_ONLY_TRANSACTION,
];

/// SQLSTATE 25006: a write in a READ ONLY transaction.
pub const READ_ONLY_TRANSACTION: &str = "25006";

/// Why a call failed, as far as the fate is concerned.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Condition<'a> {
    /// The server reported this SQLSTATE for the caller's own statement: no routine of
    /// the target was running when it was raised (its context names none).
    Sql(&'a str),
    /// The server reported this SQLSTATE while it ran the target's code: the error's
    /// context names a routine of the target. Never the caller's bug.
    InTarget(&'a str),
    /// The connection closed, a socket read or write failed, or the protocol stream broke,
    /// after the call was sent.
    ConnectionLost,
    /// The client stopped waiting for the answer (its own timeout).
    ClientTimeout,
    /// The client dropped the call before its answer arrived (e.g. a task was aborted).
    Abandoned,
    /// The driver refused the call or its answer: a parameter of the wrong type, a missing
    /// column, an unexpected row count. A bug in the calling code.
    DriverMisuse,
}

/// Whether a failed call took effect.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Fate {
    /// Not a failure (success or warning class).
    Ok,
    /// The call definitely did not take effect (its transaction is aborted).
    Failed(Failure),
    /// The call may or may not have taken effect; resolvable only by looking at the server
    /// (`pg_xact_status`) or at later observations.
    Unknown(UnknownCause),
    /// The calling code is wrong (bad SQL, bad types): neither an answer nor a fault.
    HarnessBug(BugCause),
    /// The target's code raised an error its contract does not have (specs/SEMANTICS.md
    /// section 7): the statement did not take effect, and that answer is a finding about
    /// the target (a valid call answered an error, invariant 9).
    OutsideContract,
}

/// Details of a definite failure.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Failure {
    /// Retrying the same call may succeed (contention, a cancel, a resource limit), as
    /// opposed to a refusal that will repeat (invalid input, a permission, a constraint).
    pub transient: bool,
}

/// Why a call's effect is unknown.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum UnknownCause {
    /// The connection was lost (class 08 or no SQLSTATE).
    ConnectionLost,
    /// The server ended the session (shutdown, crash, terminate, session timeout).
    SessionEnded,
    /// The server itself does not know (40003).
    CompletionUnknown,
    /// The client stopped waiting.
    ClientTimeout,
    /// The client dropped the call.
    Abandoned,
}

/// Why a failure is the caller's bug.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BugCause {
    /// The server rejected the SQL itself (class 42 other than 42501, 0A000).
    BadSql,
    /// The driver refused a parameter or a result.
    DriverMisuse,
}

impl fmt::Display for Fate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Fate::Ok => f.write_str("ok"),
            Fate::Failed(Failure { transient: true }) => f.write_str("failed (transient)"),
            Fate::Failed(Failure { transient: false }) => f.write_str("failed"),
            Fate::Unknown(c) => write!(f, "unknown ({c:?})"),
            Fate::HarnessBug(c) => write!(f, "harness bug ({c:?})"),
            Fate::OutsideContract => f.write_str("an error outside the target's contract"),
        }
    }
}

impl Fate {
    /// True when the call may have taken effect without the caller seeing it.
    pub fn is_unknown(self) -> bool {
        matches!(self, Fate::Unknown(_))
    }

    /// True when retrying is reasonable: the effect is unknown or the failure transient.
    pub fn is_retryable(self) -> bool {
        matches!(
            self,
            Fate::Unknown(_) | Fate::Failed(Failure { transient: true })
        )
    }
}

/// The fate of a failed call.
pub fn of(condition: Condition<'_>) -> Fate {
    match condition {
        Condition::Sql(code) => of_sqlstate(code),
        Condition::InTarget(code) => raised_in_target(code),
        Condition::ConnectionLost => Fate::Unknown(UnknownCause::ConnectionLost),
        Condition::ClientTimeout => Fate::Unknown(UnknownCause::ClientTimeout),
        Condition::Abandoned => Fate::Unknown(UnknownCause::Abandoned),
        Condition::DriverMisuse => Fate::HarnessBug(BugCause::DriverMisuse),
    }
}

/// The fate of a call the server answered with SQLSTATE `code` (five characters; anything
/// else is not a SQLSTATE and is judged a definite failure of unknown kind).
pub fn of_sqlstate(code: &str) -> Fate {
    let class = code.get(..2).unwrap_or("");
    let failed = |transient| Fate::Failed(Failure { transient });
    match (class, code) {
        ("00" | "01", _) => Fate::Ok,
        ("08", _) => Fate::Unknown(UnknownCause::ConnectionLost),
        (_, "57P01" | "57P02" | "57P03" | "57P05" | "25P03") => {
            Fate::Unknown(UnknownCause::SessionEnded)
        }
        (_, "40003") => Fate::Unknown(UnknownCause::CompletionUnknown),
        // A constraint violation, though its class is "transaction rollback".
        (_, "40002") => failed(false),
        ("40", _) => failed(true),
        (_, "55P03" | QUERY_CANCELED) => failed(true),
        ("53", _) => failed(true),
        (_, "42501") => failed(false),
        ("42", _) | (_, "0A000" | "25P02") => Fate::HarnessBug(BugCause::BadSql),
        _ => failed(false),
    }
}

/// The fate of SQLSTATE `code` raised while the target's code ran: its contract errors,
/// an ended session and the machine's own errors as for any statement; anything else is
/// outside the contract (never the caller's bad SQL: the caller's text was accepted).
pub fn raised_in_target(code: &str) -> Fate {
    let class = code.get(..2).unwrap_or("");
    let fate = of_sqlstate(code);
    let machine = matches!(class, "53" | "58" | "XX");
    match fate {
        Fate::Unknown(_) | Fate::Ok => fate,
        _ if machine || CONTRACT_ERRORS.contains(&code) => fate,
        _ => Fate::OutsideContract,
    }
}

/// True when SQLSTATE `code` with `message` is pg_lease's exhausted wait (as opposed to a
/// cancel or a statement timeout, which share 57014).
pub fn is_wait_exhausted(code: &str, message: &str) -> bool {
    code == QUERY_CANCELED && message.starts_with(WAIT_EXHAUSTED_PREFIX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connection_loss_and_session_end_are_unknown() {
        for code in [
            "08006", "08003", "08P01", "57P01", "57P02", "57P03", "40003",
        ] {
            assert!(of_sqlstate(code).is_unknown(), "{code}");
        }
        assert!(of(Condition::ConnectionLost).is_unknown());
        assert!(of(Condition::ClientTimeout).is_unknown());
        assert!(of(Condition::Abandoned).is_unknown());
    }

    #[test]
    fn definite_failures_are_not_unknown() {
        for code in [
            "22023", "40001", "40P01", "55P03", "57014", "23505", "XX000",
        ] {
            assert!(
                matches!(of_sqlstate(code), Fate::Failed(_)),
                "{code}: {}",
                of_sqlstate(code)
            );
        }
        assert!(of_sqlstate("40001").is_retryable());
        assert!(!of_sqlstate("22023").is_retryable());
        assert!(!of_sqlstate("23503").is_retryable());
    }

    #[test]
    fn a_transaction_integrity_constraint_violation_is_not_transient() {
        assert_eq!(
            of_sqlstate("40002"),
            Fate::Failed(Failure { transient: false })
        );
        assert!(!of_sqlstate("40002").is_retryable());
        assert!(of_sqlstate("40000").is_retryable());
    }

    #[test]
    fn bad_sql_and_driver_misuse_are_harness_bugs() {
        assert_eq!(of_sqlstate("42601"), Fate::HarnessBug(BugCause::BadSql));
        assert_eq!(of_sqlstate("42883"), Fate::HarnessBug(BugCause::BadSql));
        assert_eq!(of_sqlstate("25P02"), Fate::HarnessBug(BugCause::BadSql));
        assert_eq!(
            of(Condition::DriverMisuse),
            Fate::HarnessBug(BugCause::DriverMisuse)
        );
        assert_eq!(
            of_sqlstate("42501"),
            Fate::Failed(Failure { transient: false })
        );
    }

    /// The same SQLSTATE is the caller's bug from its own statement and a finding from
    /// inside the target; contract errors, ended sessions and the machine's errors keep
    /// their fate wherever they were raised.
    #[test]
    fn an_error_raised_inside_the_target_is_judged_by_its_contract() {
        assert_eq!(
            of(Condition::Sql("42601")),
            Fate::HarnessBug(BugCause::BadSql)
        );
        assert_eq!(of(Condition::InTarget("42601")), Fate::OutsideContract);
        for code in [
            "23505", "22003", "54000", "22008", "42883", "0A000", "42501",
        ] {
            assert_eq!(
                of(Condition::InTarget(code)),
                Fate::OutsideContract,
                "{code}"
            );
        }
        for code in CONTRACT_ERRORS {
            assert_eq!(of(Condition::InTarget(code)), of_sqlstate(code), "{code}");
            assert!(matches!(of_sqlstate(code), Fate::Failed(_)), "{code}");
        }
        for code in ["08006", "57P01", "40003", "53200", "58030", "XX000"] {
            assert_eq!(of(Condition::InTarget(code)), of_sqlstate(code), "{code}");
        }
        assert!(!Fate::OutsideContract.is_unknown());
        assert!(!Fate::OutsideContract.is_retryable());
    }

    #[test]
    fn success_classes_are_ok() {
        assert_eq!(of_sqlstate("00000"), Fate::Ok);
        assert_eq!(of_sqlstate("01000"), Fate::Ok);
    }

    #[test]
    fn only_pg_leases_message_is_an_exhausted_wait() {
        assert!(is_wait_exhausted(
            "57014",
            "lease.acquire: wait of 00:00:01 exhausted: the key is still held by another owner"
        ));
        assert!(!is_wait_exhausted(
            "57014",
            "canceling statement due to statement timeout"
        ));
        assert!(!is_wait_exhausted("55P03", "lease.acquire: wait of 1s"));
    }
}
