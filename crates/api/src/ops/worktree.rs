//! Worktrees: an isolated copy of the workspace for an agent to work in, merged back three-way
//! with a preview, or discarded.

use std::path::PathBuf;

use rewind_core::{
    CreatedWorktree, DiscardedWorktree, RewindOptions, WorktreeCreateOptions, WorktreeInfo,
    WorktreeMergeOptions,
};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::ops::rewind::RestoreResponse;
use crate::{ApiError, Service};

/// Make a worktree: a copy of the workspace as it is now (captured first), or of a checkpoint's
/// tree, outside it (by default under the state directory), registered as a workspace of its
/// own linked to this one. Ignored files are not copied unless `include_ignored`; file
/// content is cloned (reflinks) where the file system can, never hard-linked.
#[derive(Clone, Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WorktreeCreateRequest {
    /// Its name: letters, digits, `-`, `_`, `.`; unique among this workspace's worktrees.
    pub name: String,
    /// Start from this checkpoint (id, prefix or message id of the session).
    #[serde(default)]
    pub from: Option<String>,
    /// Where to put it (a new or empty directory, outside the workspace); relative to the
    /// caller's directory. Default: `$REWIND_HOME/worktrees/<workspace id>/<name>`.
    #[serde(default)]
    pub path: Option<PathBuf>,
    /// Copy ignored files too (never `.git`).
    #[serde(default)]
    pub include_ignored: bool,
}

/// See [`WorktreeCreateRequest`].
pub type WorktreeCreateResponse = CreatedWorktree;

/// This workspace's worktrees, with the paths each side changed since the worktree's base.
#[derive(Clone, Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WorktreeListRequest {}

/// See [`WorktreeListRequest`].
#[derive(Serialize, JsonSchema)]
pub struct WorktreeListResponse {
    /// By name.
    pub worktrees: Vec<WorktreeInfo>,
}

/// The directory of a worktree, to run commands there (`rewind -C PATH …`).
#[derive(Clone, Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WorktreePathRequest {
    /// The worktree's name.
    pub name: String,
}

/// See [`WorktreePathRequest`].
#[derive(Serialize, JsonSchema)]
pub struct WorktreePathResponse {
    /// The worktree's name.
    pub name: String,
    /// Its root directory.
    pub path: String,
}

/// Merge a worktree's changes since its base into this workspace, three-way: a path only the
/// worktree changed is taken; a text file both changed is merged line by line when the changes
/// do not overlap; anything else both changed is a conflict (refused, nothing changed, exit 3,
/// unless `force`: the worktree's side is taken, what it overwrites kept). Recorded as one
/// epoch of the session (tool `worktree-merge`), so `undo` takes it back.
#[derive(Clone, Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WorktreeMergeRequest {
    /// The worktree's name.
    pub name: String,
    /// Plan only, write nothing here; refused exactly as the real run would be.
    #[serde(default)]
    pub dry_run: bool,
    /// Take the worktree's side of every conflict (what it overwrites is kept in the epoch).
    #[serde(default)]
    pub force: bool,
}

/// What a merge did, or (dry run) would do: the restore document of the plan, plus which
/// worktree and trees.
#[derive(Serialize, JsonSchema)]
pub struct WorktreeMergeResponse {
    /// The worktree's name.
    pub name: String,
    /// Its root.
    pub path: String,
    /// The tree the changes were computed from (hex).
    pub base: String,
    /// The worktree's tree that was merged (hex).
    pub tree: String,
    /// The plan and its result, as `restore` reports it (`refused`: conflicts, nothing
    /// changed; `merged`: files merged line by line, with what the merge changes here).
    #[serde(flatten)]
    pub result: RestoreResponse,
}

/// Remove a worktree: its directory and its history. Refused while it holds changes this
/// workspace does not have, unless `force`.
#[derive(Clone, Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WorktreeDiscardRequest {
    /// The worktree's name.
    pub name: String,
    /// Discard it even with unmerged changes (they are lost).
    #[serde(default)]
    pub force: bool,
}

/// See [`WorktreeDiscardRequest`].
pub type WorktreeDiscardResponse = DiscardedWorktree;

impl Service {
    /// The `worktree.create` operation: see [`WorktreeCreateRequest`].
    pub fn worktree_create(
        &self,
        req: &WorktreeCreateRequest,
    ) -> Result<WorktreeCreateResponse, ApiError> {
        let ws = self.ws()?;
        let opts = WorktreeCreateOptions {
            from: req.from.clone(),
            path: req.path.as_ref().map(|p| self.ctx.file(p)),
            include_ignored: req.include_ignored,
        };
        Ok(ws.create_worktree(self.ctx.session(), &req.name, &opts)?)
    }

    /// The `worktree.list` operation: see [`WorktreeListRequest`].
    pub fn worktree_list(
        &self,
        _req: &WorktreeListRequest,
    ) -> Result<WorktreeListResponse, ApiError> {
        Ok(WorktreeListResponse {
            worktrees: self.ws()?.list_worktrees()?,
        })
    }

    /// The `worktree.path` operation: see [`WorktreePathRequest`].
    pub fn worktree_path(
        &self,
        req: &WorktreePathRequest,
    ) -> Result<WorktreePathResponse, ApiError> {
        let path = self.ws()?.worktree_path(&req.name)?;
        Ok(WorktreePathResponse {
            name: req.name.clone(),
            path: path.display().to_string(),
        })
    }

    /// The `worktree.merge` operation: see [`WorktreeMergeRequest`].
    pub fn worktree_merge(
        &self,
        req: &WorktreeMergeRequest,
    ) -> Result<WorktreeMergeResponse, ApiError> {
        let ws = self.ws()?;
        let opts = WorktreeMergeOptions {
            dry_run: req.dry_run,
            force: req.force,
            wait: None,
        };
        let m = ws.merge_worktree(self.ctx.session(), &req.name, &opts)?;
        let ropts = RewindOptions {
            dry_run: req.dry_run,
            force: req.force,
            ..Default::default()
        };
        Ok(WorktreeMergeResponse {
            name: m.name,
            path: m.path,
            base: m.base.to_hex(),
            tree: m.merged_tree.to_hex(),
            result: RestoreResponse::new(m.outcome, &ropts),
        })
    }

    /// The `worktree.discard` operation: see [`WorktreeDiscardRequest`].
    pub fn worktree_discard(
        &self,
        req: &WorktreeDiscardRequest,
    ) -> Result<WorktreeDiscardResponse, ApiError> {
        Ok(self.ws()?.discard_worktree(&req.name, req.force)?)
    }
}
