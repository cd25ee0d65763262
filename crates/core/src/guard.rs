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

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::io::Read;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::Arc;

use rewind_store::{EntryKind, ObjectId};
use rusqlite::{params, OptionalExtension};
use serde::Serialize;

use crate::edit::{self, EditSpec};
use crate::entry::Entry;
use crate::fsops::{Present, RootDir, StagedFile};
use crate::oplog::{self, EpochKind, EpochRow, EpochState};
use crate::patch::{self, PatchOp};
use crate::record::{owner_alive, EpochSpec, Settled};
use crate::workspace::{now_ns, Workspace};
use crate::{relpath, Error};

/// The `fingerprints` table: what each session last saw of each file it read or wrote.
pub(crate) const MIGRATION: &str = "
CREATE TABLE fingerprints (
    session TEXT NOT NULL, path BLOB NOT NULL,
    size INTEGER NOT NULL, mtime_ns INTEGER NOT NULL, mode INTEGER NOT NULL,
    content BLOB NOT NULL, pos INTEGER NOT NULL, partial INTEGER NOT NULL DEFAULT 0,
    read_ns INTEGER NOT NULL,
    PRIMARY KEY (session, path));
";

/// Whether guarded writes fsync the file before renaming it into place.
const DURABLE: bool = true;

/// A guarded write's new content, staged before the write is even checked: written into an
/// unnamed file in the target's directory (see [`RootDir::stage_file`]) and fsynced on a thread
/// of its own. The command line's `rewind write` and `rewind edit` start one before they open
/// the workspace, so the flush runs while the workspace opens, the guard checks and the epoch's
/// opening commit is made durable, instead of after them. [`Workspace::write_staged`] and
/// [`Workspace::edit_staged`] use it when the workspace, the path, the file's mode and the
/// content are still what the write needs, and otherwise write in full; an unused staged file
/// has no name and leaves nothing behind.
pub struct StagedWrite {
    root: PathBuf,
    rel: Vec<u8>,
    /// The new content, when the caller gave it (a whole-file write); an edit's is computed by
    /// the staging thread.
    content: Option<Arc<Vec<u8>>>,
    staging: Option<std::thread::JoinHandle<Option<Staged>>>,
    /// What the staging thread made, once [`StagedWrite::wait`] joined it.
    ready: Option<Staged>,
}

/// What a staging thread made: the file, and the mode and content it was made with.
struct Staged {
    mode: u32,
    content: Arc<Vec<u8>>,
    file: StagedFile,
}

impl StagedWrite {
    /// Starts staging `content` as the new content of `rel` (workspace-relative) in the
    /// workspace rooted at `root` (as [`Workspace::root`] gives it). Never fails: what cannot
    /// be staged is written in full by the write, which reports any error.
    pub fn start(root: &Path, rel: Vec<u8>, content: Vec<u8>) -> StagedWrite {
        let content = Arc::new(content);
        let given = content.clone();
        StagedWrite::spawn(root, rel, Some(content), move |dir, rel| {
            // The mode the write will give it: the file's own, or a new file's.
            let mode = match dir.lstat(rel).ok()? {
                Present::File { mode } => mode,
                Present::Absent => new_file_mode(false),
                _ => return None,
            };
            Some((mode, given))
        })
    }

    /// Starts staging the result of the exact string replacement `spec` in the existing file
    /// `rel`, read and edited on the staging thread (see [`StagedWrite::start`]).
    pub fn start_edit(root: &Path, rel: Vec<u8>, spec: EditSpec) -> StagedWrite {
        StagedWrite::spawn(root, rel, None, move |dir, rel| {
            let Present::File { mode } = dir.lstat(rel).ok()? else {
                return None;
            };
            let mut current = Vec::new();
            dir.open_read(rel).ok()?.read_to_end(&mut current).ok()?;
            let (new, _) = edit::apply(&current, &spec).ok()?;
            Some((mode, Arc::new(new)))
        })
    }

    /// Stages, on a thread, the mode and content `make` gives (`None`: nothing to stage).
    fn spawn(
        root: &Path,
        rel: Vec<u8>,
        content: Option<Arc<Vec<u8>>>,
        make: impl FnOnce(&RootDir, &[u8]) -> Option<(u32, Arc<Vec<u8>>)> + Send + 'static,
    ) -> StagedWrite {
        let staging = (DURABLE && check_writable(&rel).is_ok())
            .then(|| {
                let (root, rel) = (root.to_path_buf(), rel.clone());
                std::thread::Builder::new()
                    .spawn(move || {
                        let dir = RootDir::open(&root).ok()?;
                        let (mode, content) = make(&dir, &rel)?;
                        let fill =
                            &mut |f: &mut std::fs::File| std::io::Write::write_all(f, &content);
                        let file = dir.stage_file(&rel, mode, fill).ok()??;
                        Some(Staged {
                            mode,
                            content,
                            file,
                        })
                    })
                    .ok()
            })
            .flatten();
        StagedWrite {
            root: root.to_path_buf(),
            rel,
            content,
            staging,
            ready: None,
        }
    }

    /// Waits until the staging is over; whether it staged a file. The write waits for it
    /// anyway: this lets a caller (a test) order what it does after the staging, and know
    /// that a file was staged rather than hope a pause was long enough.
    pub fn wait(&mut self) -> bool {
        if let Some(h) = self.staging.take() {
            self.ready = h.join().ok().flatten();
        }
        self.ready.is_some()
    }

    /// The workspace-relative path it writes.
    pub fn path(&self) -> &[u8] {
        &self.rel
    }

    /// The staged file, once its fsync is done, if it holds `content` with mode `mode`.
    fn finish(mut self, mode: u32, content: &[u8]) -> Option<StagedFile> {
        self.wait();
        self.ready
            .filter(|s| s.mode == mode && s.content.as_slice() == content)
            .map(|s| s.file)
    }

    /// Refuses a `StagedWrite` started for another workspace root (its path is relative to
    /// that root).
    fn check_root(&self, ws: &Workspace) -> Result<(), Error> {
        if self.root != ws.root() {
            return Err(Error::Workspace(format!(
                "a write was prepared for the workspace {}, not this one ({})",
                self.root.display(),
                ws.root().display()
            )));
        }
        Ok(())
    }
}

/// What a session saw of a file when it last read (or wrote) it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Fingerprint {
    #[serde(serialize_with = "crate::serde_path")]
    pub path: Vec<u8>,
    pub size: u64,
    /// Recorded for diagnosis only: the guard compares content, never timestamps.
    pub mtime_ns: i64,
    pub mode: u32,
    /// BLAKE3 content id (the store's id for these bytes).
    #[serde(serialize_with = "crate::serde_id")]
    pub content: ObjectId,
    /// The op-log position when it was read: changes recorded after it happened after the read.
    pub pos: i64,
    /// Only a line range was returned to the session.
    pub partial: bool,
    pub read_ns: i64,
}

/// Lines to return from a read: 1-based, inclusive; `end: None` means to the end of the file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LineRange {
    pub start: usize,
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
#[derive(Clone, Debug, Serialize)]
pub struct ReadResult {
    #[serde(serialize_with = "crate::serde_path")]
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
    pub fingerprint: Fingerprint,
}

/// The tool call a guarded write is recorded as (the epoch's `tool` and `tool_call`).
#[derive(Clone, Debug, Default)]
pub struct ToolCall {
    pub name: String,
    pub id: Option<String>,
}

impl ToolCall {
    pub fn named(name: &str) -> ToolCall {
        ToolCall {
            name: name.to_string(),
            id: None,
        }
    }
}

/// A write the guard allows.
#[derive(Clone, Debug, Serialize)]
pub struct WriteCheck {
    #[serde(serialize_with = "crate::serde_path")]
    pub path: Vec<u8>,
    /// The path does not exist: no read needed.
    pub new_file: bool,
    /// The session's fingerprint, which still matches the file.
    pub fingerprint: Option<Fingerprint>,
}

/// Why the guard refused a write.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RefusalKind {
    /// The session never read the file.
    NeverRead,
    /// The file's content is not what the session last saw.
    Changed,
}

/// Who changed a file since the session read it, as far as the op log knows.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "type")]
pub enum ChangedBy {
    /// Found on disk, made by no session (an editor, another program).
    External { epoch: String },
    /// A session's epoch (possibly this session's, e.g. a shell command it ran).
    Epoch {
        session: String,
        epoch: String,
        kind: EpochKind,
        tool: Option<String>,
        this_session: bool,
        /// Still open (its tool call may still be writing).
        open: bool,
    },
    /// The op log has no record of it yet (made outside any epoch, not captured since).
    Unrecorded,
}

impl fmt::Display for ChangedBy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ChangedBy::External { epoch } => write!(
                f,
                "an external edit (not made by any session: an editor or another program; external epoch {epoch})"
            ),
            ChangedBy::Epoch {
                session,
                epoch,
                kind,
                tool,
                this_session,
                open,
            } => {
                let who = if *this_session {
                    "this session's".to_string()
                } else {
                    format!("session {session}'s")
                };
                let what = match kind {
                    EpochKind::Opaque => "shell command",
                    EpochKind::Restore => "restore or undo",
                    _ => "tool call",
                };
                write!(f, "{who} {what} ({} epoch {epoch}", kind.as_str())?;
                if let Some(t) = tool {
                    write!(f, ", tool {t}")?;
                }
                f.write_str(")")?;
                if *open {
                    f.write_str(", still running")?;
                }
                Ok(())
            }
            ChangedBy::Unrecorded => f.write_str(
                "changed on disk (not recorded yet), by something outside any epoch (an editor or another program)",
            ),
        }
    }
}

/// One refused path.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct GuardRefusal {
    #[serde(serialize_with = "crate::serde_path")]
    pub path: Vec<u8>,
    pub session: String,
    pub kind: RefusalKind,
    /// For `Changed`: who changed it, if the op log knows.
    pub changed_by: Option<ChangedBy>,
    /// For `Changed`: what differs (`size 10 -> 12 bytes`, …).
    pub detail: Option<String>,
    /// The session only read part of the file (for `Changed`).
    pub partial: bool,
}

impl fmt::Display for GuardRefusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let p = relpath::display(&self.path);
        match self.kind {
            RefusalKind::NeverRead => write!(
                f,
                "{p}: session {} has never read it; read it first (`rewind read {p}`)",
                self.session
            ),
            RefusalKind::Changed => {
                write!(f, "{p}: changed since you read it")?;
                if let Some(d) = &self.detail {
                    write!(f, " ({d})")?;
                }
                if let Some(by) = &self.changed_by {
                    match by {
                        ChangedBy::Unrecorded => write!(f, ": {by}")?,
                        _ => write!(f, ", by {by}")?,
                    }
                }
                write!(f, "; read it again (`rewind read {p}`) and redo the change")
            }
        }
    }
}

pub(crate) fn describe_refusals(r: &[GuardRefusal]) -> String {
    r.iter()
        .map(|r| r.to_string())
        .collect::<Vec<_>>()
        .join("; ")
}

/// What a guarded edit did.
#[derive(Clone, Debug)]
pub struct Edited {
    pub settled: Settled,
    pub replacements: usize,
}

/// How to apply a patch.
#[derive(Clone, Debug, Default)]
pub struct PatchOptions {
    /// Leading path components to strip (`-p`); `None`: git's rule (see [`patch::parse`]).
    pub strip: Option<usize>,
    /// Check everything (parse, guard, every hunk) and write nothing.
    pub dry_run: bool,
}

/// One file of an applied (or checked) patch.
#[derive(Clone, Debug, Serialize)]
pub struct PatchedFile {
    /// modify, add, delete, rename or copy.
    pub op: &'static str,
    #[serde(serialize_with = "crate::serde_path")]
    pub path: Vec<u8>,
    /// The source of a rename or copy.
    #[serde(serialize_with = "serde_opt_path")]
    pub from: Option<Vec<u8>>,
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
    pub files: Vec<PatchedFile>,
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
            Disk::NotFile(_) => Some(Entry {
                kind: EntryKind::Uncovered,
                mode: 0,
                size: 0,
                id: ObjectId::ZERO,
            }),
        }
    }
}

/// Same content and kind (modes aside: the guard is about content).
fn same_content(a: &Option<Entry>, b: &Option<Entry>) -> bool {
    match (a, b) {
        (None, None) => true,
        (Some(x), Some(y)) => x.kind == y.kind && x.id == y.id && x.size == y.size,
        _ => false,
    }
}

fn tool_err(rel: &[u8], message: impl Into<String>) -> Error {
    Error::Tool {
        path: relpath::display(rel),
        message: message.into(),
    }
}

fn io_err<'a>(op: &'static str, rel: &'a [u8]) -> impl FnOnce(std::io::Error) -> Error + 'a {
    move |e| Error::Io {
        op,
        path: relpath::display(rel).into(),
        source: e,
    }
}

fn content_id(bytes: &[u8]) -> Result<ObjectId, Error> {
    Ok(rewind_store::content_id(&mut &bytes[..])?.0)
}

fn disk_state(root: &RootDir, rel: &[u8], load: bool) -> Result<Disk, Error> {
    Ok(match root.lstat(rel).map_err(io_err("inspecting", rel))? {
        Present::Absent => Disk::Absent,
        Present::Dir { .. } => Disk::NotFile("a directory"),
        Present::Symlink => Disk::NotFile("a symlink"),
        Present::Other => Disk::NotFile("not a regular file"),
        Present::File { mode } => {
            let mut f = root.open_read(rel).map_err(io_err("opening", rel))?;
            if load {
                let mut buf = Vec::new();
                f.read_to_end(&mut buf).map_err(io_err("reading", rel))?;
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
    })
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
        .any(|c| crate::scan::NEVER_CAPTURED.contains(&c))
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

/// One path's planned final state (`None`: removed).
struct Op {
    path: Vec<u8>,
    before: Disk,
    after: Option<(u32, Vec<u8>)>,
}

/// Everything a guarded write will do, computed before anything is written.
struct Plan {
    ops: Vec<Op>,
    /// Directories to create, parents first.
    mkdirs: Vec<Vec<u8>>,
    /// Directories to remove if they end up empty, deepest first.
    rmdirs: Vec<Vec<u8>>,
}

impl Plan {
    fn new(root: &RootDir, ops: Vec<Op>) -> Result<Plan, Error> {
        let written: BTreeSet<&[u8]> = ops
            .iter()
            .filter(|o| o.after.is_some())
            .map(|o| o.path.as_slice())
            .collect();
        let removed: BTreeSet<&[u8]> = ops
            .iter()
            .filter(|o| o.after.is_none())
            .map(|o| o.path.as_slice())
            .collect();
        let mut mkdirs: Vec<Vec<u8>> = Vec::new();
        let mut needed: BTreeSet<Vec<u8>> = BTreeSet::new();
        for w in &written {
            for a in ancestors(w) {
                needed.insert(a.to_vec());
                if written.contains(a) {
                    return Err(tool_err(
                        w,
                        format!(
                            "cannot be written: {} would be both a file and a directory",
                            relpath::display(a)
                        ),
                    ));
                }
                if mkdirs.iter().any(|m| m == a) {
                    continue;
                }
                match root.lstat(a).map_err(io_err("inspecting", a))? {
                    Present::Dir { .. } => {}
                    Present::Absent => mkdirs.push(a.to_vec()),
                    Present::File { .. } if removed.contains(a) => mkdirs.push(a.to_vec()),
                    Present::Symlink => {
                        return Err(tool_err(
                            w,
                            format!(
                                "cannot be written: {} is a symlink, and rewind never writes through symlinks",
                                relpath::display(a)
                            ),
                        ))
                    }
                    _ => {
                        return Err(tool_err(
                            w,
                            format!(
                                "cannot be written: {} is not a directory",
                                relpath::display(a)
                            ),
                        ))
                    }
                }
            }
        }
        mkdirs.sort_by_key(|m| m.iter().filter(|b| **b == b'/').count());
        let mut rmdirs: Vec<Vec<u8>> = Vec::new();
        for r in &removed {
            for a in ancestors(r) {
                if !needed.contains(a)
                    && !rmdirs.iter().any(|x| x == a)
                    && matches!(root.lstat(a), Ok(Present::Dir { .. }))
                {
                    rmdirs.push(a.to_vec());
                }
            }
        }
        rmdirs.sort_by_key(|m| std::cmp::Reverse(m.iter().filter(|b| **b == b'/').count()));
        Ok(Plan {
            ops,
            mkdirs,
            rmdirs,
        })
    }

    fn epoch_paths(&self) -> Vec<Vec<u8>> {
        let mut all: BTreeSet<Vec<u8>> = self.ops.iter().map(|o| o.path.clone()).collect();
        all.extend(self.mkdirs.iter().cloned());
        all.extend(self.rmdirs.iter().cloned());
        all.into_iter().collect()
    }
}

/// What was done, for rolling back after an I/O error part-way.
enum Done {
    Wrote(usize),
    Removed(usize),
    MadeDir(Vec<u8>),
    RemovedDir(Vec<u8>, u32),
}

/// Applies the plan: removals, new directories, writes, then directories left empty. Returns
/// the metadata of each written file (by op index).
fn apply_plan(
    root: &RootDir,
    plan: &Plan,
    staged: &mut BTreeMap<usize, StagedFile>,
    done: &mut Vec<Done>,
) -> Result<BTreeMap<usize, std::fs::Metadata>, Error> {
    for (i, op) in plan.ops.iter().enumerate() {
        if op.after.is_none() {
            crate::failpoint::hit("guard-before-remove");
            root.remove_file(&op.path)
                .map_err(io_err("removing", &op.path))?;
            done.push(Done::Removed(i));
            // Counted (`guard-after-file:N`): a multi-file write stopped after its N-th file.
            crate::failpoint::hit("guard-after-file");
        }
    }
    let dir_mode = if plan.mkdirs.is_empty() {
        0
    } else {
        0o777 & !umask()
    };
    for d in &plan.mkdirs {
        root.make_dir(d).map_err(io_err("creating", d))?;
        done.push(Done::MadeDir(d.clone()));
        root.chmod_dir(d, dir_mode)
            .map_err(io_err("setting the mode of", d))?;
    }
    let mut metas = BTreeMap::new();
    for (i, op) in plan.ops.iter().enumerate() {
        if let Some((mode, content)) = &op.after {
            crate::failpoint::hit("guard-before-write");
            let meta = root
                .write_file_staged(&op.path, staged.remove(&i), *mode, DURABLE, &mut |f| {
                    std::io::Write::write_all(f, content)
                })
                .map_err(io_err("writing", &op.path))?;
            done.push(Done::Wrote(i));
            metas.insert(i, meta);
            crate::failpoint::hit("guard-after-file");
        }
    }
    for d in &plan.rmdirs {
        let mode = match root.lstat(d) {
            Ok(Present::Dir { mode }) => mode,
            _ => continue,
        };
        if root.remove_dir(d).map_err(io_err("removing", d))? {
            done.push(Done::RemovedDir(d.clone(), mode));
        }
    }
    Ok(metas)
}

/// The plan's new file contents, staged (see [`RootDir::stage_file`]) where the file system
/// allows it, by op index; `early`'s staged file is used for its path if it holds that content
/// with that mode. Best effort: what is not staged here is written in full later, and that
/// write reports any error.
fn stage(
    root: &RootDir,
    plan: &Plan,
    mut early: Option<StagedWrite>,
) -> BTreeMap<usize, StagedFile> {
    let mut out = BTreeMap::new();
    if !DURABLE {
        return out;
    }
    for (i, op) in plan.ops.iter().enumerate() {
        if let Some((mode, content)) = &op.after {
            let ready = early
                .take_if(|e| e.rel == op.path)
                .and_then(|e| e.finish(*mode, content));
            if let Some(s) = ready {
                out.insert(i, s);
                continue;
            }
            let fill = &mut |f: &mut std::fs::File| std::io::Write::write_all(f, content);
            if let Ok(Some(s)) = root.stage_file(&op.path, *mode, fill) {
                out.insert(i, s);
            }
        }
    }
    out
}

/// Best-effort undo of a partly applied plan (after an I/O error); what cannot be put back is
/// still recorded by the epoch, which is then aborted.
fn roll_back(root: &RootDir, plan: &Plan, done: Vec<Done>) {
    let put_back = |op: &Op| match &op.before {
        Disk::File {
            mode,
            content: Some(c),
            ..
        } => {
            let _ = root.write_file(&op.path, *mode, DURABLE, &mut |f| {
                std::io::Write::write_all(f, c)
            });
        }
        Disk::Absent => {
            let _ = root.remove_file(&op.path);
        }
        _ => {}
    };
    for d in done.into_iter().rev() {
        match d {
            Done::Wrote(i) | Done::Removed(i) => put_back(&plan.ops[i]),
            Done::MadeDir(p) => {
                let _ = root.remove_dir(&p);
            }
            Done::RemovedDir(p, mode) => {
                let _ = root.make_dir(&p).and_then(|_| root.chmod_dir(&p, mode));
            }
        }
    }
}

fn fingerprint_row(r: &rusqlite::Row, path: &[u8]) -> rusqlite::Result<Fingerprint> {
    let id: Vec<u8> = r.get(3)?;
    Ok(Fingerprint {
        path: path.to_vec(),
        size: r.get::<_, i64>(0)? as u64,
        mtime_ns: r.get(1)?,
        mode: r.get(2)?,
        content: ObjectId(id.try_into().unwrap_or([0; 32])),
        pos: r.get(4)?,
        partial: r.get(5)?,
        read_ns: r.get(6)?,
    })
}

fn count_lines(content: &[u8]) -> usize {
    let n = content.iter().filter(|b| **b == b'\n').count();
    if content.last().is_some_and(|b| *b != b'\n') {
        n + 1
    } else {
        n
    }
}

impl Workspace {
    /// The session's fingerprint of `rel`, if it read (or wrote) it.
    pub fn fingerprint(&self, session: &str, rel: &[u8]) -> Result<Option<Fingerprint>, Error> {
        Ok(self
            .db()
            .prepare_cached(
                "SELECT size, mtime_ns, mode, content, pos, partial, read_ns FROM fingerprints
                 WHERE session = ?1 AND path = ?2",
            )?
            .query_row(params![session, rel], |r| fingerprint_row(r, rel))
            .optional()?)
    }

    /// Runs `f` in a transaction committed without an fsync (`synchronous = NORMAL`: still
    /// atomic and consistent in WAL mode, only not durable across power loss). Used for
    /// fingerprints only: losing one makes the guard refuse (the session reads again), never
    /// allow, so they are not worth a disk flush on the hot path.
    fn relaxed_tx(&self, f: impl FnOnce() -> Result<(), Error>) -> Result<(), Error> {
        self.relaxed(|| self.transaction(f))
    }

    fn save_fingerprint(&self, session: &str, fp: &Fingerprint) -> Result<(), Error> {
        self.db()
            .prepare_cached(
                "INSERT OR REPLACE INTO fingerprints
                (session, path, size, mtime_ns, mode, content, pos, partial, read_ns)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
            )?
            .execute(params![
                session,
                fp.path,
                fp.size as i64,
                fp.mtime_ns,
                fp.mode,
                fp.content.0.as_slice(),
                fp.pos,
                fp.partial,
                fp.read_ns
            ])?;
        Ok(())
    }

    /// Reads a regular file for `session` and records its fingerprint (of the whole file, also
    /// when only `range` is returned). Symlinks are never followed.
    pub fn read_file(
        &self,
        session: &str,
        rel: &[u8],
        range: Option<LineRange>,
    ) -> Result<ReadResult, Error> {
        relpath::check(rel)?;
        let root = self.rootdir()?;
        match root.lstat(rel).map_err(io_err("inspecting", rel))? {
            Present::File { .. } => {}
            Present::Absent => return Err(tool_err(rel, "no such file")),
            Present::Dir { .. } => return Err(tool_err(rel, "is a directory")),
            Present::Symlink => return Err(tool_err(
                rel,
                "is a symlink; the guarded tools read regular files only and never follow symlinks",
            )),
            Present::Other => return Err(tool_err(rel, "is not a regular file")),
        }
        let mut f = root.open_read(rel).map_err(io_err("opening", rel))?;
        let meta = f.metadata().map_err(io_err("inspecting", rel))?;
        let mut content = Vec::with_capacity(meta.len() as usize);
        f.read_to_end(&mut content)
            .map_err(io_err("reading", rel))?;
        let lines = count_lines(&content);
        let fp = Fingerprint {
            path: rel.to_vec(),
            size: content.len() as u64,
            mtime_ns: meta.mtime() * 1_000_000_000 + meta.mtime_nsec(),
            mode: meta.mode() & 0o7777,
            content: content_id(&content)?,
            pos: oplog::last_pos(&self.db())?,
            partial: false,
            read_ns: now_ns(),
        };
        let (content, range, partial) = match range {
            None => (content, None, false),
            Some(r) => {
                let end = r.end.unwrap_or(usize::MAX).min(lines);
                let split = patch::split_lines(&content);
                let picked: Vec<u8> = if r.start <= end {
                    split[r.start - 1..end].concat()
                } else {
                    Vec::new()
                };
                let partial = !(r.start <= 1 && end >= lines);
                let shown = if r.start <= end {
                    (r.start, end)
                } else {
                    (r.start, r.start - 1)
                };
                (picked, Some(shown), partial)
            }
        };
        let fp = Fingerprint { partial, ..fp };
        self.relaxed_tx(|| self.save_fingerprint(session, &fp))?;
        Ok(ReadResult {
            path: rel.to_vec(),
            size: fp.size,
            content,
            lines,
            range,
            partial,
            fingerprint: fp,
        })
    }

    /// Whether `session` may write `rel` now: `Ok` for a new file or one unchanged since the
    /// session read it, [`Error::Guard`] with the reason otherwise.
    pub fn check_write(&self, session: &str, rel: &[u8]) -> Result<WriteCheck, Error> {
        check_writable(rel)?;
        let root = self.rootdir()?;
        let d = disk_state(&root, rel, false)?;
        if let Disk::Absent = d {
            // A new file: its directories must be creatable (no symlink or file on the way).
            let probe = Op {
                path: rel.to_vec(),
                before: Disk::Absent,
                after: Some((0, Vec::new())),
            };
            Plan::new(&root, vec![probe])?;
        }
        match self.guard(session, rel, &d)? {
            Ok(fp) => Ok(WriteCheck {
                path: rel.to_vec(),
                new_file: matches!(d, Disk::Absent),
                fingerprint: fp,
            }),
            Err(r) => Err(Error::Guard(vec![r])),
        }
    }

    /// The guard's verdict for one path in state `d`.
    fn guard(
        &self,
        session: &str,
        rel: &[u8],
        d: &Disk,
    ) -> Result<Result<Option<Fingerprint>, GuardRefusal>, Error> {
        let (size, id) = match d {
            Disk::Absent => return Ok(Ok(None)),
            Disk::NotFile(what) => {
                return Err(tool_err(
                    rel,
                    format!("is {what}; the guarded tools write regular files only"),
                ))
            }
            Disk::File { size, id, .. } => (*size, *id),
        };
        let refusal = |kind, changed_by, detail, partial| GuardRefusal {
            path: rel.to_vec(),
            session: session.to_string(),
            kind,
            changed_by,
            detail,
            partial,
        };
        let Some(fp) = self.fingerprint(session, rel)? else {
            return Ok(Err(refusal(RefusalKind::NeverRead, None, None, false)));
        };
        if fp.content == id && fp.size == size {
            return Ok(Ok(Some(fp)));
        }
        let detail = if fp.size != size {
            format!("size {} -> {size} bytes", fp.size)
        } else {
            format!("same size, different content: {size} bytes")
        };
        let by = self.changed_by(session, rel, fp.pos, &d.entry())?;
        Ok(Err(refusal(
            RefusalKind::Changed,
            Some(by),
            Some(detail),
            fp.partial,
        )))
    }

    /// Who made `rel` what it is now (`current`), looking at changes recorded after `after_pos`.
    fn changed_by(
        &self,
        session: &str,
        rel: &[u8],
        after_pos: i64,
        current: &Option<Entry>,
    ) -> Result<ChangedBy, Error> {
        let by_epoch = |e: &EpochRow, open: bool| {
            if e.kind == EpochKind::External {
                ChangedBy::External {
                    epoch: e.id.clone(),
                }
            } else {
                ChangedBy::Epoch {
                    session: e.session.clone(),
                    epoch: e.id.clone(),
                    kind: e.kind,
                    tool: e.tool.clone(),
                    this_session: e.session == session,
                    open,
                }
            }
        };
        let latest = oplog::latest_change(&self.db(), rel, after_pos)?;
        if let Some(r) = latest {
            let epoch = oplog::epoch(&self.db(), &r.epoch)?;
            if let Some(e) = epoch {
                if r.pending || e.state == EpochState::Open {
                    // Still running, unless its process died (the next command settles it).
                    return Ok(by_epoch(&e, owner_alive(&e.owner)));
                }
                if same_content(&r.change.after, current) {
                    return Ok(by_epoch(&e, false));
                }
            }
        }
        // Not recorded yet: a tool call still running may be the writer.
        let open = oplog::open_epochs(&self.db())?;
        for e in open.iter().rev() {
            let holds = match e.kind {
                EpochKind::Exact => e.paths.iter().any(|p| p == rel),
                EpochKind::Opaque => owner_alive(&e.owner),
                _ => false,
            };
            if holds {
                return Ok(by_epoch(e, owner_alive(&e.owner)));
            }
        }
        Ok(ChangedBy::Unrecorded)
    }

    /// Guarded write of a whole file (created if absent; mode kept if present).
    pub fn write_file(
        &self,
        session: &str,
        rel: &[u8],
        content: &[u8],
        tool: &ToolCall,
    ) -> Result<Settled, Error> {
        self.write_whole(session, rel, content, None, tool)
    }

    /// [`Workspace::write_file`] of a [`StagedWrite`]'s path and content, using its staged file
    /// if it was staged with the mode the write gives the file. A `StagedWrite` started for
    /// another workspace root is refused (its path is relative to that root).
    pub fn write_staged(
        &self,
        session: &str,
        staged: StagedWrite,
        tool: &ToolCall,
    ) -> Result<Settled, Error> {
        staged.check_root(self)?;
        let Some(content) = staged.content.clone() else {
            return Err(Error::Usage(
                "write_staged takes a StagedWrite::start (with its content), not a start_edit"
                    .into(),
            ));
        };
        let rel = staged.rel.clone();
        self.write_whole(session, &rel, &content, Some(staged), tool)
    }

    fn write_whole(
        &self,
        session: &str,
        rel: &[u8],
        content: &[u8],
        staged: Option<StagedWrite>,
        tool: &ToolCall,
    ) -> Result<Settled, Error> {
        check_writable(rel)?;
        let root = self.rootdir()?;
        let d = disk_state(&root, rel, false)?;
        if let Err(r) = self.guard(session, rel, &d)? {
            return Err(Error::Guard(vec![r]));
        }
        let mode = match &d {
            Disk::File { mode, .. } => *mode,
            _ => new_file_mode(false),
        };
        let op = Op {
            path: rel.to_vec(),
            before: d,
            after: Some((mode, content.to_vec())),
        };
        let plan = Plan::new(&root, vec![op])?;
        self.commit(session, &root, plan, staged, tool)
    }

    /// Guarded exact string replacement in an existing file (see [`crate::edit`]).
    pub fn edit_file(
        &self,
        session: &str,
        rel: &[u8],
        spec: &EditSpec,
        tool: &ToolCall,
    ) -> Result<Edited, Error> {
        self.edit_whole(session, rel, spec, None, tool)
    }

    /// [`Workspace::edit_file`] of a [`StagedWrite`]'s path (from
    /// [`StagedWrite::start_edit`]), using its staged file if it holds the edit's result with
    /// the file's mode (the file did not change since the staging read it).
    pub fn edit_staged(
        &self,
        session: &str,
        staged: StagedWrite,
        spec: &EditSpec,
        tool: &ToolCall,
    ) -> Result<Edited, Error> {
        staged.check_root(self)?;
        let rel = staged.rel.clone();
        self.edit_whole(session, &rel, spec, Some(staged), tool)
    }

    fn edit_whole(
        &self,
        session: &str,
        rel: &[u8],
        spec: &EditSpec,
        staged: Option<StagedWrite>,
        tool: &ToolCall,
    ) -> Result<Edited, Error> {
        check_writable(rel)?;
        let root = self.rootdir()?;
        let d = disk_state(&root, rel, true)?;
        if matches!(d, Disk::Absent) {
            return Err(tool_err(
                rel,
                "no such file; use `rewind write` to create it",
            ));
        }
        if let Err(r) = self.guard(session, rel, &d)? {
            return Err(Error::Guard(vec![r]));
        }
        let Disk::File {
            mode,
            content: Some(current),
            ..
        } = &d
        else {
            unreachable!("guard accepted a loaded regular file");
        };
        let (new, replacements) =
            edit::apply(current, spec).map_err(|e| tool_err(rel, e.message))?;
        let mode = *mode;
        let op = Op {
            path: rel.to_vec(),
            before: d,
            after: Some((mode, new)),
        };
        let plan = Plan::new(&root, vec![op])?;
        let settled = self.commit(session, &root, plan, staged, tool)?;
        Ok(Edited {
            settled,
            replacements,
        })
    }

    /// Guarded, all-or-nothing application of a unified diff (see [`crate::patch`]): every
    /// path is checked, every hunk of every file computed in memory, and only then one exact
    /// epoch over all touched paths writes the results.
    pub fn apply_patch(
        &self,
        session: &str,
        text: &[u8],
        opts: &PatchOptions,
        tool: &ToolCall,
    ) -> Result<Patched, Error> {
        let nothing = "; nothing was written";
        let files = patch::parse(text, opts.strip).map_err(|e| Error::Tool {
            path: "patch".into(),
            message: format!("{e}{nothing}"),
        })?;
        let mut touched: BTreeSet<Vec<u8>> = BTreeSet::new();
        let mut sources: BTreeSet<Vec<u8>> = BTreeSet::new();
        for f in &files {
            for p in [&f.old_path, &f.new_path].into_iter().flatten() {
                check_writable(p)?;
            }
            match f.op() {
                PatchOp::Copy => {
                    sources.extend(f.old_path.clone());
                    touched.extend(f.new_path.clone());
                }
                _ => {
                    touched.extend(f.old_path.clone());
                    touched.extend(f.new_path.clone());
                }
            }
        }
        let root = self.rootdir()?;
        let mut disk: BTreeMap<Vec<u8>, Disk> = BTreeMap::new();
        for p in touched.iter().chain(&sources) {
            if !disk.contains_key(p) {
                disk.insert(p.clone(), disk_state(&root, p, true)?);
            }
        }
        // The guard first: a file changed since it was read is the likely reason a hunk fails.
        let mut refusals = Vec::new();
        for p in &touched {
            let d = &disk[p];
            if let Disk::File { .. } = d {
                if let Err(r) = self.guard(session, p, d)? {
                    refusals.push(r);
                }
            }
        }
        if !refusals.is_empty() {
            return Err(Error::Guard(refusals));
        }
        // Apply every section in memory, in order.
        let mut vfs: BTreeMap<Vec<u8>, Option<(u32, Vec<u8>)>> = BTreeMap::new();
        for (p, d) in &disk {
            match d {
                Disk::File {
                    mode,
                    content: Some(c),
                    ..
                } => {
                    vfs.insert(p.clone(), Some((*mode, c.clone())));
                }
                Disk::Absent => {
                    vfs.insert(p.clone(), None);
                }
                _ => {}
            }
        }
        let get = |vfs: &BTreeMap<Vec<u8>, Option<(u32, Vec<u8>)>>,
                   p: &[u8]|
         -> Result<Option<(u32, Vec<u8>)>, Error> {
            match vfs.get(p) {
                Some(v) => Ok(v.clone()),
                None => match &disk[p] {
                    Disk::NotFile(what) => Err(tool_err(
                        p,
                        format!("is {what}; apply-patch changes regular files only{nothing}"),
                    )),
                    _ => Ok(None),
                },
            }
        };
        let mut summary = Vec::new();
        for f in &files {
            let hunks = |content: &[u8], p: &[u8]| {
                patch::apply(content, &f.hunks).map_err(|e| {
                    tool_err(p, format!("{e} (patch line {}){nothing}", e_line(f, &e)))
                })
            };
            let op = f.op();
            let (old, new) = (f.old_path.as_deref(), f.new_path.as_deref());
            match op {
                PatchOp::Add => {
                    let p = new.expect("add has a new path");
                    if get(&vfs, p)?.is_some() {
                        return Err(tool_err(
                            p,
                            format!("the patch creates it, but it already exists{nothing}"),
                        ));
                    }
                    let content = hunks(b"", p)?;
                    let exec = f.new_mode.is_some_and(|m| m & 0o111 != 0);
                    vfs.insert(p.to_vec(), Some((new_file_mode(exec), content)));
                }
                PatchOp::Delete | PatchOp::Modify | PatchOp::Rename | PatchOp::Copy => {
                    let src = old.expect("has an old path");
                    let Some((mode, content)) = get(&vfs, src)? else {
                        return Err(tool_err(
                            src,
                            format!(
                                "does not exist; a patch that creates a file needs `--- /dev/null` \
                                 (or `new file mode`){nothing}"
                            ),
                        ));
                    };
                    let result = hunks(&content, src)?;
                    if op == PatchOp::Delete {
                        if !result.is_empty() {
                            return Err(tool_err(
                                src,
                                format!(
                                    "the patch deletes it, but {} bytes of it are not in the patch \
                                     (the file has content the patch does not remove){nothing}",
                                    result.len()
                                ),
                            ));
                        }
                        vfs.insert(src.to_vec(), None);
                    } else {
                        let dst = new.expect("has a new path");
                        if op != PatchOp::Modify && get(&vfs, dst)?.is_some() {
                            return Err(tool_err(
                                dst,
                                format!(
                                    "the patch {} {} to it, but it already exists{nothing}",
                                    if op == PatchOp::Copy {
                                        "copies"
                                    } else {
                                        "renames"
                                    },
                                    relpath::display(src)
                                ),
                            ));
                        }
                        if op == PatchOp::Rename {
                            vfs.insert(src.to_vec(), None);
                        }
                        vfs.insert(dst.to_vec(), Some((changed_mode(mode, f.new_mode), result)));
                    }
                }
            }
            let done = PatchedFile {
                op: match op {
                    PatchOp::Modify => "modify",
                    PatchOp::Add => "add",
                    PatchOp::Delete => "delete",
                    PatchOp::Rename => "rename",
                    PatchOp::Copy => "copy",
                },
                path: f.path().to_vec(),
                from: matches!(op, PatchOp::Rename | PatchOp::Copy)
                    .then(|| old.unwrap_or_default().to_vec()),
                hunks: f.hunks.len(),
            };
            summarize(&mut summary, done);
        }
        let mut ops = Vec::new();
        for p in &touched {
            let before = disk.remove(p).expect("loaded");
            let after = vfs.remove(p).flatten();
            let unchanged = match (&before, &after) {
                (Disk::Absent, None) => true,
                (
                    Disk::File {
                        mode,
                        content: Some(c),
                        ..
                    },
                    Some((m, n)),
                ) => mode == m && c == n,
                _ => false,
            };
            if !unchanged {
                ops.push(Op {
                    path: p.clone(),
                    before,
                    after,
                });
            }
        }
        let plan = Plan::new(&root, ops)?;
        if opts.dry_run {
            return Ok(Patched {
                files: summary,
                settled: None,
            });
        }
        let settled = self.commit(session, &root, plan, None, tool)?;
        Ok(Patched {
            files: summary,
            settled: Some(settled),
        })
    }

    /// One exact epoch over the plan's paths: begin, re-check, write, settle, refresh. The
    /// workspace lock is held throughout: the write is one mutation, and the settle needs no
    /// second lock and recovery pass.
    fn commit(
        &self,
        session: &str,
        root: &RootDir,
        plan: Plan,
        early: Option<StagedWrite>,
        tool: &ToolCall,
    ) -> Result<Settled, Error> {
        let spec = EpochSpec {
            tool: Some(tool.name.clone()),
            tool_call: tool.id.clone(),
            paths: plan.epoch_paths(),
            process_owned: true,
            note: None,
        };
        let _lock = self.lock(crate::lock::default_wait(), "guarded write")?;
        crate::trace::phase("epoch begin: locked");
        // The new contents are written and fsynced, under no name yet, while the epoch's
        // opening commit is made durable: the two fsyncs overlap instead of adding up. Nothing
        // is in place before the epoch is recorded; a refused write drops them unseen.
        let (epoch, mut staged) = std::thread::scope(|s| {
            let staging = std::thread::Builder::new()
                .spawn_scoped(s, || stage(root, &plan, early))
                .ok();
            let epoch = self.begin_epoch_locked(session, &spec, None);
            let staged = staging.and_then(|h| h.join().ok()).unwrap_or_default();
            (epoch, staged)
        });
        let epoch = epoch?;
        let abort = || self.settle_locked(&epoch, EpochState::Aborted, false);
        // The preimages the epoch stored must be what the guard checked; anything that changed
        // in between is refused, with nothing written.
        let pre: BTreeMap<Vec<u8>, Option<Entry>> = oplog::epoch_changes(&self.db(), &epoch.id)?
            .into_iter()
            .map(|r| (r.change.path, r.change.before))
            .collect();
        let mut raced = Vec::new();
        for op in &plan.ops {
            let now = pre.get(&op.path).copied().flatten();
            let unchanged = match (op.before.entry(), now) {
                // Over the capture size limit: the epoch could not hash it; the guard just did.
                (Some(b), Some(n)) if n.kind == EntryKind::Uncovered => b.size == n.size,
                (b, n) => same_content(&b, &n),
            };
            if !unchanged {
                let d = disk_state(root, &op.path, false)?;
                raced.push(match self.guard(session, &op.path, &d) {
                    Ok(Err(r)) => r,
                    _ => GuardRefusal {
                        path: op.path.clone(),
                        session: session.to_string(),
                        kind: RefusalKind::Changed,
                        changed_by: Some(ChangedBy::Unrecorded),
                        detail: Some("it changed while the write was being prepared".into()),
                        partial: false,
                    },
                });
            }
        }
        if !raced.is_empty() {
            let _ = abort();
            return Err(Error::Guard(raced));
        }
        let mut done = Vec::new();
        let metas = match apply_plan(root, &plan, &mut staged, &mut done) {
            Ok(m) => m,
            Err(e) => {
                roll_back(root, &plan, done);
                let _ = abort();
                return Err(e);
            }
        };
        crate::trace::phase("guard: written");
        crate::failpoint::hit("guard-before-settle");
        // The session now knows these files as it left them: its fingerprints are refreshed in
        // the settle's transaction. That commit is not flushed (as every exact epoch's settle):
        // what must survive a power cut already has, the open epoch and its preimages
        // (committed durably by `begin_epoch_locked`) and the written files (fsynced before
        // their renames).
        let now = now_ns();
        let mut refresh = |pos: i64| -> Result<(), Error> {
            for (i, op) in plan.ops.iter().enumerate() {
                match (&op.after, metas.get(&i)) {
                    (Some((mode, content)), Some(meta)) => self.save_fingerprint(
                        session,
                        &Fingerprint {
                            path: op.path.clone(),
                            size: content.len() as u64,
                            mtime_ns: meta.mtime() * 1_000_000_000 + meta.mtime_nsec(),
                            mode: *mode,
                            content: content_id(content)?,
                            pos,
                            partial: false,
                            read_ns: now,
                        },
                    )?,
                    _ => {
                        self.db().execute(
                            "DELETE FROM fingerprints WHERE session = ?1 AND path = ?2",
                            params![session, op.path],
                        )?;
                    }
                }
            }
            Ok(())
        };
        let settled =
            self.settle_locked_with(&epoch, EpochState::Settled, false, Some(&mut refresh))?;
        crate::trace::phase("guard: settled");
        Ok(settled)
    }
}

/// The patch line of a failing hunk.
fn e_line(f: &patch::FilePatch, e: &patch::HunkError) -> usize {
    f.hunks.get(e.hunk - 1).map_or(f.line, |h| h.line)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_ranges() {
        assert_eq!(
            "3:5".parse::<LineRange>().unwrap(),
            LineRange {
                start: 3,
                end: Some(5)
            }
        );
        assert_eq!(
            "3-".parse::<LineRange>().unwrap(),
            LineRange {
                start: 3,
                end: None
            }
        );
        assert_eq!(
            ":4".parse::<LineRange>().unwrap(),
            LineRange {
                start: 1,
                end: Some(4)
            }
        );
        assert_eq!(
            "7".parse::<LineRange>().unwrap(),
            LineRange {
                start: 7,
                end: Some(7)
            }
        );
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
