//! The agent hook adapters. `rewind hook claude-code` replaying every hook event of a real Claude Code session
//! (2.1.332, recorded: `tests/fixtures/claude-code-2.1.332-two-prompts.jsonl`) in a real
//! workspace, doing what each tool did between its `PreToolUse` and `PostToolUse`, with a user
//! edit between the prompts: the session is the agent's, each prompt a checkpoint bound to its
//! prompt id, each tool call an epoch with its `tool_use_id`; the second prompt's Write of the
//! file the user changed is refused (exit 2, the reason for the model); a restore to the second
//! prompt gives the tree as it was then, the user's edit kept. Parallel Bash calls are each
//! recorded once; malformed and unknown events change nothing and exit 0; install and
//! uninstall keep the user's settings. Codex's and Gemini CLI's dialects, from their documented
//! payloads.

use std::path::Path;
use std::process::Output;

use serde_json::{json, Value};

use crate::common::rewind::*;
use crate::common::{output_with_stdin, text, Env};

const FIXTURE: &str = include_str!("fixtures/claude-code-2.1.332-two-prompts.jsonl");
const SESSION: &str = "67f0f33d-8a74-4c01-ad85-972e3d3784fc";
const PROMPT_2: &str = "cdfec122-d661-47e0-ace3-df71a0aa8f2d";

/// These tests play the agent's tools themselves: Bash calls are not rewritten to run
/// sandboxed (`danger-full-access` in the user's configuration).
fn full_access(env: &Env) {
    std::fs::write(
        env.home.path().join("config.toml"),
        "[sandbox]\nmode = \"danger-full-access\"\n",
    )
    .unwrap();
}

fn hook(env: &Env, event: &Value, env_file: &Path) -> Output {
    let mut c = env.cmd_here(&["hook", "claude-code"]);
    c.current_dir(env.root()).env("CLAUDE_ENV_FILE", env_file);
    output_with_stdin(&mut c, event.to_string().as_bytes())
}

/// Does what the tool of a `PreToolUse` event does, in the workspace.
fn run_tool(root: &Path, event: &Value) {
    let input = &event["tool_input"];
    let file = || std::path::PathBuf::from(input["file_path"].as_str().unwrap());
    match event["tool_name"].as_str().unwrap() {
        "Edit" => {
            let old = std::fs::read_to_string(file()).unwrap();
            let new = old.replacen(
                input["old_string"].as_str().unwrap(),
                input["new_string"].as_str().unwrap(),
                1,
            );
            std::fs::write(file(), new).unwrap();
        }
        "Write" => std::fs::write(file(), input["content"].as_str().unwrap()).unwrap(),
        "Bash" => {
            let ok = std::process::Command::new("sh")
                .args(["-c", input["command"].as_str().unwrap()])
                .current_dir(root)
                .status()
                .unwrap()
                .success();
            assert!(ok, "{input}");
        }
        _ => {}
    }
}

/// What replaying the fixture did: the refused calls (tool, reason) and each hook's stderr.
struct Replay {
    refused: Vec<(Value, String)>,
    stderr: Vec<String>,
}

/// Replays the real session's events in `env`'s workspace (a.txt and old.txt in it), doing
/// what each tool did, with the user's edit of a.txt between the prompts.
fn replay_real_session(env: &Env, extra_env: &[(&str, &str)]) -> Replay {
    let root = env.root();
    let env_file = env.home.path().join("claude-env");
    let mut out = Replay {
        refused: Vec::new(),
        stderr: Vec::new(),
    };
    let mut skip_post: Option<String> = None;
    let mut user_edited = false;
    for line in FIXTURE.lines() {
        let line = line.replace("/home/dev/project", root.to_str().unwrap());
        let event: Value = serde_json::from_str(&line).unwrap();
        let name = event["hook_event_name"].as_str().unwrap();
        if name == "UserPromptSubmit" && event["prompt_id"] == PROMPT_2 && !user_edited {
            // Between the prompts, the user edits a.txt in their editor.
            write(root, "a.txt", b"the user's a\n");
            user_edited = true;
        }
        if name == "PostToolUse" && skip_post.as_deref() == event["tool_use_id"].as_str() {
            continue; // the tool never ran
        }
        let mut c = env.cmd_here(&["hook", "claude-code"]);
        c.current_dir(root).env("CLAUDE_ENV_FILE", &env_file);
        for (k, v) in extra_env {
            c.env(k, v);
        }
        let o = output_with_stdin(&mut c, event.to_string().as_bytes());
        let err = String::from_utf8_lossy(&o.stderr).into_owned();
        match o.status.code() {
            Some(0) => {
                assert!(!err.contains("rewind:"), "{name}: a warning: {err}");
                if name == "PreToolUse" {
                    run_tool(root, &event);
                }
            }
            Some(2) => {
                assert_eq!(name, "PreToolUse", "only the guard blocks: {}", text(&o));
                out.refused.push((event["tool_name"].clone(), err.clone()));
                skip_post = event["tool_use_id"].as_str().map(str::to_string);
            }
            _ => panic!("{name}: {}", text(&o)),
        }
        out.stderr
            .push(format!("{name} {}: {err}", event["tool_name"]));
    }
    out
}

#[test]
fn a_real_sessions_events_are_recorded_and_rewound() {
    let env = Env::new();
    let root = env.root();
    write(root, "a.txt", b"alpha\nbeta\n");
    write(root, "old.txt", b"old\n");
    full_access(&env);
    let env_file = env.home.path().join("claude-env");
    let refused = replay_real_session(&env, &[]).refused;
    // The second prompt's Write of a.txt (changed by the user since it was read): refused.
    assert_eq!(refused.len(), 1, "{refused:?}");
    assert_eq!(refused[0].0, "Write");
    assert!(
        refused[0].1.contains("a.txt") && refused[0].1.contains("changed"),
        "{refused:?}"
    );
    assert_eq!(
        read_str(root, "a.txt"),
        "the user's a\n",
        "the user's edit is intact"
    );
    assert!(std::fs::read_to_string(&env_file)
        .unwrap()
        .contains(&format!("export REWIND_SESSION='{SESSION}'")));
    // Every tool call that ran is an epoch of the agent's session, with its tool_use_id.
    let log = json(&env, SESSION, &["log", "--limit", "0"], 0);
    let calls: Vec<(&str, &str)> = log["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["type"] == "epoch" && e["kind"] != "external")
        .map(|e| {
            (
                e["tool"].as_str().unwrap(),
                e["tool_call"].as_str().unwrap_or("-"),
            )
        })
        .collect();
    for (tool, id) in [
        ("Edit", "toolu_d3b996f6a9c34a8f93f6"),
        ("Bash", "toolu_f45e860ccfed47779303"),
        ("Bash", "toolu_589a6305074844ff986b"),
        ("Write", "toolu_1b1cea6bcafe4ad18617"),
        ("Bash", "toolu_25cc6b09594a44f69aa2"),
    ] {
        assert!(calls.contains(&(tool, id)), "{tool} {id} in {calls:?}");
    }
    // Checkpoints bound to the prompt ids, labelled with the prompts.
    let checkpoints: Vec<(&str, &str)> = log["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["type"] == "checkpoint")
        .map(|e| (e["message"].as_str().unwrap(), e["label"].as_str().unwrap()))
        .collect();
    assert!(
        checkpoints.contains(&(PROMPT_2, "second prompt")),
        "{checkpoints:?}"
    );
    // Back to the second prompt: the tree as it was then (c.txt, which its Bash removed, is
    // back), the user's edit kept.
    expect(&env, SESSION, &["restore", PROMPT_2], 0);
    assert_eq!(read_str(root, "c.txt"), "c\n");
    assert_eq!(read_str(root, "a.txt"), "the user's a\n");
    assert_eq!(read_str(root, "d.txt"), "d\n");
    assert_eq!(read_str(root, "new.txt"), "new file\n");
    assert!(!root.join("old.txt").exists());
    // And back to the first: the agent's whole first turn undone.
    let first = checkpoints
        .iter()
        .find(|(_, l)| *l == "first prompt")
        .unwrap()
        .0;
    expect(&env, SESSION, &["restore", first, "--force"], 0);
    assert_eq!(read_str(root, "old.txt"), "old\n");
    assert!(!root.join("c.txt").exists() && !root.join("new.txt").exists());
    fsck_clean(&env);
}

fn event(name: &str, extra: Value) -> Value {
    let mut e = json!({"session_id": "S1", "hook_event_name": name});
    for (k, v) in extra.as_object().unwrap() {
        e[k] = v.clone();
    }
    e
}

/// Two Bash calls of one answer, run in parallel: B's epoch begins while A's is open, so A's
/// records what happened before (nothing here) and B's everything after, z.txt included (made
/// after A ended): every change once, none as the user's.
#[test]
fn parallel_bash_calls_are_each_recorded_once() {
    let env = Env::new();
    let root = env.root();
    write(root, "a.txt", b"a\n");
    full_access(&env);
    let f = env.home.path().join("claude-env");
    let cwd = json!(root.to_str().unwrap());
    let run = |e: Value| {
        let o = hook(&env, &e, &f);
        assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    };
    run(event(
        "SessionStart",
        json!({"cwd": cwd, "source": "startup"}),
    ));
    run(event(
        "UserPromptSubmit",
        json!({"cwd": cwd, "prompt_id": "p1", "prompt": "go"}),
    ));
    let bash = |id: &str, cmd: &str| json!({"cwd": cwd, "tool_name": "Bash", "tool_use_id": id, "tool_input": {"command": cmd}});
    run(event("PreToolUse", bash("A", "echo x > x.txt")));
    run(event("PreToolUse", bash("B", "echo y > y.txt")));
    write(root, "x.txt", b"x\n");
    write(root, "y.txt", b"y\n");
    run(event("PostToolUse", bash("A", "echo x > x.txt")));
    write(root, "z.txt", b"z\n"); // B still running
    run(event("PostToolUse", bash("B", "echo y > y.txt")));
    run(event("Stop", json!({"cwd": cwd})));
    let log = json(&env, "S1", &["log", "--limit", "0"], 0);
    let mut paths = Vec::new();
    for e in log["items"].as_array().unwrap() {
        assert_ne!(e["kind"], "external", "nothing is the user's: {log}");
        if e["type"] == "epoch" && e["tool"] == "Bash" {
            let shown = json(&env, "S1", &["show", e["id"].as_str().unwrap()], 0);
            for c in shown["changes"].as_array().unwrap() {
                paths.push(c["path"].as_str().unwrap().to_string());
            }
        }
    }
    paths.sort();
    assert_eq!(
        paths,
        ["x.txt", "y.txt", "z.txt"],
        "each change once: {log}"
    );
    expect(&env, "S1", &["restore", "p1"], 0);
    assert!(
        !root.join("x.txt").exists()
            && !root.join("y.txt").exists()
            && !root.join("z.txt").exists()
    );
}

#[test]
fn malformed_and_unknown_events_change_nothing() {
    let env = Env::new();
    write(env.root(), "a.txt", b"a\n");
    init(&env);
    let before = json(&env, "S", &["log", "--all-sessions"], 0);
    let f = env.home.path().join("claude-env");
    for input in [
        &b"not json"[..],
        b"[1,2]",
        br#"{"hook_event_name":"PreToolUse"}"#,
        br#"{"hook_event_name":"Notification","session_id":"S","cwd":"/"}"#,
    ] {
        let mut c = env.cmd_here(&["hook", "claude-code"]);
        c.current_dir(env.root()).env("CLAUDE_ENV_FILE", &f);
        let o = output_with_stdin(&mut c, input);
        assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    }
    let o = {
        let mut c = env.cmd_here(&["hook", "claude-code"]);
        output_with_stdin(&mut c, b"not json")
    };
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("rewind: ignored"),
        "{}",
        text(&o)
    );
    assert_eq!(json(&env, "S", &["log", "--all-sessions"], 0), before);
}

/// `hook install` twice leaves one copy of each of Rewind's hooks and the user's own hooks
/// and settings as they were; `uninstall` gives back the file as it was (compared as JSON); a
/// file that did not exist is removed again.
#[test]
fn install_is_idempotent_and_uninstall_gives_the_file_back() {
    let env = Env::new();
    init(&env);
    let settings = env.root().join(".claude/settings.json");
    let original = json!({
        "permissions": {"allow": ["Bash(ls *)"]},
        "hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "my-own-check"}]}]}
    });
    write(
        env.root(),
        ".claude/settings.json",
        original.to_string().as_bytes(),
    );
    for _ in 0..2 {
        let o = env.run(&["hook", "install", "claude-code", "--project"]);
        assert!(o.status.success(), "{}", text(&o));
    }
    let doc: Value = serde_json::from_slice(&std::fs::read(&settings).unwrap()).unwrap();
    assert_eq!(doc["permissions"], original["permissions"]);
    let pre = doc["hooks"]["PreToolUse"].as_array().unwrap();
    assert_eq!(pre.len(), 2, "the user's and one of Rewind's: {doc}");
    assert_eq!(pre[0]["hooks"][0]["command"], "my-own-check");
    for event in [
        "SessionStart",
        "UserPromptSubmit",
        "PostToolUse",
        "PostToolUseFailure",
        "Stop",
        "SessionEnd",
    ] {
        let groups = doc["hooks"][event].as_array().unwrap();
        assert_eq!(groups.len(), 1, "{event}: {doc}");
        let cmd = groups[0]["hooks"][0]["command"].as_str().unwrap();
        assert!(cmd.ends_with(" hook claude-code"), "{cmd}");
    }
    let o = env.run(&["hook", "uninstall", "claude-code", "--project"]);
    assert!(o.status.success(), "{}", text(&o));
    let back: Value = serde_json::from_slice(&std::fs::read(&settings).unwrap()).unwrap();
    assert_eq!(back, original);
    // Local scope, no file before: installed, then removed again.
    let local = env.root().join(".claude/settings.local.json");
    assert!(env
        .run(&["hook", "install", "claude-code"])
        .status
        .success());
    assert!(local.exists());
    assert!(env
        .run(&["hook", "uninstall", "claude-code", "--local"])
        .status
        .success());
    assert!(!local.exists(), "created by install, removed by uninstall");
}

/// Runs `rewind hook AGENT` with `e`; its exit code.
fn hook_as(env: &Env, agent: &str, e: &Value) -> i32 {
    let mut c = env.cmd_here(&["hook", agent]);
    c.current_dir(env.root());
    let o = output_with_stdin(&mut c, e.to_string().as_bytes());
    assert!(
        !String::from_utf8_lossy(&o.stderr).contains("rewind: ignored"),
        "{}",
        text(&o)
    );
    o.status.code().unwrap()
}

/// Codex's dialect (its documented payloads): a turn per prompt bound to its `turn_id`, shell
/// calls as `Bash`, edits as `apply_patch` whose files come from the patch envelope; Codex
/// reports no reads, so the edit is recorded, not guarded. A restore to the turn undoes both.
#[test]
fn codex_turns_shell_calls_and_patches_are_recorded() {
    let env = Env::new();
    let root = env.root();
    write(root, "src/a.rs", b"fn a() {}\n");
    let base = json!({"session_id": "cx1", "cwd": root.to_str().unwrap(), "model": "gpt", "permission_mode": "default", "transcript_path": null});
    let ev = |name: &str, extra: Value| {
        let mut e = base.clone();
        e["hook_event_name"] = json!(name);
        for (k, v) in extra.as_object().unwrap() {
            e[k] = v.clone();
        }
        e
    };
    assert_eq!(
        hook_as(
            &env,
            "codex",
            &ev("SessionStart", json!({"source": "startup"}))
        ),
        0
    );
    assert_eq!(
        hook_as(
            &env,
            "codex",
            &ev(
                "UserPromptSubmit",
                json!({"turn_id": "turn-1", "prompt": "fix a"})
            )
        ),
        0
    );
    let patch = "*** Begin Patch\n*** Update File: src/a.rs\n@@\n-fn a() {}\n+fn a() { 1; }\n*** Add File: src/b.rs\n+fn b() {}\n*** End Patch\n";
    let ap = json!({"tool_name": "apply_patch", "tool_use_id": "call_p", "turn_id": "turn-1", "tool_input": {"command": patch}});
    assert_eq!(
        hook_as(&env, "codex", &ev("PreToolUse", ap.clone())),
        0,
        "not guarded: no reads"
    );
    write(root, "src/a.rs", b"fn a() { 1; }\n");
    write(root, "src/b.rs", b"fn b() {}\n");
    assert_eq!(hook_as(&env, "codex", &ev("PostToolUse", ap)), 0);
    let sh = json!({"tool_name": "Bash", "tool_use_id": "call_s", "turn_id": "turn-1", "tool_input": {"command": "touch made"}});
    assert_eq!(hook_as(&env, "codex", &ev("PreToolUse", sh.clone())), 0);
    write(root, "made", b"");
    assert_eq!(hook_as(&env, "codex", &ev("PostToolUse", sh)), 0);
    assert_eq!(
        hook_as(&env, "codex", &ev("Stop", json!({"turn_id": "turn-1"}))),
        0
    );
    let log = json(&env, "cx1", &["log"], 0);
    let calls: Vec<(&str, &str)> = log["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["type"] == "epoch")
        .map(|e| {
            (
                e["tool"].as_str().unwrap_or("-"),
                e["tool_call"].as_str().unwrap_or("-"),
            )
        })
        .collect();
    assert!(
        calls.contains(&("apply_patch", "call_p")) && calls.contains(&("Bash", "call_s")),
        "{calls:?}"
    );
    expect(&env, "cx1", &["restore", "turn-1"], 0);
    assert_eq!(read_str(root, "src/a.rs"), "fn a() {}\n");
    assert!(!root.join("src/b.rs").exists() && !root.join("made").exists());
}

/// Gemini CLI's dialect: BeforeAgent is the prompt, BeforeTool/AfterTool pair by the tool's
/// name and input (Gemini sends no call id), `read_file` records the read, and an edit of a
/// file changed since it was read is refused (exit 2).
#[test]
fn gemini_tools_are_paired_and_guarded() {
    let env = Env::new();
    let root = env.root();
    write(root, "notes.md", b"one\n");
    let file = root.join("notes.md").to_str().unwrap().to_string();
    let base = json!({"session_id": "gm1", "cwd": root.to_str().unwrap(), "transcript_path": "/x", "timestamp": "2026-12-02T00:00:00Z"});
    let ev = |name: &str, extra: Value| {
        let mut e = base.clone();
        e["hook_event_name"] = json!(name);
        for (k, v) in extra.as_object().unwrap() {
            e[k] = v.clone();
        }
        e
    };
    assert_eq!(
        hook_as(
            &env,
            "gemini",
            &ev("SessionStart", json!({"source": "startup"}))
        ),
        0
    );
    assert_eq!(
        hook_as(
            &env,
            "gemini",
            &ev("BeforeAgent", json!({"prompt": "edit notes"}))
        ),
        0
    );
    let read = json!({"tool_name": "read_file", "tool_input": {"file_path": file}});
    assert_eq!(hook_as(&env, "gemini", &ev("BeforeTool", read.clone())), 0);
    let mut after = read.clone();
    after["tool_response"] = json!({"llmContent": "one\n", "returnDisplay": ""});
    assert_eq!(hook_as(&env, "gemini", &ev("AfterTool", after)), 0);
    let edit = json!({"tool_name": "replace", "tool_input": {"file_path": file, "old_string": "one", "new_string": "two"}});
    assert_eq!(hook_as(&env, "gemini", &ev("BeforeTool", edit.clone())), 0);
    write(root, "notes.md", b"two\n");
    let mut done = edit.clone();
    done["tool_response"] = json!({"llmContent": "ok", "returnDisplay": "ok"});
    assert_eq!(hook_as(&env, "gemini", &ev("AfterTool", done)), 0);
    // The user edits it; the next edit is refused.
    write(root, "notes.md", b"the user's\n");
    let again =
        json!({"tool_name": "write_file", "tool_input": {"file_path": file, "content": "three\n"}});
    assert_eq!(hook_as(&env, "gemini", &ev("BeforeTool", again)), 2);
    assert_eq!(hook_as(&env, "gemini", &ev("AfterAgent", json!({}))), 0);
    let log = json(&env, "gm1", &["log"], 0);
    let edits = log["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["tool"] == "replace" && e["state"] == "settled" && e["changes"] == 1)
        .count();
    assert_eq!(
        edits, 1,
        "the replace is one settled epoch with its change: {log}"
    );
    assert_eq!(read_str(root, "notes.md"), "the user's\n");
}

/// The OpenCode plugin (`integrations/opencode/rewind.js`), its handlers called from Node as
/// OpenCode calls them (`integrations/opencode/test.mjs`), against a running `rewind serve` and
/// against the `serve --stdio` the plugin starts itself.
#[test]
fn the_opencode_plugin_records_and_guards_through_the_server() {
    let plugin = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../integrations/opencode/test.mjs");
    for with_server in [true, false] {
        let env = Env::new();
        write(env.root(), "a.txt", b"a\n");
        init(&env);
        let server = with_server.then(|| serve(&env));
        let o = std::process::Command::new("node")
            .arg(&plugin)
            .env("REWIND", env!("CARGO_BIN_EXE_rewind"))
            .env("REWIND_HOME", env.home.path())
            .env("WS", env.root())
            .env_remove("REWIND_SESSION")
            .output()
            .expect("node runs (scripts/test checks it is installed)");
        assert!(
            o.status.success(),
            "server running: {with_server}: {}",
            text(&o)
        );
        if let Some(mut s) = server {
            // SAFETY: kill(2) on our own child.
            unsafe { libc::kill(s.id() as i32, libc::SIGTERM) };
            s.wait().unwrap();
        }
    }
}

/// Codex's `hooks.json` and Gemini CLI's `settings.json` get their own events (Gemini's
/// timeout in milliseconds), installed once however often, and given back on uninstall.
#[test]
fn codex_and_gemini_hooks_install_and_uninstall() {
    let env = Env::new();
    init(&env);
    let gemini_original = json!({"theme": "dark"});
    write(
        env.root(),
        ".gemini/settings.json",
        gemini_original.to_string().as_bytes(),
    );
    for agent in ["codex", "gemini", "codex", "gemini"] {
        let o = env.run(&["hook", "install", agent, "--project"]);
        assert!(o.status.success(), "{}", text(&o));
    }
    let codex: Value =
        serde_json::from_slice(&std::fs::read(env.root().join(".codex/hooks.json")).unwrap())
            .unwrap();
    let pre = codex["hooks"]["PreToolUse"].as_array().unwrap();
    assert_eq!(pre.len(), 1, "{codex}");
    assert_eq!(pre[0]["matcher"], "Bash|apply_patch");
    assert!(pre[0]["hooks"][0]["command"]
        .as_str()
        .unwrap()
        .ends_with(" hook codex"));
    let gemini: Value =
        serde_json::from_slice(&std::fs::read(env.root().join(".gemini/settings.json")).unwrap())
            .unwrap();
    assert_eq!(gemini["theme"], "dark");
    let before = gemini["hooks"]["BeforeTool"].as_array().unwrap();
    assert_eq!(before.len(), 1, "{gemini}");
    assert_eq!(before[0]["hooks"][0]["timeout"], 60_000, "milliseconds");
    assert!(gemini["hooks"]["BeforeAgent"].is_array());
    for agent in ["codex", "gemini"] {
        assert!(env
            .run(&["hook", "uninstall", agent, "--project"])
            .status
            .success());
    }
    assert!(!env.root().join(".codex/hooks.json").exists());
    let back: Value =
        serde_json::from_slice(&std::fs::read(env.root().join(".gemini/settings.json")).unwrap())
            .unwrap();
    assert_eq!(back, gemini_original);
}

/// With the sandbox available and the workspace's mode not `danger-full-access`, a Bash call is
/// rewritten (`updatedInput`) to run through `rewind exec --sandbox MODE` with its call id, the
/// rest of its input kept; run as rewritten, it is one sandboxed epoch of the session (a write
/// outside the workspace fails), and its PostToolUse opens nothing more. With
/// `danger-full-access`, the call is left as it is and recorded by the hooks.
#[test]
fn bash_calls_are_rewritten_to_run_sandboxed() {
    crate::common::require_bwrap();
    let env = Env::new();
    let root = env.root();
    write(root, "a.txt", b"a\n");
    let f = env.home.path().join("claude-env");
    let cwd = json!(root.to_str().unwrap());
    // Not under /tmp: the sandbox's private /tmp would lose the write instead of blocking it.
    let outside = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let out_file = outside.path().join("out.txt");
    let cmd = format!("echo in > in.txt; echo out > '{}'", out_file.display());
    let call = json!({"cwd": cwd, "tool_name": "Bash", "tool_use_id": "toolu_S",
        "tool_input": {"command": cmd, "timeout": 120000, "description": "two writes"}});
    assert_eq!(
        hook(&env, &event("SessionStart", json!({"cwd": cwd})), &f)
            .status
            .code(),
        Some(0)
    );
    assert_eq!(
        hook(
            &env,
            &event("UserPromptSubmit", json!({"cwd": cwd, "prompt_id": "p1"})),
            &f
        )
        .status
        .code(),
        Some(0)
    );
    let o = hook(&env, &event("PreToolUse", call.clone()), &f);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let doc: Value = serde_json::from_slice(&o.stdout).expect("a JSON answer");
    let updated = &doc["hookSpecificOutput"]["updatedInput"];
    assert_eq!(doc["hookSpecificOutput"]["hookEventName"], "PreToolUse");
    assert_eq!(
        updated["timeout"], 120000,
        "the rest of the input is kept: {doc}"
    );
    assert_eq!(updated["description"], "two writes");
    let rewritten = updated["command"].as_str().unwrap();
    assert!(
        rewritten.contains(" exec --sandbox workspace-write --tool Bash --tool-call toolu_S -- "),
        "{rewritten}"
    );
    // What Claude Code then runs: the rewritten command, in its shell, from the workspace.
    let ran = std::process::Command::new("sh")
        .args(["-c", rewritten])
        .current_dir(root)
        .env("REWIND_HOME", env.home.path())
        .output()
        .unwrap();
    assert!(
        !ran.status.success(),
        "the outside write fails: {}",
        text(&ran)
    );
    assert_eq!(read_str(root, "in.txt"), "in\n");
    assert!(!out_file.exists(), "nothing written outside the workspace");
    assert_eq!(
        hook(&env, &event("PostToolUse", call.clone()), &f)
            .status
            .code(),
        Some(0)
    );
    let log = json(&env, "S1", &["log"], 0);
    let bash: Vec<&Value> = log["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["tool"] == "Bash")
        .collect();
    assert_eq!(bash.len(), 1, "one epoch for the call: {log}");
    assert_eq!(bash[0]["tool_call"], "toolu_S");
    assert_eq!(bash[0]["kind"], "opaque");
    // Full access: left as it is, recorded by the hooks.
    full_access(&env);
    let call2 = json!({"cwd": cwd, "tool_name": "Bash", "tool_use_id": "toolu_F", "tool_input": {"command": "true"}});
    let o = hook(&env, &event("PreToolUse", call2), &f);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(o.stdout.is_empty(), "not rewritten: {}", text(&o));
    let open = json(&env, "S1", &["status"], 0)["open_epochs"].clone();
    assert_eq!(open[0]["tool_call"], "toolu_F", "{open}");
}

/// Gemini CLI's `run_shell_command`, like Claude Code's Bash: with the sandbox available and
/// the mode not `danger-full-access`, rewritten (`hookSpecificOutput.tool_input`, the whole
/// input, `dir_path` kept) to run through `rewind exec --sandbox MODE` with the call id the
/// adapter pairs Gemini's events by. Run as Gemini runs it (a shell in `dir_path`), the write
/// outside the workspace fails, the write inside is one opaque epoch with that id, and the
/// `AfterTool` (carrying the rewritten input, as Gemini sends it) leaves nothing open. With
/// `danger-full-access`, the call is left as it is and its epoch opened by the hook.
#[test]
fn gemini_shell_calls_are_rewritten_to_run_sandboxed() {
    crate::common::require_bwrap();
    let env = Env::new();
    let root = env.root();
    write(root, "sub/a.txt", b"a\n");
    // Not under /tmp: the sandbox's private /tmp would lose the write instead of blocking it.
    let outside = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let out_file = outside.path().join("out.txt");
    let cmd = format!("echo in > in.txt; echo out > '{}'", out_file.display());
    let base = json!({"session_id": "gm2", "cwd": root.to_str().unwrap(), "transcript_path": "/x", "timestamp": "2026-12-02T00:00:00Z"});
    let ev = |name: &str, extra: Value| {
        let mut e = base.clone();
        e["hook_event_name"] = json!(name);
        for (k, v) in extra.as_object().unwrap() {
            e[k] = v.clone();
        }
        e
    };
    let run = |e: &Value| {
        let mut c = env.cmd_here(&["hook", "gemini"]);
        c.current_dir(root);
        let o = output_with_stdin(&mut c, e.to_string().as_bytes());
        assert_eq!(o.status.code(), Some(0), "{}", text(&o));
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            !err.contains("rewind: ignored") && !err.contains("may not be recorded"),
            "{}",
            text(&o)
        );
        o
    };
    run(&ev("SessionStart", json!({"source": "startup"})));
    run(&ev("BeforeAgent", json!({"prompt": "write two files"})));
    let input = json!({"command": cmd, "description": "two writes", "dir_path": "sub"});
    let call = json!({"tool_name": "run_shell_command", "tool_input": input});
    let o = run(&ev("BeforeTool", call));
    let doc: Value = serde_json::from_slice(&o.stdout).expect("a JSON answer");
    assert_eq!(doc["hookSpecificOutput"]["hookEventName"], "BeforeTool");
    let updated = doc["hookSpecificOutput"]["tool_input"].clone();
    assert_eq!(
        updated["dir_path"], "sub",
        "the rest of the input is kept: {doc}"
    );
    assert_eq!(updated["description"], "two writes");
    let rewritten = updated["command"].as_str().unwrap().to_string();
    let marker = " exec --sandbox workspace-write --tool run_shell_command --tool-call ";
    let at = rewritten
        .find(marker)
        .unwrap_or_else(|| panic!("{rewritten}"));
    let id = rewritten[at + marker.len()..]
        .split(' ')
        .next()
        .unwrap()
        .to_string();
    assert!(
        id.starts_with("call-"),
        "the adapter's call id: {rewritten}"
    );
    // What Gemini CLI then runs: the rewritten command, in a shell, in `dir_path`.
    let ran = std::process::Command::new("bash")
        .args(["-c", &rewritten])
        .current_dir(root.join("sub"))
        .env("REWIND_HOME", env.home.path())
        .env_remove("REWIND_SESSION")
        .output()
        .unwrap();
    assert!(
        !ran.status.success(),
        "the outside write fails: {}",
        text(&ran)
    );
    assert_eq!(read_str(root, "sub/in.txt"), "in\n", "run in dir_path");
    assert!(!out_file.exists(), "nothing written outside the workspace");
    // Gemini's AfterTool carries the input the tool ran with: the rewritten one.
    run(&ev(
        "AfterTool",
        json!({"tool_name": "run_shell_command", "tool_input": updated,
            "tool_response": {"llmContent": "", "returnDisplay": "", "error": null}}),
    ));
    let log = json(&env, "gm2", &["log"], 0);
    let shell: Vec<&Value> = log["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["tool"] == "run_shell_command")
        .collect();
    assert_eq!(shell.len(), 1, "one epoch for the call: {log}");
    assert_eq!(shell[0]["tool_call"], id.as_str());
    assert_eq!(shell[0]["kind"], "opaque");
    let shown = json(&env, "gm2", &["show", shell[0]["id"].as_str().unwrap()], 0);
    let paths: Vec<&str> = shown["changes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["path"].as_str().unwrap())
        .collect();
    assert_eq!(paths, ["sub/in.txt"], "{shown}");
    let open = json(&env, "gm2", &["status"], 0)["open_epochs"].clone();
    assert_eq!(open, json!([]), "nothing left open");
    // Full access: left as it is, its epoch opened by the hook under the same kind of id.
    full_access(&env);
    let call2 = json!({"tool_name": "run_shell_command", "tool_input": {"command": "true"}});
    let o = run(&ev("BeforeTool", call2));
    assert!(o.stdout.is_empty(), "not rewritten: {}", text(&o));
    let open = json(&env, "gm2", &["status"], 0)["open_epochs"].clone();
    assert_eq!(open[0]["tool"], "run_shell_command", "{open}");
    assert!(
        open[0]["tool_call"].as_str().unwrap().starts_with("call-"),
        "{open}"
    );
}

/// What `/rewind` runs (`rewind hook command rewind`), after two prompts that each wrote a file
/// through Bash: the list (numbered, newest first, no checkpoint for the `/rewind` prompts
/// themselves), a preview that writes nothing, the rewind, and its undo.
#[test]
fn the_rewind_command_lists_previews_rewinds_and_undoes() {
    let env = Env::new();
    full_access(&env);
    let root = env.root();
    let f = env.home.path().join("claude-env");
    let cwd = json!(root.to_str().unwrap());
    hook(&env, &event("SessionStart", json!({"cwd": cwd})), &f);
    for (i, (prompt, file)) in [("write one", "one.txt"), ("write two", "two.txt")]
        .iter()
        .enumerate()
    {
        let p = json!({"cwd": cwd, "prompt_id": format!("p{i}"), "prompt": prompt});
        hook(&env, &event("UserPromptSubmit", p), &f);
        let call = json!({"cwd": cwd, "tool_name": "Bash", "tool_use_id": format!("toolu_{i}"),
            "tool_input": {"command": format!("echo {i} > {file}")}});
        hook(&env, &event("PreToolUse", call.clone()), &f);
        run_tool(root, &call);
        hook(&env, &event("PostToolUse", call), &f);
    }
    let slash = |args: &[&str]| {
        let p =
            json!({"cwd": cwd, "prompt_id": "px", "prompt": format!("/rewind {}", args.join(" "))});
        hook(&env, &event("UserPromptSubmit", p), &f);
        let mut all = vec!["hook", "command", "rewind"];
        all.extend_from_slice(args);
        let o = env
            .cmd_here(&all)
            .current_dir(root)
            .env("REWIND_SESSION", "S1")
            .output()
            .unwrap();
        (o.status.code(), text(&o))
    };
    let (code, list) = slash(&[]);
    assert_eq!(code, Some(0), "{list}");
    let lines: Vec<&str> = list
        .lines()
        .filter(|l| l.trim_start().starts_with(char::is_numeric))
        .collect();
    assert_eq!(
        lines.len(),
        2,
        "two checkpoints, none for /rewind itself: {list}"
    );
    assert!(
        lines[0].contains("write two") && lines[0].trim_start().starts_with('1'),
        "{list}"
    );
    assert!(
        lines[1].contains("write one") && lines[1].trim_start().starts_with('2'),
        "{list}"
    );

    let (code, preview) = slash(&["2"]);
    assert_eq!(code, Some(0), "{preview}");
    assert!(
        preview.contains("one.txt") && preview.contains("two.txt"),
        "{preview}"
    );
    assert!(preview.contains("/rewind 2 yes"), "{preview}");
    assert!(
        root.join("one.txt").exists() && root.join("two.txt").exists(),
        "a preview writes nothing"
    );

    let (code, done) = slash(&["1", "yes"]);
    assert_eq!(code, Some(0), "{done}");
    assert!(root.join("one.txt").exists(), "{done}");
    assert!(
        !root.join("two.txt").exists(),
        "rewound to before the second prompt: {done}"
    );
    let (code, undone) = slash(&["undo"]);
    assert_eq!(code, Some(0), "{undone}");
    assert_eq!(read_str(root, "two.txt"), "1\n", "undo brings it back");

    let (code, bad) = slash(&["11"]);
    assert_eq!(code, Some(2), "{bad}");
    assert!(bad.contains("usage: /rewind"), "{bad}");
    let (code, none) = slash(&["2", "now"]);
    assert_eq!(code, Some(2), "{none}");
    let n = json(&env, "S1", &["log"], 0)["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| i["type"] == "checkpoint")
        .count();
    assert_eq!(n, 2, "the /rewind prompts made no checkpoints");
}

/// `s` with every run of 16 hex digits (an epoch or checkpoint id) as `ID`.
fn without_ids(s: &str) -> String {
    let mut out = String::new();
    let mut run = String::new();
    for c in s.chars().chain(std::iter::once(' ')) {
        if c.is_ascii_hexdigit() {
            run.push(c);
            continue;
        }
        out.push_str(if run.len() == 16 { "ID" } else { &run });
        run.clear();
        out.push(c);
    }
    out.pop();
    out
}

/// A session's history as comparable facts, oldest first: each entry of the log (every
/// session's) without its id, position and times, and each epoch's changes.
fn history(env: &Env, session: &str) -> Vec<String> {
    let log = json(env, session, &["log", "--all-sessions", "--limit", "0"], 0);
    let mut out = Vec::new();
    for e in log["items"].as_array().unwrap().iter().rev() {
        let mut fact = json!({});
        for k in [
            "type",
            "kind",
            "state",
            "session",
            "tool",
            "tool_call",
            "message",
            "parent",
            "label",
            "note",
            "recovered",
        ] {
            if let Some(v) = e.get(k) {
                fact[k] = v.clone();
            }
        }
        if e["type"] == "epoch" {
            let shown = json(env, session, &["show", e["id"].as_str().unwrap()], 0);
            fact["changes"] = shown["changes"].clone();
        }
        out.push(fact.to_string());
    }
    out
}

/// Every file of the workspace and its content, by path.
fn files(root: &Path) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    let mut dirs = vec![root.to_path_buf()];
    while let Some(d) = dirs.pop() {
        for e in std::fs::read_dir(d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                dirs.push(p);
            } else {
                let rel = p.strip_prefix(root).unwrap().display().to_string();
                out.push((rel, std::fs::read(&p).unwrap()));
            }
        }
    }
    out.sort();
    out
}

/// With `rewind serve` running, each hook event goes through the server's socket: every
/// hook's trace shows it connected and no workspace opened in the hook's own process (no
/// database, no stat cache: nothing that grows with the tree). And the session is recorded
/// exactly as without a server: the same refusal, the same entries with the same changes,
/// the same files.
#[test]
fn hooks_go_through_a_running_server_with_the_same_results() {
    let mut runs = Vec::new();
    for with_server in [false, true] {
        let env = Env::new();
        let root = env.root();
        write(root, "a.txt", b"alpha\nbeta\n");
        write(root, "old.txt", b"old\n");
        full_access(&env);
        init(&env);
        let server = with_server.then(|| serve(&env));
        let replay = replay_real_session(&env, &[("REWIND_TRACE", "1")]);
        for err in &replay.stderr {
            assert_eq!(
                err.contains("server connected"),
                with_server,
                "server running: {with_server}: {err}"
            );
            if with_server {
                assert!(!err.contains("workspace open"), "{err}");
            }
        }
        if !with_server {
            assert!(
                replay.stderr.iter().any(|e| e.contains("workspace open")),
                "the trace names the open: {:?}",
                replay.stderr
            );
        }
        if let Some(s) = server {
            stop_server(s);
        }
        let refused: Vec<(Value, String)> = replay
            .refused
            .iter()
            .map(|(tool, why)| {
                let why: Vec<&str> = why
                    .lines()
                    .filter(|l| !l.starts_with("rewind-trace"))
                    .collect();
                (tool.clone(), without_ids(&why.join("\n")))
            })
            .collect();
        assert_eq!(refused.len(), 1, "{refused:?}");
        fsck_clean(&env);
        runs.push((refused, history(&env, SESSION), files(root)));
    }
    assert_eq!(runs[0].0, runs[1].0, "the same refusal");
    assert_eq!(runs[0].1, runs[1].1, "the same history");
    assert_eq!(runs[0].2, runs[1].2, "the same files");
}

/// One step of a random session.
#[derive(Clone, Debug)]
enum Step {
    Prompt,
    Read(usize),
    Edit(usize),
    Write(usize),
    Bash(usize),
    /// Two Bash calls of one answer, run in parallel.
    Parallel(usize, usize),
    /// The user changes a file in their editor.
    User(usize),
    Stop,
}

/// `n` random steps from `seed` (xorshift), over files f0..f5 (f4 and f5 do not exist at
/// first).
fn plan(seed: u64, n: usize) -> Vec<Step> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut next = move |m: u64| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        (x % m) as usize
    };
    let mut steps = vec![Step::Prompt];
    for _ in 0..n {
        let f = next(6);
        steps.push(match next(16) {
            0 => Step::Prompt,
            1..=4 => Step::Read(f),
            5..=7 => Step::Edit(f),
            8..=9 => Step::Write(f),
            10..=11 => Step::Bash(f),
            12 => Step::Parallel(f, next(6)),
            13..=14 => Step::User(f),
            _ => Step::Stop,
        });
    }
    steps.push(Step::Stop);
    steps
}

/// What a random session gave: each hook's exit code and standard output, the history, the
/// files at the end.
type Played = (Vec<(i32, String)>, Vec<String>, Vec<(String, Vec<u8>)>);

/// Plays `steps` in a new workspace (with a server running for it, or not).
fn play(steps: &[Step], with_server: bool) -> Played {
    let env = Env::new();
    let root = env.root();
    for i in 0..4 {
        write(root, &format!("f{i}"), format!("file {i}\n").as_bytes());
    }
    full_access(&env);
    init(&env);
    let server = with_server.then(|| serve(&env));
    let cwd = json!(root.to_str().unwrap());
    let mut answers = Vec::new();
    let mut hook = |e: Value| -> i32 {
        let mut c = env.cmd_here(&["hook", "claude-code"]);
        c.current_dir(root);
        let o = output_with_stdin(&mut c, e.to_string().as_bytes());
        let code = o.status.code().unwrap_or(-1);
        let err = String::from_utf8_lossy(&o.stderr).into_owned();
        assert!(code == 2 || !err.contains("rewind:"), "a warning: {err}");
        answers.push((code, String::from_utf8_lossy(&o.stdout).into_owned()));
        code
    };
    let path = |f: usize| root.join(format!("f{f}"));
    let tool = |name: &str, id: &str, input: Value| json!({"session_id": "R", "cwd": cwd, "tool_name": name, "tool_use_id": id, "tool_input": input});
    let with_name = |mut e: Value, name: &str| {
        e["hook_event_name"] = json!(name);
        e
    };
    for (n, step) in steps.iter().enumerate() {
        let id = format!("call-{n}");
        match *step {
            Step::Prompt => {
                hook(
                    json!({"session_id": "R", "cwd": cwd, "hook_event_name": "UserPromptSubmit", "prompt_id": format!("p{n}"), "prompt": format!("prompt {n}")}),
                );
            }
            Step::Read(f) => {
                if path(f).is_file() {
                    let e = tool("Read", &id, json!({"file_path": path(f)}));
                    hook(with_name(e, "PostToolUse"));
                }
            }
            Step::Edit(f) | Step::Write(f) => {
                let name = if matches!(step, Step::Edit(_)) {
                    "Edit"
                } else {
                    "Write"
                };
                let e = tool(name, &id, json!({"file_path": path(f), "content": "x"}));
                if hook(with_name(e.clone(), "PreToolUse")) == 0 {
                    let mut data = std::fs::read(path(f)).unwrap_or_default();
                    data.extend_from_slice(format!("{name} {n}\n").as_bytes());
                    std::fs::write(path(f), data).unwrap();
                    hook(with_name(e, "PostToolUse"));
                }
            }
            Step::Bash(f) => {
                let e = tool(
                    "Bash",
                    &id,
                    json!({"command": format!("echo bash {n} >> f{f}")}),
                );
                hook(with_name(e.clone(), "PreToolUse"));
                sh_in(root, &format!("echo bash {n} >> f{f}"));
                hook(with_name(e, "PostToolUse"));
            }
            Step::Parallel(f, g) => {
                let a = tool("Bash", &format!("{id}-a"), json!({"command": "a"}));
                let b = tool("Bash", &format!("{id}-b"), json!({"command": "b"}));
                hook(with_name(a.clone(), "PreToolUse"));
                hook(with_name(b.clone(), "PreToolUse"));
                sh_in(root, &format!("echo par {n} >> f{f}"));
                hook(with_name(a, "PostToolUse"));
                sh_in(root, &format!("echo par {n} >> f{g}"));
                hook(with_name(b, "PostToolUse"));
            }
            Step::User(f) => {
                let mut data = std::fs::read(path(f)).unwrap_or_default();
                data.extend_from_slice(format!("user {n}\n").as_bytes());
                std::fs::write(path(f), data).unwrap();
            }
            Step::Stop => {
                hook(json!({"session_id": "R", "cwd": cwd, "hook_event_name": "Stop"}));
            }
        }
    }
    if let Some(s) = server {
        stop_server(s);
    }
    fsck_clean(&env);
    (answers, history(&env, "R"), files(root))
}

fn sh_in(root: &Path, script: &str) {
    let ok = std::process::Command::new("sh")
        .args(["-c", script])
        .current_dir(root)
        .status()
        .unwrap()
        .success();
    assert!(ok, "{script}");
}

/// Random sessions (reads, edits, writes, Bash calls alone and in parallel, the user's own
/// edits, prompts and stops, in random orders) give the same answers to the agent, the same
/// history and the same files with a running server as without one.
#[test]
fn random_sessions_are_recorded_alike_with_and_without_a_server() {
    for seed in 1..=3u64 {
        let steps = plan(seed, 24);
        let alone = play(&steps, false);
        let served = play(&steps, true);
        assert_eq!(alone.0, served.0, "seed {seed}: the answers; {steps:?}");
        assert_eq!(alone.1, served.1, "seed {seed}: the history; {steps:?}");
        assert_eq!(alone.2, served.2, "seed {seed}: the files; {steps:?}");
    }
}

/// A session in a big tree with a `capture.time_budget` its first capture (the first prompt's
/// checkpoint) runs out of leaves the rest to a background baseline, as a command would: with
/// no other hook or command run, every file becomes covered.
#[test]
fn a_first_checkpoint_that_runs_out_of_budget_completes_the_baseline_in_the_background() {
    let env = Env::new();
    spent_budget_tree(&env);
    let f = env.home.path().join("claude-env");
    let cwd = json!(env.root().to_str().unwrap());
    for e in [
        event("SessionStart", json!({"cwd": cwd})),
        event("UserPromptSubmit", json!({"cwd": cwd, "prompt": "go"})),
    ] {
        let out = hook(&env, &e, &f);
        assert_eq!(out.status.code(), Some(0), "{out:?}");
    }
    wait_for_baseline(&env, "S1");
    fsck_clean(&env);
}

/// A prompt's checkpoint that leaves the state over `[retention] max_bytes` starts one gc in
/// the background, as `rewind checkpoint` does: a hooked agent's history stays within its
/// budget without the agent waiting for it.
#[test]
fn a_prompt_over_the_budget_starts_a_gc_in_the_background() {
    let env = Env::new();
    let root = env.root();
    write(root, "x.txt", b"x\n");
    write(root, ".rewind.toml", b"[retention]\nmax_bytes = \"3M\"\n");
    let f = env.home.path().join("claude-env");
    let cwd = json!(root.to_str().unwrap());
    let code = |o: Output| o.status.code();
    assert_eq!(
        code(hook(&env, &event("SessionStart", json!({"cwd": cwd})), &f)),
        Some(0)
    );
    for i in 0..6 {
        // The user's edit between turns: each checkpoint stores 1 MiB more.
        let big = crate::gc::random_mib();
        write(root, "big.bin", &big);
        let e = event(
            "UserPromptSubmit",
            json!({"cwd": cwd, "prompt_id": format!("p{i}")}),
        );
        assert_eq!(code(hook(&env, &e, &f)), Some(0));
    }
    crate::gc::wait_within_budget(&env, (3 << 20) + (256 << 10));
    let v = json(&env, "S1", &["gc", "--auto"], 0);
    assert_eq!(v["skipped"], true, "within budget now: {v}");
    let gone = crate::gc::collected(&env);
    assert!(!gone.is_empty(), "a gc dropped the oldest turns");
    fsck_clean(&env);
}
