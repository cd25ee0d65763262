//! The operations, one module per concept; each has a request and a response type. The list in
//! [`OPERATIONS`] names them for JSON-RPC and MCP and generates `docs/api.md`.

pub mod guard;
pub mod history;
pub mod record;
pub mod remote;
pub mod rewind;
pub mod sandbox;
pub mod shadow;
pub mod workspace;
pub mod worktree;

use schemars::{JsonSchema, Schema, SchemaGenerator};

/// One operation: its method name (as JSON-RPC calls it), what it does, and the schemas of its
/// request and response.
pub struct Operation {
    /// The JSON-RPC method name: the command line's subcommand with a dot for a space, such
    /// as `status`, `epoch.begin` or `apply-patch`.
    pub method: &'static str,
    /// One sentence: what the operation does.
    pub summary: &'static str,
    /// The JSON Schema of its request, added to the generator's definitions.
    pub request: fn(&mut SchemaGenerator) -> Schema,
    /// The JSON Schema of its response, added to the generator's definitions.
    pub response: fn(&mut SchemaGenerator) -> Schema,
}

fn schema<T: JsonSchema>(g: &mut SchemaGenerator) -> Schema {
    g.subschema_for::<T>()
}

macro_rules! operations {
    ($($method:literal => $req:ty, $resp:ty, $summary:literal;)*) => {
        /// Every operation of the service.
        pub const OPERATIONS: &[Operation] = &[$(Operation {
            method: $method,
            summary: $summary,
            request: schema::<$req>,
            response: schema::<$resp>,
        }),*];
    };
}

operations! {
    "init" => workspace::InitRequest, workspace::InitResponse,
        "Register the workspace (on first use) and take a whole-tree capture.";
    "status" => workspace::StatusRequest, workspace::StatusResponse,
        "The workspace, its store, sessions and heads, open epochs, unfinished restores and uncovered paths.";
    "fsck" => workspace::FsckRequest, workspace::FsckResponse,
        "Verify every stored object and reference; name what is lost.";
    "workspace.list" => workspace::WorkspaceListRequest, workspace::WorkspaceListResponse,
        "Every registered workspace: root, whether it is still there, size, last use.";
    "workspace.move" => workspace::WorkspaceMoveRequest, workspace::WorkspaceMoveResponse,
        "Move a workspace's history to another directory (renaming the directory if it is still in place).";
    "workspace.adopt" => workspace::WorkspaceAdoptRequest, workspace::WorkspaceAdoptResponse,
        "Register a directory (a copy) as a new workspace starting from another's history.";
    "workspace.forget" => workspace::WorkspaceForgetRequest, workspace::WorkspaceForgetResponse,
        "Delete a workspace's history; its files are not touched.";
    "worktree.create" => worktree::WorktreeCreateRequest, worktree::WorktreeCreateResponse,
        "Make a worktree: an isolated copy of the workspace (or of a checkpoint's tree), registered and linked to it.";
    "worktree.list" => worktree::WorktreeListRequest, worktree::WorktreeListResponse,
        "The workspace's worktrees: name, path, base, and the paths each side changed since the base.";
    "worktree.path" => worktree::WorktreePathRequest, worktree::WorktreePathResponse,
        "The directory of a worktree.";
    "worktree.merge" => worktree::WorktreeMergeRequest, worktree::WorktreeMergeResponse,
        "Merge a worktree's changes into the workspace three-way, as one undoable epoch; conflicts refuse it.";
    "worktree.discard" => worktree::WorktreeDiscardRequest, worktree::WorktreeDiscardResponse,
        "Remove a worktree's directory and history; refused with unmerged changes unless forced.";
    "gc" => workspace::GcRequest, workspace::GcResponse,
        "Drop old history under the retention policy, sweep and repack the store, reclaim orphaned workspaces.";
    "baseline" => workspace::BaselineRequest, workspace::BaselineResponse,
        "Complete the baseline: hash the files a capture.time_budget left uncovered.";
    "pin" => workspace::PinRequest, workspace::PinResponse,
        "Pin a checkpoint: garbage collection never drops it.";
    "unpin" => workspace::PinRequest, workspace::PinResponse,
        "Unpin a checkpoint: the retention policy applies to it again.";
    "recover" => workspace::RecoverRequest, workspace::RecoverResponse,
        "Finish interrupted restores and settle epochs whose process died.";
    "shadow-path" => shadow::ShadowPathRequest, shadow::ShadowPathResponse,
        "Bring the shadow git history up to date with the op log and print its git directory.";
    "log" => history::LogRequest, history::LogResponse,
        "Checkpoints and epochs of the session (or of every session), newest first.";
    "show" => history::ShowRequest, history::ShowResponse,
        "One checkpoint or epoch with all its fields, and for an epoch the paths it changed.";
    "diff" => history::DiffRequest, history::DiffResponse,
        "The diff of an epoch, of a checkpoint against now, or between two checkpoints' trees.";
    "checkpoint" => record::CheckpointRequest, record::CheckpointResponse,
        "Mark a turn boundary of the session, bound to a conversation node.";
    "epoch.begin" => record::EpochBeginRequest, record::EpochBeginResponse,
        "Open an epoch for the session: exact with declared paths, else opaque.";
    "epoch.end" => record::EpochEndRequest, record::EpochEndResponse,
        "Settle (or abort) the session's open epoch, or the named one, recording what changed.";
    "epoch.list" => record::EpochListRequest, record::EpochListResponse,
        "The open epochs of the session (or of every session), oldest first.";
    "exec" => record::ExecRequest, record::ExecResponse,
        "Run a command (optionally sandboxed) as one opaque epoch of the session.";
    "restore" => rewind::RestoreRequest, rewind::RestoreResponse,
        "Restore the session to a checkpoint or epoch, with a plan and conflict refusal.";
    "undo" => rewind::UndoRequest, rewind::UndoResponse,
        "Undo the session's newest epoch (or the named one); undoing a restore is redo.";
    "read" => guard::ReadRequest, guard::ReadResponse,
        "Read files and record what the session has seen of them (the guard's baseline).";
    "check-write" => guard::CheckWriteRequest, guard::CheckWriteResponse,
        "Whether a guarded write of each path would be allowed now, and why not.";
    "write" => guard::WriteRequest, guard::WriteResponse,
        "Guarded write of a whole file, as one exact epoch.";
    "edit" => guard::EditRequest, guard::EditResponse,
        "Guarded exact string replacement in a file, as one exact epoch.";
    "apply-patch" => guard::ApplyPatchRequest, guard::ApplyPatchResponse,
        "Guarded, all-or-nothing unified diff, as one exact epoch over every touched path.";
    "sandbox.check" => sandbox::SandboxCheckRequest, sandbox::SandboxCheckResponse,
        "Check that the OS sandbox works here under the workspace's policy.";
    "sandbox.exec" => sandbox::SandboxExecRequest, sandbox::SandboxExecResponse,
        "Run a command under the workspace's sandbox policy, recording nothing.";
    "sandbox.mode" => sandbox::SandboxModeRequest, sandbox::SandboxModeResponse,
        "Show the workspace's sandbox mode, or set it (recorded in the op log); toggle flips it.";
    "remote.add" => remote::RemoteAddRequest, remote::RemoteAddResponse,
        "Add a remote (s3:// or file://) to the user's configuration.";
    "remote.list" => remote::RemoteListRequest, remote::RemoteListResponse,
        "The remotes: configured ones, and the origin of a cloned workspace.";
    "remote.remove" => remote::RemoteRemoveRequest, remote::RemoteRemoveResponse,
        "Remove a remote from the user's configuration; nothing in it is touched.";
    "push" => remote::PushRequest, remote::PushReport,
        "Upload what the remote lacks of the workspace's history (packs, indexes, op log), then a manifest.";
    "pull" => remote::PullRequest, remote::PullReport,
        "Bring the workspace's view of a remote up to date: new history and the packs it needs.";
    "clone" => remote::CloneRequest, remote::CloneReport,
        "Materialise a checkpoint's tree from a remote into a new directory, registered with the remote's history.";
}
