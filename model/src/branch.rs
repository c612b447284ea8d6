//! The spec's branches: what a call did, named the way a person asks "did the run ever
//! do this?" (a takeover after a lapse, a wait that timed out, an inspect of a lapsed
//! lease). The spec says which branch each judged call took ([`crate::spec::Judgement`]);
//! the checker counts those of the linearization it found (the history's coverage).

use std::fmt;

/// One branch of one call of the spec.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Branch {
    /// A non-blocking acquire of a key never leased.
    AcquireFirstGrant,
    /// A non-blocking acquire of a released key.
    AcquireAfterRelease,
    /// A non-blocking acquire of a key whose lease had lapsed (its holder's or another's).
    AcquireTakeover,
    /// An acquire by the live holder: the same epoch and expiry back.
    AcquireIdempotent,
    /// A non-blocking acquire of a key another owner holds.
    AcquireDenied,
    /// A blocking acquire (a positive wait) that was granted.
    AcquireWaitGranted,
    /// A blocking acquire whose wait passed with the key still held (57014).
    AcquireWaitTimedOut,
    /// A blocking acquire cancelled while it waited (no effect).
    AcquireWaitCancelled,
    AcquireInvalid,
    RenewOk,
    RenewLapsed,
    RenewNotOwner,
    RenewStaleEpoch,
    RenewInvalid,
    ReleaseOk,
    ReleaseLapsed,
    ReleaseNotOwner,
    ReleaseStaleEpoch,
    ReleaseInvalid,
    InspectNeverLeased,
    InspectFree,
    InspectLive,
    /// An inspect of a held row whose lease had lapsed: reported free.
    InspectLapsed,
    InspectInvalid,
}

impl Branch {
    /// Every branch, in the order reports list them.
    pub const ALL: [Branch; 24] = [
        Branch::AcquireFirstGrant,
        Branch::AcquireAfterRelease,
        Branch::AcquireTakeover,
        Branch::AcquireIdempotent,
        Branch::AcquireDenied,
        Branch::AcquireWaitGranted,
        Branch::AcquireWaitTimedOut,
        Branch::AcquireWaitCancelled,
        Branch::AcquireInvalid,
        Branch::RenewOk,
        Branch::RenewLapsed,
        Branch::RenewNotOwner,
        Branch::RenewStaleEpoch,
        Branch::RenewInvalid,
        Branch::ReleaseOk,
        Branch::ReleaseLapsed,
        Branch::ReleaseNotOwner,
        Branch::ReleaseStaleEpoch,
        Branch::ReleaseInvalid,
        Branch::InspectNeverLeased,
        Branch::InspectFree,
        Branch::InspectLive,
        Branch::InspectLapsed,
        Branch::InspectInvalid,
    ];

    /// The branch's name in reports and verdict.json: `call: what happened`.
    pub fn name(self) -> &'static str {
        match self {
            Branch::AcquireFirstGrant => "acquire: first grant",
            Branch::AcquireAfterRelease => "acquire: grant after release",
            Branch::AcquireTakeover => "acquire: takeover after lapse",
            Branch::AcquireIdempotent => "acquire: idempotent",
            Branch::AcquireDenied => "acquire: denied",
            Branch::AcquireWaitGranted => "acquire: wait granted",
            Branch::AcquireWaitTimedOut => "acquire: wait timed out",
            Branch::AcquireWaitCancelled => "acquire: wait cancelled",
            Branch::AcquireInvalid => "acquire: invalid",
            Branch::RenewOk => "renew: ok",
            Branch::RenewLapsed => "renew: lapsed",
            Branch::RenewNotOwner => "renew: not owner",
            Branch::RenewStaleEpoch => "renew: stale epoch",
            Branch::RenewInvalid => "renew: invalid",
            Branch::ReleaseOk => "release: ok",
            Branch::ReleaseLapsed => "release: lapsed",
            Branch::ReleaseNotOwner => "release: not owner",
            Branch::ReleaseStaleEpoch => "release: stale epoch",
            Branch::ReleaseInvalid => "release: invalid",
            Branch::InspectNeverLeased => "inspect: never leased",
            Branch::InspectFree => "inspect: free",
            Branch::InspectLive => "inspect: live",
            Branch::InspectLapsed => "inspect: lapsed",
            Branch::InspectInvalid => "inspect: invalid",
        }
    }

    /// The branch named `name` ([`Branch::name`]).
    pub fn from_name(name: &str) -> Option<Branch> {
        Branch::ALL.into_iter().find(|b| b.name() == name)
    }
}

impl fmt::Display for Branch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}
