//! Hashing ahead of a live watcher's next capture: while an agent's command runs, a server's
//! thread reads the files the command closes after writing, as inotify names them, and hashes
//! and compresses them on a core the command leaves idle. The capture after the command then
//! only appends what was prepared, for every file it finds exactly as it was read.
//!
//! Only while an opaque epoch of the process is open (a command runs: a guarded write stores
//! its file itself), and only files the last capture stored whole (regular files in the kept
//! stat cache, at most one blob, under the size cap): not ignored files, new files or large
//! ones, whose reading could cost a busy machine more than it saves. Nothing is stored until
//! a capture takes the prepared content, so nothing here is visible to the store, to gc or to
//! another process, and a server that dies loses only work.
//!
//! Invariants (why prepared content is what the capture would have read):
//! * **An event about the path after its read began voids it.** The thread reads the
//!   descriptor only between files, and every event read (by the thread or by a capture's take)
//!   goes through [`Ahead::note`], which drops the path's prepared content, or marks the read
//!   in flight as spoiled. inotify queues an event in the system call that makes the change,
//!   and the capture's take reads the queue to its end just before the walk: every change made
//!   before the take has voided what it changed.
//! * **The file is the one read.** Kind, mode, size, mtime, ctime and inode must be the same
//!   before the read, after it, and when the capture's walk finds it.
//! * **A change after the take is seen by the next capture.** Its event comes after the take,
//!   so the next take names the path. A write in the same timestamp tick as the file's mtime
//!   could leave its stat as it was: content whose mtime is not older than the take is used,
//!   but its cached mtime is made unknown, so the next capture that looks reads it again (what
//!   the stat cache's racy rule does for a file read during a capture).
//! * **The path is the watched directory's.** A watch follows its directory's inode, so after
//!   a directory is renamed its events still name the old path. Before a read, the directory
//!   at the path must be the watch's (adding a watch to it gives back the same descriptor);
//!   a directory moved or deleted after that voids everything prepared.
//! * **Bounded.** At most [`READY_BYTES`] of prepared content is held; past it, files are left
//!   to the capture.

use std::collections::{HashMap, HashSet, VecDeque};
use std::ffi::CString;
use std::io::Read;
use std::os::fd::AsRawFd;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};

use rewind_store::{EntryKind, Prepared};

use super::{lock, Kept, Watcher, MASK};
use crate::capture::state::StatEntry;
use crate::fs::relpath;

/// The most prepared content (compressed bytes) held for the next capture.
pub(crate) const READY_BYTES: usize = 64 << 20;

/// How long the thread waits for an event, or for an epoch to open, before it looks whether
/// its watcher is still used.
const POLL_MS: i32 = 500;

/// One file read ahead: its `lstat` while it was read (its `id` the content's) and the
/// content, hashed and compressed.
pub(crate) struct Ready {
    pub stat: StatEntry,
    pub object: Prepared,
}

/// The thread's work and what it has prepared, shared with the watcher's event reading.
#[derive(Default)]
pub(crate) struct Ahead {
    /// By workspace-relative path.
    ready: HashMap<Vec<u8>, Ready>,
    /// Stored bytes of `ready`.
    bytes: usize,
    /// Paths closed after a write, oldest first, with the watch that named them.
    pending: VecDeque<(i32, Vec<u8>)>,
    queued: HashSet<Vec<u8>>,
    /// The path being read, and whether an event about it (or a moved directory) has been
    /// read since its read began.
    in_flight: Option<(Vec<u8>, bool)>,
    /// Watches found to watch the directory at their path since everything was last voided
    /// (see [`watches_its_directory`]).
    checked: HashSet<i32>,
}

impl Ahead {
    /// An event the watcher read: `name` in the directory `dir` watched as `wd`.
    pub(crate) fn note(&mut self, wd: i32, dir: &[u8], name: &[u8], mask: u32) {
        let path = relpath::join(dir, name);
        if let Some(r) = self.ready.remove(&path) {
            self.bytes -= r.object.stored_len();
        }
        if let Some((p, spoiled)) = &mut self.in_flight {
            *spoiled |= *p == path;
        }
        if mask & libc::IN_CLOSE_WRITE != 0
            && mask & libc::IN_ISDIR == 0
            && self.queued.insert(path.clone())
        {
            self.pending.push_back((wd, path));
        }
    }

    /// Voids everything prepared and pending: a watched directory moved or was deleted (so
    /// watches may name paths that are no longer theirs), or events were lost.
    pub(crate) fn forget_all(&mut self) {
        self.ready.clear();
        self.bytes = 0;
        self.pending.clear();
        self.queued.clear();
        self.checked.clear();
        if let Some((_, spoiled)) = &mut self.in_flight {
            *spoiled = true;
        }
    }

    /// The next path to read, now in flight.
    fn next(&mut self) -> Option<(i32, Vec<u8>)> {
        let (wd, path) = self.pending.pop_front()?;
        self.queued.remove(&path);
        self.in_flight = Some((path.clone(), false));
        Some((wd, path))
    }

    /// The read in flight is over: keeps what it prepared unless it was spoiled meanwhile or
    /// would pass the bound.
    fn finish(&mut self, ready: Option<Ready>) {
        let Some((path, spoiled)) = self.in_flight.take() else {
            return;
        };
        let Some(r) = ready.filter(|_| !spoiled) else {
            return;
        };
        let len = r.object.stored_len();
        if self.bytes + len > READY_BYTES {
            return;
        }
        self.bytes += len;
        if let Some(old) = self.ready.insert(path, r) {
            self.bytes -= old.object.stored_len();
        }
    }

    /// Everything prepared, for the capture of a take that read the queue from `drained_ns`
    /// on (the coarse clock); what is pending is dropped.
    pub(crate) fn hand_over(&mut self, drained_ns: i64) -> HashedAhead {
        self.bytes = 0;
        // Files not read yet are the capture's to read: a core spent on them now would be
        // taken from it.
        self.pending.clear();
        self.queued.clear();
        HashedAhead {
            files: std::mem::take(&mut self.ready),
            drained_ns,
        }
    }

    /// Prepares `content` for `path` as a read of it would.
    #[cfg(test)]
    pub(crate) fn prepare_for_test(&mut self, path: &[u8], content: &[u8]) {
        self.in_flight = Some((path.to_vec(), false));
        self.finish(Some(tests::prepared(content)));
    }

    #[cfg(test)]
    pub(crate) fn ready_paths(&self) -> Vec<Vec<u8>> {
        let mut paths: Vec<_> = self.ready.keys().cloned().collect();
        paths.sort();
        paths
    }
}

/// What a capture takes from [`Ahead`]: files prepared before its take.
pub(crate) struct HashedAhead {
    files: HashMap<Vec<u8>, Ready>,
    /// When the take began reading the queue (see the module: later mtimes are racy).
    drained_ns: i64,
}

impl HashedAhead {
    /// The prepared content of `rel` if `now` (what the capture's walk found there) is the
    /// file that was read, and whether its mtime is too recent for the stat cache to vouch
    /// for it later.
    pub(crate) fn vouch(&self, rel: &[u8], now: &StatEntry) -> Option<(&Prepared, bool)> {
        let r = self.files.get(rel)?;
        r.stat
            .same_file(now)
            .then_some((&r.object, r.stat.mtime_ns >= self.drained_ns))
    }

    /// How many files were prepared.
    pub(crate) fn len(&self) -> usize {
        self.files.len()
    }
}

/// What the thread reads with: the workspace root and what the next capture will store.
pub(crate) struct Settings {
    root: PathBuf,
    /// Files larger than this are left to the capture.
    max_size: AtomicU64,
    zstd_level: AtomicI32,
}

impl Settings {
    pub(crate) fn new(root: &Path) -> Settings {
        Settings {
            root: root.to_path_buf(),
            max_size: AtomicU64::new(0),
            zstd_level: AtomicI32::new(1),
        }
    }

    /// The capture's size cap and the store's compression level, as the workspace is
    /// configured now.
    pub(crate) fn set(&self, max_file_size: u64, store: &rewind_store::StoreConfig) {
        let one_blob = rewind_store::CHUNK_THRESHOLD.min(store.clone_from.saturating_sub(1));
        self.max_size
            .store(max_file_size.min(one_blob), Ordering::Relaxed);
        self.zstd_level.store(store.zstd_level, Ordering::Relaxed);
    }
}

/// The thread's loop: reads events as they come and the files they name, until the watcher
/// is dropped.
fn run(watcher: Weak<Watcher>, kept: Weak<Mutex<Option<Kept>>>) {
    let mut since_read = 0;
    loop {
        let Some(w) = watcher.upgrade() else { return };
        let Some(ahead) = w.ahead.get() else { return };
        if !ahead.wait_open(POLL_MS as u64) {
            // (The queue is left to the take meanwhile.)
            continue;
        }
        let job = lock(&ahead.work).next();
        match job {
            None => {
                let mut p = libc::pollfd {
                    fd: w.fd.as_raw_fd(),
                    events: libc::POLLIN,
                    revents: 0,
                };
                // SAFETY: one valid pollfd; the descriptor is open while `w` is held.
                unsafe { libc::poll(&mut p, 1, POLL_MS) };
            }
            Some((wd, path)) => {
                let ready = kept
                    .upgrade()
                    .and_then(|k| read_one(&w, ahead, &k, wd, &path));
                lock(&ahead.work).finish(ready);
                since_read += 1;
                if since_read < READ_EVENTS_EVERY {
                    continue;
                }
            }
        }
        since_read = 0;
        w.read_events();
    }
}

/// Files read between two reads of the event queue while files are pending: the queue is
/// read in batches (a read costs a system call and three locks), often enough that a file
/// written again is not read twice.
const READ_EVENTS_EVERY: usize = 32;

/// The thread's state in its watcher.
pub(crate) struct Shared {
    pub work: Mutex<Ahead>,
    pub settings: Settings,
    /// Opaque epochs of this process that are open: the thread reads ahead only while there
    /// are some (a command is running). A guarded write stores its file itself, and an edit
    /// made while no command runs is read by the next capture as before.
    open: Mutex<usize>,
    opened: std::sync::Condvar,
}

impl Shared {
    pub(crate) fn new(root: &Path) -> Shared {
        Shared {
            work: Mutex::default(),
            settings: Settings::new(root),
            open: Mutex::new(0),
            opened: std::sync::Condvar::new(),
        }
    }

    /// An opaque epoch began: read ahead until it ends.
    pub(crate) fn began(&self) {
        *lock(&self.open) += 1;
        self.opened.notify_all();
    }

    /// An opaque epoch is about to be settled (or one begun elsewhere was: never below 0).
    pub(crate) fn ended(&self) {
        let mut open = lock(&self.open);
        *open = open.saturating_sub(1);
    }

    /// Whether an opaque epoch is open, after waiting up to `ms` for one.
    fn wait_open(&self, ms: u64) -> bool {
        let open = lock(&self.open);
        let (open, _) = self
            .opened
            .wait_timeout_while(open, std::time::Duration::from_millis(ms), |n| *n == 0)
            .unwrap_or_else(|p| p.into_inner());
        *open > 0
    }
}

/// Reads `rel`, named by an event of watch `wd`, if it is to be read ahead (see the module).
fn read_one(
    w: &Watcher,
    shared: &Shared,
    kept: &Mutex<Option<Kept>>,
    wd: i32,
    rel: &[u8],
) -> Option<Ready> {
    let settings = &shared.settings;
    let max_size = settings.max_size.load(Ordering::Relaxed);
    let stored_whole = lock(kept).as_ref().and_then(|k| {
        k.state
            .get(rel)
            .map(|e| e.kind == EntryKind::File && e.size <= max_size)
    });
    if stored_whole != Some(true) {
        return None;
    }
    let root = &settings.root;
    if !lock(&shared.work).checked.contains(&wd) {
        if !watches_its_directory(w, root, wd, rel) {
            return None;
        }
        // Remembered only if nothing was voided since this read began: a moved directory
        // read meanwhile voids what was checked before it, this check included.
        let mut work = lock(&shared.work);
        if work.in_flight.as_ref().is_some_and(|(_, spoiled)| !spoiled) {
            work.checked.insert(wd);
        }
    }
    let abs = relpath::to_path(root, rel);
    let mut file = crate::fs::read::open_for_capture(root, &abs, rel).ok()?;
    let before = file.metadata().ok()?;
    if !before.file_type().is_file() || before.size() > max_size {
        return None;
    }
    let mut content = Vec::with_capacity(before.size() as usize + 1);
    (&mut file)
        .take(max_size + 1)
        .read_to_end(&mut content)
        .ok()?;
    let after = file.metadata().ok()?;
    let object = Prepared::content(&content, settings.zstd_level.load(Ordering::Relaxed))?;
    let id = object.id();
    let (b, a) = (
        StatEntry::of_file(rel, &before, id),
        StatEntry::of_file(rel, &after, id),
    );
    (b.same_file(&a) && a.size == content.len() as u64).then_some(Ready { stat: a, object })
}

/// Whether the directory now at `rel`'s parent path is the one watched as `wd`: adding a watch
/// to a watched inode gives back its descriptor (and leaves its mask as it was: the same).
///
/// A directory that was not watched keeps the watch this adds, unmapped, so its events are
/// skipped until a walk watches it (and maps the same descriptor). Removing it would race
/// with that walk: its `inotify_add_watch` can return this very descriptor just before the
/// removal, and the walk would then count on a watch that is gone.
fn watches_its_directory(w: &Watcher, root: &Path, wd: i32, rel: &[u8]) -> bool {
    let dir = relpath::to_path(root, relpath::split(rel).0);
    let Ok(c) = CString::new(dir.as_os_str().as_bytes()) else {
        return false;
    };
    // SAFETY: valid descriptor and C string.
    let got = unsafe { libc::inotify_add_watch(w.fd.as_raw_fd(), c.as_ptr(), MASK) };
    got == wd
}

/// Starts the thread for `watcher` once; later calls only update the settings.
pub(crate) fn start(
    watcher: &Arc<Watcher>,
    kept: &Arc<Mutex<Option<Kept>>>,
    root: &Path,
    max_file_size: u64,
    store: &rewind_store::StoreConfig,
) {
    let mut started = false;
    let shared = watcher.ahead.get_or_init(|| {
        started = true;
        Shared::new(root)
    });
    shared.settings.set(max_file_size, store);
    if started {
        let (w, k) = (Arc::downgrade(watcher), Arc::downgrade(kept));
        // Without a thread, captures read every file themselves, as before.
        let _ = std::thread::Builder::new()
            .name("rewind-ahead".into())
            .spawn(move || run(w, k));
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::capture::state::{State, StateStamp};
    use crate::capture::{capture, CaptureOptions};
    use rewind_store::{ObjectId, ObjectKind, Store};
    use std::time::{Duration, Instant};

    pub(super) fn prepared(content: &[u8]) -> Ready {
        let object = Prepared::content(content, 1).unwrap();
        let stat = StatEntry {
            name: b"f".to_vec(),
            kind: EntryKind::File,
            mode: 0o644,
            size: content.len() as u64,
            mtime_ns: 1_000,
            ctime_ns: 1_000,
            ino: 7,
            id: object.id(),
        };
        Ready { stat, object }
    }

    /// Reads `path` and prepares `content` for it, as the thread does, with `between` run
    /// while the read is in flight.
    fn read_with(a: &mut Ahead, path: &[u8], content: &[u8], between: impl FnOnce(&mut Ahead)) {
        a.note(1, b"", path, libc::IN_CLOSE_WRITE);
        let (wd, p) = a.next().expect("queued");
        assert_eq!((wd, p.as_slice()), (1, path));
        between(a);
        a.finish(Some(prepared(content)));
    }

    /// What is prepared for a path is voided by any later event about it, by a moved
    /// directory or lost events, and by an event read while its read was in flight; other
    /// paths keep theirs. A path closed twice is queued once; a directory is never queued.
    #[test]
    fn an_event_voids_what_was_prepared_for_its_path() {
        let mut a = Ahead::default();
        read_with(&mut a, b"f", b"one", |_| {});
        read_with(&mut a, b"g", b"two", |_| {});
        assert_eq!(a.ready_paths(), [b"f".to_vec(), b"g".to_vec()]);
        a.note(1, b"", b"f", libc::IN_MODIFY);
        assert_eq!(a.ready_paths(), [b"g".to_vec()], "a write voids f");
        assert_eq!(a.bytes, a.ready[&b"g".to_vec()].object.stored_len());
        for mask in [
            libc::IN_ATTRIB,
            libc::IN_DELETE,
            libc::IN_MOVED_FROM,
            libc::IN_MOVED_TO,
        ] {
            read_with(&mut a, b"f", b"one", |_| {});
            a.note(1, b"", b"f", mask);
            assert_eq!(a.ready_paths(), [b"g".to_vec()], "mask {mask:#x}");
        }

        read_with(&mut a, b"f", b"one", |a| {
            a.note(1, b"", b"f", libc::IN_MODIFY)
        });
        assert_eq!(
            a.ready_paths(),
            [b"g".to_vec()],
            "written while read: not kept"
        );
        read_with(&mut a, b"f", b"one", |a| {
            a.note(1, b"", b"h", libc::IN_MODIFY)
        });
        assert_eq!(
            a.ready_paths(),
            [b"f".to_vec(), b"g".to_vec()],
            "another path's event"
        );
        read_with(&mut a, b"h", b"three", |a| a.forget_all());
        assert!(
            a.ready_paths().is_empty(),
            "voided while read: nothing kept"
        );

        a.note(1, b"d", b"x", libc::IN_CLOSE_WRITE);
        a.note(1, b"d", b"x", libc::IN_CLOSE_WRITE);
        a.note(1, b"d", b"sub", libc::IN_CLOSE_WRITE | libc::IN_ISDIR);
        a.note(1, b"d", b"y", libc::IN_MODIFY);
        assert_eq!(
            a.pending,
            [(1, b"d/x".to_vec())],
            "queued once, files closed only"
        );
        a.next().unwrap();
        a.finish(None);
        assert!(a.ready_paths().is_empty(), "nothing read: nothing kept");
        read_with(&mut a, b"y", b"four", |_| {});
        a.note(1, b"", b"z", libc::IN_CLOSE_WRITE);
        let taken = a.hand_over(0);
        assert!(
            a.pending.is_empty(),
            "what is pending is the capture's to read"
        );
        assert_eq!((taken.len(), a.bytes), (1, 0));
        assert!(a.ready_paths().is_empty());
    }

    /// At most `READY_BYTES` of prepared content is held.
    #[test]
    fn prepared_content_is_bounded() {
        let mut a = Ahead::default();
        let big: Vec<u8> = (0..1_000_000u32)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
            .collect();
        let per = Prepared::content(&big, 1).unwrap().stored_len();
        let fits = READY_BYTES / per;
        for i in 0..fits + 3 {
            let name = format!("f{i}");
            a.note(1, b"", name.as_bytes(), libc::IN_CLOSE_WRITE);
            a.next().unwrap();
            a.finish(Some(prepared(&big)));
        }
        assert_eq!(a.ready.len(), fits);
        assert!(a.bytes <= READY_BYTES && a.bytes == fits * per);
    }

    /// A workspace with a live watcher's parts, wired as `LiveWatch` wires them, the thread
    /// started, and its first capture kept as the stat cache.
    struct Live {
        _dir: tempfile::TempDir,
        root: std::path::PathBuf,
        store: Store,
        watcher: Arc<Watcher>,
        kept: Arc<Mutex<Option<Kept>>>,
    }

    impl Live {
        fn new(files: &[(&str, &str)]) -> Live {
            let dir = tempfile::tempdir().unwrap();
            let root = dir.path().join("ws");
            for (rel, body) in files {
                let p = root.join(rel);
                std::fs::create_dir_all(p.parent().unwrap()).unwrap();
                std::fs::write(p, body).unwrap();
            }
            let store = Store::open(
                &dir.path().join("packs"),
                &dir.path().join("index.sqlite"),
                Default::default(),
            )
            .unwrap();
            let watcher = Arc::new(Watcher::new(&root).unwrap());
            let opts = options(None, Some(&watcher));
            let first = capture(&root, &store, &State::default(), &opts).unwrap();
            assert!(watcher.is_complete());
            let stamp_file = dir.path().join("state.bin");
            std::fs::write(&stamp_file, b"").unwrap();
            let kept = Arc::new(Mutex::new(Some(Kept {
                stamp: StateStamp::of(&stamp_file).unwrap(),
                state: first.state,
                unsaved: false,
            })));
            start(&watcher, &kept, &root, u64::MAX, &Default::default());
            watcher.ahead.get().unwrap().began();
            Live {
                _dir: dir,
                root,
                store,
                watcher,
                kept,
            }
        }

        fn ready(&self) -> Vec<Vec<u8>> {
            lock(&self.watcher.ahead.get().unwrap().work).ready_paths()
        }

        /// Waits until the thread has prepared `rel`.
        fn wait_for(&self, rel: &str) {
            let until = Instant::now() + Duration::from_secs(20);
            while !self.ready().contains(&rel.as_bytes().to_vec()) {
                assert!(
                    Instant::now() < until,
                    "{rel} was never prepared: {:?}",
                    self.ready()
                );
                std::thread::sleep(Duration::from_millis(2));
            }
        }

        fn stat(&self, rel: &str) -> StatEntry {
            let m = std::fs::symlink_metadata(self.root.join(rel)).unwrap();
            StatEntry::of_file(rel.as_bytes(), &m, ObjectId::ZERO)
        }
    }

    fn options<'a>(
        ahead: Option<&'a HashedAhead>,
        watch: Option<&'a Watcher>,
    ) -> CaptureOptions<'a> {
        CaptureOptions {
            ignored: crate::config::IgnoredPolicy::Skip,
            max_file_size: u64::MAX,
            time_budget: None,
            progress: None,
            dirty: None,
            watch,
            prehashed: None,
            ahead,
            trust_granule_ns: None,
        }
    }

    fn blob_id(content: &[u8]) -> ObjectId {
        ObjectId::compute(ObjectKind::Blob, content)
    }

    /// The thread prepares what a command closes after writing, for files the stat cache
    /// has; a take hands it over, with every event until then read, and it vouches for the
    /// file only as it was read. Not prepared: a new file, a file in a directory that is not
    /// the one its watch was set on (a directory moved, another made at its old path).
    #[test]
    fn the_thread_prepares_closed_files_the_cache_has() {
        let live = Live::new(&[("a", "a1\n"), ("d/b", "b1\n"), ("keep", "k\n")]);
        std::fs::write(live.root.join("new"), "not in the cache\n").unwrap();
        std::fs::write(live.root.join("a"), "a2\n").unwrap();
        live.wait_for("a");
        assert_eq!(
            live.ready(),
            [b"a".to_vec()],
            "only a: `new` is not in the cache"
        );

        let (_, _, ahead) = live.watcher.take(1);
        let ahead = ahead.expect("a live watcher's thread hands over");
        let (object, _) = ahead.vouch(b"a", &live.stat("a")).expect("a as read");
        assert_eq!(object.id(), blob_id(b"a2\n"));
        assert!(live.ready().is_empty(), "handed over");
        std::fs::write(live.root.join("a"), "a3, longer\n").unwrap();
        assert!(
            ahead.vouch(b"a", &live.stat("a")).is_none(),
            "not the file it read"
        );

        // `d` moves to `e` (its watch checked before) and another `d/b` appears: the old
        // watch names `d/b` for `e/b`.
        std::fs::write(live.root.join("d/b"), "b1.5\n").unwrap();
        live.wait_for("d/b");
        std::fs::rename(live.root.join("d"), live.root.join("e")).unwrap();
        std::fs::create_dir(live.root.join("d")).unwrap();
        std::fs::write(live.root.join("d/b"), "other\n").unwrap();
        std::fs::write(live.root.join("e/b"), "b2\n").unwrap();
        std::fs::write(live.root.join("keep"), "k2\n").unwrap();
        live.wait_for("keep");
        assert!(
            !live.ready().contains(&b"d/b".to_vec()),
            "d/b is not in the watched directory: {:?}",
            live.ready()
        );
        drop(live.kept);
    }

    /// The thread reads ahead only while an opaque epoch of the process is open: a file
    /// written while none is stays for the capture (its event stays queued), and is read once
    /// one opens.
    #[test]
    fn nothing_is_read_ahead_while_no_epoch_is_open() {
        let live = Live::new(&[("a", "a1\n")]);
        let shared = live.watcher.ahead.get().unwrap();
        shared.ended();
        shared.ended();
        std::fs::write(live.root.join("a"), "a2\n").unwrap();
        std::thread::sleep(Duration::from_millis(300));
        assert!(live.ready().is_empty(), "no epoch open: nothing read");
        shared.began();
        live.wait_for("a");
    }

    /// A capture stores what was prepared for a file it finds as it was read, instead of
    /// reading it (here the prepared bytes are not the file's, which shows it), and readable;
    /// content modified in the tick its take read the queue in (or later) gets an unknown
    /// mtime in the new cache, so the next capture that looks at it reads it again. A file
    /// found with another stat is read.
    #[test]
    fn a_capture_takes_prepared_content_and_marks_the_recent_racy() {
        for racy in [false, true] {
            let live = Live::new(&[("a", "a1\n"), ("b", "b1\n")]);
            let old = lock(&live.kept).as_ref().unwrap().state.clone();
            std::fs::write(live.root.join("a"), "a2\n").unwrap();
            std::fs::write(live.root.join("b"), "b2\n").unwrap();
            let mtime = live.stat("a").mtime_ns;
            let ready = |rel: &str, stat: StatEntry| {
                let object = Prepared::content(b"prepared\n", 1).unwrap();
                let stat = StatEntry {
                    id: object.id(),
                    ..stat
                };
                (rel.as_bytes().to_vec(), Ready { stat, object })
            };
            let mut other = live.stat("b");
            other.ctime_ns -= 1;
            let ahead = HashedAhead {
                files: HashMap::from([ready("a", live.stat("a")), ready("b", other)]),
                drained_ns: if racy { mtime } else { mtime + 1 },
            };
            let opts = options(Some(&ahead), None);
            let c = capture(&live.root, &live.store, &old, &opts).unwrap();
            for (rel, content) in [("a", "prepared\n"), ("b", "b2\n")] {
                let e = c.state.get(rel.as_bytes()).unwrap();
                assert_eq!(e.id, blob_id(content.as_bytes()), "{rel}");
                let mut stored = Vec::new();
                live.store.read_content(&e.id, &mut stored).unwrap();
                assert_eq!(stored, content.as_bytes());
            }
            let a = c.state.get(b"a").unwrap();
            assert_eq!(a.mtime_ns == -1, racy, "racy: {racy}");
        }
    }
}
