//! Objects are stored once, however often and from however many threads they are put.

use crate::common;

use common::{random, TestStore};
use rewind_store::{StoreConfig, Writer};

#[test]
fn same_content_twice_adds_nothing() {
    let t = TestStore::new();
    let big = random(1, 6 << 20);
    let w = t.store.writer().unwrap();
    let (a, _) = w.put_content(&mut big.as_slice()).unwrap();
    let (b, _) = w.put_content(&mut big.as_slice()).unwrap();
    assert_eq!(a, b);
    w.put_blob(b"small").unwrap();
    let first = w.commit().unwrap();
    let before = t.store.stats().unwrap();
    assert_eq!(before.objects, first.new_objects);

    // Again, in a new writer: everything is already indexed.
    let w = t.store.writer().unwrap();
    assert_eq!(w.put_content(&mut big.as_slice()).unwrap().0, a);
    w.put_blob(b"small").unwrap();
    let second = w.commit().unwrap();
    assert_eq!(second.new_objects, 0);
    assert_eq!(second.new_pack_bytes, 0);
    assert_eq!(t.store.stats().unwrap(), before);
}

#[test]
fn an_edit_in_a_large_file_stores_about_the_edit() {
    let t = TestStore::new();
    let v1 = random(2, 64 << 20);
    let mut v2 = v1.clone();
    v2[32 << 20..33 << 20].copy_from_slice(&random(3, 1 << 20));

    let w = t.store.writer().unwrap();
    let (id1, _) = w.put_content(&mut v1.as_slice()).unwrap();
    w.commit().unwrap();
    let s1 = t.store.stats().unwrap();

    let w = t.store.writer().unwrap();
    let (id2, _) = w.put_content(&mut v2.as_slice()).unwrap();
    w.commit().unwrap();
    let s2 = t.store.stats().unwrap();
    assert_ne!(id1, id2);
    let grew = s2.pack_bytes - s1.pack_bytes;
    eprintln!("a 1 MiB edit of 64 MiB grew the store by {grew} bytes");
    assert!(
        grew <= 8 << 20,
        "store grew by {grew} bytes for a 1 MiB edit"
    );
    assert!(
        grew >= 1 << 20,
        "the edit itself must be stored ({grew} bytes)"
    );

    let mut out = Vec::new();
    t.store.read_content(&id2, &mut out).unwrap();
    assert!(out == v2);
}

fn is_sync<T: Sync>() {}

#[test]
fn many_threads_putting_the_same_objects_store_each_once() {
    is_sync::<Writer<'_>>();
    is_sync::<rewind_store::Store>();
    // A small pack target so that packs roll over while threads race.
    let t = TestStore::with_config(StoreConfig {
        pack_target_size: 64 << 10,
        ..StoreConfig::default()
    });
    let blobs: Vec<Vec<u8>> = (0..300)
        .map(|i| random(i, 1000 + i as usize * 10))
        .collect();
    let w = t.store.writer().unwrap();
    std::thread::scope(|s| {
        for _ in 0..4 {
            s.spawn(|| {
                for b in &blobs {
                    w.put_blob(b).unwrap();
                }
            });
        }
    });
    let c = w.commit().unwrap();
    assert_eq!(c.new_objects, blobs.len() as u64);
    let stats = t.store.stats().unwrap();
    assert_eq!(stats.objects, blobs.len() as u64);
    assert!(stats.packs > 3, "packs should have rolled over: {stats:?}");
    assert_eq!(
        stats.raw_bytes,
        blobs.iter().map(|b| b.len() as u64).sum::<u64>()
    );
    assert!(t.tmp_files().is_empty());
}

/// A cold capture: more lookups than the writer sends to SQLite, so it switches to its
/// in-memory snapshot of the index. Objects already indexed must still be recognised, and new
/// ones stored.
#[test]
fn dedup_holds_past_the_index_snapshot() {
    let t = TestStore::new();
    let blobs: Vec<Vec<u8>> = (0..3000).map(|i| random(10_000 + i, 200)).collect();
    let w = t.store.writer().unwrap();
    for b in blobs.iter().step_by(2) {
        w.put_blob(b).unwrap();
    }
    assert_eq!(w.commit().unwrap().new_objects, 1500);

    let w = t.store.writer().unwrap();
    for b in &blobs {
        w.put_blob(b).unwrap();
    }
    assert_eq!(w.commit().unwrap().new_objects, 1500);
    assert_eq!(t.store.stats().unwrap().objects, 3000);
}

/// Content prepared ahead of a writer is stored as `put_content` stores the same bytes: the
/// same id, read back whole, deduplicated against what is stored and within the writer, in
/// an inline row or in a pack; content too large for one blob is not prepared.
#[test]
fn prepared_content_is_stored_as_put_content_stores_it() {
    use rewind_store::Prepared;
    for inline_limit in [1 << 20, 0] {
        let t = TestStore::with_config(StoreConfig {
            inline_limit,
            ..Default::default()
        });
        let text = b"fn main() { println!(\"hello\"); }\n".repeat(64);
        let noise = random(4, 3000);
        let w = t.store.writer().unwrap();
        let (stored_id, _) = w.put_content(&mut noise.as_slice()).unwrap();
        w.commit().unwrap();
        let before = t.store.stats().unwrap();

        let w = t.store.writer().unwrap();
        for content in [&text[..], &noise[..], b""] {
            let p = Prepared::content(content, 1).unwrap();
            assert_eq!(p.id(), w.put_prepared(&p).unwrap());
            assert_eq!(
                w.put_prepared(&p).unwrap(),
                p.id(),
                "a second put is the same"
            );
            let (id, _) = w.put_content(&mut &content[..]).unwrap();
            assert_eq!(id, p.id(), "put_content gives prepared content's id");
        }
        let small = Prepared::content(&text, 1).unwrap();
        assert!(small.stored_len() < text.len(), "text is compressed");
        let stats = w.commit().unwrap();
        assert_eq!(
            stats.new_objects, 2,
            "the text and the empty content; noise was stored"
        );
        let after = t.store.stats().unwrap();
        assert_eq!(after.objects, before.objects + 2);
        for (id, content) in [(small.id(), &text[..]), (stored_id, &noise[..])] {
            let mut out = Vec::new();
            t.store.read_content(&id, &mut out).unwrap();
            assert_eq!(out, content, "inline limit {inline_limit}");
        }
    }
    let over = vec![7u8; (rewind_store::CHUNK_THRESHOLD + 1) as usize];
    assert!(Prepared::content(&over, 1).is_none(), "more than one blob");
    let at = vec![7u8; rewind_store::CHUNK_THRESHOLD as usize];
    assert!(Prepared::content(&at, 1).is_some());
}
