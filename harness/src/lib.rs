//! I/O side of the pg_lease checks: PostgreSQL installs and throwaway
//! clusters ([`pg`]), the pg_lease extension files ([`extension`]) and a
//! typed lease client with error classification ([`client`]).

pub mod client;
pub mod conformance;
pub mod extension;
pub mod installcheck;
pub mod pg;
