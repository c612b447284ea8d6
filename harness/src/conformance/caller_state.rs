//! What a call leaves in the caller's session and transaction, and the errors the caller's
//! own settings make a call raise: no call changes a setting of the caller (not even for
//! the rest of its transaction); in a READ ONLY transaction a write is refused with 25006
//! and a read answers; under `lock_timeout` a call that waits for another transaction's row
//! lock fails with 55P03 (specs/SEMANTICS.md sections 7 and 10).

use super::liveness::Watched;
use super::{e, infra, pg, CheckResult, Ctx, Failure, MS, S};
use crate::client::{Acquire, LeaseError};
use crate::liveness::CALL_BOUND;
use std::collections::BTreeMap;
use std::time::Duration;
use tokio_postgres::Client;

/// Every setting the session sees, by name: its value and the value it would reset to.
async fn settings(c: &Client) -> Result<BTreeMap<String, (String, String)>, Failure> {
    let rows = c
        .query(
            "SELECT name, coalesce(setting, ''), coalesce(reset_val, '') \
               FROM pg_catalog.pg_settings ORDER BY name",
            &[],
        )
        .await
        .map_err(pg)?;
    Ok(rows
        .iter()
        .map(|r| (r.get(0), (r.get(1), r.get(2))))
        .collect())
}

/// The settings that differ between `before` and `after`, as `name: before -> after`. A
/// setting that first appears (a library the call loaded defines it) counts only when it
/// is not at the value it resets to.
fn changed(
    before: &BTreeMap<String, (String, String)>,
    after: &BTreeMap<String, (String, String)>,
) -> Vec<String> {
    after
        .iter()
        .filter(|(name, (value, reset))| match before.get(*name) {
            Some((was, _)) => was != value,
            None => value != reset,
        })
        .map(|(name, (value, _))| {
            format!(
                "{name}: {} -> {value}",
                before
                    .get(name)
                    .map_or("(not defined)", |(v, _)| v.as_str())
            )
        })
        .collect()
}

/// Each kind of call, with each kind of answer (a grant, an idempotent and a denied
/// acquire, a blocking acquire's timeout, renews and releases that succeed and fail,
/// inspects of a held and a never-leased key), made inside a transaction and in
/// autocommit: no setting the caller sees differs after it, in the transaction or after
/// its end. A build that runs `SET LOCAL synchronous_commit = off` (or any `SET`) in a
/// call leaks it into the caller's transaction.
pub(super) async fn no_call_changes_the_callers_session_settings(ctx: &Ctx<'_>) -> CheckResult {
    let (db, _) = ctx.db().await?;
    let w = Watched::open(ctx, &db).await?;
    let other = ctx.connect(&db).await?;
    let calls = &ctx.calls;
    let c = &w.c;
    calls
        .acquire(&other, "held", "other", S(600), Duration::ZERO)
        .await
        .map_err(e)?;
    let start = settings(c).await?;
    let mut leaks = Vec::new();
    for in_transaction in [true, false] {
        if in_transaction {
            c.batch_execute("BEGIN").await.map_err(pg)?;
        }
        let steps: [(&str, Duration); 10] = [
            ("a grant", CALL_BOUND),
            ("an idempotent acquire", CALL_BOUND),
            ("a denied acquire", CALL_BOUND),
            ("a renew", CALL_BOUND),
            ("a renew of another's lease (not_owner)", CALL_BOUND),
            ("an inspect of a held key", CALL_BOUND),
            ("an inspect of a never-leased key", CALL_BOUND),
            ("a release", CALL_BOUND),
            ("a release of a released lease (not_owner)", CALL_BOUND),
            (
                "a blocking acquire whose wait runs out",
                CALL_BOUND + MS(100),
            ),
        ];
        let key = format!("k-{in_transaction}");
        let mut epoch = 1;
        for (what, bound) in steps {
            // A wait that runs out is an error, which ends a transaction: autocommit only.
            if in_transaction && what.starts_with("a blocking") {
                continue;
            }
            let before = settings(c).await?;
            let call = async {
                match what {
                    "a grant" | "an idempotent acquire" => calls
                        .acquire(c, &key, "me", S(60), Duration::ZERO)
                        .await
                        .map(|a| epoch = a.epoch().unwrap_or(epoch)),
                    "a denied acquire" => calls
                        .acquire(c, "held", "me", S(60), Duration::ZERO)
                        .await
                        .map(|_| ()),
                    "a renew" => calls.renew(c, &key, "me", epoch, S(60)).await.map(|_| ()),
                    "a renew of another's lease (not_owner)" => {
                        calls.renew(c, "held", "me", 1, S(60)).await.map(|_| ())
                    }
                    "an inspect of a held key" => calls.inspect(c, &key).await.map(|_| ()),
                    "an inspect of a never-leased key" => {
                        calls.inspect(c, "never").await.map(|_| ())
                    }
                    "a release" | "a release of a released lease (not_owner)" => {
                        calls.release(c, &key, "me", epoch).await.map(|_| ())
                    }
                    _ => match calls.acquire(c, "held", "me", S(60), MS(100)).await {
                        Err(LeaseError::WaitExhausted { .. }) => Ok(()),
                        other => other.map(|_| ()),
                    },
                }
            };
            let what = format!(
                "lease.* ({what}) {}",
                if in_transaction {
                    "in a transaction"
                } else {
                    "in autocommit"
                }
            );
            w.within(&what, bound, call).await?.map_err(e)?;
            let after = settings(c).await?;
            for leak in changed(&before, &after) {
                leaks.push(format!("{what} changed {leak}"));
            }
        }
        if in_transaction {
            c.batch_execute("COMMIT").await.map_err(pg)?;
        }
    }
    for leak in changed(&start, &settings(c).await?) {
        leaks.push(format!("after the transaction ended: {leak}"));
    }
    match leaks.is_empty() {
        true => Ok(()),
        false => Err(Failure::Violation(format!(
            "a call changed the caller's settings (specs/SEMANTICS.md section 10: no call \
             changes what the caller controls): {}",
            leaks.join("; ")
        ))),
    }
}

/// In READ ONLY transactions, a write (a grant, a blocking acquire of a free key, a renew,
/// a release) fails with 25006 within its bound, and a read (an inspect, a denied or
/// idempotent acquire, a renew that fails) answers: specs/SEMANTICS.md section 7.
pub(super) async fn a_read_only_transaction_refuses_writes_with_25006(
    ctx: &Ctx<'_>,
) -> CheckResult {
    let (db, _) = ctx.db().await?;
    let w = Watched::open(ctx, &db).await?;
    let admin = ctx.connect(&db).await?;
    let calls = &ctx.calls;
    let c = &w.c;
    let epoch = match calls
        .acquire(&admin, "mine", "me", S(600), Duration::ZERO)
        .await
        .map_err(e)?
    {
        Acquire::Acquired { epoch, .. } => epoch,
        Acquire::Denied => return Err("a never-leased key was denied".into()),
    };
    calls
        .acquire(&admin, "held", "other", S(600), Duration::ZERO)
        .await
        .map_err(e)?;
    let mut wrong = Vec::new();
    let writes = [
        "a grant of a never-leased key",
        "a blocking grant of a never-leased key (wait 1s)",
        "a renew of the caller's lease",
        "a release of the caller's lease",
    ];
    let reads = [
        "an inspect",
        "an idempotent acquire",
        "a denied acquire",
        "a renew of another's lease",
    ];
    for what in writes.iter().chain(reads.iter()) {
        c.batch_execute("BEGIN READ ONLY").await.map_err(pg)?;
        let bound = CALL_BOUND + S(1);
        let call = async {
            match *what {
                "a grant of a never-leased key" => calls
                    .acquire(c, "new", "me", S(60), Duration::ZERO)
                    .await
                    .map(|_| ()),
                "a blocking grant of a never-leased key (wait 1s)" => {
                    calls.acquire(c, "new", "me", S(60), S(1)).await.map(|_| ())
                }
                "a renew of the caller's lease" => {
                    calls.renew(c, "mine", "me", epoch, S(60)).await.map(|_| ())
                }
                "a release of the caller's lease" => {
                    calls.release(c, "mine", "me", epoch).await.map(|_| ())
                }
                "an inspect" => calls.inspect(c, "mine").await.map(|_| ()),
                "an idempotent acquire" => calls
                    .acquire(c, "mine", "me", S(60), Duration::ZERO)
                    .await
                    .map(|_| ()),
                "a denied acquire" => calls
                    .acquire(c, "held", "me", S(60), Duration::ZERO)
                    .await
                    .map(|_| ()),
                _ => calls.renew(c, "held", "me", 1, S(60)).await.map(|_| ()),
            }
        };
        let label = format!("{what} in a READ ONLY transaction (expected {})", {
            if writes.contains(what) {
                "25006"
            } else {
                "an answer"
            }
        });
        let answer = w.within(&label, bound, call).await?;
        c.batch_execute("ROLLBACK").await.map_err(pg)?;
        match (writes.contains(what), answer) {
            (true, Err(err)) if err.code() == Some(model::fate::READ_ONLY_TRANSACTION) => {}
            (false, Ok(())) => {}
            (_, Err(err @ (LeaseError::OutcomeUnknown { .. } | LeaseError::HarnessBug { .. }))) => {
                return Err(infra(err))
            }
            (_, answer) => wrong.push(format!("{label}: {answer:?}")),
        }
    }
    match wrong.is_empty() {
        true => Ok(()),
        false => Err(Failure::Violation(wrong.join("; "))),
    }
}

/// With `lock_timeout` set, a call that waits for another transaction's row lock fails
/// with 55P03 and changes nothing: a blocking acquire of a lapsed lease whose takeover
/// another transaction holds, and a renew of a lease another session of its owner renewed
/// in an open transaction (specs/SEMANTICS.md section 7).
pub(super) async fn lock_timeout_fails_a_waiting_call_with_55p03(ctx: &Ctx<'_>) -> CheckResult {
    let (db, _) = ctx.db().await?;
    let w = Watched::open(ctx, &db).await?;
    let holder = ctx.connect(&db).await?;
    let calls = &ctx.calls;
    let c = &w.c;
    calls
        .acquire(&holder, "lapsed", "old", MS(50), Duration::ZERO)
        .await
        .map_err(e)?;
    let mine = calls
        .acquire(&holder, "mine", "me", S(600), Duration::ZERO)
        .await
        .map_err(e)?
        .epoch()
        .ok_or("a never-leased key was denied")?;
    tokio::time::sleep(MS(100)).await;
    c.batch_execute("SET lock_timeout = '200ms'")
        .await
        .map_err(pg)?;
    let mut wrong = Vec::new();
    for what in [
        "a blocking acquire (wait 3s) of a lapsed lease whose takeover another transaction holds",
        "a renew of a lease another session of its owner renewed in an open transaction",
    ] {
        holder.batch_execute("BEGIN").await.map_err(pg)?;
        let held = match what.starts_with("a blocking") {
            true => calls
                .acquire(&holder, "lapsed", "taker", S(600), Duration::ZERO)
                .await
                .map(|_| ()),
            false => calls
                .renew(&holder, "mine", "me", mine, S(600))
                .await
                .map(|_| ()),
        };
        held.map_err(e)?;
        let call = async {
            match what.starts_with("a blocking") {
                true => calls
                    .acquire(c, "lapsed", "waiter", S(60), S(3))
                    .await
                    .map(|_| ()),
                false => calls.renew(c, "mine", "me", mine, S(60)).await.map(|_| ()),
            }
        };
        tokio::pin!(call);
        let label = format!("{what}, under lock_timeout 200ms (expected 55P03)");
        // 55P03 comes 200 ms into the wait; past 2 s the lock holder ends its transaction,
        // and a call that was still trying answers what it found then.
        let early = tokio::time::timeout(S(2), &mut call).await;
        holder.batch_execute("ROLLBACK").await.map_err(pg)?;
        let answer = match early {
            Ok(answer) => answer,
            Err(_) => w.within(&label, CALL_BOUND, &mut call).await?,
        };
        match answer {
            Err(err) if err.code() == Some("55P03") => {}
            Err(err @ (LeaseError::OutcomeUnknown { .. } | LeaseError::HarnessBug { .. })) => {
                return Err(infra(err))
            }
            answer => wrong.push(format!("{label}: {answer:?}")),
        }
    }
    match wrong.is_empty() {
        true => Ok(()),
        false => Err(Failure::Violation(format!(
            "{} (a build that catches every error retries instead)",
            wrong.join("; ")
        ))),
    }
}
