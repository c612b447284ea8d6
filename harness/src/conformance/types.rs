//! The API's types: what the build declares is the contract's (harness::contract), and an
//! epoch counts past 2^31 - 1 (it is a `bigint`, specs/SEMANTICS.md section 1).

use super::{e, pg, CheckResult, Ctx, Failure, S};
use crate::client::Acquire;
use std::time::Duration;

/// The build's catalog declares the four functions with the contract's arguments and
/// result columns, and the lease table's columns with the contract's types (epoch
/// `bigint`, expires_at `timestamp with time zone`).
pub(super) async fn the_api_and_the_lease_table_have_the_contracts_types(
    ctx: &Ctx<'_>,
) -> CheckResult {
    let (_, c) = ctx.db().await?;
    let differences = crate::contract::differences(&c).await.map_err(pg)?;
    match differences.is_empty() {
        true => Ok(()),
        false => Err(Failure::Violation(format!(
            "the build's API differs from the contract: {}",
            differences.join("; ")
        ))),
    }
}

/// The last epoch of the `int4` range.
const INT4_MAX: i64 = i32::MAX as i64;

/// A key whose epoch stands at 2^31 - 2 (written into the lease table by the superuser:
/// two billion grants are out of reach) is released, granted, released and granted again:
/// its epochs run 2^31 - 1, 2^31, 2^31 + 1, each reported as such.
pub(super) async fn epochs_count_past_2_31(ctx: &Ctx<'_>) -> CheckResult {
    let (_, c) = ctx.db().await?;
    let calls = &ctx.calls;
    let grant = |owner: &'static str| {
        let c = &c;
        async move {
            match calls
                .acquire(c, "k", owner, S(600), Duration::ZERO)
                .await
                .map_err(e)?
            {
                Acquire::Acquired { epoch, .. } => Ok(epoch),
                Acquire::Denied => {
                    Err(Failure::Violation(format!("acquire by {owner} was denied")))
                }
            }
        }
    };
    grant("a").await?;
    // The parameter is the contract's bigint whatever the build's column (an integer
    // column takes 2^31 - 2 and then cannot count on: that is the finding).
    let table = crate::extension::lease_table(&c).await.map_err(pg)?;
    c.execute(
        &format!(
            "UPDATE {table} SET epoch = $1::pg_catalog.int8 WHERE key OPERATOR(pg_catalog.=) 'k'"
        ),
        &[&(INT4_MAX - 1)],
    )
    .await
    .map_err(pg)?;
    let bigint = |what: &str, err: Failure| {
        Failure::Violation(format!(
            "an epoch must count past 2^31 - 1 (a bigint, specs/SEMANTICS.md section 1): {what}: {}",
            err.message()
        ))
    };
    calls
        .release(&c, "k", "a", INT4_MAX - 1)
        .await
        .map_err(|err| bigint("the release to epoch 2^31 - 1", e(err)))?;
    let past = grant("b")
        .await
        .map_err(|err| bigint("the grant of epoch 2^31", err))?;
    calls
        .release(&c, "k", "b", past)
        .await
        .map_err(|err| bigint("the release to epoch 2^31 + 1", e(err)))?;
    let row = calls.inspect(&c, "k").await.map_err(e)?;
    let seen = row.map(|r| r.epoch);
    match (past, seen) {
        (p, Some(s)) if p == INT4_MAX + 1 && s == INT4_MAX + 2 => Ok(()),
        _ => Err(Failure::Violation(format!(
            "an epoch must count past 2^31 - 1 (a bigint): the grant after 2^31 - 1 had epoch \
             {past}, inspect then showed {seen:?}; expected {} and {}",
            INT4_MAX + 1,
            INT4_MAX + 2
        ))),
    }
}
