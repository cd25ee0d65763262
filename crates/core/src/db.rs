//! The engine's tables in `meta.sqlite` (the store keeps its own tables in the same file).
//! Versioned migrations: each entry of `MIGRATIONS` runs once, in order, in one transaction
//! with the version bump.

use rusqlite::Connection;

use crate::Error;

const MIGRATIONS: &[&str] = &[
    // 1: whole-tree snapshots (the op log of the next layer builds on this).
    "CREATE TABLE snapshots (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        root BLOB NOT NULL,
        created_ns INTEGER NOT NULL,
        label TEXT NOT NULL
    );",
    // 2: the op log: sessions, nodes, epochs, changes, checkpoints, restore journal.
    crate::oplog::MIGRATION,
    // 3: the read-before-edit guard's per-session fingerprints.
    crate::guard::MIGRATION,
    // 4: open epochs found without reading the whole history.
    crate::oplog::MIGRATION_OPEN_EPOCHS,
];

/// Brings the engine's tables up to date on `conn` (the store's connection: see
/// `rewind_store::Store::db`).
pub fn init(conn: &Connection) -> Result<(), Error> {
    // Every process opens the database: the usual case, a current schema, costs one query.
    if matches!(version(conn), Ok(v) if v >= MIGRATIONS.len()) {
        return Ok(());
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

fn migrate(conn: &Connection) -> Result<(), Error> {
    if version(conn)? >= MIGRATIONS.len() {
        return Ok(());
    }
    conn.execute_batch("BEGIN IMMEDIATE")?;
    let result = (|| {
        let from = version(conn)?;
        if from > MIGRATIONS.len() {
            return Err(Error::Usage(format!(
                "this state was written by a newer rewind (schema {from}); upgrade rewind"
            )));
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
    })();
    match result {
        Ok(()) => conn.execute_batch("COMMIT").map_err(Error::from),
        Err(e) => {
            let _ = conn.execute_batch("ROLLBACK");
            Err(e)
        }
    }
}
