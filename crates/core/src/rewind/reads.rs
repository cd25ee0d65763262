//! What a restore reads, which garbage collection keeps for every target it keeps (one
//! definition for both), and the refusal of a target whose content it dropped.

use rewind_store::ObjectId;

use super::Target;
use crate::db::oplog::{self, CheckpointRow, EpochRow};
use crate::workspace::Workspace;
use crate::Error;

/// Refuses a checkpoint garbage collection dropped: what restoring to it (or diffing it)
/// needs is no longer stored. Exit 7, naming it and when it went.
pub(crate) fn refuse_collected_checkpoint(c: &CheckpointRow) -> Result<(), Error> {
    match c.collected_ns {
        None => Ok(()),
        Some(ns) => Err(Error::Unavailable(format!(
            "checkpoint {} (session {}, message {}) was collected by garbage collection at {}: \
             the content restoring to it needs is no longer stored; nothing was changed",
            c.id,
            c.session,
            c.message.as_deref().unwrap_or("-"),
            crate::base::utc(ns)
        ))
        .remedy(crate::model::remedy::Remedy::Log)),
    }
}

/// Refuses an epoch garbage collection dropped (see [`refuse_collected_checkpoint`]).
pub(crate) fn refuse_collected_epoch(e: &EpochRow) -> Result<(), Error> {
    match e.collected_ns {
        None => Ok(()),
        Some(ns) => Err(Error::Unavailable(format!(
            "epoch {} ({} epoch of session {}) was collected by garbage collection at {}: the \
             content it changed is no longer stored; nothing was changed",
            e.id,
            e.kind.as_str(),
            if e.session.is_empty() {
                "-"
            } else {
                &e.session
            },
            crate::base::utc(ns)
        ))
        .remedy(crate::model::remedy::Remedy::Log)),
    }
}

/// Refuses a restore target garbage collection dropped.
pub(crate) fn refuse_collected(target: &Target) -> Result<(), Error> {
    match target {
        Target::Checkpoint(c) => refuse_collected_checkpoint(c),
        Target::Epoch(e) => refuse_collected_epoch(e),
    }
}

/// The tree an `--all` restore to `target` makes the workspace equal to: a checkpoint's tree,
/// or an opaque epoch's tree before it ran. The planner reads exactly this; garbage collection
/// keeps what it names for every target it keeps.
pub(crate) fn target_tree(target: &Target) -> Result<ObjectId, Error> {
    match target {
        Target::Checkpoint(c) => Ok(c.root),
        Target::Epoch(e) => e.pre_root.ok_or_else(|| {
            Error::State(format!(
                "--all needs a whole-tree state, and {} epoch {} has none; give a checkpoint instead",
                e.kind.as_str(),
                e.id
            ))
        }),
    }
}

impl Workspace {
    /// The changes a restore of `session` to a point at `after_pos` undoes (session scope):
    /// the planner takes, per path, the `before` of the earliest and the `after` of the latest.
    /// Garbage collection keeps what these rows name for every checkpoint it keeps, from this
    /// same function, so what is kept is what a restore reads.
    pub(crate) fn undo_rows(
        &self,
        session: &str,
        after_pos: i64,
    ) -> Result<Vec<oplog::ChangeRow>, Error> {
        oplog::session_changes_after(&self.db(), session, after_pos)
    }
}
