//! lockstore: the lock server's PostgreSQL store (task T-012, in Rust).
//!
//! The contract is `specs/LOCKSTORE.md`: the schema ([`schema`]), the
//! pinned statements ([`sql`], bound by name through [`named`]), the store
//! SPI and its errors ([`spi`]), the error translation ([`mod@translate`]) and
//! the store itself ([`PostgresLockStore`]).
//!
//! The discipline everything here serves: **only a zero-row result means
//! "lost".** `extend` returning `Ok(None)` is the strongest statement the
//! store makes — you do not hold this lock, now. A fault (a serialization
//! failure, a deadlock, a cancelled statement, a dropped connection, a
//! timeout) means the outcome is unknown, and is reported as
//! [`StoreError::Contention`], never folded into that answer. Constraint
//! violations and everything else are bugs, handed on unchanged as
//! [`StoreError::Programming`].

pub mod named;
pub mod pg;
pub mod schema;
pub mod spi;
pub mod sql;
pub mod translate;

pub use named::BindError;
pub use pg::{PostgresLockStore, StoreOptions};
pub use schema::install_schema;
pub use spi::{Contention, ContentionReason, LockHandle, LockInfo, LockStore, StoreError};
pub use translate::{classify, translate, Fault, Verdict};
