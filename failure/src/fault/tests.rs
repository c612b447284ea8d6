//! The table of faults: one record per variant, and the lists it gives.

use super::*;

/// Each record is its variant's (the table is declared with the variants, by `faults!`).
#[test]
fn one_record_per_variant() {
    assert_eq!(Fault::ALL.len(), SPECS.len());
    for (i, f) in Fault::ALL.iter().enumerate() {
        assert_eq!(*f as usize, i, "{f:?}");
        assert_eq!(SPECS.iter().filter(|s| s.fault == *f).count(), 1, "{f:?}");
        assert_eq!(f.spec().fault, *f);
    }
}

/// The 19 faults there were when the lists were kept by hand (issue 20): the pins below
/// hold for them, and a fault added since leaves them as they are.
const BY_HAND: usize = 19;

/// `list` without the faults added after the lists were kept by hand.
fn of_the_first(list: &[Fault]) -> Vec<Fault> {
    list.iter()
        .copied()
        .filter(|f| (*f as usize) < BY_HAND)
        .collect()
}

/// The lists as they were kept by hand before the table (issue 20): the filters give
/// the same sets.
#[test]
fn the_filters_give_the_lists_kept_by_hand_before() {
    use std::collections::BTreeSet;
    use Fault as F;
    let set = |l: &[Fault]| of_the_first(l).into_iter().collect::<BTreeSet<_>>();
    assert!(Fault::ALL.len() >= BY_HAND);
    assert_eq!(
        Fault::ALL[BY_HAND - 1],
        F::Lapse,
        "new faults come after the first 19"
    );
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
    let pg14: Vec<Fault> = of_the_first(&Fault::ALL)
        .into_iter()
        .filter(|f| f.on_pg14_in_tests())
        .collect();
    assert_eq!(pg14, [F::Crash, F::RestartImmediate, F::CutReset, F::Lapse]);
    // A campaign's schedule is drawn from CAMPAIGN by index: its order is the seeds', so a
    // fault added to campaigns comes after these (a recorded seed replays as it did).
    let first = of_the_first(&Fault::CAMPAIGN);
    assert_eq!(Fault::CAMPAIGN[..first.len()], first[..]);
    assert_eq!(
        first.iter().map(|f| f.name()).collect::<Vec<_>>().join(","),
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
    let first = |group: &str| parse_group(group).map(|v| of_the_first(&v));
    assert_eq!(parse_group("crash"), Ok(vec![F::Crash]));
    let refused = parse_group("crashes").unwrap_err().to_string();
    // The refusal names the groups, read from the records: each expands to several faults.
    let named = refused.rsplit("(or a group: ").next().unwrap_or("");
    let groups: Vec<&str> = named.trim_end_matches(')').split(", ").collect();
    assert_eq!(
        groups[..4],
        ["restart", "kill", "pause", "cut"],
        "{refused}"
    );
    assert_eq!(groups.last(), Some(&"all"), "{refused}");
    for group in groups {
        assert!(parse_group(group).is_ok_and(|v| v.len() > 1), "{group}");
    }
    // The groups as they were kept by hand before the table.
    assert_eq!(
        first("restart"),
        Ok(vec![F::RestartImmediate, F::RestartFast])
    );
    assert_eq!(
        first("cut"),
        Ok(vec![F::CutClose, F::CutReset, F::CutBlackhole])
    );
    assert_eq!(first("pause"), Ok(vec![F::ClientPause, F::ServerPause]));
    assert_eq!(first("kill"), Ok(vec![F::Terminate, F::Cancel]));
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
    let campaigns: Vec<Fault> = of_the_first(&Fault::ALL)
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
    assert_eq!(before.len(), BY_HAND);
    for (f, c) in before {
        assert_eq!(control(f), c, "{f}");
    }
    assert_eq!(
        CANCELLED_GRANT,
        Expect::Violation(&[Invariant::MutualExclusion, Invariant::GrantEpochFresh])
    );
}
