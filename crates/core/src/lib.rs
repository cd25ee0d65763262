//! The Rewind engine: workspaces, capture (scan + stat cache + store), the op log of epochs and
//! checkpoints, per-session rewind, and the read-before-edit guard.
//!
//! Principles this crate keeps (see `docs/design.md`): never touch the user's git; state lives
//! in `$REWIND_HOME`, never in the workspace; cost proportional to change (the stat cache);
//! fail closed (what cannot be captured is recorded as uncovered and never deleted or
//! overwritten as if it were known); never write outside the root or through a symlink.
//!
//! Layout, bottom to top; a module only imports modules below it (`tests/layout.rs` checks):
//!
//! | module      | what it is                                                              |
//! |-------------|-------------------------------------------------------------------------|
//! | `base`      | clock, random ids, failpoints, tracing, JSON helpers                    |
//! | `model`     | the data model: entries, changes, op-log rows, guard refusals, remedies |
//! | `error`     | the engine's error                                                      |
//! | `text`      | edits and patches on bytes                                              |
//! | `config`    | the workspace's configuration file                                      |
//! | `fs`        | relative paths, root-confined file operations, what a path holds        |
//! | `db`        | every table and query: migrations, op log, journal, snapshots, guard    |
//! | `capture`   | walking, the stat cache, hashing and storing a whole tree               |
//! | `restore`   | the one engine that changes files: plan steps, apply them, invert them  |
//! | `workspace` | open, registration, moved roots, orphans, the lock, status and fsck     |
//! | `shadow`    | the shadow git history: checkpoints as commits of a bare repository     |
//! | `record`    | epochs and checkpoints, attributed to the session that made them        |
//! | `rewind`    | restores of the op log: targets, journal, rollback, recovery            |
//! | `history`   | the log as a front shows it                                             |
//! | `diff`      | the structured diff (files, hunks, tagged lines) every front renders    |
//! | `guard`     | the guarded tools: read, check, write, edit, apply-patch                |
//! | `worktree`  | worktrees: isolated copies linked to their parent, merged back or discarded |
//! | `gc`        | retention: the policy, the mark, the sweep, pins                        |
//! | `remote`    | what remotes need without the network: op-log export and import, clones |

mod base;
mod capture;
pub mod config;
mod db;
pub mod diff;
mod error;
mod fs;
mod gc;
pub mod guard;
mod history;
mod model;
mod record;
pub mod remote;
pub mod restore;
mod rewind;
mod shadow;
mod text;
mod workspace;
pub mod worktree;

pub use base::{failpoint, now_ns, trace, utc};
pub use fs::relpath;
pub use text::{edit, merge, patch};

pub use capture::scan::Progress;
pub use capture::watch::LiveWatch;
pub use capture::{Capture, CaptureStats, Uncovered};
pub use config::{AutoPush, Config, HookGuard, LargeFiles, Reflink, WORKSPACE_CONFIG};
pub use db::oplog;
pub use db::settings::{SettingRow, SANDBOX_MODE};
pub use edit::EditSpec;
pub use error::Error;
pub use gc::{CollectedCheckpoint, GcOptions, GcReport};
pub use guard::{
    Edited, LineRange, PatchOptions, Patched, PatchedFile, ReadResult, StagedWrite, ToolCall,
    WriteCheck,
};
pub use history::LogItem;
pub use model::entry::{Change, Entry, EntryView};
pub use model::guard::{ChangedBy, Fingerprint, GuardRefusal, RefusalKind};
pub use model::oplog::{CheckpointRow, EpochKind, EpochRow, EpochState, Owner, Snapshot};
pub use model::remedy::Remedy;
pub use record::{owner_alive, payload_too_large, this_process, EpochSpec, Settled};
pub use remote::{
    clone_into, CloneSource, Cloned, Collected, OplogSegment, RemoteLink, SegmentRecord,
};
pub use restore::{Applied, RestorePlan, Skipped};
pub use rewind::{Conflict, Mode, Recovered, RewindOptions, RewindOutcome, Target};
pub use shadow::{ShadowBranch, ShadowError, ShadowReport};
pub use workspace::adopt::{adopt, Adopted};
pub use workspace::baseline::{BaselineProgress, BaselineReport};
pub use workspace::home::{rewind_home, state_dir_of};
pub use workspace::identity::RootState;
pub use workspace::lock::WorkspaceLock;
pub use workspace::orphans::Orphan;
pub use workspace::registry::{
    forget, locate, move_workspace, orphan_state, orphans, registered, Forgotten, OrphanState,
    Registered, Relinked,
};
pub use workspace::server::{ServerInfo, SERVER_INFO, SERVER_LOCK, SERVER_TOKEN};
pub use workspace::settings::Setter;
pub use workspace::{OpenOptions, Status, Workspace};
pub use worktree::{
    sessions_in_worktrees, CreatedWorktree, DiscardedWorktree, WorktreeCreateOptions, WorktreeInfo,
    WorktreeMergeOptions, WorktreeMerged,
};
