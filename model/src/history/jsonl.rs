//! JSON Lines encoding of history format v2. PLACEHOLDER: being written.
