//! The ids a long-running process knows are indexed, kept in memory across its writers.
//!
//! Why: every object a writer puts is first looked up in the index (deduplication), one SQLite
//! point query each, about 11 µs behind the connection the hashing threads share. A capture
//! of 1,000 changed files through `rewind serve` spent about 7 ms of its 60 on them, all
//! answered "no". A short-lived process cannot afford to load every id first (a writer does
//! that only past an eighth of the index, see `Writer::indexed`), but a server loads them
//! once and then keeps the set current with what its own writers commit.
//!
//! Invariants, which make a "yes" always true:
//! * An id enters the set only once it is indexed and committed: loaded from the index, or
//!   added after a writer's own transaction committed its row.
//! * Every set is stamped with the database's instance name (a random name kept in the
//!   database: one made anew at the same path has another) and the sweep count read before its
//!   ids were (see [`crate::Store::sweeps`]: a sweep counts itself in the transaction that
//!   removes rows, and nothing else removes any). A writer compares that stamp with the
//!   database's when it makes its first lookup and reloads the set when they differ; garbage
//!   collection never sweeps while a writer runs, so the stamp stays true for the writer's
//!   lifetime.
//!
//! A "no" can be stale, as a writer's own snapshot can: an object another process indexed
//! since is stored again, a duplicate, never a loss. Objects whose rows joined a caller's
//! transaction (which may still roll back) are kept apart as *unsure*: a lookup of one of
//! those asks the index, so a process's own recent writes are never stored twice.

use std::collections::HashSet;

use parking_lot::RwLock;

use crate::idset::IdSet;
use crate::ObjectId;

/// Unsure ids past which the set is dropped (and reloaded from the index by the next writer)
/// rather than grown: they cost a query each when looked up, and are normally the few
/// objects of exact epochs.
const UNSURE_MAX: usize = 1 << 16;

/// The ids a process's writers may take as indexed without asking the index: shared (in an
/// `Arc`) by every [`crate::Store`] the process opens on one database (see
/// [`crate::Store::share_known_ids`]). Empty until a writer first needs it.
#[derive(Default)]
pub struct KnownIds(RwLock<Option<Known>>);

/// Which database, as of which sweep.
#[derive(Clone, PartialEq, Eq, Debug)]
pub(crate) struct Stamp {
    pub instance: String,
    pub sweeps: u64,
}

struct Known {
    /// The database, and its sweep count read before `base` was loaded.
    stamp: Stamp,
    base: IdSet,
    /// Indexed since `base` was loaded, by this process's writers.
    added: HashSet<ObjectId>,
    /// Written by this process's writers in a transaction of their caller's: indexed only if
    /// that transaction committed.
    unsure: HashSet<ObjectId>,
}

/// What the set says of an id.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Answer {
    Indexed,
    /// Not indexed as far as this process knows.
    Unknown,
    /// Written in a transaction that may have rolled back: ask the index.
    Ask,
}

impl KnownIds {
    /// A set to share between the stores of one database.
    pub fn new() -> KnownIds {
        KnownIds::default()
    }

    /// Whether the set holds ids of the database and sweep `stamp` says.
    pub(crate) fn current(&self, stamp: &Stamp) -> bool {
        self.0.read().as_ref().is_some_and(|k| k.stamp == *stamp)
    }

    /// Replaces the set with `ids`, all indexed when read, `stamp` having been read before
    /// them. Past what an [`IdSet`] holds the set stays empty, and writers ask the index.
    pub(crate) fn load(&self, stamp: Stamp, ids: Vec<ObjectId>) {
        *self.0.write() = IdSet::new(ids).map(|base| Known {
            stamp,
            base,
            added: HashSet::new(),
            unsure: HashSet::new(),
        });
    }

    pub(crate) fn answer(&self, id: &ObjectId) -> Answer {
        let known = self.0.read();
        match known.as_ref() {
            Some(k) if k.base.contains(id) || k.added.contains(id) => Answer::Indexed,
            Some(k) if k.unsure.contains(id) => Answer::Ask,
            Some(_) => Answer::Unknown,
            None => Answer::Ask,
        }
    }

    /// Adds ids whose rows a transaction of the writer's own just committed (`committed`), or
    /// that joined its caller's transaction (not committed yet: kept as unsure).
    pub(crate) fn add(&self, ids: impl IntoIterator<Item = ObjectId>, committed: bool) {
        let mut guard = self.0.write();
        let Some(k) = guard.as_mut() else {
            return;
        };
        if committed {
            for id in ids {
                k.unsure.remove(&id);
                k.added.insert(id);
            }
        } else {
            k.unsure
                .extend(ids.into_iter().filter(|id| !k.base.contains(id)));
        }
        if k.unsure.len() > UNSURE_MAX {
            *guard = None;
            return;
        }
        // Past a quarter of the base, fold the added ids into it: a hash set costs about
        // twice the memory per id of the sorted array.
        if k.added.len() > k.base.len() / 4 + 1024 {
            let mut ids = std::mem::replace(&mut k.base, IdSet::empty()).into_ids();
            ids.extend(k.added.drain());
            match IdSet::new(ids) {
                Some(base) => k.base = base,
                None => *guard = None,
            }
        }
    }

    /// Marks `id` indexed: the index said so (an unsure id whose transaction committed).
    pub(crate) fn confirm(&self, id: &ObjectId) {
        if let Some(k) = self.0.write().as_mut() {
            if k.unsure.remove(id) {
                k.added.insert(*id);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stamp(sweeps: u64) -> Stamp {
        Stamp {
            instance: "db".into(),
            sweeps,
        }
    }

    fn id(n: u8) -> ObjectId {
        ObjectId(*blake3::hash(&[n]).as_bytes())
    }

    #[test]
    fn an_empty_set_sends_every_lookup_to_the_index() {
        let k = KnownIds::new();
        assert!(!k.current(&stamp(0)));
        assert_eq!(k.answer(&id(1)), Answer::Ask);
        k.add([id(1)], true); // nothing to add to: still empty
        assert_eq!(k.answer(&id(1)), Answer::Ask);
    }

    #[test]
    fn committed_ids_are_indexed_and_uncommitted_ones_are_asked_about() {
        let k = KnownIds::new();
        k.load(stamp(3), vec![id(1)]);
        assert!(k.current(&stamp(3)) && !k.current(&stamp(4)));
        let other = Stamp {
            instance: "another".into(),
            sweeps: 3,
        };
        assert!(!k.current(&other));
        assert_eq!(k.answer(&id(1)), Answer::Indexed);
        assert_eq!(k.answer(&id(2)), Answer::Unknown);
        k.add([id(2)], false);
        assert_eq!(k.answer(&id(2)), Answer::Ask);
        k.confirm(&id(2));
        assert_eq!(k.answer(&id(2)), Answer::Indexed);
        k.add([id(3)], false);
        k.add([id(3)], true);
        assert_eq!(k.answer(&id(3)), Answer::Indexed);
    }

    #[test]
    fn added_ids_folded_into_the_base_are_still_found() {
        let k = KnownIds::new();
        k.load(stamp(0), vec![id(0)]);
        let many: Vec<ObjectId> = (0..3000u32)
            .map(|n| ObjectId(*blake3::hash(&n.to_le_bytes()).as_bytes()))
            .collect();
        k.add(many.iter().copied(), true);
        assert!(
            k.0.read().as_ref().unwrap().added.len() < many.len(),
            "folded"
        );
        for m in &many {
            assert_eq!(k.answer(m), Answer::Indexed);
        }
        assert_eq!(k.answer(&id(0)), Answer::Indexed);
        assert_eq!(k.answer(&id(1)), Answer::Unknown);
    }

    #[test]
    fn too_many_unsure_ids_drop_the_set() {
        let k = KnownIds::new();
        k.load(stamp(0), vec![]);
        k.add(
            (0..=UNSURE_MAX as u32).map(|n| ObjectId(*blake3::hash(&n.to_le_bytes()).as_bytes())),
            false,
        );
        assert!(!k.current(&stamp(0)));
    }
}
