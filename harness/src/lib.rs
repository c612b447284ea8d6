//! I/O side of the pg_lease checks: PostgreSQL installs and throwaway
//! clusters ([`pg`]), and the pg_lease extension files ([`extension`]).

pub mod extension;
pub mod pg;
