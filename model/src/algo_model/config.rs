//! What the algorithm model explores: the step order ([`Variant`]), the clock ([`Timing`])
//! and the bounds ([`AlgoConfig`]).

use std::fmt;

/// Most sessions a model can have.
pub const MAX_SESSIONS: usize = 3;
/// Largest epoch bound a model can have.
pub const MAX_EPOCH: u8 = 5;
/// Most calls an explicit transaction can run.
pub const MAX_TXN_CALLS: usize = 2;

/// Name of the liveness-shaped property: a blocking acquire's wait never stalls a renew.
pub const NO_RENEW_STALLED_BY_SLEEPER: &str =
    "waiters never stall a renew: no renew waits for the row lock of a sleeping acquire";

/// Name of the property that a grant is dated by the server clock at its write (inv11's
/// "a grant expires at server time + ttl"): no acquire writes a grant already expired.
pub const NO_GRANT_EXPIRED_WHEN_WRITTEN: &str =
    "inv11 time authority: no acquire writes a grant that has already expired";

/// A call a session makes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CallKind {
    /// `blocking`: with the configured wait (else wait = 0)
    Acquire {
        blocking: bool,
    },
    Renew,
    Release,
    Inspect,
}

/// The step order modelled.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Variant {
    /// pg_lease 0.1.0 (`extension/released/pg_lease--0.1.0.sql`): the clock is read at the top of
    /// each attempt, before the probe and before any lock wait.
    V0_1_0,
    /// pg_lease 0.2.0 (`extension/pg_lease--0.1.0--0.2.0.sql`): updates read the clock after
    /// any lock wait, reads after their snapshot; but the first grant's INSERT .. ON CONFLICT
    /// DO NOTHING computes its `expires_at` in its VALUES, before it waits for another
    /// transaction inserting the same key (issue 18).
    V0_2_0,
    /// 0.2.0 without the blocking acquire's subtransaction: a lost attempt keeps its row lock
    /// across the sleep (the harness's SQL mutant `lost_race_keeps_row_lock`).
    V0_2_0LostRaceKeepsLock,
    /// pg_lease 0.3.0 (`extension/pg_lease--0.3.0.sql`): the first grant inserts, then reads
    /// the clock and dates its row with a second write (after any wait for a concurrent
    /// inserter); a call that waited for the row lock and lost its re-check rolls its
    /// subtransaction back (keeps no lock); renew and release ask `_failure_status` first.
    V0_3_0,
}

impl Variant {
    /// Every variant.
    pub const ALL: [Variant; 4] = [
        Variant::V0_1_0,
        Variant::V0_2_0,
        Variant::V0_2_0LostRaceKeepsLock,
        Variant::V0_3_0,
    ];

    /// The variant's name, as `leasecheck model --algo` takes it.
    pub fn name(self) -> &'static str {
        match self {
            Variant::V0_1_0 => "0.1.0",
            Variant::V0_2_0 => "0.2.0",
            Variant::V0_2_0LostRaceKeepsLock => "0.2.0-lost-race-keeps-lock",
            Variant::V0_3_0 => "0.3.0",
        }
    }

    /// The variant named `name`.
    pub fn from_name(name: &str) -> Option<Variant> {
        Variant::ALL.into_iter().find(|v| v.name() == name)
    }

    /// 0.1.0 reads `v_now` once per attempt, before it probes and writes.
    pub(super) fn clock_read_first(self) -> bool {
        self == Variant::V0_1_0
    }

    /// Whether a write attempt of `call` that waited and then failed its re-check keeps the
    /// row lock until its transaction ends (else a subtransaction rollback drops it).
    pub(super) fn keeps_lost_lock(self, call: CallKind) -> bool {
        match self {
            Variant::V0_1_0 => false,
            Variant::V0_2_0 => call != CallKind::Acquire { blocking: true },
            Variant::V0_2_0LostRaceKeepsLock => true,
            Variant::V0_3_0 => false,
        }
    }

    /// 0.3.0's first grant: the INSERT (which may wait) is followed by a clock read and an
    /// UPDATE that dates the inserted row's `expires_at` with it.
    pub(super) fn dates_insert_after(self) -> bool {
        self == Variant::V0_3_0
    }

    /// 0.3.0 waits for the row lock with a SELECT .. FOR NO KEY UPDATE of its own and
    /// re-checks in the next statements, so its lock is visible to others before the
    /// re-check (0.1.0 and 0.2.0 wait, lock and re-check inside the writing statement).
    pub(super) fn locks_before_recheck(self) -> bool {
        self == Variant::V0_3_0
    }

    /// 0.3.0's renew and release call `_failure_status` before they try to lock the row.
    pub(super) fn failure_status_first(self) -> bool {
        self == Variant::V0_3_0
    }
}

impl fmt::Display for Variant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// When the clock may tick.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Timing {
    /// Only while no session is running a step: a call's steps take no time, waits do.
    InstantSteps,
    /// Between any two steps.
    SlowSteps,
}

/// What the algorithm model explores.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct AlgoConfig {
    pub variant: Variant,
    /// sessions (each one owner), 1 to [`MAX_SESSIONS`]
    pub sessions: u8,
    /// the clock stops at this tick
    pub max_time: u8,
    /// states with a larger epoch are outside the explored boundary (1 to [`MAX_EPOCH`])
    pub max_epoch: u8,
    /// lease TTL (ticks) of every acquire and renew
    pub ttl: u8,
    /// wait bound (ticks) of blocking acquires; 0: none
    pub wait: u8,
    /// calls each session makes
    pub calls: u8,
    /// calls an explicit transaction may run (0: autocommit only), up to [`MAX_TXN_CALLS`];
    /// explicit transactions run non-blocking acquires, renews and releases
    pub txn_calls: u8,
    /// inspect calls (autocommit)
    pub inspects: bool,
    pub timing: Timing,
}

impl Default for AlgoConfig {
    /// pg_lease 0.3.0; two sessions, three calls each, transactions of up to two calls, a
    /// lease of two ticks, a wait of one, the clock up to two (a lease can lapse), instant
    /// steps. Checked exhaustively by `cargo test`.
    fn default() -> Self {
        AlgoConfig {
            variant: Variant::V0_3_0,
            sessions: 2,
            max_time: 2,
            max_epoch: 3,
            ttl: 2,
            wait: 1,
            calls: 3,
            txn_calls: 2,
            inspects: true,
            timing: Timing::InstantSteps,
        }
    }
}

/// An unusable [`AlgoConfig`].
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum AlgoConfigError {
    #[error("sessions must be 1 to {MAX_SESSIONS}, got {0}")]
    Sessions(u8),
    #[error("max_epoch must be 1 to {MAX_EPOCH}, got {0}")]
    MaxEpoch(u8),
    #[error("txn_calls must be 0 to {MAX_TXN_CALLS}, got {0}")]
    TxnCalls(u8),
    #[error("ttl must be 1 or more, got 0")]
    Ttl,
    #[error("max_time + ttl + wait must stay below 256")]
    TimeRange,
}

impl AlgoConfig {
    /// The default configuration with `variant`.
    pub fn of(variant: Variant) -> AlgoConfig {
        AlgoConfig {
            variant,
            ..AlgoConfig::default()
        }
    }

    /// Checks the bounds.
    pub fn validate(&self) -> Result<(), AlgoConfigError> {
        if self.sessions == 0 || usize::from(self.sessions) > MAX_SESSIONS {
            return Err(AlgoConfigError::Sessions(self.sessions));
        }
        if !(1..=MAX_EPOCH).contains(&self.max_epoch) {
            return Err(AlgoConfigError::MaxEpoch(self.max_epoch));
        }
        if usize::from(self.txn_calls) > MAX_TXN_CALLS {
            return Err(AlgoConfigError::TxnCalls(self.txn_calls));
        }
        if self.ttl == 0 {
            return Err(AlgoConfigError::Ttl);
        }
        let latest = u16::from(self.max_time) + u16::from(self.ttl) + u16::from(self.wait);
        if latest > 255 {
            return Err(AlgoConfigError::TimeRange);
        }
        Ok(())
    }
}
