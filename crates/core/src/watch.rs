//! A file watcher for the lifetime of one opaque epoch (`rewind exec`), so that its closing
//! capture re-reads only the directories something happened in, instead of the whole tree.
//!
//! Linux inotify, one watch per captured directory, armed *before* the opening capture (an event
//! in between only means one more directory is re-read). Events are queued by the kernel as the
//! writes happen, so once the command has exited every event it caused is in the queue. Any
//! doubt falls back to a full scan: queue overflow, a watch that could not be added (the
//! `fs.inotify.max_user_watches` limit), a changed ignore file. Known blind spot, shared with
//! every inotify user: writes through a memory mapping that outlive the file's close.

use std::collections::{HashMap, HashSet};
use std::ffi::CString;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use crate::ignore_rules::IGNORE_FILES;
use crate::relpath;

/// Directories to re-read after a command, from what the watcher saw.
#[derive(Debug, Default)]
pub(crate) struct Dirty {
    /// Re-read the listing (and stat every entry) of these directories.
    dirs: HashSet<Vec<u8>>,
    /// Walk these whole (directories created or moved in while watching).
    subtrees: HashSet<Vec<u8>>,
    /// Every proper ancestor of the above, which the walk passes through.
    ancestors: HashSet<Vec<u8>>,
}

impl Dirty {
    /// Nothing happened: the tree is as the opening capture saw it.
    pub fn is_empty(&self) -> bool {
        self.dirs.is_empty() && self.subtrees.is_empty()
    }

    fn under_subtree(&self, rel: &[u8]) -> bool {
        let mut p = rel;
        loop {
            if self.subtrees.contains(p) {
                return true;
            }
            if p.is_empty() {
                return false;
            }
            p = relpath::split(p).0;
        }
    }

    /// Whether the walk must read this directory's listing.
    pub fn reads(&self, rel: &[u8]) -> bool {
        self.dirs.contains(rel) || self.under_subtree(rel)
    }

    /// Whether the walk must enter this directory at all.
    pub fn enters(&self, rel: &[u8]) -> bool {
        self.reads(rel) || self.ancestors.contains(rel)
    }

    fn finish(mut self) -> Dirty {
        let mut anc = HashSet::new();
        for d in self.dirs.iter().chain(&self.subtrees) {
            let mut p = d.as_slice();
            while !p.is_empty() {
                p = relpath::split(p).0;
                anc.insert(p.to_vec());
            }
        }
        self.ancestors = anc;
        self
    }
}

pub(crate) struct Watcher {
    fd: OwnedFd,
    dirs: HashMap<i32, Vec<u8>>,
    /// Directories first watched after the opening capture read them (see
    /// [`Watcher::watch_late`]): always re-read.
    late: Vec<Vec<u8>>,
    exclude: Option<(std::path::PathBuf, Option<std::time::SystemTime>)>,
}

const MASK: u32 = libc::IN_CREATE
    | libc::IN_DELETE
    | libc::IN_MODIFY
    | libc::IN_ATTRIB
    | libc::IN_MOVED_FROM
    | libc::IN_MOVED_TO
    | libc::IN_CLOSE_WRITE
    | libc::IN_DELETE_SELF
    | libc::IN_MOVE_SELF
    | libc::IN_DONT_FOLLOW
    | libc::IN_ONLYDIR;

impl Watcher {
    /// Watches `dirs` (workspace-relative). `None` when inotify is unavailable or a watch
    /// cannot be added: the caller then scans everything, as without a watcher.
    pub fn start<'a>(root: &Path, dirs: impl Iterator<Item = &'a Vec<u8>>) -> Option<Watcher> {
        // SAFETY: plain syscall; the fd is owned below.
        let fd = unsafe { libc::inotify_init1(libc::IN_CLOEXEC | libc::IN_NONBLOCK) };
        if fd < 0 {
            return None;
        }
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        let mut map = HashMap::new();
        for rel in dirs {
            let path = CString::new(relpath::to_path(root, rel).as_os_str().as_bytes()).ok()?;
            // SAFETY: valid fd and C string.
            let wd = unsafe { libc::inotify_add_watch(fd.as_raw_fd(), path.as_ptr(), MASK) };
            if wd < 0 {
                return None;
            }
            map.insert(wd, rel.clone());
        }
        let exclude = root.join(".git/info/exclude");
        let mtime = std::fs::metadata(&exclude).and_then(|m| m.modified()).ok();
        Some(Watcher {
            fd,
            dirs: map,
            late: Vec::new(),
            exclude: Some((exclude, mtime)),
        })
    }

    /// Also watches those of `dirs` not watched yet: directories the opening capture found
    /// that the watcher, armed from the previous capture's list, did not know. A change in one
    /// between the capture reading it and this watch would raise no event, so these are
    /// always re-read at the end. `false` if a watch could not be added: then the caller must
    /// scan everything.
    pub fn watch_late<'a>(&mut self, root: &Path, dirs: impl Iterator<Item = &'a Vec<u8>>) -> bool {
        let known: HashSet<&Vec<u8>> = self.dirs.values().collect();
        let new: Vec<Vec<u8>> = dirs.filter(|d| !known.contains(d)).cloned().collect();
        for rel in new {
            let Ok(path) = CString::new(relpath::to_path(root, &rel).as_os_str().as_bytes()) else {
                return false;
            };
            // SAFETY: valid fd and C string.
            let wd = unsafe { libc::inotify_add_watch(self.fd.as_raw_fd(), path.as_ptr(), MASK) };
            if wd < 0 {
                return false;
            }
            self.dirs.insert(wd, rel.clone());
            self.late.push(rel);
        }
        true
    }

    /// What changed since the watch started; `None` means "scan everything".
    pub fn dirty(self) -> Option<Dirty> {
        if let Some((path, before)) = &self.exclude {
            if std::fs::metadata(path).and_then(|m| m.modified()).ok() != *before {
                return None;
            }
        }
        let mut dirty = Dirty::default();
        dirty.dirs.extend(self.late.iter().cloned());
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            // SAFETY: valid fd and buffer.
            let n = unsafe { libc::read(self.fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
            if n < 0 {
                let e = std::io::Error::last_os_error();
                if e.kind() == std::io::ErrorKind::WouldBlock {
                    break;
                }
                return None;
            }
            if n == 0 {
                break;
            }
            let mut off = 0usize;
            let header = std::mem::size_of::<libc::inotify_event>();
            while off + header <= n as usize {
                // SAFETY: the kernel wrote a whole event at `off`; read it unaligned.
                let ev: libc::inotify_event =
                    unsafe { std::ptr::read_unaligned(buf.as_ptr().add(off).cast()) };
                let name_bytes = &buf[off + header..off + header + ev.len as usize];
                let name = &name_bytes[..name_bytes
                    .iter()
                    .position(|b| *b == 0)
                    .unwrap_or(name_bytes.len())];
                off += header + ev.len as usize;
                if ev.mask & libc::IN_Q_OVERFLOW != 0 {
                    return None;
                }
                let Some(dir) = self.dirs.get(&ev.wd) else {
                    continue;
                };
                if IGNORE_FILES.iter().any(|f| f.as_bytes() == name) {
                    // Rules changed: what is captured may have changed anywhere below.
                    return None;
                }
                if ev.mask & (libc::IN_DELETE_SELF | libc::IN_MOVE_SELF) != 0 {
                    if !dir.is_empty() {
                        dirty.dirs.insert(relpath::split(dir).0.to_vec());
                    }
                    continue;
                }
                dirty.dirs.insert(dir.clone());
                if ev.mask & libc::IN_ISDIR != 0
                    && ev.mask & (libc::IN_CREATE | libc::IN_MOVED_TO) != 0
                    && !name.is_empty()
                {
                    dirty.subtrees.insert(relpath::join(dir, name));
                }
            }
        }
        Some(dirty.finish())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sees_writes_creates_and_new_subtrees() {
        let root = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(root.path().join("a/b")).unwrap();
        std::fs::create_dir_all(root.path().join("c")).unwrap();
        let dirs = [b"".to_vec(), b"a".to_vec(), b"a/b".to_vec(), b"c".to_vec()];
        let w = Watcher::start(root.path(), dirs.iter()).unwrap();
        std::fs::write(root.path().join("a/b/f"), b"x").unwrap();
        std::fs::create_dir_all(root.path().join("c/new/deep")).unwrap();
        let d = w.dirty().unwrap();
        assert!(d.reads(b"a/b"));
        assert!(!d.reads(b"a"));
        assert!(d.enters(b"a"));
        assert!(d.reads(b"c/new/deep"), "a new subtree is walked whole");
        assert!(!d.enters(b"x"));

        let w = Watcher::start(root.path(), dirs.iter()).unwrap();
        assert!(w.dirty().unwrap().is_empty(), "nothing happened");

        let mut w = Watcher::start(root.path(), dirs[..2].iter()).unwrap();
        assert!(w.watch_late(root.path(), dirs.iter()));
        let d = w.dirty().unwrap();
        assert!(
            d.reads(b"a/b") && d.reads(b"c"),
            "late watches are always re-read"
        );
        assert!(!d.reads(b"a"));

        let w = Watcher::start(root.path(), dirs.iter()).unwrap();
        std::fs::write(root.path().join("c/.gitignore"), b"*\n").unwrap();
        assert!(
            w.dirty().is_none(),
            "a changed ignore file means a full scan"
        );
    }
}
