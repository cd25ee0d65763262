//! Object ids: BLAKE3-256, domain-separated by object kind.
//!
//! The id of an object is `BLAKE3(kind-tag || u64-le length || bytes)`, so a blob and a tree
//! with the same bytes never share an id and a reader can tell from the id alone what it is
//! checking against.

use std::fmt;

/// What an object holds. The discriminants are part of the on-disk format.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ObjectKind {
    /// A whole small file, or one chunk of a large file.
    Blob = 1,
    /// A large file: its total size and the ordered list of its chunk (blob) ids.
    File = 2,
    /// A directory: sorted entries.
    Tree = 3,
    /// A large file cloned into the store (a reflink): a record naming its size; the bytes
    /// are a file of their own (`crate::clone`).
    Clone = 4,
}

impl ObjectKind {
    /// The kind with this on-disk code (1 blob, 2 file, 3 tree, 4 clone); `None` for any
    /// other byte.
    pub fn from_u8(b: u8) -> Option<ObjectKind> {
        match b {
            1 => Some(ObjectKind::Blob),
            2 => Some(ObjectKind::File),
            3 => Some(ObjectKind::Tree),
            4 => Some(ObjectKind::Clone),
            _ => None,
        }
    }

    fn tag(self) -> &'static [u8] {
        match self {
            ObjectKind::Blob => b"rewind blob\0",
            ObjectKind::File => b"rewind file\0",
            ObjectKind::Tree => b"rewind tree\0",
            ObjectKind::Clone => b"rewind clone\0",
        }
    }
}

/// A 32-byte BLAKE3 object id. Displayed as 64 lowercase hex digits.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub struct ObjectId(pub [u8; 32]);

/// Hashes the first 8 bytes only: an id is a BLAKE3 output, uniform in every byte, so they
/// spread as well as all 32 and cost a quarter to hash (garbage collection's mark looks up
/// millions of ids; a map's hasher is still keyed, so nothing about collisions changes for
/// someone who chooses content). Equality still compares all 32.
impl std::hash::Hash for ObjectId {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        let mut first = [0u8; 8];
        first.copy_from_slice(&self.0[..8]);
        state.write_u64(u64::from_le_bytes(first));
    }
}

impl ObjectId {
    /// The all-zero id, used where an entry has no content (an uncovered path).
    pub const ZERO: ObjectId = ObjectId([0; 32]);

    /// Id of `data` stored as an object of `kind`.
    pub fn compute(kind: ObjectKind, data: &[u8]) -> ObjectId {
        let mut h = Self::hasher(kind, data.len() as u64);
        h.update(data);
        ObjectId(*h.finalize().as_bytes())
    }

    /// A hasher primed with the domain prefix, for callers that stream the bytes.
    pub fn hasher(kind: ObjectKind, len: u64) -> blake3::Hasher {
        let mut h = blake3::Hasher::new();
        h.update(kind.tag());
        h.update(&len.to_le_bytes());
        h
    }

    /// The 64 lowercase hex digits that name this id everywhere (CLI, errors, fsck).
    pub fn to_hex(&self) -> String {
        hex::encode(self.0)
    }

    /// Parses exactly 64 hex digits (either case); `None` for anything else, prefixes included.
    pub fn from_hex(s: &str) -> Option<ObjectId> {
        let mut out = [0u8; 32];
        hex::decode_to_slice(s, &mut out).ok()?;
        Some(ObjectId(out))
    }

    /// Whether this is [`ObjectId::ZERO`], "no content".
    pub fn is_zero(&self) -> bool {
        self.0 == [0; 32]
    }
}

impl fmt::Display for ObjectId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_hex())
    }
}

impl fmt::Debug for ObjectId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ObjectId({})", &self.to_hex()[..12])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_are_domain_separated() {
        let a = ObjectId::compute(ObjectKind::Blob, b"x");
        let b = ObjectId::compute(ObjectKind::Tree, b"x");
        assert_ne!(a, b);
        assert_eq!(ObjectId::from_hex(&a.to_hex()), Some(a));
    }
}
