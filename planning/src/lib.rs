//! Pure planning of the pg_lease checks, no I/O: [`workload`]s (what the processes of a
//! campaign call, and their proptest strategies), stepped [`plan`]s (one step at a time, as
//! isolationtester runs them), the written [`races`], the [`stall`] judge, the one
//! [`mutants`] catalogue and the HTML [`timeline`] of a history. The harness runs and
//! records what is planned here; this crate depends on the model only.

pub mod mutants;
pub mod plan;
pub mod races;
pub mod stall;
pub mod timeline;
pub mod workload;
