//! The tools: their arguments (names, descriptions and JSON Schemas written for a model), the
//! service operation each one calls, and its result (the operation's document as
//! `structuredContent`, with an `outputSchema` from the API's types).

use std::sync::Arc;

use rewind_api::{ApiError, ErrorKind, SandboxMode, StepView, OPERATIONS};
use rmcp::model::{
    CallToolRequestParams, CallToolResult, ContentBlock, JsonObject, Tool, ToolAnnotations,
};
use rmcp::ErrorData;
use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use crate::{RunMode, Server};

/// The most bytes of each of a command's streams a `run` result carries.
pub(crate) const RUN_OUTPUT_CAP: usize = 30_000;
/// `run`'s timeout when none is given, in seconds.
const RUN_DEFAULT_TIMEOUT: u64 = 120;
/// The longest timeout `run` accepts, in seconds.
const RUN_MAX_TIMEOUT: u64 = 3600;

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct ReadFileArgs {
    /// The file to read, relative to the workspace directory (or absolute inside it).
    path: String,
    /// The first line to return, 1-based (default: 1).
    #[serde(default)]
    offset: Option<usize>,
    /// How many lines to return from `offset` (default: to the end of the file).
    #[serde(default)]
    limit: Option<usize>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct WriteFileArgs {
    /// The file to write, relative to the workspace directory (or absolute inside it). Parent
    /// directories are created.
    path: String,
    /// The whole new content of the file.
    content: String,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct EditFileArgs {
    /// The file to edit, relative to the workspace directory (or absolute inside it).
    path: String,
    /// The exact text to replace, whitespace included. It must occur exactly once unless
    /// `replace_all` is true; include surrounding lines to make it unique.
    old_string: String,
    /// The text to put in its place.
    new_string: String,
    /// Replace every occurrence of `old_string` (default: false).
    #[serde(default)]
    replace_all: bool,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct ApplyPatchArgs {
    /// A unified diff as `git diff` writes it (`--- a/path`, `+++ b/path`, `@@` hunks), paths
    /// relative to the workspace root. All hunks apply or nothing is written.
    patch: String,
    /// Check that the patch applies and write nothing (default: false).
    #[serde(default)]
    dry_run: bool,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct RunArgs {
    /// The shell command (run by `sh -c` in the workspace directory, with empty standard
    /// input).
    command: String,
    /// Seconds before the command is stopped (default 120, at most 3600). A stopped command
    /// exits with 124.
    #[serde(default)]
    timeout_secs: Option<u64>,
    /// A stricter sandbox for this one command: `read-only` (it may write nothing) or
    /// `workspace-write`. Never looser than the workspace's mode: asking for more access is
    /// refused.
    #[serde(default)]
    sandbox: Option<String>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct CheckpointArgs {
    /// A short name for this point, such as the task step about to start.
    #[serde(default)]
    label: Option<String>,
    /// The conversation message id this point belongs to, if the client has one; `restore`
    /// accepts it as a target.
    #[serde(default)]
    message: Option<String>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct LogArgs {
    /// At most this many entries, newest first (default 20; 0: all).
    #[serde(default)]
    limit: Option<usize>,
    /// Include every session's entries, not only this server's session (default: false).
    #[serde(default)]
    all_sessions: bool,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct DiffArgs {
    /// An epoch id (what that one change did) or a checkpoint id or message id (what a
    /// restore to it would undo: the checkpoint against now). Ids come from `log`.
    target: String,
    /// Only these paths (and what is under them).
    #[serde(default)]
    paths: Vec<String>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct RestoreArgs {
    /// A checkpoint id, message id, or epoch id ("just before that change"), from `log`.
    target: String,
    /// Only preview: return the plan and its conflicts, write nothing (default: true). Call
    /// again with false to apply.
    #[serde(default = "yes")]
    dry_run: bool,
    /// Overwrite paths someone else changed since (their content is kept and can be brought
    /// back with `undo`). Only when the user asked for it.
    #[serde(default)]
    force: bool,
    /// Only these paths (and what is under them).
    #[serde(default)]
    paths: Vec<String>,
}

fn yes() -> bool {
    true
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct UndoArgs {
    /// The epoch to undo (id from `log`; default: this session's newest). Undoing a restore
    /// is redo.
    #[serde(default)]
    epoch: Option<String>,
    /// Only preview, write nothing (default: false).
    #[serde(default)]
    dry_run: bool,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct StatusArgs {}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct WorktreeCreateArgs {
    /// Its name: letters, digits, `-`, `_`, `.`; unique among this workspace's worktrees.
    name: String,
    /// Start from this checkpoint (id or message id, from `log`) instead of the workspace as
    /// it is now.
    #[serde(default)]
    from: Option<String>,
    /// Copy ignored files too (build output, dependencies; never `.git`). Default: false.
    #[serde(default)]
    include_ignored: bool,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct WorktreeListArgs {}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct WorktreeMergeArgs {
    /// The worktree's name.
    name: String,
    /// Only preview: return the plan (each path, and conflicts where both sides changed the
    /// same lines), write nothing (default: true). Call again with false to apply.
    #[serde(default = "yes")]
    dry_run: bool,
    /// Take the worktree's side of every conflict (what it overwrites here is kept and undo
    /// brings it back). Only when the user asked for it.
    #[serde(default)]
    force: bool,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct WorktreeDiscardArgs {
    /// The worktree's name.
    name: String,
    /// Discard it even though it holds changes not merged here (they are lost). Only when the
    /// user asked for it.
    #[serde(default)]
    force: bool,
}

/// What `run` returns.
#[derive(Serialize, JsonSchema)]
struct RunResult {
    /// The command's exit code (128+N when killed by signal N; 124 when stopped by the
    /// timeout).
    exit_code: i32,
    /// The command was stopped by the timeout.
    timed_out: bool,
    /// Its standard output, at most 30000 bytes (lossy UTF-8).
    stdout: String,
    /// Its standard error, at most 30000 bytes (lossy UTF-8).
    stderr: String,
    /// Bytes of output left out, over both streams.
    truncated_bytes: u64,
    /// The epoch that recorded the command: `undo` with it reverts what it changed.
    epoch: String,
    /// The paths it changed, per path.
    changes: Vec<StepView>,
    /// The sandbox it ran in: `workspace-write`, `read-only` or `none`.
    sandbox: String,
}

/// One tool: its name, description, argument type, the operation it calls and whether it
/// only reads.
struct Spec {
    name: &'static str,
    title: &'static str,
    description: &'static str,
    input: fn() -> Value,
    /// The operation whose response is the result's schema; `None`: [`RunResult`].
    op: Option<&'static str>,
    annotations: fn() -> ToolAnnotations,
}

fn input<T: JsonSchema>() -> Value {
    let mut v = serde_json::to_value(schemars::schema_for!(T)).unwrap_or_default();
    if let Some(o) = v.as_object_mut() {
        o.remove("title");
    }
    v
}

fn read_only() -> ToolAnnotations {
    ToolAnnotations::new().read_only(true).open_world(false)
}
fn writes() -> ToolAnnotations {
    ToolAnnotations::new()
        .read_only(false)
        .destructive(false)
        .open_world(false)
}
fn destructive() -> ToolAnnotations {
    ToolAnnotations::new()
        .read_only(false)
        .destructive(true)
        .open_world(false)
}
fn runs() -> ToolAnnotations {
    ToolAnnotations::new()
        .read_only(false)
        .destructive(true)
        .open_world(true)
}

const SPECS: &[Spec] = &[
    Spec {
        name: "read_file",
        title: "Read a file",
        description:
            "Read a text file of the workspace, whole or a range of lines (offset, limit). \
            Read a file before changing it: write_file, edit_file and apply_patch refuse a file \
            this session has not read, or one that changed since it was read.",
        input: input::<ReadFileArgs>,
        op: Some("read"),
        annotations: read_only,
    },
    Spec {
        name: "write_file",
        title: "Write a file",
        description: "Create a file or replace its whole content. An existing file must have been \
            read with read_file first and be unchanged since. Recorded: undo reverts it.",
        input: input::<WriteFileArgs>,
        op: Some("write"),
        annotations: writes,
    },
    Spec {
        name: "edit_file",
        title: "Edit a file",
        description: "Replace an exact string in a file (old_string must occur once unless \
            replace_all). The file must have been read with read_file first and be unchanged \
            since. Recorded: undo reverts it.",
        input: input::<EditFileArgs>,
        op: Some("edit"),
        annotations: writes,
    },
    Spec {
        name: "apply_patch",
        title: "Apply a unified diff",
        description: "Apply a unified diff to one or more files, all or nothing. Every file it \
            changes must have been read with read_file first and be unchanged since. Recorded \
            as one change: undo reverts it.",
        input: input::<ApplyPatchArgs>,
        op: Some("apply-patch"),
        annotations: writes,
    },
    Spec {
        name: "run",
        title: "Run a shell command",
        description: "Run a shell command in the workspace directory (in the workspace's \
            sandbox: by default writes only inside the workspace and no network; `sandbox` asks \
            for a stricter one for this call) and return its exit code, output and the files \
            it changed. Recorded as one change: undo reverts what it did to the workspace's \
            files.",
        input: input::<RunArgs>,
        op: None,
        annotations: runs,
    },
    Spec {
        name: "checkpoint",
        title: "Mark a checkpoint",
        description: "Mark a point to come back to (call it before each task step). Returns its \
            id: restore with it as target undoes everything this session changed after it.",
        input: input::<CheckpointArgs>,
        op: Some("checkpoint"),
        annotations: writes,
    },
    Spec {
        name: "log",
        title: "History",
        description:
            "This session's checkpoints and changes (epochs), newest first, with their ids \
            for diff, restore and undo.",
        input: input::<LogArgs>,
        op: Some("log"),
        annotations: read_only,
    },
    Spec {
        name: "diff",
        title: "Diff",
        description: "The diff of one change (an epoch id) or of a checkpoint against now (what a \
            restore to it would undo).",
        input: input::<DiffArgs>,
        op: Some("diff"),
        annotations: read_only,
    },
    Spec {
        name: "restore",
        title: "Restore to a checkpoint",
        description: "Undo everything this session changed after a checkpoint (or before an \
            epoch). By default only previews (dry_run: true): returns the plan, with conflicts \
            (paths someone else changed since) and uncovered paths. Call again with \
            dry_run: false to apply. A restore can itself be undone.",
        input: input::<RestoreArgs>,
        op: Some("restore"),
        annotations: destructive,
    },
    Spec {
        name: "undo",
        title: "Undo a change",
        description: "Undo this session's newest change (or the named epoch): put its files back \
            as they were before it. Undoing a restore or an undo is redo.",
        input: input::<UndoArgs>,
        op: Some("undo"),
        annotations: destructive,
    },
    Spec {
        name: "status",
        title: "Workspace status",
        description: "The workspace: its root, sessions, open changes, unfinished restores and \
            uncovered paths.",
        input: input::<StatusArgs>,
        op: Some("status"),
        annotations: read_only,
    },
    Spec {
        name: "worktree_create",
        title: "Create a worktree",
        description: "Make an isolated copy of the workspace (or of a checkpoint's files) \
            outside it, for work in parallel that must not touch this workspace until merged. \
            Returns its path: another agent works there (its own `rewind mcp -C PATH`, or \
            commands run in that directory); worktree_merge brings its changes back here.",
        input: input::<WorktreeCreateArgs>,
        op: Some("worktree.create"),
        annotations: writes,
    },
    Spec {
        name: "worktree_list",
        title: "Worktrees",
        description: "This workspace's worktrees: name, path, base, and the paths each side \
            changed since the worktree was made.",
        input: input::<WorktreeListArgs>,
        op: Some("worktree.list"),
        annotations: read_only,
    },
    Spec {
        name: "worktree_merge",
        title: "Merge a worktree",
        description: "Bring a worktree's changes since it was made into this workspace, \
            three-way: a path only the worktree changed is taken, a text file both sides \
            changed is merged line by line when the changes do not overlap, anything else is \
            a conflict (refused, nothing changed). By default only previews (dry_run: true); \
            call again with dry_run: false to apply. Recorded as one change: undo takes it back.",
        input: input::<WorktreeMergeArgs>,
        op: Some("worktree.merge"),
        annotations: destructive,
    },
    Spec {
        name: "worktree_discard",
        title: "Discard a worktree",
        description: "Delete a worktree's copy and its history. Refused while it holds changes \
            not merged here, unless force (they are lost).",
        input: input::<WorktreeDiscardArgs>,
        op: Some("worktree.discard"),
        annotations: destructive,
    },
];

fn object(v: Value) -> Arc<JsonObject> {
    match v {
        Value::Object(o) => Arc::new(o),
        _ => Arc::new(JsonObject::new()),
    }
}

/// The JSON Schema (2020-12) of an operation's response, as a root object schema.
fn output_schema(method: &str) -> Value {
    let Some(op) = OPERATIONS.iter().find(|o| o.method == method) else {
        return json!({"type": "object"});
    };
    let mut g = schemars::generate::SchemaSettings::draft2020_12()
        .for_serialize()
        .into_generator();
    let root = (op.response)(&mut g);
    let defs = g.take_definitions(true);
    let mut root = serde_json::to_value(root).unwrap_or_default();
    if let Some(o) = root.as_object_mut() {
        // Structured content is an object; a response that is one of several objects says so.
        o.entry("type").or_insert(json!("object"));
        if !defs.is_empty() {
            o.insert("$defs".into(), Value::Object(defs));
        }
    }
    root
}

/// Every tool, as `tools/list` returns it.
pub(crate) fn list() -> Vec<Tool> {
    SPECS
        .iter()
        .map(|s| {
            let output = match s.op {
                Some(op) => output_schema(op),
                None => input::<RunResult>(),
            };
            Tool::new(s.name, s.description, object((s.input)()))
                .with_title(s.title)
                .with_raw_output_schema(object(output))
                .with_annotations((s.annotations)())
        })
        .collect()
}

/// A tool failure the model can act on: `isError`, the words first, the error document as
/// structured content.
fn refused(e: &ApiError) -> CallToolResult {
    let mut text = e.message.clone();
    for h in &e.hints {
        text.push_str("\nhint: ");
        text.push_str(h);
    }
    let next = match e.kind {
        ErrorKind::Guard => Some(
            "Nothing was written. Call read_file on the path (again if you read it before: \
             the user or another program changed it since), then redo the change on what it \
             holds now.",
        ),
        ErrorKind::Sandbox => Some(
            "Nothing was run. The sandbox refused or cannot run here; tell the user (they can \
             change the workspace's mode with `rewind sandbox mode`; you cannot).",
        ),
        ErrorKind::Busy => Some("The workspace is busy with another operation; retry shortly."),
        _ => None,
    };
    if let Some(n) = next {
        text.push('\n');
        text.push_str(n);
    }
    let doc = json!({"error": e});
    let mut r = CallToolResult::structured_error(doc);
    r.content = vec![ContentBlock::text(text)];
    r
}

/// Arguments of the wrong shape: a result the model can correct, not a protocol error.
fn bad_arguments(tool: &str, e: serde_json::Error) -> CallToolResult {
    refused(
        &ApiError::usage(format!("invalid arguments for {tool}: {e}"))
            .hint("call it again with arguments matching its input schema"),
    )
}

fn args<T: DeserializeOwned>(tool: &str, v: &Value) -> Result<T, CallToolResult> {
    serde_json::from_value(v.clone()).map_err(|e| bad_arguments(tool, e))
}

/// Calls tool `request.name`.
pub(crate) async fn call(
    server: &Server,
    request: CallToolRequestParams,
) -> Result<CallToolResult, ErrorData> {
    let name = request.name.to_string();
    let raw = Value::Object(request.arguments.unwrap_or_default());
    if !SPECS.iter().any(|s| s.name == name) {
        return Err(ErrorData::invalid_params(
            format!(
                "unknown tool {name:?}; the tools are {}",
                SPECS.iter().map(|s| s.name).collect::<Vec<_>>().join(", ")
            ),
            None,
        ));
    }
    Ok(match dispatch(server, &name, &raw).await {
        Ok(r) | Err(r) => r,
    })
}

/// The operation's document as a result: as structured content and as JSON text.
fn done(v: Value) -> CallToolResult {
    CallToolResult::structured(v)
}

async fn op(server: &Server, method: &'static str, params: Value) -> Result<Value, CallToolResult> {
    server.call(method, params).await.map_err(|e| refused(&e))
}

async fn dispatch(
    server: &Server,
    name: &str,
    raw: &Value,
) -> Result<CallToolResult, CallToolResult> {
    Ok(match name {
        "read_file" => {
            let a: ReadFileArgs = args(name, raw)?;
            let mut params = json!({"paths": [a.path]});
            if a.offset.is_some() || a.limit.is_some() {
                let start = a.offset.unwrap_or(1).max(1);
                let range = match a.limit {
                    Some(0) => format!("{start}:{}", start - 1),
                    Some(n) => format!("{start}:{}", start + n - 1),
                    None => format!("{start}:"),
                };
                params["range"] = json!(range);
            }
            let v = op(server, "read", params).await?;
            let text = v["files"][0]["content"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            let mut r = done(v);
            r.content = vec![ContentBlock::text(text)];
            r
        }
        "write_file" => {
            let a: WriteFileArgs = args(name, raw)?;
            let p = json!({"path": a.path, "content": a.content, "tool": "write_file"});
            done(op(server, "write", p).await?)
        }
        "edit_file" => {
            let a: EditFileArgs = args(name, raw)?;
            let p = json!({"path": a.path, "old": a.old_string, "new": a.new_string,
                "all": a.replace_all, "tool": "edit_file"});
            done(op(server, "edit", p).await?)
        }
        "apply_patch" => {
            let a: ApplyPatchArgs = args(name, raw)?;
            let p = json!({"patch": a.patch, "dry_run": a.dry_run, "tool": "apply_patch"});
            done(op(server, "apply-patch", p).await?)
        }
        "run" => run(server, args(name, raw)?).await?,
        "checkpoint" => {
            let a: CheckpointArgs = args(name, raw)?;
            let p = json!({"label": a.label, "message": a.message});
            done(op(server, "checkpoint", p).await?)
        }
        "log" => {
            let a: LogArgs = args(name, raw)?;
            let p = json!({"limit": a.limit.unwrap_or(20), "all_sessions": a.all_sessions});
            done(op(server, "log", p).await?)
        }
        "diff" => {
            let a: DiffArgs = args(name, raw)?;
            done(op(server, "diff", json!({"id": a.target, "paths": a.paths})).await?)
        }
        "restore" => {
            let a: RestoreArgs = args(name, raw)?;
            let p = json!({"target": a.target, "dry_run": a.dry_run, "force": a.force,
                "paths": a.paths});
            rewound(op(server, "restore", p).await?)
        }
        "undo" => {
            let a: UndoArgs = args(name, raw)?;
            let p = json!({"epoch": a.epoch, "dry_run": a.dry_run});
            rewound(op(server, "undo", p).await?)
        }
        "status" => {
            let _: StatusArgs = args(name, raw)?;
            done(op(server, "status", json!({})).await?)
        }
        "worktree_create" => {
            let a: WorktreeCreateArgs = args(name, raw)?;
            let p = json!({"name": a.name, "from": a.from, "include_ignored": a.include_ignored});
            done(op(server, "worktree.create", p).await?)
        }
        "worktree_list" => {
            let _: WorktreeListArgs = args(name, raw)?;
            done(op(server, "worktree.list", json!({})).await?)
        }
        "worktree_merge" => {
            let a: WorktreeMergeArgs = args(name, raw)?;
            let p = json!({"name": a.name, "dry_run": a.dry_run, "force": a.force});
            rewound(op(server, "worktree.merge", p).await?)
        }
        "worktree_discard" => {
            let a: WorktreeDiscardArgs = args(name, raw)?;
            let p = json!({"name": a.name, "force": a.force});
            done(op(server, "worktree.discard", p).await?)
        }
        _ => unreachable!("checked by call"),
    })
}

/// A restore or undo: refused by conflicts is an error result carrying the whole plan.
fn rewound(v: Value) -> CallToolResult {
    if v["refused"].as_bool() == Some(true) {
        let mut r = CallToolResult::structured_error(v.clone());
        r.content = vec![
            ContentBlock::text(
                "Refused, nothing changed: these paths were changed by the user or another \
                 program since this session wrote them (see conflicts). Re-read them with \
                 read_file and decide with the user; force: true overwrites them (their \
                 content is kept and undo brings it back).",
            ),
            ContentBlock::text(v.to_string()),
        ];
        return r;
    }
    done(v)
}

/// At most `cap` bytes of `s` (cut at a character boundary), and how many were left out.
fn capped(mut s: String, cap: usize) -> (String, u64) {
    if s.len() <= cap {
        return (s, 0);
    }
    let mut cut = cap;
    while !s.is_char_boundary(cut) {
        cut -= 1;
    }
    let dropped = (s.len() - cut) as u64;
    s.truncate(cut);
    (s, dropped)
}

/// The sandbox mode one `run` call gets (`None`: unsandboxed): the server's fixed mode or the
/// workspace's, made stricter when the call asks, refused when it asks for looser.
async fn run_mode(
    server: &Server,
    asked: Option<&str>,
) -> Result<Option<SandboxMode>, CallToolResult> {
    let base = match server.run_mode {
        RunMode::Fixed(m) => Some(m),
        RunMode::Plain => None,
        RunMode::Workspace => {
            let v = op(server, "sandbox.mode", json!({})).await?;
            let m = v["mode"].as_str().unwrap_or_default();
            Some(m.parse::<SandboxMode>().map_err(|e| {
                refused(&ApiError::new(
                    ErrorKind::Error,
                    format!("the workspace's sandbox mode: {e}"),
                ))
            })?)
        }
    };
    let Some(asked) = asked else {
        return Ok(base.filter(|m| *m != SandboxMode::DangerFullAccess));
    };
    let asked: SandboxMode = asked.parse().map_err(|e| {
        refused(&ApiError::usage(format!(
            "sandbox: {e} (read-only or workspace-write)"
        )))
    })?;
    // No sandbox at all (`None`) is as open as full access.
    let openness = |m: Option<SandboxMode>| m.map_or(2, |m| m.openness());
    if openness(Some(asked)) > openness(base) {
        return Err(refused(&ApiError::new(
            ErrorKind::Sandbox,
            format!(
                "a call may ask for a stricter sandbox, never a looser one: the workspace runs commands in {}, and this call asked for {asked}",
                base.map_or("none", |m| m.as_str())
            ),
        )));
    }
    Ok(Some(asked).filter(|m| *m != SandboxMode::DangerFullAccess))
}

async fn run(server: &Server, a: RunArgs) -> Result<CallToolResult, CallToolResult> {
    let secs = a.timeout_secs.unwrap_or(RUN_DEFAULT_TIMEOUT);
    if secs == 0 || secs > RUN_MAX_TIMEOUT {
        return Err(refused(&ApiError::usage(format!(
            "timeout_secs must be between 1 and {RUN_MAX_TIMEOUT}, not {secs}"
        ))));
    }
    // coreutils `timeout` stops the command (and, after 5 s more, kills it): exit code 124.
    let command = [
        "timeout",
        "--kill-after=5",
        &secs.to_string(),
        "sh",
        "-c",
        &a.command,
    ];
    let mode = run_mode(server, a.sandbox.as_deref()).await?;
    let mut p = json!({"command": command, "tool": "run"});
    if let Some(m) = mode {
        p["sandbox"] = json!(m.as_str());
    }
    let v = op(server, "exec", p).await?;
    let exit_code = v["exit_code"].as_i64().unwrap_or(-1) as i32;
    let text = |k: &str| v["output"][k].as_str().unwrap_or_default().to_string();
    let (stdout, d1) = capped(text("stdout"), RUN_OUTPUT_CAP);
    let (stderr, d2) = capped(text("stderr"), RUN_OUTPUT_CAP);
    let result = RunResult {
        exit_code,
        timed_out: exit_code == 124,
        stdout,
        stderr,
        truncated_bytes: v["output"]["truncated"].as_u64().unwrap_or(0) + d1 + d2,
        epoch: v["epoch"].as_str().unwrap_or_default().to_string(),
        changes: serde_json::from_value(v["changes"].clone()).unwrap_or_default(),
        sandbox: mode.map_or("none", |m| m.as_str()).to_string(),
    };
    Ok(done(serde_json::to_value(result).unwrap_or_default()))
}
