//! Rule A: while a session works in a worktree, the original directory's shadow commits for
//! that session are skipped (the worktree's own shadow history records its work).

use std::collections::BTreeSet;

use crate::workspace::Workspace;
use crate::Error;

/// The sessions whose checkpoints and restores this workspace's shadow history skips now.
///
/// Today there are no worktrees, so none. The worktree work (layer ③, issue 14) fills this in:
/// a session recorded as working in a worktree created from this workspace is in the set until
/// its worktree is merged or discarded. The catch-up neither writes nor passes a skipped
/// session's events (its branch keeps its head and position), so whatever this returns when
/// the session comes back decides what is written then: the worktree work must say whether
/// the checkpoints recorded here while the session was away are written late or dropped.
pub(crate) fn sessions_away(_ws: &Workspace) -> Result<BTreeSet<String>, Error> {
    Ok(BTreeSet::new())
}
