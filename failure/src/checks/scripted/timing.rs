//! The situations no plan step can make yet: COMMITs in flight at a crash, and a release
//! waking a blocked waiter within the poll bound.

use super::*;

/// Two COMMITs are in flight when the server is killed: one already committed locally (it
/// waits for a synchronous standby that does not exist), one not yet (a test trigger
/// sleeps at commit time). The recorder resolves both through pg_xact_status after the
/// restart: committed and rolled back; the keys show it.
pub(super) async fn commit_crash(rig: &Rig, fault: Fault) -> Result<Vec<String>, CheckFailure> {
    let reach = rig.reach();
    let admin = reach.admin().await?;
    // ALTER SYSTEM runs outside any transaction: one statement per round trip. The trap
    // is created before commits wait for the missing standby (its own commit would).
    let table = harness::extension::lease_table(&admin)
        .await
        .map_err(FaultError::db("finding the lease table"))?;
    for sql in [
        "CREATE FUNCTION public.nemesis_slow_commit() RETURNS trigger LANGUAGE plpgsql AS \
         $$ BEGIN IF NEW.owner = 'slow-committer' THEN PERFORM pg_sleep(60); END IF; RETURN NULL; END $$".to_string(),
        format!("CREATE CONSTRAINT TRIGGER nemesis_slow_commit AFTER INSERT OR UPDATE ON {table} \
         DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION public.nemesis_slow_commit()"),
        "ALTER SYSTEM SET synchronous_standby_names = 'nemesis_nobody'".to_string(),
        "SELECT pg_reload_conf()".to_string(),
    ] {
        admin
            .batch_execute(&sql)
            .await
            .map_err(FaultError::db("preparing the commit traps"))?;
    }
    let (mut a, mut b, mut c) = (
        rig.recorder.session(),
        rig.recorder.session(),
        rig.recorder.session(),
    );
    for (s, key, owner) in [
        (&mut a, "k1", "committer"),
        (&mut b, "k2", "slow-committer"),
    ] {
        s.begin(model::Isolation::ReadCommitted)
            .await
            .map_err(FaultError::from)?;
        call(s, acquire(key, owner, MINUTE)).await?;
    }
    let (a_pid, b_pid) = (connected_pid(&mut a).await?, connected_pid(&mut b).await?);
    let (a_end, b_end, crashed) = tokio::join!(a.commit(), b.commit(), async {
        waiting(&admin, a_pid, "SyncRep").await?;
        waiting(&admin, b_pid, "PgSleep").await?;
        // Takes effect at the restart: no new commit waits for the standby.
        admin
            .batch_execute("ALTER SYSTEM RESET synchronous_standby_names")
            .await
            .map_err(FaultError::db("resetting synchronous_standby_names"))?;
        reach
            .restart(fault, Stop::Crash, Duration::from_millis(200))
            .await
    });
    let (a_end, b_end) = (
        a_end.map_err(FaultError::from)?,
        b_end.map_err(FaultError::from)?,
    );
    crashed?;
    reach
        .admin()
        .await?
        .batch_execute(&format!(
            "DROP TRIGGER nemesis_slow_commit ON {table}; \
             DROP FUNCTION public.nemesis_slow_commit()"
        ))
        .await
        .map_err(FaultError::db("removing the commit trap"))?;
    let k1 = call(&mut c, inspect("k1")).await?;
    let k2 = call(&mut c, inspect("k2")).await?;
    expect(a_end == TxnEnd::Commit, || {
        format!("the COMMIT that had committed locally was resolved {a_end:?}")
    })?;
    expect(b_end == TxnEnd::Rollback, || {
        format!("the COMMIT the crash cut short was resolved {b_end:?}")
    })?;
    expect(held(&k1) == Some((Some("committer".into()), 1)), || {
        format!("k1 shows {:?}", k1.result)
    })?;
    expect(k2.result == OpResult::Ok(Outcome::Inspected(None)), || {
        format!("k2 shows {:?}", k2.result)
    })?;
    Ok(vec![
        "COMMIT lost in the crash after its local commit: resolved committed through pg_xact_status".into(),
        "COMMIT lost in the crash before its commit record: resolved rolled back through pg_xact_status".into(),
    ])
}

/// The poll bound of a blocking acquire (pg_lease sleeps at most 50 ms between probes),
/// plus a margin for scheduling on a loaded 2-core machine: a waiter that failed to wake
/// would sleep on toward its 10 s wait (or, slept 2 s per probe, show 0.5-2 s).
const WAKE_BOUND: Duration = Duration::from_millis(50 + 200);

/// A release wakes a blocked waiter within the poll bound (three rounds): the waiter's
/// grant instant (its expiry minus its TTL) is at most [`WAKE_BOUND`] after the release's
/// first server instant.
pub(super) async fn wait_wake(rig: &Rig, fault: Fault) -> Result<Vec<String>, CheckFailure> {
    let reach = rig.reach();
    let admin = reach.admin().await?;
    let (mut a, mut b) = (rig.recorder.session(), rig.recorder.session());
    let mut latencies = Vec::new();
    for round in 0..3 {
        let key = format!("k{round}");
        let first = call(&mut a, acquire(&key, "holder", MINUTE)).await?;
        let epoch = granted(&first).unwrap_or(1);
        let b_pid = connected_pid(&mut b).await?;
        let (woke, released) = tokio::join!(
            call(
                &mut b,
                acquire_wait(&key, "waiter", MINUTE, Interval::secs(10))
            ),
            async {
                waiting(&admin, b_pid, "PgSleep").await?;
                around(
                    &reach,
                    fault,
                    "release while a waiter blocks",
                    call(&mut a, Op::release(key.clone(), "holder".into(), epoch)),
                )
                .await?
            }
        );
        let (woke, released) = (woke?, released?);
        let grant_at = match woke.result {
            OpResult::Ok(Outcome::Acquired { expires_at, .. }) => expires_at.plus(-MINUTE.micros),
            ref other => {
                return Err(CheckFailure::Unexpected(format!(
                    "the waiter woke with {other:?}"
                )))
            }
        };
        let Some(release_at) = released.server.map(|s| s.t0()) else {
            return Err(CheckFailure::Unexpected(format!(
                "the release answered {:?}",
                released.result
            )));
        };
        latencies.push(Duration::from_micros(
            (grant_at.0 - release_at.0).max(0) as u64
        ));
    }
    let worst = latencies.iter().max().copied().unwrap_or_default();
    expect(worst <= WAKE_BOUND, || {
        format!("a waiter woke {worst:?} after the release (bound {WAKE_BOUND:?}: 50 ms poll + 200 ms margin)")
    })?;
    Ok(vec![format!(
        "woke after {latencies:?} of server time (bound {WAKE_BOUND:?})"
    )])
}
