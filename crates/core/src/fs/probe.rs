//! What a path holds on disk, as the op log writes it down: the entry (with its content stored
//! when a writer is given), whether two entries are the same, a declared directory's subtree,
//! and whether a path that appears now existed, uncaptured, before a capture.

use rewind_store::{CloneContent, EntryKind, ObjectId, Store, Writer};

use crate::fs::relpath;
use crate::fs::root::{Present, RootDir};
use crate::model::entry::Entry;
use crate::Error;

/// The entry a path has on disk now. With a writer, its content is stored (a preimage).
pub(crate) fn disk_entry(
    root: &RootDir,
    rel: &[u8],
    writer: Option<&Writer>,
    max_size: u64,
) -> Result<Option<Entry>, Error> {
    match root.lstat(rel).map_err(Error::io_rel("inspecting", rel))? {
        Present::Absent => Ok(None),
        // A directory this process cannot list: what is inside was never captured.
        Present::Dir { .. } if !root.can_list(rel) => Ok(Some(Entry::uncovered(0))),
        Present::Dir { mode } => Ok(Some(Entry {
            kind: EntryKind::Dir,
            mode,
            size: 0,
            id: ObjectId::ZERO,
        })),
        Present::Symlink => {
            let text = root
                .read_link(rel)
                .map_err(Error::io_rel("reading link", rel))?;
            let id = match writer {
                Some(w) => w.put_blob(&text)?,
                None => ObjectId::compute(rewind_store::ObjectKind::Blob, &text),
            };
            Ok(Some(Entry {
                kind: EntryKind::Symlink,
                mode: 0o777,
                size: text.len() as u64,
                id,
            }))
        }
        Present::File { mode } => {
            let mut file = root.open_read(rel).map_err(Error::io_rel("opening", rel))?;
            let size = file
                .metadata()
                .map_err(Error::io_rel("inspecting", rel))?
                .len();
            let (id, size) = match writer {
                // Over the cap, covered only if it can be cloned (which reads nothing).
                Some(w) if size > max_size => match w.clone_file(&file)? {
                    Some(done) => done,
                    None => return Ok(Some(Entry::uncovered(size))),
                },
                None if size > max_size => return Ok(Some(Entry::uncovered(size))),
                Some(w) => {
                    let (id, size, _) = w.put_file(&mut file, size)?;
                    (id, size)
                }
                None => rewind_store::content_id(&mut file)?,
            };
            Ok(Some(Entry {
                kind: EntryKind::File,
                mode,
                size,
                id,
            }))
        }
        Present::Other => Ok(Some(Entry::uncovered(0))),
    }
}

/// What [`disk_entry`] says of `rel`, except that a file holding the content of a cloned entry
/// among `known` is that entry (with the disk's mode), and nothing is stored for it. A clone's
/// id is not a content hash (see `rewind_store`'s `clone` module): hashing the disk never
/// gives it, and cloning again gives a new one, so an unchanged large file would look changed.
/// The bytes are compared with the clone's instead. Every clone holds at least
/// [`rewind_store::CLONE_FROM`] bytes, so smaller entries cost no lookup.
pub(crate) fn disk_entry_known(
    root: &RootDir,
    rel: &[u8],
    writer: Option<&Writer>,
    max_size: u64,
    store: &Store,
    known: [&Option<Entry>; 2],
) -> Result<Option<Entry>, Error> {
    for e in known.into_iter().flatten() {
        if e.kind != EntryKind::File || e.size < rewind_store::CLONE_FROM {
            continue;
        }
        let content = match store.clone_content(&e.id) {
            Ok(Some(content)) => content,
            // Not a clone, or not stored (what to do then is the caller's to say).
            Ok(None) | Err(rewind_store::Error::Missing { .. }) => continue,
            Err(err) => return Err(err.into()),
        };
        let Present::File { mode } = root.lstat(rel).map_err(Error::io_rel("inspecting", rel))?
        else {
            break;
        };
        let same = match content {
            CloneContent::File(clone, size) => {
                let disk = root.open_read(rel).map_err(Error::io_rel("opening", rel))?;
                // Reads only where the two are not the same blocks: nothing for an
                // unchanged file.
                size == e.size
                    && rewind_store::same_content(&disk, &clone)
                        .map_err(Error::io_rel("reading", rel))?
            }
            // Fetched from a remote, the clone file is not here: its packed twin is.
            CloneContent::Packed(twin) => disk_entry(root, rel, None, u64::MAX)?
                .is_some_and(|d| d.id == twin && d.size == e.size),
        };
        if same {
            return Ok(Some(Entry { mode, ..*e }));
        }
    }
    disk_entry(root, rel, writer, max_size)
}

/// Every path below directory `dir` (not `dir` itself), without following symlinks and without
/// entering `.git` or Rewind's temporary files; parents before children.
pub(crate) fn subtree(root: &RootDir, dir: &[u8]) -> Result<Vec<Vec<u8>>, Error> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_vec()];
    while let Some(d) = todo.pop() {
        let mut names = root.list_dir(&d).map_err(Error::io_rel("listing", &d))?;
        names.sort();
        for name in names {
            if crate::fs::NEVER_CAPTURED.contains(&name.as_slice())
                || name.starts_with(crate::fs::root::TEMP_PREFIX.as_bytes())
            {
                continue;
            }
            let p = relpath::join(&d, &name);
            if let Present::Dir { .. } = root.lstat(&p).map_err(Error::io_rel("inspecting", &p))? {
                todo.push(p.clone());
            }
            out.push(p);
        }
    }
    Ok(out)
}

/// Whether what is at `rel` now was already there when a capture started at `ns` (coarse
/// clock, ns since the Unix epoch), judged by its birth time: a path that capture did not list
/// although it existed then was invisible to it (ignored, in an unreadable directory), so its
/// earlier content was never stored. A renamed file keeps its birth time; a file written anew
/// gets a new one. A file born in the same clock tick as the capture started counts as new (its
/// bytes, if a restore removes it, are still stored by the restore's write-ahead, so `undo`
/// brings it back). Where the file system reports no birth time: yes, never delete on doubt.
pub(crate) fn existed_before(root: &std::path::Path, rel: &[u8], ns: i64) -> bool {
    let Ok(meta) = std::fs::symlink_metadata(relpath::to_path(root, rel)) else {
        return false; // gone: nothing to protect
    };
    match meta.created() {
        Ok(born) => born
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(true, |d| (d.as_nanos() as i64) < ns),
        Err(_) => true,
    }
}

/// The "before" of a path that existed but whose content was never captured.
pub(crate) fn uncaptured_like(now: &Entry) -> Entry {
    Entry::uncovered(now.size)
}

/// Looks a path up in a stored tree.
pub(crate) fn tree_lookup(
    store: &Store,
    root: ObjectId,
    rel: &[u8],
) -> Result<Option<Entry>, Error> {
    if root.is_zero() {
        return Ok(None);
    }
    let mut tree = root;
    let parts: Vec<&[u8]> = rel.split(|b| *b == b'/').collect();
    for (i, part) in parts.iter().enumerate() {
        let t = store.read_tree(&tree)?;
        let Some(e) = t.get(part) else {
            return Ok(None);
        };
        if i + 1 == parts.len() {
            return Ok(Some(Entry::from_tree_entry(e)));
        }
        if e.kind != EntryKind::Dir {
            return Ok(None);
        }
        tree = e.id;
    }
    Ok(None)
}
