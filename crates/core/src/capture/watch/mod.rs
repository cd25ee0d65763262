//! A file watcher for the lifetime of one opaque epoch (`rewind exec`), so that its closing
//! capture looks again only at the entries something happened to (and re-reads only the
//! directories whose own events say so), instead of the whole tree.
//!
//! Linux inotify, one watch per captured directory, each armed by the opening capture's walk
//! just *before* it reads that directory, so whatever changes there after the capture saw it
//! raises an event (the walk's threads arm their directories in parallel). Events are queued
//! by the kernel as the writes happen, so once the command has exited every event it caused is
//! in the queue. Any doubt falls back to a full scan: queue overflow, a watch that could not be
//! added (the `fs.inotify.max_user_watches` limit) or a directory the walk could not read, a
//! changed ignore file. Known blind spot, shared with every inotify user: writes through a
//! memory mapping that outlive the file's close.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::ffi::CString;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

mod ahead;
pub(crate) use ahead::HashedAhead;

use crate::capture::ignore_rules::IGNORE_FILES;
use crate::fs::relpath;

/// What to look at again after a command, from what the watcher saw.
#[derive(Debug, Default)]
pub(crate) struct Dirty {
    /// Re-read the listing (and stat every entry) of these directories: an event about the
    /// directory itself, or more named entries than [`NAMES_PER_DIR`].
    dirs: HashSet<Vec<u8>>,
    /// In these directories (none of them in `dirs`), only the entries events named: the
    /// rest of each listing is the cache's. One change in a 100k-entry directory then costs
    /// one `lstat`, not 100k.
    names: HashMap<Vec<u8>, Named>,
    /// Walk these whole (directories created or moved in while watching).
    subtrees: HashSet<Vec<u8>>,
    /// Every proper ancestor of the above, which the walk passes through.
    ancestors: HashSet<Vec<u8>>,
}

/// The entries of one directory that events named.
#[derive(Debug, Default)]
pub(crate) struct Named {
    /// Sorted, as listings are.
    pub names: BTreeSet<Vec<u8>>,
    /// An entry was created, deleted or renamed: the directory's names changed, so the stamp
    /// its cached listing was read with no longer describes it.
    pub listing_changed: bool,
}

/// Past this many named entries in one directory, it is read again whole (a rename storm
/// would otherwise make the set as large as the listing).
const NAMES_PER_DIR: usize = 1024;

/// Events that add, remove or rename an entry of the watched directory.
const LISTING_EVENTS: u32 =
    libc::IN_CREATE | libc::IN_DELETE | libc::IN_MOVED_FROM | libc::IN_MOVED_TO;

impl Dirty {
    /// Nothing happened: the tree is as the opening capture saw it.
    pub fn is_empty(&self) -> bool {
        self.dirs.is_empty() && self.subtrees.is_empty() && self.names.is_empty()
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

    /// Whether the walk must read this directory's whole listing.
    pub fn reads(&self, rel: &[u8]) -> bool {
        self.dirs.contains(rel) || self.under_subtree(rel)
    }

    /// The entries of this directory to look at again, when the rest of its listing is the
    /// cache's (`None`: the whole listing is read, or nothing happened here).
    pub fn named(&self, rel: &[u8]) -> Option<&Named> {
        self.names.get(rel).filter(|_| !self.reads(rel))
    }

    /// Whether the walk must enter this directory at all.
    pub fn enters(&self, rel: &[u8]) -> bool {
        self.reads(rel) || self.names.contains_key(rel) || self.ancestors.contains(rel)
    }

    /// An event named entry `name` of directory `dir`.
    fn note(&mut self, dir: &[u8], name: &[u8], mask: u32) {
        if self.dirs.contains(dir) {
            return;
        }
        let named = self.names.entry(dir.to_vec()).or_default();
        named.names.insert(name.to_vec());
        named.listing_changed |= mask & LISTING_EVENTS != 0;
        if named.names.len() > NAMES_PER_DIR {
            self.names.remove(dir);
            self.dirs.insert(dir.to_vec());
        }
    }

    fn finish(mut self) -> Dirty {
        let whole = &self.dirs;
        self.names.retain(|dir, _| !whole.contains(dir));
        let mut anc = HashSet::new();
        for d in self
            .dirs
            .iter()
            .chain(&self.subtrees)
            .chain(self.names.keys())
        {
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
    /// Watch descriptor → the directory it watches (workspace-relative).
    dirs: Mutex<HashMap<i32, Vec<u8>>>,
    /// A watch could not be added: the watcher cannot vouch for anything.
    failed: AtomicBool,
    /// `.git/info/exclude` and its bytes when the watch started (a change there changes what
    /// is captured anywhere).
    exclude: Mutex<(std::path::PathBuf, Option<Vec<u8>>)>,
    /// Of a [`LiveWatch`]: the number of the last [`Watcher::take`] whose capture has not been
    /// saved as the stat cache yet (0: none).
    unsaved: AtomicU64,
    /// Of a [`LiveWatch`]: takes so far.
    takes: AtomicU64,
    /// Of a [`LiveWatch`]: what decides what is captured (the size cap, whether ignored paths
    /// are) at the previous take, hashed: a capture under other settings walks everything.
    settings: AtomicU64,
    /// Events read from the descriptor and not taken yet (a [`LiveWatch`]'s thread reads them
    /// as they come).
    drained: Mutex<Drained>,
    /// Of a [`LiveWatch`]: the files its thread hashes ahead of the next capture (see `ahead`).
    ahead: OnceLock<ahead::Shared>,
}

/// What the events read so far say.
#[derive(Default)]
struct Drained {
    dirty: Dirty,
    /// An event (queue overflow, a changed ignore file) or a failed read says the watcher
    /// cannot vouch for what changed.
    doubt: bool,
    /// Where events are read into (kept: a thread reads often).
    buf: Vec<u8>,
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
    /// A watcher with no watches yet; `None` when inotify is unavailable (the caller then
    /// scans everything, as without a watcher).
    pub fn new(root: &Path) -> Option<Watcher> {
        // SAFETY: plain syscall; the fd is owned below.
        let fd = unsafe { libc::inotify_init1(libc::IN_CLOEXEC | libc::IN_NONBLOCK) };
        if fd < 0 {
            return None;
        }
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        let exclude = root.join(".git/info/exclude");
        let bytes = exclude_bytes(&exclude);
        Some(Watcher {
            fd,
            dirs: Mutex::new(HashMap::new()),
            failed: AtomicBool::new(false),
            exclude: Mutex::new((exclude, bytes)),
            // Nothing is watched yet: the first take walks everything.
            unsaved: AtomicU64::new(u64::MAX),
            takes: AtomicU64::new(0),
            settings: AtomicU64::new(0),
            drained: Mutex::default(),
            ahead: OnceLock::new(),
        })
    }

    /// Watches directory `abs` (workspace-relative `rel`). The walk calls this *before* it
    /// reads the directory, from many threads at once: whatever changes in it after the
    /// capture saw it raises an event. A watch that cannot be added (the
    /// `fs.inotify.max_user_watches` limit) makes the whole watcher unusable.
    pub fn watch(&self, abs: &Path, rel: &[u8]) {
        if self.failed.load(Ordering::Relaxed) {
            return;
        }
        let Ok(path) = CString::new(abs.as_os_str().as_bytes()) else {
            self.failed.store(true, Ordering::Relaxed);
            return;
        };
        // SAFETY: valid fd and C string.
        let wd = unsafe { libc::inotify_add_watch(self.fd.as_raw_fd(), path.as_ptr(), MASK) };
        if wd < 0 {
            self.failed.store(true, Ordering::Relaxed);
            return;
        }
        let mut dirs = lock(&self.dirs);
        dirs.insert(wd, rel.to_vec());
    }

    /// Says the watcher cannot vouch for the whole tree (a directory was not watched).
    pub fn give_up(&self) {
        self.failed.store(true, Ordering::Relaxed);
    }

    /// Whether every directory handed to [`Watcher::watch`] is watched.
    pub fn is_complete(&self) -> bool {
        !self.failed.load(Ordering::Relaxed)
    }

    /// What changed since the watch started (or, of a [`LiveWatch`], since the previous
    /// take); `None` means "scan everything".
    pub fn dirty(&self) -> Option<Dirty> {
        self.read_events();
        self.take_dirty()
    }

    /// What the events read so far say changed, taken; `None` means "scan everything".
    fn take_dirty(&self) -> Option<Dirty> {
        let (dirty, doubt) = {
            let mut d = lock(&self.drained);
            (std::mem::take(&mut d.dirty), std::mem::take(&mut d.doubt))
        };
        if doubt || !self.is_complete() {
            return None;
        }
        {
            let (path, before) = &*lock(&self.exclude);
            if exclude_bytes(path) != *before {
                return None;
            }
        }
        Some(dirty.finish())
    }

    /// Reads every event queued now into [`Drained`], and tells the thread hashing ahead, if
    /// any, about each (see `ahead`).
    fn read_events(&self) {
        let mut guard = lock(&self.drained);
        let drained = &mut *guard;
        let dirs = lock(&self.dirs);
        let mut ahead = self.ahead.get().map(|a| lock(&a.work));
        let buf = &mut drained.buf;
        buf.resize(64 * 1024, 0);
        loop {
            // SAFETY: valid fd and buffer.
            let n = unsafe { libc::read(self.fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
            if n < 0 {
                let e = std::io::Error::last_os_error();
                if e.kind() != std::io::ErrorKind::WouldBlock {
                    drained.doubt = true;
                    if let Some(a) = ahead.as_mut() {
                        a.forget_all();
                    }
                }
                break;
            }
            if n == 0 {
                break;
            }
            let dirty = &mut drained.dirty;
            let mut doubt = false;
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
                    // Events were lost: nothing said about what changed can be trusted.
                    doubt = true;
                    if let Some(a) = ahead.as_mut() {
                        a.forget_all();
                    }
                    continue;
                }
                let Some(dir) = dirs.get(&ev.wd) else {
                    continue;
                };
                if IGNORE_FILES.iter().any(|f| f.as_bytes() == name) {
                    // Rules changed: what is captured may have changed anywhere below.
                    doubt = true;
                }
                if ev.mask & (libc::IN_DELETE_SELF | libc::IN_MOVE_SELF) != 0 {
                    if !dir.is_empty() {
                        dirty.dirs.insert(relpath::split(dir).0.to_vec());
                    }
                    // Its watch now names a path that is not its own.
                    if let Some(a) = ahead.as_mut() {
                        a.forget_all();
                    }
                    continue;
                }
                if name.is_empty() {
                    // About the directory itself (its attributes, its watch removed).
                    dirty.dirs.insert(dir.clone());
                } else {
                    dirty.note(dir, name, ev.mask);
                    if let Some(a) = ahead.as_mut() {
                        a.note(ev.wd, dir, name, ev.mask);
                    }
                }
                if ev.mask & libc::IN_ISDIR != 0
                    && ev.mask & (libc::IN_CREATE | libc::IN_MOVED_TO) != 0
                    && !name.is_empty()
                {
                    dirty.subtrees.insert(relpath::join(dir, name));
                }
            }
            drained.doubt |= doubt;
        }
    }

    /// For a [`LiveWatch`]: what changed since the previous take, and the number of this take
    /// (for [`Watcher::saved`]). `None` says "walk everything": the first take, a watch that
    /// could not be added, an overflowed queue, changed ignore rules, capture settings other
    /// than the previous take's (`settings`, hashed), or a previous take whose capture was
    /// never saved (its events were drained, so only a walk can stand in for them). The walk
    /// that follows re-arms every directory it reads. Also hands over what was hashed ahead
    /// (see `ahead`), every event queued until now having voided what it changed.
    pub(crate) fn take(&self, settings: u64) -> (Option<Dirty>, u64, Option<HashedAhead>) {
        let n = self.takes.fetch_add(1, Ordering::SeqCst) + 1;
        let unsaved = self.unsaved.swap(n, Ordering::SeqCst) != 0;
        let other_settings = self.settings.swap(settings, Ordering::SeqCst) != settings;
        let doubt = unsaved || other_settings;
        // Before the queue is read: a change whose event comes later is stamped no earlier.
        let drained_ns = crate::capture::coarse_now_ns();
        self.read_events();
        let ahead = (self.ahead.get()).map(|a| lock(&a.work).hand_over(drained_ns));
        let dirty = self.take_dirty().filter(|_| !doubt);
        if dirty.is_none() {
            self.failed.store(false, Ordering::Relaxed);
            let mut exclude = lock(&self.exclude);
            exclude.1 = exclude_bytes(&exclude.0);
        }
        (dirty, n, ahead)
    }

    /// For a [`LiveWatch`]: the capture of take `n` is the saved stat cache now, so the next
    /// take may start from it. A later take in between (another handle's) keeps its own.
    pub(crate) fn saved(&self, n: u64) {
        let _ = self
            .unsaved
            .compare_exchange(n, 0, Ordering::SeqCst, Ordering::SeqCst);
    }

    /// Drops the watcher on a thread of its own: closing an inotify descriptor waits for the
    /// kernel to retire its watches (see `Drop`), and the caller's remaining work (the settle's
    /// commit, the process's exit) can overlap that wait. If no thread can be started, it is
    /// dropped here.
    pub fn close_in_background(self) {
        let _ = std::thread::Builder::new()
            .name("rewind-unwatch".into())
            .spawn(move || drop(self));
    }
}

/// Takes `m` even if a thread panicked holding it, as the watcher always has: a panic on one
/// request's thread must not stop every later capture.
pub(crate) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// The bytes of `.git/info/exclude` (not watched: `.git` is never walked), compared whole: its
/// mtime can stay the same across a rewrite within one clock tick, and the file is small.
fn exclude_bytes(path: &Path) -> Option<Vec<u8>> {
    std::fs::read(path).ok()
}

/// A watcher for a long-running process (`rewind serve`), shared by every handle it opens on
/// the workspace: armed by one whole-tree walk, it then lets each capture look again only at
/// the entries something happened to since the previous capture, so an opaque epoch costs
/// O(changed paths) instead of a walk of the tree.
///
/// Why nothing is missed: inotify queues an event in the same system call that makes the
/// change, so once a client's writes have returned, their events are in the queue; a capture
/// drains it under the workspace lock just before it walks. The events of one take cover
/// every change since the previous take, whose capture is the saved stat cache (or a newer
/// one another process saved, which only makes the re-read directories a superset). Any
/// doubt (see [`Watcher::take`]) is a whole walk, never a missed change.
///
/// It also keeps the stat cache the last capture left (see [`LiveWatch::take_kept`]): each
/// client of a server is a handle of its own, and without it each would read `state.bin`
/// again, which is O(tree).
#[derive(Clone)]
pub struct LiveWatch(pub(crate) Arc<Watcher>, Arc<Mutex<Option<Kept>>>);

/// A stat cache and the `state.bin` it was made from; `unsaved`: the cache is newer than that
/// file (a server's capture that left the write for later, see `Workspace::save_and_keep_state`).
pub(crate) struct Kept {
    pub stamp: crate::capture::state::StateStamp,
    pub state: crate::capture::state::State,
    pub unsaved: bool,
}

impl LiveWatch {
    /// A watcher for the workspace rooted at `root`; `None` where inotify is unavailable or
    /// the root's file system does not report changes made elsewhere (network and FUSE file
    /// systems): captures then walk the tree as without a watcher.
    pub fn new(root: &Path) -> Option<LiveWatch> {
        if !reports_every_change(root) {
            return None;
        }
        Watcher::new(root).map(|w| LiveWatch(Arc::new(w), Arc::default()))
    }

    /// Starts the thread that hashes files ahead of the next capture (see `ahead`), once per
    /// watcher; later calls only update what it reads with: the capture's size cap and the
    /// store's compression.
    pub(crate) fn hash_ahead(
        &self,
        root: &Path,
        max_file_size: u64,
        store: &rewind_store::StoreConfig,
    ) {
        ahead::start(&self.0, &self.1, root, max_file_size, store);
    }

    /// An opaque epoch began in this process: its thread reads ahead until it ends.
    pub(crate) fn epoch_began(&self) {
        if let Some(a) = self.0.ahead.get() {
            a.began();
        }
    }

    /// An opaque epoch is about to be settled.
    pub(crate) fn epoch_ending(&self) {
        if let Some(a) = self.0.ahead.get() {
            a.ended();
        }
    }

    /// The stat cache the last capture of any handle left, taken (the caller checks that it
    /// still matches `state.bin`). Captures run under the workspace lock, one at a time.
    pub(crate) fn take_kept(&self) -> Option<Kept> {
        self.kept().take()
    }

    /// The kept stat cache, in place: a reader outside the workspace lock must never take it,
    /// or a capture running meanwhile would find none and start from `state.bin`, which may be
    /// older than what the watcher's take covers.
    pub(crate) fn kept(&self) -> std::sync::MutexGuard<'_, Option<Kept>> {
        lock(&self.1)
    }

    /// Keeps `kept` for the next capture of any handle (what it replaces is dropped on a
    /// thread of its own: one small allocation per file).
    pub(crate) fn keep(&self, kept: Kept) {
        let old = lock(&self.1).replace(kept);
        if let Some(old) = old {
            crate::base::drop_in_background(old);
        }
    }
}

/// Whether changes to the file system holding `path` raise inotify events whoever makes them:
/// not on NFS, SMB, 9p, FUSE or Ceph, whose other clients change files without this kernel
/// knowing.
fn reports_every_change(path: &Path) -> bool {
    const REMOTE: &[i64] = &[
        0x6969,     // NFS
        0x65735546, // FUSE
        0xFF534D42, // CIFS
        0xFE534D42, // SMB2
        0x517B,     // SMB
        0x01021997, // 9p (v9fs)
        0x00C36400, // Ceph
    ];
    let Ok(c) = CString::new(path.as_os_str().as_bytes()) else {
        return false;
    };
    // SAFETY: a zeroed statfs is a valid out-buffer; the path is a C string.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::statfs(c.as_ptr(), &mut st) } != 0 {
        return false;
    }
    !REMOTE.contains(&(st.f_type as i64))
}

impl Drop for Watcher {
    /// Removes the watches one by one, in parallel, before the descriptor closes. Closing an
    /// inotify descriptor that still holds a thousand watches waits for the kernel to retire
    /// them all at once (measured 1-24 ms, usually about 16, on every `exec`); removed first,
    /// their retirement overlaps the removal.
    fn drop(&mut self) {
        use rayon::prelude::*;
        let dirs = self.dirs.get_mut().unwrap_or_else(|p| p.into_inner());
        let fd = self.fd.as_raw_fd();
        dirs.par_iter().for_each(|(wd, _)| {
            // SAFETY: removing a watch this descriptor added; failure is harmless.
            unsafe {
                libc::inotify_rm_watch(fd, *wd);
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn watching(root: &Path, dirs: &[Vec<u8>]) -> Watcher {
        let w = Watcher::new(root).unwrap();
        for rel in dirs {
            w.watch(&relpath::to_path(root, rel), rel);
        }
        assert!(w.is_complete());
        w
    }

    #[test]
    fn sees_writes_creates_and_new_subtrees() {
        let root = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(root.path().join("a/b")).unwrap();
        std::fs::create_dir_all(root.path().join("c")).unwrap();
        let dirs = [b"".to_vec(), b"a".to_vec(), b"a/b".to_vec(), b"c".to_vec()];
        let w = watching(root.path(), &dirs);
        std::fs::write(root.path().join("a/b/f"), b"x").unwrap();
        std::fs::create_dir_all(root.path().join("c/new/deep")).unwrap();
        let d = w.dirty().unwrap();
        assert!(
            d.named(b"a/b").is_some_and(|n| n.listing_changed),
            "`f` was created"
        );
        assert!(!d.reads(b"a"));
        assert!(d.enters(b"a"));
        assert!(d.reads(b"c/new/deep"), "a new subtree is walked whole");
        assert!(!d.enters(b"x"));

        let w = watching(root.path(), &dirs);
        assert!(w.dirty().unwrap().is_empty(), "nothing happened");

        // Writing a file names it: the rest of its directory's listing is the cache's, and
        // the listing itself is unchanged.
        let w = watching(root.path(), &dirs);
        std::fs::write(root.path().join("a/b/f"), b"y").unwrap();
        let d = w.dirty().unwrap();
        assert!(!d.is_empty());
        assert!(!d.reads(b"a/b"), "only the written entry is looked at");
        let named = d.named(b"a/b").expect("the entry is named");
        assert_eq!(named.names, BTreeSet::from([b"f".to_vec()]));
        assert!(!named.listing_changed);
        assert!(d.enters(b"a/b") && d.enters(b"a") && d.enters(b""));
        assert!(!d.enters(b"c"));

        // Creating, deleting and renaming name each entry and change the listing.
        let w = watching(root.path(), &dirs);
        std::fs::write(root.path().join("a/new"), b"").unwrap();
        std::fs::rename(root.path().join("a/b/f"), root.path().join("a/b/f2")).unwrap();
        std::fs::remove_file(root.path().join("a/new")).unwrap();
        let d = w.dirty().unwrap();
        let named = d.named(b"a").unwrap();
        assert_eq!(named.names, BTreeSet::from([b"new".to_vec()]));
        assert!(named.listing_changed);
        let named = d.named(b"a/b").unwrap();
        assert_eq!(named.names, BTreeSet::from([b"f".to_vec(), b"f2".to_vec()]));
        assert!(named.listing_changed);

        // An event about the directory itself reads it whole; so do more named entries
        // than a set of names is worth.
        let w = watching(root.path(), &dirs);
        std::fs::set_permissions(root.path().join("c"), PermissionsExt::from_mode(0o750)).unwrap();
        for i in 0..=NAMES_PER_DIR {
            std::fs::write(root.path().join(format!("a/b/n{i}")), b"").unwrap();
        }
        let d = w.dirty().unwrap();
        assert!(d.reads(b"c") && d.named(b"c").is_none());
        assert!(d.reads(b"a/b") && d.named(b"a/b").is_none());
        assert!(
            d.named(b"").is_some(),
            "the root's entry `c` is named in the root"
        );

        let w = watching(root.path(), &dirs);
        std::fs::write(root.path().join("c/.gitignore"), b"*\n").unwrap();
        assert!(
            w.dirty().is_none(),
            "a changed ignore file means a full scan"
        );

        // `.git/info/exclude` rewritten within one clock tick keeps its mtime: its bytes say.
        std::fs::create_dir_all(root.path().join(".git/info")).unwrap();
        let exclude = root.path().join(".git/info/exclude");
        std::fs::write(&exclude, b"u\n").unwrap();
        let mtime = std::fs::metadata(&exclude).unwrap().modified().unwrap();
        let w = watching(root.path(), &dirs);
        std::fs::write(&exclude, b"v\n").unwrap();
        std::fs::File::options()
            .write(true)
            .open(&exclude)
            .unwrap()
            .set_modified(mtime)
            .unwrap();
        assert!(
            w.dirty().is_none(),
            "changed exclude rules mean a full scan"
        );
        std::fs::remove_file(&exclude).unwrap();

        let w = watching(root.path(), &dirs);
        w.watch(&root.path().join("gone"), b"gone");
        assert!(!w.is_complete());
        assert!(w.dirty().is_none(), "a missing watch means a full scan");
    }

    /// More events than the kernel's queue holds overflow it: the watcher then cannot vouch
    /// for anything (the capture walks), and what was hashed ahead is voided, since events
    /// that would have voided it were lost. The next take starts over.
    #[test]
    fn an_overflowed_queue_means_a_full_scan_and_voids_what_was_hashed_ahead() {
        let root = tempfile::tempdir().unwrap();
        std::fs::write(root.path().join("f"), b"x").unwrap();
        let w = watching(root.path(), &[b"".to_vec()]);
        w.ahead.get_or_init(|| ahead::Shared::new(root.path()));
        let work = &w.ahead.get().unwrap().work;
        // A file the events below do not name: one of those lost could have.
        lock(work).prepare_for_test(b"h", b"x");
        assert_eq!(lock(work).ready_paths(), [b"h".to_vec()]);
        let max: usize = std::fs::read_to_string("/proc/sys/fs/inotify/max_queued_events")
            .map_or(16384, |s| s.trim().parse().unwrap());
        std::fs::write(root.path().join("g"), b"x").unwrap();
        let open = |name: &str| {
            let path = root.path().join(name);
            std::fs::File::options().write(true).open(path).unwrap()
        };
        let files = [open("f"), open("g")];
        let t = std::time::UNIX_EPOCH;
        for i in 0..max + 16 {
            // One `IN_ATTRIB` each: alternating, so that none merges with the one before.
            let at = t + std::time::Duration::from_secs(i as u64);
            files[i % 2].set_modified(at).unwrap();
        }
        assert!(w.dirty().is_none(), "an overflow means a full scan");
        assert!(lock(work).ready_paths().is_empty(), "voided");
        std::fs::write(root.path().join("f"), b"y").unwrap();
        let d = w.dirty().expect("a new start after the take");
        assert!(d
            .named(b"")
            .is_some_and(|n| n.names.contains(b"f".as_slice())));
    }
}
