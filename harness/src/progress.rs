//! What a run (a campaign, a stepped plan) tells its watcher while it runs: below both,
//! so the stepped runner and the campaign share it without depending on each other.

/// What a run is told about while it runs.
pub trait Progress: Send + Sync {
    /// `ops` calls have been recorded so far.
    fn recorded(&self, _ops: u64) {}
    /// Recording ended; the check starts.
    fn checking(&self) {}
}

/// Progress nobody watches.
pub struct Silent;

impl Progress for Silent {}
