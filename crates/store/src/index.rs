//! The object index: which pack holds each object, in SQLite.
//!
//! Why SQLite: agents run as many short-lived processes at once (hooks, CLI calls, several
//! agents on one workspace); SQLite in WAL mode gives them multi-process transactions and crash
//! safety that are proven. The database file is shared with other crates' tables, so every
//! table here is prefixed `store_`.
//!
//! Rows are only ever inserted with `INSERT OR IGNORE`: two processes may store the same object
//! (or adopt the same orphan pack) at once, and whichever row lands first is as good as the
//! other.

use parking_lot::{ReentrantMutex, ReentrantMutexGuard};
use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::time::Duration;

use rusqlite::config::DbConfig;
use rusqlite::{params, Connection, OptionalExtension, TransactionBehavior};

use crate::pack::{Compression, Entry, PublishedPack};
use crate::{Error, ObjectId, ObjectKind, Result, StoreStats};

const SCHEMA_VERSION: &str = "7";

/// The columns of a packed object's row, the same in `store_objects` and
/// `store_objects_recent`: the view `store_objects_all` joins the two with `SELECT *`.
macro_rules! object_columns {
    () => {
        "(
    id          BLOB PRIMARY KEY,
    pack        INTEGER NOT NULL REFERENCES store_packs(id),
    kind        INTEGER NOT NULL,
    compression INTEGER NOT NULL,
    offset      INTEGER NOT NULL,
    stored_len  INTEGER NOT NULL,
    raw_len     INTEGER NOT NULL
) WITHOUT ROWID;"
    };
}

/// The table of recent object rows and the view readers read (see [`FOLD_AT`]): in the schema
/// and in the migration that adds them, written once so that both make the same tables.
macro_rules! recent_rows_schema {
    () => {
        concat!(
            "
CREATE TABLE IF NOT EXISTS store_objects_recent ",
            object_columns!(),
            "
CREATE VIEW IF NOT EXISTS store_objects_all AS
    SELECT * FROM store_objects UNION ALL SELECT * FROM store_objects_recent;
"
        )
    };
}

const SCHEMA: &str = concat!(
    "
CREATE TABLE IF NOT EXISTS store_meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS store_packs (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    name       TEXT NOT NULL UNIQUE,
    size       INTEGER NOT NULL,
    objects    INTEGER NOT NULL,
    created_at INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS store_objects ",
    object_columns!(),
    "
CREATE TABLE IF NOT EXISTS store_inline (
    id          BLOB PRIMARY KEY,
    kind        INTEGER NOT NULL,
    compression INTEGER NOT NULL,
    raw_len     INTEGER NOT NULL,
    data        BLOB NOT NULL
);
CREATE TABLE IF NOT EXISTS store_clone_packed (
    clone   BLOB PRIMARY KEY,
    content BLOB NOT NULL
);
",
    recent_rows_schema!()
);

/// Version 1 had no inline objects.
const MIGRATE_1_TO_2: &str = "
CREATE TABLE IF NOT EXISTS store_inline (
    id          BLOB PRIMARY KEY,
    kind        INTEGER NOT NULL,
    compression INTEGER NOT NULL,
    raw_len     INTEGER NOT NULL,
    data        BLOB NOT NULL
);
UPDATE store_meta SET value = '2' WHERE key = 'schema_version';
";

/// Version 2 also indexed objects by (pack, offset), for fsck alone; fsck now reads all rows
/// once, and a first capture's commit (100k rows) writes half as much without that index.
const MIGRATE_2_TO_3: &str = "
DROP INDEX IF EXISTS store_objects_by_pack;
UPDATE store_meta SET value = '3' WHERE key = 'schema_version';
";

/// Version 4 added cloned content (`crate::clone`) and the packed twin of a clone.
const MIGRATE_3_TO_4: &str = "
CREATE TABLE IF NOT EXISTS store_clone_packed (
    clone   BLOB PRIMARY KEY,
    content BLOB NOT NULL
);
UPDATE store_meta SET value = '4' WHERE key = 'schema_version';
";

/// Version 5 added the sweep count (`store_meta` key `sweeps`, see [`sweeps`]): a writer may
/// now rely on it, so a binary whose gc does not count its sweeps must not open the store.
const MIGRATE_4_TO_5: &str = "
INSERT OR IGNORE INTO store_meta (key, value) VALUES ('sweeps', '0');
UPDATE store_meta SET value = '5' WHERE key = 'schema_version';
";

/// Version 6 allowed fan-out trees (`RWTF`, see `tree::fanout`): a binary that cannot read
/// them must not open a store that may hold them. No table changes.
const MIGRATE_5_TO_6: &str = "
UPDATE store_meta SET value = '6' WHERE key = 'schema_version';
";

/// Version 7 indexes small batches of packed objects in `store_objects_recent` first (see
/// [`Index::insert`]): a binary that reads only `store_objects` would miss them.
const MIGRATE_6_TO_7: &str = concat!(
    recent_rows_schema!(),
    "UPDATE store_meta SET value = '7' WHERE key = 'schema_version';"
);

/// An object small enough to be kept in the index itself rather than in a pack: see
/// `Writer::commit`.
pub(crate) struct InlineObject {
    pub id: ObjectId,
    pub kind: ObjectKind,
    pub compression: Compression,
    pub raw_len: u32,
    pub stored: Vec<u8>,
}

/// Where [`Index::insert`]'s rows went.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Inserted {
    /// Its own transaction, committed.
    Committed,
    /// The caller's transaction, which may still roll back.
    InCallersTransaction,
}

/// One row of `store_packs`.
pub(crate) struct PackRow {
    pub id: i64,
    pub name: String,
}

pub(crate) struct Index {
    /// The database file.
    pub(crate) path: std::path::PathBuf,
    /// Reentrant: the engine runs its own statements on this connection (see `Store::db`), and
    /// a store call made while it holds the connection (say, a writer's commit inside the
    /// engine's transaction) must not deadlock.
    conn: ReentrantMutex<Connection>,
    /// Checkpoint the WAL at close past `WAL_RESTART_EAGERLY_AT` rather than `WAL_RESTART_AT`.
    eager_checkpoint: std::sync::atomic::AtomicBool,
    /// Where this connection counts the rows it adds to `store_objects_recent`, when a thread
    /// of the process folds them (see `wal.rs`): it then looks only when there may be enough.
    pub(crate) recent_added: std::sync::OnceLock<std::sync::Arc<std::sync::atomic::AtomicUsize>>,
}

/// Opens a connection to the SQLite database the store shares with the rest of Rewind, set up
/// the way every process uses it: WAL (many processes, readers never block the writer), commits
/// durable across power loss, a bounded wait for other writers, and the WAL file kept between
/// the short-lived processes (re-creating it costs a directory fsync each time) and checkpointed
/// as it grows rather than when a process exits.
pub fn open_database(path: &Path) -> Result<Connection> {
    let wal = wal_path(path);
    let wal_before = file_identity(&wal);
    let conn = Connection::open(path)?;
    conn.busy_timeout(Duration::from_secs(30))?;
    // Room for every statement one command runs more than once (the default is 16).
    conn.set_prepared_statement_cache_capacity(64);
    let mode: String = conn.query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0))?;
    if !mode.eq_ignore_ascii_case("wal") {
        return Err(Error::Format(format!(
            "database {} refused WAL mode (got {mode})",
            path.display()
        )));
    }
    // A commit is only as durable as the WAL file's directory entry. SQLite syncs the directory
    // at the first commit of every connection that opened the WAL with O_CREAT, which is every
    // connection: it cannot tell a new WAL file from the kept one. The workspace's build turns
    // that off (`SQLITE_DISABLE_DIRSYNC` in .cargo/config.toml: one fsync less per command) and
    // syncs here instead, when the WAL file is in fact new. Built either way, this is correct.
    let wal_now = file_identity(&wal);
    if wal_now.is_some() && wal_now != wal_before {
        let dir = path.parent().filter(|d| !d.as_os_str().is_empty());
        crate::pack::sync_dir(dir.unwrap_or(Path::new(".")))?;
    }
    conn.pragma_update(None, "synchronous", "FULL")?;
    // The one foreign key of the schema (an object row's pack) is not enforced: SQLite checks a
    // deleted pack row by scanning the whole object table (it has no index by pack), which
    // made a gc that deletes 400 packs of 1.2M objects spend 10 s in it. Rows name existing
    // packs by construction (a pack row is inserted before its objects'; the sweep deletes a
    // pack's object rows, checked to be all dead, before the pack row), and fsck reports any
    // that does not. (SQLite is built with foreign keys on by default here.)
    conn.pragma_update(None, "foreign_keys", false)?;
    // Every Rewind command is a short-lived process, and SQLite rebuilds the WAL index from the
    // WAL file in each one (no other connection keeps it alive): it re-reads every frame of the
    // WAL and forgets which of them earlier processes already copied into the database. So a
    // connection does not checkpoint when it closes (that would copy the whole WAL again, with
    // two fsyncs, in every command); instead `Index`'s drop checkpoints the WAL and starts it
    // over once it passes `WAL_RESTART_AT`, which keeps both the rebuild and the copy small.
    // The automatic checkpoint stays as a bound for long commands (a server's stores leave it
    // to a thread of the server's instead, see `wal.rs`); `journal_size_limit` trims the WAL
    // file whenever it starts over.
    conn.set_db_config(DbConfig::SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, true)?;
    conn.pragma_update(None, "wal_autocheckpoint", AUTOCHECKPOINT_PAGES)?;
    conn.pragma_update(None, "journal_size_limit", 4i64 << 20)?;
    // SAFETY: a valid open connection handle and a pointer to a live int, as the call expects.
    unsafe {
        let mut on: std::ffi::c_int = 1;
        rusqlite::ffi::sqlite3_file_control(
            conn.handle(),
            c"main".as_ptr(),
            rusqlite::ffi::SQLITE_FCNTL_PERSIST_WAL,
            (&mut on as *mut std::ffi::c_int).cast(),
        );
    }
    Ok(conn)
}

/// WAL pages past which a commit checkpoints (SQLite's default), or, in a process that leaves
/// checkpoints to a thread of its own, that thread does (see `wal.rs`).
pub(crate) const AUTOCHECKPOINT_PAGES: i64 = 1000;

/// WAL sizes past which a closing `Index` checkpoints the WAL and starts it over (see
/// `open_database` and `Drop for Index`). A checkpoint and restart cost three flushes (the WAL,
/// the database, the new WAL header); every process's WAL-index rebuild re-reads the WAL's live
/// frames (about 2 µs a frame; a guarded write adds about 19 frames). A short command (an exact epoch, a query) so checkpoints rarely, and one
/// that just captured the whole tree (see [`crate::Store::checkpoint_wal_on_close`]), where a
/// checkpoint is lost in the noise, whenever the WAL holds more than a few commands.
const WAL_RESTART_AT: u64 = 1 << 20;
const WAL_RESTART_EAGERLY_AT: u64 = 64 << 10;

/// Bytes a WAL frame takes: the page and its 24-byte header.
const WAL_FRAME_BYTES: u64 = 4096 + 24;

fn wal_path(db: &Path) -> std::path::PathBuf {
    let mut p = db.as_os_str().to_owned();
    p.push("-wal");
    p.into()
}

/// Device and inode of a file, if it exists: tells a file that was there from one made anew.
fn file_identity(path: &Path) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    std::fs::symlink_metadata(path)
        .ok()
        .map(|m| (m.dev(), m.ino()))
}

impl Drop for Index {
    /// Past a size, checkpoints the WAL and starts it over *in place*: the file keeps its
    /// blocks, and the next commands' frames overwrite them. Overwriting allocated blocks and
    /// flushing them with `fdatasync` (the build's `HAVE_FDATASYNC`) changes no file-system
    /// metadata, so a durable commit costs a data flush, not a journal commit; appending to a
    /// truncated WAL cost one (1.5-3 ms on a loop device) in every durable commit.
    ///
    /// A checkpoint alone does not start the log over for the next process: SQLite rebuilds
    /// the WAL index from the file in every process and counts the old frames as not yet
    /// copied. So the closing process makes one more, empty, write itself, which writes a new
    /// WAL header (new salts: the old frames stop counting) while its WAL index still knows
    /// every frame was copied. `journal_size_limit` trims the file at that restart.
    fn drop(&mut self) {
        let conn = self.conn.get_mut();
        let at = if *self.eager_checkpoint.get_mut() {
            WAL_RESTART_EAGERLY_AT
        } else {
            WAL_RESTART_AT
        };
        // A NOOP checkpoint only reads the WAL index: how many frames the log holds now.
        let frames = conn
            .query_row("PRAGMA wal_checkpoint(NOOP)", [], |r| r.get::<_, i64>(1))
            .unwrap_or(0);
        if frames.max(0) as u64 * WAL_FRAME_BYTES <= at {
            return;
        }
        // Never wait at exit: if another process is reading or writing, a later command does it.
        let _ = conn.busy_timeout(Duration::ZERO);
        let done = conn.query_row("PRAGMA wal_checkpoint(RESTART)", [], |r| {
            Ok((
                r.get::<_, i64>(0)?,
                r.get::<_, i64>(1)?,
                r.get::<_, i64>(2)?,
            ))
        });
        if !matches!(done, Ok((0, log, copied)) if log == copied) {
            return;
        }
        // The restart: a write that changes nothing, but writes a page (setting a header field
        // to its own value; an UPDATE to the same value writes no page). Not flushed: a lost
        // restart leaves the old, fully copied frames, which a later checkpoint copies again;
        // SQLite syncs the new WAL header itself before any frame follows it.
        let Ok(v) = conn.query_row("PRAGMA user_version", [], |r| r.get::<_, i64>(0)) else {
            return;
        };
        let _ = conn.execute_batch(&format!(
            "PRAGMA synchronous = NORMAL; BEGIN IMMEDIATE; PRAGMA user_version = {v}; COMMIT;"
        ));
    }
}

/// The page cache of an index connection (SQLite's `cache_size`): pages read through the
/// mapping cost it little, pages in the WAL and pages written fill it.
pub const PAGE_CACHE_BYTES: u64 = 16 << 20;

impl Index {
    pub fn open(path: &Path) -> Result<Index> {
        let conn = open_database(path)?;
        // Point lookups of 100k objects touch most index pages: read them through a mapping
        // and keep them cached rather than pread them one page at a time.
        conn.pragma_update(None, "mmap_size", 256i64 << 20)?;
        conn.pragma_update(None, "cache_size", -(PAGE_CACHE_BYTES as i64 >> 10))?;
        let mut index = Index {
            path: path.to_owned(),
            conn: ReentrantMutex::new(conn),
            eager_checkpoint: Default::default(),
            recent_added: Default::default(),
        };
        let conn = index.conn.get_mut();
        // Every process opens the index: the usual case, a current schema, costs one query.
        let current = schema_version(conn)?;
        if current.as_deref() == Some(SCHEMA_VERSION) {
            return Ok(index);
        }
        if current.is_none() {
            let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
            tx.execute_batch(SCHEMA)?;
            tx.execute(
                "INSERT OR IGNORE INTO store_meta (key, value) VALUES ('schema_version', ?1)",
                [SCHEMA_VERSION],
            )?;
            tx.commit()?;
        }
        for (from, migration) in [
            ("1", MIGRATE_1_TO_2),
            ("2", MIGRATE_2_TO_3),
            ("3", MIGRATE_3_TO_4),
            ("4", MIGRATE_4_TO_5),
            ("5", MIGRATE_5_TO_6),
            ("6", MIGRATE_6_TO_7),
        ] {
            if schema_version(conn)?.as_deref() == Some(from) {
                let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
                if schema_version(&tx)?.as_deref() == Some(from) {
                    tx.execute_batch(migration)?;
                }
                tx.commit()?;
            }
        }
        match schema_version(conn)? {
            Some(v) if v == SCHEMA_VERSION => Ok(index),
            v => Err(Error::Format(format!(
                "object index schema version {} is not supported (expected {SCHEMA_VERSION})",
                v.unwrap_or_default()
            ))),
        }
    }

    pub(crate) fn checkpoint_wal_on_close(&self) {
        self.eager_checkpoint
            .store(true, std::sync::atomic::Ordering::Relaxed);
    }

    pub(crate) fn conn(&self) -> ReentrantMutexGuard<'_, Connection> {
        self.conn.lock()
    }

    /// Whether the connection is inside a transaction (then what it reads includes rows that
    /// may still roll back).
    pub(crate) fn in_transaction(&self) -> bool {
        !self.conn().is_autocommit()
    }

    /// This database's instance name (`store_meta` key `instance`), given the first time it
    /// is asked for: tells it from a database made later at the same path.
    pub(crate) fn instance(&self) -> Result<String> {
        let conn = self.conn();
        if let Some(v) = meta(&conn, "instance")? {
            return Ok(v);
        }
        conn.execute(
            "INSERT OR IGNORE INTO store_meta (key, value) VALUES ('instance', ?1)",
            [crate::pack::new_pack_name()],
        )?;
        Ok(meta(&conn, "instance")?.unwrap_or_default())
    }

    /// Whether this thread holds the connection (see [`crate::Store::db_held_here`]).
    pub(crate) fn conn_held_here(&self) -> bool {
        self.conn.is_owned_by_current_thread()
    }

    pub fn contains(&self, id: &ObjectId) -> Result<bool> {
        let conn = self.conn();
        let mut st = conn.prepare_cached(
            "SELECT 1 FROM store_objects_all WHERE id = ?1
             UNION ALL SELECT 1 FROM store_inline WHERE id = ?1",
        )?;
        Ok(st.exists([&id.0[..]])?)
    }

    /// Every indexed id, sorted. See `Writer`'s dedup check.
    pub fn all_ids(&self) -> Result<Vec<ObjectId>> {
        let conn = self.conn();
        // The object tables are clustered by id, so this reads each in order without sorting;
        // the recent and inline ids land at the end.
        let mut st = conn.prepare_cached(
            "SELECT id FROM store_objects_all UNION ALL SELECT id FROM store_inline",
        )?;
        let mut rows = st.query([])?;
        let mut out = Vec::new();
        while let Some(r) = rows.next()? {
            let blob = r.get_ref(0)?.as_blob_or_null().ok().flatten();
            if let Some(id) = blob.and_then(|b| <[u8; 32]>::try_from(b).ok()) {
                out.push(ObjectId(id));
            }
        }
        // SQLite orders blobs by memcmp, as `[u8; 32]` orders; sorting nearly sorted data is
        // about linear. An id two writers raced to store may be in two tables.
        out.sort_unstable();
        out.dedup();
        Ok(out)
    }

    /// About how many objects the index holds (objects in packs, counting duplicates), read
    /// from the small pack table rather than by counting the object table.
    pub fn approx_objects(&self) -> Result<u64> {
        let conn = self.conn();
        let n: i64 = conn.query_row(
            "SELECT coalesce(sum(objects), 0) FROM store_packs",
            [],
            |r| r.get(0),
        )?;
        Ok(n as u64)
    }

    /// The pack (row id) holding `id`, and where in it.
    ///
    /// Deliberately not a join with `store_packs`: with the bundled SQLite's STAT4, a join
    /// with a bound parameter is re-prepared on every execution (measured: 5x slower).
    pub fn lookup(&self, id: &ObjectId) -> Result<Option<(i64, Entry)>> {
        let conn = self.conn();
        let mut st = conn.prepare_cached(
            "SELECT pack, kind, compression, offset, stored_len, raw_len
             FROM store_objects_all WHERE id = ?1",
        )?;
        let row = st
            .query_row([&id.0[..]], |r| {
                Ok((
                    r.get::<_, i64>(0)?,
                    r.get::<_, u8>(1)?,
                    r.get::<_, u8>(2)?,
                    r.get::<_, i64>(3)? as u64,
                    r.get::<_, u32>(4)?,
                    r.get::<_, u32>(5)?,
                ))
            })
            .optional()?;
        let Some((pack, kind, compression, offset, stored_len, raw_len)) = row else {
            return Ok(None);
        };
        let entry = entry(*id, kind, compression, offset, stored_len, raw_len)?;
        Ok(Some((pack, entry)))
    }

    /// Indexes packs that are durable in place and stores inline objects, all in one
    /// transaction: its own, committed before this returns, or, if the connection is already
    /// inside a transaction (the caller's), that one, which makes them durable when it
    /// commits. Says which.
    pub fn insert(&self, packs: &[PublishedPack], inline: &[InlineObject]) -> Result<Inserted> {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs() as i64)
            .unwrap_or(0);
        let conn = self.conn();
        let ((), own) = in_transaction(&conn, || {
            let mut add_pack = conn.prepare_cached(
                "INSERT OR IGNORE INTO store_packs (name, size, objects, created_at)
                 VALUES (?1, ?2, ?3, ?4)",
            )?;
            let mut pack_id = conn.prepare_cached("SELECT id FROM store_packs WHERE name = ?1")?;
            // In id order: ids are uniformly random, so inserting them in pack order touches a
            // random page of the b-tree per row; sorted, each page is filled once (a 100k-object
            // first capture's index commit took about three times as long unsorted).
            let mut rows = Vec::with_capacity(packs.iter().map(|p| p.entries.len()).sum());
            for p in packs {
                add_pack.execute(params![p.name, p.size as i64, p.entries.len() as i64, now])?;
                let pid: i64 = pack_id.query_row([&p.name], |r| r.get(0))?;
                rows.extend(p.entries.iter().map(|e| (pid, e)));
            }
            rows.sort_unstable_by_key(|r| r.1.id);
            // A few rows go to the small table of recent rows, a batch that would take it past
            // its bound to the main table, after the recent rows (see `FOLD_AT`).
            let table = if !rows.is_empty() && recent_rows(&conn)? + rows.len() > FOLD_AT {
                fold(&conn)?;
                Table::Main
            } else {
                Table::Recent
            };
            // Many rows a statement: one statement a row spent more time starting and
            // resetting statements than inserting.
            let mut chunks = rows.chunks_exact(ROWS_PER_INSERT);
            let mut add_many = conn.prepare_cached(&insert_objects_sql(table, ROWS_PER_INSERT))?;
            for chunk in &mut chunks {
                bind_objects(&mut add_many, chunk)?;
                add_many.raw_execute()?;
            }
            let mut add_one = conn.prepare_cached(&insert_objects_sql(table, 1))?;
            for row in chunks.remainder() {
                bind_objects(&mut add_one, std::slice::from_ref(row))?;
                add_one.raw_execute()?;
            }
            if let (Table::Recent, Some(added)) = (table, self.recent_added.get()) {
                // Counted before the commit: a count too high costs the thread one look.
                added.fetch_add(rows.len(), std::sync::atomic::Ordering::Relaxed);
            }
            let mut add_inline = conn.prepare_cached(
                "INSERT OR IGNORE INTO store_inline (id, kind, compression, raw_len, data)
                 VALUES (?1, ?2, ?3, ?4, ?5)",
            )?;
            for o in inline {
                add_inline.execute(params![
                    &o.id.0[..],
                    o.kind as u8,
                    o.compression as u8,
                    o.raw_len,
                    o.stored
                ])?;
            }
            Ok(())
        })?;
        Ok(if own {
            Inserted::Committed
        } else {
            Inserted::InCallersTransaction
        })
    }

    /// An inline object's entry (offset 0) and stored bytes.
    pub fn lookup_inline(&self, id: &ObjectId) -> Result<Option<(Entry, Vec<u8>)>> {
        let conn = self.conn();
        let mut st = conn.prepare_cached(
            "SELECT kind, compression, raw_len, data FROM store_inline WHERE id = ?1",
        )?;
        let row = st
            .query_row([&id.0[..]], |r| {
                Ok((
                    r.get::<_, u8>(0)?,
                    r.get::<_, u8>(1)?,
                    r.get::<_, u32>(2)?,
                    r.get::<_, Vec<u8>>(3)?,
                ))
            })
            .optional()?;
        let Some((kind, compression, raw_len, data)) = row else {
            return Ok(None);
        };
        let e = entry(*id, kind, compression, 0, data.len() as u32, raw_len)?;
        Ok(Some((e, data)))
    }

    /// The ids of all inline objects.
    pub fn inline_ids(&self) -> Result<Vec<ObjectId>> {
        let conn = self.conn();
        let mut st = conn.prepare_cached("SELECT id FROM store_inline ORDER BY id")?;
        let mut rows = st.query([])?;
        let mut out = Vec::new();
        while let Some(r) = rows.next()? {
            let id: Vec<u8> = r.get(0)?;
            out.push(ObjectId(id.try_into().map_err(|_| {
                Error::Format("inline row with an id that is not 32 bytes".into())
            })?));
        }
        Ok(out)
    }

    /// The name of the pack with row id `id`. Row ids are never reused (AUTOINCREMENT), so
    /// callers may cache the answer.
    pub fn pack_name(&self, id: i64) -> Result<Option<String>> {
        let conn = self.conn();
        let mut st = conn.prepare_cached("SELECT name FROM store_packs WHERE id = ?1")?;
        Ok(st.query_row([id], |r| r.get(0)).optional()?)
    }

    pub fn pack_names(&self) -> Result<HashSet<String>> {
        let conn = self.conn();
        let mut st = conn.prepare_cached("SELECT name FROM store_packs")?;
        let names = st.query_map([], |r| r.get(0))?;
        Ok(names.collect::<Result<_, _>>()?)
    }

    pub fn packs(&self) -> Result<Vec<PackRow>> {
        let conn = self.conn();
        let mut st = conn.prepare_cached("SELECT id, name FROM store_packs ORDER BY id")?;
        let rows = st.query_map([], |r| {
            Ok(PackRow {
                id: r.get(0)?,
                name: r.get(1)?,
            })
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// Every packed object, by pack id, each pack's in pack order. One pass over the table
    /// (it has no index by pack: only fsck asks this).
    pub fn objects_by_pack(&self) -> Result<HashMap<i64, Vec<Entry>>> {
        let conn = self.conn();
        let mut st = conn.prepare_cached(
            "SELECT id, kind, compression, offset, stored_len, raw_len, pack
             FROM store_objects_all",
        )?;
        let mut rows = st.query([])?;
        let mut out: HashMap<i64, Vec<Entry>> = HashMap::new();
        while let Some(r) = rows.next()? {
            let id: Vec<u8> = r.get(0)?;
            let id =
                ObjectId(id.try_into().map_err(|_| {
                    Error::Format("index row with an id that is not 32 bytes".into())
                })?);
            let offset: i64 = r.get(3)?;
            let e = entry(
                id,
                r.get(1)?,
                r.get(2)?,
                offset as u64,
                r.get(4)?,
                r.get(5)?,
            )?;
            out.entry(r.get(6)?).or_default().push(e);
        }
        for entries in out.values_mut() {
            entries.sort_unstable_by_key(|e| e.offset);
        }
        Ok(out)
    }

    pub fn stats(&self) -> Result<StoreStats> {
        let conn = self.conn();
        let (packs, pack_bytes) = conn.query_row(
            "SELECT count(*), coalesce(sum(size), 0) FROM store_packs",
            [],
            |r| Ok((r.get::<_, i64>(0)? as u64, r.get::<_, i64>(1)? as u64)),
        )?;
        let (objects, raw_bytes) = conn.query_row(
            "SELECT (SELECT count(*) FROM store_objects_all)
                    + (SELECT count(*) FROM store_inline),
                    (SELECT coalesce(sum(raw_len), 0) FROM store_objects_all)
                    + (SELECT coalesce(sum(raw_len), 0) FROM store_inline)",
            [],
            |r| Ok((r.get::<_, i64>(0)? as u64, r.get::<_, i64>(1)? as u64)),
        )?;
        Ok(StoreStats {
            packs,
            objects,
            pack_bytes,
            raw_bytes,
            ..StoreStats::default()
        })
    }
}

/// How many sweeps have removed index rows (`store_meta` key `sweeps`; none yet: 0).
pub(crate) fn sweeps(conn: &Connection) -> Result<u64> {
    meta(conn, "sweeps")?.map_or(Ok(0), |v| {
        v.parse()
            .map_err(|_| Error::Format(format!("store_meta sweeps is not a count: {v:?}")))
    })
}

fn schema_version(conn: &Connection) -> Result<Option<String>> {
    meta(conn, "schema_version")
}

/// The `store_meta` value of `key`; `None` without one (or without the table: a new database).
fn meta(conn: &Connection, key: &str) -> Result<Option<String>> {
    match conn.query_row("SELECT value FROM store_meta WHERE key = ?1", [key], |r| {
        r.get(0)
    }) {
        Ok(v) => Ok(Some(v)),
        Err(rusqlite::Error::QueryReturnedNoRows) => Ok(None),
        Err(rusqlite::Error::SqliteFailure(_, Some(m))) if m.starts_with("no such table") => {
            Ok(None)
        }
        Err(e) => Err(e.into()),
    }
}

fn entry(
    id: ObjectId,
    kind: u8,
    compression: u8,
    offset: u64,
    stored_len: u32,
    raw_len: u32,
) -> Result<Entry> {
    let bad = |what: &str| Error::Format(format!("index row for {id} has an unknown {what}"));
    Ok(Entry {
        id,
        kind: ObjectKind::from_u8(kind).ok_or_else(|| bad("kind"))?,
        compression: Compression::from_u8(compression).ok_or_else(|| bad("compression"))?,
        offset,
        stored_len,
        raw_len,
    })
}

/// Object rows one insert statement takes (7 parameters each; SQLite allows 32,766).
const ROWS_PER_INSERT: usize = 64;

/// The most rows `store_objects_recent` holds; a batch that would take it past this folds it
/// into `store_objects` and goes there itself.
///
/// Why a table of recent rows: ids are uniformly random, so the rows of one commit land on
/// random pages of the main table, and each page touched is a page written to the WAL. 1,000
/// rows into a 100,000-row table touched about 700 pages of its 1,400 (2.8 MB of WAL, 12-16 ms
/// of a server's 1,000-file epoch); into a table of at most this many rows, at most about 120.
/// A fold then writes each page of the main table about once for this many rows, where the
/// same rows inserted batch by batch wrote one several times over. A batch this large on its
/// own (a first capture) touches most pages of the main table anyway and goes straight there.
pub(crate) const FOLD_AT: usize = 8192;

/// Rows past which a process with a thread for the database's upkeep folds the recent rows
/// there, between requests, rather than in a commit that reaches [`FOLD_AT`] (see `wal.rs`).
pub(crate) const FOLD_IN_BACKGROUND_AT: usize = 2048;

/// How many rows `store_objects_recent` holds, counted up to [`FOLD_AT`] + 1 (past that, the
/// exact number does not matter): a look at pages a commit writes anyway.
fn recent_rows(conn: &Connection) -> Result<usize> {
    let n: i64 = conn
        .prepare_cached("SELECT count(*) FROM (SELECT 1 FROM store_objects_recent LIMIT ?1)")?
        .query_row([FOLD_AT as i64 + 1], |r| r.get(0))?;
    Ok(n as usize)
}

/// Moves every row of `store_objects_recent` into `store_objects`, in the connection's
/// transaction if it is in one, else in one of its own. An id already in the main table (two
/// writers raced to store it) keeps its row there, as `INSERT OR IGNORE` always did; the
/// other copy is dead weight in its pack. No id stops being indexed, so readers (which read
/// both tables in one statement) and `sweeps` see no difference. Returns the rows moved.
pub(crate) fn fold(conn: &Connection) -> Result<usize> {
    let (moved, _) = in_transaction(conn, || {
        conn.prepare_cached(
            "INSERT OR IGNORE INTO store_objects
                 (id, pack, kind, compression, offset, stored_len, raw_len)
             SELECT id, pack, kind, compression, offset, stored_len, raw_len
             FROM store_objects_recent",
        )?
        .execute([])?;
        Ok(conn
            .prepare_cached("DELETE FROM store_objects_recent")?
            .execute([])?)
    })?;
    Ok(moved)
}

/// Runs `f` inside the connection's transaction when it is in one (the caller's rows then
/// commit or roll back with its own), else inside a transaction of its own (`BEGIN
/// IMMEDIATE`), committed when `f` succeeds and rolled back when it fails. Also says whether
/// the transaction was its own.
pub(crate) fn in_transaction<T>(
    conn: &Connection,
    f: impl FnOnce() -> Result<T>,
) -> Result<(T, bool)> {
    let own = conn.is_autocommit();
    if own {
        conn.execute_batch("BEGIN IMMEDIATE")?;
    }
    match f() {
        Ok(v) => {
            if own {
                conn.execute_batch("COMMIT")?;
            }
            Ok((v, own))
        }
        Err(e) => {
            if own {
                let _ = conn.execute_batch("ROLLBACK");
            }
            Err(e)
        }
    }
}

/// [`fold`] in a transaction of its own, when `store_objects_recent` holds more than `at`
/// rows. Returns the rows moved.
pub(crate) fn fold_if_over(conn: &Connection, at: usize) -> Result<usize> {
    if recent_rows(conn)? <= at {
        return Ok(0);
    }
    fold(conn)
}

/// Where [`Index::insert`] puts packed objects' rows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Table {
    /// `store_objects`.
    Main,
    /// `store_objects_recent`.
    Recent,
}

/// `INSERT OR IGNORE INTO <table> … VALUES (…), (…)` for `n` rows.
fn insert_objects_sql(table: Table, n: usize) -> String {
    let table = match table {
        Table::Main => "store_objects",
        Table::Recent => "store_objects_recent",
    };
    let mut sql = format!(
        "INSERT OR IGNORE INTO {table}
         (id, pack, kind, compression, offset, stored_len, raw_len) VALUES "
    );
    for i in 0..n {
        if i > 0 {
            sql.push(',');
        }
        sql.push_str("(?,?,?,?,?,?,?)");
    }
    sql
}

/// Binds `rows` (pack id, entry) to an [`insert_objects_sql`] statement of as many rows.
fn bind_objects(st: &mut rusqlite::CachedStatement<'_>, rows: &[(i64, &Entry)]) -> Result<()> {
    for (i, (pid, e)) in rows.iter().enumerate() {
        let at = 7 * i;
        st.raw_bind_parameter(at + 1, &e.id.0[..])?;
        st.raw_bind_parameter(at + 2, pid)?;
        st.raw_bind_parameter(at + 3, e.kind as u8)?;
        st.raw_bind_parameter(at + 4, e.compression as u8)?;
        st.raw_bind_parameter(at + 5, e.offset as i64)?;
        st.raw_bind_parameter(at + 6, e.stored_len)?;
        st.raw_bind_parameter(at + 7, e.raw_len)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An id no loop below reaches.
    const SENTINEL: u32 = 1 << 30;

    fn entry(n: u32, offset: u64) -> Entry {
        let mut id = [0u8; 32];
        id[..4].copy_from_slice(&n.to_be_bytes());
        id[31] = 0x5a;
        Entry {
            id: ObjectId(id),
            kind: ObjectKind::Blob,
            compression: Compression::Raw,
            offset,
            stored_len: n + 1,
            raw_len: n + 2,
        }
    }

    /// Rows go in many a statement and the rest one by one: every count around the statement
    /// size indexes every object exactly once, with its own pack and place, and an id already
    /// indexed keeps its first row.
    #[test]
    fn every_row_is_indexed_whatever_the_batch_size() {
        for n in [
            0,
            1,
            ROWS_PER_INSERT - 1,
            ROWS_PER_INSERT,
            ROWS_PER_INSERT + 1,
            3 * ROWS_PER_INSERT + 5,
        ] {
            let dir = tempfile::tempdir().unwrap();
            let index = Index::open(&dir.path().join("index.db")).unwrap();
            let first = PublishedPack {
                name: "a".repeat(64),
                size: 1,
                entries: vec![entry(SENTINEL, 7)],
            };
            index.insert(std::slice::from_ref(&first), &[]).unwrap();
            // Reversed, so the sort matters; the first pack's object again, at another place,
            // and one id twice in this batch.
            let mut entries: Vec<Entry> = (0..n as u32)
                .rev()
                .map(|i| entry(i, 100 + u64::from(i)))
                .collect();
            entries.push(entry(SENTINEL, 9));
            if n > 0 {
                entries.push(entry(0, 999));
            }
            let second = PublishedPack {
                name: "b".repeat(64),
                size: 1,
                entries,
            };
            index.insert(std::slice::from_ref(&second), &[]).unwrap();
            assert_eq!(index.all_ids().unwrap().len(), n + 1, "n = {n}");
            let (pack_a, e) = index.lookup(&entry(SENTINEL, 0).id).unwrap().unwrap();
            assert_eq!(e, entry(SENTINEL, 7), "n = {n}: the first row stays");
            for i in 0..n as u32 {
                let (pack, e) = index.lookup(&entry(i, 0).id).unwrap().unwrap();
                assert_ne!(pack, pack_a, "n = {n}");
                // Twice in one batch (a writer never does that): either row, whole.
                if i == 0 && e.offset == 999 {
                    continue;
                }
                assert_eq!(e, entry(i, 100 + u64::from(i)), "n = {n}");
            }
        }
    }

    fn pack(name: &str, entries: Vec<Entry>) -> PublishedPack {
        PublishedPack {
            name: format!("{name:0>32}"),
            size: 1,
            entries,
        }
    }

    fn rows_in(index: &Index, table: &str) -> i64 {
        index
            .conn()
            .query_row(&format!("SELECT count(*) FROM {table}"), [], |r| r.get(0))
            .unwrap()
    }

    /// A small batch waits in the table of recent rows, where every reader finds it; a fold
    /// moves it to the main table and no reader sees a difference; an id raced into both
    /// tables is found with its first row, listed once, and keeps that row through the fold.
    #[test]
    fn recent_rows_are_read_as_indexed_and_folded_without_a_trace() {
        let dir = tempfile::tempdir().unwrap();
        let index = Index::open(&dir.path().join("index.db")).unwrap();
        let first: Vec<Entry> = (0..10).map(|i| entry(i, 100 + u64::from(i))).collect();
        index.insert(&[pack("a", first.clone())], &[]).unwrap();
        assert_eq!(
            (
                rows_in(&index, "store_objects_recent"),
                rows_in(&index, "store_objects")
            ),
            (10, 0)
        );
        // `rows`: what the listings of rows count (a raced copy is a row of its own).
        let readers_agree = |index: &Index, rows: usize| {
            for e in &first {
                assert_eq!(index.lookup(&e.id).unwrap().unwrap().1, *e);
                assert!(index.contains(&e.id).unwrap());
            }
            let ids: Vec<ObjectId> = first.iter().map(|e| e.id).collect();
            assert_eq!(index.all_ids().unwrap(), ids);
            let by_pack = index.objects_by_pack().unwrap();
            assert_eq!(by_pack.values().map(Vec::len).sum::<usize>(), rows);
            assert_eq!(index.stats().unwrap().objects, rows as u64);
        };
        readers_agree(&index, 10);
        assert_eq!(fold(&index.conn()).unwrap(), 10);
        assert_eq!(
            (
                rows_in(&index, "store_objects_recent"),
                rows_in(&index, "store_objects")
            ),
            (0, 10)
        );
        readers_agree(&index, 10);
        // Another writer stored object 0 at the same time, elsewhere: its row goes to the
        // recent table, next to the main table's.
        index
            .insert(&[pack("b", vec![entry(0, 999)])], &[])
            .unwrap();
        assert_eq!(rows_in(&index, "store_objects_recent"), 1);
        let (pack_a, e) = index.lookup(&first[0].id).unwrap().unwrap();
        assert_eq!(e, first[0], "the first row is the one found");
        readers_agree(&index, 11);
        assert_eq!(fold(&index.conn()).unwrap(), 1);
        assert_eq!(
            (
                rows_in(&index, "store_objects_recent"),
                rows_in(&index, "store_objects")
            ),
            (0, 10)
        );
        assert_eq!(
            index.lookup(&first[0].id).unwrap().unwrap(),
            (pack_a, first[0])
        );
        assert_eq!(
            fold_if_over(&index.conn(), 0).unwrap(),
            0,
            "nothing to fold"
        );
    }

    /// Recent rows stay under `FOLD_AT`: a batch that fits joins them, one row more folds them
    /// and goes to the main table with them.
    #[test]
    fn a_batch_past_the_bound_folds_the_recent_rows_and_goes_to_the_main_table() {
        let dir = tempfile::tempdir().unwrap();
        let index = Index::open(&dir.path().join("index.db")).unwrap();
        let batch = |from: u32, n: usize| -> Vec<Entry> {
            (from..from + n as u32)
                .map(|i| entry(i, u64::from(i)))
                .collect()
        };
        index.insert(&[pack("a", batch(0, 100))], &[]).unwrap();
        index
            .insert(&[pack("b", batch(100, FOLD_AT - 100))], &[])
            .unwrap();
        assert_eq!(
            rows_in(&index, "store_objects_recent"),
            FOLD_AT as i64,
            "fits exactly"
        );
        assert_eq!(rows_in(&index, "store_objects"), 0);
        index
            .insert(&[pack("c", batch(FOLD_AT as u32, 1))], &[])
            .unwrap();
        assert_eq!(rows_in(&index, "store_objects_recent"), 0);
        assert_eq!(rows_in(&index, "store_objects"), FOLD_AT as i64 + 1);
        // A first capture's batch goes straight to the main table.
        index
            .insert(&[pack("d", batch(1 << 20, FOLD_AT + 1))], &[])
            .unwrap();
        assert_eq!(rows_in(&index, "store_objects_recent"), 0);
        assert_eq!(index.all_ids().unwrap().len(), 2 * FOLD_AT + 2);
        assert_eq!(fold_if_over(&index.conn(), 0).unwrap(), 0);
        index.insert(&[pack("e", batch(2 << 20, 3))], &[]).unwrap();
        assert_eq!(fold_if_over(&index.conn(), 3).unwrap(), 0, "not over");
        assert_eq!(fold_if_over(&index.conn(), 2).unwrap(), 3);
    }

    mod model {
        use super::*;
        use proptest::prelude::*;

        #[derive(Clone, Debug)]
        enum Op {
            /// A batch of this many new ids and, of the ids inserted before, those at these
            /// places (a writer that raced another).
            Insert(usize, Vec<prop::sample::Index>),
            Fold,
        }

        fn op() -> impl Strategy<Value = Op> {
            let n = prop_oneof![4 => 0..200usize, 1 => (FOLD_AT - 300)..(FOLD_AT + 300)];
            prop_oneof![
                6 => (n, prop::collection::vec(any::<prop::sample::Index>(), 0..4))
                    .prop_map(|(n, again)| Op::Insert(n, again)),
                1 => Just(Op::Fold),
            ]
        }

        proptest! {
            #![proptest_config(ProptestConfig { cases: 12, ..ProptestConfig::default() })]
            /// Against a map of each id to its first row: whatever the batches and folds,
            /// every id is found with its first row and listed once, and the recent rows never
            /// pass their bound.
            #[test]
            fn the_index_is_a_map_of_first_rows(ops in prop::collection::vec(op(), 1..8)) {
                let dir = tempfile::tempdir().unwrap();
                let index = Index::open(&dir.path().join("index.db")).unwrap();
                let mut model: std::collections::BTreeMap<ObjectId, (String, Entry)> =
                    Default::default();
                let mut next = 0u32;
                for (k, op) in ops.into_iter().enumerate() {
                    match op {
                        Op::Insert(n, again) => {
                            let name = format!("{k:0>32}");
                            let known: Vec<ObjectId> = model.keys().copied().collect();
                            let mut entries: Vec<Entry> = (next..next + n as u32)
                                .map(|i| entry(i, u64::from(i) + 7 * k as u64))
                                .collect();
                            next += n as u32;
                            if !known.is_empty() {
                                for i in again {
                                    let id = *i.get(&known);
                                    if !entries.iter().any(|e| e.id == id) {
                                        entries.push(Entry { offset: 1 << 40, ..model[&id].1 });
                                    }
                                }
                            }
                            for e in &entries {
                                model.entry(e.id).or_insert_with(|| (name.clone(), *e));
                            }
                            index.insert(&[pack(&name, entries)], &[]).unwrap();
                        }
                        Op::Fold => {
                            fold(&index.conn()).unwrap();
                        }
                    }
                    prop_assert!(rows_in(&index, "store_objects_recent") <= FOLD_AT as i64);
                    let ids: Vec<ObjectId> = model.keys().copied().collect();
                    prop_assert_eq!(index.all_ids().unwrap(), ids);
                    let names: HashMap<i64, String> =
                        index.packs().unwrap().into_iter().map(|p| (p.id, p.name)).collect();
                    for (id, (name, e)) in &model {
                        let (pack, found) = index.lookup(id).unwrap().unwrap();
                        prop_assert_eq!(&names[&pack], name);
                        prop_assert_eq!(&found, e);
                    }
                }
            }
        }
    }
}
