//! Mark: for every stored object, the newest *anchor* that needs it.
//!
//! The checkpoints the policy may drop are numbered oldest first (0, 1, …); dropping "the
//! oldest k" drops those numbered below k. History no kept checkpoint's restore reads (external
//! epochs, epochs of a session before its first checkpoint or of a session without any, old
//! snapshot records) goes with the droppable checkpoint before it in time (with the first, when
//! none is before it); with none droppable at all, only a size budget drops it (one step past
//! the last). Everything that needs objects gets the number of the
//! newest droppable checkpoint whose loss would end the need (its anchor), or [`KEPT`] when
//! nothing the policy does ends it (a session's head, a pinned checkpoint, open epochs, the
//! stat cache, the last known state of every path, unfinished restores), or [`GONE`] when it
//! was collected before. An object's anchor is the largest anchor of anything that needs it, so
//! dropping the oldest k frees exactly the objects whose anchor is below k: one mark serves
//! every k the size budget may try. (Roots whose anchor is below the k the age alone gives are
//! left out by the caller: nothing they alone need is kept in any case.)
//!
//! What a checkpoint needs is what a restore to it reads, taken from the restore planner's own
//! functions ([`crate::rewind::target_tree`] for `--all`, [`Workspace::undo_rows`] for the
//! session scope); an epoch needs both sides of each of its changes (undo, diff, show) and its
//! tree before it ran (a restore to "just before" it with `--all`).

use std::collections::HashMap;

use rayon::prelude::*;
use rewind_store::{EntryKind, ObjectCost, ObjectId, ObjectKind, Store};

use crate::model::entry::Entry;
use crate::Error;

/// The anchor of what no policy drops.
pub(crate) const KEPT: i64 = i64::MAX;
/// The anchor of what was collected before.
pub(crate) const GONE: i64 = -1;

/// What needs objects: a tree (and everything under it) or an entry's content.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Root {
    Tree(ObjectId),
    Entry(Entry),
}

/// The anchor of every object reachable from the roots given, and what reading them found.
pub(crate) struct Marks {
    pub anchor: HashMap<ObjectId, i64>,
}

/// Marks every root (with its anchor) down to the last chunk. Roots are visited from the
/// largest anchor down, so an object's first visit gives its anchor and nothing is read twice;
/// within a root, the objects of one level are read in parallel.
/// A missing object is skipped (nothing is lost by not keeping it); a tree or file object that
/// cannot be read for another reason stops the mark: never delete on doubt.
pub(crate) fn mark(
    store: &Store,
    costs: &HashMap<ObjectId, ObjectCost>,
    roots: Vec<(i64, Root)>,
) -> Result<Marks, Error> {
    mark_from(store, costs, roots, HashMap::with_capacity(costs.len()))
}

/// The objects reachable from `roots` that are not in `known` (nor reached only through it):
/// a mark that adds to an earlier one.
pub(crate) fn mark_more(
    store: &Store,
    costs: &HashMap<ObjectId, ObjectCost>,
    roots: Vec<(i64, Root)>,
    known: &std::collections::HashSet<ObjectId>,
) -> Result<std::collections::HashSet<ObjectId>, Error> {
    let seeded: HashMap<ObjectId, i64> = known.iter().map(|id| (*id, KEPT)).collect();
    let marks = mark_from(store, costs, roots, seeded)?;
    Ok(marks
        .anchor
        .into_keys()
        .filter(|id| !known.contains(id))
        .collect())
}

fn mark_from(
    store: &Store,
    costs: &HashMap<ObjectId, ObjectCost>,
    mut roots: Vec<(i64, Root)>,
    mut anchor: HashMap<ObjectId, i64>,
) -> Result<Marks, Error> {
    roots.sort_by_key(|(a, _)| std::cmp::Reverse(*a));
    // Reused: most roots are single entries (every change's sides, every stat-cache entry).
    let mut level: Vec<ObjectId> = Vec::new();
    for (a, root) in roots {
        if a == GONE {
            continue;
        }
        // One root at a time, in anchor order (so an object's first visit is its anchor), but
        // breadth first within it: each level's trees and file objects are read on every core.
        match root {
            Root::Tree(id) => level.push(id),
            Root::Entry(e) => match e.kind {
                EntryKind::File | EntryKind::Symlink | EntryKind::Dir => level.push(e.id),
                EntryKind::Uncovered => continue,
            },
        }
        while !level.is_empty() {
            let mut to_read = Vec::new();
            for id in level.drain(..) {
                if id.is_zero() {
                    continue;
                }
                // One probe of each map per id: these maps are larger than the caches, and
                // their lookups are most of the mark's time.
                let std::collections::hash_map::Entry::Vacant(slot) = anchor.entry(id) else {
                    continue;
                };
                let Some(cost) = costs.get(&id) else {
                    continue; // not stored: nothing to keep
                };
                slot.insert(a);
                if cost.kind != ObjectKind::Blob {
                    to_read.push((id, cost.kind));
                }
            }
            let read = |(id, kind): &(ObjectId, ObjectKind)| refers_to(store, *id, *kind);
            let children: Vec<Result<Vec<ObjectId>, Error>> = if to_read.len() < 2 {
                to_read.iter().map(read).collect()
            } else {
                to_read.par_iter().map(read).collect()
            };
            for c in children {
                level.extend(c?);
            }
        }
    }
    Ok(Marks { anchor })
}

/// What an object refers to: a tree its entries' ids, a file object its chunks', a clone its
/// packed twin's (blobs refer to nothing). A missing object refers to nothing (nothing is lost by not keeping it); one
/// that cannot be read for another reason stops the mark: never delete on doubt.
fn refers_to(store: &Store, id: ObjectId, kind: ObjectKind) -> Result<Vec<ObjectId>, Error> {
    let read = match kind {
        ObjectKind::Blob => return Ok(Vec::new()),
        // Its packed twin, if it was packed for a remote.
        ObjectKind::Clone => store.clone_packed(&id).map(|c| c.into_iter().collect()),
        ObjectKind::File => store.file_chunks(&id),
        ObjectKind::Tree => store.tree_refs(&id),
    };
    match read {
        Ok(ids) => Ok(ids),
        Err(rewind_store::Error::Missing { .. }) => Ok(Vec::new()),
        Err(e) => Err(doubt(id, e)),
    }
}

fn doubt(id: ObjectId, e: rewind_store::Error) -> Error {
    Error::Unavailable(format!(
        "garbage collection stopped before deleting anything: object {id} cannot be read to \
         see what it refers to ({e})"
    ))
    .remedy(crate::model::remedy::Remedy::Fsck)
}

/// For positions in op-log order, the largest anchor of the checkpoints before each: built
/// from checkpoints `(pos, anchor)`.
pub(crate) struct PrefixMax {
    pos: Vec<i64>,
    max: Vec<i64>,
}

impl PrefixMax {
    /// `points` are (pos, anchor), any order.
    pub fn new(mut points: Vec<(i64, i64)>) -> PrefixMax {
        points.sort_unstable();
        let mut max = Vec::with_capacity(points.len());
        let mut m = i64::MIN;
        for (_, a) in &points {
            m = m.max(*a);
            max.push(m);
        }
        PrefixMax {
            pos: points.into_iter().map(|p| p.0).collect(),
            max,
        }
    }

    /// The anchor of what sits at `pos`: the largest anchor of the checkpoints before it (a
    /// restore to any of them reads it); `None` when no checkpoint is before it.
    pub fn at(&self, pos: i64) -> Option<i64> {
        match self.pos.partition_point(|p| *p < pos) {
            0 => None,
            n => Some(self.max[n - 1]),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix_max_takes_the_newest_needing_checkpoint() {
        let p = PrefixMax::new(vec![(10, 3), (20, KEPT), (30, 1)]);
        assert_eq!(p.at(5), None, "before the first");
        assert_eq!(p.at(15), Some(3));
        assert_eq!(
            p.at(25),
            Some(KEPT),
            "a pinned checkpoint before it keeps it"
        );
        assert_eq!(p.at(35), Some(KEPT));
        assert_eq!(PrefixMax::new(vec![]).at(1), None);
    }
}
