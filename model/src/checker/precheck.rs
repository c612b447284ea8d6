//! Linear pre-checks (Elle-style): the common violations found in O(n log n) per key,
//! before the search. PLACEHOLDER: being written.

use super::partition::Partition;
use super::Violation;
use crate::history::History;

/// The first violation a pre-check finds in `part`, if any.
pub fn run(_history: &History, _part: &Partition) -> Option<Violation> {
    None
}
