//! Changes made only through shell commands, reverted exactly; rewind then undo (redo) is
//! byte-identical; dry runs write nothing and list exactly what the real run does.

use crate::common;

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;

use crate::common::rewind::*;
use common::{noise, text, Env};

const LATIN1: &[u8] = b"caf\xe9-\xff.bin";

/// A tree with every kind of entry, plus 60 bystander files nobody touches.
fn build(env: &Env) {
    let root = env.root();
    write(root, "edit.txt", b"alpha\nbeta\ngamma\n");
    write(root, "old-name.txt", b"to be renamed\n");
    write(root, "doomed/a.txt", b"a\n");
    write(root, "doomed/sub/b.txt", b"b\n");
    std::fs::create_dir_all(root.join("doomed/empty")).unwrap();
    write(root, "secret", b"token\n");
    write(root, "tool.sh", b"#!/bin/sh\necho hi\n");
    chmod(root, "tool.sh", 0o755);
    write(root, "was-exec.sh", b"#!/bin/sh\n");
    chmod(root, "was-exec.sh", 0o755);
    write(root, "f2d", b"file that becomes a dir\n");
    write(root, "d2f/inner.txt", b"dir that becomes a file\n");
    write(root, "target-a", b"A\n");
    write(root, "target-b", b"B\n");
    std::os::unix::fs::symlink("target-a", root.join("link")).unwrap();
    std::os::unix::fs::symlink("nowhere/dangling", root.join("dangling")).unwrap();
    write(root, "blob.bin", &noise(7, 5000));
    std::fs::write(p(root, LATIN1), b"latin-1 name\n").unwrap();
    write(root, "modes/dir-0700/x", b"x\n");
    for i in 0..60 {
        write(
            root,
            &format!("bystanders/d{}/f{i}.txt", i % 6),
            format!("{i}\n").as_bytes(),
        );
    }
}

/// Every shell-made change, spread over several `exec` calls of session S.
fn mutate(env: &Env) {
    sh(
        env,
        "S",
        "sed -i 's/beta/BETA/' edit.txt && echo delta >> edit.txt",
    );
    sh(env, "S", "mv old-name.txt new-name.txt && rm -r doomed");
    sh(
        env,
        "S",
        "cat > heredoc.txt <<'EOF'\nline one\n  line $two\nEOF\nchmod 0600 secret && chmod 0644 was-exec.sh && chmod 0700 modes/dir-0700",
    );
    sh(
        env,
        "S",
        "cat > made.sh <<'EOF'\n#!/bin/sh\nexit 0\nEOF\nchmod 0755 made.sh && chmod 0600 tool.sh",
    );
    sh(
        env,
        "S",
        "rm f2d && mkdir -p f2d/deeper && echo in > f2d/deeper/x && rm -r d2f && echo now-a-file > d2f",
    );
    sh(
        env,
        "S",
        "ln -sfn target-b link && rm dangling && ln -s ../outside dangling && mkdir -p new/dir/tree && echo n > new/dir/tree/n && mkdir emptydir",
    );
    sh(
        env,
        "S",
        "printf '\\000\\377\\001binary' > blob.bin && printf 'more' >> blob.bin",
    );
    // Non-UTF-8 names: rename one, create another (passed as raw argv bytes).
    exec_argv(
        env,
        "S",
        &[
            OsStr::new("mv"),
            OsStr::from_bytes(LATIN1),
            OsStr::from_bytes(b"renamed-\xe9\xe8"),
        ],
    );
    exec_argv(
        env,
        "S",
        &[
            OsStr::new("cp"),
            OsStr::new("edit.txt"),
            OsStr::from_bytes(b"new-\xfe\xfd"),
        ],
    );
}

fn bystander_mtimes(m: &Mtimes) -> Vec<(Vec<u8>, i64)> {
    m.iter()
        .filter(|(k, _)| k.starts_with(b"bystanders/") && k.ends_with(b".txt"))
        .map(|(k, v)| (k.clone(), *v))
        .collect()
}

/// Done-when 3 and 4: shell-only changes are all reverted exactly; unchanged files keep their
/// mtime; undo of the rewind and restoring to the checkpoint after the changes are both redo,
/// byte-identical.
#[test]
fn shell_changes_round_trip_exactly_and_undo_is_redo() {
    let env = Env::new();
    let root = env.root();
    build(&env);
    init(&env);
    let c0 = checkpoint(&env, "S", "before");
    let (before, before_m) = read_tree_mtimes(root);
    tick();
    mutate(&env);
    let c1 = checkpoint(&env, "S", "after");
    let (after, after_m) = read_tree_mtimes(root);
    // Sanity: the mutation did what the test means.
    assert!(matches!(after.get(&b"link"[..]), Some(Node::Symlink(t)) if t == b"target-b"));
    assert!(matches!(after.get(&b"f2d"[..]), Some(Node::Dir { .. })));
    assert!(matches!(
        after.get(&b"secret"[..]),
        Some(Node::File { mode: 0o600, .. })
    ));
    assert!(!after.contains_key(&b"doomed"[..]));
    assert_eq!(bystander_mtimes(&before_m), bystander_mtimes(&after_m));
    tick();

    let v = json(&env, "S", &["restore", &c0], 0);
    assert!(v["conflicts"].as_array().unwrap().is_empty(), "{v}");
    assert!(v["kept"].as_array().unwrap().is_empty(), "{v}");
    let (now, now_m) = read_tree_mtimes(root);
    assert_tree_eq(&now, &before, "rewound to before the shell commands");
    assert_eq!(
        bystander_mtimes(&now_m),
        bystander_mtimes(&before_m),
        "files nobody changed keep their mtime"
    );
    // Nothing the restore did not have to write was written: every path it names changed.
    let touched: std::collections::BTreeSet<String> = steps(&v).into_iter().map(|s| s.1).collect();
    for (k, m) in &now_m {
        let name = String::from_utf8_lossy(k).into_owned();
        if k.starts_with(b"bystanders") || touched.contains(&name) {
            continue;
        }
        if matches!(now.get(k), Some(Node::File { .. }) | Some(Node::Symlink(_))) {
            assert_eq!(
                Some(m),
                before_m.get(k),
                "{name} was not in the plan but its mtime moved"
            );
        }
    }
    tick();

    // Undo of the restore is redo: byte-identical to the state before the rewind.
    expect(&env, "S", &["undo"], 0);
    let (redo, redo_m) = read_tree_mtimes(root);
    assert_tree_eq(&redo, &after, "undo of the rewind");
    assert_eq!(bystander_mtimes(&redo_m), bystander_mtimes(&after_m));

    // And undo again (undo of the redo) rewinds again.
    expect(&env, "S", &["undo"], 0);
    assert_tree_eq(&read_tree(root), &before, "undo of the redo");

    // Restoring to the checkpoint taken before the rewind is redo too.
    expect(&env, "S", &["restore", &c1], 0);
    assert_tree_eq(&read_tree(root), &after, "restore to the later checkpoint");
    // Back and forth once more by message id.
    expect(&env, "S", &["restore", "before"], 0);
    assert_tree_eq(&read_tree(root), &before, "restore by message id");
    expect(&env, "S", &["restore", "after"], 0);
    assert_tree_eq(&read_tree(root), &after, "redo by message id");
    fsck_clean(&env);
}

/// The same round trip with `--all` (whole tree to the checkpoint's tree), and an epoch as
/// target ("just before it").
#[test]
fn restore_all_and_epoch_targets_round_trip() {
    let env = Env::new();
    let root = env.root();
    build(&env);
    init(&env);
    let c0 = checkpoint(&env, "S", "before");
    let before = read_tree(root);
    mutate(&env);
    // The user adds a file too: --all removes it (it is not in c0's tree), keeping it.
    write(root, "user.txt", b"user\n");
    let after = read_tree(root);
    let v = json(&env, "S", &["restore", &c0, "--all"], 0);
    assert_tree_eq(&read_tree(root), &before, &format!("--all: {v}"));
    expect(&env, "S", &["undo"], 0);
    assert_tree_eq(&read_tree(root), &after, "undo of --all");

    // Epoch target: just before S's first exec of a later turn.
    let c1 = checkpoint(&env, "S", "mid");
    let epoch = ok(&env, "S", &["epoch", "begin", "--path", "edit.txt"]);
    write(root, "edit.txt", b"rewritten\n");
    expect(&env, "S", &["epoch", "end"], 0);
    sh(&env, "S", "echo later > later.txt");
    expect(&env, "S", &["restore", &epoch], 0);
    assert_tree_eq(&read_tree(root), &after, "just before the epoch");
    let _ = c1;
    fsck_clean(&env);
}

/// `--all` to a checkpoint must restore the tree as it was when the checkpoint was taken,
/// including user edits made (and not yet recorded) before it.
#[test]
fn restore_all_uses_the_tree_at_checkpoint_time() {
    let env = Env::new();
    let root = env.root();
    write(root, "f", b"orig\n");
    init(&env);
    write(root, "f", b"user edit before the checkpoint\n");
    let c = checkpoint(&env, "S", "m1");
    write(root, "f", b"later\n");
    expect(&env, "S", &["restore", &c, "--all"], 0);
    assert_eq!(read_str(root, "f"), "user edit before the checkpoint\n");
}

/// Done-when 5: a dry run writes nothing (bytes and mtimes of everything, directories
/// included, unchanged) and lists exactly the steps the real run then takes: for restore,
/// restore --all, restore of a path subset, undo, and a refused (conflict) restore.
#[test]
fn dry_run_writes_nothing_and_matches_the_real_run() {
    let env = Env::new();
    let root = env.root();
    build(&env);
    init(&env);
    let c0 = checkpoint(&env, "S", "before");
    mutate(&env);
    checkpoint(&env, "S", "after");
    tick();

    let cases: Vec<Vec<&str>> = vec![
        vec!["restore", &c0, "--", "doomed", "f2d", "link"],
        vec!["restore", &c0],
        vec!["undo"],
        vec!["undo"],
        vec!["restore", "after"],
        vec!["restore", &c0, "--all"],
        vec!["undo"],
    ];
    for args in cases {
        let before = read_tree_mtimes(root);
        let mut dry_args = args.clone();
        dry_args.insert(1, "--dry-run");
        let dry = json(&env, "S", &dry_args, 0);
        assert_eq!(dry["dry_run"], true);
        assert_eq!(dry["applied"], false);
        assert!(dry["epoch"].is_null(), "{dry}");
        assert_eq!(
            read_tree_mtimes(root),
            before,
            "{args:?}: the dry run wrote"
        );
        let real = json(&env, "S", &args, 0);
        assert_eq!(real["applied"], true);
        assert_eq!(steps(&dry), steps(&real), "{args:?}: dry run vs real run");
        assert!(!steps(&real).is_empty(), "{args:?} had something to do");
        tick();
    }

    // A refused restore: same conflicts, exit 3 both times, nothing written either time.
    write(root, "edit.txt", b"the user's\n");
    let before = read_tree_mtimes(root);
    let dry = json(&env, "S", &["restore", &c0, "--dry-run"], 3);
    let real = json(&env, "S", &["restore", &c0], 3);
    assert_eq!(conflict_paths(&dry), vec!["edit.txt"]);
    assert_eq!(conflict_paths(&dry), conflict_paths(&real));
    assert_eq!(real["applied"], false);
    assert_eq!(read_tree_mtimes(root), before);
    // Forced: the dry run lists the conflicting path among its steps like the real run.
    let dry = json(&env, "S", &["restore", &c0, "--dry-run", "--force"], 0);
    let real = json(&env, "S", &["restore", &c0, "--force"], 0);
    assert_eq!(steps(&dry), steps(&real));
    assert_eq!(read_str(root, "edit.txt"), "alpha\nbeta\ngamma\n");
}

/// A dry run while the session has an open `epoch begin` must show what the real run does:
/// the real run settles that epoch first and then reverts its changes too.
#[test]
fn dry_run_matches_the_real_run_with_an_open_epoch() {
    let env = Env::new();
    let root = env.root();
    write(root, "a", b"a0\n");
    write(root, "b", b"b0\n");
    init(&env);
    let c0 = checkpoint(&env, "S", "m0");
    sh(&env, "S", "echo a1 > a");
    ok(&env, "S", &["epoch", "begin", "--path", "b"]);
    write(root, "b", b"b1\n");
    let before = read_tree_mtimes(root);
    let dry = json(&env, "S", &["restore", &c0, "--dry-run"], 0);
    assert_eq!(read_tree_mtimes(root), before);
    let real = json(&env, "S", &["restore", &c0], 0);
    assert_eq!(
        read_str(root, "b"),
        "b0\n",
        "the real run reverted the open epoch"
    );
    assert_eq!(steps(&dry), steps(&real), "dry: {dry}\nreal: {real}");
}

/// The same for undo: the dry run must name the epoch the real run will undo.
#[test]
fn undo_dry_run_matches_the_real_run_with_an_open_epoch() {
    let env = Env::new();
    let root = env.root();
    write(root, "a", b"a0\n");
    write(root, "b", b"b0\n");
    init(&env);
    sh(&env, "S", "echo a1 > a");
    ok(&env, "S", &["epoch", "begin", "--path", "b"]);
    write(root, "b", b"b1\n");
    let dry = json(&env, "S", &["undo", "--dry-run"], 0);
    let real = json(&env, "S", &["undo"], 0);
    assert_eq!(steps(&dry), steps(&real), "dry: {dry}\nreal: {real}");
}

/// Exact epochs of a tool that writes modes, symlinks and deletes round-trip as well.
#[test]
fn exact_epochs_round_trip_kinds_and_modes() {
    let env = Env::new();
    let root = env.root();
    write(root, "x", b"x\n");
    write(root, "gone", b"g\n");
    std::os::unix::fs::symlink("x", root.join("l")).unwrap();
    init(&env);
    let c0 = checkpoint(&env, "S", "m0");
    let before = read_tree(root);
    exact(&env, "S", &["x", "gone", "l", "n"], || {
        chmod(root, "x", 0o755);
        std::fs::remove_file(root.join("gone")).unwrap();
        std::fs::remove_file(root.join("l")).unwrap();
        std::os::unix::fs::symlink("gone", root.join("l")).unwrap();
        write(root, "n", b"new\n");
        chmod(root, "n", 0o600);
    });
    let after = read_tree(root);
    let o = expect(&env, "S", &["--json", "restore", &c0], 0);
    assert_tree_eq(&read_tree(root), &before, &text(&o));
    expect(&env, "S", &["undo"], 0);
    assert_tree_eq(&read_tree(root), &after, "redo");
}

/// A directory created after the last capture is found by an exec's opening capture, which
/// the watcher (armed from the previous capture's directory list) did not watch: what the
/// command then changes inside it is still the command's, and rewinding the turn reverts it.
#[test]
fn an_exec_sees_changes_in_a_directory_made_since_the_last_capture() {
    let env = Env::new();
    let root = env.root();
    write(root, "a/f", b"1\n");
    init(&env);
    let c = checkpoint(&env, "S", "turn");
    // The user's, after the checkpoint's capture: found (as external) by the exec's opening one.
    write(root, "newdir/g", b"user\n");
    write(root, "newdir/deeper/h", b"user\n");
    let before = read_tree(root);
    sh(
        &env,
        "S",
        "echo agent >> newdir/g && echo new > newdir/f && rm newdir/deeper/h",
    );
    let log = expect(&env, "S", &["log"], 0);
    let log = String::from_utf8_lossy(&log.stdout);
    let exec_line = log
        .lines()
        .find(|l| l.contains("opaque"))
        .unwrap_or_default();
    assert!(
        exec_line.split_whitespace().any(|w| w == "3"),
        "the exec recorded its 3 changes:\n{log}"
    );
    expect(&env, "S", &["restore", &c], 0);
    assert_tree_eq(
        &read_tree(root),
        &before,
        "the exec is undone, the user's files kept",
    );
    fsck_clean(&env);
}
