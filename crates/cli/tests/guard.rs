//! The guarded tools through the real binary: exit codes (5 for guard refusals), stdin,
//! partial reads, JSON, apply-patch all-or-nothing, and undo of a guarded write.

use crate::common;

use std::io::Write;
use std::process::{Output, Stdio};

use common::{last_line, text, Env};

fn with_stdin(env: &Env, args: &[&str], input: &[u8]) -> Output {
    common::output_with_stdin(&mut env.cmd(args), input)
}

fn abs(env: &Env, rel: &str) -> String {
    env.root().join(rel).display().to_string()
}

#[test]
fn refusals_exit_5_and_leave_the_file_alone() {
    let env = Env::new();
    std::fs::write(env.root().join("a.txt"), "alpha\n").unwrap();
    assert_eq!(env.run(&["init"]).status.code(), Some(0));
    let a = abs(&env, "a.txt");

    let o = env.run(&["check-write", &a]);
    assert_eq!(o.status.code(), Some(5), "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("never read"),
        "{}",
        text(&o)
    );
    let o = with_stdin(&env, &["write", &a], b"clobber\n");
    assert_eq!(o.status.code(), Some(5), "{}", text(&o));
    let o = env.run(&["edit", &a, "--old", "alpha", "--new", "beta"]);
    assert_eq!(o.status.code(), Some(5), "{}", text(&o));
    assert_eq!(std::fs::read(env.root().join("a.txt")).unwrap(), b"alpha\n");

    // Read, then an external edit: refused as changed.
    let o = env.run(&["read", &a]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert_eq!(o.stdout, b"alpha\n");
    assert_eq!(env.run(&["check-write", &a]).status.code(), Some(0));
    std::fs::write(env.root().join("a.txt"), "user edit\n").unwrap();
    let o = with_stdin(&env, &["write", &a], b"clobber\n");
    assert_eq!(o.status.code(), Some(5), "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("changed since you read it"),
        "{}",
        text(&o)
    );
    assert_eq!(
        std::fs::read(env.root().join("a.txt")).unwrap(),
        b"user edit\n"
    );

    // JSON verdict on stdout, still exit 5.
    let o = env.run(&["--json", "check-write", &a]);
    assert_eq!(o.status.code(), Some(5));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v[0]["allowed"], false);
    assert_eq!(v[0]["refusal"]["kind"], "changed");
}

#[test]
fn write_edit_and_undo() {
    let env = Env::new();
    std::fs::write(env.root().join("a.txt"), "one\r\ntwo\r\n").unwrap();
    assert_eq!(env.run(&["init"]).status.code(), Some(0));
    let a = abs(&env, "a.txt");
    assert_eq!(env.run(&["read", &a]).status.code(), Some(0));
    let o = env.run(&["edit", &a, "--old", "one\ntwo", "--new", "1\n2"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert_eq!(
        std::fs::read(env.root().join("a.txt")).unwrap(),
        b"1\r\n2\r\n"
    );
    // Missing and ambiguous matches: exit 1, nothing written.
    let o = env.run(&["edit", &a, "--old", "3", "--new", "4"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("0 matches"),
        "{}",
        text(&o)
    );
    let o = env.run(&["edit", &a, "--old", "\r\n", "--new", "\n"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("2 times"),
        "{}",
        text(&o)
    );
    // Write again without reading again.
    let o = with_stdin(
        &env,
        &["--json", "write", &a, "--tool-call", "c1"],
        b"final\n",
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["changes"][0]["path"], "a.txt");
    let id = v["id"].as_str().unwrap().to_string();
    assert_eq!(std::fs::read(env.root().join("a.txt")).unwrap(), b"final\n");
    // Each guarded write is an epoch that can be undone.
    let o = env.run(&["undo", &id]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert_eq!(
        std::fs::read(env.root().join("a.txt")).unwrap(),
        b"1\r\n2\r\n"
    );
    // New file: no read needed; the epoch id is the last line.
    let o = with_stdin(&env, &["write", &abs(&env, "n/new.txt")], b"new\n");
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert_eq!(last_line(&o.stdout).len(), 16, "{}", text(&o));
}

#[test]
fn partial_read_and_apply_patch() {
    let env = Env::new();
    std::fs::write(env.root().join("a.txt"), "1\n2\n3\n4\n").unwrap();
    std::fs::write(env.root().join("b.txt"), "x\n").unwrap();
    assert_eq!(env.run(&["init"]).status.code(), Some(0));
    let a = abs(&env, "a.txt");
    let o = env.run(&["read", "--range", "2:3", "-n", &a]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert_eq!(String::from_utf8_lossy(&o.stdout), "     2\t2\n     3\t3\n");
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("partial read"),
        "{}",
        text(&o)
    );

    let patch = b"diff --git a/a.txt b/a.txt\n--- a/a.txt\n+++ b/a.txt\n@@ -1,4 +1,4 @@\n 1\n-2\n+two\n 3\n 4\n\
diff --git a/c.txt b/c.txt\nnew file mode 100755\n--- /dev/null\n+++ b/c.txt\n@@ -0,0 +1 @@\n+see\n";
    // b.txt was never read, but the patch does not touch it; a.txt was read (partially).
    let o = with_stdin(&env, &["apply-patch", "--dry-run"], patch);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(!env.root().join("c.txt").exists());
    let o = with_stdin(&env, &["apply-patch"], patch);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert_eq!(
        std::fs::read(env.root().join("a.txt")).unwrap(),
        b"1\ntwo\n3\n4\n"
    );
    assert_eq!(std::fs::read(env.root().join("c.txt")).unwrap(), b"see\n");
    // A patch that touches an unread file: exit 5; one with a bad hunk: exit 1; nothing written.
    let bad = b"--- a/b.txt\n+++ b/b.txt\n@@ -1 +1 @@\n-x\n+y\n";
    let o = with_stdin(&env, &["apply-patch"], bad);
    assert_eq!(o.status.code(), Some(5), "{}", text(&o));
    let bad = b"--- a/a.txt\n+++ b/a.txt\n@@ -1,2 +1,2 @@\n 1\n-2\n+3\n";
    let o = with_stdin(&env, &["apply-patch"], bad);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("hunk #1"),
        "{}",
        text(&o)
    );
    assert_eq!(
        std::fs::read(env.root().join("a.txt")).unwrap(),
        b"1\ntwo\n3\n4\n"
    );
    assert_eq!(std::fs::read(env.root().join("b.txt")).unwrap(), b"x\n");
}

/// `rewind write PATH` with "after\n" on stdin, killed at `failpoint`.
fn write_killed_at(env: &Env, path: &str, failpoint: &str) {
    let mut c = env.cmd(&["write", path]);
    c.env("REWIND_FAILPOINT", failpoint);
    let mut child = c
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(b"after\n").unwrap();
    assert_eq!(
        child.wait().unwrap().code(),
        None,
        "killed by the failpoint {failpoint}"
    );
}

#[test]
fn killed_mid_write_is_recovered_and_never_half_written() {
    let env = Env::new();
    std::fs::write(env.root().join("a.txt"), "before\n").unwrap();
    assert_eq!(env.run(&["init"]).status.code(), Some(0));
    let a = abs(&env, "a.txt");
    assert_eq!(env.run(&["read", &a]).status.code(), Some(0));

    // Killed after the epoch opened, before anything was written: nothing changes, and the
    // session's baseline still holds.
    write_killed_at(&env, &a, "guard-before-write");
    assert_eq!(
        std::fs::read(env.root().join("a.txt")).unwrap(),
        b"before\n"
    );
    let o = env.run(&["check-write", &a]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));

    // Killed with the new content complete under its temporary name, before the rename: the
    // file is untouched, and recovering the epoch removes the temporary file.
    write_killed_at(&env, &a, "write-before-rename");
    assert_eq!(
        std::fs::read(env.root().join("a.txt")).unwrap(),
        b"before\n"
    );
    let o = env.run(&["recover"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let leftovers: Vec<_> = std::fs::read_dir(env.root())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .filter(|n| n.to_string_lossy().starts_with(".rewind-tmp-"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");

    // Killed after the rename, before the epoch settled: the next command settles it (the
    // change is attributed to it), the file is whole, and the session must read again.
    write_killed_at(&env, &a, "guard-before-settle");
    assert_eq!(std::fs::read(env.root().join("a.txt")).unwrap(), b"after\n");
    let o = env.run(&["check-write", &a]);
    assert_eq!(o.status.code(), Some(5), "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("this session's tool call"),
        "{}",
        text(&o)
    );
    let o = env.run(&["undo"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert_eq!(
        std::fs::read(env.root().join("a.txt")).unwrap(),
        b"before\n"
    );
}
