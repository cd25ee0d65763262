//! A read-only set of object ids for lookups by the hundred thousand (a writer's snapshot of
//! the index, see `Writer::indexed`).
//!
//! One sorted array, plus where each leading 16-bit prefix starts in it. Ids are BLAKE3
//! hashes, spread evenly over the prefixes, so a lookup is one read of the prefix table and a
//! scan of the few ids that share the prefix: two cache misses. A binary search over the
//! whole array took about 18 (one per halving of 300,000 ids), and on a background baseline of
//! 300,000 files those lookups were half a second of processor time.

use crate::ObjectId;

const BUCKETS: usize = 1 << 16;

pub(crate) struct IdSet {
    ids: Vec<ObjectId>,
    /// `starts[p]..starts[p + 1]`: the ids whose first two bytes are `p`.
    starts: Vec<u32>,
}

fn prefix(id: &ObjectId) -> usize {
    usize::from(u16::from_be_bytes([id.0[0], id.0[1]]))
}

impl IdSet {
    /// The set of `ids` (in any order, duplicates allowed). `None` past `u32::MAX` ids.
    pub fn new(mut ids: Vec<ObjectId>) -> Option<IdSet> {
        ids.sort_unstable();
        ids.dedup();
        ids.shrink_to_fit();
        u32::try_from(ids.len()).ok()?;
        let mut starts = Vec::with_capacity(BUCKETS + 1);
        let mut i = 0;
        for p in 0..BUCKETS {
            starts.push(i as u32);
            while i < ids.len() && prefix(&ids[i]) == p {
                i += 1;
            }
        }
        starts.push(i as u32);
        Some(IdSet { ids, starts })
    }

    /// The set of no ids.
    pub fn empty() -> IdSet {
        IdSet {
            ids: Vec::new(),
            starts: Vec::new(),
        }
    }

    pub fn len(&self) -> usize {
        self.ids.len()
    }

    /// The ids, sorted.
    pub fn into_ids(self) -> Vec<ObjectId> {
        self.ids
    }

    pub fn contains(&self, id: &ObjectId) -> bool {
        if self.ids.is_empty() {
            return false;
        }
        let p = prefix(id);
        let (a, b) = (self.starts[p] as usize, self.starts[p + 1] as usize);
        self.ids[a..b].iter().any(|x| x == id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::HashSet;

    fn id(bytes: [u8; 32]) -> ObjectId {
        ObjectId(bytes)
    }

    proptest! {
        /// Agrees with a hash set on members and non-members, ids bunched on a few prefixes
        /// (the first and last buckets among them) as well as spread.
        #[test]
        fn agrees_with_a_hash_set(
            members in prop::collection::vec((0u8..4, any::<[u8; 32]>()), 0..400),
            probes in prop::collection::vec((0u8..4, any::<[u8; 32]>()), 0..200),
        ) {
            let shape = |(how, mut b): (u8, [u8; 32])| {
                match how {
                    0 => { b[0] = 0; b[1] = 0; }
                    1 => { b[0] = 0xff; b[1] = 0xff; }
                    2 => { b[0] = 0x12; b[1] &= 1; }
                    _ => {}
                }
                id(b)
            };
            let members: Vec<ObjectId> = members.into_iter().map(shape).collect();
            let set = IdSet::new(members.clone()).unwrap();
            let model: HashSet<ObjectId> = members.iter().copied().collect();
            for m in &members {
                prop_assert!(set.contains(m));
            }
            for p in probes.into_iter().map(shape) {
                prop_assert_eq!(set.contains(&p), model.contains(&p));
            }
        }
    }

    #[test]
    fn empty() {
        assert!(!IdSet::new(Vec::new()).unwrap().contains(&id([0; 32])));
        assert!(!IdSet::new(Vec::new()).unwrap().contains(&id([0xff; 32])));
    }
}
