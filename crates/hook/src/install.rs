//! `rewind hook install|uninstall AGENT`: Rewind's hooks merged into (and taken out of) the
//! agent's settings file (Claude Code's `settings.json`, Codex's `hooks.json`, Gemini CLI's
//! `settings.json`: one shape, event → matcher groups → command handlers), keeping everything
//! else in it.
//!
//! Idempotent: installing removes Rewind's own hook groups first (recognised by their command,
//! which runs `rewind hook AGENT`), then adds them once. The file as it was before the first
//! install is kept beside it as `settings.json.rewind-backup`; uninstalling removes Rewind's
//! groups, then the event lists and the `hooks` object they leave empty, and the file itself
//! if installing created it, so install then uninstall gives back the file as it was.

use std::path::{Path, PathBuf};

use serde_json::{json, Map, Value};

use crate::Dialect;

/// Which settings file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    /// The project's file shared through the repository (`.claude/settings.json`,
    /// `.codex/hooks.json`, `.gemini/settings.json`).
    Project,
    /// The project's file for this machine only: `.claude/settings.local.json` (Claude Code);
    /// the project file for the others, which have none.
    Local,
    /// The user's file (`~/.claude/settings.json`, `~/.codex/hooks.json`,
    /// `~/.gemini/settings.json`): every project.
    User,
}

/// The settings file of `scope` for `dialect`, for the project at `project` (`home`: the
/// user's home).
pub fn settings_path(dialect: Dialect, scope: Scope, project: &Path, home: &Path) -> PathBuf {
    let (dir, file, local) = match dialect {
        Dialect::ClaudeCode => (".claude", "settings.json", "settings.local.json"),
        Dialect::Codex => (".codex", "hooks.json", "hooks.json"),
        Dialect::Gemini => (".gemini", "settings.json", "settings.json"),
    };
    match scope {
        Scope::Project => project.join(dir).join(file),
        Scope::Local => project.join(dir).join(local),
        Scope::User => home.join(dir).join(file),
    }
}

/// An event Rewind handles and its tool matcher.
type Hooked = (&'static str, Option<&'static str>);

/// The events Rewind handles for `dialect`, and the handler timeout (Claude Code and Codex
/// count seconds, Gemini CLI milliseconds).
fn events(dialect: Dialect) -> (&'static [Hooked], u64) {
    const CLAUDE: &[Hooked] = &[
        ("SessionStart", None),
        ("UserPromptSubmit", None),
        ("PreToolUse", Some("Edit|Write|NotebookEdit|MultiEdit|Bash")),
        (
            "PostToolUse",
            Some("Edit|Write|NotebookEdit|MultiEdit|Bash|Read"),
        ),
        (
            "PostToolUseFailure",
            Some("Edit|Write|NotebookEdit|MultiEdit|Bash"),
        ),
        ("Stop", None),
        ("SessionEnd", None),
    ];
    const CODEX: &[Hooked] = &[
        ("SessionStart", None),
        ("UserPromptSubmit", None),
        ("PreToolUse", Some("Bash|apply_patch")),
        ("PostToolUse", Some("Bash|apply_patch")),
        ("Stop", None),
    ];
    const GEMINI: &[Hooked] = &[
        ("SessionStart", None),
        ("BeforeAgent", None),
        ("BeforeTool", Some("write_file|replace|run_shell_command")),
        (
            "AfterTool",
            Some("write_file|replace|run_shell_command|read_file"),
        ),
        ("AfterAgent", None),
        ("SessionEnd", None),
    ];
    match dialect {
        Dialect::ClaudeCode => (CLAUDE, 60),
        Dialect::Codex => (CODEX, 60),
        Dialect::Gemini => (GEMINI, 60_000),
    }
}

/// The command-line word of `dialect` (`rewind hook WORD`).
pub fn word(dialect: Dialect) -> &'static str {
    match dialect {
        Dialect::ClaudeCode => "claude-code",
        Dialect::Codex => "codex",
        Dialect::Gemini => "gemini",
    }
}

fn is_ours(group: &Value) -> bool {
    group["hooks"].as_array().is_some_and(|hs| {
        hs.iter().any(|h| {
            h["command"].as_str().is_some_and(|c| {
                ["claude-code", "codex", "gemini"]
                    .iter()
                    .any(|w| c.ends_with(&format!(" hook {w}")))
            })
        })
    })
}

fn read(path: &Path) -> Result<Option<Value>, String> {
    match std::fs::read(path) {
        Ok(b) if b.iter().all(u8::is_ascii_whitespace) => Ok(Some(json!({}))),
        Ok(b) => serde_json::from_slice(&b)
            .map(Some)
            .map_err(|e| format!("{} is not valid JSON ({e}); fix it first", path.display())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(format!("cannot read {}: {e}", path.display())),
    }
}

fn write(path: &Path, v: &Value) -> Result<(), String> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)
            .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    }
    let mut text = serde_json::to_string_pretty(v).expect("serializable");
    text.push('\n');
    let tmp = path.with_extension("json.rewind-tmp");
    std::fs::write(&tmp, text)
        .and_then(|_| std::fs::rename(&tmp, path))
        .map_err(|e| format!("cannot write {}: {e}", path.display()))
}

fn backup_of(path: &Path) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(".rewind-backup");
    path.with_file_name(name)
}

/// Removes Rewind's groups from `settings`; whether any were there.
fn remove_ours(settings: &mut Value) -> bool {
    let mut removed = false;
    if let Some(hooks) = settings.get_mut("hooks").and_then(Value::as_object_mut) {
        for (_, groups) in hooks.iter_mut() {
            if let Some(list) = groups.as_array_mut() {
                let before = list.len();
                list.retain(|g| !is_ours(g));
                removed |= list.len() != before;
            }
        }
    }
    removed
}

/// Merges Rewind's hooks for `dialect`, running `command`, into the settings file at `path`.
/// Returns what was done, for a person.
pub fn install(dialect: Dialect, path: &Path, command: &str) -> Result<String, String> {
    let existing = read(path)?;
    let backup = backup_of(path);
    if !backup.exists() {
        // What the file was before Rewind touched it: `null` when there was none.
        let before = existing.clone().unwrap_or(Value::Null);
        write(&backup, &before)?;
    }
    let mut settings = existing.unwrap_or_else(|| json!({}));
    let Some(obj) = settings.as_object_mut() else {
        return Err(format!("{} does not hold a JSON object", path.display()));
    };
    let mut doc = Value::Object(std::mem::take(obj));
    let replaced = remove_ours(&mut doc);
    let hooks = doc
        .as_object_mut()
        .expect("an object")
        .entry("hooks")
        .or_insert_with(|| Value::Object(Map::new()));
    let Some(hooks) = hooks.as_object_mut() else {
        return Err(format!("\"hooks\" in {} is not an object", path.display()));
    };
    let (events, timeout) = events(dialect);
    for (event, matcher) in events {
        let mut group =
            json!({"hooks": [{"type": "command", "command": command, "timeout": timeout}]});
        if let Some(m) = matcher {
            group["matcher"] = json!(m);
        }
        let list = hooks.entry(*event).or_insert_with(|| json!([]));
        match list.as_array_mut() {
            Some(l) => l.push(group),
            None => return Err(format!("hooks.{event} in {} is not a list", path.display())),
        }
    }
    write(path, &doc)?;
    Ok(format!(
        "{} Rewind's hooks in {} (backup of the original: {})",
        if replaced { "updated" } else { "installed" },
        path.display(),
        backup.display()
    ))
}

/// Takes Rewind's hooks out of the settings file at `path`.
pub fn uninstall(path: &Path) -> Result<String, String> {
    let Some(mut doc) = read(path)? else {
        return Ok(format!(
            "{} does not exist: nothing to remove",
            path.display()
        ));
    };
    if !remove_ours(&mut doc) {
        return Ok(format!("no Rewind hooks in {}", path.display()));
    }
    if let Some(hooks) = doc.get_mut("hooks").and_then(Value::as_object_mut) {
        hooks.retain(|_, groups| groups.as_array().is_none_or(|l| !l.is_empty()));
    }
    let backup = backup_of(path);
    let original = read(&backup)?;
    if let Some(obj) = doc.as_object_mut() {
        let had_hooks = original.as_ref().is_some_and(|o| o.get("hooks").is_some());
        if obj
            .get("hooks")
            .and_then(Value::as_object)
            .is_some_and(Map::is_empty)
            && !had_hooks
        {
            obj.remove("hooks");
        }
    }
    if doc == json!({}) && original == Some(Value::Null) {
        std::fs::remove_file(path).map_err(|e| format!("cannot remove {}: {e}", path.display()))?;
    } else {
        write(path, &doc)?;
    }
    let _ = std::fs::remove_file(&backup);
    Ok(format!("removed Rewind's hooks from {}", path.display()))
}

/// The first line of the body of every command file Rewind installs: how uninstall (and a
/// second install) tells Rewind's files from the user's own.
const COMMAND_MARK: &str = "<!-- installed by `rewind hook install claude-code`; `rewind hook uninstall claude-code` removes it -->";

/// Claude Code's slash commands Rewind installs beside its hooks, as (name, description,
/// rewind arguments (`$ARGUMENTS`: what the user typed after the command), what the model is
/// told). Each runs `rewind` through the command file's
/// `!` line, which Claude Code runs itself when the user types the command: not a Bash tool
/// call, so no hook rewrites it into the sandbox (checked with Claude Code 2.1.332), and
/// `disable-model-invocation` keeps the model from running it.
const COMMANDS: &[(&str, &str, &str, &str)] = &[
    (
        "rewind",
        "Rewind: list this session's checkpoints; /rewind N previews rewinding the files to N, /rewind N yes does it, /rewind undo",
        "hook command rewind $ARGUMENTS",
        "The user ran Rewind's /rewind; show them the output above as it is, without running \
         anything or changing files yourself.",
    ),
    (
        "sandbox",
        "Rewind: toggle the sandbox of Bash calls between workspace-write and full access",
        "sandbox toggle --yes",
        "The user switched Rewind's sandbox with /sandbox; the output above says the mode now. \
         Tell them in one sentence. Do not run anything.",
    ),
];

/// The directory of Claude Code's command files beside the settings file at `settings`
/// (`.claude/commands` of the project, or `~/.claude/commands`).
fn commands_dir(settings: &Path) -> PathBuf {
    settings.parent().unwrap_or(Path::new(".")).join("commands")
}

/// `exe` as Claude Code should see it on a `!` line and in `allowed-tools`: as it is when it
/// holds only safe characters, else single-quoted.
fn shell_word(exe: &str) -> String {
    if exe
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b"/._-+".contains(&b))
    {
        exe.to_string()
    } else {
        format!("'{}'", exe.replace('\'', "'\\''"))
    }
}

/// Writes Rewind's slash commands (`/sandbox`) beside the Claude Code settings file at
/// `settings`, running the rewind binary `exe`. A command file of the same name that is not
/// Rewind's is left alone (said in the result). Returns what was done, for a person.
pub fn install_commands(settings: &Path, exe: &str) -> Result<Vec<String>, String> {
    let dir = commands_dir(settings);
    let exe = shell_word(exe);
    let mut said = Vec::new();
    for (name, description, args, tell) in COMMANDS {
        let path = dir.join(format!("{name}.md"));
        if let Ok(old) = std::fs::read_to_string(&path) {
            if !old.contains(COMMAND_MARK) {
                said.push(format!(
                    "left {} alone: it is not Rewind's (run `rewind {args}` instead)",
                    path.display()
                ));
                continue;
            }
        }
        // What the command may run: exactly its line, or any arguments after its prefix.
        let allowed = match args.strip_suffix(" $ARGUMENTS") {
            Some(prefix) => format!("Bash({exe} {prefix}:*)"),
            None => format!("Bash({exe} {args})"),
        };
        let text = format!(
            "---\ndescription: {description}\ndisable-model-invocation: true\n\
             allowed-tools: {allowed}\n---\n{COMMAND_MARK}\n!`{exe} {args}`\n\n{tell}\n"
        );
        std::fs::create_dir_all(&dir)
            .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        std::fs::write(&path, text).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        said.push(format!(
            "installed the /{name} command in {}",
            path.display()
        ));
    }
    Ok(said)
}

/// Removes the slash commands [`install_commands`] wrote beside `settings` (only files that
/// are Rewind's), and the `commands` directory if that leaves it empty.
pub fn uninstall_commands(settings: &Path) -> Result<Vec<String>, String> {
    let dir = commands_dir(settings);
    let mut said = Vec::new();
    for (name, ..) in COMMANDS {
        let path = dir.join(format!("{name}.md"));
        match std::fs::read_to_string(&path) {
            Ok(text) if text.contains(COMMAND_MARK) => {
                std::fs::remove_file(&path)
                    .map_err(|e| format!("cannot remove {}: {e}", path.display()))?;
                said.push(format!("removed the /{name} command ({})", path.display()));
            }
            _ => {}
        }
    }
    // Only when empty: remove_dir fails on a directory with the user's own commands.
    let _ = std::fs::remove_dir(&dir);
    Ok(said)
}
