//! Claude Code's hook events (see the crate header for what each does).

use std::io::Write;
use std::path::{Path, PathBuf};

use rewind_api::{
    ApiError, CheckWriteRequest, CheckpointRequest, Context, EpochBeginRequest, EpochEndRequest,
    HookGuard, ReadRequest, Recorder, Service, StatusRequest,
};
use serde_json::Value;

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

/// The file tools whose writes the guard checks.
const FILE_TOOLS: &[&str] = &["Edit", "Write", "NotebookEdit", "MultiEdit"];

/// Handles one event (the JSON text Claude Code wrote on the hook's standard input).
pub fn run(input: &[u8]) -> Outcome {
    let event: Value = match serde_json::from_slice(input) {
        Ok(v @ Value::Object(_)) => v,
        Ok(_) | Err(_) => return Outcome::warn("ignored a hook event that is not a JSON object"),
    };
    match handle(&event) {
        Ok(o) => o,
        Err(e) => Outcome::warn(format!(
            "{} (the agent goes on; this call may not be recorded)",
            e.message
        )),
    }
}

fn str_of<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
    v.get(key).and_then(Value::as_str)
}

fn handle(event: &Value) -> Result<Outcome, ApiError> {
    let (Some(name), Some(session), Some(cwd)) = (
        str_of(event, "hook_event_name"),
        str_of(event, "session_id"),
        str_of(event, "cwd"),
    ) else {
        return Ok(Outcome::warn(
            "ignored a hook event without hook_event_name, session_id or cwd",
        ));
    };
    let dir = std::env::var_os("CLAUDE_PROJECT_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(cwd));
    let svc = Service::new(Context::new(&dir, session)?);
    let tool = str_of(event, "tool_name").unwrap_or_default();
    let input = event.get("tool_input").cloned().unwrap_or(Value::Null);
    let call = str_of(event, "tool_use_id").map(str::to_string);
    match name {
        "SessionStart" => session_start(&svc, session),
        "UserPromptSubmit" => prompt(&svc, event),
        "PreToolUse" if FILE_TOOLS.contains(&tool) => pre_file(&svc, tool, &input, call),
        "PreToolUse" if tool == "Bash" => {
            let server = rewind_server::client::Client::for_workspace(svc.context());
            recorder(&svc, &server).epoch_begin(&EpochBeginRequest {
                tool: Some(tool.into()),
                tool_call: call,
                note: str_of(&input, "command").map(short),
                ..Default::default()
            })?;
            Ok(Outcome::default())
        }
        "PostToolUse" | "PostToolUseFailure" if tool == "Read" => {
            if name == "PostToolUse" {
                read(&svc, &input)?;
            }
            Ok(Outcome::default())
        }
        "PostToolUse" | "PostToolUseFailure" if tool == "Bash" || FILE_TOOLS.contains(&tool) => {
            post(&svc, tool, &input, call, name == "PostToolUseFailure")
        }
        "Stop" | "SessionEnd" => {
            settle_all(&svc)?;
            Ok(Outcome::default())
        }
        // Other events and tools: nothing to record.
        _ => Ok(Outcome::default()),
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

fn prompt(svc: &Service, event: &Value) -> Result<Outcome, ApiError> {
    settle_all(svc)?;
    let message = match str_of(event, "prompt_id") {
        Some(id) => id.to_string(),
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
    let label = str_of(event, "prompt").map(|p| {
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

/// The file a file tool writes.
fn file_of(input: &Value) -> Option<PathBuf> {
    str_of(input, "file_path")
        .or_else(|| str_of(input, "notebook_path"))
        .map(PathBuf::from)
}

fn pre_file(
    svc: &Service,
    tool: &str,
    input: &Value,
    call: Option<String>,
) -> Result<Outcome, ApiError> {
    let Some(file) = file_of(input) else {
        return Ok(Outcome::warn(format!(
            "{tool} without a file path: not recorded"
        )));
    };
    let mut out = Outcome::default();
    let guard = svc.config()?.hooks.guard.unwrap_or_default();
    if guard != HookGuard::Off {
        let verdicts = svc.check_write(&CheckWriteRequest {
            paths: vec![file.clone()],
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
        paths: vec![file],
        ..Default::default()
    })?;
    Ok(out)
}

fn post(
    svc: &Service,
    tool: &str,
    input: &Value,
    call: Option<String>,
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
    // The agent knows the file as it wrote it: its next edit needs no new read.
    if FILE_TOOLS.contains(&tool) && !failed {
        if let Some(file) = file_of(input) {
            if file.exists() {
                svc.read(&ReadRequest {
                    paths: vec![file],
                    range: None,
                })?;
            }
        }
    }
    Ok(Outcome::default())
}

fn read(svc: &Service, input: &Value) -> Result<(), ApiError> {
    let Some(file) = file_of(input) else {
        return Ok(());
    };
    let offset = input.get("offset").and_then(Value::as_u64);
    let limit = input.get("limit").and_then(Value::as_u64);
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
