//! I/O side of the pg_lease checks: PostgreSQL installs and throwaway
//! clusters ([`pg`]), the pg_lease extension files ([`extension`]), a
//! typed lease client with error classification ([`client`]) by the one
//! error-fate table, read from driver errors by [`fate`]; the history
//! [`recorder`], [`workload`]s and [`campaign`]s judged by the model's checker,
//! [`stepped`] plans run one step at a time as isolationtester does, and the HTML
//! [`timeline`] of a history.

pub mod campaign;
pub mod client;
pub mod conformance;
pub mod contract;
pub mod extension;
/// The fate adapter for tokio-postgres errors (its own crate, shared with the lock store).
pub use pgfate as fate;
pub mod fenced;
pub mod installcheck;
pub mod judgement;
pub mod late;
pub mod liveness;
pub mod matrix;
pub mod mutants;
pub mod pg;
pub mod progress;
pub mod recorder;
pub mod security;
pub mod session;
pub mod stepped;
/// Pure planning, in its own crate; re-exported under the harness's old paths.
pub use planning::{timeline, workload};
