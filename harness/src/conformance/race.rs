//! The one behaviour check whose calls must race at once, which a plan (one step issued at
//! a time) cannot make: eight sessions released by a barrier acquire the same key, never
//! leased or lapsed, and the model's checker judges the history (exactly one grant).
//! The checks that are only sessions doing steps and expecting answers are plans
//! (module `plans`, harness/plans/conformance/).

use super::script::{acquire, call, granted, inspect, not_granted, Script};
use super::{infra, CheckResult, Ctx, Failure, S};
use std::time::Duration;

/// The epoch `record` was granted, or the check stops (with the checker's finding if the
/// history already breaks an invariant).
macro_rules! grant {
    ($script:expr, $record:expr) => {
        match granted(&$record) {
            Some(epoch) => epoch,
            None => return Err($script.stop(not_granted(&$record)).await),
        }
    };
}

/// A fresh database for the check and a script recording on it.
async fn script(ctx: &Ctx<'_>) -> Result<(String, Script), Failure> {
    let (db, _) = ctx.db().await?;
    let script = Script::on(ctx, &db)?;
    Ok((db, script))
}

pub(super) async fn exactly_one_of_concurrent_acquirers_wins(ctx: &Ctx<'_>) -> CheckResult {
    let (_, script) = script(ctx).await?;
    let contenders = 8;
    let mut sessions = Vec::new();
    for _ in 0..contenders {
        sessions.push(script.session().await?);
    }
    let mut setup = script.session().await?;
    for round in 0..6 {
        let key = format!("race-{round}");
        if round % 2 == 1 {
            // Odd rounds race for a lapsed lease instead of a never-leased key.
            let got = call(&mut setup, acquire(&key, "previous", S(60), Duration::ZERO)).await?;
            grant!(script, got);
            script.lapse(&key).await?;
        }
        let barrier = std::sync::Arc::new(tokio::sync::Barrier::new(contenders));
        let mut tasks = Vec::new();
        for (i, mut s) in sessions.drain(..).enumerate() {
            let (barrier, key) = (barrier.clone(), key.clone());
            tasks.push(tokio::spawn(async move {
                barrier.wait().await;
                let r = call(
                    &mut s,
                    acquire(&key, &format!("w{i}"), S(60), Duration::ZERO),
                )
                .await;
                (s, r)
            }));
        }
        for t in tasks {
            let (s, r) = t.await.map_err(infra)?;
            r?;
            sessions.push(s);
        }
        call(&mut setup, inspect(&key)).await?;
    }
    script.judge().await
}
