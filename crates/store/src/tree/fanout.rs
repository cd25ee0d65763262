//! Fan-out trees: a directory of more than [`FANOUT_AT`] entries is stored as one `RWTF`
//! object that names its *parts*, each an ordinary `RWT1` tree of a run of its sorted
//! entries. One change in a 100,000-entry directory then stores one part (about a thousand
//! entries) and a fan-out object of a few kilobytes, where a single object would store all
//! 100,000 entries again (3.2 MB of ids alone, for every capture that changes one file).
//!
//! Where parts end depends only on the names, as FastCDC's cuts depend only on the bytes: a
//! part ends after an entry whose name's hash ([`name_hash`]) has its top [`CUT_BITS`] bits
//! zero, once the part holds at least [`PART_MIN`] entries, or when it holds [`PART_MAX`]; the
//! last part takes the rest. So a directory still has exactly one encoding and one id (the
//! reader checks the cuts), an entry added or removed moves at most the cuts next to it, and a
//! file's new content moves none.
//!
//! Layout (little-endian): `b"RWTF"`, `u32` entry count (more than [`FANOUT_AT`]), `u32` part
//! count (at least 1), then per part: `u32` its entry count (at least 1), its tree id (32).

use crate::{Error, ObjectId};

use super::TreeEntry;

/// A directory with more entries than this is stored as a fan-out; one with this many or
/// fewer as a single `RWT1` tree.
pub const FANOUT_AT: usize = 4096;
/// The fewest entries a part holds before a name may end it (the last part may hold fewer).
pub(crate) const PART_MIN: usize = 256;
/// The most entries a part holds.
pub(crate) const PART_MAX: usize = 8192;
/// A name ends a part when this many top bits of its hash are zero: one name in 1,024.
pub(crate) const CUT_BITS: u32 = 10;

const MAGIC: &[u8; 4] = b"RWTF";

/// The cut rule's hash of a name: FNV-1a (64 bits), then MurmurHash3's 64-bit finalizer.
/// FNV-1a alone leaves the names an agent makes (`f000123.rs`, `f000124.rs`, …) too alike in
/// their top bits: 100,000 such names gave parts of 7,000 entries instead of 1,000.
fn name_hash(name: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in name {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    h ^ (h >> 33)
}

/// The entry counts of the parts of a sorted listing with these names, in order (see the
/// module header).
pub(crate) fn part_lens<'a>(names: impl ExactSizeIterator<Item = &'a [u8]>) -> Vec<usize> {
    let mut lens = Vec::with_capacity(names.len() / 1024 + 1);
    let mut len = 0;
    for name in names {
        len += 1;
        if len >= PART_MAX || (len >= PART_MIN && name_hash(name) >> (64 - CUT_BITS) == 0) {
            lens.push(len);
            len = 0;
        }
    }
    if len > 0 {
        lens.push(len);
    }
    lens
}

/// Whether a tree object's raw bytes are a fan-out (else `RWT1`).
pub(crate) fn is_fanout(raw: &[u8]) -> bool {
    raw.starts_with(MAGIC)
}

/// A decoded `RWTF` object: the entry count and each part's entry count and tree id.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct FanOut {
    pub count: usize,
    pub parts: Vec<(usize, ObjectId)>,
}

impl FanOut {
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(12 + self.parts.len() * 36);
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&(self.count as u32).to_le_bytes());
        out.extend_from_slice(&(self.parts.len() as u32).to_le_bytes());
        for (n, id) in &self.parts {
            out.extend_from_slice(&(*n as u32).to_le_bytes());
            out.extend_from_slice(&id.0);
        }
        out
    }

    /// Parses the layout: [`Error::Format`] on a bad header, a truncated or trailing byte, an
    /// empty part, or counts that do not add up. Whether the cuts are the canonical ones needs
    /// the parts' names: see [`FanOut::check_cuts`].
    pub fn decode(data: &[u8]) -> Result<FanOut, Error> {
        let bad = |why: &str| Error::Format(format!("fan-out tree object is malformed: {why}"));
        let mut r = crate::ByteReader::new(data);
        if r.take(4).ok_or_else(|| bad("short header"))? != MAGIC {
            return Err(bad("bad magic"));
        }
        let count = r.u32().ok_or_else(|| bad("short header"))? as usize;
        let nparts = r.u32().ok_or_else(|| bad("short header"))? as usize;
        if count <= FANOUT_AT || nparts == 0 || nparts > count {
            return Err(bad("counts out of range"));
        }
        let mut parts = Vec::with_capacity(nparts);
        let mut total = 0usize;
        for _ in 0..nparts {
            let n = r.u32().ok_or_else(|| bad("truncated"))? as usize;
            let id = r.id().ok_or_else(|| bad("truncated"))?;
            if n == 0 {
                return Err(bad("an empty part"));
            }
            total += n;
            parts.push((n, id));
        }
        if !r.is_done() {
            return Err(bad("trailing bytes"));
        }
        if total != count {
            return Err(bad("the parts' counts do not add up to the entry count"));
        }
        Ok(FanOut { count, parts })
    }

    /// Whether `entries` (the parts' entries, concatenated) are sorted and unique across the
    /// parts and cut where the rule cuts them: a fan-out any other writer could have made
    /// differently would give one directory two ids.
    pub fn check_cuts(&self, entries: &[TreeEntry]) -> Result<(), Error> {
        let bad = |why: &str| Error::Format(format!("fan-out tree is not canonical: {why}"));
        if entries.windows(2).any(|w| w[0].name >= w[1].name) {
            return Err(bad("its parts' names are not in order"));
        }
        let lens: Vec<usize> = self.parts.iter().map(|(n, _)| *n).collect();
        if part_lens(entries.iter().map(|e| e.name.as_slice())) != lens {
            return Err(bad("its parts are not cut where the names cut them"));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;
    use crate::tree::{encode_entries, EntryKind, Tree};

    fn entries(n: usize) -> Vec<TreeEntry> {
        (0..n)
            .map(|i| TreeEntry {
                name: format!("file-{i:05}").into_bytes(),
                kind: EntryKind::File,
                mode: 0o644,
                size: i as u64,
                id: ObjectId([(i % 251) as u8; 32]),
            })
            .collect()
    }

    /// Stores `parts` (runs of `all`) in a map the way `Tree::store` would, and returns the
    /// fan-out's bytes and the map, for `Tree::assemble` to read.
    fn stored(all: &[TreeEntry], lens: &[usize]) -> (Vec<u8>, HashMap<ObjectId, Vec<u8>>) {
        let mut objects = HashMap::new();
        let mut parts = Vec::new();
        let mut at = 0;
        for &n in lens {
            let raw = encode_entries(&all[at..at + n]);
            let id = ObjectId::compute(crate::ObjectKind::Tree, &raw);
            objects.insert(id, raw);
            parts.push((n, id));
            at += n;
        }
        let count = lens.iter().sum();
        (FanOut { count, parts }.encode(), objects)
    }

    fn assemble(raw: &[u8], objects: &HashMap<ObjectId, Vec<u8>>) -> Result<Tree, Error> {
        Tree::assemble(raw, |id| {
            objects
                .get(id)
                .cloned()
                .ok_or_else(|| Error::Format(format!("no {id}")))
        })
    }

    #[test]
    fn the_canonical_cuts_are_accepted_and_any_other_refused() {
        let all = entries(20_000);
        let lens = part_lens(all.iter().map(|e| e.name.as_slice()));
        assert!(lens.len() > 5, "{lens:?}");
        assert!(lens.iter().all(|n| (1..=PART_MAX).contains(n)));
        assert!(lens[..lens.len() - 1].iter().all(|n| *n >= PART_MIN));
        let (raw, objects) = stored(&all, &lens);
        assert_eq!(assemble(&raw, &objects).unwrap().entries(), &all[..]);

        // The same entries cut one entry later: the same listing, another encoding.
        let mut moved = lens.clone();
        moved[0] += 1;
        moved[1] -= 1;
        let (raw, objects) = stored(&all, &moved);
        let e = assemble(&raw, &objects).unwrap_err().to_string();
        assert!(e.contains("not cut where the names cut them"), "{e}");

        // Parts swapped: the names out of order.
        let (raw, objects) = stored(&all, &lens);
        let mut f = FanOut::decode(&raw).unwrap();
        f.parts.swap(0, 1);
        let e = assemble(&f.encode(), &objects).unwrap_err().to_string();
        assert!(e.contains("not in order") || e.contains("entries"), "{e}");

        // A part's count that is not what the part holds.
        let mut f = FanOut::decode(&raw).unwrap();
        f.parts[0].0 += 1;
        f.parts[1].0 -= 1;
        let e = assemble(&f.encode(), &objects).unwrap_err().to_string();
        assert!(e.contains("holds"), "{e}");

        // A part that is itself a fan-out.
        let mut objects = objects;
        let f = FanOut::decode(&raw).unwrap();
        objects.insert(f.parts[0].1, raw.clone());
        assert!(assemble(&raw, &objects).is_err());
    }

    #[test]
    fn a_damaged_layout_is_refused() {
        let all = entries(5_000);
        let (raw, _) = stored(&all, &part_lens(all.iter().map(|e| e.name.as_slice())));
        assert!(FanOut::decode(&raw).is_ok());
        for cut in 0..raw.len() {
            assert!(FanOut::decode(&raw[..cut]).is_err(), "cut at {cut}");
        }
        let mut long = raw.clone();
        long.push(0);
        assert!(FanOut::decode(&long).is_err());
        // Too few entries to be a fan-out: such a tree is one `RWT1` object.
        let small = FanOut {
            count: FANOUT_AT,
            parts: vec![(FANOUT_AT, ObjectId([1; 32]))],
        };
        assert!(FanOut::decode(&small.encode()).is_err());
        let empty_part = FanOut {
            count: FANOUT_AT + 1,
            parts: vec![(FANOUT_AT + 1, ObjectId([1; 32])), (0, ObjectId([2; 32]))],
        };
        assert!(FanOut::decode(&empty_part.encode()).is_err());
    }

    /// The cut rule's parts of an agent's huge directory: about a thousand entries each, so
    /// one change rewrites about a thousandth of a 100,000-entry listing.
    #[test]
    fn parts_average_about_a_thousand_entries() {
        let all = entries(100_000);
        let lens = part_lens(all.iter().map(|e| e.name.as_slice()));
        let avg = 100_000 / lens.len();
        assert!((700..=2_500).contains(&avg), "{avg} entries a part");
    }
}
