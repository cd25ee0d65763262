//! Operations called by name with JSON parameters: what `rewind serve` (JSON-RPC) and other
//! fronts that speak JSON dispatch through. The names are [`OPERATIONS`]'s; the parameters
//! are the request's fields (the command line's long options and arguments, snake_case); the
//! result is the response document, the same as the command line's `--json`.
//!
//! A command run by `exec` or `sandbox.exec` gets empty standard input and its output is
//! returned in the result (`collect_output` is always on here): a caller speaking JSON over
//! this process's standard streams could not share them with the command.

use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;

use crate::ops::*;
use crate::{ApiError, Service, OPERATIONS};

/// Calls operation `method` with `params` (an object, or `null` for none); `None` when no
/// operation has that name.
pub fn call(svc: &Service, method: &str, params: Value) -> Option<Result<Value, ApiError>> {
    fn with<Req: DeserializeOwned, Resp: Serialize>(
        params: Value,
        op: impl FnOnce(Req) -> Result<Resp, ApiError>,
    ) -> Result<Value, ApiError> {
        let params = match params {
            Value::Null => Value::Object(Default::default()),
            p => p,
        };
        let req: Req = serde_json::from_value(params)
            .map_err(|e| ApiError::usage(format!("invalid params: {e}")))?;
        let resp = op(req)?;
        serde_json::to_value(resp)
            .map_err(|e| ApiError::new(crate::ErrorKind::Error, format!("encoding result: {e}")))
    }
    Some(match method {
        "init" => with(params, |r: workspace::InitRequest| svc.init(&r, None)),
        "status" => with(params, |r| svc.status(&r)),
        "fsck" => with(params, |r| svc.fsck(&r)),
        "recover" => with(params, |r| svc.recover(&r)),
        "gc" => with(params, |r| svc.gc(&r)),
        "baseline" => with(params, |r| svc.baseline(&r)),
        "pin" => with(params, |r| svc.pin(&r)),
        "unpin" => with(params, |r| svc.unpin(&r)),
        "workspace.list" => with(params, |r| svc.workspace_list(&r)),
        "workspace.move" => with(params, |r| svc.workspace_move(&r)),
        "workspace.adopt" => with(params, |r| svc.workspace_adopt(&r)),
        "workspace.forget" => with(params, |r| svc.workspace_forget(&r)),
        "worktree.create" => with(params, |r| svc.worktree_create(&r)),
        "worktree.list" => with(params, |r| svc.worktree_list(&r)),
        "worktree.path" => with(params, |r| svc.worktree_path(&r)),
        "worktree.merge" => with(params, |r| svc.worktree_merge(&r)),
        "worktree.discard" => with(params, |r| svc.worktree_discard(&r)),
        "shadow-path" => with(params, |r| svc.shadow_path(&r)),
        "log" => with(params, |r| svc.log(&r)),
        "show" => with(params, |r| svc.show(&r)),
        "diff" => with(params, |r| svc.diff(&r)),
        "checkpoint" => with(params, |r| svc.checkpoint(&r)),
        "epoch.begin" => with(params, |r| svc.epoch_begin(&r)),
        "epoch.end" => with(params, |r| svc.epoch_end(&r)),
        "epoch.list" => with(params, |r| svc.epoch_list(&r)),
        "exec" => with(params, |mut r: record::ExecRequest| {
            r.collect_output = true;
            svc.exec(&r)
        }),
        "restore" => with(params, |r| svc.restore(&r)),
        "undo" => with(params, |r| svc.undo(&r)),
        "read" => with(params, |r| svc.read(&r)),
        "check-write" => with(params, |r| svc.check_write(&r)),
        "write" => with(params, |r| svc.write(&r)),
        "edit" => with(params, |r| svc.edit(&r)),
        "apply-patch" => with(params, |r| svc.apply_patch(&r)),
        "sandbox.check" => with(params, |r| svc.sandbox_check(&r)),
        "sandbox.mode" => with(params, |mut r: sandbox::SandboxModeRequest| {
            r.via.get_or_insert_with(|| "rpc".into());
            svc.sandbox_mode(&r)
        }),
        "sandbox.exec" => with(params, |mut r: sandbox::SandboxExecRequest| {
            r.collect_output = true;
            svc.sandbox_exec(&r)
        }),
        "remote.add" => with(params, |r| svc.remote_add(&r)),
        "remote.list" => with(params, |r| svc.remote_list(&r)),
        "remote.remove" => with(params, |r| svc.remote_remove(&r)),
        "push" => with(params, |r| svc.push(&r)),
        "pull" => with(params, |r| svc.pull(&r)),
        "clone" => with(params, |r| svc.clone_remote(&r)),
        _ => {
            debug_assert!(OPERATIONS.iter().all(|o| o.method != method));
            return None;
        }
    })
}
