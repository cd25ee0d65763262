//! Helpers for the rewind (op-log) tests: run the real binary for a session, read a tree back
//! exactly (kind, mode, bytes, link text) with every mtime, and parse `--json` reports.
#![allow(dead_code)]

use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Output;

use super::{last_line, text, Env};

pub use rewind_testutil::tree::{
    assert_tree_eq, p, read_tree, read_tree_mtimes, show, tree_diff, Mtimes, Node, Tree,
};

pub fn write(root: &Path, rel: &str, data: &[u8]) {
    let path = root.join(rel);
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).unwrap();
    }
    std::fs::write(path, data).unwrap();
}

pub fn chmod(root: &Path, rel: &str, mode: u32) {
    std::fs::set_permissions(root.join(rel), std::fs::Permissions::from_mode(mode)).unwrap();
}

pub fn read(root: &Path, rel: &str) -> Vec<u8> {
    std::fs::read(root.join(rel)).unwrap()
}

pub fn read_str(root: &Path, rel: &str) -> String {
    String::from_utf8(read(root, rel)).unwrap()
}

/// Lets the coarse file-system clock move on, so a rewrite would show in an mtime.
pub fn tick() {
    std::thread::sleep(std::time::Duration::from_millis(15));
}

/// Runs `rewind -s SESSION ARGS…` (working directory: the root) and returns the output.
pub fn run_s(env: &Env, session: &str, args: &[&str]) -> Output {
    let mut all = vec!["-s", session];
    all.extend_from_slice(args);
    env.cmd(&all).current_dir(env.root()).output().unwrap()
}

/// Like [`run_s`], asserting the exit code.
pub fn expect(env: &Env, session: &str, args: &[&str], code: i32) -> Output {
    let o = run_s(env, session, args);
    assert_eq!(
        o.status.code(),
        Some(code),
        "rewind -s {session} {args:?}: {}",
        text(&o)
    );
    o
}

/// Runs a command that must succeed; returns the last line of its stdout (the new id).
pub fn ok(env: &Env, session: &str, args: &[&str]) -> String {
    let o = expect(env, session, args, 0);
    last_line(&o.stdout)
}

pub fn init(env: &Env) -> String {
    let o = env.run(&["init"]);
    assert_eq!(o.status.code(), Some(0), "init: {}", text(&o));
    last_line(&o.stdout)
}

/// `rewind -s S checkpoint --message M`; returns the checkpoint id.
pub fn checkpoint(env: &Env, session: &str, message: &str) -> String {
    ok(env, session, &["checkpoint", "--message", message])
}

/// `rewind -s S exec -- sh -c SCRIPT` in the root; asserts exit 0.
pub fn sh(env: &Env, session: &str, script: &str) {
    let o = env
        .cmd(&[
            "-s", session, "exec", "--tool", "bash", "--", "sh", "-c", script,
        ])
        .current_dir(env.root())
        .env("REWIND_QUIET", "1")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "exec {script:?}: {}", text(&o));
}

/// `rewind -s S exec -- ARGV…` with raw (possibly non-UTF-8) arguments; asserts exit 0.
pub fn exec_argv(env: &Env, session: &str, argv: &[&OsStr]) {
    let mut c = env.cmd(&["-s", session, "exec", "--"]);
    c.args(argv)
        .current_dir(env.root())
        .env("REWIND_QUIET", "1");
    let o = c.output().unwrap();
    assert_eq!(o.status.code(), Some(0), "exec {argv:?}: {}", text(&o));
}

/// An exact epoch around `f`: `epoch begin --path P…`, run `f`, `epoch end`.
pub fn exact(env: &Env, session: &str, paths: &[&str], f: impl FnOnce()) -> String {
    let mut args = vec!["epoch", "begin", "--tool", "edit"];
    for p in paths {
        args.push("--path");
        args.push(p);
    }
    let id = ok(env, session, &args);
    f();
    expect(env, session, &["epoch", "end"], 0);
    id
}

/// Runs with `--json` and parses stdout; asserts the exit code.
pub fn json(env: &Env, session: &str, args: &[&str], code: i32) -> serde_json::Value {
    let mut all = vec!["--json"];
    all.extend_from_slice(args);
    let o = expect(env, session, &all, code);
    serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("--json {args:?}: {e}: {}", text(&o)))
}

/// The `steps` of a restore/undo report as comparable tuples (action, path, before, after).
pub fn steps(v: &serde_json::Value) -> Vec<(String, String, String, String)> {
    v["steps"]
        .as_array()
        .unwrap_or_else(|| panic!("no steps in {v}"))
        .iter()
        .map(|s| {
            (
                s["action"].as_str().unwrap().to_string(),
                s["path"].as_str().unwrap().to_string(),
                s["before"].to_string(),
                s["after"].to_string(),
            )
        })
        .collect()
}

/// The paths of a report's `conflicts`.
pub fn conflict_paths(v: &serde_json::Value) -> Vec<String> {
    let mut out: Vec<String> = v["conflicts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["path"].as_str().unwrap().to_string())
        .collect();
    out.sort();
    out
}

/// The session head, read as the parent a new checkpoint would get (no message: no node).
pub fn head(env: &Env, session: &str) -> Option<String> {
    let v = json(env, session, &["checkpoint", "--label", "probe-head"], 0);
    v["parent"].as_str().map(str::to_string)
}

pub fn fsck_clean(env: &Env) {
    let o = env.run(&["fsck"]);
    assert_eq!(o.status.code(), Some(0), "fsck: {}", text(&o));
}

pub fn os(s: &[u8]) -> OsString {
    OsStr::from_bytes(s).to_os_string()
}

/// A `rewind serve` for `env`'s workspace, on its socket, once it listens.
pub fn serve(env: &Env) -> std::process::Child {
    let mut c = env
        .cmd(&["serve"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(c.stdout.as_mut().unwrap()),
        &mut first,
    )
    .unwrap();
    assert!(!first.is_empty(), "the server printed no socket path");
    c
}

/// Stops a server [`serve`] started (SIGTERM) and waits for it to exit cleanly.
pub fn stop_server(mut server: std::process::Child) {
    // SAFETY: kill(2) on our own child.
    unsafe { libc::kill(server.id() as i32, libc::SIGTERM) };
    assert!(server.wait().unwrap().success());
}

/// A `capture.time_budget` of 0 s and 60 small files the next capture will run out of it on:
/// the rest is a background baseline's to complete.
pub fn spent_budget_tree(env: &Env) {
    let root = env.root();
    write(root, ".rewind.toml", b"[capture]\ntime_budget = \"0s\"\n");
    for i in 0..60 {
        write(
            root,
            &format!("data/{:02}/f{i}.txt", i % 6),
            format!("{i}\n").as_bytes(),
        );
    }
}

/// Waits (up to a minute) until `status` shows no baseline left and nothing uncovered: a
/// background baseline finished.
pub fn wait_for_baseline(env: &Env, session: &str) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let s = json(env, session, &["status"], 0);
        if s["baseline"].is_null() && s["uncovered"].as_array().unwrap().is_empty() {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the background baseline did not finish: {s}"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}

/// The workspace's state directory, as `status` reports it.
pub fn state_dir(env: &Env) -> std::path::PathBuf {
    let v = json(env, "S", &["status"], 0);
    std::path::PathBuf::from(v["state_dir"].as_str().unwrap())
}
