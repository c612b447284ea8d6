//! Lease calls inside the caller's own statements (SEMANTICS section 8, "Calls inside
//! statements"): in a trigger of the caller's, in CTEs (several calls of one key in one
//! statement, a data-modifying CTE), and behind cursors. Each call is a call of its own,
//! made when PostgreSQL evaluates it and judged by the model ([`model::Spec::CORRECT`]) as
//! if the calls had been made one after another in that order; it joins the statement, so
//! a statement that fails undoes it.
use super::txn_shapes::{promptly, PROMPT};
use super::*;
use crate::client::{Acquire, Status};
use model::{Interval, Op, Outcome, Span, Spec, Store, Ts};

const HOUR: Duration = Duration::from_secs(3600);

/// The ttl every call here passes (`interval '1 hour'`), as the model reads it.
const MODEL_HOUR: Interval = Interval {
    months: 0,
    days: 0,
    micros: 3_600_000_000,
};

/// An acquire's answer from its three columns, or a finding (pg_lease never answers
/// another shape).
fn answer(
    acquired: Option<bool>,
    epoch: Option<i64>,
    expires_at: Option<DateTime<Utc>>,
) -> Result<Acquire, Failure> {
    match (acquired, epoch, expires_at) {
        (Some(true), Some(epoch), Some(expires_at)) => Ok(Acquire::Acquired { epoch, expires_at }),
        (Some(false), None, None) => Ok(Acquire::Denied),
        other => violated!("lease.acquire answered {other:?}"),
    }
}

/// All orders of `0..n` (n is at most 3 here).
fn orders(n: usize) -> Vec<Vec<usize>> {
    if n == 0 {
        return vec![vec![]];
    }
    let mut out = Vec::new();
    for rest in orders(n - 1) {
        for at in 0..=rest.len() {
            let mut o = rest.clone();
            o.insert(at, n - 1);
            out.push(o);
        }
    }
    out
}

/// Whether the model allows these answers of non-blocking acquires (ttl one hour) on
/// never-leased keys, all taking effect within `span`, made one after another in the given
/// order (`any_order`: in some order, when PostgreSQL decides it). The model's reasons when
/// it does not.
fn model_allows(
    calls: &[(&str, &str, Acquire)],
    span: Span,
    any_order: bool,
) -> Result<(), String> {
    let candidates = if any_order {
        orders(calls.len())
    } else {
        vec![(0..calls.len()).collect()]
    };
    let mut why = Vec::new();
    'order: for order in candidates {
        let mut stores = vec![Store::<String, String>::new()];
        for &i in &order {
            let (key, owner, answer) = &calls[i];
            let op = Op::acquire(key.to_string(), owner.to_string(), MODEL_HOUR);
            let observed: Outcome<String> = match answer {
                Acquire::Acquired { epoch, expires_at } => Outcome::Acquired {
                    epoch: *epoch,
                    expires_at: Ts(expires_at.timestamp_micros()),
                },
                Acquire::Denied => Outcome::Denied,
            };
            let mut next = Vec::new();
            for store in &stores {
                match Spec::CORRECT.check(store, &op, span, &observed) {
                    Ok(s) => next.extend(s),
                    Err(m) => why.push(format!("call {i} in the order {order:?}: {m}")),
                }
            }
            if next.is_empty() {
                continue 'order;
            }
            stores = next;
        }
        return Ok(());
    }
    Err(why.join("; "))
}

/// The server's clock as the model reads it.
async fn now(c: &Client) -> Result<Ts, Failure> {
    Ok(Ts(crate::client::server_now(c).await?.timestamp_micros()))
}

fn span(t0: Ts, t1: Ts) -> Result<Span, Failure> {
    Span::new(t0, t1).map_err(|e| Failure::Infrastructure(format!("server clock: {e}")))
}

/// Lease calls in the caller's own row triggers: a BEFORE row trigger that acquires the
/// row's key for the row's owner answers, row after row, what the model answers for those
/// calls in that order (a same-owner second call is the idempotent reacquire: same epoch,
/// same expiry; another owner's is denied); an AFTER row trigger's grant is undone when the
/// statement fails later (and keeps no lock), and kept when it commits.
pub(super) async fn lease_calls_in_the_callers_triggers_are_calls_of_the_statement(
    ctx: &Ctx<'_>,
) -> CheckResult {
    let f = Fixture::create(ctx.cluster, ctx.extension).await?;
    let result = triggers(&f).await;
    finish(f, result).await
}

/// Lease calls in CTEs: two calls of one key in one statement's CTEs answer what the model
/// answers for them in some order (PostgreSQL chooses it); a data-modifying CTE that writes
/// the grant's epoch commits with it, and one that fails undoes it (and keeps no lock); a
/// CTE the statement never reads is never called (PostgreSQL evaluates a SELECT in WITH only
/// as far as the statement reads it).
pub(super) async fn lease_calls_in_ctes_are_calls_of_the_statement(ctx: &Ctx<'_>) -> CheckResult {
    let f = Fixture::create(ctx.cluster, ctx.extension).await?;
    let result = ctes(&f).await;
    finish(f, result).await
}

async fn triggers(f: &Fixture<'_>) -> CheckResult {
    let a = f.connect_as(&f.user).await?;
    let b = f.connect_as(&f.user).await?;
    a.batch_execute(
        "CREATE TEMP TABLE jobs (n int, key text, owner text, acquired boolean, epoch bigint, \
                                 expires_at timestamptz); \
         CREATE FUNCTION pg_temp.take_lease() RETURNS trigger LANGUAGE plpgsql AS $f$ \
         BEGIN \
             SELECT l.acquired, l.epoch, l.expires_at INTO NEW.acquired, NEW.epoch, NEW.expires_at \
               FROM lease.acquire(NEW.key, NEW.owner, interval '1 hour') AS l; \
             RETURN NEW; \
         END $f$; \
         CREATE TRIGGER take_lease BEFORE INSERT ON jobs \
             FOR EACH ROW EXECUTE FUNCTION pg_temp.take_lease(); \
         CREATE TEMP TABLE jobs_after (key text, owner text); \
         CREATE FUNCTION pg_temp.take_then_check() RETURNS trigger LANGUAGE plpgsql AS $f$ \
         BEGIN \
             PERFORM lease.acquire(NEW.key, NEW.owner, interval '1 hour'); \
             IF NEW.owner = 'boom' THEN \
                 RAISE EXCEPTION 'the caller''s own trigger fails'; \
             END IF; \
             RETURN NULL; \
         END $f$; \
         CREATE TRIGGER take_then_check AFTER INSERT ON jobs_after \
             FOR EACH ROW EXECUTE FUNCTION pg_temp.take_then_check()",
    )
    .await?;

    // A BEFORE row trigger: three rows of one key, in VALUES order.
    let t0 = now(&a).await?;
    a.batch_execute(
        "INSERT INTO jobs (n, key, owner) VALUES (1, 'tr', 'alice'), (2, 'tr', 'alice'), (3, 'tr', 'bob')",
    )
    .await?;
    let t1 = now(&a).await?;
    let rows = a
        .query(
            "SELECT acquired, epoch, expires_at FROM jobs ORDER BY n",
            &[],
        )
        .await?;
    let owners = ["alice", "alice", "bob"];
    if rows.len() != owners.len() {
        infra!("the INSERT of three rows left {} rows", rows.len());
    }
    let mut calls = Vec::new();
    for (row, owner) in rows.iter().zip(owners) {
        calls.push((
            "tr",
            owner,
            answer(row.try_get(0)?, row.try_get(1)?, row.try_get(2)?)?,
        ));
    }
    if let Err(why) = model_allows(&calls, span(t0, t1)?, false) {
        violated!("a BEFORE INSERT row trigger acquiring each row's key (alice, alice, bob on one key) answered {calls:?}, which the model does not allow: {why}");
    }

    // An AFTER row trigger whose statement fails after the grant.
    let failed = a
        .batch_execute(
            "INSERT INTO jobs_after VALUES ('tr_after', 'alice'), ('tr_after_2', 'boom')",
        )
        .await;
    if failed.is_ok() {
        infra!("the INSERT whose AFTER trigger raises succeeded");
    }
    let seen = crate::client::inspect(&a, "tr_after").await?;
    let other = promptly(
        &b,
        crate::client::acquire(&b, "tr_after", "bob", HOUR, Duration::ZERO),
    )
    .await?;
    if seen.is_some() || !matches!(other, Ok(Acquire::Acquired { epoch: 1, .. })) {
        violated!("an AFTER INSERT trigger acquired tr_after for alice and the statement failed after it: inspect then showed {seen:?} and bob's wait = 0 acquire gave {other:?} within {PROMPT}; expected no row and a first grant (the failed statement undoes its trigger's call and keeps no lock)");
    }
    a.batch_execute("INSERT INTO jobs_after VALUES ('tr_after_3', 'alice')")
        .await?;
    let kept = crate::client::inspect(&b, "tr_after_3").await?;
    if !matches!(&kept, Some(r) if r.held && r.epoch == 1 && r.owner.as_deref() == Some("alice")) {
        violated!("an AFTER INSERT trigger's grant of a committed statement: inspect from another session shows {kept:?}; expected alice holding epoch 1");
    }

    Ok(())
}

async fn ctes(f: &Fixture<'_>) -> CheckResult {
    let a = f.connect_as(&f.user).await?;
    let b = f.connect_as(&f.user).await?;
    a.batch_execute("CREATE TEMP TABLE fenced (epoch bigint PRIMARY KEY)")
        .await?;

    // Two calls of one key in one statement's CTEs, same owner and two owners.
    for (key, owners) in [
        ("cte_same", ["alice", "alice"]),
        ("cte_two", ["alice", "bob"]),
    ] {
        let t0 = now(&a).await?;
        let row = a
            .query_one(
                "WITH x AS (SELECT * FROM lease.acquire($1::text, $2::text, interval '1 hour')), \
                      y AS (SELECT * FROM lease.acquire($1::text, $3::text, interval '1 hour')) \
                 SELECT x.acquired, x.epoch, x.expires_at, y.acquired, y.epoch, y.expires_at \
                   FROM x, y",
                &[&key, &owners[0], &owners[1]],
            )
            .await?;
        let t1 = now(&a).await?;
        let calls = [
            (
                key,
                owners[0],
                answer(row.try_get(0)?, row.try_get(1)?, row.try_get(2)?)?,
            ),
            (
                key,
                owners[1],
                answer(row.try_get(3)?, row.try_get(4)?, row.try_get(5)?)?,
            ),
        ];
        if let Err(why) = model_allows(&calls, span(t0, t1)?, true) {
            violated!("two CTEs of one statement acquiring {key} for {owners:?} answered {calls:?}, which the model does not allow in either order: {why}");
        }
    }

    // A data-modifying CTE that records the grant's epoch, then one that fails.
    let recorded: i64 = a
        .query_one(
            "WITH g AS (SELECT * FROM lease.acquire('cte_dml', 'alice', interval '1 hour')), \
                  w AS (INSERT INTO fenced SELECT g.epoch FROM g RETURNING epoch) \
             SELECT epoch FROM w",
            &[],
        )
        .await?
        .try_get(0)?;
    let kept = crate::client::inspect(&b, "cte_dml").await?;
    if recorded != 1 || !matches!(&kept, Some(r) if r.held && r.epoch == 1) {
        violated!("a data-modifying CTE recorded epoch {recorded} of its statement's grant and another session sees {kept:?}; expected epoch 1 held by alice");
    }
    let failed = a
        .query(
            "WITH g AS (SELECT * FROM lease.acquire('cte_fail', 'alice', interval '1 hour')), \
                  w AS (INSERT INTO fenced SELECT g.epoch FROM g RETURNING epoch) \
             SELECT epoch FROM w",
            &[],
        )
        .await;
    if !matches!(&failed, Err(e) if e.code() == Some(&SqlState::UNIQUE_VIOLATION)) {
        infra!(
            "the data-modifying CTE inserting a recorded epoch again gave {failed:?}, not 23505"
        );
    }
    let seen = crate::client::inspect(&a, "cte_fail").await?;
    let other = promptly(
        &b,
        crate::client::acquire(&b, "cte_fail", "bob", HOUR, Duration::ZERO),
    )
    .await?;
    if seen.is_some() || !matches!(other, Ok(Acquire::Acquired { epoch: 1, .. })) {
        violated!("a statement whose data-modifying CTE failed (23505) after its grant of cte_fail: inspect then showed {seen:?} and bob's wait = 0 acquire gave {other:?} within {PROMPT}; expected no row and a first grant");
    }

    // A CTE the statement never reads.
    a.batch_execute(
        "WITH g AS (SELECT * FROM lease.acquire('cte_unread', 'alice', interval '1 hour')) SELECT 1",
    )
    .await?;
    let seen = crate::client::inspect(&a, "cte_unread").await?;
    if seen.is_some() {
        violated!("a CTE the statement never reads made its acquire: inspect shows {seen:?}");
    }
    Ok(())
}

/// Cursors over the API: the call behind a cursor is made when the cursor is first fetched
/// (not at DECLARE: another session takes the key in between, at once, and the cursor's
/// acquire is then denied), never when a cursor is closed unread; a WITH HOLD cursor's call
/// is made and committed by the COMMIT that materializes it; a cursor over inspect of two
/// keys, fetched one row at a time, shows for each key the state at its fetch, after a
/// release another session committed after DECLARE (each call reads afresh, the cursor's
/// snapshot from DECLARE does not apply to it).
pub(super) async fn cursors_over_the_api_call_when_fetched(ctx: &Ctx<'_>) -> CheckResult {
    let f = Fixture::create(ctx.cluster, ctx.extension).await?;
    let result = cursors(&f).await;
    finish(f, result).await
}

async fn fetch_acquire(c: &Client, cursor: &str) -> Result<Acquire, Failure> {
    let rows = c.query(&format!("FETCH ALL FROM {cursor}"), &[]).await?;
    let [row] = &rows[..] else {
        violated!(
            "FETCH ALL from a cursor over lease.acquire gave {} rows",
            rows.len()
        );
    };
    answer(row.try_get(0)?, row.try_get(1)?, row.try_get(2)?)
}

async fn cursors(f: &Fixture<'_>) -> CheckResult {
    let a = f.connect_as(&f.user).await?;
    let b = f.connect_as(&f.user).await?;

    // The acquire behind a cursor runs at FETCH.
    a.batch_execute(
        "BEGIN; DECLARE cur_acq CURSOR FOR \
         SELECT acquired, epoch, expires_at FROM lease.acquire('cur_acq', 'alice', interval '1 hour')",
    )
    .await?;
    let bob = promptly(
        &b,
        crate::client::acquire(&b, "cur_acq", "bob", HOUR, Duration::ZERO),
    )
    .await?;
    if !matches!(bob, Ok(Acquire::Acquired { epoch: 1, .. })) {
        let _ = a.batch_execute("ROLLBACK").await;
        violated!("after alice DECLAREd a cursor over her acquire of cur_acq (not fetched), bob's wait = 0 acquire gave {bob:?} within {PROMPT}; expected a first grant: the call ran at DECLARE");
    }
    let alice = fetch_acquire(&a, "cur_acq").await?;
    a.batch_execute("COMMIT").await?;
    if alice != Acquire::Denied {
        violated!("alice's acquire of cur_acq fetched from her cursor after bob's committed grant answered {alice:?}; expected denied (the call is made at its fetch)");
    }

    // A cursor closed unread makes no call.
    a.batch_execute(
        "BEGIN; DECLARE cur_unread CURSOR FOR \
         SELECT acquired, epoch, expires_at FROM lease.acquire('cur_unread', 'alice', interval '1 hour'); \
         COMMIT",
    )
    .await?;
    let seen = crate::client::inspect(&b, "cur_unread").await?;
    if seen.is_some() {
        violated!("a cursor over an acquire, never fetched, closed by COMMIT: inspect shows {seen:?}; expected no row");
    }

    // A WITH HOLD cursor: the COMMIT that materializes it makes the call and commits it.
    a.batch_execute(
        "BEGIN; DECLARE cur_hold CURSOR WITH HOLD FOR \
         SELECT acquired, epoch, expires_at FROM lease.acquire('cur_hold', 'alice', interval '1 hour'); \
         COMMIT",
    )
    .await?;
    let held = crate::client::inspect(&b, "cur_hold").await?;
    let bob = promptly(
        &b,
        crate::client::acquire(&b, "cur_hold", "bob", HOUR, Duration::ZERO),
    )
    .await?;
    let alice = fetch_acquire(&a, "cur_hold").await?;
    a.batch_execute("CLOSE cur_hold").await?;
    if !matches!(&held, Some(r) if r.held && r.epoch == 1 && r.owner.as_deref() == Some("alice"))
        || !matches!(alice, Acquire::Acquired { epoch: 1, .. })
        || !matches!(bob, Ok(Acquire::Denied))
    {
        violated!("a WITH HOLD cursor over alice's acquire of cur_hold, committed: another session's inspect showed {held:?}, bob's wait = 0 acquire gave {bob:?} within {PROMPT}, the cursor then fetched {alice:?}; expected alice's grant at epoch 1, committed, and bob denied");
    }

    // A cursor over inspect of two keys, fetched a row at a time around releases.
    let mut epochs = Vec::new();
    for key in ["cur_a", "cur_b"] {
        match crate::client::acquire(&b, key, "alice", HOUR, Duration::ZERO).await? {
            Acquire::Acquired { epoch, .. } => epochs.push(epoch),
            Acquire::Denied => infra!("the first acquire of {key} was denied"),
        }
    }
    a.batch_execute(
        "BEGIN; DECLARE cur_inspect CURSOR FOR \
         SELECT k, i.held, i.epoch FROM unnest(ARRAY['cur_a', 'cur_b']) AS k, \
                LATERAL lease.inspect(k) AS i",
    )
    .await?;
    let mut seen = Vec::new();
    for (key, epoch) in ["cur_a", "cur_b"].into_iter().zip(epochs) {
        let released = crate::client::release(&b, key, "alice", epoch).await?;
        if released != Status::Ok {
            let _ = a.batch_execute("ROLLBACK").await;
            infra!("alice's release of {key} answered {released:?}");
        }
        let rows = a.query("FETCH 1 FROM cur_inspect", &[]).await?;
        let [row] = &rows[..] else {
            let _ = a.batch_execute("ROLLBACK").await;
            violated!(
                "FETCH 1 from the cursor over inspect gave {} rows",
                rows.len()
            );
        };
        let row: (String, bool, i64) = (row.try_get(0)?, row.try_get(1)?, row.try_get(2)?);
        if row != (key.to_string(), false, epoch + 1) {
            seen.push(format!(
                "{row:?} (expected {key} free at epoch {})",
                epoch + 1
            ));
        }
    }
    a.batch_execute("COMMIT").await?;
    if !seen.is_empty() {
        violated!("a cursor over lease.inspect, DECLAREd before releases another session committed and fetched a row after each, answered from before the release: {}", seen.join(", "));
    }
    Ok(())
}
