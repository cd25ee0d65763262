//! Recording: epochs (exact, opaque, external) and checkpoints, attributed per writer.
//!
//! The rule that keeps attribution honest: before anything is recorded for a session, whatever
//! is on disk that differs from the *last known state* (the newest op-log change to the path,
//! else the stat cache, else the newest whole-tree snapshot) was made by someone else and is
//! recorded first as an `external` epoch. So the user's edits are never attributed to the agent,
//! and they are protected like any other change.

use std::collections::{BTreeMap, HashSet};

use rewind_store::{EntryKind, ObjectId};

use crate::capture::{self, Capture};
use crate::entry::{Change, Entry};
use crate::fsops::{Present, RootDir};
use crate::oplog::{self, CheckpointRow, EpochKind, EpochRow, EpochState, Owner};
use crate::scan::Progress;
use crate::state::{State, StateStamp};
use crate::workspace::{now_ns, random_hex, Workspace};
use crate::{failpoint, relpath, Error};

mod disk;
use disk::io_error;
pub(crate) use disk::{disk_entry, existed_before, same, subtree, tree_lookup, uncaptured_like};

/// What to open.
#[derive(Clone, Debug, Default)]
pub struct EpochSpec {
    pub tool: Option<String>,
    pub tool_call: Option<String>,
    /// Declared paths: an exact epoch. Empty: an opaque epoch.
    pub paths: Vec<Vec<u8>>,
    /// False: owned by the session (open across commands). True: owned by this process.
    pub process_owned: bool,
    /// Free text shown by `log`/`show` (e.g. the command line of `exec`).
    pub note: Option<String>,
}

/// A settled epoch with its changes.
#[derive(Clone, Debug)]
pub struct Settled {
    pub epoch: EpochRow,
    pub changes: Vec<Change>,
}

/// What a whole-tree capture found, attributed.
pub(crate) struct Found {
    pub capture: Capture,
    /// Paths whose disk state differs from the last known state.
    pub changes: Vec<Change>,
    /// The state file the capture started from, if it is still the one on disk.
    pub stamp: Option<StateStamp>,
}

/// This process's identity for ownership of open epochs: pid and start time (pids are reused).
pub fn this_process() -> Owner {
    let pid = std::process::id();
    Owner::Process {
        pid,
        start: process_start(pid).unwrap_or(0),
    }
}

fn process_start(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Field 22 (starttime), counted after the parenthesised command name.
    let rest = &stat[stat.rfind(')')? + 2..];
    rest.split_whitespace().nth(19)?.parse().ok()
}

/// Whether the owner of an open epoch can still settle it itself.
pub fn owner_alive(owner: &Owner) -> bool {
    match *owner {
        Owner::Session => true,
        Owner::Process { pid, start } => {
            // SAFETY: signal 0 only checks for existence.
            let exists = unsafe { libc::kill(pid as libc::pid_t, 0) } == 0
                || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM);
            exists && (start == 0 || process_start(pid) == Some(start))
        }
    }
}

/// A checkpoint payload over `checkpoint.max_payload_size`.
pub fn payload_too_large(len: u64, cap: u64) -> Error {
    Error::State(format!(
        "the payload is {len} bytes or more, over checkpoint.max_payload_size ({cap} bytes); \
         store less, or raise it in config.toml (for example `[checkpoint]\nmax_payload_size = \"256M\"`)"
    ))
}

/// The last known state of `rel`, `None` inside meaning absent, outer `None` meaning never seen
/// (no capture yet).
fn row_state(r: &oplog::ChangeRow) -> Option<Entry> {
    if r.pending {
        r.change.before
    } else {
        r.change.after
    }
}

impl Workspace {
    pub(crate) fn rootdir(&self) -> Result<RootDir, Error> {
        RootDir::open(self.root()).map_err(|e| Error::Io {
            op: "opening",
            path: self.root().to_path_buf(),
            source: e,
        })
    }

    fn last_known(&self, rel: &[u8]) -> Result<Option<Option<Entry>>, Error> {
        let latest = oplog::latest_change(&self.db(), rel, 0)?;
        if let Some(r) = latest {
            return Ok(Some(row_state(&r)));
        }
        let snapshot = oplog::latest_snapshot(&self.db())?;
        match snapshot {
            Some((root, _)) => Ok(Some(tree_lookup(self.store(), root, rel)?)),
            None => Ok(None),
        }
    }

    /// Paths held by open exact epochs (their changes belong to them, not to whoever scans).
    fn pending_paths(&self) -> Result<HashSet<Vec<u8>>, Error> {
        let mut out = HashSet::new();
        let open = oplog::open_epochs(&self.db())?;
        for e in open {
            if e.kind == EpochKind::Exact {
                out.extend(e.paths);
            }
        }
        Ok(out)
    }

    /// Captures the whole tree and works out which paths differ from the last known state.
    pub(crate) fn capture_found(&self, progress: Option<&Progress>) -> Result<Found, Error> {
        self.capture_found_in(progress, None, None)
    }

    /// As [`Workspace::capture_found`], re-reading only `dirty` directories when a watcher
    /// vouches for the rest.
    pub(crate) fn capture_found_in(
        &self,
        progress: Option<&Progress>,
        dirty: Option<&crate::watch::Dirty>,
        watch: Option<&crate::watch::Watcher>,
    ) -> Result<Found, Error> {
        let (old, stamp) = self.take_state();
        let dirty = dirty.filter(|_| !old.is_empty());
        let mut capture = self.run_capture(&old, progress, dirty, watch)?;
        // A walk that found the tree exactly as cached leaves the cache to be the new state.
        let old = if capture.same_as_cache {
            capture.state = old;
            None
        } else {
            Some(old)
        };
        let old: &State = old.as_ref().unwrap_or(&capture.state);
        let latest = oplog::latest_snapshot(&self.db())?;
        let mut changes = Vec::new();
        if latest.is_none() && old.is_empty() {
            // The first capture is the baseline: nothing to attribute.
            return Ok(Found {
                capture,
                changes,
                stamp,
            });
        }
        // With no usable cache, the newest snapshot is the baseline.
        let baseline: Option<BTreeMap<Vec<u8>, Entry>> = if old.is_empty() {
            let (root, _) = latest.expect("checked above");
            Some(
                crate::restore::flatten(self.store(), root)?
                    .into_iter()
                    .collect(),
            )
        } else {
            None
        };
        let after_pos = if old.is_empty() { 0 } else { old.pos };
        let mut candidates: BTreeMap<Vec<u8>, Option<Entry>> = BTreeMap::new();
        match &baseline {
            Some(base) => {
                let now: BTreeMap<Vec<u8>, Entry> =
                    crate::restore::flatten(self.store(), capture.root)?
                        .into_iter()
                        .collect();
                for (p, e) in base {
                    if now.get(p).is_none_or(|n| !n.same_as(e)) {
                        candidates.insert(p.clone(), Some(*e));
                    }
                }
                for p in now.keys() {
                    if !base.contains_key(p) {
                        candidates.insert(p.clone(), None);
                    }
                }
            }
            None => {
                for c in &capture.changes {
                    candidates.insert(c.path.clone(), c.before);
                }
            }
        }
        let changed = oplog::changes_after(&self.db(), after_pos)?;
        for r in changed {
            candidates.entry(r.change.path.clone()).or_insert_with(|| {
                old.get(&r.change.path).map(|s| Entry {
                    kind: s.kind,
                    mode: s.mode,
                    size: s.size,
                    id: s.id,
                })
            });
        }
        let pending = self.pending_paths()?;
        // A path that appears now, was absent as far as the op log knows, and was born before
        // the previous capture was one that capture could not see (ignored then, or inside an
        // unreadable directory): "existed, uncaptured", never "created", so no rewind deletes it.
        // (A renamed or hard-linked file that was captured under another name keeps its birth
        // time too: its inode, known to the previous capture, tells it apart.)
        let previous_ns = oplog::latest_snapshot_ns(&self.db())?.unwrap_or(i64::MAX);
        let mut seen_before: Option<(HashSet<u64>, HashSet<ObjectId>)> = None;
        let mut captured_before = |now: &crate::state::StatEntry| {
            let captured = |kind: EntryKind| kind != EntryKind::Uncovered;
            let (inos, ids) = seen_before.get_or_insert_with(|| {
                let inos = old
                    .dirs
                    .values()
                    .flatten()
                    .filter(|e| captured(e.kind))
                    .map(|e| e.ino)
                    .collect();
                // Without a cache, the baseline tree's contents stand in for its inodes.
                let ids = baseline
                    .iter()
                    .flat_map(|b| b.values().filter(|e| captured(e.kind)).map(|e| e.id))
                    .collect();
                (inos, ids)
            });
            captured(now.kind) && (inos.contains(&now.ino) || ids.contains(&now.id))
        };
        for (path, cached) in candidates {
            if pending.contains(&path) {
                continue;
            }
            let latest = oplog::latest_change(&self.db(), &path, after_pos)?;
            let known = match latest {
                Some(r) => row_state(&r),
                None => cached,
            };
            let disk = capture.state.get(&path).map(|s| Entry {
                kind: s.kind,
                mode: s.mode,
                size: s.size,
                id: s.id,
            });
            if !same(&known, &disk) {
                let existed_uncaptured = known.is_none()
                    && capture
                        .state
                        .get(&path)
                        .is_some_and(|now| !captured_before(now))
                    && existed_before(self.root(), &path, previous_ns);
                let before = match disk {
                    Some(now) if existed_uncaptured => Some(uncaptured_like(&now)),
                    _ => known,
                };
                changes.push(Change {
                    path,
                    before,
                    after: disk,
                });
            }
        }
        Ok(Found {
            capture,
            changes,
            stamp,
        })
    }

    /// Records what a capture found: attributed to `into` (an epoch being settled), else to the
    /// newest live opaque epoch of another writer (its command may be the one writing), else as
    /// a new external epoch. Also records the snapshot. Call inside a transaction.
    pub(crate) fn record_found(
        &self,
        found: &Found,
        session: &str,
        into: Option<&str>,
    ) -> Result<i64, Error> {
        let db = &*self.db();
        let pos = oplog::next_pos(db)?;
        if !found.changes.is_empty() {
            let target = match into {
                Some(id) => Some(id.to_string()),
                None => oplog::open_epochs(db)?
                    .into_iter()
                    .rev()
                    .find(|e| e.kind == EpochKind::Opaque && owner_alive(&e.owner))
                    .map(|e| e.id),
            };
            let epoch = match target {
                Some(id) => id,
                None => self.insert_external(session, pos)?,
            };
            for c in &found.changes {
                // An epoch has one change per path, from the earliest state to the latest. An
                // opaque epoch can already hold one for this path: another process's capture
                // (a checkpoint) saw its command half-way (a file created, not yet written) and
                // attributed that to it. Replacing the row would lose the first state: merge.
                let merged = match oplog::epoch_change(db, &epoch, &c.path)? {
                    Some(prev) if !prev.pending => Change {
                        path: c.path.clone(),
                        before: prev.change.before,
                        after: c.after,
                    },
                    _ => c.clone(),
                };
                if same(&merged.before, &merged.after) {
                    oplog::delete_change(db, &epoch, &c.path)?;
                } else {
                    oplog::insert_change(db, &epoch, pos, &merged, false)?;
                }
            }
        }
        db.execute(
            "INSERT INTO snapshots (root, created_ns, label, pos) VALUES (?1, ?2, ?3, ?4)",
            // Its time is when the walk started (coarse clock): what an "existed, uncaptured"
            // judgement of a later capture compares birth times with.
            rusqlite::params![
                found.capture.root.0.as_slice(),
                found.capture.started_ns,
                session,
                pos
            ],
        )?;
        Ok(pos)
    }

    /// A settled `external` epoch at `pos` (changes found on disk that no epoch made); returns
    /// its id. Call inside a transaction.
    fn insert_external(&self, found_by: &str, pos: i64) -> Result<String, Error> {
        let id = random_hex();
        let now = now_ns();
        oplog::insert_epoch(
            &self.db(),
            &EpochRow {
                id: id.clone(),
                pos,
                session: String::new(),
                kind: EpochKind::External,
                state: EpochState::Settled,
                tool: None,
                tool_call: None,
                message: None,
                owner: Owner::Session,
                paths: Vec::new(),
                pre_root: None,
                recovered: false,
                note: Some(format!("found by session {found_by}")),
                created_ns: now,
                settled_ns: Some(now),
            },
        )?;
        Ok(id)
    }

    /// Saves the stat cache after the op log recorded everything it implies. A capture that
    /// changed nothing in the cache skips the write (8 MB at 100k files): an older `pos` stays
    /// valid, it only means a few more op-log rows are re-checked next time.
    pub(crate) fn save_state(&self, found: &mut Found) -> Result<(), Error> {
        let pos = oplog::last_pos(&self.db())?;
        if !found.capture.state_changed && pos - found.capture.state.pos < 10_000 {
            return Ok(());
        }
        found.capture.state.pos = pos;
        found.stamp = Some(found.capture.state.save(&self.state_path())?);
        Ok(())
    }

    /// [`Workspace::save_state`], then keeps the state in memory for this process's next
    /// capture (the closing capture of an `exec`).
    pub(crate) fn save_and_keep_state(&self, mut found: Found) -> Result<(), Error> {
        self.save_state(&mut found)?;
        if let Some(stamp) = found.stamp {
            self.keep_state(stamp, found.capture.state);
        }
        Ok(())
    }

    /// The stat cache: the one this process kept, if `state.bin` is still the file it matches
    /// (one `stat`), else read from disk.
    pub(crate) fn take_state(&self) -> (State, Option<StateStamp>) {
        let path = self.state_path();
        let kept = self.state_cache.borrow_mut().take();
        if let Some((stamp, state)) = kept {
            if StateStamp::of(&path) == Some(stamp) {
                return (state, Some(stamp));
            }
        }
        State::load_stamped(&path)
    }

    /// Keeps `state` (which matches the file stamped `stamp`) for [`Workspace::take_state`].
    pub(crate) fn keep_state(&self, stamp: StateStamp, mut state: State) {
        // As if loaded from that file: entries modified at or after its mtime are racy.
        state.written_ns = stamp.mtime_ns();
        *self.state_cache.borrow_mut() = Some((stamp, state));
    }

    /// Runs `f` in one `BEGIN IMMEDIATE` transaction: committed if it succeeds, rolled back if
    /// not.
    pub(crate) fn transaction<T>(&self, f: impl FnOnce() -> Result<T, Error>) -> Result<T, Error> {
        self.run_cached("BEGIN IMMEDIATE")?;
        match f() {
            Ok(v) => {
                self.run_cached("COMMIT")?;
                Ok(v)
            }
            Err(e) => {
                let _ = self.run_cached("ROLLBACK");
                Err(e)
            }
        }
    }

    /// Runs one statement that returns no rows, prepared once per process: a guarded write
    /// runs two transactions, and preparing a statement costs more than running these.
    fn run_cached(&self, sql: &str) -> Result<(), Error> {
        self.db().prepare_cached(sql)?.execute([])?;
        Ok(())
    }

    /// Runs `f` with commits that do not flush: `synchronous = NORMAL`, still atomic and
    /// consistent in WAL mode, only not durable across a power cut. For commits whose loss is
    /// repaired from the disk (an exact epoch's settle) or only ever makes Rewind more
    /// cautious (the guard's fingerprints). Nests: an inner call leaves the outer's setting.
    pub(crate) fn relaxed<T>(&self, f: impl FnOnce() -> Result<T, Error>) -> Result<T, Error> {
        // The connection runs with FULL (`open_database`) outside these sections.
        if self.relaxed.get() {
            return f();
        }
        self.run_cached("PRAGMA synchronous = NORMAL")?;
        self.relaxed.set(true);
        let r = f();
        self.relaxed.set(false);
        let restore = self.run_cached("PRAGMA synchronous = FULL");
        let v = r?;
        restore?;
        Ok(v)
    }

    /// Opens an epoch for `session`. Anything found changed since the last known state is
    /// recorded as external first; the preimage is durable before this returns.
    pub fn begin_epoch(&self, session: &str, spec: &EpochSpec) -> Result<EpochRow, Error> {
        // Two opaque epochs never overlap: with nothing but before/after scans, the changes of
        // two commands running at once cannot be told apart. A process-owned one holds the
        // opaque lock (a kernel lock: released if the process dies) until it settles; any
        // opaque epoch waits, bounded, for the other to finish. Parallel agents that run long
        // commands belong in worktrees.
        let opaque_lock = if spec.paths.is_empty() {
            let wait = crate::lock::default_wait();
            let deadline = std::time::Instant::now() + wait;
            let lock = crate::lock::acquire(
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
        let _lock = self.lock(crate::lock::default_wait(), "epoch begin")?;
        crate::trace::phase("epoch begin: locked");
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
            if let Present::Dir { .. } = root.lstat(p).map_err(|e| io_error("inspecting", p, e))? {
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
    fn with_missing_parents(
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
                let now = root
                    .lstat(dir)
                    .map_err(|e| io_error("inspecting", dir, e))?;
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
        opaque_lock: Option<crate::lock::WorkspaceLock>,
    ) -> Result<EpochRow, Error> {
        self.recover_locked()?;
        self.settle_session_epochs(session)?;
        crate::trace::phase("epoch begin: recovered");
        let owner = if spec.process_owned {
            this_process()
        } else {
            Owner::Session
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
        };
        for p in &spec.paths {
            relpath::check(p)?;
        }
        if let Some(lock) = opaque_lock.filter(|_| spec.process_owned) {
            *self.opaque.borrow_mut() = Some((id.clone(), lock));
        }
        if spec.paths.is_empty() {
            // The opening capture's walk arms the watcher, directory by directory.
            let watcher = spec
                .process_owned
                .then(|| crate::watch::Watcher::new(self.root()))
                .flatten();
            let found = self.capture_found_in(None, None, watcher.as_ref())?;
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
            crate::trace::phase("epoch begin: recorded");
            self.save_and_keep_state(found)?;
            crate::trace::phase("epoch begin: state saved");
        } else {
            self.check_store()?;
            let root = self.rootdir()?;
            let writer = self.store().writer()?;
            let max = self.config().capture.max_file_size();
            let mut disk = Vec::new();
            for p in &spec.paths {
                disk.push(disk_entry(&root, p, Some(&writer), max)?);
            }
            crate::trace::phase("epoch begin: preimages read");
            let mut external = Vec::new();
            for (p, now_entry) in spec.paths.iter().zip(&disk) {
                if let Some(known) = self.last_known(p)? {
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
            crate::trace::phase("epoch begin: recorded");
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
        let _lock = self.lock(crate::lock::default_wait(), "epoch end")?;
        self.recover_locked()?;
        crate::trace::phase("epoch end: locked, recovered");
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
                    Error::State(format!(
                        "session {session} has no open epoch; open one with `rewind epoch begin`"
                    ))
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
                let root = self.rootdir()?;
                let writer = self.store().writer()?;
                let max = self.config().capture.max_file_size();
                let mut pending = oplog::epoch_changes(&self.db(), &epoch.id)?;
                // What was created inside a declared path that is a directory now is this
                // epoch's change too (its preimage: absent).
                let known: HashSet<Vec<u8>> =
                    pending.iter().map(|r| r.change.path.clone()).collect();
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
                    root.remove_dead_temp_files_beside(
                        pending.iter().map(|r| r.change.path.as_slice()),
                    );
                }
                let mut posts = Vec::new();
                for r in &pending {
                    posts.push(disk_entry(&root, &r.change.path, Some(&writer), max)?);
                }
                let pending = self.rebase_on_later_writers(epoch, pending)?;
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
                crate::trace::phase("epoch end: recorded");
                // What was just committed, without reading it back.
                let changes = pending
                    .into_iter()
                    .zip(posts)
                    .filter(|(r, post)| !same(&r.change.before, post))
                    .map(|(r, post)| Change {
                        path: r.change.path,
                        before: r.change.before,
                        after: post,
                    })
                    .collect();
                let mut row = epoch.clone();
                row.state = state;
                row.recovered |= recovered;
                row.settled_ns = Some(now);
                return Ok(Settled {
                    epoch: row,
                    changes,
                });
            }
            _ => {
                debug_assert!(
                    also.is_none(),
                    "`also` runs in an exact epoch's settle only"
                );
                let watched = self
                    .watcher
                    .borrow_mut()
                    .take_if(|(id, _)| id == &epoch.id)
                    .map(|(_, w)| w);
                let dirty = watched.as_ref().and_then(|w| w.dirty());
                if let Some(w) = watched {
                    w.close_in_background();
                }
                crate::trace::phase("settle: watcher read");
                if dirty.as_ref().is_some_and(|d| d.is_empty()) {
                    // The watcher saw nothing happen since before the opening capture: the
                    // tree is what that capture recorded, so there is nothing to capture.
                    failpoint::hit("settle-unchanged-before-record");
                    self.transaction(|| {
                        oplog::settle_epoch(&self.db(), &epoch.id, state, recovered, now)
                    })?;
                } else {
                    let found = self.capture_found_in(None, dirty.as_ref(), None)?;
                    failpoint::hit("settle-capture-before-record");
                    self.transaction(|| {
                        self.record_found(&found, &epoch.session, Some(&epoch.id))?;
                        oplog::settle_epoch(&self.db(), &epoch.id, state, recovered, now)
                    })?;
                    self.save_and_keep_state(found)?;
                }
            }
        }
        let mut held = self.opaque.borrow_mut();
        if held.as_ref().is_some_and(|(id, _)| id == &epoch.id) {
            *held = None;
        }
        drop(held);
        let row = oplog::epoch(&self.db(), &epoch.id)?.expect("just settled");
        let changes = oplog::epoch_changes(&self.db(), &epoch.id)?
            .into_iter()
            .map(|r| r.change)
            .collect();
        Ok(Settled {
            epoch: row,
            changes,
        })
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

    /// Marks a turn boundary for `session`, bound to conversation node `message` (its parent
    /// defaults to the session head), with the tree of the whole workspace at this moment.
    pub fn checkpoint(
        &self,
        session: &str,
        message: Option<&str>,
        parent: Option<&str>,
        label: Option<&str>,
        payload: Option<Vec<u8>>,
    ) -> Result<CheckpointRow, Error> {
        let cap = self.config().checkpoint.max_payload_size();
        if let Some(p) = payload.as_ref().filter(|p| p.len() as u64 > cap) {
            return Err(payload_too_large(p.len() as u64, cap));
        }
        let _lock = self.lock(crate::lock::default_wait(), "checkpoint")?;
        // A whole-tree command: the moment to keep the WAL short for the quick ones.
        self.store().checkpoint_wal_on_close();
        self.recover_locked()?;
        self.settle_session_epochs(session)?;
        let now = now_ns();
        // The tree at this moment, user edits included: a scan, which stores nothing new and
        // writes no cache when nothing changed (the stat cache makes it O(stat) per file).
        let found = self.capture_found(None)?;
        let root = found.capture.root;
        let row = self.transaction(|| {
            oplog::ensure_session(&self.db(), session, now)?;
            self.record_found(&found, session, None)?;
            let head = oplog::session_head(&self.db(), session)?;
            let parent = parent.map(str::to_string).or(head);
            if let Some(m) = message {
                oplog::add_node(&self.db(), session, m, parent.as_deref(), now)?;
                oplog::set_head(&self.db(), session, Some(m))?;
            }
            let row = CheckpointRow {
                id: random_hex(),
                pos: oplog::next_pos(&self.db())?,
                session: session.to_string(),
                message: message.map(str::to_string),
                parent,
                label: label.map(str::to_string),
                root,
                payload: payload.clone(),
                pinned: false,
                created_ns: now,
            };
            oplog::insert_checkpoint(&self.db(), &row)?;
            Ok(row)
        })?;
        self.save_and_keep_state(found)?;
        Ok(row)
    }

    pub(crate) fn run_capture(
        &self,
        old: &State,
        progress: Option<&Progress>,
        dirty: Option<&crate::watch::Dirty>,
        watch: Option<&crate::watch::Watcher>,
    ) -> Result<Capture, Error> {
        // Nothing to skip: `Workspace::open` refuses a state directory inside the root.
        self.check_store()?;
        let mut opts = self.capture_options(progress);
        opts.dirty = dirty;
        opts.watch = watch;
        capture::capture(self.root(), self.store(), old, &opts)
    }
}

#[cfg(test)]
mod tests {
    use crate::{EpochSpec, OpenOptions, Workspace};

    /// A workspace in `t` with a file `a` in it.
    fn workspace(t: &tempfile::TempDir) -> (std::path::PathBuf, Workspace) {
        let (root, home) = (t.path().join("ws"), t.path().join("home"));
        std::fs::create_dir_all(&root).unwrap();
        std::fs::write(root.join("a"), b"1").unwrap();
        let opts = OpenOptions {
            force: false,
            home: Some(home),
        };
        let ws = Workspace::open(&root, &opts).unwrap();
        (root, ws)
    }

    fn synchronous(ws: &Workspace) -> i64 {
        ws.db()
            .query_row("PRAGMA synchronous", [], |r| r.get(0))
            .unwrap()
    }

    #[test]
    fn an_exact_settle_is_relaxed_and_leaves_full_durability_behind() {
        let t = tempfile::tempdir().unwrap();
        let (root, ws) = workspace(&t);
        ws.snapshot("init", None).unwrap();
        assert_eq!(synchronous(&ws), 2, "FULL by default");
        let spec = EpochSpec {
            tool: Some("write".into()),
            tool_call: None,
            paths: vec![b"a".to_vec()],
            process_owned: false,
            note: None,
        };
        let e = ws.begin_epoch("s", &spec).unwrap();
        std::fs::write(root.join("a"), b"2").unwrap();
        let settled = ws.end_epoch("s", Some(&e.id), false).unwrap();
        assert_eq!(settled.changes.len(), 1);
        // What the settle returns is what it stored.
        assert_eq!(
            Some(settled.epoch.clone()),
            crate::oplog::epoch(&ws.db(), &e.id).unwrap()
        );
        let stored: Vec<_> = crate::oplog::epoch_changes(&ws.db(), &e.id)
            .unwrap()
            .into_iter()
            .map(|r| r.change)
            .collect();
        assert_eq!(settled.changes, stored);
        assert_eq!(synchronous(&ws), 2, "the settle puts FULL back");
        let inner = ws
            .relaxed(|| {
                ws.relaxed(|| Ok(synchronous(&ws)))
                    .map(|i| (i, synchronous(&ws)))
            })
            .unwrap();
        assert_eq!(
            inner,
            (1, 1),
            "a nested relaxed call keeps the outer's NORMAL"
        );
        assert_eq!(synchronous(&ws), 2);
    }

    /// The query plan of `sql` on the workspace's database, one line per step.
    fn plan(ws: &Workspace, sql: &str) -> String {
        let db = ws.db();
        let mut st = db.prepare(&format!("EXPLAIN QUERY PLAN {sql}")).unwrap();
        for i in 1..=st.parameter_count() {
            st.raw_bind_parameter(i, "ab").unwrap();
        }
        let mut rows = st.raw_query();
        let mut steps = Vec::new();
        while let Some(r) = rows.next().unwrap() {
            steps.push(r.get::<_, String>(3).unwrap());
        }
        steps.join("\n")
    }

    /// Every epoch begin and end lists the open epochs and `epoch end ID` resolves ids: neither
    /// may read the whole history, or each tool call gets slower as a session grows (with 33k
    /// epochs they took 5-7 ms each).
    #[test]
    fn per_call_queries_do_not_scan_the_history() {
        let t = tempfile::tempdir().unwrap();
        let (_, ws) = workspace(&t);
        // With rows the planner has something to choose from.
        ws.snapshot("init", None).unwrap();
        let open = plan(&ws, &crate::oplog::open_epochs_sql());
        assert!(open.contains("epochs_open"), "{open}");
        let ids = plan(&ws, crate::oplog::IDS_WITH_PREFIX);
        assert!(!ids.contains("SCAN"), "{ids}");
        // `rewind log` of one session: found through the session's index, not by reading the
        // whole history newest first and filtering (as a session with few epochs did).
        let p = plan(&ws, &crate::oplog::epochs_sql(true));
        assert!(
            p.contains("SEARCH epochs USING INDEX epochs_by_session"),
            "{p}"
        );
        let p = plan(&ws, &crate::oplog::checkpoints_sql(true));
        assert!(
            p.contains("SEARCH checkpoints USING INDEX checkpoints_by_message"),
            "{p}"
        );
        // Both still find what they should (an id prefix in any case).
        let e = ws
            .begin_epoch(
                "s",
                &EpochSpec {
                    tool: None,
                    tool_call: None,
                    paths: vec![b"x".to_vec()],
                    process_owned: false,
                    note: None,
                },
            )
            .unwrap();
        let found = crate::oplog::ids_with_prefix(&ws.db(), &e.id[..6].to_uppercase()).unwrap();
        assert_eq!(found, vec![(e.id.clone(), true)]);
        assert_eq!(crate::oplog::open_epochs(&ws.db()).unwrap().len(), 1);
    }
}
