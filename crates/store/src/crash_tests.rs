//! Crash tests: a writer process is SIGKILLed mid-write, and the next open must clean up.
//!
//! The child is this test binary re-executed with [`CHILD_ENV`] set, running
//! [`crash_child`]. Unit tests (rather than an integration test) so that the child can stop
//! itself at the one point no public API reaches: after its packs were renamed into place and
//! before their index rows were committed.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};

use crate::pack::{self, TMP_DIR};
use crate::{index::Index, ObjectId, ObjectKind, Store, StoreConfig};

const CHILD_ENV: &str = "REWIND_STORE_CRASH_CHILD";

static STOP_AFTER_RENAME: AtomicBool = AtomicBool::new(false);

/// Called by `Writer::commit` between making packs durable in place and indexing them.
pub(crate) fn after_rename_hook() {
    if STOP_AFTER_RENAME.load(Ordering::SeqCst) {
        say("renamed");
        loop {
            std::thread::sleep(std::time::Duration::from_secs(1));
        }
    }
}

fn say(line: &str) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

fn config() -> StoreConfig {
    StoreConfig {
        pack_target_size: 128 << 10,
        ..StoreConfig::default()
    }
}

/// Deterministic object `i`: the parent recomputes ids without talking to the child.
fn blob(i: u64) -> Vec<u8> {
    let mut v = vec![0u8; 1000 + (i as usize % 7) * 1500];
    blake3::Hasher::new()
        .update(&i.to_le_bytes())
        .finalize_xof()
        .fill(&mut v);
    v
}

fn blob_id(i: u64) -> ObjectId {
    ObjectId::compute(ObjectKind::Blob, &blob(i))
}

const COMMITTED: std::ops::Range<u64> = 0..300;
const IN_FLIGHT: std::ops::Range<u64> = 1000..1600;

fn open(dir: &Path) -> Store {
    Store::open(&dir.join("packs"), &dir.join("meta.sqlite"), config()).expect("open store")
}

/// The child: commits [`COMMITTED`], then writes [`IN_FLIGHT`] and gets killed, either while
/// still writing (mode "write") or after renaming its packs (mode "rename").
#[test]
#[ignore = "the child process of the crash tests, run by them"]
fn crash_child() {
    let Ok(arg) = std::env::var(CHILD_ENV) else {
        return; // not a child: nothing to do
    };
    let (mode, dir) = arg.split_once(' ').expect("mode and dir");
    let store = open(Path::new(dir));
    let w = store.writer().expect("writer");
    for i in COMMITTED {
        w.put_blob(&blob(i)).expect("put");
    }
    w.commit().expect("commit");
    say("committed");

    let w = store.writer().expect("writer");
    for i in IN_FLIGHT {
        w.put_blob(&blob(i)).expect("put");
    }
    match mode {
        "write" => {
            // Sealed packs and an open one wait in tmp/, locked; keep the writer alive.
            say("writing");
            loop {
                std::thread::sleep(std::time::Duration::from_secs(1));
            }
        }
        "rename" => {
            STOP_AFTER_RENAME.store(true, Ordering::SeqCst);
            w.commit().expect("commit");
            unreachable!("the hook never returns");
        }
        m => panic!("unknown mode {m}"),
    }
}

/// Runs the child until it prints `until`, then SIGKILLs it.
fn run_child_and_kill(mode: &str, dir: &Path, until: &str) {
    let exe = std::env::current_exe().expect("test binary");
    let mut child = Command::new(exe)
        .args([
            "--exact",
            "crash_tests::crash_child",
            "--ignored",
            "--nocapture",
        ])
        .env(CHILD_ENV, format!("{mode} {}", dir.display()))
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn child");
    let out = BufReader::new(child.stdout.take().expect("stdout"));
    let mut seen = Vec::new();
    for line in out.lines() {
        let line = line.expect("child output");
        if line == until {
            child.kill().expect("SIGKILL"); // std's kill is SIGKILL on Unix
            child.wait().expect("reap");
            return;
        }
        seen.push(line);
    }
    let status = child.wait().expect("reap");
    panic!("child exited ({status}) before printing {until:?}; it said {seen:?}");
}

fn tmp_files(dir: &Path) -> usize {
    std::fs::read_dir(dir.join("packs").join(TMP_DIR))
        .expect("list tmp")
        .count()
}

fn check_committed_and_clean(store: &Store) {
    for i in COMMITTED {
        assert_eq!(
            store.read_blob(&blob_id(i)).expect("committed blob"),
            blob(i)
        );
    }
    let report = store.fsck().expect("fsck");
    assert!(report.problems.is_empty(), "{:?}", report.problems);
}

#[test]
fn killed_while_writing_leaves_only_dead_temp_packs() {
    let dir = tempfile::tempdir().expect("tempdir");
    run_child_and_kill("write", dir.path(), "writing");
    let left = tmp_files(dir.path());
    assert!(
        left > 1,
        "the child should have left temp packs, found {left}"
    );

    let store = open(dir.path());
    assert_eq!(tmp_files(dir.path()), 0, "dead writer's temp packs remain");
    check_committed_and_clean(&store);
    for i in IN_FLIGHT {
        assert!(
            !store.has(&blob_id(i)).expect("has"),
            "uncommitted {i} visible"
        );
    }
}

#[test]
fn killed_after_rename_leaves_orphans_that_open_adopts() {
    let dir = tempfile::tempdir().expect("tempdir");
    run_child_and_kill("rename", dir.path(), "renamed");
    let packs_dir = dir.path().join("packs");
    let on_disk = pack::packs_on_disk(&packs_dir).expect("list packs");
    let index = Index::open(&dir.path().join("meta.sqlite")).expect("index");
    let indexed = index.pack_names().expect("pack names");
    drop(index);
    let orphans = on_disk.iter().filter(|p| !indexed.contains(*p)).count();
    assert!(orphans > 1, "the child should have left orphan packs");

    let store = open(dir.path());
    assert_eq!(tmp_files(dir.path()), 0);
    let stats = store.stats().expect("stats");
    assert_eq!(stats.packs, on_disk.len() as u64, "not all orphans adopted");
    check_committed_and_clean(&store);
    for i in IN_FLIGHT {
        assert_eq!(store.read_blob(&blob_id(i)).expect("adopted blob"), blob(i));
    }
    // Adoption happens once: a second open finds nothing to do.
    drop(open(dir.path()));
    assert_eq!(store.stats().expect("stats"), stats);
}
