//! The input domain, systematically: every shape of valid input is accepted (keys and
//! owners of any byte content within the limits; ttl and wait of every interval shape),
//! and every combination of violated constraints is refused with 22023 naming each
//! violated argument's first violated constraint, in signature order, whatever state the
//! key is in (specs/SEMANTICS.md section 6: invalid input takes precedence over every other
//! answer). Each case is judged by the one judge of a single call against the spec
//! ([`crate::security::hostile::run_case`]), which also checks that nothing else changed.

use super::{infra, CheckResult, Ctx, Failure};
use crate::security::hostile::{
    run_case, Call, IntervalInput, Target, WATCHED_KEYS, WATCHED_OWNERS,
};
use model::Interval;

/// `n` bytes of `ch`, padded with ASCII `x`.
fn bytes_of(n: usize, ch: char) -> String {
    let w = ch.len_utf8();
    let mut s: String = std::iter::repeat_n(ch, n / w).collect();
    s.extend(std::iter::repeat_n('x', n % w));
    s
}

/// Valid names of every kind of byte content: blanks, punctuation only, quotes and
/// backslashes, format directives, multibyte and combining characters, one byte, and the
/// 1024-byte limit exactly (ASCII and multibyte).
pub fn valid_names() -> Vec<String> {
    let mut names: Vec<String> = [
        " ",
        "   ",
        "\t",
        "\n",
        "\u{a0}",
        "\u{3000}",
        "!",
        "'",
        "\\",
        "''",
        "'; --",
        "%s",
        "%",
        "$1",
        "é",
        "e\u{301}",
        "\u{1f642}",
        "a b",
        "ß",
        "x",
        "NULL",
        "DEFAULT",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    names.push(bytes_of(1024, 'x'));
    names.push(bytes_of(1024, '\u{20ac}'));
    names.push(bytes_of(1024, '\u{1f642}'));
    names
}

fn fields(months: i32, days: i32, micros: i64) -> Option<IntervalInput> {
    Some(IntervalInput::Fields(Interval {
        months,
        days,
        micros,
    }))
}

fn text(s: &str) -> Option<IntervalInput> {
    Some(IntervalInput::Text(s.to_string()))
}

/// Valid ttls of every shape: one field each (months, days, microseconds), all three,
/// 1 microsecond, mixed signs that store no negative field (`'1 year -1 month'`), and
/// the 100-year limit exactly.
pub fn valid_ttls() -> Vec<Option<IntervalInput>> {
    vec![
        fields(0, 0, 1),
        fields(0, 0, 60_000_000),
        fields(0, 1, 0),
        fields(1, 0, 0),
        fields(1, 1, 1),
        text("1 year -1 month"),
        text("P1Y2M3DT4H5M6.000007S"),
        fields(1200, 0, 0),
    ]
}

/// Valid waits: zero, 1 microsecond, every field, the 100-year limit (each on a key the
/// caller can take at once, so none waits).
pub fn valid_waits() -> Vec<Option<IntervalInput>> {
    vec![
        fields(0, 0, 0),
        fields(0, 0, 1),
        fields(0, 1, 0),
        fields(1, 0, 0),
        text("1 year -1 month"),
        fields(1200, 0, 0),
    ]
}

/// Every valid shape, each in a grant, then in a renew, an inspect and a release of the
/// lease it made.
pub fn valid_cases() -> Vec<Call> {
    let minute = fields(0, 0, 60_000_000);
    let zero = fields(0, 0, 0);
    let mut cases = Vec::new();
    let cycle = |key: String, owner: String, ttl: Option<IntervalInput>, wait| {
        vec![
            Call::Acquire {
                key: Some(key.clone()),
                owner: Some(owner.clone()),
                ttl: ttl.clone(),
                wait,
            },
            Call::Renew {
                key: Some(key.clone()),
                owner: Some(owner.clone()),
                epoch: Some(1),
                ttl,
            },
            Call::Inspect {
                key: Some(key.clone()),
            },
            Call::Release {
                key: Some(key),
                owner: Some(owner),
                epoch: Some(1),
            },
        ]
    };
    for (i, name) in valid_names().into_iter().enumerate() {
        cases.extend(cycle(
            name.clone(),
            "o".into(),
            minute.clone(),
            zero.clone(),
        ));
        cases.extend(cycle(
            format!("owner-{i}"),
            name,
            minute.clone(),
            zero.clone(),
        ));
    }
    for (i, ttl) in valid_ttls().into_iter().enumerate() {
        cases.extend(cycle(format!("ttl-{i}"), "o".into(), ttl, zero.clone()));
    }
    for (i, wait) in valid_waits().into_iter().enumerate() {
        cases.extend(cycle(format!("wait-{i}"), "o".into(), minute.clone(), wait));
    }
    cases
}

/// A text argument of kind `k`: 0 valid (`valid`), 1 NULL, 2 empty, 3 one byte over the
/// limit.
fn text_of(k: usize, valid: &str) -> Option<String> {
    match k {
        0 => Some(valid.to_string()),
        1 => None,
        2 => Some(String::new()),
        _ => Some(bytes_of(1025, 'x')),
    }
}

/// Every combination of the constraints on each argument (each argument valid or violating
/// one of its constraints, and a ttl violating two: `'1 mon -30 days'` has a negative field
/// and is not positive, and the negative field comes first), the valid keys naming keys in
/// every state in turn (held, free, lapsed, never leased), without the all-valid ones.
pub fn invalid_cases() -> Vec<Call> {
    let ttls = [
        fields(0, 0, 60_000_000),
        None,
        fields(0, 0, -1),
        fields(0, 0, 0),
        fields(1200, 0, 1),
        fields(1, -30, 0),
    ];
    let waits = [fields(0, 0, 0), None, fields(0, -1, 0), fields(1201, 0, 0)];
    let owner = WATCHED_OWNERS[0];
    let mut turn = 0usize;
    let mut key = |k: usize| {
        turn += 1;
        text_of(k, WATCHED_KEYS[turn % WATCHED_KEYS.len()])
    };
    let mut cases = Vec::new();
    for k in 0..4 {
        for o in 0..4 {
            for ttl in &ttls {
                for wait in &waits {
                    cases.push(Call::Acquire {
                        key: key(k),
                        owner: text_of(o, owner),
                        ttl: ttl.clone(),
                        wait: wait.clone(),
                    });
                }
            }
            for epoch in [Some(1), None] {
                for ttl in &ttls {
                    cases.push(Call::Renew {
                        key: key(k),
                        owner: text_of(o, owner),
                        epoch,
                        ttl: ttl.clone(),
                    });
                }
                cases.push(Call::Release {
                    key: key(k),
                    owner: text_of(o, owner),
                    epoch,
                });
            }
        }
        cases.push(Call::Inspect { key: key(k) });
    }
    cases.retain(|c| !op_of(c).violations().is_empty());
    cases
}

/// The spec's op of a case whose intervals are given as fields (text intervals are
/// judged by the server first and left out here).
fn op_of(call: &Call) -> model::Op<String, String> {
    let iv = |i: &Option<IntervalInput>| match i {
        Some(IntervalInput::Fields(f)) => Some(*f),
        Some(IntervalInput::Text(_)) => Some(Interval::secs(1)),
        None => None,
    };
    match call {
        Call::Acquire {
            key,
            owner,
            ttl,
            wait,
        } => model::Op::Acquire {
            key: key.clone(),
            owner: owner.clone(),
            ttl: iv(ttl),
            wait: iv(wait),
        },
        Call::Renew {
            key,
            owner,
            epoch,
            ttl,
        } => model::Op::Renew {
            key: key.clone(),
            owner: owner.clone(),
            epoch: *epoch,
            ttl: iv(ttl),
        },
        Call::Release { key, owner, epoch } => model::Op::Release {
            key: key.clone(),
            owner: owner.clone(),
            epoch: *epoch,
        },
        Call::Inspect { key } => model::Op::Inspect { key: key.clone() },
    }
}

/// Runs `cases` against a fresh database of the check (the watched keys seeded), each
/// judged by the spec; the first failures (at most 3) as one finding, prefixed `what`.
async fn run_all(ctx: &Ctx<'_>, cases: &[Call], what: &str) -> CheckResult {
    let (db, _) = ctx.db().await?;
    // The superuser reads the table and the clock without the check's settings (a planted
    // search_path must not answer the judge's own reads); the caller runs under them.
    let su = ctx.cluster.connect(&db).await.map_err(infra)?;
    let caller = ctx.connect(&db).await?;
    let target = Target {
        su: &su,
        caller: &caller,
    };
    target.seed().await.map_err(|err| match err {
        crate::security::SecurityError::Lease(err) => super::e(err),
        other => infra(format!("seeding the watched keys: {other}")),
    })?;
    let mut failures = Vec::new();
    for case in cases {
        match run_case(&target, case).await {
            Ok(_) => {}
            Err(Failure::Violation(why)) => {
                failures.push(format!(
                    "{}: {why}",
                    crate::judgement::shorten(&format!("{case:?}"))
                ));
                if failures.len() == 3 {
                    break;
                }
            }
            Err(Failure::Infrastructure(why)) => return Err(infra(format!("{case:?}: {why}"))),
        }
    }
    match failures.is_empty() {
        true => Ok(()),
        false => Err(Failure::Violation(format!(
            "{what} ({} cases): {}",
            cases.len(),
            failures.join("; ")
        ))),
    }
}

/// Every valid shape of key, owner, ttl and wait is answered as the spec says (a valid
/// call is never refused: a key of blanks is not empty).
pub(super) async fn every_valid_key_owner_and_interval_is_accepted(ctx: &Ctx<'_>) -> CheckResult {
    run_all(ctx, &valid_cases(), "valid input rejected or misanswered").await
}

/// Every combination of violated constraints is 22023 with each violated argument's first
/// violated constraint named in signature order, and changes nothing, whatever the key's
/// state.
pub(super) async fn invalid_input_names_every_violated_constraint_in_order(
    ctx: &Ctx<'_>,
) -> CheckResult {
    run_all(
        ctx,
        &invalid_cases(),
        "invalid input misanswered (22023 and its DETAIL)",
    )
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_domains_are_what_they_claim() {
        for c in valid_cases() {
            assert!(op_of(&c).violations().is_empty(), "{c:?}");
        }
        let invalid = invalid_cases();
        assert!(invalid.len() > 300, "{}", invalid.len());
        for c in &invalid {
            assert!(!op_of(c).violations().is_empty(), "{c:?}");
        }
        // The valid argument values reach the watched keys in every state.
        for k in WATCHED_KEYS {
            assert!(
                invalid
                    .iter()
                    .any(|c| matches!(c, Call::Acquire { key: Some(x), .. } if x == k)),
                "{k}"
            );
        }
        // The exact byte limits.
        assert!(valid_names()
            .iter()
            .any(|n| n.len() == 1024 && !n.is_ascii()));
        assert_eq!(bytes_of(1025, 'x').len(), 1025);
    }
}
