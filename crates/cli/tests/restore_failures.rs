//! A restore is all or nothing, through the real binary on real file systems: a damaged store,
//! a directory the user may not write, a read-only mount and a full file system refuse it
//! before anything is written (every file's and directory's mtime unchanged, no temporary file
//! left); a failure part-way (removing a directory that has become a mount point: EBUSY) rolls
//! back what was applied; a SIGKILL during that rollback leaves it for the next command to
//! finish, never to roll forward.
//!
//! The mount cases run in a private mount namespace (`unshare -rm`), so they need neither root
//! nor cleanup, and nothing they mount is visible outside.

use crate::common;

use std::os::unix::fs::PermissionsExt;
use std::process::{Command, Output};

use crate::common::rewind::*;
use common::{noise, text, Env};

/// Runs `script` with `sh -e` in a new user and mount namespace; `$REWIND` is the binary
/// (with `REWIND_HOME` set), `$WS` the workspace.
fn in_mount_ns(env: &Env, script: &str) -> Output {
    let o = Command::new("unshare")
        .args(["-rm", "sh", "-ec", script])
        .env("REWIND", env!("CARGO_BIN_EXE_rewind"))
        .env("REWIND_HOME", env.home.path())
        .env("WS", env.root())
        .env_remove("REWIND_SESSION")
        .env_remove("REWIND_FAILPOINT")
        .output()
        .expect("unshare (util-linux) runs");
    o
}

/// The files and directories under the workspace with size, mode and mtime, one per line:
/// what "unchanged" is checked against.
const LISTING: &str = r#"find "$WS" -printf '%P %y %s %m %T@\n' | sort"#;

/// The same without times: what a rollback restores (it cannot give a directory back the
/// mtime it had before entries were removed from it and put back).
const CONTENT: &str = r#"find "$WS" -printf '%P %y %s %m\n' | sort"#;

fn status_json(env: &Env) -> serde_json::Value {
    json(env, "A", &["status"], 0)
}

fn unfinished(env: &Env) -> usize {
    status_json(env)["unfinished_restores"]
        .as_array()
        .map_or(0, Vec::len)
}

/// Flipped bytes in every pack: the restore needs content it cannot read, says which (exit 7),
/// and writes nothing: every file's and directory's mtime is as it was.
#[test]
fn damaged_objects_refuse_the_restore_before_anything_is_written() {
    let env = Env::new();
    let root = env.root();
    write(root, "big.bin", &noise(1, 300_000));
    write(root, "dir/small.txt", b"small\n");
    init(&env);
    checkpoint(&env, "A", "m0");
    sh(
        &env,
        "A",
        "head -c 300000 /dev/urandom > big.bin; rm -r dir; echo new > new.txt",
    );
    for pack in env.packs() {
        let mut bytes = std::fs::read(&pack).unwrap();
        let mid = bytes.len() / 2;
        for b in &mut bytes[mid..mid + 64] {
            *b ^= 0xff;
        }
        std::fs::write(&pack, bytes).unwrap();
    }
    tick();
    let before = read_tree_mtimes(root);
    let o = run_s(&env, "A", &["restore", "m0"]);
    assert_eq!(o.status.code(), Some(7), "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("big.bin") && err.contains("nothing was changed"),
        "{err}"
    );
    assert_eq!(
        read_tree_mtimes(root),
        before,
        "a refused restore touches nothing"
    );
    // The dry run says the same, with the same code.
    let o = run_s(&env, "A", &["restore", "m0", "--dry-run"]);
    assert_eq!(o.status.code(), Some(7), "{}", text(&o));
    assert_eq!(read_tree_mtimes(root), before);
}

/// A directory the (unprivileged) user may not write: refused with the path and the OS error,
/// nothing changed, nothing for the next command to finish.
#[test]
fn a_directory_the_user_may_not_write_refuses_the_restore_whole() {
    let env = Env::new();
    let root = env.root();
    write(root, "a.txt", b"a0\n");
    write(root, "locked/f.txt", b"f0\n");
    // Everything belongs to `nobody`, who runs every command below.
    env.hand_to_nobody();
    let run = |args: &[&str]| -> Output {
        let mut all = vec!["-s", "A"];
        all.extend_from_slice(args);
        env.run_as_nobody(&all)
    };
    assert_eq!(run(&["init"]).status.code(), Some(0));
    assert_eq!(
        run(&["checkpoint", "--message", "m0"]).status.code(),
        Some(0)
    );
    let o = run(&[
        "exec",
        "--",
        "sh",
        "-c",
        "echo a1 > a.txt; echo f1 > locked/f.txt",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    std::fs::set_permissions(root.join("locked"), PermissionsExt::from_mode(0o555)).unwrap();
    tick();
    let before = read_tree_mtimes(root);
    let o = run(&["restore", "m0"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("locked/f.txt") && err.contains("Permission denied"),
        "{err}"
    );
    assert_eq!(read_tree_mtimes(root), before, "nothing changed");
    let o = run(&["--json", "status"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(
        v["unfinished_restores"].as_array().map_or(0, Vec::len),
        0,
        "{v}"
    );
    assert_eq!(
        read_tree_mtimes(root),
        before,
        "the next command did not complete it"
    );
    // With the permission back, the same restore goes through.
    std::fs::set_permissions(root.join("locked"), PermissionsExt::from_mode(0o755)).unwrap();
    assert_eq!(run(&["restore", "m0"]).status.code(), Some(0));
    assert_eq!(read_str(root, "a.txt"), "a0\n");
    assert_eq!(read_str(root, "locked/f.txt"), "f0\n");
}

/// A read-only mount inside the workspace: refused (EROFS) before the first write.
#[test]
fn a_read_only_mount_refuses_the_restore_whole() {
    let env = Env::new();
    let root = env.root();
    write(root, "a.txt", b"a0\n");
    write(root, "ro/f.txt", b"f0\n");
    init(&env);
    checkpoint(&env, "A", "m0");
    sh(&env, "A", "echo a1 > a.txt; echo f1 > ro/f.txt");
    let o = in_mount_ns(
        &env,
        &format!(
            r#"mount --bind "$WS/ro" "$WS/ro"; mount -o remount,ro,bind "$WS/ro"
            {LISTING} > "$WS.before"
            set +e; "$REWIND" -C "$WS" -s A restore m0 2> "$WS.err"; echo "code=$?"
            "$REWIND" -C "$WS" -s A undo 2> "$WS.undo-err"; echo "undo-code=$?"; set -e
            {LISTING} > "$WS.after"
            cmp "$WS.before" "$WS.after" && echo same || diff "$WS.before" "$WS.after"
            "#
        ),
    );
    let out = String::from_utf8_lossy(&o.stdout);
    let err = std::fs::read_to_string(root.with_extension("err")).unwrap();
    assert!(out.contains("code=1"), "{}\n{err}", text(&o));
    // `undo` of the turn is refused the same way.
    let undo_err = std::fs::read_to_string(root.with_extension("undo-err")).unwrap();
    assert!(out.contains("undo-code=1"), "{}\n{undo_err}", text(&o));
    assert!(undo_err.contains("Read-only file system"), "{undo_err}");
    assert!(out.contains("same"), "the tree changed: {}", text(&o));
    assert!(
        err.contains("ro/f.txt") && err.contains("Read-only file system"),
        "{err}"
    );
    assert_eq!(read_str(root, "a.txt"), "a1\n", "nothing was restored");
    assert_eq!(unfinished(&env), 0);
}

/// A full file system: refused before the first write, naming the shortfall.
#[test]
fn a_full_file_system_refuses_the_restore_whole() {
    let env = Env::new();
    let o = in_mount_ns(
        &env,
        &format!(
            r#"mount -t tmpfs -o size=4M none "$WS"
            head -c 1500000 /dev/urandom > "$WS/a.bin"; echo keep > "$WS/k.txt"
            "$REWIND" -C "$WS" init > /dev/null
            "$REWIND" -C "$WS" -s A checkpoint --message m0 > /dev/null
            "$REWIND" -C "$WS" -s A exec -- rm a.bin
            head -c 3000000 /dev/zero > "$WS/filler"
            {LISTING} > "$WS.before"
            set +e; "$REWIND" -C "$WS" -s A restore m0; echo "code=$?"; set -e
            {LISTING} > "$WS.after"
            cmp "$WS.before" "$WS.after" && echo same
            find "$WS" -name '.rewind-tmp*' | grep -q . || echo no-temp-files
            "#
        ),
    );
    let out = String::from_utf8_lossy(&o.stdout);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(out.contains("code=1"), "{}", text(&o));
    assert!(
        out.contains("same") && out.contains("no-temp-files"),
        "{}",
        text(&o)
    );
    assert!(err.contains("not enough free space"), "{err}");
}

/// The session made `m/`, `y.txt` and `z.txt`; the user then mounts something on `m`. The
/// restore removes `z.txt` and `y.txt`, then fails on `m` (EBUSY): it puts both back, exits 1
/// naming `m`, records nothing, and the next command has nothing to finish.
#[test]
fn a_failure_part_way_rolls_back_what_was_applied() {
    let env = Env::new();
    let root = env.root();
    write(root, "a.txt", b"a0\n");
    init(&env);
    checkpoint(&env, "A", "m0");
    sh(&env, "A", "mkdir m; echo y > y.txt; echo z > z.txt");
    let log_before = json(&env, "A", &["log"], 0);
    let o = in_mount_ns(
        &env,
        &format!(
            r#"mount -t tmpfs -o mode=755 none "$WS/m"
            {CONTENT} | grep -v '^m ' > "$WS.before"
            set +e; "$REWIND" -C "$WS" -s A restore m0; echo "code=$?"; set -e
            {CONTENT} | grep -v '^m ' > "$WS.after"
            cmp "$WS.before" "$WS.after" && echo same
            "#
        ),
    );
    let out = String::from_utf8_lossy(&o.stdout);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(out.contains("code=1"), "{}", text(&o));
    assert!(err.contains("rolled back") && err.contains("busy"), "{err}");
    assert!(out.contains("same"), "{}", text(&o));
    assert_eq!(read_str(root, "y.txt"), "y\n");
    assert_eq!(read_str(root, "z.txt"), "z\n");
    assert_eq!(unfinished(&env), 0);
    assert_eq!(
        json(&env, "A", &["log"], 0),
        log_before,
        "no restore epoch recorded"
    );
    fsck_clean(&env);
    // Without the mount in the way, the same restore goes through.
    expect(&env, "A", &["restore", "m0"], 0);
    assert!(!root.join("m").exists() && !root.join("y.txt").exists());
}

/// A guarded write goes through the same engine: a patch that adds `n/c.txt`, then changes
/// `a.txt`, then fails on `ro/b.txt` (a read-only mount: EROFS) puts back what it did, each
/// path as its epoch's preimage has it (`a.txt`'s old content, no `n/`), and exits 1 naming
/// the path; nothing is left open.
#[test]
fn a_guarded_patch_failing_part_way_puts_back_what_it_wrote() {
    let env = Env::new();
    let root = env.root();
    write(root, "a.txt", b"a\n");
    std::fs::create_dir(root.join("ro")).unwrap();
    init(&env);
    let patch = "diff --git a/n/c.txt b/n/c.txt\nnew file mode 100644\n--- /dev/null\n+++ b/n/c.txt\n@@ -0,0 +1 @@\n+c\n\
diff --git a/a.txt b/a.txt\n--- a/a.txt\n+++ b/a.txt\n@@ -1 +1 @@\n-a\n+A\n\
diff --git a/ro/b.txt b/ro/b.txt\n--- a/ro/b.txt\n+++ b/ro/b.txt\n@@ -1 +1 @@\n-b\n+B\n";
    std::fs::write(env.home.path().join("p.diff"), patch).unwrap();
    let o = in_mount_ns(
        &env,
        &format!(
            r#"mount -t tmpfs -o mode=755 none "$WS/ro"
            echo b > "$WS/ro/b.txt"
            mount -o remount,ro "$WS/ro"
            "$REWIND" -C "$WS" -s A read a.txt ro/b.txt > /dev/null
            {CONTENT} > "$WS.before"
            set +e; "$REWIND" -C "$WS" -s A apply-patch < "$REWIND_HOME/p.diff"; echo "code=$?"; set -e
            {CONTENT} > "$WS.after"
            cmp "$WS.before" "$WS.after" && echo same
            cat "$WS/a.txt" "$WS/ro/b.txt"
            "#
        ),
    );
    let out = String::from_utf8_lossy(&o.stdout);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(out.contains("code=1"), "{}", text(&o));
    assert!(
        err.contains("ro/b.txt") && err.contains("Read-only"),
        "{err}"
    );
    assert!(out.contains("same"), "put back: {}", text(&o));
    assert!(out.contains("a\nb\n"), "{}", text(&o));
    assert_eq!(read_str(root, "a.txt"), "a\n");
    assert!(!root.join("n").exists());
    let status = status_json(&env);
    assert_eq!(
        status["open_epochs"].as_array().map_or(0, Vec::len),
        0,
        "{status}"
    );
    fsck_clean(&env);
}

/// As above, killed (SIGKILL at a failpoint) after the rollback put back its first step: the
/// next command finishes the rollback (never the restore), and the tree is as before.
#[test]
fn sigkill_during_the_rollback_is_finished_by_the_next_command() {
    let env = Env::new();
    let root = env.root();
    write(root, "a.txt", b"a0\n");
    init(&env);
    checkpoint(&env, "A", "m0");
    sh(&env, "A", "mkdir m; echo y > y.txt; echo z > z.txt");
    let o = in_mount_ns(
        &env,
        r#"mount -t tmpfs -o mode=755 none "$WS/m"
        set +e
        REWIND_FAILPOINT=restore-rollback-after-step "$REWIND" -C "$WS" -s A restore m0
        echo "code=$?"
        ls "$WS" | tr '\n' ' '; echo
        "$REWIND" -C "$WS" -s A --json status | tr -d ' \n' | grep -o '"unfinished_restores":\[[^]]*\]'
        "$REWIND" -C "$WS" -s B checkpoint --message next > /dev/null
        "#,
    );
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("code=137"), "killed: {}", text(&o));
    // Killed half-way through the rollback: one of the two removed files is back.
    let listing = out.lines().find(|l| l.contains("a.txt")).unwrap();
    assert_eq!(
        listing.contains("y.txt") as u8 + listing.contains("z.txt") as u8,
        1,
        "{listing}"
    );
    // Until then, status lists the unfinished restore.
    assert!(
        out.contains(r#""unfinished_restores":[""#),
        "listed: {}",
        text(&o)
    );
    // The next mutating command (a checkpoint of another session, run inside) finished the
    // rollback.
    assert_eq!(read_str(root, "y.txt"), "y\n");
    assert_eq!(read_str(root, "z.txt"), "z\n");
    assert_eq!(read_str(root, "a.txt"), "a0\n");
    assert_eq!(unfinished(&env), 0);
    fsck_clean(&env);
}

/// The session changed `d/f`; the user then replaced `d` by a symlink to a directory outside.
/// Unforced, that is a conflict (exit 3); forced, writing `d/f` would go through the symlink:
/// the dry run refuses exactly as the real run does (exit 1, naming `d`), nothing outside is
/// touched, and nothing is left for other sessions to trip over.
#[test]
fn a_directory_replaced_by_a_symlink_is_refused_by_dry_and_real_run_alike() {
    let env = Env::new();
    let root = env.root();
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("f"), b"outside\n").unwrap();
    write(root, "d/f", b"x0\n");
    init(&env);
    checkpoint(&env, "A", "m0");
    sh(&env, "A", "echo x1 > d/f");
    std::fs::remove_dir_all(root.join("d")).unwrap();
    std::os::unix::fs::symlink(outside.path(), root.join("d")).unwrap();
    for args in [&["restore", "m0", "--dry-run"][..], &["restore", "m0"]] {
        let o = run_s(&env, "A", args);
        assert_eq!(o.status.code(), Some(3), "{args:?}: {}", text(&o));
    }
    for args in [
        &["restore", "m0", "--force", "--dry-run"][..],
        &["restore", "m0", "--force"],
    ] {
        let o = run_s(&env, "A", args);
        assert_eq!(o.status.code(), Some(1), "{args:?}: {}", text(&o));
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            err.contains("d is a symlink or a file now"),
            "{args:?}: {err}"
        );
    }
    assert!(std::fs::symlink_metadata(root.join("d"))
        .unwrap()
        .is_symlink());
    assert_eq!(
        std::fs::read_to_string(outside.path().join("f")).unwrap(),
        "outside\n"
    );
    assert_eq!(unfinished(&env), 0);
    // Another session goes on working.
    sh(&env, "B", "echo b > b.txt");
    checkpoint(&env, "B", "b1");
}

/// A restore killed after its journal was written, then a planned path changed by the user:
/// `recover` rolls the rest forward but does not call it finished: it names the path it left.
#[test]
fn recover_says_finished_only_when_every_step_is_done() {
    let env = Env::new();
    let root = env.root();
    write(root, "a.txt", b"a0\n");
    write(root, "b.txt", b"b0\n");
    init(&env);
    checkpoint(&env, "A", "m0");
    sh(&env, "A", "echo a1 > a.txt; echo b1 > b.txt");
    let o = env
        .cmd(&["-s", "A", "restore", "m0"])
        .env("REWIND_FAILPOINT", "restore-after-journal")
        .output()
        .unwrap();
    assert_eq!(
        o.status.code(),
        None,
        "killed at the failpoint: {}",
        text(&o)
    );
    write(root, "b.txt", b"the user's\n");
    let v = json(&env, "A", &["recover"], 0);
    assert_eq!(v["restores"].as_array().unwrap().len(), 1, "{v}");
    let left: Vec<&str> = v["left"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["path"].as_str().unwrap())
        .collect();
    assert_eq!(left, ["b.txt"], "{v}");
    assert_eq!(read_str(root, "a.txt"), "a0\n");
    assert_eq!(read_str(root, "b.txt"), "the user's\n");
}
