//! What Rewind cannot see or cannot save is an error or is left alone, never a silent loss,
//! through the real binary.

use crate::common;

use std::process::Command;

use crate::common::rewind::*;
use common::{text, Env};

/// An agent that writes `*` into `.gitignore` does not switch recording off: as in git, ignore
/// rules apply to what is not captured yet. Its later edit of a captured file is recorded and
/// rewound; a new file it makes under the new rule is not captured (and not deleted).
#[test]
fn ignore_rules_cannot_switch_recording_off() {
    let env = Env::new();
    let root = env.root();
    write(root, "src/lib.rs", b"fn a() {}\n");
    write(root, ".gitignore", b"target/\n");
    init(&env);
    checkpoint(&env, "A", "m0");
    sh(&env, "A", "echo '*' > .gitignore");
    sh(
        &env,
        "A",
        "echo 'fn evil() {}' > src/lib.rs; echo new > src/new.rs",
    );
    let log = json(&env, "A", &["log", "--limit", "1"], 0);
    assert_eq!(log["items"][0]["changes"], 1, "the edit is recorded: {log}");
    let v = json(&env, "A", &["restore", "m0"], 0);
    let paths: Vec<String> = steps(&v).into_iter().map(|s| s.1).collect();
    assert!(paths.contains(&"src/lib.rs".to_string()), "{v}");
    assert_eq!(read_str(root, "src/lib.rs"), "fn a() {}\n");
    assert_eq!(read_str(root, ".gitignore"), "target/\n");
    assert_eq!(
        read_str(root, "src/new.rs"),
        "new\n",
        "never captured, never deleted"
    );
}

/// An epoch made a file bigger than the size cap (its new content is not stored); the user
/// then rewrote it, at the same size. Rewinding the epoch cannot tell the user's bytes from the
/// epoch's and cannot bring them back: it leaves the file as it is, forced or not.
#[test]
fn a_file_whose_current_content_is_uncaptured_is_not_overwritten() {
    for force in [false, true] {
        let env = Env::new();
        let root = env.root();
        write(root, ".rewind.toml", b"[capture]\nmax_file_size = \"1K\"\n");
        write(root, "log.txt", b"small\n");
        init(&env);
        checkpoint(&env, "A", "m0");
        sh(&env, "A", "head -c 4096 /dev/zero | tr '\\0' x > log.txt");
        write(root, "log.txt", &vec![b'y'; 4096]);
        let mut args = vec!["--json", "restore", "m0"];
        if force {
            args.push("--force");
        }
        let o = run_s(&env, "A", &args);
        assert_eq!(o.status.code(), Some(0), "{}", text(&o));
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        assert_eq!(v["skipped"][0]["path"], "log.txt", "{v}");
        assert_eq!(read(root, "log.txt"), vec![b'y'; 4096], "force={force}");
    }
}

/// `epoch begin --path DIR` declares the directory's whole subtree: `rm -rf DIR` inside the
/// epoch is recorded file by file with every file's bytes (a user's edit made just before
/// included), what the tool creates inside it is recorded too, and `undo` puts it all back.
#[test]
fn an_exact_epoch_on_a_directory_keeps_every_file_below_it() {
    let env = Env::new();
    let root = env.root();
    write(root, "src/a.rs", b"a0\n");
    write(root, "src/sub/b.rs", b"b0\n");
    init(&env);
    write(root, "src/a.rs", b"the user's edit\n");
    let e = ok(
        &env,
        "A",
        &["epoch", "begin", "--tool", "bash", "--path", "src"],
    );
    std::fs::remove_dir_all(root.join("src")).unwrap();
    write(root, "src/c.rs", b"new\n");
    expect(&env, "A", &["epoch", "end"], 0);
    let shown = json(&env, "A", &["show", &e], 0);
    let mut paths: Vec<&str> = shown["changes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["path"].as_str().unwrap())
        .collect();
    paths.sort();
    assert_eq!(
        paths,
        ["src/a.rs", "src/c.rs", "src/sub", "src/sub/b.rs"],
        "{shown}"
    );
    expect(&env, "A", &["undo"], 0);
    assert_eq!(read_str(root, "src/a.rs"), "the user's edit\n");
    assert_eq!(read_str(root, "src/sub/b.rs"), "b0\n");
    assert!(!root.join("src/c.rs").exists());
}

/// The one workspace state directory under the test's REWIND_HOME.
fn state_dir(env: &Env) -> std::path::PathBuf {
    let mut dirs: Vec<_> = std::fs::read_dir(env.home.path().join("workspaces"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(dirs.len(), 1);
    dirs.pop().unwrap()
}

/// With the op log (meta.sqlite and its WAL) deleted, no command starts a fresh, empty history:
/// each says the op log is missing (exit 7), what to do, and changes nothing.
#[test]
fn a_missing_op_log_is_named_never_a_fresh_start() {
    let env = Env::new();
    let root = env.root();
    write(root, "a.txt", b"a0\n");
    init(&env);
    checkpoint(&env, "A", "m0");
    sh(&env, "A", "echo a1 > a.txt");
    let dir = state_dir(&env);
    for f in ["meta.sqlite", "meta.sqlite-wal", "meta.sqlite-shm"] {
        let _ = std::fs::remove_file(dir.join(f));
    }
    let before = read_tree(root);
    for args in [
        &["status"][..],
        &["log"],
        &["checkpoint", "--message", "m1"],
        &["exec", "--", "sh", "-c", "echo a2 > a.txt"],
        &["restore", "m0"],
    ] {
        let o = run_s(&env, "A", args);
        assert_eq!(o.status.code(), Some(7), "{args:?}: {}", text(&o));
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            err.contains("op log") && err.contains("is missing"),
            "{err}"
        );
        assert!(err.contains("rewind init"), "says what to do: {err}");
    }
    assert_eq!(read_tree(root), before, "nothing ran, nothing changed");
    assert!(
        !dir.join("meta.sqlite").exists(),
        "no fresh op log was made"
    );
}

/// With pack files deleted, capture no longer trusts its cache that the content is stored:
/// `exec` and `checkpoint` refuse (exit 7) before recording anything (the command does not
/// run), and `fsck` names the checkpoint that lost content and its path.
#[test]
fn missing_packs_stop_recording_and_fsck_names_the_checkpoints() {
    let env = Env::new();
    let root = env.root();
    write(root, "big.bin", &common::noise(7, 300_000));
    write(root, "small.txt", b"s\n");
    init(&env);
    let m0 = checkpoint(&env, "A", "m0");
    let packs = env.packs();
    assert!(!packs.is_empty(), "the big file is in a pack");
    for p in packs {
        std::fs::remove_file(p).unwrap();
    }
    let log_before = json(&env, "A", &["log"], 0);
    let o = run_s(&env, "A", &["exec", "--", "sh", "-c", "echo ran > ran.txt"]);
    assert_eq!(o.status.code(), Some(7), "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("pack file(s)"),
        "{}",
        text(&o)
    );
    assert!(!root.join("ran.txt").exists(), "the command did not run");
    let o = run_s(&env, "A", &["checkpoint", "--message", "m1"]);
    assert_eq!(o.status.code(), Some(7), "{}", text(&o));
    assert_eq!(
        json(&env, "A", &["log"], 0),
        log_before,
        "nothing was recorded"
    );
    let o = run_s(&env, "A", &["fsck"]);
    assert_eq!(o.status.code(), Some(7), "{}", text(&o));
    let all = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    // (Its tree was in the same pack as the file: the whole checkpoint is named.)
    assert!(
        all.contains(&format!("checkpoint {m0} (message m0)"))
            && all.contains("cannot be restored"),
        "{all}"
    );
}

/// A workspace inside the state directory is refused (exit 1, naming both), as is the state
/// directory inside the workspace: Rewind never records or restores its own state.
#[test]
fn a_workspace_and_the_state_directory_never_overlap() {
    let env = Env::new();
    let inside = env.home.path().join("ws");
    std::fs::create_dir_all(&inside).unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_rewind"))
        .env("REWIND_HOME", env.home.path())
        .arg("-C")
        .arg(&inside)
        .arg("init")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("inside the state directory"),
        "{}",
        text(&o)
    );
    let o = Command::new(env!("CARGO_BIN_EXE_rewind"))
        .env("REWIND_HOME", env.root().join("state"))
        .arg("-C")
        .arg(env.root())
        .arg("init")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("is inside the workspace"),
        "{}",
        text(&o)
    );
}

/// `checkpoint --payload-file` refuses a payload over `checkpoint.max_payload_size` with a
/// message saying the limit and how to raise it (exit 1), reading no more than the limit;
/// no checkpoint is made. One under the limit is stored.
#[test]
fn a_payload_over_the_cap_is_refused() {
    let env = Env::new();
    init(&env);
    std::fs::write(
        env.home.path().join("config.toml"),
        "[checkpoint]\nmax_payload_size = \"1K\"\n",
    )
    .unwrap();
    let big = env.home.path().join("big.json");
    std::fs::write(&big, vec![b'x'; 4096]).unwrap();
    let o = run_s(
        &env,
        "A",
        &[
            "checkpoint",
            "--message",
            "m1",
            "--payload-file",
            big.to_str().unwrap(),
        ],
    );
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("checkpoint.max_payload_size") && err.contains("1024"),
        "{err}"
    );
    let log = json(&env, "A", &["log"], 0);
    assert!(!log.to_string().contains("\"m1\""), "no checkpoint: {log}");
    let small = env.home.path().join("small.json");
    std::fs::write(&small, b"{}").unwrap();
    expect(
        &env,
        "A",
        &[
            "checkpoint",
            "--message",
            "m2",
            "--payload-file",
            small.to_str().unwrap(),
        ],
        0,
    );
}

/// A sparse file (10 MiB with 8 KiB of data) is restored sparse: the same bytes, and about as
/// few blocks allocated as before, not 10 MiB.
#[test]
fn sparse_files_are_restored_with_their_holes() {
    use std::io::{Seek, SeekFrom, Write};
    use std::os::unix::fs::MetadataExt;
    let env = Env::new();
    let root = env.root();
    let path = root.join("disk.img");
    let mut f = std::fs::File::create(&path).unwrap();
    f.write_all(&[7u8; 4096]).unwrap();
    f.seek(SeekFrom::Start(5 << 20)).unwrap();
    f.write_all(&[9u8; 4096]).unwrap();
    f.set_len(10 << 20).unwrap();
    drop(f);
    let allocated = |p: &std::path::Path| std::fs::metadata(p).unwrap().blocks() * 512;
    assert!(allocated(&path) < 1 << 20, "the file system keeps holes");
    let bytes = std::fs::read(&path).unwrap();
    init(&env);
    checkpoint(&env, "A", "m0");
    sh(&env, "A", "rm disk.img");
    expect(&env, "A", &["restore", "m0"], 0);
    assert_eq!(std::fs::read(&path).unwrap(), bytes);
    assert!(
        allocated(&path) < 1 << 20,
        "restored sparse: {} bytes allocated",
        allocated(&path)
    );
}

/// A directory the (unprivileged) user cannot list is uncovered, not empty: `status` lists it,
/// and rewinding the turn that made it keeps it and its files, and says so.
#[test]
fn an_unreadable_directory_is_uncovered_and_never_removed() {
    let env = Env::new();
    let root = env.root();
    write(root, "a.txt", b"a0\n");
    env.hand_to_nobody();
    let run = |args: &[&str]| -> std::process::Output {
        let mut all = vec!["-s", "A", "--json"];
        all.extend_from_slice(args);
        env.run_as_nobody(&all)
    };
    let doc = |o: &std::process::Output| -> serde_json::Value {
        serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(o)))
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
        "echo a1 > a.txt; mkdir d && echo secret > d/f && chmod 000 d",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let st = doc(&run(&["status"]));
    assert!(st["uncovered"].to_string().contains("\"d\""), "{st}");
    let o = run(&["restore", "m0"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let v = doc(&o);
    let said = format!("{}{}", v["skipped"], v["kept"]);
    assert!(said.contains("\"d\""), "the restore says it kept d: {v}");
    assert_eq!(read_str(root, "a.txt"), "a0\n");
    // (Read as root.)
    assert_eq!(read_str(root, "d/f"), "secret\n");
}

/// A shell command that enters the directory chain of [`deep_paths_are_captured_and_restored`]
/// (each name 250 bytes, 20 deep: over 5000 bytes, past `PATH_MAX`) and then runs `then`. The
/// kernel resolves each `cd` relative to the last, so no absolute path is ever that long.
fn in_deep_dir(then: &str) -> String {
    format!(
        "d=$(printf 'd%.0s' $(seq 250)); for i in $(seq 20); do mkdir -p $d && cd -P $d || exit 9; done; {then}"
    )
}

/// Files deeper than `PATH_MAX` (4096 bytes of path) are captured like any other, not left
/// uncovered: the walk and the hashing fall back to descriptors, one component at a time,
/// where an absolute path is too long for the kernel. A change a command makes there is
/// recorded and rewound, and a symlink there is kept as a link.
#[test]
fn deep_paths_are_captured_and_restored() {
    let env = Env::new();
    let root = env.root();
    let deep = |cmd: &str| {
        let o = Command::new("sh")
            .arg("-c")
            .arg(in_deep_dir(cmd))
            .current_dir(root)
            .output()
            .unwrap();
        assert!(o.status.success(), "{cmd}: {}", text(&o));
        String::from_utf8(o.stdout).unwrap()
    };
    deep("echo one > f.txt && ln -s f.txt link");
    write(root, "top.txt", b"top\n");
    init(&env);
    let status = json(&env, "A", &["status"], 0);
    assert_eq!(
        status["uncovered"],
        serde_json::json!([]),
        "nothing uncovered: {status}"
    );
    checkpoint(&env, "A", "m0");
    sh(&env, "A", &in_deep_dir("echo two > f.txt && rm link"));
    let log = json(&env, "A", &["log", "--limit", "1"], 0);
    assert_eq!(
        log["items"][0]["changes"], 2,
        "both changes recorded: {log}"
    );
    json(&env, "A", &["restore", "m0"], 0);
    assert_eq!(deep("cat f.txt"), "one\n");
    assert_eq!(deep("readlink link"), "f.txt\n");
}

/// An object gone from the store's index (not a damaged pack the store's own check reports,
/// but a row lost from the index) that both an epoch and a checkpoint refer to: `fsck` names
/// the epoch's change and the checkpoint that can no longer restore the path.
#[test]
fn fsck_names_the_checkpoint_of_an_object_lost_from_the_index() {
    let env = Env::new();
    let root = env.root();
    write(root, "a.txt", b"first\n");
    init(&env);
    let m0 = checkpoint(&env, "A", "m0");
    sh(&env, "A", "echo second > a.txt");
    // Small contents are stored inline in the index's database: delete every one of them.
    let db = glob_one(&env.home.path().join("workspaces"), "meta.sqlite");
    let o = Command::new("python3")
        .arg("-c")
        .arg("import sqlite3,sys; c=sqlite3.connect(sys.argv[1]); c.execute('DELETE FROM store_inline'); c.commit()")
        .arg(&db)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    let o = run_s(&env, "A", &["fsck"]);
    assert_eq!(o.status.code(), Some(7), "{}", text(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("/a.txt: object"), "the epoch's change: {out}");
    assert!(
        out.contains(&format!("checkpoint {m0} (message m0)")) && out.contains("a.txt"),
        "the checkpoint that lost a.txt: {out}"
    );
}

/// The one file called `name` below `dir` (one level of subdirectories).
fn glob_one(dir: &std::path::Path, name: &str) -> std::path::PathBuf {
    let mut found: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path().join(name))
        .filter(|p| p.exists())
        .collect();
    assert_eq!(found.len(), 1, "{found:?}");
    found.pop().unwrap()
}
