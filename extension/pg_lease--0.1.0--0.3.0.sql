-- pg_lease 0.1.0 -> 0.3.0, the update PostgreSQL takes from 0.1.0 (one step, so it is
-- preferred to 0.1.0 -> 0.2.0 -> 0.3.0). Behaviour contract: specs/SEMANTICS.md of the
-- repository; version policy: README. What 0.3.0 changes is listed at the top of
-- pg_lease--0.3.0.sql (and pg_lease--0.1.0--0.2.0.sql lists what 0.2.0 changed).
--
-- 0.1.0's table compares keys by the database's collation; 0.3.0's by "C". The rows are
-- copied into a new table and the old one is dropped with CASCADE: the update never fails
-- because another role made something depend on it (a view over it, a column of its row
-- type, which 0.1.0 let any role create); those objects, which could not read it, are
-- dropped with it. (0.1.0 -> 0.2.0 alters the column in place and fails on them.)
-- Every definition below is the one of pg_lease--0.3.0.sql (an updated install and a fresh
-- one have the same objects and definitions: the harness compares their catalogs).

\echo Use "ALTER EXTENSION pg_lease UPDATE TO '0.3.0'" to load this file. \quit

-- Nothing may queue this update behind another transaction, and every lease call behind the
-- update: an update that waited for the lease table's lock (held by any open transaction that
-- called pg_lease, which any role may run) would make every later call wait for it in turn.
-- The update takes that lock first and waits for it at most 100 ms (so a call may wait that
-- long behind it); otherwise it fails with 55P03, changing nothing, and can be run again
-- once that transaction ended. The caller's lock_timeout is restored after the lock is held
-- (specs/SEMANTICS.md section 8; security check
-- an_open_transaction_cannot_freeze_lease_calls_behind_an_extension_update).
DO $$
DECLARE
    v_lock_timeout text := pg_catalog.current_setting('lock_timeout');
BEGIN
    PERFORM pg_catalog.set_config('lock_timeout', '100ms', true);
    BEGIN
        LOCK TABLE lease.leases IN ACCESS EXCLUSIVE MODE;
    EXCEPTION WHEN lock_not_available THEN
        RAISE EXCEPTION USING
            ERRCODE = 'lock_not_available',
            MESSAGE = 'pg_lease: the update did not get the lease table''s lock within 100 ms',
            DETAIL = 'Another transaction that used pg_lease is still open; an update waiting '
                     'for it would make every lease call wait too.',
            HINT = 'Run the update again once that transaction has ended (pg_locks shows who '
                   'holds a lock on lease.leases).';
    END;
    PERFORM pg_catalog.set_config('lock_timeout', v_lock_timeout, true);
END
$$;

-- Internals: owned by the bootstrap superuser (the extension is trusted); no other role has
-- USAGE, so none can name what is in it.
CREATE SCHEMA lease_internal;
-- What pg_dump reads: the database owner may use it, nobody else.
CREATE SCHEMA lease_dump;
GRANT USAGE ON SCHEMA lease_dump TO pg_database_owner;

-- The parent of the lease table, always empty itself. A SELECT of it reads the lease table
-- (its child); it is the extension's configuration table, registered with a condition so
-- that pg_dump dumps it as COPY (SELECT ... FROM lease_dump.leases WHERE true), which
-- includes the child's rows, and restores them through the parent's trigger below.
CREATE TABLE lease_dump.leases (
    key        text COLLATE "C",
    owner      text COLLATE "C",
    epoch      bigint,
    expires_at timestamptz
);
GRANT SELECT ON lease_dump.leases TO pg_database_owner;
SELECT pg_catalog.pg_extension_config_dump('lease_dump.leases', 'WHERE true');

-- One row per key ever leased. FREE: owner and expires_at are NULL.
-- HELD: owner and expires_at are set; the lease is lapsed once
-- expires_at <= clock_timestamp() (lazy expiry, there is no reaper).
-- The epoch only ever grows: +1 per grant, +1 per release.
-- Keys and owners compare byte-wise (COLLATE "C"), whatever collation a caller's
-- expression carries.
CREATE TABLE lease_internal.leases (
    key        text COLLATE "C" PRIMARY KEY,
    owner      text COLLATE "C",
    epoch      bigint      NOT NULL CHECK (epoch >= 1),
    expires_at timestamptz,
    CONSTRAINT leases_held_shape CHECK ((owner IS NULL) = (expires_at IS NULL))
);
ALTER TABLE lease_internal.leases INHERIT lease_dump.leases;
REVOKE ALL ON lease_internal.leases FROM PUBLIC;

-- Every row of 0.1.0's table, which nothing writes meanwhile.
LOCK TABLE lease.leases IN ACCESS EXCLUSIVE MODE;
INSERT INTO lease_internal.leases (key, owner, epoch, expires_at)
SELECT key, owner, epoch, expires_at FROM lease.leases;
-- Out of the extension first (which also ends its registration as a configuration table).
DO $$
DECLARE
    v_extension name := (
        SELECT e.extname FROM pg_catalog.pg_extension AS e
          JOIN pg_catalog.pg_depend AS d
            ON d.refclassid = 'pg_catalog.pg_extension'::pg_catalog.regclass AND d.refobjid = e.oid
         WHERE d.classid = 'pg_catalog.pg_class'::pg_catalog.regclass
           AND d.objid = 'lease.leases'::pg_catalog.regclass AND d.deptype = 'e');
BEGIN
    EXECUTE pg_catalog.format('ALTER EXTENSION %I DROP TABLE lease.leases', v_extension);
END
$$;
DROP TABLE lease.leases CASCADE;

-- 0.1.0's helpers, replaced by those in lease_internal.
DROP FUNCTION lease._text_problem(text, text) CASCADE;
DROP FUNCTION lease._interval_problem(text, interval, boolean) CASCADE;
DROP FUNCTION lease._raise_invalid(text, text[]) CASCADE;
DROP FUNCTION lease._failure_status(text, text, bigint) CASCADE;

-- A restore (by a superuser: nobody else may INSERT into the parent) loads the dumped rows
-- into the lease table.
CREATE OR REPLACE FUNCTION lease_internal._restore_row()
RETURNS trigger
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    INSERT INTO lease_internal.leases (key, owner, epoch, expires_at)
    VALUES (NEW.key, NEW.owner, NEW.epoch, NEW.expires_at);
    RETURN NULL;
END
$$;
CREATE TRIGGER leases_restore
    BEFORE INSERT ON lease_dump.leases
    FOR EACH ROW EXECUTE FUNCTION lease_internal._restore_row();
REVOKE ALL ON FUNCTION lease_internal._restore_row() FROM PUBLIC;

-- Durability that no caller setting can take away: at the commit of any transaction that
-- wrote a lease row, a synchronous_commit of off is raised to local (the commit record is
-- flushed before the commit returns); stronger settings (on, remote_write, remote_apply)
-- are left as they are.
CREATE OR REPLACE FUNCTION lease_internal._commit_durably()
RETURNS trigger
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF current_setting('synchronous_commit') = 'off' THEN
        PERFORM pg_catalog.set_config('synchronous_commit', 'local', true);
    END IF;
    RETURN NULL;
END
$$;
CREATE CONSTRAINT TRIGGER leases_commit_durably
    AFTER INSERT OR UPDATE ON lease_internal.leases
    DEFERRABLE INITIALLY DEFERRED
    FOR EACH ROW EXECUTE FUNCTION lease_internal._commit_durably();
REVOKE ALL ON FUNCTION lease_internal._commit_durably() FROM PUBLIC;

-- A transaction that takes a key's row lock must not be prepared: a prepared transaction
-- keeps its row locks and its decided writes across a crash, so every later call of the key
-- would wait for it, and a COMMIT PREPARED much later would revive a renew decided before.
-- PostgreSQL refuses to prepare a transaction that used a temporary relation (0A000), so
-- every row lock is preceded by an open of this session's guard, a temporary table created
-- here on first use. Only its size is asked for (pg_relation_size runs no code of the
-- relation, whoever created a relation of that name in the caller's pg_temp).
CREATE OR REPLACE FUNCTION lease_internal._no_prepare()
RETURNS void
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_guard regclass := pg_catalog.to_regclass('pg_temp.pg_lease_no_prepare');
BEGIN
    IF v_guard IS NULL THEN
        CREATE TEMPORARY TABLE pg_lease_no_prepare ();
        v_guard := pg_catalog.to_regclass('pg_temp.pg_lease_no_prepare');
    END IF;
    PERFORM pg_catalog.pg_relation_size(v_guard);
END
$$;
REVOKE ALL ON FUNCTION lease_internal._no_prepare() FROM PUBLIC;

-- Input limits. Keys are btree-indexed; 1024 bytes stays far below the btree row limit
-- (2704 bytes), so an oversized key is our 22023, never 54000. Intervals are capped so
-- that clock_timestamp() + interval can never leave the timestamptz range (22008).

-- True when an interval argument is unacceptable: NULL, a negative field (so adding it
-- never moves a timestamp backwards, whatever the month length), not positive (unless
-- zero is allowed), or over 100 years. The fields' signs are read from the interval's
-- binary form (int64 microseconds, int32 days, int32 months, big-endian), which never
-- fails: date_part() raises 22008 on PostgreSQL 14 for a time part over 2^31 hours.
-- Immutable and plain SQL, so the planner inlines it.
CREATE OR REPLACE FUNCTION lease_internal._interval_bad(value interval, allow_zero boolean)
RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT value IS NULL
        OR pg_catalog.get_byte(pg_catalog.interval_send(value), 0) >= 128
        OR pg_catalog.get_byte(pg_catalog.interval_send(value), 8) >= 128
        OR pg_catalog.get_byte(pg_catalog.interval_send(value), 12) >= 128
        OR (NOT allow_zero AND value = interval '0')
        OR value > interval '100 years'
$$;

-- An interval as text for an error message: as the session prints intervals, or its raw
-- fields when printing would fail (a time part over 2^31 hours on PostgreSQL 14).
CREATE OR REPLACE FUNCTION lease_internal._interval_text(value interval)
RETURNS text
LANGUAGE sql STABLE PARALLEL SAFE
AS $$
    SELECT CASE
        WHEN ('x' || pg_catalog.encode(pg_catalog.substr(pg_catalog.interval_send(value), 1, 8), 'hex'))::bit(64)::bigint
             BETWEEN -7730941132799999999 AND 7730941132799999999
        THEN value::text
        ELSE pg_catalog.format('%s months %s days %s microseconds',
            ('x' || pg_catalog.encode(pg_catalog.substr(pg_catalog.interval_send(value), 13, 4), 'hex'))::bit(32)::int,
            ('x' || pg_catalog.encode(pg_catalog.substr(pg_catalog.interval_send(value), 9, 4), 'hex'))::bit(32)::int,
            ('x' || pg_catalog.encode(pg_catalog.substr(pg_catalog.interval_send(value), 1, 8), 'hex'))::bit(64)::bigint)
    END
$$;

-- True when a text argument is unacceptable: NULL, empty or over 1024 bytes.
CREATE OR REPLACE FUNCTION lease_internal._text_bad(value text)
RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT value IS NULL OR pg_catalog.octet_length(value) NOT BETWEEN 1 AND 1024
$$;

-- The sentence naming what is wrong with a text argument (NULL when nothing is).
CREATE OR REPLACE FUNCTION lease_internal._text_problem(name text, value text)
RETURNS text
LANGUAGE sql STABLE PARALLEL SAFE
AS $$
    SELECT CASE
        WHEN value IS NULL THEN name || ' must not be NULL'
        WHEN pg_catalog.octet_length(value) = 0 THEN name || ' must not be empty'
        WHEN pg_catalog.octet_length(value) > 1024 THEN
            pg_catalog.format('%s must be at most 1024 bytes (got %s bytes)', name,
                              pg_catalog.octet_length(value))
    END
$$;

-- The sentence naming what is wrong with an interval argument (NULL when nothing is).
CREATE OR REPLACE FUNCTION lease_internal._interval_problem(name text, value interval, allow_zero boolean)
RETURNS text
LANGUAGE sql STABLE PARALLEL SAFE
AS $$
    SELECT CASE
        WHEN value IS NULL THEN name || ' must not be NULL'
        WHEN pg_catalog.get_byte(pg_catalog.interval_send(value), 0) >= 128
             OR pg_catalog.get_byte(pg_catalog.interval_send(value), 8) >= 128
             OR pg_catalog.get_byte(pg_catalog.interval_send(value), 12) >= 128 THEN
            pg_catalog.format('%s must not have a negative field (got %s)', name,
                              lease_internal._interval_text(value))
        WHEN NOT allow_zero AND value = interval '0' THEN
            pg_catalog.format('%s must be positive (got %s)', name, lease_internal._interval_text(value))
        WHEN value > interval '100 years' THEN
            pg_catalog.format('%s must be at most 100 years (got %s)', name,
                              lease_internal._interval_text(value))
    END
$$;

-- Raises invalid_parameter_value (22023); DETAIL lists every violated constraint.
CREATE OR REPLACE FUNCTION lease_internal._raise_invalid(op text, problems text[])
RETURNS void
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RAISE EXCEPTION '%: invalid input', op
        USING ERRCODE = 'invalid_parameter_value',
              DETAIL = array_to_string(array_remove(problems, NULL), '; ') || '.',
              HINT = 'No lease state was changed. Keys and owners must be 1 to 1024 bytes; '
                     'ttl must be positive and wait not negative, each at most 100 years '
                     'with no negative field.';
END
$$;

-- Refuses a call outside READ COMMITTED: under REPEATABLE READ or SERIALIZABLE a lock-free
-- read answers from the transaction's snapshot, which may predate a release or a grant.
-- (READ UNCOMMITTED is READ COMMITTED in PostgreSQL.)
CREATE OR REPLACE FUNCTION lease_internal._refuse_isolation(op text)
RETURNS void
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RAISE EXCEPTION '%: pg_lease needs READ COMMITTED, this transaction is %', op,
                    current_setting('transaction_isolation')
        USING ERRCODE = 'object_not_in_prerequisite_state',
              HINT = 'Run lease calls in READ COMMITTED transactions (the default); '
                     'no lease state was changed.';
END
$$;

REVOKE ALL ON FUNCTION lease_internal._interval_bad(interval, boolean) FROM PUBLIC;
REVOKE ALL ON FUNCTION lease_internal._text_bad(text) FROM PUBLIC;
REVOKE ALL ON FUNCTION lease_internal._text_problem(text, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION lease_internal._interval_problem(text, interval, boolean) FROM PUBLIC;
REVOKE ALL ON FUNCTION lease_internal._interval_text(interval) FROM PUBLIC;
REVOKE ALL ON FUNCTION lease_internal._raise_invalid(text, text[]) FROM PUBLIC;
REVOKE ALL ON FUNCTION lease_internal._refuse_isolation(text) FROM PUBLIC;

-- Takes `key` for `owner` if it is never-leased, FREE or lapsed (`exists`: the probe saw
-- a row). No row returned: the attempt lost a race and wrote nothing.
--
-- A new key is inserted (nothing when another session inserted it first), and its expiry
-- is then dated by the clock read after the insert: an insert waits for another
-- transaction inserting the same key, and must not be dated before that wait.
--
-- An existing row is locked first, then the clock is read and the grant decided and dated:
-- the grant takes effect while the row lock is held. When no other transaction holds the
-- row and it is acquirable, the lock is taken at once (SKIP LOCKED; PostgreSQL judges the
-- condition again on the row it locks). Otherwise, unless the key was taken since the
-- probe, the attempt waits for the lock in a subtransaction and rolls it back when the key
-- was taken meanwhile: an attempt that lost keeps no lock.
CREATE OR REPLACE FUNCTION lease_internal._take(p_key text, p_owner text, p_ttl interval, p_exists boolean)
RETURNS TABLE (epoch bigint, expires_at timestamptz)
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    v_owner   text;
    v_expires timestamptz;
    v_now     timestamptz;
BEGIN
    PERFORM lease_internal._no_prepare();
    IF NOT p_exists THEN
        INSERT INTO lease_internal.leases AS l (key, owner, epoch, expires_at)
        VALUES (p_key, p_owner, 1, (clock_timestamp() AT TIME ZONE 'UTC' + p_ttl) AT TIME ZONE 'UTC')
        ON CONFLICT (key) DO NOTHING;
        IF NOT FOUND THEN
            RETURN;
        END IF;
        v_now := clock_timestamp();
        RETURN QUERY
        UPDATE lease_internal.leases AS l
           SET expires_at = (v_now AT TIME ZONE 'UTC' + p_ttl) AT TIME ZONE 'UTC'
         WHERE l.key = p_key COLLATE "C"
        RETURNING l.epoch, l.expires_at;
        RETURN;
    END IF;
    SELECT l.owner, l.expires_at INTO v_owner, v_expires
      FROM lease_internal.leases AS l
     WHERE l.key = p_key COLLATE "C"
       AND (l.owner IS NULL OR l.expires_at <= clock_timestamp())
       FOR NO KEY UPDATE SKIP LOCKED;
    IF NOT FOUND THEN
        -- Not locked at once: the key was taken since the probe (lost; nothing is locked),
        -- or another transaction holds its row.
        SELECT l.owner, l.expires_at INTO v_owner, v_expires
          FROM lease_internal.leases AS l
         WHERE l.key = p_key COLLATE "C";
        IF v_owner IS NOT NULL AND v_expires > clock_timestamp() THEN
            RETURN;
        END IF;
        BEGIN
            SELECT l.owner, l.expires_at INTO v_owner, v_expires
              FROM lease_internal.leases AS l
             WHERE l.key = p_key COLLATE "C"
               FOR NO KEY UPDATE;
            IF v_owner IS NOT NULL AND v_expires > clock_timestamp() THEN
                -- Taken meanwhile: roll back to drop the row lock.
                RAISE EXCEPTION USING ERRCODE = 'LE002';
            END IF;
        EXCEPTION WHEN SQLSTATE 'LE002' THEN
            RETURN;
        END;
    END IF;
    -- The row is locked and was acquirable under the lock: read the clock, grant.
    v_now := clock_timestamp();
    IF v_owner IS NULL OR v_expires <= v_now THEN
        RETURN QUERY
        UPDATE lease_internal.leases AS l
           SET owner = p_owner,
               epoch = l.epoch + 1,
               expires_at = (v_now AT TIME ZONE 'UTC' + p_ttl) AT TIME ZONE 'UTC'
         WHERE l.key = p_key COLLATE "C"
        RETURNING l.epoch, l.expires_at;
    END IF;
END
$$;
REVOKE ALL ON FUNCTION lease_internal._take(text, text, interval, boolean) FROM PUBLIC;

-- acquire: take the key if it is never-leased, FREE or lapsed; same-owner acquire of a
-- live lease is an idempotent success (same epoch, same expiry). wait = 0 returns at once
-- (denied: acquired = false, NULLs); wait > 0 polls every 50 ms and raises 57014 when the
-- wait is exhausted.
--
-- The key is probed with a plain SELECT (no lock, no write), and the clock is read after
-- that snapshot: denied and idempotent calls write nothing. When the probe finds the key
-- acquirable, lease_internal._take re-checks and writes under the row lock. A blocking
-- acquire runs each attempt in a subtransaction and rolls a lost one back, which drops any
-- row lock a lost race can leave behind: no row lock is held across a sleep, so a waiter
-- never stalls the holder's renew.
CREATE OR REPLACE FUNCTION lease.acquire(key text, owner text, ttl interval, wait interval DEFAULT interval '0')
RETURNS TABLE (acquired boolean, epoch bigint, expires_at timestamptz)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    v_deadline timestamptz;
    v_now      timestamptz;
    v_found    boolean;
    v_owner    text;
    v_epoch    bigint;
    v_expires  timestamptz;
BEGIN
    IF lease_internal._text_bad(acquire.key) OR lease_internal._text_bad(acquire.owner)
       OR lease_internal._interval_bad(acquire.ttl, false) OR lease_internal._interval_bad(acquire.wait, true) THEN
        PERFORM lease_internal._raise_invalid('lease.acquire', ARRAY[
            lease_internal._text_problem('key', acquire.key),
            lease_internal._text_problem('owner', acquire.owner),
            lease_internal._interval_problem('ttl', acquire.ttl, false),
            lease_internal._interval_problem('wait', acquire.wait, true)]);
    END IF;
    IF current_setting('transaction_isolation') NOT IN ('read committed', 'read uncommitted') THEN
        PERFORM lease_internal._refuse_isolation('lease.acquire');
    END IF;

    v_deadline := (clock_timestamp() AT TIME ZONE 'UTC' + acquire.wait) AT TIME ZONE 'UTC';
    LOOP
        SELECT l.owner, l.epoch, l.expires_at INTO v_owner, v_epoch, v_expires
          FROM lease_internal.leases AS l
         WHERE l.key = acquire.key COLLATE "C";
        v_found := FOUND;
        v_now := clock_timestamp();

        IF v_found AND v_owner IS NOT NULL AND v_expires > v_now THEN
            IF v_owner = acquire.owner COLLATE "C" THEN
                acquired := true;
                epoch := v_epoch;
                expires_at := v_expires;
                RETURN NEXT;
                RETURN;
            END IF;
            -- Held by another owner and live.
            IF acquire.wait = interval '0' THEN
                acquired := false;
                epoch := NULL;
                expires_at := NULL;
                RETURN NEXT;
                RETURN;
            END IF;
            IF v_now >= v_deadline THEN
                RAISE EXCEPTION 'lease.acquire: wait of % exhausted: the key is still held by another owner', acquire.wait
                    USING ERRCODE = 'query_canceled',
                          DETAIL = format('The current lease expires at %s (server time).', v_expires),
                          HINT = 'This is a lease wait timeout, not a statement cancel. Retry later or pass a longer wait.';
            END IF;
            -- Sleep at most 50 ms, and not past the deadline or the holder's expiry.
            PERFORM pg_sleep(GREATEST(0.0, LEAST(0.05,
                extract(epoch FROM v_deadline - v_now),
                extract(epoch FROM v_expires - v_now))));
            CONTINUE;
        END IF;

        -- Never-leased, FREE or lapsed when probed: try to take it.
        IF acquire.wait = interval '0' THEN
            SELECT t.epoch, t.expires_at INTO v_epoch, v_expires
              FROM lease_internal._take(acquire.key, acquire.owner, acquire.ttl, v_found) AS t;
        ELSE
            BEGIN
                SELECT t.epoch, t.expires_at INTO v_epoch, v_expires
                  FROM lease_internal._take(acquire.key, acquire.owner, acquire.ttl, v_found) AS t;
                IF NOT FOUND THEN
                    -- Lost the race: roll back to drop the row lock before sleeping.
                    RAISE EXCEPTION USING ERRCODE = 'LE001';
                END IF;
            EXCEPTION WHEN SQLSTATE 'LE001' THEN
                v_epoch := NULL;
            END;
        END IF;
        IF v_epoch IS NOT NULL THEN
            acquired := true;
            epoch := v_epoch;
            expires_at := v_expires;
            RETURN NEXT;
            RETURN;
        END IF;
        -- Lost a race: probe again.
    END LOOP;
END
$$;

-- Why a renew or release of (key, owner, epoch) fails, read afresh (plain SELECT, no
-- lock; the clock read after its snapshot), by the precedence not_owner > lapsed >
-- epoch_mismatch. NULL: the key is now in a state the call would succeed on (it changed
-- after the failed attempt), so try again.
CREATE OR REPLACE FUNCTION lease_internal._failure_status(p_key text, p_owner text, p_epoch bigint)
RETURNS text
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_owner   text;
    v_epoch   bigint;
    v_expires timestamptz;
BEGIN
    SELECT l.owner, l.epoch, l.expires_at INTO v_owner, v_epoch, v_expires
      FROM lease_internal.leases AS l
     WHERE l.key = p_key COLLATE "C";
    RETURN CASE
        WHEN NOT FOUND OR v_owner IS NULL OR v_owner <> p_owner COLLATE "C" THEN 'not_owner'
        WHEN v_expires <= clock_timestamp() THEN 'lapsed'
        WHEN v_epoch <> p_epoch THEN 'epoch_mismatch'
    END;
END
$$;
REVOKE ALL ON FUNCTION lease_internal._failure_status(text, text, bigint) FROM PUBLIC;

-- Locks the key's row and reads the clock: that instant when `owner` still holds a live
-- lease with `epoch` there, else NULL. When no other transaction holds the row, the lock is
-- taken at once (SKIP LOCKED). Otherwise the call waits for it in a subtransaction, rolled
-- back when the row changed meanwhile, so a call that lost keeps no lock.
CREATE OR REPLACE FUNCTION lease_internal._lock_live(p_key text, p_owner text, p_epoch bigint)
RETURNS timestamptz
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_owner   text;
    v_epoch   bigint;
    v_expires timestamptz;
    v_now     timestamptz;
BEGIN
    PERFORM lease_internal._no_prepare();
    SELECT l.expires_at INTO v_expires
      FROM lease_internal.leases AS l
     WHERE l.key = p_key COLLATE "C"
       AND l.owner = p_owner COLLATE "C" AND l.epoch = p_epoch AND l.expires_at > clock_timestamp()
       FOR NO KEY UPDATE SKIP LOCKED;
    IF FOUND THEN
        v_now := clock_timestamp();
        IF v_expires > v_now THEN
            RETURN v_now;
        END IF;
        -- It lapsed between the two clock reads: the caller's own lease, locked until its
        -- transaction ends (as after any write of it).
        RETURN NULL;
    END IF;
    -- Not locked at once: the lease changed since the caller's read (nothing is locked), or
    -- another transaction holds the row (wait for it).
    IF lease_internal._failure_status(p_key, p_owner, p_epoch) IS NOT NULL THEN
        RETURN NULL;
    END IF;
    BEGIN
        SELECT l.owner, l.epoch, l.expires_at INTO v_owner, v_epoch, v_expires
          FROM lease_internal.leases AS l
         WHERE l.key = p_key COLLATE "C"
           FOR NO KEY UPDATE;
        v_now := clock_timestamp();
        IF v_owner = p_owner COLLATE "C" AND v_epoch = p_epoch AND v_expires > v_now THEN
            RETURN v_now;
        END IF;
        -- Changed meanwhile: roll back to drop the row lock.
        RAISE EXCEPTION USING ERRCODE = 'LE003';
    EXCEPTION WHEN SQLSTATE 'LE003' THEN
        RETURN NULL;
    END;
END
$$;
REVOKE ALL ON FUNCTION lease_internal._lock_live(text, text, bigint) FROM PUBLIC;

-- renew: heartbeat. Extends expiry to server time + ttl, never changes the epoch.
-- Precedence of failures: not_owner, then lapsed, then epoch_mismatch. A call that fails
-- says so from a lock-free read; one that would succeed locks the row, reads the clock and
-- decides again under the lock before writing.
CREATE OR REPLACE FUNCTION lease.renew(key text, owner text, epoch bigint, ttl interval)
RETURNS TABLE (status text, expires_at timestamptz)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    v_now     timestamptz;
    v_expires timestamptz;
BEGIN
    IF lease_internal._text_bad(renew.key) OR lease_internal._text_bad(renew.owner) OR renew.epoch IS NULL
       OR lease_internal._interval_bad(renew.ttl, false) THEN
        PERFORM lease_internal._raise_invalid('lease.renew', ARRAY[
            lease_internal._text_problem('key', renew.key),
            lease_internal._text_problem('owner', renew.owner),
            CASE WHEN renew.epoch IS NULL THEN 'epoch must not be NULL' END,
            lease_internal._interval_problem('ttl', renew.ttl, false)]);
    END IF;
    IF current_setting('transaction_isolation') NOT IN ('read committed', 'read uncommitted') THEN
        PERFORM lease_internal._refuse_isolation('lease.renew');
    END IF;

    LOOP
        status := lease_internal._failure_status(renew.key, renew.owner, renew.epoch);
        IF status IS NOT NULL THEN
            expires_at := NULL;
            RETURN NEXT;
            RETURN;
        END IF;
        v_now := lease_internal._lock_live(renew.key, renew.owner, renew.epoch);
        IF v_now IS NOT NULL THEN
            UPDATE lease_internal.leases AS l
               SET expires_at = (v_now AT TIME ZONE 'UTC' + renew.ttl) AT TIME ZONE 'UTC'
             WHERE l.key = renew.key COLLATE "C"
            RETURNING l.expires_at INTO v_expires;
            status := 'ok';
            expires_at := v_expires;
            RETURN NEXT;
            RETURN;
        END IF;
        -- It changed while we waited for the lock: the next read says how.
    END LOOP;
END
$$;

-- release: frees a held lease and increments the epoch. Same statuses and precedence as
-- renew, decided the same way (a lock-free read for a failure, under the row lock for a
-- success).
CREATE OR REPLACE FUNCTION lease.release(key text, owner text, epoch bigint)
RETURNS TABLE (status text)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
BEGIN
    IF lease_internal._text_bad(release.key) OR lease_internal._text_bad(release.owner) OR release.epoch IS NULL THEN
        PERFORM lease_internal._raise_invalid('lease.release', ARRAY[
            lease_internal._text_problem('key', release.key),
            lease_internal._text_problem('owner', release.owner),
            CASE WHEN release.epoch IS NULL THEN 'epoch must not be NULL' END]);
    END IF;
    IF current_setting('transaction_isolation') NOT IN ('read committed', 'read uncommitted') THEN
        PERFORM lease_internal._refuse_isolation('lease.release');
    END IF;

    LOOP
        status := lease_internal._failure_status(release.key, release.owner, release.epoch);
        IF status IS NOT NULL THEN
            RETURN NEXT;
            RETURN;
        END IF;
        IF lease_internal._lock_live(release.key, release.owner, release.epoch) IS NOT NULL THEN
            UPDATE lease_internal.leases AS l
               SET owner = NULL,
                   expires_at = NULL,
                   epoch = l.epoch + 1
             WHERE l.key = release.key COLLATE "C";
            status := 'ok';
            RETURN NEXT;
            RETURN;
        END IF;
    END LOOP;
END
$$;

-- inspect: observable state under lazy expiry. Zero rows: never leased. held = false:
-- owner and expires_at are NULL and epoch is the fencing watermark (every epoch <= it is
-- stale; the next grant is greater). One statement: the clock is read after its snapshot.
CREATE OR REPLACE FUNCTION lease.inspect(key text)
RETURNS TABLE (held boolean, owner text, epoch bigint, expires_at timestamptz)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
BEGIN
    IF lease_internal._text_bad(inspect.key) THEN
        PERFORM lease_internal._raise_invalid('lease.inspect', ARRAY[lease_internal._text_problem('key', inspect.key)]);
    END IF;
    IF current_setting('transaction_isolation') NOT IN ('read committed', 'read uncommitted') THEN
        PERFORM lease_internal._refuse_isolation('lease.inspect');
    END IF;
    RETURN QUERY
        SELECT live, CASE WHEN live THEN l.owner END, l.epoch, CASE WHEN live THEN l.expires_at END
          FROM lease_internal.leases AS l,
               LATERAL (SELECT l.owner IS NOT NULL AND l.expires_at > clock_timestamp() AS live) AS s
         WHERE l.key = inspect.key COLLATE "C";
END
$$;
