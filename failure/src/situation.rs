//! The vocabulary of a fault's record ([`crate::fault::Spec`]): the situation its check
//! drives, how a campaign injects it, and its negative control. Plain data, below the
//! records and the checks that dispatch on it (their code is in `checks`, `inject` and
//! `mixed`).

use crate::builds::BrokenBuild;
use crate::server::Stop;
use model::branch::Branch;
use model::Invariant;

/// What a fault's check drives (its record's [`crate::fault::Spec::situation`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Situation {
    /// A few sessions make set calls around one fault, as a plan: `failure/plans/NAME.plan`
    /// (the plan text of specs/HISTORY.md, its settings and `expect`s included; the record
    /// names it with `plan_file!("NAME")`), played by the harness's stepped runner; `shows`
    /// is what its history must show beyond the plan's answers.
    Plan { plan: PlanFile, shows: Shows },
    /// A short campaign under a fixed fault schedule ([`CampaignPlan`]).
    Campaign(CampaignPlan),
}

/// How a negative control breaks the check.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Breakage {
    /// Run against this broken build (with the check's own server settings).
    Build(BrokenBuild),
    /// Run against the shipped build, then judge the history with one answer changed to
    /// what a server with the named defect would have answered.
    Doctored(Doctor),
    /// Let the fault miss (the clients do not reach the proxy).
    FaultMisses,
}

/// The history edits of doctored controls.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Doctor {
    /// The first inspect after the first restart shows the key never leased: committed
    /// state lost in a restart.
    LostInRestart,
    /// The terminated (or rolled-back) transaction recorded as committed: its writes kept.
    AbortedKept,
    /// The resolved ends of the crashed COMMITs swapped (committed <-> rolled back).
    ResolutionSwapped,
    /// The first takeover of a lapsed key (a grant to an owner other than the lapsed
    /// holder) answered `denied` (a blocking acquire: its wait timed out) instead, and the
    /// key's later calls dropped: the lapse ignored (the checker must know the key was
    /// lapsed).
    LapseIgnored,
    /// The final inspect shows the owner of the cancelled call holding the key: the
    /// cancelled statement's write kept.
    CancelledWriteKept,
}

/// What a control must fail with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Expect {
    /// A violation of one of these invariants.
    Violation(&'static [Invariant]),
    /// An expectation of the situation broken (its message contains the text).
    Unexpected(&'static str),
    /// A typed infrastructure failure: the fault was not injected.
    NotInjected,
}

/// A negative control of a check.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Control {
    pub breakage: Breakage,
    pub expects: Expect,
}

/// Invariants a lost committed write can show as.
pub(crate) const LOST_WRITE: &[Invariant] = &[
    Invariant::DurabilityAndTimeAuthority,
    Invariant::EpochNeverDecreases,
    Invariant::GrantEpochFresh,
    Invariant::MutualExclusion,
    Invariant::InspectConsistent,
    Invariant::LapseIsFinal,
    Invariant::RenewKeepsEpoch,
    Invariant::ReleaseAdvancesEpoch,
    Invariant::PrecedenceAndIsolation,
    Invariant::FailClosed,
];

/// Invariants a write that should not have happened (or a success that should have been
/// refused) can show as.
pub(crate) const KEPT_WRITE: &[Invariant] = LOST_WRITE;

/// A renew (or release) that succeeded after a lapse: the checker names the first broken
/// invariant it meets (lapse is final, the precedence of lapsed over ok, the overlap with
/// a takeover, or the server clock's authority).
pub(crate) const RENEW_AFTER_LAPSE: &[Invariant] = &[
    Invariant::LapseIsFinal,
    Invariant::PrecedenceAndIsolation,
    Invariant::MutualExclusion,
    Invariant::DurabilityAndTimeAuthority,
];

/// An acquire of a lapsed key answered `denied`.
pub(crate) const LAPSE_IGNORED: &[Invariant] = &[
    Invariant::LapseIsFinal,
    Invariant::PrecedenceAndIsolation,
    Invariant::InspectConsistent,
    Invariant::MutualExclusion,
];

/// A plan file of `failure/plans/`, embedded: its name and its text.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PlanFile {
    pub name: &'static str,
    pub text: &'static str,
}

/// The plan file `failure/plans/NAME.plan`, embedded at build time (a missing file does
/// not compile).
macro_rules! plan_file {
    ($name:literal) => {
        $crate::situation::PlanFile {
            name: $name,
            text: include_str!(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/plans/",
                $name,
                ".plan"
            )),
        }
    };
}
pub(crate) use plan_file;

/// What a plan situation's history must show beyond the plan's answers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shows {
    /// Nothing more: the answers and the checker's verdict say it all.
    Answers,
    /// The first grant's expiry inside the restart's downtime (else the fault was not
    /// injected: the restart came too early or too late).
    ExpiryInDowntime,
    /// Each waiter granted within the poll bound (50 ms) and a 200 ms margin of the
    /// release that freed its key.
    WakeWithinPollBound,
}

/// A campaign check's plan: what workload, schedule and server settings it runs (one arm
/// of [`plan`] each).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CampaignPlan {
    /// Two restarts of the fault's own kind under long TTLs (what a restart could lose is
    /// still live afterwards).
    Restarts,
    /// Three crashes with `synchronous_commit = off` everywhere.
    SyncOffCrashes,
    /// Two server pauses.
    ServerPauses,
    /// One cut (close or reset) of every connection through the proxy.
    Cuts,
    /// One blackhole longer than the call timeout.
    Blackhole,
    /// Sixteen lapses of live leases, each followed by whoever takes the key over.
    Lapses,
}

/// What the first answered call on a key after one of a campaign check's faults must have
/// found at least once (the checker's coverage counts those calls apart): else no call
/// after its faults read what the check defends, and its pass would prove nothing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FollowedBy {
    /// The branches such a call may take.
    pub branches: &'static [Branch],
    /// What a call taking one of them found, for messages.
    pub found: &'static str,
}

/// A call whose answer rests on a key's state from before the fault: every branch but
/// those of a key never leased, invalid input and a cancelled wait. A renew or release by
/// another owner counts: these campaigns lease each key within their first calls, long
/// before the first fault, so its `not owner` reads the key's row.
const FOUND_WRITTEN: FollowedBy = FollowedBy {
    branches: &[
        Branch::AcquireAfterRelease,
        Branch::AcquireTakeover,
        Branch::AcquireIdempotent,
        Branch::AcquireDenied,
        Branch::AcquireWaitGranted,
        Branch::AcquireWaitTimedOut,
        Branch::RenewOk,
        Branch::RenewLapsed,
        Branch::RenewNotOwner,
        Branch::RenewStaleEpoch,
        Branch::ReleaseOk,
        Branch::ReleaseLapsed,
        Branch::ReleaseNotOwner,
        Branch::ReleaseStaleEpoch,
        Branch::InspectFree,
        Branch::InspectLive,
        Branch::InspectLapsed,
    ],
    found: "the key's lease state from before the fault",
};

/// A call on a lapsed key that found the lease lapsed (a waiter granted by it included).
const FOUND_LAPSED: FollowedBy = FollowedBy {
    branches: &[
        Branch::AcquireTakeover,
        Branch::AcquireWaitGranted,
        Branch::RenewLapsed,
        Branch::ReleaseLapsed,
        Branch::InspectLapsed,
    ],
    found: "the lapsed lease",
};

impl CampaignPlan {
    /// What the first call on a key after one of the plan's faults must have found at least
    /// once: the key's state a restart, pause or cut must keep, the lease a lapse ended.
    pub fn followed_by(self) -> FollowedBy {
        match self {
            CampaignPlan::Restarts
            | CampaignPlan::SyncOffCrashes
            | CampaignPlan::ServerPauses
            | CampaignPlan::Cuts
            | CampaignPlan::Blackhole => FOUND_WRITTEN,
            CampaignPlan::Lapses => FOUND_LAPSED,
        }
    }
}

/// How a campaign's schedule injects a fault (its record's [`crate::fault::Spec::injection`];
/// `crate::mixed` dispatches on it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Injection {
    /// The server stopped as said, down for the hold, then started ([`Reach::restart`]).
    Restart(Stop),
    /// A client backend terminated, or its statement cancelled ([`Reach::kill_backend`]).
    Backend { terminate: bool },
    /// SIGSTOP of the server for the hold ([`Reach::server_pause`]).
    ServerPause,
    /// A cut through the proxy ([`Reach::cut`]).
    Cut(Cut),
    /// A campaign process stops for the hold ([`Reach::client_pause`]).
    ClientPause,
    /// A live lease of a workload key made to lapse now ([`Reach::lapse`]).
    Lapse,
    /// Only the fault's own scripted situation can bring it about (a rollback, a waiter
    /// woken): a campaign cannot inject it.
    SituationOnly,
}

/// What a cut does to the connections through the proxy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cut {
    /// Every connection closed cleanly (FIN).
    Close,
    /// Every connection reset (RST).
    Reset,
    /// One connection reset, the one live the longest: a single session's network fails.
    ResetOne,
    /// Nothing forwarded for the hold, nothing closed.
    Blackhole,
}
