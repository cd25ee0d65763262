//! The identity of a workspace's root directory and its record, `workspaces/<id>/workspace.json`.
//!
//! A root is known by its path, its device and inode, its birth time where the file system
//! records one, and the `user.rewind.id` extended attribute Rewind sets on the root directory
//! where the file system keeps user attributes (the value is the workspace id). A directory
//! moved or renamed on one file system keeps its inode and birth time; one moved across file
//! systems keeps the attribute (`mv` copies it). Nothing is ever written *inside* the root: the
//! attribute is metadata of the root directory itself.
//!
//! Identity alone does not decide that a directory is a moved workspace (inode numbers are
//! reused, `cp -a` copies the attribute): [`looks_like`] also asks that the tree still looks
//! like the one the workspace last captured.

use std::ffi::{CStr, CString};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::UNIX_EPOCH;

use rewind_store::EntryKind;
use serde::{Deserialize, Serialize};

use crate::capture::state::State;
use crate::fs::relpath;
use crate::Error;

/// The extended attribute naming the workspace a root directory belongs to.
pub(crate) const MARK: &CStr = c"user.rewind.id";

/// How many stat-cache entries [`looks_like`] compares at most.
const SAMPLE: usize = 256;

/// A workspace's registration record (`workspace.json`). Fields added later are optional, so
/// a record written by an older version reads (and is completed on its next open).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct Record {
    pub id: String,
    /// The canonical root, as text (lossy); `root_hex` holds its exact bytes.
    pub root: String,
    pub root_hex: String,
    pub dev: u64,
    pub ino: u64,
    /// Birth time of the root directory where the file system records it: inode numbers are
    /// reused at once on ext4, so dev + inode alone miss a directory deleted and re-created.
    #[serde(default)]
    pub btime_ns: Option<i64>,
    pub created_ns: i64,
    /// Whether the root carries the `user.rewind.id` attribute: `true` set, `false` the file
    /// system refused it, absent not tried yet (a record from before attributes were set).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mark: Option<bool>,
    /// Earlier roots this workspace was re-linked from, oldest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub moved_from: Vec<Moved>,
}

/// One earlier root of a workspace.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct Moved {
    pub root: String,
    pub root_hex: String,
    pub moved_ns: i64,
}

pub(crate) fn birth_ns(meta: &std::fs::Metadata) -> Option<i64> {
    let t = meta.created().ok()?;
    Some(t.duration_since(UNIX_EPOCH).ok()?.as_nanos() as i64)
}

fn path_from_hex(hex_text: &str, fallback: &str) -> PathBuf {
    match hex::decode(hex_text) {
        Ok(b) => PathBuf::from(std::ffi::OsStr::from_bytes(&b)),
        Err(_) => PathBuf::from(fallback),
    }
}

impl Record {
    /// A new record of `root` (canonical) with metadata `meta`.
    pub fn new(id: &str, root: &Path, meta: &std::fs::Metadata) -> Record {
        Record {
            id: id.to_string(),
            root: root.display().to_string(),
            root_hex: hex::encode(root.as_os_str().as_bytes()),
            dev: meta.dev(),
            ino: meta.ino(),
            btime_ns: birth_ns(meta),
            created_ns: crate::base::now_ns(),
            mark: None,
            moved_from: Vec::new(),
        }
    }

    /// The record in state directory `dir`, if it is there and parses.
    pub fn load(dir: &Path) -> Option<Record> {
        let b = std::fs::read(dir.join("workspace.json")).ok()?;
        serde_json::from_slice(&b).ok()
    }

    /// Writes the record into `dir` atomically (temporary file, fsync, rename, directory
    /// fsync): a reader sees the old record or the new one, never a mix.
    pub fn save(&self, dir: &Path) -> Result<(), Error> {
        crate::fs::write_json_atomic(dir, "workspace.json", self)
    }

    /// The canonical root (exact bytes).
    pub fn root_path(&self) -> PathBuf {
        path_from_hex(&self.root_hex, &self.root)
    }

    /// Whether `meta` is the directory this record registered: same device and inode, and the
    /// same birth time where both are known.
    pub fn same_dir(&self, meta: &std::fs::Metadata) -> bool {
        self.dev == meta.dev() && self.ino == meta.ino() && self.btime_ns == birth_ns(meta)
    }

    /// Whether directory `dir` (metadata `meta`, attribute `mark`) carries this record's
    /// identity: its attribute names this workspace, or it is the same directory. Where a
    /// birth time is missing on either side, device and inode decide.
    pub fn claims(&self, meta: &std::fs::Metadata, mark: Option<&str>) -> bool {
        if mark == Some(self.id.as_str()) {
            return true;
        }
        let btime_ok = match (self.btime_ns, birth_ns(meta)) {
            (Some(a), Some(b)) => a == b,
            _ => true,
        };
        // A directory marked as another workspace is that one's.
        mark.is_none() && self.dev == meta.dev() && self.ino == meta.ino() && btime_ok
    }

    /// Points the record at `root` (canonical, metadata `meta`), remembering the old root.
    pub fn retarget(&mut self, root: &Path, meta: &std::fs::Metadata) {
        self.moved_from.push(Moved {
            root: std::mem::take(&mut self.root),
            root_hex: std::mem::take(&mut self.root_hex),
            moved_ns: crate::base::now_ns(),
        });
        self.root = root.display().to_string();
        self.root_hex = hex::encode(root.as_os_str().as_bytes());
        self.dev = meta.dev();
        self.ino = meta.ino();
        self.btime_ns = birth_ns(meta);
        self.mark = None;
    }

    /// Every root this workspace had before its current one.
    pub fn earlier_roots(&self) -> Vec<PathBuf> {
        self.moved_from
            .iter()
            .map(|m| path_from_hex(&m.root_hex, &m.root))
            .collect()
    }
}

/// Where the current root of a record stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum RootState {
    /// The registered directory is there.
    Present,
    /// Nothing (or no directory) is at the root's path any more.
    Missing,
    /// A different directory is at the root's path (deleted and re-created, or moved away and
    /// another put in its place).
    Replaced,
}

impl RootState {
    /// Whether the workspace's directory is gone from its registered path.
    pub fn is_gone(self) -> bool {
        self != RootState::Present
    }
}

/// Where record `r`'s root stands now.
pub(crate) fn root_state(r: &Record) -> RootState {
    let root = r.root_path();
    match std::fs::metadata(&root) {
        // The same directory, not one carrying its mark: a copy made with `cp -a` and put
        // in its place is another directory (and opening it is refused as replaced).
        Ok(m) if m.is_dir() && r.same_dir(&m) => RootState::Present,
        Ok(m) if m.is_dir() => RootState::Replaced,
        _ => RootState::Missing,
    }
}

fn cpath(p: &Path) -> Option<CString> {
    CString::new(p.as_os_str().as_bytes()).ok()
}

/// The workspace id in directory `dir`'s `user.rewind.id` attribute, if it has one.
pub(crate) fn read_mark(dir: &Path) -> Option<String> {
    let c = cpath(dir)?;
    let mut buf = [0u8; 64];
    // SAFETY: `c` is a NUL-terminated path, `buf` a writable buffer of the length given.
    let n = unsafe {
        libc::getxattr(
            c.as_ptr(),
            MARK.as_ptr(),
            buf.as_mut_ptr().cast(),
            buf.len(),
        )
    };
    if n <= 0 {
        return None;
    }
    let v = std::str::from_utf8(&buf[..n as usize]).ok()?;
    (v.len() == 32 && v.bytes().all(|b| b.is_ascii_hexdigit())).then(|| v.to_string())
}

/// Sets directory `dir`'s `user.rewind.id` attribute to `id`; false where the file system (or
/// the directory's owner) does not allow it.
pub(crate) fn set_mark(dir: &Path, id: &str) -> bool {
    let Some(c) = cpath(dir) else { return false };
    // SAFETY: `c` is a NUL-terminated path; the value is `id`'s bytes with their length.
    let r = unsafe { libc::setxattr(c.as_ptr(), MARK.as_ptr(), id.as_ptr().cast(), id.len(), 0) };
    r == 0
}

/// Removes directory `dir`'s attribute if it names workspace `id`.
pub(crate) fn clear_mark(dir: &Path, id: &str) {
    if read_mark(dir).as_deref() != Some(id) {
        return;
    }
    if let Some(c) = cpath(dir) {
        // SAFETY: `c` is a NUL-terminated path.
        unsafe {
            libc::removexattr(c.as_ptr(), MARK.as_ptr());
        }
    }
}

/// How much of a workspace's last captured tree is found under a directory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Likeness {
    /// Stat-cache entries compared.
    pub sampled: usize,
    /// Of them, found under the directory with the same kind, size and modification time.
    pub matched: usize,
}

impl Likeness {
    /// More than half matched (or there was nothing to compare: a workspace never captured).
    pub fn looks_alike(&self) -> bool {
        self.sampled == 0 || self.matched * 2 > self.sampled
    }
}

/// Compares up to [`SAMPLE`] entries of the stat cache in state directory `state_dir`, spread
/// evenly over it, with what `dir` holds now. Reads only metadata (`lstat`).
pub(crate) fn looks_like(state_dir: &Path, dir: &Path) -> Likeness {
    let state = State::load(&state_dir.join("state.bin"));
    let mut all: Vec<(&Vec<u8>, &crate::capture::state::StatEntry)> = Vec::new();
    let mut dirs: Vec<_> = state.dirs.iter().collect();
    dirs.sort_by(|a, b| a.0.cmp(b.0));
    for (d, entries) in dirs {
        all.extend(entries.iter().map(|e| (d, e)));
    }
    let step = all.len().div_ceil(SAMPLE).max(1);
    let mut out = Likeness {
        sampled: 0,
        matched: 0,
    };
    for (d, e) in all.iter().step_by(step) {
        out.sampled += 1;
        let rel = relpath::join(d, &e.name);
        let Ok(m) = std::fs::symlink_metadata(relpath::to_path(dir, &rel)) else {
            continue;
        };
        let ft = m.file_type();
        let same = match e.kind {
            EntryKind::Dir => ft.is_dir(),
            EntryKind::Symlink => ft.is_symlink() && m.len() == e.size,
            EntryKind::File => ft.is_file() && m.len() == e.size && mtime_ns(&m) == e.mtime_ns,
            EntryKind::Uncovered => ft.is_file(),
        };
        out.matched += usize::from(same);
    }
    out
}

fn mtime_ns(m: &std::fs::Metadata) -> i64 {
    m.mtime() * 1_000_000_000 + m.mtime_nsec()
}
