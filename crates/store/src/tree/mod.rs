//! Tree objects: the sorted entries of one directory.
//!
//! Serialized form (all integers little-endian):
//! `b"RWT1"`, `u32` entry count, then per entry: `u32` name length, name bytes, `u8` kind,
//! `u32` mode, `u64` size, 32-byte id. Entries are sorted by name bytes and names are unique,
//! so one directory has exactly one encoding and one id. A directory of more than
//! [`FANOUT_AT`] entries is stored as a fan-out of such trees instead ([`fanout`]).

use crate::{Error, ObjectId};

mod fanout;
pub(crate) use fanout::is_fanout;
use fanout::FanOut;
pub use fanout::FANOUT_AT;

/// What a path is. The discriminants are part of the on-disk format.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EntryKind {
    /// A regular file; `id` is its content id (a blob or a chunked file object).
    File = 1,
    /// A symbolic link; `id` is the blob holding the link text. Never followed.
    Symlink = 2,
    /// A directory; `id` is its tree.
    Dir = 3,
    /// A regular file whose content was not captured (too large, unreadable, over budget).
    /// `id` is [`ObjectId::ZERO`]; `size` is what was seen. A restore must never delete or
    /// overwrite such a path as if it were known.
    Uncovered = 4,
}

impl EntryKind {
    /// The kind with this on-disk code (1 file, 2 symlink, 3 directory, 4 uncovered); `None`
    /// for any other byte.
    pub fn from_u8(b: u8) -> Option<EntryKind> {
        match b {
            1 => Some(EntryKind::File),
            2 => Some(EntryKind::Symlink),
            3 => Some(EntryKind::Dir),
            4 => Some(EntryKind::Uncovered),
            _ => None,
        }
    }
}

/// One entry of a directory.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct TreeEntry {
    /// The file name: raw bytes (names need not be UTF-8). Never empty, `.`, `..`, or
    /// containing `/` or NUL.
    pub name: Vec<u8>,
    /// What the path is, and so what `id` names.
    pub kind: EntryKind,
    /// Permission bits (`st_mode & 0o7777`).
    pub mode: u32,
    /// Content size in bytes (link text length for symlinks, 0 for directories).
    pub size: u64,
    /// Content id (file), link-text blob (symlink), tree (directory), or
    /// [`ObjectId::ZERO`] (uncovered): see [`EntryKind`].
    pub id: ObjectId,
}

/// A directory listing, sorted by name.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Tree {
    entries: Vec<TreeEntry>,
}

/// Whether `name` may be one path component of a tree.
pub fn valid_name(name: &[u8]) -> bool {
    !name.is_empty() && name != b"." && name != b".." && !name.contains(&b'/') && !name.contains(&0)
}

impl Tree {
    /// Builds a tree, sorting the entries. Fails on an invalid or duplicate name.
    pub fn new(mut entries: Vec<TreeEntry>) -> Result<Tree, Error> {
        entries.sort_by(|a, b| a.name.cmp(&b.name));
        for w in entries.windows(2) {
            if w[0].name == w[1].name {
                return Err(Error::Format(format!(
                    "tree has a duplicate entry {:?}",
                    String::from_utf8_lossy(&w[0].name)
                )));
            }
        }
        if let Some(e) = entries.iter().find(|e| !valid_name(&e.name)) {
            return Err(Error::Format(format!(
                "tree entry name {:?} is not a valid file name",
                String::from_utf8_lossy(&e.name)
            )));
        }
        Ok(Tree { entries })
    }

    /// The entries, sorted by name bytes.
    pub fn entries(&self) -> &[TreeEntry] {
        &self.entries
    }

    /// The entries, sorted by name bytes, by value.
    pub fn into_entries(self) -> Vec<TreeEntry> {
        self.entries
    }

    /// The entry named `name` (one component, raw bytes), by binary search.
    pub fn get(&self, name: &[u8]) -> Option<&TreeEntry> {
        self.entries
            .binary_search_by(|e| e.name.as_slice().cmp(name))
            .ok()
            .map(|i| &self.entries[i])
    }

    /// Whether the directory has no entries.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The canonical `RWT1` bytes of the whole listing (module header). For a directory of
    /// more than [`FANOUT_AT`] entries these are not what is stored: see [`store_listing`].
    pub fn encode(&self) -> Vec<u8> {
        encode_entries(&self.entries)
    }

    /// Assembles a fan-out tree from its `RWTF` bytes, reading each part's raw bytes with
    /// `read`. Refuses a part that is not an `RWT1` tree of the count the fan-out gives, and a
    /// fan-out whose parts are out of order or not cut where the rule cuts.
    pub(crate) fn assemble(
        raw: &[u8],
        mut read: impl FnMut(&ObjectId) -> Result<Vec<u8>, Error>,
    ) -> Result<Tree, Error> {
        let f = FanOut::decode(raw)?;
        let mut entries = Vec::with_capacity(f.count);
        for (n, id) in &f.parts {
            let part = read(id)?;
            let got = Tree::decode(&part).map_err(|e| {
                Error::Format(format!("part {id} of a fan-out tree does not decode: {e}"))
            })?;
            if got.entries.len() != *n {
                return Err(Error::Format(format!(
                    "part {id} of a fan-out tree holds {} entries, the fan-out says {n}",
                    got.entries.len()
                )));
            }
            entries.extend(got.entries);
        }
        f.check_cuts(&entries)?;
        Ok(Tree { entries })
    }

    /// Parses `RWT1` bytes: [`Error::Format`] on a truncated or trailing byte, an unknown
    /// kind, or a name [`Tree::new`] refuses. Entries out of order are sorted, not refused.
    pub fn decode(data: &[u8]) -> Result<Tree, Error> {
        let entries = for_each_entry(
            data,
            |n| Vec::with_capacity(n.min(1 << 16)),
            |entries, e| {
                entries.push(TreeEntry {
                    name: e.name.to_vec(),
                    kind: e.kind,
                    mode: e.mode,
                    size: e.size,
                    id: e.id,
                })
            },
        )?;
        Tree::new(entries)
    }
}

/// A directory's sorted listing to be stored as a tree (`Writer::put_listing`), read entry by
/// entry, so that a caller who knows which parts of a huge directory are already stored builds
/// nothing for their entries.
pub trait Listing {
    /// How many entries.
    fn len(&self) -> usize;
    /// Whether there are none.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Entry `i`'s name. Names are sorted by their bytes and unique.
    fn name(&self, i: usize) -> &[u8];
    /// Entry `i`, built only for the parts that are written.
    fn entry(&self, i: usize) -> TreeEntry;
    /// The id of a tree object already stored that holds exactly entries `range`, when the
    /// caller knows one (a part of the directory's previous fan-out whose entries are all
    /// unchanged). Taken on the caller's word: a wrong id makes a wrong tree.
    fn stored(&self, _range: std::ops::Range<usize>) -> Option<ObjectId> {
        None
    }
    /// The `RWT1` bytes of entries `range`.
    fn encode(&self, range: std::ops::Range<usize>) -> Result<Vec<u8>, Error> {
        Ok(Tree::new(range.map(|i| self.entry(i)).collect())?.encode())
    }
}

impl Listing for Tree {
    fn len(&self) -> usize {
        self.entries.len()
    }

    fn name(&self, i: usize) -> &[u8] {
        &self.entries[i].name
    }

    fn entry(&self, i: usize) -> TreeEntry {
        self.entries[i].clone()
    }

    fn encode(&self, range: std::ops::Range<usize>) -> Result<Vec<u8>, Error> {
        Ok(encode_entries(&self.entries[range]))
    }
}

/// Stores `listing` with `put` (which stores one tree object's raw bytes and returns its id)
/// and returns the tree's id: one `RWT1` object, or for more than [`FANOUT_AT`] entries its
/// parts and then the `RWTF` object naming them (see [`fanout`]). A part the listing says is
/// stored is not encoded at all; any other part already stored is deduplicated by `put` like
/// any object. Either way one change in a huge directory writes one part.
pub(crate) fn store_listing(
    listing: &(impl Listing + ?Sized),
    mut put: impl FnMut(&[u8]) -> Result<ObjectId, Error>,
) -> Result<ObjectId, Error> {
    let n = listing.len();
    if n <= FANOUT_AT {
        return put(&listing.encode(0..n)?);
    }
    // The cuts and the reuse of stored parts both assume the order: a part built from an
    // unsorted run would be sorted by `Tree::new` and cut elsewhere than the rule says.
    if (1..n).any(|i| listing.name(i - 1) >= listing.name(i)) {
        return Err(Error::Format(
            "a listing to store is not sorted by name, or names a file twice".into(),
        ));
    }
    let mut parts = Vec::new();
    let mut at = 0;
    for len in fanout::part_lens((0..n).map(|i| listing.name(i))) {
        let range = at..at + len;
        let id = match listing.stored(range.clone()) {
            Some(id) => id,
            None => put(&listing.encode(range)?)?,
        };
        parts.push((len, id));
        at += len;
    }
    put(&FanOut { count: n, parts }.encode())
}

/// A fan-out tree's parts, from its raw bytes: `None` for a tree stored as one object.
pub(crate) fn fanout_parts(raw: &[u8]) -> Result<Option<Vec<(usize, ObjectId)>>, Error> {
    if !is_fanout(raw) {
        return Ok(None);
    }
    Ok(Some(FanOut::decode(raw)?.parts))
}

/// One entry of a serialized tree, borrowing its name from the bytes.
struct RawEntry<'a> {
    name: &'a [u8],
    kind: EntryKind,
    mode: u32,
    size: u64,
    id: ObjectId,
}

/// The canonical `RWT1` bytes of sorted, unique `entries`.
fn encode_entries(entries: &[TreeEntry]) -> Vec<u8> {
    let mut out = Vec::with_capacity(8 + entries.len() * 64);
    out.extend_from_slice(b"RWT1");
    out.extend_from_slice(&(entries.len() as u32).to_le_bytes());
    for e in entries {
        out.extend_from_slice(&(e.name.len() as u32).to_le_bytes());
        out.extend_from_slice(&e.name);
        out.push(e.kind as u8);
        out.extend_from_slice(&e.mode.to_le_bytes());
        out.extend_from_slice(&e.size.to_le_bytes());
        out.extend_from_slice(&e.id.0);
    }
    out
}

/// Checks the layout of a tree object's raw bytes, either form, as far as one object can be
/// checked (a fan-out's parts are objects of their own): what `fsck` asks of each object.
pub(crate) fn check_layout(raw: &[u8]) -> Result<(), Error> {
    if is_fanout(raw) {
        FanOut::decode(raw).map(drop)
    } else {
        Tree::decode(raw).map(drop)
    }
}

/// Walks the layout of `RWT1` bytes: `init` makes the result from the entry count the header
/// gives, `each` adds every entry to it in order. [`Error::Format`] on a bad header, a
/// truncated entry, an unknown kind or trailing bytes; names are not checked here.
fn for_each_entry<T>(
    data: &[u8],
    init: impl FnOnce(usize) -> T,
    mut each: impl FnMut(&mut T, RawEntry<'_>),
) -> Result<T, Error> {
    let bad = |why: &str| Error::Format(format!("tree object is malformed: {why}"));
    let mut r = crate::ByteReader::new(data);
    if r.take(4).ok_or_else(|| bad("short header"))? != b"RWT1" {
        return Err(bad("bad magic"));
    }
    let n = r.u32().ok_or_else(|| bad("short header"))? as usize;
    let mut out = init(n);
    for _ in 0..n {
        let len = r.u32().ok_or_else(|| bad("truncated"))? as usize;
        let name = r.take(len).ok_or_else(|| bad("truncated"))?;
        let kind = r.u8().ok_or_else(|| bad("truncated"))?;
        let kind = EntryKind::from_u8(kind).ok_or_else(|| bad("unknown entry kind"))?;
        let mode = r.u32().ok_or_else(|| bad("truncated"))?;
        let size = r.u64().ok_or_else(|| bad("truncated"))?;
        let id = r.id().ok_or_else(|| bad("truncated"))?;
        let e = RawEntry {
            name,
            kind,
            mode,
            size,
            id,
        };
        each(&mut out, e);
    }
    if !r.is_done() {
        return Err(bad("trailing bytes"));
    }
    Ok(out)
}

/// The ids of a serialized tree's entries, but uncovered ones (they have no content), in entry
/// order: what garbage collection's mark needs of a tree. The layout is checked as
/// [`Tree::decode`] checks it, the names are not, and no entry is built: at 100 kept snapshots
/// of 100k files the mark reads 10M entries.
pub(crate) fn decode_refs(data: &[u8]) -> Result<Vec<ObjectId>, Error> {
    if is_fanout(data) {
        // A fan-out refers to its parts; they refer to the entries.
        return Ok(FanOut::decode(data)?
            .parts
            .into_iter()
            .map(|(_, id)| id)
            .collect());
    }
    // An entry takes at least 49 bytes: a count larger than that allows is damage, found by
    // the walk.
    let most = data.len() / 49;
    for_each_entry(
        data,
        |n| Vec::with_capacity(n.min(most)),
        |ids, e| {
            if e.kind != EntryKind::Uncovered {
                ids.push(e.id);
            }
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_sorted() {
        let e = |n: &[u8]| TreeEntry {
            name: n.to_vec(),
            kind: EntryKind::File,
            mode: 0o644,
            size: 3,
            id: ObjectId([7; 32]),
        };
        let t = Tree::new(vec![e(b"b"), e(b"a\xff"), e(b"a")]).unwrap();
        assert_eq!(t.entries()[0].name, b"a");
        assert_eq!(Tree::decode(&t.encode()).unwrap(), t);
        assert!(Tree::new(vec![e(b"a"), e(b"a")]).is_err());
        assert!(Tree::new(vec![e(b"..")]).is_err());
        assert!(Tree::new(vec![e(b"x/y")]).is_err());
    }

    /// The mark's reading of a tree names exactly the content ids a full decode gives, and
    /// refuses every damaged encoding a full decode refuses for its layout.
    #[test]
    fn refs_are_the_decoded_entries_ids() {
        let kinds = [
            EntryKind::File,
            EntryKind::Symlink,
            EntryKind::Dir,
            EntryKind::Uncovered,
        ];
        let entries: Vec<TreeEntry> = (0u8..40)
            .map(|i| TreeEntry {
                name: format!("n{i:02}").repeat(1 + i as usize % 3).into_bytes(),
                kind: kinds[i as usize % 4],
                mode: 0o644,
                size: i as u64 * 1000,
                id: ObjectId([i; 32]),
            })
            .collect();
        let t = Tree::new(entries).unwrap();
        let enc = t.encode();
        let want: Vec<ObjectId> = t
            .entries()
            .iter()
            .filter(|e| e.kind != EntryKind::Uncovered)
            .map(|e| e.id)
            .collect();
        assert_eq!(want.len(), 30);
        assert_eq!(decode_refs(&enc).unwrap(), want);
        assert_eq!(decode_refs(&Tree::default().encode()).unwrap(), vec![]);
        for cut in 0..enc.len() {
            assert!(decode_refs(&enc[..cut]).is_err(), "cut at {cut}");
        }
        let mut long = enc.clone();
        long.push(0);
        assert!(decode_refs(&long).is_err());
        let mut bad_kind = enc.clone();
        bad_kind[8 + 4 + 3] = 9; // the first entry's kind ("n00")
        assert!(Tree::decode(&bad_kind).is_err());
        assert!(decode_refs(&bad_kind).is_err());
    }
}
