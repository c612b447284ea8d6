//! The table of faults: one record per variant, and the lists it gives.

use super::*;

/// The variant after `f` in declaration order. Exhaustive: a new variant does not
/// compile until it is named here, and then [`one_record_per_variant`] fails until
/// the table has its record.
fn next(f: Fault) -> Option<Fault> {
    use Fault as F;
    Some(match f {
        F::Crash => F::RestartImmediate,
        F::RestartImmediate => F::RestartFast,
        F::RestartFast => F::SyncCommitOffCrash,
        F::SyncCommitOffCrash => F::Terminate,
        F::Terminate => F::Cancel,
        F::Cancel => F::StatementTimeout,
        F::StatementTimeout => F::LockTimeout,
        F::LockTimeout => F::ClientPause,
        F::ClientPause => F::ServerPause,
        F::ServerPause => F::CutClose,
        F::CutClose => F::CutReset,
        F::CutReset => F::CutBlackhole,
        F::CutBlackhole => F::DowntimeExpiry,
        F::DowntimeExpiry => F::ShortTtl,
        F::ShortTtl => F::AbortAfterAcquire,
        F::AbortAfterAcquire => F::CommitCrash,
        F::CommitCrash => F::WaitWake,
        F::WaitWake => F::Lapse,
        F::Lapse => return None,
    })
}

#[test]
fn one_record_per_variant() {
    let variants: Vec<Fault> = std::iter::successors(Some(Fault::Crash), |&f| next(f)).collect();
    assert_eq!(variants.len(), SPECS.len(), "one record per variant");
    for (i, f) in variants.iter().enumerate() {
        assert_eq!(*f as usize, i, "{f:?} is declared out of order in next()");
        let records = SPECS.iter().filter(|s| s.fault == *f).count();
        assert_eq!(records, 1, "{f:?} has {records} records");
        assert_eq!(f.spec().fault, *f);
    }
    assert_eq!(Fault::ALL.to_vec(), variants);
}

/// The lists as they were kept by hand before the table (issue 20): the filters give
/// the same sets.
#[test]
fn the_filters_give_the_lists_kept_by_hand_before() {
    use std::collections::BTreeSet;
    use Fault as F;
    let set = |l: &[Fault]| l.iter().copied().collect::<BTreeSet<_>>();
    assert_eq!(Fault::ALL.len(), 19);
    assert_eq!(
        set(&Fault::CAMPAIGN),
        set(&[
            F::Crash,
            F::RestartImmediate,
            F::RestartFast,
            F::Terminate,
            F::Cancel,
            F::ClientPause,
            F::ServerPause,
            F::CutClose,
            F::CutReset,
            F::CutBlackhole,
            F::Lapse,
        ])
    );
    assert_eq!(
        set(&Fault::QUICK),
        set(&[
            F::Crash,
            F::SyncCommitOffCrash,
            F::Terminate,
            F::Cancel,
            F::CutReset,
            F::ClientPause,
            F::Lapse,
            F::CommitCrash,
            F::WaitWake,
        ])
    );
    let pg14: Vec<Fault> = Fault::ALL
        .into_iter()
        .filter(|f| f.on_pg14_in_tests())
        .collect();
    assert_eq!(pg14, [F::Crash, F::RestartImmediate, F::CutReset, F::Lapse]);
    // A campaign's schedule is drawn from CAMPAIGN by index: its order is the seeds'.
    assert_eq!(
        Fault::CAMPAIGN.map(Fault::name).join(","),
        "crash,restart-immediate,restart-fast,terminate,cancel,client-pause,server-pause,\
         cut-close,cut-reset,cut-blackhole,lapse"
    );
}

#[test]
fn names_round_trip_and_are_unique() {
    let mut names: Vec<&str> = Fault::ALL.iter().map(|f| f.name()).collect();
    for f in Fault::ALL {
        assert_eq!(f.name().parse::<Fault>(), Ok(f));
        assert!(!f.defends().is_empty());
    }
    names.sort();
    names.dedup();
    assert_eq!(names.len(), Fault::ALL.len());
    assert!(Fault::ALL.len() >= 15);
    assert!("nope".parse::<Fault>().is_err());
}

#[test]
fn groups_expand() {
    use Fault as F;
    assert_eq!(parse_group("cut").map(|v| v.len()), Ok(3));
    assert_eq!(parse_group("crash"), Ok(vec![F::Crash]));
    let refused = parse_group("crashes").unwrap_err().to_string();
    // The refusal names the groups, read from the records: each expands to several faults.
    let named = refused.rsplit("(or a group: ").next().unwrap_or("");
    let groups: Vec<&str> = named.trim_end_matches(')').split(", ").collect();
    assert_eq!(
        groups,
        ["restart", "kill", "pause", "cut", "all"],
        "{refused}"
    );
    for group in groups {
        assert!(parse_group(group).is_ok_and(|v| v.len() > 1), "{group}");
    }
    // The groups as they were kept by hand before the table.
    assert_eq!(
        parse_group("restart"),
        Ok(vec![F::RestartImmediate, F::RestartFast])
    );
    assert_eq!(
        parse_group("cut"),
        Ok(vec![F::CutClose, F::CutReset, F::CutBlackhole])
    );
    assert_eq!(
        parse_group("pause"),
        Ok(vec![F::ClientPause, F::ServerPause])
    );
    assert_eq!(parse_group("kill"), Ok(vec![F::Terminate, F::Cancel]));
    assert_eq!(parse_group("all"), Ok(Fault::CAMPAIGN.to_vec()));
    assert_eq!(parse_group("lapse"), Ok(vec![F::Lapse]));
}

/// The checks dispatched by hand before the table (issue 20): the same faults run a
/// campaign plan (the others a scripted situation), and each has the same control.
#[test]
fn the_situations_and_controls_are_those_dispatched_by_hand_before() {
    use crate::builds::BrokenBuild as Bb;
    use crate::checks::control;
    use Fault as F;
    let campaigns: Vec<Fault> = Fault::ALL
        .into_iter()
        .filter(|f| matches!(f.spec().situation, Situation::Campaign(_)))
        .collect();
    assert_eq!(
        campaigns,
        [
            F::Crash,
            F::RestartImmediate,
            F::RestartFast,
            F::SyncCommitOffCrash,
            F::ServerPause,
            F::CutClose,
            F::CutReset,
            F::CutBlackhole,
            F::Lapse,
        ]
    );
    let b = |b: Bb, e: Expect| Control {
        breakage: Breakage::Build(b),
        expects: e,
    };
    let d = |d: Doctor, e: Expect| Control {
        breakage: Breakage::Doctored(d),
        expects: e,
    };
    let renew = Expect::Violation(RENEW_AFTER_LAPSE);
    let missed = Control {
        breakage: Breakage::FaultMisses,
        expects: Expect::NotInjected,
    };
    let before = [
        (
            F::Crash,
            b(Bb::UnloggedTable, Expect::Violation(LOST_WRITE)),
        ),
        (
            F::RestartImmediate,
            b(Bb::UnloggedTable, Expect::Violation(LOST_WRITE)),
        ),
        (
            F::RestartFast,
            d(Doctor::LostInRestart, Expect::Violation(LOST_WRITE)),
        ),
        (
            F::SyncCommitOffCrash,
            b(Bb::NoDurableCommit, Expect::Violation(LOST_WRITE)),
        ),
        (
            F::Terminate,
            d(Doctor::AbortedKept, Expect::Violation(KEPT_WRITE)),
        ),
        (F::Cancel, b(Bb::CancelledWaitGrants, CANCELLED_GRANT)),
        (
            F::StatementTimeout,
            b(Bb::CancelledWaitGrants, CANCELLED_GRANT),
        ),
        (
            F::LockTimeout,
            d(Doctor::CancelledWriteKept, Expect::Violation(KEPT_WRITE)),
        ),
        (F::ClientPause, b(Bb::RenewIgnoresExpiry, renew)),
        (F::ServerPause, b(Bb::RenewIgnoresExpiry, renew)),
        (F::CutClose, missed),
        (F::CutReset, missed),
        (F::CutBlackhole, missed),
        (F::DowntimeExpiry, b(Bb::RenewIgnoresExpiry, renew)),
        (F::ShortTtl, b(Bb::RenewIgnoresExpiry, renew)),
        (
            F::AbortAfterAcquire,
            d(Doctor::AbortedKept, Expect::Violation(KEPT_WRITE)),
        ),
        (
            F::CommitCrash,
            d(Doctor::ResolutionSwapped, Expect::Violation(KEPT_WRITE)),
        ),
        (F::WaitWake, b(Bb::SlowWake, Expect::Unexpected("woke"))),
        (
            F::Lapse,
            d(Doctor::LapseIgnored, Expect::Violation(LAPSE_IGNORED)),
        ),
    ];
    assert_eq!(before.len(), Fault::ALL.len());
    for (f, c) in before {
        assert_eq!(control(f), c, "{f}");
    }
    assert_eq!(
        CANCELLED_GRANT,
        Expect::Violation(&[Invariant::MutualExclusion, Invariant::GrantEpochFresh])
    );
}
