//! Checkpoints: turn boundaries of a session, bound to its conversation node.

use crate::base::{now_ns, random_hex};
use crate::db::oplog::{self, CheckpointRow};
use crate::workspace::Workspace;
use crate::Error;

/// A checkpoint payload over `checkpoint.max_payload_size`.
pub fn payload_too_large(len: u64, cap: u64) -> Error {
    Error::State(format!(
        "the payload is {len} bytes or more, over checkpoint.max_payload_size ({cap} bytes); \
         store less, or raise it in config.toml (for example `[checkpoint]\nmax_payload_size = \"256M\"`)"
    ))
}

impl Workspace {
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
        let row = self.checkpoint_locked(session, message, parent, label, payload)?;
        // After the workspace lock is released: the shadow history is a view, written under
        // its own lock.
        self.shadow_after_checkpoint(session);
        Ok(row)
    }

    fn checkpoint_locked(
        &self,
        session: &str,
        message: Option<&str>,
        parent: Option<&str>,
        label: Option<&str>,
        payload: Option<Vec<u8>>,
    ) -> Result<CheckpointRow, Error> {
        let _lock = self.lock(crate::workspace::lock::default_wait(), "checkpoint")?;
        // A whole-tree command: the moment to keep the WAL short for the quick ones.
        self.store().checkpoint_wal_on_close();
        self.recover_locked()?;
        self.settle_session_epochs(session)?;
        let now = now_ns();
        // The tree at this moment, user edits included: a scan, which stores nothing new and
        // writes no cache when nothing changed (the stat cache makes it O(stat) per file).
        let found = self.capture_before_record(|| self.capture_found(None))?;
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
                collected_ns: None,
            };
            oplog::insert_checkpoint(&self.db(), &row)?;
            Ok(row)
        })?;
        self.save_and_keep_state(found)?;
        Ok(row)
    }
}
