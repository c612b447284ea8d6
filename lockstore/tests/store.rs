//! The task's §4 cases (PostgresLockStoreRenewReleaseIT) and the ACQUIRE,
//! READ and SPI facts around them, against real clusters: every test runs
//! on every major of `harness::pg::test_majors()` (15 and 14 by default),
//! each on its own database.

mod common;

use common::*;
use lockstore::named::Named;
use lockstore::{sql, LockStore, PostgresLockStore, StoreError};
use std::time::Duration;

/// Renew of a live lock extends its expiry and keeps its token.
#[tokio::test]
async fn renew_of_a_live_lock_extends_expiry_and_keeps_the_token() {
    each_major("renew_live", |db| async move {
        let store = db.store().await;
        let granted = grant_as(&store, "k", OWNER, SESSION, MINUTE).await;
        let before = db.row("k").await.unwrap();
        let renewed = store
            .extend("k", granted.fencing_token, 10 * MINUTE)
            .await
            .unwrap()
            .unwrap_or_else(|| panic!("PG {}: a live lock must renew", db.major));
        assert_eq!(renewed.fencing_token, granted.fencing_token);
        assert_eq!(renewed.key, "k");
        assert_eq!(
            (renewed.owner_id.as_str(), renewed.session_id.as_str()),
            (OWNER, SESSION)
        );
        assert!(renewed.expires_at > granted.expires_at + chrono::Duration::minutes(8));
        let after = db.row("k").await.unwrap();
        // The handle's expiry is the stored one (from RETURNING).
        assert_eq!(after.expires_at, renewed.expires_at);
        assert_eq!(after.fencing_token, before.fencing_token);
        assert_eq!(after.acquired_at, before.acquired_at);
        assert!(after.renewed_at > before.renewed_at);
        // Renewing again, shorter, is allowed too: the TTL counts from now.
        let shorter = store
            .extend("k", granted.fencing_token, MINUTE)
            .await
            .unwrap()
            .unwrap();
        assert!(shorter.expires_at < renewed.expires_at);
        assert_eq!(shorter.fencing_token, granted.fencing_token);
    })
    .await;
}

/// Renew with the wrong token returns empty and changes nothing.
#[tokio::test]
async fn renew_with_the_wrong_token_is_empty() {
    each_major("renew_wrong", |db| async move {
        let store = db.store().await;
        let granted = grant_as(&store, "k", OWNER, SESSION, MINUTE).await;
        let before = db.row("k").await.unwrap();
        for wrong in [
            granted.fencing_token + 1,
            granted.fencing_token - 1,
            0,
            -1,
            i64::MAX,
        ] {
            assert_eq!(
                store.extend("k", wrong, MINUTE).await.unwrap(),
                None,
                "PG {}: token {wrong}",
                db.major
            );
        }
        // A right token under another key is a wrong token too.
        assert_eq!(
            store
                .extend("other", granted.fencing_token, MINUTE)
                .await
                .unwrap(),
            None
        );
        assert_eq!(db.row("k").await.unwrap(), before);
        assert_eq!(db.row("other").await, None);
    })
    .await;
}

/// Acceptance 5: renew after the lease lapsed returns empty even when no
/// other holder exists — with the expiry moved into the past (one
/// millisecond and one hour ago) and with a real short TTL running out.
#[tokio::test]
async fn renew_after_the_lease_lapsed_is_empty_with_no_other_holder() {
    each_major("renew_lapsed", |db| async move {
        let store = db.store().await;
        for (key, ago) in [("ms", Duration::from_millis(1)), ("hour", 60 * MINUTE)] {
            let granted = grant_as(&store, key, OWNER, SESSION, MINUTE).await;
            db.lapse(key, ago).await;
            let lapsed = db.row(key).await.unwrap();
            assert_eq!(
                store
                    .extend(key, granted.fencing_token, MINUTE)
                    .await
                    .unwrap(),
                None,
                "PG {}: renewed a lease lapsed {ago:?} ago",
                db.major
            );
            // Nothing changed and nobody else holds it: the row is ours, lapsed.
            assert_eq!(db.row(key).await.unwrap(), lapsed);
            let info = store.read(key).await.unwrap().unwrap();
            assert_eq!(info.fencing_token, granted.fencing_token);
            assert_eq!(info.owner_id, OWNER);
            assert!(info.is_lapsed());
        }
        // Real time: a 300 ms lease, 600 ms of sleep.
        let granted = grant_as(&store, "short", OWNER, SESSION, Duration::from_millis(300)).await;
        tokio::time::sleep(Duration::from_millis(600)).await;
        assert_eq!(
            store
                .extend("short", granted.fencing_token, MINUTE)
                .await
                .unwrap(),
            None,
            "PG {}: renewed a lease that ran out",
            db.major
        );
        let row = db.row("short").await.unwrap();
        assert_eq!(row.fencing_token, granted.fencing_token);
        assert_eq!(row.expires_at, granted.expires_at);
    })
    .await;
}

/// Renew after another session took the key over returns empty: the
/// takeover minted a new token, which is all it takes to detect it.
#[tokio::test]
async fn renew_after_takeover_is_empty() {
    each_major("renew_takeover", |db| async move {
        let store = db.store().await;
        let old = grant_as(&store, "k", OWNER, SESSION, MINUTE).await;
        // Live: no takeover.
        assert_eq!(
            store
                .try_insert("k", OTHER_OWNER, OTHER_SESSION, MINUTE)
                .await
                .unwrap(),
            None
        );
        db.lapse("k", Duration::from_millis(1)).await;
        let new = store
            .try_insert("k", OTHER_OWNER, OTHER_SESSION, MINUTE)
            .await
            .unwrap()
            .unwrap_or_else(|| panic!("PG {}: a lapsed row must be taken over", db.major));
        assert!(new.fencing_token > old.fencing_token);
        assert_eq!(
            (new.owner_id.as_str(), new.session_id.as_str()),
            (OTHER_OWNER, OTHER_SESSION)
        );
        assert_eq!(
            store.extend("k", old.fencing_token, MINUTE).await.unwrap(),
            None
        );
        let row = db.row("k").await.unwrap();
        assert_eq!(row.fencing_token, new.fencing_token);
        assert_eq!(row.expires_at, new.expires_at);
        // The new holder renews fine.
        let renewed = store
            .extend("k", new.fencing_token, MINUTE)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(renewed.fencing_token, new.fencing_token);
        // A takeover by the same owner and session still mints a new token.
        db.lapse("k", Duration::from_millis(1)).await;
        let again = grant_as(&store, "k", OTHER_OWNER, OTHER_SESSION, MINUTE).await;
        assert!(again.fencing_token > new.fencing_token);
        assert_eq!(
            store.extend("k", new.fencing_token, MINUTE).await.unwrap(),
            None
        );
    })
    .await;
}

/// Release with the matching (key, token) pair returns true and the row is gone.
#[tokio::test]
async fn release_with_the_matching_pair_deletes() {
    each_major("release_match", |db| async move {
        let store = db.store().await;
        let granted = grant_as(&store, "k", OWNER, SESSION, MINUTE).await;
        assert!(store
            .delete_if_owner("k", granted.fencing_token)
            .await
            .unwrap());
        assert_eq!(db.row("k").await, None);
        assert_eq!(store.read("k").await.unwrap(), None);
        // Again: nothing of ours is left, a success path.
        assert!(!store
            .delete_if_owner("k", granted.fencing_token)
            .await
            .unwrap());
        // The key is free at once, under a new token.
        let next = grant_as(&store, "k", OTHER_OWNER, OTHER_SESSION, MINUTE).await;
        assert!(next.fencing_token > granted.fencing_token);
    })
    .await;
}

/// Acceptance 4: release with a stale token returns false and the current
/// holder's row is untouched — its token and expiry (and everything else).
#[tokio::test]
async fn release_with_a_stale_token_is_false_and_the_holder_is_untouched() {
    each_major("release_stale", |db| async move {
        let store = db.store().await;
        let old = grant_as(&store, "k", OWNER, SESSION, MINUTE).await;
        db.lapse("k", Duration::from_millis(1)).await;
        let holder = grant_as(&store, "k", OTHER_OWNER, OTHER_SESSION, MINUTE).await;
        let before = db.row("k").await.unwrap();
        assert!(
            !store.delete_if_owner("k", old.fencing_token).await.unwrap(),
            "PG {}: a fenced-out worker released the new holder's lock",
            db.major
        );
        let after = db.row("k").await.unwrap();
        assert_eq!(after.fencing_token, holder.fencing_token, "token changed");
        assert_eq!(after.expires_at, holder.expires_at, "expiry changed");
        assert_eq!(after, before);
        // A made-up token, and the holder's token under another key, fail too.
        assert!(!store
            .delete_if_owner("k", holder.fencing_token + 1000)
            .await
            .unwrap());
        assert!(!store
            .delete_if_owner("x", holder.fencing_token)
            .await
            .unwrap());
        assert_eq!(db.row("k").await.unwrap(), before);
    })
    .await;
}

/// Release of an unknown key returns false.
#[tokio::test]
async fn release_of_an_unknown_key_is_false() {
    each_major("release_unknown", |db| async move {
        let store = db.store().await;
        assert!(!store.delete_if_owner("never-held", 1).await.unwrap());
        assert!(!store.delete_if_owner("never-held", i64::MAX).await.unwrap());
    })
    .await;
}

/// Hazard 2: release has no expiry condition — a lease that lapsed a
/// moment ago (and was not taken over) is still ours to delete.
#[tokio::test]
async fn release_of_our_own_lapsed_lease_deletes() {
    each_major("release_lapsed", |db| async move {
        let store = db.store().await;
        let granted = grant_as(&store, "k", OWNER, SESSION, MINUTE).await;
        db.lapse("k", Duration::from_millis(1)).await;
        assert!(store
            .delete_if_owner("k", granted.fencing_token)
            .await
            .unwrap());
        assert_eq!(db.row("k").await, None);
    })
    .await;
}

/// Read of a held key returns its current token; of an unknown key, empty;
/// of a lapsed-but-unreaped key, the row as data.
#[tokio::test]
async fn read_of_held_unknown_and_lapsed_keys() {
    each_major("read", |db| async move {
        let store = db.store().await;
        assert_eq!(store.read("unknown").await.unwrap(), None);
        let granted = grant_as(&store, "k", OWNER, SESSION, MINUTE).await;
        let info = store.read("k").await.unwrap().unwrap();
        assert_eq!(info.key, "k");
        assert_eq!(info.fencing_token, granted.fencing_token);
        assert_eq!(
            (info.owner_id.as_str(), info.session_id.as_str()),
            (OWNER, SESSION)
        );
        assert_eq!(info.expires_at, granted.expires_at);
        assert_eq!(info.acquired_at, info.renewed_at);
        assert!(info.read_at >= info.acquired_at);
        assert!(!info.is_lapsed());
        // After a renew the read shows the renewed expiry, same token.
        let renewed = store
            .extend("k", granted.fencing_token, 2 * MINUTE)
            .await
            .unwrap()
            .unwrap();
        let info = store.read("k").await.unwrap().unwrap();
        assert_eq!(info.fencing_token, granted.fencing_token);
        assert_eq!(info.expires_at, renewed.expires_at);
        assert!(info.renewed_at > info.acquired_at);
        // Lapsed rows are data, not absence.
        db.lapse("k", MINUTE).await;
        let info = store.read("k").await.unwrap().unwrap();
        assert_eq!(info.fencing_token, granted.fencing_token);
        assert!(info.is_lapsed());
    })
    .await;
}

/// ACQUIRE leaves a live row alone — anyone's, the caller's own included —
/// and mints every token from one global sequence.
#[tokio::test]
async fn acquire_of_a_live_key_is_empty_and_tokens_come_from_one_sequence() {
    each_major("acquire", |db| async move {
        let store = db.store().await;
        let a = grant_as(&store, "a", OWNER, SESSION, MINUTE).await;
        assert_eq!(a.key, "a");
        let before = db.row("a").await.unwrap();
        assert_eq!(
            store.try_insert("a", OWNER, SESSION, MINUTE).await.unwrap(),
            None
        );
        assert_eq!(
            store
                .try_insert("a", OTHER_OWNER, OTHER_SESSION, 10 * MINUTE)
                .await
                .unwrap(),
            None
        );
        assert_eq!(db.row("a").await.unwrap(), before, "a denied acquire wrote");
        // Tokens rise across keys: one sequence for all.
        let mut last = a.fencing_token;
        for key in ["b", "c", "d"] {
            let h = grant_as(&store, key, OTHER_OWNER, OTHER_SESSION, MINUTE).await;
            assert!(h.fencing_token > last, "PG {}: {key}", db.major);
            last = h.fencing_token;
        }
        let tokens: Vec<i64> = db
            .admin
            .query("SELECT fencing_token FROM lock ORDER BY fencing_token", &[])
            .await
            .unwrap()
            .iter()
            .map(|r| r.get(0))
            .collect();
        assert_eq!(tokens.len(), 4);
        assert!(tokens.windows(2).all(|w| w[0] < w[1]));
    })
    .await;
}

/// Acceptance 6 in its Rust form: exactly revoke and reap_expired are
/// unsupported, with an error naming the later task; backend_id is "pg".
#[tokio::test]
async fn only_revoke_and_reap_are_unsupported() {
    each_major("unsupported", |db| async move {
        let store = db.store().await;
        assert_eq!(store.backend_id(), "pg");
        assert_eq!(PostgresLockStore::BACKEND_ID, "pg");
        for (err, op) in [
            (store.revoke("k", "admin").await.map(|_| ()), "revoke"),
            (store.reap_expired(10).await.map(|_| ()), "reap_expired"),
        ] {
            match err {
                Err(e @ StoreError::Unsupported { operation, planned }) => {
                    assert_eq!(operation, op);
                    assert!(planned.contains("task"));
                    assert!(!e.is_retryable());
                    assert!(e.to_string().contains(op));
                }
                other => panic!("PG {}: {op}: {other:?}", db.major),
            }
        }
        let source =
            std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/src/pg.rs")).unwrap();
        assert_eq!(source.matches("StoreError::Unsupported").count(), 2);
    })
    .await;
}

/// The HEARTBEAT statement (executed by T-013, pinned now) is valid SQL
/// against the schema and behaves as the spec says.
#[tokio::test]
async fn heartbeat_statement_is_valid_against_the_schema() {
    each_major("heartbeat", |db| async move {
        let named = Named::parse(sql::HEARTBEAT).unwrap();
        let types: Vec<_> = named
            .names()
            .iter()
            .map(|n| sql::param_type(n).unwrap())
            .collect();
        let statement = db.admin.prepare_typed(named.sql(), &types).await.unwrap();
        let ttl = 30.0f64;
        let session = SESSION;
        let args = named
            .args(&[("session_id", &session), ("ttl_seconds", &ttl)])
            .unwrap();
        let row = db
            .admin
            .query_opt(&statement, &args)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(row.get::<_, String>("session_id"), SESSION);
        db.admin
            .execute(
                "UPDATE lock_session SET last_heartbeat_at = now() - interval '2 hours', \
                 expires_at = now() - interval '1 hour' WHERE session_id = $1",
                &[&SESSION],
            )
            .await
            .unwrap();
        assert!(db
            .admin
            .query_opt(&statement, &args)
            .await
            .unwrap()
            .is_none());
    })
    .await;
}

/// The store's statements are the pinned text, verbatim (acceptance 1 is
/// the unit test `sql::tests::spec_text`); and the acceptance greps hold.
#[test]
fn acceptance_greps() {
    let src = |f: &str| {
        std::fs::read_to_string(format!("{}/src/{f}", env!("CARGO_MANIFEST_DIR"))).unwrap()
    };
    // Acceptance 2: the translator never names a lost lock.
    assert!(!src("translate.rs").contains("LockLost"));
    // Acceptance 3: no loop, no retry, no backoff in the store.
    let store = src("pg.rs").to_lowercase();
    for word in ["loop", "while", "retry", "backoff"] {
        assert!(!store.contains(word), "pg.rs contains {word:?}");
    }
}
