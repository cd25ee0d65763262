//! Damage is found, named, and refused on read.

use crate::common;

use common::{random, stored_bytes_offset, TestStore};
use rewind_store::{Error, FsckProblem, ObjectId, ObjectKind, StoreConfig};

fn store_with_objects() -> (TestStore, Vec<ObjectId>, ObjectId) {
    let t = TestStore::with_config(StoreConfig {
        pack_target_size: 256 << 10,
        ..StoreConfig::default()
    });
    let w = t.store.writer().unwrap();
    let ids = (0..100)
        .map(|i| w.put_blob(&random(i, 10_000)).unwrap())
        .collect();
    let (file, _) = w.put_content(&mut &random(1000, 3 << 20)[..]).unwrap();
    w.commit().unwrap();
    (t, ids, file)
}

#[test]
fn clean_store_has_no_problems() {
    let (t, ids, _) = store_with_objects();
    let r = t.store.fsck().unwrap();
    assert!(r.problems.is_empty(), "{:?}", r.problems);
    assert_eq!(r.packs_checked, t.pack_files().len() as u64);
    assert!(r.objects_checked > ids.len() as u64);
}

#[test]
fn flipped_byte_is_corrupt() {
    let (t, ids, _) = store_with_objects();
    let victim = ids[42];
    let (pack, off) = t
        .pack_files()
        .into_iter()
        .find_map(|p| {
            let bytes = std::fs::read(&p).unwrap();
            stored_bytes_offset(&bytes, &victim).map(|off| (p, off))
        })
        .expect("object is in some pack");
    let mut bytes = std::fs::read(&pack).unwrap();
    bytes[off + 1234] ^= 0x01;
    std::fs::write(&pack, &bytes).unwrap();
    let pack_name = pack.file_stem().unwrap().to_str().unwrap().to_owned();

    let r = t.store.fsck().unwrap();
    assert_eq!(r.problems.len(), 1, "{:?}", r.problems);
    match &r.problems[0] {
        FsckProblem::Corrupt { id, kind, pack, .. } => {
            assert_eq!((id, kind, pack), (&victim, &ObjectKind::Blob, &pack_name));
        }
        p => panic!("unexpected {p:?}"),
    }
    let store = t.reopen();
    match store.read_blob(&victim) {
        Err(Error::Corrupt { id, pack, .. }) => assert_eq!((id, pack), (victim, pack_name)),
        r => panic!("read of a corrupt blob gave {r:?}"),
    }
    // Its neighbours are fine.
    assert_eq!(store.read_blob(&ids[41]).unwrap(), random(41, 10_000));
}

#[test]
fn deleted_pack_is_missing_with_its_objects() {
    let (t, ids, file) = store_with_objects();
    let pack = t
        .pack_files()
        .into_iter()
        .find(|p| stored_bytes_offset(&std::fs::read(p).unwrap(), &ids[0]).is_some())
        .unwrap();
    let bytes = std::fs::read(&pack).unwrap();
    let lost: Vec<ObjectId> = ids
        .iter()
        .copied()
        .filter(|id| stored_bytes_offset(&bytes, id).is_some())
        .collect();
    assert!(!lost.is_empty());
    std::fs::remove_file(&pack).unwrap();
    let pack_name = pack.file_stem().unwrap().to_str().unwrap().to_owned();

    let store = t.reopen();
    let r = store.fsck().unwrap();
    assert_eq!(r.problems.len(), 1, "{:?}", r.problems);
    match &r.problems[0] {
        FsckProblem::MissingPack { pack, objects } => {
            assert_eq!(pack, &pack_name);
            let mut objects = objects.clone();
            objects.sort();
            let mut lost = lost.clone();
            lost.sort();
            assert_eq!(objects, lost);
        }
        p => panic!("unexpected {p:?}"),
    }
    assert!(matches!(
        store.read_blob(&lost[0]),
        Err(Error::MissingPack { pack }) if pack == pack_name
    ));
    let mut out = Vec::new();
    store.read_content(&file, &mut out).unwrap();
}

#[test]
fn unreadable_orphan_pack_is_reported() {
    let (t, _, _) = store_with_objects();
    let dir = t.packs_dir().join("ab");
    std::fs::create_dir_all(&dir).unwrap();
    let junk = dir.join("ab0123456789abcdef0123456789abcd.pack");
    std::fs::write(&junk, b"RWPK\x01\0\0\0 not a real pack").unwrap();
    // Open leaves it alone (it cannot be adopted) and fsck names it.
    let store = t.reopen();
    assert!(junk.exists());
    let r = store.fsck().unwrap();
    assert_eq!(r.problems.len(), 1, "{:?}", r.problems);
    assert!(matches!(
        &r.problems[0],
        FsckProblem::UnreadablePack { pack, .. } if pack == "ab0123456789abcdef0123456789abcd"
    ));
}

#[test]
fn fsck_modifies_nothing() {
    let (t, _, _) = store_with_objects();
    let before: Vec<_> = t
        .pack_files()
        .iter()
        .map(|p| std::fs::read(p).unwrap())
        .collect();
    let stats = t.store.stats().unwrap();
    t.store.fsck().unwrap();
    let after: Vec<_> = t
        .pack_files()
        .iter()
        .map(|p| std::fs::read(p).unwrap())
        .collect();
    assert!(before == after);
    assert_eq!(t.store.stats().unwrap(), stats);
}

/// The index does not have SQLite enforce an object row's pack (it cost a gc a scan of the
/// object table per pack deleted), so fsck checks it.
#[test]
fn object_rows_naming_no_pack_row_are_missing() {
    let (t, ids, _) = store_with_objects();
    let db = rusqlite::Connection::open(t.dir.path().join("meta.sqlite")).unwrap();
    // As a buggy writer would (a connection of this build enforces the key by default).
    db.pragma_update(None, "foreign_keys", false).unwrap();
    let pack: i64 = db
        .query_row(
            "SELECT pack FROM store_objects_all WHERE id = ?1",
            [&ids[0].0[..]],
            |r| r.get(0),
        )
        .unwrap();
    let held: i64 = db
        .query_row(
            "SELECT count(*) FROM store_objects_all WHERE pack = ?1",
            [pack],
            |r| r.get(0),
        )
        .unwrap();
    db.execute("DELETE FROM store_packs WHERE id = ?1", [pack])
        .unwrap();
    let r = t.store.fsck().unwrap();
    assert_eq!(r.problems.len(), 1, "{:?}", r.problems);
    match &r.problems[0] {
        FsckProblem::MissingPack {
            pack: name,
            objects,
        } => {
            assert_eq!(name, &format!("#{pack} (no such pack row)"));
            assert_eq!(objects.len() as i64, held);
            assert!(objects.contains(&ids[0]));
        }
        p => panic!("unexpected {p:?}"),
    }
}
