//! The pg_lease semantics as one executable spec, the stateright model of its 11 invariants,
//! history types and checks. Pure: no I/O.
//!
//! - [`spec`]: the sequential spec ([`Spec::step`] at an instant, [`Spec::possible`] and
//!   [`Spec::check`] over an observed server-time [`Span`] with three-valued expiry).
//! - [`history`]: history format v2 ([`History`]: ops, transactions, nemesis events) and its
//!   JSON Lines encoding.
//! - [`fate`]: the one error-fate table (SQLSTATE or driver condition -> ok / failed / unknown).
//! - [`checker`]: the linearizability checker over the one spec (per key, memoised
//!   Wing-Gong/Lowe search, linear pre-checks, three-valued verdict).
//! - [`lease_model`]: the stateright [`LeaseModel`] (clients, keys, clock, faults, crashes,
//!   transactions, a fenced resource) with the invariants as properties.
//! - [`algo_model`]: the stateright [`AlgoModel`]: pg_lease's algorithm (0.1.0, 0.2.0 or 0.3.0
//!   step order) as steps of concurrent sessions on a row, its lock and a clock; it refines
//!   [`LeaseModel`] and checks inv01, inv07 and inv11 (a grant is not written
//!   already expired) over server-time instants.
//! - [`check`]: runs the model checker and reports ([`check::run`]).
//! - [`mutation`]: the negative controls; [`invariant`]: the 11 invariants.

pub mod algo_model;
pub mod branch;
pub mod check;
pub mod checker;
pub mod exit;
pub mod fate;
pub mod gen;
pub mod history;
pub mod invariant;
pub mod lease_model;
pub mod mutation;
pub mod spec;
pub mod time;

pub use algo_model::{AlgoConfig, AlgoConfigError, AlgoModel, AlgoReport, Timing, Variant};
pub use check::{Config, ConfigError, PropertyResult, Report, RunOptions, Strategy};
pub use checker::{Budget, CheckOptions, Verdict};
pub use exit::Exit;
pub use history::{
    History, Isolation, Nanos, NemesisEffect, NemesisRecord, OpId, OpRecord, OpResult, ProcessId,
    TxnEnd, TxnId, TxnRecord,
};
pub use invariant::Invariant;
pub use lease_model::LeaseModel;
pub use mutation::Mutation;
pub use spec::{
    Epoch, Expected, Judgement, KeyState, Mismatch, Name, Op, Outcome, Row, Spec, Store, Violation,
    MAX_NAME_BYTES,
};
pub use time::{Interval, Span, SpanError, Ts, Window};

/// The stateright version this crate is built on (e.g. for `checker().serve(addr)`).
pub use stateright;
