//! What is visible when, and what is left behind.

use crate::common;

use common::{random, TestStore};
use rewind_store::StoreConfig;

#[test]
fn dropped_writer_leaves_nothing() {
    let t = TestStore::with_config(StoreConfig {
        pack_target_size: 32 << 10,
        ..StoreConfig::default()
    });
    let w = t.store.writer().unwrap();
    let mut ids = Vec::new();
    for i in 0..50 {
        ids.push(w.put_blob(&random(i, 4000)).unwrap());
    }
    // Several sealed packs and one open one are waiting under tmp/.
    assert!(t.tmp_files().len() > 2, "{:?}", t.tmp_files());
    drop(w);
    assert!(t.tmp_files().is_empty());
    assert!(t.pack_files().is_empty());
    assert_eq!(t.store.stats().unwrap().objects, 0);
    for id in &ids {
        assert!(!t.store.has(id).unwrap());
    }
}

#[test]
fn committed_objects_are_visible_to_another_open_store() {
    let t = TestStore::new();
    let data = random(1, 3 << 20);
    let w = t.store.writer().unwrap();
    let (id, _) = w.put_content(&mut data.as_slice()).unwrap();
    let other = t.reopen();
    assert!(!other.has(&id).unwrap(), "visible before commit");
    w.commit().unwrap();
    assert!(other.has(&id).unwrap());

    // And from another thread, with a Store opened there.
    std::thread::scope(|s| {
        s.spawn(|| {
            let store = t.reopen();
            let mut out = Vec::new();
            store.read_content(&id, &mut out).unwrap();
            assert!(out == data);
        });
    });
}

/// Opening a store removes dead writers' temp packs, but never a live writer's.
#[test]
fn open_spares_live_writers_temp_packs() {
    let t = TestStore::with_config(StoreConfig {
        inline_limit: 0,
        ..StoreConfig::default()
    });
    let w = t.store.writer().unwrap();
    let id = w.put_blob(&random(2, 5000)).unwrap();
    assert_eq!(t.tmp_files().len(), 1);
    let other = t.reopen();
    assert_eq!(
        t.tmp_files().len(),
        1,
        "a live writer's temp pack was removed"
    );
    w.commit().unwrap();
    assert_eq!(other.read_blob(&id).unwrap(), random(2, 5000));

    // A temp pack nobody holds a lock on is a dead writer's.
    let stale = t
        .packs_dir()
        .join("tmp")
        .join("0123456789abcdef0123456789abcdef.pack");
    std::fs::write(&stale, b"RWPK half a pack").unwrap();
    // Files the store did not name are left alone, and do not stop it from opening.
    let foreign = t.packs_dir().join("tmp").join("notes.txt");
    std::fs::write(&foreign, b"not a pack").unwrap();
    std::fs::create_dir(t.packs_dir().join("tmp").join("sub.pack")).unwrap();
    drop(t.reopen());
    assert!(!stale.exists());
    assert!(foreign.exists());
}

#[test]
fn two_stores_writing_the_same_objects_concurrently() {
    let t = TestStore::new();
    let blobs: Vec<Vec<u8>> = (0..200).map(|i| random(100 + i, 3000)).collect();
    let stores = [t.reopen(), t.reopen()];
    std::thread::scope(|s| {
        for store in &stores {
            let blobs = &blobs;
            s.spawn(move || {
                let w = store.writer().unwrap();
                for b in blobs {
                    w.put_blob(b).unwrap();
                }
                w.commit().unwrap();
            });
        }
    });
    let stats = t.store.stats().unwrap();
    assert_eq!(stats.objects, 200);
    for b in &blobs {
        let id = rewind_store::ObjectId::compute(rewind_store::ObjectKind::Blob, b);
        assert_eq!(&t.store.read_blob(&id).unwrap(), b);
    }
    assert!(t.store.fsck().unwrap().problems.is_empty());
}

#[test]
fn empty_commit_is_a_no_op() {
    let t = TestStore::new();
    let c = t.store.writer().unwrap().commit().unwrap();
    assert_eq!(c, Default::default());
    assert!(t.pack_files().is_empty());
    assert!(t.tmp_files().is_empty());
}

/// The WAL is kept between processes (each would otherwise re-create it, with a directory
/// fsync) and checkpointed at close only past a size: a low one after whole-tree work, a high one
/// otherwise, so quick commands rarely pay for a checkpoint. A checkpointed WAL starts over in
/// place: the file keeps its size, its old frames stop counting, and new commits overwrite them.
#[test]
fn the_wal_is_kept_and_started_over_in_place_past_a_size() {
    let t = TestStore::new();
    let wal = t.dir.path().join("meta.sqlite-wal");
    let size = || std::fs::metadata(&wal).unwrap().len();
    // The frames the WAL holds, as a new connection counts them.
    let frames = || -> i64 {
        let c = rusqlite::Connection::open(t.dir.path().join("meta.sqlite")).unwrap();
        c.query_row("PRAGMA wal_checkpoint(NOOP)", [], |r| r.get(1))
            .unwrap()
    };
    // Some hundreds of KiB of index rows: small objects are inlined into the database.
    let mut ids = Vec::new();
    let mut commit_some = |store: &rewind_store::Store, seed: u64| {
        let w = store.writer().unwrap();
        for i in 0..300 {
            ids.push(w.put_blob(&random(seed * 1000 + i, 400)).unwrap());
        }
        w.commit().unwrap();
    };
    commit_some(&t.store, 1);
    let (before, live) = (size(), frames());
    assert!(before > 64 << 10 && before < 1 << 20, "{before}");
    // A quick command closes: the WAL stays as it is.
    drop(t.reopen());
    assert_eq!((size(), frames()), (before, live));
    // One that did whole-tree work checkpoints it and starts it over: the file keeps its blocks,
    // and only the restart's own frame counts.
    let other = t.reopen();
    other.checkpoint_wal_on_close();
    drop(other);
    assert_eq!(size(), before);
    assert_eq!(frames(), 1);
    // The next commit overwrites the old frames instead of growing the file.
    commit_some(&t.store, 2);
    assert_eq!(size(), before);
    assert!(frames() > 1);
    // Past the high mark even a quick command checkpoints.
    for seed in 3..14 {
        commit_some(&t.store, seed);
    }
    let grown = size();
    assert!(grown > 1 << 20, "{grown}");
    drop(t.reopen());
    assert_eq!(frames(), 1);
    assert!(size() <= grown);
    // Everything is still there, read through a new connection.
    let fresh = t.reopen();
    for id in &ids {
        assert!(fresh.has(id).unwrap());
    }
}
