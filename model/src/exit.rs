//! The exit statuses of every leasecheck command: one meaning each, whatever the command
//! (like nextest's documented exit codes), so a CI script can branch on them without knowing
//! which command ran.
//!
//! | status | meaning |
//! | --- | --- |
//! | 0 | passed: every check passed, the history is linearizable, no regression, every mutant killed, or the command did what it was asked |
//! | 1 | a finding about the target: a violation, a failed check, a stall, an answer outside the API, a regression, a surviving mutant |
//! | 2 | no verdict: something could not be run or read (infrastructure, a search whose budget ran out, an unreadable history); never a pass and never a finding |
//!
//! A run with both a finding and a no-verdict exits 1 for the gate and `faults` (a finding
//! stands whatever else happened) and 2 for `mutants` (a hunt that could not run says nothing
//! about the catalogue). A judging command (`gate`, `check`, `check-history`, `faults`,
//! `mutants`, `bench`) that stops on an error exits 2; the commands that only do something
//! (`fetch-pg`, `find-pg`, `image`, `export-release`) and `run`, `installcheck` and `model`
//! exit 1 on any error.

/// What a command's run came to, as its exit status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Exit {
    Passed,
    Finding,
    NoVerdict,
}

impl Exit {
    /// The process exit status.
    pub const fn code(self) -> i32 {
        match self {
            Exit::Passed => 0,
            Exit::Finding => 1,
            Exit::NoVerdict => 2,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_meaning_has_its_own_status() {
        let codes = [Exit::Passed, Exit::Finding, Exit::NoVerdict].map(Exit::code);
        assert_eq!(codes, [0, 1, 2]);
    }
}
