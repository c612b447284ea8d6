//! The entries of the catalogue: the SQL mutants (edits of the 0.3.0 install script) and the
//! model mutations that have none.

use super::{Kill, Mode, ModelOnly, Mutant};
use model::{Invariant, Mutation};

mod contract_breaks;
use contract_breaks::*;

const FREE: &[Mode] = &[Mode::Free, Mode::Races, Mode::Stepped];
const STEPPED: &[Mode] = &[Mode::Stepped];
const STEPPED_FIRST: &[Mode] = &[Mode::Races, Mode::Stepped, Mode::Free];

/// `_take`'s wait for the row lock and its decision under the lock (in a subtransaction:
/// the path of an attempt that found the row locked by another transaction), as shipped.
const TAKE_LOCK_DECIDE: &str = "            SELECT l.owner, l.expires_at INTO v_owner, v_expires
              FROM lease_internal.leases AS l
             WHERE l.key = p_key COLLATE \"C\"
               FOR NO KEY UPDATE;
            IF v_owner IS NOT NULL AND v_expires > clock_timestamp() THEN";

/// `_take`'s lock taken at once when the row is acquirable and no other transaction holds it.
const TAKE_AT_ONCE: &str = "       AND (l.owner IS NULL OR l.expires_at <= clock_timestamp())
       FOR NO KEY UPDATE SKIP LOCKED;";

/// `_take`'s lock-free re-read after the lock was not taken at once: taken since the probe.
const TAKE_REREAD_TAKEN: &str =
    "        IF v_owner IS NOT NULL AND v_expires > clock_timestamp() THEN
            RETURN;";

/// `_take`'s grant decision, once the row is locked.
const TAKE_GRANT_DECIDE: &str = "IF v_owner IS NULL OR v_expires <= v_now THEN";

/// `_lock_live`'s lock taken at once: the lease still live, with the caller's owner and epoch.
const LOCK_LIVE_AT_ONCE: &str =
    "AND l.epoch = p_epoch AND l.expires_at > clock_timestamp()\n       FOR NO KEY UPDATE SKIP LOCKED;";

/// `_lock_live`'s re-check of the expiry, after the lock taken at once.
const LOCK_LIVE_AT_ONCE_RECHECK: &str =
    "        IF v_expires > v_now THEN\n            RETURN v_now;";

/// `_lock_live`'s decision after waiting for the row lock.
const LOCK_LIVE_WAITED_DECIDE: &str = "AND v_epoch = p_epoch AND v_expires > v_now THEN";

/// A blocking acquire's sleep between probes, as shipped.
const WAIT_SLEEP: &str =
    "            -- Sleep at most 50 ms, and not past the deadline or the holder's expiry.
            PERFORM pg_sleep(GREATEST(0.0, LEAST(0.05,
                extract(epoch FROM v_deadline - v_now),
                extract(epoch FROM v_expires - v_now))));
            CONTINUE;";

/// A pg_lease whose interval validation has no upper bound: a ttl or wait over 100 years
/// is accepted (a grant instead of 22023).
pub const NO_INTERVAL_CAP: Mutant = Mutant {
    name: "no_interval_cap",
    breaks: "ttl and wait have no upper bound: a ttl over 100 years is granted instead of refused with 22023",
    kill: Kill::Breaks(Invariant::FailClosed),
    hunt: FREE,
    edits: &[(
        "        OR (NOT allow_zero AND value = interval '0')\n        OR value > interval '100 years'\n",
        "        OR (NOT allow_zero AND value = interval '0')\n",
    )],
    caught_by: &[],
};

/// The SQL mutants: the negative controls of the history campaigns (and, through
/// `caught_by`, of the conformance checks).
pub const MUTANTS: &[Mutant] = &[
    // ---- SQL forms of model mutations --------------------------------------------------
    Mutant {
        name: "release_keeps_epoch",
        breaks: "release frees the key without advancing the epoch",
        kill: Kill::Realises(Mutation::ReleaseKeepsEpoch),
        hunt: FREE,
        edits: &[(
            "SET owner = NULL,\n                   expires_at = NULL,\n                   epoch = l.epoch + 1",
            "SET owner = NULL,\n                   expires_at = NULL,\n                   epoch = l.epoch",
        )],
        caught_by: &["release_frees_and_advances_the_epoch"],
    },
    Mutant {
        name: "renew_ignores_expiry",
        breaks: "renew (and release) succeed on a lapsed lease: neither the lock-free read nor the check under the lock looks at the expiry",
        kill: Kill::Realises(Mutation::RenewIgnoresExpiry),
        hunt: FREE,
        edits: &[
            ("        WHEN v_expires <= clock_timestamp() THEN 'lapsed'\n", ""),
            (LOCK_LIVE_WAITED_DECIDE, "AND v_epoch = p_epoch THEN"),
            (
                LOCK_LIVE_AT_ONCE,
                "AND l.epoch = p_epoch\n       FOR NO KEY UPDATE SKIP LOCKED;",
            ),
            (
                LOCK_LIVE_AT_ONCE_RECHECK,
                "        IF true THEN\n            RETURN v_now;",
            ),
        ],
        caught_by: &[
            "renew_and_release_statuses_follow_precedence",
            "lapsed_lease_is_taken_over_at_once_with_a_greater_epoch",
            "downtime_never_extends_ownership",
        ],
    },
    Mutant {
        name: "takeover_reuses_epoch",
        breaks: "a grant over a free or lapsed row keeps the old epoch",
        kill: Kill::Realises(Mutation::TakeoverReusesEpoch),
        hunt: FREE,
        edits: &[(
            "SET owner = p_owner,\n               epoch = l.epoch + 1,",
            "SET owner = p_owner,\n               epoch = l.epoch,",
        )],
        caught_by: &[
            "release_frees_and_advances_the_epoch",
            "lapsed_lease_is_taken_over_at_once_with_a_greater_epoch",
        ],
    },
    Mutant {
        name: "acquire_ignores_holder",
        breaks: "acquire takes a key away from its live holder",
        // The SQL ignores every holder, the caller too: where processes share an owner
        // name, its grant over the owner's own live lease is a new epoch, which breaks
        // inv06 before any other owner is involved (CI run ci14: a campaign named inv06).
        kill: Kill::RealisesOr(Mutation::AcquireIgnoresHolder, Invariant::ReacquireIdempotent),
        hunt: FREE,
        edits: &[
            (
                "IF v_found AND v_owner IS NOT NULL AND v_expires > v_now THEN",
                "IF v_found AND v_owner IS NOT NULL AND v_expires > v_now AND v_owner = acquire.owner COLLATE \"C\" THEN",
            ),
            (TAKE_AT_ONCE, "       FOR NO KEY UPDATE SKIP LOCKED;"),
            (TAKE_REREAD_TAKEN, "        IF false THEN\n            RETURN;"),
            (
                "            IF v_owner IS NOT NULL AND v_expires > clock_timestamp() THEN\n                -- Taken",
                "            IF false THEN\n                -- Taken",
            ),
            (TAKE_GRANT_DECIDE, "IF true THEN"),
        ],
        caught_by: &[
            "denied_acquire_returns_nulls_and_writes_nothing",
            "exactly_one_of_concurrent_acquirers_wins",
        ],
    },
    Mutant {
        name: "inspect_shows_lapsed_as_held",
        breaks: "inspect reports a lapsed lease as held",
        kill: Kill::Realises(Mutation::InspectShowsLapsedAsHeld),
        hunt: FREE,
        edits: &[(
            "LATERAL (SELECT l.owner IS NOT NULL AND l.expires_at > clock_timestamp() AS live)",
            "LATERAL (SELECT l.owner IS NOT NULL AS live)",
        )],
        caught_by: &["inspect_tells_never_leased_free_held_and_lapsed_apart"],
    },
    Mutant {
        name: "release_deletes_row",
        breaks: "release deletes the key's row: the key is never-leased again and its next grant has epoch 1",
        kill: Kill::Realises(Mutation::ReleaseDeletesRow),
        hunt: FREE,
        edits: &[(
            "            UPDATE lease_internal.leases AS l
               SET owner = NULL,
                   expires_at = NULL,
                   epoch = l.epoch + 1
             WHERE l.key = release.key COLLATE \"C\";",
            "            DELETE FROM lease_internal.leases AS l
             WHERE l.key = release.key COLLATE \"C\";",
        )],
        caught_by: &[],
    },
    Mutant {
        name: "renew_changes_epoch",
        breaks: "a successful renew advances the epoch (it returns only the expiry, so the change shows in later calls)",
        kill: Kill::Realises(Mutation::RenewChangesEpoch),
        hunt: FREE,
        edits: &[(
            "               SET expires_at = (v_now AT TIME ZONE 'UTC' + renew.ttl) AT TIME ZONE 'UTC'",
            "               SET expires_at = (v_now AT TIME ZONE 'UTC' + renew.ttl) AT TIME ZONE 'UTC',
                   epoch = l.epoch + 1",
        )],
        caught_by: &[],
    },
    Mutant {
        name: "reacquire_bumps_epoch",
        breaks: "a same-owner acquire of its live lease makes a new grant (new epoch, new expiry)",
        kill: Kill::Realises(Mutation::ReacquireBumpsEpoch),
        hunt: FREE,
        edits: &[
            (
                "IF v_found AND v_owner IS NOT NULL AND v_expires > v_now THEN",
                "IF v_found AND v_owner IS NOT NULL AND v_expires > v_now AND v_owner <> acquire.owner COLLATE \"C\" THEN",
            ),
            (
                "       AND (l.owner IS NULL OR l.expires_at <= clock_timestamp())\n",
                "       AND (l.owner IS NULL OR l.expires_at <= clock_timestamp() OR l.owner = p_owner)\n",
            ),
            (
                TAKE_REREAD_TAKEN,
                "        IF v_owner IS NOT NULL AND v_expires > clock_timestamp() AND v_owner <> p_owner THEN\n            RETURN;",
            ),
            (
                "            IF v_owner IS NOT NULL AND v_expires > clock_timestamp() THEN\n                -- Taken",
                "            IF v_owner IS NOT NULL AND v_expires > clock_timestamp() AND v_owner <> p_owner THEN\n                -- Taken",
            ),
            (
                TAKE_GRANT_DECIDE,
                "IF v_owner IS NULL OR v_expires <= v_now OR v_owner = p_owner COLLATE \"C\" THEN",
            ),
        ],
        caught_by: &[],
    },
    Mutant {
        name: "wrong_precedence",
        breaks: "a failing renew or release reports epoch_mismatch before not_owner and lapsed",
        kill: Kill::Realises(Mutation::WrongPrecedence),
        hunt: FREE,
        edits: &[(
            "    RETURN CASE\n        WHEN NOT FOUND OR",
            "    RETURN CASE\n        WHEN FOUND AND v_epoch <> p_epoch THEN 'epoch_mismatch'\n        WHEN NOT FOUND OR",
        )],
        caught_by: &[],
    },
    Mutant {
        name: "write_ignores_key",
        breaks: "release misses the key predicate: it frees every key and advances every key's epoch \
                 (the model's write-ignores-key for release; the checker judges each key's history \
                 alone, where another key's holder loses its lease to a grant over it)",
        kill: Kill::Breaks(Invariant::MutualExclusion),
        hunt: FREE,
        edits: &[(
            "                   epoch = l.epoch + 1\n             WHERE l.key = release.key COLLATE \"C\";",
            "                   epoch = l.epoch + 1;",
        )],
        caught_by: &["distinct_keys_never_interact"],
    },
    // ---- Input validation ---------------------------------------------------------------
    Mutant {
        name: "no_key_length_limit",
        breaks: "oversized keys reach the btree and fail with 54000 instead of 22023",
        kill: Kill::Breaks(Invariant::FailClosed),
        hunt: FREE,
        edits: &[(
            "SELECT value IS NULL OR pg_catalog.octet_length(value) NOT BETWEEN 1 AND 1024",
            "SELECT value IS NULL OR pg_catalog.octet_length(value) NOT BETWEEN 1 AND 1000000",
        )],
        caught_by: &["invalid_input_is_22023_naming_every_violation_and_changes_nothing"],
    },
    NO_INTERVAL_CAP,
    // ---- Races: bugs between the statements of one call ---------------------------------
    Mutant {
        name: "take_reads_clock_before_lock",
        breaks: "_take reads the clock before it waits for the row lock (pg_lease 0.1.0's order): a grant that waited for the lock is dated before the release it waited for",
        kill: Kill::Breaks(Invariant::MutualExclusion),
        hunt: FREE,
        edits: &[
            (
                TAKE_LOCK_DECIDE,
                "            v_now := clock_timestamp();
            SELECT l.owner, l.expires_at INTO v_owner, v_expires
              FROM lease_internal.leases AS l
             WHERE l.key = p_key COLLATE \"C\"
               FOR NO KEY UPDATE;
            IF v_owner IS NOT NULL AND v_expires > v_now THEN",
            ),
            (
                "    v_now := clock_timestamp();\n    IF v_owner IS NULL OR v_expires <= v_now THEN",
                "    v_now := coalesce(v_now, clock_timestamp());\n    IF v_owner IS NULL OR v_expires <= v_now THEN",
            ),
        ],
        caught_by: &[],
    },
    Mutant {
        name: "take_dates_grant_at_statement_start",
        breaks: "_take dates a grant from statement_timestamp() instead of the clock it read under the lock: a blocking acquire that waited for a release or a lapse is granted from before it",
        kill: Kill::Breaks(Invariant::MutualExclusion),
        hunt: FREE,
        edits: &[(
            "               expires_at = (v_now AT TIME ZONE 'UTC' + p_ttl) AT TIME ZONE 'UTC'",
            "               expires_at = (statement_timestamp() AT TIME ZONE 'UTC' + p_ttl) AT TIME ZONE 'UTC'",
        )],
        caught_by: &[],
    },
    Mutant {
        name: "take_without_row_lock",
        breaks: "_take trusts the lock-free probe: no FOR NO KEY UPDATE and no re-check, so a racing acquirer overwrites the grant that won",
        kill: Kill::Breaks(Invariant::MutualExclusion),
        hunt: FREE,
        edits: &[
            (
                TAKE_AT_ONCE,
                "       AND (l.owner IS NULL OR l.expires_at <= clock_timestamp());",
            ),
            (TAKE_LOCK_DECIDE, "            IF false THEN"),
            (TAKE_GRANT_DECIDE, "IF true THEN"),
        ],
        caught_by: &["exactly_one_of_concurrent_acquirers_wins"],
    },
    Mutant {
        name: "insert_conflict_takes_over",
        breaks: "the first grant of a key overwrites a racing first grant (ON CONFLICT DO UPDATE instead of DO NOTHING)",
        kill: Kill::Breaks(Invariant::MutualExclusion),
        hunt: FREE,
        edits: &[(
            "        ON CONFLICT (key) DO NOTHING;\n",
            "        ON CONFLICT (key) DO UPDATE SET owner = EXCLUDED.owner, epoch = l.epoch + 1, expires_at = EXCLUDED.expires_at;\n",
        )],
        caught_by: &["exactly_one_of_concurrent_acquirers_wins"],
    },
    Mutant {
        name: "take_epoch_from_unlocked_read",
        breaks: "_take computes the grant's epoch from a read made before it locked the row: after waiting for a writer it reuses that writer's epoch",
        kill: Kill::Breaks(Invariant::GrantEpochFresh),
        hunt: FREE,
        edits: &[
            (
                "    v_now     timestamptz;\nBEGIN\n    PERFORM lease_internal._no_prepare();\n    IF NOT p_exists THEN",
                "    v_now     timestamptz;
    v_epoch   bigint;
BEGIN
    SELECT l.epoch INTO v_epoch FROM lease_internal.leases AS l WHERE l.key = p_key COLLATE \"C\";
    PERFORM lease_internal._no_prepare();
    IF NOT p_exists THEN",
            ),
            (
                "SET owner = p_owner,\n               epoch = l.epoch + 1,",
                "SET owner = p_owner,\n               epoch = v_epoch + 1,",
            ),
        ],
        caught_by: &[],
    },
    Mutant {
        name: "lock_live_skips_expiry",
        breaks: "_lock_live does not re-check the expiry under the lock: a renew or release that saw its lease live, then waited, succeeds after the lease lapsed",
        kill: Kill::Breaks(Invariant::LapseIsFinal),
        hunt: FREE,
        edits: &[
            (LOCK_LIVE_WAITED_DECIDE, "AND v_epoch = p_epoch THEN"),
            (
                LOCK_LIVE_AT_ONCE,
                "AND l.epoch = p_epoch\n       FOR NO KEY UPDATE SKIP LOCKED;",
            ),
            (
                LOCK_LIVE_AT_ONCE_RECHECK,
                "        IF true THEN\n            RETURN v_now;",
            ),
        ],
        caught_by: &[],
    },
    Mutant {
        name: "release_without_row_lock",
        breaks: "release trusts its lock-free read: it frees the row without locking it and re-checking owner, epoch and expiry, so a release that waited for the row lock while the lease changed answers ok where the precedence rule gives another status",
        kill: Kill::Breaks(Invariant::PrecedenceAndIsolation),
        hunt: STEPPED_FIRST,
        edits: &[(
            "        IF lease_internal._lock_live(release.key, release.owner, release.epoch) IS NOT NULL THEN",
            "        IF true THEN",
        )],
        caught_by: &[],
    },
    Mutant {
        name: "reacquire_rewrites_expiry",
        breaks: "a same-owner acquire of its live lease rewrites the expiry to now + ttl (same epoch) instead of being idempotent",
        kill: Kill::Breaks(Invariant::ReacquireIdempotent),
        hunt: FREE,
        edits: &[(
            "                acquired := true;\n                epoch := v_epoch;\n                expires_at := v_expires;",
            "                acquired := true;
                epoch := v_epoch;
                UPDATE lease_internal.leases AS l
                   SET expires_at = (v_now AT TIME ZONE 'UTC' + acquire.ttl) AT TIME ZONE 'UTC'
                 WHERE l.key = acquire.key COLLATE \"C\"
                RETURNING l.expires_at INTO expires_at;",
        )],
        caught_by: &[],
    },
    Mutant {
        name: "inspect_uses_now",
        breaks: "inspect judges expiry by now() (the transaction's start) instead of the current clock: inside a transaction it reports a lapsed lease as held (an answer only a time before the call explains)",
        kill: Kill::BreaksEither(
            Invariant::InspectConsistent,
            Invariant::DurabilityAndTimeAuthority,
        ),
        hunt: FREE,
        edits: &[(
            "AND l.expires_at > clock_timestamp() AS live",
            "AND l.expires_at > now() AS live",
        )],
        caught_by: &[],
    },
    Mutant {
        name: "grant_dated_from_transaction_start",
        breaks: "a grant (a first one and a takeover) is dated from now() (the transaction's start) instead of the clock: inside a transaction its expiry is backdated by the transaction's age",
        kill: Kill::BreaksEither(
            Invariant::DurabilityAndTimeAuthority,
            Invariant::MutualExclusion,
        ),
        hunt: FREE,
        edits: &[
            (
                "VALUES (p_key, p_owner, 1, (clock_timestamp() AT TIME ZONE 'UTC' + p_ttl)",
                "VALUES (p_key, p_owner, 1, (now() AT TIME ZONE 'UTC' + p_ttl)",
            ),
            (
                "           SET expires_at = (v_now AT TIME ZONE 'UTC' + p_ttl) AT TIME ZONE 'UTC'",
                "           SET expires_at = (now() AT TIME ZONE 'UTC' + p_ttl) AT TIME ZONE 'UTC'",
            ),
            (
                "               expires_at = (v_now AT TIME ZONE 'UTC' + p_ttl) AT TIME ZONE 'UTC'",
                "               expires_at = (now() AT TIME ZONE 'UTC' + p_ttl) AT TIME ZONE 'UTC'",
            ),
        ],
        caught_by: &[],
    },
    Mutant {
        name: "lapse_judged_from_transaction_start",
        breaks: "renew and release judge expiry (before and under the row lock) by now() (the transaction's start): inside a transaction they succeed on a lease that lapsed after it began, and a renew dates the new expiry from then",
        kill: Kill::BreaksEither(
            Invariant::LapseIsFinal,
            Invariant::DurabilityAndTimeAuthority,
        ),
        hunt: FREE,
        edits: &[
            (
                "WHEN v_expires <= clock_timestamp() THEN 'lapsed'",
                "WHEN v_expires <= now() THEN 'lapsed'",
            ),
            (
                "           FOR NO KEY UPDATE;\n        v_now := clock_timestamp();\n        IF v_owner = p_owner",
                "           FOR NO KEY UPDATE;\n        v_now := now();\n        IF v_owner = p_owner",
            ),
            (
                "AND l.expires_at > clock_timestamp()\n       FOR NO KEY UPDATE SKIP LOCKED;\n    IF FOUND THEN\n        v_now := clock_timestamp();",
                "AND l.expires_at > now()\n       FOR NO KEY UPDATE SKIP LOCKED;\n    IF FOUND THEN\n        v_now := now();",
            ),
        ],
        caught_by: &[],
    },
    Mutant {
        name: "probe_judged_from_transaction_start",
        breaks: "acquire's probe judges expiry by now() (the transaction's start): inside a transaction a lease that lapsed after it began still counts as held (denied, or an idempotent success for its owner)",
        kill: Kill::BreaksEither(Invariant::LapseIsFinal, Invariant::ReacquireIdempotent),
        hunt: FREE,
        edits: &[(
            "IF v_found AND v_owner IS NOT NULL AND v_expires > v_now THEN",
            "IF v_found AND v_owner IS NOT NULL AND v_expires > now() THEN",
        )],
        caught_by: &[],
    },
    Mutant {
        name: "wait_deadline_halved",
        breaks: "a blocking acquire's deadline is computed from half the wait: it gives up early",
        kill: Kill::Breaks(Invariant::PrecedenceAndIsolation),
        hunt: FREE,
        edits: &[(
            "v_deadline := (clock_timestamp() AT TIME ZONE 'UTC' + acquire.wait) AT TIME ZONE 'UTC';",
            "v_deadline := (clock_timestamp() AT TIME ZONE 'UTC' + acquire.wait / 2) AT TIME ZONE 'UTC';",
        )],
        caught_by: &[],
    },
    Mutant {
        name: "wait_deadline_from_transaction_start",
        breaks: "a blocking acquire's deadline is counted from now() (the transaction's start): inside a transaction it gives up early",
        kill: Kill::Breaks(Invariant::PrecedenceAndIsolation),
        hunt: FREE,
        edits: &[(
            "v_deadline := (clock_timestamp() AT TIME ZONE 'UTC' + acquire.wait) AT TIME ZONE 'UTC';",
            "v_deadline := (now() AT TIME ZONE 'UTC' + acquire.wait) AT TIME ZONE 'UTC';",
        )],
        caught_by: &[],
    },
    Mutant {
        name: "wait_probes_once",
        breaks: "a blocking acquire that finds the key held sleeps to its deadline and gives up without probing again: it misses a release or a lapse during its wait",
        kill: Kill::Breaks(Invariant::LapseIsFinal),
        hunt: FREE,
        edits: &[(
            WAIT_SLEEP,
            "            PERFORM pg_sleep(GREATEST(0.0, extract(epoch FROM v_deadline - v_now)));
            RAISE EXCEPTION 'lease.acquire: wait of % exhausted: the key is still held by another owner', acquire.wait
                USING ERRCODE = 'query_canceled';",
        )],
        caught_by: &[],
    },
    // ---- Lock behaviour: stalls, which a history cannot show -------------------------
    Mutant {
        name: "probe_locks_the_row",
        breaks: "the acquire probe takes a row lock (denied acquires write; waiters stall the holder)",
        kill: Kill::Stall,
        hunt: STEPPED,
        edits: &[(
            "WHERE l.key = acquire.key COLLATE \"C\";\n        v_found := FOUND;",
            "WHERE l.key = acquire.key COLLATE \"C\" FOR UPDATE;\n        v_found := FOUND;",
        )],
        caught_by: &[
            "denied_acquire_returns_nulls_and_writes_nothing",
            "blocking_waiters_never_stall_the_holders_renew",
        ],
    },
    Mutant {
        name: "lost_race_keeps_row_lock",
        breaks: "a lost write attempt of a blocking acquire is not rolled back: its row lock is kept across the waiter's sleeps",
        kill: Kill::Stall,
        hunt: STEPPED,
        edits: &[
            (
                "                    RAISE EXCEPTION USING ERRCODE = 'LE001';",
                "                    NULL;",
            ),
            (
                "                RAISE EXCEPTION USING ERRCODE = 'LE002';",
                "                NULL;",
            ),
        ],
        caught_by: &["a_waiter_that_lost_a_race_never_stalls_the_holders_renew"],
    },
    // ---- Fault-only: a crash, a cancel or a wake-up shows them (nemesis's fault checks,
    // whose negative controls they are; no fault-free campaign can) ----------------------
    Mutant {
        name: "nemesis_no_durable_commit",
        breaks: "the durability trigger is not created: synchronous_commit = off commits lease writes asynchronously",
        edits: &[(
            "CREATE CONSTRAINT TRIGGER leases_commit_durably\n    AFTER INSERT OR UPDATE ON lease_internal.leases\n    DEFERRABLE INITIALLY DEFERRED\n    FOR EACH ROW EXECUTE FUNCTION lease_internal._commit_durably();\n",
            "",
        )],
        // The lost grant shows first at an inspect (inv 10) or at the next grant (inv 11).
        kill: Kill::BreaksEither(
            Invariant::DurabilityAndTimeAuthority,
            Invariant::InspectConsistent,
        ),
        hunt: &[Mode::Faults("sync-commit-off-crash")],
        caught_by: &[],
    },
    Mutant {
        name: "nemesis_unlogged_table",
        breaks: "the lease table is UNLOGGED: crash recovery empties it",
        edits: &[(
            "REVOKE ALL ON FUNCTION lease_internal._commit_durably() FROM PUBLIC;\n",
            "REVOKE ALL ON FUNCTION lease_internal._commit_durably() FROM PUBLIC;\nALTER TABLE lease_internal.leases SET UNLOGGED;\n",
        )],
        kill: Kill::Breaks(Invariant::DurabilityAndTimeAuthority),
        hunt: &[Mode::Faults("crash"), Mode::Faults("restart-immediate")],
        caught_by: &[],
    },
    Mutant {
        name: "nemesis_cancelled_wait_grants",
        breaks: "a blocking acquire whose wait is cancelled takes the key anyway and answers a grant",
        edits: &[(
            "            PERFORM pg_sleep(GREATEST(0.0, LEAST(0.05,
                extract(epoch FROM v_deadline - v_now),
                extract(epoch FROM v_expires - v_now))));
            CONTINUE;",
            "            BEGIN
                PERFORM pg_sleep(GREATEST(0.0, LEAST(0.05,
                    extract(epoch FROM v_deadline - v_now),
                    extract(epoch FROM v_expires - v_now))));
            EXCEPTION WHEN query_canceled THEN
                UPDATE lease_internal.leases AS l
                   SET owner = acquire.owner, epoch = l.epoch + 1,
                       expires_at = clock_timestamp() + acquire.ttl
                 WHERE l.key = acquire.key COLLATE \"C\"
                RETURNING l.epoch, l.expires_at INTO v_epoch, v_expires;
                acquired := true;
                epoch := v_epoch;
                expires_at := v_expires;
                RETURN NEXT;
                RETURN;
            END;
            CONTINUE;",
        )],
        // The cancelled waiter's grant overlaps the holder's lease, or reuses its epoch.
        kill: Kill::BreaksEither(Invariant::MutualExclusion, Invariant::GrantEpochFresh),
        hunt: &[Mode::Faults("cancel"), Mode::Faults("statement-timeout")],
        caught_by: &["wait_exhaustion_is_57014_and_distinct_from_a_cancel"],
    },
    Mutant {
        name: "nemesis_slow_wake",
        breaks: "a blocking acquire sleeps up to 2 s between probes instead of 50 ms",
        edits: &[("LEAST(0.05,", "LEAST(2.0,")],
        kill: Kill::Stall,
        hunt: &[Mode::Faults("wait-wake")],
        caught_by: &["blocking_acquire_is_woken_by_release"],
    },
    // ---- Beyond a history verdict: errors outside the contract, leaked settings, hangs,
    // column types, swallowed errors, the input domain, late clocks, late wake-ups --------
    STATUS_LOOKUP_INJECTS_KEY,
    ACQUIRE_LEAKS_SYNCHRONOUS_COMMIT_OFF,
    RENEW_SPINS_ON_A_FREE_KEY,
    EPOCH_COLUMN_IS_INTEGER,
    EXPIRES_AT_WITHOUT_TIME_ZONE,
    BLOCKING_ATTEMPT_SWALLOWS_ERRORS,
    EMPTY_CHECK_TRIMS_BLANKS,
    POSITIVE_BEFORE_NEGATIVE_FIELD,
    FIRST_GRANT_DATED_AT_STATEMENT_START,
    LOCK_LIVE_READS_CLOCK_BEFORE_LOCK,
    FIRST_GRANT_KEEPS_THE_INSERTS_CLOCK,
    WAIT_OVERSLEEPS_ITS_DEADLINE,
    WAIT_OVERSLEEPS_THE_EXPIRY,
];

/// The model mutations without a SQL mutant.
pub const MODEL_ONLY: &[ModelOnly] = &[
    ModelOnly {
        mutation: Mutation::WriteIgnoresKey,
        why: "its SQL form, the mutant write_ignores_key (release without the key predicate), \
              changes keys the call does not name; the history checker judges each key's \
              history alone (P-compositionality), so what it sees is a key whose holder loses \
              its lease with no call on that key, which it names invariant 1 on the grant that \
              follows, not invariant 8 (only a state holding every key, the model's, sees 8)",
        killed_by: "the stateright model's negative control (model/tests/negative_controls.rs); \
                    on a server: the SQL mutant write_ignores_key, killed by invariant 1",
    },
    ModelOnly {
        mutation: Mutation::InvalidInputWrites,
        why: "an error raised by a statement rolls back everything the statement wrote, so no \
              edit of the script keeps a grant written before the 22023 (it would need an \
              autonomous transaction, e.g. dblink)",
        killed_by: "the stateright model's negative control (model/tests/negative_controls.rs)",
    },
    ModelOnly {
        mutation: Mutation::AbortKeepsEffects,
        why: "an aborted transaction's writes are undone by PostgreSQL itself; keeping them \
              needs an autonomous transaction (dblink), not an edit of the script",
        killed_by: "the stateright model's negative control (model/tests/negative_controls.rs)",
    },
    ModelOnly {
        mutation: Mutation::CrashLosesCommitted,
        why: "its SQL forms, nemesis_unlogged_table and nemesis_no_durable_commit, show only \
              in a crash, so the fault checks hunt them (Mode::Faults), not the history \
              campaigns, and a lost write shows as whichever invariant the checker meets \
              first (their controls accept any a lost write breaks), not as this mutation's",
        killed_by: "the stateright model's negative control (model/tests/negative_controls.rs); \
                    on a server: the crash fault checks kill nemesis_unlogged_table and \
                    nemesis_no_durable_commit",
    },
    ModelOnly {
        mutation: Mutation::DowntimeExtendsLease,
        why: "pg_lease stores absolute expiries read from the server clock, which runs while \
              the server is down; a clock that pauses needs a restart to show, and no edit of \
              the script makes PostgreSQL's clock pause",
        killed_by: "the stateright model's negative control (model/tests/negative_controls.rs); \
                    the conformance check downtime_never_extends_ownership guards the server",
    },
];
