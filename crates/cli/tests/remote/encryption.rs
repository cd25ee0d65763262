//! Encrypted remotes through the real binary, on a `file://` remote and a real S3 server:
//! push, clone with the key on a fresh machine, every checkpoint restored; the objects as
//! stored hold nothing of the tree (contents, names, a secret marker, ids); no key, another key,
//! or an encryption that does not match the remote's is refused before anything is read or
//! written; a flipped byte in a sealed pack is exit 7 naming it; the key appears in no output,
//! argument, configuration or state file; remote gc works on it, its marks sealed too.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Output;

use super::{all_files, clone_dir, has_files, history, in_clone, Target};
use crate::common::rewind::{checkpoint, init, read_tree, write};
use crate::common::{noise, text, Env};

/// A line of a file in the tree that must never be readable in the remote.
const MARKER: &str = "REWIND-SECRET-MARKER-a91f3c";

impl Target {
    /// `rewind remote add NAME URL … EXTRA…` in `env`'s state directory.
    fn add_with(&self, env: &Env, name: &str, extra: &[&str]) -> Output {
        let mut args = vec!["remote", "add", name, self.url.as_str()];
        if let Some(e) = &self.endpoint {
            args.extend(["--endpoint", e.as_str()]);
        }
        if let Some(r) = &self.region {
            args.extend(["--region", r.as_str()]);
        }
        args.extend(extra);
        env.run(&args)
    }

    /// Every file the remote's objects are stored in (for S3: the server's files of them).
    fn stored_files(&self) -> Vec<PathBuf> {
        all_files(self.dir.as_ref().expect("objects as files"))
    }
}

/// A copy of `key` on "another machine" (its own directory), mode 0600.
fn copy_key(key: &Path) -> (tempfile::TempDir, PathBuf) {
    let t = tempfile::tempdir().unwrap();
    let p = t.path().join("origin.key");
    std::fs::copy(key, &p).unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).unwrap();
    (t, p)
}

/// A key file holding another key.
fn other_key(dir: &Path) -> PathBuf {
    let p = dir.join("other.key");
    let hex: String = noise(4242, 32).iter().map(|b| format!("{b:02x}")).collect();
    std::fs::write(&p, format!("{hex}\n")).unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).unwrap();
    p
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

/// An encrypted workspace: the marker in a file, the usual history, `origin` added with
/// `--encrypt`; its key file and the key (hex) in it.
fn encrypted(env: &Env, target: &Target) -> (Vec<(String, super::Tree)>, PathBuf, String) {
    write(
        env.root(),
        "notes/secret-plans.txt",
        format!("{MARKER}\n").as_bytes(),
    );
    let trees = history(env, 31);
    let o = target.add_with(env, "origin", &["--encrypt"]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "remote add --encrypt: {}",
        text(&o)
    );
    let key = env.home.path().join("keys/origin.key");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("back") && err.contains(&key.display().to_string()),
        "says where the key is and to back it up: {}",
        text(&o)
    );
    let mode = std::fs::metadata(&key).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600, "the key file is the user's alone");
    let hex = std::fs::read_to_string(&key).unwrap().trim().to_string();
    assert_eq!(hex.len(), 64, "32 bytes as hex");
    (trees, key, hex)
}

fn encrypted_push_clone_restore_and_nothing_leaks(target: Target) {
    let env = Env::new();
    let (trees, key, hex) = encrypted(&env, &target);
    let mut outputs: Vec<(String, Output)> = Vec::new();
    let config = std::fs::read_to_string(env.home.path().join("config.toml")).unwrap();
    assert!(
        config.contains("key_file = \"keys/origin.key\""),
        "{config}"
    );
    // The push, watched: no process's arguments or environment carry the key.
    let mut c = env.cmd(&["--json", "push"]);
    target.apply(&mut c);
    let mut child = c
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let mut seen = Vec::new();
    while child.try_wait().unwrap().is_none() {
        for f in ["cmdline", "environ"] {
            if let Ok(b) = std::fs::read(format!("/proc/{pid}/{f}")) {
                seen.push(b);
            }
        }
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(0), "push: {}", text(&o));
    assert!(!seen.is_empty(), "the push was seen running");
    for b in &seen {
        assert!(
            !contains(b, hex.as_bytes()),
            "the key in the push's arguments or environment"
        );
    }
    let first: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(first["packs"].as_u64().unwrap() >= 1, "{first}");
    outputs.push(("push".into(), o));
    let again = target.run(&env, &["--json", "push"]);
    assert_eq!(again.status.code(), Some(0), "push again: {}", text(&again));
    let report: serde_json::Value = serde_json::from_slice(&again.stdout).unwrap();
    assert_eq!(report["packs"], 0, "{report}");
    assert!(report["manifest"].is_null(), "nothing new: {report}");
    outputs.push(("push again".into(), again));
    outputs.push(("list".into(), target.run(&env, &["remote", "list"])));
    outputs.push((
        "list --json".into(),
        target.run(&env, &["--json", "remote", "list"]),
    ));
    assert!(
        String::from_utf8_lossy(&outputs.last().unwrap().1.stdout).contains("origin.key"),
        "list names the key file: {}",
        text(&outputs.last().unwrap().1)
    );

    // Another machine: a fresh state directory and a copy of the key file.
    let (_k, key2) = copy_key(&key);
    let home = tempfile::tempdir().unwrap();
    let (_t, dir) = clone_dir();
    let key2s = key2.display().to_string();
    let o = target
        .clone_cmd(home.path(), &dir, &["--key-file", &key2s])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "clone: {}", text(&o));
    assert_eq!(&read_tree(&dir), &trees.last().unwrap().1);
    outputs.push(("clone".into(), o));
    // The clone pulls with the key file it was given.
    let o = in_clone(home.path(), &dir, &target, &["pull"]);
    assert_eq!(o.status.code(), Some(0), "pull: {}", text(&o));
    outputs.push(("pull".into(), o));
    for (id, tree) in &trees {
        let o = in_clone(home.path(), &dir, &target, &["restore", id, "--all"]);
        assert_eq!(o.status.code(), Some(0), "restore {id}: {}", text(&o));
        assert_eq!(&read_tree(&dir), tree, "checkpoint {id} in the clone");
    }
    let o = in_clone(home.path(), &dir, &target, &["fsck"]);
    assert_eq!(o.status.code(), Some(0), "fsck: {}", text(&o));
    outputs.push((
        "list in the clone".into(),
        in_clone(home.path(), &dir, &target, &["--json", "remote", "list"]),
    ));

    // The key: in no output, in no file of either state directory but the key file itself
    // (config.toml names its path only; the op log and the tables nothing of it).
    let raw: Vec<u8> = (0..32)
        .map(|i| u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).unwrap())
        .collect();
    for (what, o) in &outputs {
        let all = [&o.stdout[..], &o.stderr[..]].concat();
        assert!(!contains(&all, hex.as_bytes()), "{what} printed the key");
    }
    for d in [env.home.path(), home.path()] {
        for f in all_files(d) {
            if f == key {
                continue;
            }
            let b = std::fs::read(&f).unwrap_or_default();
            assert!(
                !contains(&b, hex.as_bytes()) && !contains(&b, &raw),
                "{} holds the key",
                f.display()
            );
        }
    }

    // What the remote stores: nothing of the tree, its names, the marker, the ids, the key.
    if !has_files(&target) {
        return;
    }
    let c_bin = noise(31, 200_000);
    let big = noise(32, 3 << 20);
    let mut secrets: Vec<(String, Vec<u8>)> = vec![
        ("the marker".into(), MARKER.as_bytes().to_vec()),
        ("a file name".into(), b"secret-plans".to_vec()),
        ("a file name".into(), b"big.bin".to_vec()),
        ("a file name".into(), b"run.sh".to_vec()),
        ("file content".into(), b"alpha 31".to_vec()),
        ("file content".into(), b"echo hi".to_vec()),
        ("file content".into(), c_bin[1000..1032].to_vec()),
        ("file content".into(), big[2_000_000..2_000_032].to_vec()),
        ("the key".into(), hex.as_bytes().to_vec()),
        ("the key".into(), raw.clone()),
    ];
    for (id, _) in &trees {
        secrets.push((format!("checkpoint id {id}"), id.as_bytes().to_vec()));
    }
    let files = target.stored_files();
    assert!(files.len() >= 5, "{files:?}");
    let mut sealed = 0;
    for f in &files {
        let b = std::fs::read(f).unwrap();
        for (what, s) in &secrets {
            assert!(!contains(&b, s), "{} holds {what}", f.display());
        }
        if b.starts_with(b"RWSEAL\0\x01") {
            sealed += 1;
        }
    }
    let objects = target.objects();
    let count: usize = objects.values().map(Vec::len).sum();
    assert_eq!(
        sealed, count,
        "every object but config is sealed: {objects:?}"
    );
    let config: serde_json::Value = serde_json::from_slice(
        &std::fs::read(target.dir.as_ref().unwrap().join("config")).unwrap(),
    )
    .unwrap();
    assert_eq!(
        config["encryption"]["scheme"], "xchacha20poly1305-stream-1m",
        "{config}"
    );
    // Segments are named by a keyed hash: not the plain hash of anything here.
    for seg in &objects["oplog"] {
        let name = seg.file_stem().unwrap().to_string_lossy().into_owned();
        assert_eq!(name.len(), 64, "{name}");
    }
}

/// Without the key, with another key, with a key file others may read, or with an encryption
/// that does not match the remote's: refused with what to do, before anything is read or
/// written (the clone's directory untouched, nothing uploaded).
fn a_missing_or_wrong_key_is_refused_and_changes_nothing(target: Target) {
    let env = Env::new();
    let (trees, key, _hex) = encrypted(&env, &target);
    target.push(&env);
    let before = target.dir.as_ref().map(|_| target.stored_files());
    let scratch = tempfile::tempdir().unwrap();
    let wrong = other_key(scratch.path());
    let wrongs = wrong.display().to_string();
    let open = scratch.path().join("open.key");
    std::fs::copy(&key, &open).unwrap();
    std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o644)).unwrap();
    let opens = open.display().to_string();

    let home = tempfile::tempdir().unwrap();
    let (_t, dir) = clone_dir();
    for (extra, says) in [
        (&[][..], "--key-file"),
        (&["--key-file", wrongs.as_str()][..], "not the key"),
        (&["--key-file", opens.as_str()][..], "chmod 600"),
    ] {
        let o = target.clone_cmd(home.path(), &dir, extra).output().unwrap();
        assert_eq!(o.status.code(), Some(1), "clone {extra:?}: {}", text(&o));
        assert!(
            String::from_utf8_lossy(&o.stderr).contains(says),
            "clone {extra:?} says {says:?}: {}",
            text(&o)
        );
        assert!(!dir.exists(), "clone {extra:?}: the directory was not made");
        // An empty directory given stays empty.
        std::fs::create_dir(&dir).unwrap();
        let o = target.clone_cmd(home.path(), &dir, extra).output().unwrap();
        assert_eq!(o.status.code(), Some(1), "clone {extra:?}: {}", text(&o));
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0);
        std::fs::remove_dir(&dir).unwrap();
    }
    let roots = std::fs::read_dir(home.path().join("roots"))
        .map(|r| r.count())
        .unwrap_or(0);
    assert_eq!(roots, 0, "no workspace registered");

    // Pushes into it from another workspace: without a key, with another key.
    let other = Env::new();
    write(other.root(), "x.txt", b"other\n");
    init(&other);
    checkpoint(&other, "default", "o1");
    target.add(&other);
    let o = target.run(&other, &["push"]);
    assert_eq!(
        o.status.code(),
        Some(1),
        "push without the key: {}",
        text(&o)
    );
    assert!(text(&o).contains("is encrypted"), "{}", text(&o));
    let o = other.run(&["remote", "remove", "origin"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let o = target.add_with(&other, "origin", &["--key-file", &wrongs]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let o = target.run(&other, &["push"]);
    assert_eq!(
        o.status.code(),
        Some(1),
        "push with another key: {}",
        text(&o)
    );
    assert!(text(&o).contains("not the key"), "{}", text(&o));
    if let Some(before) = &before {
        assert_eq!(&target.stored_files(), before, "nothing was uploaded");
    }
    // With the right key it works.
    let o = other.run(&["remote", "remove", "origin"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let (_k, copy) = copy_key(&key);
    let o = target.add_with(
        &other,
        "origin",
        &["--key-file", &copy.display().to_string()],
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let o = target.run(&other, &["push"]);
    assert_eq!(o.status.code(), Some(0), "push with the key: {}", text(&o));
    let (_t2, dir2) = clone_dir();
    let o = target
        .clone_cmd(
            home.path(),
            &dir2,
            &[
                "--key-file",
                &copy.display().to_string(),
                "--checkpoint",
                &trees[0].0,
            ],
        )
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "clone: {}", text(&o));
    assert_eq!(read_tree(&dir2), trees[0].1);
}

/// The reverse: a plain remote is not pushed to, or read, with a key.
fn an_encrypting_configuration_refuses_a_plain_remote(target: Target) {
    let env = Env::new();
    write(env.root(), "a.txt", b"alpha\n");
    init(&env);
    checkpoint(&env, "default", "m1");
    target.add(&env);
    target.push(&env);
    let config = target
        .dir
        .as_ref()
        .map(|d| std::fs::read(d.join("config")).unwrap());
    if let Some(c) = &config {
        let c: serde_json::Value = serde_json::from_slice(c).unwrap();
        assert!(c["encryption"].is_null(), "a plain remote says so: {c}");
    }
    let before = target.dir.as_ref().map(|_| target.stored_files());
    let other = Env::new();
    write(other.root(), "b.txt", b"bravo\n");
    init(&other);
    checkpoint(&other, "default", "o1");
    let o = target.add_with(&other, "origin", &["--encrypt"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let o = target.run(&other, &["push"]);
    assert_eq!(
        o.status.code(),
        Some(1),
        "encrypted push to a plain remote: {}",
        text(&o)
    );
    assert!(text(&o).contains("not encrypted"), "{}", text(&o));
    if let Some(before) = &before {
        assert_eq!(&target.stored_files(), before, "nothing was uploaded");
    }
    let key = other
        .home
        .path()
        .join("keys/origin.key")
        .display()
        .to_string();
    let home = tempfile::tempdir().unwrap();
    let (_t, dir) = clone_dir();
    let o = target
        .clone_cmd(home.path(), &dir, &["--key-file", &key])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1), "clone with a key: {}", text(&o));
    assert!(!dir.exists());
    // Without the key, as always.
    let o = target.clone_cmd(home.path(), &dir, &[]).output().unwrap();
    assert_eq!(o.status.code(), Some(0), "clone: {}", text(&o));
}

/// One byte flipped in a sealed pack: it does not open; clone exits 7 naming it, and writes
/// nothing.
fn a_flipped_byte_in_an_encrypted_pack_is_exit_7_and_nothing_written(target: Target) {
    if !has_files(&target) {
        return;
    }
    let env = Env::new();
    write(env.root(), "a.txt", b"alpha\n");
    write(env.root(), "b.bin", &noise(7, 300_000));
    init(&env);
    checkpoint(&env, "default", "m1");
    let o = target.add_with(&env, "origin", &["--encrypt"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    target.push(&env);
    let key = env
        .home
        .path()
        .join("keys/origin.key")
        .display()
        .to_string();
    let packs = &target.objects()["packs"];
    assert!(!packs.is_empty());
    for pack in packs {
        let mut bytes = std::fs::read(pack).unwrap();
        bytes[200] ^= 0x01;
        std::fs::set_permissions(pack, std::fs::Permissions::from_mode(0o644)).unwrap();
        std::fs::write(pack, &bytes).unwrap();
    }
    let home = tempfile::tempdir().unwrap();
    let (_t, dir) = clone_dir();
    let o = target
        .clone_cmd(home.path(), &dir, &["--key-file", &key])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(7), "clone: {}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    let named = packs.iter().any(|p| {
        let name = p.file_name().unwrap().to_string_lossy();
        err.contains(name.as_ref())
    });
    assert!(named, "the damaged pack is named: {err}");
    assert!(err.contains("authenticate"), "{err}");
    assert!(!dir.exists(), "nothing written: the directory was not made");
    let roots = std::fs::read_dir(home.path().join("roots"))
        .map(|r| r.count())
        .unwrap_or(0);
    assert_eq!(roots, 0, "no workspace registered");
}

/// Remote gc on an encrypted remote: its marks are sealed like every other object, what the
/// policy dropped goes after the grace period, and the head still clones with the key.
fn remote_gc_works_on_an_encrypted_remote(target: Target) {
    let env = Env::new();
    let (mut trees, key, _hex) = encrypted(&env, &target);
    let gc_run = |args: &[&str]| -> serde_json::Value {
        let mut all = vec!["--json"];
        all.extend_from_slice(args);
        let mut c = env.cmd(&all);
        target.apply(&mut c);
        let o = c
            .env("REWIND_REMOTE_GC_WINDOW_MS", "1000")
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(0), "{args:?}: {}", text(&o));
        serde_json::from_slice(&o.stdout).unwrap()
    };
    gc_run(&["push"]);
    for i in 0..2 {
        write(env.root(), "churn.bin", &noise(200 + i, 2 << 20));
        trees.push((
            checkpoint(&env, "default", &format!("churn {i}")),
            read_tree(env.root()),
        ));
        gc_run(&["push"]);
    }
    let gc = [
        "gc",
        "--remote",
        "origin",
        "--grace",
        "2s",
        "--keep",
        "1",
        "--max-age",
        "1s",
    ];
    let past_grace = std::time::Duration::from_millis(2200);
    std::thread::sleep(past_grace);
    let first = gc_run(&gc)["remote"].clone();
    assert!(first["marked"].as_u64().unwrap() >= 1, "{first}");
    let mark = first["mark"]
        .as_str()
        .expect("a mark was written")
        .to_string();
    if let Some(dir) = &target.dir {
        let b = std::fs::read(dir.join(&mark)).unwrap();
        assert!(b.starts_with(b"RWSEAL\0\x01"), "the mark is sealed");
        assert!(!contains(&b, b"rewind-gc-mark"), "nothing of it readable");
    }
    std::thread::sleep(past_grace);
    let second = gc_run(&gc)["remote"].clone();
    assert!(second["deleted"].as_u64().unwrap() >= 1, "{second}");
    let (_k, key2) = copy_key(&key);
    let home = tempfile::tempdir().unwrap();
    let (_t, dir) = clone_dir();
    let o = target
        .clone_cmd(
            home.path(),
            &dir,
            &["--key-file", &key2.display().to_string()],
        )
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "clone: {}", text(&o));
    assert_eq!(&read_tree(&dir), &trees.last().unwrap().1);
    let o = in_clone(home.path(), &dir, &target, &["fsck"]);
    assert_eq!(o.status.code(), Some(0), "fsck: {}", text(&o));
}

on_both_remotes!(
    encrypted_push_clone_restore_and_nothing_leaks,
    remote_gc_works_on_an_encrypted_remote,
    a_missing_or_wrong_key_is_refused_and_changes_nothing,
    an_encrypting_configuration_refuses_a_plain_remote,
    a_flipped_byte_in_an_encrypted_pack_is_exit_7_and_nothing_written,
);
