//! The hostile-session matrix: pg_lease under every session setting a caller controls
//! (specs/SEMANTICS.md section 10), each checked by a free-running campaign judged by the
//! checker and by the conformance suite run under the same settings.
//!
//! For each [`Setting`] (its setup SQL, its session settings, its workload):
//! - a **control** shows the setting bites in a session of its own, independently of
//!   pg_lease: the collation equates case twins, the planted functions and operators answer
//!   unqualified calls, the zone's calendar day is not 24 hours, the timeouts fire, the
//!   isolation level is the session's;
//! - a **campaign** (bounded, e.g. 6 processes x 2 keys x 600 ops) must be linearizable
//!   by [`model::checker::check`], and every reported expiry of a grant or renew must be
//!   `t + ttl` in UTC for some `t` of its window ([`exact_expiries`]: the checker bounds a
//!   day at 23 to 25 hours, section 3 makes it 24); its history must show the setting at
//!   work (refusals, timeouts, leases across the DST change, case twins granted, no planted
//!   object run);
//! - the **conformance** suite runs with every connection under the setting; where a
//!   check's own assertions cannot apply, [`expectation`] says what it must fail by instead
//!   (a refusal under REPEATABLE READ and SERIALIZABLE, a statement-timeout cancel of a
//!   check that waits by design) or why it is not run.
//!
//! Outcomes are typed ([`Verdict`]): a pass, a finding about the target, a control that did
//! not bite, or an infrastructure failure (an install error, a missing ICU, a hang, a
//! check budget spent), which is never a pass. `synchronous_commit = off` with a crash is
//! not here: it belongs to the fault-injection suite.

use crate::campaign::{self, Campaign, Length, Target};
use crate::conformance::{self, Failure};
use crate::judgement::{shorten, Cause, Judgement};
use crate::pg::{Cluster, PgError, PgInstall};
use crate::session::{Arguments, Collated, CollationVia, SessionSettings};
use crate::workload::{Names, Workload};
use chrono::{DateTime, Months, TimeDelta, Utc};
use model::{Budget, History, Interval, Isolation, Op, OpResult, Outcome, Ts};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio_postgres::Client;

/// The extension name this checkout's pg_lease is installed under: the install's extension
/// directory is shared with other checkouts, which rewrite `pg_lease`'s own files.
pub const UNDER_TEST: &str = "pg_lease_matrix_under_test";

/// The nondeterministic ICU collation of the collation settings (case-insensitive,
/// ignorable characters ignored), as SQL.
pub const COLLATION: &str = "public.matrix_ci";

/// One hostile session setting.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Setting {
    /// Keys and owners as `$1::text COLLATE matrix_ci` (an explicit collation).
    CollationOnArgument,
    /// Keys and owners as columns of a source relation collated `matrix_ci` (an implicit
    /// collation).
    CollationFromColumn,
    /// `default_transaction_isolation = 'repeatable read'`, and transactions at that level.
    RepeatableRead,
    /// `default_transaction_isolation = 'serializable'`, and transactions at that level.
    Serializable,
    /// A `TimeZone` whose next DST change falls inside the workload's longest TTLs.
    DstTimeZone,
    /// `DateStyle = 'SQL, DMY'`, `IntervalStyle = 'sql_standard'`.
    SqlDateSqlStandardInterval,
    /// `DateStyle = 'German, DMY'`, `IntervalStyle = 'iso_8601'`.
    GermanDateIso8601Interval,
    /// `search_path = evil, pg_catalog, public` with same-named functions and operators
    /// planted in `evil`.
    PlantedSearchPath,
    /// `lock_timeout = '5ms'`.
    LockTimeout,
    /// `statement_timeout = '50ms'`.
    StatementTimeout,
    /// `default_transaction_read_only = on`: every write is refused with 25006, reads
    /// answer (specs/SEMANTICS.md section 7).
    ReadOnly,
    /// The sessions of one campaign in different TimeZones (UTC+14, UTC-12, UTC+5:30,
    /// UTC), round robin: each stores and reads expiries under its own zone.
    MixedTimeZones,
}

impl Setting {
    pub const ALL: [Setting; 12] = [
        Setting::CollationOnArgument,
        Setting::CollationFromColumn,
        Setting::RepeatableRead,
        Setting::Serializable,
        Setting::DstTimeZone,
        Setting::SqlDateSqlStandardInterval,
        Setting::GermanDateIso8601Interval,
        Setting::PlantedSearchPath,
        Setting::LockTimeout,
        Setting::StatementTimeout,
        Setting::ReadOnly,
        Setting::MixedTimeZones,
    ];

    /// A short name for reports.
    pub fn name(self) -> &'static str {
        match self {
            Setting::CollationOnArgument => "collation-on-argument",
            Setting::CollationFromColumn => "collation-from-column",
            Setting::RepeatableRead => "repeatable-read",
            Setting::Serializable => "serializable",
            Setting::DstTimeZone => "timezone-with-dst",
            Setting::SqlDateSqlStandardInterval => "datestyle-sql-dmy/sql_standard",
            Setting::GermanDateIso8601Interval => "datestyle-german/iso_8601",
            Setting::PlantedSearchPath => "search_path-planted",
            Setting::LockTimeout => "lock_timeout-5ms",
            Setting::StatementTimeout => "statement_timeout-50ms",
            Setting::ReadOnly => "read-only",
            Setting::MixedTimeZones => "timezones-mixed",
        }
    }

    /// True for the settings pg_lease 0.1.0 gets wrong and 0.2.0 fixes (the issue names
    /// them): there the matrix must fail 0.1.0.
    pub fn fixed_in_0_2_0(self) -> bool {
        matches!(
            self,
            Setting::CollationOnArgument
                | Setting::CollationFromColumn
                | Setting::RepeatableRead
                | Setting::Serializable
                | Setting::DstTimeZone
        )
    }
}

/// The zones of [`Setting::MixedTimeZones`]: the two offsets furthest apart (26 hours),
/// a half-hour one, and UTC.
pub const MIXED_ZONES: [&str; 4] = ["Pacific/Kiritimati", "Etc/GMT+12", "Asia/Kolkata", "UTC"];

impl fmt::Display for Setting {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Why a part of the matrix could not run or decide: never a pass, never a finding.
#[derive(Debug, thiserror::Error)]
pub enum MatrixError {
    #[error(
        "PostgreSQL {major} has no ICU collations (no provider 'i' in pg_collation): the \
         collation settings cannot run on this install (an infrastructure limitation, not a pass)"
    )]
    NoIcu { major: u32 },
    #[error("none of the zones {zones:?} changes its UTC offset within 400 days of now")]
    NoDstChange { zones: Vec<&'static str> },
    #[error("{what}: {source}")]
    Pg {
        what: String,
        #[source]
        source: PgError,
    },
    #[error("{what}: {detail}")]
    Db { what: String, detail: String },
    #[error("{what} did not finish within {after:?}")]
    Hung { what: String, after: Duration },
    #[error(
        "CREATE EXTENSION {extension} installed version {found:?}, expected {expected} \
         (another checkout rewrote its files?)"
    )]
    Version {
        extension: String,
        expected: &'static str,
        found: Option<String>,
    },
}

fn db_error(what: impl Into<String>) -> impl FnOnce(tokio_postgres::Error) -> MatrixError {
    let what = what.into();
    move |e| MatrixError::Db {
        what,
        detail: match e.as_db_error() {
            Some(db) => format!("{}: {}", db.code().code(), db.message()),
            None => e.to_string(),
        },
    }
}

fn pg_error(what: impl Into<String>) -> impl FnOnce(PgError) -> MatrixError {
    let what = what.into();
    move |source| MatrixError::Pg { what, source }
}

// ---------------------------------------------------------------------------------------
// Plans: setup, settings, workload

/// The DST change a [`Setting::DstTimeZone`] plan is built around.
#[derive(Clone, Debug, PartialEq)]
pub struct DstChange {
    pub zone: String,
    /// The offset changes between `days - 1` and `days` whole days from when it was
    /// computed.
    pub days: i32,
    /// How much the offset changes, in seconds (e.g. 3600 or -3600).
    pub shift_seconds: f64,
    /// A TTL of whole days that spans the change.
    pub ttl_days: Interval,
    /// A TTL of whole months that spans the change.
    pub ttl_months: Interval,
}

/// How one setting is run.
#[derive(Clone, Debug)]
pub struct Plan {
    pub setting: Setting,
    pub session: SessionSettings,
    pub workload: Workload,
    /// What was computed or chosen, for the report.
    pub facts: String,
    pub dst: Option<DstChange>,
    /// Calls of its campaign, when not the matrix's default.
    pub ops: Option<u64>,
}

/// Zones a DST change is looked for in: both hemispheres, and Morocco's Ramadan changes.
pub const DST_ZONES: [&str; 8] = [
    "America/New_York",
    "Europe/Berlin",
    "Australia/Sydney",
    "Pacific/Auckland",
    "America/Santiago",
    "America/Havana",
    "Asia/Jerusalem",
    "Africa/Casablanca",
];

/// The schema of [`Setting::PlantedSearchPath`]: same-named functions and operators that
/// would change results if a call reached them, each counting its runs in
/// `evil.planted_runs` (nextval survives a rollback).
const PLANTED: &str = "
CREATE SCHEMA evil;
GRANT USAGE ON SCHEMA evil TO PUBLIC;
CREATE SEQUENCE evil.planted_runs;
GRANT USAGE, UPDATE ON SEQUENCE evil.planted_runs TO PUBLIC;
CREATE FUNCTION evil.planted_ran() RETURNS void LANGUAGE plpgsql AS $$
BEGIN PERFORM pg_catalog.nextval('evil.planted_runs'); END $$;
CREATE FUNCTION evil.clock_timestamp() RETURNS timestamptz LANGUAGE plpgsql VOLATILE AS $$
BEGIN PERFORM evil.planted_ran(); RETURN timestamptz '3000-01-01 00:00:00+00'; END $$;
CREATE FUNCTION evil.now() RETURNS timestamptz LANGUAGE plpgsql VOLATILE AS $$
BEGIN PERFORM evil.planted_ran(); RETURN timestamptz '3000-01-01 00:00:00+00'; END $$;
CREATE FUNCTION evil.statement_timestamp() RETURNS timestamptz LANGUAGE plpgsql VOLATILE AS $$
BEGIN PERFORM evil.planted_ran(); RETURN timestamptz '1000-01-01 00:00:00+00'; END $$;
CREATE FUNCTION evil.current_setting(text) RETURNS text LANGUAGE plpgsql VOLATILE AS $$
BEGIN PERFORM evil.planted_ran(); RETURN 'planted'; END $$;
CREATE FUNCTION evil.octet_length(text) RETURNS integer LANGUAGE plpgsql VOLATILE AS $$
BEGIN PERFORM evil.planted_ran(); RETURN 0; END $$;
CREATE FUNCTION evil.array_remove(text[], text) RETURNS text[] LANGUAGE plpgsql VOLATILE AS $$
BEGIN PERFORM evil.planted_ran(); RETURN $1; END $$;
CREATE FUNCTION evil.texteq(text, text) RETURNS boolean LANGUAGE plpgsql VOLATILE AS $$
BEGIN PERFORM evil.planted_ran(); RETURN true; END $$;
CREATE OPERATOR evil.= (LEFTARG = text, RIGHTARG = text, FUNCTION = evil.texteq);
CREATE FUNCTION evil.textne(text, text) RETURNS boolean LANGUAGE plpgsql VOLATILE AS $$
BEGIN PERFORM evil.planted_ran(); RETURN true; END $$;
CREATE OPERATOR evil.<> (LEFTARG = text, RIGHTARG = text, FUNCTION = evil.textne);
CREATE FUNCTION evil.tsgt(timestamptz, timestamptz) RETURNS boolean LANGUAGE plpgsql VOLATILE AS $$
BEGIN PERFORM evil.planted_ran(); RETURN false; END $$;
CREATE OPERATOR evil.> (LEFTARG = timestamptz, RIGHTARG = timestamptz, FUNCTION = evil.tsgt);
";

/// Unqualified calls that reach each planted object in a session of
/// [`Setting::PlantedSearchPath`], and what they answer there (pg_catalog's answer would
/// differ). The probes qualify everything else.
const PLANTED_PROBES: [(&str, &str); 9] = [
    (
        "SELECT pg_catalog.date_part('year', clock_timestamp())::text",
        "3000",
    ),
    ("SELECT pg_catalog.date_part('year', now())::text", "3000"),
    (
        "SELECT pg_catalog.date_part('year', statement_timestamp())::text",
        "1000",
    ),
    ("SELECT current_setting('transaction_isolation')", "planted"),
    ("SELECT octet_length('abc')::text", "0"),
    (
        "SELECT pg_catalog.array_length(array_remove(ARRAY['a', 'b']::text[], 'a'::text), 1)::text",
        "2",
    ),
    ("SELECT ('a'::text = 'b'::text)::text", "true"),
    ("SELECT ('a'::text <> 'a'::text)::text", "true"),
    (
        "SELECT (pg_catalog.clock_timestamp() > timestamptz '2000-01-01 00:00:00+00')::text",
        "false",
    ),
];

/// The workload every setting starts from: 6 processes on 2 keys, the default mix.
pub fn base_workload() -> Workload {
    Workload {
        processes: 6,
        keys: 2,
        ..Workload::default()
    }
}

/// The plan of `setting` on `cluster`: for the collations, whether the install has ICU;
/// for the zone, the DST change nearest to now.
pub async fn plan(setting: Setting, cluster: &Cluster) -> Result<Plan, MatrixError> {
    let mut workload = base_workload();
    let mut session = SessionSettings::none();
    let mut facts = String::new();
    let mut dst = None;
    let mut ops = None;
    let set = |pairs: &[(&str, &str)]| -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(n, v)| (n.to_string(), v.to_string()))
            .collect()
    };
    match setting {
        Setting::CollationOnArgument | Setting::CollationFromColumn => {
            let admin = admin(cluster).await?;
            let icu: bool = admin
                .query_one(
                    "SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_collation WHERE collprovider = 'i')",
                    &[],
                )
                .await
                .and_then(|r| r.try_get(0))
                .map_err(db_error("looking for ICU collations"))?;
            if !icu {
                return Err(MatrixError::NoIcu {
                    major: cluster.version().major,
                });
            }
            session.setup = vec![format!(
                "CREATE COLLATION {COLLATION} (provider = icu, locale = 'und-u-ks-level2', \
                 deterministic = false)"
            )];
            session.collation = Some(Collated {
                collation: COLLATION.to_string(),
                via: if setting == Setting::CollationOnArgument {
                    CollationVia::Argument
                } else {
                    CollationVia::Column
                },
            });
            workload.names = Names::CaseTwins;
            facts = format!(
                "ICU und-u-ks-level2 nondeterministic, keys {:?}, owners {:?}",
                workload.key_names(),
                (0..2).map(|s| workload.owner(s)).collect::<Vec<_>>()
            );
        }
        Setting::RepeatableRead | Setting::Serializable => {
            let level = if setting == Setting::RepeatableRead {
                Isolation::RepeatableRead
            } else {
                Isolation::Serializable
            };
            session.settings = set(&[("default_transaction_isolation", level.sql())]);
            workload.isolations = vec![Isolation::ReadCommitted, level];
            workload.txn_percent = 40;
            workload.txn_max_ops = 4;
            facts = format!(
                "autocommit calls at {}; 40% of turns a transaction of 1-4 calls, read committed or {}",
                level.sql(),
                level.sql()
            );
        }
        Setting::DstTimeZone => {
            let change = nearest_dst_change(cluster).await?;
            session.settings = set(&[("TimeZone", &change.zone)]);
            workload.ttls.push((change.ttl_days, 6));
            workload.ttls.push((change.ttl_months, 4));
            facts = format!(
                "{}: UTC offset changes by {:+} s within {} days; extra ttls '{} days' and '{} mons'",
                change.zone,
                change.shift_seconds,
                change.days,
                change.ttl_days.days,
                change.ttl_months.months
            );
            dst = Some(change);
        }
        Setting::SqlDateSqlStandardInterval => {
            session.settings = set(&[("DateStyle", "SQL, DMY"), ("IntervalStyle", "sql_standard")]);
        }
        Setting::GermanDateIso8601Interval => {
            session.settings = set(&[("DateStyle", "German, DMY"), ("IntervalStyle", "iso_8601")]);
        }
        Setting::PlantedSearchPath => {
            session.settings = set(&[("search_path", "evil, pg_catalog, public")]);
            session.setup = vec![PLANTED.to_string()];
            facts = format!("{} planted objects in schema evil", PLANTED_PROBES.len());
        }
        Setting::LockTimeout => {
            session.settings = set(&[("lock_timeout", "5ms")]);
            // Row-lock waits need a writer's transaction to stay open while another
            // process finds the key writable: one key, long transactions, more of them.
            workload.keys = 1;
            workload.processes = 8;
            workload.txn_percent = 60;
            workload.txn_max_ops = 6;
            ops = Some(1_500);
            facts = "8 processes on 1 key, 1,500 calls, 60% of turns a transaction of 1-6 calls \
                     (row locks held across round trips)"
                .into();
        }
        Setting::StatementTimeout => {
            session.settings = set(&[("statement_timeout", "50ms")]);
            workload.txn_percent = 40;
            facts = "40% of turns a transaction; waits of 10, 50 and 250 ms".into();
        }
        Setting::ReadOnly => {
            session.settings = set(&[("default_transaction_read_only", "on")]);
            facts = "every transaction READ ONLY: writes refused (25006), reads answer".into();
        }
        Setting::MixedTimeZones => {
            session.rotation = MIXED_ZONES
                .iter()
                .map(|z| ("TimeZone".to_string(), z.to_string()))
                .collect();
            facts = format!(
                "sessions in TimeZones {} (round robin): one campaign's leases written and judged in zones 26 hours apart",
                MIXED_ZONES.join(", ")
            );
        }
    }
    if facts.is_empty() {
        facts = session.options();
    } else if !session.settings.is_empty() {
        facts = format!("{}; {facts}", session.options());
    }
    workload.validate().map_err(|e| MatrixError::Db {
        what: format!("the workload of {setting}"),
        detail: e.to_string(),
    })?;
    Ok(Plan {
        setting,
        session,
        workload,
        facts,
        dst,
        ops,
    })
}

async fn admin(cluster: &Cluster) -> Result<Client, MatrixError> {
    cluster
        .connect("postgres")
        .await
        .map_err(pg_error("connecting as the superuser"))
}

/// The zone of [`DST_ZONES`] whose UTC offset changes soonest, within 400 days, and TTLs
/// (whole days, whole months) that span that change for every lease granted in the next
/// hours.
pub async fn nearest_dst_change(cluster: &Cluster) -> Result<DstChange, MatrixError> {
    let admin = admin(cluster).await?;
    let zones: Vec<String> = DST_ZONES.iter().map(|z| z.to_string()).collect();
    let row = admin
        .query_opt(
            "WITH t AS (SELECT pg_catalog.now() AS t0) \
             SELECT z, n, shift FROM ( \
               SELECT z, n, \
                 pg_catalog.date_part('epoch', (t0 + n * interval '1 day') AT TIME ZONE z \
                                             - (t0 + n * interval '1 day') AT TIME ZONE 'UTC') \
                 - pg_catalog.date_part('epoch', t0 AT TIME ZONE z - t0 AT TIME ZONE 'UTC') AS shift \
               FROM t, pg_catalog.unnest($1::text[]) AS z, pg_catalog.generate_series(1, 400) AS n \
             ) s WHERE shift <> 0 ORDER BY n, z LIMIT 1",
            &[&zones],
        )
        .await
        .map_err(db_error("looking for the nearest DST change"))?;
    let Some(row) = row else {
        return Err(MatrixError::NoDstChange {
            zones: DST_ZONES.to_vec(),
        });
    };
    let get = |e| db_error("reading the DST change")(e);
    let zone: String = row.try_get(0).map_err(get)?;
    let days: i32 = row.try_get(1).map_err(get)?;
    let shift_seconds: f64 = row.try_get(2).map_err(get)?;
    // A lease granted now (or within the day the campaign runs) with these TTLs ends after
    // `days` whole days, past the change; a month is at least 28 days.
    let ttl_days = days + 1;
    let ttl_months = (ttl_days + 27) / 28;
    Ok(DstChange {
        zone,
        days,
        shift_seconds,
        ttl_days: Interval {
            months: 0,
            days: ttl_days,
            micros: 0,
        },
        ttl_months: Interval {
            months: ttl_months,
            days: 0,
            micros: 0,
        },
    })
}

// ---------------------------------------------------------------------------------------
// Verdicts and rows

/// How one suite of one setting came out.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    Pass,
    /// A finding about the target: a checker violation, a wrong expiry, an answer outside
    /// the API's shape, a conformance check that failed or did not fail as it must.
    Finding(String),
    /// The setting did not bite (its control failed, or the campaign's history does not
    /// show it at work): the run proves nothing about it.
    NotExercised(String),
    /// The suite could not run or decide (install, connection, a hang, a spent budget).
    Infrastructure(String),
}

impl Verdict {
    pub fn is_pass(&self) -> bool {
        *self == Verdict::Pass
    }

    pub fn is_finding(&self) -> bool {
        matches!(self, Verdict::Finding(_))
    }

    /// The one judgement (crate::judgement): a setting that did not bite is no verdict,
    /// like an infrastructure failure.
    pub fn judgement(&self) -> Judgement {
        match self {
            Verdict::Pass => Judgement::Pass,
            Verdict::Finding(why) => Judgement::finding(why.clone()),
            Verdict::NotExercised(why) => Judgement::NoVerdict {
                cause: Cause::NotExercised,
                why: why.clone(),
            },
            Verdict::Infrastructure(why) => Judgement::no_verdict_from_text(why.clone()),
        }
    }

    fn word(&self) -> &'static str {
        match self {
            Verdict::Pass => "PASS",
            Verdict::Finding(_) => "FINDING",
            Verdict::NotExercised(_) => "NOT EXERCISED",
            Verdict::Infrastructure(_) => "INFRASTRUCTURE",
        }
    }
}

/// A suite of the matrix.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Suite {
    Control,
    Campaign,
    Conformance,
}

impl Suite {
    pub fn name(self) -> &'static str {
        match self {
            Suite::Control => "control",
            Suite::Campaign => "campaign",
            Suite::Conformance => "conformance",
        }
    }
}

/// The version of pg_lease a row is about.
#[derive(Clone, Copy, Debug)]
pub enum Version {
    /// This checkout's pg_lease (0.2.0), installed as [`UNDER_TEST`].
    UnderTest,
    /// pg_lease 0.1.0 as released.
    V010,
    /// Another build, installed under its own extension name: the gate's build under
    /// test, a catalogued mutant. Judged as this checkout's pg_lease is.
    Target(Target),
}

impl Version {
    pub fn target(self) -> Target {
        match self {
            Version::UnderTest => Target::Renamed(UNDER_TEST),
            Version::V010 => Target::Version010,
            Version::Target(t) => t,
        }
    }

    /// The extension name it is installed under.
    pub fn extension(self) -> String {
        match self {
            Version::UnderTest => UNDER_TEST.to_string(),
            Version::V010 => crate::extension::NAME_0_1_0.to_string(),
            Version::Target(t) => t.files().map(|f| f.name).unwrap_or_default(),
        }
    }

    pub fn label(self) -> String {
        match self {
            Version::UnderTest => "pg_lease 0.2.0".to_string(),
            Version::V010 => "pg_lease 0.1.0".to_string(),
            Version::Target(t) => t.to_string(),
        }
    }

    /// Whether it must show each setting at work and be refused where 0.2.0 refuses (all
    /// but 0.1.0, which the matrix only compares).
    pub fn is_judged_as_0_2_0(self) -> bool {
        !matches!(self, Version::V010)
    }

    fn rank(&self) -> (u8, String) {
        match self {
            Version::UnderTest => (0, String::new()),
            Version::V010 => (1, String::new()),
            Version::Target(t) => (2, t.to_string()),
        }
    }
}

impl PartialEq for Version {
    fn eq(&self, other: &Version) -> bool {
        self.rank() == other.rank()
    }
}

impl Eq for Version {}

impl PartialOrd for Version {
    fn partial_cmp(&self, other: &Version) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Version {
    fn cmp(&self, other: &Version) -> std::cmp::Ordering {
        self.rank().cmp(&other.rank())
    }
}

/// One line of the matrix: a suite of a setting against a version on a major.
#[derive(Clone, Debug)]
pub struct Row {
    pub major: u32,
    pub setting: Setting,
    pub suite: Suite,
    /// `None` for a control (it does not involve pg_lease).
    pub version: Option<Version>,
    pub verdict: Verdict,
    pub figures: String,
    pub elapsed: Duration,
}

impl fmt::Display for Row {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "PG {} | {:<30} | {:<11} | {:<14} | {}: {} ({:.1}s)",
            self.major,
            self.setting.name(),
            self.suite.name(),
            self.version.map_or_else(|| "-".to_string(), |v| v.label()),
            self.verdict.word(),
            self.figures,
            self.elapsed.as_secs_f64()
        )?;
        match &self.verdict {
            Verdict::Pass => Ok(()),
            Verdict::Finding(why) | Verdict::NotExercised(why) | Verdict::Infrastructure(why) => {
                for line in why.lines() {
                    write!(f, "\n      {}", shorten(line))?;
                }
                Ok(())
            }
        }
    }
}

/// Runs `work` for at most `after`; a hang is an infrastructure failure.
async fn bounded<T>(
    what: &str,
    after: Duration,
    work: impl std::future::Future<Output = T>,
) -> Result<T, MatrixError> {
    tokio::time::timeout(after, work)
        .await
        .map_err(|_| MatrixError::Hung {
            what: what.to_string(),
            after,
        })
}

// ---------------------------------------------------------------------------------------
// Controls: each setting bites

/// A fresh database with the plan's setup, and a session under its settings.
async fn session_db(
    plan: &Plan,
    cluster: &Cluster,
    prefix: &str,
) -> Result<(String, Client, Client), MatrixError> {
    let db = cluster
        .fresh_empty_database(prefix)
        .await
        .map_err(pg_error("creating a database"))?;
    let admin = cluster
        .connect(&db)
        .await
        .map_err(pg_error("connecting as the superuser"))?;
    plan.session
        .run_setup(&admin)
        .await
        .map_err(db_error(format!("the setup of {}", plan.setting)))?;
    let session = plan
        .session
        .connect(&cluster.config(&db))
        .await
        .map_err(db_error(format!("connecting under {}", plan.setting)))?;
    Ok((db, admin, session))
}

async fn text(
    c: &Client,
    sql: &str,
    params: &[&(dyn tokio_postgres::types::ToSql + Sync)],
) -> Result<String, MatrixError> {
    c.query_one(sql, params)
        .await
        .and_then(|r| r.try_get::<_, String>(0))
        .map_err(db_error(format!("`{sql}`")))
}

/// What a failed statement said: SQLSTATE and message.
async fn failure(c: &Client, sql: &str) -> Result<Option<(String, String)>, MatrixError> {
    match c.batch_execute(sql).await {
        Ok(()) => Ok(None),
        Err(e) => match e.as_db_error() {
            Some(db) => Ok(Some((
                db.code().code().to_string(),
                db.message().to_string(),
            ))),
            None => Err(db_error(format!("`{sql}`"))(e)),
        },
    }
}

/// Shows that the plan's setting changes what a session sees, independently of pg_lease:
/// the evidence, or [`Verdict::NotExercised`] when it does not bite.
pub async fn control(
    plan: &Plan,
    cluster: &Cluster,
) -> Result<Result<String, String>, MatrixError> {
    let (_db, admin, s) = session_db(plan, cluster, "matrix_control").await?;
    let bit = |ok: bool, evidence: String| {
        if ok {
            Ok(evidence.clone())
        } else {
            Err(evidence)
        }
    };
    Ok(match plan.setting {
        Setting::CollationOnArgument | Setting::CollationFromColumn => {
            // The same mechanism as the recorder's calls: the twin keys compare equal
            // through the collation, and byte-wise they do not.
            let a = Arguments::of(plan.session.collation.as_ref(), false);
            let through = format!(
                "SELECT ({} = $2::text)::text, ($1::text = $2::text)::text FROM {}",
                a.key,
                a.source.as_deref().unwrap_or("(SELECT 1) AS one")
            );
            let keys = plan.workload.key_names();
            let (k1, k2) = (
                keys.first().cloned().unwrap_or_default(),
                keys.get(1).cloned().unwrap_or_default(),
            );
            let row = s
                .query_one(&through, &[&k1, &k2])
                .await
                .map_err(db_error(format!("`{through}`")))?;
            let (ci, plain): (String, String) = (
                row.try_get(0).map_err(db_error("the collation probe"))?,
                row.try_get(1).map_err(db_error("the collation probe"))?,
            );
            let owners = (plan.workload.owner(0), plan.workload.owner(1));
            let row = s
                .query_one(&through, &[&owners.0, &owners.1])
                .await
                .map_err(db_error(format!("`{through}`")))?;
            let owners_ci: String = row.try_get(0).map_err(db_error("the collation probe"))?;
            bit(
                ci == "true" && plain == "false" && owners_ci == "true",
                format!(
                    "{k1:?} = {k2:?} is {ci} through the collation ({plain} without); owners {:?} = {:?} is {owners_ci}",
                    owners.0, owners.1
                ),
            )
        }
        Setting::RepeatableRead | Setting::Serializable => {
            let level = text(
                &s,
                "SELECT pg_catalog.current_setting('transaction_isolation')",
                &[],
            )
            .await?;
            s.batch_execute("BEGIN ISOLATION LEVEL READ COMMITTED")
                .await
                .map_err(db_error("BEGIN"))?;
            let inside = text(
                &s,
                "SELECT pg_catalog.current_setting('transaction_isolation')",
                &[],
            )
            .await?;
            s.batch_execute("COMMIT")
                .await
                .map_err(db_error("COMMIT"))?;
            let want = plan.workload.isolations.last().map_or("", |i| i.sql());
            bit(
                level == want && inside == "read committed",
                format!("autocommit statements run at {level}; BEGIN ISOLATION LEVEL READ COMMITTED runs at {inside}"),
            )
        }
        Setting::DstTimeZone => {
            let Some(dst) = &plan.dst else {
                return Ok(Err("no DST change was computed".into()));
            };
            let row = s
                .query_one(
                    "SELECT pg_catalog.date_part('epoch', pg_catalog.now() + pg_catalog.make_interval(days => $1)) \
                          - pg_catalog.date_part('epoch', pg_catalog.now()), \
                            pg_catalog.date_part('epoch', pg_catalog.now() + pg_catalog.make_interval(months => $2)) \
                          - pg_catalog.date_part('epoch', (pg_catalog.now() AT TIME ZONE 'UTC' \
                                + pg_catalog.make_interval(months => $2)) AT TIME ZONE 'UTC'), \
                            pg_catalog.current_setting('TimeZone')",
                    &[&dst.ttl_days.days, &dst.ttl_months.months],
                )
                .await
                .map_err(db_error("the DST probe"))?;
            let get = |e| db_error("the DST probe")(e);
            let (day_secs, month_diff, zone): (f64, f64, String) = (
                row.try_get(0).map_err(get)?,
                row.try_get(1).map_err(get)?,
                row.try_get(2).map_err(get)?,
            );
            let exact = f64::from(dst.ttl_days.days) * 86_400.0;
            bit(
                zone == dst.zone && day_secs != exact && month_diff != 0.0,
                format!(
                    "in {zone}, now() + '{} days' is {day_secs} s ({exact} s in UTC); now() + '{} mons' differs from UTC month arithmetic by {month_diff} s",
                    dst.ttl_days.days, dst.ttl_months.months
                ),
            )
        }
        Setting::SqlDateSqlStandardInterval | Setting::GermanDateIso8601Interval => {
            let shown = text(
                &s,
                "SELECT (timestamp '2026-01-02 03:04:05')::text || ' | ' \
                     || (interval '1 day 2 hours 3 minutes 4 seconds')::text",
                &[],
            )
            .await?;
            let want = if plan.setting == Setting::SqlDateSqlStandardInterval {
                "02/01/2026 03:04:05 | 1 2:03:04"
            } else {
                "02.01.2026 03:04:05 | P1DT2H3M4S"
            };
            let default = text(
                &admin,
                "SELECT (timestamp '2026-01-02 03:04:05')::text || ' | ' \
                     || (interval '1 day 2 hours 3 minutes 4 seconds')::text",
                &[],
            )
            .await?;
            bit(
                shown == want && default != want,
                format!("a timestamp and an interval print as {shown:?} (the server's defaults: {default:?})"),
            )
        }
        Setting::PlantedSearchPath => {
            let mut seen = Vec::new();
            let mut missed = Vec::new();
            for (sql, want) in PLANTED_PROBES {
                let got = text(&s, sql, &[]).await?;
                if got == want {
                    seen.push(got);
                } else {
                    missed.push(format!("`{sql}` answered {got:?}, planted {want:?}"));
                }
            }
            let runs = planted_runs(&admin).await?;
            bit(
                missed.is_empty() && runs == PLANTED_PROBES.len() as i64,
                if missed.is_empty() {
                    format!("{} planted objects answered unqualified calls ({runs} planted runs counted)", seen.len())
                } else {
                    format!(
                        "not reached: {}; {runs} planted runs counted",
                        missed.join("; ")
                    )
                },
            )
        }
        Setting::LockTimeout => {
            admin
                .batch_execute(
                    "CREATE TABLE public.matrix_lock_probe (i int); \
                     INSERT INTO public.matrix_lock_probe VALUES (1)",
                )
                .await
                .map_err(db_error("creating a table to lock"))?;
            admin
                .batch_execute("BEGIN; SELECT i FROM public.matrix_lock_probe FOR UPDATE")
                .await
                .map_err(db_error("holding a row lock"))?;
            let started = Instant::now();
            let failed = failure(&s, "SELECT i FROM public.matrix_lock_probe FOR UPDATE").await?;
            let took = started.elapsed();
            admin
                .batch_execute("ROLLBACK")
                .await
                .map_err(db_error("ROLLBACK"))?;
            // Margin: the timeout is 5 ms; 2 s allows for a loaded machine and is far
            // below "never" (the lock is held until the probe answers).
            bit(
                matches!(&failed, Some((code, _)) if code == "55P03")
                    && took < Duration::from_secs(2),
                format!("a row-lock wait ended after {took:?} with {failed:?}"),
            )
        }
        Setting::ReadOnly => {
            let failed = failure(&s, "CREATE TABLE public.matrix_read_only_probe (i int)").await?;
            bit(
                matches!(&failed, Some((code, _)) if code == "25006"),
                format!("CREATE TABLE in a session's transaction answered {failed:?}"),
            )
        }
        Setting::MixedTimeZones => {
            // Two more sessions under the rotation: their clocks print in other zones.
            let config = cluster.config(&_db);
            let mut shown = Vec::new();
            for _ in 0..MIXED_ZONES.len() {
                let c = plan
                    .session
                    .connect(&config)
                    .await
                    .map_err(db_error("connecting under the rotation"))?;
                shown.push(text(&c, "SELECT pg_catalog.current_setting('TimeZone')", &[]).await?);
            }
            let distinct: BTreeSet<&String> = shown.iter().collect();
            bit(
                distinct.len() == MIXED_ZONES.len(),
                format!("successive sessions run in TimeZones {shown:?}"),
            )
        }
        Setting::StatementTimeout => {
            let started = Instant::now();
            let failed = failure(&s, "SELECT pg_catalog.pg_sleep(2)").await?;
            let took = started.elapsed();
            // Margin: the timeout is 50 ms; the 2 s sleep must be cancelled well before it
            // ends (1.5 s allows for a loaded machine).
            bit(
                matches!(&failed, Some((code, msg)) if code == "57014" && msg.contains("statement timeout"))
                    && took < Duration::from_millis(1500),
                format!("a 2 s sleep ended after {took:?} with {failed:?}"),
            )
        }
    })
}

async fn planted_runs(admin: &Client) -> Result<i64, MatrixError> {
    admin
        .query_one(
            "SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM evil.planted_runs",
            &[],
        )
        .await
        .and_then(|r| r.try_get(0))
        .map_err(db_error("counting planted runs"))
}

// ---------------------------------------------------------------------------------------
// Campaigns

/// How a campaign of the matrix is run.
#[derive(Clone, Copy, Debug)]
pub struct CampaignSize {
    pub ops: u64,
    pub seed: u64,
    /// The checker's budget.
    pub budget: Duration,
}

impl Default for CampaignSize {
    fn default() -> Self {
        CampaignSize {
            ops: 600,
            seed: 20_261_203,
            budget: Duration::from_secs(30),
        }
    }
}

/// What a campaign's history shows.
#[derive(Clone, Debug, Default)]
pub struct Evidence {
    /// Definite failures by kind (`55000`, `55P03`, `57014 statement timeout`, `57014 wait
    /// exhausted`, `22023`, ...).
    pub failures: BTreeMap<String, usize>,
    /// Calls answered (not failed, not unknown).
    pub answered: usize,
    /// Keys granted at least once.
    pub granted_keys: BTreeSet<String>,
    /// Owners granted at least once.
    pub granted_owners: BTreeSet<String>,
    /// The exact-expiry check.
    pub expiries: ExpiryReport,
    /// Judged grants and renews whose ttl spans the plan's DST change.
    pub across_dst: usize,
}

impl Evidence {
    fn of(history: &History, dst: Option<&DstChange>) -> Evidence {
        let mut e = Evidence {
            expiries: exact_expiries(history),
            ..Evidence::default()
        };
        for op in &history.ops {
            match &op.result {
                OpResult::Fail { sqlstate, message } => {
                    let kind = if sqlstate == "57014" {
                        if model::fate::is_wait_exhausted(sqlstate, message) {
                            "57014 wait exhausted".to_string()
                        } else if message.contains("statement timeout") {
                            "57014 statement timeout".to_string()
                        } else {
                            "57014 other".to_string()
                        }
                    } else {
                        sqlstate.clone()
                    };
                    *e.failures.entry(kind).or_default() += 1;
                }
                OpResult::Ok(outcome) => {
                    e.answered += 1;
                    if let (Outcome::Acquired { .. }, Op::Acquire { key, owner, .. }) =
                        (outcome, &op.call)
                    {
                        e.granted_keys.extend(key.clone());
                        e.granted_owners.extend(owner.clone());
                    }
                }
                OpResult::Unknown { .. } => {}
            }
        }
        if let Some(dst) = dst {
            e.across_dst = e
                .expiries
                .judged_ttls
                .iter()
                .filter(|t| **t == dst.ttl_days || **t == dst.ttl_months)
                .count();
        }
        e
    }

    fn failures_text(&self) -> String {
        if self.failures.is_empty() {
            return "none".into();
        }
        self.failures
            .iter()
            .map(|(k, n)| format!("{k} x{n}"))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// Names among `names` that have a twin differing only in case.
fn twins(names: &BTreeSet<String>) -> usize {
    let mut by_lower: BTreeMap<String, usize> = BTreeMap::new();
    for n in names {
        *by_lower.entry(n.to_lowercase()).or_default() += 1;
    }
    by_lower.values().filter(|n| **n > 1).count()
}

/// What the history of a campaign of this checkout's pg_lease under `setting` must show
/// for the setting to have been exercised (None: it does).
fn missing_evidence(setting: Setting, e: &Evidence, planted: Option<i64>) -> Option<String> {
    let failed = |k: &str| e.failures.get(k).copied().unwrap_or(0);
    match setting {
        Setting::CollationOnArgument | Setting::CollationFromColumn => {
            (twins(&e.granted_keys) == 0 || twins(&e.granted_owners) == 0).then(|| {
                format!(
                    "no pair of case twins was granted both (keys {:?}, owners {:?})",
                    e.granted_keys, e.granted_owners
                )
            })
        }
        Setting::RepeatableRead | Setting::Serializable => {
            (failed("55000") == 0 || e.answered == 0).then(|| {
                format!(
                    "no refusal (55000) next to answered calls: {}",
                    e.failures_text()
                )
            })
        }
        Setting::DstTimeZone => (e.across_dst == 0)
            .then(|| "no grant or renew with a ttl across the DST change was judged".to_string()),
        Setting::LockTimeout => (failed("55P03") == 0).then(|| {
            format!(
                "no call failed by lock_timeout (55P03): {}",
                e.failures_text()
            )
        }),
        Setting::StatementTimeout => (failed("57014 statement timeout") == 0).then(|| {
            format!(
                "no call was cancelled by statement_timeout: {}",
                e.failures_text()
            )
        }),
        Setting::PlantedSearchPath => match planted {
            Some(_) => None,
            None => Some("the planted runs could not be counted".into()),
        },
        Setting::SqlDateSqlStandardInterval | Setting::GermanDateIso8601Interval => None,
        Setting::ReadOnly => (failed("25006") == 0 || e.answered == 0).then(|| {
            format!(
                "no write refused (25006) next to answered reads: {}",
                e.failures_text()
            )
        }),
        Setting::MixedTimeZones => (e.granted_keys.is_empty())
            .then(|| "no lease was granted, so none was judged across zones".to_string()),
    }
}

/// Campaigns a setting may need before one exercises it: whether it bites (a row lock held
/// past 5 ms, a statement past 50 ms) depends on timing, so a campaign that did not show it
/// is run again with the next seed; one that never does stays [`Verdict::NotExercised`].
const EXERCISE_ATTEMPTS: u64 = 3;

/// [`campaign`], again with the next seed (up to [`EXERCISE_ATTEMPTS`]) while it does not
/// exercise the setting.
pub async fn exercised_campaign(
    plan: &Plan,
    cluster: &Cluster,
    version: Version,
    size: CampaignSize,
) -> (Verdict, String) {
    let mut attempt = 1;
    loop {
        let seed = size.seed.wrapping_add(attempt - 1);
        let (verdict, figures) =
            campaign(plan, cluster, version, CampaignSize { seed, ..size }).await;
        if !matches!(verdict, Verdict::NotExercised(_)) || attempt == EXERCISE_ATTEMPTS {
            let figures = match attempt {
                1 => figures,
                n => format!("{figures}; seed {seed}, campaign {n} of {EXERCISE_ATTEMPTS} (the earlier ones did not exercise the setting)"),
            };
            return (verdict, figures);
        }
        attempt += 1;
    }
}

/// A free-running campaign of `version` under `plan`: linearizable by the checker, every
/// reported expiry exact in UTC, no planted object run; for this checkout's pg_lease the
/// history must also show the setting at work.
pub async fn campaign(
    plan: &Plan,
    cluster: &Cluster,
    version: Version,
    size: CampaignSize,
) -> (Verdict, String) {
    let label = format!(
        "matrix-{}-{}-pg{}",
        plan.setting.name().replace(['/', ' '], "_"),
        version.extension(),
        cluster.version().major
    );
    let c = Campaign {
        workload: plan.workload.clone(),
        budget: Budget {
            time: Some(size.budget),
            states: Some(5_000_000),
            ..Budget::default()
        },
        history_file: campaign::history_file_from_env(&label, size.seed),
        session: plan.session.clone(),
        ..Campaign::new(
            version.target(),
            Length::Ops(plan.ops.unwrap_or(size.ops)),
            size.seed,
        )
    };
    // Bound: recording 600 ops takes seconds; the check at most its budget (and its
    // diagnosis); a run past four minutes hangs.
    let report = match bounded(
        "the campaign",
        Duration::from_secs(240),
        campaign::run(cluster, &c, Arc::new(campaign::Silent)),
    )
    .await
    {
        Ok(r) => r,
        Err(e) => return (Verdict::Infrastructure(e.to_string()), String::new()),
    };
    let f = &report.figures;
    let evidence = report
        .history
        .as_ref()
        .map(|h| Evidence::of(h, plan.dst.as_ref()));
    let planted = match (&plan.setting, &report.database) {
        (Setting::PlantedSearchPath, Some(db)) => match cluster.connect(db).await {
            Ok(admin) => planted_runs(&admin).await.ok(),
            Err(_) => None,
        },
        _ => None,
    };
    let mut figures = format!(
        "{} ops ({} answered, {} unknown; failed: {}), {} txns, record {:.1}s, check {:.1}s; checker: {}",
        f.ops,
        evidence.as_ref().map_or(0, |e| e.answered),
        f.unknown_ops,
        evidence.as_ref().map_or_else(|| "-".to_string(), |e| e.failures_text()),
        f.txns,
        f.record_time.as_secs_f64(),
        f.check_time.as_secs_f64(),
        report.outcome.name()
    );
    if let Some(e) = &evidence {
        figures.push_str(&format!(
            "; exact expiry: {} judged ({} calendar, {} across the DST change), {} violations",
            e.expiries.judged,
            e.expiries.calendar,
            e.across_dst,
            e.expiries.violations.len()
        ));
    }
    if let Some(n) = planted {
        figures.push_str(&format!("; planted runs: {n}"));
    }
    let verdict = match &report.outcome {
        campaign::Outcome::Infrastructure(e) => Verdict::Infrastructure(e.to_string()),
        campaign::Outcome::Unknown(_) => Verdict::Infrastructure(format!(
            "undecided, never a pass: {}",
            report.outcome
        )),
        campaign::Outcome::Malformed { .. }
        | campaign::Outcome::Stall(_)
        | campaign::Outcome::Hang { .. } => {
            Verdict::Finding(report.outcome.to_string())
        }
        campaign::Outcome::Violation(v) => Verdict::Finding(format!(
            "checker: invariant {} ({}), found by {:?}: {}",
            v.invariant.number(),
            v.invariant,
            v.found_by,
            v.explanation.lines().take(6).collect::<Vec<_>>().join("\n")
        )),
        campaign::Outcome::Linearizable(_) => match &evidence {
            None => Verdict::Infrastructure("a linearizable verdict without a history".into()),
            Some(e) if !e.expiries.violations.is_empty() => Verdict::Finding(format!(
                "exact expiry (SEMANTICS section 3: t + ttl in UTC): {}",
                e.expiries
                    .violations
                    .iter()
                    .take(3)
                    .cloned()
                    .collect::<Vec<_>>()
                    .join("\n")
            )),
            Some(_) if planted.is_some_and(|n| n > 0) => Verdict::Finding(format!(
                "planted objects ran {} times during the campaign (pg_lease or the recorder reached them)",
                planted.unwrap_or_default()
            )),
            Some(_) if version.is_judged_as_0_2_0() && !refusal_breaches(plan, history_of(&report)).is_empty() => {
                Verdict::Finding(refusal_breaches(plan, history_of(&report)).join("\n"))
            }
            Some(e) => match (version.is_judged_as_0_2_0(), missing_evidence(plan.setting, e, planted)) {
                (true, Some(missing)) => Verdict::NotExercised(missing),
                _ => Verdict::Pass,
            },
        },
    };
    (verdict, figures)
}

/// The history a campaign report holds.
fn history_of(report: &campaign::Report) -> Option<&History> {
    report.history.as_ref()
}

/// Calls that answered where pg_lease must refuse (specs/SEMANTICS.md section 8): under a
/// default isolation of REPEATABLE READ or SERIALIZABLE, every call outside a READ
/// COMMITTED transaction must fail with 55000. At most three, as sentences.
fn refusal_breaches(plan: &Plan, history: Option<&History>) -> Vec<String> {
    let level = match plan.setting {
        Setting::RepeatableRead => Isolation::RepeatableRead,
        Setting::Serializable => Isolation::Serializable,
        _ => return Vec::new(),
    };
    let Some(h) = history else {
        return Vec::new();
    };
    let isolation: BTreeMap<model::TxnId, Isolation> =
        h.txns.iter().map(|t| (t.id, t.isolation)).collect();
    h.ops
        .iter()
        .filter(|o| matches!(o.result, OpResult::Ok(_)))
        .filter(|o| {
            o.txn
                .map_or(level, |t| isolation.get(&t).copied().unwrap_or(level))
                != Isolation::ReadCommitted
        })
        .take(3)
        .map(|o| {
            format!(
                "{} answered {:?} in a {} transaction; specs/SEMANTICS.md section 8 requires \
                 55000 (pg_lease needs READ COMMITTED)",
                model::checker::describe_call(&o.call),
                o.result,
                level.sql().to_uppercase()
            )
        })
        .collect()
}

// ---------------------------------------------------------------------------------------
// The exact-expiry check

/// `t + ttl` as pg_lease 0.2.0 computes it (SEMANTICS section 3): in UTC, months first
/// (a calendar month, the day clamped to the month's last), then days of 24 hours, then
/// the microseconds. `None` outside chrono's range.
pub fn utc_plus(t: Ts, ttl: Interval) -> Option<Ts> {
    let at = DateTime::<Utc>::from_timestamp_micros(t.0)?.naive_utc();
    let at = if ttl.months >= 0 {
        at.checked_add_months(Months::new(ttl.months.unsigned_abs()))?
    } else {
        at.checked_sub_months(Months::new(ttl.months.unsigned_abs()))?
    };
    let at = at.checked_add_signed(TimeDelta::try_days(i64::from(ttl.days))?)?;
    let at = at.checked_add_signed(TimeDelta::microseconds(ttl.micros))?;
    Some(Ts(at.and_utc().timestamp_micros()))
}

/// What [`exact_expiries`] found.
#[derive(Clone, Debug, Default)]
pub struct ExpiryReport {
    /// Reported expiries judged (each is judged once, by the calls that reported it).
    pub judged: usize,
    /// Of those, written with a ttl that has days or months (calendar arithmetic).
    pub calendar: usize,
    /// The ttls of the calls that wrote the judged expiries.
    pub judged_ttls: Vec<Interval>,
    /// Expiries not judged: only acquires reported them and a grant or renew of that key
    /// with an unknown outcome may have written them.
    pub skipped: usize,
    pub violations: Vec<String>,
}

/// Checks every expiry a grant or renew reported against SEMANTICS section 3, exactly:
/// `expires_at = t + ttl` in UTC for some `t` in the call's window `[t0, t1]`. A renew that
/// answered `ok` always wrote its expiry; an acquire that answered `acquired` wrote it, or
/// (idempotent) returned one written earlier. So every call that reported an expiry `x`
/// of a key: each renew among them must match `x`, and at least one of them must (the
/// one that wrote it), unless a grant or renew of that key has an unknown outcome (it may
/// have written `x` unseen: then `x` is skipped). `t + ttl` is monotone in `t`, so `x`
/// outside `[t0 + ttl, t1 + ttl]` matches no instant of the window: no false violation.
pub fn exact_expiries(history: &History) -> ExpiryReport {
    struct Reporter<'a> {
        op: &'a model::OpRecord,
        renew: bool,
        ttl: Option<Interval>,
    }
    let mut groups: BTreeMap<(String, Ts), Vec<Reporter<'_>>> = BTreeMap::new();
    let mut unknown_writers: BTreeSet<String> = BTreeSet::new();
    for op in &history.ops {
        let Some(key) = op.call.key() else { continue };
        match (&op.result, &op.call) {
            (OpResult::Ok(Outcome::Acquired { expires_at, .. }), Op::Acquire { ttl, .. }) => groups
                .entry((key.clone(), *expires_at))
                .or_default()
                .push(Reporter {
                    op,
                    renew: false,
                    ttl: *ttl,
                }),
            (OpResult::Ok(Outcome::Renewed { expires_at }), Op::Renew { ttl, .. }) => groups
                .entry((key.clone(), *expires_at))
                .or_default()
                .push(Reporter {
                    op,
                    renew: true,
                    ttl: *ttl,
                }),
            (r, Op::Acquire { .. } | Op::Renew { .. }) if r.is_unknown() => {
                unknown_writers.insert(key.clone());
            }
            _ => {}
        }
    }
    let mut report = ExpiryReport::default();
    for ((key, x), reporters) in &groups {
        let judge = |r: &Reporter<'_>| -> Option<(Ts, Ts, bool)> {
            let (span, ttl) = (r.op.server?, r.ttl?);
            let lo = utc_plus(span.t0(), ttl)?;
            let hi = utc_plus(span.t1(), ttl)?;
            Some((lo, hi, lo <= *x && *x <= hi))
        };
        let describe = |r: &Reporter<'_>| -> String {
            let what = if r.renew { "renew" } else { "acquire" };
            match (judge(r), r.op.server, r.ttl) {
                (Some((lo, hi, _)), Some(span), Some(ttl)) => format!(
                    "op {} {what} of {key:?} with ttl {ttl} in window {span} reported expires_at {}; t + ttl in UTC is in [{}, {}] ({:+.3} s off)",
                    r.op.id,
                    x.0,
                    lo.0,
                    hi.0,
                    if x.0 < lo.0 { (x.0 - lo.0) as f64 / 1e6 } else { (x.0 - hi.0) as f64 / 1e6 }
                ),
                _ => format!("op {} {what} of {key:?} reported expires_at {} without a window or ttl", r.op.id, x.0),
            }
        };
        let matching: Vec<&Reporter<'_>> = reporters
            .iter()
            .filter(|r| judge(r).is_some_and(|(_, _, ok)| ok))
            .collect();
        let wrong_renews: Vec<String> = reporters
            .iter()
            .filter(|r| r.renew && !judge(r).is_some_and(|(_, _, ok)| ok))
            .map(describe)
            .collect();
        if !wrong_renews.is_empty() {
            report.violations.extend(wrong_renews);
            report.judged += 1;
            continue;
        }
        match matching.first() {
            Some(writer) => {
                report.judged += 1;
                if let Some(ttl) = writer.ttl {
                    report.judged_ttls.push(ttl);
                    if ttl.months != 0 || ttl.days != 0 {
                        report.calendar += 1;
                    }
                }
            }
            None if unknown_writers.contains(key) => report.skipped += 1,
            None => {
                report.judged += 1;
                if let Some(ttl) = reporters.first().and_then(|r| r.ttl) {
                    report.judged_ttls.push(ttl);
                }
                report.violations.push(format!(
                    "no call that reported it wrote it: {}",
                    reporters
                        .iter()
                        .map(describe)
                        .collect::<Vec<_>>()
                        .join("; ")
                ));
            }
        }
    }
    report
}

// ---------------------------------------------------------------------------------------
// Conformance under a setting

/// What a conformance check must do under a setting.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Expect {
    /// Its own assertions apply: it must pass.
    Pass,
    /// Every lease call is refused (SEMANTICS section 8): it must fail by SQLSTATE 55000
    /// `pg_lease needs READ COMMITTED` (and a check that makes no call must pass).
    Refused,
    /// It waits longer than the statement timeout by design: it must fail by the
    /// timeout's cancel (57014 `canceling statement due to statement timeout`).
    Cancelled,
    /// It writes, in a READ ONLY session: it must fail by 25006 (a check that writes
    /// nothing must pass).
    WritesRefused,
    /// Not run, for this reason.
    NotRun(&'static str),
}

/// The conformance checks that make no lease call (they read the catalog).
const CHECKS_WITHOUT_CALLS: [&str; 2] = [
    "functions_are_security_definer_volatile_with_pinned_search_path",
    "the_api_and_the_lease_table_have_the_contracts_types",
];

/// What conformance check `check` must do under `setting`.
pub fn expectation(setting: Setting, check: &str) -> Expect {
    match (setting, check) {
        (Setting::RepeatableRead | Setting::Serializable | Setting::ReadOnly, check)
            if CHECKS_WITHOUT_CALLS.contains(&check) =>
        {
            Expect::Pass
        }
        (Setting::ReadOnly, _) => Expect::WritesRefused,
        (Setting::RepeatableRead | Setting::Serializable, _) => Expect::Refused,
        (
            Setting::StatementTimeout,
            "blocking_acquire_is_woken_by_release"
            | "blocking_acquire_takes_over_at_expiry"
            | "wait_exhaustion_is_57014_and_distinct_from_a_cancel"
            | "blocking_waiters_never_stall_the_holders_renew"
            | "blocking_waits_end_promptly_at_deadline_and_expiry"
            | "no_call_changes_the_callers_session_settings"
            | "lock_timeout_fails_a_waiting_call_with_55p03"
            | "a_write_that_waited_across_its_leases_expiry_answers_lapsed"
            | "a_first_grant_that_waited_for_a_rolled_back_insert_is_dated_after_it",
        ) => Expect::Cancelled,
        (Setting::LockTimeout, "a_write_that_waited_across_its_leases_expiry_answers_lapsed") => {
            Expect::NotRun(
                "its write waits 600 ms for another transaction's row lock by design; the 5 ms \
                 lock_timeout ends that wait first (55P03, the documented answer), so the check's \
                 own answer cannot come",
            )
        }
        (
            Setting::LockTimeout,
            "a_first_grant_that_waited_for_a_rolled_back_insert_is_dated_after_it",
        ) => Expect::NotRun(
            "its acquire waits 1 s for another transaction's insert of the key by design; the \
             5 ms lock_timeout ends that wait first (55P03, the documented answer), so the \
             check's own answer cannot come",
        ),
        (
            Setting::StatementTimeout | Setting::LockTimeout,
            "a_waiter_that_lost_a_race_never_stalls_the_holders_renew",
        ) => Expect::NotRun(
            "its waiter must be seen blocked on the takeover's row lock; the timeout cancels \
             that wait after 5 or 50 ms, before or after the check's 10 ms poll sees it, so \
             the check's failure is not determinate",
        ),
        (
            Setting::StatementTimeout | Setting::LockTimeout,
            "exactly_one_of_concurrent_acquirers_wins",
        ) => Expect::NotRun(
            "eight contenders wait on one another's row lock or insertion for as long as the \
             machine is slow: some are cancelled (the documented 55P03/57014, nothing \
             changed), but the check requires an answer from every contender",
        ),
        (Setting::StatementTimeout, "committed_state_survives_restart_and_crash") => {
            Expect::NotRun(
                "it crashes its server (and shuts it down immediately) and then writes: a \
                 commit right after crash recovery waits for the recovery's own writes and \
                 fsyncs, which took longer than 50 ms in every run on a loaded machine (CI), so \
                 a cancel there says nothing about the build; it runs under every other setting",
            )
        }
        (
            Setting::StatementTimeout,
            "trusted_install_by_a_non_superuser_and_drop_destroys_state",
        ) => Expect::NotRun(
            "it runs CREATE and DROP EXTENSION in the session: DDL, not a lease call, \
                 which may take longer than 50 ms",
        ),
        _ => Expect::Pass,
    }
}

/// The conformance checks run against pg_lease 0.1.0 under the isolation settings (where
/// 0.2.0 must refuse every call): a quick few, each of which must be refused.
pub const V010_CONFORMANCE: [&str; 4] = [
    "acquire_grants_epoch_1_expiring_at_server_time_plus_ttl",
    "denied_acquire_returns_nulls_and_writes_nothing",
    "renew_and_release_statuses_follow_precedence",
    "release_frees_and_advances_the_epoch",
];

/// The conformance suite against `version` with every connection under `plan`'s session;
/// each check judged by its [`expectation`]. `only`: run just these checks.
pub async fn conformance(
    plan: &Plan,
    cluster: &Cluster,
    version: Version,
    only: Option<&[&str]>,
) -> (Verdict, String) {
    let all = conformance::checks();
    let selected: Vec<&'static str> = all
        .iter()
        .map(|c| c.name)
        .filter(|n| only.is_none_or(|o| o.contains(n)))
        .filter(|n| !matches!(expectation(plan.setting, n), Expect::NotRun(_)))
        .collect();
    let not_run = all
        .iter()
        .filter(|c| matches!(expectation(plan.setting, c.name), Expect::NotRun(_)))
        .count();
    let report = match run_bounded(plan, cluster, version, &selected).await {
        Ok(r) => r,
        Err(e) => return (Verdict::Infrastructure(e.to_string()), String::new()),
    };
    let (report, slow) = match rerun_load_cancels(plan, cluster, version, report).await {
        Ok(r) => r,
        Err(e) => return (Verdict::Infrastructure(e.to_string()), String::new()),
    };
    let isolation = plan.workload.isolations.last().map_or("?", |i| i.sql());
    judge_conformance(
        plan.setting,
        isolation,
        &report.outcomes,
        selected.len(),
        not_run,
        &slow,
    )
}

/// The conformance suite's verdict under `setting` (its sessions at `isolation`) from its
/// `outcomes` (of `selected` checks; `not_run` left out by their expectation; `slow`: the
/// checks that must pass and that the statement timeout cancelled in every run, which are
/// no verdict, never a finding), with its figures.
fn judge_conformance(
    setting: Setting,
    isolation: &str,
    outcomes: &[conformance::Outcome],
    selected: usize,
    not_run: usize,
    slow: &[&'static str],
) -> (Verdict, String) {
    let mut problems = Vec::new();
    let (mut passed, mut refused, mut cancelled) = (0, 0, 0);
    for o in outcomes {
        let expect = expectation(setting, o.name);
        match (&o.result, expect) {
            (Ok(()), Expect::Pass) => passed += 1,
            (Err(Failure::Violation(why)), Expect::Refused)
                if why.contains("55000") && why.contains("pg_lease needs READ COMMITTED") =>
            {
                refused += 1
            }
            (Err(Failure::Violation(why)), Expect::Cancelled)
                if why.contains("canceling statement due to statement timeout") =>
            {
                cancelled += 1
            }
            (Err(Failure::Violation(why)), Expect::WritesRefused) if why.contains("25006") => {
                refused += 1
            }
            (Ok(()), Expect::WritesRefused) => passed += 1,
            (Ok(()), Expect::Refused) => problems.push(format!(
                "{}: ran and passed at {}; SEMANTICS section 8 requires every call to be refused (55000)",
                o.name,
                isolation
            )),
            (Ok(()), Expect::Cancelled) => problems.push(format!(
                "{}: passed; its waits should have been cancelled by statement_timeout",
                o.name
            )),
            (Err(_), _) if slow.contains(&o.name) => {}
            (Err(why), _) => problems.push(format!(
                "{}: {} (expected {expect:?})",
                o.name,
                why.to_string().lines().next().unwrap_or_default()
            )),
            (Ok(()), Expect::NotRun(_)) => {}
        }
    }
    let figures = format!(
        "{} checks run: {passed} passed, {refused} refused (55000) as required, {cancelled} cancelled by statement_timeout as required, {} wrong; {not_run} not run",
        outcomes.len(),
        problems.len()
    );
    if outcomes.len() != selected {
        problems.push(format!(
            "{} of {} selected checks ran",
            outcomes.len(),
            selected
        ));
    }
    let verdict = if !problems.is_empty() {
        Verdict::Finding(problems.join("\n"))
    } else if !slow.is_empty() {
        Verdict::Infrastructure(format!(
            "no verdict: {} cancelled by the 50 ms statement_timeout in each of {} runs although \
             no call of theirs waits; the machine answers too slowly for this setting",
            slow.join(", "),
            1 + LOAD_RERUNS
        ))
    } else {
        Verdict::Pass
    };
    (verdict, figures)
}

/// The conformance suite's checks in `selected`, under `plan`'s session, bounded.
async fn run_bounded(
    plan: &Plan,
    cluster: &Cluster,
    version: Version,
    selected: &[&'static str],
) -> Result<conformance::Report, MatrixError> {
    // Bound: the suite takes 15-25 s; its longest check waits 10 s.
    bounded(
        "the conformance suite",
        Duration::from_secs(300),
        conformance::run_with(cluster, &version.extension(), &plan.session, |n| {
            selected.contains(&n)
        }),
    )
    .await
}

/// Whether `outcome`, of a check that must pass, is the statement timeout's cancel (the
/// check's own calls or the opening of its session).
fn cancelled_by_load(setting: Setting, outcome: &conformance::Outcome) -> bool {
    setting == Setting::StatementTimeout
        && expectation(setting, outcome.name) == Expect::Pass
        && outcome.result.as_ref().is_err_and(|e| {
            e.to_string()
                .contains("canceling statement due to statement timeout")
        })
}

/// How often a check that must pass is re-run after the statement timeout cancelled it.
const LOAD_RERUNS: usize = 2;

/// Under the 50 ms statement_timeout a check whose calls never wait can still be cancelled
/// when the machine is loaded (a cold cache after a restart, two majors side by side on two
/// cores): the documented answer of a cancelled call, evidence of neither a pass nor a
/// violation. Such checks are re-run alone, up to [`LOAD_RERUNS`] times; the outcome of the
/// last run replaces the first. Returns the report and the checks cancelled in every run.
async fn rerun_load_cancels(
    plan: &Plan,
    cluster: &Cluster,
    version: Version,
    mut report: conformance::Report,
) -> Result<(conformance::Report, Vec<&'static str>), MatrixError> {
    let cancelled_by_load = |o: &conformance::Outcome| cancelled_by_load(plan.setting, o);
    for _ in 0..LOAD_RERUNS {
        let again: Vec<&'static str> = report
            .outcomes
            .iter()
            .filter(|o| cancelled_by_load(o))
            .map(|o| o.name)
            .collect();
        if again.is_empty() {
            break;
        }
        let rerun = run_bounded(plan, cluster, version, &again).await?;
        for outcome in rerun.outcomes {
            if let Some(slot) = report.outcomes.iter_mut().find(|o| o.name == outcome.name) {
                *slot = outcome;
            }
        }
    }
    let slow = report
        .outcomes
        .iter()
        .filter(|o| cancelled_by_load(o))
        .map(|o| o.name)
        .collect();
    Ok((report, slow))
}

// ---------------------------------------------------------------------------------------
// The matrix on one major

/// How the matrix runs on one major.
#[derive(Clone, Copy, Debug)]
pub struct MatrixOptions {
    pub size: CampaignSize,
    /// Settings run at the same time (their conformance suites mostly wait; campaigns run
    /// one at a time).
    pub parallel: usize,
    /// The build under test (installed on the cluster under its extension name).
    pub under_test: Version,
    /// Also run pg_lease 0.1.0 under the settings it gets wrong (it must fail there).
    pub compare_0_1_0: bool,
    /// Run the conformance suite under each setting (else the control and the campaign).
    pub conformance: bool,
}

impl Default for MatrixOptions {
    fn default() -> Self {
        MatrixOptions {
            size: CampaignSize::default(),
            parallel: 3,
            under_test: Version::UnderTest,
            compare_0_1_0: true,
            conformance: true,
        }
    }
}

/// Checks that `version` is what `CREATE EXTENSION` installs on `cluster`.
pub async fn check_version(cluster: &Cluster, version: Version) -> Result<(), MatrixError> {
    let db = cluster
        .fresh_database_with("matrix_version", &version.extension())
        .await
        .map_err(pg_error(format!(
            "CREATE EXTENSION {}",
            version.extension()
        )))?;
    let c = cluster
        .connect(&db)
        .await
        .map_err(pg_error("connecting as the superuser"))?;
    let found = crate::extension::installed_version(&c, &version.extension())
        .await
        .map_err(db_error("reading extversion"))?;
    let expected = version.target().version();
    if found.as_deref() != Some(expected) {
        return Err(MatrixError::Version {
            extension: version.extension(),
            expected,
            found,
        });
    }
    Ok(())
}

/// Every suite of every setting on `cluster` (the extensions of [`Version`] installed
/// there): for this checkout's pg_lease, the control, the campaign and the conformance
/// suite; for pg_lease 0.1.0, under the settings it gets wrong, the campaign and (under
/// the isolation settings) a few conformance checks.
pub async fn run_major(
    install: Arc<PgInstall>,
    cluster: Arc<Cluster>,
    settings: &[Setting],
    options: MatrixOptions,
) -> Vec<Row> {
    let major = install.version.major;
    let campaigns = Arc::new(tokio::sync::Semaphore::new(1));
    let slots = Arc::new(tokio::sync::Semaphore::new(options.parallel.max(1)));
    let mut tasks = tokio::task::JoinSet::new();
    for (i, setting) in settings.iter().copied().enumerate() {
        let (cluster, campaigns, slots) = (
            Arc::clone(&cluster),
            Arc::clone(&campaigns),
            Arc::clone(&slots),
        );
        let size = CampaignSize {
            seed: options.size.seed.wrapping_add(i as u64),
            ..options.size
        };
        let options = MatrixOptions { size, ..options };
        tasks.spawn(async move {
            let _slot = slots.acquire_owned().await;
            run_setting(major, setting, &cluster, &options, &campaigns).await
        });
    }
    let mut rows = Vec::new();
    while let Some(joined) = tasks.join_next().await {
        match joined {
            Ok(mut r) => rows.append(&mut r),
            Err(e) => rows.push(Row {
                major,
                setting: Setting::ALL[0],
                suite: Suite::Control,
                version: None,
                verdict: Verdict::Infrastructure(format!("a setting's task failed: {e}")),
                figures: String::new(),
                elapsed: Duration::ZERO,
            }),
        }
    }
    rows.sort_by_key(|r| (r.setting, r.suite, r.version));
    rows
}

/// One setting on `cluster` (the control, the campaign, and with `options.conformance`
/// the conformance suite), alone: the rows of [`run_major`] for it.
pub async fn run_one_setting(
    major: u32,
    setting: Setting,
    cluster: &Cluster,
    options: &MatrixOptions,
) -> Vec<Row> {
    let campaigns = tokio::sync::Semaphore::new(1);
    run_setting(major, setting, cluster, options, &campaigns).await
}

async fn run_setting(
    major: u32,
    setting: Setting,
    cluster: &Cluster,
    options: &MatrixOptions,
    campaigns: &tokio::sync::Semaphore,
) -> Vec<Row> {
    let size = options.size;
    let row = |suite, version, verdict, figures, started: Instant| Row {
        major,
        setting,
        suite,
        version,
        verdict,
        figures,
        elapsed: started.elapsed(),
    };
    let started = Instant::now();
    let plan = match bounded("planning", Duration::from_secs(60), plan(setting, cluster)).await {
        Ok(Ok(p)) => p,
        Ok(Err(e)) | Err(e) => {
            return vec![row(
                Suite::Control,
                None,
                Verdict::Infrastructure(e.to_string()),
                String::new(),
                started,
            )]
        }
    };
    let mut rows = Vec::new();
    let (verdict, figures) = match bounded(
        "the control",
        Duration::from_secs(60),
        control(&plan, cluster),
    )
    .await
    {
        Ok(Ok(Ok(evidence))) => (Verdict::Pass, format!("{}; {evidence}", plan.facts)),
        Ok(Ok(Err(evidence))) => (
            Verdict::NotExercised(format!("the setting did not bite: {evidence}")),
            plan.facts.clone(),
        ),
        Ok(Err(e)) | Err(e) => (Verdict::Infrastructure(e.to_string()), plan.facts.clone()),
    };
    rows.push(row(Suite::Control, None, verdict, figures, started));
    let mut versions = vec![options.under_test];
    if options.compare_0_1_0 && setting.fixed_in_0_2_0() {
        versions.push(Version::V010);
    }
    for version in versions {
        let started = Instant::now();
        let (verdict, figures) = {
            let _one = campaigns.acquire().await;
            exercised_campaign(&plan, cluster, version, size).await
        };
        rows.push(row(
            Suite::Campaign,
            Some(version),
            verdict,
            figures,
            started,
        ));
        let only: Option<&[&str]> = match version {
            _ if !options.conformance => continue,
            Version::UnderTest | Version::Target(_) => None,
            Version::V010 if matches!(setting, Setting::RepeatableRead | Setting::Serializable) => {
                Some(&V010_CONFORMANCE)
            }
            Version::V010 => continue,
        };
        let started = Instant::now();
        let (verdict, figures) = conformance(&plan, cluster, version, only).await;
        rows.push(row(
            Suite::Conformance,
            Some(version),
            verdict,
            figures,
            started,
        ));
    }
    rows
}

/// The conformance checks each setting does not run, and why.
pub fn not_run() -> Vec<(Setting, &'static str, &'static str)> {
    let mut out = Vec::new();
    for setting in Setting::ALL {
        for check in conformance::checks() {
            if let Expect::NotRun(why) = expectation(setting, check.name) {
                out.push((setting, check.name, why));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use model::{OpRecord, Span};

    fn ts(s: &str) -> Ts {
        let t: DateTime<Utc> = s.parse().expect("a timestamp");
        Ts(t.timestamp_micros())
    }

    #[test]
    fn utc_plus_is_calendar_months_then_24_hour_days_then_microseconds() {
        let month = Interval {
            months: 1,
            days: 0,
            micros: 0,
        };
        assert_eq!(
            utc_plus(ts("2027-01-31T10:00:00Z"), month),
            Some(ts("2027-02-28T10:00:00Z"))
        );
        assert_eq!(
            utc_plus(ts("2028-01-31T10:00:00Z"), month),
            Some(ts("2028-02-29T10:00:00Z"))
        );
        // Across the US spring change (2027-03-14) a day is still 24 hours in UTC.
        let day = Interval {
            months: 0,
            days: 1,
            micros: 250_000,
        };
        assert_eq!(
            utc_plus(ts("2027-03-14T01:00:00Z"), day),
            Some(ts("2027-03-15T01:00:00.25Z"))
        );
        // Months before days: Jan 31 + (1 mon 1 day) is Mar 1, not Mar 3 or Feb 29.
        let both = Interval {
            months: 1,
            days: 1,
            micros: 0,
        };
        assert_eq!(
            utc_plus(ts("2027-01-31T00:00:00Z"), both),
            Some(ts("2027-03-01T00:00:00Z"))
        );
    }

    fn op(
        id: u64,
        call: Op<String, String>,
        window: (i64, i64),
        outcome: Outcome<String>,
    ) -> OpRecord {
        OpRecord {
            id,
            process: 1,
            txn: None,
            call,
            invoke: id * 10,
            complete: id * 10 + 5,
            server: Span::new(Ts(window.0), Ts(window.1)).ok(),
            result: OpResult::Ok(outcome),
        }
    }

    fn history(ops: Vec<OpRecord>) -> History {
        History {
            meta: BTreeMap::new(),
            ops,
            txns: Vec::new(),
            nemeses: Vec::new(),
            wal: None,
        }
    }

    #[test]
    fn exact_expiries_catch_an_hour_off_and_accept_idempotent_acquires() {
        let days = Interval {
            months: 0,
            days: 102,
            micros: 0,
        };
        let t = ts("2026-12-03T11:00:00Z").0;
        let right = utc_plus(Ts(t), days).expect("in range");
        let grant = op(
            1,
            Op::acquire("k".into(), "a".into(), days),
            (t - 5, t + 5),
            Outcome::Acquired {
                epoch: 1,
                expires_at: right,
            },
        );
        // An idempotent acquire later reports the same expiry with its own window and ttl.
        let again = op(
            2,
            Op::acquire("k".into(), "a".into(), Interval::secs(1)),
            (t + 1_000, t + 1_010),
            Outcome::Acquired {
                epoch: 1,
                expires_at: right,
            },
        );
        let ok = exact_expiries(&history(vec![grant.clone(), again.clone()]));
        assert!(ok.violations.is_empty(), "{:?}", ok.violations);
        assert_eq!((ok.judged, ok.calendar), (1, 1));
        // Negative control: the same renew an hour short (a local calendar across a DST
        // change) is a violation, and so is a grant whose only reporters do not match.
        let short = Ts(right.0 - 3_600_000_000);
        let renew = op(
            3,
            Op::renew("k".into(), "a".into(), 1, days),
            (t + 2_000, t + 2_010),
            Outcome::Renewed { expires_at: short },
        );
        let bad = exact_expiries(&history(vec![grant.clone(), renew]));
        assert_eq!(bad.violations.len(), 1, "{:?}", bad.violations);
        assert!(bad.violations[0].contains("-3600"), "{:?}", bad.violations);
        let mut wrong_grant = grant;
        wrong_grant.result = OpResult::Ok(Outcome::Acquired {
            epoch: 1,
            expires_at: short,
        });
        let bad = exact_expiries(&history(vec![wrong_grant.clone()]));
        assert_eq!(bad.violations.len(), 1);
        // With an unknown grant of the key it could have been written unseen: skipped.
        let mut lost = op(
            4,
            Op::acquire("k".into(), "b".into(), days),
            (0, 0),
            Outcome::Denied,
        );
        lost.result = OpResult::Unknown {
            reason: "lost".into(),
        };
        let skipped = exact_expiries(&history(vec![lost, wrong_grant]));
        assert!(skipped.violations.is_empty());
        assert_eq!(skipped.skipped, 1);
    }

    /// A check that must pass and that the statement timeout cancelled in every run is no
    /// verdict for the setting, never a finding (specs/GATE.md, the matrix suite); the same
    /// outcome not cancelled in every run, or any other wrong answer, is a finding.
    #[test]
    fn a_check_cancelled_by_load_in_every_run_is_no_verdict_and_a_wrong_answer_a_finding() {
        let plain = "denied_acquire_returns_nulls_and_writes_nothing";
        let outcomes = |why: &str| {
            vec![conformance::Outcome {
                name: plain,
                result: Err(Failure::Violation(why.into())),
                elapsed: Duration::ZERO,
            }]
        };
        let cancel = "57014: canceling statement due to statement timeout";
        let judge = |o: &[conformance::Outcome], slow: &[&'static str]| {
            judge_conformance(Setting::StatementTimeout, "READ COMMITTED", o, 1, 0, slow).0
        };
        let slow = judge(&outcomes(cancel), &[plain]);
        assert!(
            matches!(&slow, Verdict::Infrastructure(why) if why.contains(plain)),
            "{slow:?}"
        );
        // Negative controls: a cancel that a rerun did not repeat (not slow), and a wrong answer.
        let once = judge(&outcomes(cancel), &[]);
        assert!(
            matches!(&once, Verdict::Finding(why) if why.contains(plain)),
            "{once:?}"
        );
        let wrong = judge(&outcomes("expected granted, came back denied"), &[]);
        assert!(matches!(&wrong, Verdict::Finding(_)), "{wrong:?}");
    }

    #[test]
    fn only_a_statement_timeout_cancel_of_a_check_that_must_pass_is_rerun() {
        let outcome = |name: &'static str, result: Result<(), Failure>| conformance::Outcome {
            name,
            result,
            elapsed: Duration::ZERO,
        };
        let cancel = || {
            Err(Failure::Violation(
                "57014: canceling statement due to statement timeout".into(),
            ))
        };
        let plain = "denied_acquire_returns_nulls_and_writes_nothing";
        let waits = "blocking_acquire_is_woken_by_release";
        assert!(cancelled_by_load(
            Setting::StatementTimeout,
            &outcome(plain, cancel())
        ));
        assert!(cancelled_by_load(
            Setting::StatementTimeout,
            &outcome(
                plain,
                Err(Failure::Infrastructure(
                    "cannot open a session: 57014: canceling statement due to statement timeout"
                        .into()
                ))
            )
        ));
        // Its cancel is the required answer, a wrong answer is a finding, a pass is a pass,
        // and no other setting has a statement timeout.
        assert!(!cancelled_by_load(
            Setting::StatementTimeout,
            &outcome(waits, cancel())
        ));
        assert!(!cancelled_by_load(
            Setting::StatementTimeout,
            &outcome(plain, Err(Failure::Violation("epoch 2, expected 1".into())))
        ));
        assert!(!cancelled_by_load(
            Setting::StatementTimeout,
            &outcome(plain, Ok(()))
        ));
        assert!(!cancelled_by_load(
            Setting::LockTimeout,
            &outcome(plain, cancel())
        ));
    }

    #[test]
    fn every_named_check_exists_and_every_setting_runs_most_checks() {
        let names: Vec<&str> = conformance::checks().iter().map(|c| c.name).collect();
        for (setting, check, _) in not_run() {
            assert!(names.contains(&check), "{setting}: no check {check}");
        }
        for check in V010_CONFORMANCE.iter().chain(CHECKS_WITHOUT_CALLS.iter()) {
            assert!(names.contains(check), "no check {check}");
        }
        for check in [
            "blocking_acquire_is_woken_by_release",
            "blocking_acquire_takes_over_at_expiry",
            "wait_exhaustion_is_57014_and_distinct_from_a_cancel",
            "blocking_waiters_never_stall_the_holders_renew",
        ] {
            assert!(names.contains(&check), "no check {check}");
            assert_eq!(
                expectation(Setting::StatementTimeout, check),
                Expect::Cancelled
            );
        }
        for setting in Setting::ALL {
            let skipped = names
                .iter()
                .filter(|n| matches!(expectation(setting, n), Expect::NotRun(_)))
                .count();
            // At most an eighth of the checks (4 of 32): a setting that skips more tests
            // too little of the contract under it.
            assert!(
                skipped * 8 <= names.len(),
                "{setting} skips {skipped} of {} checks",
                names.len()
            );
        }
        // Under the isolation settings everything that calls pg_lease must be refused.
        assert_eq!(
            names
                .iter()
                .filter(|n| expectation(Setting::RepeatableRead, n) == Expect::Pass)
                .count(),
            CHECKS_WITHOUT_CALLS.len()
        );
    }

    #[test]
    fn twins_are_counted_by_case() {
        let set = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<BTreeSet<_>>();
        assert_eq!(twins(&set(&["lease-a", "LEASE-A", "x"])), 1);
        assert_eq!(twins(&set(&["lease-a", "lease-b"])), 0);
    }
}
