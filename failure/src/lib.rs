//! nemesis: fault injection for the pg_lease checks (package `nemesis`, directory `failure/`).
//!
//! - [`proxy`]: a loopback TCP proxy between a client and a server that can
//!   cut every connection abruptly (TCP reset), close them cleanly (FIN) or
//!   stop forwarding without closing anything (a blackhole, for client-side
//!   timeouts).

pub mod proxy;
