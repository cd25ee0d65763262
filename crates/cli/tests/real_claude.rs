//! The real Claude Code CLI (`REWIND_CLAUDE_BIN`; `scripts/test` installs it from npm) driven
//! by a scripted model on loopback (`tests/realclient/`), with Rewind's hooks installed by
//! `rewind hook install claude-code`: two prompts in one session, a Read, an Edit, two Bash
//! calls in one answer; the user edits a file between the prompts; the second prompt's Write
//! of that file is refused by the guard and the user's edit survives; every tool call that ran
//! is an epoch with its `tool_use_id`; a restore to the second prompt gives the tree as it was
//! then.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{json, Value};

use crate::common::rewind::*;
use crate::common::{text, Env};

fn claude() -> Option<PathBuf> {
    let bin = std::env::var_os("REWIND_CLAUDE_BIN").map(PathBuf::from)?;
    bin.exists().then_some(bin)
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// `rewind hook install|uninstall claude-code --project` in the workspace; what it printed.
fn hooks(env: &Env, verb: &str) -> String {
    let o = env
        .cmd_here(&["hook", verb, "claude-code", "--project"])
        .current_dir(env.root())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    text(&o)
}

/// One prompt through the real CLI; `script` answers it.
fn prompt(env: &Env, bin: &Path, script: &Value, words: &str, cont: bool) {
    let dir = env.home.path();
    let script_file = dir.join("script.json");
    std::fs::write(&script_file, script.to_string()).unwrap();
    let harness = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/realclient/run_claude.sh");
    let mut c = Command::new("bash");
    c.arg(harness)
        .arg(bin)
        .arg(env.root())
        .arg(&script_file)
        .arg(words);
    if cont {
        c.arg("--continue");
    }
    let o = c
        .env("PORT", free_port().to_string())
        .env("FAKE_LOG", dir.join("fake.log"))
        .env("CC_HOME", dir.join("cchome"))
        .env("REWIND_HOME", env.home.path())
        .env_remove("REWIND_SESSION")
        .output()
        .unwrap();
    assert!(o.status.success(), "claude: {}", text(&o));
}

#[test]
fn claude_code_with_rewinds_hooks() {
    let Some(bin) = claude() else {
        eprintln!("skipped: REWIND_CLAUDE_BIN is not set (scripts/test installs Claude Code)");
        return;
    };
    let env = Env::new();
    let root = env.root();
    write(root, "a.txt", b"alpha\nbeta\n");
    write(root, "old.txt", b"old\n");
    hooks(&env, "install");
    let a = root.join("a.txt").to_str().unwrap().to_string();
    let first = json!([[
        {"tool": "Read", "input": {"file_path": a}},
        {"tool": "Edit", "input": {"file_path": a, "old_string": "beta", "new_string": "BETA"}},
        {"parallel": [
            {"tool": "Bash", "input": {"command": "echo c > c.txt"}},
            {"tool": "Bash", "input": {"command": "echo d > d.txt; rm old.txt"}}
        ]},
        {"text": "first done"}
    ]]);
    prompt(&env, &bin, &first, "first prompt", false);
    assert_eq!(read_str(root, "a.txt"), "alpha\nBETA\n");
    assert_eq!(read_str(root, "c.txt"), "c\n");
    // The user edits a.txt between the prompts.
    write(root, "a.txt", b"alpha\nBETA\nthe user's line\n");
    let second = json!([
        [{"text": "first done"}],
        [
            {"tool": "Write", "input": {"file_path": a, "content": "rewritten\n"}},
            {"tool": "Bash", "input": {"command": "rm c.txt"}},
            {"text": "second done"}
        ]
    ]);
    prompt(&env, &bin, &second, "second prompt", true);
    assert_eq!(
        read_str(root, "a.txt"),
        "alpha\nBETA\nthe user's line\n",
        "the Write was refused: the user's edit survives"
    );
    assert!(!root.join("c.txt").exists());
    let log = json(&env, "any", &["log", "--all-sessions", "--limit", "0"], 0);
    let items = log["items"].as_array().unwrap();
    let session = items
        .iter()
        .find(|e| e["type"] == "checkpoint")
        .and_then(|e| e["session"].as_str())
        .unwrap()
        .to_string();
    let tools: Vec<String> = items
        .iter()
        .filter(|e| e["type"] == "epoch" && e["session"] == session.as_str())
        .map(|e| {
            format!(
                "{} {}",
                e["tool"].as_str().unwrap_or("-"),
                e["tool_call"].as_str().unwrap_or("-")
            )
        })
        .collect();
    for t in ["Edit toolu_", "Bash toolu_"] {
        assert!(tools.iter().any(|x| x.starts_with(t)), "{t} in {tools:?}");
    }
    assert!(
        !tools.iter().any(|x| x.starts_with("Write")),
        "the refused Write ran: {tools:?}"
    );
    let checkpoints: Vec<(&str, &str)> = items
        .iter()
        .filter(|e| e["type"] == "checkpoint")
        .map(|e| {
            (
                e["message"].as_str().unwrap(),
                e["label"].as_str().unwrap_or(""),
            )
        })
        .collect();
    let p2 = checkpoints
        .iter()
        .find(|(_, l)| *l == "second prompt")
        .expect("a checkpoint per prompt")
        .0;
    expect(&env, &session, &["restore", p2], 0);
    assert_eq!(read_str(root, "c.txt"), "c\n");
    assert_eq!(read_str(root, "a.txt"), "alpha\nBETA\nthe user's line\n");
    fsck_clean(&env);
}

/// Layer ④ where the agent runs: with the hooks installed, the real CLI's Bash calls are
/// rewritten to run through `rewind exec --sandbox` (Claude Code runs the rewritten command):
/// a write inside the workspace happens and is recorded once with its `tool_use_id`; a write
/// outside the workspace is blocked and the file does not exist.
#[test]
fn claude_codes_bash_runs_sandboxed() {
    let Some(bin) = claude() else {
        eprintln!("skipped: REWIND_CLAUDE_BIN is not set (scripts/test installs Claude Code)");
        return;
    };
    crate::common::require_bwrap();
    let env = Env::new();
    let root = env.root();
    write(root, "a.txt", b"a\n");
    hooks(&env, "install");
    // Not under /tmp: sandboxed commands get a private one, where a write would vanish
    // without being blocked.
    let outside = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let out_file = outside.path().join("outside.txt");
    let script = json!([[
        {"tool": "Bash", "input": {"command": "echo inside > in.txt"}},
        {"tool": "Bash", "input": {"command": format!("echo outside > '{}'", out_file.display())}},
        {"text": "done"}
    ]]);
    prompt(&env, &bin, &script, "go", false);
    assert_eq!(read_str(root, "in.txt"), "inside\n");
    assert!(
        !out_file.exists(),
        "the sandbox blocked the write outside the workspace"
    );
    let log = json(&env, "any", &["log", "--all-sessions"], 0);
    let bash: Vec<&Value> = log["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["tool"] == "Bash")
        .collect();
    assert_eq!(bash.len(), 2, "one epoch per call: {log}");
    assert!(bash
        .iter()
        .all(|e| e["tool_call"].as_str().unwrap().starts_with("toolu_")));
    let changed: Vec<i64> = bash
        .iter()
        .map(|e| e["changes"].as_i64().unwrap())
        .collect();
    assert!(changed.contains(&1) && changed.contains(&0), "{changed:?}");

    // The user gives commands full access: the same write outside now happens...
    let toggle = |to: &str| {
        let o = env
            .cmd_here(&["sandbox", "toggle", "--yes"])
            .current_dir(root)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", text(&o));
        let mode = json(&env, "any", &["sandbox", "mode"], 0);
        assert_eq!(mode["mode"], to, "{mode}");
    };
    // ...through the /sandbox command `hook install` put beside the hooks: Claude Code runs it
    // itself, outside the sandbox (the model neither runs it nor could).
    let slash = root.join(".claude/commands/sandbox.md");
    assert!(std::fs::read_to_string(&slash)
        .unwrap()
        .contains("sandbox toggle --yes"));
    prompt(&env, &bin, &json!([[{"text": "ok"}]]), "/sandbox", false);
    let mode = json(&env, "any", &["sandbox", "mode"], 0);
    assert_eq!(mode["mode"], "danger-full-access", "{mode}");
    let again = json!([[
        {"tool": "Bash", "input": {"command": format!("echo outside > '{}'", out_file.display())}},
        {"text": "done"}
    ]]);
    prompt(&env, &bin, &again, "again", false);
    assert_eq!(
        std::fs::read_to_string(&out_file).unwrap(),
        "outside\n",
        "with full access the write outside happened"
    );
    // ...and toggling back blocks it again.
    std::fs::remove_file(&out_file).unwrap();
    toggle("workspace-write");
    prompt(&env, &bin, &again, "once more", false);
    assert!(!out_file.exists(), "back in the sandbox: blocked again");
    // Both changes of mode are in the log, with who made them.
    let log = json(&env, "any", &["log", "--all-sessions"], 0);
    let modes: Vec<&Value> = log["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["type"] == "setting")
        .collect();
    assert_eq!(modes.len(), 2, "{log}");
    assert_eq!(modes[0]["value"], "workspace-write");
    assert_eq!(modes[1]["value"], "danger-full-access");
    assert_eq!(modes[0]["front"], "cli");

    // Uninstalling takes the command away with the hooks; a command file of the user's own
    // under that name is never touched.
    hooks(&env, "uninstall");
    assert!(!slash.exists());
    std::fs::create_dir_all(slash.parent().unwrap()).unwrap();
    std::fs::write(&slash, "my own\n").unwrap();
    assert!(hooks(&env, "install").contains("left"));
    hooks(&env, "uninstall");
    assert_eq!(std::fs::read_to_string(&slash).unwrap(), "my own\n");
}

/// `/rewind` in the real Claude Code CLI: two prompts write a file each through Bash; then, in
/// the same conversation, `/rewind 1` previews (nothing written), `/rewind 1 yes` rewinds the
/// files to before the second prompt, `/rewind undo` brings them back. Claude Code runs the
/// command's line itself; the model only answers.
#[test]
fn claude_codes_rewind_command() {
    let Some(bin) = claude() else {
        eprintln!("skipped: REWIND_CLAUDE_BIN is not set (scripts/test installs Claude Code)");
        return;
    };
    crate::common::require_bwrap();
    let env = Env::new();
    let root = env.root();
    hooks(&env, "install");
    assert!(root.join(".claude/commands/rewind.md").exists());
    // One turn per prompt of the conversation: the fake model answers turn N with script[N].
    let ok = json!({"text": "ok"});
    let script = json!([
        [{"tool": "Bash", "input": {"command": "echo one > one.txt"}}, ok],
        [{"tool": "Bash", "input": {"command": "echo two > two.txt"}}, ok],
        [ok], [ok], [ok], [ok]
    ]);
    prompt(&env, &bin, &script, "write one", false);
    prompt(&env, &bin, &script, "write two", true);
    prompt(&env, &bin, &script, "/rewind", true);
    prompt(&env, &bin, &script, "/rewind 1", true);
    assert!(root.join("two.txt").exists(), "a preview writes nothing");
    prompt(&env, &bin, &script, "/rewind 1 yes", true);
    assert_eq!(read_str(root, "one.txt"), "one\n");
    assert!(
        !root.join("two.txt").exists(),
        "rewound to before the second prompt"
    );
    prompt(&env, &bin, &script, "/rewind undo", true);
    assert_eq!(read_str(root, "two.txt"), "two\n", "undone");
}
