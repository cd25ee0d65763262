//! Whole-tree captures, attributed: what differs from the last known state of each path,
//! recorded for the epoch being settled or as an external epoch; and the stat cache kept
//! between the captures of one process.

use std::collections::{BTreeMap, HashMap, HashSet};

use rewind_store::{EntryKind, ObjectId};

use crate::base::{now_ns, random_hex};
use crate::capture::scan::Progress;
use crate::capture::state::{State, StateStamp};
use crate::capture::{self, Capture};
use crate::db::oplog::{self, EpochKind, EpochRow, EpochState, Owner};
use crate::model::entry::{Change, Entry};
use crate::workspace::Workspace;
use crate::Error;

use super::*;

impl Workspace {
    pub(super) fn last_known(&self, rel: &[u8]) -> Result<Option<Option<Entry>>, Error> {
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
    pub(super) fn pending_paths(&self) -> Result<HashSet<Vec<u8>>, Error> {
        let mut out = HashSet::new();
        let open = oplog::open_epochs(&self.db())?;
        for e in open {
            if e.kind == EpochKind::Exact {
                out.extend(e.paths);
            }
        }
        Ok(out)
    }

    /// The capture options of this workspace's configuration, nothing watched or hashed ahead.
    pub(crate) fn capture_options<'a>(
        &self,
        progress: Option<&'a Progress>,
    ) -> capture::CaptureOptions<'a> {
        capture::CaptureOptions {
            ignored: self.config().capture.ignored(),
            max_file_size: self.config().capture.max_file_size(),
            time_budget: self.config().capture.time_budget(),
            progress,
            dirty: None,
            watch: None,
            prehashed: None,
            ahead: None,
            trust_granule_ns: Some(capture::scan::TRUST_GRANULE_NS),
        }
    }

    /// Captures the whole tree and works out which paths differ from the last known state.
    /// With a live watcher (see [`Workspace::use_live_watch`]), only what it saw change is
    /// re-read; the take is marked saved when [`Workspace::save_state`] saves this capture.
    pub(crate) fn capture_found(&self, progress: Option<&Progress>) -> Result<Found, Error> {
        let live = self.live.borrow().as_ref().map(|(w, _)| w.clone());
        let Some(live) = live else {
            return self.capture_found_in(progress, None, None, None);
        };
        let settings = {
            use std::hash::{Hash, Hasher};
            let opts = self.capture_options(None);
            let mut h = std::collections::hash_map::DefaultHasher::new();
            (opts.max_file_size, format!("{:?}", opts.ignored)).hash(&mut h);
            h.finish() | 1
        };
        let (dirty, take, ahead) = live.0.take(settings);
        if let Some((_, t)) = self.live.borrow_mut().as_mut() {
            *t = take;
        }
        if crate::base::trace::on() {
            let ahead = ahead.as_ref().map_or(0, |a| a.len());
            let how = match dirty {
                Some(_) => "live watcher read",
                None => "live watcher cannot vouch, walking",
            };
            crate::base::trace::phase(&format!("capture: {how} ({ahead} files hashed ahead)"));
        }
        self.capture_found_in(progress, dirty.as_ref(), Some(&live.0), ahead.as_ref())
    }

    /// As [`Workspace::capture_found`], re-reading only `dirty` directories when a watcher
    /// vouches for the rest, and taking the content of files hashed `ahead` where the walk
    /// finds them as they were read.
    pub(crate) fn capture_found_in(
        &self,
        progress: Option<&Progress>,
        dirty: Option<&crate::capture::watch::Dirty>,
        watch: Option<&crate::capture::watch::Watcher>,
        ahead: Option<&crate::capture::watch::HashedAhead>,
    ) -> Result<Found, Error> {
        let Taken {
            state: old,
            stamp,
            unsaved,
            lost,
        } = self.take_state();
        let dirty = dirty.filter(|_| !old.is_empty() && !lost);
        let mut capture = self.run_capture(&old, progress, dirty, watch, ahead)?;
        // A walk that found the tree exactly as cached leaves the cache to be the new state.
        let old = if capture.same_as_cache {
            capture.state = old;
            capture.keep_fresh_stamps();
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
                unsaved,
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
        let covering = self.prehashed.borrow().is_some();
        let is_uncovered = |e: &Option<Entry>| e.is_some_and(|e| e.kind == EntryKind::Uncovered);
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
                    // A background baseline covering a file: no change (see below), so not a
                    // candidate, unless the op log has a row of it after the cache (added
                    // back from those rows below, with this same cached entry). At 280k
                    // covered files, copying their paths here was most of the attribution.
                    if covering
                        && is_uncovered(&c.before)
                        && c.after.is_some_and(|a| a.kind != EntryKind::Uncovered)
                    {
                        continue;
                    }
                    candidates.insert(c.path.clone(), c.before);
                }
            }
        }
        let changed = oplog::changes_after(&self.db(), after_pos)?;
        for r in &changed {
            candidates.entry(r.change.path.clone()).or_insert_with(|| {
                old.get(&r.change.path).map(|s| Entry {
                    kind: s.kind,
                    mode: s.mode,
                    size: s.size,
                    id: s.id,
                })
            });
        }
        // Each path's newest change after the cache, from the rows read above (in op-log
        // order, so the last one of a path wins): one query, where a query per candidate cost
        // seconds when a capture finds 100k paths changed (a background baseline's).
        let latest: HashMap<&[u8], &oplog::ChangeRow> = changed
            .iter()
            .map(|r| (r.change.path.as_slice(), r))
            .collect();
        let pending = self.pending_paths()?;
        // A path that appears now, was absent as far as the op log knows, and was born before
        // the previous capture was one that capture could not see (ignored then, or inside an
        // unreadable directory): "existed, uncaptured", never "created", so no rewind deletes it.
        // (A renamed or hard-linked file that was captured under another name keeps its birth
        // time too: its inode, known to the previous capture, tells it apart.)
        let previous_ns = oplog::latest_snapshot_ns(&self.db())?.unwrap_or(i64::MAX);
        let mut seen_before: Option<(HashSet<u64>, HashSet<ObjectId>)> = None;
        let mut captured_before = |now: &crate::capture::state::StatEntry| {
            let captured = |kind: EntryKind| kind != EntryKind::Uncovered;
            let (inos, ids) = seen_before.get_or_insert_with(|| {
                let inos = old
                    .dirs
                    .values()
                    .flat_map(|v| v.iter())
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
            let known = match latest.get(path.as_slice()) {
                Some(r) => row_state(r),
                None => cached,
            };
            let disk = capture.state.get(&path).map(|s| Entry {
                kind: s.kind,
                mode: s.mode,
                size: s.size,
                id: s.id,
            });
            if covering && is_uncovered(&known) && disk.is_some_and(|d| !is_uncovered(&Some(d))) {
                // A background baseline taking a file's content is not a change of the file:
                // no row (the snapshot and the stat cache now hold the content).
                continue;
            }
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
            unsaved,
        })
    }

    /// Runs `capture`, whose store commit the caller's next commit, durable, makes durable: the
    /// index rows then commit without a flush of their own (one `fdatasync` fewer per
    /// capture that stores anything; about 0.3-0.6 ms here). Why that is safe: the WAL is one
    /// sequence of frames, each checksummed with the ones before it, so a commit that survives
    /// a power cut brings every earlier frame with it. Whatever names the new objects (the op
    /// log's rows, another process's rows that found them in the index) commits after them and
    /// flushes them; a power cut before any such flush loses only objects nothing names, in
    /// packs in place that gc removes. The stat cache, which names them too, is
    /// written after the caller's commit.
    pub(crate) fn capture_before_record(
        &self,
        capture: impl FnOnce() -> Result<Found, Error>,
    ) -> Result<Found, Error> {
        self.relaxed(capture)
    }

    /// Records what a capture found: attributed to `into` (an epoch being settled), else to the
    /// newest live opaque epoch of another writer (its command may be the one writing), else as
    /// a new external epoch. Also records the snapshot. Call inside a transaction. Returns the
    /// op-log position it recorded at.
    pub(crate) fn record_found(
        &self,
        found: &Found,
        session: &str,
        into: Option<&str>,
    ) -> Result<i64, Error> {
        Ok(self.record(found, session, into, false)?.0)
    }

    /// [`Workspace::record_found`] into the epoch `into`, which also returns every change that
    /// epoch now holds, sorted by path: what reading its rows back would give, without the read
    /// (a 1,000-path settle spent 0.6 ms on it).
    pub(crate) fn record_found_into(
        &self,
        found: &Found,
        session: &str,
        into: &str,
    ) -> Result<Vec<Change>, Error> {
        Ok(self.record(found, session, Some(into), true)?.1)
    }

    fn record(
        &self,
        found: &Found,
        session: &str,
        into: Option<&str>,
        keep: bool,
    ) -> Result<(i64, Vec<Change>), Error> {
        let db = &*self.db();
        let pos = oplog::next_pos(db)?;
        let mut kept = Vec::new();
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
            // An epoch has one change per path, from the earliest state to the latest. An
            // opaque epoch can already hold one for a path: another process's capture (a
            // checkpoint) saw its command half-way (a file created, not yet written) and
            // attributed that to it. Replacing the row would lose the first state: merge. (Read
            // once: usually there are none, and a lookup per path doubles the statements.)
            let mut held: BTreeMap<Vec<u8>, oplog::ChangeRow> = oplog::epoch_changes(db, &epoch)?
                .into_iter()
                .map(|r| (r.change.path.clone(), r))
                .collect();
            for c in &found.changes {
                let merged = match held.remove(&c.path) {
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
                    if keep {
                        kept.push(merged);
                    }
                }
            }
            if keep {
                // The rows this capture did not touch stay as they were.
                kept.extend(held.into_values().map(|r| r.change));
                kept.sort_unstable_by(|a, b| a.path.cmp(&b.path));
            }
        } else if let (true, Some(epoch)) = (keep, into) {
            kept = oplog::epoch_changes(db, epoch)?
                .into_iter()
                .map(|r| r.change)
                .collect();
        }
        // Its time is when the walk started (coarse clock): what an "existed, uncaptured"
        // judgement of a later capture compares birth times with.
        crate::db::snapshots::insert(
            db,
            &found.capture.root,
            found.capture.started_ns,
            session,
            pos,
        )?;
        Ok((pos, kept))
    }

    /// A settled `external` epoch at `pos` (changes found on disk that no epoch made); returns
    /// its id. Call inside a transaction.
    pub(super) fn insert_external(&self, found_by: &str, pos: i64) -> Result<String, Error> {
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
                collected_ns: None,
            },
        )?;
        Ok(id)
    }

    /// Saves the stat cache after the op log recorded everything it implies. A capture that
    /// changed nothing in the cache skips the write (8 MB at 100k files): an older `pos` stays
    /// valid, it only means a few more op-log rows are re-checked next time.
    /// A cache newer than the file (a server's, see [`Workspace::save_and_keep_state`]) is
    /// always written.
    pub(crate) fn save_state(&self, found: &mut Found) -> Result<(), Error> {
        let pos = oplog::last_pos(&self.db())?;
        if !found.capture.state_changed && !found.unsaved && pos - found.capture.state.pos < 10_000
        {
            // The saved cache is still what this capture found.
            self.live_saved();
            return Ok(());
        }
        found.capture.state.pos = pos;
        found.stamp = Some(found.capture.state.save(&self.state_path())?);
        self.live_saved();
        Ok(())
    }

    /// The capture of the live watcher's last take is the saved stat cache now.
    fn live_saved(&self) {
        if let Some((w, take)) = self.live.borrow_mut().as_mut() {
            w.0.saved(std::mem::take(take));
        }
    }

    /// [`Workspace::save_state`], then keeps the state in memory for this process's next
    /// capture (the closing capture of an `exec`).
    ///
    /// A server's captures (a live watcher) write `state.bin` at most every
    /// [`KEEP_UNSAVED_NS`]: writing it is O(tree) (8 MB at 100k files, about 20 ms), and a
    /// capture the watcher vouches for is O(changed). Until then the newer cache lives only in
    /// memory, which is safe because an older `state.bin` is always a valid cache (its `pos`
    /// says which op-log rows it has not seen; see [`Workspace::save_state`]), and because a
    /// process that replaces `state.bin` meanwhile makes the server walk the whole tree (see
    /// [`Workspace::take_state`]). A server killed before the write leaves the older file:
    /// the next command re-hashes what changed since, as after any crash. gc, which keeps
    /// what `state.bin` vouches for, keeps the kept cache's objects too: they are the tree of
    /// the newest snapshot (every capture records one), which gc always keeps.
    pub(crate) fn save_and_keep_state(&self, mut found: Found) -> Result<(), Error> {
        let deferred = found.stamp.filter(|stamp| {
            self.live.borrow().is_some()
                && crate::base::now_ns() - stamp.mtime_ns() < KEEP_UNSAVED_NS
        });
        if let Some(stamp) = deferred {
            let mut state = found.capture.state;
            state.pos = oplog::last_pos(&self.db())?;
            if state.written_ns == 0 {
                // Freshly made: an entry is racy if modified at or after the walk began
                // (no file was written to take the mtime of). A cache that did not change
                // keeps the cutoff it had.
                state.written_ns = found.capture.started_ns;
            }
            self.live_saved();
            self.keep_state(stamp, state, true);
            return Ok(());
        }
        self.save_state(&mut found)?;
        if let Some(stamp) = found.stamp {
            self.keep_state(stamp, found.capture.state, false);
        }
        Ok(())
    }

    /// The stat cache: the one this process kept, if `state.bin` is still the file it matches
    /// (one `stat`), else read from disk; whether it is newer than that file, and whether a
    /// newer one was lost (the capture that takes it then walks the whole tree).
    pub(crate) fn take_state(&self) -> Taken {
        let path = self.state_path();
        // A server's handles share one kept cache through its live watcher.
        let shared = self.live.borrow().as_ref().and_then(|(w, _)| w.take_kept());
        let kept = shared.or_else(|| self.state_cache.borrow_mut().take());
        let mut lost = false;
        if let Some(k) = kept {
            if StateStamp::of(&path) == Some(k.stamp) {
                return Taken {
                    state: k.state,
                    stamp: Some(k.stamp),
                    unsaved: k.unsaved,
                    lost: false,
                };
            }
            lost = k.unsaved;
        }
        let (state, stamp) = State::load_stamped(&path);
        Taken {
            state,
            stamp,
            unsaved: false,
            lost,
        }
    }

    /// Writes the kept stat cache to `state.bin` if it is newer than the file (see
    /// [`Workspace::save_and_keep_state`]), under the workspace lock.
    pub fn save_kept_state(&self) -> Result<(), Error> {
        let _lock = self.lock(
            crate::workspace::lock::default_wait(),
            "saving the stat cache",
        )?;
        let t = self.take_state();
        let stamp = if t.unsaved {
            Some(t.state.save(&self.state_path())?)
        } else {
            t.stamp
        };
        if let Some(stamp) = stamp {
            self.keep_state(stamp, t.state, false);
        }
        Ok(())
    }

    /// Runs `f` on the stat cache as it is now, without taking it (so without the workspace
    /// lock): the kept one if `state.bin` is still the file it was made from, else the file's.
    pub(crate) fn peek_state<R>(&self, f: impl FnOnce(&State) -> R) -> R {
        let path = self.state_path();
        let stamp = StateStamp::of(&path);
        {
            let live = self.live.borrow().as_ref().map(|(w, _)| w.clone());
            let shared = live.as_ref().map(|w| w.kept());
            let local = self.state_cache.borrow();
            let kept = match &shared {
                Some(guard) => guard.as_ref(),
                None => local.as_ref(),
            };
            if let Some(k) = kept.filter(|k| Some(k.stamp) == stamp) {
                return f(&k.state);
            }
        }
        f(&State::load(&path))
    }

    /// Keeps `state` (made from the file stamped `stamp`; newer than it if `unsaved`) for
    /// [`Workspace::take_state`].
    pub(crate) fn keep_state(&self, stamp: StateStamp, mut state: State, unsaved: bool) {
        if state.written_ns == 0 {
            // As if loaded from that file: entries modified at or after its mtime are racy.
            state.written_ns = stamp.mtime_ns();
        }
        let kept = crate::capture::watch::Kept {
            stamp,
            state,
            unsaved,
        };
        match self.live.borrow().as_ref() {
            Some((w, _)) => w.keep(kept),
            None => *self.state_cache.borrow_mut() = Some(kept),
        }
    }

    pub(crate) fn run_capture(
        &self,
        old: &State,
        progress: Option<&Progress>,
        dirty: Option<&crate::capture::watch::Dirty>,
        watch: Option<&crate::capture::watch::Watcher>,
        ahead: Option<&crate::capture::watch::HashedAhead>,
    ) -> Result<Capture, Error> {
        // Nothing to skip: `Workspace::open` refuses a state directory inside the root.
        self.check_store()?;
        let mut opts = self.capture_options(progress);
        opts.dirty = dirty;
        opts.watch = watch;
        opts.ahead = ahead;
        let prehashed = self.prehashed.borrow();
        opts.prehashed = prehashed.as_ref();
        let capture = capture::capture(self.root(), self.store(), old, &opts)?;
        if capture.stats.deferred > 0 {
            self.baseline_deferred();
        }
        Ok(capture)
    }
}

/// How long a server keeps a stat cache newer than `state.bin` before writing it (see
/// [`Workspace::save_and_keep_state`]).
pub(crate) const KEEP_UNSAVED_NS: i64 = 10_000_000_000;

/// What [`Workspace::take_state`] found.
pub(crate) struct Taken {
    pub state: State,
    /// The `state.bin` the cache was read from or made from, if there is one.
    pub stamp: Option<StateStamp>,
    /// The cache is newer than that file (kept unsaved by a server).
    pub unsaved: bool,
    /// A cache newer than `state.bin` was dropped because another process replaced the file
    /// meanwhile. That process's cache came from the older file, so a watcher's take, which
    /// covers only what happened since this process's last capture, cannot vouch for the
    /// difference: the capture walks the whole tree (and its result, kept, is what the next
    /// take starts from).
    pub lost: bool,
}
