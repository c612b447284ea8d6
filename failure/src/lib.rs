//! failure: fault injection for the pg_lease checks.
//!
//! - [`proxy`]: a loopback TCP proxy between a client and a server that can
//!   cut every connection abruptly (TCP reset) or stop forwarding without
//!   closing anything (a blackhole, for client-side timeouts).

pub mod proxy;
