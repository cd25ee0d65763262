//! The guard's `fingerprints` table: what each session last saw of each file it read or wrote.

use rewind_store::ObjectId;
use rusqlite::{params, Connection, OptionalExtension};

use crate::model::guard::Fingerprint;
use crate::Error;

/// The `fingerprints` table: what each session last saw of each file it read or wrote.
pub(super) const MIGRATION: &str = "
CREATE TABLE fingerprints (
    session TEXT NOT NULL, path BLOB NOT NULL,
    size INTEGER NOT NULL, mtime_ns INTEGER NOT NULL, mode INTEGER NOT NULL,
    content BLOB NOT NULL, pos INTEGER NOT NULL, partial INTEGER NOT NULL DEFAULT 0,
    read_ns INTEGER NOT NULL,
    PRIMARY KEY (session, path));
";

/// The session's fingerprint of `rel`, if it read (or wrote) it.
pub(crate) fn get(
    db: &Connection,
    session: &str,
    rel: &[u8],
) -> Result<Option<Fingerprint>, Error> {
    Ok(db
        .prepare_cached(
            "SELECT size, mtime_ns, mode, content, pos, partial, read_ns FROM fingerprints
             WHERE session = ?1 AND path = ?2",
        )?
        .query_row(params![session, rel], |r| fingerprint_row(r, rel))
        .optional()?)
}

/// Records (or replaces) the session's fingerprint of `fp.path`.
pub(crate) fn save(db: &Connection, session: &str, fp: &Fingerprint) -> Result<(), Error> {
    db.prepare_cached(
        "INSERT OR REPLACE INTO fingerprints
            (session, path, size, mtime_ns, mode, content, pos, partial, read_ns)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
    )?
    .execute(params![
        session,
        fp.path,
        fp.size as i64,
        fp.mtime_ns,
        fp.mode,
        fp.content.0.as_slice(),
        fp.pos,
        fp.partial,
        fp.read_ns
    ])?;
    Ok(())
}

/// Forgets the session's fingerprint of `rel` (the file is gone).
pub(crate) fn forget(db: &Connection, session: &str, rel: &[u8]) -> Result<(), Error> {
    db.execute(
        "DELETE FROM fingerprints WHERE session = ?1 AND path = ?2",
        params![session, rel],
    )?;
    Ok(())
}

fn fingerprint_row(r: &rusqlite::Row, path: &[u8]) -> rusqlite::Result<Fingerprint> {
    let id: Vec<u8> = r.get(3)?;
    Ok(Fingerprint {
        path: path.to_vec(),
        size: r.get::<_, i64>(0)? as u64,
        mtime_ns: r.get(1)?,
        mode: r.get(2)?,
        content: ObjectId(id.try_into().unwrap_or([0; 32])),
        pos: r.get(4)?,
        partial: r.get(5)?,
        read_ns: r.get(6)?,
    })
}
