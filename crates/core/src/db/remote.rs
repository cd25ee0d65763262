//! The tables of remotes (`docs/format.md`, Remote store), and the op log's export and import.
//!
//! Invariants:
//! - An export covers a closed range of op-log positions `(after, upto]` below every open
//!   epoch and unfinished restore journal: rows in it are final (an open epoch's rows still
//!   change; every later rewrite takes a new position and goes into a later export).
//! - Rows are exported column by column with their names, so an import checks each column
//!   against its own table and refuses a segment it cannot hold (made by a newer rewind)
//!   instead of dropping data.
//! - What these tables say was pushed is a cache: the remote is the truth when they disagree.

use std::collections::{HashMap, HashSet};

use rusqlite::types::{Value, ValueRef};
use rusqlite::{params, Connection, OptionalExtension};
use serde::{Deserialize, Serialize};

use crate::Error;

/// Schema 7: what each remote holds of this workspace, and where a clone came from.
pub(crate) const MIGRATION: &str = "
CREATE TABLE remote_objects (
    remote TEXT NOT NULL, name TEXT NOT NULL, size INTEGER NOT NULL,
    PRIMARY KEY (remote, name)) WITHOUT ROWID;
CREATE TABLE remote_segments (
    remote TEXT NOT NULL, name TEXT NOT NULL, from_pos INTEGER NOT NULL,
    to_pos INTEGER NOT NULL, size INTEGER NOT NULL,
    PRIMARY KEY (remote, name)) WITHOUT ROWID;
CREATE TABLE remote_links (
    remote TEXT PRIMARY KEY, name TEXT NOT NULL, url TEXT NOT NULL, endpoint TEXT,
    region TEXT, history TEXT NOT NULL, pulled_pos INTEGER NOT NULL,
    pulled_ns INTEGER NOT NULL);
";

/// Schema 8: the key file of an encrypted clone origin (its path only), so a pull finds it.
pub(crate) const MIGRATION_KEY_FILE: &str = "ALTER TABLE remote_links ADD COLUMN key_file TEXT;";

/// One table's rows of an op-log segment.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TableRows {
    /// The table (`epochs`, `changes`, `checkpoints`, `snapshots`, `settings`, `sessions`,
    /// `nodes`).
    pub table: String,
    /// Its columns, in the order of every row's values.
    pub columns: Vec<String>,
    /// The rows: JSON null, integers, strings, and `{"hex": …}` for byte strings.
    pub rows: Vec<Vec<serde_json::Value>>,
}

/// The tables an export holds, how each one's rows are chosen, and their order (so the same
/// rows always make the same bytes, and a re-export after an interrupted push the same object):
/// by op-log position, all (sessions: a handful, whose heads move), or the conversation nodes
/// of the range's checkpoints. `seq` of snapshots is local (the importer numbers them anew).
const EXPORTED: &[(&str, &str)] = &[
    ("sessions", "1 ORDER BY id"),
    (
        "nodes",
        "(session, message) IN (SELECT session, message FROM checkpoints WHERE pos > ?1 AND pos <= ?2)
         ORDER BY session, message",
    ),
    ("epochs", "pos > ?1 AND pos <= ?2 ORDER BY pos"),
    ("changes", "pos > ?1 AND pos <= ?2 ORDER BY pos, epoch, path"),
    ("checkpoints", "pos > ?1 AND pos <= ?2 ORDER BY pos"),
    ("snapshots", "pos > ?1 AND pos <= ?2 ORDER BY seq"),
    ("settings", "pos > ?1 AND pos <= ?2 ORDER BY pos"),
];

/// The last op-log position an export may cover now: just below the oldest open epoch and the
/// oldest epoch of an unfinished restore, else the last position handed out.
pub(crate) fn stable_pos(db: &Connection) -> Result<i64, Error> {
    let last = crate::db::oplog::last_pos(db)?;
    let open: Option<i64> = db.query_row(
        "SELECT min(pos) FROM epochs WHERE state = 'open'",
        [],
        |r| r.get(0),
    )?;
    let journal: Option<i64> = db.query_row(
        "SELECT min(e.pos) FROM journal j JOIN epochs e ON e.id = j.epoch
         WHERE j.state IN ('applying', 'rolling-back')",
        [],
        |r| r.get(0),
    )?;
    Ok([Some(last), open.map(|p| p - 1), journal.map(|p| p - 1)]
        .into_iter()
        .flatten()
        .min()
        .unwrap_or(0))
}

fn to_json(v: ValueRef) -> serde_json::Value {
    match v {
        ValueRef::Null => serde_json::Value::Null,
        ValueRef::Integer(i) => i.into(),
        ValueRef::Real(f) => f.into(),
        ValueRef::Text(t) => String::from_utf8_lossy(t).into_owned().into(),
        ValueRef::Blob(b) => serde_json::json!({ "hex": hex::encode(b) }),
    }
}

fn from_json(v: &serde_json::Value) -> Result<Value, String> {
    Ok(match v {
        serde_json::Value::Null => Value::Null,
        serde_json::Value::Bool(b) => Value::Integer(*b as i64),
        serde_json::Value::Number(n) => match n.as_i64() {
            Some(i) => Value::Integer(i),
            None => Value::Real(n.as_f64().ok_or("a number out of range")?),
        },
        serde_json::Value::String(s) => Value::Text(s.clone()),
        serde_json::Value::Object(o) => match o.get("hex").and_then(|h| h.as_str()) {
            Some(h) => Value::Blob(hex::decode(h).map_err(|e| e.to_string())?),
            None => return Err("an object that is not {\"hex\": …}".into()),
        },
        serde_json::Value::Array(_) => return Err("an array where a value belongs".into()),
    })
}

/// The rows of every exported table in `(after, upto]` (see [`EXPORTED`]).
pub(crate) fn export(db: &Connection, after: i64, upto: i64) -> Result<Vec<TableRows>, Error> {
    let mut out = Vec::new();
    for (table, filter) in EXPORTED {
        let sql = format!("SELECT * FROM {table} WHERE {filter}");
        let mut st = db.prepare(&sql)?;
        let names: Vec<String> = st.column_names().map(|s| s.to_string()).collect();
        let keep: Vec<usize> = (0..names.len())
            .filter(|&i| !(*table == "snapshots" && names[i] == "seq"))
            .collect();
        let mut rows = Vec::new();
        let mut q = if filter.contains("?1") {
            st.query(params![after, upto])?
        } else {
            st.query([])?
        };
        while let Some(r) = q.next()? {
            let mut row = Vec::with_capacity(keep.len());
            for &i in &keep {
                row.push(to_json(r.get_ref(i)?));
            }
            rows.push(row);
        }
        if !rows.is_empty() {
            out.push(TableRows {
                table: table.to_string(),
                columns: keep.iter().map(|&i| names[i].clone()).collect(),
                rows,
            });
        }
    }
    Ok(out)
}

fn columns_of(db: &Connection, table: &str) -> Result<HashSet<String>, Error> {
    let mut st = db.prepare(&format!("PRAGMA table_info({table})"))?;
    let rows = st.query_map([], |r| r.get::<_, String>(1))?;
    Ok(rows.collect::<Result<_, _>>()?)
}

/// Writes exported rows into this op log (the caller's transaction): existing rows with the
/// same key are replaced (a later export of a row is the newer one), a session keeps its
/// creation and takes the head, a snapshot already there (same position) is not added twice.
/// Then the position counter is moved past `to_pos`.
pub(crate) fn import(db: &Connection, tables: &[TableRows], to_pos: i64) -> Result<(), Error> {
    let bad = |table: &str, what: String| {
        Error::State(format!(
            "an op-log segment's {table} rows cannot be imported: {what} (was it pushed by a \
             newer rewind? upgrade rewind)"
        ))
    };
    let mut known: HashMap<&str, HashSet<String>> = HashMap::new();
    for t in tables {
        let Some(table) = EXPORTED.iter().map(|(n, _)| *n).find(|n| *n == t.table) else {
            return Err(bad(&t.table, "not a table of the op log".into()));
        };
        if !known.contains_key(table) {
            known.insert(table, columns_of(db, table)?);
        }
        let cols = &known[table];
        if let Some(c) = t.columns.iter().find(|c| !cols.contains(*c) || *c == "seq") {
            return Err(bad(table, format!("unknown column {c}")));
        }
        let names = t.columns.join(", ");
        let marks = (1..=t.columns.len())
            .map(|i| format!("?{i}"))
            .collect::<Vec<_>>()
            .join(", ");
        let sql = match table {
            "sessions" => format!(
                "INSERT INTO sessions ({names}) VALUES ({marks})
                 ON CONFLICT (id) DO UPDATE SET head = excluded.head"
            ),
            "snapshots" => format!("INSERT INTO snapshots ({names}) VALUES ({marks})"),
            _ => format!("INSERT OR REPLACE INTO {table} ({names}) VALUES ({marks})"),
        };
        let pos_at = t.columns.iter().position(|c| c == "pos");
        let mut st = db.prepare(&sql)?;
        for row in &t.rows {
            if row.len() != t.columns.len() {
                return Err(bad(table, "a row of the wrong length".into()));
            }
            let values = row
                .iter()
                .map(from_json)
                .collect::<Result<Vec<Value>, String>>()
                .map_err(|e| bad(table, e))?;
            if table == "snapshots" {
                let pos = pos_at.map(|i| values[i].clone()).unwrap_or(Value::Null);
                let there: Option<i64> = db
                    .query_row("SELECT 1 FROM snapshots WHERE pos = ?1", [pos], |r| {
                        r.get(0)
                    })
                    .optional()?;
                if there.is_some() {
                    continue;
                }
            }
            st.execute(rusqlite::params_from_iter(values))?;
        }
    }
    db.execute(
        "UPDATE core_meta SET value = max(value, ?1 + 1) WHERE key = 'next_pos'",
        [to_pos],
    )?;
    Ok(())
}

/// A segment of the op log's export recorded as in a remote.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SegmentRecord {
    /// Its object name: the BLAKE3 of its bytes, in hex.
    pub name: String,
    /// The op-log positions it covers: `(from_pos, to_pos]`.
    pub from_pos: i64,
    /// See `from_pos`.
    pub to_pos: i64,
    /// Its size in bytes.
    pub size: u64,
}

/// What garbage collection dropped of a history: checkpoints and epochs with the time they
/// were collected. A manifest carries it (the op log's rows are final once exported, and
/// being collected is not a new position), so a clone or pull refuses them as the history's
/// own workspace does.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Collected {
    /// `(id, collected_ns)` of each collected checkpoint, by id.
    pub checkpoints: Vec<(String, i64)>,
    /// `(id, collected_ns)` of each collected epoch, by id.
    pub epochs: Vec<(String, i64)>,
    /// Once anything was collected: the op-log positions of the whole-tree snapshots the
    /// workspace still has (its gc forgets those of collected history, whose trees it drops).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snapshots: Option<Vec<i64>>,
}

impl Collected {
    /// Nothing was collected.
    pub fn is_empty(&self) -> bool {
        self.checkpoints.is_empty() && self.epochs.is_empty()
    }

    /// When checkpoint `id` was collected, if it was.
    pub fn checkpoint(&self, id: &str) -> Option<i64> {
        self.checkpoints
            .binary_search_by(|(c, _)| c.as_str().cmp(id))
            .ok()
            .map(|i| self.checkpoints[i].1)
    }
}

/// Every collected checkpoint and epoch of the op log.
pub(crate) fn collected(db: &Connection) -> Result<Collected, Error> {
    let rows = |sql: &str| -> Result<Vec<(String, i64)>, Error> {
        let mut st = db.prepare(sql)?;
        let out = st
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?
            .collect::<Result<Vec<_>, _>>()?;
        Ok(out)
    };
    let mut c = Collected {
        checkpoints: rows(
            "SELECT id, collected_ns FROM checkpoints WHERE collected_ns IS NOT NULL ORDER BY id",
        )?,
        epochs: rows(
            "SELECT id, collected_ns FROM epochs WHERE collected_ns IS NOT NULL ORDER BY id",
        )?,
        snapshots: None,
    };
    if !c.is_empty() {
        let mut st = db.prepare("SELECT DISTINCT pos FROM snapshots ORDER BY pos")?;
        let kept = st
            .query_map([], |r| r.get(0))?
            .collect::<Result<Vec<i64>, _>>()?;
        c.snapshots = Some(kept);
    }
    Ok(c)
}

/// Marks the checkpoints and epochs of `c` collected (at their times) where they are not yet
/// (rows this op log does not have are skipped), and forgets the snapshots at or before `upto`
/// that the history's workspace no longer has.
pub(crate) fn import_collected(db: &Connection, c: &Collected, upto: i64) -> Result<(), Error> {
    if let Some(kept) = &c.snapshots {
        let kept: HashSet<i64> = kept.iter().copied().collect();
        let mut st = db.prepare("SELECT DISTINCT pos FROM snapshots WHERE pos <= ?1")?;
        let here = st
            .query_map([upto], |r| r.get::<_, i64>(0))?
            .collect::<Result<Vec<i64>, _>>()?;
        for pos in here.into_iter().filter(|p| !kept.contains(p)) {
            db.execute("DELETE FROM snapshots WHERE pos = ?1", [pos])?;
        }
    }
    let checkpoints = c.checkpoints.iter().map(|(id, ns)| (id.as_str(), *ns));
    super::gc::collect_checkpoints(db, checkpoints)?;
    let epochs = c.epochs.iter().map(|(id, ns)| (id.as_str(), *ns));
    super::gc::collect_epochs(db, epochs)
}

/// Where a clone came from: a remote and the history in it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RemoteLink {
    /// The remote's identity (its URL, and endpoint if any): what the other tables key on.
    pub remote: String,
    /// The name it is known by here (`origin` for a clone).
    pub name: String,
    /// Its URL (`s3://bucket/prefix`, `file:///path`).
    pub url: String,
    /// The S3 endpoint, if not AWS's.
    pub endpoint: Option<String>,
    /// The S3 region, if given.
    pub region: Option<String>,
    /// The history (the id of the workspace that pushed it) this workspace follows.
    pub history: String,
    /// The last op-log position imported from it.
    pub pulled_pos: i64,
    /// When it was last pulled (ns since the Unix epoch).
    pub pulled_ns: i64,
    /// The key file of an encrypted remote (its path; never the key), as the clone was given it.
    #[serde(default)]
    pub key_file: Option<String>,
}

/// The objects the remote `remote` is known to hold, with their sizes.
pub(crate) fn known_objects(db: &Connection, remote: &str) -> Result<HashMap<String, u64>, Error> {
    let mut st = db.prepare("SELECT name, size FROM remote_objects WHERE remote = ?1")?;
    let rows = st.query_map([remote], |r| {
        Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)? as u64))
    })?;
    Ok(rows.collect::<Result<_, _>>()?)
}

/// Records that `remote` holds these objects.
pub(crate) fn record_objects(
    db: &Connection,
    remote: &str,
    objects: &[(String, u64)],
) -> Result<(), Error> {
    let mut st = db.prepare_cached(
        "INSERT OR REPLACE INTO remote_objects (remote, name, size) VALUES (?1, ?2, ?3)",
    )?;
    for (name, size) in objects {
        st.execute(params![remote, name, *size as i64])?;
    }
    Ok(())
}

/// Forgets what `remote` was known to hold (it turned out not to).
pub(crate) fn forget_objects(db: &Connection, remote: &str, names: &[String]) -> Result<(), Error> {
    let mut st = db.prepare_cached("DELETE FROM remote_objects WHERE remote = ?1 AND name = ?2")?;
    for n in names {
        st.execute(params![remote, n])?;
    }
    Ok(())
}

/// The op-log segments recorded for `remote`, in op-log order.
pub(crate) fn segments(db: &Connection, remote: &str) -> Result<Vec<SegmentRecord>, Error> {
    let mut st = db.prepare(
        "SELECT name, from_pos, to_pos, size FROM remote_segments WHERE remote = ?1
         ORDER BY from_pos, to_pos",
    )?;
    let rows = st.query_map([remote], |r| {
        Ok(SegmentRecord {
            name: r.get(0)?,
            from_pos: r.get(1)?,
            to_pos: r.get(2)?,
            size: r.get::<_, i64>(3)? as u64,
        })
    })?;
    Ok(rows.collect::<Result<_, _>>()?)
}

/// Records a segment as in `remote`.
pub(crate) fn record_segment(
    db: &Connection,
    remote: &str,
    s: &SegmentRecord,
) -> Result<(), Error> {
    db.execute(
        "INSERT OR REPLACE INTO remote_segments (remote, name, from_pos, to_pos, size)
         VALUES (?1, ?2, ?3, ?4, ?5)",
        params![remote, s.name, s.from_pos, s.to_pos, s.size as i64],
    )?;
    Ok(())
}

/// Forgets segments recorded for `remote` (the remote turned out not to hold one of them).
pub(crate) fn forget_segments(
    db: &Connection,
    remote: &str,
    names: &[String],
) -> Result<(), Error> {
    let mut st =
        db.prepare_cached("DELETE FROM remote_segments WHERE remote = ?1 AND name = ?2")?;
    for n in names {
        st.execute(params![remote, n])?;
    }
    Ok(())
}

/// Whether anything but snapshots was recorded after position `pos` (epochs, changes,
/// checkpoints, settings): history of this workspace's own that a pull must not interleave with.
pub(crate) fn recorded_after(db: &Connection, pos: i64) -> Result<bool, Error> {
    Ok(db.query_row(
        "SELECT EXISTS (SELECT 1 FROM epochs WHERE pos > ?1)
             OR EXISTS (SELECT 1 FROM changes WHERE pos > ?1)
             OR EXISTS (SELECT 1 FROM checkpoints WHERE pos > ?1)
             OR EXISTS (SELECT 1 FROM settings WHERE pos > ?1)",
        [pos],
        |r| r.get(0),
    )?)
}

/// Every remote link (clones' origins).
pub(crate) fn links(db: &Connection) -> Result<Vec<RemoteLink>, Error> {
    let mut st = db.prepare(
        "SELECT remote, name, url, endpoint, region, history, pulled_pos, pulled_ns, key_file
         FROM remote_links ORDER BY name",
    )?;
    let rows = st.query_map([], |r| {
        Ok(RemoteLink {
            remote: r.get(0)?,
            name: r.get(1)?,
            url: r.get(2)?,
            endpoint: r.get(3)?,
            region: r.get(4)?,
            history: r.get(5)?,
            pulled_pos: r.get(6)?,
            pulled_ns: r.get(7)?,
            key_file: r.get(8)?,
        })
    })?;
    Ok(rows.collect::<Result<_, _>>()?)
}

/// Records (or replaces) a link.
pub(crate) fn set_link(db: &Connection, l: &RemoteLink) -> Result<(), Error> {
    db.execute(
        "INSERT OR REPLACE INTO remote_links
         (remote, name, url, endpoint, region, history, pulled_pos, pulled_ns, key_file)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
        params![
            l.remote,
            l.name,
            l.url,
            l.endpoint,
            l.region,
            l.history,
            l.pulled_pos,
            l.pulled_ns,
            l.key_file
        ],
    )?;
    Ok(())
}
