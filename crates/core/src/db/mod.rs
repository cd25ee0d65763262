//! The engine's tables in `meta.sqlite` (the store keeps its own tables in the same file).
//! Versioned migrations: each entry of `MIGRATIONS` runs once, in order, in one transaction
//! with the version bump.

pub(crate) mod fingerprints;
pub(crate) mod gc;
pub(crate) mod journal;
pub mod oplog;
pub mod remote;
pub mod settings;
pub(crate) mod shadow;
pub(crate) mod snapshots;

use rusqlite::Connection;

use crate::Error;

/// Runs `f` in one `BEGIN IMMEDIATE` transaction on `db`: committed if it succeeds, rolled
/// back if not. `IMMEDIATE` takes the write lock at the start, so two processes never both
/// read under a deferred transaction and then fail to upgrade it.
pub(crate) fn transaction<T>(
    db: &Connection,
    f: impl FnOnce() -> Result<T, Error>,
) -> Result<T, Error> {
    run_cached(db, "BEGIN IMMEDIATE")?;
    match f() {
        Ok(v) => {
            run_cached(db, "COMMIT")?;
            Ok(v)
        }
        Err(e) => {
            let _ = run_cached(db, "ROLLBACK");
            Err(e)
        }
    }
}

/// Whether commits flush to disk: `synchronous = FULL` (durable across a power cut, the
/// connection's setting outside relaxed sections) or `NORMAL` (still atomic and consistent in
/// WAL mode, only not durable).
pub(crate) fn set_durable(db: &Connection, durable: bool) -> Result<(), Error> {
    run_cached(
        db,
        if durable {
            "PRAGMA synchronous = FULL"
        } else {
            "PRAGMA synchronous = NORMAL"
        },
    )
}

/// Runs one statement that returns no rows, prepared once per process: a guarded write runs
/// two transactions, and preparing a statement costs more than running these.
fn run_cached(db: &Connection, sql: &str) -> Result<(), Error> {
    db.prepare_cached(sql)?.execute([])?;
    Ok(())
}

const MIGRATIONS: &[&str] = &[
    // 1: whole-tree snapshots (the op log of the next layer builds on this).
    snapshots::MIGRATION,
    // 2: the op log: sessions, nodes, epochs, changes, checkpoints, restore journal.
    crate::db::oplog::MIGRATION,
    // 3: the read-before-edit guard's per-session fingerprints.
    fingerprints::MIGRATION,
    // 4: open epochs found without reading the whole history.
    crate::db::oplog::MIGRATION_OPEN_EPOCHS,
    // 5: garbage collection's marks on checkpoints and epochs.
    gc::MIGRATION,
    // 6: settings changed for one workspace from a front (the sandbox mode), with who and when.
    settings::MIGRATION,
    // 7: remotes: what each holds of this workspace, and where a clone came from.
    remote::MIGRATION,
    // 8: the key file of an encrypted remote a clone came from.
    remote::MIGRATION_KEY_FILE,
];

/// Brings the engine's tables up to date on `conn` (the store's connection: see
/// `rewind_store::Store::db`).
pub fn init(conn: &Connection) -> Result<(), Error> {
    // Every process opens the database: the usual case, a current schema, costs one query.
    match version(conn) {
        Ok(v) if v == MIGRATIONS.len() => return Ok(()),
        Ok(v) if v > MIGRATIONS.len() => return Err(newer(v)),
        _ => {}
    }
    conn.execute_batch(
        "CREATE TABLE IF NOT EXISTS core_meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL);",
    )?;
    migrate(conn)
}

fn version(c: &Connection) -> rusqlite::Result<usize> {
    c.query_row(
        "SELECT value FROM core_meta WHERE key = 'schema_version'",
        [],
        |r| r.get::<_, i64>(0),
    )
    .map(|v| v as usize)
    .or_else(|e| {
        if e == rusqlite::Error::QueryReturnedNoRows {
            Ok(0)
        } else {
            Err(e)
        }
    })
}

/// A database written by a newer rewind: its tables may mean what this binary cannot know.
fn newer(version: usize) -> Error {
    Error::State(format!(
        "this state was written by a newer rewind (schema {version}, this one knows {}); upgrade rewind",
        MIGRATIONS.len()
    ))
}

/// Applies the missing migrations (`init` checked the version already; it is read again
/// under the write lock, since another process may have migrated meanwhile).
fn migrate(conn: &Connection) -> Result<(), Error> {
    transaction(conn, || {
        let from = version(conn)?;
        if from > MIGRATIONS.len() {
            return Err(newer(from));
        }
        for m in &MIGRATIONS[from..] {
            conn.execute_batch(m)?;
        }
        conn.execute(
            "INSERT INTO core_meta (key, value) VALUES ('schema_version', ?1)
             ON CONFLICT(key) DO UPDATE SET value = excluded.value",
            [MIGRATIONS.len() as i64],
        )?;
        Ok(())
    })
}

/// Writes a consistent copy of the database `src` is connected to into the new file `dst`
/// (`VACUUM INTO`: a read transaction, so concurrent writers are not blocked for long).
pub(crate) fn copy_into(src: &Connection, dst: &std::path::Path) -> Result<(), Error> {
    let dst = dst
        .to_str()
        .ok_or_else(|| Error::Workspace(format!("{} is not UTF-8", dst.display())))?;
    src.execute("VACUUM INTO ?1", [dst])?;
    Ok(())
}

/// Copies the object index of the store whose database is `src` into `db`'s (a worktree's
/// store starts with its parent's objects; the caller links the pack files): pack rows by name,
/// object rows pointed at the new pack ids, inline objects. Rows already there stay.
pub(crate) fn copy_store_index(db: &Connection, src: &std::path::Path) -> Result<(), Error> {
    let src = src
        .to_str()
        .ok_or_else(|| Error::Workspace(format!("{} is not UTF-8", src.display())))?;
    db.execute("ATTACH DATABASE ?1 AS parent", [src])?;
    let copied = (|| -> Result<(), Error> {
        db.execute_batch(
            "BEGIN IMMEDIATE;
             INSERT OR IGNORE INTO main.store_packs (name, size, objects, created_at)
                 SELECT name, size, objects, created_at FROM parent.store_packs;
             INSERT OR IGNORE INTO main.store_objects
                 (id, pack, kind, compression, offset, stored_len, raw_len)
                 SELECT o.id, m.id, o.kind, o.compression, o.offset, o.stored_len, o.raw_len
                 FROM parent.store_objects_all o
                 JOIN parent.store_packs p ON p.id = o.pack
                 JOIN main.store_packs m ON m.name = p.name;
             INSERT OR IGNORE INTO main.store_inline (id, kind, compression, raw_len, data)
                 SELECT id, kind, compression, raw_len, data FROM parent.store_inline;
             INSERT OR IGNORE INTO main.store_clone_packed (clone, content)
                 SELECT clone, content FROM parent.store_clone_packed;
             COMMIT;",
        )?;
        Ok(())
    })();
    if copied.is_err() {
        let _ = db.execute_batch("ROLLBACK");
    }
    db.execute("DETACH DATABASE parent", [])?;
    copied
}

/// The session names recorded in the op log at `path`, read-only (no lock, no migration).
pub(crate) fn read_sessions(path: &std::path::Path) -> Result<Vec<String>, Error> {
    if !path.exists() {
        return Ok(Vec::new());
    }
    let flags = rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY;
    let conn = Connection::open_with_flags(path, flags)?;
    conn.busy_timeout(std::time::Duration::from_secs(30))?;
    let mut st = conn.prepare("SELECT id FROM sessions ORDER BY id")?;
    let rows = st.query_map([], |r| r.get::<_, String>(0))?;
    Ok(rows.collect::<Result<_, _>>()?)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An older binary must not work on tables whose meaning it does not know.
    #[test]
    fn a_newer_schema_is_refused() {
        let conn = Connection::open_in_memory().unwrap();
        init(&conn).unwrap();
        init(&conn).unwrap();
        conn.execute(
            "UPDATE core_meta SET value = value + 1 WHERE key = 'schema_version'",
            [],
        )
        .unwrap();
        let err = init(&conn).unwrap_err().to_string();
        assert!(err.contains("upgrade rewind"), "{err}");
    }
}
