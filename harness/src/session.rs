//! Session settings a caller controls (specs/SEMANTICS.md section 10), applied to every
//! connection a recorder, a campaign or the conformance suite opens.
//!
//! - [`SessionSettings::settings`]: server settings every session starts with, sent as
//!   `-c name=value` options in the startup packet, so that they hold from the first
//!   statement (including the ones that prepare the calls) and a `RESET` returns to them.
//! - [`SessionSettings::collation`]: keys and owners reach the lease calls through a
//!   collation, either on the argument (`$1::text COLLATE x`) or as a column of a source
//!   relation whose collation is implicit (`FROM (SELECT $1::text COLLATE x AS k) a,
//!   LATERAL lease.acquire(a.k, ...)`).
//! - [`SessionSettings::setup`]: SQL the superuser runs once in each new database, without
//!   the settings, before any session connects (the objects the settings name: a collation,
//!   a schema on the search_path).
//! - [`SessionSettings::rotation`]: settings that differ between the sessions of one run:
//!   the n-th connection opened under these settings (counted over the process) starts
//!   with the n-th of them, round robin (e.g. sessions in different TimeZones).

use std::sync::atomic::{AtomicUsize, Ordering};
use tokio_postgres::{Client, Config, NoTls};

/// Connections opened under settings with a rotation, over the process.
static OPENED: AtomicUsize = AtomicUsize::new(0);

/// Where a key or owner argument gets its collation from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CollationVia {
    /// `$1::text COLLATE x` in the call's argument list (an explicit collation).
    Argument,
    /// A column of a source relation (`(SELECT $1::text COLLATE x AS k) a`, then `a.k`):
    /// the argument carries the column's collation as an implicit one.
    Column,
}

/// The collation keys and owners are passed through.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Collated {
    /// The collation's name as SQL (already quoted or qualified as needed), e.g.
    /// `public."matrix_ci"`.
    pub collation: String,
    pub via: CollationVia,
}

/// How every session of a run talks to the server.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SessionSettings {
    /// `(name, value)`: each session starts with `-c name=value`.
    pub settings: Vec<(String, String)>,
    /// Keys and owners go through this collation.
    pub collation: Option<Collated>,
    /// SQL run by the superuser in each new database before sessions connect.
    pub setup: Vec<String>,
    /// `(name, value)`: one of them per connection, round robin, beside `settings`.
    pub rotation: Vec<(String, String)>,
}

impl SessionSettings {
    /// No settings: the server's defaults, arguments as they are.
    pub fn none() -> SessionSettings {
        SessionSettings::default()
    }

    /// True when sessions run as they would without these settings.
    pub fn is_empty(&self) -> bool {
        self.settings.is_empty()
            && self.collation.is_none()
            && self.setup.is_empty()
            && self.rotation.is_empty()
    }

    /// The startup options (`-c name=value ...`) the settings amount to, escaped as the
    /// server splits them (whitespace separates options; a backslash escapes the next
    /// character).
    pub fn options(&self) -> String {
        self.settings
            .iter()
            .map(|(name, value)| format!("-c {}={}", escape(name), escape(value)))
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// `config` with the settings added to its startup options (and, with a rotation,
    /// the next connection's rotating setting).
    pub fn apply(&self, config: &Config) -> Config {
        let mut config = config.clone();
        let mut options = self.options();
        if !self.rotation.is_empty() {
            let n = OPENED.fetch_add(1, Ordering::Relaxed) % self.rotation.len();
            let (name, value) = &self.rotation[n];
            let one = format!("-c {}={}", escape(name), escape(value));
            options = [options, one]
                .into_iter()
                .filter(|o| !o.is_empty())
                .collect::<Vec<_>>()
                .join(" ");
        }
        if options.is_empty() {
            return config;
        }
        let options = match config.get_options() {
            Some(existing) if !existing.trim().is_empty() => format!("{existing} {options}"),
            _ => options,
        };
        config.options(&options);
        config
    }

    /// Runs [`SessionSettings::setup`] on `admin` (a superuser connection to the new
    /// database, opened without the settings).
    pub async fn run_setup(&self, admin: &Client) -> Result<(), tokio_postgres::Error> {
        for sql in &self.setup {
            admin.batch_execute(sql).await?;
        }
        Ok(())
    }

    /// A connection with `config` under these settings; its driver task is spawned.
    pub async fn connect(&self, config: &Config) -> Result<Client, tokio_postgres::Error> {
        let (client, connection) = self.apply(config).connect(NoTls).await?;
        tokio::spawn(async move {
            // The connection's own error shows as the next call's error.
            let _ = connection.await;
        });
        Ok(client)
    }
}

impl SessionSettings {
    /// The settings as JSON, for a history's header.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "settings": self.settings.iter().map(|(n, v)| serde_json::json!([n, v])).collect::<Vec<_>>(),
            "collation": self.collation.as_ref().map(|c| serde_json::json!({
                "collation": c.collation,
                "via": match c.via {
                    CollationVia::Argument => "argument",
                    CollationVia::Column => "column",
                },
            })),
            "setup": self.setup,
            "rotation": self.rotation.iter().map(|(n, v)| serde_json::json!([n, v])).collect::<Vec<_>>(),
        })
    }
}

/// Escapes whitespace and backslashes for the startup packet's `options`.
fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if c == '\\' || c.is_whitespace() {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

impl Collated {
    /// The SQL of text parameter `$n` with the collation attached explicitly.
    pub fn param(&self, n: usize) -> String {
        format!("${n}::text COLLATE {}", self.collation)
    }
}

/// How the key (`$1`) and, when there is one, the owner (`$2`) reach a lease function:
/// the arguments to put in its call and the source relation that must precede the
/// function in `FROM` (a `LATERAL` call follows it), if any.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Arguments {
    pub key: String,
    pub owner: String,
    /// `(SELECT ... ) a` when the arguments are columns of a source relation.
    pub source: Option<String>,
}

impl Arguments {
    /// The arguments for a call under `collation` (plain `$1::text`, `$2::text` without).
    pub fn of(collation: Option<&Collated>, with_owner: bool) -> Arguments {
        match collation {
            None => Arguments {
                key: "$1::text".into(),
                owner: "$2::text".into(),
                source: None,
            },
            Some(c) if c.via == CollationVia::Argument => Arguments {
                key: c.param(1),
                owner: c.param(2),
                source: None,
            },
            Some(c) => {
                let columns = if with_owner {
                    format!("{} AS k, {} AS o", c.param(1), c.param(2))
                } else {
                    format!("{} AS k", c.param(1))
                };
                Arguments {
                    key: "a.k".into(),
                    owner: "a.o".into(),
                    source: Some(format!("(SELECT {columns}) AS a")),
                }
            }
        }
    }

    /// `FROM` items for a set-returning call `call` aliased `r`: the call alone, or the
    /// source relation then the call as a `LATERAL` item.
    pub fn from(&self, call: &str) -> String {
        match &self.source {
            None => format!("{call} AS r"),
            Some(source) => format!("{source} CROSS JOIN LATERAL {call} AS r"),
        }
    }

    /// `FROM` items that keep one row when `call` returns none: `LEFT JOIN LATERAL`.
    pub fn from_keeping_a_row(&self, call: &str) -> String {
        let left = self.source.as_deref().unwrap_or("(SELECT 1) AS one");
        format!("{left} LEFT JOIN LATERAL {call} AS r ON true")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_escape_spaces_and_backslashes() {
        let s = SessionSettings {
            settings: vec![
                ("DateStyle".into(), "SQL, DMY".into()),
                ("search_path".into(), "evil,pg_catalog".into()),
                ("application_name".into(), "a\\b".into()),
            ],
            ..SessionSettings::default()
        };
        assert_eq!(
            s.options(),
            "-c DateStyle=SQL,\\ DMY -c search_path=evil,pg_catalog -c application_name=a\\\\b"
        );
        // Negative control: no settings, no options.
        assert_eq!(SessionSettings::none().options(), "");
        assert!(SessionSettings::none().is_empty());
    }

    #[test]
    fn arguments_take_the_collation_on_the_argument_or_from_a_column() {
        let plain = Arguments::of(None, true);
        assert_eq!(plain.from("f($1::text)"), "f($1::text) AS r");
        let arg = Arguments::of(
            Some(&Collated {
                collation: "public.ci".into(),
                via: CollationVia::Argument,
            }),
            true,
        );
        assert_eq!(arg.key, "$1::text COLLATE public.ci");
        assert_eq!(arg.source, None);
        let col = Arguments::of(
            Some(&Collated {
                collation: "public.ci".into(),
                via: CollationVia::Column,
            }),
            false,
        );
        assert_eq!(col.key, "a.k");
        assert_eq!(
            col.from("lease.inspect(a.k)"),
            "(SELECT $1::text COLLATE public.ci AS k) AS a CROSS JOIN LATERAL lease.inspect(a.k) AS r"
        );
        assert_eq!(
            col.from_keeping_a_row("lease.inspect(a.k)"),
            "(SELECT $1::text COLLATE public.ci AS k) AS a LEFT JOIN LATERAL lease.inspect(a.k) AS r ON true"
        );
    }
}
