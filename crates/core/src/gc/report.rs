//! What a garbage collection is asked to do and what it reports.

use std::time::Duration;

use serde::Serialize;

use crate::workspace::orphans;

/// How a garbage collection runs; `None` takes the workspace's `[retention]` setting.
#[derive(Clone, Debug, Default)]
pub struct GcOptions {
    /// Decide and report, write nothing.
    pub dry_run: bool,
    /// The size budget of the workspace's state, in bytes.
    pub max_bytes: Option<u64>,
    /// Checkpoints older than this may be dropped.
    pub max_age: Option<Duration>,
    /// Each session's newest this many checkpoints are kept.
    pub keep: Option<u64>,
    /// Started automatically after a checkpoint: run only if the state exceeds its budget and
    /// no other gc of the workspace is running (then return at once, doing nothing).
    pub auto: bool,
}

/// A checkpoint garbage collection dropped (or would drop).
#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub struct CollectedCheckpoint {
    /// Its id.
    pub id: String,
    /// Its session.
    pub session: String,
    /// The message it was bound to.
    pub message: Option<String>,
    /// When it was made (ns since the Unix epoch).
    pub created_ns: i64,
}

/// What a garbage collection did, or (dry run) would do.
#[derive(Clone, Debug, Default, Serialize, schemars::JsonSchema)]
pub struct GcReport {
    /// Nothing was written.
    pub dry_run: bool,
    /// An automatic run that did nothing: another gc was running, or the state fits.
    pub skipped: bool,
    /// Checkpoints dropped now, oldest first.
    pub checkpoints: Vec<CollectedCheckpoint>,
    /// Epochs dropped now (their content is no longer kept), oldest first.
    pub epochs: Vec<String>,
    /// Whole-tree snapshot records dropped.
    pub snapshots: u64,
    /// Checkpoints kept (not collected), of every session.
    pub kept_checkpoints: u64,
    /// Objects removed from the store.
    pub objects_removed: u64,
    /// Bytes the sweep frees (packs deleted minus packs written, inline bytes removed).
    pub bytes_freed: u64,
    /// Pack files deleted.
    pub packs_deleted: u64,
    /// Pack files written by the repack.
    pub packs_written: u64,
    /// Live objects copied into new packs.
    pub objects_moved: u64,
    /// Bytes of the workspace's state directory before.
    pub state_bytes_before: u64,
    /// Bytes after (a dry run: the estimate).
    pub state_bytes_after: u64,
    /// The size budget applied, if any.
    pub max_bytes: Option<u64>,
    /// The state fits the budget (true without one). False: what is always kept is larger.
    pub within_budget: bool,
    /// Orphaned workspaces (root gone, idle past the age) whose state was removed (or would
    /// be): their state directories.
    pub orphans_removed: Vec<orphans::Orphan>,
}

impl GcReport {
    /// This round's report followed by `next`'s: what both did, the state as `next` left it.
    pub(super) fn then(mut self, next: GcReport) -> GcReport {
        self.checkpoints.extend(next.checkpoints);
        self.epochs.extend(next.epochs);
        self.snapshots += next.snapshots;
        self.objects_removed += next.objects_removed;
        self.bytes_freed += next.bytes_freed;
        self.packs_deleted += next.packs_deleted;
        self.packs_written += next.packs_written;
        self.objects_moved += next.objects_moved;
        self.orphans_removed.extend(next.orphans_removed);
        GcReport {
            kept_checkpoints: next.kept_checkpoints,
            state_bytes_after: next.state_bytes_after,
            max_bytes: next.max_bytes,
            within_budget: next.within_budget,
            ..self
        }
    }
}
