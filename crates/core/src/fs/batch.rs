//! Many writes under the root at once: what a restore of thousands of files needs to run at the
//! pace of `git read-tree -u`, with the same safety as [`RootDir`]'s one-path operations.
//!
//! [`RootDir`] resolves every path from the root, one `openat` per component, and writes each
//! file to a temporary name, fsyncs it and renames it before the next: about 45 system calls a
//! file, a flush at a time. A [`Batch`] keeps the three guarantees and drops the rest:
//!
//! * **No symlink is followed.** Each directory is still opened component by component with
//!   `O_NOFOLLOW | O_DIRECTORY`, but once per batch: the descriptors are kept (a bounded
//!   number) and forgotten when the batch itself removes that directory.
//! * **A file's new content is durable before its name points at it.** New contents are
//!   written under temporary names beside their targets, [`Batch::FILES`] at a time (created
//!   and filled on every core when begun together, [`Batch::begin_writes`]: creating a file is
//!   mostly the kernel's work); then all of them are flushed together, and only then renamed
//!   into place, in the order they were begun.
//! * **Every name change is durable before the caller records it.** [`Batch::finish`] flushes
//!   each directory that gained, lost or replaced a name, once, after the last rename.
//!
//! "Flushed together" is one `syncfs` per file system the files are on, once there are
//! [`Batch::SYNCFS_FROM`] of them, and one fsync each (on several threads, so the file system
//! can serve them with shared journal commits) below that. A restore of 10,000 files made
//! 10,000 fsyncs, each a journal commit and a disk cache flush: most of its time. `syncfs`
//! writes back every dirty page and inode of the file system, commits the journal once and
//! flushes the disk's cache once; it also writes back what other programs left dirty there,
//! which is why small batches keep their fsyncs. Since Linux 5.8 `syncfs` reports writeback
//! errors (on older kernels the batch keeps its fsyncs, which always did); when it does, the batch fsyncs each of its own files to learn which one failed (each
//! descriptor keeps its own error cursor, so the error is not lost to the first report), and an
//! error on some other program's file, with all of ours flushed, is not the batch's failure.
//!
//! A process killed part-way leaves temporary files (`TEMP_PREFIX`, named by its pid) that the
//! next restore removes, and the journal that a restore writes first finishes or rolls back
//! whatever the kill left: every step is "make this path be that", so steps that were begun but
//! not renamed are simply done again.

use std::collections::{HashMap, HashSet};
use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::Arc;

use crate::fs::relpath;
use crate::fs::root::{self, Present, RootDir};

/// A directory of the root: the root's own descriptor, or one this batch opened.
#[derive(Clone)]
enum Dir<'r> {
    Root(&'r OwnedFd),
    Opened(Arc<OwnedFd>),
}

impl Dir<'_> {
    fn fd(&self) -> &OwnedFd {
        match self {
            Dir::Root(fd) => fd,
            Dir::Opened(fd) => fd,
        }
    }
}

/// A file's new content under a temporary name beside its target, not yet flushed or renamed.
struct Pending<'r> {
    dir: Dir<'r>,
    dir_path: Vec<u8>,
    tmp: Vec<u8>,
    path: Vec<u8>,
    file: File,
}

/// Writes under the root that open each directory once and flush together (see the module).
/// Dropping a batch without [`Batch::finish`] removes the temporary files it still holds.
pub struct Batch<'r> {
    root: &'r RootDir,
    durable: bool,
    dirs: HashMap<Vec<u8>, Arc<OwnedFd>>,
    pending: Vec<Pending<'r>>,
    /// Directories whose entries changed, to flush once at the end.
    touched: HashSet<Vec<u8>>,
}

/// A file put in place by [`Batch::flush`]: its path and its metadata as written.
pub type Written = (Vec<u8>, std::fs::Metadata);

/// A [`Batch::flush`] that stopped: the error, and how many of the files it was putting in
/// place (in the order they were begun) went in before it. The rest were not renamed and their
/// temporary files are gone.
#[derive(Debug)]
pub struct FlushError {
    /// What failed.
    pub cause: io::Error,
    /// The path whose flush or rename failed.
    pub path: Vec<u8>,
    /// Files renamed into place before the failure.
    pub done: Vec<Written>,
}

impl<'r> Batch<'r> {
    /// How many new files wait for their flush at most: bounds the open descriptors.
    pub const FILES: usize = 128;
    /// How many directory descriptors are kept at most (then forgotten, and opened again).
    const DIRS: usize = 256;
    /// Threads that flush files (or directories) together.
    const FLUSHERS: usize = 8;
    /// From how many files (or directories) a flush is a `syncfs` of their file systems
    /// rather than an fsync of each (see the module).
    pub const SYNCFS_FROM: usize = 32;

    /// A batch of writes under `root`; `durable`: flush contents and directories.
    pub fn new(root: &'r RootDir, durable: bool) -> Batch<'r> {
        Batch {
            root,
            durable,
            dirs: HashMap::new(),
            pending: Vec::new(),
            touched: HashSet::new(),
        }
    }

    /// The directory `dir` (a workspace-relative path, empty for the root), opened from its
    /// nearest kept ancestor one component at a time without following a symlink.
    fn dir(&mut self, dir: &[u8], rel: &[u8]) -> io::Result<Dir<'r>> {
        if dir.is_empty() {
            return Ok(Dir::Root(self.root.fd()));
        }
        if let Some(fd) = self.dirs.get(dir) {
            return Ok(Dir::Opened(fd.clone()));
        }
        let (up, comp) = relpath::split(dir);
        let parent = self.dir(up, rel)?;
        let fd = Arc::new(root::open_dir_at(parent.fd(), comp, rel)?);
        if self.dirs.len() >= Self::DIRS {
            self.dirs.clear();
        }
        self.dirs.insert(dir.to_vec(), fd.clone());
        Ok(Dir::Opened(fd))
    }

    fn parent<'a>(&mut self, rel: &'a [u8]) -> io::Result<(Dir<'r>, &'a [u8], &'a [u8])> {
        relpath::check(rel)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e.to_string()))?;
        let (dir, name) = relpath::split(rel);
        Ok((self.dir(dir, rel)?, dir, name))
    }

    /// What is at `rel` now; a missing parent, or one that is a symlink or a file, is
    /// [`Present::Absent`] (as [`RootDir::lstat`]).
    pub fn lstat(&mut self, rel: &[u8]) -> io::Result<Present> {
        match self.parent(rel) {
            Ok((dir, _, name)) => root::lstat_at(dir.fd(), name),
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::NotFound | io::ErrorKind::NotADirectory
                ) =>
            {
                Ok(Present::Absent)
            }
            Err(e) => Err(e),
        }
    }

    /// Removes a file or symlink (absent is success).
    pub fn remove_file(&mut self, rel: &[u8]) -> io::Result<()> {
        let (dir, up, name) = self.parent(rel)?;
        root::remove_file_at(dir.fd(), name)?;
        self.touched.insert(up.to_vec());
        Ok(())
    }

    /// Removes an empty directory; `Ok(false)` when it still holds entries. Its descriptor and
    /// those below it are forgotten.
    pub fn remove_dir(&mut self, rel: &[u8]) -> io::Result<bool> {
        let (dir, up, name) = self.parent(rel)?;
        let gone = root::remove_dir_at(dir.fd(), name)?;
        if gone {
            self.dirs.retain(|k, _| {
                !(k == rel || k.starts_with(rel) && k.get(rel.len()) == Some(&b'/'))
            });
            self.touched.insert(up.to_vec());
        }
        Ok(gone)
    }

    /// Creates a directory owner-only (existing is success); see [`RootDir::make_dir`].
    pub fn make_dir(&mut self, rel: &[u8]) -> io::Result<()> {
        let (dir, up, name) = self.parent(rel)?;
        root::make_dir_at(dir.fd(), name)?;
        self.touched.insert(up.to_vec());
        Ok(())
    }

    /// Sets a directory's mode.
    pub fn chmod_dir(&mut self, rel: &[u8], mode: u32) -> io::Result<()> {
        let (dir, _, name) = self.parent(rel)?;
        root::chmod_dir_at(dir.fd(), name, mode)
    }

    /// Creates or replaces a symlink (through a temporary name).
    pub fn write_symlink(&mut self, rel: &[u8], target: &[u8]) -> io::Result<()> {
        let (dir, up, name) = self.parent(rel)?;
        root::write_symlink_at(dir.fd(), name, target)?;
        self.touched.insert(up.to_vec());
        Ok(())
    }

    /// Writes `rel`'s new content (from `fill`) and mode under a temporary name beside it. It
    /// goes in place at the next [`Batch::flush`], due once [`Batch::waiting`] reaches
    /// [`Batch::FILES`].
    pub fn begin_write(
        &mut self,
        rel: &[u8],
        mode: u32,
        fill: &mut dyn FnMut(&mut File) -> io::Result<()>,
    ) -> io::Result<()> {
        let (dir, up, _) = self.parent(rel)?;
        let (tmp, file) = new_temp_file(&dir, mode, fill)?;
        self.pending.push(Pending {
            dir,
            dir_path: up.to_vec(),
            tmp,
            path: rel.to_vec(),
            file,
        });
        Ok(())
    }

    /// Begins the writes of `files` (path and mode each) at once: their parents are opened in
    /// order, then each temporary file is created, filled by `fill(i, file)` and given its mode
    /// on every core (creating and writing files is mostly the kernel's work, which several
    /// threads share). They go in place at the next [`Batch::flush`], in `files`' order, as if
    /// begun one by one. On an error, the files before the first that failed are begun and the
    /// rest are not: their temporary files are removed; the error says which file failed.
    /// `parallel: false` fills them all on this thread (when `fill` needs something this
    /// thread holds).
    pub fn begin_writes(
        &mut self,
        files: &[(&[u8], u32)],
        fill: &(dyn Fn(usize, &mut File) -> io::Result<()> + Sync),
        parallel: bool,
    ) -> Result<(), (usize, io::Error)> {
        let mut parents = Vec::with_capacity(files.len());
        let mut failed = None;
        for (i, (rel, _)) in files.iter().enumerate() {
            match self.parent(rel) {
                Ok((dir, up, _)) => parents.push((dir, up)),
                Err(e) => {
                    failed = Some((i, e));
                    break;
                }
            }
        }
        let make = |(i, (dir, _)): (usize, &(Dir<'r>, &[u8]))| {
            new_temp_file(dir, files[i].1, &mut |f| fill(i, f))
        };
        let made: Vec<io::Result<(Vec<u8>, File)>> = if parallel {
            use rayon::prelude::*;
            parents.par_iter().enumerate().map(make).collect()
        } else {
            parents.iter().enumerate().map(make).collect()
        };
        let mut made = made.into_iter().zip(parents).enumerate();
        for (i, (file, (dir, up))) in made.by_ref() {
            match file {
                Ok((tmp, file)) => self.pending.push(Pending {
                    dir,
                    dir_path: up.to_vec(),
                    tmp,
                    path: files[i].0.to_vec(),
                    file,
                }),
                Err(e) => {
                    failed = Some((i, e));
                    break;
                }
            }
        }
        // Made after the first failure: not begun.
        for (_, (file, (dir, _))) in made {
            if let Ok((tmp, _)) = file {
                let _ = root::unlink_at(dir.fd(), &tmp);
            }
        }
        match failed {
            Some(f) => Err(f),
            None => Ok(()),
        }
    }

    /// How many begun files wait for [`Batch::flush`]; flush from [`Batch::FILES`].
    pub fn waiting(&self) -> usize {
        self.pending.len()
    }

    /// Puts every begun file in place: flushes their contents (when durable) together, then
    /// renames each over its target in the order they were begun, calling `after_each` after
    /// each rename.
    pub fn flush(&mut self, after_each: &mut dyn FnMut()) -> Result<Vec<Written>, FlushError> {
        let pending = std::mem::take(&mut self.pending);
        if self.durable {
            let files: Vec<&File> = pending.iter().map(|p| &p.file).collect();
            if let Err((i, cause)) = flush_together(&files) {
                let path = pending[i].path.clone();
                discard(pending);
                return Err(FlushError {
                    cause,
                    path,
                    done: Vec::new(),
                });
            }
        }
        let mut done = Vec::with_capacity(pending.len());
        let mut rest = pending.into_iter();
        while let Some(p) = rest.next() {
            let name = relpath::split(&p.path).1;
            match root::rename_into_place(p.dir.fd(), &p.tmp, name, &p.file) {
                Ok(meta) => {
                    self.touched.insert(p.dir_path);
                    done.push((p.path, meta));
                    after_each();
                }
                Err(cause) => {
                    discard(rest.collect());
                    return Err(FlushError {
                        cause,
                        path: p.path,
                        done,
                    });
                }
            }
        }
        Ok(done)
    }

    /// Flushes every directory whose names changed (when durable), once each. Call after the
    /// last [`Batch::flush`]; afterwards what the batch did survives a power cut.
    pub fn finish(mut self) -> io::Result<()> {
        debug_assert!(self.pending.is_empty(), "flush before finish");
        if !self.durable {
            return Ok(());
        }
        let mut touched: Vec<Vec<u8>> = self.touched.drain().collect();
        touched.sort_unstable();
        let mut dirs = Vec::with_capacity(touched.len());
        for d in &touched {
            // A directory removed since is not there to flush: its parent, touched too, is.
            match self.dir(d, d) {
                Ok(dir) => dirs.push(dir),
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::NotFound | io::ErrorKind::NotADirectory
                    ) => {}
                Err(e) => return Err(e),
            }
        }
        // Directory descriptors are opened read-only; fsync works on them all the same.
        let files: Vec<File> = dirs
            .iter()
            .map(|d| d.fd().try_clone().map(File::from))
            .collect::<io::Result<_>>()?;
        flush_together(&files).map_err(|(_, e)| e)
    }
}

impl Drop for Batch<'_> {
    fn drop(&mut self) {
        discard(std::mem::take(&mut self.pending));
    }
}

/// A new temporary file in `dir`, filled by `fill` and given `mode`; removed again on an error.
fn new_temp_file(
    dir: &Dir<'_>,
    mode: u32,
    fill: &mut dyn FnMut(&mut File) -> io::Result<()>,
) -> io::Result<(Vec<u8>, File)> {
    let (tmp, mut file) = root::temp_file_at(dir.fd())?;
    let written = (|| {
        fill(&mut file)?;
        io::Write::flush(&mut file)?;
        // SAFETY: valid fd.
        let rc = unsafe { libc::fchmod(file.as_raw_fd(), mode as libc::mode_t) };
        if rc < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    })();
    match written {
        Ok(()) => Ok((tmp, file)),
        Err(e) => {
            let _ = root::unlink_at(dir.fd(), &tmp);
            Err(e)
        }
    }
}

/// Removes the temporary files of writes that will not go in place.
fn discard(pending: Vec<Pending<'_>>) {
    for p in pending {
        let _ = root::unlink_at(p.dir.fd(), &p.tmp);
    }
}

/// Makes every file durable: one `syncfs` per file system they are on from
/// [`Batch::SYNCFS_FROM`] files, else [`flush_each`]. An error names the first file (by
/// position) that failed.
fn flush_together<F: std::borrow::Borrow<File> + Sync>(
    files: &[F],
) -> Result<(), (usize, io::Error)> {
    if files.len() < Batch::SYNCFS_FROM || !syncfs_reports_errors() {
        return flush_each(files);
    }
    let mut synced: Vec<u64> = Vec::new();
    for (i, f) in files.iter().enumerate() {
        let f = f.borrow();
        // A workspace may hold mount points: each file system the files are on is synced.
        let dev = f.metadata().map_err(|e| (i, e))?;
        let dev = std::os::unix::fs::MetadataExt::dev(&dev);
        if synced.contains(&dev) {
            continue;
        }
        // SAFETY: valid fd.
        if unsafe { libc::syncfs(f.as_raw_fd()) } < 0 {
            // Which file failed, or whether the error was another program's: ask each.
            return flush_each(files);
        }
        synced.push(dev);
    }
    Ok(())
}

/// Whether this kernel's `syncfs` reports writeback errors (Linux 5.8 and later). Before that
/// it returned 0 whatever happened to the data, so a failed flush would go unnoticed.
fn syncfs_reports_errors() -> bool {
    static ANSWER: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ANSWER.get_or_init(|| {
        // SAFETY: uname fills the struct it is given.
        let mut u: libc::utsname = unsafe { std::mem::zeroed() };
        if unsafe { libc::uname(&mut u) } != 0 {
            return false;
        }
        // SAFETY: uname NUL-terminates `release`.
        let release = unsafe { std::ffi::CStr::from_ptr(u.release.as_ptr()) };
        let mut parts = release.to_bytes().split(|b| !b.is_ascii_digit()).map(|p| {
            std::str::from_utf8(p)
                .ok()
                .and_then(|p| p.parse::<u32>().ok())
        });
        match (parts.next().flatten(), parts.next().flatten()) {
            (Some(major), Some(minor)) => (major, minor) >= (5, 8),
            _ => false,
        }
    })
}

/// fsyncs every file, on up to [`Batch::FLUSHERS`] threads; the first failure (by position)
/// wins.
fn flush_each<F: std::borrow::Borrow<File> + Sync>(files: &[F]) -> Result<(), (usize, io::Error)> {
    let files: Vec<&File> = files.iter().map(|f| f.borrow()).collect();
    if files.len() <= 1 {
        return match files.first().map(|f| f.sync_all()) {
            Some(Err(e)) => Err((0, e)),
            _ => Ok(()),
        };
    }
    let per = files.len().div_ceil(Batch::FLUSHERS);
    let failures: Vec<(usize, io::Error)> = std::thread::scope(|s| {
        let handles: Vec<_> = files
            .chunks(per)
            .enumerate()
            .map(|(c, chunk)| {
                s.spawn(move || {
                    chunk
                        .iter()
                        .enumerate()
                        .find_map(|(i, f)| f.sync_all().err().map(|e| (c * per + i, e)))
                })
            })
            .collect();
        handles
            .into_iter()
            .filter_map(|h| h.join().expect("a flush thread panicked"))
            .collect()
    });
    match failures.into_iter().min_by_key(|(i, _)| *i) {
        Some(f) => Err(f),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fill(bytes: &[u8]) -> impl FnMut(&mut File) -> io::Result<()> + '_ {
        move |f| io::Write::write_all(f, bytes)
    }

    #[test]
    fn begun_files_appear_only_at_the_flush_with_their_content_and_mode() {
        let t = tempfile::tempdir().unwrap();
        std::fs::create_dir(t.path().join("d")).unwrap();
        std::fs::write(t.path().join("d/a"), b"old").unwrap();
        let root = RootDir::open(t.path()).unwrap();
        let mut b = Batch::new(&root, true);
        b.begin_write(b"d/a", 0o640, &mut fill(b"new a")).unwrap();
        b.begin_write(b"d/b", 0o600, &mut fill(b"new b")).unwrap();
        assert_eq!(std::fs::read(t.path().join("d/a")).unwrap(), b"old");
        assert!(!t.path().join("d/b").exists());
        let done = b.flush(&mut || {}).unwrap();
        assert_eq!(
            done.iter().map(|(p, _)| p.as_slice()).collect::<Vec<_>>(),
            [&b"d/a"[..], b"d/b"]
        );
        b.finish().unwrap();
        assert_eq!(std::fs::read(t.path().join("d/a")).unwrap(), b"new a");
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(t.path().join("d/a"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o640);
        let names: Vec<_> = std::fs::read_dir(t.path().join("d")).unwrap().collect();
        assert_eq!(names.len(), 2, "no temporary file left");
    }

    /// A batch large enough to be flushed with `syncfs` puts every file in place the same way.
    #[test]
    fn a_batch_flushed_by_syncfs_puts_every_file_in_place() {
        let t = tempfile::tempdir().unwrap();
        std::fs::create_dir(t.path().join("d")).unwrap();
        let root = RootDir::open(t.path()).unwrap();
        let mut b = Batch::new(&root, true);
        let n = Batch::SYNCFS_FROM + 3;
        for i in 0..n {
            let rel = format!("d/f{i}");
            b.begin_write(rel.as_bytes(), 0o644, &mut fill(rel.as_bytes()))
                .unwrap();
        }
        let mut renamed = 0;
        let done = b.flush(&mut || renamed += 1).unwrap();
        assert_eq!((done.len(), renamed), (n, n));
        b.finish().unwrap();
        for i in 0..n {
            let rel = format!("d/f{i}");
            assert_eq!(std::fs::read(t.path().join(&rel)).unwrap(), rel.as_bytes());
        }
        assert_eq!(std::fs::read_dir(t.path().join("d")).unwrap().count(), n);
    }

    /// Writes begun together go in place in their given order, each with its own content and
    /// mode, however the threads that filled them were scheduled.
    #[test]
    fn writes_begun_together_go_in_place_in_order() {
        let t = tempfile::tempdir().unwrap();
        for d in ["a", "b"] {
            std::fs::create_dir(t.path().join(d)).unwrap();
        }
        let root = RootDir::open(t.path()).unwrap();
        let mut b = Batch::new(&root, true);
        let rels: Vec<String> = (0..100)
            .map(|i| format!("{}/f{i}", ["a", "b"][i % 2]))
            .collect();
        let files: Vec<(&[u8], u32)> = rels
            .iter()
            .enumerate()
            .map(|(i, r)| (r.as_bytes(), if i % 3 == 0 { 0o600 } else { 0o644 }))
            .collect();
        b.begin_writes(
            &files,
            &|i, f| io::Write::write_all(f, rels[i].as_bytes()),
            true,
        )
        .unwrap();
        assert_eq!(b.waiting(), 100);
        let done = b.flush(&mut || {}).unwrap();
        let order: Vec<&[u8]> = done.iter().map(|(p, _)| p.as_slice()).collect();
        assert_eq!(order, files.iter().map(|f| f.0).collect::<Vec<_>>());
        b.finish().unwrap();
        use std::os::unix::fs::PermissionsExt;
        for (rel, mode) in &files {
            let path = t.path().join(std::str::from_utf8(rel).unwrap());
            assert_eq!(std::fs::read(&path).unwrap(), *rel);
            let got = std::fs::metadata(&path).unwrap().permissions().mode();
            assert_eq!(got & 0o777, *mode);
        }
        let n = |d| std::fs::read_dir(t.path().join(d)).unwrap().count();
        assert_eq!((n("a"), n("b")), (50, 50), "no temporary file left");
    }

    /// When one of the writes begun together fails, the ones before it are begun and go in at
    /// the flush, and nothing of it or of the ones after it is left on the disk; a missing
    /// parent directory stops the writes at that file the same way.
    #[test]
    fn a_failed_write_among_writes_begun_together_begins_only_the_ones_before_it() {
        let t = tempfile::tempdir().unwrap();
        std::fs::create_dir(t.path().join("d")).unwrap();
        let root = RootDir::open(t.path()).unwrap();
        let mut b = Batch::new(&root, true);
        let rels: Vec<String> = (0..20).map(|i| format!("d/f{i:02}")).collect();
        let files: Vec<(&[u8], u32)> = rels.iter().map(|r| (r.as_bytes(), 0o644)).collect();
        let err = b
            .begin_writes(
                &files,
                &|i, f| {
                    io::Write::write_all(f, b"partial")?;
                    if i == 7 {
                        return Err(io::Error::other("no such object"));
                    }
                    Ok(())
                },
                true,
            )
            .unwrap_err();
        assert_eq!(err.0, 7, "{}", err.1);
        assert_eq!(b.waiting(), 7);
        let done = b.flush(&mut || {}).unwrap();
        assert_eq!(done.len(), 7);
        let mut names: Vec<String> = std::fs::read_dir(t.path().join("d"))
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        assert_eq!(names, rels[..7].iter().map(|r| &r[2..]).collect::<Vec<_>>());

        let files: Vec<(&[u8], u32)> =
            vec![(b"d/g", 0o644), (b"missing/g", 0o644), (b"d/h", 0o644)];
        let err = b
            .begin_writes(&files, &|_, f| io::Write::write_all(f, b"x"), false)
            .unwrap_err();
        assert_eq!((err.0, err.1.kind()), (1, io::ErrorKind::NotFound));
        assert_eq!(b.flush(&mut || {}).unwrap().len(), 1);
        b.finish().unwrap();
        assert_eq!(std::fs::read_dir(t.path().join("d")).unwrap().count(), 8);
    }

    #[test]
    fn a_dropped_batch_leaves_no_temporary_file() {
        let t = tempfile::tempdir().unwrap();
        let root = RootDir::open(t.path()).unwrap();
        let mut b = Batch::new(&root, true);
        b.begin_write(b"x", 0o644, &mut fill(b"x")).unwrap();
        drop(b);
        assert_eq!(std::fs::read_dir(t.path()).unwrap().count(), 0);
    }

    /// A directory replaced by a symlink after the batch opened it is not followed: the batch
    /// forgets a directory it removes, and opens the new path again without following.
    #[test]
    fn a_symlink_where_a_removed_directory_was_is_never_followed() {
        let t = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::fs::create_dir(t.path().join("d")).unwrap();
        let root = RootDir::open(t.path()).unwrap();
        let mut b = Batch::new(&root, false);
        assert_eq!(b.lstat(b"d/f").unwrap(), Present::Absent);
        assert!(b.remove_dir(b"d").unwrap());
        std::os::unix::fs::symlink(outside.path(), t.path().join("d")).unwrap();
        let err = b.begin_write(b"d/f", 0o644, &mut fill(b"x")).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::NotADirectory, "{err}");
        assert_eq!(std::fs::read_dir(outside.path()).unwrap().count(), 0);
    }
}
