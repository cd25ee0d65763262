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
//!   runs. The capture asks its own writer whether each id is stored, under the lock, where no
//!   sweep runs (see `docs/format.md`, "Garbage collection"): an id that is gone is not used,
//!   and the file is hashed (or stays uncovered) as it would have been.

use std::collections::{HashMap, HashSet};
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use rayon::prelude::*;
use rewind_store::{EntryKind, ObjectId, Writer};

use crate::capture::state::StatEntry;
use crate::fs::relpath;
use crate::Error;

/// Files hashed ahead of a capture, by workspace-relative path (see the module).
#[derive(Default)]
pub struct Prehashed {
    entries: HashMap<Vec<u8>, StatEntry>,
}

impl Prehashed {
    /// How many files were hashed.
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    /// The id hashed for `rel` if `now` (what a capture found there) is the file that was
    /// read: same kind, mode, size, mtime, ctime and inode.
    pub(crate) fn vouch(&self, rel: &[u8], now: &StatEntry) -> Option<ObjectId> {
        let e = self.entries.get(rel)?;
        same_stat(e, now).then_some(e.id)
    }
}

/// Kind, mode, size, mtime, ctime and inode all equal: the same file, as far as `lstat` tells.
fn same_stat(a: &StatEntry, b: &StatEntry) -> bool {
    a.kind == b.kind
        && a.mode == b.mode
        && a.size == b.size
        && a.mtime_ns == b.mtime_ns
        && a.ctime_ns == b.ctime_ns
        && a.ino == b.ino
}

/// The entry of the regular file `rel` with metadata `m` and content `id`.
fn file_entry(rel: &[u8], m: &std::fs::Metadata, id: ObjectId) -> StatEntry {
    StatEntry {
        name: relpath::split(rel).1.to_vec(),
        kind: EntryKind::File,
        mode: m.mode() & 0o7777,
        size: m.size(),
        mtime_ns: m.mtime() * 1_000_000_000 + m.mtime_nsec(),
        ctime_ns: m.ctime() * 1_000_000_000 + m.ctime_nsec(),
        ino: m.ino(),
        id,
    }
}

/// What [`prehash`] did.
pub struct PrehashRun {
    /// The files it hashed.
    pub prehashed: Prehashed,
    /// The paths it tried (hashed or not: changed while read, gone, unreadable, not a regular
    /// file, over `max_file_size`); the rest of the list was left for the deadline.
    pub tried: HashSet<Vec<u8>>,
    /// Bytes read.
    pub bytes: u64,
}

/// Hashes and stores the regular files at `paths` (under `root`) on every core until
/// `deadline`; files not begun by then are left. Contents go through `writer`, which the
/// caller commits. Only a store failure is an error: a file that cannot be read is only not
/// entered. (`paths` is taken, not borrowed: each path moves into the run's sets, so a
/// baseline of 280k files does not hold a third copy of every path through its capture.)
pub(crate) fn prehash(
    root: &Path,
    writer: &Writer,
    paths: Vec<Vec<u8>>,
    deadline: Instant,
    max_file_size: u64,
) -> Result<PrehashRun, Error> {
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
    let mut run = PrehashRun {
        prehashed: Prehashed::default(),
        tried: HashSet::new(),
        bytes: 0,
    };
    for (rel, r) in paths.into_iter().zip(results) {
        let Some(hashed) = r else { continue };
        if let Some(e) = hashed {
            run.bytes += e.size;
            run.prehashed.entries.insert(rel.clone(), e);
        }
        run.tried.insert(rel);
    }
    Ok(run)
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
    let Ok(mut file) = super::open_for_capture(root, &abs, rel) else {
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
    let (b, a) = (file_entry(rel, &before, id), file_entry(rel, &after, id));
    let unchanged = same_stat(&b, &a) && a.size == size;
    Ok((unchanged && a.mtime_ns < began).then_some(a))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stat_of(root: &Path, rel: &str) -> StatEntry {
        let m = std::fs::symlink_metadata(root.join(rel)).unwrap();
        file_entry(rel.as_bytes(), &m, ObjectId::ZERO)
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
        assert_eq!(run.tried.len(), paths.len(), "every path was tried");
        let mut got: Vec<_> = run
            .prehashed
            .entries
            .keys()
            .map(|k| String::from_utf8_lossy(k).into_owned())
            .collect();
        got.sort();
        assert_eq!(got, ["b", "d/a"], "only d/a and b");
        let id = run.prehashed.vouch(b"d/a", &stat_of(&ws, "d/a")).unwrap();
        let mut content = Vec::new();
        store.read_content(&id, &mut content).unwrap();
        assert_eq!(content, b"aaaa");
        // Rewritten with the same size and the old mtime: the ctime tells.
        std::thread::sleep(std::time::Duration::from_millis(20));
        std::fs::write(ws.join("b"), "BBBB").unwrap();
        set_mtime(&ws.join("b"), 1_000_000_000);
        assert_eq!(run.prehashed.vouch(b"b", &stat_of(&ws, "b")), None);
        assert_eq!(run.prehashed.vouch(b"racy", &stat_of(&ws, "racy")), None);
        assert_eq!(run.prehashed.vouch(b"big", &stat_of(&ws, "big")), None);
    }

    /// Past its deadline, prehash begins nothing more and says which paths it left.
    #[test]
    fn past_the_deadline_nothing_is_begun() {
        let t = tempfile::tempdir().unwrap();
        std::fs::write(t.path().join("f"), "x").unwrap();
        let store = store_in(t.path());
        let writer = store.writer().unwrap();
        let run = prehash(t.path(), &writer, vec![b"f".to_vec()], Instant::now(), 100).unwrap();
        assert!(run.tried.is_empty() && run.prehashed.len() == 0);
    }
}
