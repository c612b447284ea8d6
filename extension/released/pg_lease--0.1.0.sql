-- pg_lease 0.1.0: time-bounded leases on named keys with monotonic fencing epochs.
-- Pure SQL and PL/pgSQL. Behaviour contract: specs/SEMANTICS.md of the repository.

\echo Use "CREATE EXTENSION pg_lease" to load this file. \quit

CREATE SCHEMA lease;
GRANT USAGE ON SCHEMA lease TO PUBLIC;

-- One row per key ever leased. FREE: owner and expires_at are NULL.
-- HELD: owner and expires_at are set; the lease is lapsed once
-- expires_at <= clock_timestamp() (lazy expiry, there is no reaper).
-- The epoch only ever grows: +1 per grant, +1 per release.
CREATE TABLE lease.leases (
    key        text        PRIMARY KEY,
    owner      text,
    epoch      bigint      NOT NULL CHECK (epoch >= 1),
    expires_at timestamptz,
    CONSTRAINT leases_held_shape CHECK ((owner IS NULL) = (expires_at IS NULL))
);
REVOKE ALL ON lease.leases FROM PUBLIC;
-- Lease state (fencing epochs above all) is user data: pg_dump keeps it.
SELECT pg_catalog.pg_extension_config_dump('lease.leases', '');

-- Input limits. Keys are btree-indexed; 1024 bytes stays far below the btree
-- row limit (2704 bytes), so an oversized key is our 22023, never 54000.
-- Intervals are capped so that clock_timestamp() + interval can never leave
-- the timestamptz range (22008).

-- The two checks below are plain SQL without a SET clause so the planner
-- inlines them into the callers, whose search_path is pinned; PUBLIC cannot
-- execute them directly.

-- NULL when the text argument is acceptable, else a sentence naming the violation.
CREATE FUNCTION lease._text_problem(name text, value text)
RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT CASE
        WHEN value IS NULL THEN name || ' must not be NULL'
        WHEN value = '' THEN name || ' must not be empty'
        WHEN octet_length(value) > 1024 THEN
            format('%s must be at most 1024 bytes (got %s bytes)', name, octet_length(value))
    END
$$;

-- NULL when the interval argument is acceptable, else a sentence naming the violation.
-- An interval is accepted when none of its fields is negative (so adding it
-- never moves a timestamp backwards, whatever the month length), it is
-- positive (or zero when allow_zero) and it is at most 100 years.
CREATE FUNCTION lease._interval_problem(name text, value interval, allow_zero boolean)
RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT CASE
        WHEN value IS NULL THEN name || ' must not be NULL'
        WHEN extract(year FROM value) < 0 OR extract(month FROM value) < 0
             OR extract(day FROM value) < 0 OR extract(hour FROM value) < 0
             OR extract(minute FROM value) < 0 OR extract(second FROM value) < 0 THEN
            format('%s must not have a negative field (got %s)', name, value)
        WHEN NOT allow_zero AND value = interval '0' THEN
            format('%s must be positive (got %s)', name, value)
        WHEN value > interval '100 years' THEN
            format('%s must be at most 100 years (got %s)', name, value)
    END
$$;

-- Raises invalid_parameter_value (22023); DETAIL lists every violated constraint.
CREATE FUNCTION lease._raise_invalid(op text, problems text[])
RETURNS void
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RAISE EXCEPTION '%: invalid input', op
        USING ERRCODE = 'invalid_parameter_value',
              DETAIL = array_to_string(problems, '; ') || '.',
              HINT = 'No lease state was changed. See specs/SEMANTICS.md for the input limits.';
END
$$;

REVOKE ALL ON FUNCTION lease._text_problem(text, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION lease._interval_problem(text, interval, boolean) FROM PUBLIC;
REVOKE ALL ON FUNCTION lease._raise_invalid(text, text[]) FROM PUBLIC;

-- acquire: take the key if it is never-leased, FREE or lapsed; same-owner
-- acquire of a live lease is an idempotent success (same epoch, same expiry).
-- wait = 0 returns at once (denied: acquired = false, NULLs); wait > 0 polls
-- every 50 ms and raises 57014 when the wait is exhausted.
--
-- Locking discipline: the key is probed with a plain SELECT (no lock, no
-- write), so denied and idempotent calls write nothing. Only when the probe
-- finds the key acquirable does it write, inside a subtransaction; if the
-- write loses a race (its re-check fails) the subtransaction is rolled back,
-- which releases the row lock the failed attempt took. No row lock is ever
-- held across a sleep, so a waiter never stalls the holder's renew.
CREATE FUNCTION lease.acquire(key text, owner text, ttl interval, wait interval DEFAULT interval '0')
RETURNS TABLE (acquired boolean, epoch bigint, expires_at timestamptz)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    v_problems text[];
    v_deadline timestamptz;
    v_now      timestamptz;
    v_owner    text;
    v_epoch    bigint;
    v_expires  timestamptz;
BEGIN
    v_problems := array_remove(ARRAY[
        lease._text_problem('key', acquire.key),
        lease._text_problem('owner', acquire.owner),
        lease._interval_problem('ttl', acquire.ttl, false),
        lease._interval_problem('wait', acquire.wait, true)], NULL);
    IF cardinality(v_problems) > 0 THEN
        PERFORM lease._raise_invalid('lease.acquire', v_problems);
    END IF;

    v_deadline := clock_timestamp() + acquire.wait;
    LOOP
        v_now := clock_timestamp();
        SELECT l.owner, l.epoch, l.expires_at INTO v_owner, v_epoch, v_expires
          FROM lease.leases AS l
         WHERE l.key = acquire.key;

        IF FOUND AND v_owner IS NOT NULL AND v_expires > v_now THEN
            IF v_owner = acquire.owner THEN
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
        ELSE
            -- Never-leased, FREE or lapsed at v_now: try to take it.
            BEGIN
                INSERT INTO lease.leases AS l (key, owner, epoch, expires_at)
                VALUES (acquire.key, acquire.owner, 1, v_now + acquire.ttl)
                ON CONFLICT (key) DO UPDATE
                   SET owner = EXCLUDED.owner,
                       epoch = l.epoch + 1,
                       expires_at = EXCLUDED.expires_at
                 WHERE l.owner IS NULL OR l.expires_at <= v_now
                RETURNING l.epoch, l.expires_at INTO v_epoch, v_expires;
                IF NOT FOUND THEN
                    -- Lost a race: roll back the subtransaction to drop the row lock.
                    RAISE EXCEPTION USING ERRCODE = 'LE001';
                END IF;
                acquired := true;
                epoch := v_epoch;
                expires_at := v_expires;
                RETURN NEXT;
                RETURN;
            EXCEPTION WHEN SQLSTATE 'LE001' THEN
                NULL; -- probe again: the winner decides what we return
            END;
        END IF;
    END LOOP;
END
$$;

-- Why a renew or release of (key, owner, epoch) fails, read afresh (plain
-- SELECT, no lock) at the current server time, by the precedence
-- not_owner > lapsed > epoch_mismatch. NULL: the key is now in a state the
-- call would succeed on (it changed after the failed attempt), so try again.
CREATE FUNCTION lease._failure_status(p_key text, p_owner text, p_epoch bigint)
RETURNS text
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_now     timestamptz := clock_timestamp();
    v_owner   text;
    v_epoch   bigint;
    v_expires timestamptz;
BEGIN
    SELECT l.owner, l.epoch, l.expires_at INTO v_owner, v_epoch, v_expires
      FROM lease.leases AS l
     WHERE l.key = p_key;
    RETURN CASE
        WHEN NOT FOUND OR v_owner IS NULL OR v_owner <> p_owner THEN 'not_owner'
        WHEN v_expires <= v_now THEN 'lapsed'
        WHEN v_epoch <> p_epoch THEN 'epoch_mismatch'
    END;
END
$$;
REVOKE ALL ON FUNCTION lease._failure_status(text, text, bigint) FROM PUBLIC;

-- renew: heartbeat. Extends expiry to server time + ttl, never changes the epoch.
-- Precedence of failures: not_owner, then lapsed, then epoch_mismatch.
CREATE FUNCTION lease.renew(key text, owner text, epoch bigint, ttl interval)
RETURNS TABLE (status text, expires_at timestamptz)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    v_problems text[];
    v_now      timestamptz;
    v_expires  timestamptz;
BEGIN
    v_problems := array_remove(ARRAY[
        lease._text_problem('key', renew.key),
        lease._text_problem('owner', renew.owner),
        CASE WHEN renew.epoch IS NULL THEN 'epoch must not be NULL' END,
        lease._interval_problem('ttl', renew.ttl, false)], NULL);
    IF cardinality(v_problems) > 0 THEN
        PERFORM lease._raise_invalid('lease.renew', v_problems);
    END IF;

    LOOP
        v_now := clock_timestamp();
        BEGIN
            UPDATE lease.leases AS l
               SET expires_at = v_now + renew.ttl
             WHERE l.key = renew.key
               AND l.owner = renew.owner
               AND l.epoch = renew.epoch
               AND l.expires_at > v_now
            RETURNING l.expires_at INTO v_expires;
            IF NOT FOUND THEN
                -- Roll back the subtransaction: a failed re-check must not keep a row lock.
                RAISE EXCEPTION USING ERRCODE = 'LE001';
            END IF;
            status := 'ok';
            expires_at := v_expires;
            RETURN NEXT;
            RETURN;
        EXCEPTION WHEN SQLSTATE 'LE001' THEN
            NULL;
        END;

        status := lease._failure_status(renew.key, renew.owner, renew.epoch);
        IF status IS NOT NULL THEN
            expires_at := NULL;
            RETURN NEXT;
            RETURN;
        END IF;
    END LOOP;
END
$$;

-- release: frees a held lease and increments the epoch.
-- Same statuses and precedence as renew.
CREATE FUNCTION lease.release(key text, owner text, epoch bigint)
RETURNS TABLE (status text)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    v_problems text[];
    v_now      timestamptz;
BEGIN
    v_problems := array_remove(ARRAY[
        lease._text_problem('key', release.key),
        lease._text_problem('owner', release.owner),
        CASE WHEN release.epoch IS NULL THEN 'epoch must not be NULL' END], NULL);
    IF cardinality(v_problems) > 0 THEN
        PERFORM lease._raise_invalid('lease.release', v_problems);
    END IF;

    LOOP
        v_now := clock_timestamp();
        BEGIN
            UPDATE lease.leases AS l
               SET owner = NULL,
                   expires_at = NULL,
                   epoch = l.epoch + 1
             WHERE l.key = release.key
               AND l.owner = release.owner
               AND l.epoch = release.epoch
               AND l.expires_at > v_now;
            IF NOT FOUND THEN
                RAISE EXCEPTION USING ERRCODE = 'LE001';
            END IF;
            status := 'ok';
            RETURN NEXT;
            RETURN;
        EXCEPTION WHEN SQLSTATE 'LE001' THEN
            NULL;
        END;

        status := lease._failure_status(release.key, release.owner, release.epoch);
        IF status IS NOT NULL THEN
            RETURN NEXT;
            RETURN;
        END IF;
    END LOOP;
END
$$;

-- inspect: observable state under lazy expiry. Zero rows: never leased.
-- held = false: owner and expires_at are NULL and epoch is the fencing
-- watermark (every epoch <= it is stale; the next grant is greater).
CREATE FUNCTION lease.inspect(key text)
RETURNS TABLE (held boolean, owner text, epoch bigint, expires_at timestamptz)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    v_problem text;
    v_now     timestamptz;
BEGIN
    v_problem := lease._text_problem('key', inspect.key);
    IF v_problem IS NOT NULL THEN
        PERFORM lease._raise_invalid('lease.inspect', ARRAY[v_problem]);
    END IF;
    v_now := clock_timestamp();
    RETURN QUERY
        SELECT live, CASE WHEN live THEN l.owner END, l.epoch, CASE WHEN live THEN l.expires_at END
          FROM lease.leases AS l,
               LATERAL (SELECT l.owner IS NOT NULL AND l.expires_at > v_now AS live) AS s
         WHERE l.key = inspect.key;
END
$$;

COMMENT ON SCHEMA lease IS 'pg_lease: time-bounded leases with fencing epochs';
COMMENT ON FUNCTION lease.acquire(text, text, interval, interval) IS
    'Acquire a lease: (acquired, epoch, expires_at). wait > 0 polls and raises 57014 when exhausted.';
COMMENT ON FUNCTION lease.renew(text, text, bigint, interval) IS
    'Heartbeat: status ok | not_owner | lapsed | epoch_mismatch, and the new expiry.';
COMMENT ON FUNCTION lease.release(text, text, bigint) IS
    'Release a held lease (the epoch advances): ok | not_owner | lapsed | epoch_mismatch.';
COMMENT ON FUNCTION lease.inspect(text) IS
    'Observe a key: zero rows if never leased; held = false rows carry the fencing watermark.';
