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
use serde_json::value::RawValue;
use serde_json::Value;

use crate::ops::*;
use crate::{ApiError, Service, OPERATIONS};

/// Calls operation `method` with `params` (an object, or `null` for none); `None` when no
/// operation has that name.
pub fn call(svc: &Service, method: &str, params: Value) -> Option<Result<Value, ApiError>> {
    dispatch(AsValue, svc, method, params)
}

/// [`call`] with the result as JSON text, for a front that sends it on as it is: serialized
/// once, straight from the response. (Built as a [`Value`], copied into a message and written
/// out, the answer listing an `exec`'s 1,000 changes took 4-10 ms, more than recording them.)
pub fn call_raw(
    svc: &Service,
    method: &str,
    params: Value,
) -> Option<Result<Box<RawValue>, ApiError>> {
    dispatch(AsText, svc, method, params)
}

/// How a result is encoded.
trait Encoding: Copy {
    type Out;
    fn encode<T: Serialize>(self, v: &T) -> serde_json::Result<Self::Out>;
}

/// As a [`Value`].
#[derive(Clone, Copy)]
struct AsValue;

impl Encoding for AsValue {
    type Out = Value;
    fn encode<T: Serialize>(self, v: &T) -> serde_json::Result<Value> {
        serde_json::to_value(v)
    }
}

/// As JSON text.
#[derive(Clone, Copy)]
struct AsText;

impl Encoding for AsText {
    type Out = Box<RawValue>;
    fn encode<T: Serialize>(self, v: &T) -> serde_json::Result<Box<RawValue>> {
        serde_json::value::to_raw_value(v)
    }
}

/// Runs operation `method`, its result encoded as `e` says.
fn dispatch<E: Encoding>(
    e: E,
    svc: &Service,
    method: &str,
    params: Value,
) -> Option<Result<E::Out, ApiError>> {
    fn with<E: Encoding, Req: DeserializeOwned, Resp: Serialize>(
        e: E,
        params: Value,
        op: impl FnOnce(Req) -> Result<Resp, ApiError>,
    ) -> Result<E::Out, ApiError> {
        let params = match params {
            Value::Null => Value::Object(Default::default()),
            p => p,
        };
        let req: Req = serde_json::from_value(params)
            .map_err(|e| ApiError::usage(format!("invalid params: {e}")))?;
        let resp = op(req)?;
        e.encode(&resp)
            .map_err(|e| ApiError::new(crate::ErrorKind::Error, format!("encoding result: {e}")))
    }
    Some(match method {
        "init" => with(e, params, |r: workspace::InitRequest| svc.init(&r, None)),
        "status" => with(e, params, |r| svc.status(&r)),
        "fsck" => with(e, params, |r| svc.fsck(&r)),
        "recover" => with(e, params, |r| svc.recover(&r)),
        "gc" => with(e, params, |r| svc.gc(&r)),
        "baseline" => with(e, params, |r| svc.baseline(&r)),
        "pin" => with(e, params, |r| svc.pin(&r)),
        "unpin" => with(e, params, |r| svc.unpin(&r)),
        "workspace.list" => with(e, params, |r| svc.workspace_list(&r)),
        "workspace.move" => with(e, params, |r| svc.workspace_move(&r)),
        "workspace.adopt" => with(e, params, |r| svc.workspace_adopt(&r)),
        "workspace.forget" => with(e, params, |r| svc.workspace_forget(&r)),
        "worktree.create" => with(e, params, |r| svc.worktree_create(&r)),
        "worktree.list" => with(e, params, |r| svc.worktree_list(&r)),
        "worktree.path" => with(e, params, |r| svc.worktree_path(&r)),
        "worktree.merge" => with(e, params, |r| svc.worktree_merge(&r)),
        "worktree.discard" => with(e, params, |r| svc.worktree_discard(&r)),
        "shadow-path" => with(e, params, |r| svc.shadow_path(&r)),
        "log" => with(e, params, |r| svc.log(&r)),
        "show" => with(e, params, |r| svc.show(&r)),
        "diff" => with(e, params, |r| svc.diff(&r)),
        "checkpoint" => with(e, params, |r| svc.checkpoint(&r)),
        "epoch.begin" => with(e, params, |r| svc.epoch_begin(&r)),
        "epoch.end" => with(e, params, |r| svc.epoch_end(&r)),
        "epoch.list" => with(e, params, |r| svc.epoch_list(&r)),
        "exec" => with(e, params, |mut r: record::ExecRequest| {
            r.collect_output = true;
            svc.exec(&r)
        }),
        "restore" => with(e, params, |r| svc.restore(&r)),
        "undo" => with(e, params, |r| svc.undo(&r)),
        "read" => with(e, params, |r| svc.read(&r)),
        "check-write" => with(e, params, |r| svc.check_write(&r)),
        "write" => with(e, params, |r| svc.write(&r)),
        "edit" => with(e, params, |r| svc.edit(&r)),
        "apply-patch" => with(e, params, |r| svc.apply_patch(&r)),
        "sandbox.check" => with(e, params, |r| svc.sandbox_check(&r)),
        "sandbox.mode" => with(e, params, |mut r: sandbox::SandboxModeRequest| {
            r.via.get_or_insert_with(|| "rpc".into());
            svc.sandbox_mode(&r)
        }),
        "sandbox.exec" => with(e, params, |mut r: sandbox::SandboxExecRequest| {
            r.collect_output = true;
            svc.sandbox_exec(&r)
        }),
        "remote.add" => with(e, params, |r| svc.remote_add(&r)),
        "remote.list" => with(e, params, |r| svc.remote_list(&r)),
        "remote.remove" => with(e, params, |r| svc.remote_remove(&r)),
        "push" => with(e, params, |r| svc.push(&r)),
        "pull" => with(e, params, |r| svc.pull(&r)),
        "clone" => with(e, params, |r| svc.clone_remote(&r)),
        _ => {
            debug_assert!(OPERATIONS.iter().all(|o| o.method != method));
            return None;
        }
    })
}
