//! The algorithm model: pg_lease's calls as the steps its SQL takes, run by concurrent
//! sessions against one key's row, the row's lock and an abstract server clock, in the step
//! order of a [`Variant`] (0.1.0, 0.2.0 or 0.3.0).
//!
//! [`crate::LeaseModel`] checks the contract: every call is one atomic [`crate::Spec::step`].
//! This model refines it: a call is a sequence of steps (read the clock, probe, try the write,
//! wait for the row lock, re-check, write, commit; a wait loop's sleep), and other sessions'
//! steps and clock ticks interleave between them. The invariants are stated over server-time
//! instants, on the history of committed grants: a grant is valid from its effective instant
//! (the clock value its `expires_at = clock + ttl` was computed from) until its release
//! instant or its expiry. The model also checks that a grant is dated by the clock of its
//! write: no acquire writes a lease already expired (inv11's "a grant expires at server time
//! + ttl").
//!
//! Step orders (one key, READ COMMITTED; a session reads its own uncommitted version, else
//! the committed one):
//! - 0.1.0 acquire: read the clock into `v_now`; probe (plain SELECT); decide with `v_now`
//!   (idempotent, denied, time out, sleep, or try); INSERT .. ON CONFLICT DO UPDATE .. WHERE
//!   free or `expires_at <= v_now`, in a subtransaction: it waits for any other transaction's
//!   lock on the row, re-checks the latest version with the same `v_now` and writes
//!   `v_now + ttl`; a failed re-check rolls the subtransaction back (dropping the lock) and
//!   the call loops.
//! - 0.1.0 renew and release: read the clock into `v_now`; UPDATE .. WHERE owner, epoch and
//!   `expires_at > v_now`, in a subtransaction: a row whose snapshot version matches waits
//!   for the lock and is re-checked on the latest version with the same `v_now`; when no row
//!   matched, `_failure_status` (clock, then SELECT) names the status or the call loops.
//! - 0.2.0 acquire: probe, then read the clock; decide; `_take`: UPDATE .. WHERE free or
//!   `expires_at <= clock_timestamp()` when the probe saw a row, which reads the clock
//!   itself after any lock wait; else INSERT .. ON CONFLICT DO NOTHING, whose VALUES compute
//!   `expires_at` from the clock as the statement starts, before it waits for another
//!   transaction's uncommitted insert of the key (when that transaction rolls back, the
//!   insert goes ahead with that expiry: issue 18). A blocking acquire runs the attempt in
//!   a subtransaction and rolls a lost one back; a non-blocking one keeps the lock a lost
//!   re-check took until its transaction ends.
//! - 0.2.0 renew and release: one UPDATE that reads the clock itself (after any lock wait);
//!   a lost re-check keeps the lock until the transaction ends; `_failure_status` as above
//!   (SELECT, then clock).
//! - 0.3.0 acquire: probe, then read the clock; decide; `_take` of a never-leased key:
//!   INSERT .. ON CONFLICT DO NOTHING (waits for another transaction's uncommitted insert,
//!   which may commit: nothing inserted, the call loops; or roll back: it inserts), then, in
//!   a step of its own, read the clock and UPDATE the inserted row's `expires_at` to
//!   `clock + ttl` (a second version; the grant is dated after any wait). `_take` of a row:
//!   lock it at once if no other transaction holds it and it is free or lapsed (SKIP LOCKED),
//!   read the clock and UPDATE; else a live row is lost at once (nothing locked), and a free
//!   or lapsed one locked by another transaction is waited for in a subtransaction: once the
//!   lock is free the session locks the latest version (a step of its own, so others see its
//!   lock), then re-checks at the clock and grants, or rolls the subtransaction back
//!   (dropping the lock) and loops.
//! - 0.3.0 renew and release: `_failure_status` first (a failure is answered from it); then
//!   `_lock_live`: lock the live lease at once if nobody else holds it, read the clock and
//!   UPDATE; if another transaction holds it, wait in a subtransaction, lock, re-check at the
//!   clock, write or roll back (keeping no lock) and ask `_failure_status` again.
//! - inspect: 0.1.0 reads the clock, then SELECTs; 0.2.0 and 0.3.0 do both in one statement.
//!
//! An UPDATE waits only for a row its snapshot version matches, and an INSERT .. ON CONFLICT
//! DO NOTHING only for another transaction's uncommitted write; after a wait the statement
//! re-checks the latest committed version, and an UPDATE that then fails keeps the row lock
//! (PostgreSQL locks the latest version before re-checking it) until its (sub)transaction
//! ends. A timeout (57014) aborts the call's transaction at the error; a session may
//! `ROLLBACK` its explicit transaction between calls (its versions are discarded: a waiter
//! for its insert then inserts itself). A waiter may be overtaken by a session that takes
//! the freed lock first (a superset of PostgreSQL's lock queue). 0.3.0's statements between
//! taking a lock and the write that uses it (SKIP LOCKED, the clock read, the UPDATE) wait
//! for nothing and are one step.
//!
//! Time ([`Timing`]): with [`Timing::InstantSteps`] a running call's steps take no time: the
//! clock ticks only while every session is idle, idle in a transaction, blocked on the row
//! lock or asleep. Statements take microseconds and leases milliseconds to seconds, so only
//! waits stretch the gap between a clock read and the write that uses it.
//! [`Timing::SlowSteps`] lets the clock tick between any two steps. An autocommit call
//! commits in its last step.
//!
//! Files: `config` (variants, timing, bounds), `state` (rows, lock, sessions, history),
//! `model` (transitions, traces, shortest counterexamples, the properties), `calls` (the
//! per-call steps and transaction ends), `writes` (the writing statements, waits and
//! re-checks), `report` ([`run`] and [`AlgoReport`]).

mod calls;
mod config;
mod model;
mod report;
mod state;
mod writes;

pub use config::{
    AlgoConfig, AlgoConfigError, Timing, Variant, MAX_EPOCH, MAX_SESSIONS, MAX_TXN_CALLS,
    NO_GRANT_EXPIRED_WHEN_WRITTEN, NO_RENEW_STALLED_BY_SLEEPER,
};
pub use model::{properties, AlgoModel, Narrate, Silent, Transcript};
pub use report::{run, AlgoProperty, AlgoReport};
pub use state::{
    Action, AlgoState, Call, CallKind, Event, ExpiredGrant, Grant, Lock, Mark, Pc, Row, Session,
};
