//! The agents' hook events, each agent's dialect read into one [`Event`] the actions act on.
//!
//! | | Claude Code | Codex | Gemini CLI |
//! |---|---|---|---|
//! | prompt | `UserPromptSubmit` (`prompt_id`) | `UserPromptSubmit` (`turn_id`) | `BeforeAgent` |
//! | before / after a tool | `PreToolUse` / `PostToolUse(Failure)` | `PreToolUse` / `PostToolUse` | `BeforeTool` / `AfterTool` |
//! | file tools | `Edit`, `Write`, `NotebookEdit`, `MultiEdit` (`file_path`) | `apply_patch` (paths from the patch in `command`) | `write_file`, `replace` (`file_path`) |
//! | shell | `Bash` | `Bash` | `run_shell_command` |
//! | read | `Read` | none | `read_file` |
//! | end | `Stop`, `SessionEnd` | `Stop` | `AfterAgent`, `SessionEnd` |
//!
//! A tool call is paired by its `tool_use_id`; Gemini CLI sends none, so its calls are keyed by
//! a hash of the tool's name and input, which its before and after events share. (A shell call
//! rewritten to run sandboxed is recorded by `rewind exec` under the id of the input the model
//! gave; its `AfterTool` carries the rewritten input, whose id names no open epoch.)

use std::path::PathBuf;

use serde_json::Value;

/// Whose events these are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dialect {
    /// Claude Code.
    ClaudeCode,
    /// OpenAI Codex CLI.
    Codex,
    /// Gemini CLI.
    Gemini,
}

impl Dialect {
    /// Whether the agent reports what it reads: without that, the guard cannot know what the
    /// session has seen, so it is not applied (every edit of an existing file would be refused).
    pub fn reports_reads(self) -> bool {
        self != Dialect::Codex
    }
}

/// One event, read.
#[derive(Debug)]
pub(crate) struct Event {
    pub session: String,
    pub cwd: PathBuf,
    pub what: What,
}

/// What happened.
#[derive(Debug)]
pub(crate) enum What {
    SessionStart,
    Prompt {
        id: Option<String>,
        text: Option<String>,
    },
    /// A file was read (lines `offset`, `limit` when partial).
    Read {
        file: PathBuf,
        offset: Option<u64>,
        limit: Option<u64>,
    },
    /// A tool is about to run: `files` it will write (a file tool), or a shell `command`;
    /// `input` as the agent gave it.
    Pre {
        tool: String,
        call: Option<String>,
        files: Vec<PathBuf>,
        command: Option<String>,
        input: Value,
    },
    /// A tool ran (`failed`: it failed); `files`: those a file tool wrote.
    Post {
        call: Option<String>,
        files: Vec<PathBuf>,
        failed: bool,
    },
    End,
    /// Nothing to record.
    Other,
}

fn s<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
    v.get(key).and_then(Value::as_str)
}

/// Reads `v` as an event of `dialect`; `Err` says why it is not one.
pub(crate) fn read(dialect: Dialect, v: &Value) -> Result<Event, String> {
    let (Some(name), Some(session), Some(cwd)) =
        (s(v, "hook_event_name"), s(v, "session_id"), s(v, "cwd"))
    else {
        return Err("a hook event without hook_event_name, session_id or cwd".into());
    };
    let cwd = PathBuf::from(cwd);
    let tool = s(v, "tool_name").unwrap_or_default().to_string();
    let input = v.get("tool_input").cloned().unwrap_or(Value::Null);
    let call = s(v, "tool_use_id").map(str::to_string).or_else(|| {
        (dialect == Dialect::Gemini && !tool.is_empty()).then(|| synthetic_id(&tool, &input))
    });
    let path = |p: &str| cwd.join(p);
    let files: Vec<PathBuf> = match (dialect, tool.as_str()) {
        (Dialect::ClaudeCode, "Edit" | "Write" | "NotebookEdit" | "MultiEdit")
        | (Dialect::Gemini, "write_file" | "replace") => s(&input, "file_path")
            .or_else(|| s(&input, "notebook_path"))
            .or_else(|| s(&input, "absolute_path"))
            .map(path)
            .into_iter()
            .collect(),
        (Dialect::Codex, "apply_patch") => s(&input, "command")
            .or_else(|| s(&input, "patch"))
            .map(|p| patch_paths(p).into_iter().map(|f| path(&f)).collect())
            .unwrap_or_default(),
        _ => Vec::new(),
    };
    let file_tool = matches!(
        (dialect, tool.as_str()),
        (
            Dialect::ClaudeCode,
            "Edit" | "Write" | "NotebookEdit" | "MultiEdit"
        ) | (Dialect::Codex, "apply_patch")
            | (Dialect::Gemini, "write_file" | "replace")
    );
    let shell = match dialect {
        Dialect::ClaudeCode | Dialect::Codex => tool == "Bash",
        Dialect::Gemini => tool == "run_shell_command",
    };
    let read_tool = match dialect {
        Dialect::ClaudeCode => tool == "Read",
        Dialect::Codex => false,
        Dialect::Gemini => tool == "read_file",
    };
    let before = matches!(name, "PreToolUse" | "BeforeTool");
    let after = matches!(name, "PostToolUse" | "PostToolUseFailure" | "AfterTool");
    let failed = name == "PostToolUseFailure"
        || v.get("tool_response")
            .and_then(|r| r.get("error"))
            .is_some_and(|e| !e.is_null());
    let what = match name {
        "SessionStart" => What::SessionStart,
        "UserPromptSubmit" | "BeforeAgent" => What::Prompt {
            id: s(v, "prompt_id")
                .or_else(|| s(v, "turn_id"))
                .map(str::to_string),
            text: s(v, "prompt").map(str::to_string),
        },
        _ if before && (file_tool || shell) => What::Pre {
            tool,
            call,
            files,
            command: s(&input, "command").filter(|_| shell).map(str::to_string),
            input: input.clone(),
        },
        _ if after && read_tool && !failed => {
            match s(&input, "file_path").or_else(|| s(&input, "absolute_path")) {
                Some(f) => What::Read {
                    file: path(f),
                    offset: input.get("offset").and_then(Value::as_u64),
                    limit: input.get("limit").and_then(Value::as_u64),
                },
                None => What::Other,
            }
        }
        _ if after && (file_tool || shell) => What::Post {
            call,
            files,
            failed,
        },
        "Stop" | "SessionEnd" | "AfterAgent" => What::End,
        _ => What::Other,
    };
    Ok(Event {
        session: session.to_string(),
        cwd,
        what,
    })
}

/// A call id for agents that send none: the same for a tool's before and after events.
fn synthetic_id(tool: &str, input: &Value) -> String {
    let text = format!("{tool}\0{input}");
    let mut h: u64 = 0xcbf2_9ce4_8422_2325; // FNV-1a: stable across processes and builds
    for b in text.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    format!("call-{h:016x}")
}

/// The files a Codex `apply_patch` envelope touches (`*** Add File:`, `*** Update File:`,
/// `*** Delete File:`, `*** Move to:`), in order, each once.
pub(crate) fn patch_paths(patch: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for line in patch.lines() {
        for marker in [
            "*** Add File: ",
            "*** Update File: ",
            "*** Delete File: ",
            "*** Move to: ",
        ] {
            if let Some(p) = line.strip_prefix(marker) {
                let p = p.trim().to_string();
                if !p.is_empty() && !out.contains(&p) {
                    out.push(p);
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codex_patches_name_their_files() {
        let p = "*** Begin Patch\n*** Update File: src/a.rs\n@@\n-x\n+y\n*** Add File: b.txt\n+b\n\
                 *** Update File: old.rs\n*** Move to: new.rs\n*** Delete File: gone.txt\n*** End Patch\n";
        assert_eq!(
            patch_paths(p),
            ["src/a.rs", "b.txt", "old.rs", "new.rs", "gone.txt"]
        );
    }
}
