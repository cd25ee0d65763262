//! Rewind trees to git trees, incrementally.
//!
//! A checkpoint's git tree is a pure function of its Rewind tree: every file and symlink at its
//! path (mode `100644`, `100755` when any execute bit is set, `120000`), directories as trees,
//! and nothing else: uncovered entries (over the size cap, unreadable), names git refuses in a
//! tree (`.git` in any case, and its NTFS short name `git~1`) and directories left empty are
//! absent. Ignored paths are absent because no capture holds them.
//!
//! Incremental: given a base (a Rewind tree and the git tree converted from it), only the
//! subtrees whose Rewind ids differ are read, and the difference is applied to the base's git
//! tree as path edits; unchanged subtrees keep their git ids without being read. A 20-file turn
//! writes about 20 blobs and the trees above them. Without a base, every path is an edit.

use std::collections::HashMap;

use gix::bstr::BStr;
use gix::object::tree::EntryKind as GitKind;
use gix::ObjectId as GitId;
use rewind_store::{EntryKind, ObjectId, Store, Tree, TreeEntry};

use crate::model::entry::Entry;
use crate::Error;

/// One change to a git tree: a path (`/`-separated bytes) that goes, or is set to the content
/// of a Rewind file or symlink.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Edit {
    /// The path (a blob or a whole subtree) is removed.
    Remove(Vec<u8>),
    /// The path holds this content.
    Put {
        /// Where.
        path: Vec<u8>,
        /// Blob, executable blob or symlink.
        kind: GitKind,
        /// The Rewind content id (a file's content, a symlink's target blob).
        content: ObjectId,
    },
}

/// Whether git may hold an entry of this name in a tree (`git fsck --strict` is clean).
pub(crate) fn allowed_name(name: &[u8]) -> bool {
    !name.eq_ignore_ascii_case(b".git") && !name.eq_ignore_ascii_case(b"git~1")
}

/// The git form of an entry, `None` for what the shadow history leaves out.
pub(crate) fn git_kind(e: &Entry) -> Option<GitKind> {
    match e.kind {
        EntryKind::File if e.mode & 0o111 != 0 => Some(GitKind::BlobExecutable),
        EntryKind::File => Some(GitKind::Blob),
        EntryKind::Symlink => Some(GitKind::Link),
        EntryKind::Dir => Some(GitKind::Tree),
        EntryKind::Uncovered => None,
    }
}

fn join(prefix: &[u8], name: &[u8]) -> Vec<u8> {
    let mut p = Vec::with_capacity(prefix.len() + 1 + name.len());
    if !prefix.is_empty() {
        p.extend_from_slice(prefix);
        p.push(b'/');
    }
    p.extend_from_slice(name);
    p
}

/// The edits that turn the conversion of Rewind tree `old` (`None`: the empty tree) into the
/// conversion of `new`.
pub(crate) fn tree_edits(
    store: &Store,
    old: Option<ObjectId>,
    new: ObjectId,
) -> Result<Vec<Edit>, Error> {
    let mut out = Vec::new();
    diff(store, old, new, &[], &mut out)?;
    Ok(out)
}

fn read(store: &Store, id: Option<ObjectId>) -> Result<Vec<TreeEntry>, Error> {
    Ok(match id {
        Some(id) => store.read_tree(&id)?.into_entries(),
        None => Tree::new(Vec::new())?.into_entries(),
    })
}

fn diff(
    store: &Store,
    old: Option<ObjectId>,
    new: ObjectId,
    prefix: &[u8],
    out: &mut Vec<Edit>,
) -> Result<(), Error> {
    if old == Some(new) {
        return Ok(());
    }
    let (a, b) = (read(store, old)?, read(store, Some(new))?);
    let (mut i, mut j) = (0, 0);
    while i < a.len() || j < b.len() {
        let (o, n) = match (a.get(i), b.get(j)) {
            (Some(x), Some(y)) if x.name == y.name => {
                i += 1;
                j += 1;
                (Some(x), Some(y))
            }
            (Some(x), Some(y)) if x.name < y.name => {
                i += 1;
                (Some(x), None)
            }
            (Some(x), None) => {
                i += 1;
                (Some(x), None)
            }
            (_, y) => {
                j += 1;
                (None, y)
            }
        };
        let name = &o.or(n).expect("one side").name;
        if !allowed_name(name) {
            continue;
        }
        let path = join(prefix, name);
        let (o, n) = (o.map(Entry::from_tree_entry), n.map(Entry::from_tree_entry));
        let (ok, nk) = (o.as_ref().and_then(git_kind), n.as_ref().and_then(git_kind));
        match (ok, nk) {
            (Some(GitKind::Tree), Some(GitKind::Tree)) => {
                diff(store, o.map(|e| e.id), n.expect("new").id, &path, out)?
            }
            (Some(x), Some(y)) if x == y && o.map(|e| e.id) == n.map(|e| e.id) => {}
            (old_kind, new_kind) => {
                // A directory in the way of a file (or the reverse) goes first.
                if old_kind.is_some()
                    && (new_kind.is_none()
                        || old_kind == Some(GitKind::Tree)
                        || new_kind == Some(GitKind::Tree))
                {
                    out.push(Edit::Remove(path.clone()));
                }
                match new_kind {
                    Some(GitKind::Tree) => diff(store, None, n.expect("new").id, &path, out)?,
                    Some(kind) => out.push(Edit::Put {
                        path,
                        kind,
                        content: n.expect("new").id,
                    }),
                    None => {}
                }
            }
        }
    }
    Ok(())
}

/// The edits of a restore: each changed path set to what the restore left (`after`), removals
/// (deepest first) before the rest so a directory and a file can trade places.
pub(crate) fn change_edits(changes: &[crate::model::entry::Change]) -> Vec<Edit> {
    let mut removes = Vec::new();
    let mut puts = Vec::new();
    for c in changes {
        if !c.path.split(|b| *b == b'/').all(allowed_name) {
            continue;
        }
        let before = c.before.as_ref().and_then(git_kind);
        match c.after.as_ref().map(|a| (a, git_kind(a))) {
            // Its files arrive as changes of their own; only what stood there goes.
            Some((_, Some(GitKind::Tree))) => {
                if before.is_some() && before != Some(GitKind::Tree) {
                    removes.push(Edit::Remove(c.path.clone()));
                }
            }
            Some((a, Some(kind))) => {
                if before == Some(GitKind::Tree) {
                    removes.push(Edit::Remove(c.path.clone()));
                }
                puts.push(Edit::Put {
                    path: c.path.clone(),
                    kind,
                    content: a.id,
                })
            }
            Some((_, None)) | None => removes.push(Edit::Remove(c.path.clone())),
        }
    }
    removes.sort_by(|a, b| match (a, b) {
        (Edit::Remove(x), Edit::Remove(y)) => y.cmp(x),
        _ => std::cmp::Ordering::Equal,
    });
    removes.extend(puts);
    removes
}

/// Writes the blobs `edits` need and applies the edits to git tree `base`; returns the new
/// tree's id and how many blobs were looked at (written, or found already present).
/// `blobs` caches Rewind content id → git blob id across calls.
pub(crate) fn apply(
    repo: &gix::Repository,
    store: &Store,
    base: GitId,
    edits: &[Edit],
    blobs: &mut HashMap<ObjectId, GitId>,
) -> Result<(GitId, usize), Error> {
    let mut editor = repo.edit_tree(base).map_err(super::git("reading tree"))?;
    let mut written = 0;
    let mut buf = Vec::new();
    for e in edits {
        match e {
            Edit::Remove(path) => {
                editor
                    .remove(BStr::new(path))
                    .map_err(super::git("editing tree"))?;
            }
            Edit::Put {
                path,
                kind,
                content,
            } => {
                let blob = match blobs.get(content) {
                    Some(id) => *id,
                    None => {
                        buf.clear();
                        store.read_content(content, &mut buf)?;
                        let id = repo
                            .write_blob(&buf)
                            .map_err(super::git("writing blob"))?
                            .detach();
                        written += 1;
                        blobs.insert(*content, id);
                        id
                    }
                };
                editor
                    .upsert(BStr::new(path), *kind, blob)
                    .map_err(super::git("editing tree"))?;
            }
        }
    }
    let tree = editor.write().map_err(super::git("writing tree"))?.detach();
    Ok((tree, written))
}
