//! Rewinding: restore a session to a checkpoint, undo an epoch, and the write-ahead journal
//! that makes both crash-safe.
//!
//! A restore is planned, shown (a dry run computes the same plan and writes nothing), persisted
//! with a `restore` epoch in one transaction (write-ahead: every byte it will overwrite is
//! already in the store), then applied path by path. Each step is "make this path be that
//! entry" and is applied only if the path is still what the plan expected, so re-applying after
//! a crash converges and never overwrites a later edit. The epoch, its changes, the session head
//! and the journal's completion are committed in one transaction at the end.

mod apply;
pub(crate) mod merge;
mod plan;
mod reads;

pub(crate) use reads::{
    refuse_collected, refuse_collected_checkpoint, refuse_collected_epoch, target_tree,
};

pub(crate) use apply::Provenance;
pub use apply::Recovered;
pub use merge::Merged;

use std::time::{Duration, Instant};

use rewind_store::{EntryKind, ObjectId};
use serde::Serialize;

use crate::base::failpoint;
use crate::base::{now_ns, random_hex};
use crate::db::journal::{self, Journal};
use crate::db::oplog::{self, CheckpointRow, EpochKind, EpochRow, EpochState, Owner};
use crate::fs::probe::disk_entry;
use crate::fs::relpath;
use crate::model::entry::same;
use crate::model::entry::{Change, Entry, EntryView};
use crate::record::this_process;
use crate::restore::{self, RestorePlan, Skipped};
use crate::workspace::Workspace;
use crate::Error;

mod checks;

/// What a restore moves.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Mode {
    /// Files and the session head.
    #[default]
    Both,
    /// Files only; the head stays (a later files restore to the same point still works).
    FilesOnly,
    /// The head only ("undo the message, keep the files"); no file is touched.
    HeadOnly,
}

/// How to restore or undo.
#[derive(Clone, Debug, Default)]
pub struct RewindOptions {
    /// Plan and check everything, write nothing: the outcome is what the real run would do,
    /// and fails as it would.
    pub dry_run: bool,
    /// Go ahead despite conflicts; what is overwritten is kept in the restore epoch, so it
    /// can be brought back.
    pub force: bool,
    /// Make the whole workspace (or `paths`) equal to the target's tree, whoever changed it.
    pub all: bool,
    /// Files, head, or both.
    pub mode: Mode,
    /// Limit to these workspace-relative paths (and what is under them).
    pub paths: Vec<Vec<u8>>,
    /// How long to wait for a running tool call of the session to finish.
    pub wait: Option<Duration>,
    /// Where a path was changed since by someone else, undo only the session's lines when
    /// the two changes touch different lines (see `merge`); else it is a conflict as without.
    pub merge: bool,
}

/// A resolved restore target.
#[derive(Clone, Debug)]
pub enum Target {
    /// A checkpoint: undo what the session did after it.
    Checkpoint(CheckpointRow),
    /// "Just before this epoch".
    Epoch(EpochRow),
}

impl Target {
    /// The checkpoint's or epoch's full id.
    pub fn id(&self) -> &str {
        match self {
            Target::Checkpoint(c) => &c.id,
            Target::Epoch(e) => &e.id,
        }
    }
    /// Changes at positions after this are undone.
    pub(crate) fn after_pos(&self) -> i64 {
        match self {
            Target::Checkpoint(c) => c.pos,
            Target::Epoch(e) => e.pos - 1,
        }
    }
}

/// A path whose current state is not what the rewound epochs left there.
#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub struct Conflict {
    /// Workspace-relative path, `/`-separated raw bytes (a string in JSON).
    #[serde(serialize_with = "crate::base::serde_path")]
    #[schemars(with = "String")]
    pub path: Vec<u8>,
    /// What the rewound epochs left there; `None`: absent.
    pub expected: Option<EntryView>,
    /// What is there now; `None`: absent.
    pub current: Option<EntryView>,
    /// Who changed it since, if the op log knows.
    pub changed_by: String,
    /// With `--merge`: why it could not be merged.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unmerged: Option<String>,
    /// With `--merge`: the lines both changed, in the session's last write (`ancestor`), the
    /// content the restore goes back to (`ours`) and the file now (`theirs`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub overlaps: Vec<crate::merge::Overlap>,
}

/// What a restore or undo did, or (dry run) would do.
#[derive(Clone, Debug, Default)]
pub struct RewindOutcome {
    /// What was (or would be) written, per path: `before` is what it was, `after` what it
    /// became.
    pub steps: Vec<Change>,
    /// Paths changed by someone else since; with any, nothing is written unless forced.
    pub conflicts: Vec<Conflict>,
    /// Paths left alone because their earlier content was never captured.
    pub skipped: Vec<Skipped>,
    /// Whether files were changed (false for dry runs and refusals).
    pub applied: bool,
    /// The `restore` epoch that records it.
    pub epoch: Option<String>,
    /// The session head after the restore.
    pub head: Option<String>,
    /// The target checkpoint's payload, for the caller to restore its own state from.
    pub payload: Option<Vec<u8>>,
    /// Directories the restore should have removed but kept: they still hold files Rewind
    /// does not track (or gained some while it ran).
    pub kept: Vec<Skipped>,
    /// With `--merge`: files whose step is a merge (the session's lines undone, the others'
    /// kept); their steps are in `steps`.
    pub merged: Vec<Merged>,
    /// Paths whose new content the caller has read and verified from another store (a
    /// worktree's, in a dry run of its merge): not looked for in this workspace's store.
    pub(crate) verified_elsewhere: Vec<Vec<u8>>,
}

impl Workspace {
    /// Makes the workspace (or the `scope` paths in it) equal to the tree `target`, whoever
    /// changed what; recorded as a restore epoch of the session `rewind`, so it can be undone.
    pub fn restore_tree(
        &self,
        target: ObjectId,
        scope: &[Vec<u8>],
        dry_run: bool,
    ) -> Result<RewindOutcome, Error> {
        let point = CheckpointRow {
            id: format!("tree {}", &target.to_hex()[..12]),
            pos: 0,
            session: String::new(),
            message: None,
            parent: None,
            label: None,
            root: target,
            payload: None,
            pinned: false,
            created_ns: 0,
            collected_ns: None,
        };
        let opts = RewindOptions {
            dry_run,
            all: true,
            mode: Mode::FilesOnly,
            paths: scope.to_vec(),
            ..Default::default()
        };
        self.restore("rewind", &Target::Checkpoint(point), &opts)
    }

    /// Resolves an id prefix (epoch or checkpoint) or a message id of the session.
    pub fn resolve(&self, session: &str, text: &str) -> Result<Target, Error> {
        if text.is_empty() {
            return Err(Error::Usage(
                "give a checkpoint id, message id or epoch id".into(),
            ));
        }
        let ids = oplog::ids_with_prefix(&self.db(), text)?;
        let load = |id: &str, is_epoch: bool| -> Result<Target, Error> {
            Ok(if is_epoch {
                Target::Epoch(oplog::epoch(&self.db(), id)?.expect("listed"))
            } else {
                Target::Checkpoint(oplog::checkpoint(&self.db(), id)?.expect("listed"))
            })
        };
        // A whole id, then a message id of the session, then a unique id prefix: a message id
        // that happens to look like hex is still the message.
        if let Some((id, e)) = ids.iter().find(|(id, _)| id == text) {
            return load(id, *e);
        }
        let by_message = oplog::checkpoint_by_message(&self.db(), session, text)?;
        if let Some(c) = by_message {
            return Ok(Target::Checkpoint(c));
        }
        match ids.as_slice() {
            [(id, e)] => load(id, *e),
            [] => Err(self.unknown_id(text)),
            many => Err(Error::Unknown(format!(
                "{text} is ambiguous: it starts {}; give more characters",
                many.iter()
                    .map(|(i, _)| i.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ))),
        }
    }

    pub(crate) fn resolve_epoch_id(&self, text: &str) -> Result<String, Error> {
        match self.resolve("", text)? {
            Target::Epoch(e) => Ok(e.id),
            Target::Checkpoint(c) => Err(Error::State(format!(
                "{} is a checkpoint, not an epoch",
                c.id
            ))),
        }
    }

    /// An unknown id, naming the workspace it belongs to if it is another one.
    fn unknown_id(&self, text: &str) -> Error {
        if let Some(other) = crate::workspace::find_in_other_workspaces(self, text) {
            return Error::Unknown(format!(
                "{text} belongs to another workspace ({other}), not to {}; run the command there",
                self.root().display()
            ));
        }
        Error::Unknown(format!(
            "no checkpoint, epoch or message {text:?} in this workspace"
        ))
        .remedy(crate::model::remedy::Remedy::Log)
    }

    /// Restores `session` to `target` (see `docs/design.md`, "Rewind semantics").
    pub fn restore(
        &self,
        session: &str,
        target: &Target,
        opts: &RewindOptions,
    ) -> Result<RewindOutcome, Error> {
        for p in &opts.paths {
            relpath::check(p)?;
        }
        refuse_collected(target)?;
        let _lock = self.lock_when_session_idle(session, opts.wait)?;
        // Collected while this waited for the lock: read again under it.
        if let Ok(again) = self.resolve(session, target.id()) {
            refuse_collected(&again)?;
        }
        // A whole-tree command: the moment to keep the WAL short for the quick ones.
        self.store().checkpoint_wal_on_close();
        self.recover_locked()?;
        if !opts.dry_run {
            self.settle_session_epochs(session)?;
        }
        crate::base::trace::phase("restore: recovered, settled");
        let head = match target {
            Target::Checkpoint(c) if opts.mode != Mode::FilesOnly => c.message.clone(),
            _ => oplog::session_head(&self.db(), session)?,
        };
        let payload = match target {
            Target::Checkpoint(c) => c.payload.clone(),
            Target::Epoch(_) => None,
        };
        if opts.mode == Mode::HeadOnly {
            if !opts.dry_run {
                self.transaction(|| {
                    oplog::ensure_session(&self.db(), session, now_ns())?;
                    oplog::set_head(&self.db(), session, head.as_deref())
                })?;
            }
            return Ok(RewindOutcome {
                head,
                payload,
                applied: !opts.dry_run,
                ..Default::default()
            });
        }
        let mut out = if opts.all {
            self.plan_all(session, target, opts)?
        } else {
            let rows = self.undo_rows(session, target.after_pos())?;
            let mut changes: Vec<Change> = rows.into_iter().map(|r| r.change).collect();
            if opts.dry_run {
                // The real run settles the session's open epochs first: preview as if it had.
                for (e, pending) in self.virtual_settle(session)? {
                    if e.pos > target.after_pos() {
                        changes.extend(pending);
                    }
                }
            }
            self.plan_undo(changes, opts)?
        };
        crate::base::trace::phase("restore: planned");
        out.head = head;
        out.payload = payload;
        self.finish(session, out, opts, target.id())
    }

    /// Undoes one epoch of the session (its newest by default). Undoing a restore is redo.
    pub fn undo(
        &self,
        session: &str,
        epoch: Option<&str>,
        opts: &RewindOptions,
    ) -> Result<RewindOutcome, Error> {
        let _lock = self.lock_when_session_idle(session, opts.wait)?;
        // A whole-tree command: the moment to keep the WAL short for the quick ones.
        self.store().checkpoint_wal_on_close();
        self.recover_locked()?;
        if !opts.dry_run {
            self.settle_session_epochs(session)?;
        }
        let named = epoch.map(|id| self.resolve_epoch_id(id)).transpose()?;
        // A dry run previews what the real run does after settling the session's open epochs:
        // with no epoch named, the newest of those is the one undone; a named one of them is
        // undone as it would be settled.
        let open = if opts.dry_run {
            let mut settled = self.virtual_settle(session)?;
            match &named {
                None => settled.pop(),
                Some(id) => settled.into_iter().find(|(e, _)| &e.id == id),
            }
        } else {
            None
        };
        if let Some((_, changes)) = open {
            let mut out = self.plan_undo(changes, opts)?;
            self.keep_occupied_dirs(&mut out)?;
            if out.conflicts.is_empty() || opts.force {
                self.checks_before_writing(&out)?;
                crate::base::trace::phase("restore: checked");
            }
            out.head = oplog::session_head(&self.db(), session)?;
            return Ok(out);
        }
        let e = match named {
            Some(full) => oplog::epoch(&self.db(), &full)?.expect("resolved"),
            None => oplog::last_epoch(&self.db(), session)?
                .ok_or_else(|| Error::State(format!("session {session} has no epoch to undo")))?,
        };
        refuse_collected_epoch(&e)?;
        if e.state == EpochState::Open {
            return Err(Error::State(format!(
                "epoch {} is still open; end it first",
                e.id
            )));
        }
        let rows = oplog::epoch_changes(&self.db(), &e.id)?;
        let mut out = self.plan_undo(rows.into_iter().map(|r| r.change).collect(), opts)?;
        out.head = oplog::session_head(&self.db(), session)?;
        self.finish(
            session,
            out,
            &RewindOptions {
                mode: Mode::FilesOnly,
                ..opts.clone()
            },
            &e.id,
        )
    }

    /// What settling the session's own open epochs would record, without recording it: for
    /// dry runs, which must show what the real run will do.
    fn virtual_settle(&self, session: &str) -> Result<Vec<(EpochRow, Vec<Change>)>, Error> {
        let mut out = Vec::new();
        let open = oplog::open_epochs(&self.db())?;
        for e in open {
            if e.session != session || e.owner != Owner::Session {
                continue;
            }
            let changes = match e.kind {
                EpochKind::Exact => {
                    let (rows, posts) = self.exact_changes(&e, None, false)?;
                    crate::record::changed(rows, posts)
                }
                _ => self.capture_found(None)?.changes,
            };
            out.push((e, changes));
        }
        Ok(out)
    }

    /// Waits (bounded) until no live process holds an open epoch of the session, then returns
    /// with the lock held.
    pub(crate) fn lock_when_session_idle(
        &self,
        session: &str,
        wait: Option<Duration>,
    ) -> Result<crate::WorkspaceLock, Error> {
        let wait = wait.unwrap_or_else(crate::workspace::lock::default_wait);
        let deadline = Instant::now() + wait;
        loop {
            let lock = self.lock(
                deadline.saturating_duration_since(Instant::now()),
                "restore",
            )?;
            let busy = oplog::open_epochs(&self.db())?.into_iter().find(|e| {
                e.session == session
                    && matches!(e.owner, Owner::Process { pid, .. } if pid != std::process::id())
                    && crate::record::owner_alive(&e.owner)
            });
            let Some(e) = busy else { return Ok(lock) };
            drop(lock);
            if Instant::now() >= deadline {
                let pid = match e.owner {
                    Owner::Process { pid, .. } => pid,
                    Owner::Session => 0,
                };
                return Err(Error::Busy {
                    holder: format!(
                        "a tool call of session {session} is still running (epoch {}, pid {pid})",
                        e.id
                    ),
                });
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn conflict(
        &self,
        path: &[u8],
        expected: Option<Entry>,
        current: Option<Entry>,
    ) -> Result<Conflict, Error> {
        let latest = oplog::latest_change(&self.db(), path, 0)?;
        let changed_by = match latest.filter(|r| same(&r.change.after, &current)) {
            Some(r) => match oplog::epoch(&self.db(), &r.epoch)? {
                Some(e) if e.kind == EpochKind::External => {
                    format!("external change (epoch {})", e.id)
                }
                Some(e) => format!("session {} ({} epoch {})", e.session, e.kind.as_str(), e.id),
                None => "unknown".into(),
            },
            None => "an edit not recorded yet (made outside any epoch)".into(),
        };
        Ok(Conflict {
            path: path.to_vec(),
            expected: expected.as_ref().map(EntryView::from),
            current: current.as_ref().map(EntryView::from),
            changed_by,
            unmerged: None,
            overlaps: Vec::new(),
        })
    }

    /// `--all`: the whole workspace (or the paths) to the target's tree; no conflict check.
    fn plan_all(
        &self,
        session: &str,
        target: &Target,
        opts: &RewindOptions,
    ) -> Result<RewindOutcome, Error> {
        let tree = target_tree(target)?;
        let mut found = self.capture_found(None)?;
        if !opts.dry_run {
            self.transaction(|| self.record_found(&found, session, None).map(drop))?;
            self.save_state(&mut found)?;
        }
        let mut plan: RestorePlan =
            restore::plan(self.store(), found.capture.root, tree, &opts.paths)?;
        // What the target's tree lacks but the op log says existed uncaptured when it first
        // saw it after the target (ignored or unreadable until then) has no bytes to go back
        // to: it is left as it is, never deleted.
        let first_seen = |path: &[u8]| -> Result<Option<Option<Entry>>, Error> {
            if let Some(r) = oplog::earliest_change(&self.db(), path, target.after_pos())? {
                return Ok(Some(r.change.before));
            }
            // A dry run has not recorded what its capture found.
            Ok(found
                .changes
                .iter()
                .find(|c| c.path == path)
                .map(|c| c.before))
        };
        let mut steps = Vec::new();
        for s in std::mem::take(&mut plan.steps) {
            let uncaptured = s.after.is_none()
                && first_seen(&s.path)?
                    .flatten()
                    .is_some_and(|b| b.kind == EntryKind::Uncovered);
            if uncaptured {
                plan.skipped.push(Skipped {
                    path: s.path,
                    reason: "left as it is: it existed uncaptured (ignored or unreadable) when the target was taken".into(),
                });
            } else {
                steps.push(s);
            }
        }
        plan.steps = steps;
        Ok(RewindOutcome {
            steps: plan.steps,
            skipped: plan.skipped,
            ..Default::default()
        })
    }

    /// Refuses on conflicts, returns dry runs, else journals, applies and records.
    fn finish(
        &self,
        session: &str,
        out: RewindOutcome,
        opts: &RewindOptions,
        target: &str,
    ) -> Result<RewindOutcome, Error> {
        let provenance = Provenance {
            tool: "restore",
            note: format!("restore to {target}"),
            epoch: None,
        };
        self.finish_as(session, out, opts, &provenance)
    }

    /// [`Workspace::finish`] for any planned outcome (a restore, an undo, a worktree's merge):
    /// the one path by which a plan reaches the files. Call with the lock held, recovery done.
    pub(crate) fn finish_as(
        &self,
        session: &str,
        mut out: RewindOutcome,
        opts: &RewindOptions,
        provenance: &Provenance,
    ) -> Result<RewindOutcome, Error> {
        self.keep_occupied_dirs(&mut out)?;
        if !out.conflicts.is_empty() && !opts.force {
            return Ok(out);
        }
        self.checks_before_writing(&out)?;
        if opts.dry_run {
            return Ok(out);
        }
        // A merged file's new content is stored like any other the plan writes.
        if !out.merged.is_empty() {
            let writer = self.store().writer()?;
            for m in &out.merged {
                writer.put_content(&mut m.content.as_slice())?;
            }
            writer.commit()?;
        }
        // Never under a tool that is writing one of these paths right now.
        let open = oplog::open_epochs(&self.db())?;
        for e in open {
            let live = crate::record::owner_alive(&e.owner);
            if let Some(p) = e
                .paths
                .iter()
                .find(|p| live && out.steps.iter().any(|s| &s.path == *p))
            {
                return Err(Error::Busy {
                    holder: format!(
                        "session {} is writing {} right now (epoch {}); retry when it is done",
                        e.session,
                        relpath::display(p),
                        e.id
                    ),
                });
            }
        }
        let root = self.rootdir()?;
        // Write-ahead: what each step overwrites must be in the store before it is touched.
        let writer = self.store().writer()?;
        let max = self.config().capture.max_file_size();
        for step in &out.steps {
            if let Some(b) = step.before {
                if matches!(b.kind, EntryKind::File | EntryKind::Symlink)
                    && !self.store().has(&b.id)?
                {
                    disk_entry(&root, &step.path, Some(&writer), max)?;
                }
            }
        }
        writer.commit()?;
        let epoch_id = provenance.epoch.clone().unwrap_or_else(random_hex);
        let now = now_ns();
        let move_head = opts.mode != Mode::FilesOnly;
        self.transaction(|| {
            oplog::ensure_session(&self.db(), session, now)?;
            let pos = oplog::next_pos(&self.db())?;
            oplog::insert_epoch(
                &self.db(),
                &EpochRow {
                    id: epoch_id.clone(),
                    pos,
                    session: session.to_string(),
                    kind: EpochKind::Restore,
                    state: EpochState::Open,
                    tool: Some(provenance.tool.into()),
                    tool_call: None,
                    message: oplog::session_head(&self.db(), session)?,
                    owner: this_process(),
                    paths: Vec::new(),
                    pre_root: None,
                    recovered: false,
                    note: Some(provenance.note.clone()),
                    created_ns: now,
                    settled_ns: None,
                    collected_ns: None,
                },
            )?;
            journal::insert(
                &self.db(),
                &epoch_id,
                &Journal {
                    session: session.to_string(),
                    steps: out.steps.clone(),
                    head: out.head.clone(),
                    move_head,
                },
                now,
            )?;
            Ok(())
        })?;
        failpoint::hit("restore-after-journal");
        crate::base::trace::phase("restore: journal written");
        let applied = self.apply_journal(&epoch_id)?;
        // A directory that gained an entry since planning stays (and was not recorded).
        out.steps
            .retain(|s| !applied.iter().any(|k| k.path == s.path));
        out.kept.extend(applied);
        out.applied = true;
        out.epoch = Some(epoch_id);
        Ok(out)
    }
}

fn in_scope(path: &[u8], scope: &[Vec<u8>]) -> bool {
    scope.is_empty()
        || scope.iter().any(|s| {
            path == s.as_slice() || (path.starts_with(s) && path.get(s.len()) == Some(&b'/'))
        })
}

/// Removals deepest first, then everything else parents first.
pub(crate) fn order_steps(steps: &mut [Change]) {
    let depth = |p: &[u8]| p.iter().filter(|b| **b == b'/').count();
    steps.sort_by(|a, b| {
        let (ra, rb) = (a.after.is_none(), b.after.is_none());
        match (ra, rb) {
            (true, false) => std::cmp::Ordering::Less,
            (false, true) => std::cmp::Ordering::Greater,
            (true, true) => depth(&b.path)
                .cmp(&depth(&a.path))
                .then(b.path.cmp(&a.path)),
            (false, false) => depth(&a.path)
                .cmp(&depth(&b.path))
                .then(a.path.cmp(&b.path)),
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use rewind_store::ObjectId;

    #[test]
    fn plan_encoding_round_trips_and_orders() {
        let f = Entry {
            kind: EntryKind::File,
            mode: 0o644,
            size: 3,
            id: ObjectId([9; 32]),
        };
        let d = Entry {
            kind: EntryKind::Dir,
            mode: 0o755,
            size: 0,
            id: ObjectId::ZERO,
        };
        let mut steps = vec![
            Change {
                path: b"a/b".to_vec(),
                before: None,
                after: Some(f),
            },
            Change {
                path: b"a".to_vec(),
                before: None,
                after: Some(d),
            },
            Change {
                path: b"x".to_vec(),
                before: Some(d),
                after: None,
            },
            Change {
                path: b"x/y".to_vec(),
                before: Some(f),
                after: None,
            },
        ];
        order_steps(&mut steps);
        let order: Vec<&[u8]> = steps.iter().map(|s| s.path.as_slice()).collect();
        assert_eq!(order, vec![&b"x/y"[..], b"x", b"a", b"a/b"]);
        let plan = crate::db::journal::encode_plan(&steps);
        assert_eq!(crate::db::journal::decode_plan(&plan).unwrap(), steps);
    }
}
