//! Remote garbage collection through the real binary (`gc --remote`): what a workspace's own gc
//! dropped leaves the remote after the grace period and nothing kept does; a push that relies
//! on a marked object keeps it (its veto); a gc killed midway loses nothing; gc in a loop
//! beside pushes (some killed, then resumed) loses nothing; a dry run writes nothing.
//!
//! The protocol's window is shortened to 1 s (`REWIND_REMOTE_GC_WINDOW_MS`) so grace
//! periods of a second can be used; every command of a test runs with it. Each scenario runs
//! against a `file://` remote and against a real S3 server on loopback.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Output;
use std::time::{Duration, Instant};

use crate::common::rewind::{checkpoint, read_tree, write};
use crate::common::{noise, text, Env};
use crate::remote::{all_files, clone_dir, history, in_clone, Target};

const WINDOW_MS: &str = "1000";
/// The grace period of these tests, and a wait past it.
const GRACE: &str = "2s";
const PAST_GRACE: Duration = Duration::from_millis(2200);

fn run(target: &Target, env: &Env, args: &[&str]) -> Output {
    let mut c = env.cmd(args);
    target.apply(&mut c);
    c.env("REWIND_REMOTE_GC_WINDOW_MS", WINDOW_MS);
    c.output().unwrap()
}

fn ok(target: &Target, env: &Env, args: &[&str]) -> serde_json::Value {
    let mut all = vec!["--json"];
    all.extend_from_slice(args);
    let o = run(target, env, &all);
    assert_eq!(o.status.code(), Some(0), "{args:?}: {}", text(&o));
    serde_json::from_slice(&o.stdout).unwrap()
}

fn gc(target: &Target, env: &Env, extra: &[&str]) -> serde_json::Value {
    let mut args = vec!["gc", "--remote", "origin", "--grace", GRACE];
    args.extend_from_slice(extra);
    let r = ok(target, env, &args);
    r["remote"].clone()
}

/// Every object file of the remote (a directory, or the S3 server's), with its size; `None`
/// for a server that keeps objects otherwise.
fn remote_files(target: &Target) -> Option<BTreeMap<String, u64>> {
    let dir = target.dir.as_ref()?;
    Some(
        all_files(dir)
            .into_iter()
            .map(|p| {
                let size = std::fs::metadata(&p).map_or(0, |m| m.len());
                (p.strip_prefix(dir).unwrap().display().to_string(), size)
            })
            .collect(),
    )
}

fn stored_bytes(target: &Target) -> Option<u64> {
    remote_files(target).map(|f| f.values().sum())
}

/// Clones checkpoint `id` into a fresh state directory; checks its tree, fsck, and that every
/// other checkpoint of `kept` restores there.
fn clone_and_check(target: &Target, id: &str, kept: &[(String, crate::common::rewind::Tree)]) {
    let home = tempfile::tempdir().unwrap();
    let (_t, dir) = clone_dir();
    let o = target
        .clone_cmd(home.path(), &dir, &["--checkpoint", id])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "clone {id}: {}", text(&o));
    let o = in_clone(home.path(), &dir, target, &["pull"]);
    assert_eq!(o.status.code(), Some(0), "pull: {}", text(&o));
    let o = in_clone(home.path(), &dir, target, &["fsck"]);
    assert_eq!(o.status.code(), Some(0), "fsck of the clone: {}", text(&o));
    for (kid, tree) in kept {
        let o = in_clone(home.path(), &dir, target, &["restore", kid, "--all"]);
        assert_eq!(o.status.code(), Some(0), "restore {kid}: {}", text(&o));
        assert_eq!(&read_tree(&dir), tree, "checkpoint {kid} in the clone");
    }
}

/// Four checkpoints, then three of 2 MiB churn, each pushed; `gc --remote --keep 1` twice,
/// a grace period apart: the first marks what the compaction stopped listing, the second
/// deletes it. The remote shrinks; the head clones and restores; a collected checkpoint is
/// exit 7 in a clone (restore, and clone --checkpoint) with nothing written.
fn remote_gc_frees_what_the_policy_dropped(target: Target) {
    let env = Env::new();
    let mut trees = history(&env, 11);
    target.add(&env);
    ok(&target, &env, &["push"]);
    for i in 0..3 {
        write(env.root(), "churn.bin", &noise(100 + i, 2 << 20));
        trees.push((
            checkpoint(&env, "default", &format!("churn {i}")),
            read_tree(env.root()),
        ));
        ok(&target, &env, &["push"]);
    }
    let before = stored_bytes(&target);
    std::thread::sleep(PAST_GRACE);
    let first = gc(&target, &env, &["--keep", "1", "--max-age", "1s"]);
    assert_eq!(
        first["deleted"], 0,
        "nothing is deleted before the grace: {first}"
    );
    assert!(first["marked"].as_u64().unwrap() >= 3, "{first}");
    assert!(
        first["push"]["packs_unlisted"].as_u64().unwrap() >= 1,
        "{first}"
    );
    assert!(first["mark"].is_string(), "{first}");
    // Straight away again: the mark is younger than its grace; nothing goes.
    let again = gc(&target, &env, &["--keep", "1", "--max-age", "1s"]);
    assert_eq!(again["deleted"], 0, "{again}");
    std::thread::sleep(PAST_GRACE);
    let second = gc(&target, &env, &["--keep", "1", "--max-age", "1s"]);
    assert!(second["deleted"].as_u64().unwrap() >= 3, "{second}");
    assert!(
        second["deleted_bytes"].as_u64().unwrap() >= 4 << 20,
        "two of the three churned 2 MiB files go: {second}"
    );
    if let (Some(before), Some(after)) = (before, stored_bytes(&target)) {
        assert!(
            after + (4 << 20) <= before,
            "the remote shrinks: {before} -> {after} bytes"
        );
    }
    let (head, _) = trees.last().unwrap().clone();
    clone_and_check(&target, &head, &trees[trees.len() - 1..]);
    let o = run(&target, &env, &["fsck"]);
    assert_eq!(o.status.code(), Some(0), "fsck here: {}", text(&o));

    // A collected checkpoint in a clone: refused, exit 7, nothing written.
    let home = tempfile::tempdir().unwrap();
    let (_t, dir) = clone_dir();
    let o = target.clone_cmd(home.path(), &dir, &[]).output().unwrap();
    assert_eq!(o.status.code(), Some(0), "clone: {}", text(&o));
    let old = &trees[0].0;
    let o = in_clone(home.path(), &dir, &target, &["restore", old, "--all"]);
    assert_eq!(o.status.code(), Some(7), "restore collected: {}", text(&o));
    assert!(text(&o).contains("collected"), "{}", text(&o));
    assert_eq!(read_tree(&dir), trees.last().unwrap().1, "nothing written");
    let (_t2, dir2) = clone_dir();
    let o = target
        .clone_cmd(
            tempfile::tempdir().unwrap().path(),
            &dir2,
            &["--checkpoint", old],
        )
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(7), "clone collected: {}", text(&o));
    assert!(text(&o).contains("collected"), "{}", text(&o));
    assert!(!dir2.exists(), "a refused clone makes nothing");
}

/// A workspace with a history whose first push was killed before its manifest (its objects
/// in the remote, named by no manifest), and another workspace with the same remote (the
/// machine whose gc collects them).
fn killed_push_beside_another(
    target: &Target,
    seed: u64,
) -> (Env, Vec<(String, crate::common::rewind::Tree)>, Env) {
    let env = Env::new();
    let trees = history(&env, seed);
    target.add(&env);
    target.killed_push(&env, "push-before-manifest", &[]);
    let other = Env::new();
    write(other.root(), "o.txt", b"other\n");
    crate::common::rewind::init(&other);
    checkpoint(&other, "default", "other");
    target.add(&other);
    (env, trees, other)
}

/// A push killed before its manifest leaves objects no manifest names; another workspace's
/// gc marks them; the push run again relies on them: it vetoes them, waits the window out,
/// and writes its manifest. The sweep a grace period later keeps them, and the history clones.
fn a_push_keeps_the_marked_objects_it_relies_on(target: Target) {
    let (env, trees, other) = killed_push_beside_another(&target, 12);
    ok(&target, &other, &["push"]);
    std::thread::sleep(PAST_GRACE);
    let marked = gc(&target, &other, &[]);
    assert!(
        marked["marked"].as_u64().unwrap() >= 3,
        "the killed push's pack, index and segment are marked: {marked}"
    );
    let start = Instant::now();
    let pushed = ok(&target, &env, &["push"]);
    assert!(pushed["manifest"].is_string(), "{pushed}");
    assert!(
        start.elapsed() >= Duration::from_millis(1000),
        "the push waited the window out after its veto"
    );
    if let Some(files) = remote_files(&target) {
        assert!(
            files.keys().any(|k| k.starts_with("gc/vetoes/")),
            "a veto was written: {files:?}"
        );
    }
    std::thread::sleep(PAST_GRACE);
    let swept = gc(&target, &other, &[]);
    assert!(swept["kept"].as_u64().unwrap() >= 3, "{swept}");
    assert_eq!(swept["marks_swept"], 1, "{swept}");
    clone_and_check(&target, &trees.last().unwrap().0, &trees);
}

/// The same killed push, but its objects are swept before it runs again: the push finds them
/// gone and uploads them again.
fn a_push_uploads_again_what_a_sweep_deleted(target: Target) {
    let (env, trees, other) = killed_push_beside_another(&target, 13);
    std::thread::sleep(PAST_GRACE);
    gc(&target, &other, &[]);
    std::thread::sleep(PAST_GRACE);
    let swept = gc(&target, &other, &[]);
    assert!(swept["deleted"].as_u64().unwrap() >= 3, "{swept}");
    let pushed = ok(&target, &env, &["push"]);
    assert!(
        pushed["packs"].as_u64().unwrap() >= 1,
        "uploaded again: {pushed}"
    );
    clone_and_check(&target, &trees.last().unwrap().0, &trees);
}

/// SIGKILL right after the mark is written, and after the sweep's first delete: the next gc
/// finishes, the remote clones and fscks clean.
fn a_killed_remote_gc_loses_nothing(target: Target) {
    let env = Env::new();
    let mut trees = history(&env, 14);
    target.add(&env);
    ok(&target, &env, &["push"]);
    for i in 0..2 {
        write(env.root(), "churn.bin", &noise(200 + i, 1 << 20));
        trees.push((
            checkpoint(&env, "default", &format!("churn {i}")),
            read_tree(env.root()),
        ));
        ok(&target, &env, &["push"]);
    }
    std::thread::sleep(PAST_GRACE);
    for point in ["remote-gc-after-mark", "remote-gc-after-delete:1"] {
        let mut c = env.cmd(&[
            "gc",
            "--remote",
            "origin",
            "--grace",
            GRACE,
            "--keep",
            "1",
            "--max-age",
            "1s",
        ]);
        target.apply(&mut c);
        let o = c
            .env("REWIND_REMOTE_GC_WINDOW_MS", WINDOW_MS)
            .env("REWIND_FAILPOINT", point)
            .output()
            .unwrap();
        assert_eq!(o.status.code(), None, "{point}: killed: {}", text(&o));
        std::thread::sleep(PAST_GRACE);
    }
    let done = gc(&target, &env, &["--keep", "1", "--max-age", "1s"]);
    assert!(done["deleted"].as_u64().unwrap() >= 1, "{done}");
    std::thread::sleep(PAST_GRACE);
    gc(&target, &env, &["--keep", "1", "--max-age", "1s"]);
    clone_and_check(&target, &trees.last().unwrap().0, &trees[trees.len() - 1..]);
    let o = run(&target, &env, &["fsck"]);
    assert_eq!(o.status.code(), Some(0), "fsck here: {}", text(&o));
}

/// `--dry-run` reports what would be marked and changes nothing in the remote.
fn a_dry_run_writes_nothing(target: Target) {
    let env = Env::new();
    let mut c = Vec::new();
    history(&env, 15);
    target.add(&env);
    ok(&target, &env, &["push"]);
    for i in 0..2 {
        write(env.root(), "churn.bin", &noise(300 + i, 1 << 20));
        c.push(checkpoint(&env, "default", &format!("churn {i}")));
        ok(&target, &env, &["push"]);
    }
    std::thread::sleep(PAST_GRACE);
    let before = remote_files(&target);
    let r = gc(&target, &env, &["--dry-run"]);
    assert_eq!(r["dry_run"], true, "{r}");
    assert!(r["push"].is_null(), "{r}");
    assert!(
        r["marked"].as_u64().unwrap() >= 1,
        "old manifests would go: {r}"
    );
    assert_eq!(remote_files(&target), before, "the remote is unchanged");
}

/// Bounded: for 12 s one workspace makes checkpoints and pushes them (every third push killed
/// before its manifest and resumed after a grace period, so its objects are marked when it
/// relies on them again) while another runs `gc --remote` in a loop. No command fails, and
/// afterwards every checkpoint of the pusher clones and restores from the remote.
fn remote_gc_beside_pushes_loses_nothing(target: Target) {
    let pusher = Env::new();
    write(pusher.root(), "seed.txt", b"seed\n");
    crate::common::rewind::init(&pusher);
    target.add(&pusher);
    let collector = Env::new();
    write(collector.root(), "c.txt", b"collector\n");
    crate::common::rewind::init(&collector);
    checkpoint(&collector, "default", "c");
    target.add(&collector);
    ok(&target, &collector, &["push"]);
    let stop = std::sync::atomic::AtomicBool::new(false);
    let deadline = Instant::now() + Duration::from_secs(12);
    let trees = std::thread::scope(|s| {
        let gcs = s.spawn(|| {
            let mut n = 0;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let r = gc(&target, &collector, &["--keep", "1", "--max-age", "1s"]);
                assert!(r.is_object(), "{r}");
                n += 1;
                std::thread::sleep(Duration::from_millis(200));
            }
            n
        });
        let mut trees = Vec::new();
        let mut i = 0u64;
        while Instant::now() < deadline {
            write(
                pusher.root(),
                &format!("f{}.bin", i % 4),
                &noise(400 + i, 64 << 10),
            );
            trees.push((
                checkpoint(&pusher, "default", &format!("p{i}")),
                read_tree(pusher.root()),
            ));
            if i % 3 == 2 {
                let window = [("REWIND_REMOTE_GC_WINDOW_MS", WINDOW_MS)];
                target.killed_push(&pusher, "push-before-manifest", &window);
                std::thread::sleep(PAST_GRACE);
            }
            ok(&target, &pusher, &["push"]);
            i += 1;
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        let n = gcs.join().unwrap();
        assert!(n >= 3, "the collector ran {n} times");
        trees
    });
    std::thread::sleep(PAST_GRACE);
    gc(&target, &collector, &["--keep", "1", "--max-age", "1s"]);
    clone_and_check(&target, &trees.last().unwrap().0, &trees);
}

/// A grace period shorter than twice the window is refused before anything is written.
#[test]
fn a_too_short_grace_is_refused() {
    let target = Target::file();
    let env = Env::new();
    history(&env, 16);
    target.add(&env);
    let o = env.run(&["gc", "--remote", "origin", "--grace", "30s"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("--grace"), "{}", text(&o));
    let o = env.run(&["gc", "--grace", "1h"]);
    assert_eq!(
        o.status.code(),
        Some(2),
        "--grace needs --remote: {}",
        text(&o)
    );
    assert!(
        !Path::new(&target.url["file://".len()..]).exists(),
        "nothing written"
    );
}

on_both_remotes!(
    remote_gc_frees_what_the_policy_dropped,
    a_push_keeps_the_marked_objects_it_relies_on,
    a_push_uploads_again_what_a_sweep_deleted,
    a_killed_remote_gc_loses_nothing,
    a_dry_run_writes_nothing,
    remote_gc_beside_pushes_loses_nothing,
);
