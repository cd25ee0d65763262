//! `rewind hook install|uninstall claude-code`: Rewind's hooks merged into (and taken out of)
//! a Claude Code `settings.json`, keeping everything else in it.
//!
//! Idempotent: installing removes Rewind's own hook groups first (recognised by their command,
//! which runs `hook claude-code`), then adds them once. The file as it was before the first
//! install is kept beside it as `settings.json.rewind-backup`; uninstalling removes Rewind's
//! groups, then the event lists and the `hooks` object they leave empty, and the file itself
//! if installing created it, so install then uninstall gives back the file as it was.

use std::path::{Path, PathBuf};

use serde_json::{json, Map, Value};

/// Which settings file (Claude Code reads all of them).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    /// `.claude/settings.json` in the project: shared through the repository.
    Project,
    /// `.claude/settings.local.json` in the project: this machine only (git ignores it).
    Local,
    /// `~/.claude/settings.json`: every project of this user.
    User,
}

/// The settings file of `scope` for the project at `project` (`home`: the user's home).
pub fn settings_path(scope: Scope, project: &Path, home: &Path) -> PathBuf {
    match scope {
        Scope::Project => project.join(".claude/settings.json"),
        Scope::Local => project.join(".claude/settings.local.json"),
        Scope::User => home.join(".claude/settings.json"),
    }
}

/// The events Rewind handles, with their tool matcher.
const EVENTS: &[(&str, Option<&str>)] = &[
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

fn is_ours(group: &Value) -> bool {
    group["hooks"].as_array().is_some_and(|hs| {
        hs.iter().any(|h| {
            h["command"]
                .as_str()
                .is_some_and(|c| c.ends_with(" hook claude-code"))
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

/// Merges Rewind's hooks, running `command`, into the settings file at `path`. Returns what
/// was done, for a person.
pub fn install(path: &Path, command: &str) -> Result<String, String> {
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
    for (event, matcher) in EVENTS {
        let mut group = json!({"hooks": [{"type": "command", "command": command, "timeout": 60}]});
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
