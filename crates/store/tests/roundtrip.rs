//! Everything stored comes back byte for byte, with the id `content_id` predicts.

use crate::common;

use common::{random, text, Dribble, TestStore};
use proptest::prelude::*;
use rewind_store::{
    content_id, EntryKind, Error, ObjectId, ObjectKind, Tree, TreeEntry, CHUNK_THRESHOLD,
};

fn read_all(t: &TestStore, id: &ObjectId) -> Vec<u8> {
    let mut out = Vec::new();
    let n = t.store.read_content(id, &mut out).expect("read_content");
    assert_eq!(n, out.len() as u64);
    out
}

#[test]
fn blobs_round_trip() {
    let t = TestStore::new();
    let w = t.store.writer().unwrap();
    let a = w.put_blob(b"hello").unwrap();
    let b = w.put_blob(&random(1, 100_000)).unwrap();
    let empty = w.put_blob(b"").unwrap();
    assert_eq!(a, ObjectId::compute(ObjectKind::Blob, b"hello"));
    assert!(!t.store.has(&a).unwrap(), "visible before commit");
    let stats = w.commit().unwrap();
    assert_eq!(stats.new_objects, 3);
    assert_eq!(stats.new_raw_bytes, 100_005);
    assert!(stats.new_pack_bytes > 100_005);
    assert!(t.store.has(&a).unwrap());
    assert_eq!(t.store.read_blob(&a).unwrap(), b"hello");
    assert_eq!(t.store.read_blob(&b).unwrap(), random(1, 100_000));
    assert_eq!(t.store.read_blob(&empty).unwrap(), b"");
}

#[test]
fn trees_round_trip() {
    let t = TestStore::new();
    let w = t.store.writer().unwrap();
    let (file, size) = w.put_content(&mut &b"fn main() {}\n"[..]).unwrap();
    let link = w.put_blob(b"../target").unwrap();
    let sub = w.put_tree(&Tree::default()).unwrap();
    let entry = |name: &[u8], kind, size, id| TreeEntry {
        name: name.to_vec(),
        kind,
        mode: 0o644,
        size,
        id,
    };
    let tree = Tree::new(vec![
        entry(b"main.rs", EntryKind::File, size, file),
        entry(b"link", EntryKind::Symlink, 9, link),
        entry(b"sub", EntryKind::Dir, 0, sub),
        entry(b"huge.bin", EntryKind::Uncovered, 1 << 40, ObjectId::ZERO),
        entry(b"\xffnot-utf8", EntryKind::File, size, file),
    ])
    .unwrap();
    let root = w.put_tree(&tree).unwrap();
    w.commit().unwrap();
    assert_eq!(t.store.read_tree(&root).unwrap(), tree);
    assert!(t.store.read_tree(&sub).unwrap().is_empty());
    // Kinds are checked: a tree is not a blob and a blob is not a tree.
    assert!(matches!(t.store.read_blob(&root), Err(Error::Format(_))));
    assert!(matches!(t.store.read_tree(&link), Err(Error::Format(_))));
    assert!(matches!(
        t.store.read_content(&root, &mut Vec::new()),
        Err(Error::Format(_))
    ));
}

#[test]
fn content_small_large_and_empty() {
    let t = TestStore::new();
    let inputs = [
        Vec::new(),
        b"x".to_vec(),
        text(0, 10_000),
        random(2, CHUNK_THRESHOLD as usize),
        random(3, 5 << 20),
        text(4, 5 << 20),
    ];
    let w = t.store.writer().unwrap();
    let mut ids = Vec::new();
    for data in &inputs {
        let (id, n) = w.put_content(&mut data.as_slice()).unwrap();
        assert_eq!(n, data.len() as u64);
        assert_eq!(content_id(&mut data.as_slice()).unwrap(), (id, n));
        ids.push(id);
    }
    // Small content is one blob whose id is the content id; large content is a file object.
    assert_eq!(ids[1], ObjectId::compute(ObjectKind::Blob, b"x"));
    assert_eq!(ids[3], ObjectId::compute(ObjectKind::Blob, &inputs[3]));
    assert_ne!(ids[4], ObjectId::compute(ObjectKind::Blob, &inputs[4]));
    let stats = w.commit().unwrap();
    // The compressible 5 MiB compressed well; the random 5 MiB was stored raw.
    let raw: u64 = inputs.iter().map(|d| d.len() as u64).sum();
    assert!(stats.new_pack_bytes < raw - (4 << 20), "{stats:?}");
    for (data, id) in inputs.iter().zip(&ids) {
        assert!(read_all(&t, id) == *data);
    }
    // Large content is not a blob.
    assert!(matches!(t.store.read_blob(&ids[4]), Err(Error::Format(_))));
}

#[test]
fn unknown_id_is_missing() {
    let t = TestStore::new();
    let id = ObjectId::compute(ObjectKind::Blob, b"never stored");
    assert!(!t.store.has(&id).unwrap());
    assert!(matches!(t.store.read_blob(&id), Err(Error::Missing { id: m }) if m == id));
    assert!(matches!(
        t.store.read_content(&id, &mut Vec::new()),
        Err(Error::Missing { .. })
    ));
}

#[test]
fn input_and_output_errors_are_reported() {
    struct Broken;
    impl std::io::Read for Broken {
        fn read(&mut self, _: &mut [u8]) -> std::io::Result<usize> {
            Err(std::io::Error::other("disk on fire"))
        }
    }
    struct Full;
    impl std::io::Write for Full {
        fn write(&mut self, _: &[u8]) -> std::io::Result<usize> {
            Err(std::io::Error::other("no space"))
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let t = TestStore::new();
    let w = t.store.writer().unwrap();
    assert!(matches!(w.put_content(&mut Broken), Err(Error::Input(_))));
    // Failing after the first megabyte, in the chunked path.
    let first = random(5, 2 << 20);
    let mut half = std::io::Read::chain(first.as_slice(), Broken);
    assert!(matches!(w.put_content(&mut half), Err(Error::Input(_))));
    let (id, _) = w.put_content(&mut &random(6, 3 << 20)[..]).unwrap();
    w.commit().unwrap();
    assert!(matches!(
        t.store.read_content(&id, &mut Full),
        Err(Error::Output(_))
    ));
}

/// The same bytes get the same id whether they arrive in one read or dribble in.
#[test]
fn id_does_not_depend_on_read_sizes() {
    let data = random(7, 3 * CHUNK_THRESHOLD as usize + 12345);
    let whole = content_id(&mut data.as_slice()).unwrap();
    for step in [1usize << 20, 65536, 4097, 1000] {
        let mut r = Dribble { data: &data, step };
        assert_eq!(content_id(&mut r).unwrap(), whole, "step {step}");
    }
}

fn content_strategy() -> impl Strategy<Value = (usize, bool, u64, usize)> {
    let t = CHUNK_THRESHOLD as usize;
    (
        prop_oneof![
            0..4096usize,
            (t - 100)..(t + 100),
            (t + 100)..(4 * t),
            (8 * t)..(9 * t),
        ],
        any::<bool>(),
        any::<u64>(),
        prop_oneof![Just(usize::MAX), 1000..200_000usize],
    )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn content_round_trips(
        (len, compressible, seed, step) in content_strategy()
    ) {
        let data = if compressible { text(seed, len) } else { random(seed, len) };
        let t = TestStore::new();
        let w = t.store.writer().unwrap();
        let (id, n) = w.put_content(&mut Dribble { data: &data, step }).unwrap();
        prop_assert_eq!(n, len as u64);
        prop_assert_eq!(content_id(&mut data.as_slice()).unwrap(), (id, n));
        w.commit().unwrap();
        let back = read_all(&t, &id);
        prop_assert!(back == data, "content differs");
        prop_assert!(t.store.fsck().unwrap().problems.is_empty());
    }
}
