//! The Rewind engine: workspaces, scanning, snapshots and restore.

mod error;

pub use error::Error;
