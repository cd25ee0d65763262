//! The workspace as a whole: register and capture it, its status, verifying the store, and
//! finishing interrupted work; and the state directory's workspaces: list, move, forget.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use std::path::{Path, PathBuf};

use crate::{Adopted, ApiError, ErrorKind, Forgotten, Progress, Registered, Relinked, Service};

/// Register the workspace (on first use) and take a whole-tree capture.
#[derive(Clone, Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct InitRequest {
    /// Allow `/` or the home directory as a workspace, or register anew a directory that was
    /// replaced since it was registered.
    #[serde(default)]
    pub force: bool,
}

/// What `init` registered and captured.
#[derive(Clone, Debug, Serialize, JsonSchema)]
pub struct InitResponse {
    /// The workspace id (its state directory's name).
    pub id: String,
    /// The canonical root directory.
    pub root: String,
    /// Where its state lives: `$REWIND_HOME/workspaces/<id>`.
    pub state_dir: String,
    /// This call registered the workspace (false: it was registered already).
    pub registered: bool,
    /// The captured tree's id.
    pub root_tree: String,
    /// Paths in the captured tree.
    pub entries: u64,
    /// Files and symlinks read and hashed (the stat cache vouched for the others).
    pub files_hashed: u64,
    /// Their total size in bytes.
    pub bytes_hashed: u64,
    /// Large files cloned into the state instead (`capture.reflink`): nothing read.
    pub files_cloned: u64,
    /// Their total size in bytes.
    pub bytes_cloned: u64,
    /// Objects stored that the store did not hold before.
    pub new_objects: u64,
    /// Paths that exist but whose content could not be captured: never restored or deleted.
    pub uncovered: Vec<rewind_core::Uncovered>,
    /// Problems that did not stop the capture (a malformed ignore file), for a person.
    pub warnings: Vec<String>,
}

/// The workspace root and id, store size, sessions and heads, open epochs, unfinished restores
/// and uncovered paths.
#[derive(Clone, Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StatusRequest {}

/// See [`StatusRequest`].
pub type StatusResponse = rewind_core::Status;

/// Verify every stored object and every reference; name what is lost.
#[derive(Clone, Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FsckRequest {}

/// What `fsck` found. Not an error when something is lost: the report names it (`ok: false`;
/// the command line exits 7).
#[derive(Clone, Debug, Serialize, JsonSchema)]
pub struct FsckResponse {
    /// Nothing is lost: `problems` is empty.
    pub ok: bool,
    /// Pack files read.
    pub packs_checked: u64,
    /// Objects read, decompressed, hashed and decoded.
    pub objects_checked: u64,
    /// Of them, large files cloned into the state (`capture.reflink`): each clone file checked
    /// present at its length, and hashed against its packed copy where it has one.
    pub clones_checked: u64,
    /// Of those, clones with no packed copy (`rewind push` makes one): their bytes have no
    /// hash to be checked against.
    pub clones_unhashed: u64,
    /// One line per problem: a corrupt or missing object or pack, and the checkpoints and
    /// paths that can no longer be restored because of it.
    pub problems: Vec<String>,
}

/// Finish interrupted restores (forward, or back when they had failed) and settle epochs whose
/// process died. Every operation that changes the workspace does this first.
#[derive(Clone, Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RecoverRequest {}

/// See [`RecoverRequest`].
pub type RecoverResponse = rewind_core::Recovered;

/// Every workspace registered in the state directory, with its root, whether the root is
/// still there, its size and when it was last used.
#[derive(Clone, Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WorkspaceListRequest {}

/// What `workspace.list` found.
#[derive(Clone, Debug, Serialize, JsonSchema)]
pub struct WorkspaceListResponse {
    /// The registered workspaces, in id order.
    pub workspaces: Vec<Registered>,
}

/// Move a workspace's history to another directory: rename the directory too when it is
/// still at its registered root and `new` does not exist (one file system), or only re-link
/// the history when the directory was already moved to `new`.
#[derive(Clone, Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WorkspaceMoveRequest {
    /// The registered root (it may be gone), or the workspace id; relative to the caller's
    /// directory.
    pub old: PathBuf,
    /// Where the workspace is (or goes); relative to the caller's directory.
    pub new: PathBuf,
}

/// See [`WorkspaceMoveRequest`].
pub type WorkspaceMoveResponse = Relinked;

/// Delete a workspace's history (its whole state directory). The workspace's files are not
/// touched.
#[derive(Clone, Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WorkspaceForgetRequest {
    /// The registered root (it may be gone), or the workspace id; relative to the caller's
    /// directory.
    pub path: PathBuf,
    /// Only say what would be deleted.
    #[serde(default)]
    pub dry_run: bool,
}

/// See [`WorkspaceForgetRequest`].
pub type WorkspaceForgetResponse = Forgotten;

/// Register a directory (a copy of a project, typically) as a new workspace whose history
/// starts as a copy of another workspace's: its checkpoints, sessions and stored content. The
/// other workspace is not changed.
#[derive(Clone, Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WorkspaceAdoptRequest {
    /// The workspace whose history to start from: its registered root (it may be gone) or
    /// its id; relative to the caller's directory.
    pub from: PathBuf,
    /// The directory to register; the caller's directory when absent.
    #[serde(default)]
    pub dir: Option<PathBuf>,
}

/// See [`WorkspaceAdoptRequest`].
pub type WorkspaceAdoptResponse = Adopted;

/// Drop old history under the retention policy and free its space: keep each session's newest
/// `keep` checkpoints, drop those older than `max_age`, then the oldest until the state fits
/// `max_bytes`. Heads, pinned checkpoints, open epochs and unfinished restores are always
/// kept. Unset limits come from `[retention]`. Also removes orphaned workspaces idle past the
/// age.
#[derive(Clone, Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GcRequest {
    /// Report what would go, write nothing.
    #[serde(default)]
    pub dry_run: bool,
    /// Size budget of the workspace's state, in bytes: a number, or a string as `gc
    /// --max-bytes` takes it (`"500M"`, `"2G"`).
    #[serde(default, deserialize_with = "crate::serde_util::opt_size")]
    #[schemars(with = "Option<crate::serde_util::NumberOrText>")]
    pub max_bytes: Option<u64>,
    /// Checkpoints older than this may go: a number of seconds, or a string as `gc --max-age`
    /// takes it (`"12h"`, `"7d"`). Also accepted as `max_age`, the command line's name.
    #[serde(
        default,
        alias = "max_age",
        deserialize_with = "crate::serde_util::opt_secs"
    )]
    #[schemars(with = "Option<crate::serde_util::NumberOrText>")]
    pub max_age_secs: Option<u64>,
    /// Each session's newest this many checkpoints are kept.
    #[serde(default)]
    pub keep: Option<u64>,
    /// Also every other workspace registered in the same state directory whose root exists
    /// (each under its own configuration for unset limits).
    #[serde(default)]
    pub all_workspaces: bool,
    /// Run only if the state exceeds `[retention] max_bytes` and no other gc runs (what a
    /// front starts after a checkpoint); otherwise return at once with `skipped`.
    #[serde(default)]
    pub auto: bool,
    /// Then collect this remote too (by name): this workspace's history there is compacted to
    /// what the policy kept, marks older than their grace period are swept, and what no
    /// history references is marked (`docs/format.md`, Remote store).
    #[serde(default)]
    pub remote: Option<String>,
    /// With `remote`: how long an unreferenced remote object stays after it is marked, a
    /// number of seconds or a string as `gc --grace` takes it (`"1h"`; default 3600; at least
    /// twice the push window, 60 s). Also accepted as `grace`, the command line's name.
    #[serde(
        default,
        alias = "grace",
        deserialize_with = "crate::serde_util::opt_secs"
    )]
    #[schemars(with = "Option<crate::serde_util::NumberOrText>")]
    pub grace_secs: Option<u64>,
}

/// What `gc` did in this workspace (inline) and, with `all_workspaces`, in the others.
#[derive(Clone, Debug, Serialize, JsonSchema)]
pub struct GcResponse {
    /// This workspace's report.
    #[serde(flatten)]
    pub report: rewind_core::GcReport,
    /// The other workspaces' (empty without `all_workspaces`).
    pub workspaces: Vec<OtherGc>,
    /// The remote's, with `remote`.
    pub remote: Option<rewind_remote::RemoteGcReport>,
}

/// One other workspace's gc, for `all_workspaces`.
#[derive(Clone, Debug, Serialize, JsonSchema)]
pub struct OtherGc {
    /// Its root.
    pub root: String,
    /// Its report, when it ran.
    pub report: Option<rewind_core::GcReport>,
    /// Why it did not run (it could not be opened, or its lock was busy).
    pub error: Option<String>,
}

/// Complete the baseline: hash every file a `capture.time_budget` left uncovered (within
/// `capture.max_file_size`) and record them, a chunk at a time, holding the workspace lock only
/// to record each chunk. Commands start one in the background when their capture ran out of
/// budget; one runs per workspace (a second returns at once, `already_running`).
#[derive(Clone, Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BaselineRequest {}

/// What the run did.
pub type BaselineResponse = rewind_core::BaselineReport;

/// Pin a checkpoint (never collected) or unpin it.
#[derive(Clone, Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PinRequest {
    /// The checkpoint: its id, a unique prefix, or a message id of the session.
    pub id: String,
}

/// The checkpoint, with its pin as it is now.
pub type PinResponse = rewind_core::CheckpointRow;

impl Service {
    /// The `gc` operation: see [`GcRequest`].
    pub fn gc(&self, req: &GcRequest) -> Result<GcResponse, ApiError> {
        if req.remote.is_some() && (req.all_workspaces || req.auto) {
            return Err(ApiError::new(
                ErrorKind::Usage,
                "a remote is collected from one workspace at a time: leave out all_workspaces \
                 and auto with remote",
            ));
        }
        if req.remote.is_none() && req.grace_secs.is_some() {
            return Err(ApiError::new(
                ErrorKind::Usage,
                "grace applies to a remote's collection: give remote too",
            ));
        }
        let ws = self.ws()?;
        // The remote and the grace are checked before anything is collected here.
        let remote = match &req.remote {
            None => None,
            Some(name) => {
                let home = rewind_core::rewind_home()?;
                let grace = req
                    .grace_secs
                    .map_or(rewind_remote::DEFAULT_GRACE, std::time::Duration::from_secs);
                rewind_remote::check_grace(grace)?;
                let l = rewind_remote::resolve(&home, ws, Some(name))?;
                let remote = rewind_remote::Remote::open(l, false)?;
                let opts = rewind_remote::RemoteGcOptions {
                    dry_run: req.dry_run,
                    grace,
                };
                Some((remote, opts))
            }
        };
        let opts = rewind_core::GcOptions {
            dry_run: req.dry_run,
            max_bytes: req.max_bytes,
            max_age: req.max_age_secs.map(std::time::Duration::from_secs),
            keep: req.keep,
            auto: req.auto,
        };
        let report = ws.gc(&opts)?;
        let mut workspaces = Vec::new();
        if req.all_workspaces {
            for root in ws.other_workspaces() {
                let run = rewind_core::Workspace::open(&root, &rewind_core::OpenOptions::default())
                    .and_then(|other| other.gc(&opts));
                workspaces.push(match run {
                    Ok(r) => OtherGc {
                        root: root.display().to_string(),
                        report: Some(r),
                        error: None,
                    },
                    Err(e) => OtherGc {
                        root: root.display().to_string(),
                        report: None,
                        error: Some(e.to_string()),
                    },
                });
            }
        }
        let remote = match remote {
            None => None,
            Some((remote, opts)) => Some(rewind_remote::gc(ws, &remote, &opts)?),
        };
        Ok(GcResponse {
            report,
            workspaces,
            remote,
        })
    }

    /// Whether the workspace's state exceeds `[retention] max_bytes`: a front starts an
    /// automatic `gc` (request `auto`) after a checkpoint when it does, off its own path.
    pub fn gc_due(&self) -> Result<bool, ApiError> {
        Ok(self.ws()?.gc_due())
    }

    /// Whether a capture left files for a background baseline: a front then starts the
    /// `baseline` operation off its own path (see [`BaselineRequest`]).
    pub fn baseline_due(&self) -> Result<bool, ApiError> {
        Ok(self.ws()?.baseline_due())
    }

    /// The `baseline` operation: see [`BaselineRequest`].
    pub fn baseline(&self, _req: &BaselineRequest) -> Result<BaselineResponse, ApiError> {
        Ok(self.ws()?.complete_baseline(None)?)
    }

    /// The `pin` operation: see [`PinRequest`].
    pub fn pin(&self, req: &PinRequest) -> Result<PinResponse, ApiError> {
        Ok(self.ws()?.pin(self.ctx.session(), &req.id, true)?)
    }

    /// The `unpin` operation: see [`PinRequest`].
    pub fn unpin(&self, req: &PinRequest) -> Result<PinResponse, ApiError> {
        Ok(self.ws()?.pin(self.ctx.session(), &req.id, false)?)
    }

    /// A root or workspace id the caller gave: an id as it is, a path from the caller's
    /// directory.
    fn registered_path(&self, p: &Path) -> PathBuf {
        let is_id = p
            .to_str()
            .is_some_and(|s| s.len() == 32 && s.bytes().all(|b| b.is_ascii_hexdigit()));
        if is_id && !self.ctx.file(p).exists() {
            p.to_path_buf()
        } else {
            self.ctx.file(p)
        }
    }

    /// The `workspace.list` operation: see [`WorkspaceListRequest`]. Reads only.
    pub fn workspace_list(
        &self,
        _req: &WorkspaceListRequest,
    ) -> Result<WorkspaceListResponse, ApiError> {
        let home = rewind_core::rewind_home()?;
        Ok(WorkspaceListResponse {
            workspaces: rewind_core::registered(&home),
        })
    }

    /// The `workspace.move` operation: see [`WorkspaceMoveRequest`].
    pub fn workspace_move(
        &self,
        req: &WorkspaceMoveRequest,
    ) -> Result<WorkspaceMoveResponse, ApiError> {
        let home = rewind_core::rewind_home()?;
        Ok(rewind_core::move_workspace(
            &home,
            &self.registered_path(&req.old),
            &self.ctx.file(&req.new),
        )?)
    }

    /// The `workspace.adopt` operation: see [`WorkspaceAdoptRequest`].
    pub fn workspace_adopt(
        &self,
        req: &WorkspaceAdoptRequest,
    ) -> Result<WorkspaceAdoptResponse, ApiError> {
        let home = rewind_core::rewind_home()?;
        let dir = match &req.dir {
            Some(d) => self.ctx.file(d),
            None => self.ctx.dir().to_path_buf(),
        };
        Ok(rewind_core::adopt(
            &home,
            &self.registered_path(&req.from),
            &dir,
        )?)
    }

    /// The `workspace.forget` operation: see [`WorkspaceForgetRequest`].
    pub fn workspace_forget(
        &self,
        req: &WorkspaceForgetRequest,
    ) -> Result<WorkspaceForgetResponse, ApiError> {
        let home = rewind_core::rewind_home()?;
        Ok(rewind_core::forget(
            &home,
            &self.registered_path(&req.path),
            req.dry_run,
        )?)
    }

    /// Registers and captures the workspace; `progress` is updated while it walks.
    pub fn init(
        &self,
        req: &InitRequest,
        progress: Option<&Progress>,
    ) -> Result<InitResponse, ApiError> {
        let ws = self.open_workspace(req.force)?;
        let (capture, _) = ws.snapshot("init", progress)?;
        let response = InitResponse {
            id: ws.id().to_string(),
            root: ws.root().display().to_string(),
            state_dir: ws.state_dir().display().to_string(),
            registered: ws.created(),
            root_tree: capture.root.to_hex(),
            entries: capture.stats.entries,
            files_hashed: capture.stats.files_hashed,
            bytes_hashed: capture.stats.bytes_hashed,
            files_cloned: capture.stats.files_cloned,
            bytes_cloned: capture.stats.bytes_cloned,
            new_objects: capture.stats.new_objects,
            uncovered: capture.uncovered.clone(),
            warnings: capture.warnings.clone(),
        };
        // Kept for what the front asks next (`baseline_due`): not opened a second time.
        if let Some(w) = &self.live {
            ws.use_live_watch(w.clone());
        }
        let _ = self.ws.set(ws);
        Ok(response)
    }

    /// The `status` operation: see [`StatusRequest`]. Reads only.
    pub fn status(&self, _req: &StatusRequest) -> Result<StatusResponse, ApiError> {
        let ws = self.ws()?;
        let mut status = ws.status()?;
        status.server = running_server(ws.state_dir());
        Ok(status)
    }

    /// The `fsck` operation: see [`FsckRequest`]. Writes nothing.
    pub fn fsck(&self, _req: &FsckRequest) -> Result<FsckResponse, ApiError> {
        let ws = self.ws()?;
        let (store_report, lost) = ws.fsck()?;
        let mut problems: Vec<String> = store_report.problems.iter().map(describe).collect();
        problems.extend(lost);
        Ok(FsckResponse {
            ok: problems.is_empty(),
            packs_checked: store_report.packs_checked,
            objects_checked: store_report.objects_checked,
            clones_checked: store_report.clones_checked,
            clones_unhashed: store_report.clones_unhashed,
            problems,
        })
    }

    /// The `recover` operation: see [`RecoverRequest`].
    pub fn recover(&self, _req: &RecoverRequest) -> Result<RecoverResponse, ApiError> {
        Ok(self.ws()?.recover()?)
    }
}

/// The server of the workspace whose state directory is `state`, if one runs: its
/// `serve.json`, when the process it names is alive.
pub fn running_server(state: &std::path::Path) -> Option<rewind_core::ServerInfo> {
    let info: rewind_core::ServerInfo =
        serde_json::from_slice(&std::fs::read(state.join(rewind_core::SERVER_INFO)).ok()?).ok()?;
    let owner = rewind_core::Owner::Process {
        pid: info.pid,
        start: info.start,
    };
    rewind_core::owner_alive(&owner).then_some(info)
}

/// `serve.json` for this process, serving at `socket` (`None`: its standard input), with or
/// without a file watcher, and its web UI's address (`http`, without the token) if it has one.
pub fn server_info(
    socket: Option<&std::path::Path>,
    watcher: bool,
    http: Option<&str>,
) -> rewind_core::ServerInfo {
    let rewind_core::Owner::Process { pid, start } = rewind_core::this_process() else {
        unreachable!("a process identity");
    };
    rewind_core::ServerInfo {
        pid,
        start,
        socket: socket.map(std::path::Path::to_path_buf),
        watcher,
        http: http.map(str::to_string),
    }
}

fn describe(p: &rewind_store::FsckProblem) -> String {
    use rewind_store::FsckProblem;
    match p {
        FsckProblem::Corrupt {
            id,
            kind,
            pack,
            reason,
        } => {
            format!("corrupt: {kind:?} object {id} in pack {pack}: {reason}")
        }
        FsckProblem::MissingPack { pack, objects } => {
            format!("missing pack {pack}: {} objects lost", objects.len())
        }
        FsckProblem::UnreadablePack { pack, reason } => format!("unreadable pack {pack}: {reason}"),
    }
}
