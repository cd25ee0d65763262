//! Epochs: begin (preimages durable first), settle or abort, and the rebase of an exact
//! epoch's changes on writers that came after it.

use std::collections::HashSet;

use crate::base::failpoint;
use crate::base::{now_ns, random_hex};
use crate::db::oplog::{self, EpochKind, EpochRow, EpochState, Owner};
use crate::fs::relpath;
use crate::fs::root::{Present, RootDir};
use crate::model::entry::{Change, Entry};
use crate::workspace::Workspace;
use crate::Error;

use super::*;

impl Workspace {
    /// Opens an epoch for `session`. Anything found changed since the last known state is
    /// recorded as external first; the preimage is durable before this returns.
    pub fn begin_epoch(&self, session: &str, spec: &EpochSpec) -> Result<EpochRow, Error> {
        // Two opaque epochs never overlap: with nothing but before/after scans, the changes of
        // two commands running at once cannot be told apart. A process-owned one holds the
        // opaque lock (a kernel lock: released if the process dies) until it settles; any
        // opaque epoch waits, bounded, for the other to finish. Parallel agents that run long
        // commands belong in worktrees.
        let opaque_lock = if spec.paths.is_empty() {
            let wait = crate::workspace::lock::default_wait();
            let deadline = std::time::Instant::now() + wait;
            let lock = crate::workspace::lock::acquire(
                &self.state_dir().join("opaque.lock"),
                wait,
                &format!("exec of session {session}"),
            )?;
            loop {
                let other = {
                    let _l = self.lock(
                        deadline.saturating_duration_since(std::time::Instant::now()),
                        "epoch begin",
                    )?;
                    oplog::open_epochs(&self.db())?.into_iter().find(|e| {
                        e.kind == EpochKind::Opaque
                            && !(e.session == session && e.owner == Owner::Session)
                            && owner_alive(&e.owner)
                    })
                };
                let Some(e) = other else { break };
                if std::time::Instant::now() >= deadline {
                    return Err(Error::Busy {
                        holder: format!(
                            "session {} has an opaque epoch open ({}); it must end first",
                            e.session, e.id
                        ),
                    });
                }
                std::thread::sleep(std::time::Duration::from_millis(50));
            }
            Some(lock)
        } else {
            None
        };
        let _lock = self.lock(crate::workspace::lock::default_wait(), "epoch begin")?;
        crate::base::trace::phase("epoch begin: locked");
        if spec.paths.is_empty() {
            return self.begin_epoch_locked(session, spec, opaque_lock);
        }
        // A declared directory declares its whole subtree: every file's preimage is stored
        // now, so `rm -rf dir` inside the epoch is recorded file by file, bytes and all (what
        // is created inside it is found at settle).
        let root = self.rootdir()?;
        let mut paths = Vec::new();
        for p in &spec.paths {
            relpath::check(p)?;
            paths.push(p.clone());
            if let Present::Dir { .. } = root.lstat(p).map_err(Error::io_rel("inspecting", p))? {
                paths.extend(subtree(&root, p)?);
            }
        }
        paths.sort();
        paths.dedup();
        // It also covers the directories its paths need that do not exist yet: a tool that
        // writes new/dir/f.txt creates new/ and new/dir/, and rewinding the epoch must remove
        // them again (the guarded tools declare the directories they create the same way).
        // Looked at under the lock, so what is absent now is what the tool will create.
        let spec = EpochSpec {
            paths: self.with_missing_parents(&root, paths)?,
            ..spec.clone()
        };
        self.begin_epoch_locked(session, &spec, opaque_lock)
    }

    /// `paths` (checked already), then every ancestor of them that does not exist now.
    pub(super) fn with_missing_parents(
        &self,
        root: &RootDir,
        paths: Vec<Vec<u8>>,
    ) -> Result<Vec<Vec<u8>>, Error> {
        let mut out = paths.clone();
        for p in &paths {
            for (i, _) in p.iter().enumerate().filter(|(_, b)| **b == b'/') {
                let dir = &p[..i];
                if out.iter().any(|o| o == dir) {
                    continue;
                }
                let now = root.lstat(dir).map_err(Error::io_rel("inspecting", dir))?;
                if now == Present::Absent {
                    out.push(dir.to_vec());
                }
            }
        }
        Ok(out)
    }

    /// [`Workspace::begin_epoch`] once the workspace lock is held (and, for an opaque epoch, the
    /// opaque lock, which the epoch then keeps).
    pub(crate) fn begin_epoch_locked(
        &self,
        session: &str,
        spec: &EpochSpec,
        opaque_lock: Option<crate::workspace::lock::WorkspaceLock>,
    ) -> Result<EpochRow, Error> {
        self.recover_locked()?;
        self.settle_session_epochs(session)?;
        crate::base::trace::phase("epoch begin: recovered");
        let owner = match (spec.process_owned, spec.owner_pid) {
            (false, _) => Owner::Session,
            (true, None) => this_process(),
            (true, Some(pid)) => crate::record::process::process(pid),
        };
        let id = random_hex();
        let now = now_ns();
        let mut row = EpochRow {
            id: id.clone(),
            pos: 0,
            session: session.to_string(),
            kind: if spec.paths.is_empty() {
                EpochKind::Opaque
            } else {
                EpochKind::Exact
            },
            state: EpochState::Open,
            tool: spec.tool.clone(),
            tool_call: spec.tool_call.clone(),
            message: None,
            owner,
            paths: spec.paths.clone(),
            pre_root: None,
            recovered: false,
            note: spec.note.clone(),
            created_ns: now,
            settled_ns: None,
            collected_ns: None,
        };
        for p in &spec.paths {
            relpath::check(p)?;
        }
        if let Some(lock) = opaque_lock.filter(|_| spec.process_owned) {
            *self.opaque.borrow_mut() = Some((id.clone(), lock));
        }
        if spec.paths.is_empty() {
            // The opening capture's walk arms the watcher, directory by directory; a live
            // watcher (a server's) already watches everything.
            let live = self.live.borrow().is_some();
            let watcher = (spec.process_owned && !live)
                .then(|| crate::capture::watch::Watcher::new(self.root()))
                .flatten();
            let found = self.capture_before_record(|| {
                if live {
                    self.capture_found(None)
                } else {
                    self.capture_found_in(None, None, watcher.as_ref(), None)
                }
            })?;
            if let Some(w) = watcher.filter(|w| w.is_complete()) {
                *self.watcher.borrow_mut() = Some((id.clone(), w));
            }
            row.pre_root = Some(found.capture.root);
            self.transaction(|| {
                oplog::ensure_session(&self.db(), session, now)?;
                self.record_found(&found, session, None)?;
                row.pos = oplog::next_pos(&self.db())?;
                row.message = oplog::session_head(&self.db(), session)?;
                oplog::insert_epoch(&self.db(), &row)
            })?;
            crate::base::trace::phase("epoch begin: recorded");
            self.save_and_keep_state(found)?;
            if let Some((w, _)) = self.live.borrow().as_ref() {
                w.epoch_began();
            }
            crate::base::trace::phase("epoch begin: state saved");
        } else {
            self.check_store()?;
            let root = self.rootdir()?;
            let writer = self.store().writer()?;
            let max = self.config().capture.max_file_size();
            let mut disk = Vec::new();
            let mut last = Vec::new();
            for p in &spec.paths {
                let known = self.last_known(p)?;
                let hint = known.unwrap_or_default();
                let store = self.store();
                disk.push(disk_entry_known(
                    &root,
                    p,
                    Some(&writer),
                    max,
                    store,
                    [&hint, &None],
                )?);
                last.push(known);
            }
            crate::base::trace::phase("epoch begin: preimages read");
            let mut external = Vec::new();
            for ((p, now_entry), known) in spec.paths.iter().zip(&disk).zip(last) {
                if let Some(known) = known {
                    if !same(&known, now_entry) {
                        external.push(Change {
                            path: p.clone(),
                            before: known,
                            after: *now_entry,
                        });
                    }
                }
            }
            // The preimages' objects commit in the same transaction as the rows naming them.
            self.transaction(|| {
                writer.commit()?;
                oplog::ensure_session(&self.db(), session, now)?;
                if !external.is_empty() {
                    let pos = oplog::next_pos(&self.db())?;
                    let ext_id = self.insert_external(session, pos)?;
                    for c in &external {
                        oplog::insert_change(&self.db(), &ext_id, pos, c, false)?;
                    }
                }
                row.pos = oplog::next_pos(&self.db())?;
                row.message = oplog::session_head(&self.db(), session)?;
                oplog::insert_epoch(&self.db(), &row)?;
                for (p, pre) in spec.paths.iter().zip(&disk) {
                    let c = Change {
                        path: p.clone(),
                        before: *pre,
                        after: None,
                    };
                    oplog::insert_change(&self.db(), &id, row.pos, &c, true)?;
                }
                Ok(())
            })?;
            crate::base::trace::phase("epoch begin: recorded");
        }
        Ok(row)
    }

    /// Settles (or aborts) an open epoch: the session's newest open one, or the named one.
    pub fn end_epoch(
        &self,
        session: &str,
        id: Option<&str>,
        abort: bool,
    ) -> Result<Settled, Error> {
        let _lock = self.lock(crate::workspace::lock::default_wait(), "epoch end")?;
        self.recover_locked()?;
        crate::base::trace::phase("epoch end: locked, recovered");
        let open = oplog::open_epochs(&self.db())?;
        let epoch = match id {
            // A whole id (what the guard and scripts that kept `epoch begin`'s id pass): no lookup.
            Some(id) if open.iter().any(|e| e.id == id) => {
                open.into_iter().find(|e| e.id == id).expect("just found")
            }
            Some(id) => {
                let full = self.resolve_epoch_id(id)?;
                open.into_iter().find(|e| e.id == full).ok_or_else(|| {
                    Error::State(format!(
                        "epoch {id} is not open (it was already settled or aborted)"
                    ))
                })?
            }
            None => open
                .into_iter()
                .rev()
                .find(|e| e.session == session)
                .ok_or_else(|| {
                    Error::State(format!("session {session} has no open epoch"))
                        .remedy(crate::model::remedy::Remedy::EpochBegin)
                })?,
        };
        let state = if abort {
            EpochState::Aborted
        } else {
            EpochState::Settled
        };
        self.settle_locked(&epoch, state, false)
    }

    /// Settles an open epoch (caller holds the lock).
    pub(crate) fn settle_locked(
        &self,
        epoch: &EpochRow,
        state: EpochState,
        recovered: bool,
    ) -> Result<Settled, Error> {
        self.settle_locked_with(epoch, state, recovered, None)
    }

    /// [`Workspace::settle_locked`] that, for an exact epoch, also runs `also` in the settle's
    /// transaction, given the settle's op-log position (the guard refreshes the session's
    /// fingerprints there: one commit instead of two).
    pub(crate) fn settle_locked_with(
        &self,
        epoch: &EpochRow,
        state: EpochState,
        recovered: bool,
        mut also: Option<&mut dyn FnMut(i64) -> Result<(), Error>>,
    ) -> Result<Settled, Error> {
        let now = now_ns();
        match epoch.kind {
            EpochKind::Exact => {
                let writer = self.store().writer()?;
                let (pending, posts) = self.exact_changes(epoch, Some(&writer), recovered)?;
                failpoint::hit("settle-exact-before-record");
                // Without a flush: the preimages were committed durably before the files could
                // change. If a power cut loses this commit, the epoch is found open again and
                // is settled from what is then on disk: by recovery when its process is gone,
                // or by its session's next epoch (as when an agent dies before `epoch end`).
                self.relaxed(|| {
                    self.transaction(|| {
                        writer.commit()?;
                        let pos = oplog::next_pos(&self.db())?;
                        for (r, post) in pending.iter().zip(&posts) {
                            if same(&r.change.before, post) {
                                oplog::delete_change(&self.db(), &epoch.id, &r.change.path)?;
                            } else {
                                let c = Change {
                                    path: r.change.path.clone(),
                                    before: r.change.before,
                                    after: *post,
                                };
                                oplog::insert_change(&self.db(), &epoch.id, pos, &c, false)?;
                            }
                        }
                        oplog::settle_epoch(&self.db(), &epoch.id, state, recovered, now)?;
                        match also.as_mut() {
                            Some(f) => f(pos),
                            None => Ok(()),
                        }
                    })
                })?;
                crate::base::trace::phase("epoch end: recorded");
                // What was just committed, without reading it back.
                let changes = changed(pending, posts);
                let mut row = epoch.clone();
                row.state = state;
                row.recovered |= recovered;
                row.settled_ns = Some(now);
                Ok(Settled {
                    epoch: row,
                    changes,
                })
            }
            _ => {
                debug_assert!(
                    also.is_none(),
                    "`also` runs in an exact epoch's settle only"
                );
                if let Some((w, _)) = self.live.borrow().as_ref() {
                    w.epoch_ending();
                }
                let watched = self
                    .watcher
                    .borrow_mut()
                    .take_if(|(id, _)| id == &epoch.id)
                    .map(|(_, w)| w);
                let dirty = watched.as_ref().and_then(|w| w.dirty());
                if let Some(w) = watched {
                    w.close_in_background();
                }
                crate::base::trace::phase("settle: watcher read");
                let recorded = if dirty.as_ref().is_some_and(|d| d.is_empty()) {
                    // The watcher saw nothing happen since before the opening capture: the
                    // tree is what that capture recorded, so there is nothing to capture.
                    failpoint::hit("settle-unchanged-before-record");
                    self.transaction(|| {
                        oplog::settle_epoch(&self.db(), &epoch.id, state, recovered, now)
                    })?;
                    None
                } else {
                    let found = self.capture_before_record(|| match dirty {
                        Some(d) => self.capture_found_in(None, Some(&d), None, None),
                        None => self.capture_found(None),
                    })?;
                    failpoint::hit("settle-capture-before-record");
                    let changes = self.transaction(|| {
                        let changes = self.record_found_into(&found, &epoch.session, &epoch.id)?;
                        oplog::settle_epoch(&self.db(), &epoch.id, state, recovered, now)?;
                        Ok(changes)
                    })?;
                    crate::base::trace::phase("settle: recorded");
                    self.save_and_keep_state(found)?;
                    crate::base::trace::phase("settle: state saved");
                    Some(changes)
                };
                let mut held = self.opaque.borrow_mut();
                if held.as_ref().is_some_and(|(id, _)| id == &epoch.id) {
                    *held = None;
                }
                drop(held);
                let row = oplog::epoch(&self.db(), &epoch.id)?.expect("just settled");
                let changes = match recorded {
                    Some(changes) => changes,
                    None => oplog::epoch_changes(&self.db(), &epoch.id)?
                        .into_iter()
                        .map(|r| r.change)
                        .collect(),
                };
                crate::base::trace::phase("settle: read back");
                Ok(Settled {
                    epoch: row,
                    changes,
                })
            }
        }
    }

    /// What an exact epoch changed, as of now: each declared path (and what was created
    /// inside a declared path that is a directory now: its preimage is "absent") with its
    /// "before" rebased on later writers, and what the disk holds there now (stored through
    /// `writer` when given: a real settle; not stored: a preview). Paths whose before and now
    /// are the same are the caller's to drop.
    pub(crate) fn exact_changes(
        &self,
        epoch: &EpochRow,
        writer: Option<&rewind_store::Writer>,
        recovered: bool,
    ) -> Result<
        (
            Vec<oplog::ChangeRow>,
            Vec<Option<crate::model::entry::Entry>>,
        ),
        Error,
    > {
        let root = self.rootdir()?;
        let max = self.config().capture.max_file_size();
        let mut pending = oplog::epoch_changes(&self.db(), &epoch.id)?;
        let known: HashSet<Vec<u8>> = pending.iter().map(|r| r.change.path.clone()).collect();
        let mut created = Vec::new();
        for r in &pending {
            if let Ok(Present::Dir { .. }) = root.lstat(&r.change.path) {
                for p in subtree(&root, &r.change.path)? {
                    if !known.contains(&p) {
                        created.push(oplog::ChangeRow {
                            epoch: epoch.id.clone(),
                            pos: epoch.pos,
                            change: Change {
                                path: p,
                                before: None,
                                after: None,
                            },
                            pending: true,
                        });
                    }
                }
            }
        }
        created.sort_by(|a, b| a.change.path.cmp(&b.change.path));
        created.dedup_by(|a, b| a.change.path == b.change.path);
        pending.extend(created);
        if recovered {
            // A guarded write killed before its renames leaves its new contents under
            // temporary names beside the declared paths: remove those of dead writers.
            root.remove_dead_temp_files_beside(pending.iter().map(|r| r.change.path.as_slice()));
        }
        let mut posts = Vec::new();
        for r in &pending {
            let hint = [&r.change.before, &r.change.after];
            posts.push(disk_entry_known(
                &root,
                &r.change.path,
                writer,
                max,
                self.store(),
                hint,
            )?);
        }
        Ok((self.rebase_on_later_writers(epoch, pending)?, posts))
    }

    /// An exact epoch's "before" of each path, as of its settle: what the op log says the path
    /// held last, if another writer recorded a change to it after this epoch began (a guarded
    /// write or another exact epoch of any session, or an external change found by one of
    /// them); else the preimage taken at begin. Overlapping writers are then recorded in the
    /// order their changes happened (rewinding this epoch brings back the other writer's
    /// version, and rewinding that one what it overwrote), instead of this epoch claiming the
    /// other's change as its own. (Opaque epochs never get here: their writers are serialised.)
    pub(crate) fn rebase_on_later_writers(
        &self,
        epoch: &EpochRow,
        mut pending: Vec<oplog::ChangeRow>,
    ) -> Result<Vec<oplog::ChangeRow>, Error> {
        for r in &mut pending {
            if let Some(later) = oplog::latest_change(&self.db(), &r.change.path, epoch.pos)? {
                r.change.before = row_state(&later);
            }
        }
        Ok(pending)
    }

    /// Settles the session's own open epochs (from `epoch begin`) before it moves on; they are
    /// marked recovered, since nobody ended them.
    pub(crate) fn settle_session_epochs(&self, session: &str) -> Result<(), Error> {
        let open = oplog::open_epochs(&self.db())?;
        for e in open {
            if e.session == session && e.owner == Owner::Session {
                self.settle_locked(&e, EpochState::Settled, true)?;
            }
        }
        Ok(())
    }
}

/// The changes of an exact epoch's rows and what the disk held after them: the paths whose
/// state differs from their "before".
pub(crate) fn changed(rows: Vec<oplog::ChangeRow>, posts: Vec<Option<Entry>>) -> Vec<Change> {
    rows.into_iter()
        .zip(posts)
        .filter(|(r, post)| !same(&r.change.before, post))
        .map(|(r, post)| Change {
            path: r.change.path,
            before: r.change.before,
            after: post,
        })
        .collect()
}
