//! Layer ②, the shadow history: every checkpoint as a commit of a bare git repository of
//! Rewind's own (`<state dir>/shadow.git`), on a branch per session, so `git log -p` works on
//! a session's turns. A view of the op log, never a second source of truth: nothing reads it
//! back to restore (Rule B: rewinds are read from the op log), and it can be deleted and
//! written again from the op log at any time (`rewind shadow-path --rebuild`).
//!
//! Invariants:
//! - Only `refs/heads/<escaped session>` ([`refname`]) are written, each by compare-and-swap
//!   from the head this process read; history is only ever appended (a restore is a new
//!   commit, never a reset of the branch). `HEAD` names the branch written last.
//! - A branch's head commit says how far it has caught up (its `Rewind-Pos` trailer,
//!   [`message`]); the catch-up writes the session's checkpoints and settled restores after
//!   that position, in op-log order. A commit is written after its blobs and trees, and the
//!   branch is moved after the commit: a process killed anywhere leaves the branch at a commit
//!   whose objects are all there, plus unreferenced objects that the next catch-up reuses.
//! - The first shadow commit of a tree is written on demand (`shadow-path`), never by `init`
//!   or a checkpoint; after that, with `[shadow] eager` (the default), a checkpoint writes its
//!   commit itself, incrementally ([`convert`]), and gives up rather than waits or converts a
//!   whole tree.
//! - Uncaptured paths (ignored, over the size cap, unreadable) are absent; collected
//!   checkpoints that were not written before gc are skipped.
//! - A session working in a worktree is skipped (Rule A, [`away`]).

mod away;
mod convert;
mod message;
pub(crate) mod refname;
mod repo;

use std::collections::HashMap;
use std::path::PathBuf;

use gix::ObjectId as GitId;
use rewind_store::ObjectId;
use serde::Serialize;

use crate::base::failpoint;
use crate::db::{oplog, shadow as q};
use crate::model::oplog::{CheckpointRow, EpochKind, EpochRow, EpochState};
use crate::workspace::Workspace;
use crate::Error;

pub use crate::error::ShadowError;

/// For `map_err`: a gix error while doing `what`.
pub(crate) fn git<E: std::fmt::Display>(what: &'static str) -> impl FnOnce(E) -> Error {
    move |e| {
        Error::Shadow(ShadowError {
            what,
            message: e.to_string(),
        })
    }
}

/// What bringing the shadow history up to date did.
#[derive(Clone, Debug, Default, Serialize, schemars::JsonSchema)]
pub struct ShadowReport {
    /// The git directory: `git --git-dir PATH log -p SESSION`.
    #[schemars(with = "String")]
    pub git_dir: PathBuf,
    /// The repository was created by this call.
    pub created: bool,
    /// The repository was deleted and written again from the op log (asked for, or it could
    /// not be read).
    pub rebuilt: bool,
    /// Commits written by this call.
    pub commits: u64,
    /// Blobs looked at for them (written, or found already there).
    pub blobs: u64,
    /// Every session's branch.
    pub branches: Vec<ShadowBranch>,
    /// Sessions skipped because they work in a worktree (Rule A).
    pub away: Vec<String>,
}

/// One session's branch.
#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub struct ShadowBranch {
    /// The session.
    pub session: String,
    /// Its branch: `refs/heads/` and the session name escaped (see `docs/format.md`).
    pub branch: String,
    /// Its head commit (40 hex digits); absent while it has none.
    pub head: Option<String>,
    /// Commits this call added to it.
    pub commits: u64,
}

/// One thing of the op log that becomes a commit.
enum Event {
    Checkpoint(CheckpointRow),
    Restore(EpochRow),
}

impl Event {
    fn pos(&self) -> i64 {
        match self {
            Event::Checkpoint(c) => c.pos,
            Event::Restore(e) => e.pos,
        }
    }
}

/// A Rewind tree and the git tree converted from it: the base of an incremental conversion.
#[derive(Clone, Copy)]
struct Base {
    rewind: ObjectId,
    git: GitId,
}

/// How hard a catch-up tries.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Effort {
    /// Everything, the first conversion of a whole tree included.
    Full,
    /// After a checkpoint: only incremental conversions; stop at the first that is not.
    Incremental,
}

impl Workspace {
    /// The shadow repository's git directory (whether or not it exists yet).
    pub fn shadow_dir(&self) -> PathBuf {
        self.state_dir().join(repo::DIR)
    }

    /// Brings the shadow history up to date with the op log (creating the repository on first
    /// use; `rebuild`: deleting it first) and says where it is. Waits for another writer of
    /// it (bounded, then [`Error::Busy`]).
    pub fn shadow_sync(&self, rebuild: bool) -> Result<ShadowReport, Error> {
        let state = self.state_dir();
        let _lock = repo::lock(state, crate::workspace::lock::default_wait())?;
        repo::clean(state)?;
        let mut report = ShadowReport {
            git_dir: self.shadow_dir(),
            ..Default::default()
        };
        if rebuild {
            repo::remove(state)?;
            report.rebuilt = true;
        }
        let repo = match repo::open(state) {
            Ok(Some(r)) => r,
            Ok(None) => {
                report.created = !report.rebuilt;
                repo::create(state)?
            }
            // A view: what cannot be read is written again.
            Err(_) => {
                repo::remove(state)?;
                report.rebuilt = true;
                repo::create(state)?
            }
        };
        let sessions: Vec<String> = oplog::sessions(&self.db())?
            .into_iter()
            .map(|(s, _)| s)
            .collect();
        self.catch_up(&repo, &sessions, Effort::Full, &mut report)?;
        Ok(report)
    }

    /// After a checkpoint of `session`: its commit (and any other pending ones of the session),
    /// when `[shadow] eager` is on, the repository exists, nobody else is writing it and every
    /// conversion is incremental. A view: a failure here is not the checkpoint's, and the next
    /// `shadow-path` catches up.
    pub(crate) fn shadow_after_checkpoint(&self, session: &str) {
        if !self.config().shadow.eager() || !self.shadow_dir().exists() {
            return;
        }
        let state = self.state_dir();
        let Ok(_lock) = repo::lock(state, std::time::Duration::ZERO) else {
            return;
        };
        let mut report = ShadowReport::default();
        let run = repo::clean(state).and_then(|()| match repo::open(state)? {
            Some(repo) => self.catch_up(
                &repo,
                &[session.to_string()],
                Effort::Incremental,
                &mut report,
            ),
            None => Ok(()),
        });
        // Nothing to report to: the checkpoint is recorded, and `shadow-path` (which catches up
        // the same way) says what stands in the way.
        drop(run);
    }

    /// Writes the pending commits of `sessions`. Hold the lock.
    fn catch_up(
        &self,
        repo: &gix::Repository,
        sessions: &[String],
        effort: Effort,
        report: &mut ShadowReport,
    ) -> Result<(), Error> {
        let away = away::sessions_away(self)?;
        let mut shared: Option<Option<Base>> = None;
        let mut blobs = HashMap::new();
        for session in sessions {
            let branch = refname::branch_ref(session);
            if away.contains(session) {
                report.away.push(session.clone());
                continue;
            }
            let mut head = head_of(repo, &branch)?;
            let (done, mut base) = match head {
                Some(h) => {
                    let t = read_trailers(repo, h)?;
                    (t.0, base_from(repo, h)?)
                }
                None => (0, None),
            };
            if base.is_none() {
                // A new branch starts from the newest conversion any branch holds.
                base = *shared.get_or_insert_with(|| newest_base(repo).ok().flatten());
            }
            let mut written = 0;
            for ev in self.events(session, done)? {
                let (tree, msg, time) = match &ev {
                    Event::Checkpoint(c) => {
                        let (tree, n) =
                            match self.convert(repo, base, c.root, effort, &mut blobs)? {
                                Some(t) => t,
                                None => break,
                            };
                        report.blobs += n as u64;
                        base = Some(Base {
                            rewind: c.root,
                            git: tree,
                        });
                        (
                            tree,
                            message::checkpoint(c, &self.summary(c)?),
                            c.created_ns,
                        )
                    }
                    Event::Restore(e) => {
                        let parent = match head {
                            Some(h) => commit_tree(repo, h)?,
                            None => GitId::empty_tree(gix::hash::Kind::Sha1),
                        };
                        let changes: Vec<_> = oplog::epoch_changes(&self.db(), &e.id)?
                            .into_iter()
                            .map(|r| r.change)
                            .collect();
                        let edits = convert::change_edits(&changes);
                        let (tree, n) =
                            convert::apply(repo, self.store(), parent, &edits, &mut blobs)?;
                        report.blobs += n as u64;
                        let count = changes.len() as i64;
                        (
                            tree,
                            message::restore(e, count),
                            e.settled_ns.unwrap_or(e.created_ns),
                        )
                    }
                };
                ensure_tree(repo, tree)?;
                failpoint::hit("shadow-before-commit");
                let commit = write_commit(repo, session, &msg, tree, head, time)?;
                failpoint::hit("shadow-before-ref");
                move_branch(repo, session, &branch, head, commit)?;
                head = Some(commit);
                written += 1;
            }
            report.commits += written;
            if written > 0 {
                repo::point_head(repo.path(), &branch)?;
            }
            report.branches.push(ShadowBranch {
                session: session.clone(),
                branch,
                head: head.map(|h| h.to_string()),
                commits: written,
            });
        }
        Ok(())
    }

    /// The checkpoints of `session` after `done` (collected ones left out: their trees may be
    /// gone) and its settled restores, in op-log order, up to the first restore still open.
    fn events(&self, session: &str, done: i64) -> Result<Vec<Event>, Error> {
        let mut out: Vec<Event> = q::checkpoints_after(&self.db(), session, done)?
            .into_iter()
            .filter(|c| c.collected_ns.is_none())
            .map(Event::Checkpoint)
            .collect();
        let mut stop = i64::MAX;
        for e in q::session_epochs_between(&self.db(), session, done, i64::MAX)? {
            if e.kind != EpochKind::Restore || e.collected_ns.is_some() {
                continue;
            }
            match e.state {
                EpochState::Settled => out.push(Event::Restore(e)),
                EpochState::Open => stop = stop.min(e.pos),
                EpochState::Aborted => {}
            }
        }
        out.retain(|e| e.pos() < stop);
        out.sort_by_key(Event::pos);
        Ok(out)
    }

    /// The session's epochs since its previous checkpoint, each with its number of changes.
    fn summary(&self, c: &CheckpointRow) -> Result<Vec<(EpochRow, i64)>, Error> {
        let prev = q::checkpoint_pos_before(&self.db(), &c.session, c.pos)?;
        q::session_epochs_between(&self.db(), &c.session, prev, c.pos)?
            .into_iter()
            .map(|e| {
                let n = oplog::change_counts(&self.db(), &e.id)?.0;
                Ok((e, n))
            })
            .collect()
    }

    /// The git tree of Rewind tree `root`, from `base` when there is one; `None` when `effort`
    /// is incremental and there is no usable base.
    fn convert(
        &self,
        repo: &gix::Repository,
        base: Option<Base>,
        root: ObjectId,
        effort: Effort,
        blobs: &mut HashMap<ObjectId, GitId>,
    ) -> Result<Option<(GitId, usize)>, Error> {
        let empty = GitId::empty_tree(gix::hash::Kind::Sha1);
        // A base whose Rewind tree was collected cannot be compared with: start from nothing.
        let edits = match base.map(|b| (b, convert::tree_edits(self.store(), Some(b.rewind), root)))
        {
            Some((b, Ok(edits))) => Some((b.git, edits)),
            Some((_, Err(Error::Store(_)))) | None => None,
            Some((_, Err(e))) => return Err(e),
        };
        let (from, edits) = match edits {
            Some(x) => x,
            None if effort == Effort::Incremental => return Ok(None),
            None => (empty, convert::tree_edits(self.store(), None, root)?),
        };
        convert::apply(repo, self.store(), from, &edits, blobs).map(Some)
    }
}

/// The commit `branch` points at, if it exists.
fn head_of(repo: &gix::Repository, branch: &str) -> Result<Option<GitId>, Error> {
    let r = repo
        .try_find_reference(branch)
        .map_err(git("reading branch"))?;
    Ok(r.and_then(|r| r.try_id().map(|id| id.detach())))
}

/// The op-log position a commit mirrors (0 when it says none) and its Rewind tree.
fn read_trailers(repo: &gix::Repository, id: GitId) -> Result<(i64, Option<ObjectId>), Error> {
    let c = repo.find_commit(id).map_err(git("reading commit"))?;
    let t = message::trailers(c.message_raw_sloppy());
    Ok((t.pos.unwrap_or(0), t.tree))
}

fn commit_tree(repo: &gix::Repository, id: GitId) -> Result<GitId, Error> {
    let c = repo.find_commit(id).map_err(git("reading commit"))?;
    Ok(c.tree_id().map_err(git("reading commit"))?.detach())
}

/// The base a branch offers: its newest checkpoint commit (restores skipped, a few at most).
fn base_from(repo: &gix::Repository, mut id: GitId) -> Result<Option<Base>, Error> {
    for _ in 0..64 {
        let c = repo.find_commit(id).map_err(git("reading commit"))?;
        if let Some(rewind) = message::trailers(c.message_raw_sloppy()).tree {
            let git_tree = c.tree_id().map_err(git("reading commit"))?.detach();
            return Ok(Some(Base {
                rewind,
                git: git_tree,
            }));
        }
        let parent = c.parent_ids().next().map(|p| p.detach());
        match parent {
            Some(p) => id = p,
            None => return Ok(None),
        }
    }
    Ok(None)
}

/// The base of the branch whose head is furthest along the op log.
fn newest_base(repo: &gix::Repository) -> Result<Option<Base>, Error> {
    let refs = repo.references().map_err(git("listing branches"))?;
    let mut best: Option<(i64, GitId)> = None;
    for r in refs
        .local_branches()
        .map_err(git("listing branches"))?
        .flatten()
    {
        if let Some(id) = r.try_id().map(|i| i.detach()) {
            let (pos, _) = read_trailers(repo, id)?;
            if best.is_none_or(|(p, _)| pos > p) {
                best = Some((pos, id));
            }
        }
    }
    match best {
        Some((_, id)) => base_from(repo, id),
        None => Ok(None),
    }
}

/// The empty tree is never written by an edit; a commit of an empty workspace needs it stored.
fn ensure_tree(repo: &gix::Repository, tree: GitId) -> Result<(), Error> {
    if tree == GitId::empty_tree(gix::hash::Kind::Sha1) {
        repo.write_object(gix::objs::Tree::empty())
            .map_err(git("writing tree"))?;
    }
    Ok(())
}

/// Author and committer: the session (name and, escaped, the local part of the address).
fn signature(session: &str, ns: i64) -> gix::actor::Signature {
    let name: String = session
        .chars()
        .map(|c| {
            if c == '<' || c == '>' || c.is_control() {
                ' '
            } else {
                c
            }
        })
        .collect();
    let name = match name.trim() {
        "" => "session".to_string(),
        n => n.to_string(),
    };
    gix::actor::Signature {
        name: name.into(),
        email: format!("{}@rewind", refname::escape(session)).into(),
        time: gix::date::Time {
            seconds: ns.div_euclid(1_000_000_000),
            offset: 0,
        },
    }
}

fn write_commit(
    repo: &gix::Repository,
    session: &str,
    message: &str,
    tree: GitId,
    parent: Option<GitId>,
    ns: i64,
) -> Result<GitId, Error> {
    let sig = signature(session, ns);
    let commit = gix::objs::Commit {
        message: message.into(),
        tree,
        author: sig.clone(),
        committer: sig,
        encoding: None,
        parents: parent.into_iter().collect(),
        extra_headers: Vec::new(),
    };
    Ok(repo
        .write_object(&commit)
        .map_err(git("writing commit"))?
        .detach())
}

/// Moves `branch` from `old` to `new`, refusing if it moved meanwhile.
fn move_branch(
    repo: &gix::Repository,
    session: &str,
    branch: &str,
    old: Option<GitId>,
    new: GitId,
) -> Result<(), Error> {
    use gix::refs::transaction::{Change, LogChange, PreviousValue, RefEdit, RefLog};
    use gix::refs::Target;
    let expected = match old {
        Some(o) => PreviousValue::MustExistAndMatch(Target::Object(o)),
        None => PreviousValue::MustNotExist,
    };
    let name: gix::refs::FullName = branch.try_into().map_err(git("naming branch"))?;
    let edit = RefEdit {
        change: Change::Update {
            log: LogChange {
                mode: RefLog::AndReference,
                force_create_reflog: false,
                message: "rewind: shadow history".into(),
            },
            expected,
            new: Target::Object(new),
        },
        name,
        deref: false,
    };
    let sig = signature(session, crate::base::now_ns());
    repo.edit_references_as(Some(edit), Some(sig.to_ref(&mut Default::default())))
        .map_err(git("moving branch"))?;
    Ok(())
}
