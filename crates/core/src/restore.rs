//! The one engine that changes the workspace's files: a plan of per-path steps, applied
//! through [`RootDir`] so nothing outside the root is ever written. Restores and undo plan the
//! steps that turn the current tree into a target tree ([`plan`]); a guarded write plans its
//! own few steps and gives their new content in memory ([`ApplyOptions::given`]); both apply
//! with [`apply`], and both roll back by applying the inverse steps.
//!
//! Only paths that differ are written (no mtime churn elsewhere). Steps come in an order that
//! is safe to apply one by one: a subtree is emptied before its directory goes, a directory
//! exists before anything is written into it, and directory modes are set last (deepest first)
//! so a read-only target directory does not block writing its children.

use std::collections::BTreeMap;
use std::io;

use rewind_store::{EntryKind, ObjectId, Store, Tree, TreeEntry};
use serde::Serialize;

use crate::fs::batch::Batch;
use crate::fs::relpath;
use crate::fs::root::{Present, RootDir, StagedFile};
use crate::model::entry::{Change, Entry, EntryView};
use crate::Error;

/// A path the plan leaves alone, and why.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct Skipped {
    /// Workspace-relative path, `/`-separated raw bytes (a string in JSON).
    #[serde(serialize_with = "crate::base::serde_path")]
    #[schemars(with = "String")]
    pub path: Vec<u8>,
    /// Why, for a person (uncovered content, untracked files in a directory, …).
    pub reason: String,
}

/// The steps of a restore, in the order they are applied. Each step says what the path is
/// expected to be now (`before`) and what it becomes (`after`; `None` removes it).
#[derive(Clone, Debug, Default)]
pub struct RestorePlan {
    /// One per path to change: parents before children, so a directory exists before what
    /// goes in it.
    pub steps: Vec<Change>,
    /// Paths that differ but that the plan must not touch (their content is not captured).
    pub skipped: Vec<Skipped>,
}

/// What a step does, for previews.
pub fn action(step: &Change) -> &'static str {
    match (&step.before, &step.after) {
        (None, Some(_)) => "create",
        (Some(_), None) => "delete",
        (Some(b), Some(a)) if b.kind != a.kind => "replace",
        (Some(b), Some(a)) if b.id == a.id && b.size == a.size || a.kind == EntryKind::Dir => {
            "mode"
        }
        (Some(_), Some(_)) => "modify",
        (None, None) => "none",
    }
}

/// A JSON view of a step.
#[derive(Clone, Debug, Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct StepView {
    /// `create`, `delete`, `replace` (kind changes), `modify` or `mode`: see [`action`].
    pub action: String,
    /// Workspace-relative path.
    pub path: String,
    /// What the path is expected to be now; `None`: absent.
    pub before: Option<EntryView>,
    /// What it becomes; `None`: removed.
    pub after: Option<EntryView>,
}

impl From<&Change> for StepView {
    fn from(c: &Change) -> Self {
        StepView {
            action: action(c).to_string(),
            path: relpath::display(&c.path),
            before: c.before.as_ref().map(EntryView::from),
            after: c.after.as_ref().map(EntryView::from),
        }
    }
}

/// Plans the restore of `current` (the tree on disk now) to `target`, limited to `scope` paths
/// (and what is under them) when given.
pub fn plan(
    store: &Store,
    current: ObjectId,
    target: ObjectId,
    scope: &[Vec<u8>],
) -> Result<RestorePlan, Error> {
    let mut plan = RestorePlan::default();
    diff_trees(store, Some(current), Some(target), &[], &mut plan)?;
    if !scope.is_empty() {
        let under =
            |p: &[u8], s: &[u8]| p == s || (p.starts_with(s) && p.get(s.len()) == Some(&b'/'));
        plan.steps.retain(|step| {
            scope.iter().any(|s| {
                under(&step.path, s)
                    // Ancestors a scoped path needs created.
                    || (under(s, &step.path) && step.after.is_some_and(|a| a.kind == EntryKind::Dir))
            })
        });
        plan.skipped
            .retain(|k| scope.iter().any(|s| under(&k.path, s)));
    }
    Ok(plan)
}

fn read(store: &Store, id: Option<ObjectId>) -> Result<Vec<TreeEntry>, Error> {
    match id {
        Some(id) if !id.is_zero() => Ok(store.read_tree(&id)?.into_entries()),
        _ => Ok(Vec::new()),
    }
}

fn diff_trees(
    store: &Store,
    cur: Option<ObjectId>,
    tgt: Option<ObjectId>,
    dir: &[u8],
    plan: &mut RestorePlan,
) -> Result<(), Error> {
    if cur == tgt {
        return Ok(());
    }
    let (a, b) = (read(store, cur)?, read(store, tgt)?);
    for (c, t) in crate::base::merge_sorted(&a, &b, |x| &x.name, |y| &y.name) {
        let path = relpath::join(dir, &c.or(t).expect("one side").name);
        let (ce, te) = (c.map(Entry::from_tree_entry), t.map(Entry::from_tree_entry));
        if let (Some(x), Some(y)) = (&ce, &te) {
            if x.same_as(y) {
                if x.kind == EntryKind::Dir {
                    diff_trees(store, Some(x.id), Some(y.id), &path, plan)?;
                }
                continue;
            }
        }
        if te.is_some_and(|t| t.kind == EntryKind::Uncovered) {
            plan.skipped.push(Skipped {
                path,
                reason: "cannot restore: its content was never captured".into(),
            });
            continue;
        }
        if ce.is_some_and(|c| c.kind == EntryKind::Uncovered) {
            plan.skipped.push(Skipped {
                path,
                reason: "left as it is: its current content is not captured, so it cannot be brought back".into(),
            });
            continue;
        }
        match (ce, te) {
            (Some(x), Some(y)) if x.kind == EntryKind::Dir && y.kind == EntryKind::Dir => {
                plan.steps.push(Change {
                    path: path.clone(),
                    before: ce,
                    after: te,
                });
                diff_trees(store, Some(x.id), Some(y.id), &path, plan)?;
            }
            _ => {
                if let Some(x) = ce.filter(|x| x.kind == EntryKind::Dir) {
                    // Empty the directory before it is replaced or removed.
                    diff_trees(store, Some(x.id), None, &path, plan)?;
                }
                plan.steps.push(Change {
                    path: path.clone(),
                    before: ce,
                    after: te,
                });
                if let Some(y) = te.filter(|y| y.kind == EntryKind::Dir) {
                    diff_trees(store, None, Some(y.id), &path, plan)?;
                }
            }
        }
    }
    Ok(())
}

/// What applying a plan did.
#[derive(Clone, Debug, Default, Serialize, schemars::JsonSchema)]
pub struct Applied {
    /// Paths written: files and symlinks put in place, directories created or re-moded.
    pub written: u64,
    /// Steps that removed a path (counted also when it was already gone).
    pub removed: u64,
    /// Directories that should have gone but still hold files Rewind does not track.
    pub kept: Vec<Skipped>,
    /// The metadata of each file written, as the write left it (a guarded write records the
    /// session's fingerprint from it).
    #[serde(skip)]
    #[schemars(skip)]
    pub files: BTreeMap<Vec<u8>, std::fs::Metadata>,
}

/// The failpoints an [`apply`] passes, named by its caller (see `docs/format.md`).
#[derive(Clone, Copy, Debug)]
pub struct StepFailpoints {
    /// Before each step that removes a path.
    pub before_remove: Option<&'static str>,
    /// Before each step that writes a file.
    pub before_write: Option<&'static str>,
    /// After each step, counted.
    pub after_step: &'static str,
}

impl StepFailpoints {
    /// A restore's, undo's and their rollbacks'.
    pub const RESTORE: StepFailpoints = StepFailpoints {
        before_remove: None,
        before_write: None,
        after_step: "restore-after-step",
    };
}

/// How [`apply`] writes.
pub struct ApplyOptions<'a> {
    /// fsync every written file before renaming it into place (and, batched, each directory
    /// whose names changed before returning).
    pub durable: bool,
    /// Write through a [`Batch`]: each directory opened once, new contents written
    /// [`Batch::FILES`] at a time and flushed together before their renames. A restore's (many
    /// files, a journal that finishes or rolls back whatever a kill leaves); not a guarded
    /// write's, whose steps go in one by one so that a failure leaves exactly the steps before
    /// it done (see [`Interrupted`]).
    pub batch: bool,
    /// File content given in memory, by content id (a guarded write's new content, not in the
    /// store); any other file's content is read from the store.
    pub given: BTreeMap<ObjectId, &'a [u8]>,
    /// Files already written and fsynced under no name, by path (see
    /// [`RootDir::stage_file`]); each is linked into place instead of writing its path's
    /// content again. The caller guarantees a staged file holds the step's content and mode.
    /// Only without `batch`.
    pub staged: BTreeMap<Vec<u8>, StagedFile>,
    /// The failpoints to pass.
    pub failpoints: StepFailpoints,
}

impl ApplyOptions<'_> {
    /// Content from the store, written durably and batched: a restore's.
    pub fn from_store() -> ApplyOptions<'static> {
        ApplyOptions {
            durable: true,
            batch: true,
            given: BTreeMap::new(),
            staged: BTreeMap::new(),
            failpoints: StepFailpoints::RESTORE,
        }
    }
}

/// An [`apply`] that stopped at an error: the error, and how many steps were done before the
/// one that failed. One by one, the failed step did nothing when it writes, removes or makes
/// one path (each of those is one atomic call); one that replaces a directory or a file by the
/// other may be half done. Batched, the steps before `steps_done` are done and later ones may
/// be too: the caller's journal, which compares each path with the disk, sorts them out.
#[derive(Debug)]
pub struct Interrupted {
    /// What failed.
    pub cause: Error,
    /// Steps applied in full before it.
    pub steps_done: usize,
}

impl From<Interrupted> for Error {
    fn from(i: Interrupted) -> Error {
        i.cause
    }
}

/// The steps that undo the first `n` of `steps`: each path made to be what it was, in reverse
/// order.
pub fn inverse(steps: &[Change], n: usize) -> Vec<Change> {
    steps[..n]
        .iter()
        .rev()
        .map(|s| Change {
            path: s.path.clone(),
            before: s.after,
            after: s.before,
        })
        .collect()
}

/// Where [`apply`]'s steps go: the root path by path, or a [`Batch`].
enum Target<'r> {
    OneByOne(&'r RootDir),
    Batched(Batch<'r>),
}

impl Target<'_> {
    /// Files begun and waiting for the batch's flush.
    fn waiting(&self) -> usize {
        match self {
            Target::OneByOne(_) => 0,
            Target::Batched(b) => b.waiting(),
        }
    }

    fn lstat(&mut self, rel: &[u8]) -> io::Result<Present> {
        match self {
            Target::OneByOne(r) => r.lstat(rel),
            Target::Batched(b) => b.lstat(rel),
        }
    }

    fn remove_file(&mut self, rel: &[u8]) -> io::Result<()> {
        match self {
            Target::OneByOne(r) => r.remove_file(rel),
            Target::Batched(b) => b.remove_file(rel),
        }
    }

    fn remove_dir(&mut self, rel: &[u8]) -> io::Result<bool> {
        match self {
            Target::OneByOne(r) => r.remove_dir(rel),
            Target::Batched(b) => b.remove_dir(rel),
        }
    }

    fn make_dir(&mut self, rel: &[u8]) -> io::Result<()> {
        match self {
            Target::OneByOne(r) => r.make_dir(rel),
            Target::Batched(b) => b.make_dir(rel),
        }
    }

    fn chmod_dir(&mut self, rel: &[u8], mode: u32) -> io::Result<()> {
        match self {
            Target::OneByOne(r) => r.chmod_dir(rel, mode),
            Target::Batched(b) => b.chmod_dir(rel, mode),
        }
    }

    fn write_symlink(&mut self, rel: &[u8], text: &[u8]) -> io::Result<()> {
        match self {
            Target::OneByOne(r) => r.write_symlink(rel, text),
            Target::Batched(b) => b.write_symlink(rel, text),
        }
    }
}

/// Whether a step is done, or (batched) its file waits for the batch's flush.
enum StepDone {
    Now,
    Begun,
}

/// Applies the plan's steps in order. Each step is idempotent ("make this path be that"), so a
/// plan interrupted half-way can be applied again from the start. The counted failpoint
/// (`after_step`) is passed as each step is done: batched, a file's step is done when its
/// rename is.
pub fn apply(
    root: &RootDir,
    store: &Store,
    plan: &RestorePlan,
    mut opts: ApplyOptions<'_>,
) -> Result<Applied, Interrupted> {
    let mut done = Applied::default();
    let mut dir_modes: Vec<(&[u8], u32)> = Vec::new();
    let mut target = if opts.batch {
        Target::Batched(Batch::new(root, opts.durable))
    } else {
        Target::OneByOne(root)
    };
    // The steps whose files a batch has begun, in order, until its flush puts them in place.
    let mut begun: Vec<usize> = Vec::new();
    // Batched file writes not begun yet: consecutive ones are begun together, on every core,
    // before any other step changes the disk (so the order is as if one by one).
    let mut queued: Vec<usize> = Vec::new();
    let after_step = opts.failpoints.after_step;
    let flush = |target: &mut Target, begun: &mut Vec<usize>, done: &mut Applied| {
        let Target::Batched(batch) = target else {
            return Ok(());
        };
        let steps = std::mem::take(begun);
        match batch.flush(&mut || crate::base::failpoint::hit(after_step)) {
            Ok(written) => {
                done.written += written.len() as u64;
                done.files.extend(written);
                Ok(())
            }
            Err(e) => {
                let steps_done = steps[e.done.len()];
                done.written += e.done.len() as u64;
                done.files.extend(e.done);
                Err(Interrupted {
                    cause: Error::io_rel("writing", &e.path)(e.cause),
                    steps_done,
                })
            }
        }
    };
    // Step `i` failed: what was begun before goes in, so that every step before it is done;
    // if that fails too, fewer are, but step `i`'s error is the one to report.
    let stop = |target: &mut Target, begun: &mut Vec<usize>, done: &mut Applied, i, cause| {
        let steps_done = match flush(target, begun, done) {
            Ok(()) => i,
            Err(flushed) => flushed.steps_done,
        };
        Interrupted { cause, steps_done }
    };
    // A guarded write's contents (only ever given without a batch); queued writes read them.
    let given = std::mem::take(&mut opts.given);
    let begin = |target: &mut Target,
                 queued: &mut Vec<usize>,
                 begun: &mut Vec<usize>,
                 done: &mut Applied| {
        begin_queued(target, store, plan, &given, queued, begun)
            .map_err(|(j, e)| stop(target, begun, done, j, e))
    };
    for (i, step) in plan.steps.iter().enumerate() {
        let batched_write = matches!(target, Target::Batched(_))
            && step.after.is_some_and(|t| t.kind == EntryKind::File);
        // A file step is queued, unless a directory is in its way (removing it changes the
        // disk, which must wait for the writes queued before).
        if batched_write {
            match target.lstat(&step.path) {
                Ok(Present::Dir { .. }) => {}
                Ok(_) => {
                    if let Some(fp) = opts.failpoints.before_write {
                        crate::base::failpoint::hit(fp);
                    }
                    queued.push(i);
                    if queued.len() + target.waiting() >= Batch::FILES {
                        begin(&mut target, &mut queued, &mut begun, &mut done)?;
                        flush(&mut target, &mut begun, &mut done)?;
                    }
                    continue;
                }
                Err(e) => {
                    let cause = Error::io_rel("inspecting", &step.path)(e);
                    begin(&mut target, &mut queued, &mut begun, &mut done)?;
                    return Err(stop(&mut target, &mut begun, &mut done, i, cause));
                }
            }
        }
        begin(&mut target, &mut queued, &mut begun, &mut done)?;
        match apply_step(
            &mut target,
            store,
            step,
            &given,
            &mut opts,
            &mut done,
            &mut dir_modes,
        ) {
            Ok(StepDone::Now) => crate::base::failpoint::hit(after_step),
            Ok(StepDone::Begun) => begun.push(i),
            Err(cause) => return Err(stop(&mut target, &mut begun, &mut done, i, cause)),
        }
        if target.waiting() >= Batch::FILES {
            flush(&mut target, &mut begun, &mut done)?;
        }
    }
    begin(&mut target, &mut queued, &mut begun, &mut done)?;
    flush(&mut target, &mut begun, &mut done)?;
    // Deepest first, so a read-only directory is sealed after everything inside it.
    dir_modes.sort_by_key(|(p, _)| std::cmp::Reverse(p.iter().filter(|b| **b == b'/').count()));
    let interrupted = |cause| Interrupted {
        cause,
        steps_done: plan.steps.len(),
    };
    for (path, mode) in dir_modes {
        target
            .chmod_dir(path, mode)
            .map_err(Error::io_rel("setting mode of", path))
            .map_err(interrupted)?;
    }
    if let Target::Batched(batch) = target {
        batch
            .finish()
            .map_err(Error::io_rel("flushing the directories of", b"."))
            .map_err(interrupted)?;
    }
    Ok(done)
}

/// Begins the queued file writes of `plan` together (see [`Batch::begin_writes`]) and adds
/// them to `begun`; an error names the step that failed (those before it are begun).
fn begin_queued(
    target: &mut Target,
    store: &Store,
    plan: &RestorePlan,
    given: &BTreeMap<ObjectId, &[u8]>,
    queued: &mut Vec<usize>,
    begun: &mut Vec<usize>,
) -> Result<(), (usize, Error)> {
    let Target::Batched(batch) = target else {
        return Ok(());
    };
    if queued.is_empty() {
        return Ok(());
    }
    let steps = std::mem::take(queued);
    let file = |i: usize| {
        let s = &plan.steps[i];
        (
            s.path.as_slice(),
            s.after.expect("a queued step writes a file"),
        )
    };
    let files: Vec<(&[u8], u32)> = steps.iter().map(|&i| (file(i).0, file(i).1.mode)).collect();
    let fill = |k: usize, f: &mut std::fs::File| {
        let t = file(steps[k]).1;
        fill_file(store, given.get(&t.id).copied(), &t, f)
    };
    // The store is read on several threads, unless this one holds its connection (they
    // would wait for it forever).
    let result = batch.begin_writes(&files, &fill, !store.db_held_here());
    let ok = result.as_ref().err().map_or(steps.len(), |(k, _)| *k);
    begun.extend_from_slice(&steps[..ok]);
    result.map_err(|(k, e)| (steps[k], unwrap_store(e, files[k].0)))
}

/// Writes file `t`'s content into `f`: the bytes given, a clone of its cloned content (no bytes
/// read or written), or its bytes from the store with their holes kept.
fn fill_file(
    store: &Store,
    given: Option<&[u8]>,
    t: &Entry,
    f: &mut std::fs::File,
) -> io::Result<()> {
    match given {
        Some(bytes) => io::Write::write_all(f, bytes),
        None if t.size >= rewind_store::CLONE_FROM
            && store
                .clone_content_into(&t.id, f)
                .map_err(io::Error::other)? =>
        {
            Ok(())
        }
        None => {
            let mut out = SparseWriter::new(f);
            store
                .read_content(&t.id, &mut out)
                .map_err(io::Error::other)?;
            out.finish()
        }
    }
}

fn apply_step<'p>(
    target: &mut Target,
    store: &Store,
    step: &'p Change,
    given: &BTreeMap<ObjectId, &[u8]>,
    opts: &mut ApplyOptions<'_>,
    done: &mut Applied,
    dir_modes: &mut Vec<(&'p [u8], u32)>,
) -> Result<StepDone, Error> {
    let path = step.path.as_slice();
    let now = target
        .lstat(path)
        .map_err(Error::io_rel("inspecting", path))?;
    let Some(t) = step.after else {
        if let Some(fp) = opts.failpoints.before_remove {
            crate::base::failpoint::hit(fp);
        }
        match now {
            Present::Absent => {}
            Present::Dir { .. } => {
                if !target
                    .remove_dir(path)
                    .map_err(Error::io_rel("removing directory", path))?
                {
                    done.kept.push(Skipped {
                        path: path.to_vec(),
                        reason:
                            "directory kept: it holds files Rewind does not track (ignored or new)"
                                .into(),
                    });
                    return Ok(StepDone::Now);
                }
            }
            _ => target
                .remove_file(path)
                .map_err(Error::io_rel("removing", path))?,
        }
        done.removed += 1;
        return Ok(StepDone::Now);
    };
    if t.kind != EntryKind::Dir {
        if let Present::Dir { .. } = now {
            if !target
                .remove_dir(path)
                .map_err(Error::io_rel("removing directory", path))?
            {
                return Err(Error::io_rel("replacing directory", path)(
                    io::Error::other(
                        "it still holds files Rewind does not track; move them away and retry",
                    ),
                ));
            }
        }
    }
    match t.kind {
        EntryKind::Dir => {
            if !matches!(now, Present::Dir { .. } | Present::Absent) {
                target
                    .remove_file(path)
                    .map_err(Error::io_rel("removing", path))?;
            }
            target
                .make_dir(path)
                .map_err(Error::io_rel("creating directory", path))?;
            dir_modes.push((path, t.mode));
        }
        EntryKind::File => {
            if let Some(fp) = opts.failpoints.before_write {
                crate::base::failpoint::hit(fp);
            }
            let given = given.get(&t.id).copied();
            let mut fill = |f: &mut std::fs::File| fill_file(store, given, &t, f);
            match target {
                Target::Batched(batch) => {
                    batch
                        .begin_write(path, t.mode, &mut fill)
                        .map_err(|e| unwrap_store(e, path))?;
                    return Ok(StepDone::Begun);
                }
                Target::OneByOne(root) => {
                    let staged = opts.staged.remove(path);
                    let meta = root
                        .write_file_staged(path, staged, t.mode, opts.durable, &mut fill)
                        .map_err(|e| unwrap_store(e, path))?;
                    done.files.insert(path.to_vec(), meta);
                }
            }
        }
        EntryKind::Symlink => {
            let text = store.read_blob(&t.id)?;
            target
                .write_symlink(path, &text)
                .map_err(Error::io_rel("creating symlink", path))?;
        }
        EntryKind::Uncovered => return Ok(StepDone::Now),
    }
    done.written += 1;
    Ok(StepDone::Now)
}

/// Writes file content leaving every all-zero, block-aligned 4 KiB run as a hole (a seek
/// instead of a write), so a sparse file (a VM image, a database file) is restored sparse
/// instead of fully allocated; the size is set at the end, so a trailing hole is kept too.
/// The bytes read back are the same either way.
struct SparseWriter<'a> {
    file: &'a mut std::fs::File,
    pos: u64,
    /// Whether the last bytes written were a hole (a seek): the size is then set at the end.
    hole_at_end: bool,
}

const HOLE_BLOCK: u64 = 4096;

impl<'a> SparseWriter<'a> {
    fn new(file: &'a mut std::fs::File) -> Self {
        SparseWriter {
            file,
            pos: 0,
            hole_at_end: false,
        }
    }

    fn finish(self) -> io::Result<()> {
        // Only a trailing hole leaves the file shorter than its content (one call saved a file).
        if self.hole_at_end {
            self.file.set_len(self.pos)?;
        }
        Ok(())
    }
}

impl io::Write for SparseWriter<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        use std::io::{Seek, SeekFrom};
        // Data between holes goes out in one write; only whole zero blocks are skipped.
        let (mut done, mut data_from) = (0, 0);
        while done < buf.len() {
            let room = (HOLE_BLOCK - (self.pos + done as u64) % HOLE_BLOCK) as usize;
            let end = (done + room).min(buf.len());
            let piece = &buf[done..end];
            if piece.len() as u64 == HOLE_BLOCK && piece.iter().all(|b| *b == 0) {
                self.file.write_all(&buf[data_from..done])?;
                self.file.seek(SeekFrom::Current(HOLE_BLOCK as i64))?;
                data_from = end;
            }
            done = end;
        }
        self.file.write_all(&buf[data_from..])?;
        if !buf.is_empty() {
            self.hole_at_end = data_from == buf.len();
        }
        self.pos += buf.len() as u64;
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.file.flush()
    }
}

/// A store error surfaced through the `io::Error` of a write callback keeps its own type, so a
/// missing object is still "checkpoint unavailable" and not a generic I/O failure.
fn unwrap_store(e: io::Error, path: &[u8]) -> Error {
    if e.get_ref()
        .is_some_and(|inner| inner.is::<rewind_store::Error>())
    {
        let inner = e
            .into_inner()
            .expect("checked")
            .downcast::<rewind_store::Error>()
            .expect("checked");
        return Error::Store(*inner);
    }
    Error::Io {
        op: "writing",
        path: relpath::display(path).into(),
        source: e,
    }
}

/// Reads the whole tree under `id` into a flat, sorted list of (path, entry) — for tests and
/// checks, not for hot paths.
pub fn flatten(store: &Store, id: ObjectId) -> Result<Vec<(Vec<u8>, Entry)>, Error> {
    fn go(
        store: &Store,
        id: ObjectId,
        dir: &[u8],
        out: &mut Vec<(Vec<u8>, Entry)>,
    ) -> Result<(), Error> {
        let tree: Tree = store.read_tree(&id)?;
        for e in tree.entries() {
            let path = relpath::join(dir, &e.name);
            out.push((path.clone(), Entry::from_tree_entry(e)));
            if e.kind == EntryKind::Dir {
                go(store, e.id, &path, out)?;
            }
        }
        Ok(())
    }
    let mut out = Vec::new();
    if !id.is_zero() {
        go(store, id, &[], &mut out)?;
    }
    Ok(out)
}

#[cfg(test)]
#[path = "restore_tests.rs"]
mod tests;
