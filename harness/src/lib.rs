//! I/O side of the pg_lease checks: PostgreSQL installs and throwaway
//! clusters ([`pg`]), the pg_lease extension files ([`extension`]) and a
//! typed lease client with error classification ([`client`]) by the one
//! error-fate table, read from driver errors by [`fate`].

pub mod campaign;
pub mod client;
pub mod conformance;
pub mod extension;
pub mod fate;
pub mod installcheck;
pub mod pg;
pub mod recorder;
pub mod workload;
