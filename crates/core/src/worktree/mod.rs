//! Worktrees (layer ③): an isolated copy of a workspace (or of one of its checkpoints' trees)
//! for an agent to work in, registered as a workspace of its own and linked to its parent and
//! the tree it started from; merged back three-way with a preview, or discarded.
//!
//! | module  | what it is                                                            |
//! |---------|-----------------------------------------------------------------------|
//! | `link`  | `worktree.json`: the link to the parent and the base tree; names       |
//! | `copy`  | materialising a tree into the new directory (reflinks, a stat cache)   |
//! | `merge` | the three-way plan and its application through the restore engine      |
//! | `creating` | the record of a create under way; finishing or rolling back a killed one |
//!
//! Invariants:
//! - A worktree is an ordinary workspace: its own op log, sessions, read fingerprints (the
//!   guard) and store. Its store starts with the parent's object index (packs hard-linked:
//!   packs are immutable; the copy's *files* are never hard-linked), so its first capture
//!   stores and hashes nothing it does not have to.
//! - Its history starts with one snapshot, the base tree, and a stat cache for the copy;
//!   nothing of the parent's history is copied (its sessions start empty).
//! - The parent's history records nothing of the worktree but the merge (one restore epoch,
//!   tool `worktree-merge`); the parent's gc keeps every worktree's base tree.
//! - Creating writes only the new directory and the new workspace's state (plus its own record
//!   in the parent's state directory while it runs); a failure removes the directory again if
//!   this call made it, and a create killed half-way is finished or rolled back by the parent's
//!   next `worktree` command (`creating`). Discarding removes the copy, then its state.
//! - A merge moves the worktree's base to the tree it merged, which it copies into the parent's
//!   store; the merge's epoch is named in `worktree.json` before anything is written, so a merge
//!   killed at any point is settled from the parent's op log (`merge::settle_pending_merge`).

pub(crate) mod copy;
mod creating;
pub(crate) mod link;
mod merge;

pub use link::{check_name, WorktreeLink, WORKTREES_DIR};
pub use merge::{WorktreeMergeOptions, WorktreeMerged};

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use rewind_store::ObjectId;
use serde::Serialize;

use crate::base::now_ns;
use crate::db::{self, oplog};
use crate::rewind::{refuse_collected_checkpoint, Target};
use crate::workspace::lock;
use crate::workspace::registry::{forget, ws_dir};
use crate::workspace::{OpenOptions, Workspace};
use crate::Error;
use link::Linked;

/// How to create a worktree.
#[derive(Clone, Debug, Default)]
pub struct WorktreeCreateOptions {
    /// Start from this checkpoint's tree (id, prefix or message id of the session) instead of
    /// the workspace as it is now.
    pub from: Option<String>,
    /// Put the copy here (a directory that does not exist yet, or is empty) instead of
    /// `$REWIND_HOME/worktrees/<workspace id>/<name>`.
    pub path: Option<PathBuf>,
    /// Copy ignored files too (never `.git`).
    pub include_ignored: bool,
}

/// A worktree that was created.
#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub struct CreatedWorktree {
    /// Its name.
    pub name: String,
    /// Its workspace id.
    pub id: String,
    /// Its root: run commands there with `rewind -C PATH …`.
    pub path: String,
    /// The parent workspace's id.
    pub parent: String,
    /// The tree it starts from (hex).
    pub base: String,
    /// The checkpoint it was made from, if `--from` was given.
    pub from: Option<String>,
    /// Regular files copied.
    pub files: u64,
    /// Their bytes.
    pub bytes: u64,
    /// Whether the file system cloned file content (reflinks, `FICLONE`) rather than copying.
    pub reflinks: bool,
    /// How many files were cloned.
    pub reflinked: u64,
    /// Paths not copied, and why.
    pub skipped: Vec<crate::restore::Skipped>,
}

/// A worktree as `worktree list` shows it.
#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub struct WorktreeInfo {
    /// Its name.
    pub name: String,
    /// Its workspace id.
    pub id: String,
    /// Its root.
    pub path: String,
    /// The tree it started from, or (after a merge) the tree merged last (hex).
    pub base: String,
    /// The checkpoint it was made from, if any.
    pub from: Option<String>,
    /// When it was made, ns since the Unix epoch.
    pub created_ns: i64,
    /// Whether its directory is still there.
    pub present: bool,
    /// Paths the worktree changed since its base (as it is now); `None` if it is gone.
    pub worktree_changes: Option<u64>,
    /// Paths this workspace changed since that base (as it is now).
    pub parent_changes: u64,
    /// Sessions that recorded anything in it.
    pub sessions: Vec<String>,
}

/// A discarded worktree.
#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub struct DiscardedWorktree {
    /// Its name.
    pub name: String,
    /// Its workspace id (its history is deleted).
    pub id: String,
    /// The directory removed.
    pub path: String,
    /// Paths it had changed that this workspace does not have (lost, with `--force`).
    pub unmerged: Vec<String>,
}

fn absolute(p: &Path) -> Result<PathBuf, Error> {
    let p = if p.is_absolute() {
        p.to_path_buf()
    } else {
        std::env::current_dir()
            .map_err(Error::io("resolving", p))?
            .join(p)
    };
    // The parent must exist to resolve symlinks in it; the last component is made here.
    let (Some(parent), Some(name)) = (p.parent(), p.file_name()) else {
        return Err(Error::Usage(format!(
            "{} cannot be a worktree",
            p.display()
        )));
    };
    std::fs::create_dir_all(parent).map_err(Error::io("creating", parent))?;
    Ok(std::fs::canonicalize(parent)
        .map_err(Error::io("resolving", parent))?
        .join(name))
}

impl Workspace {
    /// Makes worktree `name`: a copy of the workspace now (captured first) or of a
    /// checkpoint's tree, registered as a workspace linked to this one.
    pub fn create_worktree(
        &self,
        session: &str,
        name: &str,
        opts: &WorktreeCreateOptions,
    ) -> Result<CreatedWorktree, Error> {
        check_name(name)?;
        creating::settle(self)?;
        let home = self.home().to_path_buf();
        if let Some(w) = link::worktrees_of(&home, self.id())
            .into_iter()
            .find(|w| w.link.name == name)
        {
            return Err(Error::State(format!(
                "this workspace has a worktree named {name} already (at {}); pick another name, \
                 or `rewind worktree discard {name}` first",
                w.root().display()
            )));
        }
        let dest = match &opts.path {
            Some(p) => absolute(p)?,
            None => link::default_root(&home, self.id(), name),
        };
        let root = self.root();
        if dest.starts_with(root) || root.starts_with(&dest) {
            return Err(Error::Workspace(format!(
                "{} overlaps the workspace {}: a worktree must be outside it (leave out --path to \
                 put it under the state directory)",
                dest.display(),
                root.display()
            )));
        }
        if dest.starts_with(&home) && !dest.starts_with(home.join(WORKTREES_DIR)) {
            return Err(Error::Workspace(format!(
                "{} is inside the state directory {}; choose a directory outside it",
                dest.display(),
                home.display()
            )));
        }
        let make = match crate::fs::Destination::of(&dest)? {
            crate::fs::Destination::Absent => true,
            crate::fs::Destination::Empty => false,
            crate::fs::Destination::NotEmpty => {
                return Err(Error::State(format!(
                    "{} exists and is not empty; give --path a new or empty directory",
                    dest.display()
                )))
            }
            crate::fs::Destination::NotADirectory => {
                return Err(Error::State(format!(
                    "{} exists and is not a directory; give --path a new or empty directory",
                    dest.display()
                )))
            }
        };
        // Recorded before anything is made: a create killed from here on is finished or rolled
        // back by the next `worktree` command (see `creating`).
        let intent = creating::Creating::begin(self, name, &dest, make)?;
        let mut made = false;
        if make {
            let mkdir = || -> Result<(), Error> {
                if let Some(parent) = dest.parent() {
                    std::fs::create_dir_all(parent).map_err(Error::io("creating", parent))?;
                }
                std::fs::create_dir(&dest).map_err(Error::io("creating", &dest))
            };
            if let Err(e) = mkdir() {
                intent.end(self);
                return Err(e);
            }
            made = true;
        }
        let result = self.fill_worktree(session, name, opts, &dest);
        if result.is_ok() {
            crate::base::failpoint::hit("worktree-create-before-done");
        }
        if result.is_err() {
            if made {
                let _ = std::fs::remove_dir_all(&dest);
            } else if let Ok(rd) = std::fs::read_dir(&dest) {
                for e in rd.flatten() {
                    let p = e.path();
                    let _ = if e.file_type().is_ok_and(|t| t.is_dir()) {
                        std::fs::remove_dir_all(&p)
                    } else {
                        std::fs::remove_file(&p)
                    };
                }
            }
        }
        intent.end(self);
        result
    }

    fn fill_worktree(
        &self,
        session: &str,
        name: &str,
        opts: &WorktreeCreateOptions,
        dest: &Path,
    ) -> Result<CreatedWorktree, Error> {
        let home = self.home().to_path_buf();
        let (base, mut made, from) = match &opts.from {
            Some(text) => {
                let Target::Checkpoint(c) = self.resolve(session, text)? else {
                    return Err(Error::State(format!(
                        "{text} is an epoch; --from takes a checkpoint (or its message id)"
                    )));
                };
                refuse_collected_checkpoint(&c)?;
                let m = copy::materialise(self.store(), c.root, None, dest)?;
                (c.root, m, Some(c.id))
            }
            None => {
                let (cap, _) = self.snapshot(&format!("worktree {name}"), None)?;
                let rootdir = self.rootdir()?;
                let src = copy::Source {
                    root: &rootdir,
                    state: &cap.state,
                    started_ns: cap.started_ns,
                };
                let m = copy::materialise(self.store(), cap.root, Some(&src), dest)?;
                (cap.root, m, None)
            }
        };
        if opts.include_ignored {
            copy::copy_untracked(self.root(), dest, &mut made)?;
        }
        crate::base::failpoint::hit("worktree-create-after-copy");
        let open = OpenOptions {
            force: false,
            home: Some(home.clone()),
        };
        let wt = Workspace::open(dest, &open)?;
        {
            // Under this workspace's lock gc cannot remove a pack while its index is copied.
            let _lock = self.lock(lock::default_wait(), "worktree create")?;
            db::copy_store_index(&wt.db(), &self.state_dir().join("meta.sqlite"))?;
            rewind_store::link_store_files(
                &self.state_dir().join("packs"),
                &wt.state_dir().join("packs"),
            )?;
        }
        drop(wt);
        // Reopened: the store reads the index it now has.
        let wt = Workspace::open(dest, &open)?;
        let state_path = wt.state_dir().join("state.bin");
        let born = now_ns();
        let pos = wt.transaction(|| {
            let pos = oplog::next_pos(&wt.db())?;
            db::snapshots::insert(&wt.db(), &base, born, &format!("worktree {name}"), pos)?;
            Ok(pos)
        })?;
        made.state.pos = pos;
        made.state.save(&state_path)?;
        crate::base::failpoint::hit("worktree-create-before-link");
        let link = WorktreeLink {
            name: name.to_string(),
            parent: self.id().to_string(),
            base: base.to_hex(),
            from: from.clone(),
            created_ns: born,
            merging: None,
        };
        link.save(wt.state_dir())?;
        Ok(CreatedWorktree {
            name: name.to_string(),
            id: wt.id().to_string(),
            path: dest.display().to_string(),
            parent: self.id().to_string(),
            base: base.to_hex(),
            from,
            files: made.files,
            bytes: made.bytes,
            reflinks: made.reflinked > 0,
            reflinked: made.reflinked,
            skipped: made
                .skipped
                .into_iter()
                .map(|(path, reason)| crate::restore::Skipped { path, reason })
                .collect(),
        })
    }

    /// This workspace's worktrees, with the changes on each side since their bases.
    pub fn list_worktrees(&self) -> Result<Vec<WorktreeInfo>, Error> {
        creating::settle(self)?;
        let all = link::worktrees_of(self.home(), self.id());
        if all.is_empty() {
            return Ok(Vec::new());
        }
        // Interrupted merges first: settling one may finish its restore here.
        let all = all
            .into_iter()
            .map(|w| self.settled(w))
            .collect::<Result<Vec<_>, Error>>()?;
        let now = self.capture_found(None)?.capture.root;
        let mut out = Vec::new();
        for w in all {
            let base = w.link.base_id()?;
            let parent_changes = if self.store().has(&base)? || base.is_zero() {
                merge::changed_since(self.store(), base, self.store(), now)?.len() as u64
            } else {
                0
            };
            let present = w.root().is_dir();
            let (worktree_changes, sessions) = if present {
                let wt = merge::open_worktree(self, &w)?;
                let tree = wt.capture_found(None)?.capture.root;
                let n = merge::changed_since(self.store(), base, wt.store(), tree)?.len() as u64;
                let sessions = oplog::sessions(&wt.db())?
                    .into_iter()
                    .map(|(s, _)| s)
                    .collect();
                (Some(n), sessions)
            } else {
                (None, Vec::new())
            };
            out.push(WorktreeInfo {
                name: w.link.name.clone(),
                id: w.record.id.clone(),
                path: w.root().display().to_string(),
                base: w.link.base.clone(),
                from: w.link.from.clone(),
                created_ns: w.link.created_ns,
                present,
                worktree_changes,
                parent_changes,
                sessions,
            });
        }
        Ok(out)
    }

    /// The root of worktree `name`.
    pub fn worktree_path(&self, name: &str) -> Result<PathBuf, Error> {
        creating::settle(self)?;
        Ok(link::find(self.home(), self.id(), name)?.root())
    }

    /// `w` with a merge that was killed before it recorded its outcome settled (under this
    /// workspace's lock, after its recovery; see `merge::settle_pending_merge`).
    fn settled(&self, w: Linked) -> Result<Linked, Error> {
        if w.link.merging.is_none() {
            return Ok(w);
        }
        let _lock = self.lock(lock::default_wait(), "worktree")?;
        self.recover_locked()?;
        // Read again under the lock: the merge may have been settled meanwhile.
        let Some(link) = WorktreeLink::load(&ws_dir(self.home(), &w.record.id)) else {
            return Ok(w);
        };
        merge::settle_pending_merge(
            self,
            Linked {
                record: w.record,
                link,
            },
        )
    }

    /// Removes worktree `name`: its directory, then its history. Refused while it holds
    /// changes this workspace does not have (merge them, or `force` to lose them).
    pub fn discard_worktree(&self, name: &str, force: bool) -> Result<DiscardedWorktree, Error> {
        creating::settle(self)?;
        let w = self.settled(link::find(self.home(), self.id(), name)?)?;
        let root = w.root();
        let mut unmerged = Vec::new();
        if root.is_dir() {
            let wt = merge::open_worktree(self, &w)?;
            let base = w.link.base_id()?;
            let tree = wt.capture_found(None)?.capture.root;
            let now = self.capture_found(None)?.capture.root;
            for c in merge::changed_since(self.store(), base, wt.store(), tree)? {
                let here = crate::fs::probe::tree_lookup(self.store(), now, &c.path)?;
                if !crate::model::entry::same(&here, &c.after) {
                    unmerged.push(crate::fs::relpath::display(&c.path));
                }
            }
            if !unmerged.is_empty() && !force {
                let n = unmerged.len();
                let some: Vec<&str> = unmerged.iter().take(5).map(String::as_str).collect();
                return Err(Error::State(format!(
                    "worktree {name} has {n} change(s) this workspace does not have ({}{}); \
                     `rewind worktree merge {name}` brings them here, `rewind worktree discard \
                     {name} --force` throws them away",
                    some.join(", "),
                    if n > some.len() { ", …" } else { "" }
                )));
            }
            // Its lock: no command of the worktree runs while its files go.
            let _lock = wt.lock(lock::default_wait(), "worktree discard")?;
            let same_dir = std::fs::symlink_metadata(&root).is_ok_and(|m| w.record.same_dir(&m));
            if same_dir {
                std::fs::remove_dir_all(&root).map_err(Error::io("removing", &root))?;
            }
            // `forget` takes the lock itself.
            drop(_lock);
            drop(wt);
        }
        forget(self.home(), Path::new(&w.record.id), false)?;
        Ok(DiscardedWorktree {
            name: name.to_string(),
            id: w.record.id.clone(),
            path: root.display().to_string(),
            unmerged,
        })
    }
}

/// The sessions recorded in each live worktree (its directory is there) of workspace
/// `parent`: session → worktree names. While a session works in a worktree, views of the
/// parent's history (the shadow history) can leave that session out.
pub fn sessions_in_worktrees(
    home: &Path,
    parent: &str,
) -> Result<BTreeMap<String, Vec<String>>, Error> {
    let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for w in link::worktrees_of(home, parent) {
        if !w.root().is_dir() {
            continue;
        }
        let dir = ws_dir(home, &w.record.id);
        for s in db::read_sessions(&dir.join("meta.sqlite"))? {
            out.entry(s).or_default().push(w.link.name.clone());
        }
    }
    Ok(out)
}

/// The base trees of the worktrees of workspace `parent` (live or not): what the parent's gc
/// must keep.
pub(crate) fn base_trees(home: &Path, parent: &str) -> Vec<ObjectId> {
    let mut out = Vec::new();
    for w in link::worktrees_of(home, parent) {
        out.extend(w.link.base_id().ok());
        // A merge under way (or killed): its tree may become the base.
        out.extend(
            w.link
                .merging
                .as_ref()
                .and_then(|m| ObjectId::from_hex(&m.tree)),
        );
    }
    out
}
