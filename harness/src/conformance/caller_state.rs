//! What a call leaves in the caller's session and transaction: no call changes a setting of
//! the caller, not even for the rest of its transaction (specs/SEMANTICS.md section 10).
//! The errors the caller's own settings make a call raise (25006 in a READ ONLY
//! transaction, 55P03 under `lock_timeout`) are plans: harness/plans/conformance/.

use super::liveness::Watched;
use super::{e, pg, CheckResult, Ctx, Failure, MS, S};
use crate::client::LeaseError;
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
