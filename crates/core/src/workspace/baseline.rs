//! Completing the baseline in the background: what `capture.time_budget` leaves uncovered is
//! hashed by one `rewind baseline` per workspace while agents work, not by each later command a
//! budget's worth at a time.
//!
//! A capture whose budget ran out (files left uncovered for it: `CaptureStats::deferred`)
//! leaves a marker, `baseline.due`, in the state directory; a front that sees it
//! ([`Workspace::baseline_due`]) starts `rewind baseline` detached, at low CPU and I/O priority.
//! [`Workspace::complete_baseline`] then repeats, until no deferred file is left:
//!
//! 1. Read the stat cache (no lock: it is replaced whole) and list its uncovered files within
//!    `capture.max_file_size` that this run has not tried yet. None left: remove the marker
//!    and look once more (see `baseline_chunks`); still none: done.
//! 2. Hash them into the store on every core, without the workspace lock, for a chunk of time
//!    ([`CHUNK_MIN`], longer on trees whose record takes long), and commit those objects
//!    (`capture::prehash`).
//! 3. Take the lock and capture, as any command does, with those hashes standing in for
//!    reading the files they vouch for; record it as a snapshot labelled `baseline`. Paths
//!    become covered here, a chunk at a time; the lock is held for a walk, not for the hashing.
//!
//! Crash safety is the capture's own: a run killed before step 3 leaves stored objects that
//! nothing refers to (the next gc frees them) and the marker, so the next command starts
//! another run; a run killed in step 3 is a capture killed like any other. One run at a time:
//! `baseline.lock`, held for the whole run, is taken without waiting.

use std::fs::File;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use rewind_store::EntryKind;
use serde::Serialize;

use crate::capture::prehash::{self, Tried};
use crate::capture::scan::Progress;
use crate::capture::state::{StatEntry, State};
use crate::fs::relpath;
use crate::workspace::{lock, Workspace};
use crate::Error;

/// How long a run hashes at least before it takes the lock and records what it hashed. After
/// a record that took `t`, a chunk hashes for `RECORD_SHARE * t` if that is longer: each record
/// walks the whole tree, and this keeps the records to a fifth of the run on any tree size.
pub const CHUNK_MIN: Duration = Duration::from_secs(5);
const RECORD_SHARE: u32 = 4;

/// A baseline still to complete (`rewind status`).
#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub struct BaselineProgress {
    /// Whether a `rewind baseline` is running now.
    pub running: bool,
    /// Uncovered files within `capture.max_file_size` at the last capture: what it still has
    /// to hash (files that cannot be read stay uncovered after it).
    pub remaining: u64,
}

/// What one `rewind baseline` did.
#[derive(Clone, Debug, Default, Serialize, schemars::JsonSchema)]
pub struct BaselineReport {
    /// Another run was already completing this workspace's baseline: this one did nothing.
    pub already_running: bool,
    /// Files it hashed.
    pub files_hashed: u64,
    /// Their bytes.
    pub bytes_hashed: u64,
    /// Captures it recorded (one per chunk).
    pub captures: u64,
    /// Uncovered files left at the end (within the size cap: files it could not read).
    pub remaining: u64,
}

impl Workspace {
    fn baseline_marker(&self) -> PathBuf {
        self.state_dir().join("baseline.due")
    }

    fn baseline_lock_path(&self) -> PathBuf {
        self.state_dir().join("baseline.lock")
    }

    /// Whether a capture left files for a background baseline to hash: a front then starts
    /// `rewind baseline` (which gives way at once if one runs). One `stat`.
    pub fn baseline_due(&self) -> bool {
        self.baseline_marker().exists()
    }

    /// Called when a capture deferred files: leaves the marker. Best effort: without it the
    /// files are still uncovered and reported, and the next capture tries them again.
    pub(crate) fn baseline_deferred(&self) {
        let _ = File::create(self.baseline_marker());
    }

    /// For `status`: `None` when there is no baseline to complete.
    pub(crate) fn baseline_progress(&self, state: &State) -> Option<BaselineProgress> {
        let running = File::open(self.baseline_lock_path())
            .is_ok_and(|f| matches!(f.try_lock(), Err(std::fs::TryLockError::WouldBlock)));
        if !running && !self.baseline_due() {
            return None;
        }
        Some(BaselineProgress {
            running,
            remaining: self.baseline_left(state),
        })
    }

    /// The stat cache's uncovered paths within the size cap, less `tried`: directory by
    /// directory in the order of their paths, each directory's names in order. (Not one sort
    /// of all the paths: 280,000 of them took 30-40 ms; a directory's files together is what
    /// the reads and the grouping in `prehash` want.)
    fn baseline_todo(&self, state: &State, tried: &Tried) -> Vec<Vec<u8>> {
        let mut dirs: Vec<_> = state.dirs.iter().collect();
        dirs.sort_unstable_by(|a, b| a.0.cmp(b.0));
        dirs.into_iter()
            .flat_map(|(dir, entries)| {
                self.left_in(entries)
                    .filter(|e| !tried.contains(dir, &e.name))
                    .map(move |e| relpath::join(dir, &e.name))
            })
            .collect()
    }

    /// How many files [`Workspace::baseline_todo`] lists when nothing was tried.
    fn baseline_left(&self, state: &State) -> u64 {
        let n: usize = state.dirs.values().map(|e| self.left_in(e).count()).sum();
        n as u64
    }

    /// The uncovered entries within the size cap of one cached listing.
    fn left_in<'e>(&self, entries: &'e [StatEntry]) -> impl Iterator<Item = &'e StatEntry> {
        let max = self.config.capture.max_file_size();
        entries
            .iter()
            .filter(move |e| e.kind == EntryKind::Uncovered && e.size <= max)
    }

    /// Hashes every file the stat cache has uncovered within the size cap and records them,
    /// a chunk at a time (see the module). Returns at once if another run holds the lock.
    pub fn complete_baseline(&self, progress: Option<&Progress>) -> Result<BaselineReport, Error> {
        let _run = match lock::acquire(&self.baseline_lock_path(), Duration::ZERO, "baseline") {
            Ok(l) => l,
            Err(Error::Busy { .. }) => {
                return Ok(BaselineReport {
                    already_running: true,
                    ..Default::default()
                })
            }
            Err(e) => return Err(e),
        };
        let r = self.baseline_chunks(progress);
        if r.is_err() {
            // Failed part-way: the next command starts another run.
            self.baseline_deferred();
        }
        r
    }

    fn baseline_chunks(&self, progress: Option<&Progress>) -> Result<BaselineReport, Error> {
        let mut report = BaselineReport::default();
        let mut tried = Tried::default();
        let mut chunk = CHUNK_MIN;
        loop {
            let mut todo = self.baseline_todo_now(&tried);
            if todo.is_empty() {
                // Done, unless a capture deferred files since: the marker goes first, so a
                // capture that defers files after this read leaves it again (and the next
                // command starts a run), and one that deferred them before is seen now.
                // (Until here the marker stays: a run killed part-way leaves it.)
                let _ = std::fs::remove_file(self.baseline_marker());
                todo = self.baseline_todo_now(&tried);
                if todo.is_empty() {
                    break;
                }
            }
            crate::base::trace::phase("baseline: listed what is left");
            let writer = self.store().writer()?;
            let run = prehash::prehash(
                self.root(),
                &writer,
                todo,
                Instant::now() + chunk,
                self.config.capture.max_file_size(),
            )?;
            crate::base::trace::phase("baseline: hashed a chunk");
            writer.commit()?;
            crate::base::trace::phase("baseline: stored it");
            crate::base::failpoint::hit("baseline-before-capture");
            report.files_hashed += run.prehashed.len() as u64;
            report.bytes_hashed += run.bytes;
            tried.extend(run.tried);
            *self.prehashed.borrow_mut() = Some(run.prehashed);
            let recording = Instant::now();
            let captured = self.snapshot("baseline", progress);
            crate::base::trace::phase("baseline: recorded");
            // (Freed on a thread of its own: a map of one small allocation per file.)
            crate::base::drop_in_background(self.prehashed.borrow_mut().take());
            captured?;
            chunk = chunk.max(recording.elapsed() * RECORD_SHARE);
            report.captures += 1;
        }
        crate::base::trace::phase("baseline: nothing left");
        report.remaining = self.peek_state(|state| self.baseline_left(state));
        crate::base::trace::phase("baseline: remaining counted");
        crate::base::drop_in_background(tried);
        Ok(report)
    }

    /// [`Workspace::baseline_todo`] of the stat cache as it is now (read without the lock: it
    /// is replaced whole).
    fn baseline_todo_now(&self, tried: &Tried) -> Vec<Vec<u8>> {
        // The cache this process kept, if the file is still the one it was made from.
        self.peek_state(|state| self.baseline_todo(state, tried))
    }
}
