use super::*;

type S = Store<String, String>;
type O = Op<String, String>;

fn k(s: &str) -> String {
    s.to_string()
}

fn span(a: i64, b: i64) -> Span {
    Span::new(Ts(a), Ts(b)).expect("ordered span")
}

fn ttl(us: i64) -> Interval {
    Interval::micros(us)
}

fn held(owner: &str, epoch: Epoch, exp: i64) -> KeyState<String> {
    KeyState::Held {
        owner: k(owner),
        epoch,
        expires: Window::exact(Ts(exp)),
    }
}

fn store_with(key: &str, st: KeyState<String>) -> S {
    let mut s = S::new();
    s.set(k(key), st);
    s
}

fn step(store: &S, op: &O, t: i64) -> (Outcome<String>, S) {
    Spec::CORRECT.step(store, op, Ts(t))
}

fn acq(key: &str, owner: &str, t: i64) -> O {
    Op::acquire(k(key), k(owner), ttl(t))
}

#[test]
fn first_grant_has_epoch_one_and_server_expiry() {
    let (out, next) = step(&S::new(), &acq("k", "a", 10), 5);
    assert_eq!(
        out,
        Outcome::Acquired {
            epoch: 1,
            expires_at: Ts(15)
        }
    );
    assert_eq!(next.state(&k("k")), held("a", 1, 15));
}

#[test]
fn same_owner_reacquire_is_idempotent() {
    let s = store_with("k", held("a", 3, 15));
    let (out, next) = step(&s, &acq("k", "a", 100), 7);
    assert_eq!(
        out,
        Outcome::Acquired {
            epoch: 3,
            expires_at: Ts(15)
        }
    );
    assert_eq!(next, s);
}

#[test]
fn other_owner_is_denied_or_times_out() {
    let s = store_with("k", held("a", 3, 15));
    let (out, next) = step(&s, &acq("k", "b", 10), 7);
    assert_eq!(out, Outcome::Denied);
    assert_eq!(next, s);
    let wait = Op::acquire_wait(k("k"), k("b"), ttl(10), ttl(5));
    let (out, next) = step(&s, &wait, 12);
    assert_eq!(out, Outcome::Timeout);
    assert_eq!(next, s);
}

#[test]
fn lapsed_lease_is_taken_over_with_next_epoch() {
    let s = store_with("k", held("a", 3, 15));
    // expires_at == now is lapsed
    let (out, next) = step(&s, &acq("k", "b", 10), 15);
    assert_eq!(
        out,
        Outcome::Acquired {
            epoch: 4,
            expires_at: Ts(25)
        }
    );
    assert_eq!(next.state(&k("k")), held("b", 4, 25));
    // the lapsed holder itself also gets a new epoch
    let (out, _) = step(&s, &acq("k", "a", 10), 16);
    assert_eq!(
        out,
        Outcome::Acquired {
            epoch: 4,
            expires_at: Ts(26)
        }
    );
}

#[test]
fn free_key_grant_increments_epoch() {
    let s = store_with("k", KeyState::Free { epoch: 2 });
    let (out, _) = step(&s, &acq("k", "b", 10), 0);
    assert_eq!(
        out,
        Outcome::Acquired {
            epoch: 3,
            expires_at: Ts(10)
        }
    );
}

#[test]
fn renew_precedence() {
    let live = store_with("k", held("a", 2, 15));
    let renew = |owner: &str, epoch| Op::renew(k("k"), k(owner), epoch, ttl(10));
    // ok: expiry = t + ttl, epoch unchanged
    let (out, next) = step(&live, &renew("a", 2), 10);
    assert_eq!(out, Outcome::Renewed { expires_at: Ts(20) });
    assert_eq!(next.state(&k("k")), held("a", 2, 20));
    // different owner, even with the right epoch
    assert_eq!(step(&live, &renew("b", 2), 10).0, Outcome::NotOwner);
    // different owner with a wrong epoch: not_owner comes first
    assert_eq!(step(&live, &renew("b", 1), 10).0, Outcome::NotOwner);
    // owner, live, wrong epoch
    assert_eq!(step(&live, &renew("a", 1), 10).0, Outcome::EpochMismatch);
    // owner, lapsed, wrong epoch: lapsed comes before epoch_mismatch
    let (out, next) = step(&live, &renew("a", 1), 15);
    assert_eq!(out, Outcome::Lapsed);
    assert_eq!(next, live);
    // never-leased and free keys
    assert_eq!(step(&S::new(), &renew("a", 0), 0).0, Outcome::NotOwner);
    let free = store_with("k", KeyState::Free { epoch: 2 });
    assert_eq!(step(&free, &renew("a", 2), 0).0, Outcome::NotOwner);
}

#[test]
fn release_frees_and_advances_epoch() {
    let live = store_with("k", held("a", 2, 15));
    let rel = |owner: &str, epoch| Op::release(k("k"), k(owner), epoch);
    let (out, next) = step(&live, &rel("a", 2), 10);
    assert_eq!(out, Outcome::Released);
    assert_eq!(next.state(&k("k")), KeyState::Free { epoch: 3 });
    // release of a lapsed lease changes nothing
    let (out, next) = step(&live, &rel("a", 2), 15);
    assert_eq!(out, Outcome::Lapsed);
    assert_eq!(next, live);
    assert_eq!(step(&live, &rel("b", 2), 10).0, Outcome::NotOwner);
    assert_eq!(step(&live, &rel("a", 3), 10).0, Outcome::EpochMismatch);
}

#[test]
fn inspect_reports_four_cases() {
    let row = |held, owner: Option<&str>, epoch, exp: Option<i64>| {
        Outcome::Inspected(Some(Row {
            held,
            owner: owner.map(k),
            epoch,
            expires_at: exp.map(Ts),
        }))
    };
    let ins = Op::inspect(k("k"));
    assert_eq!(step(&S::new(), &ins, 0).0, Outcome::Inspected(None));
    let free = store_with("k", KeyState::Free { epoch: 4 });
    assert_eq!(step(&free, &ins, 0).0, row(false, None, 4, None));
    let live = store_with("k", held("a", 2, 15));
    assert_eq!(step(&live, &ins, 14).0, row(true, Some("a"), 2, Some(15)));
    assert_eq!(step(&live, &ins, 15).0, row(false, None, 2, None));
}

#[test]
fn expire_fault_lapses_a_held_key_only() {
    let live = store_with("k", held("a", 2, 15));
    let (out, next) = step(&live, &Op::expire(k("k")), 5);
    assert_eq!(out, Outcome::Injected);
    assert_eq!(next.state(&k("k")), held("a", 2, 5));
    assert_eq!(
        step(&next, &acq("k", "b", 10), 5).0,
        Outcome::Acquired {
            epoch: 3,
            expires_at: Ts(15)
        }
    );
    let free = store_with("k", KeyState::Free { epoch: 4 });
    assert_eq!(step(&free, &Op::expire(k("k")), 5).1, free);
}

#[test]
fn invalid_input_lists_every_violation_and_changes_nothing() {
    let op: O = Op::Acquire {
        key: Some(String::new()),
        owner: None,
        ttl: Some(Interval::ZERO),
        wait: Some(Interval {
            months: 0,
            days: 1,
            micros: -1,
        }),
    };
    assert_eq!(
        op.violations(),
        vec![
            Violation::KeyEmpty,
            Violation::OwnerNull,
            Violation::TtlNotPositive,
            Violation::WaitNegativeField
        ]
    );
    let s = store_with("k", held("a", 2, 15));
    let (out, next) = step(&s, &op, 0);
    assert_eq!(out, Outcome::InvalidInput);
    assert_eq!(next, s);

    let long = "x".repeat(MAX_NAME_BYTES + 1);
    let op: O = Op::Renew {
        key: Some(long.clone()),
        owner: Some("x".repeat(MAX_NAME_BYTES)),
        epoch: None,
        ttl: Some(Interval {
            months: 1201,
            days: 0,
            micros: 0,
        }),
    };
    assert_eq!(
        op.violations(),
        vec![
            Violation::KeyTooLong,
            Violation::EpochNull,
            Violation::TtlTooLong
        ]
    );
    let ok: O = Op::Acquire {
        key: Some(k("k")),
        owner: Some(k("a")),
        ttl: Some(Interval::HUNDRED_YEARS),
        wait: Some(Interval::HUNDRED_YEARS),
    };
    assert!(ok.violations().is_empty());
    let rel: O = Op::Release {
        key: Some(k("k")),
        owner: Some(long),
        epoch: None,
    };
    assert_eq!(
        rel.violations(),
        vec![Violation::OwnerTooLong, Violation::EpochNull]
    );
    assert_eq!(
        Op::<String, String>::Inspect { key: None }.violations(),
        vec![Violation::KeyNull]
    );
}

#[test]
fn check_rejects_invalid_input_confusion() {
    let s = S::new();
    let bad: O = Op::Inspect {
        key: Some(String::new()),
    };
    let err = Spec::CORRECT
        .check(&s, &bad, span(0, 0), &Outcome::Inspected(None))
        .expect_err("must be 22023");
    assert_eq!(err.invariant, Invariant::FailClosed);
    let err = Spec::CORRECT
        .check(&s, &Op::inspect(k("k")), span(0, 0), &Outcome::InvalidInput)
        .expect_err("valid input");
    assert_eq!(err.invariant, Invariant::FailClosed);
}

// --- three-valued expiry over spans ---

#[test]
fn acquire_straddling_expiry_may_be_denied_or_granted() {
    // a's lease expires at 10; b's acquire took effect somewhere in [8, 12].
    let s = store_with("k", held("a", 1, 10));
    let op = acq("k", "b", 100);
    let denied = Spec::CORRECT
        .check(&s, &op, span(8, 12), &Outcome::Denied)
        .expect("denied is allowed");
    assert_eq!(denied, vec![s.clone()]);
    let granted = Spec::CORRECT
        .check(
            &s,
            &op,
            span(8, 12),
            &Outcome::Acquired {
                epoch: 2,
                expires_at: Ts(111),
            },
        )
        .expect("granted is allowed");
    assert_eq!(granted.len(), 1);
    assert_eq!(granted[0].state(&k("k")), held("b", 2, 111));
    // granted at t = 9 would be before a's expiry: impossible
    let err = Spec::CORRECT
        .check(
            &s,
            &op,
            span(8, 12),
            &Outcome::Acquired {
                epoch: 2,
                expires_at: Ts(109),
            },
        )
        .expect_err("grant before expiry");
    assert_eq!(err.invariant, Invariant::MutualExclusion);
    // the enumeration has both branches
    let possible = Spec::CORRECT.possible(&s, &op, span(8, 12));
    assert_eq!(possible.len(), 2);
    assert!(possible.iter().any(|(o, _)| *o == Outcome::Denied));
    assert!(possible.iter().any(|(o, _)| matches!(
        o,
        Outcome::Acquired {
            epoch: 2,
            expires_at
        } if *expires_at == Window::between(Ts(110), Ts(112))
    )));
}

#[test]
fn acquire_entirely_after_expiry_must_not_be_denied() {
    let s = store_with("k", held("a", 1, 10));
    let err = Spec::CORRECT
        .check(&s, &acq("k", "b", 100), span(10, 12), &Outcome::Denied)
        .expect_err("lapsed key is acquirable");
    assert_eq!(err.invariant, Invariant::LapseIsFinal);
}

#[test]
fn acquire_entirely_before_expiry_must_not_be_granted() {
    let s = store_with("k", held("a", 1, 10));
    let err = Spec::CORRECT
        .check(
            &s,
            &acq("k", "b", 100),
            span(5, 9),
            &Outcome::Acquired {
                epoch: 2,
                expires_at: Ts(107),
            },
        )
        .expect_err("held key");
    assert_eq!(err.invariant, Invariant::MutualExclusion);
}

#[test]
fn observed_outcome_narrows_the_expiry_window() {
    // expires_at known only within [10, 20]; an inspect in [14, 14] reports it lapsed.
    let s = store_with(
        "k",
        KeyState::Held {
            owner: k("a"),
            epoch: 1,
            expires: Window::between(Ts(10), Ts(20)),
        },
    );
    let lapsed_row = Outcome::Inspected(Some(Row {
        held: false,
        owner: None,
        epoch: 1,
        expires_at: None,
    }));
    let after = Spec::CORRECT
        .check(&s, &Op::inspect(k("k")), span(14, 14), &lapsed_row)
        .expect("either is allowed");
    assert_eq!(
        after,
        vec![store_with(
            "k",
            KeyState::Held {
                owner: k("a"),
                epoch: 1,
                expires: Window::between(Ts(10), Ts(14))
            }
        )]
    );
    // having seen it lapsed at 14, a later denial is impossible
    let err = Spec::CORRECT
        .check(&after[0], &acq("k", "b", 5), span(15, 15), &Outcome::Denied)
        .expect_err("lapse is final");
    assert_eq!(err.invariant, Invariant::LapseIsFinal);
    // a live observation narrows from below
    let after = Spec::CORRECT
        .check(&s, &acq("k", "b", 5), span(14, 16), &Outcome::Denied)
        .expect("denied allowed");
    assert_eq!(
        after[0].state(&k("k")).holder().map(|(_, _, w)| w),
        Some(Window::between(Ts(15), Ts(20)))
    );
}

#[test]
fn renew_straddling_expiry_may_succeed_or_report_lapsed() {
    let s = store_with("k", held("a", 1, 10));
    let op = Op::renew(k("k"), k("a"), 1, ttl(10));
    let ok = Spec::CORRECT
        .check(
            &s,
            &op,
            span(9, 11),
            &Outcome::Renewed { expires_at: Ts(19) },
        )
        .expect("renew at 9");
    assert_eq!(ok[0].state(&k("k")), held("a", 1, 19));
    // renewed at t=10 or 11 would be at/after expiry
    let err = Spec::CORRECT
        .check(
            &s,
            &op,
            span(9, 11),
            &Outcome::Renewed { expires_at: Ts(20) },
        )
        .expect_err("renew after lapse");
    assert_eq!(err.invariant, Invariant::LapseIsFinal);
    // a reported expiry no time in the span explains
    let err = Spec::CORRECT
        .check(
            &s,
            &op,
            span(9, 11),
            &Outcome::Renewed { expires_at: Ts(30) },
        )
        .expect_err("renew outside the span");
    assert_eq!(err.invariant, Invariant::DurabilityAndTimeAuthority);
    Spec::CORRECT
        .check(&s, &op, span(9, 11), &Outcome::Lapsed)
        .expect("lapsed allowed");
    let err = Spec::CORRECT
        .check(
            &s,
            &op,
            span(10, 11),
            &Outcome::Renewed { expires_at: Ts(20) },
        )
        .expect_err("certainly lapsed");
    assert_eq!(err.invariant, Invariant::LapseIsFinal);
}

#[test]
fn reported_expiry_must_be_server_time_plus_ttl() {
    let op = acq("k", "a", 100);
    for (r, ok) in [(99, false), (100, true), (103, true), (104, false)] {
        let res = Spec::CORRECT.check(
            &S::new(),
            &op,
            span(0, 3),
            &Outcome::Acquired {
                epoch: 1,
                expires_at: Ts(r),
            },
        );
        assert_eq!(res.is_ok(), ok, "expires_at {r}");
    }
    // calendar intervals are exact: instant 0 is 1970-01-01, a month later 1970-02-01
    let month = Op::acquire(
        k("k"),
        k("a"),
        Interval {
            months: 1,
            days: 0,
            micros: 0,
        },
    );
    let day = 86_400_000_000_i64;
    for (r, ok) in [
        (28 * day, false),
        (31 * day - 1, false),
        (31 * day, true),
        (31 * day + 1, false),
        (32 * day, false),
    ] {
        let res = Spec::CORRECT.check(
            &S::new(),
            &month,
            span(0, 0),
            &Outcome::Acquired {
                epoch: 1,
                expires_at: Ts(r),
            },
        );
        assert_eq!(res.is_ok(), ok, "expires_at {r}");
    }
    // 2026-01-31 + 1 mon is 2026-02-28 (clamped), not 30 or 31 days later
    let jan31 = 1_769_817_600_000_000_i64;
    for (r, ok) in [
        (jan31 + 28 * day, true),
        (jan31 + 30 * day, false),
        (jan31 + 31 * day, false),
    ] {
        let res = Spec::CORRECT.check(
            &S::new(),
            &month,
            span(jan31, jan31),
            &Outcome::Acquired {
                epoch: 1,
                expires_at: Ts(r),
            },
        );
        assert_eq!(res.is_ok(), ok, "expires_at {r}");
    }
    // a day is 24 hours, never 23 or 25
    let one_day = Op::acquire(
        k("k"),
        k("a"),
        Interval {
            months: 0,
            days: 1,
            micros: 0,
        },
    );
    let hour = 3_600_000_000_i64;
    for (r, ok) in [(day - hour, false), (day, true), (day + hour, false)] {
        let res = Spec::CORRECT.check(
            &S::new(),
            &one_day,
            span(jan31, jan31),
            &Outcome::Acquired {
                epoch: 1,
                expires_at: Ts(jan31 + r),
            },
        );
        assert_eq!(res.is_ok(), ok, "expires_at +{r}");
    }
}

#[test]
fn timeout_needs_the_wait_to_have_elapsed() {
    let s = store_with("k", held("a", 1, 100));
    let op = Op::acquire_wait(k("k"), k("b"), ttl(10), ttl(50));
    Spec::CORRECT
        .check(&s, &op, span(0, 50), &Outcome::Timeout)
        .expect("waited 50");
    let err = Spec::CORRECT
        .check(&s, &op, span(0, 49), &Outcome::Timeout)
        .expect_err("timed out early");
    assert_eq!(err.invariant, Invariant::PrecedenceAndIsolation);
    // a blocking acquire never reports a plain denial
    assert!(Spec::CORRECT
        .check(&s, &op, span(0, 60), &Outcome::Denied)
        .is_err());
    // the key lapsed at 100, within the wait: the waiter must get it, not time out
    let err = Spec::CORRECT
        .check(&s, &op, span(60, 120), &Outcome::Timeout)
        .expect_err("acquirable during the wait");
    assert_eq!(err.invariant, Invariant::LapseIsFinal);
}

#[test]
fn unknown_and_failed_outcomes() {
    let op = acq("k", "a", 10);
    let after = Spec::CORRECT
        .check(&S::new(), &op, span(0, 2), &Outcome::Unknown)
        .expect("unknown");
    assert_eq!(after.len(), 2);
    assert!(after.contains(&S::new()));
    assert!(after.contains(&store_with(
        "k",
        KeyState::Held {
            owner: k("a"),
            epoch: 1,
            expires: Window::between(Ts(10), Ts(12))
        }
    )));
    let after = Spec::CORRECT
        .check(&S::new(), &op, span(0, 2), &Outcome::Failed)
        .expect("failed");
    assert_eq!(after, vec![S::new()]);
}

#[test]
fn keys_are_independent() {
    let mut s = store_with("k1", held("a", 1, 10));
    s.set(k("k2"), KeyState::Free { epoch: 5 });
    let (_, next) = step(&s, &acq("k2", "b", 10), 0);
    assert_eq!(next.state(&k("k1")), held("a", 1, 10));
    assert_eq!(next.state(&k("k2")), held("b", 6, 10));
    // under the mutant, the write lands on every row
    let (_, next) = Spec::new(Mutation::WriteIgnoresKey).step(&s, &acq("k2", "b", 10), Ts(0));
    assert_eq!(next.state(&k("k1")), held("b", 6, 10));
}

#[test]
fn point_enumeration_is_deterministic() {
    let s = store_with("k", held("a", 1, 10));
    let ops = [
        acq("k", "a", 5),
        acq("k", "b", 5),
        Op::renew(k("k"), k("a"), 1, ttl(5)),
        Op::release(k("k"), k("a"), 1),
        Op::inspect(k("k")),
        Op::expire(k("k")),
    ];
    for t in [0, 9, 10, 11] {
        for op in &ops {
            let p = Spec::CORRECT.possible(&s, op, Span::point(Ts(t)));
            assert_eq!(p.len(), 1, "{op:?} at {t}");
            let (o, st) = step(&s, op, t);
            assert_eq!(p[0].1, st);
            assert_eq!(exact_outcome(p[0].0.clone()), o);
            // the checker accepts what step produces
            let after = Spec::CORRECT
                .check(&s, op, Span::point(Ts(t)), &o)
                .expect("step is accepted");
            assert_eq!(after, vec![st]);
        }
    }
}

#[test]
fn mutants_differ_from_the_spec() {
    let live = store_with("k", held("a", 1, 10));
    let lapsed_at = 10;
    let m = |m| Spec::new(m);
    assert_eq!(
        m(Mutation::AcquireIgnoresHolder)
            .step(&live, &acq("k", "b", 5), Ts(0))
            .0,
        Outcome::Acquired {
            epoch: 2,
            expires_at: Ts(5)
        }
    );
    assert_eq!(
        m(Mutation::TakeoverReusesEpoch)
            .step(&live, &acq("k", "b", 5), Ts(lapsed_at))
            .0,
        Outcome::Acquired {
            epoch: 1,
            expires_at: Ts(15)
        }
    );
    assert_eq!(
        m(Mutation::RenewIgnoresExpiry)
            .step(&live, &Op::renew(k("k"), k("a"), 1, ttl(5)), Ts(lapsed_at))
            .0,
        Outcome::Renewed { expires_at: Ts(15) }
    );
    assert_eq!(
        m(Mutation::WrongPrecedence)
            .step(&live, &Op::renew(k("k"), k("b"), 7, ttl(5)), Ts(0))
            .0,
        Outcome::EpochMismatch
    );
    assert_eq!(
        m(Mutation::ReleaseDeletesRow)
            .step(&live, &Op::release(k("k"), k("a"), 1), Ts(0))
            .1,
        S::new()
    );
    let bad_ttl: O = Op::Acquire {
        key: Some(k("k")),
        owner: Some(k("a")),
        ttl: Some(Interval::ZERO),
        wait: Some(Interval::ZERO),
    };
    let (out, next) = m(Mutation::InvalidInputWrites).step(&S::new(), &bad_ttl, Ts(3));
    assert_eq!(out, Outcome::InvalidInput);
    assert_eq!(next.state(&k("k")), held("a", 1, 3));
    let down = span(2, 7);
    assert_eq!(
        m(Mutation::DowntimeExtendsLease)
            .restart(&live, down)
            .state(&k("k")),
        held("a", 1, 15)
    );
    assert_eq!(Spec::CORRECT.restart(&live, down), live);
    assert_eq!(m(Mutation::CrashLosesCommitted).crash(&live), S::new());
    assert_eq!(Spec::CORRECT.crash(&live), live);
}

#[test]
fn interval_constraints_follow_the_extension() {
    let acquire_ttl = |ttl: Interval, wait: Interval| -> Vec<Violation> {
        Op::<String, String>::Acquire {
            key: Some(k("k")),
            owner: Some(k("a")),
            ttl: Some(ttl),
            wait: Some(wait),
        }
        .violations()
    };
    let day_minus_us = Interval {
        months: 0,
        days: 1,
        micros: -1,
    };
    // a negative field is reported even though the interval is positive overall
    assert_eq!(
        acquire_ttl(day_minus_us, Interval::ZERO),
        vec![Violation::TtlNegativeField]
    );
    assert_eq!(
        acquire_ttl(Interval::secs(1), day_minus_us),
        vec![Violation::WaitNegativeField]
    );
    // '1 year -1 month' is stored as 11 months: no negative field
    let eleven_months = Interval {
        months: 11,
        days: 0,
        micros: 0,
    };
    assert!(acquire_ttl(eleven_months, eleven_months).is_empty());
    // 100 years is accepted, a microsecond more is not
    let over = Interval {
        months: 1200,
        days: 0,
        micros: 1,
    };
    assert_eq!(
        acquire_ttl(over, over),
        vec![Violation::TtlTooLong, Violation::WaitTooLong]
    );
    assert_eq!(
        Violation::TtlNegativeField.detail_prefix(),
        "ttl must not have a negative field"
    );
}
