//! Checks that are a scripted situation: a few sessions make set calls around one fault,
//! so that the fault meets exactly the state it is about (a blocking acquire mid-wait, a
//! transaction holding a row lock, a COMMIT in flight, a lease expiring while the server
//! is down). Each situation's history is judged by the checker first, then its own
//! expectations are checked.

use super::rig::{Rig, Setup};
use super::{doctor, judge, Breakage, CheckFailure, CheckResult, Passed};
use crate::error::FaultError;
use crate::fault::Fault;
use crate::inject::{Reach, Victim};
use crate::server::Stop;
use harness::extension::ExtensionFiles;
use harness::pg::PgInstall;
use harness::recorder::Session;
use model::{Interval, NemesisEffect, Op, OpRecord, OpResult, Outcome, TxnEnd};
use std::future::Future;
use std::pin::Pin;
use std::time::{Duration, Instant};
use tokio_postgres::Client;

type Scenario<'a> = Pin<Box<dyn Future<Output = Result<Vec<String>, CheckFailure>> + Send + 'a>>;

/// What a scenario's expectations found wrong, when they did.
fn expect(ok: bool, what: impl FnOnce() -> String) -> Result<(), CheckFailure> {
    match ok {
        true => Ok(()),
        false => Err(CheckFailure::Unexpected(what())),
    }
}

/// A scripted situation (one function below each).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Script {
    /// `terminate`: a backend terminated idle in a transaction holding a grant, and mid-wait.
    Terminate,
    /// `cancel`: a blocking acquire mid-wait and a renew waiting for a row lock cancelled.
    Cancel,
    /// `timeout_in_wait`: a server-side timeout fires inside a blocking acquire's wait.
    TimeoutInWait(TimeoutIn),
    /// `client_pause`: the holder stops for twice its TTL.
    ClientPause,
    /// `short_ttl`: work longer than the lease, three times.
    ShortTtl,
    /// `downtime_expiry`: a lease expires while the server is down.
    DowntimeExpiry,
    /// `abort_after_acquire`: a transaction acquires, then rolls back.
    AbortAfterAcquire,
    /// `commit_crash`: the server crashes with two COMMITs in flight.
    CommitCrash,
    /// `wait_wake`: a release wakes a blocked waiter within the poll bound.
    WaitWake,
}

/// The timeout of [`Script::TimeoutInWait`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TimeoutIn {
    /// `statement_timeout` fires inside the acquire's own wait.
    Statement,
    /// `lock_timeout` fires while the acquire waits for an open transaction's row.
    Lock,
}

fn setup(script: Script) -> Setup {
    let options = |o: &str| Setup {
        session_options: Some(o.to_string()),
        ..Setup::default()
    };
    match script {
        Script::TimeoutInWait(TimeoutIn::Statement) => options("-c statement_timeout=300"),
        Script::TimeoutInWait(TimeoutIn::Lock) => options("-c lock_timeout=300"),
        Script::Terminate
        | Script::Cancel
        | Script::ClientPause
        | Script::ShortTtl
        | Script::DowntimeExpiry
        | Script::AbortAfterAcquire
        | Script::CommitCrash
        | Script::WaitWake => Setup::default(),
    }
}

pub(super) async fn run(
    fault: Fault,
    script: Script,
    install: &PgInstall,
    under_test: &ExtensionFiles,
    breakage: Option<Breakage>,
) -> CheckResult {
    let build = match breakage {
        Some(Breakage::Build(b)) => b.files(),
        _ => Some(under_test.clone()),
    };
    let Some(build) = build else {
        return Err(
            FaultError::not_injected(fault.name(), "the broken build no longer applies").into(),
        );
    };
    let rig = Rig::start(install, &build, &setup(script)).await?;
    let postgres = rig.postgres.clone();
    let played = scenario(script, fault, &rig).await;
    let history = rig.finish().await;
    let (mut history, evidence) = match (history, played) {
        (Ok(h), Ok(evidence)) => (h, evidence),
        // The history decides first when it shows a violation: a broken target may make
        // a later step of the situation impossible.
        (Ok(h), Err(CheckFailure::Unexpected(what))) => {
            judge(&h)?;
            return Err(CheckFailure::Unexpected(what));
        }
        (_, Err(e)) => return Err(e),
        (Err(e), _) => return Err(e.into()),
    };
    if let Some(Breakage::Doctored(d)) = breakage {
        if !doctor(&mut history, d) {
            return Err(FaultError::not_injected(
                fault.name(),
                "nothing for the doctored control to change",
            )
            .into());
        }
    }
    let verdict = judge(&history)?;
    Ok(Passed {
        fault,
        postgres,
        verdict,
        evidence,
        history: Some(history),
    })
}

/// `script` played on `rig`; `fault` names the nemesis events it records.
fn scenario<'a>(script: Script, fault: Fault, rig: &'a Rig) -> Scenario<'a> {
    match script {
        Script::Terminate => Box::pin(terminate(rig)),
        Script::Cancel => Box::pin(cancel(rig)),
        Script::TimeoutInWait(timeout) => Box::pin(timeout_in_wait(rig, fault, timeout)),
        Script::ClientPause => Box::pin(client_pause(rig, fault)),
        Script::ShortTtl => Box::pin(short_ttl(rig, fault)),
        Script::DowntimeExpiry => Box::pin(downtime_expiry(rig, fault)),
        Script::AbortAfterAcquire => Box::pin(abort_after_acquire(rig, fault)),
        Script::CommitCrash => Box::pin(commit_crash(rig, fault)),
        Script::WaitWake => Box::pin(wait_wake(rig, fault)),
    }
}

fn acquire(key: &str, owner: &str, ttl: Interval) -> Op<String, String> {
    Op::acquire(key.to_string(), owner.to_string(), ttl)
}

fn acquire_wait(key: &str, owner: &str, ttl: Interval, wait: Interval) -> Op<String, String> {
    Op::acquire_wait(key.to_string(), owner.to_string(), ttl, wait)
}

fn inspect(key: &str) -> Op<String, String> {
    Op::inspect(key.to_string())
}

/// The epoch of a grant.
fn granted(op: &OpRecord) -> Option<i64> {
    match op.result {
        OpResult::Ok(Outcome::Acquired { epoch, .. }) => Some(epoch),
        _ => None,
    }
}

/// The (owner, epoch) an inspect saw held, or `None`.
fn held(op: &OpRecord) -> Option<(Option<String>, i64)> {
    match &op.result {
        OpResult::Ok(Outcome::Inspected(Some(r))) if r.held => Some((r.owner.clone(), r.epoch)),
        _ => None,
    }
}

fn failed_with(op: &OpRecord, code: &str, text: &str) -> bool {
    matches!(&op.result, OpResult::Fail { sqlstate, message } if sqlstate == code && message.contains(text))
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

/// Records a nemesis event around `during` (a fault that is a situation: a timeout firing,
/// a pause, a rollback) with no direct effect on state.
async fn around<T>(
    reach: &Reach<'_>,
    fault: Fault,
    detail: &str,
    during: impl Future<Output = T>,
) -> Result<T, CheckFailure> {
    let started = reach.recorder.nemesis_start(fault.name());
    let out = during.await;
    reach
        .recorder
        .nemesis_end(started, NemesisEffect::None, detail)
        .map_err(FaultError::from)?;
    Ok(out)
}

const MINUTE: Interval = Interval::secs(60);

/// A transaction holding a fresh grant has its backend terminated: it is rolled back (the
/// lost COMMIT resolved through pg_xact_status), and another owner is granted the same
/// epoch. A blocking acquire terminated mid-wait is unknown and changes nothing.
async fn terminate(rig: &Rig) -> Result<Vec<String>, CheckFailure> {
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
async fn cancel(rig: &Rig) -> Result<Vec<String>, CheckFailure> {
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
async fn timeout_in_wait(
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

/// The holder stops for twice its TTL: its renew then answers `lapsed`, another owner
/// takes the key over with a greater epoch, and the holder's renew and release answer
/// `not_owner`.
async fn client_pause(rig: &Rig, fault: Fault) -> Result<Vec<String>, CheckFailure> {
    let reach = rig.reach();
    let (mut a, mut b) = (rig.recorder.session(), rig.recorder.session());
    let ttl = Interval::millis(300);
    let first = call(&mut a, acquire("k1", "paused", ttl)).await?;
    let epoch = granted(&first).unwrap_or(1);
    // Twice the TTL: the margin covers scheduling delays of the server's clock reads.
    around(
        &reach,
        fault,
        "the holder makes no call for 600 ms (TTL 300 ms)",
        tokio::time::sleep(Duration::from_millis(600)),
    )
    .await?;
    let late = call(&mut a, Op::renew("k1".into(), "paused".into(), epoch, ttl)).await?;
    let taken = call(&mut b, acquire("k1", "taker", MINUTE)).await?;
    let renew = call(&mut a, Op::renew("k1".into(), "paused".into(), epoch, ttl)).await?;
    let release = call(&mut a, Op::release("k1".into(), "paused".into(), epoch)).await?;
    expect(late.result == OpResult::Ok(Outcome::Lapsed), || {
        format!("the paused holder's renew answered {:?}", late.result)
    })?;
    expect(granted(&taken) == Some(epoch + 1), || {
        format!("the takeover answered {:?}", taken.result)
    })?;
    for r in [&renew, &release] {
        expect(r.result == OpResult::Ok(Outcome::NotOwner), || {
            format!("the deposed holder got {:?}", r.result)
        })?;
    }
    Ok(vec![format!("paused 600 ms holding a 300 ms lease: renew lapsed, taken over at epoch {}, then not_owner", epoch + 1)])
}

/// A worker whose TTL (40 ms) is shorter than its work (150 ms): each renew answers
/// `lapsed` and each new acquire gets a greater epoch: a liveness event, never a safety one.
async fn short_ttl(rig: &Rig, fault: Fault) -> Result<Vec<String>, CheckFailure> {
    let reach = rig.reach();
    let mut w = rig.recorder.session();
    let ttl = Interval::millis(40);
    let mut epochs = Vec::new();
    for _ in 0..3 {
        let got = call(&mut w, acquire("k1", "worker", ttl)).await?;
        let epoch = granted(&got).ok_or_else(|| {
            CheckFailure::Unexpected(format!("acquire of a lapsed key answered {:?}", got.result))
        })?;
        epochs.push(epoch);
        around(
            &reach,
            fault,
            "150 ms of work under a 40 ms lease",
            tokio::time::sleep(Duration::from_millis(150)),
        )
        .await?;
        let renewed = call(&mut w, Op::renew("k1".into(), "worker".into(), epoch, ttl)).await?;
        expect(renewed.result == OpResult::Ok(Outcome::Lapsed), || {
            format!(
                "a renew after the lease ran out answered {:?}",
                renewed.result
            )
        })?;
    }
    expect(epochs.windows(2).all(|p| p[1] > p[0]), || {
        format!("re-acquired epochs {epochs:?} do not grow")
    })?;
    Ok(vec![format!(
        "3 lapses mid-work, each renew lapsed, epochs {epochs:?}"
    )])
}

/// A lease of 1.5 s expires while the server is down (fast shutdown, 1.8 s down): on first
/// access after the restart it is lapsed (the holder's renew), and it is taken over.
async fn downtime_expiry(rig: &Rig, fault: Fault) -> Result<Vec<String>, CheckFailure> {
    let reach = rig.reach();
    let (mut a, mut b) = (rig.recorder.session(), rig.recorder.session());
    let ttl = Interval::millis(1_500);
    let first = call(&mut a, acquire("k1", "holder", ttl)).await?;
    let (epoch, expires) = match first.result {
        OpResult::Ok(Outcome::Acquired { epoch, expires_at }) => (epoch, expires_at),
        ref other => {
            return Err(CheckFailure::Unexpected(format!(
                "the first grant answered {other:?}"
            )))
        }
    };
    let restarted = reach
        .restart(fault, Stop::Fast, Duration::from_millis(1_800))
        .await?;
    if !(restarted.down.t0() < expires && expires <= restarted.down.t1()) {
        return Err(FaultError::not_injected(
            fault.name(),
            format!(
                "the lease's expiry {expires:?} is not inside the downtime {:?}",
                restarted.down
            ),
        )
        .into());
    }
    let renewed = call(&mut a, Op::renew("k1".into(), "holder".into(), epoch, ttl)).await?;
    let taken = call(&mut b, acquire("k1", "taker", MINUTE)).await?;
    expect(renewed.result == OpResult::Ok(Outcome::Lapsed), || {
        format!(
            "the first access after the downtime (renew) answered {:?}",
            renewed.result
        )
    })?;
    expect(granted(&taken) == Some(epoch + 1), || {
        format!("the takeover answered {:?}", taken.result)
    })?;
    Ok(vec![format!(
        "expiry fell inside {} ms of downtime; first access: renew lapsed, takeover at epoch {}",
        (restarted.down.t1().0 - restarted.down.t0().0) / 1_000,
        epoch + 1
    )])
}

/// A transaction acquires, then rolls back (by ROLLBACK, and by an error that aborts it):
/// no effect; the next owner is granted the same epoch, the other key stays never leased.
async fn abort_after_acquire(rig: &Rig, fault: Fault) -> Result<Vec<String>, CheckFailure> {
    let reach = rig.reach();
    let (mut a, mut b) = (rig.recorder.session(), rig.recorder.session());
    a.begin(model::Isolation::ReadCommitted)
        .await
        .map_err(FaultError::from)?;
    let rolled = call(&mut a, acquire("k1", "aborter", MINUTE)).await?;
    around(&reach, fault, "ROLLBACK after a grant", a.rollback())
        .await?
        .map_err(FaultError::from)?;
    let next = call(&mut b, acquire("k1", "next", MINUTE)).await?;
    a.begin(model::Isolation::ReadCommitted)
        .await
        .map_err(FaultError::from)?;
    call(&mut a, acquire("k2", "aborter", MINUTE)).await?;
    let invalid = around(
        &reach,
        fault,
        "an invalid call aborts the transaction",
        call(&mut a, acquire("", "aborter", MINUTE)),
    )
    .await??;
    let k2 = call(&mut b, inspect("k2")).await?;
    expect(granted(&next) == granted(&rolled), || {
        format!(
            "after the rollback the next grant was {:?}, the rolled-back one {:?}",
            next.result, rolled.result
        )
    })?;
    expect(
        matches!(&invalid.result, OpResult::Fail { sqlstate, .. } if sqlstate == "22023"),
        || format!("the invalid call answered {:?}", invalid.result),
    )?;
    expect(a.txn().is_none(), || {
        "the aborted transaction is still open".into()
    })?;
    expect(k2.result == OpResult::Ok(Outcome::Inspected(None)), || {
        format!("the aborted grant's key shows {:?}", k2.result)
    })?;
    Ok(vec!["rolled back a grant: the next owner got the same epoch; an error-aborted grant left its key never leased".into()])
}

/// Two COMMITs are in flight when the server is killed: one already committed locally (it
/// waits for a synchronous standby that does not exist), one not yet (a test trigger
/// sleeps at commit time). The recorder resolves both through pg_xact_status after the
/// restart: committed and rolled back; the keys show it.
async fn commit_crash(rig: &Rig, fault: Fault) -> Result<Vec<String>, CheckFailure> {
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
async fn wait_wake(rig: &Rig, fault: Fault) -> Result<Vec<String>, CheckFailure> {
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
