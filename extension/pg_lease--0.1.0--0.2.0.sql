-- pg_lease 0.1.0 -> 0.2.0. There is no separate 0.2.0 script: CREATE EXTENSION pg_lease
-- (default version 0.2.0) runs pg_lease--0.1.0.sql and then this update, so every
-- definition of 0.2.0 lives here once and every install goes through the upgrade path.
-- Behaviour contract: specs/SEMANTICS.md of the repository; version policy: README.
--
-- What 0.2.0 guarantees beyond 0.1.0, whatever the caller's session settings:
-- * keys and owners compare byte-wise (COLLATE "C"), never by the caller's collation;
-- * every transaction that writes lease state commits synchronously (a deferred
--   constraint trigger sets synchronous_commit = on for it), so a crash never loses an
--   acknowledged grant, renew or release;
-- * every write reads the clock while it holds the key's row lock (it locks the row, then
--   reads the clock, then decides and writes), and every read reads it after taking its
--   snapshot;
-- * calls refuse to run outside READ COMMITTED (SQLSTATE 55000) instead of answering from
--   a stale snapshot;
-- * ttl and wait arithmetic is done in UTC (a day is 24 hours, a month a calendar month),
--   whatever the caller's TimeZone;
-- * no subtransaction and no write on denied, idempotent or inspect calls; one write and
--   no subtransaction on a grant, renew or release.

\echo Use "ALTER EXTENSION pg_lease UPDATE TO '0.2.0'" to load this file. \quit

-- Keys and owners compare byte-wise, whatever collation a caller's expression carries
-- (the primary key index is rebuilt in "C").
ALTER TABLE lease.leases
    ALTER COLUMN key TYPE text COLLATE "C",
    ALTER COLUMN owner TYPE text COLLATE "C";
-- Lease state (fencing epochs above all) is user data: pg_dump keeps it. The role that
-- installed the extension may read it, so that it can dump its own database; only a
-- superuser can load it back (a restore by anyone else fails loudly instead of silently
-- restarting every epoch at 1).
GRANT SELECT ON lease.leases TO @extowner@;

-- Durability that no caller setting can take away: at the commit of any transaction that
-- wrote a lease row, a synchronous_commit of off is raised to local (the commit record is
-- flushed before the commit returns); stronger settings (on, remote_write, remote_apply)
-- are left as they are.
CREATE FUNCTION lease._commit_durably()
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
    AFTER INSERT OR UPDATE ON lease.leases
    DEFERRABLE INITIALLY DEFERRED
    FOR EACH ROW EXECUTE FUNCTION lease._commit_durably();
REVOKE ALL ON FUNCTION lease._commit_durably() FROM PUBLIC;

-- Input limits. Keys are btree-indexed; 1024 bytes stays far below the btree row limit
-- (2704 bytes), so an oversized key is our 22023, never 54000. Intervals are capped so
-- that clock_timestamp() + interval can never leave the timestamptz range (22008).

-- True when an interval argument is unacceptable: NULL, a negative field (so adding it
-- never moves a timestamp backwards, whatever the month length), not positive (unless
-- zero is allowed), or over 100 years. The fields' signs are read from the interval's
-- binary form (int64 microseconds, int32 days, int32 months, big-endian), which never
-- fails: date_part() raises 22008 on PostgreSQL 14 for a time part over 2^31 hours.
-- Immutable and plain SQL, so the planner inlines it.
CREATE FUNCTION lease._interval_bad(value interval, allow_zero boolean)
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
CREATE FUNCTION lease._interval_text(value interval)
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
CREATE FUNCTION lease._text_bad(value text)
RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT value IS NULL OR pg_catalog.octet_length(value) NOT BETWEEN 1 AND 1024
$$;

-- The sentence naming what is wrong with a text argument (NULL when nothing is).
CREATE OR REPLACE FUNCTION lease._text_problem(name text, value text)
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
CREATE OR REPLACE FUNCTION lease._interval_problem(name text, value interval, allow_zero boolean)
RETURNS text
LANGUAGE sql STABLE PARALLEL SAFE
AS $$
    SELECT CASE
        WHEN value IS NULL THEN name || ' must not be NULL'
        WHEN pg_catalog.get_byte(pg_catalog.interval_send(value), 0) >= 128
             OR pg_catalog.get_byte(pg_catalog.interval_send(value), 8) >= 128
             OR pg_catalog.get_byte(pg_catalog.interval_send(value), 12) >= 128 THEN
            pg_catalog.format('%s must not have a negative field (got %s)', name,
                              lease._interval_text(value))
        WHEN NOT allow_zero AND value = interval '0' THEN
            pg_catalog.format('%s must be positive (got %s)', name, lease._interval_text(value))
        WHEN value > interval '100 years' THEN
            pg_catalog.format('%s must be at most 100 years (got %s)', name,
                              lease._interval_text(value))
    END
$$;

-- Raises invalid_parameter_value (22023); DETAIL lists every violated constraint.
CREATE OR REPLACE FUNCTION lease._raise_invalid(op text, problems text[])
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
CREATE FUNCTION lease._refuse_isolation(op text)
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

REVOKE ALL ON FUNCTION lease._interval_bad(interval, boolean) FROM PUBLIC;
REVOKE ALL ON FUNCTION lease._text_bad(text) FROM PUBLIC;
REVOKE ALL ON FUNCTION lease._text_problem(text, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION lease._interval_problem(text, interval, boolean) FROM PUBLIC;
REVOKE ALL ON FUNCTION lease._interval_text(interval) FROM PUBLIC;
REVOKE ALL ON FUNCTION lease._raise_invalid(text, text[]) FROM PUBLIC;
REVOKE ALL ON FUNCTION lease._refuse_isolation(text) FROM PUBLIC;

-- Takes `key` for `owner` if it is never-leased, FREE or lapsed (`exists`: the probe saw
-- a row). An existing row is locked first (waiting for any other writer), then the clock
-- is read and the grant decided and dated: the grant takes effect while the row lock is
-- held. No row returned: the attempt lost a race and wrote nothing; having locked the row,
-- it holds the lock until its transaction or subtransaction ends. A new key is inserted,
-- or nothing when another session inserted it first.
CREATE FUNCTION lease._take(p_key text, p_owner text, p_ttl interval, p_exists boolean)
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
    IF NOT p_exists THEN
        RETURN QUERY
        INSERT INTO lease.leases AS l (key, owner, epoch, expires_at)
        VALUES (p_key, p_owner, 1, (clock_timestamp() AT TIME ZONE 'UTC' + p_ttl) AT TIME ZONE 'UTC')
        ON CONFLICT (key) DO NOTHING
        RETURNING l.epoch, l.expires_at;
        RETURN;
    END IF;
    SELECT l.owner, l.expires_at INTO v_owner, v_expires
      FROM lease.leases AS l
     WHERE l.key = p_key COLLATE "C"
       FOR NO KEY UPDATE;
    v_now := clock_timestamp();
    IF v_owner IS NULL OR v_expires <= v_now THEN
        RETURN QUERY
        UPDATE lease.leases AS l
           SET owner = p_owner,
               epoch = l.epoch + 1,
               expires_at = (v_now AT TIME ZONE 'UTC' + p_ttl) AT TIME ZONE 'UTC'
         WHERE l.key = p_key COLLATE "C"
        RETURNING l.epoch, l.expires_at;
    END IF;
END
$$;
REVOKE ALL ON FUNCTION lease._take(text, text, interval, boolean) FROM PUBLIC;

-- acquire: take the key if it is never-leased, FREE or lapsed; same-owner acquire of a
-- live lease is an idempotent success (same epoch, same expiry). wait = 0 returns at once
-- (denied: acquired = false, NULLs); wait > 0 polls every 50 ms and raises 57014 when the
-- wait is exhausted.
--
-- The key is probed with a plain SELECT (no lock, no write), and the clock is read after
-- that snapshot: denied and idempotent calls write nothing. When the probe finds the key
-- acquirable, lease._take re-checks and writes under the row lock. A blocking acquire runs
-- each attempt in a subtransaction and rolls a lost one back, which drops the row lock a
-- lost race can leave behind: no row lock is held across a sleep, so a waiter never stalls
-- the holder's renew. A non-blocking acquire needs no subtransaction (one write, one XID):
-- a lock a lost race leaves lasts until the caller's transaction ends.
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
    IF current_setting('transaction_isolation') <> 'read committed' THEN
        PERFORM lease._refuse_isolation('lease.acquire');
    END IF;
    IF lease._text_bad(acquire.key) OR lease._text_bad(acquire.owner)
       OR lease._interval_bad(acquire.ttl, false) OR lease._interval_bad(acquire.wait, true) THEN
        PERFORM lease._raise_invalid('lease.acquire', ARRAY[
            lease._text_problem('key', acquire.key),
            lease._text_problem('owner', acquire.owner),
            lease._interval_problem('ttl', acquire.ttl, false),
            lease._interval_problem('wait', acquire.wait, true)]);
    END IF;

    v_deadline := (clock_timestamp() AT TIME ZONE 'UTC' + acquire.wait) AT TIME ZONE 'UTC';
    LOOP
        SELECT l.owner, l.epoch, l.expires_at INTO v_owner, v_epoch, v_expires
          FROM lease.leases AS l
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
              FROM lease._take(acquire.key, acquire.owner, acquire.ttl, v_found) AS t;
        ELSE
            BEGIN
                SELECT t.epoch, t.expires_at INTO v_epoch, v_expires
                  FROM lease._take(acquire.key, acquire.owner, acquire.ttl, v_found) AS t;
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
CREATE OR REPLACE FUNCTION lease._failure_status(p_key text, p_owner text, p_epoch bigint)
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
      FROM lease.leases AS l
     WHERE l.key = p_key COLLATE "C";
    RETURN CASE
        WHEN NOT FOUND OR v_owner IS NULL OR v_owner <> p_owner COLLATE "C" THEN 'not_owner'
        WHEN v_expires <= clock_timestamp() THEN 'lapsed'
        WHEN v_epoch <> p_epoch THEN 'epoch_mismatch'
    END;
END
$$;
REVOKE ALL ON FUNCTION lease._failure_status(text, text, bigint) FROM PUBLIC;

-- Locks the key's row (waiting for any other writer) and reads the clock: that instant
-- when `owner` still holds a live lease with `epoch` there, else NULL (the row changed
-- while waiting; the lock stays until the caller's transaction ends).
CREATE FUNCTION lease._lock_live(p_key text, p_owner text, p_epoch bigint)
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
    SELECT l.owner, l.epoch, l.expires_at INTO v_owner, v_epoch, v_expires
      FROM lease.leases AS l
     WHERE l.key = p_key COLLATE "C"
       FOR NO KEY UPDATE;
    v_now := clock_timestamp();
    IF v_owner = p_owner COLLATE "C" AND v_epoch = p_epoch AND v_expires > v_now THEN
        RETURN v_now;
    END IF;
    RETURN NULL;
END
$$;
REVOKE ALL ON FUNCTION lease._lock_live(text, text, bigint) FROM PUBLIC;

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
    IF current_setting('transaction_isolation') <> 'read committed' THEN
        PERFORM lease._refuse_isolation('lease.renew');
    END IF;
    IF lease._text_bad(renew.key) OR lease._text_bad(renew.owner) OR renew.epoch IS NULL
       OR lease._interval_bad(renew.ttl, false) THEN
        PERFORM lease._raise_invalid('lease.renew', ARRAY[
            lease._text_problem('key', renew.key),
            lease._text_problem('owner', renew.owner),
            CASE WHEN renew.epoch IS NULL THEN 'epoch must not be NULL' END,
            lease._interval_problem('ttl', renew.ttl, false)]);
    END IF;

    LOOP
        status := lease._failure_status(renew.key, renew.owner, renew.epoch);
        IF status IS NOT NULL THEN
            expires_at := NULL;
            RETURN NEXT;
            RETURN;
        END IF;
        v_now := lease._lock_live(renew.key, renew.owner, renew.epoch);
        IF v_now IS NOT NULL THEN
            UPDATE lease.leases AS l
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
    IF current_setting('transaction_isolation') <> 'read committed' THEN
        PERFORM lease._refuse_isolation('lease.release');
    END IF;
    IF lease._text_bad(release.key) OR lease._text_bad(release.owner) OR release.epoch IS NULL THEN
        PERFORM lease._raise_invalid('lease.release', ARRAY[
            lease._text_problem('key', release.key),
            lease._text_problem('owner', release.owner),
            CASE WHEN release.epoch IS NULL THEN 'epoch must not be NULL' END]);
    END IF;

    LOOP
        status := lease._failure_status(release.key, release.owner, release.epoch);
        IF status IS NOT NULL THEN
            RETURN NEXT;
            RETURN;
        END IF;
        IF lease._lock_live(release.key, release.owner, release.epoch) IS NOT NULL THEN
            UPDATE lease.leases AS l
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
    IF current_setting('transaction_isolation') <> 'read committed' THEN
        PERFORM lease._refuse_isolation('lease.inspect');
    END IF;
    IF lease._text_bad(inspect.key) THEN
        PERFORM lease._raise_invalid('lease.inspect', ARRAY[lease._text_problem('key', inspect.key)]);
    END IF;
    RETURN QUERY
        SELECT live, CASE WHEN live THEN l.owner END, l.epoch, CASE WHEN live THEN l.expires_at END
          FROM lease.leases AS l,
               LATERAL (SELECT l.owner IS NOT NULL AND l.expires_at > clock_timestamp() AS live) AS s
         WHERE l.key = inspect.key COLLATE "C";
END
$$;
