//! Read-only views of the op log for the fronts (`log`, `show`, `diff`, `status`).

use rewind_store::ObjectId;

use crate::db::oplog::{self, CheckpointRow, EpochRow};
use crate::db::settings::SettingRow;
use crate::model::entry::Change;
use crate::workspace::Workspace;
use crate::Error;

/// One line of `rewind log`.
#[derive(Clone, Debug, serde::Serialize, schemars::JsonSchema)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum LogItem {
    /// An epoch, with how much it changed.
    Epoch {
        /// The epoch (its fields inline in JSON).
        #[serde(flatten)]
        epoch: EpochRow,
        /// Paths it changed.
        changes: i64,
        /// Of those, paths whose content before or after was not captured.
        uncovered: i64,
    },
    /// A checkpoint.
    Checkpoint {
        /// The checkpoint (its fields inline in JSON).
        #[serde(flatten)]
        checkpoint: CheckpointRow,
    },
    /// A setting of the workspace changed from a front (the sandbox mode): who, when, from
    /// what to what.
    Setting {
        /// The change (its fields inline in JSON).
        #[serde(flatten)]
        setting: SettingRow,
    },
}

impl LogItem {
    /// Its op-log position: the log's order.
    pub fn pos(&self) -> i64 {
        match self {
            LogItem::Epoch { epoch, .. } => epoch.pos,
            LogItem::Checkpoint { checkpoint } => checkpoint.pos,
            LogItem::Setting { setting } => setting.pos,
        }
    }
}

impl Workspace {
    /// Epochs, checkpoints and setting changes, newest first. `session` limits to that session
    /// (external epochs and setting changes are always shown: they are everyone's business).
    pub fn log(&self, session: Option<&str>, limit: usize) -> Result<Vec<LogItem>, Error> {
        let limit = limit as i64;
        let mut items = Vec::new();
        let epochs = oplog::epochs(&self.db(), session, limit)?;
        for e in epochs {
            let (changes, uncovered) = oplog::change_counts(&self.db(), &e.id)?;
            items.push(LogItem::Epoch {
                epoch: e,
                changes,
                uncovered,
            });
        }
        let checkpoints = oplog::checkpoints(&self.db(), session, limit)?;
        for c in checkpoints {
            items.push(LogItem::Checkpoint { checkpoint: c });
        }
        for setting in crate::db::settings::recent(&self.db(), limit)? {
            items.push(LogItem::Setting { setting });
        }
        items.sort_by_key(|i| std::cmp::Reverse(i.pos()));
        items.truncate(limit as usize);
        Ok(items)
    }

    /// The op log's newest position (0 when empty). It grows with every epoch begun or
    /// settled, checkpoint and restore, whichever process recorded it: a front that shows
    /// the history compares it to know when to read the log again. One row read, no lock.
    pub fn position(&self) -> Result<i64, Error> {
        oplog::last_pos(&self.db())
    }

    /// The epoch named by `id` or a unique prefix of it; [`Error::Unknown`] for none or
    /// several, [`Error::State`] for a checkpoint's id.
    pub fn epoch(&self, id: &str) -> Result<EpochRow, Error> {
        let full = self.resolve_epoch_id(id)?;
        Ok(oplog::epoch(&self.db(), &full)?.expect("resolved"))
    }

    /// An epoch's changes, sorted by path.
    pub fn epoch_changes(&self, id: &str) -> Result<Vec<Change>, Error> {
        Ok(oplog::epoch_changes(&self.db(), id)?
            .into_iter()
            .map(|r| r.change)
            .collect())
    }

    /// An epoch's changes, sorted by path, each with whether it is still pending: the preimage
    /// of an open exact epoch whose post image is not recorded yet (its `after` means nothing).
    pub fn epoch_changes_pending(&self, id: &str) -> Result<Vec<(Change, bool)>, Error> {
        Ok(oplog::epoch_changes(&self.db(), id)?
            .into_iter()
            .map(|r| (r.change, r.pending))
            .collect())
    }

    /// Sessions and their heads.
    pub fn sessions(&self) -> Result<Vec<(String, Option<String>)>, Error> {
        oplog::sessions(&self.db())
    }

    /// Every open epoch of every session, oldest first.
    pub fn open_epochs(&self) -> Result<Vec<EpochRow>, Error> {
        oplog::open_epochs(&self.db())
    }

    /// Epoch ids of restores whose journal is not finished.
    pub fn unfinished_restores(&self) -> Result<Vec<String>, Error> {
        crate::db::journal::unfinished(&self.db())
    }

    /// The bytes of a stored file or symlink (for diffs). Memory: the whole content.
    pub fn read_content(&self, id: &ObjectId) -> Result<Vec<u8>, Error> {
        let mut out = Vec::new();
        self.store().read_content(id, &mut out)?;
        Ok(out)
    }

    /// Every path whose entry differs between two stored trees (for `diff A B`), sorted.
    pub fn diff_trees(&self, a: ObjectId, b: ObjectId) -> Result<Vec<Change>, Error> {
        Ok(self.diff_trees_full(a, b)?.steps)
    }

    /// Like [`Workspace::diff_trees`], also naming the paths that differ but where either side
    /// is uncovered (not captured), which `diff_trees` leaves out. Steps and skipped paths are
    /// sorted by path.
    pub fn diff_trees_full(
        &self,
        a: ObjectId,
        b: ObjectId,
    ) -> Result<crate::restore::RestorePlan, Error> {
        let mut plan = crate::restore::plan(self.store(), a, b, &[])?;
        plan.steps.sort_by(|x, y| x.path.cmp(&y.path));
        plan.skipped.sort_by(|x, y| x.path.cmp(&y.path));
        Ok(plan)
    }
}
