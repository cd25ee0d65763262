//! Retention: which checkpoints and epochs garbage collection drops, and the sweep that frees
//! their bytes (see `docs/format.md`, "Garbage collection").
//!
//! Policy, per workspace: keep each session's newest `keep` checkpoints, drop checkpoints
//! older than `max_age`, then drop the oldest first until the state fits `max_bytes`. Never
//! dropped: each session's head checkpoint, pinned checkpoints, open epochs, unfinished
//! restores, the stat cache and the last known state of every path. A dropped checkpoint stays
//! in the op log marked collected (a restore to it is refused, exit 7); so do the epochs only
//! dropped checkpoints needed.
//!
//! The sweep holds the workspace lock: every writer stores objects and records what refers to
//! them under that lock. The mark runs before it, without the lock; under the lock a generation
//! (the database's `data_version` and the stat cache's stamp) shows whether any writer
//! committed since, and if one did the mark is made again under the lock. So nothing can gain
//! a reference to an object between the mark the sweep uses and the sweep.

mod mark;
mod report;

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use rewind_store::{ObjectId, SweepStats};

use crate::base::{failpoint, now_ns};
use crate::capture::state::{State, StateStamp};
use crate::db::{self, oplog};
use crate::model::oplog::{CheckpointRow, EpochState};
use crate::rewind::{target_tree, Target};
use crate::workspace::{orphans, Workspace};
use crate::Error;
use mark::{Root, GONE, KEPT};
pub use report::{CollectedCheckpoint, GcOptions, GcReport};

/// What the policy decided, before anything is written.
struct Decision {
    collect_checkpoints: Vec<CheckpointRow>,
    collect_epochs: Vec<String>,
    forget_snapshots_at: Option<i64>,
    live: HashSet<ObjectId>,
    state_after: u64,
    fingerprints: Vec<(String, i64)>,
    kept: u64,
}

impl Workspace {
    /// Pins (or unpins) checkpoint `id` (or a message id of `session`): a pinned checkpoint is
    /// never collected. Returns it.
    pub fn pin(&self, session: &str, id: &str, pinned: bool) -> Result<CheckpointRow, Error> {
        let _lock = self.lock(crate::workspace::lock::default_wait(), "pin")?;
        let c = match self.resolve(session, id)? {
            Target::Checkpoint(c) => c,
            Target::Epoch(e) => {
                return Err(Error::State(format!(
                    "{} is an epoch; only checkpoints can be pinned",
                    e.id
                )))
            }
        };
        crate::rewind::refuse_collected_checkpoint(&c)?;
        db::gc::set_pinned(&self.db(), &c.id, pinned)?;
        Ok(CheckpointRow { pinned, ..c })
    }

    /// Bytes of the state directory (packs, op log and index, stat cache), as `du` counts
    /// apparent sizes, but a clone file counts only the blocks no workspace file shares with
    /// it; worktrees are not in it.
    pub fn state_bytes(&self) -> u64 {
        orphans::dir_bytes(self.state_dir())
    }

    /// Whether the state exceeds `[retention] max_bytes` (false without one): after a
    /// checkpoint, a front starts an automatic gc ([`GcOptions::auto`]) off its own path.
    pub fn gc_due(&self) -> bool {
        self.config()
            .retention
            .max_bytes
            .is_some_and(|b| self.state_bytes() > b.0)
    }

    /// The roots of the other workspaces registered in the same state directory whose root
    /// still exists (for `gc --all-workspaces`).
    pub fn other_workspaces(&self) -> Vec<std::path::PathBuf> {
        match self.state_dir().parent().and_then(|p| p.parent()) {
            Some(home) => orphans::live_roots(home, self.id()),
            None => Vec::new(),
        }
    }

    /// Runs garbage collection under `opts` (unset fields from `[retention]`).
    ///
    /// An automatic run gives way at once to a gc already running, so checkpoints made while
    /// that one ran can leave the state over budget with no gc to come: it goes round again
    /// while the state is still over budget and the last round freed something (a few rounds
    /// at most).
    pub fn gc(&self, opts: &GcOptions) -> Result<GcReport, Error> {
        const AUTO_ROUNDS: u32 = 4;
        let mut report = self.gc_round(opts)?;
        let mut rounds = 1;
        while opts.auto
            && !opts.dry_run
            && !report.skipped
            && report.bytes_freed > 0
            && rounds < AUTO_ROUNDS
            && self.gc_due()
        {
            let next = self.gc_round(opts)?;
            if next.skipped {
                break;
            }
            report = report.then(next);
            rounds += 1;
        }
        Ok(report)
    }

    /// One garbage collection (see [`Workspace::gc`]).
    fn gc_round(&self, opts: &GcOptions) -> Result<GcReport, Error> {
        let cfg = &self.config().retention;
        let opts = GcOptions {
            dry_run: opts.dry_run,
            max_bytes: opts.max_bytes.or(cfg.max_bytes.map(|s| s.0)),
            max_age: opts.max_age.or(cfg.max_age.map(|s| s.0)),
            keep: opts.keep.or(cfg.keep),
            auto: opts.auto,
        };
        // At most one gc per workspace: an automatic one gives way at once.
        let wait = match opts.auto {
            true => Duration::ZERO,
            false => crate::workspace::lock::default_wait(),
        };
        let gc_lock = match opts.dry_run {
            true => Ok(None),
            false => crate::workspace::lock::acquire(&self.state_dir().join("gc.lock"), wait, "gc")
                .map(Some),
        };
        let _gc_lock = match gc_lock {
            Ok(l) => l,
            Err(Error::Busy { .. }) if opts.auto => {
                return Ok(GcReport {
                    skipped: true,
                    ..Default::default()
                })
            }
            Err(e) => return Err(e),
        };
        if opts.auto && !self.gc_due() {
            return Ok(GcReport {
                skipped: true,
                ..Default::default()
            });
        }
        // Nothing recorded or stored since the last complete gc, nothing the policy drops and
        // no budget exceeded: there is nothing to collect, and no mark is needed to say so.
        let home = self.state_dir().parent().and_then(|p| p.parent());
        let orphans_removed = match home {
            Some(home) => orphans::reclaim(home, self.id(), opts.max_age, opts.dry_run)?,
            None => Vec::new(),
        };
        let unchanged = self.since_last_gc()?;
        if unchanged && self.policy_drops_nothing(&opts)? {
            let state = self.state_bytes();
            if opts.max_bytes.is_none_or(|b| state <= b) {
                let kept = oplog::checkpoints(&self.db(), None, i64::MAX)?
                    .iter()
                    .filter(|c| c.collected_ns.is_none())
                    .count() as u64;
                return Ok(GcReport {
                    dry_run: opts.dry_run,
                    kept_checkpoints: kept,
                    state_bytes_before: state,
                    state_bytes_after: state,
                    max_bytes: opts.max_bytes,
                    within_budget: true,
                    orphans_removed,
                    ..Default::default()
                });
            }
        }
        if !opts.dry_run {
            let _lock = self.lock(crate::workspace::lock::default_wait(), "gc")?;
            self.recover_locked()?;
            // Left by a gc killed between its index commit and its pack deletes.
            self.store().remove_unindexed_packs()?;
        }
        // The mark and the plan read without the lock: writers go on meanwhile. Under the lock,
        // the generation says whether any of them committed since; if one did, they are made
        // again under the lock, where nothing can change them (see docs/format.md).
        // Read before the generation: rows committed after the generation was read come after
        // this position.
        let pos0 = oplog::last_pos(&self.db())?;
        let generation = self.generation()?;
        let mut before = self.state_bytes();
        let mut d = self.decide(&opts, before)?;
        let mut plan = self.store().plan_sweep(&d.live, opts.max_bytes.is_some())?;
        crate::base::trace::phase("gc: sweep planned");
        let _lock = match opts.dry_run {
            true => None,
            false => Some(self.lock(crate::workspace::lock::default_wait(), "gc")?),
        };
        if !opts.dry_run && self.generation()? != generation {
            // Writers committed meanwhile. If what the policy drops still may be dropped, keep
            // it and add to the live set everything anything else refers to now (a superset of
            // what is live: only what was already found unreferenced can go); else decide anew.
            let (_, droppable) = self.droppable(&opts)?;
            let still: HashSet<&str> = droppable.iter().map(|c| c.id.as_str()).collect();
            if d.collect_checkpoints
                .iter()
                .all(|c| still.contains(c.id.as_str()))
            {
                let stat_cache_changed = StateStamp::of(&self.state_path()) != generation.1;
                let extra = match self.referenced_since(&d, pos0, stat_cache_changed)? {
                    Some(extra) => extra,
                    None => self.referenced_now(&d)?,
                };
                d.live.extend(extra);
            } else {
                before = self.state_bytes();
                d = self.decide(&opts, before)?;
            }
            plan = self.store().plan_sweep(&d.live, opts.max_bytes.is_some())?;
            crate::base::trace::phase("gc: marked again under the lock");
        }
        let mut report = GcReport {
            dry_run: opts.dry_run,
            checkpoints: d
                .collect_checkpoints
                .iter()
                .map(|c| CollectedCheckpoint {
                    id: c.id.clone(),
                    session: c.session.clone(),
                    message: c.message.clone(),
                    created_ns: c.created_ns,
                })
                .collect(),
            epochs: d.collect_epochs.clone(),
            kept_checkpoints: d.kept,
            state_bytes_before: before,
            max_bytes: opts.max_bytes,
            ..Default::default()
        };
        let forget = match d.forget_snapshots_at {
            Some(pos) => db::gc::snapshots_to_forget(&self.db(), pos)?.len() as u64,
            None => 0,
        };
        report.snapshots = forget;
        report.orphans_removed = orphans_removed;
        let nothing = plan.is_empty()
            && d.collect_checkpoints.is_empty()
            && d.collect_epochs.is_empty()
            && d.forget_snapshots_at.is_none();
        if opts.dry_run || nothing {
            fill(&mut report, &plan.stats);
            report.state_bytes_after = d.state_after;
            report.within_budget = opts.max_bytes.is_none_or(|b| d.state_after <= b);
            if !opts.dry_run {
                self.note_complete_gc()?;
            }
            return Ok(report);
        }
        // Until this gc completes, the next one marks in full.
        db::gc::set_last_gc(&self.db(), None)?;
        failpoint::hit("gc-after-mark");
        self.store().repack(&mut plan)?;
        crate::base::trace::phase("gc: repacked");
        failpoint::hit("gc-after-repack");
        let now = now_ns();
        self.transaction(|| {
            let checkpoints = d.collect_checkpoints.iter().map(|c| (c.id.as_str(), now));
            db::gc::collect_checkpoints(&self.db(), checkpoints)?;
            let epochs = d.collect_epochs.iter().map(|e| (e.as_str(), now));
            db::gc::collect_epochs(&self.db(), epochs)?;
            if let Some(pos) = d.forget_snapshots_at {
                db::gc::forget_snapshots(&self.db(), pos)?;
            }
            for (session, pos) in &d.fingerprints {
                db::gc::forget_fingerprints(&self.db(), session, *pos)?;
            }
            crate::base::trace::phase("gc: history marked collected");
            self.store().commit_sweep(&plan)?;
            Ok(())
        })?;
        crate::base::trace::phase("gc: index updated");
        failpoint::hit("gc-after-index");
        let stats = self
            .store()
            .finish_sweep(plan, &|| failpoint::hit("gc-after-pack-delete"))?;
        fill(&mut report, &stats);
        crate::base::trace::phase("gc: packs deleted");
        // Free pages are reused by the next inserts; rewriting the whole database to return
        // them (`VACUUM`, 2 s for 270 MB) pays only when they are a quarter of it, or when the
        // state is still over its budget.
        let (size, free) = db::gc::database_bytes(&self.db())?;
        let over = opts.max_bytes.is_some_and(|b| self.state_bytes() > b);
        if free > 0 && (free * 4 > size || over) {
            db::gc::compact(&self.db())?;
            crate::base::trace::phase("gc: database compacted");
        }
        self.note_complete_gc()?;
        report.state_bytes_after = self.state_bytes();
        report.within_budget = opts.max_bytes.is_none_or(|b| report.state_bytes_after <= b);
        Ok(report)
    }

    /// Whether nothing was recorded or stored since the last complete gc (same last op-log
    /// position, same number of stored objects).
    fn since_last_gc(&self) -> Result<bool, Error> {
        let Some(last) = db::gc::last_gc(&self.db())? else {
            return Ok(false);
        };
        let now = (
            oplog::last_pos(&self.db())?,
            self.store().stats()?.objects as i64,
        );
        Ok(now == last)
    }

    /// Records that a gc completed, for [`Workspace::since_last_gc`]. Under the lock.
    fn note_complete_gc(&self) -> Result<(), Error> {
        let now = (
            oplog::last_pos(&self.db())?,
            self.store().stats()?.objects as i64,
        );
        db::gc::set_last_gc(&self.db(), Some(now))
    }

    /// Whether the policy's age drops no checkpoint (the size budget is checked apart).
    fn policy_drops_nothing(&self, opts: &GcOptions) -> Result<bool, Error> {
        let Some(age) = opts.max_age else {
            return Ok(true);
        };
        let (_, droppable) = self.droppable(opts)?;
        let cutoff = now_ns() - age.as_nanos().min(i64::MAX as u128) as i64;
        Ok(!droppable.iter().any(|c| c.created_ns < cutoff))
    }

    /// Every checkpoint, and those the policy may drop (not collected, not a head, not
    /// pinned, not among their session's newest `keep`), oldest first.
    fn droppable(
        &self,
        opts: &GcOptions,
    ) -> Result<(Vec<CheckpointRow>, Vec<CheckpointRow>), Error> {
        let db = self.db();
        let checkpoints = oplog::checkpoints(&db, None, i64::MAX)?;
        let heads: HashSet<String> = oplog::sessions(&db)?
            .into_iter()
            .filter_map(|(s, head)| {
                let head = head?;
                oplog::checkpoint_by_message(&db, &s, &head)
                    .ok()
                    .flatten()
                    .map(|c| c.id)
            })
            .collect();
        drop(db);
        let mut per_session: HashMap<&str, Vec<&CheckpointRow>> = HashMap::new();
        for c in checkpoints.iter().filter(|c| c.collected_ns.is_none()) {
            per_session.entry(&c.session).or_default().push(c);
        }
        let mut protected: HashSet<&str> = HashSet::new();
        for list in per_session.values_mut() {
            list.sort_by_key(|c| std::cmp::Reverse(c.pos));
            let keep = opts.keep.unwrap_or(0) as usize;
            protected.extend(list.iter().take(keep).map(|c| c.id.as_str()));
        }
        for c in &checkpoints {
            if c.pinned || heads.contains(&c.id) {
                protected.insert(&c.id);
            }
        }
        let mut droppable: Vec<CheckpointRow> = checkpoints
            .iter()
            .filter(|c| c.collected_ns.is_none() && !protected.contains(c.id.as_str()))
            .cloned()
            .collect();
        droppable.sort_by_key(|c| (c.created_ns, c.pos));
        Ok((checkpoints, droppable))
    }

    /// What was recorded after op-log position `pos0` refers to (under the lock): every row
    /// written since has a position after it (changes, epochs, checkpoints, snapshots), plus
    /// open epochs, unfinished restores and, if it changed, the stat cache. `None` when a new
    /// row belongs to something `d` drops: then [`Workspace::referenced_now`] reads it all.
    fn referenced_since(
        &self,
        d: &Decision,
        pos0: i64,
        stat_cache_changed: bool,
    ) -> Result<Option<HashSet<ObjectId>>, Error> {
        let dropped_e: HashSet<&str> = d.collect_epochs.iter().map(String::as_str).collect();
        let mut roots: Vec<(i64, Root)> = Vec::new();
        let db = self.db();
        for r in oplog::changes_after(&db, pos0)? {
            if dropped_e.contains(r.epoch.as_str()) {
                return Ok(None);
            }
            roots.extend(r.change.before.map(|b| (KEPT, Root::Entry(b))));
            roots.extend(r.change.after.map(|b| (KEPT, Root::Entry(b))));
        }
        let dropped_c: HashSet<&str> = d
            .collect_checkpoints
            .iter()
            .map(|c| c.id.as_str())
            .collect();
        for c in oplog::checkpoints(&db, None, i64::MAX)? {
            if c.pos <= pos0 {
                break; // newest first
            }
            if dropped_c.contains(c.id.as_str()) {
                return Ok(None);
            }
            roots.push((KEPT, Root::Tree(c.root)));
        }
        for e in oplog::epochs(&db, None, i64::MAX)?
            .into_iter()
            .take_while(|e| e.pos > pos0)
            .chain(oplog::open_epochs(&db)?)
        {
            if let Some(r) = e.pre_root {
                roots.push((KEPT, Root::Tree(r)));
            }
        }
        for (root, pos) in db::gc::snapshot_roots(&db)? {
            if pos > pos0 {
                roots.push((KEPT, Root::Tree(root)));
            }
        }
        roots.extend(unfinished_plan_roots(&db)?);
        drop(db);
        // A worktree made since the mark (from a checkpoint's tree, say).
        for b in crate::worktree::base_trees(self.home(), self.id()) {
            roots.push((KEPT, Root::Tree(b)));
        }
        if stat_cache_changed {
            roots.extend(self.stat_cache_roots());
        }
        let costs = self.store().object_costs()?;
        let more = mark::mark_more(self.store(), &costs, roots, &d.live)?;
        crate::base::trace::phase("gc: marked what was recorded since");
        Ok(Some(more))
    }

    /// Everything that what `d` keeps refers to now, read afresh (under the lock): every
    /// checkpoint, epoch and snapshot it does not drop, open work, the last known state and the
    /// stat cache, down to the last chunk. Objects already in `d.live` are not read again.
    fn referenced_now(&self, d: &Decision) -> Result<HashSet<ObjectId>, Error> {
        let dropped_c: HashSet<&str> = d
            .collect_checkpoints
            .iter()
            .map(|c| c.id.as_str())
            .collect();
        let dropped_e: HashSet<&str> = d.collect_epochs.iter().map(String::as_str).collect();
        let mut roots: Vec<(i64, Root)> = Vec::new();
        let db = self.db();
        for c in oplog::checkpoints(&db, None, i64::MAX)? {
            if c.collected_ns.is_none() && !dropped_c.contains(c.id.as_str()) {
                roots.push((KEPT, Root::Tree(c.root)));
            }
        }
        let mut gone: HashSet<String> = HashSet::new();
        for e in oplog::epochs(&db, None, i64::MAX)? {
            if e.collected_ns.is_some() || dropped_e.contains(e.id.as_str()) {
                gone.insert(e.id);
            } else if let Some(r) = e.pre_root {
                roots.push((KEPT, Root::Tree(r)));
            }
        }
        for (epoch, before, after) in db::gc::all_changes(&db)? {
            if !gone.contains(&epoch) {
                roots.extend(before.map(|b| (KEPT, Root::Entry(b))));
                roots.extend(after.map(|b| (KEPT, Root::Entry(b))));
            }
        }
        for e in db::gc::last_known_entries(&db)? {
            roots.push((KEPT, Root::Entry(e)));
        }
        roots.extend(unfinished_plan_roots(&db)?);
        for (root, pos) in db::gc::snapshot_roots(&db)? {
            if d.forget_snapshots_at.is_none_or(|at| pos > at) {
                roots.push((KEPT, Root::Tree(root)));
            }
        }
        drop(db);
        for b in crate::worktree::base_trees(self.home(), self.id()) {
            roots.push((KEPT, Root::Tree(b)));
        }
        roots.extend(self.stat_cache_roots());
        let costs = self.store().object_costs()?;
        mark::mark_more(self.store(), &costs, roots, &d.live)
    }

    /// What says whether anything was committed since: the database's `data_version` (it
    /// changes when another connection commits) and the stat cache's file stamp.
    fn generation(&self) -> Result<(i64, Option<StateStamp>), Error> {
        Ok((
            db::gc::data_version(&self.db())?,
            StateStamp::of(&self.state_path()),
        ))
    }

    /// The policy: which checkpoints and epochs go, and the objects that stay.
    fn decide(&self, opts: &GcOptions, state_now: u64) -> Result<Decision, Error> {
        let (checkpoints, droppable) = self.droppable(opts)?;
        let droppable: Vec<&CheckpointRow> = droppable.iter().collect();
        // How many of the oldest droppable checkpoints go: the age, then (after the mark) the
        // budget.
        let mut k = match opts.max_age {
            Some(age) => {
                let cutoff = now_ns() - age.as_nanos().min(i64::MAX as u128) as i64;
                droppable
                    .iter()
                    .take_while(|c| c.created_ns < cutoff)
                    .count()
            }
            None => 0,
        };
        let db = self.db();
        let epochs = oplog::epochs(&db, None, i64::MAX)?;
        drop(db);
        let mut per_session: HashMap<&str, Vec<&CheckpointRow>> = HashMap::new();
        for c in checkpoints.iter().filter(|c| c.collected_ns.is_none()) {
            per_session.entry(&c.session).or_default().push(c);
        }
        let droppable_ids: HashSet<&str> = droppable.iter().map(|c| c.id.as_str()).collect();
        let mut anchor_of: HashMap<&str, i64> = droppable
            .iter()
            .enumerate()
            .map(|(i, c)| (c.id.as_str(), i as i64))
            .collect();
        for c in &checkpoints {
            if c.collected_ns.is_some() {
                anchor_of.insert(&c.id, GONE);
            } else if !droppable_ids.contains(c.id.as_str()) {
                anchor_of.insert(&c.id, KEPT);
            }
        }
        // Epochs: what every checkpoint of their session before them needs; the rest goes
        // with the next droppable checkpoint in time (see `mark`).
        let mut by_session: HashMap<&str, Vec<(i64, i64)>> = HashMap::new();
        for c in &checkpoints {
            by_session
                .entry(&c.session)
                .or_default()
                .push((c.pos, anchor_of[c.id.as_str()]));
        }
        let by_session: HashMap<&str, mark::PrefixMax> = by_session
            .into_iter()
            .map(|(s, v)| (s, mark::PrefixMax::new(v)))
            .collect();
        let by_time = |created_ns: i64, pos: i64| -> i64 {
            let before = droppable.partition_point(|d| (d.created_ns, d.pos) < (created_ns, pos));
            before.saturating_sub(1) as i64
        };
        let epoch_anchor: HashMap<&str, i64> = epochs
            .iter()
            .map(|e| {
                let a = if e.state == EpochState::Open {
                    KEPT
                } else if e.collected_ns.is_some() {
                    GONE
                } else {
                    by_session
                        .get(e.session.as_str())
                        .and_then(|p| p.at(e.pos))
                        .unwrap_or_else(|| by_time(e.created_ns, e.pos))
                };
                (e.id.as_str(), a)
            })
            .collect();
        // The roots, each with its anchor.
        let mut roots: Vec<(i64, Root)> = Vec::new();
        for c in &checkpoints {
            let a = anchor_of[c.id.as_str()];
            if a != GONE {
                roots.push((a, Root::Tree(target_tree(&Target::Checkpoint(c.clone()))?)));
            }
        }
        // What a session-scope restore to each kept checkpoint reads (the planner's rows).
        let epoch_pos: HashMap<&str, i64> = epochs.iter().map(|e| (e.id.as_str(), e.pos)).collect();
        // Rows before the session's oldest checkpoint that the age keeps are needed only by
        // checkpoints it drops (anchors below `k`): not read.
        for (session, list) in &per_session {
            let Some(oldest) = list
                .iter()
                .filter(|c| anchor_of[c.id.as_str()] >= k as i64)
                .map(|c| c.pos)
                .min()
            else {
                continue;
            };
            let p = &by_session[session];
            for r in self.undo_rows(session, oldest)? {
                let pos = epoch_pos.get(r.epoch.as_str()).copied().unwrap_or(r.pos);
                if let (Some(b), Some(a)) = (r.change.before, p.at(pos)) {
                    roots.push((a, Root::Entry(b)));
                }
            }
        }
        for e in &epochs {
            let a = epoch_anchor[e.id.as_str()];
            if let (Some(_), true) = (e.pre_root, a != GONE) {
                roots.push((a, Root::Tree(target_tree(&Target::Epoch(e.clone()))?)));
            }
        }
        crate::base::trace::phase("gc: planner rows read");
        let db = self.db();
        for (epoch, before, after) in db::gc::all_changes(&db)? {
            let a = epoch_anchor.get(epoch.as_str()).copied().unwrap_or(KEPT);
            roots.extend(before.map(|b| (a, Root::Entry(b))));
            roots.extend(after.map(|b| (a, Root::Entry(b))));
        }
        crate::base::trace::phase("gc: changes read");
        for e in db::gc::last_known_entries(&db)? {
            roots.push((KEPT, Root::Entry(e)));
        }
        roots.extend(unfinished_plan_roots(&db)?);
        let snapshots = db::gc::snapshot_roots(&db)?;
        drop(db);
        // A snapshot record goes with the droppable checkpoint before its position.
        let snapshot_anchor = |pos: i64| -> i64 {
            let before = droppable.iter().filter(|d| d.pos < pos).count();
            before.saturating_sub(1) as i64
        };
        for (i, (root, pos)) in snapshots.iter().enumerate() {
            let a = if i + 1 == snapshots.len() {
                KEPT
            } else {
                snapshot_anchor(*pos)
            };
            roots.push((a, Root::Tree(*root)));
        }
        crate::base::trace::phase("gc: last known state read");
        // What this workspace's worktrees will be merged against.
        for b in crate::worktree::base_trees(self.home(), self.id()) {
            roots.push((KEPT, Root::Tree(b)));
        }
        roots.extend(self.stat_cache_roots());
        crate::base::trace::phase("gc: roots listed");
        // What the age alone drops (anchors below `k`) is not marked at all: an object only it
        // needs is garbage either way, and one a newer root needs gets that root's anchor (the
        // mark visits roots newest first). At 500 checkpoints of which the age drops 400, this
        // is four fifths of the mark.
        roots.retain(|(a, _)| *a >= k as i64);
        let costs = self.store().object_costs()?;
        crate::base::trace::phase("gc: index read");
        let marks = mark::mark(self.store(), &costs, roots)?;
        crate::base::trace::phase("gc: marked");
        // Bytes freed by dropping the oldest j (j >= k: what is below was not marked, and is
        // in `garbage`): objects whose anchor is below j. One step
        // past the last droppable checkpoint drops the history newer than all of them that no
        // kept checkpoint needs.
        let steps = droppable.len() + 1;
        let mut freed_below = vec![0u64; steps + 1];
        let mut garbage = 0u64;
        for (id, cost) in &costs {
            match marks.anchor.get(id) {
                None => garbage += cost.bytes,
                Some(&a) if a >= 0 && (a as usize) < steps => {
                    freed_below[a as usize + 1] += cost.bytes
                }
                Some(_) => {}
            }
        }
        for j in 1..freed_below.len() {
            freed_below[j] += freed_below[j - 1];
        }
        let after = |j: usize| state_now.saturating_sub(garbage + freed_below[j]);
        if let Some(budget) = opts.max_bytes {
            while k < steps && after(k) > budget {
                k += 1;
            }
        }
        let ck = k.min(droppable.len());
        let dropped: HashSet<&str> = droppable[..ck].iter().map(|c| c.id.as_str()).collect();
        let collect_checkpoints: Vec<CheckpointRow> =
            droppable[..ck].iter().map(|c| (*c).clone()).collect();
        let mut collect_epochs: Vec<(i64, String)> = epochs
            .iter()
            .filter(|e| {
                let a = epoch_anchor[e.id.as_str()];
                a >= 0 && a < k as i64
            })
            .map(|e| (e.pos, e.id.clone()))
            .collect();
        collect_epochs.sort();
        let live: HashSet<ObjectId> = marks
            .anchor
            .iter()
            .filter(|(_, a)| **a >= k as i64)
            .map(|(id, _)| *id)
            .collect();
        let forget_snapshots_at = snapshots
            .iter()
            .take(snapshots.len().saturating_sub(1))
            .filter(|(_, pos)| snapshot_anchor(*pos) < k as i64)
            .map(|(_, pos)| *pos)
            .max();
        let mut fingerprints: HashMap<String, i64> = HashMap::new();
        for c in &collect_checkpoints {
            let e = fingerprints.entry(c.session.clone()).or_insert(c.pos);
            *e = (*e).max(c.pos);
        }
        let kept = checkpoints
            .iter()
            .filter(|c| c.collected_ns.is_none() && !dropped.contains(c.id.as_str()))
            .count() as u64;
        Ok(Decision {
            collect_checkpoints,
            collect_epochs: collect_epochs.into_iter().map(|(_, id)| id).collect(),
            forget_snapshots_at,
            live,
            state_after: after(k),
            fingerprints: fingerprints.into_iter().collect(),
            kept,
        })
    }
}

/// What unfinished restores' journals need (finishing or rolling one back reads both sides):
/// kept by every policy.
fn unfinished_plan_roots(db: &rusqlite::Connection) -> Result<Vec<(i64, Root)>, Error> {
    let mut roots = Vec::new();
    for s in db::gc::unfinished_plans(db)? {
        roots.extend(s.before.map(|b| (KEPT, Root::Entry(b))));
        roots.extend(s.after.map(|b| (KEPT, Root::Entry(b))));
    }
    Ok(roots)
}

impl Workspace {
    /// The stat cache's tree and every entry it vouches for (the next capture compares with
    /// them): kept by every policy.
    fn stat_cache_roots(&self) -> Vec<(i64, Root)> {
        let state = State::load(&self.state_path());
        let mut roots = vec![(KEPT, Root::Tree(state.root))];
        for entries in state.dirs.values() {
            roots.extend(entries.iter().map(|e| {
                (
                    KEPT,
                    Root::Entry(crate::model::entry::Entry {
                        kind: e.kind,
                        mode: e.mode,
                        size: e.size,
                        id: e.id,
                    }),
                )
            }));
        }
        roots
    }
}

fn fill(report: &mut GcReport, s: &SweepStats) {
    report.objects_removed = s.objects_removed;
    report.bytes_freed = s.bytes_freed;
    report.packs_deleted = s.packs_deleted;
    report.packs_written = s.packs_written;
    report.objects_moved = s.objects_moved;
}
