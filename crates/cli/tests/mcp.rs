//! `rewind mcp`: driven by the official Python MCP SDK (`mcp` 2.x, `mcp_client.py`) once per
//! protocol era, through read → edit → run → checkpoint → restore dry run → restore → undo with
//! the files on disk checked after each step; and with raw JSON lines: malformed lines, unknown
//! tools and methods, wrong argument types, and a client that disconnects mid-call, after
//! which the server exits and the call's epoch is settled, not left open.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::common::rewind::*;
use crate::common::{text, Env};

/// The Python with the `mcp` package: `REWIND_MCP_PYTHON` (what `scripts/test` installs; it
/// must work), else a virtual environment made next to the `rewind` binary on first use.
/// `None` (the test says why and skips) only when pip cannot install the package here.
fn mcp_python() -> Option<PathBuf> {
    static MADE: Mutex<()> = Mutex::new(());
    if let Some(p) = std::env::var_os("REWIND_MCP_PYTHON") {
        return Some(PathBuf::from(p));
    }
    let _one = MADE.lock().unwrap_or_else(|p| p.into_inner());
    let venv = Path::new(env!("CARGO_BIN_EXE_rewind"))
        .parent()
        .unwrap()
        .join("mcp-venv");
    let python = venv.join("bin/python");
    let works = |p: &Path| {
        Command::new(p)
            .args(["-c", "import mcp"])
            .output()
            .is_ok_and(|o| o.status.success())
    };
    if works(&python) {
        return Some(python);
    }
    let made = Command::new("python3")
        .args(["-m", "venv"])
        .arg(&venv)
        .output()
        .is_ok_and(|o| o.status.success());
    let installed = made
        && Command::new(venv.join("bin/pip"))
            .args(["install", "-q", "mcp>=2,<3"])
            .output()
            .is_ok_and(|o| o.status.success());
    if installed && works(&python) {
        return Some(python);
    }
    eprintln!(
        "SKIPPED: the Python MCP SDK could not be installed (python3 -m venv {} && pip install \
         'mcp>=2,<3' failed); scripts/test installs it and sets REWIND_MCP_PYTHON",
        venv.display()
    );
    None
}

fn python_end_to_end(mode: &str) {
    python_end_to_end_with(mode, false);
}

/// The Python SDK's session (see `mcp_client.py`); `with_server`: with `rewind serve` running
/// for the workspace, which the MCP server then works through.
fn python_end_to_end_with(mode: &str, with_server: bool) {
    let Some(python) = mcp_python() else { return };
    let env = Env::new();
    write(env.root(), "a.txt", b"hello\n");
    let server = with_server.then(|| {
        init(&env);
        serve(&env)
    });
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mcp_client.py");
    let o = Command::new(&python)
        .arg(&script)
        .arg(env!("CARGO_BIN_EXE_rewind"))
        .arg(env.root())
        .arg(mode)
        .arg(format!("py-{mode}"))
        .env("REWIND_HOME", env.home.path())
        .env("REWIND_TRACE", "1")
        .env_remove("REWIND_SESSION")
        .output()
        .unwrap();
    let out = text(&o);
    assert!(o.status.success(), "{out}");
    assert!(out.contains("OK"), "{out}");
    // Through the server: its answers are in the trace of `rewind mcp` (on the client's
    // standard error), the edit's and the epochs of `run` among them; without one, never.
    for phase in [
        "server connected",
        "server: edit",
        "server: epoch.begin",
        "server: epoch.end",
    ] {
        assert_eq!(out.contains(phase), with_server, "{phase}: {out}");
    }
    if let Some(s) = server {
        stop_server(s);
    }
    // The history the client made is the command line's too.
    let log = json(&env, &format!("py-{mode}"), &["log"], 0);
    let tools: Vec<&str> = log["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|i| i["tool"].as_str())
        .collect();
    for t in ["edit_file", "run"] {
        assert!(tools.contains(&t), "{t} not in {tools:?}");
    }
}

#[test]
fn python_sdk_initialize_era() {
    python_end_to_end("legacy");
}

#[test]
fn python_sdk_discover_era() {
    python_end_to_end("modern");
}

/// `rewind mcp` with `rewind serve` running for the workspace: the same session, through the
/// server (issue 17).
#[test]
fn python_sdk_through_a_running_server() {
    python_end_to_end_with("legacy", true);
}

/// A server on pipes, speaking raw lines.
/// A client speaking raw JSON lines to `rewind mcp` (other test modules use it too).
pub(crate) struct Raw {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: BufReader<ChildStdout>,
}

impl Raw {
    /// `rewind -s SESSION mcp` in `env`'s workspace, initialized.
    pub(crate) fn start(env: &Env, session: &str) -> Raw {
        Raw::start_cmd(env.cmd(&["-s", session, "mcp"]))
    }

    /// The server `cmd` starts, initialized.
    pub(crate) fn start_cmd(mut cmd: std::process::Command) -> Raw {
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take();
        let lines = BufReader::new(child.stdout.take().unwrap());
        let mut raw = Raw {
            child,
            stdin,
            lines,
        };
        raw.send(
            &json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "raw", "version": "1"}}}),
        );
        assert_eq!(raw.recv()["result"]["serverInfo"]["name"], "rewind");
        raw.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        raw
    }

    fn line(&mut self, bytes: &[u8]) {
        let w = self.stdin.as_mut().unwrap();
        w.write_all(bytes).unwrap();
        w.write_all(b"\n").unwrap();
        w.flush().unwrap();
    }

    pub(crate) fn send(&mut self, v: &Value) {
        self.line(v.to_string().as_bytes());
    }

    pub(crate) fn recv(&mut self) -> Value {
        let mut line = String::new();
        assert!(
            self.lines.read_line(&mut line).unwrap() > 0,
            "server closed"
        );
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"))
    }

    pub(crate) fn call(&mut self, id: u64, name: &str, args: Value) {
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": name, "arguments": args}}));
    }

    /// Closes standard input and waits (bounded) for the server to exit; its exit status.
    pub(crate) fn finish(mut self) -> std::process::ExitStatus {
        drop(self.stdin.take());
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Some(s) = self.child.try_wait().unwrap() {
                return s;
            }
            assert!(Instant::now() < deadline, "the server did not exit");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

#[test]
fn malformed_lines_unknown_tools_and_wrong_types_get_answers_and_the_server_goes_on() {
    let env = Env::new();
    write(env.root(), "a.txt", b"hello\n");
    let mut s = Raw::start(&env, "raw");
    s.line(b"garbage");
    s.line(br#"{"jsonrpc":"2.0","id":90,"method":"tools/call""#);
    s.line(b"[]");
    s.line(b"\xff\xfe");
    s.line(br#"{"jsonrpc":"2.0","id":91}"#);
    s.send(&json!({"jsonrpc": "2.0", "id": 1, "method": "no/such"}));
    s.call(2, "no_such_tool", json!({}));
    s.call(3, "write_file", json!({"path": "a.txt", "content": 5}));
    s.call(4, "edit_file", json!({"path": "a.txt"}));
    s.call(5, "read_file", json!({"path": "a.txt", "offset": "one"}));
    s.call(6, "restore", json!({"target": "nothing-like-this"}));
    s.send(&json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
        "params": {"name": "log", "arguments": "not an object"}}));
    s.call(8, "status", json!({}));
    let mut by_id = std::collections::BTreeMap::new();
    while by_id.len() < 8 {
        let v = s.recv();
        match v["id"].as_u64() {
            Some(id) => {
                assert!(by_id.insert(id, v).is_none(), "two answers to {id}");
            }
            // A line that is not a request gets an error without an id.
            None => assert!(v["error"]["code"].as_i64().unwrap() < 0, "{v}"),
        }
    }
    assert!(!by_id.contains_key(&90) && !by_id.contains_key(&91));
    assert_eq!(by_id[&1]["error"]["code"], -32601, "{}", by_id[&1]);
    let unknown = &by_id[&2]["error"];
    assert_eq!(unknown["code"], -32602, "{unknown}");
    assert!(unknown["message"].as_str().unwrap().contains("read_file"));
    // Wrong argument types are results a model can correct, not protocol errors.
    for id in [3, 4, 5] {
        let r = &by_id[&id]["result"];
        assert_eq!(r["isError"], true, "{r}");
        assert_eq!(r["structuredContent"]["error"]["kind"], "usage", "{r}");
        let words = r["content"][0]["text"].as_str().unwrap();
        assert!(words.contains("invalid arguments"), "{words}");
    }
    let r = &by_id[&6]["result"];
    assert_eq!(r["isError"], true, "{r}");
    assert_eq!(r["structuredContent"]["error"]["kind"], "unknown", "{r}");
    assert!(by_id[&7]["error"]["code"].as_i64().unwrap() < 0);
    let status = &by_id[&8]["result"];
    assert_eq!(status["isError"], false, "{status}");
    assert!(status["structuredContent"]["root"].is_string(), "{status}");
    assert_eq!(read_str(env.root(), "a.txt"), "hello\n");
    assert!(s.finish().success());
}

#[test]
fn tools_have_schemas_for_a_model_and_results_match_them() {
    let env = Env::new();
    let mut s = Raw::start(&env, "schemas");
    s.send(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}));
    let tools = s.recv()["result"]["tools"].as_array().unwrap().clone();
    let names: Vec<&str> = tools.iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(
        names,
        [
            "read_file",
            "write_file",
            "edit_file",
            "apply_patch",
            "run",
            "checkpoint",
            "log",
            "diff",
            "restore",
            "undo",
            "status",
            "worktree_create",
            "worktree_list",
            "worktree_merge",
            "worktree_discard"
        ]
    );
    for t in &tools {
        let input = &t["inputSchema"];
        assert_eq!(input["type"], "object", "{t}");
        assert_eq!(input["additionalProperties"], false, "{t}");
        let none = serde_json::Map::new();
        for (name, p) in input["properties"].as_object().unwrap_or(&none) {
            assert!(p["description"].is_string(), "{}: {name}", t["name"]);
        }
        assert_eq!(t["outputSchema"]["type"], "object", "{t}");
        assert!(t["description"].as_str().unwrap().len() > 40, "{t}");
    }
    let annotation = |name: &str, hint: &str| {
        tools.iter().find(|t| t["name"] == name).unwrap()["annotations"][hint].clone()
    };
    assert_eq!(annotation("restore", "destructiveHint"), true);
    assert_eq!(annotation("read_file", "readOnlyHint"), true);
    // restore's dry_run defaults to true, and says so in its schema.
    let restore = tools.iter().find(|t| t["name"] == "restore").unwrap();
    assert_eq!(
        restore["inputSchema"]["properties"]["dry_run"]["default"],
        true
    );
    // So does worktree_merge's: a merge is previewed unless asked otherwise.
    let merge = tools
        .iter()
        .find(|t| t["name"] == "worktree_merge")
        .unwrap();
    assert_eq!(
        merge["inputSchema"]["properties"]["dry_run"]["default"],
        true
    );
    assert_eq!(annotation("worktree_merge", "destructiveHint"), true);
    assert_eq!(annotation("worktree_list", "readOnlyHint"), true);
    assert!(s.finish().success());
}

#[test]
fn a_client_that_disconnects_mid_call_leaves_no_open_epoch() {
    let env = Env::new();
    write(env.root(), "a.txt", b"hello\n");
    let mut s = Raw::start(&env, "gone");
    s.call(
        1,
        "run",
        json!({"command": "sleep 1; echo late > late.txt", "timeout_secs": 30}),
    );
    // Gone before the answer: stdin closed and stdout never read again.
    std::thread::sleep(Duration::from_millis(200));
    let Raw {
        mut child,
        stdin,
        lines,
    } = s;
    drop(stdin);
    drop(lines);
    let deadline = Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st;
        }
        assert!(Instant::now() < deadline, "the server did not exit");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(status.success(), "{status}");
    // The command ran to its end and its epoch is settled, with what it changed.
    assert_eq!(read_str(env.root(), "late.txt"), "late\n");
    let st = json(&env, "gone", &["status"], 0);
    assert_eq!(st["open_epochs"], json!([]), "{st}");
    let log = json(&env, "gone", &["log"], 0);
    let run = log["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["tool"] == "run")
        .unwrap_or_else(|| panic!("no run epoch: {log}"))
        .clone();
    assert_eq!(run["state"], "settled", "{run}");
    // Settled by the server before it exited, not by the next command's recovery.
    assert_eq!(run["recovered"], false, "{run}");
    let shown = json(&env, "gone", &["show", run["id"].as_str().unwrap()], 0);
    assert!(shown.to_string().contains("late.txt"), "{shown}");
}

#[test]
fn print_config_for_each_client() {
    let env = Env::new();
    let root = std::fs::canonicalize(env.root()).unwrap();
    let root = root.to_str().unwrap();
    for client in ["claude-code", "codex", "gemini", "cursor"] {
        let o = env
            .cmd(&["mcp", "--print-config", client])
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", text(&o));
        let out = String::from_utf8(o.stdout).unwrap();
        assert!(out.contains(root), "{client}: {out}");
        assert!(
            out.contains(env!("CARGO_BIN_EXE_rewind")),
            "{client}: {out}"
        );
        let body: String = out
            .lines()
            .filter(|l| !l.starts_with("//") && !l.starts_with('#'))
            .collect::<Vec<_>>()
            .join("\n");
        if client == "codex" {
            assert!(out.contains("[mcp_servers.rewind]"), "{out}");
        } else {
            let v: Value = serde_json::from_str(&body).unwrap();
            assert_eq!(v["mcpServers"]["rewind"]["args"][0], "mcp", "{out}");
        }
    }
    let o = env.cmd(&["mcp", "--print-config", "vim"]).output().unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
}

/// A sandbox that cannot run (no bwrap on PATH) with `--sandbox workspace-write`: `run` is
/// refused as a result the model reads and nothing runs. Without `--sandbox` the same (fail
/// closed: the workspace's mode is a sandbox, so nothing runs open), with a warning on stderr;
/// only the user's explicit full access runs the command.
#[test]
fn a_sandbox_that_cannot_run_is_an_is_error_result() {
    let env = Env::new();
    let empty = tempfile::tempdir().unwrap();
    let mut cmd = env.cmd(&["-s", "nobwrap", "mcp", "--sandbox", "workspace-write"]);
    cmd.env("PATH", empty.path());
    let mut s = Raw::start_cmd(cmd);
    s.call(1, "run", json!({"command": "echo ran > ran.txt"}));
    let r = s.recv();
    let r = &r["result"];
    assert_eq!(r["isError"], true, "{r}");
    assert_eq!(r["structuredContent"]["error"]["kind"], "sandbox", "{r}");
    let words = r["content"][0]["text"].as_str().unwrap();
    assert!(words.contains("Nothing was run"), "{words}");
    assert!(!env.root().join("ran.txt").exists());
    assert!(s.finish().success());
    // What the service records for it (bwrap is looked for once the epoch is open): at most
    // an aborted epoch that changed nothing.
    let log = json(&env, "nobwrap", &["log"], 0);
    for item in log["items"].as_array().unwrap() {
        assert_eq!(item["state"], "aborted", "{log}");
        assert_eq!(item["changes"], 0, "{log}");
    }

    // No --sandbox: the workspace's mode (workspace-write) still refuses.
    let mut cmd = env.cmd(&["-s", "nobwrap", "mcp"]);
    cmd.env("PATH", empty.path());
    let mut s = Raw::start_cmd(cmd);
    s.call(2, "run", json!({"command": "echo ran > ran.txt"}));
    let r = s.recv();
    let r = &r["result"];
    assert_eq!(r["isError"], true, "{r}");
    assert_eq!(r["structuredContent"]["error"]["kind"], "sandbox", "{r}");
    assert!(!env.root().join("ran.txt").exists(), "ran open");
    assert!(s.finish().success());

    let o = env
        .cmd(&["-s", "nobwrap", "mcp"])
        .env("PATH", empty.path())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("will refuse commands"), "{err}");

    // The user's explicit full access for this workspace: the command runs, unsandboxed.
    json(
        &env,
        "nobwrap",
        &["sandbox", "mode", "danger-full-access", "--yes"],
        0,
    );
    let mut s = Raw::start_cmd(env.cmd(&["-s", "nobwrap", "mcp"]));
    s.call(3, "run", json!({"command": "echo ran > ran.txt"}));
    let r = s.recv();
    let r = &r["result"];
    assert_eq!(r["isError"], false, "{r}");
    assert_eq!(r["structuredContent"]["sandbox"], "none", "{r}");
    assert!(env.root().join("ran.txt").exists());
    assert!(s.finish().success());
}

/// `run`'s timeout stops the command (exit 124, `timed_out`), its output is capped at 30000
/// bytes per stream with the rest counted, and a bad timeout is a result to correct.
#[test]
fn run_times_out_and_caps_its_output() {
    let env = Env::new();
    let mut s = Raw::start(&env, "runs");
    s.call(
        1,
        "run",
        json!({"command": "head -c 100000 /dev/zero | tr '\\0' x; sleep 30", "timeout_secs": 1}),
    );
    let started = Instant::now();
    let r = s.recv();
    assert!(started.elapsed() < Duration::from_secs(20), "not stopped");
    let out = &r["result"]["structuredContent"];
    assert_eq!(out["exit_code"], 124, "{out}");
    assert_eq!(out["timed_out"], true, "{out}");
    assert_eq!(out["stdout"].as_str().unwrap().len(), 30_000);
    assert_eq!(out["truncated_bytes"], 70_000, "{}", out["truncated_bytes"]);
    s.call(2, "run", json!({"command": "true", "timeout_secs": 0}));
    let r = s.recv();
    assert_eq!(r["result"]["isError"], true, "{r}");
    assert!(s.finish().success());
}

/// A path outside the workspace is refused as a result, and nothing is written there.
#[test]
fn paths_outside_the_workspace_are_refused() {
    let env = Env::new();
    let outside = tempfile::tempdir().unwrap();
    let target = outside.path().join("x.txt");
    let mut s = Raw::start(&env, "outside");
    s.call(
        1,
        "write_file",
        json!({"path": "../x.txt", "content": "no"}),
    );
    s.call(2, "write_file", json!({"path": target, "content": "no"}));
    for _ in 0..2 {
        let r = s.recv();
        assert_eq!(r["result"]["isError"], true, "{r}");
    }
    assert!(!target.exists());
    assert!(!env.root().parent().unwrap().join("x.txt").exists());
    assert!(s.finish().success());
}

/// A tool call whose capture runs out of `capture.time_budget` (the first checkpoint in a big
/// tree, in this process: no `rewind serve` runs) leaves the rest to a background baseline, as
/// a command would: with no other call, every file becomes covered.
#[test]
fn a_checkpoint_that_runs_out_of_budget_completes_the_baseline_in_the_background() {
    let env = Env::new();
    spent_budget_tree(&env);
    let mut s = Raw::start(&env, "M");
    s.call(1, "checkpoint", json!({"message": "first"}));
    let r = s.recv();
    assert_eq!(r["result"]["isError"], false, "{r}");
    wait_for_baseline(&env, "M");
    assert!(s.finish().success());
    fsck_clean(&env);
}

/// A `checkpoint` tool call that leaves the state over `[retention] max_bytes` starts one gc
/// in the background, as `rewind checkpoint` does.
#[test]
fn a_checkpoint_over_the_budget_starts_a_gc() {
    let env = Env::new();
    write(env.root(), "x.txt", b"x\n");
    write(
        env.root(),
        ".rewind.toml",
        b"[retention]\nmax_bytes = \"3M\"\n",
    );
    let mut s = Raw::start(&env, "M");
    for i in 0..6u64 {
        // Each checkpoint stores 1 MiB more.
        let big = crate::gc::random_mib();
        write(env.root(), "big.bin", &big);
        s.call(i + 1, "checkpoint", json!({"message": format!("m{i}")}));
        let answer = s.recv();
        assert_eq!(answer["result"]["isError"], false, "{answer}");
    }
    crate::gc::wait_within_budget(&env, (3 << 20) + (256 << 10));
    assert!(s.finish().success());
    let gone = crate::gc::collected(&env);
    assert!(!gone.is_empty(), "a gc dropped the oldest checkpoints");
    fsck_clean(&env);
}
