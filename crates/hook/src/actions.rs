//! What each event does (see the crate header), whichever agent sent it.

use std::io::Write;
use std::path::{Path, PathBuf};

use rewind_api::{
    ApiError, Context, Endpoint, EpochBeginRequest, EpochEndRequest, HookGuard, Recorder, Service,
};
use serde::Deserialize;
use serde_json::{json, Value};

use crate::event::{self, Dialect, Event, What};

/// What the adapter tells the agent: the process's exit code and what to print.
#[derive(Debug, Default)]
pub struct Outcome {
    /// 0, or 2 for a guard refusal.
    pub code: i32,
    /// Standard output (JSON for the agent, or nothing).
    pub stdout: String,
    /// Standard error: the refusal's reason for the model, or a warning.
    pub stderr: String,
    /// The workspace whose capture in this process ran out of `capture.time_budget`: the
    /// front starts `rewind baseline --background` there (as after any command), off the
    /// agent's path.
    pub baseline_in: Option<PathBuf>,
    /// The workspace whose state exceeds its `[retention] max_bytes` after the checkpoint this
    /// event made: the front starts `rewind gc --auto` there, detached (as after `rewind
    /// checkpoint`).
    pub gc_in: Option<PathBuf>,
}

impl Outcome {
    fn warn(message: impl std::fmt::Display) -> Outcome {
        Outcome {
            stderr: format!("rewind: {message}\n"),
            ..Outcome::default()
        }
    }
}

/// Handles one event of `dialect` (the JSON text the agent wrote on the hook's standard
/// input).
pub fn run(dialect: Dialect, input: &[u8]) -> Outcome {
    let value: Value = match serde_json::from_slice(input) {
        Ok(v @ Value::Object(_)) => v,
        Ok(_) | Err(_) => return Outcome::warn("ignored a hook event that is not a JSON object"),
    };
    let event = match event::read(dialect, &value) {
        Ok(e) => e,
        Err(why) => return Outcome::warn(format!("ignored {why}")),
    };
    match handle(dialect, event) {
        Ok(o) => o,
        Err(e) => Outcome::warn(format!(
            "{} (the agent goes on; this call may not be recorded)",
            e.message
        )),
    }
}

fn handle(dialect: Dialect, event: Event) -> Result<Outcome, ApiError> {
    let dir = std::env::var_os("CLAUDE_PROJECT_DIR")
        .filter(|v| dialect == Dialect::ClaudeCode && !v.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| event.cwd.clone());
    // Through the workspace's server when one runs: it has the workspace open, so this
    // process opens nothing (no database, no stat cache), whatever the size of the tree.
    let ep = Endpoint::new(Service::new(Context::new(&dir, &event.session)?));
    // The events whose operations capture: a checkpoint, an epoch's settle. (SessionStart
    // registers the workspace without capturing.)
    let captures = matches!(
        event.what,
        What::Prompt { .. } | What::Post { .. } | What::End
    );
    let checkpointed = matches!(event.what, What::Prompt { .. });
    let mut out = handle_with(&ep, dialect, event)?;
    // A server's own captures re-read only what changed; this process's may have run out of
    // budget on a big tree.
    if captures && !ep.via_server() && ep.service().baseline_due().unwrap_or(false) {
        out.baseline_in = Some(ep.context().root());
    }
    // A prompt makes the turn's checkpoint, after which the state may be over its budget.
    // (Through a server, the server starts the gc: this process has not opened the workspace.)
    if checkpointed && !ep.via_server() && ep.service().gc_due().unwrap_or(false) {
        out.gc_in = Some(ep.context().root());
    }
    Ok(out)
}

fn handle_with(ep: &Endpoint, dialect: Dialect, event: Event) -> Result<Outcome, ApiError> {
    match event.what {
        What::SessionStart => session_start(ep, &event.session),
        What::Prompt { id, text } => prompt(ep, id, text),
        What::Read {
            file,
            offset,
            limit,
        } => {
            read(ep, file, offset, limit)?;
            Ok(Outcome::default())
        }
        What::Pre {
            tool,
            call,
            files,
            command,
            input,
        } => match command {
            // Codex: see `sandboxed`.
            Some(c) if dialect != Dialect::Codex => {
                let call_id = call.as_deref();
                if let Some(out) =
                    sandboxed(ep, dialect, &event.session, &tool, call_id, &c, &input)?
                {
                    return Ok(out);
                }
                pre(ep, dialect, &tool, call, files, Some(c))
            }
            command => pre(ep, dialect, &tool, call, files, command),
        },
        What::Post {
            call,
            files,
            failed,
        } => post(ep, call, files, failed),
        What::End => {
            settle_all(ep)?;
            Ok(Outcome::default())
        }
        What::Other => Ok(Outcome::default()),
    }
}

/// The parts of the operations' documents the hook reads.
#[derive(Deserialize)]
struct Verdict {
    allowed: bool,
    reason: Option<String>,
}

#[derive(Deserialize)]
struct OpenEpochs {
    epochs: Vec<OpenEpoch>,
}

#[derive(Deserialize)]
struct OpenEpoch {
    id: String,
    tool_call: Option<String>,
}

#[derive(Deserialize)]
struct LogItems {
    items: Vec<LogItem>,
}

#[derive(Deserialize)]
struct LogItem {
    #[serde(rename = "type")]
    kind: String,
}

#[derive(Deserialize)]
struct SandboxMode {
    mode: String,
}

/// A path of the event as the workspace takes it: relative ones from the context's directory.
fn absolute(ep: &Endpoint, p: &Path) -> PathBuf {
    ep.context().dir().join(p)
}

/// A command line, shortened for the log.
fn short(s: &str) -> String {
    let line = s.lines().next().unwrap_or_default();
    let mut out: String = line.chars().take(200).collect();
    if out.len() < s.len() {
        out.push('…');
    }
    out
}

fn session_start(ep: &Endpoint, session: &str) -> Result<Outcome, ApiError> {
    // Registers the workspace (and takes its first capture) if it is not yet; a running
    // server holds it open already.
    if !ep.via_server() {
        ep.service().open()?;
    }
    if let Some(env_file) = std::env::var_os("CLAUDE_ENV_FILE") {
        let line = format!("export REWIND_SESSION='{}'\n", session.replace('\'', ""));
        let written = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&env_file)
            .and_then(|mut f| f.write_all(line.as_bytes()));
        if let Err(e) = written {
            return Ok(Outcome::warn(format!(
                "cannot export REWIND_SESSION to {}: {e}",
                Path::new(&env_file).display()
            )));
        }
    }
    Ok(Outcome::default())
}

fn prompt(ep: &Endpoint, id: Option<String>, text: Option<String>) -> Result<Outcome, ApiError> {
    settle_all(ep)?;
    if text.as_deref().is_some_and(crate::slash::is_own_command) {
        // `/rewind` and `/sandbox` act on the session; a checkpoint for them would only shift
        // the numbers `/rewind` shows.
        return Ok(Outcome::default());
    }
    let message = match id {
        Some(id) => id,
        None => {
            // No prompt id (older builds): the session's checkpoints, counted.
            let log: LogItems = ep.call_as("log", json!({"all_sessions": false, "limit": 0}))?;
            let n = log.items.iter().filter(|e| e.kind == "checkpoint").count();
            format!("prompt-{}", n + 1)
        }
    };
    let label = text.map(|p| {
        let first = p.lines().next().unwrap_or_default();
        first.chars().take(80).collect::<String>()
    });
    ep.call("checkpoint", json!({"message": message, "label": label}))?;
    Ok(Outcome::default())
}

fn pre(
    ep: &Endpoint,
    dialect: Dialect,
    tool: &str,
    call: Option<String>,
    files: Vec<PathBuf>,
    command: Option<String>,
) -> Result<Outcome, ApiError> {
    let mut out = Outcome::default();
    let files: Vec<PathBuf> = files.iter().map(|f| absolute(ep, f)).collect();
    // Read here (two small files, no workspace opened): a change of the setting applies to
    // the next call, with or without a server.
    let guard = ep.service().config()?.hooks.guard.unwrap_or_default();
    if !files.is_empty() && guard != HookGuard::Off && dialect.reports_reads() {
        let verdicts: Vec<Verdict> = ep.call_as("check-write", json!({ "paths": files }))?;
        if let Some(v) = verdicts.iter().find(|v| !v.allowed) {
            let why = v.reason.clone().unwrap_or_else(|| "refused".into());
            if guard == HookGuard::Enforce {
                return Ok(Outcome {
                    code: 2,
                    stderr: format!("Rewind refused this {tool}: {why}\n"),
                    ..Outcome::default()
                });
            }
            out.stderr = format!("rewind: warning: {tool} would be refused: {why}\n");
        }
    }
    ep.epoch_begin(&EpochBeginRequest {
        tool: Some(tool.into()),
        tool_call: call,
        // A file tool's epoch is exact over its files; a shell command's is opaque.
        paths: files,
        note: command.as_deref().map(short),
        ..Default::default()
    })?;
    Ok(out)
}

/// A shell call (Claude Code's `Bash`, Gemini CLI's `run_shell_command`) rewritten to run
/// through `rewind exec --sandbox MODE` (when the workspace's sandbox mode is not
/// `danger-full-access` and bubblewrap is installed): sandboxed and recorded as one opaque
/// epoch, with the call's id, in one step, so no epoch is opened here. The rewritten input keeps
/// everything else of the call (Claude Code: timeout, background, description; Gemini CLI:
/// `description`, `dir_path`, `is_background`), so the command runs in the directory the agent
/// would have run it in. `None`: run it as it is.
///
/// How each agent takes the new input:
/// - Claude Code: `hookSpecificOutput.updatedInput` replaces the call's input.
/// - Gemini CLI: `hookSpecificOutput.tool_input` (google-gemini/gemini-cli,
///   `docs/hooks/reference.md`: it "merges with and overrides" the model's arguments). Its
///   scheduler builds the call from that object alone (`packages/core/src/scheduler/
///   hook-utils.ts`, `tool.build(modifiedInput)`), its older path merges it
///   (`packages/core/src/core/coreToolHookTriggers.ts`, `Object.assign`): the whole input is
///   sent, which is right either way. The call id is the one the adapter pairs Gemini's events
///   by (from the input as the model gave it); Gemini's `AfterTool` then carries the rewritten
///   input, whose id names no open epoch, so it settles nothing.
/// - Codex is never rewritten: it applies `updatedInput` only together with
///   `permissionDecision: "allow"` (openai/codex, `codex-rs/hooks/src/engine/output_parser.rs`),
///   and what that `allow` does to Codex's own approval of the command is not established; the
///   rewritten command would also run inside Codex's own sandbox (see docs/agents.md).
fn sandboxed(
    ep: &Endpoint,
    dialect: Dialect,
    session: &str,
    tool: &str,
    call: Option<&str>,
    command: &str,
    input: &Value,
) -> Result<Option<Outcome>, ApiError> {
    let mode: SandboxMode = ep.call_as("sandbox.mode", json!({}))?;
    let mode: rewind_api::SandboxMode = mode.mode.parse().map_err(|e| {
        ApiError::new(
            rewind_api::ErrorKind::Error,
            format!("the sandbox mode {:?}: {e}", mode.mode),
        )
    })?;
    if mode == rewind_api::SandboxMode::DangerFullAccess || !on_path("bwrap") {
        return Ok(None);
    }
    let exe = std::env::current_exe()
        .map_err(|e| ApiError::new(rewind_api::ErrorKind::Error, e.to_string()))?;
    let shell = if Path::new("/bin/bash").exists() {
        "/bin/bash"
    } else {
        "/bin/sh"
    };
    let mut argv = vec![
        exe.to_string_lossy().into_owned(),
        "-s".into(),
        session.into(),
        "exec".into(),
        "--sandbox".into(),
        mode.to_string(),
        "--tool".into(),
        tool.into(),
    ];
    if let Some(id) = call {
        argv.extend(["--tool-call".into(), id.into()]);
    }
    argv.extend(["--".into(), shell.into(), "-c".into(), command.into()]);
    let rewritten = argv.iter().map(|a| quote(a)).collect::<Vec<_>>().join(" ");
    let mut updated = input.clone();
    updated["command"] = Value::String(rewritten);
    let doc = match dialect {
        Dialect::Gemini => serde_json::json!({
            "hookSpecificOutput": {"hookEventName": "BeforeTool", "tool_input": updated}
        }),
        Dialect::ClaudeCode | Dialect::Codex => serde_json::json!({
            "hookSpecificOutput": {"hookEventName": "PreToolUse", "updatedInput": updated}
        }),
    };
    Ok(Some(Outcome {
        stdout: doc.to_string(),
        ..Outcome::default()
    }))
}

/// `s` as one shell word.
fn quote(s: &str) -> String {
    if !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_./=:,+@%".contains(&b))
    {
        return s.to_string();
    }
    format!("'{}'", s.replace('\'', "'\\''"))
}

/// Whether `program` is on `PATH`.
fn on_path(program: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|p| std::env::split_paths(&p).any(|d| d.join(program).is_file()))
}

fn post(
    ep: &Endpoint,
    call: Option<String>,
    files: Vec<PathBuf>,
    failed: bool,
) -> Result<Outcome, ApiError> {
    let open: OpenEpochs = ep.call_as("epoch.list", json!({}))?;
    let mine = open
        .epochs
        .iter()
        .find(|e| call.is_some() && e.tool_call == call);
    // Settled already (a parallel call's epoch was opened after it): what changed since is in
    // that epoch.
    if let Some(e) = mine {
        ep.epoch_end(&EpochEndRequest {
            epoch: Some(e.id.clone()),
            abort: failed,
        })?;
    }
    // The agent knows the files as it wrote them: its next edit needs no new read.
    let written: Vec<PathBuf> = files
        .iter()
        .map(|f| absolute(ep, f))
        .filter(|f| f.is_file())
        .collect();
    if !failed && !written.is_empty() {
        ep.call("read", json!({"paths": written, "record_only": true}))?;
    }
    Ok(Outcome::default())
}

fn read(
    ep: &Endpoint,
    file: PathBuf,
    offset: Option<u64>,
    limit: Option<u64>,
) -> Result<(), ApiError> {
    let range = match (offset, limit) {
        (None, None) => None,
        (o, l) => {
            let start = o.unwrap_or(1).max(1);
            Some(match l {
                Some(l) if l > 0 => format!("{start}:{}", start + l - 1),
                _ => format!("{start}:"),
            })
        }
    };
    ep.call(
        "read",
        json!({"paths": [absolute(ep, &file)], "range": range, "record_only": true}),
    )?;
    Ok(())
}

/// Settles the session's open epochs (what its tools left open).
fn settle_all(ep: &Endpoint) -> Result<(), ApiError> {
    let open: OpenEpochs = ep.call_as("epoch.list", json!({}))?;
    for e in open.epochs {
        ep.epoch_end(&EpochEndRequest {
            epoch: Some(e.id),
            abort: false,
        })?;
    }
    Ok(())
}
