//! The lease table's committed changes, from a logical decoding slot (`test_decoding`, which
//! ships with the server): opened before a campaign's first call, read after its sessions
//! ended, so every call whose answer was lost has either committed by then or never will.
//! Slots are durable, so crashes and restarts in between lose nothing. The commits become
//! the history's wal line (specs/HISTORY.md), which the checker resolves lost calls with.

use model::history::OpId;
use model::history::{WalChange, WalCommit, WalEnded, WalLog, WalRow, WalWriter};
use model::OpResult;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};
use tokio_postgres::{Client, NoTls};

/// Why the changes could not be decoded.
#[derive(Debug, thiserror::Error)]
pub enum WalError {
    /// The server cannot decode (its `wal_level`, the role's privileges): said, not fatal.
    #[error("the write-ahead log cannot be decoded here: {0}")]
    Unavailable(String),
    #[error("decoding the write-ahead log failed: {0}")]
    Server(String),
    /// A session's backend was still running after the wait: a lost call might yet commit.
    #[error("backend {0} of the campaign was still running {1:?} after its end")]
    StillRunning(i32, Duration),
}

impl From<tokio_postgres::Error> for WalError {
    fn from(e: tokio_postgres::Error) -> WalError {
        WalError::Server(super::describe(&e))
    }
}

/// A slot decoding the lease table, open since before the first call.
pub struct Decoding {
    config: tokio_postgres::Config,
    slot: String,
    table: String,
}

/// The name of the text plugin.
const PLUGIN: &str = "test_decoding";
/// How long a session's backend may take to end after the campaign; then it is terminated.
const BACKEND_GRACE: Duration = Duration::from_secs(2);

async fn connect(config: &tokio_postgres::Config) -> Result<Client, tokio_postgres::Error> {
    let (client, connection) = config.connect(NoTls).await?;
    tokio::spawn(async move {
        let _ = connection.await;
    });
    Ok(client)
}

impl Decoding {
    /// Opens a slot on the database `config` names, when the server allows it.
    pub async fn start(config: tokio_postgres::Config) -> Result<Decoding, WalError> {
        let client = connect(&config).await?;
        let row = client
            .query_one(
                "SELECT pg_catalog.current_setting('wal_level'), \
                 (SELECT r.rolsuper OR r.rolreplication FROM pg_catalog.pg_roles AS r \
                   WHERE r.rolname = CURRENT_USER)",
                &[],
            )
            .await?;
        let level: String = row.get(0);
        if level != "logical" {
            return Err(WalError::Unavailable(format!(
                "wal_level is {level}, not logical (set wal_level = logical and restart the \
                 server to resolve lost calls exactly)"
            )));
        }
        if !row.get::<_, Option<bool>>(1).unwrap_or(false) {
            return Err(WalError::Unavailable(
                "the role has neither SUPERUSER nor REPLICATION, which a slot needs".into(),
            ));
        }
        let table = crate::extension::lease_table(&client).await?;
        if !persistent(&client, &table).await? {
            return Err(WalError::Unavailable(format!(
                "{table} is not WAL-logged (UNLOGGED): its changes cannot be decoded"
            )));
        }
        let slot = format!(
            "leasecheck_{}_{}",
            std::process::id(),
            chrono::Utc::now().timestamp_micros()
        );
        client
            .execute(
                "SELECT pg_catalog.pg_create_logical_replication_slot($1, $2)",
                &[&slot, &PLUGIN],
            )
            .await?;
        Ok(Decoding {
            config,
            slot,
            table,
        })
    }

    /// Waits until the backends `pids` have ended (terminating any still there after a
    /// grace), reads every commit since the slot opened, claims each by the xids `claims`
    /// gives, adds the lost calls' `ended` bounds, and drops the slot.
    pub async fn read(
        self,
        pids: &[i32],
        claims: &BTreeMap<u32, WalWriter>,
        ended: Vec<WalEnded>,
        xids_reused: bool,
    ) -> Result<WalLog, WalError> {
        let client = connect(&self.config).await?;
        let read = async {
            sessions_ended(&client, pids).await?;
            let mut log = self.commits(&client, claims).await?;
            log.ended = ended;
            if xids_reused {
                log.unreadable.push(
                    "transaction ids were handed out again after a restart that lost commits: \
                     an id no longer names one call"
                        .into(),
                );
            }
            if !self.logged(&client).await? {
                log.unreadable.push(format!(
                    "{} is not WAL-logged (UNLOGGED): its changes are not decoded",
                    self.table
                ));
            }
            Ok::<WalLog, WalError>(log)
        };
        let log = read.await;
        let dropped = client
            .execute(
                "SELECT pg_catalog.pg_drop_replication_slot($1)",
                &[&self.slot],
            )
            .await;
        let log = log?;
        dropped?;
        Ok(log)
    }

    /// Whether the table is still WAL-logged (a build may make it UNLOGGED meanwhile).
    async fn logged(&self, client: &Client) -> Result<bool, WalError> {
        persistent(client, &self.table).await
    }

    /// Drops the slot without reading it (a campaign that stopped early).
    pub async fn abandon(self) {
        if let Ok(client) = connect(&self.config).await {
            let _ = client
                .execute(
                    "SELECT pg_catalog.pg_drop_replication_slot($1)",
                    &[&self.slot],
                )
                .await;
        }
    }

    async fn commits(
        &self,
        client: &Client,
        claims: &BTreeMap<u32, WalWriter>,
    ) -> Result<WalLog, WalError> {
        let rows = client
            .query(
                "SELECT xid::text, data FROM pg_catalog.pg_logical_slot_get_changes(\
                 $1, NULL, NULL, 'include-xids', '1', 'skip-empty-xacts', '1')",
                &[&self.slot],
            )
            .await?;
        let prefix = format!("table {}: ", self.table);
        let mut log = WalLog {
            table: self.table.clone(),
            ..WalLog::default()
        };
        let mut open: Option<(u32, BTreeMap<String, Option<Raw>>)> = None;
        let mut raw_commits = Vec::new();
        for row in rows {
            let xid: u32 = row.get::<_, String>(0).parse().unwrap_or(0);
            let data: String = row.get(1);
            if data.starts_with("BEGIN") {
                open = Some((xid, BTreeMap::new()));
            } else if data.starts_with("COMMIT") {
                if let Some((xid, changes)) = open.take() {
                    if !changes.is_empty() {
                        raw_commits.push((xid, changes));
                    }
                }
            } else if let Some(change) = data.strip_prefix(&prefix) {
                match (parse_change(change), open.as_mut()) {
                    (Some((key, raw)), Some((_, changes))) => {
                        changes.insert(key, raw);
                    }
                    _ => log.unreadable.push(data.clone()),
                }
            }
        }
        let expiries = instants(client, &raw_commits).await?;
        let unreadable_expiry = raw_commits
            .iter()
            .flat_map(|(_, changes)| changes.values().flatten())
            .any(|raw| {
                raw.expires_at
                    .as_ref()
                    .is_some_and(|t| expiries.get(t).copied().flatten().is_none())
            });
        for (xid, changes) in raw_commits {
            let changes = changes
                .into_iter()
                .map(|(key, raw)| WalChange {
                    key,
                    row: raw.map(|r| r.row(&expiries)),
                })
                .collect();
            log.commits.push(WalCommit {
                xid: u64::from(xid),
                by: claims.get(&xid).copied(),
                changes,
            });
        }
        let committed: std::collections::BTreeSet<u32> =
            log.commits.iter().map(|c| c.xid as u32).collect();
        log.absent = claims
            .iter()
            .filter(|(xid, w)| matches!(w, WalWriter::Txn(_)) && !committed.contains(xid))
            .map(|(_, w)| *w)
            .collect();
        if unreadable_expiry {
            log.unreadable
                .push("an expires_at that is not a finite timestamp".into());
        }
        Ok(log)
    }
}

/// Whether `table` is a permanent (WAL-logged) table: only those are decoded.
async fn persistent(client: &Client, table: &str) -> Result<bool, WalError> {
    let row = client
        .query_one(
            "SELECT c.relpersistence = 'p' FROM pg_catalog.pg_class AS c \
              WHERE c.oid = $1::text::pg_catalog.regclass",
            &[&table],
        )
        .await?;
    Ok(row.get(0))
}

/// Waits until none of `pids` is a backend of the server (up to [`BACKEND_GRACE`]), then
/// terminates those left and waits for them as long again.
async fn sessions_ended(client: &Client, pids: &[i32]) -> Result<(), WalError> {
    for terminate in [false, true] {
        if terminate {
            client
                .execute(
                    "SELECT pg_catalog.pg_terminate_backend(pid) FROM pg_catalog.pg_stat_activity \
                      WHERE pid = ANY($1) AND pid <> pg_catalog.pg_backend_pid()",
                    &[&pids],
                )
                .await?;
        }
        let deadline = Instant::now() + BACKEND_GRACE;
        loop {
            match still_running(client, pids).await? {
                None => return Ok(()),
                Some(pid) if Instant::now() >= deadline && terminate => {
                    return Err(WalError::StillRunning(pid, BACKEND_GRACE * 2))
                }
                Some(_) if Instant::now() >= deadline => break,
                Some(_) => tokio::time::sleep(Duration::from_millis(20)).await,
            }
        }
    }
    Ok(())
}

/// The lowest of `pids` still a backend of the server (other than the asking one).
async fn still_running(client: &Client, pids: &[i32]) -> Result<Option<i32>, WalError> {
    let row = client
        .query_one(
            "SELECT min(pid) FROM pg_catalog.pg_stat_activity \
              WHERE pid = ANY($1) AND pid <> pg_catalog.pg_backend_pid()",
            &[&pids],
        )
        .await?;
    Ok(row.get(0))
}

/// A decoded row before its expiry is read as an instant: the expiry's text, if not null.
struct Raw {
    owner: Option<String>,
    epoch: i64,
    expires_at: Option<String>,
}

impl Raw {
    /// The row, with its expiry looked up (none for one the server did not read as a finite
    /// instant: such an expiry makes the whole log unreadable, see `commits`).
    fn row(self, expiries: &BTreeMap<String, Option<i64>>) -> WalRow {
        WalRow {
            owner: self.owner,
            epoch: self.epoch,
            expires_at: self
                .expires_at
                .and_then(|t| expiries.get(&t).copied().flatten()),
        }
    }
}

/// Every expiry's text as Unix microseconds, read by the server that wrote it (in the
/// session's own DateStyle, which decoding used).
async fn instants(
    client: &Client,
    commits: &[(u32, BTreeMap<String, Option<Raw>>)],
) -> Result<BTreeMap<String, Option<i64>>, WalError> {
    let texts: Vec<String> = commits
        .iter()
        .flat_map(|(_, changes)| changes.values())
        .filter_map(|raw| raw.as_ref().and_then(|r| r.expires_at.clone()))
        .collect();
    if texts.is_empty() {
        return Ok(BTreeMap::new());
    }
    let rows = client
        .query(
            "SELECT v, CASE WHEN pg_catalog.isfinite(v::timestamptz) \
                 THEN (EXTRACT(epoch FROM v::timestamptz) * 1000000)::bigint END \
               FROM pg_catalog.unnest($1::text[]) AS u(v)",
            &[&texts],
        )
        .await?;
    Ok(rows.iter().map(|r| (r.get(0), r.get(1))).collect())
}

/// One change line after `table NAME: `: its key and the row after it (`None`: deleted);
/// `None` when it is not a change this reader knows.
fn parse_change(text: &str) -> Option<(String, Option<Raw>)> {
    let (action, rest) = text.split_once(": ")?;
    let rest = rest.rsplit_once("new-tuple: ").map_or(rest, |(_, new)| new);
    let columns = columns(rest)?;
    let text_of = |name: &str| columns.get(name).cloned();
    let key = text_of("key")??;
    match action {
        "DELETE" => Some((key, None)),
        "INSERT" | "UPDATE" => {
            let epoch = text_of("epoch")??.parse().ok()?;
            let raw = Raw {
                owner: text_of("owner")?,
                epoch,
                expires_at: text_of("expires_at")?,
            };
            Some((key, Some(raw)))
        }
        _ => None,
    }
}

/// `name[type]:value ...` as name -> value (`None` for `null`); `None` when malformed.
fn columns(mut text: &str) -> Option<BTreeMap<String, Option<String>>> {
    let mut out = BTreeMap::new();
    loop {
        text = text.trim_start();
        if text.is_empty() {
            return Some(out);
        }
        let open = text.find('[')?;
        let name = text[..open].to_string();
        let close = open + text[open..].find("]:")?;
        text = &text[close + 2..];
        let (value, rest) = value(text)?;
        out.insert(name, value);
        text = rest;
    }
}

/// One value at the start of `text`: quoted (`'..'`, quotes doubled inside), `null`, or a
/// bare word; the rest of the text.
fn value(text: &str) -> Option<(Option<String>, &str)> {
    if let Some(quoted) = text.strip_prefix('\'') {
        let mut out = String::new();
        let mut chars = quoted.char_indices();
        while let Some((i, c)) = chars.next() {
            if c != '\'' {
                out.push(c);
                continue;
            }
            if quoted[i + 1..].starts_with('\'') {
                out.push('\'');
                chars.next();
                continue;
            }
            return Some((Some(out), &quoted[i + 1..]));
        }
        return None;
    }
    let end = text.find(' ').unwrap_or(text.len());
    let word = &text[..end];
    let value = (word != "null").then(|| word.to_string());
    Some((value, &text[end..]))
}

/// The recorder's part in decoding: which record each transaction id is, which backends
/// its sessions used, and when a lost call's backend was seen gone.
impl super::Recorder {
    /// Watches backend `pid`, whose call `op` lost its answer with its connection, for up
    /// to a second on a fresh connection: once it is gone, the server time by which it was
    /// is a bound on when the call took effect, if it did (the history's wal line keeps it).
    pub(super) async fn watch_end(&self, op: OpId, pid: i32) {
        let watch = async {
            let (client, connection) = self.direct.connect(tokio_postgres::NoTls).await.ok()?;
            tokio::spawn(async move {
                let _ = connection.await;
            });
            let deadline = Instant::now() + Duration::from_secs(1);
            while Instant::now() < deadline {
                let row = client
                    .query_one(super::sql::BACKEND_GONE, &[&pid])
                    .await
                    .ok()?;
                if let Some(by) = row.get::<_, Option<chrono::DateTime<chrono::Utc>>>(0) {
                    return Some(by.timestamp_micros());
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            None
        };
        let limit = self.call_timeout + Duration::from_secs(1);
        if let Ok(Some(by)) = tokio::time::timeout(limit, watch).await {
            let mut ended = self.ended.lock().unwrap_or_else(|p| p.into_inner());
            ended.push(WalEnded {
                op,
                by,
                seen_ns: self.now(),
            });
        }
    }

    /// The lost calls whose backend was seen gone.
    pub fn ended(&self) -> Vec<WalEnded> {
        self.ended.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// The transaction id `xid` (an `xid8` as text) is `writer`'s.
    pub(super) fn claim(&self, xid: &str, writer: WalWriter) {
        let Ok(xid) = xid.parse::<u64>() else {
            return;
        };
        let xid = xid as u32;
        let generation = self.generation();
        let mut highest = self.highest_xid.lock().unwrap_or_else(|p| p.into_inner());
        // Ids only grow while a server runs; one at or below an id of before a restart was
        // handed out again: the restart lost commits, and an id no longer names one record.
        if highest.range(..generation).any(|(_, &h)| h >= xid) {
            self.xids_reused
                .store(true, std::sync::atomic::Ordering::SeqCst);
        }
        let top = highest.entry(generation).or_insert(xid);
        *top = (*top).max(xid);
        let mut claims = self.claims.lock().unwrap_or_else(|p| p.into_inner());
        claims.insert(xid, writer);
    }

    /// Whether a transaction id was handed out again after a restart (see `claim`).
    pub fn xids_reused(&self) -> bool {
        self.xids_reused.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Every transaction id an answer reported, and whose it is.
    pub fn claims(&self) -> BTreeMap<u32, WalWriter> {
        self.claims
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// The backend pids of the sessions' connections opened since the latest restart (the
    /// earlier ones ended with it).
    pub fn live_backends(&self) -> Vec<i32> {
        let generation = self.generation();
        let backends = self.backends.lock().unwrap_or_else(|p| p.into_inner());
        backends
            .iter()
            .filter(|(_, g)| *g == generation)
            .map(|(pid, _)| *pid)
            .collect()
    }

    /// Adds the lease table's decoded commits to the history (its wal line).
    pub fn record_wal(&self, wal: WalLog) -> Result<(), super::RecorderError> {
        self.with_store(|s| s.wal(wal))
    }
}

/// Whether `result` is a call's answer lost with its connection (not a client timeout: the
/// backend then still runs the call, which the recorder cancelled).
pub(super) fn lost_with_connection(result: &OpResult) -> bool {
    match result {
        OpResult::Unknown { reason } => !reason.starts_with(super::CLIENT_TIMEOUT),
        OpResult::Fail { .. } => result.is_unknown(),
        OpResult::Ok(_) => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn change_lines_are_read_with_their_quoting() {
        let (key, raw) = parse_change(
            "UPDATE: key[text]:'it''s k' owner[text]:'o w' epoch[bigint]:3 \
             expires_at[timestamp with time zone]:'2026-12-07 16:30:00.123456+00'",
        )
        .expect("a change");
        assert_eq!(key, "it's k");
        let raw = raw.expect("a row");
        assert_eq!(raw.owner.as_deref(), Some("o w"));
        assert_eq!(raw.epoch, 3);
        assert_eq!(
            raw.expires_at.as_deref(),
            Some("2026-12-07 16:30:00.123456+00")
        );
        let (_, freed) = parse_change(
            "UPDATE: key[text]:'k' owner[text]:null epoch[bigint]:4 \
             expires_at[timestamp with time zone]:null",
        )
        .expect("a change");
        let freed = freed.expect("a row");
        assert_eq!((freed.owner, freed.expires_at), (None, None));
        assert!(matches!(
            parse_change("DELETE: key[text]:'k'"),
            Some((_, None))
        ));
        assert!(parse_change("TRUNCATE: (no-flags)").is_none());
        assert!(parse_change("UPDATE: key[text]:'unterminated").is_none());
    }
}
