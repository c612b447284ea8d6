//! failure
