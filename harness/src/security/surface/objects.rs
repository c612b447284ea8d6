//! The objects of an installed build, read from pg_catalog, and the statement templates of
//! [`super::CLASSES`] filled from them.

use crate::security::SecurityError;
use std::collections::BTreeMap;
use std::fmt;
use tokio_postgres::Client;

/// The kinds of object a build can have, and two pseudo-objects.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    Schema,
    /// A table of the build, or the TOAST table of one.
    Table,
    /// An index of such a table.
    Index,
    /// A row type of such a table, its array type, or a type of the build.
    Type,
    Function,
    /// A trigger on such a table.
    Trigger,
    /// A constraint of such a table.
    Constraint,
    /// The extension itself.
    Extension,
    /// The database (statements that reach every table in it).
    Database,
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Kind::Schema => "schema",
            Kind::Table => "table",
            Kind::Index => "index",
            Kind::Type => "type",
            Kind::Function => "function",
            Kind::Trigger => "trigger",
            Kind::Constraint => "constraint",
            Kind::Extension => "extension",
            Kind::Database => "database",
        })
    }
}

/// One object and the values of the placeholders it fills.
#[derive(Clone, Debug)]
pub struct Object {
    pub kind: Kind,
    /// As pg_describe_object says (for messages).
    pub label: String,
    /// One of the four API functions (`lease.acquire`, `renew`, `release`, `inspect`, which
    /// every role may call, SEMANTICS section 4): its calls pass the attacker's own keys.
    pub api: bool,
    pub oid: u32,
    vars: BTreeMap<String, String>,
}

impl Object {
    /// `template` with this object's placeholders (and `more`) filled; `None` when it needs
    /// one the object does not have (e.g. an index of a table that has none).
    pub fn expand(&self, template: &str, more: &[(&str, String)]) -> Option<String> {
        let mut out = String::new();
        let mut rest = template;
        while let Some(open) = rest.find('{') {
            out.push_str(&rest[..open]);
            let close = rest[open..].find('}')? + open;
            let name = &rest[open + 1..close];
            let value = more
                .iter()
                .find(|(n, _)| *n == name)
                .map(|(_, v)| v.clone())
                .or_else(|| self.vars.get(name).cloned())?;
            out.push_str(&value);
            rest = &rest[close + 1..];
        }
        out.push_str(rest);
        Some(out)
    }
}

/// One row of the enumeration query: kind, label, api, oid, then placeholder pairs.
const OBJECTS_SQL: &str = r#"
WITH ext AS (SELECT oid, extname FROM pg_extension WHERE extname = $1),
mem AS (SELECT d.classid, d.objid FROM pg_depend d, ext
         WHERE d.refclassid = 'pg_extension'::regclass AND d.refobjid = ext.oid AND d.deptype = 'e'),
tabs AS (SELECT c.oid FROM pg_class c JOIN mem ON mem.classid = 'pg_class'::regclass AND mem.objid = c.oid
          WHERE c.relkind IN ('r', 'p')),
alltabs AS (SELECT oid FROM tabs
            UNION SELECT c.reltoastrelid FROM pg_class c JOIN tabs t ON t.oid = c.oid WHERE c.reltoastrelid <> 0),
cols AS (SELECT a.attrelid AS rel,
                (array_agg(quote_ident(a.attname) ORDER BY a.attnum))[1] AS col,
                (array_agg(quote_ident(a.attname) ORDER BY a.attnum DESC))[1] AS col2
           FROM pg_attribute a JOIN alltabs t ON t.oid = a.attrelid
          WHERE a.attnum > 0 AND NOT a.attisdropped GROUP BY a.attrelid),
idx AS (SELECT i.indrelid AS rel, min(quote_ident(c.relname)) AS idxname
          FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid GROUP BY i.indrelid),
rel AS (
    SELECT c.oid, 'table' AS kind, format('%I.%I', n.nspname, c.relname) AS obj,
           c.relname::text AS name, n.nspname::text AS schema,
           format('%I.%I', n.nspname, c.relname) AS tbl,
           CASE WHEN c.reltype <> 0 THEN c.reltype::regtype::text END AS typ
      FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace JOIN alltabs t ON t.oid = c.oid
    UNION ALL
    SELECT c.oid, 'index', format('%I.%I', n.nspname, c.relname), c.relname::text, n.nspname::text,
           i.indrelid::regclass::text, NULL
      FROM pg_index i JOIN alltabs t ON t.oid = i.indrelid
      JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_namespace n ON n.oid = c.relnamespace
)
SELECT kind, pg_describe_object('pg_class'::regclass, rel.oid, 0), false, rel.oid,
       ARRAY['obj', obj, 'name', quote_ident(name), 'schema', quote_ident(schema), 'table', tbl,
             'type', typ, 'col', cols.col, 'col2', cols.col2, 'idxname', idx.idxname]
  FROM rel LEFT JOIN cols ON cols.rel = (tbl::regclass)::oid LEFT JOIN idx ON idx.rel = (tbl::regclass)::oid
UNION ALL
SELECT 'type', pg_describe_object('pg_type'::regclass, t.oid, 0), false, t.oid,
       ARRAY['obj', format_type(t.oid, NULL), 'type', format_type(t.oid, NULL), 'name', quote_ident(t.typname),
             'schema', quote_ident(t.typnamespace::regnamespace::text)]
  FROM pg_type t
 WHERE t.typrelid IN (SELECT oid FROM tabs)
    OR t.typelem IN (SELECT reltype FROM pg_class WHERE oid IN (SELECT oid FROM tabs)) AND t.typlen = -1
    OR t.oid IN (SELECT objid FROM mem WHERE classid = 'pg_type'::regclass)
UNION ALL
SELECT 'schema', pg_describe_object('pg_namespace'::regclass, n.oid, 0), false, n.oid,
       ARRAY['obj', quote_ident(n.nspname), 'name', quote_ident(n.nspname), 'schema', quote_ident(n.nspname)]
  FROM pg_namespace n JOIN mem ON mem.classid = 'pg_namespace'::regclass AND mem.objid = n.oid
UNION ALL
SELECT 'function', pg_describe_object('pg_proc'::regclass, p.oid, 0),
       p.pronamespace = (SELECT oid FROM pg_namespace WHERE nspname = 'lease') AND p.proname IN ('acquire', 'renew', 'release', 'inspect'),
       p.oid,
       ARRAY['obj', p.oid::regprocedure::text, 'name', quote_ident(p.proname),
             'schema', quote_ident(p.pronamespace::regnamespace::text),
             'fname', format('%I.%I', p.pronamespace::regnamespace, p.proname),
             'args', coalesce((SELECT string_agg(format_type(a, NULL), ', ' ORDER BY i)
                                 FROM unnest(p.proargtypes::oid[]) WITH ORDINALITY AS x(a, i)), ''),
             'argtypes', coalesce((SELECT string_agg(format_type(a, NULL), ',' ORDER BY i)
                                 FROM unnest(p.proargtypes::oid[]) WITH ORDINALITY AS x(a, i)), ''),
             'ret', pg_get_function_result(p.oid),
             'body', CASE WHEN p.proretset OR p.prorettype = 'void'::regtype THEN 'RETURN;' ELSE 'RETURN NULL;' END,
             'trigger', (p.prorettype = 'trigger'::regtype)::text]
  FROM pg_proc p JOIN mem ON mem.classid = 'pg_proc'::regclass AND mem.objid = p.oid
UNION ALL
SELECT 'trigger', pg_describe_object('pg_trigger'::regclass, g.oid, 0), false, g.oid,
       ARRAY['obj', quote_ident(g.tgname), 'name', quote_ident(g.tgname), 'table', g.tgrelid::regclass::text]
  FROM pg_trigger g JOIN tabs t ON t.oid = g.tgrelid WHERE NOT g.tgisinternal
UNION ALL
SELECT 'constraint', pg_describe_object('pg_constraint'::regclass, k.oid, 0), false, k.oid,
       ARRAY['obj', quote_ident(k.conname), 'name', quote_ident(k.conname), 'table', k.conrelid::regclass::text]
  FROM pg_constraint k JOIN tabs t ON t.oid = k.conrelid
UNION ALL
SELECT 'extension', 'extension ' || extname, false, ext.oid,
       ARRAY['obj', quote_ident(extname), 'name', quote_ident(extname)]
  FROM ext
UNION ALL
SELECT 'unhandled', pg_describe_object(mem.classid, mem.objid, 0), false, mem.objid, ARRAY[]::text[]
  FROM mem
 WHERE mem.classid NOT IN ('pg_namespace'::regclass, 'pg_proc'::regclass, 'pg_type'::regclass,
                           'pg_class'::regclass)
    OR mem.classid = 'pg_class'::regclass
       AND (SELECT relkind FROM pg_class WHERE oid = mem.objid) NOT IN ('r', 'p')
ORDER BY 1, 2
"#;

/// The objects of `extension` in the database `su` (a superuser) is connected to, and the
/// members no statement class covers (a sequence, a view, an operator...: the suite cannot
/// judge a build that has them until classes are written for their kind).
pub async fn enumerate(
    su: &Client,
    extension: &str,
) -> Result<(Vec<Object>, Vec<String>), SecurityError> {
    let rows = su.query(OBJECTS_SQL, &[&extension]).await?;
    let mut objects = Vec::new();
    let mut unhandled = Vec::new();
    for r in rows {
        let kind: String = r.try_get(0)?;
        let label: String = r.try_get(1)?;
        let api: bool = r.try_get(2)?;
        let oid: u32 = r.try_get(3)?;
        let pairs: Vec<Option<String>> = r.try_get(4)?;
        let kind = match kind.as_str() {
            "schema" => Kind::Schema,
            "table" => Kind::Table,
            "index" => Kind::Index,
            "type" => Kind::Type,
            "function" => Kind::Function,
            "trigger" => Kind::Trigger,
            "constraint" => Kind::Constraint,
            "extension" => Kind::Extension,
            _ => {
                unhandled.push(label);
                continue;
            }
        };
        let mut vars = BTreeMap::new();
        for pair in pairs.chunks(2) {
            if let [Some(name), Some(value)] = pair {
                vars.insert(name.clone(), value.clone());
            }
        }
        vars.insert("oid".to_string(), oid.to_string());
        objects.push(Object {
            kind,
            label,
            api,
            oid,
            vars,
        });
    }
    objects.push(Object {
        kind: Kind::Database,
        label: "the database".to_string(),
        api: false,
        oid: 0,
        vars: BTreeMap::new(),
    });
    Ok((objects, unhandled))
}

/// The argument list of a call of `object` (a function): the attacker's own key for the API
/// (an attacker may use the API), a key of the seeded state for an internal helper (were it
/// callable, the call would reach lease state it must not), typed literals otherwise.
pub fn call_of(object: &Object, own_key: &str, seeded_key: &str) -> Option<String> {
    if object.vars.get("trigger").map(String::as_str) == Some("true") {
        return None;
    }
    let fname = object.vars.get("fname")?;
    let types = object.vars.get("argtypes")?;
    let key = if object.api { own_key } else { seeded_key };
    let args: Vec<String> = types
        .split(',')
        .filter(|t| !t.is_empty())
        .map(|t| match t {
            "text" => format!("'{key}'::text"),
            "bigint" | "integer" => format!("1::{t}"),
            "interval" => "interval '1 day'".to_string(),
            "boolean" => "true".to_string(),
            "timestamp with time zone" => "pg_catalog.clock_timestamp()".to_string(),
            other => format!("NULL::{other}"),
        })
        .collect();
    Some(format!("{fname}({})", args.join(", ")))
}
