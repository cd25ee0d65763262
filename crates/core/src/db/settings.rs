//! Settings a user changes for one workspace from a front (`rewind sandbox mode|toggle`, the
//! web UI, the TUI), kept in the op log rather than in a file: each change is a row with its
//! op-log position, so `log` shows who changed what and when, and the current value is the
//! newest row. The state directory is never writable from inside the sandbox, so a sandboxed
//! command cannot change them, and `.rewind.toml` (which an agent can write) cannot either.

use rusqlite::{params, Connection, OptionalExtension, Row};

use crate::Error;

pub(crate) const MIGRATION: &str = "
CREATE TABLE settings (
    pos INTEGER PRIMARY KEY, key TEXT NOT NULL, value TEXT NOT NULL, previous TEXT,
    session TEXT, by_user TEXT, by_pid INTEGER, front TEXT, created_ns INTEGER NOT NULL);
CREATE INDEX settings_by_key ON settings (key, pos);
";

/// The key of the workspace's sandbox mode (`workspace-write`, `read-only`,
/// `danger-full-access`).
pub const SANDBOX_MODE: &str = "sandbox.mode";

/// One change of a setting, as the op log holds it.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, schemars::JsonSchema)]
pub struct SettingRow {
    /// Its op-log position.
    pub pos: i64,
    /// What was set (`sandbox.mode`).
    pub key: String,
    /// The new value.
    pub value: String,
    /// The value that applied before (from configuration when no earlier change was made).
    pub previous: Option<String>,
    /// The session that asked for it, if any.
    pub session: Option<String>,
    /// The user name (or uid) of the process that made it.
    pub by_user: Option<String>,
    /// Its process id.
    pub by_pid: Option<i64>,
    /// The front it came through (`cli`, `web`, `tui`, …).
    pub front: Option<String>,
    /// When, in nanoseconds since the Unix epoch.
    pub created_ns: i64,
}

fn setting_row(r: &Row) -> rusqlite::Result<SettingRow> {
    Ok(SettingRow {
        pos: r.get(0)?,
        key: r.get(1)?,
        value: r.get(2)?,
        previous: r.get(3)?,
        session: r.get(4)?,
        by_user: r.get(5)?,
        by_pid: r.get(6)?,
        front: r.get(7)?,
        created_ns: r.get(8)?,
    })
}

const COLS: &str = "pos, key, value, previous, session, by_user, by_pid, front, created_ns";

/// The newest change of `key`, if it was ever set.
pub fn current(db: &Connection, key: &str) -> Result<Option<SettingRow>, Error> {
    let sql = format!("SELECT {COLS} FROM settings WHERE key = ?1 ORDER BY pos DESC LIMIT 1");
    Ok(db
        .prepare_cached(&sql)?
        .query_row([key], setting_row)
        .optional()?)
}

/// Records a change (its `pos` already taken with `oplog::next_pos`, in the same transaction).
pub fn insert(db: &Connection, s: &SettingRow) -> Result<(), Error> {
    db.prepare_cached(
        "INSERT INTO settings (pos, key, value, previous, session, by_user, by_pid, front, created_ns)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
    )?
    .execute(params![
        s.pos,
        s.key,
        s.value,
        s.previous,
        s.session,
        s.by_user,
        s.by_pid,
        s.front,
        s.created_ns
    ])?;
    Ok(())
}

/// The newest changes, newest first, at most `limit`.
pub fn recent(db: &Connection, limit: i64) -> Result<Vec<SettingRow>, Error> {
    let sql = format!("SELECT {COLS} FROM settings ORDER BY pos DESC LIMIT ?1");
    let mut st = db.prepare_cached(&sql)?;
    let rows = st.query_map([limit], setting_row)?;
    Ok(rows.collect::<Result<_, _>>()?)
}
