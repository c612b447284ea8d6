//! The named faults: each one a check of its own (specs/FAILURE-MODEL.md maps each to the
//! invariant it defends), described by one record of [`SPECS`] (its name, class, the
//! invariants it defends, where it runs, the situation its check drives, how a campaign
//! injects it and its negative control). Every list of faults ([`Fault::ALL`],
//! [`Fault::CAMPAIGN`], [`Fault::QUICK`], the `--nemesis` groups) is a filter over that
//! table, and the checks dispatch on the record's [`Situation`], so adding a fault is a
//! variant with its record in [`faults!`] (its tests in failure/tests/faults.rs are
//! generated from the table) and, when no existing situation fits, its situation's code.

use crate::builds::BrokenBuild;
use crate::server::Stop;
use crate::situation::{
    plan_file, Breakage, CampaignPlan, Control, Cut, Doctor, Expect, Injection, Shows, Situation,
    KEPT_WRITE, LAPSE_IGNORED, LOST_WRITE, RENEW_AFTER_LAPSE,
};
use model::Invariant;
use std::fmt;
use std::str::FromStr;

/// Declares the faults: each variant with its record, so that no variant lacks one and
/// the table is in the variants' order by construction.
macro_rules! faults {
    ($($(#[$doc:meta])* $variant:ident { $($field:ident: $value:expr),* $(,)? })*) => {
        /// One named fault.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub enum Fault {
            $($(#[$doc])* $variant,)*
        }

        /// The one table of faults, in the order of [`Fault`]'s variants.
        pub const SPECS: [Spec; [$(Fault::$variant),*].len()] = [
            $(Spec { fault: Fault::$variant, $($field: $value),* },)*
        ];
    };
}

/// What kind of fault it is; some classes are a `--nemesis` group ([`Class::group`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Class {
    /// The server killed (SIGKILL), then started: crash recovery.
    Crash,
    /// The server shut down (immediate or fast), then started.
    Restart,
    /// A client's backend terminated or its call cancelled.
    Kill,
    /// A server-side timeout fires inside a call.
    Timeout,
    /// A client or the whole server stops for a while.
    Pause,
    /// The connections through the proxy cut.
    Cut,
    /// A lease runs out on its own (the server down, or the work too long).
    Expiry,
    /// A live lease made to lapse now.
    Lapse,
    /// A transaction that wrote lease state rolls back.
    Abort,
    /// A release meets a blocked waiter.
    Wake,
}

impl Class {
    /// The `--nemesis` group naming the class's faults, when it is one (`crash` and `lapse`
    /// name the fault of that name).
    pub fn group(self) -> Option<&'static str> {
        match self {
            Class::Restart => Some("restart"),
            Class::Kill => Some("kill"),
            Class::Pause => Some("pause"),
            Class::Cut => Some("cut"),
            Class::Crash
            | Class::Timeout
            | Class::Expiry
            | Class::Lapse
            | Class::Abort
            | Class::Wake => None,
        }
    }
}

/// Everything about one fault, in one place.
#[derive(Clone, Copy, Debug)]
pub struct Spec {
    pub fault: Fault,
    /// The name used on the command line and in histories.
    pub name: &'static str,
    pub class: Class,
    /// The invariants the fault's check defends.
    pub defends: &'static [Invariant],
    /// Whether the check runs on PostgreSQL 14 in `cargo test` too (crash, restart, cut
    /// and lapse: the faults that rest most on the server's own recovery and connection
    /// handling; `leasecheck faults --pg 14` runs them all).
    pub on_pg14_in_tests: bool,
    /// Whether a mixed campaign draws it ([`Fault::CAMPAIGN`]).
    pub in_campaign: bool,
    /// Whether the gate's quick set runs it ([`Fault::QUICK`]).
    pub in_quick: bool,
    /// What the fault's check drives.
    pub situation: Situation,
    /// How a campaign's schedule injects it.
    pub injection: Injection,
    /// The longest hold a drawn schedule gives it, in ms (0: it holds nothing).
    pub max_hold_ms: u64,
    /// The negative control of its check.
    pub control: Control,
}

/// What a lost committed write defends against (the crash and restart checks).
const DURABLE: &[Invariant] = &[
    Invariant::DurabilityAndTimeAuthority,
    Invariant::EpochNeverDecreases,
    Invariant::GrantEpochFresh,
];
const FAIL_CLOSED: &[Invariant] = &[Invariant::FailClosed, Invariant::MutualExclusion];
const LAPSE_FINAL: &[Invariant] = &[
    Invariant::LapseIsFinal,
    Invariant::GrantEpochFresh,
    Invariant::MutualExclusion,
];
const SERVER_TIME: &[Invariant] = &[
    Invariant::DurabilityAndTimeAuthority,
    Invariant::LapseIsFinal,
];

const fn build(b: BrokenBuild, expects: Expect) -> Control {
    Control {
        breakage: Breakage::Build(b),
        expects,
    }
}

const fn doctored(d: Doctor, expects: Expect) -> Control {
    Control {
        breakage: Breakage::Doctored(d),
        expects,
    }
}

/// A cut's control: the clients go around the proxy, so the fault must miss.
const MISSED: Control = Control {
    breakage: Breakage::FaultMisses,
    expects: Expect::NotInjected,
};

/// A cancelled wait that grants shows as two grants at once, or a grant of a stale epoch.
const CANCELLED_GRANT: Expect =
    Expect::Violation(&[Invariant::MutualExclusion, Invariant::GrantEpochFresh]);

faults! {
    /// SIGKILL of the postmaster (every backend dies at once), then start.
    Crash {
        name: "crash",
        class: Class::Crash,
        defends: DURABLE,
        on_pg14_in_tests: true,
        in_campaign: true,
        in_quick: true,
        situation: Situation::Campaign(CampaignPlan::Restarts),
        injection: Injection::Restart(Stop::Crash),
        max_hold_ms: 1_500,
        control: build(BrokenBuild::UnloggedTable, Expect::Violation(LOST_WRITE)),
    }
    /// Immediate shutdown (no checkpoint), then start (crash recovery).
    RestartImmediate {
        name: "restart-immediate",
        class: Class::Restart,
        defends: DURABLE,
        on_pg14_in_tests: true,
        in_campaign: true,
        in_quick: false,
        situation: Situation::Campaign(CampaignPlan::Restarts),
        injection: Injection::Restart(Stop::Immediate),
        max_hold_ms: 1_500,
        control: build(BrokenBuild::UnloggedTable, Expect::Violation(LOST_WRITE)),
    }
    /// Fast shutdown (sessions terminated, checkpoint), then start.
    RestartFast {
        name: "restart-fast",
        class: Class::Restart,
        defends: DURABLE,
        on_pg14_in_tests: false,
        in_campaign: true,
        in_quick: false,
        situation: Situation::Campaign(CampaignPlan::Restarts),
        injection: Injection::Restart(Stop::Fast),
        max_hold_ms: 1_500,
        control: doctored(Doctor::LostInRestart, Expect::Violation(LOST_WRITE)),
    }
    /// `synchronous_commit = off` for every session, then a crash: pg_lease 0.2.0 commits
    /// lease writes durably anyway.
    SyncCommitOffCrash {
        name: "sync-commit-off-crash",
        class: Class::Crash,
        defends: DURABLE,
        on_pg14_in_tests: false,
        in_campaign: false,
        in_quick: true,
        situation: Situation::Campaign(CampaignPlan::SyncOffCrashes),
        injection: Injection::Restart(Stop::Crash),
        max_hold_ms: 0,
        control: build(BrokenBuild::NoDurableCommit, Expect::Violation(LOST_WRITE)),
    }
    /// A client's backend terminated (`pg_terminate_backend`).
    Terminate {
        name: "terminate",
        class: Class::Kill,
        defends: FAIL_CLOSED,
        on_pg14_in_tests: false,
        in_campaign: true,
        in_quick: true,
        situation: Situation::Plan {
            plan: plan_file!("terminate"),
            shows: Shows::Answers,
        },
        injection: Injection::Backend { terminate: true },
        max_hold_ms: 0,
        control: doctored(Doctor::AbortedKept, Expect::Violation(KEPT_WRITE)),
    }
    /// An in-flight call cancelled (`pg_cancel_backend`), a blocking acquire mid-wait and a
    /// renew waiting for a row lock.
    Cancel {
        name: "cancel",
        class: Class::Kill,
        defends: FAIL_CLOSED,
        on_pg14_in_tests: false,
        in_campaign: true,
        in_quick: true,
        situation: Situation::Plan {
            plan: plan_file!("cancel"),
            shows: Shows::Answers,
        },
        injection: Injection::Backend { terminate: false },
        max_hold_ms: 0,
        control: build(BrokenBuild::CancelledWaitGrants, CANCELLED_GRANT),
    }
    /// `statement_timeout` fires inside a blocking acquire's wait.
    StatementTimeout {
        name: "statement-timeout",
        class: Class::Timeout,
        defends: FAIL_CLOSED,
        on_pg14_in_tests: false,
        in_campaign: false,
        in_quick: false,
        situation: Situation::Plan {
            plan: plan_file!("statement-timeout"),
            shows: Shows::Answers,
        },
        injection: Injection::Backend { terminate: false },
        max_hold_ms: 0,
        control: build(BrokenBuild::CancelledWaitGrants, CANCELLED_GRANT),
    }
    /// `lock_timeout` fires while a blocking acquire waits for a row lock.
    LockTimeout {
        name: "lock-timeout",
        class: Class::Timeout,
        defends: FAIL_CLOSED,
        on_pg14_in_tests: false,
        in_campaign: false,
        in_quick: false,
        situation: Situation::Plan {
            plan: plan_file!("lock-timeout"),
            shows: Shows::Answers,
        },
        injection: Injection::Backend { terminate: false },
        max_hold_ms: 0,
        control: doctored(Doctor::CancelledWriteKept, Expect::Violation(KEPT_WRITE)),
    }
    /// A client holding a lease stops for longer than its TTL.
    ClientPause {
        name: "client-pause",
        class: Class::Pause,
        defends: LAPSE_FINAL,
        on_pg14_in_tests: false,
        in_campaign: true,
        in_quick: true,
        situation: Situation::Plan {
            plan: plan_file!("client-pause"),
            shows: Shows::Answers,
        },
        injection: Injection::ClientPause,
        max_hold_ms: 1_500,
        control: build(
            BrokenBuild::RenewIgnoresExpiry,
            Expect::Violation(RENEW_AFTER_LAPSE),
        ),
    }
    /// SIGSTOP of the whole server, SIGCONT later.
    ServerPause {
        name: "server-pause",
        class: Class::Pause,
        defends: SERVER_TIME,
        on_pg14_in_tests: false,
        in_campaign: true,
        in_quick: false,
        situation: Situation::Campaign(CampaignPlan::ServerPauses),
        injection: Injection::ServerPause,
        max_hold_ms: 1_500,
        control: build(
            BrokenBuild::RenewIgnoresExpiry,
            Expect::Violation(RENEW_AFTER_LAPSE),
        ),
    }
    /// Every connection through the proxy closed cleanly (FIN).
    CutClose {
        name: "cut-close",
        class: Class::Cut,
        defends: FAIL_CLOSED,
        on_pg14_in_tests: false,
        in_campaign: true,
        in_quick: false,
        situation: Situation::Campaign(CampaignPlan::Cuts),
        injection: Injection::Cut(Cut::Close),
        max_hold_ms: 0,
        control: MISSED,
    }
    /// Every connection through the proxy reset (RST).
    CutReset {
        name: "cut-reset",
        class: Class::Cut,
        defends: FAIL_CLOSED,
        on_pg14_in_tests: true,
        in_campaign: true,
        in_quick: true,
        situation: Situation::Campaign(CampaignPlan::Cuts),
        injection: Injection::Cut(Cut::Reset),
        max_hold_ms: 0,
        control: MISSED,
    }
    /// The proxy stops forwarding without closing anything.
    CutBlackhole {
        name: "cut-blackhole",
        class: Class::Cut,
        defends: FAIL_CLOSED,
        on_pg14_in_tests: false,
        in_campaign: true,
        in_quick: false,
        situation: Situation::Campaign(CampaignPlan::Blackhole),
        injection: Injection::Cut(Cut::Blackhole),
        max_hold_ms: 3_000,
        control: MISSED,
    }
    /// The server is down across a lease's expiry.
    DowntimeExpiry {
        name: "downtime-expiry",
        class: Class::Expiry,
        defends: SERVER_TIME,
        on_pg14_in_tests: false,
        in_campaign: false,
        in_quick: false,
        situation: Situation::Plan {
            plan: plan_file!("downtime-expiry"),
            shows: Shows::ExpiryInDowntime,
        },
        injection: Injection::Restart(Stop::Fast),
        max_hold_ms: 0,
        control: build(
            BrokenBuild::RenewIgnoresExpiry,
            Expect::Violation(RENEW_AFTER_LAPSE),
        ),
    }
    /// A TTL too short for the work: the lease lapses mid-work.
    ShortTtl {
        name: "short-ttl",
        class: Class::Expiry,
        defends: LAPSE_FINAL,
        on_pg14_in_tests: false,
        in_campaign: false,
        in_quick: false,
        situation: Situation::Plan {
            plan: plan_file!("short-ttl"),
            shows: Shows::Answers,
        },
        injection: Injection::ClientPause,
        max_hold_ms: 0,
        control: build(
            BrokenBuild::RenewIgnoresExpiry,
            Expect::Violation(RENEW_AFTER_LAPSE),
        ),
    }
    /// A transaction acquires, then rolls back.
    AbortAfterAcquire {
        name: "abort-after-acquire",
        class: Class::Abort,
        defends: FAIL_CLOSED,
        on_pg14_in_tests: false,
        in_campaign: false,
        in_quick: false,
        situation: Situation::Plan {
            plan: plan_file!("abort-after-acquire"),
            shows: Shows::Answers,
        },
        injection: Injection::SituationOnly,
        max_hold_ms: 0,
        control: doctored(Doctor::AbortedKept, Expect::Violation(KEPT_WRITE)),
    }
    /// The server crashes while COMMIT is in flight; the outcome is resolved through
    /// `pg_xact_status`.
    CommitCrash {
        name: "commit-crash",
        class: Class::Crash,
        defends: &[Invariant::DurabilityAndTimeAuthority, Invariant::FailClosed],
        on_pg14_in_tests: false,
        in_campaign: false,
        in_quick: true,
        situation: Situation::Plan {
            plan: plan_file!("commit-crash"),
            shows: Shows::Answers,
        },
        injection: Injection::Restart(Stop::Crash),
        max_hold_ms: 0,
        control: doctored(Doctor::ResolutionSwapped, Expect::Violation(KEPT_WRITE)),
    }
    /// A release wakes a blocked waiter within the poll bound.
    WaitWake {
        name: "wait-wake",
        class: Class::Wake,
        defends: &[Invariant::MutualExclusion],
        on_pg14_in_tests: false,
        in_campaign: false,
        in_quick: true,
        situation: Situation::Plan {
            plan: plan_file!("wait-wake"),
            shows: Shows::WakeWithinPollBound,
        },
        injection: Injection::SituationOnly,
        max_hold_ms: 0,
        control: build(BrokenBuild::SlowWake, Expect::Unexpected("woke")),
    }
    /// A chosen lease is made to lapse now (clock-independent, by the superuser).
    Lapse {
        name: "lapse",
        class: Class::Lapse,
        defends: LAPSE_FINAL,
        on_pg14_in_tests: true,
        in_campaign: true,
        in_quick: true,
        situation: Situation::Campaign(CampaignPlan::Lapses),
        injection: Injection::Lapse,
        max_hold_ms: 0,
        // Leases of the lapse campaign are taken over by whoever comes first: whether an
        // old holder renews before a takeover is a race, a doctored grant is not.
        control: doctored(Doctor::LapseIgnored, Expect::Violation(LAPSE_IGNORED)),
    }
    /// One connection through the proxy reset (the one live the longest): one session
    /// loses its network while the others go on.
    CutOne {
        name: "cut-one",
        class: Class::Cut,
        defends: FAIL_CLOSED,
        on_pg14_in_tests: false,
        in_campaign: true,
        in_quick: false,
        situation: Situation::Campaign(CampaignPlan::Cuts),
        injection: Injection::Cut(Cut::ResetOne),
        max_hold_ms: 0,
        control: MISSED,
    }
}

// The table is in the variants' order, so a fault's record is found by its discriminant
// (`faults!` writes it so; checked again when compiling).
const _: () = {
    let mut i = 0;
    while i < SPECS.len() {
        assert!(
            SPECS[i].fault as usize == i,
            "SPECS is out of the variants' order"
        );
        i += 1;
    }
};

/// A selection of the table.
#[derive(Clone, Copy)]
enum Filter {
    Every,
    Campaign,
    Quick,
}

impl Filter {
    const fn keeps(self, spec: &Spec) -> bool {
        match self {
            Filter::Every => true,
            Filter::Campaign => spec.in_campaign,
            Filter::Quick => spec.in_quick,
        }
    }
}

const fn count(filter: Filter) -> usize {
    let (mut i, mut n) = (0, 0);
    while i < SPECS.len() {
        if filter.keeps(&SPECS[i]) {
            n += 1;
        }
        i += 1;
    }
    n
}

/// The faults `filter` keeps, in the table's order (N is [`count`]`(filter)`: a wrong N
/// does not compile).
const fn select<const N: usize>(filter: Filter) -> [Fault; N] {
    let mut out = [Fault::Crash; N];
    let (mut i, mut n) = (0, 0);
    while i < SPECS.len() {
        if filter.keeps(&SPECS[i]) {
            out[n] = SPECS[i].fault;
            n += 1;
        }
        i += 1;
    }
    assert!(n == N, "a filter's count is its length");
    out
}

impl Fault {
    /// Every fault, in the table's order.
    pub const ALL: [Fault; count(Filter::Every)] = select(Filter::Every);

    /// The faults a mixed campaign draws from (the others are scripted situations).
    pub const CAMPAIGN: [Fault; count(Filter::Campaign)] = select(Filter::Campaign);

    /// The gate's quick set, about 40 s on PG 15 here: one fault of each class (a
    /// crash, a backend killed, a call cancelled, a cut, a pause, the lapse, a crash with
    /// COMMIT in flight), and the crash under `synchronous_commit = off` and the wake-up,
    /// so that each fault-only mutant of the catalogue (`harness::mutants`) meets the check
    /// that catches it. The full gate runs [`Fault::ALL`].
    pub const QUICK: [Fault; count(Filter::Quick)] = select(Filter::Quick);

    /// The fault's record.
    pub const fn spec(self) -> &'static Spec {
        &SPECS[self as usize]
    }

    /// The name used on the command line and in histories.
    pub fn name(self) -> &'static str {
        self.spec().name
    }

    /// The invariants the fault's check defends.
    pub fn defends(self) -> &'static [Invariant] {
        self.spec().defends
    }

    /// Whether the fault's check runs on PostgreSQL 14 in `cargo test` ([`Spec::on_pg14_in_tests`]).
    pub fn on_pg14_in_tests(self) -> bool {
        self.spec().on_pg14_in_tests
    }
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A fault name that names no fault.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("unknown fault {given:?}: expected one of {known} (or a group: {groups})")]
pub struct UnknownFault {
    pub given: String,
    pub known: String,
    /// The group names of `--nemesis` ([`parse_group`]), read from the fault records.
    pub groups: String,
}

impl FromStr for Fault {
    type Err = UnknownFault;

    fn from_str(s: &str) -> Result<Fault, UnknownFault> {
        Fault::ALL
            .into_iter()
            .find(|f| f.name() == s)
            .ok_or_else(|| unknown(s))
    }
}

fn unknown(s: &str) -> UnknownFault {
    let mut groups: Vec<&str> = Vec::new();
    for group in SPECS.iter().filter_map(|spec| spec.class.group()) {
        if !groups.contains(&group) {
            groups.push(group);
        }
    }
    groups.push("all");
    UnknownFault {
        given: s.to_string(),
        known: Fault::ALL.map(Fault::name).join(", "),
        groups: groups.join(", "),
    }
}

/// The faults a name or group names, for `--nemesis crash,pause,cut,...`: a fault's own
/// name, or a group (the faults of a [`Class`] with a [`Class::group`] name: `restart`:
/// both shutdowns; `cut`: the three cuts; `pause`: client and server pauses; `kill`:
/// terminate and cancel; and `all`: every campaign fault, lapse among them).
pub fn parse_group(s: &str) -> Result<Vec<Fault>, UnknownFault> {
    if s == "all" {
        return Ok(Fault::CAMPAIGN.to_vec());
    }
    let group: Vec<Fault> = SPECS
        .iter()
        .filter(|spec| spec.class.group() == Some(s))
        .map(|spec| spec.fault)
        .collect();
    match group.is_empty() {
        true => s.parse::<Fault>().map(|f| vec![f]),
        false => Ok(group),
    }
}

#[cfg(test)]
mod tests;
