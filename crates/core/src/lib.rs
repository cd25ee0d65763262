//! The Rewind engine: workspaces, capture (scan + stat cache + store), whole-tree snapshots and
//! restore.
//!
//! Principles this crate keeps (see DESIGN.md): never touch the user's git; state lives in
//! `$REWIND_HOME`, never in the workspace; cost proportional to change (the stat cache); fail
//! closed (what cannot be captured is recorded as uncovered and never deleted or overwritten as
//! if it were known); never write outside the root or through a symlink.

mod capture;
pub mod config;
mod db;
pub mod edit;
mod entry;
mod error;
pub mod failpoint;
mod fsops;
pub mod guard;
mod history;
mod home;
mod ignore_rules;
mod lock;
pub mod oplog;
pub mod patch;
mod record;
pub mod relpath;
pub mod restore;
mod rewind;
mod scan;
mod state;
pub mod trace;
mod watch;
mod workspace;

pub use capture::{Capture, CaptureStats, Uncovered};
pub use config::Config;
pub use edit::EditSpec;
pub use entry::{Change, Entry, EntryView};
pub use error::Error;
pub use guard::{
    ChangedBy, Edited, Fingerprint, GuardRefusal, LineRange, PatchOptions, Patched, PatchedFile,
    ReadResult, RefusalKind, StagedWrite, ToolCall, WriteCheck,
};
pub use history::LogItem;
pub use home::rewind_home;
pub use lock::WorkspaceLock;
pub use oplog::{CheckpointRow, EpochKind, EpochRow, EpochState, Owner};
pub use record::{payload_too_large, EpochSpec, Settled};
pub use restore::{Applied, RestorePlan, Skipped};
pub use rewind::{Conflict, Mode, Recovered, RewindOptions, RewindOutcome, Target};
pub use scan::Progress;
pub use workspace::{OpenOptions, Snapshot, Status, Workspace};

fn serde_path<S: serde::Serializer>(p: &[u8], s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&String::from_utf8_lossy(p))
}

fn serde_id<S: serde::Serializer>(id: &rewind_store::ObjectId, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&id.to_hex())
}
