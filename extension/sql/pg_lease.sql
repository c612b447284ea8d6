-- pg_lease regression suite.
--
-- Deterministic on PostgreSQL 14 and 15 alike: no timestamp, pid or xid is
-- ever printed, only booleans derived from them. Lapses use TTLs of a few
-- hundred milliseconds and pg_sleep. CONTEXT lines are suppressed (they name
-- PL/pgSQL line numbers); the default VERBOSITY prints no LOCATION lines.
\set SHOW_CONTEXT never

CREATE EXTENSION pg_lease;

-- Runs a statement and reports how it ended: its SQLSTATE ('00000' when it
-- succeeded), message, DETAIL and HINT, and how long it took. query_canceled
-- must be named: WHEN OTHERS does not catch it.
CREATE FUNCTION pg_temp.err(stmt text,
    OUT state text, OUT msg text, OUT detail text, OUT hint text, OUT elapsed interval)
LANGUAGE plpgsql AS $$
DECLARE
    t0 timestamptz := clock_timestamp();
BEGIN
    EXECUTE stmt;
    state := '00000';
    elapsed := clock_timestamp() - t0;
EXCEPTION WHEN query_canceled OR others THEN
    GET STACKED DIAGNOSTICS state = RETURNED_SQLSTATE, msg = MESSAGE_TEXT,
                            detail = PG_EXCEPTION_DETAIL, hint = PG_EXCEPTION_HINT;
    elapsed := clock_timestamp() - t0;
END
$$;

--------------------------------------------------------------------------
-- README "Quick start" (expires_at is shown as booleans, never printed).
--------------------------------------------------------------------------

-- Acquire (non-blocking by default): epoch 1, expiry = server time + 30s.
SELECT acquired, epoch,
       expires_at > clock_timestamp() AS live,
       expires_at <= clock_timestamp() + interval '30s' AS within_ttl,
       expires_at > clock_timestamp() + interval '25s' AS about_ttl
  FROM lease.acquire('job-42', 'worker-a1', interval '30s');
SELECT extract(epoch FROM expires_at) AS qs_expiry FROM lease.inspect('job-42') \gset

-- Heartbeat: extends the expiry, epoch unchanged.
SELECT status,
       extract(epoch FROM expires_at) > :qs_expiry AS extended,
       expires_at <= clock_timestamp() + interval '30s' AS within_ttl
  FROM lease.renew('job-42', 'worker-a1', 1, interval '30s');
SELECT held, owner, epoch FROM lease.inspect('job-42');

-- Voluntary release (increments the epoch).
SELECT status FROM lease.release('job-42', 'worker-a1', 1);

-- Observe state: a released key is one row, held = false, with the watermark.
SELECT held, owner, epoch, expires_at FROM lease.inspect('job-42');

-- Uninstall destroys all lease state; a re-install starts every key fresh.
DROP EXTENSION pg_lease;
CREATE EXTENSION pg_lease;
SELECT count(*) AS rows_for_job_42 FROM lease.inspect('job-42');

--------------------------------------------------------------------------
-- README "Examples", in order, on one key. Adapted: worker-a1's TTL is 1s
-- instead of 10s/30s so that the takeover in example 2 happens quickly.
--------------------------------------------------------------------------

-- 1. Safe retry loop: a duplicate acquire returns the same epoch and the
--    same expiry (no side effect).
SELECT acquired, epoch FROM lease.acquire('job-42', 'worker-a1', interval '1s');
SELECT extract(epoch FROM expires_at) AS ex1_expiry FROM lease.inspect('job-42') \gset
SELECT acquired, epoch, extract(epoch FROM expires_at) = :ex1_expiry AS same_expiry
  FROM lease.acquire('job-42', 'worker-a1', interval '1s');  -- same epoch

-- 2. Takeover of a dead holder's lease: a1 stops renewing, its TTL lapses,
--    b2 blocks until it can take over and gets a NEW epoch (2).
SELECT acquired, epoch FROM lease.acquire('job-42', 'worker-a1', interval '1s');  -- still a1's: idempotent
SELECT acquired, epoch, expires_at FROM lease.acquire('job-42', 'worker-b2', interval '30s');  -- non-blocking: denied
SELECT acquired, epoch,
       clock_timestamp() > to_timestamp(:ex1_expiry) AS after_old_expiry
  FROM lease.acquire('job-42', 'worker-b2', interval '30s', interval '15s');

-- 3. The old owner is now fenced: its renew fails. The README shows
--    `lapsed` here; since b2 already took the key over, the documented
--    precedence (holder check first) gives `not_owner`. A renew between the
--    lapse and the takeover gives `lapsed` (see "Statuses" below).
SELECT status FROM lease.renew('job-42', 'worker-a1', 1, interval '30s');
SELECT status FROM lease.release('job-42', 'worker-a1', 1);

-- 4. Inspect as a fencing watermark.
SELECT held, owner, epoch FROM lease.inspect('job-42');
SELECT status FROM lease.release('job-42', 'worker-b2', 2);
-- held = f rows expose the counter: epochs <= 3 are stale ...
SELECT held, owner, epoch FROM lease.inspect('job-42');
-- ... and the next grant is strictly greater.
SELECT acquired, epoch FROM lease.acquire('job-42', 'worker-a1', interval '30s');

-- 5. Distinct keys never interact.
SELECT acquired, epoch FROM lease.acquire('job-43', 'worker-a1', interval '30s');  -- independent
SELECT acquired, epoch FROM lease.acquire('job-43', 'worker-b2', interval '30s');
SELECT status FROM lease.release('job-43', 'worker-a1', 1);
SELECT key, i.held, i.owner, i.epoch
  FROM unnest(ARRAY['job-42', 'job-43']) AS key, LATERAL lease.inspect(key) AS i
 ORDER BY key;

--------------------------------------------------------------------------
-- acquire
--------------------------------------------------------------------------

-- A never-leased key: granted at epoch 1 with expiry = server time + ttl.
SELECT acquired, epoch,
       expires_at <= clock_timestamp() + interval '1 hour' AS within_ttl,
       expires_at > clock_timestamp() + interval '59 min' AS about_ttl
  FROM lease.acquire('acq', 'a', interval '1 hour');
SELECT extract(epoch FROM expires_at) AS acq_expiry FROM lease.inspect('acq') \gset

-- Same owner, live lease: idempotent whatever ttl/wait are passed: same
-- epoch, expiry unchanged.
SELECT acquired, epoch, extract(epoch FROM expires_at) = :acq_expiry AS same_expiry
  FROM lease.acquire('acq', 'a', interval '5 min');
SELECT acquired, epoch, extract(epoch FROM expires_at) = :acq_expiry AS same_expiry
  FROM lease.acquire('acq', 'a', interval '2 hours', interval '10s');
SELECT held, epoch, extract(epoch FROM expires_at) = :acq_expiry AS same_expiry
  FROM lease.inspect('acq');

-- Another owner, live lease, non-blocking (default and explicit wait 0):
-- denied, epoch and expires_at NULL, state unchanged.
SELECT * FROM lease.acquire('acq', 'b', interval '1 min');
SELECT * FROM lease.acquire('acq', 'b', interval '1 min', interval '0');
SELECT held, owner, epoch FROM lease.inspect('acq');

-- Owners and keys are compared exactly (case and whitespace matter).
SELECT acquired, epoch FROM lease.acquire('acq', 'A', interval '1 min');
SELECT acquired, epoch FROM lease.acquire('acq ', 'a', interval '1 min');
SELECT acquired, epoch FROM lease.acquire('ACQ', 'a', interval '1 min');

-- A blocking acquire of a never-leased or FREE key returns at once.
SELECT state, elapsed < interval '1s' AS prompt
  FROM pg_temp.err($$SELECT * FROM lease.acquire('acq-block', 'a', '1 min', '10s')$$);
SELECT held, owner, epoch FROM lease.inspect('acq-block');
SELECT status FROM lease.release('acq-block', 'a', 1);
SELECT state, elapsed < interval '1s' AS prompt
  FROM pg_temp.err($$SELECT * FROM lease.acquire('acq-block', 'b', '1 min', '10s')$$);
SELECT held, owner, epoch FROM lease.inspect('acq-block');

-- Release increments the epoch; the next grant is greater still.
SELECT acquired, epoch FROM lease.acquire('acq-rel', 'a', interval '1 min');
SELECT status FROM lease.release('acq-rel', 'a', 1);
SELECT held, epoch FROM lease.inspect('acq-rel');
SELECT acquired, epoch FROM lease.acquire('acq-rel', 'a', interval '1 min');
SELECT status FROM lease.release('acq-rel', 'a', 3);
SELECT acquired, epoch FROM lease.acquire('acq-rel', 'b', interval '1 min');

-- Lapse: a lapsed lease is acquirable at once by anyone; takeover gets a
-- strictly greater epoch. The same owner re-acquiring its own lapsed lease
-- is a new grant too (new epoch), not an idempotent success.
SELECT acquired, epoch FROM lease.acquire('acq-lapse-other', 'a', interval '200 ms');
SELECT acquired, epoch FROM lease.acquire('acq-lapse-self', 'a', interval '200 ms');
SELECT acquired, epoch FROM lease.acquire('acq-lapse-wait', 'a', interval '200 ms');
SELECT pg_sleep(0.3);
SELECT held, owner, epoch FROM lease.inspect('acq-lapse-other');  -- lapsed: epoch not advanced yet
SELECT acquired, epoch, expires_at > clock_timestamp() AS live
  FROM lease.acquire('acq-lapse-other', 'b', interval '1 min');
SELECT acquired, epoch FROM lease.acquire('acq-lapse-self', 'a', interval '1 min');
SELECT state, elapsed < interval '1s' AS prompt
  FROM pg_temp.err($$SELECT * FROM lease.acquire('acq-lapse-wait', 'b', '1 min', '10s')$$);
SELECT key, i.held, i.owner, i.epoch
  FROM unnest(ARRAY['acq-lapse-other', 'acq-lapse-self', 'acq-lapse-wait']) AS key,
       LATERAL lease.inspect(key) AS i
 ORDER BY key;
SELECT status FROM lease.renew('acq-lapse-other', 'a', 1, interval '1 min');  -- old holder fenced

-- Blocking acquire on a key held by another owner: when the wait is
-- exhausted it raises 57014 with its own message and HINT (DETAIL carries the
-- holder's expiry, a timestamp, so only its shape is checked); state unchanged.
SELECT state, msg,
       detail LIKE 'The current lease expires at % (server time).' AS detail_shape,
       hint,
       elapsed >= interval '200 ms' AS waited_full_bound,
       elapsed < interval '5s' AS bounded
  FROM pg_temp.err($$SELECT * FROM lease.acquire('acq', 'b', interval '1 min', interval '200 ms')$$);
SELECT held, owner, epoch FROM lease.inspect('acq');
-- ... which is distinguishable from a statement cancel, also SQLSTATE 57014.
SET statement_timeout = '150ms';
SELECT state, msg, hint
  FROM pg_temp.err($$SELECT * FROM lease.acquire('acq', 'b', interval '1 min', interval '5s')$$);
RESET statement_timeout;

--------------------------------------------------------------------------
-- renew and release: statuses and precedence
-- (not_owner > lapsed > epoch_mismatch)
--------------------------------------------------------------------------
SELECT acquired, epoch FROM lease.acquire('st-held', 'a', interval '1 min');
SELECT acquired, epoch FROM lease.acquire('st-free', 'a', interval '1 min');
SELECT status FROM lease.release('st-free', 'a', 1);
SELECT acquired, epoch FROM lease.acquire('st-lapse', 'a', interval '300 ms');
SELECT acquired, epoch FROM lease.acquire('st-lapse-rel', 'a', interval '300 ms');

-- Live leases. Failed renews and releases change nothing.
SELECT c.label, r.status, r.expires_at IS NULL AS no_expiry
  FROM (VALUES ('unknown key',                    'st-none', 'a', 1),
               ('free key (released)',            'st-free', 'a', 1),
               ('free key, watermark epoch',      'st-free', 'a', 2),
               ('other owner',                    'st-held', 'b', 1),
               ('other owner beats epoch',        'st-held', 'b', 9),
               ('holder, stale epoch',            'st-held', 'a', 0),
               ('holder, future epoch',           'st-held', 'a', 2)) AS c(label, k, o, e),
       LATERAL lease.renew(c.k, c.o, c.e, interval '1 min') AS r;
SELECT c.label, r.status
  FROM (VALUES ('unknown key',                    'st-none', 'a', 1),
               ('free key (released)',            'st-free', 'a', 1),
               ('free key, watermark epoch',      'st-free', 'a', 2),
               ('other owner',                    'st-held', 'b', 1),
               ('other owner beats epoch',        'st-held', 'b', 9),
               ('holder, stale epoch',            'st-held', 'a', 0),
               ('holder, future epoch',           'st-held', 'a', 2)) AS c(label, k, o, e),
       LATERAL lease.release(c.k, c.o, c.e) AS r;
SELECT key, i.held, i.owner, i.epoch
  FROM unnest(ARRAY['st-free', 'st-held', 'st-none']) AS key, LATERAL lease.inspect(key) AS i
 ORDER BY key;

-- renew ok: expiry = server time + ttl (here shortened), epoch unchanged.
SELECT extract(epoch FROM expires_at) AS st_expiry FROM lease.inspect('st-held') \gset
SELECT status, extract(epoch FROM expires_at) < :st_expiry AS shortened,
       expires_at > clock_timestamp() + interval '25s' AS about_ttl
  FROM lease.renew('st-held', 'a', 1, interval '30s');
SELECT status, extract(epoch FROM expires_at) > :st_expiry AS extended
  FROM lease.renew('st-held', 'a', 1, interval '1 hour');
SELECT held, owner, epoch FROM lease.inspect('st-held');

-- release ok, then the key is FREE: every later renew/release is not_owner.
SELECT status FROM lease.release('st-held', 'a', 1);
SELECT held, owner, epoch, expires_at FROM lease.inspect('st-held');
SELECT status FROM lease.release('st-held', 'a', 1);
SELECT status FROM lease.release('st-held', 'a', 2);
SELECT status, expires_at FROM lease.renew('st-held', 'a', 1, interval '1 min');

-- Lapsed leases.
SELECT pg_sleep(0.4);
SELECT c.label, r.status, r.expires_at IS NULL AS no_expiry
  FROM (VALUES ('holder, lapsed',                 'st-lapse', 'a', 1),
               ('lapsed beats epoch_mismatch',    'st-lapse', 'a', 5),
               ('other owner beats lapsed',       'st-lapse', 'b', 1),
               ('other owner beats lapsed+epoch', 'st-lapse', 'b', 5)) AS c(label, k, o, e),
       LATERAL lease.renew(c.k, c.o, c.e, interval '1 min') AS r;
SELECT c.label, r.status
  FROM (VALUES ('holder, lapsed',                 'st-lapse-rel', 'a', 1),
               ('lapsed beats epoch_mismatch',    'st-lapse-rel', 'a', 5),
               ('other owner beats lapsed',       'st-lapse-rel', 'b', 1),
               ('other owner beats lapsed+epoch', 'st-lapse-rel', 'b', 5)) AS c(label, k, o, e),
       LATERAL lease.release(c.k, c.o, c.e) AS r;
-- Lapse is final: nothing above revived or advanced the lapsed leases.
SELECT key, i.held, i.owner, i.epoch
  FROM unnest(ARRAY['st-lapse', 'st-lapse-rel']) AS key, LATERAL lease.inspect(key) AS i
 ORDER BY key;
-- After a takeover the former holder is simply not the owner.
SELECT acquired, epoch FROM lease.acquire('st-lapse', 'b', interval '1 min');
SELECT status FROM lease.renew('st-lapse', 'a', 1, interval '1 min');
SELECT status FROM lease.release('st-lapse', 'a', 1);
SELECT status FROM lease.renew('st-lapse', 'b', 1, interval '1 min');  -- new holder, old epoch
SELECT status FROM lease.renew('st-lapse', 'b', 2, interval '1 min');

--------------------------------------------------------------------------
-- inspect
--------------------------------------------------------------------------
SELECT acquired, epoch FROM lease.acquire('in-held', 'a', interval '1 min');
SELECT acquired, epoch FROM lease.acquire('in-free', 'a', interval '1 min');
SELECT status FROM lease.release('in-free', 'a', 1);
SELECT acquired, epoch FROM lease.acquire('in-lapsed', 'a', interval '200 ms');
SELECT pg_sleep(0.3);
-- never-leased: zero rows
SELECT * FROM lease.inspect('in-never');
-- free: held = f, owner/expires_at NULL, epoch = watermark
SELECT * FROM lease.inspect('in-free');
-- held
SELECT held, owner, epoch, expires_at > clock_timestamp() AS live
  FROM lease.inspect('in-held');
-- lapsed: reported unowned, epoch retained
SELECT * FROM lease.inspect('in-lapsed');

--------------------------------------------------------------------------
-- Transactions: effects commit or roll back with the caller's transaction;
-- denied and idempotent calls write nothing (no xid is assigned).
--------------------------------------------------------------------------
SELECT acquired, epoch FROM lease.acquire('tx-held', 'a', interval '1 min');

BEGIN;
SELECT acquired, epoch FROM lease.acquire('tx-held', 'b', interval '1 min');  -- denied
SELECT pg_current_xact_id_if_assigned() IS NULL AS no_xid;
SELECT acquired, epoch FROM lease.acquire('tx-held', 'a', interval '1 min');  -- idempotent
SELECT pg_current_xact_id_if_assigned() IS NULL AS no_xid;
SELECT status FROM lease.renew('tx-held', 'b', 1, interval '1 min');          -- not_owner
SELECT status FROM lease.renew('tx-held', 'a', 7, interval '1 min');          -- epoch_mismatch
SELECT status FROM lease.release('tx-held', 'b', 1);                          -- not_owner
SELECT count(*) FROM lease.inspect('tx-held');
SELECT pg_current_xact_id_if_assigned() IS NULL AS no_xid;
COMMIT;

-- A granted acquire writes (assigns an xid); rolling back undoes it.
BEGIN;
SELECT acquired, epoch FROM lease.acquire('tx-rollback', 'a', interval '1 min');
SELECT pg_current_xact_id_if_assigned() IS NOT NULL AS has_xid;
ROLLBACK;
SELECT * FROM lease.inspect('tx-rollback');  -- still never-leased
SELECT acquired, epoch FROM lease.acquire('tx-rollback', 'b', interval '1 min');

-- Rolled-back release and renew leave the lease as it was.
SELECT extract(epoch FROM expires_at) AS tx_expiry FROM lease.inspect('tx-held') \gset
BEGIN;
SELECT status FROM lease.release('tx-held', 'a', 1);
SELECT held, epoch FROM lease.inspect('tx-held');
ROLLBACK;
BEGIN;
SELECT status FROM lease.renew('tx-held', 'a', 1, interval '1 hour');
SELECT pg_current_xact_id_if_assigned() IS NOT NULL AS has_xid;
ROLLBACK;
SELECT held, owner, epoch, extract(epoch FROM expires_at) = :tx_expiry AS same_expiry
  FROM lease.inspect('tx-held');

--------------------------------------------------------------------------
-- Invalid input: SQLSTATE 22023 (never 54000 or 22008), DETAIL names every
-- violation, no state change. Shown once with psql's default verbosity ...
--------------------------------------------------------------------------
SELECT * FROM lease.acquire(NULL, '', interval '1 mon -29 days', interval '-1 s');

-- ... and for each case through the helper.
SELECT e.state, c.call, e.detail
  FROM (VALUES
    -- acquire
    ($$lease.acquire(NULL, 'a', '1 min')$$),
    ($$lease.acquire('', 'a', '1 min')$$),
    ($$lease.acquire(repeat('k', 2000), 'a', '1 min')$$),
    ($$lease.acquire(repeat('k', 3000), 'a', '1 min')$$),
    ($$lease.acquire(repeat('é', 600), 'a', '1 min')$$),
    ($$lease.acquire('k', NULL, '1 min')$$),
    ($$lease.acquire('k', '', '1 min')$$),
    ($$lease.acquire('k', repeat('o', 2000), '1 min')$$),
    ($$lease.acquire('k', 'a', NULL)$$),
    ($$lease.acquire('k', 'a', '0')$$),
    ($$lease.acquire('k', 'a', '-1 s')$$),
    ($$lease.acquire('k', 'a', '-1 microsecond')$$),
    ($$lease.acquire('k', 'a', '1 mon -29 days')$$),
    ($$lease.acquire('k', 'a', '1 day -1 hour')$$),
    ($$lease.acquire('k', 'a', '-1 mon 40 days')$$),
    ($$lease.acquire('k', 'a', '1000 years')$$),
    ($$lease.acquire('k', 'a', '100 years 1 second')$$),
    ($$lease.acquire('k', 'a', '1000000 hours')$$),
    ($$lease.acquire('k', 'a', '1 min', NULL)$$),
    ($$lease.acquire('k', 'a', '1 min', '-1 s')$$),
    ($$lease.acquire('k', 'a', '1 min', '1 mon -29 days')$$),
    ($$lease.acquire('k', 'a', '1 min', '1000 years')$$),
    ($$lease.acquire(NULL, NULL, NULL, NULL)$$),
    -- renew
    ($$lease.renew(NULL, 'a', 1, '1 min')$$),
    ($$lease.renew('', 'a', 1, '1 min')$$),
    ($$lease.renew(repeat('k', 2000), 'a', 1, '1 min')$$),
    ($$lease.renew('k', NULL, 1, '1 min')$$),
    ($$lease.renew('k', '', 1, '1 min')$$),
    ($$lease.renew('k', repeat('o', 2000), 1, '1 min')$$),
    ($$lease.renew('k', 'a', NULL, '1 min')$$),
    ($$lease.renew('k', 'a', 1, NULL)$$),
    ($$lease.renew('k', 'a', 1, '0')$$),
    ($$lease.renew('k', 'a', 1, '-1 s')$$),
    ($$lease.renew('k', 'a', 1, '1 mon -29 days')$$),
    ($$lease.renew('k', 'a', 1, '1000 years')$$),
    ($$lease.renew(NULL, '', NULL, '-1 s')$$),
    -- release
    ($$lease.release(NULL, 'a', 1)$$),
    ($$lease.release('', 'a', 1)$$),
    ($$lease.release(repeat('k', 2000), 'a', 1)$$),
    ($$lease.release('k', NULL, 1)$$),
    ($$lease.release('k', '', 1)$$),
    ($$lease.release('k', repeat('o', 2000), 1)$$),
    ($$lease.release('k', 'a', NULL)$$),
    ($$lease.release(NULL, NULL, NULL)$$),
    -- inspect
    ($$lease.inspect(NULL)$$),
    ($$lease.inspect('')$$),
    ($$lease.inspect(repeat('k', 2000))$$)
  ) AS c(call),
  LATERAL pg_temp.err('SELECT * FROM ' || c.call) AS e;

-- Every error has the same message shape and HINT.
SELECT e.msg, e.hint, count(*)
  FROM (VALUES ($$lease.acquire(NULL, 'a', '1 min')$$),
               ($$lease.renew(NULL, 'a', 1, '1 min')$$),
               ($$lease.release(NULL, 'a', 1)$$),
               ($$lease.inspect(NULL)$$)) AS c(call),
       LATERAL pg_temp.err('SELECT * FROM ' || c.call) AS e
 GROUP BY 1, 2 ORDER BY 1;

-- Fail closed: invalid calls on a held key change nothing.
SELECT acquired, epoch FROM lease.acquire('bad', 'a', interval '1 min');
SELECT extract(epoch FROM expires_at) AS bad_expiry FROM lease.inspect('bad') \gset
SELECT state FROM pg_temp.err($$SELECT * FROM lease.acquire('bad', 'b', '1000 years')$$);
SELECT state FROM pg_temp.err($$SELECT * FROM lease.acquire('bad', 'a', '1 min', '-1 s')$$);
SELECT state FROM pg_temp.err($$SELECT * FROM lease.renew('bad', 'a', 1, '1 mon -29 days')$$);
SELECT state FROM pg_temp.err($$SELECT * FROM lease.release('bad', '', 1)$$);
SELECT held, owner, epoch, extract(epoch FROM expires_at) = :bad_expiry AS same_expiry
  FROM lease.inspect('bad');

-- The limits themselves are accepted: a 1024-byte key and owner, a ttl and
-- wait of exactly 100 years, a zero wait, a 1-microsecond ttl.
SELECT acquired, epoch FROM lease.acquire(repeat('k', 1024), repeat('o', 1024), interval '100 years', interval '100 years');
SELECT held, octet_length(owner) AS owner_bytes, epoch FROM lease.inspect(repeat('k', 1024));
SELECT status FROM lease.renew(repeat('k', 1024), repeat('o', 1024), 1, interval '1200 months');
SELECT status FROM lease.release(repeat('k', 1024), repeat('o', 1024), 1);
SELECT acquired, epoch FROM lease.acquire('limits', 'a', interval '1 microsecond', interval '0');
SELECT acquired, epoch FROM lease.acquire(repeat('é', 512), 'a', interval '1 min');

--------------------------------------------------------------------------
-- Privileges: the table and the helpers live in lease_internal, which only
-- a superuser can use; schema lease holds the API alone, SECURITY DEFINER
-- with a pinned search_path.
--------------------------------------------------------------------------
SELECT p.oid::regprocedure AS function, p.prosecdef AS secdef, p.proconfig,
       p.provolatile AS vol
  FROM pg_proc AS p
 WHERE p.pronamespace = 'lease'::regnamespace
 ORDER BY p.proname;
SELECT p.proname, p.prosecdef AS secdef, p.proconfig, p.provolatile AS vol
  FROM pg_proc AS p
 WHERE p.pronamespace = 'lease_internal'::regnamespace
 ORDER BY p.proname;

CREATE ROLE regress_pg_lease_user;
SELECT p.proname,
       has_function_privilege('regress_pg_lease_user', p.oid, 'EXECUTE') AS can_execute
  FROM pg_proc AS p
 WHERE p.pronamespace = 'lease'::regnamespace
 ORDER BY p.proname;
SELECT has_schema_privilege('regress_pg_lease_user', 'lease', 'USAGE') AS schema_usage,
       has_schema_privilege('regress_pg_lease_user', 'lease_internal', 'USAGE') AS internal_usage,
       has_schema_privilege('regress_pg_lease_user', 'lease_dump', 'USAGE') AS dump_usage,
       has_table_privilege('regress_pg_lease_user', 'lease_internal.leases', 'SELECT') AS tbl_select,
       has_table_privilege('regress_pg_lease_user', 'lease_internal.leases', 'INSERT') AS tbl_insert,
       has_table_privilege('regress_pg_lease_user', 'lease_internal.leases', 'UPDATE') AS tbl_update,
       has_table_privilege('regress_pg_lease_user', 'lease_internal.leases', 'DELETE') AS tbl_delete;

SET ROLE regress_pg_lease_user;
SELECT * FROM lease_internal.leases;
UPDATE lease_internal.leases SET epoch = 1;
DELETE FROM lease_internal.leases;
SELECT * FROM lease_dump.leases;
SELECT lease_internal._text_problem('key', NULL);
SELECT acquired, epoch FROM lease.acquire('priv', 'unprivileged', interval '1 min');
SELECT status FROM lease.renew('priv', 'unprivileged', 1, interval '1 min');
SELECT held, owner, epoch FROM lease.inspect('priv');
SELECT status FROM lease.release('priv', 'unprivileged', 1);
SELECT state, detail FROM pg_temp.err($$SELECT * FROM lease.acquire('priv', '', '1 min')$$);
RESET ROLE;

-- A caller's search_path cannot redirect the functions' lookups: a shadow
-- clock_timestamp() placed before pg_catalog is not used (if it were, the
-- lease would be born lapsed).
CREATE SCHEMA regress_shadow;
CREATE FUNCTION regress_shadow.clock_timestamp() RETURNS timestamptz
    LANGUAGE sql AS $$SELECT timestamptz '2000-01-01 00:00:00+00'$$;
SET search_path = regress_shadow, pg_catalog;
SELECT clock_timestamp() = '2000-01-01 00:00:00+00' AS shadow_active;
SELECT acquired, epoch, expires_at > pg_catalog.clock_timestamp() AS live
  FROM lease.acquire('path', 'a', interval '1 min');
SELECT held, owner, epoch FROM lease.inspect('path');
SELECT status, expires_at > pg_catalog.clock_timestamp() AS live
  FROM lease.renew('path', 'a', 1, interval '1 min');
RESET search_path;
DROP SCHEMA regress_shadow CASCADE;

--------------------------------------------------------------------------
-- Isolation: READ UNCOMMITTED (READ COMMITTED in PostgreSQL) is accepted;
-- invalid input is reported (22023) before the isolation level is looked
-- at; REPEATABLE READ is refused (55000).
--------------------------------------------------------------------------
BEGIN ISOLATION LEVEL READ UNCOMMITTED;
SELECT acquired, epoch FROM lease.acquire('read-uncommitted', 'a', interval '1 min');
SELECT held, owner, epoch FROM lease.inspect('read-uncommitted');
COMMIT;
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT state, detail FROM pg_temp.err($$SELECT * FROM lease.acquire('', 'a', '1 min')$$);
SELECT state, detail FROM pg_temp.err($$SELECT * FROM lease.renew('k', 'a', NULL, '1 min')$$);
SELECT state FROM pg_temp.err($$SELECT * FROM lease.inspect('read-uncommitted')$$);
ROLLBACK;

--------------------------------------------------------------------------
-- DROP EXTENSION removes schema lease; the extension is trusted, so a
-- non-superuser with CREATE on the database can install, use and drop it.
--------------------------------------------------------------------------
DROP EXTENSION pg_lease;
SELECT count(*) AS lease_schemas FROM pg_namespace WHERE nspname = 'lease';
SELECT to_regclass('lease_internal.leases') AS leases_table;
SELECT count(*) AS lease_schemas_left FROM pg_namespace WHERE nspname LIKE 'lease%';
SELECT count(*) AS lease_functions FROM pg_proc WHERE proname IN ('acquire', 'renew', 'release', 'inspect')
   AND pronamespace NOT IN ('pg_catalog'::regnamespace, 'information_schema'::regnamespace);

CREATE ROLE regress_pg_lease_creator;
SELECT current_database() AS regress_db \gset
SET ROLE regress_pg_lease_creator;
-- No CREATE privilege on the database yet (42501). The message names the
-- extension, so only its SQLSTATE is shown.
SELECT state FROM pg_temp.err('CREATE EXTENSION pg_lease');
RESET ROLE;
GRANT CREATE ON DATABASE :"regress_db" TO regress_pg_lease_creator;
SET ROLE regress_pg_lease_creator;
SELECT rolsuper FROM pg_roles WHERE rolname = current_user;
-- Versions with known contract bugs have no install script: they cannot be
-- installed (an existing install of them still updates). The message names
-- the extension, so only its SQLSTATE is shown.
SELECT state FROM pg_temp.err($$CREATE EXTENSION pg_lease VERSION '0.1.0'$$);
SELECT state FROM pg_temp.err($$CREATE EXTENSION pg_lease VERSION '0.2.0'$$);
CREATE EXTENSION pg_lease;
SELECT extowner::regrole, extversion, extrelocatable
  FROM pg_extension WHERE extname = 'pg_lease';
-- The member objects belong to the bootstrap superuser, not to the creator,
-- so even the extension's owner changes the table only through the API. Only
-- the database's owner may read it (through lease_dump, for pg_dump); the
-- creator here is not that owner.
SELECT nspowner = 10 AS schema_by_bootstrap_superuser FROM pg_namespace WHERE nspname = 'lease';
SELECT relowner = 10 AS table_by_bootstrap_superuser FROM pg_class
 WHERE relname = 'leases' AND relnamespace = (SELECT oid FROM pg_namespace WHERE nspname = 'lease_internal');
SELECT bool_and(proowner = 10) AS functions_by_bootstrap_superuser
  FROM pg_proc WHERE pronamespace IN ('lease'::regnamespace, 'lease_internal'::regnamespace);
SELECT count(*) FROM lease_internal.leases;
UPDATE lease_internal.leases SET epoch = 1;
SELECT count(*) FROM lease_dump.leases;
SELECT acquired, epoch FROM lease.acquire('job-42', 'worker-a1', interval '30s');  -- fresh: epoch 1
SELECT held, owner, epoch FROM lease.inspect('job-42');
DROP EXTENSION pg_lease;
SELECT count(*) AS lease_schemas FROM pg_namespace WHERE nspname = 'lease';
RESET ROLE;

REVOKE CREATE ON DATABASE :"regress_db" FROM regress_pg_lease_creator;
DROP ROLE regress_pg_lease_creator;
DROP ROLE regress_pg_lease_user;
