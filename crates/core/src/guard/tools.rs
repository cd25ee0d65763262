//! The guarded tools that write: write, edit and apply-patch, each one exact epoch.

use std::collections::{BTreeMap, BTreeSet};
use std::os::unix::fs::MetadataExt;

use rewind_store::EntryKind;

use crate::base::now_ns;
use crate::db;
use crate::db::oplog::{self, EpochState};
use crate::fs::relpath;
use crate::fs::root::RootDir;
use crate::model::entry::Entry;
use crate::model::guard::{ChangedBy, Fingerprint, GuardRefusal, RefusalKind};
use crate::record::{EpochSpec, Settled};
use crate::restore::{self, ApplyOptions, Interrupted, RestorePlan, StepFailpoints};
use crate::text::edit::{self, EditSpec};
use crate::text::patch::{self, PatchOp};
use crate::workspace::Workspace;
use crate::Error;

use super::*;

/// The failpoints a guarded write passes (see `docs/format.md`).
const GUARD_FAILPOINTS: StepFailpoints = StepFailpoints {
    before_remove: Some("guard-before-remove"),
    before_write: Some("guard-before-write"),
    after_step: "guard-after-step",
};

impl Workspace {
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

    pub(super) fn write_whole(
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

    /// Guarded exact string replacement in an existing file (see [`crate::text::edit`]).
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

    pub(super) fn edit_whole(
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
            return Err(tool_err(rel, "no such file").remedy(crate::model::remedy::Remedy::Write));
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

    /// Guarded, all-or-nothing application of a unified diff (see [`crate::text::patch`]): every
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
    pub(super) fn commit(
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
            owner_pid: None,
            note: None,
        };
        let _lock = self.lock(crate::workspace::lock::default_wait(), "guarded write")?;
        crate::base::trace::phase("epoch begin: locked");
        // The new contents are written and fsynced, under no name yet, while the epoch's
        // opening commit is made durable: the two fsyncs overlap instead of adding up. Nothing
        // is in place before the epoch is recorded; a refused write drops them unseen.
        let (epoch, staged) = std::thread::scope(|s| {
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
                // A large file the epoch cloned: its id is not a content hash (the guard's is).
                (Some(b), Some(n))
                    if b.kind == n.kind
                        && b.size == n.size
                        && n.size >= rewind_store::CLONE_FROM =>
                {
                    self.store().packed_id(&n.id)? == b.id
                }
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
        let steps = plan.steps();
        let opts = ApplyOptions {
            durable: DURABLE,
            // One by one: a failure must leave exactly the steps before it done (put back
            // below), and its few files are staged already.
            batch: false,
            given: plan.given(),
            staged,
            failpoints: GUARD_FAILPOINTS,
        };
        let steps_plan = RestorePlan {
            steps,
            skipped: Vec::new(),
        };
        let written = match restore::apply(root, self.store(), &steps_plan, opts) {
            Ok(applied) => applied.files,
            Err(Interrupted { cause, steps_done }) => {
                // Best effort, step by step: each path done is put back as the epoch's
                // preimage has it (the failed step did nothing: the guard's steps each write,
                // remove or make one path). What cannot be put back (content never captured, a
                // step that fails again) is still recorded by the aborted epoch.
                for mut back in restore::inverse(&steps_plan.steps, steps_done) {
                    let Some(before) = pre.get(&back.path) else {
                        continue;
                    };
                    back.after = *before;
                    let one = RestorePlan {
                        steps: vec![back],
                        skipped: Vec::new(),
                    };
                    let _ = restore::apply(root, self.store(), &one, ApplyOptions::from_store());
                }
                let _ = abort();
                return Err(cause);
            }
        };
        crate::base::trace::phase("guard: written");
        crate::base::failpoint::hit("guard-before-settle");
        // The session now knows these files as it left them: its fingerprints are refreshed in
        // the settle's transaction. That commit is not flushed (as every exact epoch's settle):
        // what must survive a power cut already has, the open epoch and its preimages
        // (committed durably by `begin_epoch_locked`) and the written files (fsynced before
        // their renames).
        let now = now_ns();
        let mut refresh = |pos: i64| -> Result<(), Error> {
            for op in &plan.ops {
                match (&op.after, written.get(&op.path)) {
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
                        db::fingerprints::forget(&self.db(), session, &op.path)?;
                    }
                }
            }
            Ok(())
        };
        let settled =
            self.settle_locked_with(&epoch, EpochState::Settled, false, Some(&mut refresh))?;
        crate::base::trace::phase("guard: settled");
        Ok(settled)
    }
}

/// The patch line of a failing hunk.
pub(super) fn e_line(f: &patch::FilePatch, e: &patch::HunkError) -> usize {
    f.hunks.get(e.hunk - 1).map_or(f.line, |h| h.line)
}
