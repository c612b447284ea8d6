//! The pg_lease 0.2.0 fixes of the issue "extension: pg_lease correct under any session
//! settings a caller controls, secure on a trusted install, no wasted writes", each shown
//! against both versions on every tested major: pg_lease 0.1.0 as released (installed as its
//! own extension `pg_lease_v0_1_0`, [`ExtensionFiles::version_0_1_0`]) and this tree's
//! pg_lease (0.3.0 now: a fix of 0.2.0 holds in every later version), under the name
//! `pg_lease_fixes_current` so that no other test rewriting `pg_lease`'s files can change
//! what runs here. The 0.3.0 fixes, shown against 0.2.0, are in `tests/fixes_0_3_0.rs`.
//!
//! Every check reports observations, each under a rule:
//! - `Fixed`: the 0.1.0 misbehaviour the issue names must be *seen* on 0.1.0 (the negative
//!   control: a check that cannot see the bug proves nothing) and must not be seen on 0.2.0;
//! - `Never`: seen on neither (unchanged behaviour, premises);
//! - `Control`: a failure the check provokes on purpose, seen on both (its instrument works).
//!
//! An answer that is neither the named misbehaviour nor the fixed behaviour, an install or
//! connection error, a premise the machine did not meet, or a hang (every check is bounded)
//! fails the test as such: never a pass.
//!
//! Checks that need nothing else to write (WAL and XID counts) or that crash the server run
//! in a cluster of their own; the others share one cluster per major, each in its own
//! database. One `#[ignore]`d check fails by design: it shows the durability limitation
//! SEMANTICS.md section 8 states (`cargo test -p harness --test extension_fixes --
//! --ignored` runs it: it must fail exactly as described there).

use chrono::{DateTime, Utc};
use harness::extension::ExtensionFiles;
use harness::pg::{shared, test_majors, Cluster, ClusterOptions, PgInstall};
use std::future::Future;
use std::time::{Duration, Instant};
use tokio_postgres::types::ToSql;
use tokio_postgres::{Client, Row};

// ---------------------------------------------------------------------------------------
// Targets, outcomes, judgement

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Target {
    V010,
    Current,
}

impl Target {
    const ALL: [Target; 2] = [Target::V010, Target::Current];

    fn files(self) -> ExtensionFiles {
        match self {
            Target::V010 => ExtensionFiles::version_0_1_0(),
            Target::Current => ExtensionFiles::renamed("pg_lease_fixes_current"),
        }
    }

    fn version(self) -> &'static str {
        match self {
            Target::V010 => "0.1.0",
            Target::Current => harness::extension::VERSION,
        }
    }
}

/// Why a check produced no observations.
#[derive(Debug)]
enum Fail {
    /// The check could not run: install, cluster, connection, a hang, or a premise the
    /// machine did not meet.
    Infra(String),
    /// pg_lease answered something that is neither the 0.1.0 misbehaviour nor the 0.2.0
    /// behaviour the check names.
    Unexpected(String),
}

type R<T> = Result<T, Fail>;

fn infra(e: impl std::fmt::Display) -> Fail {
    Fail::Infra(e.to_string())
}

fn unexpected(what: impl Into<String>) -> Fail {
    Fail::Unexpected(what.into())
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Rule {
    /// Seen on 0.1.0 (negative control), not on 0.2.0.
    Fixed,
    /// Seen on neither.
    Never,
    /// Seen on both: a failure provoked on purpose.
    Control,
}

/// One observed behaviour: `seen` is whether the named misbehaviour (or, for a control, the
/// provoked failure) happened.
#[derive(Debug)]
struct Obs {
    what: String,
    rule: Rule,
    seen: bool,
    detail: String,
}

fn obs(rule: Rule, what: impl Into<String>, seen: bool, detail: impl Into<String>) -> Obs {
    Obs {
        what: what.into(),
        rule,
        seen,
        detail: detail.into(),
    }
}

/// A `Fixed` observation when the answer is either the named misbehaviour or the fixed
/// behaviour; anything else is unexpected.
fn decide(what: impl Into<String>, bug: bool, fixed: bool, detail: String) -> R<Obs> {
    let what = what.into();
    if bug == fixed {
        return Err(unexpected(format!(
            "{what}: {detail} (neither the 0.1.0 misbehaviour nor the 0.2.0 behaviour alone)"
        )));
    }
    Ok(obs(Rule::Fixed, what, bug, detail))
}

/// The problems of one run of a check against one target.
fn judge(target: Target, found: &[Obs]) -> Vec<String> {
    let mut problems = Vec::new();
    if target == Target::V010 && !found.iter().any(|o| o.rule != Rule::Never) {
        problems.push("the check has no negative control (no Fixed or Control observation)".into());
    }
    for o in found {
        let wrong = match (o.rule, target) {
            (Rule::Fixed, Target::V010) => !o.seen,
            (Rule::Fixed, Target::Current) | (Rule::Never, _) => o.seen,
            (Rule::Control, _) => !o.seen,
        };
        if wrong {
            let why = match (o.rule, target) {
                (Rule::Fixed, Target::V010) => "negative control failed: 0.1.0 did not show",
                (Rule::Control, _) => "control failed: the provoked failure was not seen",
                _ => "misbehaves",
            };
            problems.push(format!("{why}: {} ({})", o.what, o.detail));
        }
    }
    problems
}

/// The outcomes of one check over every major and both targets.
struct Runs {
    point: &'static str,
    lines: Vec<String>,
    problems: Vec<String>,
}

impl Runs {
    fn new(point: &'static str) -> Runs {
        Runs {
            point,
            lines: Vec::new(),
            problems: Vec::new(),
        }
    }

    fn record(&mut self, major: u32, target: Target, result: R<Vec<Obs>>) {
        let who = format!("PG {major}, pg_lease {}", target.version());
        match result {
            Ok(found) => {
                let problems = judge(target, &found);
                self.lines.push(format!(
                    "{who}: {} observations, {}",
                    found.len(),
                    if problems.is_empty() {
                        "as expected"
                    } else {
                        "WRONG"
                    }
                ));
                for o in &found {
                    let rule = match o.rule {
                        Rule::Fixed => "fixed  ",
                        Rule::Never => "never  ",
                        Rule::Control => "control",
                    };
                    let mark = if o.seen { "seen    " } else { "not seen" };
                    self.lines
                        .push(format!("    [{rule}] {mark} {}: {}", o.what, o.detail));
                }
                self.problems
                    .extend(problems.into_iter().map(|p| format!("{who}: {p}")));
            }
            Err(Fail::Infra(why)) => {
                self.lines.push(format!("{who}: INFRASTRUCTURE FAILURE"));
                self.problems
                    .push(format!("{who}: infrastructure failure (not a pass): {why}"));
            }
            Err(Fail::Unexpected(why)) => {
                self.lines.push(format!("{who}: UNEXPECTED ANSWER"));
                self.problems.push(format!("{who}: unexpected: {why}"));
            }
        }
    }

    fn finish(self) {
        println!("{}:\n{}", self.point, self.lines.join("\n"));
        assert!(
            self.problems.is_empty(),
            "{}: {} problem(s):\n{}",
            self.point,
            self.problems.len(),
            self.problems.join("\n")
        );
    }
}

/// Runs `check` for every major and both targets, each run bounded by `limit`.
async fn run_all<F, Fut>(point: &'static str, limit: Duration, check: F)
where
    F: Fn(u32, Target) -> Fut,
    Fut: Future<Output = R<Vec<Obs>>>,
{
    let mut runs = Runs::new(point);
    for major in test_majors() {
        for target in Target::ALL {
            let result = match tokio::time::timeout(limit, check(major, target)).await {
                Ok(r) => r,
                Err(_) => Err(Fail::Infra(format!(
                    "no result within {limit:?}: a hang is an infrastructure failure"
                ))),
            };
            runs.record(major, target, result);
        }
    }
    runs.finish();
}

// ---------------------------------------------------------------------------------------
// Clusters, databases, SQL

fn shared_cluster(major: u32) -> R<&'static Cluster> {
    shared(major).map_err(infra)
}

/// Settings of the private clusters: nothing but the test writes WAL or takes XIDs
/// (no autovacuum, no checkpoint for an hour, wal_level minimal so that no standby
/// snapshot is logged), and an asynchronous commit stays unwritten until the WAL writer's
/// next round, 10 s away (its maximum delay), so a crash right after it loses it.
const PRIVATE_SETTINGS: &[(&str, &str)] = &[
    ("autovacuum", "off"),
    ("checkpoint_timeout", "1h"),
    ("wal_level", "minimal"),
    ("max_wal_senders", "0"),
    ("full_page_writes", "off"),
    ("wal_writer_delay", "10s"),
];

fn private_cluster(major: u32, target: Target) -> R<Cluster> {
    let install = PgInstall::ensure(major).map_err(infra)?;
    Cluster::start_with(
        &install,
        ClusterOptions {
            settings: PRIVATE_SETTINGS
                .iter()
                .map(|(n, v)| (n.to_string(), v.to_string()))
                .collect(),
            extensions: vec![target.files()],
            ..ClusterOptions::default()
        },
    )
    .map_err(infra)
}

/// A fresh database with `target` installed (checked by its version), and a connection.
async fn target_db(cluster: &Cluster, prefix: &str, target: Target) -> R<(String, Client)> {
    let files = target.files();
    cluster
        .install()
        .map_err(infra)?
        .install_extension(&files)
        .map_err(infra)?;
    let db = cluster
        .fresh_database_with(prefix, &files.name)
        .await
        .map_err(infra)?;
    let c = cluster.connect(&db).await.map_err(infra)?;
    let version: String = c
        .query_one(
            "SELECT extversion FROM pg_extension WHERE extname = $1",
            &[&files.name],
        )
        .await
        .map_err(infra)?
        .get(0);
    if version != target.version() {
        return Err(Fail::Infra(format!(
            "{} installed as version {version}, expected {}",
            files.name,
            target.version()
        )));
    }
    Ok((db, c))
}

/// An error the server reported.
#[derive(Debug, Clone)]
struct ServerError {
    code: String,
    message: String,
    detail: String,
    hint: String,
}

impl std::fmt::Display for ServerError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.code, self.message)?;
        if !self.detail.is_empty() {
            write!(f, " DETAIL: {}", self.detail)?;
        }
        if !self.hint.is_empty() {
            write!(f, " HINT: {}", self.hint)?;
        }
        Ok(())
    }
}

/// The server's error, or an infrastructure failure when there is none (a lost connection).
fn server_error(e: tokio_postgres::Error) -> R<ServerError> {
    match e.as_db_error() {
        Some(db) => Ok(ServerError {
            code: db.code().code().to_string(),
            message: db.message().to_string(),
            detail: db.detail().unwrap_or_default().to_string(),
            hint: db.hint().unwrap_or_default().to_string(),
        }),
        None => Err(Fail::Infra(format!("no answer from the server: {e}"))),
    }
}

/// Rows, or the server's error.
async fn try_query(
    c: &Client,
    sql: &str,
    params: &[&(dyn ToSql + Sync)],
) -> R<Result<Vec<Row>, ServerError>> {
    match c.query(sql, params).await {
        Ok(rows) => Ok(Ok(rows)),
        Err(e) => Ok(Err(server_error(e)?)),
    }
}

/// Rows; any server error is unexpected.
async fn query(c: &Client, sql: &str, params: &[&(dyn ToSql + Sync)]) -> R<Vec<Row>> {
    try_query(c, sql, params)
        .await?
        .map_err(|e| unexpected(format!("{}: {e}", short(sql))))
}

async fn one(c: &Client, sql: &str, params: &[&(dyn ToSql + Sync)]) -> R<Row> {
    let rows = query(c, sql, params).await?;
    let n = rows.len();
    rows.into_iter()
        .next()
        .filter(|_| n == 1)
        .ok_or_else(|| unexpected(format!("{}: {n} rows, expected 1", short(sql))))
}

async fn exec(c: &Client, sql: &str) -> R<()> {
    match c.batch_execute(sql).await {
        Ok(()) => Ok(()),
        Err(e) => Err(unexpected(format!("{}: {}", short(sql), server_error(e)?))),
    }
}

fn get<'a, T: tokio_postgres::types::FromSql<'a>>(row: &'a Row, i: usize) -> R<T> {
    row.try_get(i)
        .map_err(|e| unexpected(format!("column {i}: {e}")))
}

fn short(sql: &str) -> String {
    let one_line = sql.split_whitespace().collect::<Vec<_>>().join(" ");
    one_line.chars().take(120).collect()
}

/// An SQL string literal (standard_conforming_strings is on).
fn lit(s: &str) -> String {
    format!("'{}'", s.replace('\'', "''"))
}

async fn now(c: &Client) -> R<DateTime<Utc>> {
    get(&one(c, "SELECT clock_timestamp()", &[]).await?, 0)
}

async fn backend_pid(c: &Client) -> R<i32> {
    get(&one(c, "SELECT pg_backend_pid()", &[]).await?, 0)
}

/// Waits until `waiter` is blocked by `blocker` (pg_blocking_pids), at most 10 s.
async fn wait_blocked(monitor: &Client, waiter: i32, blocker: i32) -> R<()> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let pids: Vec<i32> = get(
            &one(monitor, "SELECT pg_blocking_pids($1)", &[&waiter]).await?,
            0,
        )?;
        if pids.contains(&blocker) {
            return Ok(());
        }
        if Instant::now() >= deadline {
            return Err(Fail::Infra(format!(
                "backend {waiter} did not block on backend {blocker} within 10 s"
            )));
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

// ---------------------------------------------------------------------------------------
// Lease calls (raw SQL: the checks need the server's own errors and hints)

#[derive(Debug, Clone, PartialEq, Eq)]
enum Acq {
    Granted {
        epoch: i64,
        expires_at: DateTime<Utc>,
    },
    Denied,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Insp {
    held: bool,
    owner: Option<String>,
    epoch: i64,
    expires_at: Option<DateTime<Utc>>,
}

fn acq_of(rows: Vec<Row>) -> R<Acq> {
    let [row] = <[Row; 1]>::try_from(rows)
        .map_err(|rows| unexpected(format!("acquire returned {} rows", rows.len())))?;
    let acquired: bool = get(&row, 0)?;
    let epoch: Option<i64> = get(&row, 1)?;
    let expires_at: Option<DateTime<Utc>> = get(&row, 2)?;
    match (acquired, epoch, expires_at) {
        (true, Some(epoch), Some(expires_at)) => Ok(Acq::Granted { epoch, expires_at }),
        (false, None, None) => Ok(Acq::Denied),
        other => Err(unexpected(format!("acquire returned {other:?}"))),
    }
}

fn status_of(rows: Vec<Row>) -> R<(String, Option<DateTime<Utc>>)> {
    let [row] = <[Row; 1]>::try_from(rows)
        .map_err(|rows| unexpected(format!("renew/release returned {} rows", rows.len())))?;
    let status: String = get(&row, 0)?;
    let expires_at = if row.len() > 1 { get(&row, 1)? } else { None };
    Ok((status, expires_at))
}

fn insp_of(rows: Vec<Row>) -> R<Option<Insp>> {
    if rows.len() > 1 {
        return Err(unexpected(format!("inspect returned {} rows", rows.len())));
    }
    let Some(row) = rows.into_iter().next() else {
        return Ok(None);
    };
    Ok(Some(Insp {
        held: get(&row, 0)?,
        owner: get(&row, 1)?,
        epoch: get(&row, 2)?,
        expires_at: get(&row, 3)?,
    }))
}

const ACQUIRE: &str = "SELECT acquired, epoch, expires_at \
                       FROM lease.acquire($1, $2, $3::text::interval, $4::text::interval)";
const RENEW: &str = "SELECT status, expires_at FROM lease.renew($1, $2, $3, $4::text::interval)";
const RELEASE: &str = "SELECT status FROM lease.release($1, $2, $3)";
const INSPECT: &str = "SELECT held, owner, epoch, expires_at FROM lease.inspect($1)";

async fn try_acquire(
    c: &Client,
    key: &str,
    owner: &str,
    ttl: &str,
    wait: &str,
) -> R<Result<Acq, ServerError>> {
    match try_query(c, ACQUIRE, &[&key, &owner, &ttl, &wait]).await? {
        Ok(rows) => Ok(Ok(acq_of(rows)?)),
        Err(e) => Ok(Err(e)),
    }
}

async fn acquire(c: &Client, key: &str, owner: &str, ttl: &str) -> R<Acq> {
    try_acquire(c, key, owner, ttl, "0")
        .await?
        .map_err(|e| unexpected(format!("acquire({key}, {owner}): {e}")))
}

async fn granted(c: &Client, key: &str, owner: &str, ttl: &str) -> R<(i64, DateTime<Utc>)> {
    match acquire(c, key, owner, ttl).await? {
        Acq::Granted { epoch, expires_at } => Ok((epoch, expires_at)),
        Acq::Denied => Err(unexpected(format!(
            "acquire({key}, {owner}) was denied; the check needs it granted"
        ))),
    }
}

async fn try_renew(
    c: &Client,
    key: &str,
    owner: &str,
    epoch: i64,
    ttl: &str,
) -> R<Result<(String, Option<DateTime<Utc>>), ServerError>> {
    match try_query(c, RENEW, &[&key, &owner, &epoch, &ttl]).await? {
        Ok(rows) => Ok(Ok(status_of(rows)?)),
        Err(e) => Ok(Err(e)),
    }
}

async fn renew(
    c: &Client,
    key: &str,
    owner: &str,
    epoch: i64,
    ttl: &str,
) -> R<(String, Option<DateTime<Utc>>)> {
    try_renew(c, key, owner, epoch, ttl)
        .await?
        .map_err(|e| unexpected(format!("renew({key}, {owner}, {epoch}): {e}")))
}

async fn release(c: &Client, key: &str, owner: &str, epoch: i64) -> R<String> {
    let rows = query(c, RELEASE, &[&key, &owner, &epoch]).await?;
    Ok(status_of(rows)?.0)
}

async fn inspect(c: &Client, key: &str) -> R<Option<Insp>> {
    insp_of(query(c, INSPECT, &[&key]).await?)
}

async fn try_inspect(c: &Client, key: &str) -> R<Result<Option<Insp>, ServerError>> {
    match try_query(c, INSPECT, &[&key]).await? {
        Ok(rows) => Ok(Ok(insp_of(rows)?)),
        Err(e) => Ok(Err(e)),
    }
}

// ---------------------------------------------------------------------------------------
// (a) The caller's collation never decides key or owner equality

/// Where the caller's collation comes from.
#[derive(Debug, Clone, Copy)]
enum Via {
    /// `'key' COLLATE ci` in the call.
    Clause,
    /// The arguments are columns of a table declared `COLLATE ci`.
    Column,
}

impl Via {
    fn name(self) -> &'static str {
        match self {
            Via::Clause => "COLLATE clause",
            Via::Column => "table column",
        }
    }
}

/// Runs `call` (a lease function call with `@key` and `@owner` standing for the key and
/// owner arguments, e.g. `lease.renew(@key, @owner, 1, interval '1 hour')`) with the key
/// and owner carrying the case-insensitive collation `ci`, by `via`.
async fn ci_call(
    c: &Client,
    via: Via,
    call: &str,
    key: &str,
    owner: &str,
) -> R<Result<Vec<Row>, ServerError>> {
    let sql = match via {
        Via::Clause => {
            let call = call
                .replace("@key", &format!("{} COLLATE ci", lit(key)))
                .replace("@owner", &format!("{} COLLATE ci", lit(owner)));
            format!("SELECT r.* FROM {call} AS r")
        }
        Via::Column => {
            exec(
                c,
                &format!(
                    "DELETE FROM ci_args; INSERT INTO ci_args (k, o) VALUES ({}, {})",
                    lit(key),
                    lit(owner)
                ),
            )
            .await?;
            let call = call.replace("@key", "a.k").replace("@owner", "a.o");
            format!("SELECT r.* FROM ci_args AS a, {call} AS r")
        }
    };
    try_query(c, &sql, &[]).await
}

/// The lease table of the build in `c`'s database (its name changed in 0.3.0).
async fn lease_table(c: &Client) -> R<String> {
    harness::extension::lease_table(c).await.map_err(infra)
}

/// Sequential and index scans of the lease table in the current transaction so far.
async fn scans(c: &Client) -> R<(i64, i64, i64)> {
    let table = lease_table(c).await?;
    let row = one(
        c,
        "SELECT seq_scan, seq_tup_read, coalesce(idx_scan, 0) FROM pg_stat_xact_user_tables \
         WHERE relid = $1::text::regclass",
        &[&table],
    )
    .await?;
    Ok((get(&row, 0)?, get(&row, 1)?, get(&row, 2)?))
}

async fn collation(major: u32, target: Target) -> R<Vec<Obs>> {
    let cluster = shared_cluster(major)?;
    let (_, c) = target_db(cluster, "fix_collation", target).await?;
    let icu: bool = get(
        &one(
            &c,
            "SELECT EXISTS (SELECT 1 FROM pg_collation WHERE collprovider = 'i')",
            &[],
        )
        .await?,
        0,
    )?;
    if !icu {
        return Err(Fail::Infra(format!(
            "PG {major} has no ICU collations (no provider 'i' in pg_collation): the collation \
             check cannot run on this install (an infrastructure limitation, not a pass)"
        )));
    }
    c.batch_execute(
        "CREATE COLLATION ci (provider = icu, locale = 'und-u-ks-level2', deterministic = false);
         CREATE TABLE ci_args (k text COLLATE ci, o text COLLATE ci)",
    )
    .await
    .map_err(infra)?;
    // The premises: `ci` equates what the checks below rely on.
    let row = one(
        &c,
        "SELECT 'worker-a' = 'WORKER-A' COLLATE ci, E'\\u200B' = '' COLLATE ci, \
                E'\\u200B\\u200B' = '' COLLATE ci",
        &[],
    )
    .await?;
    let premises: (bool, bool, bool) = (get(&row, 0)?, get(&row, 1)?, get(&row, 2)?);
    if premises != (true, true, true) {
        return Err(Fail::Infra(format!(
            "the ICU collation und-u-ks-level2 does not equate case and ignorable characters \
             on PG {major}: {premises:?}"
        )));
    }

    let mut found = Vec::new();
    for via in [Via::Clause, Via::Column] {
        let tag = match via {
            Via::Clause => "clause",
            Via::Column => "column",
        };
        let v = via.name();

        // Another owner's renew and release.
        let key = format!("{tag}-job");
        let (epoch, exp) = granted(&c, &key, "worker-a", "1 hour").await?;
        let call = format!("lease.renew(@key, @owner, {epoch}, interval '2 hours')");
        let r = ci_call(&c, via, &call, &key, "WORKER-A").await?;
        let r = r
            .map_err(|e| unexpected(format!("renew ({v}): {e}")))
            .and_then(status_of)?;
        let after = inspect(&c, &key).await?;
        found.push(decide(
            format!("renew by owner WORKER-A of worker-a's lease ({v}) succeeds"),
            r.0 == "ok",
            r.0 == "not_owner" && after.as_ref().and_then(|i| i.expires_at) == Some(exp),
            format!("status {:?}, then inspect {after:?}", r.0),
        )?);
        let call = format!("lease.release(@key, @owner, {epoch})");
        let r = ci_call(&c, via, &call, &key, "WORKER-A").await?;
        let r = r
            .map_err(|e| unexpected(format!("release ({v}): {e}")))
            .and_then(status_of)?;
        let after = inspect(&c, &key).await?;
        found.push(decide(
            format!("release by owner WORKER-A of worker-a's lease ({v}) frees it"),
            r.0 == "ok" && after.as_ref().is_some_and(|i| !i.held),
            r.0 == "not_owner" && after.as_ref().is_some_and(|i| i.held),
            format!("status {:?}, then inspect {after:?}", r.0),
        )?);

        // One release frees two distinct keys.
        let (lower, upper) = (format!("{tag}-two-x"), format!("{tag}-TWO-X"));
        let (e1, _) = granted(&c, &lower, "worker-a", "1 hour").await?;
        let (e2, _) = granted(&c, &upper, "worker-a", "1 hour").await?;
        if (e1, e2) != (1, 1) {
            return Err(unexpected(format!(
                "{lower} and {upper} granted with epochs {e1}, {e2}, expected 1 and 1"
            )));
        }
        let r = ci_call(
            &c,
            via,
            "lease.release(@key, @owner, 1)",
            &lower,
            "worker-a",
        )
        .await?;
        let r = r
            .map_err(|e| unexpected(format!("release ({v}): {e}")))
            .and_then(status_of)?;
        let other = inspect(&c, &upper).await?;
        found.push(decide(
            format!("release of {lower} ({v}) also frees the distinct key {upper}"),
            r.0 == "ok" && other.as_ref().is_some_and(|i| !i.held),
            r.0 == "ok" && other.as_ref().is_some_and(|i| i.held && i.epoch == 1),
            format!("status {:?}, then {upper} is {other:?}", r.0),
        )?);

        // A never-leased key is denied.
        let held = format!("{tag}-held");
        let never = format!("{tag}-HELD");
        granted(&c, &held, "worker-b", "1 hour").await?;
        let call = "lease.acquire(@key, @owner, interval '1 hour')";
        let r = ci_call(&c, via, call, &never, "worker-c").await?;
        let r = r
            .map_err(|e| unexpected(format!("acquire ({v}): {e}")))
            .and_then(acq_of)?;
        found.push(decide(
            format!("acquire of the never-leased key {never} ({v}) is denied"),
            r == Acq::Denied,
            matches!(r, Acq::Granted { epoch: 1, .. }),
            format!("{r:?} while {held} is held by worker-b"),
        )?);

        // A valid key made of characters the collation ignores is rejected as empty.
        let invisible = match via {
            Via::Clause => "\u{200B}",
            Via::Column => "\u{200B}\u{200B}",
        };
        let r = ci_call(&c, via, call, invisible, "worker-d").await?;
        let (bug, fixed, shown) = match r {
            Ok(rows) => {
                let a = acq_of(rows)?;
                (
                    false,
                    matches!(a, Acq::Granted { epoch: 1, .. }),
                    format!("{a:?}"),
                )
            }
            Err(e) => (
                e.code == "22023" && e.detail.contains("key must not be empty"),
                false,
                e.to_string(),
            ),
        };
        found.push(decide(
            format!(
                "acquire of the {}-byte key of zero-width spaces ({v}) is rejected as empty",
                invisible.len()
            ),
            bug,
            fixed,
            shown,
        )?);
    }

    // Index use: with 5,000 rows and fresh statistics a lookup by key must use the primary
    // key index. Counted by pg_stat_xact_user_tables (this transaction's own scans).
    let table = lease_table(&c).await?;
    exec(
        &c,
        &format!(
            "INSERT INTO {table} (key, owner, epoch, expires_at) \
             SELECT 'bulk-' || g, NULL, 1, NULL FROM generate_series(1, 5000) AS g; \
             ANALYZE {table}"
        ),
    )
    .await?;
    let calls = [
        "lease.inspect(@key)",
        "lease.acquire(@key, @owner, interval '1 hour')",
        "lease.renew(@key, @owner, 1, interval '1 hour')",
        "lease.release(@key, @owner, 1)",
    ];
    // The instrument: calls without a collation use the index and no sequential scan.
    exec(&c, "BEGIN").await?;
    let before = scans(&c).await?;
    for (i, call) in calls.iter().enumerate() {
        let sql = call
            .replace("@key", &lit(&format!("bulk-absent-{i}")))
            .replace("@owner", "'worker-e'");
        query(&c, &format!("SELECT r.* FROM {sql} AS r"), &[]).await?;
    }
    let after = scans(&c).await?;
    exec(&c, "ROLLBACK").await?;
    let (seq, read, idx) = (after.0 - before.0, after.1 - before.1, after.2 - before.2);
    found.push(obs(
        Rule::Never,
        "calls without a collation look the key up without the primary key index (instrument)",
        !(seq == 0 && idx >= calls.len() as i64),
        format!(
            "{seq} sequential scans ({read} rows read), {idx} index scans for {} calls",
            calls.len()
        ),
    ));
    for via in [Via::Clause, Via::Column] {
        exec(&c, "BEGIN").await?;
        let before = scans(&c).await?;
        for (i, call) in calls.iter().enumerate() {
            ci_call(&c, via, call, &format!("bulk-absent-{i}"), "worker-e")
                .await?
                .map_err(|e| unexpected(format!("{call} ({}): {e}", via.name())))?;
        }
        let after = scans(&c).await?;
        exec(&c, "ROLLBACK").await?;
        let (seq, read, idx) = (after.0 - before.0, after.1 - before.1, after.2 - before.2);
        found.push(decide(
            format!(
                "calls with the key from a {} scan the whole table instead of the primary key index",
                via.name()
            ),
            seq > 0 && read >= 5000,
            seq == 0 && idx >= calls.len() as i64,
            format!(
                "{seq} sequential scans ({read} rows read), {idx} index scans for {} calls",
                calls.len()
            ),
        )?);
    }
    Ok(found)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_callers_collation_never_decides_key_or_owner_equality() {
    run_all("collation", Duration::from_secs(60), collation).await;
}

// ---------------------------------------------------------------------------------------
// (b) A crash never loses an acknowledged write, whatever synchronous_commit the caller has

/// How a caller turns synchronous commit off around a lease write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Async {
    /// `SET synchronous_commit = off` in the session, then a grant.
    Session,
    /// The role's default (`ALTER ROLE ... SET`), then a grant.
    Role,
    /// The database's default (`ALTER DATABASE ... SET`), then a grant.
    Database,
    /// `SET LOCAL synchronous_commit = off` after the grant, in its transaction.
    SetLocalAfter,
    /// `SET synchronous_commit = off` in the session, then a release.
    Release,
    /// `SET CONSTRAINTS ALL IMMEDIATE` before the grant and `SET LOCAL synchronous_commit
    /// = off` after it, in its transaction.
    ConstraintsImmediate,
}

impl Async {
    fn name(self) -> &'static str {
        match self {
            Async::Session => "grant after SET synchronous_commit = off",
            Async::Role => "grant by a role with ALTER ROLE ... SET synchronous_commit = off",
            Async::Database => {
                "grant in a database with ALTER DATABASE ... SET synchronous_commit = off"
            }
            Async::SetLocalAfter => "grant, then SET LOCAL synchronous_commit = off, then COMMIT",
            Async::Release => "release after SET synchronous_commit = off",
            Async::ConstraintsImmediate => {
                "SET CONSTRAINTS ALL IMMEDIATE, grant, SET LOCAL synchronous_commit = off, COMMIT"
            }
        }
    }
}

const ASYNC_ROLE: &str = "lease_async_caller";

/// What one write did, before and after the crash.
struct Written {
    mode: Async,
    key: String,
    /// The acknowledged epoch: of the grant, or of the lease the release freed.
    epoch: i64,
    /// Insert position of the WAL before the call, and after its acknowledgement.
    before: i64,
    after: i64,
    /// Whether the WAL was flushed past `after` when the acknowledgement arrived.
    flushed_at_ack: bool,
}

async fn lsns(c: &Client) -> R<(i64, i64, i64)> {
    let row = one(
        c,
        "SELECT (pg_current_wal_insert_lsn() - '0/0'::pg_lsn)::bigint, \
                (pg_current_wal_lsn() - '0/0'::pg_lsn)::bigint, \
                (pg_current_wal_flush_lsn() - '0/0'::pg_lsn)::bigint",
        &[],
    )
    .await?;
    Ok((get(&row, 0)?, get(&row, 1)?, get(&row, 2)?))
}

async fn connect_as(cluster: &Cluster, db: &str, user: &str) -> R<Client> {
    let mut config = cluster.config(db);
    config.user(user);
    let (client, connection) = config.connect(tokio_postgres::NoTls).await.map_err(infra)?;
    tokio::spawn(async move {
        let _ = connection.await;
    });
    Ok(client)
}

async fn expect_async(c: &Client, mode: Async) -> R<()> {
    let value: String = get(&one(c, "SHOW synchronous_commit", &[]).await?, 0)?;
    if value != "off" {
        return Err(Fail::Infra(format!(
            "{}: the session has synchronous_commit = {value}, the premise is off",
            mode.name()
        )));
    }
    Ok(())
}

/// Runs one write the way `mode` says and returns the acknowledged epoch, with the session
/// that wrote it (still open: a session's end writes WAL of its own, e.g. dropping the
/// temporary table pg_lease 0.3.0 creates on a session's first write, which would blur
/// the flush measured at the acknowledgement). `held`: the epoch of owner-a's lease on
/// `key`, granted durably beforehand (for a release).
async fn async_write(
    cluster: &Cluster,
    db: &str,
    mode: Async,
    key: &str,
    held: Option<i64>,
) -> R<(i64, Client)> {
    let grant = |c: Client| async move {
        let (epoch, _) = granted(&c, key, "owner-a", "1 hour").await?;
        Ok::<(i64, Client), Fail>((epoch, c))
    };
    match mode {
        Async::Session => {
            let c = cluster.connect(db).await.map_err(infra)?;
            exec(&c, "SET synchronous_commit = off").await?;
            expect_async(&c, mode).await?;
            grant(c).await
        }
        Async::Role => {
            let c = connect_as(cluster, db, ASYNC_ROLE).await?;
            expect_async(&c, mode).await?;
            grant(c).await
        }
        Async::Database => {
            let c = cluster.connect(db).await.map_err(infra)?;
            expect_async(&c, mode).await?;
            grant(c).await
        }
        Async::SetLocalAfter | Async::ConstraintsImmediate => {
            let c = cluster.connect(db).await.map_err(infra)?;
            exec(&c, "SET synchronous_commit = on; BEGIN").await?;
            if mode == Async::ConstraintsImmediate {
                exec(&c, "SET CONSTRAINTS ALL IMMEDIATE").await?;
            }
            let (epoch, _) = granted(&c, key, "owner-a", "1 hour").await?;
            exec(&c, "SET LOCAL synchronous_commit = off").await?;
            expect_async(&c, mode).await?;
            exec(&c, "COMMIT").await?;
            Ok((epoch, c))
        }
        Async::Release => {
            let epoch = held.ok_or_else(|| unexpected("a release needs a lease to release"))?;
            let c = cluster.connect(db).await.map_err(infra)?;
            exec(&c, "SET synchronous_commit = off").await?;
            expect_async(&c, mode).await?;
            let status = release(&c, key, "owner-a", epoch).await?;
            if status != "ok" {
                return Err(unexpected(format!("release of {key}: {status}")));
            }
            Ok((epoch, c))
        }
    }
}

async fn durability_with(major: u32, target: Target, modes: &[Async]) -> R<Vec<Obs>> {
    let mut cluster = private_cluster(major, target)?;
    let (db, c) = target_db(&cluster, "fix_durable", target).await?;
    exec(
        &c,
        &format!(
            "CREATE ROLE {ASYNC_ROLE} LOGIN; \
             ALTER ROLE {ASYNC_ROLE} SET synchronous_commit = off; \
             ALTER DATABASE {db} SET synchronous_commit = off"
        ),
    )
    .await?;
    drop(c);
    // An attempt on 0.1.0 is conclusive for a write only when the WAL had not been written
    // past the write's start when the server was killed; the WAL writer wakes every 10 s,
    // so an attempt rarely is not, and is then repeated (3 attempts at most).
    for attempt in 1..=3 {
        let admin = cluster.connect(&db).await.map_err(infra)?;
        exec(&admin, "SET synchronous_commit = on").await?;
        // Leases to release are granted durably first: a synchronous commit among the
        // writes below would flush the asynchronous ones before it.
        let mut held = Vec::new();
        for (i, mode) in modes.iter().enumerate() {
            let key = format!("durable-{attempt}-{i}");
            held.push(match mode {
                Async::Release => Some(granted(&admin, &key, "owner-a", "1 hour").await?.0),
                _ => None,
            });
        }
        // Start a fresh WAL segment (flushed), so that the writes below share one WAL page
        // and no full page of them wakes the WAL writer.
        exec(&admin, "SELECT pg_switch_wal()").await?;
        let mut written = Vec::new();
        let mut sessions = Vec::new();
        for (i, mode) in modes.iter().enumerate() {
            let key = format!("durable-{attempt}-{i}");
            let (before, _, _) = lsns(&admin).await?;
            let (epoch, session) = async_write(&cluster, &db, *mode, &key, held[i]).await?;
            let (after, _, flush) = lsns(&admin).await?;
            sessions.push(session);
            written.push(Written {
                mode: *mode,
                key,
                epoch,
                before,
                after,
                flushed_at_ack: flush >= after,
            });
        }
        let (_, write_at_crash, flush_at_crash) = lsns(&admin).await?;
        drop(admin);
        // The writers' sessions end with the crash (their ends write nothing before it).
        cluster.crash().map_err(infra)?;
        drop(sessions);
        cluster.resume().map_err(infra)?;
        let c = cluster.connect(&db).await.map_err(infra)?;
        exec(&c, "SET synchronous_commit = on").await?;
        // (write, its state after the crash, whether it survived as acknowledged)
        let mut states = Vec::new();
        for w in &written {
            let state = inspect(&c, &w.key).await?;
            let kept = state.as_ref().is_some_and(|i| match w.mode {
                Async::Release => !i.held && i.epoch == w.epoch + 1,
                _ => i.held && i.owner.as_deref() == Some("owner-a") && i.epoch == w.epoch,
            });
            states.push((w, state, kept));
        }
        // On 0.1.0 a write that survived although the WAL had been written past its start
        // before the crash tells nothing: try again.
        if target == Target::V010
            && states
                .iter()
                .any(|(w, _, kept)| *kept && write_at_crash > w.before)
        {
            println!(
                "PG {major} pg_lease {}: durability attempt {attempt} inconclusive (the WAL \
                 writer wrote an asynchronous commit before the crash); repeating",
                target.version()
            );
            continue;
        }
        let mut found = Vec::new();
        for (w, state, kept) in states {
            let lsn = format!(
                "WAL insert position {} before the call and {} at its acknowledgement, \
                 flushed past it then: {}; written to {} and flushed to {} at the crash",
                w.before, w.after, w.flushed_at_ack, write_at_crash, flush_at_crash
            );
            if w.mode == Async::Release {
                let lost = state.as_ref().is_some_and(|i| {
                    i.held && i.owner.as_deref() == Some("owner-a") && i.epoch == w.epoch
                });
                found.push(decide(
                    format!(
                        "{}: the acknowledged release is lost in a crash and the epoch goes \
                         back from {} to {}",
                        w.mode.name(),
                        w.epoch + 1,
                        w.epoch
                    ),
                    lost,
                    kept && w.flushed_at_ack,
                    format!("after the crash inspect shows {state:?}; {lsn}"),
                )?);
            } else {
                found.push(decide(
                    format!(
                        "{}: the acknowledged grant (epoch {}) is lost in a crash",
                        w.mode.name(),
                        w.epoch
                    ),
                    state.is_none(),
                    kept && w.flushed_at_ack,
                    format!("after the crash inspect shows {state:?}; {lsn}"),
                )?);
                let second = acquire(&c, &w.key, "owner-b", "1 hour").await?;
                found.push(decide(
                    format!(
                        "{}: after the crash the acknowledged epoch {} is handed to a second owner",
                        w.mode.name(),
                        w.epoch
                    ),
                    matches!(&second, Acq::Granted { epoch, .. } if *epoch == w.epoch),
                    second == Acq::Denied,
                    format!("owner-b's acquire after the crash: {second:?}"),
                )?);
            }
        }
        return Ok(found);
    }
    Err(Fail::Infra(
        "3 attempts in a row had an asynchronous commit written by the WAL writer before the \
         crash: cannot tell whether 0.1.0 loses it"
            .into(),
    ))
}

async fn durability(major: u32, target: Target) -> R<Vec<Obs>> {
    durability_with(
        major,
        target,
        &[
            Async::Session,
            Async::Role,
            Async::Database,
            Async::SetLocalAfter,
            Async::Release,
        ],
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_never_loses_an_acknowledged_write_whatever_synchronous_commit_the_caller_sets() {
    run_all(
        "synchronous_commit = off",
        Duration::from_secs(90),
        durability,
    )
    .await;
}

/// The documented way around 0.2.0's durability (SEMANTICS.md section 8): its deferred
/// constraint trigger lifts synchronous_commit at COMMIT; `SET CONSTRAINTS ALL IMMEDIATE`
/// makes it fire at the end of the call instead, and a later `SET LOCAL
/// synchronous_commit = off` then decides the commit again: the acknowledged grant is lost
/// in a crash, as on 0.1.0. Run with `--ignored`, this check fails on 0.2.0 as stated.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "documented limitation (SEMANTICS.md section 8): SET CONSTRAINTS ALL IMMEDIATE, then synchronous_commit = off, defeats the durability trigger"]
async fn a_crash_never_loses_a_grant_committed_after_set_constraints_all_immediate() {
    run_all(
        "synchronous_commit = off after SET CONSTRAINTS ALL IMMEDIATE",
        Duration::from_secs(90),
        |major, target| durability_with(major, target, &[Async::ConstraintsImmediate]),
    )
    .await;
}

// ---------------------------------------------------------------------------------------
// (c) The clock is read under the row lock

/// What the transaction holding the key's row lock does, and how it ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Blocker {
    /// Writes the row and commits: the waiter's UPDATE is re-evaluated on the new version.
    CommittedWrite,
    /// Only locks the row (`SELECT ... FOR UPDATE`, as a lock-only holder does) and commits.
    LockOnly,
    /// Writes the row through the API and rolls back.
    RolledBackWrite,
}

impl Blocker {
    fn name(self) -> &'static str {
        match self {
            Blocker::CommittedWrite => "a transaction that writes the row and commits",
            Blocker::LockOnly => "a transaction that only locks the row (FOR UPDATE) and commits",
            Blocker::RolledBackWrite => "a transaction that writes the row and rolls back",
        }
    }

    fn end(self) -> &'static str {
        match self {
            Blocker::RolledBackWrite => "ROLLBACK",
            _ => "COMMIT",
        }
    }
}

/// A grant that waited for a row lock: the key is FREE; `s1` holds its row lock in an open
/// transaction (`blocker`; its writes are a grant and release by owner-x, so the key stays
/// FREE); s2's acquire probes FREE, tries to write and blocks; s1 ends. The grant must be
/// dated after the wait ended, i.e. after `released`, read by a monitor before s1's
/// COMMIT/ROLLBACK: causal, not a timing margin (the lock goes with that statement).
async fn grant_after_lock_wait(
    cluster: &Cluster,
    db: &str,
    c: &Client,
    blocker: Blocker,
) -> R<Obs> {
    let key = format!("clock-grant-{blocker:?}");
    let (e0, _) = granted(c, &key, "owner-a", "1 hour").await?;
    if release(c, &key, "owner-a", e0).await? != "ok" {
        return Err(unexpected("release before the grant race"));
    }
    let s1 = cluster.connect(db).await.map_err(infra)?;
    let s2 = cluster.connect(db).await.map_err(infra)?;
    let (p1, p2) = (backend_pid(&s1).await?, backend_pid(&s2).await?);
    exec(&s1, "BEGIN").await?;
    let mut x_granted = None;
    if blocker == Blocker::LockOnly {
        let table = lease_table(&s1).await?;
        query(
            &s1,
            &format!("SELECT 1 FROM {table} WHERE key = $1 FOR UPDATE"),
            &[&key],
        )
        .await?;
    } else {
        let (ex, x1) = granted(&s1, &key, "owner-x", "1 hour").await?;
        if release(&s1, &key, "owner-x", ex).await? != "ok" {
            return Err(unexpected("owner-x's release in the open transaction"));
        }
        x_granted = Some(x1 - chrono::Duration::hours(1));
    }
    let k2 = key.clone();
    let waiter = tokio::spawn(async move {
        let r = try_acquire(&s2, &k2, "owner-b", "1 hour", "0").await;
        (s2, r)
    });
    wait_blocked(c, p2, p1).await?;
    let blocked = now(c).await?;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let released = now(c).await?;
    exec(&s1, blocker.end()).await?;
    let (_s2, r) = waiter.await.map_err(infra)?;
    let r = r?.map_err(|e| unexpected(format!("the waiting acquire: {e}")))?;
    let Acq::Granted { epoch, expires_at } = r else {
        return Err(unexpected(format!(
            "the waiting acquire of the key left FREE: {r:?}"
        )));
    };
    let want_epoch = e0
        + if blocker == Blocker::CommittedWrite {
            4
        } else {
            2
        };
    if epoch != want_epoch {
        return Err(unexpected(format!(
            "the waiting acquire got epoch {epoch}, expected {want_epoch}"
        )));
    }
    let dated = expires_at - chrono::Duration::hours(1);
    let x = match x_granted {
        Some(t) => format!("owner-x's grant in the open transaction was dated {t}, "),
        None => String::new(),
    };
    decide(
        format!(
            "a grant that waited for the row lock of {} is dated before the wait ended",
            blocker.name()
        ),
        dated < released,
        dated > released,
        format!(
            "grant dated {dated} (expires_at - ttl); {x}the waiter was seen blocked at \
             {blocked}, the lock was released after {released}"
        ),
    )
}

/// A renew that waited for a row lock across the lease's expiry: `blocker` holds the key's
/// row lock; the holder's renew starts before expiry and blocks; the lease expires and
/// inspect says lapsed; the blocker ends. The renew must answer `lapsed` and the lease stay
/// lapsed. None: the renew was not seen blocked before the expiry (no evidence either way).
async fn renew_after_lock_wait(
    cluster: &Cluster,
    db: &str,
    c: &Client,
    blocker: Blocker,
    attempt: u32,
    ttl_ms: u64,
) -> R<Option<Obs>> {
    let key = format!("clock-renew-{blocker:?}-{attempt}");
    let (epoch, expires) = granted(c, &key, "owner-a", &format!("{ttl_ms} ms")).await?;
    let s1 = cluster.connect(db).await.map_err(infra)?;
    let s2 = cluster.connect(db).await.map_err(infra)?;
    let (p1, p2) = (backend_pid(&s1).await?, backend_pid(&s2).await?);
    exec(&s1, "BEGIN").await?;
    match blocker {
        // The superuser's UPDATE stands for any committed write that leaves the lease as
        // it was (no API call by another owner can write a live lease).
        Blocker::CommittedWrite => {
            let table = lease_table(&s1).await?;
            query(
                &s1,
                &format!("UPDATE {table} SET expires_at = expires_at WHERE key = $1"),
                &[&key],
            )
            .await?;
        }
        Blocker::LockOnly => {
            let table = lease_table(&s1).await?;
            query(
                &s1,
                &format!("SELECT 1 FROM {table} WHERE key = $1 FOR UPDATE"),
                &[&key],
            )
            .await?;
        }
        // The holder's own renew in another session, rolled back.
        Blocker::RolledBackWrite => {
            let (status, _) = renew(&s1, &key, "owner-a", epoch, "1 hour").await?;
            if status != "ok" {
                return Err(unexpected(format!("the blocker's renew: {status}")));
            }
        }
    }
    let k2 = key.clone();
    let waiter = tokio::spawn(async move {
        let r = try_renew(&s2, &k2, "owner-a", epoch, "1 hour").await;
        (s2, r)
    });
    wait_blocked(c, p2, p1).await?;
    let blocked = now(c).await?;
    if blocked >= expires {
        exec(&s1, "ROLLBACK").await?;
        let _ = waiter.await;
        return Ok(None);
    }
    let deadline = Instant::now() + Duration::from_millis(ttl_ms) + Duration::from_secs(10);
    while now(c).await? <= expires {
        if Instant::now() > deadline {
            return Err(Fail::Infra(
                "the server clock did not reach the expiry".into(),
            ));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let seen_lapsed = inspect(c, &key).await?;
    if !seen_lapsed
        .as_ref()
        .is_some_and(|i| !i.held && i.epoch == epoch)
    {
        return Err(unexpected(format!(
            "inspect after the expiry, while the renew waits: {seen_lapsed:?}, expected lapsed"
        )));
    }
    exec(&s1, blocker.end()).await?;
    let (_s2, r) = waiter.await.map_err(infra)?;
    let (status, new_expiry) = r?.map_err(|e| unexpected(format!("the waiting renew: {e}")))?;
    let after = inspect(c, &key).await?;
    Ok(Some(decide(
        format!(
            "a renew that started before expiry and waited for the row lock of {} past it \
             makes the lapsed lease held again with the same epoch",
            blocker.name()
        ),
        status == "ok" && after.as_ref().is_some_and(|i| i.held && i.epoch == epoch),
        status == "lapsed" && after.as_ref().is_some_and(|i| !i.held),
        format!(
            "renew answered {status} {new_expiry:?}; the lease expired at {expires}, the renew \
             was seen blocked at {blocked}, inspect said lapsed before the lock was released, \
             and after it shows {after:?}"
        ),
    )?))
}

async fn clock_under_lock_with(major: u32, target: Target, blockers: &[Blocker]) -> R<Vec<Obs>> {
    let cluster = shared_cluster(major)?;
    let (db, c) = target_db(cluster, "fix_clock", target).await?;
    let mut found = Vec::new();
    for &blocker in blockers {
        found.push(grant_after_lock_wait(cluster, &db, &c, blocker).await?);
        // The renew must start before the lease expires: 1.5 s leaves the machine that
        // long to start it (checked: it is seen blocked before the expiry), doubled on a
        // miss.
        let mut ttl_ms = 1500;
        let mut seen = None;
        for attempt in 1..=3 {
            seen = renew_after_lock_wait(cluster, &db, &c, blocker, attempt, ttl_ms).await?;
            if seen.is_some() {
                break;
            }
            ttl_ms *= 2;
        }
        found.push(seen.ok_or_else(|| {
            Fail::Infra(
                "in 3 attempts the renew was not blocked before the lease expired (machine too \
                 slow)"
                    .into(),
            )
        })?);
    }
    Ok(found)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_read_the_clock_under_the_row_lock() {
    run_all(
        "clock and row lock",
        Duration::from_secs(60),
        |major, target| clock_under_lock_with(major, target, &[Blocker::CommittedWrite]),
    )
    .await;
}

/// The clock is read under the row lock whatever the lock holder did: PostgreSQL re-evaluates
/// an UPDATE after a row-lock wait only when the holder committed a new version of the row,
/// so when the holder only locked the row, or wrote and rolled back, an UPDATE that read the
/// clock itself would go ahead with the values computed before the wait (an early 0.2.0 did:
/// a renew that started before expiry made a lease inspect had reported lapsed held again,
/// and a grant was dated before the wait ended, as on 0.1.0). 0.2.0 locks the row first,
/// then reads the clock.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_read_the_clock_under_the_row_lock_whatever_the_lock_holder_did() {
    run_all(
        "clock and row lock (lock-only and rolled-back holders)",
        Duration::from_secs(90),
        |major, target| {
            clock_under_lock_with(
                major,
                target,
                &[Blocker::LockOnly, Blocker::RolledBackWrite],
            )
        },
    )
    .await;
}

// ---------------------------------------------------------------------------------------
// (d) REPEATABLE READ and SERIALIZABLE: refused, never answered from a stale snapshot

fn refused<T>(r: &Result<T, ServerError>) -> bool {
    matches!(r, Err(e) if e.code == "55000")
}

/// Whether COMMIT succeeded (in an aborted transaction it rolls back, without an error).
async fn commit_ok(t: &Client) -> bool {
    t.batch_execute("COMMIT").await.is_ok()
}

async fn isolation(major: u32, target: Target) -> R<Vec<Obs>> {
    let cluster = shared_cluster(major)?;
    let (db, c) = target_db(cluster, "fix_isolation", target).await?;
    let mut found = Vec::new();
    for level in ["REPEATABLE READ", "SERIALIZABLE"] {
        let tag = level.to_lowercase().replace(' ', "-");
        let (stale, free) = (format!("stale-{tag}"), format!("free-{tag}"));
        let (e1, x1) = granted(&c, &stale, "owner-a", "1 hour").await?;
        let (f1, _) = granted(&c, &free, "owner-b", "1 hour").await?;
        // Three transactions whose snapshots predate the changes below.
        let mut old = Vec::new();
        for _ in 0..3 {
            let t = cluster.connect(&db).await.map_err(infra)?;
            exec(&t, &format!("BEGIN ISOLATION LEVEL {level}; SELECT 1")).await?;
            old.push(t);
        }
        if release(&c, &stale, "owner-a", e1).await? != "ok"
            || release(&c, &free, "owner-b", f1).await? != "ok"
        {
            return Err(unexpected("the releases before the stale calls"));
        }
        let (e3, _) = granted(&c, &stale, "owner-z", "1 hour").await?;
        let state = (inspect(&c, &stale).await?, inspect(&c, &free).await?);

        let r = try_acquire(&old[0], &stale, "owner-a", "1 hour", "0").await?;
        let ok = commit_ok(&old[0]).await;
        found.push(decide(
            format!(
                "{level}: acquire by owner-a answers acquired with its old epoch {e1} for a lease \
                 since released and granted to owner-z (epoch {e3}), and commits"
            ),
            ok && matches!(&r, Ok(Acq::Granted { epoch, expires_at }) if *epoch == e1 && *expires_at == x1),
            refused(&r),
            format!("{r:?}, commit succeeded: {ok}"),
        )?);
        let r = try_acquire(&old[1], &free, "owner-c", "1 hour", "0").await?;
        let ok = commit_ok(&old[1]).await;
        found.push(decide(
            format!("{level}: acquire of a FREE key is denied (from the snapshot), and commits"),
            ok && matches!(r, Ok(Acq::Denied)),
            refused(&r),
            format!("{r:?}, commit succeeded: {ok}"),
        )?);
        let r = try_inspect(&old[2], &stale).await?;
        let ok = commit_ok(&old[2]).await;
        found.push(decide(
            format!("{level}: inspect shows owner-a's released lease as held"),
            ok && matches!(&r, Ok(Some(i)) if i.held && i.owner.as_deref() == Some("owner-a")),
            refused(&r),
            format!("{r:?}, commit succeeded: {ok}"),
        )?);
        let after = (inspect(&c, &stale).await?, inspect(&c, &free).await?);
        found.push(obs(
            Rule::Never,
            format!("{level}: the calls changed lease state"),
            after != state,
            format!("before {state:?}, after {after:?}"),
        ));
    }
    Ok(found)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_outside_read_committed_are_refused_not_answered_from_a_stale_snapshot() {
    run_all("isolation levels", Duration::from_secs(60), isolation).await;
}

// ---------------------------------------------------------------------------------------
// (e) No wasted writes: WAL, XIDs and subtransactions

/// The WAL insert position (a private cluster: nothing else writes).
async fn insert_lsn(c: &Client) -> R<i64> {
    get(
        &one(
            c,
            "SELECT (pg_current_wal_insert_lsn() - '0/0'::pg_lsn)::bigint",
            &[],
        )
        .await?,
        0,
    )
}

/// Takes a new XID (its own autocommit transaction) and returns it.
async fn next_xid(c: &Client) -> R<i64> {
    get(
        &one(c, "SELECT pg_current_xact_id()::text::bigint", &[]).await?,
        0,
    )
}

/// XIDs the statement `sql` consumed, run in autocommit (or as `BEGIN; ...; COMMIT` text):
/// the XIDs taken between two `pg_current_xact_id()` calls, less the second call's own. In a
/// private cluster nothing else takes XIDs.
async fn xids_used(c: &Client, sql: &str) -> R<i64> {
    let before = next_xid(c).await?;
    exec(c, sql).await?;
    let after = next_xid(c).await?;
    Ok(after - before - 1)
}

/// Whether `sql` takes an XID (run in a transaction rolled back afterwards), then the WAL
/// bytes it inserts run in autocommit.
async fn wal_and_xid(c: &Client, sql: &str) -> R<(i64, bool)> {
    exec(c, "BEGIN").await?;
    exec(c, sql).await?;
    let xid: bool = get(
        &one(
            c,
            "SELECT pg_current_xact_id_if_assigned() IS NOT NULL",
            &[],
        )
        .await?,
        0,
    )?;
    exec(c, "ROLLBACK").await?;
    let l0 = insert_lsn(c).await?;
    exec(c, sql).await?;
    let l1 = insert_lsn(c).await?;
    Ok((l1 - l0, xid))
}

async fn no_wasted_writes(major: u32, target: Target) -> R<Vec<Obs>> {
    let cluster = private_cluster(major, target)?;
    let (_, c) = target_db(&cluster, "fix_writes", target).await?;
    let mut found = Vec::new();
    granted(&c, "held", "owner-a", "1 hour").await?;

    // The instrument: a grant (rolled back in the XID measurement) is seen writing.
    let (wal, xid) = wal_and_xid(
        &c,
        "SELECT * FROM lease.acquire('instrument', 'owner-a', interval '1 hour')",
    )
    .await?;
    found.push(obs(
        Rule::Control,
        "a grant writes WAL and takes an XID (the measures see writes)",
        wal > 0 && xid,
        format!("{wal} WAL bytes, XID taken: {xid}"),
    ));
    for (what, sql) in [
        (
            "denied acquire",
            "SELECT * FROM lease.acquire('held', 'owner-b', interval '1 hour')",
        ),
        (
            "idempotent re-acquire",
            "SELECT * FROM lease.acquire('held', 'owner-a', interval '1 hour')",
        ),
        (
            "idempotent re-acquire with a wait",
            "SELECT * FROM lease.acquire('held', 'owner-a', interval '1 hour', interval '5 s')",
        ),
        (
            "inspect of a held key",
            "SELECT * FROM lease.inspect('held')",
        ),
        (
            "inspect of a never-leased key",
            "SELECT * FROM lease.inspect('never')",
        ),
    ] {
        let (wal, xid) = wal_and_xid(&c, sql).await?;
        found.push(obs(
            Rule::Never,
            format!("{what} writes WAL or takes an XID"),
            wal != 0 || xid,
            format!("{wal} WAL bytes, XID taken: {xid}"),
        ));
    }

    // One XID per write, i.e. no subtransaction (which would take a second one).
    let n = xids_used(
        &c,
        "SELECT * FROM lease.acquire('grant', 'owner-a', interval '1 hour')",
    )
    .await?;
    found.push(decide(
        "a grant takes 2 XIDs (a subtransaction)",
        n == 2,
        n == 1,
        format!("{n} XIDs"),
    )?);
    let epoch: i64 = match inspect(&c, "grant").await? {
        Some(i) if i.held => i.epoch,
        other => return Err(unexpected(format!("inspect after the grant: {other:?}"))),
    };
    let n = xids_used(
        &c,
        &format!("SELECT * FROM lease.renew('grant', 'owner-a', {epoch}, interval '2 hours')"),
    )
    .await?;
    found.push(decide(
        "a renew takes 2 XIDs (a subtransaction)",
        n == 2,
        n == 1,
        format!("{n} XIDs"),
    )?);
    let n = xids_used(
        &c,
        &format!("SELECT * FROM lease.release('grant', 'owner-a', {epoch})"),
    )
    .await?;
    found.push(decide(
        "a release takes 2 XIDs (a subtransaction)",
        n == 2,
        n == 1,
        format!("{n} XIDs"),
    )?);
    if inspect(&c, "grant")
        .await?
        .is_none_or(|i| i.held || i.epoch != epoch + 1)
    {
        return Err(unexpected(
            "the renew and release of 'grant' did not take effect",
        ));
    }
    // 100 grants in one transaction: 100 subtransaction XIDs overflow the 64 a backend
    // caches (PGPROC_MAX_CACHED_SUBXIDS), so every snapshot then consults pg_subtrans.
    let n = xids_used(
        &c,
        "BEGIN; \
         SELECT count(*) FROM generate_series(1, 100) AS g, \
                lease.acquire('many-' || g, 'owner-a', interval '1 hour') AS a WHERE a.acquired; \
         COMMIT",
    )
    .await?;
    let granted_many: i64 = get(
        &one(
            &c,
            "SELECT count(*) FROM generate_series(1, 100) AS g, lease.inspect('many-' || g) AS i \
             WHERE i.held",
            &[],
        )
        .await?,
        0,
    )?;
    if granted_many != 100 {
        return Err(unexpected(format!(
            "{granted_many} of the 100 grants in one transaction hold"
        )));
    }
    found.push(decide(
        "100 grants in one transaction take 101 XIDs (100 subtransactions, past the 64 cached)",
        n == 101,
        n == 1,
        format!("{n} XIDs"),
    )?);
    // The one place 0.2.0 keeps a subtransaction: around a blocking acquire's write
    // attempt (wait > 0), so that a lost race drops its row lock before sleeping. Both
    // versions take 2 XIDs for a blocking grant.
    let n = xids_used(
        &c,
        "SELECT * FROM lease.acquire('blocking', 'owner-a', interval '1 hour', interval '5 s')",
    )
    .await?;
    found.push(obs(
        Rule::Never,
        "a blocking acquire's grant (wait > 0) takes other than 2 XIDs (one subtransaction)",
        n != 2,
        format!("{n} XIDs"),
    ));
    Ok(found)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reads_write_nothing_and_each_write_takes_one_xid_without_a_subtransaction() {
    run_all(
        "no wasted writes",
        Duration::from_secs(60),
        no_wasted_writes,
    )
    .await;
}

/// A non-blocking acquire that loses a race (its probe saw the key acquirable, its write
/// waited for another transaction's grant) is answered `denied` and keeps no row lock: the
/// holder's renew never waits for the denied caller's open transaction. 0.1.0 rolled the
/// attempt back in a subtransaction; 0.2.0 kept the lock (a regression, documented as a
/// trade-off, shown by `tests/fixes_0_3_0.rs`); 0.3.0 waits for the lock in a subtransaction
/// and rolls it back when it lost.
async fn denied_after_lost_race(major: u32, target: Target) -> R<Vec<Obs>> {
    let cluster = shared_cluster(major)?;
    let (db, c) = target_db(cluster, "fix_lost_race", target).await?;
    let mut found = Vec::new();
    let key = "lost-race";
    let (e0, _) = granted(&c, key, "owner-a", "1 hour").await?;
    if release(&c, key, "owner-a", e0).await? != "ok" {
        return Err(unexpected("release before the race"));
    }
    let x = cluster.connect(&db).await.map_err(infra)?;
    let y = cluster.connect(&db).await.map_err(infra)?;
    let (px, py) = (backend_pid(&x).await?, backend_pid(&y).await?);
    exec(&x, "BEGIN").await?;
    let (ex, _) = granted(&x, key, "owner-x", "1 hour").await?;
    exec(&y, "BEGIN").await?;
    let racer = tokio::spawn(async move {
        let r = try_acquire(&y, key, "owner-y", "1 hour", "0").await;
        (y, r)
    });
    wait_blocked(&c, py, px).await?;
    exec(&x, "COMMIT").await?;
    let (y, r) = racer.await.map_err(infra)?;
    let r = r?.map_err(|e| unexpected(format!("owner-y's acquire: {e}")))?;
    if r != Acq::Denied {
        return Err(unexpected(format!("owner-y's acquire after losing: {r:?}")));
    }
    // owner-y's transaction stays open. The holder's renew gets 1 s of lock waiting: a renew
    // that waits for no lock never reaches lock_timeout, one stalled by owner-y's open
    // transaction always does (the stall lasts as long as that transaction).
    exec(&x, "SET lock_timeout = '1s'").await?;
    let r = try_renew(&x, key, "owner-x", ex, "1 hour").await?;
    let stalled = matches!(&r, Err(e) if e.code == "55P03");
    found.push(obs(
        Rule::Never,
        "the holder's renew waits for the open transaction of a caller that was denied",
        stalled,
        format!("renew with lock_timeout = 1s: {r:?}"),
    ));
    exec(&y, "ROLLBACK").await?;
    // Control: a transaction that does hold the row lock stalls the renew the same way.
    exec(&y, "BEGIN").await?;
    let table = lease_table(&y).await?;
    query(
        &y,
        &format!("SELECT 1 FROM {table} WHERE key = $1 FOR UPDATE"),
        &[&key],
    )
    .await?;
    let r = try_renew(&x, key, "owner-x", ex, "1 hour").await?;
    found.push(obs(
        Rule::Control,
        "the holder's renew times out (55P03) while a transaction holds the key's row lock",
        matches!(&r, Err(e) if e.code == "55P03"),
        format!("{r:?}"),
    ));
    exec(&y, "ROLLBACK").await?;
    Ok(found)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_denied_acquire_that_lost_a_race_keeps_no_row_lock() {
    run_all(
        "denied acquire after a lost race",
        Duration::from_secs(60),
        denied_after_lost_race,
    )
    .await;
}

// ---------------------------------------------------------------------------------------
// (f) The validation helpers are inlined

async fn inlined_validation(major: u32, target: Target) -> R<Vec<Obs>> {
    let cluster = shared_cluster(major)?;
    let (_, c) = target_db(cluster, "fix_inline", target).await?;
    granted(&c, "held", "owner-a", "1 hour").await?;
    // track_functions = 'all' counts every executed SQL and PL function; a SQL function
    // the planner inlined into its caller is not executed, so it is not counted.
    exec(&c, "BEGIN; SET LOCAL track_functions = 'all'").await?;
    let n = 10;
    for _ in 0..n {
        if acquire(&c, "held", "owner-b", "1 hour").await? != Acq::Denied {
            return Err(unexpected(
                "owner-b's acquire of owner-a's lease was not denied",
            ));
        }
        acquire(&c, "held", "owner-a", "1 hour").await?;
        inspect(&c, "held").await?;
    }
    let rows = query(
        &c,
        "SELECT p.proname::text, s.calls FROM pg_stat_xact_user_functions AS s \
         JOIN pg_proc AS p ON p.oid = s.funcid \
         WHERE p.pronamespace = 'lease'::regnamespace ORDER BY 1",
        &[],
    )
    .await?;
    exec(&c, "ROLLBACK").await?;
    let mut counts = Vec::new();
    for row in &rows {
        counts.push((get::<String>(row, 0)?, get::<i64>(row, 1)?));
    }
    let count = |name: &str| {
        counts
            .iter()
            .find(|(p, _)| p == name)
            .map_or(0, |(_, n)| *n)
    };
    let (acquires, inspects) = (count("acquire"), count("inspect"));
    let others: Vec<&(String, i64)> = counts
        .iter()
        .filter(|(p, _)| p != "acquire" && p != "inspect")
        .collect();
    Ok(vec![
        obs(
            Rule::Never,
            "function calls are not counted (instrument: the API calls themselves must be)",
            !(acquires == 2 * n && inspects == n),
            format!(
                "acquire {acquires} (expected {}), inspect {inspects} (expected {n})",
                2 * n
            ),
        ),
        decide(
            format!(
                "{n} denied and {n} idempotent acquires and {n} inspects execute other lease \
                 functions (validation helpers not inlined)"
            ),
            !others.is_empty(),
            others.is_empty(),
            format!("executed: {counts:?}"),
        )?,
    ])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn validation_on_the_fast_path_is_inlined() {
    run_all(
        "inlined validation",
        Duration::from_secs(60),
        inlined_validation,
    )
    .await;
}

// ---------------------------------------------------------------------------------------
// (g) ttl arithmetic does not follow the caller's TimeZone

async fn timezone(major: u32, target: Target) -> R<Vec<Obs>> {
    let cluster = shared_cluster(major)?;
    let (_, c) = target_db(cluster, "fix_timezone", target).await?;
    exec(&c, "SET TimeZone = 'America/New_York'").await?;
    // The fewest whole days n for which PostgreSQL's calendar arithmetic in New York
    // (t + n days) differs from n x 24 h, and by how much: a span holding a DST
    // transition. The server is the oracle: when t's time of day falls in the hour a
    // transition skips or repeats, t + n days lands in that hour and can equal n x 24 h
    // (so the span holding the change is not enough); both t and t + 10 min must differ
    // so the calls made within seconds of this query see the same n.
    let row = one(
        &c,
        "SELECT n, pg_catalog.date_part('epoch', \
                   (t + n * interval '1 day') - (t + n * interval '24 hours'))::bigint \
         FROM (SELECT pg_catalog.clock_timestamp() AS t) AS now, \
              pg_catalog.generate_series(1, 400) AS n \
         WHERE t + n * interval '1 day' <> t + n * interval '24 hours' \
           AND t + interval '10 minutes' + n * interval '1 day' \
               <> t + interval '10 minutes' + n * interval '24 hours' \
         ORDER BY n LIMIT 1",
        &[],
    )
    .await?;
    let (days, shift): (i32, i64) = (get(&row, 0)?, get(&row, 1)?);
    if shift.abs() != 3600 {
        return Err(Fail::Infra(format!(
            "America/New_York's calendar days differ from 24 h days by {shift} s over {days} days: the tz data is odd"
        )));
    }
    let exact = chrono::Duration::hours(24 * days as i64);
    let calendar = exact + chrono::Duration::seconds(shift);
    let ttl = format!("{days} days");
    let mut found = Vec::new();
    // The call's instant t lies in [t0, t1]; expires_at - t lies in [exp - t1, exp - t0],
    // which is well under the 1 h between the two candidate answers (checked).
    let judge_span = |what: String, t0: DateTime<Utc>, t1: DateTime<Utc>, exp: DateTime<Utc>| {
        if t1 - t0 >= chrono::Duration::minutes(30) {
            return Err(Fail::Infra(format!(
                "{what}: the call took {} (over 30 min)",
                t1 - t0
            )));
        }
        let within = |d: chrono::Duration| exp - t1 <= d && d <= exp - t0;
        decide(
            what,
            within(calendar),
            within(exact),
            format!(
                "expires_at - t in [{}, {}]; {days} x 24 h = {exact}, calendar days in New York = {calendar}",
                exp - t1,
                exp - t0
            ),
        )
    };
    let t0 = now(&c).await?;
    let (epoch, exp) = granted(&c, "dst", "owner-a", &ttl).await?;
    let t1 = now(&c).await?;
    found.push(judge_span(
        format!("acquire with ttl '{ttl}' across a DST change under TimeZone America/New_York expires after {days} calendar days, not {days} x 24 h"),
        t0,
        t1,
        exp,
    )?);
    let t0 = now(&c).await?;
    let (status, exp) = renew(&c, "dst", "owner-a", epoch, &ttl).await?;
    let t1 = now(&c).await?;
    let exp = exp.ok_or_else(|| unexpected(format!("renew answered {status} without expiry")))?;
    found.push(judge_span(
        format!("renew with ttl '{ttl}' likewise"),
        t0,
        t1,
        exp,
    )?);
    Ok(found)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ttl_arithmetic_does_not_follow_the_callers_timezone() {
    run_all("TimeZone", Duration::from_secs(60), timezone).await;
}

// ---------------------------------------------------------------------------------------
// (h) Errors: the wait's 57014, lock_timeout's 55P03, and a HINT that names no file

/// Whether a HINT names a file: a word with a path separator or a file extension.
fn names_a_file(hint: &str) -> bool {
    hint.split_whitespace().any(|w| {
        let w = w.trim_end_matches(['.', ',', ';', ':', ')']);
        w.contains('/')
            || [".md", ".sql", ".txt", ".html", ".control", ".rst"]
                .iter()
                .any(|ext| w.ends_with(ext))
    })
}

async fn errors(major: u32, target: Target) -> R<Vec<Obs>> {
    let cluster = shared_cluster(major)?;
    let (db, c) = target_db(cluster, "fix_errors", target).await?;
    let mut found = Vec::new();

    // Wait exhaustion: 57014 with the documented message; a statement_timeout during a
    // wait is 57014 with another message (the message is what tells them apart).
    granted(&c, "busy", "owner-a", "1 hour").await?;
    let r = try_acquire(&c, "busy", "owner-b", "1 hour", "300 ms").await?;
    found.push(obs(
        Rule::Never,
        "an exhausted wait is not 57014 'lease.acquire: wait of ... exhausted: the key is still held by another owner'",
        !matches!(&r, Err(e) if e.code == "57014"
            && e.message.starts_with("lease.acquire: wait of ")
            && e.message.ends_with(" exhausted: the key is still held by another owner")),
        format!("{r:?}"),
    ));
    exec(&c, "SET statement_timeout = '200ms'").await?;
    let r = try_acquire(&c, "busy", "owner-b", "1 hour", "10 s").await?;
    exec(&c, "RESET statement_timeout").await?;
    found.push(obs(
        Rule::Never,
        "a statement_timeout during a wait is not a 57014 distinct from the wait's",
        !matches!(&r, Err(e) if e.code == "57014" && !e.message.starts_with("lease.acquire: wait of ")),
        format!("{r:?}"),
    ));

    // lock_timeout firing while a blocking acquire waits for a row lock: 55P03, no change.
    let key = "locked";
    let (e0, _) = granted(&c, key, "owner-a", "1 hour").await?;
    if release(&c, key, "owner-a", e0).await? != "ok" {
        return Err(unexpected("release of 'locked'"));
    }
    let before = inspect(&c, key).await?;
    let blocker = cluster.connect(&db).await.map_err(infra)?;
    let waiter = cluster.connect(&db).await.map_err(infra)?;
    let (pb, pw) = (backend_pid(&blocker).await?, backend_pid(&waiter).await?);
    exec(&blocker, "BEGIN").await?;
    let (ex, _) = granted(&blocker, key, "owner-x", "1 hour").await?;
    if release(&blocker, key, "owner-x", ex).await? != "ok" {
        return Err(unexpected("owner-x's release in the open transaction"));
    }
    exec(&waiter, "SET lock_timeout = '300ms'").await?;
    let r = try_acquire(&waiter, key, "owner-b", "1 hour", "10 s").await?;
    exec(&blocker, "ROLLBACK").await?;
    let after = inspect(&c, key).await?;
    found.push(obs(
        Rule::Never,
        "lock_timeout firing in a blocking acquire's row-lock wait is not 55P03 with nothing changed",
        !(matches!(&r, Err(e) if e.code == "55P03") && after == before),
        format!("{r:?}; the key before {before:?}, after {after:?}"),
    ));
    // Control of the scenario: without lock_timeout the same acquire waits for the row lock
    // and is granted once the blocker rolls back.
    exec(&waiter, "RESET lock_timeout").await?;
    exec(&blocker, "BEGIN").await?;
    let (ex, _) = granted(&blocker, key, "owner-x", "1 hour").await?;
    if release(&blocker, key, "owner-x", ex).await? != "ok" {
        return Err(unexpected("owner-x's release in the open transaction"));
    }
    let task = tokio::spawn(async move {
        let r = try_acquire(&waiter, key, "owner-b", "1 hour", "10 s").await;
        (waiter, r)
    });
    wait_blocked(&c, pw, pb).await?;
    exec(&blocker, "ROLLBACK").await?;
    let (_waiter, r) = task.await.map_err(infra)?;
    let r = r?;
    found.push(obs(
        Rule::Never,
        "without lock_timeout the acquire that waited for the row lock is not granted once the blocker rolls back",
        !matches!(&r, Ok(Acq::Granted { epoch, .. }) if Some(*epoch) == before.as_ref().map(|i| i.epoch + 1)),
        format!("{r:?}"),
    ));

    // Invalid input: 22023 with a HINT that names no file.
    for sql in [
        "SELECT * FROM lease.acquire(NULL, 'o', interval '1 hour')",
        "SELECT * FROM lease.renew('k', 'o', NULL, interval '1 hour')",
        "SELECT * FROM lease.release('', 'o', 1)",
        "SELECT * FROM lease.inspect(NULL)",
    ] {
        let r = try_query(&c, sql, &[]).await?;
        let Err(e) = r else {
            return Err(unexpected(format!("{sql}: answered, expected 22023")));
        };
        if e.code != "22023" {
            return Err(unexpected(format!("{sql}: {e}, expected 22023")));
        }
        found.push(decide(
            format!("{}: the 22023 HINT names a file", short(sql)),
            names_a_file(&e.hint),
            !e.hint.is_empty() && !names_a_file(&e.hint),
            format!("HINT: {:?}", e.hint),
        )?);
    }
    Ok(found)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn errors_are_the_documented_ones_and_hints_name_no_file() {
    run_all("errors", Duration::from_secs(60), errors).await;
}

#[test]
fn a_hint_names_a_file_when_it_has_a_path_or_a_file_extension() {
    assert!(names_a_file(
        "No lease state was changed. See specs/SEMANTICS.md for the input limits."
    ));
    assert!(names_a_file("see README.md."));
    assert!(!names_a_file(
        "No lease state was changed. Keys and owners must be 1 to 1024 bytes; ttl must be \
         positive and wait not negative, each at most 100 years with no negative field."
    ));
}
