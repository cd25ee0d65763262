//! Rewinding: restoring the session to a checkpoint or epoch, and undoing one epoch.

use std::path::PathBuf;

use rewind_core::restore::StepView;
use rewind_core::{Conflict, Mode, RewindOptions, RewindOutcome, Skipped};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::{ApiError, Service};

/// Restore the session to a target: undo every change the session made after it (its own
/// restores included, so restoring to a checkpoint from before a rewind is redo).
#[derive(Clone, Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RestoreRequest {
    /// A checkpoint id, a message id, or an epoch id ("just before that epoch"); unique
    /// prefixes are accepted.
    pub target: String,
    /// Plan only, write nothing; refused exactly as the real run would be.
    #[serde(default)]
    pub dry_run: bool,
    /// Overwrite conflicting paths (their current content is kept in the restore epoch).
    #[serde(default)]
    pub force: bool,
    /// Make the whole workspace (or the given paths) equal to the target's tree, whoever
    /// changed it (no conflict check; what it overwrites is kept).
    #[serde(default)]
    pub all: bool,
    /// Restore files, leave the session head where it is.
    #[serde(default)]
    pub files_only: bool,
    /// Move the session head only ("undo the message, keep the files").
    #[serde(default)]
    pub head_only: bool,
    /// Limit to these paths (and what is under them).
    #[serde(default)]
    pub paths: Vec<PathBuf>,
    /// Where a path was changed since by someone else, undo only the session's lines when
    /// the changes touch different lines (a conflict otherwise, naming the lines); default:
    /// the `[restore] merge` setting (off).
    #[serde(default)]
    pub merge: Option<bool>,
}

/// Undo the session's last epoch (or the named one); undoing a restore is redo.
#[derive(Clone, Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct UndoRequest {
    /// The epoch (id or unique prefix); default: the session's newest.
    #[serde(default)]
    pub epoch: Option<String>,
    /// Plan only, write nothing; refused exactly as the real run would be.
    #[serde(default)]
    pub dry_run: bool,
    /// Overwrite conflicting paths (their current content is kept in the restore epoch).
    #[serde(default)]
    pub force: bool,
    /// As for `restore`: merge where the changes touch different lines.
    #[serde(default)]
    pub merge: Option<bool>,
}

/// What a restore or undo did, or (dry run) would do. Refused (`refused: true`, nothing
/// changed) when paths conflict and `force` was not given: the command line exits 3.
#[derive(Serialize, JsonSchema)]
pub struct RestoreResponse {
    /// The request was a dry run: nothing was written.
    pub dry_run: bool,
    /// Files (or the head) were changed.
    pub applied: bool,
    /// Refused for conflicts: nothing was changed.
    pub refused: bool,
    /// Per path, what it was (`before`) and what it became, or would become.
    pub steps: Vec<StepView>,
    /// Paths changed by someone else since the session wrote them.
    pub conflicts: Vec<Conflict>,
    /// Paths left alone because their earlier content was never captured.
    pub skipped: Vec<Skipped>,
    /// Directories that should have gone but still hold files Rewind does not track.
    pub kept: Vec<Skipped>,
    /// The restore epoch that records it (undo it to bring back what it overwrote).
    pub epoch: Option<String>,
    /// The session head after the restore.
    pub head: Option<String>,
    /// The target checkpoint's payload (lossy UTF-8).
    pub payload: Option<String>,
    /// Files merged (`merge`): the session's lines undone, everyone else's kept. Their steps
    /// are in `steps`.
    pub merged: Vec<MergedFile>,
}

/// A file a merged restore changes.
#[derive(Serialize, JsonSchema)]
pub struct MergedFile {
    /// Workspace-relative path.
    pub path: String,
    /// What the merge changes in the file as it is now: a unified diff.
    pub patch: String,
}

/// See [`UndoRequest`].
pub type UndoResponse = RestoreResponse;

impl RestoreResponse {
    pub(crate) fn new(out: RewindOutcome, opts: &RewindOptions) -> RestoreResponse {
        RestoreResponse {
            dry_run: opts.dry_run,
            applied: out.applied,
            refused: !out.conflicts.is_empty() && !opts.force,
            steps: out.steps.iter().map(Into::into).collect(),
            conflicts: out.conflicts,
            skipped: out.skipped,
            kept: out.kept,
            epoch: out.epoch,
            head: out.head,
            payload: out
                .payload
                .as_ref()
                .map(|p| String::from_utf8_lossy(p).into_owned()),
            merged: out
                .merged
                .iter()
                .map(|m| MergedFile {
                    path: rewind_core::relpath::display(&m.path),
                    patch: m.patch.clone(),
                })
                .collect(),
        }
    }
}

impl Service {
    /// The `restore` operation: see [`RestoreRequest`].
    pub fn restore(&self, req: &RestoreRequest) -> Result<RestoreResponse, ApiError> {
        let ws = self.ws()?;
        let paths = self.ctx.ws_paths(ws.root(), &req.paths)?;
        let target = ws.resolve(self.ctx.session(), &req.target)?;
        let mode = if req.head_only {
            Mode::HeadOnly
        } else if req.files_only {
            Mode::FilesOnly
        } else {
            Mode::Both
        };
        let opts = RewindOptions {
            dry_run: req.dry_run,
            force: req.force,
            all: req.all,
            mode,
            paths,
            wait: None,
            merge: req.merge.unwrap_or(ws.config().restore.merge()),
        };
        let out = ws
            .restore(self.ctx.session(), &target, &opts)
            .map_err(|e| self.clone_hint(e.into()))?;
        Ok(RestoreResponse::new(out, &opts))
    }

    /// The `undo` operation: see [`UndoRequest`].
    pub fn undo(&self, req: &UndoRequest) -> Result<UndoResponse, ApiError> {
        let ws = self.ws()?;
        let opts = RewindOptions {
            dry_run: req.dry_run,
            force: req.force,
            merge: req.merge.unwrap_or(ws.config().restore.merge()),
            ..Default::default()
        };
        let out = ws
            .undo(self.ctx.session(), req.epoch.as_deref(), &opts)
            .map_err(|e| self.clone_hint(e.into()))?;
        Ok(RestoreResponse::new(out, &opts))
    }
}
