//! What the attack-surface suite attacks: a database owned by the installing role, with the
//! threat roles, seeded lease state, an anchor transaction holding the locks lease calls
//! take, a background workload, and the probes and digests that judge a statement.

use super::{Role, BOUND};
use crate::client::{self, Acquire, Status};
use crate::pg::{quote_ident, Cluster};
use crate::security::{table_rows, LeaseRow, SecurityError};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio_postgres::Client;

static NEXT_WORLD: AtomicU64 = AtomicU64::new(1);

/// The keys the seeded state consists of: (key, owner) held for a day, released, and held by
/// another owner. No statement of the suite may change them.
const SEEDED: [&str; 3] = ["s-held", "s-free", "s-other"];

/// A key of the seeded state an internal helper's call would reach (FREE: a helper that
/// took it would change it).
pub const SEEDED_FREE: &str = "s-free";

/// A key or owner of 1024 pseudo-random hex digits: with a key and an owner of such, a row
/// PostgreSQL must store out of line (in the TOAST table: pglz cannot shrink such text
/// enough). A xorshift stream seeded by the prefix and the clock.
fn big(prefix: &str) -> String {
    let mut x = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(1, |d| d.as_nanos() as u64)
        | 1;
    for b in prefix.bytes() {
        x = x.rotate_left(5) ^ u64::from(b);
    }
    let mut s = String::from(prefix);
    while s.len() < 1024 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        s.push_str(&format!("{x:016x}"));
    }
    s.truncate(1024);
    s
}

/// One lease call of the background workload, as it ended.
#[derive(Debug, Clone)]
pub struct Record {
    pub call: &'static str,
    pub took: Duration,
    /// What was wrong with it (a wrong answer, an error), if anything.
    pub wrong: Option<String>,
}

/// The roles of the world, by threat role, and the workload's own.
pub struct Roles {
    pub app: String,
    pub other: String,
    pub owner: String,
    pub user: String,
}

impl Roles {
    pub fn of(&self, role: Role) -> &str {
        match role {
            Role::App => &self.app,
            Role::Other => &self.other,
            Role::Owner => &self.owner,
        }
    }

    /// A schema `role` may create objects in.
    pub fn own_schema(&self, role: Role) -> String {
        match role {
            Role::App => "pg_temp".to_string(),
            other => quote_ident(&format!("{}_own", self.of(other))),
        }
    }
}

/// A fresh database with the build installed by its owner, seeded, anchored and under load.
pub struct World<'a> {
    pub cluster: &'a Cluster,
    pub extension: String,
    pub db: String,
    pub roles: Roles,
    pub su: Client,
    anchor: Client,
    probe: Client,
    stop: Arc<AtomicBool>,
    records: Arc<Mutex<Vec<Record>>>,
    workers: Vec<tokio::task::JoinHandle<()>>,
    /// The digest and the seeded rows as the world was built.
    pub digest: Vec<String>,
    pub seeded: Vec<LeaseRow>,
}

impl<'a> World<'a> {
    /// Builds the world: roles, database, extension, seeded state, anchor, workload.
    pub async fn build(cluster: &'a Cluster, extension: &str) -> Result<World<'a>, SecurityError> {
        let n = NEXT_WORLD.fetch_add(1, Ordering::Relaxed);
        let tag = format!("surf{}_{n}", std::process::id());
        let roles = Roles {
            app: format!("{tag}_app"),
            other: format!("{tag}_other"),
            owner: format!("{tag}_owner"),
            user: format!("{tag}_user"),
        };
        let db = format!("{tag}_db");
        let admin = cluster.connect("postgres").await?;
        for r in [&roles.app, &roles.other, &roles.owner, &roles.user] {
            admin
                .batch_execute(&format!("CREATE ROLE {} LOGIN", quote_ident(r)))
                .await?;
        }
        admin
            .batch_execute(&format!(
                "CREATE DATABASE {} OWNER {}",
                quote_ident(&db),
                quote_ident(&roles.owner)
            ))
            .await?;
        let connect = |role: String, db: String| async move {
            let mut config = cluster.config(&db);
            config.user(&role);
            let (c, conn) = config.connect(tokio_postgres::NoTls).await?;
            tokio::spawn(async move {
                let _ = conn.await;
            });
            Ok::<Client, SecurityError>(c)
        };
        let owner = connect(roles.owner.clone(), db.clone()).await?;
        owner
            .batch_execute(&format!("CREATE EXTENSION {}", quote_ident(extension)))
            .await?;
        let su = cluster.connect(&db).await?;
        for role in [Role::Other, Role::Owner] {
            su.batch_execute(&format!(
                "CREATE SCHEMA {} AUTHORIZATION {}",
                roles.own_schema(role),
                quote_ident(roles.of(role))
            ))
            .await?;
        }
        let user = connect(roles.user.clone(), db.clone()).await?;
        seed(&user).await?;
        let anchor = connect(roles.user.clone(), db.clone()).await?;
        // Its session's first write (which creates the session's guard against PREPARE,
        // catalog rows) is committed first: the open transaction holds lease-table locks only.
        client::acquire(&anchor, "anchor-first", "anchor", DAY, Duration::ZERO).await?;
        anchor.batch_execute("BEGIN").await?;
        client::inspect(&anchor, "s-held").await?;
        client::acquire(
            &anchor,
            &big("anchor-"),
            &big("anchor-"),
            DAY,
            Duration::ZERO,
        )
        .await?;
        let probe = connect(roles.user.clone(), db.clone()).await?;
        client::acquire(&probe, "p-renew", "prober", DAY, Duration::ZERO).await?;
        let stop = Arc::new(AtomicBool::new(false));
        let records = Arc::new(Mutex::new(Vec::new()));
        let mut workers = Vec::new();
        for i in 0..2 {
            let c = connect(roles.user.clone(), db.clone()).await?;
            workers.push(tokio::spawn(workload(c, i, stop.clone(), records.clone())));
        }
        let digest = digest(&su, extension).await?;
        let seeded = seeded_rows(&su).await?;
        Ok(World {
            cluster,
            extension: extension.to_string(),
            db,
            roles,
            su,
            anchor,
            probe,
            stop,
            records,
            workers,
            digest,
            seeded,
        })
    }

    /// A connection of `role` to the world's database.
    pub async fn connect_as(&self, role: Role) -> Result<Client, SecurityError> {
        let mut config = self.cluster.config(&self.db);
        config.user(self.roles.of(role));
        let (c, conn) = config.connect(tokio_postgres::NoTls).await?;
        tokio::spawn(async move {
            let _ = conn.await;
        });
        Ok(c)
    }

    /// The calls of one probe, each bounded by [`BOUND`]: a renew (a write), a denied
    /// acquire and an inspect (reads), and the grant and release of a new key stored out of
    /// line (the TOAST table and its index). The problems found.
    pub async fn probe(&self, n: u64) -> Vec<String> {
        let mut problems = Vec::new();
        let c = &self.probe;
        let big_key = big(&format!("probe-{n}-"));
        let calls: [(&str, ProbeCall); 4] = [
            ("renew of a held lease", ProbeCall::Renew),
            ("denied acquire", ProbeCall::Denied),
            ("inspect", ProbeCall::Inspect),
            ("grant and release of a new key", ProbeCall::GrantRelease),
        ];
        for (what, call) in calls {
            let started = Instant::now();
            let answer = tokio::time::timeout(BOUND, call.run(c, &big_key)).await;
            match answer {
                Ok(Ok(None)) => {}
                Ok(Ok(Some(wrong))) => problems.push(format!("the probe's {what}: {wrong}")),
                Ok(Err(e)) => problems.push(format!("the probe's {what} failed: {e}")),
                Err(_) => {
                    let blockers = self.blockers().await;
                    let _ = c.cancel_token().cancel_query(tokio_postgres::NoTls).await;
                    problems.push(format!(
                        "the probe's {what} did not answer within the bound of {BOUND:?} \
                         (stalled {:?}; {blockers})",
                        started.elapsed()
                    ));
                    // The cancelled call's error arrives on the next statement. One stalled
                    // call is the finding: the others would wait as long.
                    let _ = c.batch_execute("SELECT 1").await;
                    break;
                }
            }
        }
        problems
    }

    /// Who the sessions of the world's database waiting for a lock wait for, as text.
    async fn blockers(&self) -> String {
        let rows = self
            .su
            .query(
                "SELECT a.pid, b.pid, b.usename::text, b.state, left(b.query, 160) \
                   FROM pg_stat_activity a, unnest(pg_blocking_pids(a.pid)) AS x(pid) \
                   JOIN pg_stat_activity b ON b.pid = x.pid \
                  WHERE a.datname = current_database() AND a.wait_event_type = 'Lock'",
                &[],
            )
            .await;
        match rows {
            Ok(rows) => {
                let lines: Vec<String> = rows
                    .iter()
                    .filter_map(|r| {
                        Some(format!(
                            "pid {} waits for pid {} ({}, {}: {})",
                            r.try_get::<_, i32>(0).ok()?,
                            r.try_get::<_, i32>(1).ok()?,
                            r.try_get::<_, String>(2).ok()?,
                            r.try_get::<_, String>(3).ok()?,
                            r.try_get::<_, String>(4).ok()?
                        ))
                    })
                    .collect();
                lines.join("; ")
            }
            Err(e) => format!("blockers unknown: {e}"),
        }
    }

    /// The background workload's calls since the last drain that took longer than the bound
    /// or answered wrongly.
    pub fn drain_workload(&self) -> Vec<String> {
        let mut records = self.records.lock().unwrap_or_else(|p| p.into_inner());
        let bad = records
            .iter()
            .filter(|r| r.took > BOUND || r.wrong.is_some())
            .map(|r| match &r.wrong {
                Some(w) => format!("a workload {} answered wrongly: {w}", r.call),
                None => format!(
                    "a workload {} took {:?}, over the bound of {BOUND:?}",
                    r.call, r.took
                ),
            })
            .collect();
        records.clear();
        bad
    }

    /// What changed since the world was built: the build's objects (and what depends on
    /// them) and the seeded lease state.
    pub async fn changes(&self) -> Result<Vec<String>, SecurityError> {
        let now = digest(&self.su, &self.extension).await?;
        let mut out: Vec<String> = now
            .iter()
            .filter(|l| !self.digest.contains(l))
            .map(|l| format!("new or changed: {l}"))
            .collect();
        out.extend(
            self.digest
                .iter()
                .filter(|l| !now.contains(l))
                .map(|l| format!("gone or changed: {l}")),
        );
        let rows = seeded_rows(&self.su).await?;
        if rows != self.seeded {
            out.push(format!(
                "the seeded lease state changed: {:?} -> {rows:?}",
                self.seeded
            ));
        }
        Ok(out)
    }

    /// Ends the workload, the anchor and every session of the world's database, and drops
    /// the database and the roles.
    pub async fn drop_all(mut self) -> Result<(), SecurityError> {
        self.stop.store(true, Ordering::Relaxed);
        for w in self.workers.drain(..) {
            let _ = tokio::time::timeout(Duration::from_secs(10), w).await;
        }
        let _ = self.anchor.batch_execute("ROLLBACK").await;
        drop(self.anchor);
        drop(self.probe);
        drop(self.su);
        let admin = self.cluster.connect("postgres").await?;
        admin
            .batch_execute(&format!(
                "DROP DATABASE IF EXISTS {} WITH (FORCE)",
                quote_ident(&self.db)
            ))
            .await?;
        for r in [
            &self.roles.app,
            &self.roles.other,
            &self.roles.owner,
            &self.roles.user,
        ] {
            admin
                .batch_execute(&format!("DROP ROLE IF EXISTS {}", quote_ident(r)))
                .await?;
        }
        Ok(())
    }
}

const DAY: Duration = Duration::from_secs(86_400);

async fn seed(user: &Client) -> Result<(), SecurityError> {
    client::acquire(user, "s-held", "alice", DAY, Duration::ZERO).await?;
    let free = client::acquire(user, "s-free", "alice", DAY, Duration::ZERO).await?;
    let epoch = free
        .epoch()
        .ok_or_else(|| SecurityError::Unexpected("the first grant of s-free was denied".into()))?;
    client::release(user, "s-free", "alice", epoch).await?;
    client::acquire(user, "s-other", "bob", DAY, Duration::ZERO).await?;
    Ok(())
}

/// The rows of the seeded keys (as the superuser).
async fn seeded_rows(su: &Client) -> Result<Vec<LeaseRow>, SecurityError> {
    Ok(table_rows(su)
        .await?
        .into_iter()
        .filter(|r| SEEDED.contains(&r.0.as_str()))
        .collect())
}

#[derive(Clone, Copy)]
enum ProbeCall {
    Renew,
    Denied,
    Inspect,
    GrantRelease,
}

impl ProbeCall {
    /// Runs the call; `Some(why)` when it answered wrongly.
    async fn run(self, c: &Client, big_key: &str) -> Result<Option<String>, client::LeaseError> {
        Ok(match self {
            ProbeCall::Renew => {
                let epoch = client::inspect(c, "p-renew").await?.map(|r| r.epoch);
                let r = client::renew(c, "p-renew", "prober", epoch.unwrap_or(0), DAY).await?;
                (r.status != Status::Ok).then(|| format!("renew answered {r:?}"))
            }
            ProbeCall::Denied => {
                let a = client::acquire(c, "s-other", "prober", DAY, Duration::ZERO).await?;
                (a != Acquire::Denied).then(|| format!("acquire of s-other answered {a:?}"))
            }
            ProbeCall::Inspect => {
                let i = client::inspect(c, "s-held").await?;
                (!matches!(&i, Some(r) if r.held && r.owner.as_deref() == Some("alice")))
                    .then(|| format!("inspect of s-held answered {i:?}"))
            }
            ProbeCall::GrantRelease => {
                let a = client::acquire(c, big_key, "prober", DAY, Duration::ZERO).await?;
                match a {
                    Acquire::Acquired { epoch: 1, .. } => {
                        let s = client::release(c, big_key, "prober", 1).await?;
                        (s != Status::Ok).then(|| format!("release answered {s:?}"))
                    }
                    other => Some(format!("the grant of a new key answered {other:?}")),
                }
            }
        })
    }
}

/// One task of the background workload: a renew of its own lease, a denied acquire, an
/// inspect, and every fifth round a release and a new grant, until `stop`.
async fn workload(c: Client, i: usize, stop: Arc<AtomicBool>, records: Arc<Mutex<Vec<Record>>>) {
    let key = format!("w-{i}");
    let owner = format!("worker-{i}");
    let mut epoch = match client::acquire(&c, &key, &owner, DAY, Duration::ZERO).await {
        Ok(Acquire::Acquired { epoch, .. }) => epoch,
        _ => return,
    };
    let mut round = 0u64;
    while !stop.load(Ordering::Relaxed) {
        round += 1;
        let record = |call: &'static str, started: Instant, wrong: Option<String>| {
            records
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push(Record {
                    call,
                    took: started.elapsed(),
                    wrong,
                });
        };
        let started = Instant::now();
        let renewed = client::renew(&c, &key, &owner, epoch, DAY).await;
        let wrong = match &renewed {
            Ok(r) if r.status == Status::Ok => None,
            other => Some(format!("renew of its own lease: {other:?}")),
        };
        record("renew", started, wrong);
        let started = Instant::now();
        let denied = client::acquire(&c, "s-other", &owner, DAY, Duration::ZERO).await;
        let wrong = (!matches!(denied, Ok(Acquire::Denied))).then(|| format!("{denied:?}"));
        record("denied acquire", started, wrong);
        let started = Instant::now();
        let seen = client::inspect(&c, "s-held").await;
        let wrong = (!matches!(&seen, Ok(Some(r)) if r.held && r.epoch == 1))
            .then(|| format!("inspect of s-held: {seen:?}"));
        record("inspect", started, wrong);
        if round % 5 == 0 {
            let started = Instant::now();
            let released = client::release(&c, &key, &owner, epoch).await;
            let regrant = client::acquire(&c, &key, &owner, DAY, Duration::ZERO).await;
            let wrong = match (&released, &regrant) {
                (Ok(Status::Ok), Ok(Acquire::Acquired { epoch: e, .. })) if *e == epoch + 2 => {
                    epoch = *e;
                    None
                }
                _ => Some(format!("release {released:?}, then acquire {regrant:?}")),
            };
            record("release and grant", started, wrong);
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The build's objects as lines (definitions, owners, privileges, comments, what is in its
/// schemas, what inherits from its tables) and every dependency of an object on them but on
/// the API (what PUBLIC may call): a line changes when any of it does.
pub async fn digest(su: &Client, extension: &str) -> Result<Vec<String>, SecurityError> {
    let rows = su.query(DIGEST_SQL, &[&extension]).await?;
    rows.iter()
        .map(|r| r.try_get(0))
        .collect::<Result<_, _>>()
        .map_err(SecurityError::from)
}

const DIGEST_SQL: &str = r#"
WITH ext AS (SELECT * FROM pg_extension WHERE extname = $1),
mem AS (SELECT d.classid, d.objid FROM pg_depend d, ext
         WHERE d.refclassid = 'pg_extension'::regclass AND d.refobjid = ext.oid AND d.deptype = 'e'),
nsp AS (SELECT objid AS oid FROM mem WHERE classid = 'pg_namespace'::regclass),
rels AS (SELECT oid FROM pg_class WHERE relnamespace IN (SELECT oid FROM nsp)
         UNION SELECT reltoastrelid FROM pg_class WHERE relnamespace IN (SELECT oid FROM nsp) AND reltoastrelid <> 0),
allrels AS (SELECT oid FROM rels UNION SELECT indexrelid FROM pg_index WHERE indrelid IN (SELECT oid FROM rels)),
procs AS (SELECT oid FROM pg_proc WHERE pronamespace IN (SELECT oid FROM nsp)),
api AS (SELECT oid FROM pg_proc WHERE pronamespace = (SELECT oid FROM pg_namespace WHERE nspname = 'lease')
          AND proname IN ('acquire', 'renew', 'release', 'inspect')),
types AS (SELECT oid FROM pg_type WHERE typnamespace IN (SELECT oid FROM nsp)
          UNION SELECT reltype FROM pg_class WHERE oid IN (SELECT oid FROM allrels) AND reltype <> 0)
SELECT 'extension ' || extname || ' ' || extversion || ' owner ' || extowner::regrole::text
       || ' config ' || coalesce(extconfig::regclass[]::text, '-') || ' ' || coalesce(extcondition::text, '-')
       || ' comment ' || coalesce(obj_description(oid, 'pg_extension'), '-') FROM ext
UNION ALL SELECT 'member ' || pg_describe_object(classid, objid, 0) FROM mem
UNION ALL SELECT 'schema ' || nspname || ' owner ' || nspowner::regrole::text || ' acl '
       || coalesce(nspacl, acldefault('n', nspowner))::text || ' comment ' || coalesce(obj_description(oid, 'pg_namespace'), '-')
  FROM pg_namespace WHERE oid IN (SELECT oid FROM nsp)
UNION ALL SELECT 'relation ' || c.oid::regclass::text || ' ' || c.relkind::text || ' owner '
       || c.relowner::regrole::text || ' acl '
       || coalesce(c.relacl, acldefault(CASE c.relkind WHEN 'S' THEN 's' ELSE 'r' END::"char", c.relowner))::text
       || ' options '
       || coalesce(c.reloptions::text, '-') || ' persistence ' || c.relpersistence::text || ' rls '
       || c.relrowsecurity::text || c.relforcerowsecurity::text || ' tablespace ' || c.reltablespace::text
       || ' am ' || c.relam::text || ' identity ' || c.relreplident::text || ' comment '
       || coalesce(obj_description(c.oid, 'pg_class'), '-')
  FROM pg_class c WHERE c.oid IN (SELECT oid FROM allrels)
UNION ALL SELECT 'column ' || a.attrelid::regclass::text || '.' || a.attname || ' ' || format_type(a.atttypid, a.atttypmod)
       || ' not null ' || a.attnotnull::text || ' default ' || coalesce(pg_get_expr(d.adbin, d.adrelid), '-')
       || ' storage ' || a.attstorage::text || ' statistics ' || coalesce(a.attstattarget::text, '-')
       || ' acl ' || coalesce(a.attacl::text, '-')
       || ' comment ' || coalesce(col_description(a.attrelid, a.attnum), '-')
  FROM pg_attribute a LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
 WHERE a.attrelid IN (SELECT oid FROM rels) AND a.attnum > 0 AND NOT a.attisdropped
UNION ALL SELECT 'index ' || pg_get_indexdef(i.indexrelid) || ' clustered ' || i.indisclustered::text
       || ' identity ' || i.indisreplident::text
  FROM pg_index i WHERE i.indrelid IN (SELECT oid FROM rels)
UNION ALL SELECT 'constraint ' || k.conrelid::regclass::text || ' ' || k.conname || ' ' || pg_get_constraintdef(k.oid)
       || ' comment ' || coalesce(obj_description(k.oid, 'pg_constraint'), '-')
  FROM pg_constraint k WHERE k.conrelid IN (SELECT oid FROM rels)
UNION ALL SELECT 'trigger ' || pg_get_triggerdef(g.oid) || ' enabled ' || g.tgenabled::text
       || ' comment ' || coalesce(obj_description(g.oid, 'pg_trigger'), '-')
  FROM pg_trigger g WHERE g.tgrelid IN (SELECT oid FROM rels) AND NOT g.tgisinternal
UNION ALL SELECT 'rule ' || r.ev_class::regclass::text || ' ' || r.rulename FROM pg_rewrite r WHERE r.ev_class IN (SELECT oid FROM rels)
UNION ALL SELECT 'policy ' || p.polrelid::regclass::text || ' ' || p.polname FROM pg_policy p WHERE p.polrelid IN (SELECT oid FROM rels)
UNION ALL SELECT 'statistics ' || s.stxname FROM pg_statistic_ext s WHERE s.stxrelid IN (SELECT oid FROM rels)
UNION ALL SELECT 'inherits ' || h.inhrelid::regclass::text || ' from ' || h.inhparent::regclass::text
  FROM pg_inherits h WHERE h.inhparent IN (SELECT oid FROM rels) OR h.inhrelid IN (SELECT oid FROM rels)
UNION ALL SELECT 'function ' || p.oid::regprocedure::text || ' owner ' || p.proowner::regrole::text || ' acl '
       || coalesce(p.proacl, acldefault('f', p.proowner))::text || ' definition '
       || CASE WHEN p.prokind = 'a' THEN 'aggregate' ELSE md5(pg_get_functiondef(p.oid)) END
       || ' comment ' || coalesce(obj_description(p.oid, 'pg_proc'), '-')
  FROM pg_proc p WHERE p.oid IN (SELECT oid FROM procs)
UNION ALL SELECT 'type ' || format_type(t.oid, NULL) || ' owner ' || t.typowner::regrole::text || ' acl '
       || coalesce(t.typacl, acldefault('T', t.typowner))::text || ' comment ' || coalesce(obj_description(t.oid, 'pg_type'), '-')
  FROM pg_type t WHERE t.oid IN (SELECT oid FROM types)
UNION ALL SELECT 'operator ' || o.oid::regoperator::text FROM pg_operator o WHERE o.oprnamespace IN (SELECT oid FROM nsp)
UNION ALL SELECT 'dependency ' || pg_describe_object(d.classid, d.objid, d.objsubid) || ' on '
       || pg_describe_object(d.refclassid, d.refobjid, d.refobjsubid) || ' ' || d.deptype::text
  FROM pg_depend d
 WHERE ((d.refclassid = 'pg_class'::regclass AND d.refobjid IN (SELECT oid FROM allrels))
     OR (d.refclassid = 'pg_proc'::regclass AND d.refobjid IN (SELECT oid FROM procs EXCEPT SELECT oid FROM api))
     OR (d.refclassid = 'pg_type'::regclass AND d.refobjid IN (SELECT oid FROM types))
     OR (d.refclassid = 'pg_namespace'::regclass AND d.refobjid IN (SELECT oid FROM nsp)))
   AND d.deptype <> 'e'
   -- A role's default privileges for its own future objects in a schema change nothing
   -- of the build (they go when the schema does).
   AND d.classid <> 'pg_default_acl'::regclass
-- What the build's objects depend on (a DEPENDS ON EXTENSION, a changed function...).
UNION ALL SELECT 'depends ' || pg_describe_object(d.classid, d.objid, d.objsubid) || ' on '
       || pg_describe_object(d.refclassid, d.refobjid, d.refobjsubid) || ' ' || d.deptype::text
  FROM pg_depend d
 WHERE ((d.classid = 'pg_class'::regclass AND d.objid IN (SELECT oid FROM allrels))
     OR (d.classid = 'pg_proc'::regclass AND d.objid IN (SELECT oid FROM procs))
     OR (d.classid = 'pg_type'::regclass AND d.objid IN (SELECT oid FROM types))
     OR (d.classid = 'pg_trigger'::regclass AND d.objid IN (SELECT oid FROM pg_trigger WHERE tgrelid IN (SELECT oid FROM rels)))
     OR (d.classid = 'pg_constraint'::regclass AND d.objid IN (SELECT oid FROM pg_constraint WHERE conrelid IN (SELECT oid FROM rels))))
ORDER BY 1
"#;
