//! Per-writer attribution through the real binary: two sessions in interleaved turns, the
//! user's edits during and after a turn, head-only / files-only restores, checkpoint payloads,
//! ids of other workspaces, unknown ids, and the bounded wait for a running tool call.

use crate::common;

use std::time::{Duration, Instant};

use crate::common::rewind::*;
use common::{last_line, text, Env, Gates};

/// Done-when 1: two sessions edit different files and the same file in interleaved turns.
/// Rewinding one never changes the other's work; the interleaved same-file case is a conflict
/// (exit 3, nothing changed), and `--force` keeps what it overwrote so `undo` brings it back.
#[test]
fn two_sessions_interleaved_never_revert_each_other() {
    let env = Env::new();
    let root = env.root();
    write(root, "a.txt", b"a0\n");
    write(root, "b.txt", b"b0\n");
    write(root, "shared.txt", b"s0\n");
    write(root, "untouched.txt", b"nobody\n");
    init(&env);
    let a0 = checkpoint(&env, "A", "a-m0");
    let b0 = checkpoint(&env, "B", "b-m0");

    // Interleaved turns: A (shell), B (shell), A (exact edit of shared), B (shell on shared),
    // A (exact edit of a.txt), B (shell on b.txt).
    sh(&env, "A", "echo a1 > a.txt");
    sh(&env, "B", "echo b1 > b.txt");
    exact(&env, "A", &["shared.txt"], || {
        write(root, "shared.txt", b"s-by-A\n")
    });
    sh(&env, "B", "echo s-by-B >> shared.txt");
    exact(&env, "A", &["a.txt"], || write(root, "a.txt", b"a2\n"));
    sh(
        &env,
        "B",
        "sed -i s/b1/b2/ b.txt && echo new-by-B > b-new.txt",
    );
    let a1 = checkpoint(&env, "A", "a-m1");
    let b1 = checkpoint(&env, "B", "b-m1");
    let after_turns = read_tree(root);
    assert_eq!(read_str(root, "shared.txt"), "s-by-A\ns-by-B\n");

    // A's rewind: a.txt is A's alone, but shared.txt was changed by B after A: conflict.
    let dry = json(&env, "A", &["restore", &a0, "--dry-run"], 3);
    assert_eq!(conflict_paths(&dry), vec!["shared.txt"], "{dry}");
    let (t, m) = read_tree_mtimes(root);
    let o = run_s(&env, "A", &["restore", &a0]);
    assert_eq!(o.status.code(), Some(3), "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("shared.txt"), "the conflict is named: {err}");
    assert!(
        err.contains("session B"),
        "the conflict says who changed it: {err}"
    );
    assert_eq!(
        read_tree_mtimes(root),
        (t, m),
        "a refused restore changes nothing"
    );

    // B's rewind: B wrote shared.txt last, so it goes back to A's version, not to s0.
    let v = json(&env, "B", &["restore", &b0], 0);
    assert!(v["conflicts"].as_array().unwrap().is_empty(), "{v}");
    let mut expected = after_turns.clone();
    expected.insert(
        b"b.txt".to_vec(),
        Node::File {
            mode: 0o644,
            data: b"b0\n".to_vec(),
        },
    );
    expected.insert(
        b"shared.txt".to_vec(),
        Node::File {
            mode: 0o644,
            data: b"s-by-A\n".to_vec(),
        },
    );
    expected.remove(b"b-new.txt".as_slice());
    assert_tree_eq(&read_tree(root), &expected, "B rewound: A's work untouched");

    // Now A's rewind is clean: shared.txt is what A left there again.
    let v = json(&env, "A", &["restore", &a0], 0);
    assert!(v["conflicts"].as_array().unwrap().is_empty(), "{v}");
    assert_eq!(read_str(root, "a.txt"), "a0\n");
    assert_eq!(read_str(root, "shared.txt"), "s0\n");
    assert_eq!(read_str(root, "b.txt"), "b0\n", "B's state is kept");
    assert_eq!(read_str(root, "untouched.txt"), "nobody\n");

    // Redo both (restore to the checkpoints taken after the turns): back where we were.
    expect(&env, "A", &["restore", &a1], 0);
    expect(&env, "B", &["restore", &b1], 0);
    assert_tree_eq(&read_tree(root), &after_turns, "both redone");

    // Forced rewind of A over B's change of shared.txt: B's bytes are kept, undo brings them.
    let v = json(&env, "A", &["restore", &a0, "--force"], 0);
    assert_eq!(conflict_paths(&v), vec!["shared.txt"]);
    assert_eq!(read_str(root, "shared.txt"), "s0\n");
    assert_eq!(read_str(root, "b.txt"), "b2\n", "B's other work untouched");
    assert_eq!(read_str(root, "b-new.txt"), "new-by-B\n");
    expect(&env, "A", &["undo"], 0);
    assert_tree_eq(&read_tree(root), &after_turns, "undo of a forced restore");
    fsck_clean(&env);
}

/// Two sessions on different files only, many turns each, rewound in both orders.
#[test]
fn two_sessions_different_files_rewind_in_any_order() {
    let env = Env::new();
    let root = env.root();
    write(root, "keep", b"k\n");
    init(&env);
    let mut cps = Vec::new();
    let mut trees = Vec::new();
    for turn in 0..4 {
        cps.push((
            checkpoint(&env, "A", &format!("a{turn}")),
            checkpoint(&env, "B", &format!("b{turn}")),
        ));
        trees.push(read_tree(root));
        sh(
            &env,
            "A",
            &format!("mkdir -p a && echo {turn} > a/f{turn} && echo t{turn} > a/log"),
        );
        exact(&env, "B", &["b.txt"], || {
            write(root, "b.txt", format!("b turn {turn}\n").as_bytes())
        });
    }
    let end = read_tree(root);
    // Rewind B to its turn-1 checkpoint: only b.txt moves.
    expect(&env, "B", &["restore", &cps[1].1], 0);
    let now = read_tree(root);
    let only_b = |t: &Tree| -> Tree {
        t.iter()
            .filter(|(k, _)| k.as_slice() != b"b.txt")
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    };
    assert_tree_eq(&only_b(&now), &only_b(&end), "A's files after B's rewind");
    assert_eq!(now.get(&b"b.txt"[..]), trees[1].get(&b"b.txt"[..]));
    // Rewind A to turn 0: a/ disappears entirely, b.txt stays at B's turn-1 state.
    expect(&env, "A", &["restore", &cps[0].0], 0);
    let now = read_tree(root);
    assert!(
        !now.contains_key(&b"a"[..]),
        "{}",
        tree_diff(&now, &trees[0])
    );
    assert_eq!(now.get(&b"b.txt"[..]), trees[1].get(&b"b.txt"[..]));
    assert_eq!(now.get(&b"keep"[..]), end.get(&b"keep"[..]));
    fsck_clean(&env);
}

/// Done-when 2: a user edit made between two tool calls of a turn survives the rewind of that
/// turn; a user edit after the turn to a file the turn wrote is a conflict.
#[test]
fn user_edits_during_a_turn_survive_and_after_it_conflict() {
    let env = Env::new();
    let root = env.root();
    write(root, "agent1.txt", b"one\n");
    write(root, "notes.txt", b"my notes\n");
    init(&env);
    let c0 = checkpoint(&env, "S", "m0");
    tick();
    // The turn: tool call 1 (shell), the user types in their editor, tool call 2 (exact),
    // the user saves another file, tool call 3 (shell).
    sh(&env, "S", "echo changed >> agent1.txt");
    write(
        root,
        "notes.txt",
        b"my notes, edited while the agent worked\n",
    );
    write(root, "user-new.txt", b"user's new file\n");
    exact(&env, "S", &["agent2.txt"], || {
        write(root, "agent2.txt", b"two\n")
    });
    write(root, "notes2.txt", b"second user file\n");
    sh(&env, "S", "rm agent1.txt && echo three > agent3.txt");
    let c1 = checkpoint(&env, "S", "m1");
    let after_turn = read_tree(root);

    let v = json(&env, "S", &["restore", &c0], 0);
    assert!(v["conflicts"].as_array().unwrap().is_empty(), "{v}");
    let now = read_tree(root);
    assert_eq!(read_str(root, "agent1.txt"), "one\n");
    assert!(
        !root.join("agent2.txt").exists(),
        "{}",
        tree_diff(&now, &after_turn)
    );
    assert!(!root.join("agent3.txt").exists());
    assert_eq!(
        read_str(root, "notes.txt"),
        "my notes, edited while the agent worked\n",
        "the user's edit during the turn survives the rewind"
    );
    assert_eq!(read_str(root, "user-new.txt"), "user's new file\n");
    assert_eq!(read_str(root, "notes2.txt"), "second user file\n");

    // Redo, then the user edits a file the turn wrote: rewinding the turn is a conflict.
    expect(&env, "S", &["restore", &c1], 0);
    assert_tree_eq(&read_tree(root), &after_turn, "redo");
    tick();
    write(root, "agent2.txt", b"user fixed the agent's file\n");
    let before = read_tree_mtimes(root);
    let v = json(&env, "S", &["restore", &c0], 3);
    assert_eq!(conflict_paths(&v), vec!["agent2.txt"], "{v}");
    assert_eq!(v["applied"], false);
    assert_eq!(v["refused"], true);
    assert_eq!(read_tree_mtimes(root), before, "nothing changed");
    fsck_clean(&env);
}

/// A user edit after the turn to a file the turn deleted (re-creating it) is a conflict too,
/// and so is one to a file the turn created; an unrelated user file never is.
#[test]
fn user_recreates_a_deleted_file_is_a_conflict() {
    let env = Env::new();
    let root = env.root();
    write(root, "gone.txt", b"precious\n");
    init(&env);
    let c0 = checkpoint(&env, "S", "m0");
    sh(&env, "S", "rm gone.txt && echo made > made.txt");
    checkpoint(&env, "S", "m1");
    write(root, "gone.txt", b"user re-created it\n");
    write(root, "made.txt", b"user rewrote it\n");
    write(root, "mine.txt", b"unrelated\n");
    let before = read_tree_mtimes(root);
    let v = json(&env, "S", &["undo", "--dry-run"], 3);
    assert_eq!(conflict_paths(&v), vec!["gone.txt", "made.txt"], "{v}");
    let v = json(&env, "S", &["restore", &c0], 3);
    assert_eq!(conflict_paths(&v), vec!["gone.txt", "made.txt"], "{v}");
    assert_eq!(read_tree_mtimes(root), before);
    // Forced: the user's versions are kept in the restore epoch and come back with undo.
    expect(&env, "S", &["restore", &c0, "--force"], 0);
    assert_eq!(read_str(root, "gone.txt"), "precious\n");
    assert!(!root.join("made.txt").exists());
    assert_eq!(read_str(root, "mine.txt"), "unrelated\n");
    expect(&env, "S", &["undo"], 0);
    assert_eq!(read_tree(root), before.0);
}

/// Head-only moves the head and keeps the files; a later files restore to the same checkpoint
/// still reverts them; files-only leaves the head where it is.
#[test]
fn head_only_and_files_only() {
    let env = Env::new();
    let root = env.root();
    write(root, "f", b"0\n");
    init(&env);
    let c1 = checkpoint(&env, "S", "m1");
    sh(&env, "S", "echo 1 > f");
    checkpoint(&env, "S", "m2");
    sh(&env, "S", "echo 2 > f");
    checkpoint(&env, "S", "m3");
    assert_eq!(head(&env, "S").as_deref(), Some("m3"));

    let before = read_tree_mtimes(root);
    let v = json(&env, "S", &["restore", "m1", "--head-only", "--dry-run"], 0);
    assert_eq!(v["head"], "m1");
    assert_eq!(
        head(&env, "S").as_deref(),
        Some("m3"),
        "dry run moves nothing"
    );
    let v = json(&env, "S", &["restore", "m1", "--head-only"], 0);
    assert_eq!(v["head"], "m1", "{v}");
    assert!(steps(&v).is_empty(), "{v}");
    assert_eq!(read_tree_mtimes(root), before, "head-only keeps the files");
    assert_eq!(head(&env, "S").as_deref(), Some("m1"));

    // Files-only to m1 by checkpoint id: the files go back, the head stays at m1 (moved above).
    let v = json(&env, "S", &["restore", &c1, "--files-only"], 0);
    assert_eq!(read_str(root, "f"), "0\n", "{v}");
    assert_eq!(head(&env, "S").as_deref(), Some("m1"));

    // Redo the files with files-only to m3: the head still stays.
    expect(&env, "S", &["restore", "m3", "--files-only"], 0);
    assert_eq!(read_str(root, "f"), "2\n");
    assert_eq!(head(&env, "S").as_deref(), Some("m1"));
    // A default restore moves both.
    expect(&env, "S", &["restore", "m2"], 0);
    assert_eq!(read_str(root, "f"), "1\n");
    assert_eq!(head(&env, "S").as_deref(), Some("m2"));
    // --head-only and --files-only together are a usage error.
    expect(
        &env,
        "S",
        &["restore", "m1", "--head-only", "--files-only"],
        2,
    );
}

/// `restore --json` returns the payload given to `checkpoint --payload-file`, byte for byte.
#[test]
fn restore_json_returns_the_checkpoint_payload() {
    let env = Env::new();
    write(env.root(), "f", b"x\n");
    init(&env);
    let payload_dir = tempfile::tempdir().unwrap();
    let payload = "{\"conversation\":[\"hi\",\"héllo\"],\"n\":42}\n";
    let pf = payload_dir.path().join("state.json");
    std::fs::write(&pf, payload).unwrap();
    let c = ok(
        &env,
        "S",
        &[
            "checkpoint",
            "--message",
            "m1",
            "--payload-file",
            pf.to_str().unwrap(),
        ],
    );
    sh(&env, "S", "echo y > f");
    let v = json(&env, "S", &["restore", &c, "--dry-run"], 0);
    assert_eq!(v["payload"], payload, "dry run: {v}");
    let v = json(&env, "S", &["restore", "m1"], 0);
    assert_eq!(v["payload"], payload, "{v}");
    let v = json(&env, "S", &["restore", &c, "--head-only"], 0);
    assert_eq!(v["payload"], payload, "{v}");
    // A checkpoint without one returns null.
    let c2 = checkpoint(&env, "S", "m2");
    let v = json(&env, "S", &["restore", &c2], 0);
    assert!(v["payload"].is_null(), "{v}");
}

/// An epoch or checkpoint id from another workspace is refused (exit 1, naming that
/// workspace); an unknown id is exit 1; nothing changes.
#[test]
fn ids_of_other_workspaces_and_unknown_ids_are_refused() {
    let env = Env::new();
    write(env.root(), "f", b"1\n");
    init(&env);
    let other_root = tempfile::tempdir().unwrap();
    std::fs::write(other_root.path().join("g"), b"g\n").unwrap();
    let other = |args: &[&str]| {
        let mut c = std::process::Command::new(env!("CARGO_BIN_EXE_rewind"));
        c.env("REWIND_HOME", env.home.path())
            .env_remove("REWIND_SESSION")
            .env_remove("REWIND_FAILPOINT")
            .env("REWIND_QUIET", "1")
            .current_dir(other_root.path())
            .arg("-C")
            .arg(other_root.path())
            .args(args);
        c.output().unwrap()
    };
    assert_eq!(other(&["init"]).status.code(), Some(0));
    let o = other(&["-s", "S", "checkpoint", "--message", "other-m"]);
    let other_cp = last_line(&o.stdout);
    let o = other(&["-s", "S", "epoch", "begin", "--path", "g"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let other_epoch = last_line(&o.stdout);
    std::fs::write(other_root.path().join("g"), b"g2\n").unwrap();
    assert_eq!(other(&["-s", "S", "epoch", "end"]).status.code(), Some(0));

    sh(&env, "S", "echo 2 > f");
    let before = read_tree_mtimes(env.root());
    let other_name = std::fs::canonicalize(other_root.path()).unwrap();
    for id in [&other_epoch, &other_cp, &other_epoch[..8].to_string()] {
        for args in [
            vec!["restore", id.as_str()],
            vec!["restore", id.as_str(), "--dry-run"],
            vec!["undo", id.as_str()],
        ] {
            let o = run_s(&env, "S", &args);
            assert_eq!(o.status.code(), Some(1), "{args:?}: {}", text(&o));
            let err = String::from_utf8_lossy(&o.stderr);
            assert!(
                err.contains(other_name.to_str().unwrap()),
                "{args:?}: the message names the other workspace: {err}"
            );
        }
    }
    for args in [
        vec!["restore", "0123456789abcdef"],
        vec!["restore", "no-such-message"],
        vec!["undo", "fedcba9876543210"],
        vec!["epoch", "end", "fedcba9876543210"],
    ] {
        let o = run_s(&env, "S", &args);
        assert_eq!(o.status.code(), Some(1), "{args:?}: {}", text(&o));
        assert!(String::from_utf8_lossy(&o.stderr).starts_with("rewind: "));
    }
    assert_eq!(read_tree_mtimes(env.root()), before);
}

/// A restore waits (bounded) while a live `exec` of the same session runs, then exits 4 and
/// changes nothing; another session's restore is not held up by it.
#[test]
fn restore_waits_for_a_running_tool_call_of_its_session() {
    let env = Env::new();
    let root = env.root();
    write(root, "s.txt", b"s0\n");
    write(root, "t.txt", b"t0\n");
    init(&env);
    let cs = checkpoint(&env, "S", "s0");
    let ct = checkpoint(&env, "T", "t0");
    sh(&env, "S", "echo s1 > s.txt");
    sh(&env, "T", "echo t1 > t.txt");
    let flag = root.join("running");
    // S's command runs until the test releases it (a FIFO outside the workspace), so however
    // slow the machine, both restores below happen while it runs.
    let gates = Gates::new(&["end"]);
    let mut child = env
        .cmd(&[
            "-s",
            "S",
            "exec",
            "--",
            "sh",
            "-c",
            "touch running; read go < \"$1\"; rm running",
            "sh",
        ])
        .arg(gates.path("end"))
        .current_dir(root)
        .env("REWIND_QUIET", "1")
        .spawn()
        .unwrap();
    let t0 = Instant::now();
    while !flag.exists() {
        assert!(t0.elapsed() < Duration::from_secs(30), "exec never started");
        std::thread::sleep(Duration::from_millis(10));
    }
    let o = env
        .cmd(&["-s", "S", "restore", &cs])
        .env("REWIND_LOCK_TIMEOUT", "0.5")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(4), "{}", text(&o));
    assert_eq!(read_str(root, "s.txt"), "s1\n");
    // T is not S: its restore goes ahead at once.
    let o = env
        .cmd(&["-s", "T", "restore", &ct])
        .env("REWIND_LOCK_TIMEOUT", "2")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert_eq!(read_str(root, "t.txt"), "t0\n");
    assert!(flag.exists(), "S's command is still running");
    gates.open("end");
    assert!(child.wait().unwrap().success());
    // Once the command is done, S's restore works.
    expect(&env, "S", &["restore", &cs], 0);
    assert_eq!(read_str(root, "s.txt"), "s0\n");
    fsck_clean(&env);
}

/// `exec` exits with the command's code, and what a failing command changed is still recorded
/// (and rewound); a command that cannot start is exit 1 with a `rewind:` message.
#[test]
fn exec_of_a_failing_command_is_recorded_and_rewound() {
    let env = Env::new();
    let root = env.root();
    write(root, "f", b"0\n");
    init(&env);
    let c0 = checkpoint(&env, "S", "m0");
    let o = env
        .cmd(&[
            "-s",
            "S",
            "exec",
            "--",
            "sh",
            "-c",
            "echo half > f; echo new > g; exit 3",
        ])
        .current_dir(root)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(3), "{}", text(&o));
    let o = env
        .cmd(&["-s", "S", "exec", "--", "/no/such/program"])
        .current_dir(root)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stderr).starts_with("rewind: "),
        "{}",
        text(&o)
    );
    expect(&env, "S", &["restore", &c0], 0);
    assert_eq!(read_str(root, "f"), "0\n");
    assert!(!root.join("g").exists());
    expect(&env, "S", &["undo"], 0);
    assert_eq!(read_str(root, "f"), "half\n");
    assert_eq!(read_str(root, "g"), "new\n");
}
