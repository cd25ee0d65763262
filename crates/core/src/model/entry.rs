//! What the engine knows about one path: an [`Entry`] (a file, a symlink, a directory, or an
//! uncovered file), and a [`Change`] from one entry to another.

use rewind_store::{EntryKind, ObjectId, TreeEntry};
use serde::Serialize;

/// The recorded state of one path. Directories carry the id of their tree.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Entry {
    /// File, symlink, directory or uncovered.
    pub kind: EntryKind,
    /// Permission bits (`st_mode & 0o7777`).
    pub mode: u32,
    /// Content size in bytes (link text length for symlinks, 0 for directories, what was
    /// seen for uncovered files).
    pub size: u64,
    /// Content id (file), link-text blob (symlink), tree (directory), or
    /// [`ObjectId::ZERO`] (uncovered).
    pub id: ObjectId,
}

impl Entry {
    /// The entry a tree records for a path (the name left behind).
    pub fn from_tree_entry(e: &TreeEntry) -> Entry {
        Entry {
            kind: e.kind,
            mode: e.mode,
            size: e.size,
            id: e.id,
        }
    }

    /// Same content and kind and mode, ignoring the tree id of directories (a directory's
    /// content is its children, which are compared one by one).
    pub fn same_as(&self, other: &Entry) -> bool {
        self.kind == other.kind
            && self.mode == other.mode
            && (self.kind == EntryKind::Dir || (self.id == other.id && self.size == other.size))
    }

    /// A path that exists but whose content was not captured (too large, unreadable, not a
    /// regular file): recorded so it is never deleted or overwritten as if it were known.
    pub fn uncovered(size: u64) -> Entry {
        Entry {
            kind: EntryKind::Uncovered,
            mode: 0,
            size,
            id: ObjectId::ZERO,
        }
    }

    /// The kind as users see it: `file`, `executable` (any execute bit), `symlink`, `dir` or
    /// `uncovered`.
    pub fn kind_name(&self) -> &'static str {
        kind_name(self.kind, self.mode)
    }
}

/// The kind as users see it: `file`, `executable` (a file with any execute bit), `symlink`,
/// `dir` or `uncovered`.
pub fn kind_name(kind: EntryKind, mode: u32) -> &'static str {
    match kind {
        EntryKind::File if mode & 0o111 != 0 => "executable",
        EntryKind::File => "file",
        EntryKind::Symlink => "symlink",
        EntryKind::Dir => "dir",
        EntryKind::Uncovered => "uncovered",
    }
}

/// One path's change: `before` → `after`, `None` meaning absent.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Change {
    /// Workspace-relative path, `/`-separated raw bytes.
    pub path: Vec<u8>,
    /// What the path was before the change; `None`: absent.
    pub before: Option<Entry>,
    /// What the change left; `None`: absent (deleted).
    pub after: Option<Entry>,
}

/// A JSON-friendly view of an entry.
#[derive(Clone, Debug, Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct EntryView {
    /// `file`, `executable`, `symlink`, `dir` or `uncovered`.
    pub kind: String,
    /// Permission bits, four octal digits (`0644`).
    pub mode: String,
    /// Content size in bytes (link text length for symlinks, 0 for directories).
    pub size: u64,
    /// Content id, 64 hex digits; empty for an uncovered file.
    pub id: String,
}

impl From<&Entry> for EntryView {
    fn from(e: &Entry) -> Self {
        EntryView {
            kind: e.kind_name().to_string(),
            mode: format!("{:04o}", e.mode),
            size: e.size,
            id: if e.id.is_zero() {
                String::new()
            } else {
                e.id.to_hex()
            },
        }
    }
}

/// Whether two states of a path are the same ([`Entry::same_as`]; absent equals absent).
pub fn same(a: &Option<Entry>, b: &Option<Entry>) -> bool {
    both(a, b, Entry::same_as)
}

/// Whether two states of a path hold the same content, whatever their modes: what the guard
/// compares (a `chmod` is not an edit).
pub fn same_content(a: &Option<Entry>, b: &Option<Entry>) -> bool {
    both(a, b, |x, y| {
        x.kind == y.kind && x.id == y.id && x.size == y.size
    })
}

fn both(a: &Option<Entry>, b: &Option<Entry>, eq: impl Fn(&Entry, &Entry) -> bool) -> bool {
    match (a, b) {
        (None, None) => true,
        (Some(x), Some(y)) => eq(x, y),
        _ => false,
    }
}
