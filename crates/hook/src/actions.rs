//! What each event does (see the crate header), whichever agent sent it.

use std::io::Write;
use std::path::{Path, PathBuf};

use rewind_api::{
    ApiError, CheckWriteRequest, CheckpointRequest, Context, EpochBeginRequest, EpochEndRequest,
    HookGuard, ReadRequest, Recorder, Service, StatusRequest,
};
use serde_json::Value;

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
    let svc = Service::new(Context::new(&dir, &event.session)?);
    match event.what {
        What::SessionStart => session_start(&svc, &event.session),
        What::Prompt { id, text } => prompt(&svc, id, text),
        What::Read {
            file,
            offset,
            limit,
        } => {
            read(&svc, file, offset, limit)?;
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
                    sandboxed(&svc, dialect, &event.session, &tool, call_id, &c, &input)?
                {
                    return Ok(out);
                }
                pre(&svc, dialect, &tool, call, files, Some(c))
            }
            command => pre(&svc, dialect, &tool, call, files, command),
        },
        What::Post {
            call,
            files,
            failed,
        } => post(&svc, call, files, failed),
        What::End => {
            settle_all(&svc)?;
            Ok(Outcome::default())
        }
        What::Other => Ok(Outcome::default()),
    }
}

fn recorder<'a>(
    svc: &'a Service,
    server: &'a Option<rewind_server::client::Client>,
) -> &'a dyn Recorder {
    match server {
        Some(s) => s,
        None => svc,
    }
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

fn session_start(svc: &Service, session: &str) -> Result<Outcome, ApiError> {
    // Registers the workspace (and takes its first capture) if it is not yet.
    svc.open()?;
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

fn prompt(svc: &Service, id: Option<String>, text: Option<String>) -> Result<Outcome, ApiError> {
    settle_all(svc)?;
    if text.as_deref().is_some_and(crate::slash::is_own_command) {
        // `/rewind` and `/sandbox` act on the session; a checkpoint for them would only shift
        // the numbers `/rewind` shows.
        return Ok(Outcome::default());
    }
    let message = match id {
        Some(id) => id,
        None => {
            // No prompt id (older builds): the session's checkpoints, counted.
            let n = svc
                .log(&rewind_api::LogRequest {
                    all_sessions: false,
                    limit: 0,
                })?
                .items
                .iter()
                .filter(|e| matches!(e.item, rewind_api::LogItem::Checkpoint { .. }))
                .count();
            format!("prompt-{}", n + 1)
        }
    };
    let label = text.map(|p| {
        let first = p.lines().next().unwrap_or_default();
        first.chars().take(80).collect::<String>()
    });
    svc.checkpoint(&CheckpointRequest {
        message: Some(message),
        label,
        ..Default::default()
    })?;
    Ok(Outcome::default())
}

fn pre(
    svc: &Service,
    dialect: Dialect,
    tool: &str,
    call: Option<String>,
    files: Vec<PathBuf>,
    command: Option<String>,
) -> Result<Outcome, ApiError> {
    let mut out = Outcome::default();
    let guard = svc.config()?.hooks.guard.unwrap_or_default();
    if !files.is_empty() && guard != HookGuard::Off && dialect.reports_reads() {
        let verdicts = svc.check_write(&CheckWriteRequest {
            paths: files.clone(),
        })?;
        if let Some(v) = verdicts.0.iter().find(|v| !v.allowed) {
            let why = v.reason.clone().unwrap_or_else(|| "refused".into());
            if guard == HookGuard::Enforce {
                return Ok(Outcome {
                    code: 2,
                    stdout: String::new(),
                    stderr: format!("Rewind refused this {tool}: {why}\n"),
                });
            }
            out.stderr = format!("rewind: warning: {tool} would be refused: {why}\n");
        }
    }
    let server = rewind_server::client::Client::for_workspace(svc.context());
    recorder(svc, &server).epoch_begin(&EpochBeginRequest {
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
    svc: &Service,
    dialect: Dialect,
    session: &str,
    tool: &str,
    call: Option<&str>,
    command: &str,
    input: &Value,
) -> Result<Option<Outcome>, ApiError> {
    let mode = svc.config_with_settings()?.sandbox.mode.unwrap_or_default();
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
        code: 0,
        stdout: doc.to_string(),
        stderr: String::new(),
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
    svc: &Service,
    call: Option<String>,
    files: Vec<PathBuf>,
    failed: bool,
) -> Result<Outcome, ApiError> {
    let open = svc.status(&StatusRequest {})?.open_epochs;
    let mine = open
        .iter()
        .find(|e| e.session == svc.context().session() && call.is_some() && e.tool_call == call);
    // Settled already (a parallel call's epoch was opened after it): what changed since is in
    // that epoch.
    if let Some(e) = mine {
        let server = rewind_server::client::Client::for_workspace(svc.context());
        recorder(svc, &server).epoch_end(&EpochEndRequest {
            epoch: Some(e.id.clone()),
            abort: failed,
        })?;
    }
    // The agent knows the files as it wrote them: its next edit needs no new read.
    let written: Vec<PathBuf> = files.into_iter().filter(|f| f.is_file()).collect();
    if !failed && !written.is_empty() {
        svc.read(&ReadRequest {
            paths: written,
            range: None,
        })?;
    }
    Ok(Outcome::default())
}

fn read(
    svc: &Service,
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
    let range = range
        .map(|r| r.parse())
        .transpose()
        .map_err(|e: String| ApiError::usage(e))?;
    svc.read(&ReadRequest {
        paths: vec![file],
        range,
    })?;
    Ok(())
}

/// Settles the session's open epochs (what its tools left open).
fn settle_all(svc: &Service) -> Result<(), ApiError> {
    let open = svc.status(&StatusRequest {})?.open_epochs;
    for e in open.iter().filter(|e| e.session == svc.context().session()) {
        svc.epoch_end(&EpochEndRequest {
            epoch: Some(e.id.clone()),
            abort: false,
        })?;
    }
    Ok(())
}
