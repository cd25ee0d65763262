//! Hashing ahead of a capture, without the workspace lock: how a background baseline covers
//! the files a `capture.time_budget` left uncovered while agents keep working.
//!
//! [`prehash`] reads the given files and stores their contents with its own store writer,
//! committed before anything refers to them; each file hashed leaves a [`Prehashed`] entry:
//! the `lstat` it had while it was read and the id of what was read. A later capture, under the
//! lock, takes an entry's id for a file it finds with exactly that stat, as it takes an id from
//! the stat cache, and so covers the file without reading it again.
//!
//! Invariants:
//! * **An entry vouches only for the file that was read.** Kind, mode, size, mtime, ctime and
//!   inode must be the same before the read, after it and when the capture finds the file. A
//!   file whose mtime is not older than the moment its read began is not entered (the stat
//!   cache's racy rule: a write within the same timestamp tick could change the content
//!   without changing the stat).
//! * **An id is used only while it is stored.** The contents were stored without the
//!   workspace lock, so a gc may sweep them (nothing referred to them) before the capture
//!   runs. Under the lock, where no sweep runs (see `docs/format.md`, "Garbage collection"),
//!   the capture compares the store's sweep count with the one read before the first content
//!   was stored: the same count means no index row has been removed since, so every id is
//!   stored. Otherwise it asks its own writer about each id: an id that is gone is not used,
//!   and the file is hashed (or stays uncovered) as it would have been.

use std::collections::HashMap;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use rayon::prelude::*;
use rewind_store::{ObjectId, Writer};

use crate::capture::state::StatEntry;
use crate::fs::relpath;
use crate::Error;

/// Files hashed ahead of a capture (see the module), by directory, each directory's entries
/// sorted by name. (Grouped, not keyed by path: hashing 280,000 paths into a map took a third
/// of a second on one core after the files had been read on every core.)
#[derive(Default)]
pub struct Prehashed {
    dirs: HashMap<Vec<u8>, Vec<StatEntry>>,
    /// The store's sweep count before the first of these files was stored (see the module).
    sweeps: u64,
}

impl Prehashed {
    /// How many files were hashed.
    pub(crate) fn len(&self) -> usize {
        self.dirs.values().map(Vec::len).sum()
    }

    /// Whether every id hashed is certainly still stored: no sweep has run since before they
    /// were stored (or found stored). Else each must be looked up before it is used.
    pub(crate) fn all_stored(&self, store: &rewind_store::Store) -> Result<bool, Error> {
        Ok(store.sweeps()? == self.sweeps)
    }

    /// The id hashed for the entry `now.name` of directory `dir` if `now` (what a capture
    /// found there) is the file that was read: same kind, mode, size, mtime, ctime and inode.
    pub(crate) fn vouch(&self, dir: &[u8], now: &StatEntry) -> Option<ObjectId> {
        let entries = self.dirs.get(dir)?;
        let i = entries
            .binary_search_by(|e| e.name.as_slice().cmp(&now.name))
            .ok()?;
        let e = &entries[i];
        e.same_file(now).then_some(e.id)
    }
}

/// The paths a background baseline has tried (see [`PrehashRun::tried`]), by directory, each
/// directory's names sorted.
#[derive(Default)]
pub struct Tried {
    dirs: HashMap<Vec<u8>, Vec<Vec<u8>>>,
}

impl Tried {
    /// Whether the entry `name` of directory `dir` was tried.
    pub(crate) fn contains(&self, dir: &[u8], name: &[u8]) -> bool {
        self.dirs
            .get(dir)
            .is_some_and(|names| names.binary_search_by(|n| n.as_slice().cmp(name)).is_ok())
    }

    /// Adds the paths `other` holds.
    pub(crate) fn extend(&mut self, other: Tried) {
        for (dir, mut names) in other.dirs {
            let mine = self.dirs.entry(dir).or_default();
            if mine.is_empty() {
                *mine = names;
            } else {
                mine.append(&mut names);
                mine.sort_unstable();
                mine.dedup();
            }
        }
    }
}

/// Builds a map of directory → items from items that come mostly grouped by directory (a
/// sorted list of paths: a directory's files are contiguous but for its subdirectories'
/// paths sorting between them), one map lookup per run of one directory instead of per item.
struct ByDir<T> {
    dirs: HashMap<Vec<u8>, Vec<T>>,
    run: Option<(Vec<u8>, Vec<T>)>,
}

impl<T> ByDir<T> {
    fn new() -> Self {
        ByDir {
            dirs: HashMap::new(),
            run: None,
        }
    }

    fn push(&mut self, dir: &[u8], item: T) {
        match &mut self.run {
            Some((d, items)) if d.as_slice() == dir => items.push(item),
            _ => {
                self.end_run();
                self.run = Some((dir.to_vec(), vec![item]));
            }
        }
    }

    fn end_run(&mut self) {
        if let Some((dir, mut items)) = self.run.take() {
            self.dirs.entry(dir).or_default().append(&mut items);
        }
    }

    /// The map, each directory's items sorted by `key`.
    fn finish<K: Ord>(mut self, key: impl Fn(&T) -> &K) -> HashMap<Vec<u8>, Vec<T>> {
        self.end_run();
        for items in self.dirs.values_mut() {
            if !items.is_sorted_by(|a, b| key(a) <= key(b)) {
                items.sort_unstable_by(|a, b| key(a).cmp(key(b)));
            }
        }
        self.dirs
    }
}

/// What [`prehash`] did.
pub struct PrehashRun {
    /// The files it hashed.
    pub prehashed: Prehashed,
    /// The paths it tried (hashed or not: changed while read, gone, unreadable, not a regular
    /// file, over `max_file_size`); the rest of the list was left for the deadline.
    pub tried: Tried,
    /// Bytes read.
    pub bytes: u64,
}

/// Hashes and stores the regular files at `paths` (under `root`) on every core until
/// `deadline`; files not begun by then are left. Contents go through `writer`, which the
/// caller commits. Only a store failure is an error: a file that cannot be read is only not
/// entered. (`paths` is taken, not borrowed: the run's sets hold names, grouped by directory,
/// and the paths are freed on another thread.)
pub(crate) fn prehash(
    root: &Path,
    writer: &Writer,
    paths: Vec<Vec<u8>>,
    deadline: Instant,
    max_file_size: u64,
) -> Result<PrehashRun, Error> {
    // Read before the writer stores or finds anything (it skips a content already indexed).
    let sweeps = writer.store().sweeps()?;
    let late = AtomicBool::new(false);
    // Per path: `None` if left for the deadline, else what hashing it gave.
    let results: Vec<Option<Option<StatEntry>>> = paths
        .par_iter()
        .map(|rel| {
            if late.load(Ordering::Relaxed) || Instant::now() >= deadline {
                late.store(true, Ordering::Relaxed);
                return Ok(None);
            }
            Ok(Some(hash_one(root, writer, rel, max_file_size)?))
        })
        .collect::<Result<_, Error>>()?;
    crate::base::trace::phase("prehash: files read");
    let (mut hashed, mut tried) = (ByDir::new(), ByDir::new());
    let mut bytes = 0;
    for (rel, r) in paths.iter().zip(results) {
        let Some(entry) = r else { continue };
        let (dir, name) = relpath::split(rel);
        if let Some(e) = entry {
            bytes += e.size;
            hashed.push(dir, e);
        }
        tried.push(dir, name.to_vec());
    }
    // (Freed on a thread of its own: one small allocation per path.)
    crate::base::drop_in_background(paths);
    Ok(PrehashRun {
        prehashed: Prehashed {
            dirs: hashed.finish(|e: &StatEntry| &e.name),
            sweeps,
        },
        tried: Tried {
            dirs: tried.finish(|n: &Vec<u8>| n),
        },
        bytes,
    })
}

/// One file: its entry if it was a regular file within the size cap that did not change while
/// it was read and is not racy.
fn hash_one(
    root: &Path,
    writer: &Writer,
    rel: &[u8],
    max_file_size: u64,
) -> Result<Option<StatEntry>, Error> {
    let began = super::coarse_now_ns();
    let abs = relpath::to_path(root, rel);
    // Not through a final symlink, not blocking on a FIFO (see `open_for_capture`); what was
    // opened is checked to be a regular file by its own stat.
    let Ok(mut file) = crate::fs::read::open_for_capture(root, &abs, rel) else {
        return Ok(None);
    };
    let Ok(before) = file.metadata() else {
        return Ok(None);
    };
    if !before.file_type().is_file() || before.size() > max_file_size {
        return Ok(None);
    }
    let (id, size) = match writer.put_file(&mut file, before.size()) {
        Ok((id, size, _)) => (id, size),
        Err(rewind_store::Error::Input(_)) => return Ok(None),
        Err(e) => return Err(e.into()),
    };
    let Ok(after) = file.metadata() else {
        return Ok(None);
    };
    let (b, a) = (
        StatEntry::of_file(rel, &before, id),
        StatEntry::of_file(rel, &after, id),
    );
    let unchanged = b.same_file(&a) && a.size == size;
    Ok((unchanged && a.mtime_ns < began).then_some(a))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    fn stat_of(root: &Path, rel: &str) -> StatEntry {
        let m = std::fs::symlink_metadata(root.join(rel)).unwrap();
        StatEntry::of_file(rel.as_bytes(), &m, ObjectId::ZERO)
    }

    fn store_in(dir: &Path) -> rewind_store::Store {
        rewind_store::Store::open(
            &dir.join("packs"),
            &dir.join("index.sqlite"),
            Default::default(),
        )
        .unwrap()
    }

    fn set_mtime(path: &Path, secs: i64) {
        let t = std::time::UNIX_EPOCH + std::time::Duration::from_secs(secs as u64);
        std::fs::File::options()
            .write(true)
            .open(path)
            .unwrap()
            .set_modified(t)
            .unwrap();
    }

    /// An entry vouches for the file it read, with its content's id, and for nothing else: not
    /// after a rewrite of the same size, not for a racy file (modified in the tick its read
    /// began), not for a file over the size cap, a symlink or a missing path.
    #[test]
    fn an_entry_vouches_only_for_the_file_it_read() {
        let t = tempfile::tempdir().unwrap();
        let ws = t.path().join("ws");
        std::fs::create_dir_all(ws.join("d")).unwrap();
        for (rel, body) in [("d/a", "aaaa"), ("b", "bbbb"), ("big", "0123456789")] {
            std::fs::write(ws.join(rel), body).unwrap();
            set_mtime(&ws.join(rel), 1_000_000_000);
        }
        // Modified "after" the read began, as a write in the same timestamp tick would look.
        std::fs::write(ws.join("racy"), "now").unwrap();
        let later = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs()
            + 3600;
        set_mtime(&ws.join("racy"), later as i64);
        std::os::unix::fs::symlink("b", ws.join("link")).unwrap();
        let store = store_in(t.path());
        let writer = store.writer().unwrap();
        let paths: Vec<Vec<u8>> = ["d/a", "b", "big", "racy", "link", "gone"]
            .iter()
            .map(|p| p.as_bytes().to_vec())
            .collect();
        let far = Instant::now() + std::time::Duration::from_secs(60);
        let run = prehash(&ws, &writer, paths.clone(), far, 5).unwrap();
        writer.commit().unwrap();
        let tried: usize = run.tried.dirs.values().map(Vec::len).sum();
        assert_eq!(tried, paths.len(), "every path was tried");
        let mut got: Vec<_> = (run.prehashed.dirs.iter())
            .flat_map(|(dir, entries)| entries.iter().map(|e| relpath::join(dir, &e.name)))
            .map(|k| String::from_utf8_lossy(&k).into_owned())
            .collect();
        got.sort();
        assert_eq!(got, ["b", "d/a"], "only d/a and b");
        assert_eq!(run.prehashed.len(), 2);
        for p in &paths {
            let (dir, name) = relpath::split(p);
            assert!(run.tried.contains(dir, name), "{p:?} was tried");
        }
        assert!(!run.tried.contains(b"", b"a") && !run.tried.contains(b"d", b"b"));
        let id = run.prehashed.vouch(b"d", &stat_of(&ws, "d/a")).unwrap();
        let mut content = Vec::new();
        store.read_content(&id, &mut content).unwrap();
        assert_eq!(content, b"aaaa");
        // Rewritten with the same size and the old mtime: the ctime tells.
        std::thread::sleep(std::time::Duration::from_millis(20));
        std::fs::write(ws.join("b"), "BBBB").unwrap();
        set_mtime(&ws.join("b"), 1_000_000_000);
        assert_eq!(run.prehashed.vouch(b"", &stat_of(&ws, "b")), None);
        assert_eq!(run.prehashed.vouch(b"", &stat_of(&ws, "racy")), None);
        assert_eq!(run.prehashed.vouch(b"", &stat_of(&ws, "big")), None);
        assert_eq!(
            run.prehashed.vouch(b"d", &stat_of(&ws, "b")),
            None,
            "b is not in d"
        );
    }

    /// A capture takes the ids hashed ahead while no sweep has run since, and only those it
    /// finds still stored once one has: after a gc that removed them (nothing referred to
    /// them), the files are read again and the capture's ids are readable.
    #[test]
    fn ids_removed_by_a_sweep_since_are_not_used() {
        for sweep in [false, true] {
            let t = tempfile::tempdir().unwrap();
            let ws = t.path().join("ws");
            std::fs::create_dir_all(ws.join("d")).unwrap();
            for (rel, body) in [("d/a", "aaaa"), ("b", "bbbb")] {
                std::fs::write(ws.join(rel), body).unwrap();
                set_mtime(&ws.join(rel), 1_000_000_000);
            }
            let store = store_in(t.path());
            let writer = store.writer().unwrap();
            let paths = vec![b"b".to_vec(), b"d/a".to_vec()];
            let far = Instant::now() + std::time::Duration::from_secs(60);
            let run = prehash(&ws, &writer, paths, far, 100).unwrap();
            writer.commit().unwrap();
            assert_eq!(run.prehashed.len(), 2);
            let sweeps = store.sweeps().unwrap();
            if sweep {
                // What `rewind gc` does with nothing referring to these objects.
                let mut plan = store.plan_sweep(&HashSet::new(), true).unwrap();
                store.repack(&mut plan).unwrap();
                store.commit_sweep(&plan).unwrap();
                store.finish_sweep(plan, &|| {}).unwrap();
                assert_eq!(
                    store.sweeps().unwrap(),
                    sweeps + 1,
                    "the sweep counts itself"
                );
            }
            // (Counts the files the capture reads, not those it takes an id for.)
            let progress = crate::capture::scan::Progress::default();
            let opts = crate::capture::CaptureOptions {
                ignored: crate::config::IgnoredPolicy::Skip,
                max_file_size: u64::MAX,
                time_budget: None,
                progress: Some(&progress),
                dirty: None,
                watch: None,
                prehashed: Some(&run.prehashed),
                ahead: None,
                trust_granule_ns: None,
            };
            let old = crate::capture::state::State::default();
            let c = crate::capture::capture(&ws, &store, &old, &opts).unwrap();
            let read = if sweep { 2 } else { 0 };
            let files_read = progress.files_hashed.into_inner();
            assert_eq!(files_read, read, "sweep: {sweep}");
            for (dir, name, body) in [(&b""[..], &b"b"[..], "bbbb"), (b"d", b"a", "aaaa")] {
                let e = c.state.dirs[dir].iter().find(|e| e.name == name).unwrap();
                let mut content = Vec::new();
                store.read_content(&e.id, &mut content).unwrap();
                assert_eq!(content, body.as_bytes(), "sweep: {sweep}");
            }
        }
    }

    proptest::proptest! {
        /// Grouping paths by directory loses, invents and misplaces nothing, whatever the
        /// order (a directory's files are split by its subdirectories' paths in sorted order:
        /// `d/a-b` < `d/a/x` < `d/a0`), and `Tried::extend` is a set union.
        #[test]
        fn paths_grouped_by_directory_are_the_set_of_paths(
            first in proptest::collection::vec("(d|d/a|e)/(a|a-b|a0|b)", 0..30),
            second in proptest::collection::vec("(d|d/a|e)/(a|a-b|a0|b)", 0..30),
            sorted in proptest::bool::ANY,
        ) {
            let tried_of = |paths: &[String]| {
                let mut paths = paths.to_vec();
                if sorted {
                    paths.sort();
                }
                let mut by = ByDir::new();
                for p in &paths {
                    let (dir, name) = relpath::split(p.as_bytes());
                    by.push(dir, name.to_vec());
                }
                Tried { dirs: by.finish(|n: &Vec<u8>| n) }
            };
            let mut tried = tried_of(&first);
            tried.extend(tried_of(&second));
            let model: std::collections::BTreeSet<&String> = first.iter().chain(&second).collect();
            let mut got = Vec::new();
            for (dir, names) in &tried.dirs {
                proptest::prop_assert!(names.is_sorted(), "{names:?}");
                got.extend(names.iter().map(|n| String::from_utf8(relpath::join(dir, n)).unwrap()));
            }
            got.sort();
            got.dedup();
            proptest::prop_assert_eq!(got.iter().collect::<Vec<_>>(), model.iter().copied().collect::<Vec<_>>());
            for p in ["d/a", "d/a-b", "d/a0", "d/b", "d/a/a", "d/a/b", "e/a", "e/b", "a"] {
                let (dir, name) = relpath::split(p.as_bytes());
                proptest::prop_assert_eq!(tried.contains(dir, name), model.contains(&p.to_string()), "{}", p);
            }
        }
    }

    /// Past its deadline, prehash begins nothing more and says which paths it left.
    #[test]
    fn past_the_deadline_nothing_is_begun() {
        let t = tempfile::tempdir().unwrap();
        std::fs::write(t.path().join("f"), "x").unwrap();
        let store = store_in(t.path());
        let writer = store.writer().unwrap();
        let run = prehash(t.path(), &writer, vec![b"f".to_vec()], Instant::now(), 100).unwrap();
        assert!(run.tried.dirs.is_empty() && run.prehashed.len() == 0);
    }
}
