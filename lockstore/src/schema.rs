//! The lock store's schema, verbatim from `specs/LOCKSTORE.md` §1.

use crate::spi::StoreError;
use crate::translate::translate;

/// The DDL of `specs/LOCKSTORE.md` §1, character for character (a test compares them).
pub const SCHEMA: &str = "\
CREATE SEQUENCE lock_fencing_token_seq AS bigint MINVALUE 1 NO CYCLE;

CREATE TABLE lock_session (
    session_id        text        PRIMARY KEY,
    owner_id          text        NOT NULL,
    created_at        timestamptz NOT NULL DEFAULT now(),
    last_heartbeat_at timestamptz NOT NULL DEFAULT now(),
    expires_at        timestamptz NOT NULL,
    CONSTRAINT lock_session_id_sane CHECK (char_length(session_id) BETWEEN 1 AND 128),
    CONSTRAINT lock_session_owner_sane CHECK (char_length(owner_id) BETWEEN 1 AND 128),
    CONSTRAINT lock_session_expiry_sane CHECK (expires_at > last_heartbeat_at)
);

CREATE TABLE lock (
    lock_key      text        PRIMARY KEY,
    owner_id      text        NOT NULL,
    session_id    text        NOT NULL REFERENCES lock_session (session_id),
    fencing_token bigint      NOT NULL,
    acquired_at   timestamptz NOT NULL,
    renewed_at    timestamptz NOT NULL,
    expires_at    timestamptz NOT NULL,
    CONSTRAINT lock_key_sane CHECK (char_length(lock_key) BETWEEN 1 AND 512),
    CONSTRAINT lock_owner_sane CHECK (char_length(owner_id) BETWEEN 1 AND 128),
    CONSTRAINT lock_token_positive CHECK (fencing_token > 0),
    CONSTRAINT lock_renewal_sane CHECK (renewed_at >= acquired_at),
    CONSTRAINT lock_expiry_sane CHECK (expires_at > renewed_at)
);

CREATE UNIQUE INDEX lock_fencing_token_key ON lock (fencing_token);

CREATE INDEX lock_session_id_idx ON lock (session_id);";

/// Creates the sequence, the tables and the indexes in the connection's
/// current schema, as one batch (one implicit transaction). Fails with a
/// programming error (42P07 duplicate_table) if they already exist.
pub async fn install_schema(client: &tokio_postgres::Client) -> Result<(), StoreError> {
    client.batch_execute(SCHEMA).await.map_err(translate)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spec_text() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../specs/LOCKSTORE.md");
        let spec = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("reading {path}: {e}"));
        let pinned = crate::sql::spec_block(&spec, "SCHEMA").expect("the SCHEMA block");
        assert_eq!(
            SCHEMA, pinned,
            "schema::SCHEMA differs from specs/LOCKSTORE.md"
        );
    }
}
