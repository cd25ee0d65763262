//! Applying a restore through its journal, and finishing what a killed process left: a
//! journalled restore is rolled forward from what the disk holds, or, when a step fails, rolled
//! back; epochs of dead processes are settled.

use rewind_store::EntryKind;
use serde::Serialize;

use crate::base::failpoint;
use crate::base::now_ns;
use crate::db::journal::{self, Journal, JournalState};
use crate::db::oplog::{self, EpochState, Owner};
use crate::fs::probe::disk_entry_known;
use crate::model::entry::same;
use crate::model::entry::{Change, Entry};
use crate::restore::{self, ApplyOptions, RestorePlan, Skipped};
use crate::workspace::Workspace;
use crate::Error;

use super::*;

impl Workspace {
    /// Sorts `steps` by what the disk holds now: already at their target (done), still at
    /// what the plan expected (to do), or changed by someone else meanwhile (left alone).
    pub(super) fn sort_by_disk(
        &self,
        root: &crate::fs::root::RootDir,
        steps: Vec<Change>,
    ) -> Result<ByDisk, Error> {
        let max = self.config().capture.max_file_size();
        let is_dir = |e: &Option<Entry>| e.is_some_and(|e| e.kind == EntryKind::Dir);
        let (mut done, mut todo, mut left) = (Vec::new(), Vec::new(), Vec::new());
        // Read and hashed on every core: a big restore compares thousands of files.
        let currents = {
            use rayon::prelude::*;
            let store = self.store();
            steps
                .par_iter()
                .map(|s| disk_entry_known(root, &s.path, None, max, store, [&s.after, &s.before]))
                .collect::<Result<Vec<_>, Error>>()?
        };
        for (s, current) in steps.into_iter().zip(currents) {
            if same(&current, &s.after) {
                done.push(s);
            } else if same(&current, &s.before)
                // A directory is the plan's whatever its mode (modes are set last).
                || (is_dir(&current) && (is_dir(&s.after) || is_dir(&s.before)))
            {
                todo.push(s);
            } else {
                left.push(Skipped {
                    path: s.path.clone(),
                    reason:
                        "changed by someone else while the restore was interrupted; left as it is"
                            .into(),
                });
            }
        }
        Ok(ByDisk { done, todo, left })
    }

    /// Applies (or re-applies, after a crash) a journalled restore and commits its result. If
    /// a step fails, what was applied is rolled back (see [`Workspace::roll_back_journal`]).
    pub(super) fn apply_journal(&self, epoch_id: &str) -> Result<Vec<Skipped>, Error> {
        let Journal {
            session,
            steps,
            head,
            move_head,
        } = journal::get(&self.db(), epoch_id, JournalState::Applying)?;
        let root = self.rootdir()?;
        // A restore killed mid-write leaves temporary files beside its targets: remove those of
        // dead processes before they could be mistaken for the user's.
        root.remove_dead_temp_files_beside(steps.iter().map(|s| s.path.as_slice()));
        // Only steps whose path is still what the plan expected; already-applied ones are done.
        let ByDisk { done, todo, left } = self.sort_by_disk(&root, steps)?;
        crate::base::trace::phase("restore: compared with the disk");
        let applied = match restore::apply(
            &root,
            self.store(),
            &RestorePlan {
                steps: todo.clone(),
                skipped: Vec::new(),
            },
            ApplyOptions::from_store(),
        ) {
            Ok(applied) => applied,
            Err(restore::Interrupted { cause, .. }) => {
                return Err(match self.roll_back_journal(epoch_id) {
                    Ok(()) => Error::RolledBack(Box::new(cause)),
                    Err(rollback) => Error::RollbackFailed {
                        cause: Box::new(cause),
                        rollback: Box::new(rollback),
                    },
                })
            }
        };
        crate::base::trace::phase("restore: applied");
        failpoint::hit("restore-before-done");
        let now = now_ns();
        self.transaction(|| {
            let pos = oplog::next_pos(&self.db())?;
            // What was kept (a directory that was not empty after all) did not change.
            for s in done
                .iter()
                .chain(&todo)
                .filter(|s| !applied.kept.iter().any(|k| k.path == s.path))
            {
                oplog::insert_change(&self.db(), epoch_id, pos, s, false)?;
            }
            oplog::settle_epoch(&self.db(), epoch_id, EpochState::Settled, false, now)?;
            if move_head {
                oplog::set_head(&self.db(), &session, head.as_deref())?;
            }
            journal::set_state(
                &self.db(),
                epoch_id,
                JournalState::Applying,
                JournalState::Done,
            )?;
            Ok(())
        })?;
        let mut kept = applied.kept;
        kept.extend(left);
        Ok(kept)
    }

    /// Puts back what a failed restore applied, from its journal: every step is inverted
    /// ("make this path be what it was") and applied where the disk holds the step's target;
    /// a path someone else changed since is left alone. The journal says `rolling-back` before
    /// the first write, so a process killed during the rollback leaves it for the next command
    /// to finish, never to roll forward. At the end the restore epoch and its changes are
    /// deleted (it never happened) and the journal says `rolled-back`.
    pub(super) fn roll_back_journal(&self, epoch_id: &str) -> Result<(), Error> {
        self.transaction(|| {
            journal::set_state(
                &self.db(),
                epoch_id,
                JournalState::Applying,
                JournalState::RollingBack,
            )?;
            Ok(())
        })?;
        let steps = journal::get(&self.db(), epoch_id, JournalState::RollingBack)?.steps;
        let root = self.rootdir()?;
        root.remove_dead_temp_files_beside(steps.iter().map(|s| s.path.as_slice()));
        let mut inverse = restore::inverse(&steps, steps.len());
        order_steps(&mut inverse);
        let todo = self.sort_by_disk(&root, inverse)?.todo;
        let apply = |steps: &[Change]| {
            restore::apply(
                &root,
                self.store(),
                &RestorePlan {
                    steps: steps.to_vec(),
                    skipped: Vec::new(),
                },
                ApplyOptions::from_store(),
            )
        };
        let first = todo.len().min(1);
        apply(&todo[..first])?;
        failpoint::hit("restore-rollback-after-step");
        apply(&todo[first..])?;
        self.transaction(|| {
            oplog::delete_epoch(&self.db(), epoch_id)?;
            journal::set_state(
                &self.db(),
                epoch_id,
                JournalState::RollingBack,
                JournalState::RolledBack,
            )?;
            Ok(())
        })
    }

    /// Finishes interrupted work: rolls journalled restores forward, then settles epochs whose
    /// owning process died (their changes attributed to them, marked recovered). Every mutating
    /// command calls this first, under the lock.
    pub(crate) fn recover_locked(&self) -> Result<Recovered, Error> {
        let mut rec = Recovered::default();
        // Listed first: a `for` over `in_state(&self.db(), …)` would hold the connection for
        // the whole loop, and a restore reads the store on several threads.
        let applying = journal::in_state(&self.db(), JournalState::Applying)?;
        for epoch in applying {
            let left = self.apply_journal(&epoch)?;
            rec.left.extend(left);
            rec.restores.push(epoch);
        }
        // A failed restore whose rollback was interrupted is rolled back, never forward.
        let rolling_back = journal::in_state(&self.db(), JournalState::RollingBack)?;
        for epoch in rolling_back {
            self.roll_back_journal(&epoch)?;
            rec.rolled_back.push(epoch);
        }
        let open = oplog::open_epochs(&self.db())?;
        for e in open {
            if matches!(e.owner, Owner::Process { .. }) && !crate::record::owner_alive(&e.owner) {
                self.settle_locked(&e, EpochState::Settled, true)?;
                rec.epochs.push(e.id);
            }
        }
        Ok(rec)
    }

    /// `rewind recover`: the same, explicitly.
    pub fn recover(&self) -> Result<Recovered, Error> {
        let _lock = self.lock(crate::workspace::lock::default_wait(), "recover")?;
        self.store().checkpoint_wal_on_close();
        // Also index any pack in place but unindexed (every open only checks for writers that
        // died while publishing).
        self.store().adopt_orphans()?;
        self.recover_locked()
    }
}

/// A journal's steps sorted by what the disk holds now.
pub(super) struct ByDisk {
    /// Already at their target.
    done: Vec<Change>,
    /// Still at what the plan expected: to apply.
    todo: Vec<Change>,
    /// Changed by someone else meanwhile: left alone.
    left: Vec<Skipped>,
}

/// What `recover` finished.
#[derive(Clone, Debug, Default, Serialize, schemars::JsonSchema)]
pub struct Recovered {
    /// Restores rolled forward (their epochs).
    pub restores: Vec<String>,
    /// Failed restores whose interrupted rollback was finished (their epochs, now deleted).
    pub rolled_back: Vec<String>,
    /// Steps of the restores rolled forward that were not done: paths someone changed while
    /// the restore was interrupted, or directories that still hold files. Left as they are.
    pub left: Vec<Skipped>,
    /// Epochs of dead processes settled.
    pub epochs: Vec<String>,
}

/// What a restore epoch records as its origin: the tool and the note `log` shows.
pub(crate) struct Provenance {
    /// `restore`, or `worktree-merge`.
    pub tool: &'static str,
    /// For example `restore to <id>` or `merge of worktree <name> (<path>)`.
    pub note: String,
    /// The id of the epoch that records it, chosen by the caller (a worktree's merge names it
    /// in the worktree's record before the restore starts); `None`: a new random one.
    pub epoch: Option<String>,
}
