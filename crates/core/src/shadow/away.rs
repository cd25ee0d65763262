//! Rule A: while a session works in a worktree, the original directory's shadow commits for
//! that session are skipped (the worktree's own shadow history records its work).

use std::collections::BTreeSet;

use crate::workspace::Workspace;
use crate::Error;

/// The sessions whose checkpoints and restores this workspace's shadow history skips now: every
/// session recorded in a live worktree made from this workspace, until that worktree is
/// discarded (a merged worktree stays, and so does its session's absence: it may go on
/// working there).
///
/// The catch-up neither writes nor passes a skipped session's events (its branch keeps its
/// head and position). So when the session is back (its worktree discarded), what was recorded
/// here for it meanwhile is written then, in order, on top of its branch: the shadow history
/// is a view of the op log, and is complete again once nobody is away. Its work in the
/// worktree comes to this branch as the worktree merge's commit.
pub(crate) fn sessions_away(ws: &Workspace) -> Result<BTreeSet<String>, Error> {
    Ok(crate::worktree::sessions_in_worktrees(ws.home(), ws.id())?
        .into_keys()
        .collect())
}
