//! Remotes through the real binary: push, clone into a fresh state directory, restore of every
//! checkpoint there equal to the original trees (bytes and modes), a push killed midway and run
//! again, two workspaces pushing at once, a damaged remote pack, credentials that never leak.
//!
//! Every test runs against a `file://` remote (a directory) and against a real S3 server on
//! loopback (s3s-fs, started per test by `rewind_testutil::s3`; `scripts/test` installs it).

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::common::rewind::{checkpoint, chmod, exact, init, read_tree, sh, write, Tree};
use crate::common::{noise, text, Env};

/// Where a test's remote is, and what its commands need in the environment.
pub(crate) struct Target {
    pub(crate) url: String,
    endpoint: Option<String>,
    region: Option<String>,
    env: Vec<(String, String)>,
    /// For a `file://` remote: its directory (to look at and damage objects).
    pub(crate) dir: Option<PathBuf>,
    _keep: Option<tempfile::TempDir>,
    /// For an S3 remote: its server, stopped when the test ends.
    server: Option<rewind_testutil::s3::S3Server>,
}

impl Target {
    pub(crate) fn file() -> Target {
        let t = tempfile::tempdir().unwrap();
        let dir = t.path().join("remote");
        Target {
            url: format!("file://{}", dir.display()),
            endpoint: None,
            region: None,
            env: Vec::new(),
            dir: Some(dir),
            _keep: Some(t),
            server: None,
        }
    }

    /// An S3 target: a real S3 server (`rewind_testutil::s3`, s3s-fs unless
    /// `REWIND_S3_SERVER` says otherwise) started on loopback for this test, the test's remote
    /// under a prefix. Without a server binary the harness fails the test and says to run
    /// `scripts/test`.
    pub(crate) fn s3() -> Target {
        let server = rewind_testutil::s3::S3Server::start();
        // Short (s3s-fs limits a key to 157 bytes); the server is this test's alone.
        let prefix = "ws";
        // Only the credentials: the secrets the leak test looks for.
        let env = vec![
            (
                "AWS_ACCESS_KEY_ID".to_string(),
                server.access_key_id().to_string(),
            ),
            (
                "AWS_SECRET_ACCESS_KEY".to_string(),
                server.secret_access_key().to_string(),
            ),
        ];
        // s3s-fs keeps each object as a file under its data directory (the tests that count or
        // damage objects look there); Garage does not.
        let dir = (server.kind() == rewind_testutil::s3::Kind::S3sFs)
            .then(|| server.data_dir().join(server.bucket()).join(prefix));
        Target {
            url: server.url(prefix),
            endpoint: Some(server.endpoint()),
            region: Some(server.region().to_string()),
            env,
            dir,
            _keep: None,
            server: Some(server),
        }
    }

    pub(crate) fn apply(&self, c: &mut Command) {
        if let Some(server) = &self.server {
            server.set_env(c);
        }
        for (k, v) in &self.env {
            c.env(k, v);
        }
    }

    /// `rewind remote add origin URL …` in `env`'s state directory.
    pub(crate) fn add(&self, env: &Env) {
        let mut args = vec!["remote", "add", "origin", self.url.as_str()];
        if let Some(e) = &self.endpoint {
            args.extend(["--endpoint", e.as_str()]);
        }
        if let Some(r) = &self.region {
            args.extend(["--region", r.as_str()]);
        }
        let o = env.run(&args);
        assert_eq!(o.status.code(), Some(0), "remote add: {}", text(&o));
    }

    pub(crate) fn run(&self, env: &Env, args: &[&str]) -> Output {
        let mut c = env.cmd(args);
        self.apply(&mut c);
        c.output().unwrap()
    }

    /// `rewind push` in `env` with `extra` in its environment, killed at failpoint `point`.
    pub(crate) fn killed_push(&self, env: &Env, point: &str, extra: &[(&str, &str)]) {
        let mut c = env.cmd(&["push"]);
        self.apply(&mut c);
        let o = c
            .envs(extra.iter().copied())
            .env("REWIND_FAILPOINT", point)
            .output()
            .unwrap();
        assert_eq!(
            o.status.code(),
            None,
            "push killed at {point}: {}",
            text(&o)
        );
    }

    pub(crate) fn push(&self, env: &Env) -> serde_json::Value {
        let o = self.run(env, &["--json", "push"]);
        assert_eq!(o.status.code(), Some(0), "push: {}", text(&o));
        serde_json::from_slice(&o.stdout).unwrap()
    }

    /// `rewind clone URL DIR [ARGS…]` with the state directory `home`.
    pub(crate) fn clone_cmd(&self, home: &Path, dir: &Path, extra: &[&str]) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_rewind"));
        c.env("REWIND_HOME", home)
            .env_remove("REWIND_SESSION")
            .env_remove("REWIND_FAILPOINT")
            .arg("clone")
            .arg(&self.url)
            .arg(dir)
            .args(extra);
        if let Some(e) = &self.endpoint {
            c.args(["--endpoint", e]);
        }
        if let Some(r) = &self.region {
            c.args(["--region", r]);
        }
        self.apply(&mut c);
        c
    }

    /// Every object in the remote directory, by kind (`packs`, `index`, `oplog`, manifests).
    fn objects(&self) -> BTreeMap<&'static str, Vec<PathBuf>> {
        let dir = self.dir.as_ref().expect("a file remote");
        let mut out: BTreeMap<&'static str, Vec<PathBuf>> = BTreeMap::new();
        for (kind, sub, ext) in [
            ("packs", "packs", "pack"),
            ("index", "index", "idx"),
            ("oplog", "oplog", "seg"),
            ("manifests", "histories", "json"),
        ] {
            out.insert(kind, files_with_ext(&dir.join(sub), ext));
        }
        out
    }
}

fn files_with_ext(dir: &Path, ext: &str) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = all_files(dir)
        .into_iter()
        .filter(|p| p.extension().is_some_and(|x| x == ext))
        .collect();
    out.sort();
    out
}

/// A workspace with four checkpoints (small files, a chunked 3 MiB file, an executable, a
/// symlink, nested directories, a directory of 4,200 files, whose tree is a fan-out, first in
/// the root so that a clone reads it before anything else brings its older parts; changes
/// by shell commands and by exact epochs); the tree at each checkpoint, by id, oldest first.
pub(crate) fn history(env: &Env, seed: u64) -> Vec<(String, Tree)> {
    let root = env.root();
    write(root, "a.txt", format!("alpha {seed}\n").as_bytes());
    write(root, "dir/b.txt", b"bravo\n");
    write(root, "dir/sub/c.bin", &noise(seed, 200_000));
    write(root, "big.bin", &noise(seed + 1, 3 << 20));
    write(root, "run.sh", b"#!/bin/sh\necho hi\n");
    chmod(root, "run.sh", 0o755);
    std::os::unix::fs::symlink("dir/b.txt", root.join("link")).unwrap();
    for i in 0..4200 {
        write(
            root,
            &format!("0many/f{i:04}"),
            format!("{i} {seed}\n").as_bytes(),
        );
    }
    init(env);
    let mut out = Vec::new();
    out.push((checkpoint(env, "default", "m1"), read_tree(root)));
    sh(
        env,
        "default",
        "echo 'alpha two' > a.txt && rm dir/sub/c.bin && mkdir -p new/deep && echo n > new/deep/n.txt \
         && echo more >> 0many/f0100 && echo new > 0many/g",
    );
    out.push((checkpoint(env, "default", "m2"), read_tree(root)));
    exact(env, "default", &["dir/b.txt", "run.sh"], || {
        write(root, "dir/b.txt", b"bravo edited\n");
        chmod(root, "run.sh", 0o700);
    });
    out.push((checkpoint(env, "default", "m3"), read_tree(root)));
    let mut big = std::fs::read(root.join("big.bin")).unwrap();
    big[..1000].copy_from_slice(&noise(seed + 2, 1000));
    sh(env, "default", "true");
    std::fs::write(root.join("big.bin"), &big).unwrap();
    sh(env, "default", "touch new/t");
    out.push((checkpoint(env, "default", "m4"), read_tree(root)));
    out
}

pub(crate) fn clone_dir() -> (tempfile::TempDir, PathBuf) {
    let t = tempfile::tempdir().unwrap();
    let d = t.path().join("clone");
    (t, d)
}

/// A command in the clone `dir` with state directory `home`.
pub(crate) fn in_clone(home: &Path, dir: &Path, target: &Target, args: &[&str]) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_rewind"));
    c.env("REWIND_HOME", home)
        .env_remove("REWIND_SESSION")
        .env_remove("REWIND_FAILPOINT")
        .arg("-C")
        .arg(dir)
        .args(args);
    target.apply(&mut c);
    c.output().unwrap()
}

fn push_clone_restore_every_checkpoint(target: Target) {
    let env = Env::new();
    let trees = history(&env, 1);
    target.add(&env);
    let first = target.push(&env);
    assert!(first["packs"].as_u64().unwrap() >= 1, "{first}");
    assert_eq!(first["segments"], 1, "{first}");
    // Again: nothing to upload, no new manifest.
    let again = target.push(&env);
    assert_eq!(again["packs"], 0, "{again}");
    assert!(again["manifest"].is_null(), "{again}");

    let home = tempfile::tempdir().unwrap();
    let (_t, dir) = clone_dir();
    let o = target.clone_cmd(home.path(), &dir, &[]).output().unwrap();
    assert_eq!(o.status.code(), Some(0), "clone: {}", text(&o));
    let newest = &trees.last().unwrap().1;
    assert_eq!(
        &read_tree(&dir),
        newest,
        "the clone holds the newest checkpoint's tree"
    );

    // The history came along: the log is the origin's, and so is the diff of every epoch
    // (which reads the change rows and both sides' content).
    let o = in_clone(
        home.path(),
        &dir,
        &target,
        &["--json", "log", "--all-sessions", "--limit", "0"],
    );
    assert_eq!(o.status.code(), Some(0), "log: {}", text(&o));
    let log: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let o = env.run(&["--json", "log", "--all-sessions", "--limit", "0"]);
    let origin_log: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(log, origin_log, "the clone's log is the origin's");
    for (id, _) in &trees {
        assert!(
            log.to_string().contains(id.as_str()),
            "log lacks {id}: {log}"
        );
    }
    let o = in_clone(home.path(), &dir, &target, &["pull"]);
    assert_eq!(o.status.code(), Some(0), "pull: {}", text(&o));
    let mut epochs = 0;
    for item in log["items"].as_array().unwrap() {
        if item["type"] != "epoch" {
            continue;
        }
        let id = item["id"].as_str().unwrap();
        let here = in_clone(home.path(), &dir, &target, &["--json", "diff", id]);
        let there = env.run(&["--json", "diff", id]);
        assert_eq!(here.status.code(), Some(0), "diff {id}: {}", text(&here));
        assert_eq!(here.stdout, there.stdout, "diff of epoch {id}");
        epochs += 1;
    }
    assert!(epochs >= 3, "{log}");
    // Every checkpoint restores exactly.
    for (id, tree) in &trees {
        let o = in_clone(home.path(), &dir, &target, &["restore", id, "--all"]);
        assert_eq!(o.status.code(), Some(0), "restore {id}: {}", text(&o));
        assert_eq!(&read_tree(&dir), tree, "checkpoint {id} in the clone");
    }
    let o = in_clone(home.path(), &dir, &target, &["diff", &trees[0].0]);
    assert_eq!(o.status.code(), Some(0), "diff: {}", text(&o));
    let o = in_clone(home.path(), &dir, &target, &["fsck"]);
    assert_eq!(o.status.code(), Some(0), "fsck: {}", text(&o));

    // A clone of an older checkpoint, by prefix.
    let home2 = tempfile::tempdir().unwrap();
    let (_t2, dir2) = clone_dir();
    let o = target
        .clone_cmd(home2.path(), &dir2, &["--checkpoint", &trees[1].0[..10]])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "clone --checkpoint: {}", text(&o));
    assert_eq!(read_tree(&dir2), trees[1].1);
}

/// A pull brings what the origin pushed later; the clone's files stay until a restore.
fn pull_brings_new_history(target: Target) {
    let env = Env::new();
    let trees = history(&env, 2);
    target.add(&env);
    target.push(&env);
    let home = tempfile::tempdir().unwrap();
    let (_t, dir) = clone_dir();
    let o = target.clone_cmd(home.path(), &dir, &[]).output().unwrap();
    assert_eq!(o.status.code(), Some(0), "clone: {}", text(&o));
    write(env.root(), "later.txt", b"later\n");
    let later = checkpoint(&env, "default", "m5");
    let later_tree = read_tree(env.root());
    target.push(&env);
    let o = in_clone(home.path(), &dir, &target, &["pull"]);
    assert_eq!(o.status.code(), Some(0), "pull: {}", text(&o));
    assert_eq!(
        read_tree(&dir),
        trees.last().unwrap().1,
        "pull changes no file"
    );
    let o = in_clone(home.path(), &dir, &target, &["restore", &later, "--all"]);
    assert_eq!(o.status.code(), Some(0), "restore: {}", text(&o));
    assert_eq!(read_tree(&dir), later_tree);
    // Recorded here since: another pull would interleave two histories, and is refused.
    write(env.root(), "even-later.txt", b"x\n");
    checkpoint(&env, "default", "m6");
    target.push(&env);
    let o = in_clone(
        home.path(),
        &dir,
        &target,
        &["checkpoint", "--message", "mine"],
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let o = in_clone(home.path(), &dir, &target, &["pull"]);
    assert_eq!(
        o.status.code(),
        Some(1),
        "pull after own history: {}",
        text(&o)
    );
    assert!(text(&o).contains("interleave"), "{}", text(&o));
}

/// A clone of an old checkpoint has only its tree's packs: restoring a newer checkpoint whose
/// content is elsewhere is exit 7 with the way out (pull), and works after a pull.
fn content_a_clone_lacks_comes_with_pull(target: Target) {
    let env = Env::new();
    let trees = history(&env, 6);
    target.add(&env);
    target.push(&env);
    let home = tempfile::tempdir().unwrap();
    let (_t, dir) = clone_dir();
    let o = target
        .clone_cmd(home.path(), &dir, &["--json", "--checkpoint", &trees[0].0])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "clone: {}", text(&o));
    let report: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(report["packs_left"].as_u64().unwrap() >= 1, "{report}");
    let (newest, tree) = trees.last().unwrap();
    let o = in_clone(home.path(), &dir, &target, &["restore", newest, "--all"]);
    assert_eq!(
        o.status.code(),
        Some(7),
        "restore before pull: {}",
        text(&o)
    );
    assert!(
        text(&o).contains("pull"),
        "the hint names pull: {}",
        text(&o)
    );
    assert_eq!(
        read_tree(&dir),
        trees[0].1,
        "a refused restore writes nothing"
    );
    let o = in_clone(home.path(), &dir, &target, &["pull"]);
    assert_eq!(o.status.code(), Some(0), "pull: {}", text(&o));
    let o = in_clone(home.path(), &dir, &target, &["restore", newest, "--all"]);
    assert_eq!(o.status.code(), Some(0), "restore after pull: {}", text(&o));
    assert_eq!(&read_tree(&dir), tree);
}

/// Killed after the first pack, and again before the manifest: the next push completes, and
/// every object is in the remote once.
fn killed_push_resumes(target: Target) {
    let env = Env::new();
    let trees = history(&env, 3);
    target.add(&env);
    for point in ["push-after-pack:1", "push-before-manifest"] {
        target.killed_push(&env, point, &[]);
    }
    let done = target.push(&env);
    assert!(done["manifest"].is_string(), "{done}");
    if target.dir.is_some() {
        let objects = target.objects();
        let local_packs = env.packs().len();
        assert_eq!(objects["packs"].len(), local_packs, "{objects:?}");
        assert_eq!(objects["index"].len(), local_packs, "{objects:?}");
        assert_eq!(objects["oplog"].len(), 1, "{objects:?}");
        assert_eq!(objects["manifests"].len(), 1, "{objects:?}");
    }
    let home = tempfile::tempdir().unwrap();
    let (_t, dir) = clone_dir();
    let o = target.clone_cmd(home.path(), &dir, &[]).output().unwrap();
    assert_eq!(o.status.code(), Some(0), "clone: {}", text(&o));
    assert_eq!(read_tree(&dir), trees.last().unwrap().1);
}

/// A clone killed after writing the tree, before registering it: the next clone into the same
/// directory undoes the half-done one and completes.
#[test]
fn a_killed_clone_is_undone_by_the_next() {
    let target = Target::file();
    let env = Env::new();
    let trees = history(&env, 7);
    target.add(&env);
    target.push(&env);
    let home = tempfile::tempdir().unwrap();
    let (_t, dir) = clone_dir();
    let o = target
        .clone_cmd(home.path(), &dir, &[])
        .env("REWIND_FAILPOINT", "clone-after-materialise")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), None, "killed: {}", text(&o));
    assert!(
        dir.join("a.txt").exists(),
        "the tree was written before the kill"
    );
    let o = target.clone_cmd(home.path(), &dir, &[]).output().unwrap();
    assert_eq!(o.status.code(), Some(0), "clone again: {}", text(&o));
    assert_eq!(read_tree(&dir), trees.last().unwrap().1);
    let o = in_clone(home.path(), &dir, &target, &["fsck"]);
    assert_eq!(o.status.code(), Some(0), "fsck: {}", text(&o));
    let left: Vec<_> = std::fs::read_dir(home.path().join("tmp"))
        .map(|r| r.flatten().map(|e| e.file_name()).collect())
        .unwrap_or_default();
    assert!(left.is_empty(), "nothing left in tmp: {left:?}");
}

/// The S3 server goes away under a push and comes back: a push to a server that is down fails
/// with an error (not a signal, no secret in it) and records nothing as pushed; a push killed
/// after its packs went up, then the server restarted (its process gone and started again on
/// the same data), then the push run again, completes; a clone then gives the last tree and its
/// fsck is clean.
#[test]
fn a_push_across_a_server_restart_loses_nothing_s3() {
    let mut target = Target::s3();
    let env = Env::new();
    let trees = history(&env, 4);
    target.add(&env);
    target.server.as_mut().unwrap().stop();
    let o = target.run(&env, &["push"]);
    assert!(
        matches!(o.status.code(), Some(c) if c != 0),
        "a push to a stopped server fails with an exit code: {}",
        text(&o)
    );
    for (_, secret) in &target.env {
        assert!(
            !text(&o).contains(secret.as_str()),
            "a secret in: {}",
            text(&o)
        );
    }
    target.server.as_mut().unwrap().resume();
    target.killed_push(&env, "push-before-manifest", &[]);
    target.server.as_mut().unwrap().restart();
    target.push(&env);
    let home = tempfile::tempdir().unwrap();
    let (_t, dir) = clone_dir();
    let o = target.clone_cmd(home.path(), &dir, &[]).output().unwrap();
    assert_eq!(o.status.code(), Some(0), "clone: {}", text(&o));
    assert_eq!(read_tree(&dir), trees.last().unwrap().1);
    let o = in_clone(home.path(), &dir, &target, &["fsck"]);
    assert_eq!(o.status.code(), Some(0), "fsck: {}", text(&o));
}

/// Two workspaces (of two state directories, as two machines) push into one remote at the same
/// time; each clones back exactly.
fn two_workspaces_push_at_once(target: Target) {
    // Two machines: two state directories, one remote.
    let a = Env::new();
    let b = Env::new();
    let ta = history(&a, 10);
    let tb = history(&b, 20);
    target.add(&a);
    target.add(&b);
    let spawn = |env: &Env| {
        let mut c = env.cmd(&["push"]);
        target.apply(&mut c);
        c.stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap()
    };
    let (pa, pb) = (spawn(&a), spawn(&b));
    for (p, name) in [(pa, "a"), (pb, "b")] {
        let o = p.wait_with_output().unwrap();
        assert_eq!(o.status.code(), Some(0), "push {name}: {}", text(&o));
    }
    for (trees, name) in [(&ta, "a"), (&tb, "b")] {
        let home = tempfile::tempdir().unwrap();
        let (_t, dir) = clone_dir();
        let (id, tree) = trees.last().unwrap();
        let o = target
            .clone_cmd(home.path(), &dir, &["--checkpoint", id])
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(0), "clone {name}: {}", text(&o));
        assert_eq!(&read_tree(&dir), tree, "clone of {name}");
    }
}

/// One byte flipped in a remote pack: clone exits 7 naming the pack, and writes nothing: the
/// directory stays absent (or empty), the state directory registers nothing.
fn a_flipped_byte_in_a_remote_pack_is_exit_7_and_nothing_written(target: Target) {
    if !has_files(&target) {
        return;
    }
    let env = Env::new();
    // One capture, nothing changed after: every object stored is one the tree needs.
    write(env.root(), "a.txt", b"alpha\n");
    write(env.root(), "b.bin", &noise(7, 300_000));
    init(&env);
    checkpoint(&env, "default", "m1");
    target.add(&env);
    target.push(&env);
    let packs = &target.objects()["packs"];
    assert!(!packs.is_empty());
    for pack in packs {
        let mut bytes = std::fs::read(pack).unwrap();
        // The first object's stored bytes start after the pack header (8) and its own (42).
        bytes[50] ^= 0x40;
        let mut perms = std::fs::metadata(pack).unwrap().permissions();
        perms.set_mode(0o644);
        std::fs::set_permissions(pack, perms).unwrap();
        std::fs::write(pack, &bytes).unwrap();
    }
    let home = tempfile::tempdir().unwrap();
    let (t, dir) = clone_dir();
    let o = target.clone_cmd(home.path(), &dir, &[]).output().unwrap();
    assert_eq!(o.status.code(), Some(7), "clone: {}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    let named = packs.iter().any(|p| {
        let name = p.file_name().unwrap().to_string_lossy();
        err.contains(name.trim_end_matches(".pack"))
    });
    assert!(named, "the damaged pack is named: {err}");
    assert!(!dir.exists(), "nothing written: the directory was not made");
    // An empty directory given stays empty.
    std::fs::create_dir(&dir).unwrap();
    let o = target.clone_cmd(home.path(), &dir, &[]).output().unwrap();
    assert_eq!(o.status.code(), Some(7), "clone: {}", text(&o));
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0);
    let roots = std::fs::read_dir(home.path().join("roots"))
        .map(|r| r.count())
        .unwrap_or(0);
    assert_eq!(roots, 0, "no workspace registered");
    drop(t);
}

/// Whether the target's objects can be reached as files (else the test is skipped, saying so).
fn has_files(t: &Target) -> bool {
    if t.dir.is_none() {
        eprintln!("skipped: damaging S3 objects needs a server that keeps them as files (s3s-fs)");
    }
    t.dir.is_some()
}

/// A missing remote pack: exit 7 naming it.
fn a_missing_remote_pack_is_exit_7(target: Target) {
    if !has_files(&target) {
        return;
    }
    let env = Env::new();
    write(env.root(), "b.bin", &noise(8, 300_000));
    init(&env);
    checkpoint(&env, "default", "m1");
    target.add(&env);
    target.push(&env);
    let packs = target.objects()["packs"].clone();
    for p in &packs {
        std::fs::remove_file(p).unwrap();
    }
    let home = tempfile::tempdir().unwrap();
    let (_t, dir) = clone_dir();
    let o = target.clone_cmd(home.path(), &dir, &[]).output().unwrap();
    assert_eq!(o.status.code(), Some(7), "clone: {}", text(&o));
    assert!(text(&o).contains("packs/"), "{}", text(&o));
    assert!(!dir.exists());
}

/// Credentials given through the environment appear in no output and in no file of the state
/// directory (the op log included), whether the remote answers or not.
#[test]
fn credentials_never_leak() {
    const KEY: &str = "AKIAREWINDTESTKEYMARK";
    const SECRET: &str = "rewind-test-secret-MARK-0123456789";
    const TOKEN: &str = "rewind-test-token-MARK-9876543210";
    let creds = |c: &mut Command| {
        c.env("AWS_ACCESS_KEY_ID", KEY)
            .env("AWS_SECRET_ACCESS_KEY", SECRET)
            .env("AWS_SESSION_TOKEN", TOKEN);
    };
    let env = Env::new();
    history(&env, 4);
    // An S3 remote nobody answers on (a closed port): the push fails, saying where, not what.
    let o = env.run(&[
        "remote",
        "add",
        "dead",
        "s3://bucket/prefix",
        "--endpoint",
        "http://127.0.0.1:9",
        "--region",
        "test",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let mut outputs = Vec::new();
    for args in [
        &["push", "dead"][..],
        &["--json", "push", "dead"],
        &["remote", "list"],
        &["--json", "remote", "list"],
    ] {
        let mut c = env.cmd(args);
        creds(&mut c);
        let o = c.output().unwrap();
        outputs.push((args.join(" "), o));
    }
    assert_eq!(
        outputs[0].1.status.code(),
        Some(1),
        "{}",
        text(&outputs[0].1)
    );
    assert!(
        String::from_utf8_lossy(&outputs[3].1.stdout).contains("environment"),
        "list says where credentials come from: {}",
        text(&outputs[3].1)
    );
    // A file remote with the same environment: pushes and clones work.
    let target = Target::file();
    let o = env.run(&["remote", "add", "origin", &target.url]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let mut c = env.cmd(&["push", "origin"]);
    creds(&mut c);
    let o = c.output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    outputs.push(("push origin".into(), o));
    let home = tempfile::tempdir().unwrap();
    let (_t, dir) = clone_dir();
    let mut c = target.clone_cmd(home.path(), &dir, &[]);
    creds(&mut c);
    let o = c.output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    outputs.push(("clone".into(), o));
    for (what, o) in &outputs {
        let all = text(o);
        for secret in [KEY, SECRET, TOKEN] {
            assert!(!all.contains(secret), "{what} printed a credential: {all}");
        }
    }
    for dir in [env.home.path(), home.path(), target.dir.as_deref().unwrap()] {
        for file in all_files(dir) {
            let bytes = std::fs::read(&file).unwrap_or_default();
            for secret in [KEY, SECRET, TOKEN] {
                let found = bytes.windows(secret.len()).any(|w| w == secret.as_bytes());
                assert!(!found, "{} holds a credential", file.display());
            }
        }
    }
}

pub(crate) fn all_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in rd.flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else {
                out.push(p);
            }
        }
    }
    out
}

/// Bad input is refused with what to do, and changes nothing.
#[test]
fn bad_input_is_refused_and_changes_nothing() {
    let env = Env::new();
    let cfg = env.home.path().join("config.toml");
    std::fs::write(&cfg, "# my settings\n[capture]\nmax_file_size = \"1G\"\n").unwrap();
    let before = std::fs::read(&cfg).unwrap();
    for (args, code) in [
        (&["remote", "add", "o", "http://x/y"][..], 2),
        (&["remote", "add", "o", "s3://k:s@bucket/p"], 2),
        (&["remote", "add", "o", "file://relative"], 2),
        (&["remote", "add", "bad name", "file:///x"], 2),
        (
            &[
                "remote",
                "add",
                "o",
                "s3://b/p",
                "--endpoint",
                "http://k:s@h:1",
            ],
            2,
        ),
        (&["remote", "remove", "nothing"], 1),
    ] {
        let o = env.run(args);
        assert_eq!(o.status.code(), Some(code), "{args:?}: {}", text(&o));
        assert_eq!(
            std::fs::read(&cfg).unwrap(),
            before,
            "{args:?} changed the file"
        );
    }
    // Added, then added again (refused), then removed: the user's lines stay.
    let o = env.run(&["remote", "add", "o", "file:///srv/rewind"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let o = env.run(&["remote", "add", "o", "file:///elsewhere"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    let o = env.run(&["remote", "remove", "o"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert_eq!(std::fs::read(&cfg).unwrap(), before);
    // A workspace file may not name a remote (an agent can write it).
    write(
        env.root(),
        ".rewind.toml",
        b"[remote.evil]\nurl = \"file:///srv/elsewhere\"\n",
    );
    let o = env.run(&["status"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(text(&o).contains("remote"), "{}", text(&o));
    std::fs::remove_file(env.root().join(".rewind.toml")).unwrap();
    // Clone into a directory that is not empty: refused before anything is fetched.
    let target = Target::file();
    init(&env);
    checkpoint(&env, "default", "m1");
    target.add(&env);
    target.push(&env);
    let home = tempfile::tempdir().unwrap();
    let (_t, dir) = clone_dir();
    std::fs::create_dir(&dir).unwrap();
    std::fs::write(dir.join("mine"), b"keep").unwrap();
    let o = target.clone_cmd(home.path(), &dir, &[]).output().unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert_eq!(std::fs::read(dir.join("mine")).unwrap(), b"keep");
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 1);
    // A URL with nothing pushed.
    let empty = tempfile::tempdir().unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_rewind"))
        .env("REWIND_HOME", home.path())
        .args(["clone", &format!("file://{}", empty.path().display())])
        .arg(dir.with_file_name("other"))
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(text(&o).contains("nothing was pushed"), "{}", text(&o));
}

/// `[remote] auto_push = "checkpoint"`: a checkpoint starts a push of its own in the background
/// (the checkpoint command returns first); within a bounded wait the remote holds that
/// checkpoint, and a clone of it gives its tree.
fn a_checkpoint_pushes_by_itself(target: Target) {
    let env = Env::new();
    write(env.root(), "a.txt", b"alpha\n");
    init(&env);
    target.add(&env);
    let cfg = env.home.path().join("config.toml");
    let mut config = std::fs::read_to_string(&cfg).unwrap();
    config.push_str("\n[remote]\nauto_push = \"checkpoint\"\n");
    std::fs::write(&cfg, config).unwrap();
    write(env.root(), "dir/b.bin", &noise(11, 100_000));
    // Through the target's environment: the push it starts inherits the credentials.
    let o = target.run(&env, &["--json", "checkpoint", "--message", "m1"]);
    assert_eq!(o.status.code(), Some(0), "checkpoint: {}", text(&o));
    let id = serde_json::from_slice::<serde_json::Value>(&o.stdout).unwrap()["id"]
        .as_str()
        .unwrap()
        .to_string();
    let tree = read_tree(env.root());
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let home = tempfile::tempdir().unwrap();
        let (_t, dir) = clone_dir();
        let o = target
            .clone_cmd(home.path(), &dir, &["--checkpoint", &id])
            .output()
            .unwrap();
        if o.status.code() == Some(0) {
            assert_eq!(read_tree(&dir), tree, "the clone of the pushed checkpoint");
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the checkpoint never reached the remote within 60 s: {}",
            text(&o)
        );
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
}

/// Sets the `version` of every manifest of a `file://` remote.
fn set_manifest_versions(target: &Target, version: u64) {
    for m in &target.objects()["manifests"] {
        let mut v: serde_json::Value = serde_json::from_slice(&std::fs::read(m).unwrap()).unwrap();
        v["version"] = version.into();
        std::fs::write(m, serde_json::to_vec(&v).unwrap()).unwrap();
    }
}

/// Manifest versions: a history whose manifest is version 2 (written before fan-out trees)
/// still clones, and the next push writes a version 3 one; a version this binary does not
/// know is refused with a hint to upgrade and nothing written, as a binary that writes
/// version 2 refuses a history whose packs may hold fan-out trees.
#[test]
fn manifest_versions_older_read_newer_refused() {
    let target = Target::file();
    let env = Env::new();
    let trees = history(&env, 9);
    target.add(&env);
    target.push(&env);
    set_manifest_versions(&target, 2);
    let home = tempfile::tempdir().unwrap();
    let (_t, dir) = clone_dir();
    let o = target.clone_cmd(home.path(), &dir, &[]).output().unwrap();
    assert_eq!(
        o.status.code(),
        Some(0),
        "clone of a version 2 history: {}",
        text(&o)
    );
    assert_eq!(&read_tree(&dir), &trees.last().unwrap().1);
    let again = target.push(&env);
    assert!(
        !again["manifest"].is_null(),
        "rewritten at version 3: {again}"
    );
    let newest = target.objects()["manifests"].iter().max().cloned().unwrap();
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(newest).unwrap()).unwrap();
    assert_eq!(v["version"], 3, "{v}");

    set_manifest_versions(&target, 4);
    let home = tempfile::tempdir().unwrap();
    let (_t, dir) = clone_dir();
    let o = target.clone_cmd(home.path(), &dir, &[]).output().unwrap();
    assert_ne!(o.status.code(), Some(0), "clone: {}", text(&o));
    assert!(text(&o).contains("upgrade rewind"), "{}", text(&o));
    assert!(
        !dir.exists() || all_files(&dir).is_empty(),
        "nothing written"
    );
}

/// Each scenario above as two tests: `on_file::NAME` against a `file://` remote, `on_s3::NAME`
/// against a real S3 server on loopback.
macro_rules! on_both_remotes {
    ($($name:ident),* $(,)?) => {
        mod on_file {
            $(#[test]
            fn $name() {
                super::$name(super::Target::file());
            })*
        }
        mod on_s3 {
            $(#[test]
            fn $name() {
                super::$name(super::Target::s3());
            })*
        }
    };
}

on_both_remotes!(
    push_clone_restore_every_checkpoint,
    content_a_clone_lacks_comes_with_pull,
    pull_brings_new_history,
    killed_push_resumes,
    two_workspaces_push_at_once,
    a_flipped_byte_in_a_remote_pack_is_exit_7_and_nothing_written,
    a_missing_remote_pack_is_exit_7,
    a_checkpoint_pushes_by_itself,
);

/// Against a real S3 server: the credentials that worked appear in no output of push, pull,
/// clone or `remote list`, and in no file of either state directory.
#[test]
fn credentials_never_leak_s3() {
    let target = Target::s3();
    let env = Env::new();
    history(&env, 5);
    target.add(&env);
    let mut outputs = vec![
        ("push", target.run(&env, &["push"])),
        ("push --json", target.run(&env, &["--json", "push"])),
        (
            "remote list",
            target.run(&env, &["--json", "remote", "list"]),
        ),
    ];
    let home = tempfile::tempdir().unwrap();
    let (_t, dir) = clone_dir();
    outputs.push((
        "clone",
        target.clone_cmd(home.path(), &dir, &[]).output().unwrap(),
    ));
    outputs.push(("pull", in_clone(home.path(), &dir, &target, &["pull"])));
    for (what, o) in &outputs {
        assert_eq!(o.status.code(), Some(0), "{what}: {}", text(o));
        for (_, secret) in &target.env {
            assert!(
                !text(o).contains(secret.as_str()),
                "{what} printed a credential"
            );
        }
    }
    for d in [env.home.path(), home.path()] {
        for file in all_files(d) {
            let bytes = std::fs::read(&file).unwrap_or_default();
            for (_, secret) in &target.env {
                let found = bytes.windows(secret.len()).any(|w| w == secret.as_bytes());
                assert!(!found, "{} holds a credential", file.display());
            }
        }
    }
}

/// The same scenarios' kin for encrypted remotes (declared after the macro, which it uses).
mod encryption;
