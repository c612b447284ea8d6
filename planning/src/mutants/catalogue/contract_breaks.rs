//! Mutants whose bug a history verdict alone does not name, or names only when the gate
//! looks where a history does not: an error the target raises outside its contract, a
//! setting it leaks into the caller's transaction, a call that never answers, a column of
//! another type, an error its blocking attempt swallows, a valid input it rejects, a DETAIL
//! in the wrong order, a clock read early, a wake-up a poll interval late. Each edit's
//! anchor is small and local (the catalogue is rebased when the script changes).

use super::{Kill, Mode, Mutant};
use model::Invariant;

const CHECKS: &[Mode] = &[Mode::Checks];

/// renew's and release's failure-status lookup builds its SQL with `format('%s')` and
/// `EXECUTE`: a key with a quote makes the server raise 42601 inside the target.
pub const STATUS_LOOKUP_INJECTS_KEY: Mutant = Mutant {
    name: "status_lookup_injects_key",
    breaks: "renew's and release's failure-status lookup splices the key into SQL it EXECUTEs: a key with a quote raises 42601 (a SQL injection) inside the target",
    kill: Kill::Finding("SQLSTATE 42601 inside the target"),
    hunt: &[Mode::Free, Mode::Checks],
    edits: &[(
        "SELECT l.owner, l.epoch, l.expires_at INTO v_owner, v_epoch, v_expires
      FROM lease_internal.leases AS l
     WHERE l.key = p_key COLLATE \"C\";
    RETURN CASE
        WHEN NOT FOUND OR ",
        "EXECUTE pg_catalog.format('SELECT l.owner, l.epoch, l.expires_at FROM lease_internal.leases AS l WHERE l.key = ''%s'' COLLATE \"C\"', p_key)
       INTO v_owner, v_epoch, v_expires;
    RETURN CASE
        WHEN ",
    )],
    caught_by: &["every_valid_key_owner_and_interval_is_accepted"],
};

/// acquire sets `synchronous_commit = off` for the rest of the caller's transaction (a
/// "read needs no flush" shortcut): the caller's own writes commit asynchronously, and a
/// grant's commit no longer waits for a synchronous standby.
pub const ACQUIRE_LEAKS_SYNCHRONOUS_COMMIT_OFF: Mutant = Mutant {
    name: "acquire_leaks_synchronous_commit_off",
    breaks: "acquire runs SET LOCAL synchronous_commit = off: the setting leaks into the caller's transaction (its other writes commit asynchronously; a lease write no longer waits for a synchronous standby)",
    kill: Kill::Finding("synchronous_commit"),
    hunt: &[Mode::Checks, Mode::Faults("commit-crash")],
    edits: &[(
        "    v_deadline := (clock_timestamp() AT TIME ZONE 'UTC' + acquire.wait) AT TIME ZONE 'UTC';\n",
        "    PERFORM pg_catalog.set_config('synchronous_commit', 'off', true);
    v_deadline := (clock_timestamp() AT TIME ZONE 'UTC' + acquire.wait) AT TIME ZONE 'UTC';\n",
    )],
    caught_by: &["no_call_changes_the_callers_session_settings"],
};

/// The failure-status lookup has no answer for a key without a holder: renew and release
/// of a never-leased or FREE key loop forever (the lock-free read says "try again", the
/// locked check says "changed").
pub const RENEW_SPINS_ON_A_FREE_KEY: Mutant = Mutant {
    name: "renew_spins_on_a_free_key",
    breaks: "renew and release of a never-leased or FREE key spin in their retry loop and never answer",
    kill: Kill::Finding("hangs"),
    hunt: &[Mode::Free, Mode::Checks],
    edits: &[(
        "        WHEN NOT FOUND OR v_owner IS NULL OR v_owner <> p_owner COLLATE \"C\" THEN 'not_owner'\n",
        "        WHEN v_owner <> p_owner COLLATE \"C\" THEN 'not_owner'\n",
    )],
    caught_by: &["every_call_answers_on_every_state_within_its_bound"],
};

/// The lease table's epoch column is `integer` (the calls cast it back to `bigint`, so the
/// API looks right): epochs overflow at 2^31 - 1, and whoever reads the table meets an
/// `integer`.
pub const EPOCH_COLUMN_IS_INTEGER: Mutant = Mutant {
    name: "epoch_column_is_integer",
    breaks: "the lease table's epoch column is integer, not bigint (the calls cast it): a key's epoch cannot pass 2^31 - 1",
    kill: Kill::Finding("bigint"),
    hunt: CHECKS,
    edits: &[
        // The dump's parent table too: the lease table inherits it (same column types).
        (
            "    epoch      bigint,\n    expires_at timestamptz\n);\n",
            "    epoch      integer,\n    expires_at timestamptz\n);\n",
        ),
        (
            "    epoch      bigint      NOT NULL CHECK (epoch >= 1),\n",
            "    epoch      integer     NOT NULL CHECK (epoch >= 1),\n",
        ),
        (
            "           SET expires_at = (v_now AT TIME ZONE 'UTC' + p_ttl) AT TIME ZONE 'UTC'\n         WHERE l.key = p_key COLLATE \"C\"\n        RETURNING l.epoch, l.expires_at;",
            "           SET expires_at = (v_now AT TIME ZONE 'UTC' + p_ttl) AT TIME ZONE 'UTC'\n         WHERE l.key = p_key COLLATE \"C\"\n        RETURNING l.epoch::bigint, l.expires_at;",
        ),
        (
            "               expires_at = (v_now AT TIME ZONE 'UTC' + p_ttl) AT TIME ZONE 'UTC'\n         WHERE l.key = p_key COLLATE \"C\"\n        RETURNING l.epoch, l.expires_at;",
            "               expires_at = (v_now AT TIME ZONE 'UTC' + p_ttl) AT TIME ZONE 'UTC'\n         WHERE l.key = p_key COLLATE \"C\"\n        RETURNING l.epoch::bigint, l.expires_at;",
        ),
        (
            "CASE WHEN live THEN l.owner END, l.epoch,",
            "CASE WHEN live THEN l.owner END, l.epoch::bigint,",
        ),
    ],
    caught_by: &[
        "the_api_and_the_lease_table_have_the_contracts_types",
        "epochs_count_past_2_31",
    ],
};

/// The lease table's expires_at column is `timestamp` without time zone (the calls cast it
/// to `timestamptz` in the caller's TimeZone, so one session sees nothing wrong): every
/// session stores and reads expiries in its own TimeZone, so two sessions in different
/// zones disagree about when a lease lapses (one takes over a live lease).
pub const EXPIRES_AT_WITHOUT_TIME_ZONE: Mutant = Mutant {
    name: "expires_at_without_time_zone",
    breaks: "the lease table's expires_at column is timestamp without time zone (the calls cast it in the caller's TimeZone): sessions in different TimeZones disagree about expiry",
    kill: Kill::Finding("timestamp with time zone"),
    hunt: &[Mode::Checks, Mode::Matrix("timezones-mixed")],
    edits: &[
        // The dump's parent table too: the lease table inherits it (same column types).
        (
            "    epoch      bigint,\n    expires_at timestamptz\n);\n",
            "    epoch      bigint,\n    expires_at timestamp\n);\n",
        ),
        (
            "    expires_at timestamptz,\n    CONSTRAINT leases_held_shape",
            "    expires_at timestamp,\n    CONSTRAINT leases_held_shape",
        ),
        (
            "           SET expires_at = (v_now AT TIME ZONE 'UTC' + p_ttl) AT TIME ZONE 'UTC'\n         WHERE l.key = p_key COLLATE \"C\"\n        RETURNING l.epoch, l.expires_at;",
            "           SET expires_at = (v_now AT TIME ZONE 'UTC' + p_ttl) AT TIME ZONE 'UTC'\n         WHERE l.key = p_key COLLATE \"C\"\n        RETURNING l.epoch, l.expires_at::timestamptz;",
        ),
        (
            "               expires_at = (v_now AT TIME ZONE 'UTC' + p_ttl) AT TIME ZONE 'UTC'\n         WHERE l.key = p_key COLLATE \"C\"\n        RETURNING l.epoch, l.expires_at;",
            "               expires_at = (v_now AT TIME ZONE 'UTC' + p_ttl) AT TIME ZONE 'UTC'\n         WHERE l.key = p_key COLLATE \"C\"\n        RETURNING l.epoch, l.expires_at::timestamptz;",
        ),
        (
            "CASE WHEN live THEN l.expires_at END",
            "CASE WHEN live THEN l.expires_at::timestamptz END",
        ),
    ],
    caught_by: &["the_api_and_the_lease_table_have_the_contracts_types"],
};

/// A blocking acquire's attempt catches every error instead of only its own lost race:
/// in a READ ONLY transaction it retries the failing write forever (instead of 25006), and
/// a lock_timeout makes it retry (instead of 55P03).
pub const BLOCKING_ATTEMPT_SWALLOWS_ERRORS: Mutant = Mutant {
    name: "blocking_attempt_swallows_errors",
    breaks: "a blocking acquire's attempt catches WHEN OTHERS: 25006 in a READ ONLY transaction and 55P03 under lock_timeout are retried (a spin, a late grant) instead of raised",
    kill: Kill::Finding("25006"),
    hunt: CHECKS,
    edits: &[(
        "            EXCEPTION WHEN SQLSTATE 'LE001' THEN\n",
        "            EXCEPTION WHEN OTHERS THEN\n",
    )],
    caught_by: &[
        "a_read_only_transaction_refuses_writes_with_25006",
        "lock_timeout_fails_a_waiting_call_with_55p03",
    ],
};

/// The "empty" test trims blanks: a key or owner of spaces is rejected as empty.
pub const EMPTY_CHECK_TRIMS_BLANKS: Mutant = Mutant {
    name: "empty_check_trims_blanks",
    breaks: "the empty-text check is btrim(value) = '': a valid key or owner of blanks is rejected with 22023",
    kill: Kill::Finding("valid input rejected"),
    hunt: CHECKS,
    edits: &[
        (
            "    SELECT value IS NULL OR pg_catalog.octet_length(value) NOT BETWEEN 1 AND 1024\n",
            "    SELECT value IS NULL OR pg_catalog.btrim(value) = '' OR pg_catalog.octet_length(value) > 1024\n",
        ),
        (
            "        WHEN pg_catalog.octet_length(value) = 0 THEN name || ' must not be empty'\n",
            "        WHEN pg_catalog.btrim(value) = '' THEN name || ' must not be empty'\n",
        ),
    ],
    caught_by: &["every_valid_key_owner_and_interval_is_accepted"],
};

/// The interval check reports "must be positive" before "must not have a negative field":
/// for `'1 mon -30 days'` (zero, with a negative field) the DETAIL names the wrong first
/// violated constraint.
pub const POSITIVE_BEFORE_NEGATIVE_FIELD: Mutant = Mutant {
    name: "positive_before_negative_field",
    breaks: "the interval DETAIL tests 'must be positive' before 'must not have a negative field': '1 mon -30 days' is reported as not positive",
    kill: Kill::Finding("DETAIL"),
    hunt: CHECKS,
    edits: &[(
        "        WHEN value IS NULL THEN name || ' must not be NULL'\n        WHEN pg_catalog.get_byte",
        "        WHEN value IS NULL THEN name || ' must not be NULL'
        WHEN NOT allow_zero AND value <= interval '0' THEN
            pg_catalog.format('%s must be positive (got %s)', name, lease_internal._interval_text(value))
        WHEN pg_catalog.get_byte",
    )],
    caught_by: &["invalid_input_names_every_violated_constraint_in_order"],
};

/// The first grant of a never-leased key is dated from `statement_timestamp()`: a grant
/// late in a long statement (a batch over many keys, a block that works first) expires
/// early by the statement's age.
pub const FIRST_GRANT_DATED_AT_STATEMENT_START: Mutant = Mutant {
    name: "first_grant_dated_at_statement_start",
    breaks: "the first grant of a never-leased key is dated from statement_timestamp(): late in a long statement it expires early by the statement's age",
    kill: Kill::Breaks(Invariant::DurabilityAndTimeAuthority),
    hunt: &[Mode::Late],
    edits: &[(
        "        v_now := clock_timestamp();\n        RETURN QUERY\n",
        "        v_now := statement_timestamp();\n        RETURN QUERY\n",
    )],
    caught_by: &[],
};

/// `_lock_live` reads the clock before it locks the row: a renew or release that waited
/// for the row lock across its lease's expiry, behind a writer that then rolled back,
/// decides with the time before the wait (it renews or releases a lapsed lease).
pub const LOCK_LIVE_READS_CLOCK_BEFORE_LOCK: Mutant = Mutant {
    name: "lock_live_reads_clock_before_lock",
    breaks: "_lock_live reads the clock before it locks the row: a renew or release that waited across its lease's expiry behind a writer that rolled back succeeds on the lapsed lease",
    kill: Kill::Finding("expected lapsed, came back ok"),
    hunt: CHECKS,
    edits: &[
        (
            "    BEGIN\n        SELECT l.owner, l.epoch, l.expires_at INTO v_owner, v_epoch, v_expires\n          FROM lease_internal.leases AS l\n         WHERE l.key = p_key COLLATE \"C\"\n           FOR NO KEY UPDATE;\n        v_now := clock_timestamp();\n",
            "    BEGIN\n        v_now := clock_timestamp();\n        SELECT l.owner, l.epoch, l.expires_at INTO v_owner, v_epoch, v_expires\n          FROM lease_internal.leases AS l\n         WHERE l.key = p_key COLLATE \"C\"\n           FOR NO KEY UPDATE;\n",
        ),
    ],
    caught_by: &["a_write_that_waited_across_its_leases_expiry_answers_lapsed"],
};

/// The first grant of a never-leased key keeps the expiry its INSERT computed: the clock
/// read before the insert waited for another transaction inserting the same key, so after
/// that transaction rolls back the grant comes back already expired (pg_lease 0.2.0's bug).
pub const FIRST_GRANT_KEEPS_THE_INSERTS_CLOCK: Mutant = Mutant {
    name: "first_grant_keeps_the_inserts_clock",
    breaks: "a first grant keeps the expiry its INSERT computed before waiting for a concurrent inserter of the key: after that inserter rolls back, the grant is already expired",
    kill: Kill::Finding("first-grant clock class"),
    hunt: CHECKS,
    edits: &[(
        "           SET expires_at = (v_now AT TIME ZONE 'UTC' + p_ttl) AT TIME ZONE 'UTC'\n         WHERE l.key = p_key COLLATE \"C\"\n        RETURNING l.epoch, l.expires_at;",
        "           SET expires_at = l.expires_at\n         WHERE l.key = p_key COLLATE \"C\"\n        RETURNING l.epoch, l.expires_at;",
    )],
    caught_by: &["a_first_grant_that_waited_for_a_rolled_back_insert_is_dated_after_it"],
};

/// A blocking acquire whose last sleep reaches its deadline sleeps one poll interval
/// (50 ms) more before it gives up.
pub const WAIT_OVERSLEEPS_ITS_DEADLINE: Mutant = Mutant {
    name: "wait_oversleeps_its_deadline",
    breaks: "a blocking acquire sleeps one poll interval (50 ms) past its deadline before raising 57014",
    kill: Kill::Finding("deadline"),
    hunt: CHECKS,
    edits: &[(
        "                extract(epoch FROM v_expires - v_now))));\n",
        "                extract(epoch FROM v_expires - v_now)))
                + CASE WHEN v_deadline - v_now <= interval '50 milliseconds' THEN 0.05 ELSE 0 END);\n",
    )],
    caught_by: &["blocking_waits_end_promptly_at_deadline_and_expiry"],
};

/// A blocking acquire whose last sleep reaches the holder's expiry sleeps one poll
/// interval (50 ms) more before it takes the key over.
pub const WAIT_OVERSLEEPS_THE_EXPIRY: Mutant = Mutant {
    name: "wait_oversleeps_the_expiry",
    breaks: "a blocking acquire sleeps one poll interval (50 ms) past the holder's expiry before taking the key over",
    kill: Kill::Finding("expiry"),
    hunt: CHECKS,
    edits: &[(
        "                extract(epoch FROM v_expires - v_now))));\n",
        "                extract(epoch FROM v_expires - v_now)))
                + CASE WHEN v_expires - v_now <= interval '50 milliseconds' THEN 0.05 ELSE 0 END);\n",
    )],
    caught_by: &["blocking_waits_end_promptly_at_deadline_and_expiry"],
};
