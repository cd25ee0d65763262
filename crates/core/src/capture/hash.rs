//! Capturing one entry the stat cache could not vouch for: reading and storing it (or
//! cloning it), or taking an id that still stands for it (hashed ahead by a background
//! baseline, or the clone its previous capture made), or content a live watcher's thread
//! read ahead, or making it uncovered, saying why.

use std::fs::File;
use std::os::unix::ffi::OsStringExt;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::sync::atomic::Ordering;
use std::time::Instant;

use rewind_store::{EntryKind, ObjectId, Store, Writer};

use super::scan::{self, Found};
use super::state::State;
use super::{CaptureOptions, BUDGET_REASON};
use crate::fs::read::open_for_capture;
use crate::fs::relpath;
use crate::fs::root::RootDir;
use crate::Error;

/// Makes `f` an uncovered entry (its content not captured), saying why.
fn make_uncovered(f: &mut Found, reason: String) {
    *f = scan::uncovered(std::mem::take(&mut f.stat.name), f.stat.size, reason);
}

/// What hashing one entry needs besides the entry.
pub(super) struct HashCtx<'a> {
    pub root: &'a Path,
    pub writer: &'a Writer<'a>,
    pub opts: &'a CaptureOptions<'a>,
    pub hash_until: Option<Instant>,
    /// The stat cache: where a large file's previous clone is found.
    pub old: &'a State,
    pub store: &'a Store,
    /// Every id in `opts.prehashed` is still stored (no sweep since): none is looked up.
    pub prehashed_stored: bool,
}

/// How [`hash_one`] gave an entry its id.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Took {
    /// Read (or hashed ahead by a background baseline), or made uncovered.
    Read,
    /// Cloned (see `Writer::clone_file`).
    Cloned,
    /// The id of the clone its previous capture made, whose bytes it still holds.
    SameClone,
}

/// Reads and stores the file or symlink `f` (in `dir`) and sets its id, or makes it uncovered
/// when it cannot or may not be read.
pub(super) fn hash_one(ctx: &HashCtx, dir: &[u8], f: &mut Found) -> Result<Took, Error> {
    let HashCtx {
        root,
        writer,
        opts,
        hash_until,
        ..
    } = *ctx;
    let uncovered = |f: &mut Found, reason: String| {
        make_uncovered(f, reason);
        Ok(Took::Read)
    };
    if let Some(id) = opts.prehashed.and_then(|p| p.vouch(dir, &f.stat)) {
        // Under the workspace lock (no sweep runs): the id may be used only if still stored.
        if ctx.prehashed_stored || writer.stored(&id)? {
            f.stat.id = id;
            f.known = true;
            return Ok(Took::Read);
        }
    }
    let rel = relpath::join(dir, &f.stat.name);
    let ahead = opts.ahead.filter(|_| f.stat.size <= opts.max_file_size);
    if let Some((object, racy)) = ahead.and_then(|a| a.vouch(&rel, &f.stat)) {
        f.stat.id = writer.put_prepared(object)?;
        f.known = true;
        if racy {
            // Modified in the tick the take read the queue in: a later write in that tick
            // could leave the stat as it is, so the next capture that looks reads it again.
            f.stat.mtime_ns = -1;
        }
        return Ok(Took::Read);
    }
    let abs = relpath::to_path(root, &rel);
    if f.stat.kind == EntryKind::Symlink {
        let target = match read_link(root, &abs, &rel) {
            Ok(t) => t,
            Err(e) => return uncovered(f, format!("cannot read link: {e}")),
        };
        let bytes = target.as_slice();
        f.stat.id = writer.put_blob(bytes)?;
        f.stat.size = bytes.len() as u64;
        f.known = true;
        return Ok(Took::Read);
    }
    // A file over the size cap, or met after the time budget ran out, is still covered when
    // it can be cloned: a clone reads nothing.
    let mut only_clone = None;
    if f.stat.size > opts.max_file_size {
        let max = opts.max_file_size;
        only_clone = Some(format!("larger than capture.max_file_size ({max} bytes)"));
    } else if let (Some(budget), Some(until)) = (opts.time_budget, hash_until) {
        if Instant::now() > until {
            let secs = budget.as_secs();
            only_clone = Some(format!(
                "{BUDGET_REASON} ({secs}s) ran out before this file"
            ));
        }
    }
    if let Some(reason) = only_clone
        .as_ref()
        .filter(|_| f.stat.size < rewind_store::CLONE_FROM)
    {
        return uncovered(f, reason.clone());
    }
    let mut file = match open_for_capture(root, &abs, &rel) {
        Ok(file) => file,
        Err(e) => return uncovered(f, format!("cannot open: {e}")),
    };
    let cached_mtime = f.stat.mtime_ns;
    if let Some(id) = same_clone(ctx, &rel, f, &file) {
        f.stat.id = id;
        f.known = true;
        recheck(f, &file, f.stat.size, cached_mtime);
        return Ok(Took::SameClone);
    }
    let stored = match only_clone {
        Some(reason) => match writer.clone_file(&file) {
            Ok(Some((id, size))) => Ok((id, size, true)),
            Ok(None) => return uncovered(f, reason),
            Err(e) => Err(e),
        },
        None => writer.put_file(&mut file, f.stat.size),
    };
    let (id, size, cloned) = match stored {
        Ok(r) => r,
        Err(rewind_store::Error::Input(e)) => return uncovered(f, format!("cannot read: {e}")),
        Err(e) => return Err(e.into()),
    };
    f.stat.id = id;
    f.stat.size = size;
    f.known = true;
    if let Some(p) = opts.progress {
        p.files_hashed.fetch_add(1, Ordering::Relaxed);
        p.bytes_hashed.fetch_add(size, Ordering::Relaxed);
    }
    recheck(f, &file, size, cached_mtime);
    Ok(if cloned { Took::Cloned } else { Took::Read })
}

/// Changed while it was read: keep what was read, but make sure the next scan reads it again.
fn recheck(f: &mut Found, file: &File, size: u64, cached_mtime: i64) {
    if let Ok(m) = file.metadata() {
        let mtime = m.mtime() * 1_000_000_000 + m.mtime_nsec();
        if m.size() != size || mtime != cached_mtime {
            f.stat.mtime_ns = -1;
        }
    }
}

/// The id of the clone the previous capture made of `rel`, when `file` (found as `f`) still
/// holds exactly its bytes. A clone's id names a capture, not a content (see `rewind_store`'s
/// `clone` module), so cloning a file that was only touched, or rewritten with the same bytes,
/// would record a change that is none. Compared by extents: where the two still share their
/// blocks nothing is read. Any doubt (no clone, another size, an error) says no: the file is
/// then captured as usual. Under the workspace lock, so no sweep removes the clone meanwhile.
fn same_clone(ctx: &HashCtx, rel: &[u8], f: &Found, file: &File) -> Option<ObjectId> {
    // Every clone holds at least `CLONE_FROM` bytes: smaller files cost no lookup.
    let size = f.stat.size;
    if size < rewind_store::CLONE_FROM {
        return None;
    }
    let prev = ctx.old.get(rel)?;
    if prev.kind != EntryKind::File || prev.size != size {
        return None;
    }
    // (Opened, the clone file is checked to hold its record's size, which is `prev.size`.)
    let Ok(Some(rewind_store::CloneContent::File(clone, _))) = ctx.store.clone_content(&prev.id)
    else {
        return None;
    };
    let same = rewind_store::same_content(file, &clone).ok()?;
    same.then_some(prev.id)
}

/// A symlink's text (never followed), by descriptors when the path is too long for the kernel.
fn read_link(root: &Path, abs: &Path, rel: &[u8]) -> std::io::Result<Vec<u8>> {
    match std::fs::read_link(abs) {
        Ok(t) => Ok(t.into_os_string().into_vec()),
        Err(e) if e.raw_os_error() == Some(libc::ENAMETOOLONG) => {
            RootDir::open(root)?.read_link(rel)
        }
        Err(e) => Err(e),
    }
}
