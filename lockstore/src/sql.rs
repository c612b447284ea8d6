//! The pinned statements, verbatim from `specs/LOCKSTORE.md` §2
//! (C1 #ct1-renew), parameter names included. A test compares each constant
//! with its block in the spec; change both or neither.
//!
//! Parameters are `:name` (see [`crate::named`]); their types are in
//! [`param_type`].

use tokio_postgres::types::Type;

/// Insert a grant, or take over a lapsed one; a live row is left alone (no row returned).
pub const ACQUIRE: &str = "\
INSERT INTO lock AS l (lock_key, owner_id, session_id, fencing_token,
                       acquired_at, renewed_at, expires_at)
VALUES (:key, :owner_id, :session_id, nextval('lock_fencing_token_seq'),
        now(), now(), now() + make_interval(secs => :ttl_seconds))
ON CONFLICT (lock_key) DO UPDATE
   SET owner_id      = EXCLUDED.owner_id,
       session_id    = EXCLUDED.session_id,
       fencing_token = EXCLUDED.fencing_token,
       acquired_at   = EXCLUDED.acquired_at,
       renewed_at    = EXCLUDED.renewed_at,
       expires_at    = EXCLUDED.expires_at
 WHERE l.expires_at <= now()
RETURNING lock_key, owner_id, session_id, fencing_token, expires_at";

/// Extend a live grant, identified by key and token; lapsed or foreign rows are untouched (no row returned).
pub const RENEW: &str = "\
UPDATE lock
   SET renewed_at = now(),
       expires_at = now() + make_interval(secs => :ttl_seconds)
 WHERE lock_key = :key
   AND fencing_token = :token
   AND expires_at > now()
RETURNING lock_key, owner_id, session_id, fencing_token, expires_at";

/// Delete the grant identified by key and token, lapsed or not.
pub const RELEASE: &str = "\
DELETE FROM lock
 WHERE lock_key = :key
   AND fencing_token = :token";

/// Extend a live session (T-013 executes it; pinned here with the rest of C1 #ct1-renew).
pub const HEARTBEAT: &str = "\
UPDATE lock_session
   SET last_heartbeat_at = now(),
       expires_at = now() + make_interval(secs => :ttl_seconds)
 WHERE session_id = :session_id
   AND expires_at > now()
RETURNING session_id, expires_at";

/// A point-in-time read of one key, lapsed rows included, with the server's `now()`.
pub const READ: &str = "\
SELECT lock_key, owner_id, session_id, fencing_token,
       acquired_at, renewed_at, expires_at, now() AS read_at
  FROM lock
 WHERE lock_key = :key";

/// Every pinned statement by its name in the spec.
pub const ALL: [(&str, &str); 5] = [
    ("ACQUIRE", ACQUIRE),
    ("RENEW", RENEW),
    ("RELEASE", RELEASE),
    ("HEARTBEAT", HEARTBEAT),
    ("READ", READ),
];

/// The type of each named parameter (spec §2); `None` for an unknown name.
pub fn param_type(name: &str) -> Option<Type> {
    match name {
        "key" | "owner_id" | "session_id" => Some(Type::TEXT),
        "token" => Some(Type::INT8),
        "ttl_seconds" => Some(Type::FLOAT8),
        _ => None,
    }
}

/// Extracts the fenced `sql` block that follows `<!-- lockstore:NAME -->`
/// in the spec text; `None` if the marker or its block is missing.
pub fn spec_block<'a>(spec: &'a str, name: &str) -> Option<&'a str> {
    let marker = format!("<!-- lockstore:{name} -->");
    let after = &spec[spec.find(&marker)? + marker.len()..];
    let body = after.trim_start_matches([' ', '\t', '\r', '\n']);
    let body = body.strip_prefix("```sql")?;
    let body = body
        .strip_prefix("\r\n")
        .or_else(|| body.strip_prefix('\n'))?;
    let end = body.find("\n```")?;
    Some(body[..end].trim_end_matches('\r'))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::named::Named;

    fn spec() -> String {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../specs/LOCKSTORE.md");
        std::fs::read_to_string(path).unwrap_or_else(|e| panic!("reading {path}: {e}"))
    }

    /// Acceptance 1: the constants are the spec's statements, character for character.
    #[test]
    fn spec_text() {
        let spec = spec();
        for (name, sql) in ALL {
            let pinned = spec_block(&spec, name)
                .unwrap_or_else(|| panic!("no ```sql block after <!-- lockstore:{name} -->"));
            assert_eq!(sql, pinned, "sql::{name} differs from specs/LOCKSTORE.md");
        }
    }

    #[test]
    fn parameters_are_the_spec_names_with_declared_types() {
        let expect: [(&str, &[&str]); 5] = [
            ("ACQUIRE", &["key", "owner_id", "session_id", "ttl_seconds"]),
            ("RENEW", &["ttl_seconds", "key", "token"]),
            ("RELEASE", &["key", "token"]),
            ("HEARTBEAT", &["ttl_seconds", "session_id"]),
            ("READ", &["key"]),
        ];
        for ((name, sql), (expect_name, params)) in ALL.iter().zip(expect) {
            assert_eq!(*name, expect_name);
            let named = Named::parse(sql).unwrap();
            assert_eq!(named.names(), params, "{name}");
            for p in named.names() {
                assert!(param_type(p).is_some(), "{name}: :{p} has no type");
            }
        }
    }

    /// Hazards 2 and 3 of the task, checked on the text: RELEASE compares
    /// exactly the key and the token; RENEW keeps all three conditions.
    #[test]
    fn predicates_are_the_pinned_ones() {
        let where_of = |sql: &str| {
            let w = &sql[sql.find("WHERE").unwrap()..];
            w[..w.find("RETURNING").unwrap_or(w.len())].to_string()
        };
        let release = where_of(RELEASE);
        assert_eq!(
            release.split_whitespace().collect::<Vec<_>>().join(" "),
            "WHERE lock_key = :key AND fencing_token = :token"
        );
        for forbidden in ["expires_at", "owner_id", "session_id"] {
            assert!(!RELEASE.contains(forbidden), "RELEASE mentions {forbidden}");
        }
        let renew = where_of(RENEW);
        assert_eq!(
            renew.split_whitespace().collect::<Vec<_>>().join(" "),
            "WHERE lock_key = :key AND fencing_token = :token AND expires_at > now()"
        );
    }

    #[test]
    fn spec_block_extraction() {
        let text = "x\n<!-- lockstore:A -->\n```sql\nSELECT 1;\nSELECT 2\n```\n<!-- lockstore:B -->\n\n```sql\r\nB\r\n```";
        assert_eq!(spec_block(text, "A"), Some("SELECT 1;\nSELECT 2"));
        assert_eq!(spec_block(text, "B"), Some("B"));
        assert_eq!(spec_block(text, "C"), None);
        assert_eq!(spec_block("<!-- lockstore:A -->\ntext", "A"), None);
    }
}
