//! A huge directory's tree rebuilt from the parts of its previous one.
//!
//! A directory of more than `FANOUT_AT` entries is stored as a fan-out of parts (the store's
//! `tree::fanout`). When a capture changes a few of its entries, every part whose entries are
//! all as the stat cache has them is the same part as before: its id is taken from the
//! previous tree instead of building, encoding and hashing its thousand entries again.
//!
//! Why the previous parts hold exactly the cached entries: a capture builds each directory's
//! tree from the very entries it saves as that directory's cached listing, and the parent's
//! listing records that tree's id (`old_tree_id`), as the whole-tree reuse in `build_trees`
//! already relies on. The previous fan-out's part counts are checked to add up to the cached
//! listing, and each reused part to be still stored; any doubt builds the part.

use std::collections::HashMap;
use std::ops::Range;

use rewind_store::{Listing, ObjectId, TreeEntry, Writer, FANOUT_AT};

use super::scan::Found;
use super::state::StatEntry;
use super::{same_tree_entry, tree_entry};

/// `entries` (the directory's new listing) as a [`Listing`] that names the parts of the
/// previous tree whose entries are unchanged.
pub(super) struct Reusing<'a> {
    entries: &'a [Found],
    /// For each new entry, the index of the same entry (name, kind, mode, size, id) in the
    /// cached listing, or `u32::MAX`.
    same_as: Vec<u32>,
    /// The previous tree's parts by the cached index of their first entry: count and id.
    old_parts: HashMap<u32, (usize, ObjectId)>,
    writer: &'a Writer<'a>,
}

impl<'a> Reusing<'a> {
    /// `None` when nothing can be reused: a small directory, no previous tree, or one that
    /// is not a fan-out of `cached` (then the caller builds the tree whole).
    pub(super) fn new(
        entries: &'a [Found],
        cached: &[StatEntry],
        old_tree: Option<ObjectId>,
        writer: &'a Writer<'a>,
    ) -> Option<Reusing<'a>> {
        if entries.len() <= FANOUT_AT
            || cached.len() <= FANOUT_AT
            || cached.len() >= u32::MAX as usize
        {
            return None;
        }
        let parts = writer.store().tree_parts(&old_tree?).ok()?;
        if parts.iter().map(|(n, _)| n).sum::<usize>() != cached.len() {
            return None;
        }
        let mut old_parts = HashMap::with_capacity(parts.len());
        let mut at = 0u32;
        for (n, id) in parts {
            old_parts.insert(at, (n, id));
            at += n as u32;
        }
        let mut same_as = vec![u32::MAX; entries.len()];
        // Positions in `cached` and `entries` as the merge advances through them.
        let (mut j, mut i) = (0u32, 0usize);
        let names = crate::base::merge_sorted(cached, entries, |c| &c.name, |f| &f.stat.name);
        for (c, f) in names {
            if let (Some(c), Some(f)) = (c, f) {
                if same_tree_entry(c, &f.stat) {
                    same_as[i] = j;
                }
            }
            j += u32::from(c.is_some());
            i += usize::from(f.is_some());
        }
        Some(Reusing {
            entries,
            same_as,
            old_parts,
            writer,
        })
    }
}

impl Listing for Reusing<'_> {
    fn len(&self) -> usize {
        self.entries.len()
    }

    fn name(&self, i: usize) -> &[u8] {
        &self.entries[i].stat.name
    }

    fn entry(&self, i: usize) -> TreeEntry {
        tree_entry(&self.entries[i].stat)
    }

    /// The previous part that starts where this range's first entry was and holds the same
    /// number of entries, each the same as before and in the same order.
    fn stored(&self, range: Range<usize>) -> Option<ObjectId> {
        let first = *self.same_as.get(range.start)?;
        let (n, id) = *self.old_parts.get(&first)?;
        let same = n == range.len()
            && range
                .clone()
                .zip(first..)
                .all(|(i, j)| self.same_as[i] == j);
        // (Kept by gc while the stat cache names its tree: checked all the same, since a
        // wrong id here would make a wrong tree.)
        (same && self.writer.stored(&id).ok()?).then_some(id)
    }
}

#[cfg(test)]
mod tests {
    use rewind_store::{EntryKind, Store, Tree};

    use super::*;

    fn stat(name: String, v: u64) -> StatEntry {
        StatEntry {
            name: name.into_bytes(),
            kind: EntryKind::File,
            mode: 0o644,
            size: v % 4000,
            mtime_ns: 1,
            ctime_ns: 1,
            ino: v,
            id: ObjectId([(v % 251) as u8; 32]),
        }
    }

    fn found(s: &StatEntry) -> Found {
        Found {
            stat: s.clone(),
            known: true,
            uncovered: None,
        }
    }

    /// A listing that counts the parts it is asked to encode (the ones not reused).
    struct Counting<'a>(&'a Reusing<'a>, std::cell::Cell<usize>);

    impl Listing for Counting<'_> {
        fn len(&self) -> usize {
            self.0.len()
        }
        fn name(&self, i: usize) -> &[u8] {
            self.0.name(i)
        }
        fn entry(&self, i: usize) -> TreeEntry {
            self.0.entry(i)
        }
        fn stored(&self, range: Range<usize>) -> Option<ObjectId> {
            self.0.stored(range)
        }
        fn encode(&self, range: Range<usize>) -> Result<Vec<u8>, rewind_store::Error> {
            self.1.set(self.1.get() + 1);
            self.0.encode(range)
        }
    }

    fn tree_of(entries: &[StatEntry]) -> Tree {
        Tree::new(entries.iter().map(tree_entry).collect()).unwrap()
    }

    fn open(dir: &std::path::Path) -> Store {
        Store::open(
            &dir.join("packs"),
            &dir.join("index.sqlite"),
            Default::default(),
        )
        .unwrap()
    }

    /// The id `put_listing` gives `now` reusing `old` (the tree of `cached`), and the id a
    /// whole build of `now` gives in a store of its own.
    fn rebuilt_and_whole(
        store: &Store,
        old: ObjectId,
        cached: &[StatEntry],
        now: &[StatEntry],
    ) -> (ObjectId, ObjectId) {
        let entries: Vec<Found> = now.iter().map(found).collect();
        let w = store.writer().unwrap();
        let listing = Reusing::new(&entries, cached, Some(old), &w).expect("a fan-out to reuse");
        let got = w.put_listing(&listing).unwrap();
        w.commit().unwrap();
        (got, whole_id(now))
    }

    /// The id of `now`'s tree built whole, in a store of its own.
    fn whole_id(now: &[StatEntry]) -> ObjectId {
        let other = tempfile::tempdir().unwrap();
        let store = open(other.path());
        let w = store.writer().unwrap();
        let id = w.put_tree(&tree_of(now)).unwrap();
        w.commit().unwrap();
        id
    }

    /// The entries either side of each cut, changed one at a time: a part is reused only if
    /// every one of its entries, first and last too, is unchanged.
    #[test]
    fn a_change_at_a_parts_edge_is_not_reused() {
        let dir = tempfile::tempdir().unwrap();
        let store = open(dir.path());
        let cached: Vec<StatEntry> = (0..10_000u64)
            .map(|i| stat(format!("f{i:05}"), i))
            .collect();
        let w = store.writer().unwrap();
        let old = w.put_tree(&tree_of(&cached)).unwrap();
        w.commit().unwrap();
        let mut edge = 0;
        for (n, _) in store.tree_parts(&old).unwrap().into_iter().take(4) {
            edge += n;
            for i in [edge - 1, edge] {
                let mut now = cached.clone();
                now[i].size += 1;
                let (got, whole) = rebuilt_and_whole(&store, old, &cached, &now);
                assert_eq!(
                    got, whole,
                    "entry {i} changed, next to the cut after {edge}"
                );
            }
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::test_runner::Config::with_cases(64))]

        /// A tree rebuilt from the previous one's parts is the tree built whole (the same
        /// id), whatever the edits; and only the parts with changed entries are new.
        #[test]
        fn a_tree_rebuilt_from_parts_is_the_tree_built_whole(
            n in 3000usize..12_000,
            edits in proptest::collection::vec((0usize..12_000, 0u8..4), 0..30),
        ) {
            let dir = tempfile::tempdir().unwrap();
            let store = open(dir.path());
            let cached: Vec<StatEntry> =
                (0..n as u64).map(|i| stat(format!("f{i:05}"), i)).collect();
            let w = store.writer().unwrap();
            let old = w.put_tree(&tree_of(&cached)).unwrap();
            w.commit().unwrap();

            let mut now = cached.clone();
            for &(at, op) in &edits {
                let i = at % now.len();
                match op {
                    0 => now[i].id.0[0] ^= 0x80,
                    1 => { now.remove(i); }
                    2 => {
                        let s = stat(format!("{}-new{at}", String::from_utf8_lossy(&now[i].name)), at as u64);
                        if let Err(pos) = now.binary_search_by(|e| e.name.cmp(&s.name)) {
                            now.insert(pos, s);
                        }
                    }
                    _ => now[i].mode = 0o755,
                }
            }
            let entries: Vec<Found> = now.iter().map(found).collect();
            let w = store.writer().unwrap();
            let whole = whole_id(&now);
            let got = match Reusing::new(&entries, &cached, Some(old), &w) {
                Some(listing) => {
                    proptest::prop_assert!(n > FANOUT_AT && now.len() > FANOUT_AT);
                    let counting = Counting(&listing, Default::default());
                    let id = w.put_listing(&counting).unwrap();
                    // Each edit touches a part or two (an added or removed name may move a
                    // cut): every other part is reused, not encoded.
                    let encoded = counting.1.get();
                    proptest::prop_assert!(encoded <= 2 * edits.len(),
                        "{} parts encoded for {} edits", encoded, edits.len());
                    id
                }
                None => {
                    proptest::prop_assert!(n <= FANOUT_AT || now.len() <= FANOUT_AT);
                    w.put_tree(&tree_of(&now)).unwrap()
                }
            };
            let stats = w.commit().unwrap();
            proptest::prop_assert_eq!(got, whole);
            proptest::prop_assert_eq!(store.read_tree(&got).unwrap(), tree_of(&now));
            if n > FANOUT_AT && now.len() > FANOUT_AT {
                proptest::prop_assert!(stats.new_objects <= 2 * edits.len() as u64 + 1,
                    "{} new objects for {} edits", stats.new_objects, edits.len());
            }
        }
    }
}
