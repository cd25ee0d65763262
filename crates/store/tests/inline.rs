//! Small writers keep their objects in the index instead of a pack; large ones spill them all
//! into packs. Either way every object reads back verified, and damage is found.

use crate::common;

use common::{open_in, random, TestStore};
use rewind_store::{Error, FsckProblem, StoreConfig, INLINE};

fn db(t: &TestStore) -> rusqlite::Connection {
    rusqlite::Connection::open(t.dir.path().join("meta.sqlite")).unwrap()
}

fn inline_rows(t: &TestStore) -> i64 {
    db(t)
        .query_row("SELECT count(*) FROM store_inline", [], |r| r.get(0))
        .unwrap()
}

#[test]
fn a_small_writer_writes_no_pack() {
    let t = TestStore::new();
    let w = t.store.writer().unwrap();
    let a = w.put_blob(&random(1, 4096)).unwrap();
    let b = w
        .put_blob(b"hello, compressible hello, compressible hello")
        .unwrap();
    assert!(t.tmp_files().is_empty(), "{:?}", t.tmp_files());
    let stats = w.commit().unwrap();
    assert_eq!((stats.new_objects, stats.new_pack_bytes), (2, 0));
    assert!(t.pack_files().is_empty());
    assert_eq!(inline_rows(&t), 2);

    let other = t.reopen();
    assert!(other.has(&a).unwrap() && other.has(&b).unwrap());
    assert_eq!(other.read_blob(&a).unwrap(), random(1, 4096));
    let s = other.stats().unwrap();
    assert_eq!((s.objects, s.packs), (2, 0));
    // Stored again: deduplicated against the inline rows.
    let w = other.writer().unwrap();
    w.put_blob(&random(1, 4096)).unwrap();
    assert_eq!(w.commit().unwrap().new_objects, 0);
    let r = other.fsck().unwrap();
    assert!(r.problems.is_empty(), "{:?}", r.problems);
    assert_eq!(r.objects_checked, 2);
}

#[test]
fn a_writer_past_the_limit_puts_everything_in_packs() {
    let t = TestStore::new();
    let w = t.store.writer().unwrap();
    let ids: Vec<_> = (0..40)
        .map(|i| w.put_blob(&random(i, 3000)).unwrap())
        .collect();
    w.commit().unwrap();
    assert_eq!(inline_rows(&t), 0);
    assert_eq!(t.pack_files().len(), 1);
    for (i, id) in ids.iter().enumerate() {
        assert_eq!(t.store.read_blob(id).unwrap(), random(i as u64, 3000));
    }
}

#[test]
fn a_dropped_small_writer_leaves_nothing() {
    let t = TestStore::new();
    let w = t.store.writer().unwrap();
    let id = w.put_blob(&random(3, 100)).unwrap();
    drop(w);
    assert!(!t.store.has(&id).unwrap());
    assert_eq!(inline_rows(&t), 0);
}

#[test]
fn a_damaged_inline_object_is_found_and_refused() {
    let t = TestStore::new();
    let w = t.store.writer().unwrap();
    let id = w.put_blob(&random(4, 2000)).unwrap();
    w.commit().unwrap();
    db(&t)
        .execute(
            "UPDATE store_inline SET data = zeroblob(length(data)) WHERE id = ?1",
            [&id.0[..]],
        )
        .unwrap();
    let store = t.reopen();
    match store.read_blob(&id) {
        Err(Error::Corrupt { id: got, pack, .. }) => assert_eq!((got, pack.as_str()), (id, INLINE)),
        other => panic!("expected a corrupt object, got {other:?}"),
    }
    let r = store.fsck().unwrap();
    assert!(
        matches!(&r.problems[..], [FsckProblem::Corrupt { id: got, pack, .. }] if *got == id && pack == INLINE),
        "{:?}",
        r.problems
    );
}

#[test]
fn an_index_of_version_1_is_upgraded_to_7() {
    let t = TestStore::new();
    let w = t.store.writer().unwrap();
    let packed = w.put_blob(&random(5, 100_000)).unwrap();
    w.commit().unwrap();
    {
        let c = db(&t);
        c.execute_batch(
            "INSERT INTO store_objects SELECT * FROM store_objects_recent;
             DROP VIEW store_objects_all;
             DROP TABLE store_objects_recent;
             DROP TABLE store_inline;
             DROP TABLE store_clone_packed;
             CREATE INDEX store_objects_by_pack ON store_objects(pack, offset);
             UPDATE store_meta SET value = '1' WHERE key = 'schema_version';",
        )
        .unwrap();
    }
    let store = open_in(t.dir.path(), StoreConfig::default());
    assert_eq!(store.read_blob(&packed).unwrap(), random(5, 100_000));
    let w = store.writer().unwrap();
    let small = w.put_blob(b"small").unwrap();
    w.commit().unwrap();
    assert_eq!(store.read_blob(&small).unwrap(), b"small");
    // Version 7's table of recent rows is there: a packed object indexed now is found.
    let w = store.writer().unwrap();
    let packed_now = w.put_blob(&random(6, 100_000)).unwrap();
    w.commit().unwrap();
    assert_eq!(store.read_blob(&packed_now).unwrap(), random(6, 100_000));
    let version: String = db(&t)
        .query_row(
            "SELECT value FROM store_meta WHERE key = 'schema_version'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(version, "7");
    assert_eq!(
        store.sweeps().unwrap(),
        0,
        "version 5 counts sweeps from none"
    );
    let pairs: i64 = db(&t)
        .query_row("SELECT count(*) FROM store_clone_packed", [], |r| r.get(0))
        .unwrap();
    assert_eq!(pairs, 0, "version 4 made the clone pairs' table");
    let by_pack: i64 = db(&t)
        .query_row(
            "SELECT count(*) FROM sqlite_master WHERE name = 'store_objects_by_pack'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(by_pack, 0, "version 3 has no index by pack");
    let report = store.fsck().unwrap();
    assert!(report.problems.is_empty(), "{:?}", report.problems);
    assert_eq!(report.packs_checked, 2);
    assert!(report.objects_checked >= 3);
}

/// An index of a version this binary does not know (a newer one: its writers may rely on
/// what this binary would not keep, as version 5 relies on every sweep being counted) is
/// refused, and left as it was.
#[test]
fn an_index_of_a_newer_version_is_refused() {
    let t = TestStore::new();
    drop(t.store.writer().unwrap());
    db(&t)
        .execute_batch("UPDATE store_meta SET value = '8' WHERE key = 'schema_version';")
        .unwrap();
    let r = rewind_store::Store::open(
        &t.dir.path().join("packs"),
        &t.dir.path().join("meta.sqlite"),
        StoreConfig::default(),
    );
    let e = r.err().expect("refused").to_string();
    assert!(e.contains("schema version 8 is not supported"), "{e}");
    let version: String = db(&t)
        .query_row(
            "SELECT value FROM store_meta WHERE key = 'schema_version'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(version, "8", "left as it was");
}
