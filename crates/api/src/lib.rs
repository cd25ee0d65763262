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

pub mod command;
mod context;
mod error;
pub mod ops;
pub mod remote;
pub mod rpc;
mod serde_util;
#[cfg(all(target_os = "linux", target_env = "gnu"))]
mod spawn;
pub mod time;

use std::cell::OnceCell;

pub use context::{Context, WsPath};
pub use error::{ApiError, ErrorKind};
pub use ops::guard::*;
pub use ops::history::*;
pub use ops::record::*;
pub use ops::remote::*;
pub use ops::rewind::*;
pub use ops::sandbox::*;
pub use ops::shadow::*;
pub use ops::workspace::*;
pub use ops::worktree::*;
pub use ops::{Operation, OPERATIONS};
pub use remote::Endpoint;
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
/// A long-running process's file watcher, shared by its services (see
/// [`Service::with_live_watch`]).
pub use rewind_core::LiveWatch;
/// Live counters of a whole-tree capture, for a progress display.
pub use rewind_core::Progress;
pub use rewind_core::{Adopted, Forgotten, OrphanState, Registered, Relinked, RootState};
/// Types the documents carry, for fronts that render them.
pub use rewind_core::{
    CheckpointRow, Conflict, EntryView, EpochKind, EpochRow, EpochState, Fingerprint, GuardRefusal,
    LineRange, LogItem, Owner, PatchedFile, Skipped, Uncovered,
};
/// What `gc` reports.
pub use rewind_core::{CollectedCheckpoint, GcReport, Orphan};
/// The configuration, and what the hook adapters' guard does.
pub use rewind_core::{Config, HookGuard};
/// The state directory's workspaces: listing, moving, forgetting, re-linking.
pub use rewind_core::{CreatedWorktree, DiscardedWorktree, WorktreeInfo};
/// Where a workspace's server runs (`status`), and the files that say so.
pub use rewind_core::{ServerInfo, SERVER_INFO, SERVER_LOCK, SERVER_TOKEN};
/// How much a sandboxed command may do.
pub use rewind_sandbox::Mode as SandboxMode;
/// The object ids a long-running process knows are stored, shared by its services (see
/// [`Service::with_known_ids`]).
pub use rewind_store::KnownIds;
/// WAL checkpoints on a thread of their own, for a process that keeps running (see
/// [`Service::with_wal_checkpointer`]).
pub use rewind_store::WalCheckpointer;

/// What a front does when an open re-links the workspace (see [`Service::on_relink`]).
type OnRelink = Box<dyn Fn(&Relinked) + Send>;

/// The service for one caller: every operation acts from the context's directory for its
/// session. The workspace is opened once, by the first operation that needs it.
pub struct Service {
    ctx: Context,
    ws: OnceCell<rewind_core::Workspace>,
    live: Option<LiveWatch>,
    known: Option<std::sync::Arc<KnownIds>>,
    wal: Option<std::sync::Arc<WalCheckpointer>>,
    page_cache: Option<u64>,
    on_relink: Option<OnRelink>,
}

impl Service {
    /// A service acting for `ctx`; opens nothing yet.
    pub fn new(ctx: Context) -> Service {
        Service {
            ctx,
            ws: OnceCell::new(),
            live: None,
            known: None,
            wal: None,
            page_cache: None,
            on_relink: None,
        }
    }

    /// Its captures re-read only what `watch` saw change since the previous capture of any
    /// service sharing it, instead of walking the tree: for a process that keeps running
    /// (`rewind serve`), whose services share one watcher. The first capture through a new
    /// watcher walks everything and arms it (see [`Service::capture`]).
    pub fn with_live_watch(mut self, watch: LiveWatch) -> Service {
        self.live = Some(watch);
        self
    }

    /// Its store answers deduplication lookups from `known`, kept in memory by a process that
    /// keeps running (`rewind serve`) for all its services, instead of asking the index once
    /// per new object.
    pub fn with_known_ids(mut self, known: std::sync::Arc<KnownIds>) -> Service {
        self.known = Some(known);
        self
    }

    /// Its store leaves WAL checkpoints to `wal`, a thread of a process that keeps running
    /// (`rewind serve`), which nudges it after each request: no commit of its copies the WAL
    /// into the database before it returns.
    pub fn with_wal_checkpointer(mut self, wal: std::sync::Arc<WalCheckpointer>) -> Service {
        self.wal = Some(wal);
        self
    }

    /// Its store's connection caches at most `bytes` of database pages (see
    /// [`rewind_store::Store::limit_page_cache`]): for a process that keeps many services open
    /// at once (`rewind serve`, one per client), whose caches would each fill up to the
    /// default bound.
    pub fn with_page_cache(mut self, bytes: u64) -> Service {
        self.page_cache = Some(bytes);
        self
    }

    /// Starts a thread that checkpoints the WAL of the workspace's database when nudged, for
    /// services to leave their checkpoints to ([`Service::with_wal_checkpointer`]).
    pub fn start_wal_checkpointer(&self) -> Result<WalCheckpointer, ApiError> {
        Ok(self.ws()?.store().start_wal_checkpointer()?)
    }

    /// Its store, opened now if it is not yet, leaves WAL checkpoints to `wal` from now on
    /// (see [`Service::with_wal_checkpointer`]): for a front that opens its service before it
    /// can start the thread (`rewind mcp`), and that nudges the thread after each request.
    pub fn leave_checkpoints_to(&self, wal: &WalCheckpointer) -> Result<(), ApiError> {
        Ok(self.ws()?.store().leave_checkpoints_to(wal)?)
    }

    /// Captures the whole tree now, recording what changed since the last known state as an
    /// external epoch and the capture as a snapshot labelled `label`; the snapshot's
    /// op-log position. A server does this when it starts: it finds what changed while no
    /// server ran, and arms its watcher.
    pub fn capture(&self, label: &str) -> Result<i64, ApiError> {
        Ok(self.ws()?.snapshot(label, None)?.1)
    }

    /// Writes the stat cache a server kept in memory to `state.bin`, if it is newer than the
    /// file (a server writes the file at most every 10 s): a server does this when it stops,
    /// so the next command starts from it.
    pub fn save_kept_state(&self) -> Result<(), ApiError> {
        Ok(self.ws()?.save_kept_state()?)
    }

    /// Calls `f` when opening the workspace re-links it: its root had moved to where the
    /// caller is, and its history now follows it. It happens once (the next open finds the
    /// workspace registered there); a front tells the user.
    pub fn on_relink(mut self, f: impl Fn(&Relinked) + Send + 'static) -> Service {
        self.on_relink = Some(Box::new(f));
        self
    }

    /// Opens the workspace (see [`Context`]), telling [`Service::on_relink`] of a re-link.
    pub(crate) fn open_workspace(&self, force: bool) -> Result<rewind_core::Workspace, ApiError> {
        let ws = self.ctx.open(force)?;
        if let (Some(r), Some(f)) = (ws.relinked(), &self.on_relink) {
            f(r);
        }
        Ok(ws)
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
        let ws = self.open_workspace(false)?;
        if let Some(w) = &self.live {
            ws.use_live_watch(w.clone());
        }
        if let Some(k) = &self.known {
            ws.store().share_known_ids(k.clone());
        }
        if let Some(w) = &self.wal {
            // Best effort: a store that keeps its automatic checkpoint is correct, only slower.
            let _ = ws.store().leave_checkpoints_to(w);
        }
        if let Some(bytes) = self.page_cache {
            // Best effort too: a larger cache only holds more memory.
            let _ = ws.store().limit_page_cache(bytes);
        }
        Ok(self.ws.get_or_init(|| ws))
    }

    /// The configuration that applies to the context's workspace (the user's `config.toml`
    /// and the workspace's `.rewind.toml`), without opening the workspace.
    pub fn config(&self) -> Result<rewind_core::Config, ApiError> {
        let home = rewind_core::rewind_home()?;
        Ok(rewind_core::Config::load(&home, Some(&self.ctx.root()))?)
    }

    /// Who this service acts for.
    pub fn context(&self) -> &Context {
        &self.ctx
    }

    /// The same service (its workspace open, if it is) acting for requests of process `peer`
    /// (see [`Context::with_peer`]; `None`: of this process): a process that keeps services
    /// between its clients gives one to the next client of the same session.
    pub fn for_peer(mut self, peer: Option<u32>) -> Service {
        self.ctx.set_peer(peer);
        self
    }

    /// Whether this service can serve another client as it is (see [`Service::for_peer`]):
    /// it holds no open epoch's lock or watcher, and the configuration it read is current.
    pub fn is_reusable(&self) -> bool {
        self.ws.get().is_none_or(|ws| ws.is_reusable())
    }
}
