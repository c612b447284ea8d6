//! What a plan's restart step is made with: the caller's control of the server. The
//! stepped runner does not manage the server it runs on; the failure crate's checks do, and
//! hand it theirs ([`super::play`]).

use crate::workload::Stop;
use std::future::Future;
use std::pin::Pin;
use std::time::Duration;
use tokio_postgres::Client;

/// A future a [`ServerControl`] returns.
pub type Boxed<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// The server a plan runs on, as its caller controls it.
pub trait ServerControl: Send + Sync {
    /// Stops the server as `stop` says, keeps it down for `down`, starts it again, and
    /// records the restart on the plan's recorder (a restart nemesis event with its
    /// downtime: the sessions then reconnect): what happened, in a line, or why it failed.
    fn restart(&self, stop: Stop, down: Duration) -> Boxed<'_, Result<String, String>>;

    /// A new connection for the runner's monitor (the old one ended with the server).
    fn monitor(&self) -> Boxed<'_, Result<Client, String>>;
}
