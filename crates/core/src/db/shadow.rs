//! What the shadow history (`crate::shadow`) reads of the op log: per session, the checkpoints
//! and settled restores after a position, and the epochs between two positions (a commit's
//! summary). Reads only.

use rusqlite::{params, Connection};

use super::oplog::{ckpt_row, epoch_row, CheckpointRow, EpochRow, CKPT_COLS, EPOCH_COLS};
use crate::Error;

/// The checkpoints of `session` after op-log position `after`, oldest first, collected ones
/// included (the caller skips them: their trees may be gone).
pub(crate) fn checkpoints_after(
    db: &Connection,
    session: &str,
    after: i64,
) -> Result<Vec<CheckpointRow>, Error> {
    let sql =
        format!("SELECT {CKPT_COLS} FROM checkpoints WHERE session = ?1 AND pos > ?2 ORDER BY pos");
    let mut st = db.prepare_cached(&sql)?;
    let rows = st.query_map(params![session, after], ckpt_row)?;
    Ok(rows.collect::<Result<_, _>>()?)
}

/// The epochs of `session` (not external) with `after < pos < before`, oldest first: settled,
/// aborted and open alike.
pub(crate) fn session_epochs_between(
    db: &Connection,
    session: &str,
    after: i64,
    before: i64,
) -> Result<Vec<EpochRow>, Error> {
    let sql = format!(
        "SELECT {EPOCH_COLS} FROM epochs WHERE session = ?1 AND pos > ?2 AND pos < ?3
         ORDER BY pos"
    );
    let mut st = db.prepare_cached(&sql)?;
    let rows = st.query_map(params![session, after, before], epoch_row)?;
    Ok(rows.collect::<Result<_, _>>()?)
}

/// The newest position of a checkpoint of `session` at or before `pos` (0 when none).
pub(crate) fn checkpoint_pos_before(
    db: &Connection,
    session: &str,
    pos: i64,
) -> Result<i64, Error> {
    Ok(db
        .prepare_cached(
            "SELECT coalesce(max(pos), 0) FROM checkpoints WHERE session = ?1 AND pos < ?2",
        )?
        .query_row(params![session, pos], |r| r.get(0))?)
}
