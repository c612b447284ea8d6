//! lockstore
