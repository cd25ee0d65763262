//! Fan-out trees (`RWTF`, a directory of more than `FANOUT_AT` entries stored as parts): read
//! back exactly, one id per directory however it was built, one change stores one part, and
//! every reader refuses a fan-out that another writer could have cut differently or whose
//! parts do not match it.

use proptest::prelude::*;
use rewind_store::{EntryKind, ObjectId, Tree, TreeEntry, FANOUT_AT};

use crate::common::TestStore;

fn entry(name: String, salt: u64) -> TreeEntry {
    let mut id = [0u8; 32];
    id[..8].copy_from_slice(&salt.to_le_bytes());
    id[8..16].copy_from_slice(&(name.len() as u64).to_le_bytes());
    TreeEntry {
        name: name.into_bytes(),
        kind: EntryKind::File,
        mode: 0o644,
        size: salt % 5000,
        id: ObjectId(id),
    }
}

/// `n` entries named as an agent's files are (`f000123.rs`), ids from `salt`.
fn listing(n: usize, salt: u64) -> Vec<TreeEntry> {
    (0..n)
        .map(|i| entry(format!("f{i:06}.rs"), salt ^ i as u64))
        .collect()
}

fn put(t: &TestStore, tree: &Tree) -> (ObjectId, u64) {
    let w = t.store.writer().unwrap();
    let id = w.put_tree(tree).unwrap();
    let stats = w.commit().unwrap();
    (id, stats.new_objects)
}

#[test]
fn a_huge_directory_is_read_back_exactly_and_one_change_stores_one_part() {
    let t = TestStore::new();
    let mut entries = listing(50_000, 1);
    let tree = Tree::new(entries.clone()).unwrap();
    let (id, new) = put(&t, &tree);
    assert!(new > 2, "stored as parts and a fan-out ({new} objects)");
    assert_eq!(t.store.read_tree(&id).unwrap(), tree);
    let parts = t.store.tree_parts(&id).unwrap();
    assert_eq!(parts.len() as u64, new - 1);
    assert!(
        parts.len() > 10 && parts.len() < 200,
        "about a part per thousand entries: {}",
        parts.len()
    );

    // A file's new content: one part and the fan-out are new.
    entries[31_337].id = ObjectId([9; 32]);
    let changed = Tree::new(entries.clone()).unwrap();
    let (id2, new) = put(&t, &changed);
    assert_eq!(new, 2, "one part and the fan-out");
    assert_eq!(t.store.read_tree(&id2).unwrap(), changed);

    // A file added and one removed: the cuts next to them at most.
    entries.remove(100);
    entries.push(entry("g-new".into(), 7));
    let (id3, new) = put(&t, &Tree::new(entries.clone()).unwrap());
    assert!(new <= 5, "{new} objects for two changed names");
    assert_eq!(t.store.read_tree(&id3).unwrap().entries(), &entries[..]);
    let report = t.store.fsck().unwrap();
    assert!(report.problems.is_empty(), "{:?}", report.problems);
}

#[test]
fn up_to_the_threshold_a_tree_is_one_object() {
    let t = TestStore::new();
    let (id, new) = put(&t, &Tree::new(listing(FANOUT_AT, 2)).unwrap());
    assert_eq!(new, 1);
    assert!(t.store.tree_parts(&id).unwrap().is_empty());
    let (id, new) = put(&t, &Tree::new(listing(FANOUT_AT + 1, 2)).unwrap());
    assert!(new >= 2, "{new}");
    assert!(!t.store.tree_parts(&id).unwrap().is_empty());
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(12))]

    /// Any listing reads back as it was, and its id is the same whether it was stored whole in
    /// a new store or built up change by change in another: a directory has one id.
    #[test]
    fn one_listing_one_id_however_it_was_built(
        n in 0usize..14_000,
        edits in proptest::collection::vec((0usize..14_000, 0u8..3), 0..40),
        salt in any::<u64>(),
    ) {
        let a = TestStore::new();
        let b = TestStore::new();
        let mut entries = listing(n, salt);
        put(&b, &Tree::new(entries.clone()).unwrap());
        for (at, what) in edits {
            match what {
                0 if !entries.is_empty() => {
                    let i = at % entries.len();
                    entries[i].id.0[31] ^= 1;
                }
                1 if !entries.is_empty() => {
                    entries.remove(at % entries.len());
                }
                _ => entries.push(entry(format!("n{at}-{salt}"), at as u64)),
            }
            put(&b, &Tree::new(entries.clone()).unwrap());
        }
        let tree = Tree::new(entries).unwrap();
        let (id_a, _) = put(&a, &tree);
        let (id_b, new) = put(&b, &tree);
        prop_assert_eq!(id_a, id_b);
        prop_assert_eq!(new, 0, "stored already");
        prop_assert_eq!(a.store.read_tree(&id_a).unwrap(), tree.clone());
        prop_assert_eq!(b.store.read_tree(&id_b).unwrap(), tree);
    }
}
