//! `-C DIR` means "as if started in DIR" (as `git -C`): every relative path argument of every
//! command is taken from DIR, and `exec` runs its command there. Without `-C`, from the
//! current directory. Each test runs from `ROOT/sub`, where `a.txt` exists as `ROOT/a.txt` and
//! as `ROOT/sub/a.txt`, once with `-C ROOT` and once without, and checks which file was used.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use common::{require_bwrap, stdout_ok, text, Env};

/// A workspace (registered) with `a.txt` = "root\n" and `sub/a.txt` = "sub\n".
fn setup() -> Env {
    let env = Env::new();
    setup_in(&env);
    env
}

fn setup_in(env: &Env) {
    std::fs::create_dir(env.root().join("sub")).unwrap();
    std::fs::write(env.root().join("a.txt"), "root\n").unwrap();
    std::fs::write(env.root().join("sub/a.txt"), "sub\n").unwrap();
    let o = env.run(&["init"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
}

fn root(env: &Env) -> PathBuf {
    env.root().canonicalize().unwrap()
}

/// `rewind [-C ROOT] ARGS…` started in `ROOT/sub`.
fn from_sub(env: &Env, with_c: bool, args: &[&str]) -> Command {
    let mut c = if with_c {
        env.cmd(args)
    } else {
        env.cmd_here(args)
    };
    c.current_dir(env.root().join("sub")).stdin(Stdio::null());
    c
}

fn run(env: &Env, with_c: bool, args: &[&str]) -> Output {
    from_sub(env, with_c, args).output().unwrap()
}

fn run_stdin(env: &Env, with_c: bool, args: &[&str], input: &[u8]) -> Output {
    common::output_with_stdin(&mut from_sub(env, with_c, args), input)
}

fn content(env: &Env, rel: &str) -> String {
    std::fs::read_to_string(env.root().join(rel)).unwrap()
}

/// Records a read of both files (by absolute path, which means the same thing either way).
fn read_both(env: &Env) {
    let a = root(env).join("a.txt");
    let b = root(env).join("sub/a.txt");
    stdout_ok(run(
        env,
        false,
        &["read", a.to_str().unwrap(), b.to_str().unwrap()],
    ));
}

fn json(out: &str) -> serde_json::Value {
    serde_json::from_str(out).unwrap_or_else(|e| panic!("{e}: {out}"))
}

#[test]
fn read_takes_paths_from_dash_c_dir() {
    let env = setup();
    assert_eq!(stdout_ok(run(&env, true, &["read", "a.txt"])), "root\n");
    assert_eq!(stdout_ok(run(&env, false, &["read", "a.txt"])), "sub\n");
    // A relative DIR is itself taken from the current directory.
    let mut c = env.cmd_here(&["-C", "..", "read", "a.txt"]);
    c.current_dir(env.root().join("sub"));
    assert_eq!(stdout_ok(c.output().unwrap()), "root\n");
}

#[test]
fn check_write_takes_paths_from_dash_c_dir() {
    let env = setup();
    // Only ROOT/sub/a.txt has been read.
    let b = root(&env).join("sub/a.txt");
    stdout_ok(run(&env, false, &["read", b.to_str().unwrap()]));
    let o = run(&env, true, &["check-write", "a.txt"]);
    assert_eq!(
        o.status.code(),
        Some(5),
        "ROOT/a.txt was never read: {}",
        text(&o)
    );
    let o = run(&env, false, &["check-write", "a.txt"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
}

#[test]
fn write_takes_its_path_from_dash_c_dir() {
    let env = setup();
    read_both(&env);
    stdout_ok(run_stdin(
        &env,
        true,
        &["write", "a.txt"],
        b"written with -C\n",
    ));
    assert_eq!(content(&env, "a.txt"), "written with -C\n");
    assert_eq!(content(&env, "sub/a.txt"), "sub\n");
    stdout_ok(run_stdin(
        &env,
        false,
        &["write", "a.txt"],
        b"written here\n",
    ));
    assert_eq!(content(&env, "a.txt"), "written with -C\n");
    assert_eq!(content(&env, "sub/a.txt"), "written here\n");
}

#[test]
fn edit_takes_its_path_from_dash_c_dir() {
    let env = setup();
    read_both(&env);
    let edit = ["edit", "a.txt", "--old", "t\n", "--new", "t edited\n"];
    // Only ROOT/a.txt ("root\n") has the text: the edit fails on the other one.
    stdout_ok(run(&env, true, &edit));
    assert_eq!(content(&env, "a.txt"), "root edited\n");
    assert_eq!(content(&env, "sub/a.txt"), "sub\n");
    let edit = ["edit", "a.txt", "--old", "sub", "--new", "sub edited"];
    stdout_ok(run(&env, false, &edit));
    assert_eq!(content(&env, "sub/a.txt"), "sub edited\n");
    assert_eq!(content(&env, "a.txt"), "root edited\n");
}

#[test]
fn apply_patch_takes_its_file_from_dash_c_dir_and_patch_paths_from_the_root() {
    let env = setup();
    read_both(&env);
    // The same name in both places; the paths inside a patch are relative to the workspace
    // root wherever it is applied from (as `git diff` writes them).
    std::fs::write(
        env.root().join("p.diff"),
        "--- a/a.txt\n+++ b/a.txt\n@@ -1 +1 @@\n-root\n+root patched\n",
    )
    .unwrap();
    std::fs::write(
        env.root().join("sub/p.diff"),
        "--- a/sub/a.txt\n+++ b/sub/a.txt\n@@ -1 +1 @@\n-sub\n+sub patched\n",
    )
    .unwrap();
    stdout_ok(run(&env, true, &["apply-patch", "p.diff"]));
    assert_eq!(content(&env, "a.txt"), "root patched\n");
    assert_eq!(content(&env, "sub/a.txt"), "sub\n");
    stdout_ok(run(&env, false, &["apply-patch", "p.diff"]));
    assert_eq!(content(&env, "sub/a.txt"), "sub patched\n");
    assert_eq!(content(&env, "a.txt"), "root patched\n");
}

/// The paths an exact epoch begun with `--path a.txt` recorded.
fn epoch_paths(env: &Env, with_c: bool) -> Vec<String> {
    stdout_ok(run(env, with_c, &["epoch", "begin", "--path", "a.txt"]));
    std::fs::write(env.root().join("a.txt"), "changed root\n").unwrap();
    std::fs::write(env.root().join("sub/a.txt"), "changed sub\n").unwrap();
    let out = stdout_ok(run(env, with_c, &["--json", "epoch", "end"]));
    json(&out)["changes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["path"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn epoch_begin_takes_paths_from_dash_c_dir() {
    let env = setup();
    assert_eq!(epoch_paths(&env, true), ["a.txt"]);
    let env = setup();
    assert_eq!(epoch_paths(&env, false), ["sub/a.txt"]);
}

/// A checkpoint `m0`, then one change to both files.
fn change_both(env: &Env) {
    stdout_ok(run(env, true, &["checkpoint", "--message", "m0"]));
    let mut c = env.cmd(&[
        "exec",
        "--",
        "sh",
        "-c",
        "echo 2 > a.txt; echo 2 > sub/a.txt",
    ]);
    c.current_dir(env.root());
    stdout_ok(c.output().unwrap());
}

#[test]
fn restore_takes_path_filters_from_dash_c_dir() {
    let env = setup();
    change_both(&env);
    stdout_ok(run(&env, true, &["restore", "m0", "--", "a.txt"]));
    assert_eq!(content(&env, "a.txt"), "root\n");
    assert_eq!(content(&env, "sub/a.txt"), "2\n");
    stdout_ok(run(&env, false, &["restore", "m0", "--", "a.txt"]));
    assert_eq!(content(&env, "sub/a.txt"), "sub\n");
}

#[test]
fn diff_takes_path_filters_from_dash_c_dir() {
    let env = setup();
    change_both(&env);
    let out = stdout_ok(run(&env, true, &["diff", "m0", "--stat", "--", "a.txt"]));
    assert!(out.starts_with(" a.txt |"), "{out}");
    let out = stdout_ok(run(&env, false, &["diff", "m0", "--stat", "--", "a.txt"]));
    assert!(out.starts_with(" sub/a.txt |"), "{out}");
}

#[test]
fn checkpoint_takes_its_payload_file_from_dash_c_dir() {
    let env = setup();
    std::fs::write(env.root().join("payload.json"), "1").unwrap();
    std::fs::write(env.root().join("sub/payload.json"), "22").unwrap();
    let size = |with_c: bool, message: &str| {
        let args = ["checkpoint", "--message", message];
        let out = stdout_ok(run(
            &env,
            with_c,
            &[&args[..], &["--payload-file", "payload.json"]].concat(),
        ));
        let id = out.lines().last().unwrap().to_string();
        let shown = json(&stdout_ok(run(&env, true, &["--json", "show", &id])));
        shown["payload_size"].as_u64().unwrap()
    };
    assert_eq!(size(true, "m1"), 1);
    assert_eq!(size(false, "m2"), 2);
}

/// Where `rewind [-C ROOT] exec [--sandbox MODE] -- pwd`, started in ROOT/sub, ran `pwd`.
fn exec_pwd(env: &Env, with_c: bool, sandbox: Option<&str>) -> PathBuf {
    let mut args = vec!["exec"];
    if let Some(mode) = sandbox {
        args.extend(["--sandbox", mode]);
    }
    args.extend(["--", "pwd"]);
    let out = stdout_ok(run(env, with_c, &args));
    PathBuf::from(out.trim_end())
}

#[test]
fn exec_runs_its_command_in_dash_c_dir() {
    let env = setup();
    assert_eq!(exec_pwd(&env, true, None), root(&env));
    assert_eq!(exec_pwd(&env, false, None), root(&env).join("sub"));
}

/// A workspace outside /tmp: the sandbox gives the command a private /tmp.
fn sandbox_env() -> Env {
    let env = Env {
        home: tempfile::tempdir().unwrap(),
        root: tempfile::Builder::new()
            .prefix("invocation-dir")
            .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
            .unwrap(),
    };
    setup_in(&env);
    env
}

#[test]
fn sandboxed_exec_runs_its_command_in_dash_c_dir() {
    require_bwrap();
    let env = sandbox_env();
    let root = root(&env);
    let mode = Some("workspace-write");
    assert_eq!(exec_pwd(&env, true, mode), root);
    assert_eq!(exec_pwd(&env, false, mode), root.join("sub"));
}

#[test]
fn sandbox_exec_runs_its_command_and_takes_paths_from_dash_c_dir() {
    require_bwrap();
    let env = sandbox_env();
    let root = root(&env);
    let pwd = |with_c: bool| -> PathBuf {
        let out = stdout_ok(run(&env, with_c, &["sandbox", "exec", "--", "pwd"]));
        PathBuf::from(out.trim_end())
    };
    assert_eq!(pwd(true), root);
    assert_eq!(pwd(false), root.join("sub"));
    // --deny-read a.txt hides ROOT/a.txt with -C ROOT, ROOT/sub/a.txt without.
    let cat = |with_c: bool, path: &Path| -> Output {
        let p = path.to_str().unwrap();
        run(
            &env,
            with_c,
            &["sandbox", "exec", "--deny-read", "a.txt", "--", "cat", p],
        )
    };
    assert_ne!(cat(true, &root.join("a.txt")).status.code(), Some(0));
    assert_eq!(stdout_ok(cat(true, &root.join("sub/a.txt"))), "sub\n");
    assert_ne!(cat(false, &root.join("sub/a.txt")).status.code(), Some(0));
    assert_eq!(stdout_ok(cat(false, &root.join("a.txt"))), "root\n");
}
