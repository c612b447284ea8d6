//! Liveness and promptness: every call answers on every state of its key within its bound
//! ([`crate::liveness`]), and a blocking acquire ends its wait at its deadline, or takes
//! the key over at the holder's expiry, within a margin measured on a correct build.

use super::{e, infra, pg, CheckResult, Ctx, Failure, MS, S};
use crate::client::{Acquire, LeaseError};
use crate::liveness::{no_answer, CALL_BOUND};
use std::future::Future;
use std::time::Duration;
use tokio_postgres::Client;

/// A connection under test and what the harness needs to judge a call on it that does
/// not answer: its backend and cancel token, and a connection of its own to ask with.
pub(super) struct Watched {
    pub(super) c: Client,
    admin: Client,
    pid: i32,
    cancel: tokio_postgres::CancelToken,
}

impl Watched {
    /// A connection to `db` under the check's settings, and a watcher beside it.
    pub(super) async fn open(ctx: &Ctx<'_>, db: &str) -> Result<Watched, Failure> {
        let c = ctx.connect(db).await?;
        let admin = ctx.cluster.connect(db).await.map_err(infra)?;
        let pid: i32 = c
            .query_one("SELECT pg_catalog.pg_backend_pid()", &[])
            .await
            .map_err(pg)?
            .get(0);
        let cancel = c.cancel_token();
        Ok(Watched {
            c,
            admin,
            pid,
            cancel,
        })
    }

    /// Runs `call` (named `what`), which must answer within `bound`: its answer, or the
    /// finding that the target hangs (or, when the server cannot say why there was no
    /// answer, no verdict).
    pub(super) async fn within<T>(
        &self,
        what: &str,
        bound: Duration,
        call: impl Future<Output = Result<T, LeaseError>>,
    ) -> Result<Result<T, LeaseError>, Failure> {
        match tokio::time::timeout(bound, call).await {
            Ok(answered) => Ok(answered),
            Err(_) => Err(
                match no_answer(&self.admin, &self.cancel, self.pid, what, bound).await {
                    Ok(finding) => Failure::Violation(finding),
                    Err(why) => Failure::Infrastructure(why),
                },
            ),
        }
    }
}

/// The states a key is put in before a call meets it.
const STATES: [&str; 6] = [
    "never-leased",
    "held-by-another",
    "held-by-the-caller",
    "lapsed-from-another",
    "lapsed-from-the-caller",
    "free",
];

/// The calls made on each state, as the caller `me`.
const CALLS: [&str; 7] = [
    "acquire",
    "blocking acquire (wait 100ms)",
    "renew with the epoch",
    "renew with another epoch",
    "release with the epoch",
    "release with another epoch",
    "inspect",
];

/// Puts `key` in `state`; the epoch the caller would present (the key's, or 1).
async fn put(ctx: &Ctx<'_>, w: &Watched, key: &str, state: &str) -> Result<i64, Failure> {
    let calls = &ctx.calls;
    let c = &w.c;
    let grant = |owner: &'static str, ttl: Duration| {
        let what = format!("lease.acquire of a never-leased key by {owner} (setting up {state})");
        async move {
            match w
                .within(
                    &what,
                    CALL_BOUND,
                    calls.acquire(c, key, owner, ttl, Duration::ZERO),
                )
                .await?
                .map_err(e)?
            {
                Acquire::Acquired { epoch, .. } => Ok(epoch),
                Acquire::Denied => Err(Failure::Violation(format!("{what}: denied"))),
            }
        }
    };
    match state {
        "held-by-another" => grant("other", S(600)).await,
        "held-by-the-caller" => grant("me", S(600)).await,
        "lapsed-from-another" | "lapsed-from-the-caller" => {
            let owner = if state == "lapsed-from-another" {
                "other"
            } else {
                "me"
            };
            let epoch = grant(owner, MS(1)).await?;
            tokio::time::sleep(MS(20)).await;
            Ok(epoch)
        }
        "free" => {
            let epoch = grant("me", S(600)).await?;
            let what = format!("lease.release of the caller's live lease (setting up {state})");
            w.within(&what, CALL_BOUND, calls.release(c, key, "me", epoch))
                .await?
                .map_err(e)?;
            Ok(epoch + 1)
        }
        _ => Ok(1),
    }
}

/// Every call on every state of a fresh key answers (a result or an error) within its
/// bound: [`CALL_BOUND`], plus the wait of a blocking acquire. A call that does not while
/// the server executes it is the finding "the target hangs" (a renew that spins on a free
/// key, a wait that never ends).
pub(super) async fn every_call_answers_on_every_state_within_its_bound(
    ctx: &Ctx<'_>,
) -> CheckResult {
    let (db, _) = ctx.db().await?;
    let w = Watched::open(ctx, &db).await?;
    let calls = &ctx.calls;
    let c = &w.c;
    for (s, state) in STATES.iter().enumerate() {
        for (k, call) in CALLS.iter().enumerate() {
            let key = format!("live-{s}-{k}");
            let epoch = put(ctx, &w, &key, state).await?;
            let what = format!("lease.{call} on a {state} key");
            let bound = CALL_BOUND;
            // Any answer will do here (the other checks judge it); only its absence counts.
            let _ = match *call {
                "acquire" => w
                    .within(
                        &what,
                        bound,
                        calls.acquire(c, &key, "me", S(60), Duration::ZERO),
                    )
                    .await?
                    .map(|_| ()),
                "blocking acquire (wait 100ms)" => w
                    .within(
                        &what,
                        bound + MS(100),
                        calls.acquire(c, &key, "me", S(60), MS(100)),
                    )
                    .await?
                    .map(|_| ()),
                "renew with the epoch" | "renew with another epoch" => {
                    let epoch = if call.ends_with("the epoch") {
                        epoch
                    } else {
                        epoch + 7
                    };
                    w.within(&what, bound, calls.renew(c, &key, "me", epoch, S(60)))
                        .await?
                        .map(|_| ())
                }
                "release with the epoch" | "release with another epoch" => {
                    let epoch = if call.ends_with("the epoch") {
                        epoch
                    } else {
                        epoch + 7
                    };
                    w.within(&what, bound, calls.release(c, &key, "me", epoch))
                        .await?
                        .map(|_| ())
                }
                _ => w
                    .within(&what, bound, calls.inspect(c, &key))
                    .await?
                    .map(|_| ()),
            };
        }
    }
    Ok(())
}

/// The margins of [`blocking_waits_end_promptly_at_deadline_and_expiry`], on the median
/// of [`PROMPT_SAMPLES`] waits, from results/promptness/ (a correct build on this machine,
/// idle and under load): its overshoot past a deadline and its takeover lag after an
/// expiry stayed within a few milliseconds at the median, while a build that sleeps one
/// poll interval (50 ms) too long is 50 ms late on every sample.
pub const PROMPT_MARGIN: Duration = Duration::from_millis(25);
/// Waits measured per bound (their median is judged).
pub const PROMPT_SAMPLES: usize = 5;

/// One blocking acquire that must run out at its deadline: how long past it (server time)
/// its 57014 came.
const OVERSHOOT: &str = "
DO $leasecheck$
DECLARE v_t0 timestamptz; v_t1 timestamptz;
BEGIN
  v_t0 := pg_catalog.clock_timestamp();
  BEGIN
    PERFORM * FROM lease.acquire('prompt-held', 'prompt-waiter', interval '60 s', interval '200 ms');
  EXCEPTION WHEN query_canceled THEN
    v_t1 := pg_catalog.clock_timestamp();
    IF SQLERRM NOT LIKE 'lease.acquire: wait of %' THEN RAISE; END IF;
  END;
  INSERT INTO pg_temp.leasecheck_prompt
    VALUES (extract(epoch FROM v_t1 - v_t0 - interval '200 ms') * 1000);
END
$leasecheck$";

/// A blocking acquire ends its wait at its deadline, and takes a lease over at its
/// expiry, each within [`PROMPT_MARGIN`] at the median of [`PROMPT_SAMPLES`] waits,
/// measured on the server's clock: SEMANTICS section 4.1 (a sleep never goes past the
/// deadline or the holder's expiry).
pub(super) async fn blocking_waits_end_promptly_at_deadline_and_expiry(
    ctx: &Ctx<'_>,
) -> CheckResult {
    let (db, _) = ctx.db().await?;
    let w = Watched::open(ctx, &db).await?;
    let (overshoots, lags) = measure(ctx, &w, PROMPT_SAMPLES).await?;
    let median = |v: &[f64]| {
        let mut v = v.to_vec();
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let margin = PROMPT_MARGIN.as_secs_f64() * 1000.0;
    let (over, lag) = (median(&overshoots), median(&lags));
    let mut late = Vec::new();
    if over > margin {
        late.push(format!(
            "a blocking acquire's 57014 came {over:.1} ms past its deadline at the median \
             (samples {overshoots:.1?} ms)"
        ));
    }
    if lag > margin {
        late.push(format!(
            "a blocking acquire took a lease over {lag:.1} ms after its expiry at the median \
             (samples {lags:.1?} ms)"
        ));
    }
    match late.is_empty() {
        true => Ok(()),
        false => Err(Failure::Violation(format!(
            "{}; SEMANTICS section 4.1: a wait never sleeps past its deadline or the holder's \
             expiry (margin {margin} ms, measured on a correct build: results/promptness/)",
            late.join("; ")
        ))),
    }
}

/// A grant of `key` to `owner` (`wait`: a blocking acquire): its epoch and expiry.
async fn granted(
    calls: &crate::client::Calls,
    c: &Client,
    key: &str,
    owner: &str,
    ttl: Duration,
    wait: Duration,
) -> Result<(i64, chrono::DateTime<chrono::Utc>), String> {
    match calls.acquire(c, key, owner, ttl, wait).await {
        Ok(Acquire::Acquired { epoch, expires_at }) => Ok((epoch, expires_at)),
        other => Err(format!("acquire({key}, {owner}) answered {other:?}")),
    }
}

/// `n` waits of each kind on `c` (a database with the build, keys `prompt-*` unused): the
/// overshoots of a 200 ms wait past its deadline and the takeover lags after a 150 ms
/// lease's expiry, in milliseconds of server time.
pub async fn measure_on(
    calls: &crate::client::Calls,
    c: &Client,
    n: usize,
) -> Result<(Vec<f64>, Vec<f64>), String> {
    granted(
        calls,
        c,
        "prompt-held",
        "prompt-holder",
        S(3600),
        Duration::ZERO,
    )
    .await?;
    c.batch_execute(
        "CREATE TEMP TABLE IF NOT EXISTS leasecheck_prompt (ms float8); \
         DELETE FROM pg_temp.leasecheck_prompt",
    )
    .await
    .map_err(|e| crate::judgement::describe_db(&e))?;
    for _ in 0..n {
        c.batch_execute(OVERSHOOT)
            .await
            .map_err(|e| crate::judgement::describe_db(&e))?;
    }
    let measured: Vec<Option<f64>> = c
        .query("SELECT ms FROM pg_temp.leasecheck_prompt", &[])
        .await
        .map_err(|e| crate::judgement::describe_db(&e))?
        .iter()
        .map(|r| r.try_get(0))
        .collect::<Result<_, _>>()
        .map_err(|e| format!("reading the measured overshoots: {e}"))?;
    // NULL: the call returned without its wait running out (no 'wait of' cancel).
    let overshoots: Vec<f64> = measured.into_iter().collect::<Option<_>>().ok_or(
        "a blocking acquire (wait 200 ms) of a key another owner holds for an hour returned \
         without waiting its wait out",
    )?;
    let mut lags = Vec::new();
    for i in 0..n {
        let key = format!("prompt-lapsing-{i}");
        let (_, held_until) =
            granted(calls, c, &key, "prompt-holder", MS(150), Duration::ZERO).await?;
        let (_, expires) = granted(calls, c, &key, "prompt-waiter", S(60), S(2)).await?;
        let granted_at = expires - chrono::Duration::seconds(60);
        let lag = (granted_at - held_until)
            .num_microseconds()
            .unwrap_or(i64::MAX);
        lags.push(lag as f64 / 1000.0);
    }
    Ok((overshoots, lags))
}

async fn measure(ctx: &Ctx<'_>, w: &Watched, n: usize) -> Result<(Vec<f64>, Vec<f64>), Failure> {
    // Each wait is bounded by its own length (200 ms, 150 ms) plus the call bound.
    let bound = CALL_BOUND * (2 * n as u32 + 2);
    let measured = w
        .within("blocking acquires measured for promptness", bound, async {
            measure_on(&ctx.calls, &w.c, n)
                .await
                .map_err(LeaseError::Unexpected)
        })
        .await?;
    measured.map_err(e)
}
