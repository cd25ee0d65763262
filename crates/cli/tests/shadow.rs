//! The shadow git history (`rewind shadow-path`), through the real binary and the real `git`:
//! checkpoints and restores as commits that `git log -p` shows, `git fsck --strict` clean, the
//! user's `.git` untouched, uncaptured paths absent, and a writer killed half-way.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::rewind::*;
use crate::common::{text, Env};

/// `git --git-dir DIR ARGS…`, isolated from the user's and the system's configuration;
/// asserts success and returns stdout.
fn git(dir: &Path, args: &[&str]) -> Vec<u8> {
    let o = git_cmd(dir).args(args).output().unwrap();
    assert!(o.status.success(), "git {args:?}: {}", text(&o));
    o.stdout
}

fn git_cmd(dir: &Path) -> Command {
    let mut c = Command::new("git");
    c.env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .arg("--git-dir")
        .arg(dir);
    c
}

fn git_str(dir: &Path, args: &[&str]) -> String {
    String::from_utf8(git(dir, args)).unwrap()
}

/// `rewind shadow-path`: the git directory it prints.
fn shadow_path(env: &Env) -> PathBuf {
    PathBuf::from(ok(env, "x", &["shadow-path"]))
}

/// `git fsck --strict` finds nothing wrong (dangling objects a killed writer left are not
/// wrong: they are unreferenced).
fn fsck_strict(dir: &Path) {
    let o = git_cmd(dir)
        .args(["fsck", "--strict", "--no-dangling", "--no-progress"])
        .output()
        .unwrap();
    assert!(o.status.success(), "git fsck --strict: {}", text(&o));
    assert!(
        o.stdout.is_empty() && o.stderr.is_empty(),
        "git fsck --strict: {}",
        text(&o)
    );
}

/// Commits of `branch`, newest first: (id, subject).
fn commits(dir: &Path, branch: &str) -> Vec<(String, String)> {
    git_str(dir, &["log", "--format=%H %s", branch])
        .lines()
        .map(|l| {
            let (id, s) = l.split_once(' ').unwrap();
            (id.to_string(), s.to_string())
        })
        .collect()
}

/// What a commit's tree holds: path → (git mode, bytes).
fn commit_tree(dir: &Path, rev: &str) -> BTreeMap<Vec<u8>, (String, Vec<u8>)> {
    let list = git(dir, &["ls-tree", "-r", "-z", "--full-tree", rev]);
    let mut out = BTreeMap::new();
    for item in list.split(|b| *b == 0).filter(|i| !i.is_empty()) {
        let tab = item.iter().position(|b| *b == b'\t').unwrap();
        let meta = std::str::from_utf8(&item[..tab]).unwrap();
        let mut f = meta.split(' ');
        let (mode, _kind, oid) = (f.next().unwrap(), f.next().unwrap(), f.next().unwrap());
        out.insert(
            item[tab + 1..].to_vec(),
            (mode.to_string(), git(dir, &["cat-file", "blob", oid])),
        );
    }
    out
}

/// A tree read from disk as git holds it: files and symlinks (directories are implied), `.git`
/// left out.
fn as_git(tree: &Tree) -> BTreeMap<Vec<u8>, (String, Vec<u8>)> {
    tree.iter()
        .filter(|(p, _)| !p.starts_with(b".git/") && p.as_slice() != b".git")
        .filter_map(|(p, n)| match n {
            Node::File { mode, data } => {
                let m = if mode & 0o111 != 0 {
                    "100755"
                } else {
                    "100644"
                };
                Some((p.clone(), (m.to_string(), data.clone())))
            }
            Node::Symlink(t) => Some((p.clone(), ("120000".to_string(), t.clone()))),
            Node::Dir { .. } => None,
        })
        .collect()
}

fn set_eager(env: &Env, eager: bool) {
    std::fs::write(
        env.home.path().join("config.toml"),
        format!("[shadow]\neager = {eager}\n"),
    )
    .unwrap();
}

#[test]
fn checkpoints_and_restores_are_commits_git_log_shows() {
    let env = Env::new();
    let root = env.root();
    write(root, "a.txt", b"one\n");
    init(&env);
    let c1 = checkpoint(&env, "S", "msg-1");
    sh(&env, "S", "echo two > a.txt; echo new > b.txt");
    ok(
        &env,
        "S",
        &["checkpoint", "--message", "msg-2", "--label", "second turn"],
    );
    let after2 = read_tree(root);

    let dir = shadow_path(&env);
    assert!(dir.starts_with(env.home.path()), "{}", dir.display());
    assert!(!dir.starts_with(root));
    let log = commits(&dir, "S");
    assert_eq!(log.len(), 2, "{log:?}");
    assert_eq!(log[0].1, "msg-2: second turn");
    assert_eq!(log[1].1, "msg-1");
    let patch = git_str(&dir, &["log", "-p", "S"]);
    assert!(patch.contains("-one\n+two\n"), "{patch}");
    assert!(patch.contains("+new\n"), "{patch}");
    // The message names the epoch and its tool.
    let body = git_str(&dir, &["log", "-1", "--format=%B", "S"]);
    assert!(body.contains("Message: msg-2"), "{body}");
    assert!(body.contains("- bash (opaque, 2 paths)"), "{body}");
    let who = git_str(&dir, &["log", "-1", "--format=%an <%ae>|%cn", "S"]);
    assert_eq!(who.trim(), "S <S@rewind>|S");
    assert_eq!(commit_tree(&dir, "S"), as_git(&after2));

    // A restore appends a commit holding the restored tree; the earlier ones stay.
    expect(&env, "S", &["restore", &c1], 0);
    let restored = read_tree(root);
    let again = shadow_path(&env);
    assert_eq!(again, dir);
    let log3 = commits(&dir, "S");
    assert_eq!(log3.len(), 3, "{log3:?}");
    assert_eq!(
        &log3[1..],
        &log[..],
        "history is appended to, never rewritten"
    );
    assert_eq!(commit_tree(&dir, "S"), as_git(&restored));
    let patch = git_str(&dir, &["show", "S"]);
    assert!(
        patch.contains("-two\n+one\n") && patch.contains("-new\n"),
        "{patch}"
    );

    // With the repository there, a checkpoint writes its commit itself (`[shadow] eager`).
    sh(&env, "S", "echo three > a.txt");
    checkpoint(&env, "S", "msg-3");
    assert_eq!(commits(&dir, "S").len(), 4);
    let v = json(&env, "x", &["shadow-path"], 0);
    assert_eq!(v["commits"], 0, "{v}");
    assert_eq!(v["git_dir"].as_str().unwrap(), dir.to_str().unwrap());
    fsck_strict(&dir);
}

#[test]
fn the_users_git_is_never_touched() {
    let env = Env::new();
    let root = env.root();
    let user_git = |args: &[&str]| {
        let o = Command::new("git")
            .args(["-c", "user.name=t", "-c", "user.email=t@t"])
            .args(args)
            .current_dir(root)
            .output()
            .unwrap();
        assert!(o.status.success(), "git {args:?}: {}", text(&o));
    };
    user_git(&["init", "-q"]);
    write(root, "src.txt", b"v0\n");
    user_git(&["add", "."]);
    user_git(&["commit", "-qm", "zero"]);
    let before = read_tree_mtimes(&root.join(".git"));
    tick();

    init(&env);
    let c1 = checkpoint(&env, "S", "m1");
    sh(&env, "S", "echo v1 > src.txt; echo x > more.txt");
    checkpoint(&env, "S", "m2");
    let dir = shadow_path(&env);
    sh(&env, "S", "echo v2 > src.txt");
    checkpoint(&env, "S", "m3");
    expect(&env, "S", &["restore", &c1], 0);
    expect(&env, "S", &["undo"], 0);
    expect(&env, "S", &["gc"], 0);
    shadow_path(&env);

    assert_eq!(read_tree_mtimes(&root.join(".git")), before);
    // The workspace's .git is not in the shadow history either.
    let tree = commit_tree(&dir, "S");
    assert!(tree.keys().all(|p| !p.starts_with(b".git")), "{tree:?}");
    assert_eq!(
        commits(&dir, "S").len(),
        5,
        "3 checkpoints, a restore, its undo"
    );
    fsck_strict(&dir);
}

#[test]
fn only_what_rewind_captures_is_in_it() {
    let env = Env::new();
    let root = env.root();
    write(root, ".gitignore", b"*.log\n");
    write(root, ".rewind.toml", b"[capture]\nmax_file_size = \"1K\"\n");
    write(root, "ignored.log", b"noise\n");
    write(root, "big.bin", &vec![7u8; 4096]);
    write(root, "src/tool.sh", b"#!/bin/sh\n");
    chmod(root, "src/tool.sh", 0o755);
    std::os::unix::fs::symlink("src/tool.sh", root.join("link")).unwrap();
    std::fs::create_dir(root.join("empty")).unwrap();
    init(&env);
    checkpoint(&env, "agent one/two", "m1");
    let dir = shadow_path(&env);
    // Not a git workspace, and the session's name escaped into a branch name.
    assert!(!root.join(".git").exists());
    let branches = git_str(&dir, &["for-each-ref", "--format=%(refname)"]);
    assert_eq!(branches.trim(), "refs/heads/agent%20one%2Ftwo");
    let tree = commit_tree(&dir, "agent%20one%2Ftwo");
    let names: Vec<&[u8]> = tree.keys().map(|k| k.as_slice()).collect();
    assert_eq!(
        names,
        [&b".gitignore"[..], b".rewind.toml", b"link", b"src/tool.sh"],
        "ignored, oversize and empty-directory entries are absent"
    );
    assert_eq!(tree[&b"src/tool.sh"[..]].0, "100755");
    assert_eq!(
        tree[&b"link"[..]],
        ("120000".into(), b"src/tool.sh".to_vec())
    );
    fsck_strict(&dir);
}

#[test]
fn a_writer_killed_half_way_leaves_it_consistent() {
    let env = Env::new();
    let root = env.root();
    write(root, "a.txt", b"0\n");
    init(&env);
    checkpoint(&env, "S", "m0");
    let dir = shadow_path(&env);
    // Three checkpoints the shadow history has not caught up with.
    set_eager(&env, false);
    let mut trees = Vec::new();
    for i in 1..=3 {
        sh(&env, "S", &format!("echo {i} > a.txt; echo {i} > f{i}.txt"));
        checkpoint(&env, "S", &format!("m{i}"));
        trees.push(read_tree(root));
    }
    assert_eq!(commits(&dir, "S").len(), 1);
    for (point, written) in [("shadow-before-commit:1", 1), ("shadow-before-ref:2", 2)] {
        let o = env
            .cmd(&["shadow-path"])
            .env("REWIND_FAILPOINT", point)
            .output()
            .unwrap();
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(o.status.signal(), Some(9), "{point}: {}", text(&o));
        fsck_strict(&dir);
        // The branch is at the last commit whose move completed.
        assert_eq!(commits(&dir, "S").len(), written, "{point}");
    }
    let v = json(&env, "x", &["shadow-path"], 0);
    assert_eq!(v["commits"], 2, "{v}");
    let log = commits(&dir, "S");
    let subjects: Vec<&str> = log.iter().map(|(_, s)| s.as_str()).collect();
    assert_eq!(subjects, ["m3", "m2", "m1", "m0"]);
    for (i, t) in trees.iter().enumerate() {
        assert_eq!(commit_tree(&dir, &log[2 - i].0), as_git(t), "m{}", i + 1);
    }
    fsck_strict(&dir);
}

#[test]
fn gc_counts_it_and_leaves_it_valid_and_rebuild_drops_what_gc_collected() {
    let env = Env::new();
    let root = env.root();
    write(root, "a.txt", b"0\n");
    init(&env);
    for i in 1..=4 {
        sh(&env, "S", &format!("head -c 20000 /dev/urandom > r{i}.bin"));
        checkpoint(&env, "S", &format!("m{i}"));
    }
    let dir = shadow_path(&env);
    let shadow_bytes = dir_bytes(&dir);
    assert!(shadow_bytes > 80_000, "{shadow_bytes}");
    let v = json(&env, "S", &["gc", "--dry-run"], 0);
    let state = v["state_bytes_before"].as_u64().unwrap();
    let state_dir = dir.parent().unwrap();
    assert!(
        state >= dir_bytes(state_dir),
        "{state} < {}",
        dir_bytes(state_dir)
    );
    // Drop all but the newest checkpoint.
    expect(&env, "S", &["gc", "--keep", "1", "--max-age", "0s"], 0);
    fsck_strict(&dir);
    let v = json(&env, "x", &["shadow-path"], 0);
    assert_eq!(v["commits"], 0, "{v}");
    assert_eq!(
        commits(&dir, "S").len(),
        4,
        "the view keeps what gc collected"
    );
    // A rebuild writes what the op log still holds.
    let v = json(&env, "x", &["shadow-path", "--rebuild"], 0);
    assert_eq!(v["rebuilt"], true, "{v}");
    let log = commits(&dir, "S");
    assert_eq!(log.len(), 1, "{log:?}");
    assert_eq!(log[0].1, "m4");
    assert!(dir_bytes(&dir) < shadow_bytes);
    fsck_strict(&dir);
}

fn dir_bytes(dir: &Path) -> u64 {
    let mut total = 0;
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let m = e.metadata().unwrap();
        total += if m.is_dir() {
            dir_bytes(&e.path())
        } else {
            m.len()
        };
    }
    total
}

/// A model test: random turns (files written, removed, made executable, turned into
/// directories or symlinks), checkpoints of two sessions and restores, with the eager writer
/// switched on and off at random; every commit's tree is the tree on disk at its checkpoint.
#[test]
fn every_commit_holds_its_checkpoints_tree() {
    let env = Env::new();
    let root = env.root();
    write(root, "seed.txt", b"seed\n");
    init(&env);
    shadow_path(&env);
    let mut rng = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = |n: u64| {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng % n
    };
    let names = ["a", "b", "d/c", "d/e/f", "g"];
    // (session, message) → the tree on disk at that checkpoint.
    let mut expected: Vec<(String, String, Tree)> = Vec::new();
    let mut ids: Vec<(String, String)> = Vec::new();
    for turn in 0..16 {
        let session = if next(3) == 0 { "T" } else { "S" };
        let mut script = String::new();
        for _ in 0..1 + next(3) {
            let n = names[next(names.len() as u64) as usize];
            script += &match next(5) {
                0 => format!("rm -rf {n};"),
                1 => format!("mkdir -p $(dirname {n}) && chmod +x {n} 2>/dev/null; true;"),
                2 => format!("rm -rf {n}; mkdir -p {n} && echo in > {n}/x;"),
                3 => format!("rm -rf {n}; mkdir -p $(dirname {n}) && ln -s target-{turn} {n};"),
                _ => format!("rm -rf {n}; mkdir -p $(dirname {n}) && echo {turn} > {n};"),
            };
        }
        sh(&env, session, &script);
        set_eager(&env, next(2) == 0);
        let m = format!("m{turn}");
        let id = checkpoint(&env, session, &m);
        expected.push((session.to_string(), m, read_tree(root)));
        ids.push((session.to_string(), id));
        if next(4) == 0 {
            // Back to one of the session's earlier checkpoints (a restore commit in between).
            let own: Vec<&String> = ids
                .iter()
                .filter(|(s, _)| s == session)
                .map(|(_, i)| i)
                .collect();
            let target = own[next(own.len() as u64) as usize];
            expect(&env, session, &["restore", "--force", target], 0);
        }
    }
    let dir = shadow_path(&env);
    for session in ["S", "T"] {
        let log = git_str(&dir, &["log", "--format=%H %s", session]);
        for (s, m, tree) in expected.iter().filter(|(s, ..)| s == session) {
            let id = log
                .lines()
                .find(|l| l.ends_with(&format!(" {m}")))
                .unwrap_or_else(|| panic!("{s} {m} not in {log}"))
                .split(' ')
                .next()
                .unwrap();
            assert_eq!(commit_tree(&dir, id), as_git(tree), "{s} {m}");
        }
    }
    fsck_strict(&dir);
}

/// Rule A: while a session works in a worktree, this directory's shadow commits for it are
/// skipped; once the worktree is discarded, what was recorded here meanwhile is written.
#[test]
fn a_session_working_in_a_worktree_gets_no_commits_here_until_it_is_back() {
    let env = Env::new();
    let root = env.root();
    write(root, "a.txt", b"a\n");
    expect(&env, "S", &["init"], 0);
    expect(&env, "S", &["checkpoint", "--message", "m1"], 0);
    let dir = shadow_path(&env);
    assert_eq!(commits(&dir, "S").len(), 1);
    let wt = json(&env, "S", &["worktree", "create", "w"], 0);
    let wt_path = wt["path"].as_str().unwrap().to_string();
    // S works in the worktree: a checkpoint there.
    let o = env
        .cmd_here(&[
            "-C",
            &wt_path,
            "-s",
            "S",
            "checkpoint",
            "--message",
            "in-worktree",
        ])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    // A checkpoint of S here meanwhile: skipped.
    write(root, "b.txt", b"b\n");
    expect(&env, "S", &["checkpoint", "--message", "m2"], 0);
    let dir = shadow_path(&env);
    assert_eq!(
        commits(&dir, "S").len(),
        1,
        "S is away: nothing written for it here"
    );
    // Another session is not away: written.
    expect(&env, "T", &["checkpoint", "--message", "t1"], 0);
    let dir = shadow_path(&env);
    assert_eq!(commits(&dir, "T").len(), 1);
    // Back: the worktree discarded, m2 is written on top of S's branch.
    expect(&env, "S", &["worktree", "discard", "w", "--force"], 0);
    let dir = shadow_path(&env);
    let s = commits(&dir, "S");
    assert_eq!(s.len(), 2, "{s:?}");
    fsck_strict(&dir);
}
