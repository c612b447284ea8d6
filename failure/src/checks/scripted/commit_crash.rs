//! The one situation no plan step can make yet: COMMITs in flight at a crash, one trapped
//! after its local commit (waiting for a synchronous standby that does not exist) and one
//! before its commit record (a test trigger sleeping at commit time).

use super::super::rig::Rig;
use super::CheckFailure;
use crate::error::FaultError;
use crate::fault::Fault;
use crate::server::Stop;
use harness::recorder::Session;
use model::{Interval, Op, OpRecord, OpResult, Outcome, TxnEnd};
use std::time::{Duration, Instant};
use tokio_postgres::Client;

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

/// What a scenario's expectations found wrong, when they did.
fn expect(ok: bool, what: impl FnOnce() -> String) -> Result<(), CheckFailure> {
    match ok {
        true => Ok(()),
        false => Err(CheckFailure::Unexpected(what())),
    }
}

fn acquire(key: &str, owner: &str, ttl: Interval) -> Op<String, String> {
    Op::acquire(key.to_string(), owner.to_string(), ttl)
}

fn inspect(key: &str) -> Op<String, String> {
    Op::inspect(key.to_string())
}

/// The (owner, epoch) an inspect saw held, or `None`.
fn held(op: &OpRecord) -> Option<(Option<String>, i64)> {
    match &op.result {
        OpResult::Ok(Outcome::Inspected(Some(r))) if r.held => Some((r.owner.clone(), r.epoch)),
        _ => None,
    }
}

async fn call(s: &mut Session, op: Op<String, String>) -> Result<OpRecord, CheckFailure> {
    s.call(&op).await.map_err(|e| FaultError::from(e).into())
}

async fn connected_pid(s: &mut Session) -> Result<i32, CheckFailure> {
    s.connect().await.map_err(FaultError::from)?;
    s.backend_pid()
        .ok_or_else(|| FaultError::Task("a connected session has no backend pid".into()).into())
}

/// Waits (at most 10 s) until backend `pid` runs a statement that waits on `event`.
async fn waiting(admin: &Client, pid: i32, event: &str) -> Result<(), FaultError> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let row = admin
            .query_opt(
                "SELECT 1 FROM pg_stat_activity WHERE pid = $1 AND state = 'active' AND wait_event = $2",
                &[&pid, &event],
            )
            .await
            .map_err(FaultError::db("watching a backend"))?;
        if row.is_some() {
            return Ok(());
        }
        if Instant::now() >= deadline {
            return Err(never_waited(admin, pid, event).await);
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Why backend `pid` did not reach its wait on `event` within the bound: the target's
/// doing when the server shows the statement ended without that wait, or kept running
/// the target's code, or waits for something else (the shipped build reaches the wait in
/// milliseconds); no verdict when the server cannot say, or the backend waits for I/O.
async fn never_waited(admin: &Client, pid: i32, event: &str) -> FaultError {
    let hang = FaultError::Hang {
        what: "a backend reaching its wait",
        seconds: 10,
    };
    match harness::liveness::backend(admin, pid, Duration::from_secs(5)).await {
        Some(b) if !b.shown.contains("wait event IO:") => FaultError::Prevented {
            what: "a backend reaching its wait",
            detail: format!(
                "backend {pid} never waited on {event} within 10 s ({}); the build's calls \
                 kept the situation from arising",
                b.shown
            ),
        },
        _ => hang,
    }
}

const MINUTE: Interval = Interval::secs(60);
