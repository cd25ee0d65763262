//! Looking at the history: the log, one checkpoint or epoch, and diffs.

use std::path::PathBuf;

use rewind_core::restore::StepView;
use rewind_core::{relpath, Change, CheckpointRow, EpochRow, LogItem, Target};
use rewind_store::EntryKind;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::time::rfc3339;
use crate::{ApiError, Diff, Service};

fn default_limit() -> usize {
    100
}

/// Checkpoints and epochs of the session (and external changes), newest first.
#[derive(Clone, Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LogRequest {
    /// Every session's checkpoints and epochs, not only the current session's.
    #[serde(default)]
    pub all_sessions: bool,
    /// At most this many entries (0: no limit).
    #[serde(default = "default_limit")]
    pub limit: usize,
}

impl Default for LogRequest {
    fn default() -> LogRequest {
        LogRequest {
            all_sessions: false,
            limit: default_limit(),
        }
    }
}

/// One entry of the log.
#[derive(Clone, Debug, Serialize, JsonSchema)]
pub struct LogEntry {
    /// The epoch or checkpoint (its fields inline, `type` says which).
    #[serde(flatten)]
    pub item: LogItem,
    /// `created_ns` as local RFC 3339 time.
    pub time: String,
}

/// The log, newest first.
#[derive(Clone, Debug, Serialize, JsonSchema)]
pub struct LogResponse {
    /// The session shown, `null` with `all_sessions`.
    pub session: Option<String>,
    /// Epochs and checkpoints, newest first.
    pub items: Vec<LogEntry>,
    /// Whether older entries were left out by the limit.
    pub more: bool,
}

/// One checkpoint or epoch: all its fields, and for an epoch the paths it changed.
#[derive(Clone, Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ShowRequest {
    /// Epoch or checkpoint id (unique prefix), or a message id of the session.
    pub id: String,
}

/// One change of an epoch as `show` lists it: a change, and whether it is uncovered or
/// pending.
#[derive(Serialize, JsonSchema)]
pub struct ShownChange {
    /// `pending` or `uncovered` in place of the action when so.
    #[serde(flatten)]
    pub change: StepView,
    /// Either side was not captured (content unknown; a restore cannot bring it back).
    pub uncovered: bool,
    /// The epoch is open and this path's post image is not recorded yet.
    pub pending: bool,
}

impl ShownChange {
    fn new(c: &Change, pending: bool) -> ShownChange {
        let mut change = StepView::from(c);
        let uncovered = [c.before, c.after]
            .iter()
            .flatten()
            .any(|e| e.kind == EntryKind::Uncovered);
        if pending {
            change.action = "pending".into();
            change.after = None;
        } else if uncovered {
            change.action = "uncovered".into();
        }
        ShownChange {
            change,
            uncovered,
            pending,
        }
    }
}

/// An epoch as `show` returns it.
#[derive(Serialize, JsonSchema)]
pub struct ShownEpoch {
    /// Every field of the epoch, inline.
    #[serde(flatten)]
    pub epoch: EpochRow,
    /// `created_ns` as local RFC 3339 time.
    pub time: String,
    /// Declared paths of an exact epoch.
    pub paths: Vec<String>,
    /// The whole-tree state before an opaque epoch, if recorded.
    pub pre_root: Option<String>,
    /// What it changed, sorted by path.
    pub changes: Vec<ShownChange>,
}

/// A checkpoint as `show` returns it.
#[derive(Serialize, JsonSchema)]
pub struct ShownCheckpoint {
    /// Every field of the checkpoint, inline.
    #[serde(flatten)]
    pub checkpoint: CheckpointRow,
    /// `created_ns` as local RFC 3339 time.
    pub time: String,
    /// Size of the stored payload in bytes, `null` when none.
    pub payload_size: Option<usize>,
}

/// What `show` found: `type` says which.
#[derive(Serialize, JsonSchema)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum ShowResponse {
    /// The id named an epoch.
    Epoch(ShownEpoch),
    /// The id named a checkpoint (or a message bound to one).
    Checkpoint(ShownCheckpoint),
}

/// A unified diff of an epoch, of a checkpoint against now, or between two checkpoints.
#[derive(Clone, Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DiffRequest {
    /// An epoch (what it changed) or a checkpoint (what a restore of its session to it would
    /// undo: the checkpoint is a/, the workspace now b/); id, unique prefix or message id.
    pub id: String,
    /// A second checkpoint: the whole tree of `id` (a/) against this one's (b/).
    #[serde(default)]
    pub id2: Option<String>,
    /// Limit to these paths (and what is under them).
    #[serde(default)]
    pub paths: Vec<PathBuf>,
}

/// See [`DiffRequest`].
pub type DiffResponse = Diff;

impl Service {
    /// A number that changes whenever another process or handle commits to the workspace's
    /// op log or store: a front that polls the log (the server's event follower) reads it
    /// again only when this changed. Not an operation of its own (no method, no command).
    pub fn commits_seen(&self) -> Result<i64, ApiError> {
        Ok(self.ws()?.commits_seen()?)
    }

    /// The `log` operation: see [`LogRequest`].
    pub fn log(&self, req: &LogRequest) -> Result<LogResponse, ApiError> {
        let ws = self.ws()?;
        let session = (!req.all_sessions).then(|| self.ctx.session().to_string());
        let limit = if req.limit == 0 {
            i64::MAX as usize - 1
        } else {
            req.limit
        };
        let mut items = ws.log(session.as_deref(), limit + 1)?;
        let more = items.len() > limit;
        items.truncate(limit);
        let items = items
            .into_iter()
            .map(|item| {
                let ns = match &item {
                    LogItem::Epoch { epoch, .. } => epoch.created_ns,
                    LogItem::Checkpoint { checkpoint } => checkpoint.created_ns,
                    LogItem::Setting { setting } => setting.created_ns,
                };
                LogEntry {
                    item,
                    time: rfc3339(ns),
                }
            })
            .collect();
        Ok(LogResponse {
            session,
            items,
            more,
        })
    }

    /// The op log's newest position: it grows with every epoch begun or settled, checkpoint
    /// and restore, by any process. One row read and no lock, so a front that shows the
    /// history (`rewind tui`) polls it to know when to read the log again. Not an operation
    /// of its own: `subscribe` is the server's way to be told.
    pub fn position(&self) -> Result<i64, ApiError> {
        Ok(self.ws()?.position()?)
    }

    /// The `show` operation: see [`ShowRequest`].
    pub fn show(&self, req: &ShowRequest) -> Result<ShowResponse, ApiError> {
        let ws = self.ws()?;
        Ok(match ws.resolve(self.ctx.session(), &req.id)? {
            Target::Epoch(e) => ShowResponse::Epoch(ShownEpoch {
                changes: ws
                    .epoch_changes_pending(&e.id)?
                    .iter()
                    .map(|(c, p)| ShownChange::new(c, *p))
                    .collect(),
                time: rfc3339(e.created_ns),
                paths: e.paths.iter().map(|p| relpath::display(p)).collect(),
                pre_root: e.pre_root.map(|r| r.to_hex()),
                epoch: e,
            }),
            Target::Checkpoint(c) => ShowResponse::Checkpoint(ShownCheckpoint {
                time: rfc3339(c.created_ns),
                payload_size: c.payload.as_ref().map(Vec::len),
                checkpoint: c,
            }),
        })
    }

    /// The `diff` operation: see [`DiffRequest`]. Writes nothing.
    pub fn diff(&self, req: &DiffRequest) -> Result<DiffResponse, ApiError> {
        let ws = self.ws()?;
        let mut scope = self.ctx.ws_paths(ws.root(), &req.paths)?;
        if scope.iter().any(Vec::is_empty) {
            scope.clear(); // the root itself: everything
        }
        let session = self.ctx.session();
        let first = ws.resolve(session, &req.id)?;
        let second = match &req.id2 {
            Some(t) => Some(ws.resolve(session, t)?),
            None => None,
        };
        let hint = |e: rewind_core::Error| self.clone_hint(e.into());
        Ok(match (first, second) {
            (Target::Epoch(e), None) => ws.diff_epoch(&e, &scope).map_err(hint)?,
            (Target::Checkpoint(c), None) => ws.diff_checkpoint_now(&c, &scope).map_err(hint)?,
            (Target::Checkpoint(a), Some(Target::Checkpoint(b))) => {
                ws.diff_checkpoints(&a, &b, &scope).map_err(hint)?
            }
            (a, Some(b)) => {
                let kind = |t: &Target| match t {
                    Target::Epoch(_) => "an epoch",
                    Target::Checkpoint(_) => "a checkpoint",
                };
                return Err(ApiError::usage(format!(
                    "diff of two points supports two checkpoints, and {} is {} and {} is {}; \
                     `rewind diff EPOCH` shows one epoch's own changes, `rewind diff CHECKPOINT` \
                     a checkpoint against now",
                    a.id(),
                    kind(&a),
                    b.id(),
                    kind(&b)
                )));
            }
        })
    }
}
