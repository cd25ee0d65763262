//! Helpers for the rewind (op-log) tests: run the real binary for a session, read a tree back
//! exactly (kind, mode, bytes, link text) with every mtime, and parse `--json` reports.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Output;

use crate::common::{last_line, text, Env};

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Node {
    File { mode: u32, data: Vec<u8> },
    Symlink(Vec<u8>),
    Dir { mode: u32 },
}

pub type Tree = BTreeMap<Vec<u8>, Node>;
pub type Mtimes = BTreeMap<Vec<u8>, i64>;

/// Everything under `root`, keyed by relative path bytes, never following symlinks.
pub fn read_tree(root: &Path) -> Tree {
    read_tree_mtimes(root).0
}

/// The tree and the mtime (ns) of every entry in it, directories and symlinks included.
pub fn read_tree_mtimes(root: &Path) -> (Tree, Mtimes) {
    let mut tree = BTreeMap::new();
    let mut mtimes = BTreeMap::new();
    fn go(abs: &Path, rel: &[u8], tree: &mut Tree, mtimes: &mut Mtimes) {
        let mut names: Vec<_> = std::fs::read_dir(abs)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        names.sort();
        for name in names {
            let mut r = rel.to_vec();
            if !r.is_empty() {
                r.push(b'/');
            }
            r.extend_from_slice(name.as_bytes());
            let path = abs.join(&name);
            let m = std::fs::symlink_metadata(&path).unwrap();
            mtimes.insert(r.clone(), m.mtime() * 1_000_000_000 + m.mtime_nsec());
            let mode = m.mode() & 0o7777;
            if m.file_type().is_symlink() {
                let t = std::fs::read_link(&path).unwrap();
                tree.insert(r, Node::Symlink(t.as_os_str().as_bytes().to_vec()));
            } else if m.is_dir() {
                tree.insert(r.clone(), Node::Dir { mode });
                go(&path, &r, tree, mtimes);
            } else {
                let data = std::fs::read(&path).unwrap();
                tree.insert(r, Node::File { mode, data });
            }
        }
    }
    go(root, b"", &mut tree, &mut mtimes);
    (tree, mtimes)
}

/// A readable difference between two trees (for assertion messages).
pub fn tree_diff(a: &Tree, b: &Tree) -> String {
    let mut out = String::new();
    for (k, v) in a {
        match b.get(k) {
            None => out += &format!("  only left:  {} {}\n", show(k), brief(v)),
            Some(w) if w != v => {
                out += &format!("  differs:    {} {} -> {}\n", show(k), brief(v), brief(w))
            }
            _ => {}
        }
    }
    for (k, v) in b {
        if !a.contains_key(k) {
            out += &format!("  only right: {} {}\n", show(k), brief(v));
        }
    }
    out
}

fn brief(n: &Node) -> String {
    match n {
        Node::File { mode, data } => format!(
            "file {mode:o} {:?}",
            String::from_utf8_lossy(&data[..data.len().min(40)])
        ),
        Node::Symlink(t) => format!("symlink -> {}", String::from_utf8_lossy(t)),
        Node::Dir { mode } => format!("dir {mode:o}"),
    }
}

pub fn show(p: &[u8]) -> String {
    String::from_utf8_lossy(p).into_owned()
}

pub fn assert_tree_eq(actual: &Tree, expected: &Tree, what: &str) {
    assert!(
        actual == expected,
        "{what}: tree differs (left = actual, right = expected):\n{}",
        tree_diff(actual, expected)
    );
}

pub fn p(root: &Path, rel: &[u8]) -> PathBuf {
    root.join(OsStr::from_bytes(rel))
}

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
