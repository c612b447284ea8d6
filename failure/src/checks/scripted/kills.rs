//! The situations of the kill faults: a backend terminated or cancelled, a server-side
//! timeout, each meeting a transaction holding a grant or a blocking acquire mid-wait.

use super::*;

/// A transaction holding a fresh grant has its backend terminated: it is rolled back (the
/// lost COMMIT resolved through pg_xact_status), and another owner is granted the same
/// epoch. A blocking acquire terminated mid-wait is unknown and changes nothing.
pub(super) async fn terminate(rig: &Rig) -> Result<Vec<String>, CheckFailure> {
    let reach = rig.reach();
    let admin = reach.admin().await?;
    let (mut t, mut a, mut b) = (
        rig.recorder.session(),
        rig.recorder.session(),
        rig.recorder.session(),
    );
    t.begin(model::Isolation::ReadCommitted)
        .await
        .map_err(FaultError::from)?;
    let pending = call(&mut t, acquire("k1", "txn-holder", MINUTE)).await?;
    let t_pid = connected_pid(&mut t).await?;
    reach.kill_backend(true, Victim::Pid(t_pid)).await?;
    let end = t.commit().await.map_err(FaultError::from)?;
    let after = call(&mut a, acquire("k1", "next", MINUTE)).await?;
    let b_pid = connected_pid(&mut b).await?;
    let (lost, killed) = tokio::join!(
        call(
            &mut b,
            acquire_wait("k1", "waiter", MINUTE, Interval::secs(30))
        ),
        async {
            waiting(&admin, b_pid, "PgSleep").await?;
            reach.kill_backend(true, Victim::Pid(b_pid)).await
        }
    );
    let (lost, _) = (lost?, killed?);
    let seen = call(&mut a, inspect("k1")).await?;
    expect(end == TxnEnd::Rollback, || {
        format!("the terminated transaction ended {end:?}")
    })?;
    expect(granted(&after) == granted(&pending), || {
        format!(
            "after the rollback the next grant was {:?}, the rolled-back one {:?}",
            after.result, pending.result
        )
    })?;
    expect(lost.result.is_unknown(), || {
        format!("the terminated wait answered {:?}", lost.result)
    })?;
    expect(held(&seen) == Some((Some("next".into()), 1)), || {
        format!("inspect saw {:?}", seen.result)
    })?;
    Ok(vec![
        format!("terminated backend {t_pid} idle in a transaction holding a grant: ended {end:?} (resolved)"),
        format!("the next owner was granted epoch {:?}, the rolled-back grant's", granted(&after)),
        format!("terminated backend {b_pid} mid-wait: unknown ({:?})", lost.result),
    ])
}

/// A blocking acquire mid-wait and a renew waiting for a row lock are cancelled: both fail
/// with 57014 (user request) and change nothing.
pub(super) async fn cancel(rig: &Rig) -> Result<Vec<String>, CheckFailure> {
    let reach = rig.reach();
    let admin = reach.admin().await?;
    let (mut a, mut b, mut t) = (
        rig.recorder.session(),
        rig.recorder.session(),
        rig.recorder.session(),
    );
    let first = call(&mut a, acquire("k1", "holder", MINUTE)).await?;
    let epoch = granted(&first).unwrap_or(1);
    let b_pid = connected_pid(&mut b).await?;
    let (waited, cancelled) = tokio::join!(
        call(
            &mut b,
            acquire_wait("k1", "waiter", MINUTE, Interval::secs(30))
        ),
        async {
            waiting(&admin, b_pid, "PgSleep").await?;
            reach.kill_backend(false, Victim::Pid(b_pid)).await
        }
    );
    let (waited, _) = (waited?, cancelled?);
    // The cancelled wait must have changed nothing before the renew stage relies on it.
    let mid = call(&mut b, inspect("k1")).await?;
    expect(held(&mid) == Some((Some("holder".into()), epoch)), || {
        format!("after the cancelled wait inspect saw {:?}", mid.result)
    })?;
    // A renew of the holder's own lease waits for the row lock of an open transaction
    // that renewed it too.
    t.begin(model::Isolation::ReadCommitted)
        .await
        .map_err(FaultError::from)?;
    call(
        &mut t,
        Op::renew("k1".into(), "holder".into(), epoch, MINUTE),
    )
    .await?;
    let a_pid = connected_pid(&mut a).await?;
    let (renewed, cancelled) = tokio::join!(
        call(
            &mut a,
            Op::renew("k1".into(), "holder".into(), epoch, MINUTE)
        ),
        async {
            waiting(&admin, a_pid, "transactionid").await?;
            reach.kill_backend(false, Victim::Pid(a_pid)).await
        }
    );
    let (renewed, _) = (renewed?, cancelled?);
    t.commit().await.map_err(FaultError::from)?;
    let seen = call(&mut b, inspect("k1")).await?;
    let user = "canceling statement due to user request";
    expect(failed_with(&waited, "57014", user), || {
        format!("the cancelled wait answered {:?}", waited.result)
    })?;
    expect(failed_with(&renewed, "57014", user), || {
        format!("the cancelled renew answered {:?}", renewed.result)
    })?;
    expect(held(&seen) == Some((Some("holder".into()), epoch)), || {
        format!("inspect saw {:?}", seen.result)
    })?;
    Ok(vec![
        format!("cancelled a blocking acquire mid-wait (backend {b_pid}): 57014, nothing changed"),
        format!(
            "cancelled a renew waiting for a row lock (backend {a_pid}): 57014, nothing changed"
        ),
    ])
}

/// statement_timeout (300 ms) fires inside a blocking acquire's wait (of 30 s), or
/// lock_timeout (300 ms) while a blocking acquire waits for an open transaction's new row:
/// the call fails with 57014 / 55P03 and changes nothing.
pub(super) async fn timeout_in_wait(
    rig: &Rig,
    fault: Fault,
    timeout: TimeoutIn,
) -> Result<Vec<String>, CheckFailure> {
    let reach = rig.reach();
    let (mut a, mut b, mut t) = (
        rig.recorder.session(),
        rig.recorder.session(),
        rig.recorder.session(),
    );
    let lock = timeout == TimeoutIn::Lock;
    let holder = if lock { "txn-holder" } else { "holder" };
    if lock {
        t.begin(model::Isolation::ReadCommitted)
            .await
            .map_err(FaultError::from)?;
        call(&mut t, acquire("k1", holder, MINUTE)).await?;
    } else {
        call(&mut a, acquire("k1", holder, MINUTE)).await?;
    }
    let started = Instant::now();
    let waited = around(
        &reach,
        fault,
        "a 300 ms timeout inside a blocking acquire of 30 s",
        call(
            &mut b,
            acquire_wait("k1", "waiter", MINUTE, Interval::secs(30)),
        ),
    )
    .await??;
    let took = started.elapsed();
    if lock {
        t.commit().await.map_err(FaultError::from)?;
    }
    let seen = call(&mut a, inspect("k1")).await?;
    let (code, text) = match timeout {
        TimeoutIn::Lock => ("55P03", "lock timeout"),
        TimeoutIn::Statement => ("57014", "statement timeout"),
    };
    expect(failed_with(&waited, code, text), || {
        format!("the wait answered {:?}", waited.result)
    })?;
    // Margin: the timeout is 300 ms, the wait 30 s; anything under 10 s was ended by the
    // timeout, not by the wait bound.
    expect(took < Duration::from_secs(10), || {
        format!("the wait took {took:?}")
    })?;
    expect(held(&seen) == Some((Some(holder.into()), 1)), || {
        format!("inspect saw {:?}", seen.result)
    })?;
    Ok(vec![format!(
        "{fault} fired after {took:?} inside the wait: {code}, nothing changed"
    )])
}
