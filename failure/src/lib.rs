//! nemesis: fault injection for the pg_lease checks (package `nemesis`, directory `failure/`).
//!
//! Faults are injected through the harness: the server's lifecycle ([`server`]), the
//! recorder's nemesis events (both ends of every fault are written into the history), the
//! injector's own superuser connections and the loopback [`proxy`].
//!
//! - [`fault`]: the named faults ([`Fault`]), each a check of its own, each described by one
//!   record of [`fault::SPECS`] (every list of faults is a filter over it).
//! - [`situation`]: the vocabulary of a record (situation, injection, control), plain data.
//! - [`inject`]: injecting one fault into a live history ([`inject::Reach`]).
//! - [`schedule`]: fault schedules drawn by proptest (which fault, when, how long).
//! - [`mixed`]: a campaign under a schedule, judged over the whole history.
//! - [`progress`]: whether a campaign's target answered before and after its faults.
//! - [`checks`]: the named checks and their negative controls.
//! - [`suite`]: every named check on one install, typed per-check results (the gate's "faults" suite).
//! - [`builds`]: the pg_lease builds they install (this checkout's under a name of its own,
//!   and the broken builds of the negative controls).
//! - [`proxy`]: a loopback TCP proxy that can reset, close or blackhole connections.

pub mod builds;
pub mod checks;
pub mod error;
pub mod fault;
pub mod inject;
pub mod mixed;
pub mod progress;
pub mod proxy;
pub mod schedule;
pub mod server;
pub mod situation;
pub mod suite;

pub use error::FaultError;
pub use fault::Fault;
