//! The op log: the append-only, ordered record of epochs (mutations) and checkpoints (turn
//! boundaries) of a workspace, with sessions and their conversation nodes. It is the source of
//! truth for attribution and rewinding; trees and the shadow history are views of it.
//!
//! Every row gets an op-log position (`pos`) from one counter, so "after checkpoint X" means
//! `pos > X.pos` across all sessions and kinds.

use rewind_store::{EntryKind, ObjectId};
use rusqlite::{params, Connection, OptionalExtension, Row};

use crate::model::entry::{Change, Entry};
pub use crate::model::oplog::{ChangeRow, CheckpointRow, EpochKind, EpochRow, EpochState, Owner};
use crate::Error;

/// The op log's tables (schema version 2): sessions, nodes, epochs, changes, checkpoints,
/// journal, and the op-log position of snapshots. `docs/format.md` describes every column.
pub const MIGRATION: &str = "
CREATE TABLE sessions (id TEXT PRIMARY KEY, head TEXT, created_ns INTEGER NOT NULL);
CREATE TABLE nodes (
    session TEXT NOT NULL, message TEXT NOT NULL, parent TEXT, created_ns INTEGER NOT NULL,
    PRIMARY KEY (session, message));
CREATE TABLE epochs (
    id TEXT PRIMARY KEY, pos INTEGER NOT NULL UNIQUE, session TEXT NOT NULL,
    kind TEXT NOT NULL, state TEXT NOT NULL, tool TEXT, tool_call TEXT, message TEXT,
    owner_pid INTEGER, owner_start INTEGER, paths BLOB, pre_root BLOB,
    recovered INTEGER NOT NULL DEFAULT 0, note TEXT,
    created_ns INTEGER NOT NULL, settled_ns INTEGER);
CREATE INDEX epochs_by_session ON epochs (session, pos);
CREATE TABLE changes (
    epoch TEXT NOT NULL, pos INTEGER NOT NULL, path BLOB NOT NULL,
    pre_kind INTEGER, pre_mode INTEGER, pre_size INTEGER, pre_id BLOB,
    post_kind INTEGER, post_mode INTEGER, post_size INTEGER, post_id BLOB,
    pending INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (epoch, path));
CREATE INDEX changes_by_path ON changes (path, pos);
CREATE INDEX changes_by_pos ON changes (pos);
CREATE TABLE checkpoints (
    id TEXT PRIMARY KEY, pos INTEGER NOT NULL UNIQUE, session TEXT NOT NULL, message TEXT,
    parent TEXT, label TEXT, root BLOB NOT NULL, payload BLOB,
    pinned INTEGER NOT NULL DEFAULT 0, created_ns INTEGER NOT NULL);
CREATE INDEX checkpoints_by_message ON checkpoints (session, message, pos);
CREATE TABLE journal (
    id INTEGER PRIMARY KEY AUTOINCREMENT, epoch TEXT NOT NULL, session TEXT NOT NULL,
    plan BLOB NOT NULL, head TEXT, move_head INTEGER NOT NULL, state TEXT NOT NULL,
    created_ns INTEGER NOT NULL);
ALTER TABLE snapshots ADD COLUMN pos INTEGER NOT NULL DEFAULT 0;
INSERT INTO core_meta (key, value) VALUES ('next_pos', 1);
";

/// Every epoch begin, end and capture lists the open epochs; there are a handful of them in a
/// history of (eventually) hundreds of thousands, so they get an index of their own.
pub const MIGRATION_OPEN_EPOCHS: &str = "
CREATE INDEX epochs_open ON epochs (pos) WHERE state = 'open';
";

/// Takes the next op-log position. Call inside the transaction that uses it.
pub fn next_pos(db: &Connection) -> Result<i64, Error> {
    Ok(db
        .prepare_cached(
            "UPDATE core_meta SET value = value + 1 WHERE key = 'next_pos' RETURNING value - 1",
        )?
        .query_row([], |r| r.get(0))?)
}

/// The last position handed out (0 when none).
pub fn last_pos(db: &Connection) -> Result<i64, Error> {
    let next: i64 = db
        .prepare_cached("SELECT value FROM core_meta WHERE key = 'next_pos'")?
        .query_row([], |r| r.get(0))?;
    Ok(next - 1)
}

/// Creates the session row if it does not exist (no head yet); a no-op otherwise.
pub fn ensure_session(db: &Connection, session: &str, now: i64) -> Result<(), Error> {
    db.prepare_cached(
        "INSERT OR IGNORE INTO sessions (id, head, created_ns) VALUES (?1, NULL, ?2)",
    )?
    .execute(params![session, now])?;
    Ok(())
}

/// The session's head: the message id of the conversation node it is at; `None` when it
/// has none or the session is unknown.
pub fn session_head(db: &Connection, session: &str) -> Result<Option<String>, Error> {
    Ok(db
        .prepare_cached("SELECT head FROM sessions WHERE id = ?1")?
        .query_row([session], |r| r.get::<_, Option<String>>(0))
        .optional()?
        .flatten())
}

/// Moves the session's head to message `head` (or to none).
pub fn set_head(db: &Connection, session: &str, head: Option<&str>) -> Result<(), Error> {
    db.prepare_cached("UPDATE sessions SET head = ?2 WHERE id = ?1")?
        .execute(params![session, head])?;
    Ok(())
}

/// Every session with its head, oldest first.
pub fn sessions(db: &Connection) -> Result<Vec<(String, Option<String>)>, Error> {
    let mut st = db.prepare_cached("SELECT id, head FROM sessions ORDER BY created_ns")?;
    let rows = st.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?;
    Ok(rows.collect::<Result<_, _>>()?)
}

/// Records conversation node `message` of `session` with its parent message; a node
/// recorded again keeps its first `created_ns` and takes the new parent.
pub fn add_node(
    db: &Connection,
    session: &str,
    message: &str,
    parent: Option<&str>,
    now: i64,
) -> Result<(), Error> {
    db.prepare_cached(
        "INSERT INTO nodes (session, message, parent, created_ns) VALUES (?1, ?2, ?3, ?4)
         ON CONFLICT (session, message) DO UPDATE SET parent = excluded.parent",
    )?
    .execute(params![session, message, parent, now])?;
    Ok(())
}

fn kind_i(e: &Option<Entry>) -> Option<i64> {
    e.map(|e| e.kind as i64)
}

/// Inserts an epoch row as it is (its `pos` already taken with [`next_pos`]).
pub fn insert_epoch(db: &Connection, e: &EpochRow) -> Result<(), Error> {
    let (pid, start) = match e.owner {
        Owner::Process { pid, start } => (Some(pid as i64), Some(start as i64)),
        Owner::Session => (None, None),
    };
    let paths = (!e.paths.is_empty()).then(|| e.paths.join(&0u8));
    db.prepare_cached(
        "INSERT INTO epochs (id, pos, session, kind, state, tool, tool_call, message, owner_pid,
            owner_start, paths, pre_root, recovered, note, created_ns, settled_ns)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16)",
    )?
    .execute(params![
        e.id,
        e.pos,
        e.session,
        e.kind.as_str(),
        e.state.as_str(),
        e.tool,
        e.tool_call,
        e.message,
        pid,
        start,
        paths,
        e.pre_root.map(|r| r.0.to_vec()),
        e.recovered,
        e.note,
        e.created_ns,
        e.settled_ns
    ])?;
    Ok(())
}

/// Ends an epoch: sets its state (settled or aborted) and `settled_ns`; `recovered` is
/// sticky (once set, it stays).
pub fn settle_epoch(
    db: &Connection,
    id: &str,
    state: EpochState,
    recovered: bool,
    now: i64,
) -> Result<(), Error> {
    db.prepare_cached(
        "UPDATE epochs SET state = ?2, recovered = recovered OR ?3, settled_ns = ?4 WHERE id = ?1",
    )?
    .execute(params![id, state.as_str(), recovered, now])?;
    Ok(())
}

/// Records (or replaces) `epoch`'s change of `c.path` at op-log position `pos`; `pending`
/// for an open exact epoch's preimage whose post is not known yet.
pub fn insert_change(
    db: &Connection,
    epoch: &str,
    pos: i64,
    c: &Change,
    pending: bool,
) -> Result<(), Error> {
    let (b, a) = (&c.before, &c.after);
    db.prepare_cached(
        "INSERT OR REPLACE INTO changes (epoch, pos, path, pre_kind, pre_mode, pre_size, pre_id,
            post_kind, post_mode, post_size, post_id, pending)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)",
    )?
    .execute(params![
        epoch,
        pos,
        c.path,
        kind_i(b),
        b.map(|e| e.mode),
        b.map(|e| e.size as i64),
        b.map(|e| e.id.0.to_vec()),
        kind_i(a),
        a.map(|e| e.mode),
        a.map(|e| e.size as i64),
        a.map(|e| e.id.0.to_vec()),
        pending
    ])?;
    Ok(())
}

/// The content ids every change row of an epoch not collected names, before and after (for
/// fsck: each must still be in the store): epoch, path, then kind and id of the pre- and post-image.
#[allow(clippy::type_complexity)]
pub(crate) fn all_change_ids(
    db: &Connection,
) -> Result<
    Vec<(
        String,
        Vec<u8>,
        Option<i64>,
        Option<Vec<u8>>,
        Option<i64>,
        Option<Vec<u8>>,
    )>,
    Error,
> {
    // Not those of epochs garbage collection dropped: their content is gone by design.
    let mut st = db.prepare(
        "SELECT c.epoch, c.path, c.pre_kind, c.pre_id, c.post_kind, c.post_id
         FROM changes c JOIN epochs e ON e.id = c.epoch WHERE e.collected_ns IS NULL",
    )?;
    let rows = st.query_map([], |r| {
        Ok((
            r.get(0)?,
            r.get(1)?,
            r.get(2)?,
            r.get(3)?,
            r.get(4)?,
            r.get(5)?,
        ))
    })?;
    Ok(rows.collect::<Result<_, _>>()?)
}

/// Deletes an epoch and its changes: a restore that was rolled back never happened.
pub(crate) fn delete_epoch(db: &Connection, epoch: &str) -> Result<(), Error> {
    db.execute("DELETE FROM changes WHERE epoch = ?1", [epoch])?;
    db.execute("DELETE FROM epochs WHERE id = ?1", [epoch])?;
    Ok(())
}

/// Removes `epoch`'s change of `path`, if any: a path that ended where it started is no
/// change.
pub fn delete_change(db: &Connection, epoch: &str, path: &[u8]) -> Result<(), Error> {
    db.prepare_cached("DELETE FROM changes WHERE epoch = ?1 AND path = ?2")?
        .execute(params![epoch, path])?;
    Ok(())
}

fn entry_at(r: &Row, at: usize) -> rusqlite::Result<Option<Entry>> {
    let kind: Option<i64> = r.get(at)?;
    let Some(kind) = kind.and_then(|k| EntryKind::from_u8(k as u8)) else {
        return Ok(None);
    };
    let id: Vec<u8> = r.get(at + 3)?;
    Ok(Some(Entry {
        kind,
        mode: r.get(at + 1)?,
        size: r.get::<_, i64>(at + 2)? as u64,
        id: ObjectId(id.try_into().unwrap_or([0; 32])),
    }))
}

const CHANGE_COLS: &str = "c.epoch, c.pos, c.path, c.pre_kind, c.pre_mode, c.pre_size, c.pre_id,
    c.post_kind, c.post_mode, c.post_size, c.post_id, c.pending";

fn change_row(r: &Row) -> rusqlite::Result<ChangeRow> {
    Ok(ChangeRow {
        epoch: r.get(0)?,
        pos: r.get(1)?,
        change: Change {
            path: r.get(2)?,
            before: entry_at(r, 3)?,
            after: entry_at(r, 7)?,
        },
        pending: r.get(11)?,
    })
}

/// The newest change to `path` recorded after `after_pos` (any epoch, any session).
pub fn latest_change(
    db: &Connection,
    path: &[u8],
    after_pos: i64,
) -> Result<Option<ChangeRow>, Error> {
    let newest = "c.path = ?1 AND c.pos > ?2 ORDER BY c.pos DESC LIMIT 1";
    one_change(db, newest, params![path, after_pos])
}

/// The change epoch `epoch` has recorded for `path`, if any.
pub fn epoch_change(db: &Connection, epoch: &str, path: &[u8]) -> Result<Option<ChangeRow>, Error> {
    one_change(db, "c.epoch = ?1 AND c.path = ?2", params![epoch, path])
}

/// The oldest change to `path` recorded after `after_pos` (pending ones included).
pub fn earliest_change(
    db: &Connection,
    path: &[u8],
    after_pos: i64,
) -> Result<Option<ChangeRow>, Error> {
    let oldest = "c.path = ?1 AND c.pos > ?2 ORDER BY c.pos LIMIT 1";
    one_change(db, oldest, params![path, after_pos])
}

/// The first change row matching `filter` (a `WHERE` clause on `changes c`, with its order),
/// if any; the statement is prepared once per process.
fn one_change(
    db: &Connection,
    filter: &str,
    params: impl rusqlite::Params,
) -> Result<Option<ChangeRow>, Error> {
    let sql = format!("SELECT {CHANGE_COLS} FROM changes c WHERE {filter}");
    Ok(db
        .prepare_cached(&sql)?
        .query_row(params, change_row)
        .optional()?)
}

/// Every change recorded after `after_pos`, in op-log order.
pub fn changes_after(db: &Connection, after_pos: i64) -> Result<Vec<ChangeRow>, Error> {
    let sql =
        format!("SELECT {CHANGE_COLS} FROM changes c WHERE c.pos > ?1 ORDER BY c.pos, c.path");
    let mut st = db.prepare_cached(&sql)?;
    let rows = st.query_map([after_pos], change_row)?;
    Ok(rows.collect::<Result<_, _>>()?)
}

/// The changes of one epoch, sorted by path.
pub fn epoch_changes(db: &Connection, epoch: &str) -> Result<Vec<ChangeRow>, Error> {
    let sql = format!("SELECT {CHANGE_COLS} FROM changes c WHERE c.epoch = ?1 ORDER BY c.path");
    let mut st = db.prepare_cached(&sql)?;
    let rows = st.query_map([epoch], change_row)?;
    Ok(rows.collect::<Result<_, _>>()?)
}

/// The changes of a session's settled or aborted epochs after `after_pos`, in op-log order.
pub fn session_changes_after(
    db: &Connection,
    session: &str,
    after_pos: i64,
) -> Result<Vec<ChangeRow>, Error> {
    let sql = format!(
        "SELECT {CHANGE_COLS} FROM changes c JOIN epochs e ON e.id = c.epoch
         WHERE e.session = ?1 AND e.pos > ?2 AND e.state != 'open' AND e.kind != 'external'
         ORDER BY c.pos, c.path"
    );
    let mut st = db.prepare_cached(&sql)?;
    let rows = st.query_map(params![session, after_pos], change_row)?;
    Ok(rows.collect::<Result<_, _>>()?)
}

pub(crate) const EPOCH_COLS: &str =
    "id, pos, session, kind, state, tool, tool_call, message, owner_pid, owner_start,
    paths, pre_root, recovered, note, created_ns, settled_ns, collected_ns";

pub(crate) fn epoch_row(r: &Row) -> rusqlite::Result<EpochRow> {
    let pid: Option<i64> = r.get(8)?;
    let start: Option<i64> = r.get(9)?;
    let paths: Option<Vec<u8>> = r.get(10)?;
    let pre_root: Option<Vec<u8>> = r.get(11)?;
    Ok(EpochRow {
        id: r.get(0)?,
        pos: r.get(1)?,
        session: r.get(2)?,
        kind: EpochKind::parse(&r.get::<_, String>(3)?),
        state: EpochState::parse(&r.get::<_, String>(4)?),
        tool: r.get(5)?,
        tool_call: r.get(6)?,
        message: r.get(7)?,
        owner: match pid {
            Some(pid) => Owner::Process {
                pid: pid as u32,
                start: start.unwrap_or(0) as u64,
            },
            None => Owner::Session,
        },
        paths: paths
            .map(|p| p.split(|b| *b == 0).map(|s| s.to_vec()).collect())
            .unwrap_or_default(),
        pre_root: pre_root.and_then(|v| v.try_into().ok()).map(ObjectId),
        recovered: r.get(12)?,
        note: r.get(13)?,
        created_ns: r.get(14)?,
        settled_ns: r.get(15)?,
        collected_ns: r.get(16)?,
    })
}

/// The epoch with this full id.
pub fn epoch(db: &Connection, id: &str) -> Result<Option<EpochRow>, Error> {
    let sql = format!("SELECT {EPOCH_COLS} FROM epochs WHERE id = ?1");
    Ok(db
        .prepare_cached(&sql)?
        .query_row([id], epoch_row)
        .optional()?)
}

pub(crate) fn open_epochs_sql() -> String {
    format!("SELECT {EPOCH_COLS} FROM epochs WHERE state = 'open' ORDER BY pos")
}

/// Every open epoch of every session, oldest first.
pub fn open_epochs(db: &Connection) -> Result<Vec<EpochRow>, Error> {
    let mut st = db.prepare_cached(&open_epochs_sql())?;
    let rows = st.query_map([], epoch_row)?;
    Ok(rows.collect::<Result<_, _>>()?)
}

/// The session's newest epoch that is not external and not open.
pub fn last_epoch(db: &Connection, session: &str) -> Result<Option<EpochRow>, Error> {
    let sql = format!(
        "SELECT {EPOCH_COLS} FROM epochs WHERE session = ?1 AND state != 'open' AND kind != 'external'
         ORDER BY pos DESC LIMIT 1"
    );
    Ok(db
        .prepare_cached(&sql)?
        .query_row([session], epoch_row)
        .optional()?)
}

/// The SQL of [`epochs`]: with a session, its rows and the external ones (session `""`),
/// found through `epochs_by_session`; without, the newest rows of all. (One statement for both,
/// `?1 IS NULL OR session = ?1`, could use no index: `rewind log` for a session with few epochs
/// read the whole history.)
pub(crate) fn epochs_sql(for_session: bool) -> String {
    if for_session {
        format!(
            "SELECT {EPOCH_COLS} FROM epochs WHERE session IN (?1, '')
             AND (session = ?1 OR kind = 'external') ORDER BY pos DESC LIMIT ?2"
        )
    } else {
        format!("SELECT {EPOCH_COLS} FROM epochs ORDER BY pos DESC LIMIT ?1")
    }
}

/// The newest `limit` epochs of `session` (with the external ones), or of all sessions;
/// newest first.
pub fn epochs(db: &Connection, session: Option<&str>, limit: i64) -> Result<Vec<EpochRow>, Error> {
    let mut st = db.prepare_cached(&epochs_sql(session.is_some()))?;
    let rows = match session {
        Some(s) => st.query_map(params![s, limit], epoch_row)?,
        None => st.query_map(params![limit], epoch_row)?,
    };
    Ok(rows.collect::<Result<_, _>>()?)
}

/// How many paths an epoch changed, and how many of those it met but could not capture.
pub fn change_counts(db: &Connection, epoch: &str) -> Result<(i64, i64), Error> {
    let uncovered = EntryKind::Uncovered as i64;
    Ok(db.prepare_cached("SELECT count(*), coalesce(sum(pre_kind = ?2 OR post_kind = ?2), 0) FROM changes WHERE epoch = ?1")?.query_row(params![epoch, uncovered],
        |r| Ok((r.get(0)?, r.get(1)?)),)?)
}

pub(crate) const CKPT_COLS: &str =
    "id, pos, session, message, parent, label, root, payload, pinned, created_ns, collected_ns";

pub(crate) fn ckpt_row(r: &Row) -> rusqlite::Result<CheckpointRow> {
    let root: Vec<u8> = r.get(6)?;
    Ok(CheckpointRow {
        id: r.get(0)?,
        pos: r.get(1)?,
        session: r.get(2)?,
        message: r.get(3)?,
        parent: r.get(4)?,
        label: r.get(5)?,
        root: ObjectId(root.try_into().unwrap_or([0; 32])),
        payload: r.get(7)?,
        pinned: r.get(8)?,
        created_ns: r.get(9)?,
        collected_ns: r.get(10)?,
    })
}

/// Inserts a checkpoint row as it is (its `pos` already taken with [`next_pos`]).
pub fn insert_checkpoint(db: &Connection, c: &CheckpointRow) -> Result<(), Error> {
    db.prepare_cached("INSERT INTO checkpoints (id, pos, session, message, parent, label, root, payload, pinned, created_ns)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)")?.execute(params![c.id, c.pos, c.session, c.message, c.parent, c.label, c.root.0.to_vec(), c.payload, c.pinned, c.created_ns],)?;
    Ok(())
}

/// The checkpoint with this full id.
pub fn checkpoint(db: &Connection, id: &str) -> Result<Option<CheckpointRow>, Error> {
    let sql = format!("SELECT {CKPT_COLS} FROM checkpoints WHERE id = ?1");
    Ok(db
        .prepare_cached(&sql)?
        .query_row([id], ckpt_row)
        .optional()?)
}

/// The newest checkpoint of `session` bound to conversation message `message`.
pub fn checkpoint_by_message(
    db: &Connection,
    session: &str,
    message: &str,
) -> Result<Option<CheckpointRow>, Error> {
    let sql = format!("SELECT {CKPT_COLS} FROM checkpoints WHERE session = ?1 AND message = ?2 ORDER BY pos DESC LIMIT 1");
    Ok(db
        .query_row(&sql, [session, message], ckpt_row)
        .optional()?)
}

/// The SQL of [`checkpoints`] (see [`epochs_sql`] for why two).
pub(crate) fn checkpoints_sql(for_session: bool) -> String {
    if for_session {
        format!("SELECT {CKPT_COLS} FROM checkpoints WHERE session = ?1 ORDER BY pos DESC LIMIT ?2")
    } else {
        format!("SELECT {CKPT_COLS} FROM checkpoints ORDER BY pos DESC LIMIT ?1")
    }
}

/// The newest `limit` checkpoints of `session`, or of all sessions; newest first.
pub fn checkpoints(
    db: &Connection,
    session: Option<&str>,
    limit: i64,
) -> Result<Vec<CheckpointRow>, Error> {
    let mut st = db.prepare_cached(&checkpoints_sql(session.is_some()))?;
    let rows = match session {
        Some(s) => st.query_map(params![s, limit], ckpt_row)?,
        None => st.query_map(params![limit], ckpt_row)?,
    };
    Ok(rows.collect::<Result<_, _>>()?)
}

pub(crate) const IDS_WITH_PREFIX: &str = "SELECT id, 1 FROM epochs WHERE id >= ?1 AND id < ?2
    UNION ALL SELECT id, 0 FROM checkpoints WHERE id >= ?1 AND id < ?2 LIMIT 10";

/// Ids (epochs and checkpoints) starting with `prefix` (any case), at most 10, each with
/// `true` for an epoch and `false` for a checkpoint.
pub fn ids_with_prefix(db: &Connection, prefix: &str) -> Result<Vec<(String, bool)>, Error> {
    // Ids are lowercase hex. A range over the primary keys (not LIKE, which scans every row of
    // both tables: `epoch end` would slow down as the history grows).
    let low = prefix.to_ascii_lowercase();
    let high = format!("{low}\u{7f}");
    let mut st = db.prepare_cached(IDS_WITH_PREFIX)?;
    let rows = st.query_map([&low, &high], |r| {
        Ok((r.get::<_, String>(0)?, r.get::<_, bool>(1)?))
    })?;
    Ok(rows.collect::<Result<_, _>>()?)
}

/// When the newest whole-tree capture started (ns since the Unix epoch, coarse clock), if any.
pub fn latest_snapshot_ns(db: &Connection) -> Result<Option<i64>, Error> {
    Ok(db
        .prepare_cached("SELECT created_ns FROM snapshots ORDER BY seq DESC LIMIT 1")?
        .query_row([], |r| r.get(0))
        .optional()?)
}

/// The root of the newest whole-tree capture, and its op-log position.
pub fn latest_snapshot(db: &Connection) -> Result<Option<(ObjectId, i64)>, Error> {
    Ok(db
        .query_row(
            "SELECT root, pos FROM snapshots ORDER BY seq DESC LIMIT 1",
            [],
            |r| {
                let root: Vec<u8> = r.get(0)?;
                Ok((ObjectId(root.try_into().unwrap_or([0; 32])), r.get(1)?))
            },
        )
        .optional()?)
}
