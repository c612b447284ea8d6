//! What a judged call was: the spec branch it took, and for an impossible observation the
//! invariant it most directly contradicts.

use super::*;

/// The branch `way` of `kop` on `st` is.
pub(super) fn branch_of<O: Name>(
    st: &KeyState<O>,
    kop: &KeyOp<'_, O>,
    way: &Way,
) -> Option<Branch> {
    use Branch as B;
    let status = |s: Status, not_owner, lapsed, stale| match s {
        Status::NotOwner => not_owner,
        Status::Lapsed => lapsed,
        // a mutant's Ok status that did not extend reads as a mismatch (see `realize`)
        Status::EpochMismatch | Status::Ok => stale,
    };
    Some(match (kop, way.effect) {
        (KeyOp::Acquire { .. }, Effect::Idempotent) => B::AcquireIdempotent,
        (KeyOp::Acquire { .. }, Effect::Busy) if kop.is_blocking() => B::AcquireWaitTimedOut,
        (KeyOp::Acquire { .. }, Effect::Busy) => B::AcquireDenied,
        (KeyOp::Acquire { .. }, Effect::Grant(_)) if kop.is_blocking() => B::AcquireWaitGranted,
        (KeyOp::Acquire { .. }, Effect::Grant(_)) => match st {
            KeyState::NeverLeased => B::AcquireFirstGrant,
            KeyState::Free { .. } => B::AcquireAfterRelease,
            KeyState::Held { .. } => B::AcquireTakeover,
        },
        (KeyOp::Renew { .. }, Effect::Extend(_)) => B::RenewOk,
        (KeyOp::Renew { .. }, Effect::Status(s)) => {
            status(s, B::RenewNotOwner, B::RenewLapsed, B::RenewStaleEpoch)
        }
        (KeyOp::Release { .. }, Effect::Free(_) | Effect::Forget) => B::ReleaseOk,
        (KeyOp::Release { .. }, Effect::Status(s)) => status(
            s,
            B::ReleaseNotOwner,
            B::ReleaseLapsed,
            B::ReleaseStaleEpoch,
        ),
        (KeyOp::Inspect, Effect::NoRow) => B::InspectNeverLeased,
        (KeyOp::Inspect, Effect::HeldRow) => B::InspectLive,
        (KeyOp::Inspect, Effect::FreeRow) => match st {
            KeyState::Held { .. } => B::InspectLapsed,
            _ => B::InspectFree,
        },
        _ => return None,
    })
}

/// The branch of a call rejected as invalid input.
pub(super) fn invalid_branch<K, O>(op: &Op<K, O>) -> Option<Branch> {
    match op {
        Op::Acquire { .. } => Some(Branch::AcquireInvalid),
        Op::Renew { .. } => Some(Branch::RenewInvalid),
        Op::Release { .. } => Some(Branch::ReleaseInvalid),
        Op::Inspect { .. } => Some(Branch::InspectInvalid),
        Op::Expire { .. } => None,
    }
}

/// The branch of a call that failed without effect: a cancelled wait, or none.
pub(super) fn failed_branch<K, O>(op: &Op<K, O>) -> Option<Branch> {
    let blocking = matches!(op, Op::Acquire { wait: Some(w), .. } if w.is_positive());
    blocking.then_some(Branch::AcquireWaitCancelled)
}

/// The invariant an impossible observation most directly contradicts.
pub(super) fn classify<K, O>(op: &Op<K, O>, branches: &[Way], observed: &Outcome<O>) -> Invariant {
    let any = |f: &dyn Fn(&Effect) -> bool| branches.iter().any(|b| f(&b.effect));
    // The branch whose effective times overlap the time a reported expiry implies.
    let at_reported = |ttl: &Option<Interval>, r: Ts| -> Option<Effect> {
        let ttl = ttl.as_ref()?;
        branches
            .iter()
            .find(|b| ttl.earliest_source_in(r, b.teff.0, b.teff.1).is_some())
            .map(|b| b.effect)
    };
    match op {
        Op::Inspect { .. } => Invariant::InspectConsistent,
        Op::Expire { .. } => Invariant::PrecedenceAndIsolation,
        Op::Acquire { ttl, .. } => match observed {
            Outcome::Acquired { epoch, expires_at } => {
                if any(&|e| *e == Effect::Idempotent) {
                    return Invariant::ReacquireIdempotent;
                }
                match at_reported(ttl, *expires_at) {
                    Some(Effect::Busy) => Invariant::MutualExclusion,
                    Some(_) => Invariant::GrantEpochFresh,
                    None if branches.iter().all(|b| b.effect == Effect::Busy) => {
                        Invariant::MutualExclusion
                    }
                    None if !any(&|e| *e == Effect::Grant(*epoch)) => Invariant::GrantEpochFresh,
                    None => Invariant::DurabilityAndTimeAuthority,
                }
            }
            Outcome::Denied | Outcome::Timeout => {
                if any(&|e| *e == Effect::Busy) {
                    Invariant::PrecedenceAndIsolation
                } else {
                    Invariant::LapseIsFinal
                }
            }
            _ => Invariant::PrecedenceAndIsolation,
        },
        Op::Renew { ttl, .. } => match observed {
            Outcome::Renewed { expires_at } => match at_reported(ttl, *expires_at) {
                Some(Effect::Status(Status::Lapsed)) => Invariant::LapseIsFinal,
                Some(Effect::Status(_)) => Invariant::PrecedenceAndIsolation,
                Some(_) => Invariant::RenewKeepsEpoch,
                None if any(&|e| matches!(e, Effect::Extend(_))) => {
                    Invariant::DurabilityAndTimeAuthority
                }
                None if any(&|e| *e == Effect::Status(Status::Lapsed)) => Invariant::LapseIsFinal,
                None => Invariant::PrecedenceAndIsolation,
            },
            Outcome::Lapsed
                if !any(&|e| *e == Effect::Status(Status::Lapsed))
                    && any(&|e| matches!(e, Effect::Extend(_))) =>
            {
                Invariant::DurabilityAndTimeAuthority
            }
            _ => Invariant::PrecedenceAndIsolation,
        },
        Op::Release { .. } => match observed {
            Outcome::Released if any(&|e| *e == Effect::Status(Status::Lapsed)) => {
                Invariant::LapseIsFinal
            }
            Outcome::Lapsed
                if !any(&|e| *e == Effect::Status(Status::Lapsed))
                    && any(&|e| matches!(e, Effect::Free(_))) =>
            {
                Invariant::DurabilityAndTimeAuthority
            }
            _ => Invariant::PrecedenceAndIsolation,
        },
    }
}
