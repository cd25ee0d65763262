//! What garbage collection reads and writes in the op log: pins, the collected marks, the
//! newest change of every path, snapshots and fingerprints of collected history.

use rewind_store::{EntryKind, ObjectId};
use rusqlite::{params, Connection, OptionalExtension};

use crate::model::entry::{Change, Entry};
use crate::Error;

/// Schema 5: when gc collected a checkpoint or an epoch (`NULL`: not collected).
pub(super) const MIGRATION: &str = "
ALTER TABLE checkpoints ADD COLUMN collected_ns INTEGER;
ALTER TABLE epochs ADD COLUMN collected_ns INTEGER;
";

/// Sets a checkpoint's pin; returns whether the checkpoint exists.
pub(crate) fn set_pinned(db: &Connection, id: &str, pinned: bool) -> Result<bool, Error> {
    let n = db.execute(
        "UPDATE checkpoints SET pinned = ?2 WHERE id = ?1",
        params![id, pinned],
    )?;
    Ok(n > 0)
}

/// Marks checkpoints `(id, when)` collected, where they are not yet (ids this op log does not
/// have are skipped).
pub(crate) fn collect_checkpoints<'a>(
    db: &Connection,
    items: impl IntoIterator<Item = (&'a str, i64)>,
) -> Result<(), Error> {
    let mut st = db.prepare_cached(
        "UPDATE checkpoints SET collected_ns = ?2 WHERE id = ?1 AND collected_ns IS NULL",
    )?;
    for (id, when) in items {
        st.execute(params![id, when])?;
    }
    Ok(())
}

/// Marks epochs `(id, when)` collected, where they are not yet (as [`collect_checkpoints`]).
pub(crate) fn collect_epochs<'a>(
    db: &Connection,
    items: impl IntoIterator<Item = (&'a str, i64)>,
) -> Result<(), Error> {
    let mut st = db.prepare_cached(
        "UPDATE epochs SET collected_ns = ?2 WHERE id = ?1 AND collected_ns IS NULL",
    )?;
    for (id, when) in items {
        st.execute(params![id, when])?;
    }
    Ok(())
}

/// Deletes the snapshot rows taken at or before `pos`, except the newest snapshot (the last
/// known state of paths no change names). Returns how many went.
pub(crate) fn forget_snapshots(db: &Connection, pos: i64) -> Result<usize, Error> {
    Ok(db.execute(
        "DELETE FROM snapshots WHERE pos <= ?1
         AND seq != (SELECT max(seq) FROM snapshots)",
        [pos],
    )?)
}

/// The snapshots (seq, root, pos) that [`forget_snapshots`] would delete for `pos`.
pub(crate) fn snapshots_to_forget(
    db: &Connection,
    pos: i64,
) -> Result<Vec<(i64, ObjectId, i64)>, Error> {
    let mut st = db.prepare(
        "SELECT seq, root, pos FROM snapshots WHERE pos <= ?1
         AND seq != (SELECT max(seq) FROM snapshots) ORDER BY seq",
    )?;
    let rows = st.query_map([pos], |r| {
        let root: Vec<u8> = r.get(1)?;
        Ok((
            r.get(0)?,
            ObjectId(root.try_into().unwrap_or([0; 32])),
            r.get(2)?,
        ))
    })?;
    Ok(rows.collect::<Result<_, _>>()?)
}

/// Every snapshot's root and position.
pub(crate) fn snapshot_roots(db: &Connection) -> Result<Vec<(ObjectId, i64)>, Error> {
    let mut st = db.prepare("SELECT root, pos FROM snapshots ORDER BY seq")?;
    let rows = st.query_map([], |r| {
        let root: Vec<u8> = r.get(0)?;
        Ok((ObjectId(root.try_into().unwrap_or([0; 32])), r.get(1)?))
    })?;
    Ok(rows.collect::<Result<_, _>>()?)
}

/// Deletes the session's fingerprints of reads at or before `pos`: the guard then asks for a
/// fresh read (a refusal, never a wrong permission). Returns how many went.
pub(crate) fn forget_fingerprints(
    db: &Connection,
    session: &str,
    pos: i64,
) -> Result<usize, Error> {
    Ok(db.execute(
        "DELETE FROM fingerprints WHERE session = ?1 AND pos <= ?2",
        params![session, pos],
    )?)
}

/// The last known state of every path the op log names: the entry of its newest change (the
/// post, or the pre of a pending one). What attribution compares the disk with.
pub(crate) fn last_known_entries(db: &Connection) -> Result<Vec<Entry>, Error> {
    // SQLite takes the bare columns of an aggregate query from the row of the max().
    let mut st = db.prepare(
        "SELECT max(pos), pending, pre_kind, pre_id, post_kind, post_id FROM changes GROUP BY path",
    )?;
    let rows = st.query_map([], |r| {
        let pending: bool = r.get(1)?;
        let (k, id): (Option<i64>, Option<Vec<u8>>) = if pending {
            (r.get(2)?, r.get(3)?)
        } else {
            (r.get(4)?, r.get(5)?)
        };
        Ok(k.zip(id))
    })?;
    let mut out = Vec::new();
    for row in rows {
        if let Some((k, id)) = row? {
            if let (Some(kind), Ok(id)) = (EntryKind::from_u8(k as u8), <[u8; 32]>::try_from(id)) {
                out.push(Entry {
                    kind,
                    mode: 0,
                    size: 0,
                    id: ObjectId(id),
                });
            }
        }
    }
    Ok(out)
}

/// The steps of every restore journal that is not finished (applying or rolling back).
pub(crate) fn unfinished_plans(db: &Connection) -> Result<Vec<Change>, Error> {
    let mut st =
        db.prepare("SELECT plan FROM journal WHERE state IN ('applying', 'rolling-back')")?;
    let rows = st.query_map([], |r| r.get::<_, Vec<u8>>(0))?;
    let mut out = Vec::new();
    for plan in rows {
        let plan = plan?;
        let steps = super::journal::decode_plan(&plan)
            .ok_or_else(|| Error::State("a restore journal is damaged".into()))?;
        out.extend(steps);
    }
    Ok(out)
}

/// A change row's epoch and its two entries (mode and size left out), for marking.
pub(crate) type ChangeSides = (String, Option<Entry>, Option<Entry>);

/// Every change row's epoch and its two entries, for marking.
pub(crate) fn all_changes(db: &Connection) -> Result<Vec<ChangeSides>, Error> {
    let mut st = db.prepare("SELECT epoch, pre_kind, pre_id, post_kind, post_id FROM changes")?;
    let entry = |k: Option<i64>, id: Option<Vec<u8>>| -> Option<Entry> {
        let kind = EntryKind::from_u8(k? as u8)?;
        let id = <[u8; 32]>::try_from(id?).ok()?;
        Some(Entry {
            kind,
            mode: 0,
            size: 0,
            id: ObjectId(id),
        })
    };
    let rows = st.query_map([], |r| {
        Ok((
            r.get::<_, String>(0)?,
            entry(r.get(1)?, r.get(2)?),
            entry(r.get(3)?, r.get(4)?),
        ))
    })?;
    Ok(rows.collect::<Result<_, _>>()?)
}

/// The size of the database file and its WAL, in bytes, and of its free pages.
pub(crate) fn database_bytes(db: &Connection) -> Result<(u64, u64), Error> {
    let page: i64 = db.query_row("PRAGMA page_size", [], |r| r.get(0))?;
    let pages: i64 = db.query_row("PRAGMA page_count", [], |r| r.get(0))?;
    let free: i64 = db.query_row("PRAGMA freelist_count", [], |r| r.get(0))?;
    Ok(((page * pages) as u64, (page * free) as u64))
}

/// Gives the free pages back to the file system (`VACUUM`) and empties the WAL. Outside any
/// transaction.
pub(crate) fn compact(db: &Connection) -> Result<(), Error> {
    db.execute_batch("VACUUM")?;
    db.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))?;
    Ok(())
}

/// SQLite's `data_version` of this connection: it changes whenever another connection commits.
pub(crate) fn data_version(db: &Connection) -> Result<i64, Error> {
    Ok(db.query_row("PRAGMA data_version", [], |r| r.get(0))?)
}

/// What the last complete gc left: the op log's last position and the number of stored objects
/// then (`None`: no gc completed since, or one was interrupted).
pub(crate) fn last_gc(db: &Connection) -> Result<Option<(i64, i64)>, Error> {
    let get = |key: &str| -> Result<Option<i64>, Error> {
        Ok(db
            .query_row("SELECT value FROM core_meta WHERE key = ?1", [key], |r| {
                r.get(0)
            })
            .optional()?)
    };
    Ok(get("gc_pos")?.zip(get("gc_objects")?))
}

/// Records what a complete gc left (see [`last_gc`]); `None` forgets it (a gc is under way).
pub(crate) fn set_last_gc(db: &Connection, last: Option<(i64, i64)>) -> Result<(), Error> {
    match last {
        None => {
            db.execute(
                "DELETE FROM core_meta WHERE key IN ('gc_pos', 'gc_objects')",
                [],
            )?;
        }
        Some((pos, objects)) => {
            let mut st = db.prepare(
                "INSERT INTO core_meta (key, value) VALUES (?1, ?2)
                 ON CONFLICT(key) DO UPDATE SET value = excluded.value",
            )?;
            st.execute(params!["gc_pos", pos])?;
            st.execute(params!["gc_objects", objects])?;
        }
    }
    Ok(())
}
