//! pg_lease's API contract as data (specs/SEMANTICS.md section 4): each function's argument
//! types and result columns, and the column types of the lease table. The harness's
//! statements are written against it; what a build declares is read from its catalog
//! ([`differences`]), the oracle for "the harness's SQL is right, the build's API is not".
//!
//! When a call of the API fails with an error that names the harness's statement (a
//! column or function the statement names does not exist: class 42) or a column that does
//! not decode as its contract type, the build is at fault exactly when its catalog differs
//! from this contract: the statement is the harness's plain call of the documented API,
//! which the shipped build answers.

use tokio_postgres::GenericClient;

/// One function of the API: its identity arguments and its result, as PostgreSQL prints
/// them (`pg_get_function_identity_arguments`, `pg_get_function_result`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Function {
    pub name: &'static str,
    pub arguments: &'static str,
    pub result: &'static str,
    /// Arguments with a default (acquire's `wait`).
    pub defaults: i16,
}

/// The four functions of the API.
pub const API: [Function; 4] = [
    Function {
        name: "acquire",
        arguments: "key text, owner text, ttl interval, wait interval",
        result: "TABLE(acquired boolean, epoch bigint, expires_at timestamp with time zone)",
        defaults: 1,
    },
    Function {
        name: "renew",
        arguments: "key text, owner text, epoch bigint, ttl interval",
        result: "TABLE(status text, expires_at timestamp with time zone)",
        defaults: 0,
    },
    Function {
        name: "release",
        arguments: "key text, owner text, epoch bigint",
        result: "TABLE(status text)",
        defaults: 0,
    },
    Function {
        name: "inspect",
        arguments: "key text",
        result:
            "TABLE(held boolean, owner text, epoch bigint, expires_at timestamp with time zone)",
        defaults: 0,
    },
];

/// The lease table's columns and their types (specs/SEMANTICS.md sections 1-2: epochs are
/// `bigint`, expiries `timestamptz`), as `format_type` prints them.
pub const TABLE: [(&str, &str); 4] = [
    ("key", "text"),
    ("owner", "text"),
    ("epoch", "bigint"),
    ("expires_at", "timestamp with time zone"),
];

/// The contract's type of column `column` of an API result or of the table, as
/// PostgreSQL names it (`bigint`, `timestamp with time zone`, ...).
pub fn column_type(column: &str) -> Option<&'static str> {
    match column {
        "acquired" | "held" => Some("boolean"),
        "epoch" => Some("bigint"),
        "expires_at" => Some("timestamp with time zone"),
        "status" | "owner" | "key" => Some("text"),
        _ => None,
    }
}

/// A column of a row that does not decode as the harness reads it: when the server's type
/// differs from the contract's, a sentence naming both (a finding about the build), else
/// `None` (the harness asked for the wrong type: its own bug).
pub fn column_mismatch(row: &tokio_postgres::Row, idx: usize, what: &str) -> Option<String> {
    let column = row.columns().get(idx)?;
    let contract = column_type(column.name())?;
    let actual = sql_type_name(column.type_());
    (actual != contract).then(|| {
        format!(
            "{what} returned column {} as {actual}; the API contract (specs/SEMANTICS.md \
             section 4) makes it {contract}",
            column.name()
        )
    })
}

/// PostgreSQL's name of a type, as `format_type` prints the common ones.
fn sql_type_name(t: &tokio_postgres::types::Type) -> String {
    use tokio_postgres::types::Type;
    let name = match *t {
        Type::INT2 => "smallint",
        Type::INT4 => "integer",
        Type::INT8 => "bigint",
        Type::BOOL => "boolean",
        Type::TEXT => "text",
        Type::VARCHAR => "character varying",
        Type::TIMESTAMP => "timestamp without time zone",
        Type::TIMESTAMPTZ => "timestamp with time zone",
        Type::NUMERIC => "numeric",
        _ => return t.name().to_string(),
    };
    name.to_string()
}

/// How a build's catalog differs from the contract: one sentence per difference (a
/// function missing or declared otherwise, a table column of another type). Empty when the
/// build declares the contract's API. The table is found in the catalog
/// ([`crate::extension::LEASE_TABLE_SQL`]), whatever schema the build keeps it in.
pub async fn differences<C: GenericClient>(c: &C) -> Result<Vec<String>, tokio_postgres::Error> {
    let rows = c
        .query(
            "SELECT p.proname::text, pg_catalog.pg_get_function_identity_arguments(p.oid), \
                    pg_catalog.pg_get_function_result(p.oid), p.pronargdefaults \
               FROM pg_catalog.pg_proc AS p \
               JOIN pg_catalog.pg_namespace AS n ON n.oid = p.pronamespace \
              WHERE n.nspname = 'lease' AND p.proname = ANY($1::text[])",
            &[&API.iter().map(|f| f.name).collect::<Vec<_>>()],
        )
        .await?;
    let mut out = Vec::new();
    for f in API {
        let declared: Vec<(String, String, i16)> = rows
            .iter()
            .filter(|r| r.get::<_, String>(0) == f.name)
            .map(|r| (r.get(1), r.get(2), r.get(3)))
            .collect();
        let matches = declared
            .iter()
            .any(|(a, r, d)| a == f.arguments && r == f.result && *d == f.defaults);
        if !matches {
            let seen: Vec<String> = declared
                .iter()
                .map(|(a, r, d)| format!("lease.{}({a}) RETURNS {r} ({d} defaults)", f.name))
                .collect();
            out.push(format!(
                "lease.{name}: the contract is lease.{name}({}) RETURNS {} ({} defaults); the \
                 build declares {}",
                f.arguments,
                f.result,
                f.defaults,
                if seen.is_empty() {
                    "none".to_string()
                } else {
                    seen.join(", ")
                },
                name = f.name
            ));
        }
    }
    // The lease table wherever the build keeps it (the extension's member table, from the
    // catalog): `lease.leases` in 0.1.0 and 0.2.0, `lease_internal.leases` from 0.3.0.
    let tables = c.query(crate::extension::LEASE_TABLE_SQL, &[]).await?;
    for table in &tables {
        let table: String = table.get(0);
        let columns = c
            .query(
                "SELECT a.attname::text, pg_catalog.format_type(a.atttypid, a.atttypmod) \
                   FROM pg_catalog.pg_attribute AS a \
                  WHERE a.attrelid = pg_catalog.to_regclass($1::text) \
                    AND a.attnum > 0 AND NOT a.attisdropped",
                &[&table],
            )
            .await?;
        for row in &columns {
            let (name, actual): (String, String) = (row.get(0), row.get(1));
            if let Some((_, contract)) = TABLE.iter().find(|(n, _)| *n == name) {
                if actual != *contract {
                    out.push(format!(
                        "{table}.{name} is {actual}; the contract makes it {contract} \
                         (specs/SEMANTICS.md sections 1-2)"
                    ));
                }
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_result_column_of_the_api_has_a_contract_type() {
        for f in API {
            let inner = f
                .result
                .strip_prefix("TABLE(")
                .and_then(|r| r.strip_suffix(')'))
                .expect("a TABLE result");
            for column in inner.split(", ") {
                let (name, ty) = column.split_once(' ').expect("name type");
                assert_eq!(column_type(name), Some(ty), "{}: {column}", f.name);
            }
        }
        for (name, ty) in TABLE {
            assert_eq!(column_type(name), Some(ty));
        }
        // Negative control: a column the contract does not have.
        assert_eq!(column_type("epoch2"), None);
    }
}
