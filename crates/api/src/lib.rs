//! Rewind's service API: the one place every front end (the command line, `rewind serve`'s
//! JSON-RPC, `rewind mcp`, agent hook adapters, the web UI) calls the engine through.
//!
//! Each operation takes a typed request and returns a typed response (serde, with JSON Schemas
//! generated from the types: `docs/api.md`); the command line's `--json` documents are these
//! responses, so every front returns the same documents. Every operation fails with one
//! [`ApiError`], whose [`ErrorKind`] each front maps to its own codes.
//!
//! Who asks and from where is a [`Context`]: the caller's directory and session. Fronts never
//! use `rewind-core` or `rewind-store` directly; what they need of them is re-exported here.

mod context;
mod error;
pub mod ops;
mod serde_util;
pub mod time;

use std::cell::OnceCell;

pub use context::{Context, WsPath};
pub use error::{ApiError, ErrorKind};
pub use ops::guard::*;
pub use ops::history::*;
pub use ops::record::*;
pub use ops::rewind::*;
pub use ops::sandbox::*;
pub use ops::workspace::*;
pub use ops::{Operation, OPERATIONS};
/// What resolves an error, as an operation: each front words it in its own syntax.
pub use rewind_core::Remedy;

/// Sizes (`500M`) and durations (`7d`) as configuration and flags write them.
pub use rewind_core::config::{Size, Span};
/// The structured diff: files, sections, hunks, tagged lines.
pub use rewind_core::diff::{Diff, FileDiff, Hunk, Line, Point, Section, Tag};
/// A change of one path as documents show it (`action`, `path`, `before`, `after`).
pub use rewind_core::restore::StepView;
/// Timing of phases (`REWIND_TRACE`).
pub use rewind_core::trace;
/// Live counters of a whole-tree capture, for a progress display.
pub use rewind_core::Progress;
/// Types the documents carry, for fronts that render them.
pub use rewind_core::{
    CheckpointRow, Conflict, EntryView, EpochKind, EpochRow, EpochState, Fingerprint, GuardRefusal,
    LineRange, LogItem, Owner, PatchedFile, Skipped, Uncovered,
};
/// What `gc` reports.
pub use rewind_core::{CollectedCheckpoint, GcReport, Orphan};
/// How much a sandboxed command may do.
pub use rewind_sandbox::Mode as SandboxMode;

/// The service for one caller: every operation acts from the context's directory for its
/// session. The workspace is opened once, by the first operation that needs it.
pub struct Service {
    ctx: Context,
    ws: OnceCell<rewind_core::Workspace>,
}

impl Service {
    /// A service acting for `ctx`; opens nothing yet.
    pub fn new(ctx: Context) -> Service {
        Service {
            ctx,
            ws: OnceCell::new(),
        }
    }

    /// Opens the workspace now (every operation opens it when it needs it): for a front that
    /// should fail on an unusable workspace before it reads its input.
    pub fn open(&self) -> Result<(), ApiError> {
        self.ws().map(|_| ())
    }

    /// The workspace, opened on first use.
    pub(crate) fn ws(&self) -> Result<&rewind_core::Workspace, ApiError> {
        if let Some(ws) = self.ws.get() {
            return Ok(ws);
        }
        let ws = self.ctx.open(false)?;
        Ok(self.ws.get_or_init(|| ws))
    }

    /// Who this service acts for.
    pub fn context(&self) -> &Context {
        &self.ctx
    }
}
