//! Materialising a tree into a new directory: the worktree's copy of its parent.
//!
//! Invariants:
//! - Only what the tree holds is copied (captured paths: no `.git`, no ignored files unless
//!   asked), into a directory this process just created; nothing is ever written elsewhere.
//! - The source is read through the parent's [`RootDir`] (every component opened
//!   `O_NOFOLLOW`), so a symlink in the parent is copied as a symlink and never followed out.
//! - File content is cloned (`FICLONE`, a reflink: shared blocks, copy on write) where the
//!   file system can, else copied; never hard-linked (an edit in one tree would change both).
//! - The stat cache built for the copy vouches for a file's content id only when the source
//!   was, before and after the copy, exactly what the parent's capture hashed (size, times,
//!   inode) and not modified in the capture's own tick; any other file is given mtime −1 in
//!   the cache, so the worktree's first capture hashes it again. Without a source (a
//!   checkpoint's tree) content comes from the store, whose ids are exact.

use std::ffi::OsStr;
use std::fs::{File, FileTimes};
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use rewind_store::{EntryKind, ObjectId, Store};

use crate::capture::state::{StatEntry, State};
use crate::fs::relpath;
use crate::fs::root::RootDir;
use crate::Error;

/// Where the copy's content comes from.
pub(crate) struct Source<'a> {
    /// The parent's root.
    pub root: &'a RootDir,
    /// The parent's stat cache from the capture that produced the tree.
    pub state: &'a State,
    /// When that capture started: a file modified at or after it may have changed unseen.
    pub started_ns: i64,
}

/// What a copy did.
#[derive(Debug, Default)]
pub(crate) struct Materialised {
    /// The copy's stat cache (its root is the tree's id).
    pub state: State,
    /// Regular files written.
    pub files: u64,
    /// Their bytes.
    pub bytes: u64,
    /// Files cloned with `FICLONE` (sharing blocks with the source).
    pub reflinked: u64,
    /// Paths the copy has without content ids (uncaptured in the parent, or ignored ones).
    pub uncached: u64,
    /// Paths not copied, and why.
    pub skipped: Vec<(Vec<u8>, String)>,
}

fn dest_path(dest: &Path, rel: &[u8]) -> PathBuf {
    if rel.is_empty() {
        dest.to_path_buf()
    } else {
        dest.join(OsStr::from_bytes(rel))
    }
}

fn ns(secs: i64, nsec: i64) -> i64 {
    secs * 1_000_000_000 + nsec
}

fn stat_entry(
    name: &[u8],
    kind: EntryKind,
    mode: u32,
    id: ObjectId,
    m: &std::fs::Metadata,
) -> StatEntry {
    StatEntry {
        name: name.to_vec(),
        kind,
        mode,
        size: if kind == EntryKind::Dir { 0 } else { m.len() },
        mtime_ns: ns(m.mtime(), m.mtime_nsec()),
        ctime_ns: ns(m.ctime(), m.ctime_nsec()),
        ino: m.ino(),
        id,
    }
}

/// A new file at `path`, never through a symlink and never over an existing path.
fn create_new(path: &Path) -> io::Result<File> {
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
}

/// Clones `src` into `dst` if the file system can, else copies it. Returns whether it cloned.
fn clone_or_copy(src: &mut File, dst: &mut File) -> io::Result<bool> {
    if rewind_store::reflink(src, dst)? {
        return Ok(true);
    }
    io::copy(src, dst)?;
    Ok(false)
}

/// Writes `tree` (of `store`) into the empty directory `dest`, content from `source` where
/// given (else from the store), and returns the copy's stat cache.
///
/// Entries are written in parallel (rayon), each directory's before the directory's own mode
/// is set (a read-only directory is made read-only last); the copy's stat cache lists each
/// directory's entries in the tree's order whatever order they were written in.
pub(crate) fn materialise(
    store: &Store,
    tree: ObjectId,
    source: Option<&Source>,
    dest: &Path,
) -> Result<Materialised, Error> {
    let mut out = copy_dir(store, tree, b"", source, dest)?;
    out.state.root = tree;
    Ok(out)
}

impl Materialised {
    /// Adds what another part of the same copy did.
    fn absorb(&mut self, part: Materialised) {
        self.files += part.files;
        self.bytes += part.bytes;
        self.reflinked += part.reflinked;
        self.uncached += part.uncached;
        self.skipped.extend(part.skipped);
        self.state.dirs.extend(part.state.dirs);
    }
}

fn copy_dir(
    store: &Store,
    tree: ObjectId,
    dir: &[u8],
    source: Option<&Source>,
    dest: &Path,
) -> Result<Materialised, Error> {
    use rayon::prelude::*;
    let entries = if tree.is_zero() {
        Vec::new()
    } else {
        store.read_tree(&tree)?.into_entries()
    };
    let parts: Vec<Result<(Option<StatEntry>, Materialised), Error>> = entries
        .into_par_iter()
        .map(|e| copy_entry(store, e, dir, source, dest))
        .collect();
    let mut out = Materialised::default();
    let mut cached = Vec::with_capacity(parts.len());
    for part in parts {
        let (entry, part) = part?;
        cached.extend(entry);
        out.absorb(part);
    }
    out.state
        .dirs
        .insert(dir.to_vec(), std::sync::Arc::new(cached));
    Ok(out)
}

/// Writes one entry of directory `dir` (a subdirectory with everything in it); returns its
/// stat-cache entry, if it has one, and what it wrote.
fn copy_entry(
    store: &Store,
    e: rewind_store::TreeEntry,
    dir: &[u8],
    source: Option<&Source>,
    dest: &Path,
) -> Result<(Option<StatEntry>, Materialised), Error> {
    let mut out = Materialised::default();
    let rel = relpath::join(dir, &e.name);
    let path = dest_path(dest, &rel);
    let cached = match e.kind {
        EntryKind::Dir => {
            std::fs::DirBuilder::new()
                .mode(0o700)
                .create(&path)
                .map_err(Error::io("creating", &path))?;
            out = copy_dir(store, e.id, &rel, source, dest)?;
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(e.mode))
                .map_err(Error::io("setting the mode of", &path))?;
            let m = std::fs::symlink_metadata(&path).map_err(Error::io("inspecting", &path))?;
            Some(stat_entry(&e.name, e.kind, e.mode, e.id, &m))
        }
        EntryKind::Symlink => {
            let mut target = Vec::with_capacity(e.size as usize);
            store.read_content(&e.id, &mut target)?;
            std::os::unix::fs::symlink(OsStr::from_bytes(&target), &path)
                .map_err(Error::io("creating", &path))?;
            let m = std::fs::symlink_metadata(&path).map_err(Error::io("inspecting", &path))?;
            Some(stat_entry(&e.name, e.kind, e.mode, e.id, &m))
        }
        EntryKind::File => {
            let (m, trusted) = copy_file(store, &rel, &e, source, &path, &mut out)?;
            let mut s = stat_entry(&e.name, e.kind, e.mode, e.id, &m);
            if !trusted {
                // Hashed again by the worktree's first capture.
                s.mtime_ns = -1;
            }
            Some(s)
        }
        EntryKind::Uncovered => {
            // Content never captured: copied as it is on disk where there is a source,
            // and left to the worktree's first capture (uncovered there too).
            let Some(src) = source else {
                out.skipped
                    .push((rel, "its content was never captured".into()));
                return Ok((None, out));
            };
            match src.root.open_read(&rel) {
                Ok(mut f) if f.metadata().is_ok_and(|m| m.is_file()) => {
                    let mut d = create_new(&path).map_err(Error::io("creating", &path))?;
                    if clone_or_copy(&mut f, &mut d).map_err(Error::io("copying", &path))? {
                        out.reflinked += 1;
                    }
                    let mode = f.metadata().map(|m| m.mode() & 0o7777).unwrap_or(0o600);
                    d.set_permissions(std::fs::Permissions::from_mode(mode))
                        .map_err(Error::io("setting the mode of", &path))?;
                    out.uncached += 1;
                }
                _ => out
                    .skipped
                    .push((rel, "its content was never captured and it is gone".into())),
            }
            None
        }
    };
    Ok((cached, out))
}

/// Copies one regular file; returns the copy's metadata and whether its content is the
/// entry's id for certain.
fn copy_file(
    store: &Store,
    rel: &[u8],
    e: &rewind_store::TreeEntry,
    source: Option<&Source>,
    path: &Path,
    out: &mut Materialised,
) -> Result<(std::fs::Metadata, bool), Error> {
    let mut dst = create_new(path).map_err(Error::io("creating", path))?;
    let mut trusted = true;
    let from_disk = match source {
        Some(src) => match src.root.open_read(rel) {
            Ok(f) => Some((f, src)),
            Err(_) => None,
        },
        None => None,
    };
    let mut mtime = None;
    match from_disk {
        Some((mut f, src)) => {
            let before = f.metadata().map_err(Error::io_rel("inspecting", rel))?;
            let cached = src.state.get(rel);
            let same = |m: &std::fs::Metadata| {
                m.is_file()
                    && cached.is_some_and(|c| {
                        c.kind == EntryKind::File
                            && c.id == e.id
                            && c.size == m.len()
                            && c.mtime_ns == ns(m.mtime(), m.mtime_nsec())
                            && c.ctime_ns == ns(m.ctime(), m.ctime_nsec())
                            && c.ino == m.ino()
                            && c.mtime_ns < src.started_ns
                    })
            };
            if !before.is_file() {
                return Err(Error::State(format!(
                    "{} changed into something other than a file while it was being copied; \
                     try again",
                    relpath::display(rel)
                )));
            }
            if clone_or_copy(&mut f, &mut dst).map_err(Error::io("copying", path))? {
                out.reflinked += 1;
            }
            let after = f.metadata().map_err(Error::io_rel("inspecting", rel))?;
            trusted = same(&before) && same(&after);
            mtime = after.modified().ok();
        }
        None => {
            let cloned = e.size >= rewind_store::CLONE_FROM && {
                let done = store.clone_content_into(&e.id, &dst)?;
                out.reflinked += u64::from(done);
                done
            };
            if !cloned {
                store.read_content(&e.id, &mut dst)?;
            }
        }
    }
    dst.set_permissions(std::fs::Permissions::from_mode(e.mode))
        .map_err(Error::io("setting the mode of", path))?;
    if let Some(t) = mtime {
        // As `cp -p`: the copy keeps the source's modification time, so the cache can vouch
        // for it (an entry as new as the cache itself is re-hashed).
        dst.set_times(FileTimes::new().set_modified(t))
            .map_err(Error::io("setting the times of", path))?;
    }
    let m = dst.metadata().map_err(Error::io("inspecting", path))?;
    out.files += 1;
    out.bytes += m.len();
    Ok((m, trusted))
}

/// Copies what the parent holds on disk but the tree lacks (ignored paths), except `.git`
/// directories and what is there already; symlinks are copied as symlinks, never followed.
pub(crate) fn copy_untracked(
    parent_root: &Path,
    dest: &Path,
    out: &mut Materialised,
) -> Result<(), Error> {
    fn walk(src: &Path, dst: &Path, out: &mut Materialised) -> Result<(), Error> {
        let rd = std::fs::read_dir(src).map_err(Error::io("listing", src))?;
        for ent in rd {
            let ent = ent.map_err(Error::io("listing", src))?;
            let name = ent.file_name();
            if name == ".git" {
                continue;
            }
            let (s, d) = (src.join(&name), dst.join(&name));
            let m = std::fs::symlink_metadata(&s).map_err(Error::io("inspecting", &s))?;
            let present = std::fs::symlink_metadata(&d).ok();
            if m.is_dir() {
                if present.is_none() {
                    std::fs::DirBuilder::new()
                        .mode(0o700)
                        .create(&d)
                        .map_err(Error::io("creating", &d))?;
                    walk(&s, &d, out)?;
                    std::fs::set_permissions(
                        &d,
                        std::fs::Permissions::from_mode(m.mode() & 0o7777),
                    )
                    .map_err(Error::io("setting the mode of", &d))?;
                } else if present.is_some_and(|p| p.is_dir()) {
                    walk(&s, &d, out)?;
                }
            } else if present.is_some() {
                continue;
            } else if m.file_type().is_symlink() {
                let target = std::fs::read_link(&s).map_err(Error::io("reading link", &s))?;
                std::os::unix::fs::symlink(target, &d).map_err(Error::io("creating", &d))?;
                out.uncached += 1;
            } else if m.is_file() {
                let mut f = std::fs::OpenOptions::new()
                    .read(true)
                    .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
                    .open(&s)
                    .map_err(Error::io("reading", &s))?;
                let mut t = create_new(&d).map_err(Error::io("creating", &d))?;
                if clone_or_copy(&mut f, &mut t).map_err(Error::io("copying", &d))? {
                    out.reflinked += 1;
                }
                t.set_permissions(std::fs::Permissions::from_mode(m.mode() & 0o7777))
                    .map_err(Error::io("setting the mode of", &d))?;
                out.files += 1;
                out.bytes += m.len();
                out.uncached += 1;
            }
            // Sockets, FIFOs, devices: not copied.
        }
        Ok(())
    }
    walk(parent_root, dest, out)
}
