//! The fenced resource: what epochs are for (SEMANTICS.md section 5).
//!
//! Workers take a lease on a resource and then write to it through a guard that accepts a
//! write only when the epoch it carries is at least the highest accepted so far. Workers
//! pause at random for longer than their TTL without knowing it, as a GC pause or a stalled
//! VM would: their lease lapses, another worker takes the resource over with a greater
//! epoch, and the paused one resumes and writes with its old epoch. The guard must reject
//! that write. The check reads the guard's log: in the order the writes were accepted, no
//! write carries an epoch lower than an earlier accepted one, and no epoch is accepted from
//! two writers. The negative control runs the same workload against an unguarded resource,
//! which accepts the deposed holder's writes.
//!
//! The lease calls go through the recorder, so the lease history is judged by the model's
//! checker as well.

use crate::campaign::{InfraError, Target};
use crate::judgement::{Cause, Judgement};
use crate::pg::Cluster;
use crate::recorder::{Recorder, RecorderError, RecorderOptions, Session};
use model::gen::Rng;
use model::history::History;
use model::{CheckOptions, Interval, Op, OpResult, Outcome, Verdict};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio_postgres::Client;

/// The guarded resource table, its log, and the two ways to write to it.
const SETUP: &str = r#"
CREATE TABLE fenced_resource (
    resource text PRIMARY KEY,
    epoch    bigint NOT NULL,
    writer   text   NOT NULL,
    writes   bigint NOT NULL
);
-- One row per write attempt, in the order the resource's row lock serialized them.
CREATE TABLE fenced_log (
    seq      bigserial PRIMARY KEY,
    resource text    NOT NULL,
    writer   text    NOT NULL,
    epoch    bigint  NOT NULL,
    accepted boolean NOT NULL
);
-- The guard: accept when the epoch is at least the highest accepted so far.
CREATE FUNCTION guarded_write(p_resource text, p_writer text, p_epoch bigint)
RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE ok boolean;
BEGIN
    INSERT INTO fenced_resource AS f VALUES (p_resource, p_epoch, p_writer, 1)
    ON CONFLICT (resource) DO UPDATE
       SET epoch = EXCLUDED.epoch, writer = EXCLUDED.writer, writes = f.writes + 1
     WHERE f.epoch <= EXCLUDED.epoch
    RETURNING true INTO ok;
    ok := coalesce(ok, false);
    INSERT INTO fenced_log (resource, writer, epoch, accepted)
    VALUES (p_resource, p_writer, p_epoch, ok);
    RETURN ok;
END $$;
-- The negative control: the same write without the guard.
CREATE FUNCTION unguarded_write(p_resource text, p_writer text, p_epoch bigint)
RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO fenced_resource AS f VALUES (p_resource, p_epoch, p_writer, 1)
    ON CONFLICT (resource) DO UPDATE
       SET epoch = EXCLUDED.epoch, writer = EXCLUDED.writer, writes = f.writes + 1;
    INSERT INTO fenced_log (resource, writer, epoch, accepted)
    VALUES (p_resource, p_writer, p_epoch, true);
    RETURN true;
END $$;
"#;

/// How to run the fenced workload.
#[derive(Clone, Debug)]
pub struct FencedConfig {
    pub target: Target,
    pub workers: u32,
    pub resources: u32,
    /// How long workers run.
    pub duration: Duration,
    /// The TTL of every lease.
    pub ttl: Duration,
    /// Percent of writes preceded by a pause longer than the TTL.
    pub pause_percent: u32,
    /// Writes per lease held.
    pub writes_per_lease: u32,
    /// Write through the guard (false: the negative control).
    pub guarded: bool,
    pub seed: u64,
}

impl FencedConfig {
    /// A short run that makes takeovers and stale writes likely (a pause is 3 TTLs).
    pub fn short(target: Target, guarded: bool, seed: u64) -> FencedConfig {
        FencedConfig {
            target,
            workers: 4,
            resources: 2,
            duration: Duration::from_secs(4),
            ttl: Duration::from_millis(40),
            pause_percent: 20,
            writes_per_lease: 4,
            guarded,
            seed,
        }
    }
}

/// One accepted write that fencing should have prevented.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FencingBreach {
    pub resource: String,
    /// The write's position in the log.
    pub seq: i64,
    pub writer: String,
    pub epoch: i64,
    /// The highest epoch accepted before it, and from whom.
    pub highest: i64,
    pub highest_writer: String,
}

impl std::fmt::Display for FencingBreach {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "resource {:?}: write #{} by {:?} with epoch {} was accepted after epoch {} of {:?}",
            self.resource, self.seq, self.writer, self.epoch, self.highest, self.highest_writer
        )
    }
}

/// What a fenced run found.
#[derive(Debug)]
pub struct FencedReport {
    pub writes_accepted: u64,
    pub writes_rejected: u64,
    /// Writes attempted with an epoch whose lease had lapsed or been taken over.
    pub breaches: Vec<FencingBreach>,
    /// The recorded lease calls and the model's verdict on them.
    pub history: History,
    pub verdict: Verdict,
}

impl FencedReport {
    /// The run as the one judgement (crate::judgement), for a guarded run: the lease history
    /// judged by the checker first; then a stale write the guard accepted is a finding (two
    /// holders shared an epoch, or a grant's epoch was not above an earlier one); a run in
    /// which no deposed holder wrote proves nothing, no verdict.
    pub fn judgement(&self) -> Judgement {
        match &self.verdict {
            Verdict::Violation(v) => {
                return Judgement::Finding {
                    invariant: Some(v.invariant.to_string()),
                    message: format!("the fenced workload's lease calls: {}", self.verdict),
                }
            }
            Verdict::Unknown(_) => {
                return Judgement::NoVerdict {
                    cause: Cause::Budget,
                    why: format!("the fenced workload's lease calls: {}", self.verdict),
                }
            }
            Verdict::Linearizable(_) => {}
        }
        if let Some(first) = self.breaches.first() {
            return Judgement::Finding {
                invariant: Some(model::Invariant::GrantEpochFresh.to_string()),
                message: format!(
                    "the guard, which accepts a write only with an epoch at least the highest \
                     accepted, let {} stale write(s) through: {first}",
                    self.breaches.len()
                ),
            };
        }
        if self.writes_rejected == 0 {
            return Judgement::NoVerdict {
                cause: Cause::Harness,
                why: "no deposed holder wrote to the fenced resource: the run proves nothing"
                    .into(),
            };
        }
        Judgement::Pass
    }
}

/// One row of the guard's log.
#[derive(Clone, Debug)]
pub struct LogRow {
    pub seq: i64,
    pub resource: String,
    pub writer: String,
    pub epoch: i64,
    pub accepted: bool,
}

/// The fencing breaches in `log` (ordered by `seq`): per resource, an accepted write whose
/// epoch is lower than an earlier accepted one, or equal to it but from another writer.
pub fn breaches(log: &[LogRow]) -> Vec<FencingBreach> {
    let mut highest: std::collections::BTreeMap<&str, (i64, &str)> = Default::default();
    let mut out = Vec::new();
    for row in log.iter().filter(|r| r.accepted) {
        match highest.get(row.resource.as_str()) {
            Some(&(e, w)) if row.epoch < e || (row.epoch == e && row.writer != w) => {
                out.push(FencingBreach {
                    resource: row.resource.clone(),
                    seq: row.seq,
                    writer: row.writer.clone(),
                    epoch: row.epoch,
                    highest: e,
                    highest_writer: w.to_string(),
                });
            }
            _ => {
                highest.insert(&row.resource, (row.epoch, &row.writer));
            }
        }
    }
    out
}

/// Why a fenced run could not complete.
#[derive(Debug, thiserror::Error)]
pub enum FencedError {
    #[error(transparent)]
    Infra(#[from] InfraError),
    #[error("the fenced resource: {0}")]
    Resource(#[from] tokio_postgres::Error),
}

/// Runs the workload on a fresh database of `cluster` and checks it.
pub async fn run(cluster: &Cluster, config: &FencedConfig) -> Result<FencedReport, FencedError> {
    let (recorder, db) = prepare(cluster, config).await?;
    let recorder = Arc::new(recorder);
    let deadline = Instant::now() + config.duration;
    let mut tasks = Vec::new();
    for w in 0..config.workers {
        let session = recorder.session();
        let resource = cluster
            .connect(&db)
            .await
            .map_err(|source| InfraError::Database {
                target: config.target.to_string(),
                source,
            })?;
        let cfg = config.clone();
        tasks.push(tokio::spawn(async move {
            worker(w, session, resource, &cfg, deadline).await
        }));
    }
    let mut failure = None;
    for t in tasks {
        match t.await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => failure = failure.or(Some(e)),
            Err(e) => failure = failure.or(Some(WorkerError::Task(e.to_string()))),
        }
    }
    if let Some(e) = failure {
        return Err(e.into_fenced());
    }
    let history = recorder
        .finish()
        .map_err(|e| FencedError::Infra(InfraError::Recorder(e)))?;
    let log = read_log(cluster, &db).await?;
    let verdict = {
        let h = history.clone();
        tokio::task::spawn_blocking(move || model::checker::check(&h, &CheckOptions::default()))
            .await
            .map_err(|e| FencedError::Infra(InfraError::Task(format!("the check: {e}"))))?
    };
    Ok(FencedReport {
        writes_accepted: log.iter().filter(|r| r.accepted).count() as u64,
        writes_rejected: log.iter().filter(|r| !r.accepted).count() as u64,
        breaches: breaches(&log),
        history,
        verdict,
    })
}

async fn prepare(
    cluster: &Cluster,
    config: &FencedConfig,
) -> Result<(Recorder, String), FencedError> {
    let target = config.target.to_string();
    let files = config.target.files().map_err(InfraError::from)?;
    cluster
        .provide_extension(&files)
        .await
        .map_err(|source| InfraError::Install {
            target: target.clone(),
            source,
        })?;
    let db = cluster
        .fresh_database_with("fenced", &files.name)
        .await
        .map_err(|source| InfraError::Database {
            target: target.clone(),
            source,
        })?;
    let admin = cluster
        .connect(&db)
        .await
        .map_err(|source| InfraError::Database { target, source })?;
    admin.batch_execute(SETUP).await?;
    let meta = std::collections::BTreeMap::from([
        ("workload".to_string(), "fenced".into()),
        ("guarded".to_string(), config.guarded.into()),
        ("seed".to_string(), config.seed.into()),
    ]);
    let options = RecorderOptions {
        meta,
        ..RecorderOptions::default()
    };
    let recorder = Recorder::new(cluster.config(&db), options).map_err(InfraError::Recorder)?;
    Ok((recorder, db))
}

async fn read_log(cluster: &Cluster, db: &str) -> Result<Vec<LogRow>, FencedError> {
    let c = cluster
        .connect(db)
        .await
        .map_err(|source| InfraError::Database {
            target: db.to_string(),
            source,
        })?;
    let rows = c
        .query(
            "SELECT seq, resource, writer, epoch, accepted FROM fenced_log ORDER BY seq",
            &[],
        )
        .await?;
    let mut log = Vec::with_capacity(rows.len());
    for r in rows {
        log.push(LogRow {
            seq: r.try_get(0)?,
            resource: r.try_get(1)?,
            writer: r.try_get(2)?,
            epoch: r.try_get(3)?,
            accepted: r.try_get(4)?,
        });
    }
    Ok(log)
}

enum WorkerError {
    Recorder(RecorderError),
    Resource(tokio_postgres::Error),
    Task(String),
}

impl WorkerError {
    fn into_fenced(self) -> FencedError {
        match self {
            WorkerError::Recorder(e) => FencedError::Infra(InfraError::Recorder(e)),
            WorkerError::Resource(e) => FencedError::Resource(e),
            WorkerError::Task(e) => FencedError::Infra(InfraError::Task(e)),
        }
    }
}

/// One worker: acquire a resource, write to it a few times (sometimes after a pause longer
/// than the TTL, writing before it learns its lease is gone), renew between writes, release.
async fn worker(
    index: u32,
    mut session: Session,
    resource: Client,
    cfg: &FencedConfig,
    deadline: Instant,
) -> Result<(), WorkerError> {
    let mut rng = Rng::new(cfg.seed.wrapping_add(u64::from(index) * 7919));
    let me = format!("worker-{index}");
    let ttl = Interval::micros(i64::try_from(cfg.ttl.as_micros()).unwrap_or(i64::MAX));
    let write = if cfg.guarded {
        "SELECT guarded_write($1, $2, $3)"
    } else {
        "SELECT unguarded_write($1, $2, $3)"
    };
    while Instant::now() < deadline {
        let key = format!("resource-{}", rng.below(u64::from(cfg.resources.max(1))));
        let granted = session
            .call(&Op::acquire(key.clone(), me.clone(), ttl))
            .await
            .map_err(WorkerError::Recorder)?;
        let Some(epoch) = acquired_epoch(&granted.result) else {
            tokio::time::sleep(Duration::from_millis(rng.range(1, 10) as u64)).await;
            continue;
        };
        for _ in 0..cfg.writes_per_lease {
            if rng.chance(cfg.pause_percent) {
                tokio::time::sleep(cfg.ttl * 3).await;
            }
            resource
                .query_one(write, &[&key, &me, &epoch])
                .await
                .map_err(WorkerError::Resource)?;
            let renewed = session
                .call(&Op::renew(key.clone(), me.clone(), epoch, ttl))
                .await
                .map_err(WorkerError::Recorder)?;
            if !matches!(renewed.result, OpResult::Ok(Outcome::Renewed { .. })) {
                break; // the lease is gone: a correct holder stops acting
            }
        }
        session
            .call(&Op::release(key, me.clone(), epoch))
            .await
            .map_err(WorkerError::Recorder)?;
    }
    Ok(())
}

fn acquired_epoch(result: &OpResult) -> Option<i64> {
    match result {
        OpResult::Ok(Outcome::Acquired { epoch, .. }) => Some(*epoch),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(seq: i64, resource: &str, writer: &str, epoch: i64, accepted: bool) -> LogRow {
        LogRow {
            seq,
            resource: resource.to_string(),
            writer: writer.to_string(),
            epoch,
            accepted,
        }
    }

    #[test]
    fn increasing_epochs_are_no_breach() {
        let log = [
            row(1, "r", "a", 1, true),
            row(2, "r", "a", 1, true),
            row(3, "r", "b", 2, true),
            row(4, "r", "a", 1, false),
            row(5, "s", "a", 1, true),
        ];
        assert!(breaches(&log).is_empty());
    }

    #[test]
    fn a_stale_epoch_accepted_is_a_breach() {
        let log = [
            row(1, "r", "a", 1, true),
            row(2, "r", "b", 2, true),
            row(3, "r", "a", 1, true),
        ];
        let b = breaches(&log);
        assert_eq!(b.len(), 1);
        assert_eq!((b[0].seq, b[0].highest), (3, 2));
    }

    #[test]
    fn one_epoch_from_two_writers_is_a_breach() {
        let log = [row(1, "r", "a", 3, true), row(2, "r", "b", 3, true)];
        assert_eq!(breaches(&log).len(), 1);
    }

    fn report(rejected: u64, breaches: Vec<FencingBreach>) -> FencedReport {
        FencedReport {
            writes_accepted: 10,
            writes_rejected: rejected,
            breaches,
            history: History::default(),
            verdict: Verdict::Linearizable(model::checker::Stats::default()),
        }
    }

    /// The guarded run's judgement: a pass needs deposed holders that tried and were
    /// refused; an accepted stale write is a finding naming the fresh-epoch invariant.
    #[test]
    fn a_stale_write_accepted_is_a_finding_and_a_run_without_one_tried_is_no_verdict() {
        assert!(report(3, vec![]).judgement().is_pass());
        let log = [row(1, "r", "a", 3, true), row(2, "r", "b", 3, true)];
        match report(3, breaches(&log)).judgement() {
            Judgement::Finding { invariant, message } => {
                assert_eq!(
                    invariant,
                    Some(model::Invariant::GrantEpochFresh.to_string())
                );
                assert!(message.contains("1 stale write(s)"), "{message}");
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            report(0, vec![]).judgement(),
            Judgement::NoVerdict { .. }
        ));
    }
}
