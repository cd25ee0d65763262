//! Merging a worktree back into its parent, three-way against the worktree's base tree.
//!
//! Invariants:
//! - Only paths the worktree changed since its base are considered (a tree diff that skips
//!   every subtree whose id did not change: cost proportional to the change). A path the
//!   parent did not change since the base is taken from the worktree; one both changed the
//!   same way needs nothing; a text file both changed is merged line by line with the same
//!   three-way merge `restore --merge` uses (`crate::merge`), clean only when no hunks
//!   overlap or touch; anything else (overlapping lines, a delete against an edit, a kind or
//!   mode both changed, binary or huge files) is a conflict.
//! - With a conflict nothing is written unless forced; forced, the worktree's side is taken
//!   and what it overwrites is kept in the merge's epoch (as a forced restore keeps it).
//! - The plan is applied by the restore engine (`Workspace::finish_as`: write-ahead journal,
//!   all-or-nothing, failpoints, recovery), recorded as one restore epoch of the session with
//!   tool `worktree-merge`: `rewind undo` takes the whole merge back. There is no other
//!   writer.
//! - Content taken from the worktree is copied from the worktree's store into the parent's
//!   before the journal is written (each object verified by the read); a dry run reads and
//!   verifies it without storing anything in the parent.
//! - A merge that is applied moves the worktree's base to the worktree's tree it merged (copied
//!   whole into the parent's store first): write-ahead, its epoch id is named in
//!   `worktree.json` (`merging`) before anything is written, and the base is set from the
//!   parent's op log once that epoch is settled (`settle_pending_merge`), by this merge or,
//!   after a crash, by the next command. Merges of one worktree are serialised by the parent's
//!   lock, under which the base is read.

use rewind_store::{EntryKind, ObjectId, Store};

use super::link::{self, Linked, PendingMerge};
use crate::base::{failpoint, random_hex};
use crate::db::oplog::{self, EpochState};
use crate::fs::probe::tree_lookup;
use crate::fs::relpath;
use crate::model::entry::{same, Change, Entry, EntryView};
use crate::rewind::merge::{merge_texts, Unmerged};
use crate::rewind::{order_steps, Conflict, Provenance, RewindOptions, RewindOutcome};
use crate::workspace::registry::ws_dir;
use crate::workspace::{OpenOptions, Workspace};
use crate::Error;

/// How to merge a worktree.
#[derive(Clone, Debug, Default)]
pub struct WorktreeMergeOptions {
    /// Plan and check everything, write nothing in the parent.
    pub dry_run: bool,
    /// Take the worktree's side of every conflict (what it overwrites is kept).
    pub force: bool,
    /// How long to wait for a running tool call of the session.
    pub wait: Option<std::time::Duration>,
}

/// What merging a worktree did, or (dry run) would do.
#[derive(Debug)]
pub struct WorktreeMerged {
    /// The worktree's name.
    pub name: String,
    /// Its root.
    pub path: String,
    /// The base tree the merge was computed against.
    pub base: ObjectId,
    /// The worktree's tree that was merged.
    pub merged_tree: ObjectId,
    /// The plan and, unless a dry run or refused, its result (epoch `worktree-merge`).
    pub outcome: RewindOutcome,
}

/// One path the worktree changed since its base: `before` the base's entry, `after` the
/// worktree's.
/// The base is read from `from` (the parent's store, which keeps it), the tree now from `to`.
pub(crate) fn changed_since(
    from: &Store,
    base: ObjectId,
    to: &Store,
    now: ObjectId,
) -> Result<Vec<Change>, Error> {
    let mut out = Vec::new();
    walk((from, to), Some(base), Some(now), b"", &mut out)?;
    Ok(out)
}

fn entries(store: &Store, id: Option<ObjectId>) -> Result<Vec<rewind_store::TreeEntry>, Error> {
    match id {
        Some(id) if !id.is_zero() => Ok(store.read_tree(&id)?.into_entries()),
        _ => Ok(Vec::new()),
    }
}

/// Directory entries carry no id in a change (as `disk_entry` gives them): what a directory
/// is for a restore step is its kind and mode.
fn entry(e: &rewind_store::TreeEntry) -> Entry {
    let mut x = Entry::from_tree_entry(e);
    if x.kind == EntryKind::Dir {
        x.id = ObjectId::ZERO;
    }
    x
}

fn walk(
    stores: (&Store, &Store),
    a: Option<ObjectId>,
    b: Option<ObjectId>,
    dir: &[u8],
    out: &mut Vec<Change>,
) -> Result<(), Error> {
    if a == b {
        return Ok(());
    }
    let (xa, xb) = (entries(stores.0, a)?, entries(stores.1, b)?);
    for (x, y) in crate::base::merge_sorted(&xa, &xb, |e| &e.name, |e| &e.name) {
        let path = relpath::join(dir, &x.or(y).expect("one side").name);
        let (ex, ey) = (x.map(entry), y.map(entry));
        let sub = |e: Option<&rewind_store::TreeEntry>| {
            e.filter(|e| e.kind == EntryKind::Dir).map(|e| e.id)
        };
        let (da, db) = (sub(x), sub(y));
        let same_entry = match (x, y) {
            (Some(x), Some(y)) => {
                x.kind == y.kind && x.mode == y.mode && x.id == y.id && x.size == y.size
            }
            _ => false,
        };
        if same_entry {
            continue;
        }
        if !same(&ex, &ey) {
            out.push(Change {
                path: path.clone(),
                before: ex,
                after: ey,
            });
        }
        if da.is_some() || db.is_some() {
            walk(stores, da, db, &path, out)?;
        }
    }
    Ok(())
}

impl Workspace {
    /// Merges worktree `name` of this workspace into it (see the module's invariants).
    pub fn merge_worktree(
        &self,
        session: &str,
        name: &str,
        opts: &WorktreeMergeOptions,
    ) -> Result<WorktreeMerged, Error> {
        super::creating::settle(self)?;
        let linked = link::find(self.home(), self.id(), name)?;
        let wt = open_worktree(self, &linked)?;
        // The worktree's side, recorded in its own history (never in the parent's).
        let (wcap, _) = wt.snapshot(&format!("worktree merge into {}", self.id()), None)?;
        let wtree = wcap.root;

        let _lock = self.lock_when_session_idle(session, opts.wait)?;
        self.store().checkpoint_wal_on_close();
        self.recover_locked()?;
        // The base is read under the lock, once an earlier merge killed before it recorded its
        // outcome is settled: merges of one worktree follow each other.
        let linked = Linked {
            link: link::WorktreeLink::load(&ws_dir(self.home(), &linked.record.id))
                .unwrap_or(linked.link),
            record: linked.record,
        };
        let linked = settle_pending_merge(self, linked)?;
        let base = linked.link.base_id()?;
        refuse_missing_base(self, &linked, base)?;
        let wchanges = changed_since(self.store(), base, wt.store(), wtree)?;
        if !opts.dry_run {
            self.settle_session_epochs(session)?;
        }
        let mut found = self.capture_found(None)?;
        if !opts.dry_run {
            self.transaction(|| self.record_found(&found, session, None).map(drop))?;
            self.save_state(&mut found)?;
        }
        let ptree = found.capture.root;
        let mut out = plan(self, &wt, ptree, wchanges, opts.force)?;
        order_steps(&mut out.steps);
        // The worktree's content the plan writes: into this store (real run), or read and
        // verified where it is (dry run).
        let incoming: Vec<Change> = out
            .steps
            .iter()
            .filter(|s| !out.merged.iter().any(|m| m.path == s.path))
            .filter(|s| {
                s.after
                    .is_some_and(|a| matches!(a.kind, EntryKind::File | EntryKind::Symlink))
            })
            .cloned()
            .collect();
        if opts.dry_run {
            for s in &incoming {
                let a = s.after.expect("filtered");
                if !self.store().has(&a.id)? {
                    wt.store().read_content(&a.id, &mut std::io::sink())?;
                    out.verified_elsewhere.push(s.path.clone());
                }
            }
        }
        // What the merge will be recorded as: named in the worktree's record before anything of
        // it is written here, so a merge killed at any point is settled by the next command
        // (see `settle_pending_merge`).
        let applying = !opts.dry_run && (out.conflicts.is_empty() || opts.force);
        let mut pending = None;
        if applying {
            let epoch = random_hex();
            let mut link = linked.clone();
            link.link.merging = Some(PendingMerge {
                tree: wtree.to_hex(),
                epoch: epoch.clone(),
            });
            link.link.save(&ws_dir(self.home(), &link.record.id))?;
            pending = Some(link);
            let writer = self.store().writer()?;
            for s in &incoming {
                let a = s.after.expect("filtered");
                if self.store().has(&a.id)? {
                    continue;
                }
                let mut buf = Vec::with_capacity(a.size as usize);
                wt.store().read_content(&a.id, &mut buf)?;
                let (id, _) = writer.put_content(&mut buf.as_slice())?;
                if id != a.id {
                    return Err(Error::Unavailable(format!(
                        "worktree {name}: the content of {} read back as {id}, not {}",
                        relpath::display(&s.path),
                        a.id
                    )));
                }
            }
            writer.commit()?;
            // The tree merged becomes the base the next merge is computed against, which is
            // read from this store: the worktree's trees and file content are copied in.
            import_tree(self.store(), wt.store(), wtree)?;
        }
        let ropts = RewindOptions {
            dry_run: opts.dry_run,
            force: opts.force,
            mode: crate::rewind::Mode::FilesOnly,
            ..Default::default()
        };
        let provenance = Provenance {
            tool: "worktree-merge",
            note: format!(
                "merge of worktree {name} ({}, tree {})",
                linked.root().display(),
                &wtree.to_hex()[..12]
            ),
            epoch: pending
                .as_ref()
                .and_then(|l| l.link.merging.as_ref())
                .map(|m| m.epoch.clone()),
        };
        out.head = crate::db::oplog::session_head(&self.db(), session)?;
        if pending.is_some() {
            failpoint::hit("worktree-merge-before-journal");
        }
        let outcome = self.finish_as(session, out, &ropts, &provenance);
        if let Some(link) = pending {
            // Settled from the op log whatever `finish_as` returned: the base advances to the
            // tree merged once its epoch is settled; a merge that did not happen (refused,
            // rolled back) leaves the base as it was.
            failpoint::hit("worktree-merge-before-base");
            let settled = settle_pending_merge(self, link);
            if outcome.is_ok() {
                settled?;
            }
        }
        let outcome = outcome?;
        Ok(WorktreeMerged {
            name: name.to_string(),
            path: linked.root().display().to_string(),
            base,
            merged_tree: wtree,
            outcome,
        })
    }
}

/// Settles `w`'s record if a merge had begun when it was written (the parent's lock held, its
/// recovery done): the merge happened if the parent's op log has its restore epoch settled
/// (then the tree merged becomes the base); it did not if the epoch is not there (never
/// journalled, or rolled back: the base stays). An epoch still open (its journal not yet
/// finished, which recovery does) leaves the record as it is, for the next command.
pub(crate) fn settle_pending_merge(parent: &Workspace, mut w: Linked) -> Result<Linked, Error> {
    let Some(m) = w.link.merging.clone() else {
        return Ok(w);
    };
    match oplog::epoch(&parent.db(), &m.epoch)? {
        Some(e) if e.state == EpochState::Open => return Ok(w),
        Some(e) if e.state == EpochState::Settled => w.link.base = m.tree,
        _ => {}
    }
    w.link.merging = None;
    w.link.save(&ws_dir(parent.home(), &w.record.id))?;
    Ok(w)
}

/// Copies the worktree's tree `id` into `to` where it is missing: its trees and the content of
/// its files, each read back verified and checked against its id. A subtree `to` has is not
/// read: a tree is stored only after everything it names. Uncovered files have no content.
fn import_tree(to: &Store, from: &Store, id: ObjectId) -> Result<(), Error> {
    fn import(
        to: &Store,
        from: &Store,
        writer: &rewind_store::Writer<'_>,
        id: ObjectId,
    ) -> Result<(), Error> {
        if id.is_zero() || to.has(&id)? {
            return Ok(());
        }
        let tree = from.read_tree(&id)?;
        for e in tree.entries() {
            match e.kind {
                EntryKind::Dir => import(to, from, writer, e.id)?,
                EntryKind::File | EntryKind::Symlink => {
                    if e.id.is_zero() || to.has(&e.id)? {
                        continue;
                    }
                    let mut buf = Vec::with_capacity(e.size.min(16 << 20) as usize);
                    from.read_content(&e.id, &mut buf)?;
                    let (got, _) = writer.put_content(&mut buf.as_slice())?;
                    if got != e.id {
                        return Err(Error::Unavailable(format!(
                            "the worktree's object {} read back as {got}",
                            e.id
                        )));
                    }
                }
                EntryKind::Uncovered => {}
            }
        }
        let got = writer.put_tree(&tree)?;
        if got != id {
            return Err(Error::Unavailable(format!(
                "the worktree's tree {id} read back as {got}"
            )));
        }
        Ok(())
    }
    let writer = to.writer()?;
    import(to, from, &writer, id)?;
    writer.commit()?;
    Ok(())
}

/// Opens a worktree's own workspace; its directory must still be there.
pub(crate) fn open_worktree(parent: &Workspace, linked: &Linked) -> Result<Workspace, Error> {
    let root = linked.root();
    if !root.is_dir() {
        return Err(Error::State(format!(
            "worktree {}: its directory {} is gone; `rewind worktree discard {} --force` \
             forgets it",
            linked.link.name,
            root.display(),
            linked.link.name
        )));
    }
    Workspace::open(
        &root,
        &OpenOptions {
            force: false,
            home: Some(parent.home().to_path_buf()),
        },
    )
}

fn refuse_missing_base(parent: &Workspace, linked: &Linked, base: ObjectId) -> Result<(), Error> {
    if base.is_zero() || parent.store().has(&base)? {
        return Ok(());
    }
    Err(Error::Unavailable(format!(
        "worktree {}: its base tree {base} is not in this workspace's store; nothing was merged",
        linked.link.name
    )))
}

/// Who changed a conflicting path, for the report.
const BOTH: &str = "this workspace and the worktree both changed it since the worktree was made";

fn plan(
    parent: &Workspace,
    wt: &Workspace,
    ptree: ObjectId,
    wchanges: Vec<Change>,
    force: bool,
) -> Result<RewindOutcome, Error> {
    let mut out = RewindOutcome::default();
    // Paths under a directory the worktree removed whose removal is refused stay; so do the
    // removals of their ancestors (a removal that would fail is a conflict, not a half-step).
    for c in wchanges {
        let (b, w) = (c.before, c.after);
        let p = tree_lookup(parent.store(), ptree, &c.path)?;
        if [b, w, p]
            .iter()
            .any(|e| e.is_some_and(|e| e.kind == EntryKind::Uncovered))
        {
            out.skipped.push(crate::restore::Skipped {
                path: c.path,
                reason: "left as it is: its content was not captured on one side".into(),
            });
            continue;
        }
        if same(&p, &w) {
            continue;
        }
        if same(&p, &b) {
            out.steps.push(Change {
                path: c.path,
                before: p,
                after: w,
            });
            continue;
        }
        // Both sides changed it, differently.
        let why = match (b, w, p) {
            (Some(bb), Some(ww), Some(pp))
                if [bb.kind, ww.kind, pp.kind]
                    .iter()
                    .all(|k| *k == EntryKind::File) =>
            {
                let mode = if pp.mode == bb.mode {
                    ww.mode
                } else if ww.mode == bb.mode || ww.mode == pp.mode {
                    pp.mode
                } else {
                    0
                };
                if mode == 0 {
                    Unmerged::Mode.reason()
                } else {
                    let read = |s: &Store, e: &Entry| -> Result<Vec<u8>, Error> {
                        let mut v = Vec::with_capacity(e.size.min(16 << 20) as usize);
                        if e.size <= 16 << 20 {
                            s.read_content(&e.id, &mut v)?;
                        }
                        Ok(v)
                    };
                    let big = [bb.size, ww.size, pp.size].iter().any(|s| *s > 16 << 20);
                    let merged = if big {
                        Err(Unmerged::NotText("too big to merge"))
                    } else {
                        let (anc, ours, theirs) = (
                            read(parent.store(), &bb)?,
                            read(wt.store(), &ww)?,
                            read(parent.store(), &pp)?,
                        );
                        merge_texts(&c.path, &anc, &ours, &theirs, mode)?
                    };
                    match merged {
                        Ok(m) => {
                            out.steps.push(Change {
                                path: c.path,
                                before: p,
                                after: Some(m.entry),
                            });
                            out.merged.push(m);
                            continue;
                        }
                        Err(u) => {
                            let overlaps = match &u {
                                Unmerged::Overlaps(o) => o.clone(),
                                _ => Vec::new(),
                            };
                            out.conflicts
                                .push(conflict(&c.path, b, p, u.reason(), overlaps));
                            if force {
                                out.steps.push(Change {
                                    path: c.path,
                                    before: p,
                                    after: w,
                                });
                            }
                            continue;
                        }
                    }
                }
            }
            (Some(_), None, Some(_)) => "deleted in the worktree, changed here".to_string(),
            (Some(_), Some(_), None) => "changed in the worktree, deleted here".to_string(),
            (None, Some(_), Some(_)) => "created on both sides with different content".to_string(),
            (_, Some(ww), Some(pp)) if ww.kind != pp.kind => {
                "a different kind on each side (file, directory, symlink)".to_string()
            }
            (_, Some(ww), Some(pp)) if ww.kind == EntryKind::Dir && pp.kind == EntryKind::Dir => {
                // A directory whose mode both changed; its content is merged path by path.
                Unmerged::Mode.reason()
            }
            _ => "changed differently on both sides (not text files)".to_string(),
        };
        out.conflicts.push(conflict(&c.path, b, p, why, Vec::new()));
        if force {
            out.steps.push(Change {
                path: c.path,
                before: p,
                after: w,
            });
        }
    }
    Ok(out)
}

fn conflict(
    path: &[u8],
    base: Option<Entry>,
    now: Option<Entry>,
    why: String,
    overlaps: Vec<crate::merge::Overlap>,
) -> Conflict {
    Conflict {
        path: path.to_vec(),
        expected: base.as_ref().map(EntryView::from),
        current: now.as_ref().map(EntryView::from),
        changed_by: BOTH.into(),
        unmerged: Some(why),
        overlaps,
    }
}
