//! The `snapshots` table: whole-tree captures (`rewind init`, `capture`), each with the tree
//! and the op-log position it was taken at.

use rewind_store::ObjectId;
use rusqlite::{params, Connection, OptionalExtension};

use crate::model::oplog::Snapshot;
use crate::Error;

/// The first migration: the table before the op log existed (the op log's migration adds `pos`).
pub(super) const MIGRATION: &str = "CREATE TABLE snapshots (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        root BLOB NOT NULL,
        created_ns INTEGER NOT NULL,
        label TEXT NOT NULL
    );";

/// Records a whole-tree capture of `root` taken at `started_ns`, at op-log position `pos`.
pub(crate) fn insert(
    db: &Connection,
    root: &ObjectId,
    started_ns: i64,
    label: &str,
    pos: i64,
) -> Result<(), Error> {
    db.execute(
        "INSERT INTO snapshots (root, created_ns, label, pos) VALUES (?1, ?2, ?3, ?4)",
        params![root.0.as_slice(), started_ns, label, pos],
    )?;
    Ok(())
}

/// Every snapshot, oldest first.
pub(crate) fn all(db: &Connection) -> Result<Vec<Snapshot>, Error> {
    let mut stmt = db.prepare("SELECT seq, root, created_ns, label FROM snapshots ORDER BY seq")?;
    let rows = stmt.query_map([], snapshot_row)?;
    Ok(rows.collect::<Result<_, _>>()?)
}

/// How many snapshots there are.
pub(crate) fn count(db: &Connection) -> Result<i64, Error> {
    Ok(db.query_row("SELECT count(*) FROM snapshots", [], |r| r.get(0))?)
}

/// The newest snapshot.
pub(crate) fn last(db: &Connection) -> Result<Option<Snapshot>, Error> {
    Ok(db
        .query_row(
            "SELECT seq, root, created_ns, label FROM snapshots ORDER BY seq DESC LIMIT 1",
            [],
            snapshot_row,
        )
        .optional()?)
}

fn snapshot_row(r: &rusqlite::Row) -> rusqlite::Result<Snapshot> {
    let root: Vec<u8> = r.get(1)?;
    Ok(Snapshot {
        seq: r.get(0)?,
        root: ObjectId(root.try_into().unwrap_or([0; 32])),
        created_ns: r.get(2)?,
        label: r.get(3)?,
    })
}
