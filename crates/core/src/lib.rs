//! The Rewind engine: workspaces, scanning, snapshots and restore.

pub mod config;
mod error;
mod home;

pub use config::Config;
pub use error::Error;
pub use home::rewind_home;
