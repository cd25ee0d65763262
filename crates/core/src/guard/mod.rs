//! The read-before-edit guard and the guarded file tools: read, check-write, write, edit and
//! apply-patch.
//!
//! When a session reads a file, what it saw is recorded in the op log's database as a
//! *fingerprint* (size, mtime, mode, and the BLAKE3 content id the store uses), keyed by session
//! and path, with the op-log position at the time. A guarded write of an existing file is allowed
//! only if the session has a fingerprint for it and the file's content still has that id: the
//! check is by content, so a `touch` is not a change and a rewrite within one mtime tick is. A
//! path that does not exist (new, or deleted since it was read) needs no read: there is nothing
//! to overwrite. When the content differs, the op log is asked who changed it: the newest
//! change to the path recorded after the read whose result is what is on disk now.
//!
//! A guarded write is one exact epoch: check → `begin_epoch` (paths = every path written or
//! removed, plus directories created or removed) → compare the preimages the epoch stored with
//! what was checked (a change in between refuses, and the epoch is aborted with nothing
//! written) → write (temp + rename, mode kept) → `end_epoch` → refresh the session's
//! fingerprints to what it wrote, so it can write again without re-reading.

mod plan;
mod rule;
mod stage;
mod tools;

use plan::*;
pub use stage::StagedWrite;

use std::io::Read;
use std::str::FromStr;

use rewind_store::{EntryKind, ObjectId};
use serde::Serialize;

use crate::fs::relpath;
use crate::fs::root::{Present, RootDir};
use crate::model::entry::{same_content, Entry};
use crate::model::guard::Fingerprint;
use crate::record::Settled;
use crate::Error;

/// Whether guarded writes fsync the file before renaming it into place.
const DURABLE: bool = true;

/// Lines to return from a read: 1-based, inclusive; `end: None` means to the end of the file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LineRange {
    /// The first line, 1 or more.
    pub start: usize,
    /// The last line, at least `start`.
    pub end: Option<usize>,
}

impl FromStr for LineRange {
    type Err = String;
    /// `10:20`, `10-20`, `10:` (to the end), `:20` (from the start), `10` (one line).
    fn from_str(s: &str) -> Result<LineRange, String> {
        let bad = || {
            format!("bad line range {s:?}: write START:END (1-based, inclusive), START: or :END")
        };
        let num = |t: &str| -> Result<Option<usize>, String> {
            let t = t.trim();
            if t.is_empty() {
                Ok(None)
            } else {
                t.parse::<usize>().map(Some).map_err(|_| bad())
            }
        };
        let (a, b) = match s.split_once([':', '-']) {
            Some((a, b)) => (num(a)?, num(b)?),
            None => {
                let n = num(s)?.ok_or_else(bad)?;
                (Some(n), Some(n))
            }
        };
        let start = a.unwrap_or(1);
        if start == 0 || b.is_some_and(|e| e < start) {
            return Err(bad());
        }
        Ok(LineRange { start, end: b })
    }
}

/// What a read returned and recorded.
#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub struct ReadResult {
    /// Workspace-relative path, `/`-separated raw bytes (a string in JSON).
    #[serde(serialize_with = "crate::base::serde_path")]
    #[schemars(with = "String")]
    pub path: Vec<u8>,
    /// The bytes returned: the whole file, or the lines of the range.
    #[serde(skip)]
    pub content: Vec<u8>,
    /// Size of the whole file.
    pub size: u64,
    /// Number of lines in the whole file.
    pub lines: usize,
    /// The lines returned (1-based, inclusive) when a range was asked for; `(start, start - 1)`
    /// when the range starts past the end.
    pub range: Option<(usize, usize)>,
    /// Less than the whole file was returned (the fingerprint is still of the whole file).
    pub partial: bool,
    /// What the session is now recorded to have seen: later writes are checked against it.
    pub fingerprint: Fingerprint,
}

/// The tool call a guarded write is recorded as (the epoch's `tool` and `tool_call`).
#[derive(Clone, Debug, Default)]
pub struct ToolCall {
    /// The tool's name (`write`, `edit`, `apply-patch`, or the agent's own).
    pub name: String,
    /// The agent's id for this call, if it has one.
    pub id: Option<String>,
}

impl ToolCall {
    /// A call of tool `name` without an id.
    pub fn named(name: &str) -> ToolCall {
        ToolCall {
            name: name.to_string(),
            id: None,
        }
    }
}

/// A write the guard allows.
#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub struct WriteCheck {
    /// Workspace-relative path, `/`-separated raw bytes (a string in JSON).
    #[serde(serialize_with = "crate::base::serde_path")]
    #[schemars(with = "String")]
    pub path: Vec<u8>,
    /// The path does not exist: no read needed.
    pub new_file: bool,
    /// The session's fingerprint, which still matches the file.
    pub fingerprint: Option<Fingerprint>,
}

/// What a guarded edit did.
#[derive(Clone, Debug)]
pub struct Edited {
    /// The exact epoch the edit was recorded as, with its change.
    pub settled: Settled,
    /// How many occurrences of the old text were replaced.
    pub replacements: usize,
}

/// How to apply a patch.
#[derive(Clone, Debug, Default)]
pub struct PatchOptions {
    /// Leading path components to strip (`-p`); `None`: git's rule (see [`crate::patch::parse`]).
    pub strip: Option<usize>,
    /// Check everything (parse, guard, every hunk) and write nothing.
    pub dry_run: bool,
}

/// One file of an applied (or checked) patch.
#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub struct PatchedFile {
    /// modify, add, delete, rename or copy.
    pub op: &'static str,
    /// The file the patch leaves (for a delete, the one it removes); workspace-relative.
    #[serde(serialize_with = "crate::base::serde_path")]
    #[schemars(with = "String")]
    pub path: Vec<u8>,
    /// The source of a rename or copy.
    #[serde(serialize_with = "serde_opt_path")]
    #[schemars(with = "Option<String>")]
    pub from: Option<Vec<u8>>,
    /// Hunks applied to it, over every section of the patch that names it.
    pub hunks: usize,
}

fn serde_opt_path<S: serde::Serializer>(p: &Option<Vec<u8>>, s: S) -> Result<S::Ok, S::Error> {
    match p {
        Some(p) => s.serialize_some(&String::from_utf8_lossy(p)),
        None => s.serialize_none(),
    }
}

/// Adds one section of a patch to the summary, which lists each file once: a patch may change
/// a file in several sections (concatenated diffs, a series), and the summary says what they
/// come to together, with their hunks added up.
fn summarize(summary: &mut Vec<PatchedFile>, then: PatchedFile) {
    let Some(i) = summary.iter().position(|s| s.path == then.path) else {
        summary.push(then);
        return;
    };
    let first = &mut summary[i];
    first.hunks += then.hunks;
    match (first.op, then.op) {
        // Changing a file the patch added, renamed or copied there keeps what brought it.
        (_, "modify") => {}
        // Added, then deleted: the patch leaves nothing of it.
        ("add", "delete") => {
            summary.remove(i);
        }
        // Deleted, then added again: the file is replaced.
        ("delete", "add") => first.op = "modify",
        _ => {
            first.op = then.op;
            first.from = then.from;
        }
    }
}

/// What `apply_patch` did: the files, and the epoch (none for a dry run).
#[derive(Clone, Debug)]
pub struct Patched {
    /// Each file the patch touches, once, in the patch's order.
    pub files: Vec<PatchedFile>,
    /// The exact epoch it was recorded as; `None` for a dry run.
    pub settled: Option<Settled>,
}

/// A path's state on disk as the guarded tools see it.
#[derive(Clone, Debug)]
enum Disk {
    Absent,
    File {
        mode: u32,
        size: u64,
        id: ObjectId,
        /// Loaded when the tool needs the bytes (edit, patch).
        content: Option<Vec<u8>>,
    },
    /// A directory, symlink or special file: the guarded tools write regular files only.
    NotFile(&'static str),
}

impl Disk {
    fn entry(&self) -> Option<Entry> {
        match self {
            Disk::Absent => None,
            Disk::File { mode, size, id, .. } => Some(Entry {
                kind: EntryKind::File,
                mode: *mode,
                size: *size,
                id: *id,
            }),
            Disk::NotFile(_) => Some(Entry::uncovered(0)),
        }
    }
}

/// A guarded tool's error on `rel`: it could not do what was asked; nothing was written.
fn tool_err(rel: &[u8], message: impl Into<String>) -> Error {
    Error::Tool {
        path: relpath::display(rel),
        message: message.into(),
    }
}

fn content_id(bytes: &[u8]) -> Result<ObjectId, Error> {
    Ok(rewind_store::content_id(&mut &bytes[..])?.0)
}

fn disk_state(root: &RootDir, rel: &[u8], load: bool) -> Result<Disk, Error> {
    Ok(
        match root.lstat(rel).map_err(Error::io_rel("inspecting", rel))? {
            Present::Absent => Disk::Absent,
            Present::Dir { .. } => Disk::NotFile("a directory"),
            Present::Symlink => Disk::NotFile("a symlink"),
            Present::Other => Disk::NotFile("not a regular file"),
            Present::File { mode } => {
                let mut f = root.open_read(rel).map_err(Error::io_rel("opening", rel))?;
                if load {
                    let mut buf = Vec::new();
                    f.read_to_end(&mut buf)
                        .map_err(Error::io_rel("reading", rel))?;
                    Disk::File {
                        mode,
                        size: buf.len() as u64,
                        id: content_id(&buf)?,
                        content: Some(buf),
                    }
                } else {
                    let (id, size) = rewind_store::content_id(&mut f)?;
                    Disk::File {
                        mode,
                        size,
                        id,
                        content: None,
                    }
                }
            }
        },
    )
}

/// The process umask (read from /proc, which does not change it), default 022.
fn umask() -> u32 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("Umask:"))
                .and_then(|v| u32::from_str_radix(v.trim(), 8).ok())
        })
        .unwrap_or(0o022)
}

fn new_file_mode(exec: bool) -> u32 {
    (if exec { 0o777 } else { 0o666 }) & !umask()
}

/// An existing file's mode after a git mode line: executable bits follow the read bits.
fn changed_mode(cur: u32, git: Option<u32>) -> u32 {
    match git {
        None => cur,
        Some(m) if m & 0o111 != 0 => cur | ((cur & 0o444) >> 2),
        Some(_) => cur & !0o111,
    }
}

/// Paths the guarded tools refuse to write: not plain relative paths, or inside `.git`.
fn check_writable(rel: &[u8]) -> Result<(), Error> {
    relpath::check(rel)?;
    if rel
        .split(|b| *b == b'/')
        .any(|c| crate::capture::scan::NEVER_CAPTURED.contains(&c))
    {
        return Err(tool_err(
            rel,
            "is inside a .git directory; rewind never writes there",
        ));
    }
    Ok(())
}

fn ancestors(rel: &[u8]) -> Vec<&[u8]> {
    rel.iter()
        .enumerate()
        .filter(|(_, b)| **b == b'/')
        .map(|(i, _)| &rel[..i])
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_ranges() {
        let range = |s: &str| s.parse::<LineRange>().map(|r| (r.start, r.end));
        assert_eq!(range("3:5"), Ok((3, Some(5))));
        assert_eq!(range("3-"), Ok((3, None)));
        assert_eq!(range(":4"), Ok((1, Some(4))));
        assert_eq!(range("7"), Ok((7, Some(7))));
        assert!("0:3".parse::<LineRange>().is_err());
        assert!("5:3".parse::<LineRange>().is_err());
        assert!("x".parse::<LineRange>().is_err());
    }

    #[test]
    fn modes() {
        assert_eq!(changed_mode(0o640, Some(0o100755)), 0o750);
        assert_eq!(changed_mode(0o755, Some(0o100644)), 0o644);
        assert_eq!(changed_mode(0o600, None), 0o600);
    }
}
