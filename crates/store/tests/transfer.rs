//! What remotes need of a store: inline objects sealed into a pack, a pack's tail listing its
//! objects, and a copied pack taken in only whole and verified.

use crate::common;

use common::{random, TestStore};
use rewind_store::{pack_tail_ids, Error};

#[test]
fn sealing_moves_inline_objects_into_one_pack_and_they_still_read() {
    let t = TestStore::new();
    let w = t.store.writer().unwrap();
    let ids: Vec<_> = (0..5)
        .map(|i| w.put_blob(&random(i, 1000)).unwrap())
        .collect();
    w.commit().unwrap();
    assert!(t.pack_files().is_empty());
    assert_eq!(t.store.seal_inline().unwrap(), 5);
    assert_eq!(t.pack_files().len(), 1);
    assert_eq!(t.store.seal_inline().unwrap(), 0, "nothing left inline");
    let other = t.reopen();
    for (i, id) in ids.iter().enumerate() {
        assert_eq!(other.read_blob(id).unwrap(), random(i as u64, 1000));
    }
    // The tail lists exactly those objects.
    let packs = other.pack_files().unwrap();
    let tail = other.pack_tail(&packs[0].name).unwrap();
    let mut listed = pack_tail_ids(&tail).unwrap();
    let mut want = ids.clone();
    listed.sort_by_key(|i| i.0);
    want.sort_by_key(|i| i.0);
    assert_eq!(listed, want);
    let mut bad = tail.clone();
    bad[10] ^= 1;
    assert!(pack_tail_ids(&bad).is_err(), "a damaged tail is refused");
}

#[test]
fn an_imported_pack_is_verified_whole_before_it_is_indexed() {
    let src = TestStore::new();
    let w = src.store.writer().unwrap();
    let id = w.put_blob(&random(9, 200_000)).unwrap();
    w.commit().unwrap();
    let pack = src.store.pack_files().unwrap().remove(0);
    let dst = TestStore::new();
    // A flipped byte in the object's stored bytes: refused, naming the object and the pack.
    let copy = dst.dir.path().join("download.pack");
    let mut bytes = std::fs::read(&pack.path).unwrap();
    bytes[60] ^= 0x10;
    std::fs::write(&copy, &bytes).unwrap();
    match dst.store.import_pack(&pack.name, &copy) {
        Err(Error::Corrupt {
            id: bad, pack: p, ..
        }) => {
            assert_eq!((bad, p.as_str()), (id, pack.name.as_str()));
        }
        other => panic!("expected Corrupt, got {other:?}"),
    }
    assert!(!copy.exists(), "the damaged download is removed");
    assert!(dst.pack_files().is_empty() && !dst.store.has(&id).unwrap());
    // The intact copy: in place, indexed, readable.
    std::fs::copy(&pack.path, &copy).unwrap();
    dst.store.import_pack(&pack.name, &copy).unwrap();
    assert_eq!(dst.reopen().read_blob(&id).unwrap(), random(9, 200_000));
    assert_eq!(dst.pack_files().len(), 1);
}
