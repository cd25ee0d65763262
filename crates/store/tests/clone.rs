//! Cloned content (`FICLONE`) on a real btrfs volume: a large file is captured without being
//! read or copied, reads back as it was when cloned whatever happens to the original, and is
//! checked, collected and refused like any object. Off a reflink file system the same call
//! packs the file as before.

use std::io::{Seek, SeekFrom, Write};

use rewind_store::{ObjectId, ObjectKind, StoreConfig, CLONE_FROM};
use rewind_testutil::reflink::ReflinkVolume;

use crate::common::{open_in, random};

const LEN: usize = (CLONE_FROM as usize) * 4;

fn content_id(data: &[u8]) -> ObjectId {
    rewind_store::content_id(&mut &data[..]).unwrap().0
}

fn read_back(store: &rewind_store::Store, id: &ObjectId) -> Vec<u8> {
    let mut out = Vec::new();
    store.read_content(id, &mut out).unwrap();
    out
}

#[test]
fn a_large_file_is_cloned_not_copied_and_reads_back_as_it_was() {
    let vol = ReflinkVolume::new(512);
    let state = vol.path().join("state");
    let store = open_in(&state, StoreConfig::default());
    let data = random(1, LEN);
    let path = vol.path().join("big.bin");
    std::fs::write(&path, &data).unwrap();
    let used_before = vol.used_bytes();

    let mut file = std::fs::File::open(&path).unwrap();
    let w = store.writer().unwrap();
    let (id, size, cloned) = w.put_file(&mut file, LEN as u64).unwrap();
    assert!(cloned);
    // Nothing in place before the commit: a writer that dies leaves no clone to account for.
    assert!(!state.join("packs/clones").exists());
    w.commit().unwrap();

    assert_eq!(size, LEN as u64);
    assert_ne!(id, content_id(&data), "a clone's id names the capture");
    assert!(store.open_clone(&id).unwrap().is_some());
    let grew = vol.used_bytes().saturating_sub(used_before);
    assert!(
        grew < 1 << 20,
        "cloning {LEN} bytes used {grew} bytes of the volume"
    );
    assert_eq!(read_back(&store, &id), data);
    assert_eq!(store.packed_id(&id).unwrap(), content_id(&data));

    // Its blocks are the original's: it holds none of its own.
    let clone_file = |id: &ObjectId| {
        let hex = id.to_hex();
        state
            .join("packs/clones")
            .join(&hex[..2])
            .join(format!("{hex}.clone"))
    };
    let own = || rewind_store::exclusive_bytes(&std::fs::File::open(clone_file(&id)).unwrap());
    assert_eq!(own(), 0);

    // The original is edited in place and then truncated: the clone keeps what it held.
    let mut f = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
    f.seek(SeekFrom::Start(4096)).unwrap();
    f.write_all(b"edited").unwrap();
    f.set_len(10).unwrap();
    drop(f);
    assert_eq!(read_back(&store, &id), data);
    // Once the original is gone, its blocks are the clone's own (btrfs frees an extent only
    // when nothing refers to any part of it: while the truncated original was there, they
    // were still shared).
    drop(file);
    std::fs::remove_file(&path).unwrap();
    vol.used_bytes(); // syncs
    assert_eq!(own(), LEN as u64);

    // Cloned back into a new file: the same bytes.
    let out_path = vol.path().join("restored.bin");
    let out = std::fs::File::create(&out_path).unwrap();
    assert!(store.clone_content_into(&id, &out).unwrap());
    drop(out);
    assert_eq!(std::fs::read(&out_path).unwrap(), data);

    let report = store.fsck().unwrap();
    assert!(report.problems.is_empty(), "{:?}", report.problems);
}

#[test]
fn small_files_and_other_file_systems_are_packed() {
    let vol = ReflinkVolume::new(256);
    let store = open_in(&vol.path().join("state"), StoreConfig::default());
    let small = random(2, CLONE_FROM as usize - 1);
    let path = vol.path().join("small.bin");
    std::fs::write(&path, &small).unwrap();
    let w = store.writer().unwrap();
    let (id, _, cloned) = w
        .put_file(&mut std::fs::File::open(&path).unwrap(), small.len() as u64)
        .unwrap();
    w.commit().unwrap();
    assert!(!cloned);
    assert_eq!(id, content_id(&small), "below the threshold: packed");
    assert!(store.open_clone(&id).unwrap().is_none());

    // The workspace on another file system than the store: the clone is refused (EXDEV) and
    // the file packed, with its content hash as id.
    let elsewhere = tempfile::tempdir_in(std::env::temp_dir()).unwrap();
    let big = random(3, LEN);
    let other = elsewhere.path().join("big.bin");
    std::fs::write(&other, &big).unwrap();
    let w = store.writer().unwrap();
    let (id, size, cloned) = w
        .put_file(&mut std::fs::File::open(&other).unwrap(), LEN as u64)
        .unwrap();
    w.commit().unwrap();
    assert_eq!((id, size, cloned), (content_id(&big), LEN as u64, false));
    assert_eq!(read_back(&store, &id), big);

    // And `clone_file`, which only clones, says it could not.
    let store2 = open_in(&vol.path().join("state"), StoreConfig::default());
    let w = store2.writer().unwrap();
    assert!(w
        .clone_file(&std::fs::File::open(&other).unwrap())
        .unwrap()
        .is_none());
}

#[test]
fn a_lost_or_truncated_clone_file_is_reported_and_an_unindexed_one_collected() {
    let vol = ReflinkVolume::new(512);
    let state = vol.path().join("state");
    let store = open_in(&state, StoreConfig::default());
    let mut ids = Vec::new();
    for seed in 0..3 {
        let path = vol.path().join(format!("f{seed}"));
        std::fs::write(&path, random(10 + seed, LEN)).unwrap();
        let w = store.writer().unwrap();
        let (id, _, _) = w
            .put_file(&mut std::fs::File::open(&path).unwrap(), LEN as u64)
            .unwrap();
        w.commit().unwrap();
        ids.push(id);
    }
    let file_of = |id: &ObjectId| {
        let hex = id.to_hex();
        state
            .join("packs/clones")
            .join(&hex[..2])
            .join(format!("{hex}.clone"))
    };
    // Truncated (made writable first: clone files are read-only) and lost.
    let f = file_of(&ids[0]);
    let mut perms = std::fs::metadata(&f).unwrap().permissions();
    assert_eq!(perms.mode() & 0o222, 0, "clone files are read-only");
    perms.set_mode(0o644);
    std::fs::set_permissions(&f, perms).unwrap();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&f)
        .unwrap()
        .set_len(5)
        .unwrap();
    std::fs::remove_file(file_of(&ids[1])).unwrap();

    let report = store.fsck().unwrap();
    let named: Vec<ObjectId> = report
        .problems
        .iter()
        .map(|p| match p {
            rewind_store::FsckProblem::Corrupt { id, kind, .. } => {
                assert_eq!(*kind, ObjectKind::Clone);
                *id
            }
            other => panic!("unexpected problem {other:?}"),
        })
        .collect();
    assert_eq!(named.len(), 2);
    assert!(named.contains(&ids[0]) && named.contains(&ids[1]));
    assert!(store.read_content(&ids[0], &mut Vec::new()).is_err());
    assert!(store.read_content(&ids[1], &mut Vec::new()).is_err());

    // A clone file no row names (a writer killed after the rename): collected; the indexed
    // one stays.
    let stray = ObjectId([0xab; 32]);
    std::fs::create_dir_all(file_of(&stray).parent().unwrap()).unwrap();
    std::fs::copy(file_of(&ids[2]), file_of(&stray)).unwrap();
    assert_eq!(store.remove_unindexed_clones().unwrap(), 1);
    assert!(!file_of(&stray).exists());
    assert!(file_of(&ids[2]).exists());
}

use std::os::unix::fs::PermissionsExt;

/// One edit of a file that was cloned.
#[derive(Clone, Debug)]
enum Edit {
    /// Random bytes written at an offset.
    Write { at: u64, len: usize, seed: u64 },
    /// The bytes already there written again (new blocks, same content).
    Rewrite { at: u64, len: usize },
    /// Cut to a length, then grown back with zeros.
    TruncateGrow { to: u64 },
    /// A hole punched (reads as zeros).
    Punch { at: u64, len: u64 },
    /// Bytes appended.
    Append { len: usize, seed: u64 },
}

fn apply(path: &std::path::Path, e: &Edit) {
    use std::os::unix::fs::FileExt;
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .unwrap();
    let len = f.metadata().unwrap().len();
    match *e {
        Edit::Write { at, len: n, seed } => f.write_all_at(&random(seed, n), at % len).unwrap(),
        Edit::Rewrite { at, len: n } => {
            let at = at % len;
            let n = n.min((len - at) as usize);
            let mut buf = vec![0; n];
            f.read_exact_at(&mut buf, at).unwrap();
            f.write_all_at(&buf, at).unwrap();
        }
        Edit::TruncateGrow { to } => {
            f.set_len(to % len).unwrap();
            f.set_len(len).unwrap();
        }
        Edit::Punch { at, len: n } => {
            use std::os::fd::AsRawFd;
            // SAFETY: a valid descriptor; fallocate takes only integers.
            let r = unsafe {
                libc::fallocate(
                    f.as_raw_fd(),
                    libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE,
                    (at % len) as i64,
                    n as i64,
                )
            };
            assert_eq!(r, 0);
        }
        Edit::Append { len: n, seed } => f.write_all_at(&random(seed, n), len).unwrap(),
    }
}

fn edit_strategy() -> impl proptest::strategy::Strategy<Value = Edit> {
    use proptest::prelude::*;
    let size = 1usize..300_000;
    prop_oneof![
        (any::<u64>(), size.clone(), any::<u64>()).prop_map(|(at, len, seed)| Edit::Write {
            at,
            len,
            seed
        }),
        (any::<u64>(), size.clone()).prop_map(|(at, len)| Edit::Rewrite { at, len }),
        any::<u64>().prop_map(|to| Edit::TruncateGrow { to }),
        (any::<u64>(), 1u64..300_000).prop_map(|(at, len)| Edit::Punch { at, len }),
        (size, any::<u64>()).prop_map(|(len, seed)| Edit::Append { len, seed }),
    ]
}

/// `same_content` reads only where two files' blocks differ: against a plain comparison of
/// every byte, after random edits to a file that was cloned (writes, the same bytes written
/// again, truncations, holes, appends), and with or without a sync between them.
#[test]
fn comparing_by_extents_agrees_with_reading_every_byte() {
    use proptest::prelude::*;
    let vol = ReflinkVolume::new(512);
    let dir = vol.path().to_owned();
    let config = ProptestConfig {
        cases: 48,
        failure_persistence: None,
        ..ProptestConfig::default()
    };
    let cases = std::sync::atomic::AtomicU64::new(0);
    proptest!(config, |(edits in proptest::collection::vec(edit_strategy(), 0..6),
                        sync in any::<bool>())| {
        let case = cases.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        // What a failing case (shrinking runs many) left behind.
        for f in std::fs::read_dir(&dir).unwrap().flatten() {
            let _ = std::fs::remove_file(f.path());
        }
        let orig = dir.join(format!("orig-{case}"));
        let copy = dir.join(format!("clone-{case}"));
        std::fs::write(&orig, random(case, 3 << 20)).unwrap();
        let src = std::fs::File::open(&orig).unwrap();
        let dst = std::fs::File::create(&copy).unwrap();
        prop_assert!(rewind_store::reflink(&src, &dst).unwrap());
        drop((src, dst));
        for e in &edits {
            apply(&orig, e);
            if sync {
                std::fs::File::open(&orig).unwrap().sync_all().unwrap();
            }
        }
        let want = std::fs::read(&orig).unwrap() == std::fs::read(&copy).unwrap();
        let (a, b) = (std::fs::File::open(&orig).unwrap(), std::fs::File::open(&copy).unwrap());
        prop_assert_eq!(rewind_store::same_content(&a, &b).unwrap(), want, "{:?}", edits);
        std::fs::remove_file(&orig).unwrap();
        std::fs::remove_file(&copy).unwrap();
    });
}
