//! What remotes need of a workspace, without any network: the op log's export and import,
//! inline objects sealed into packs, the tables of what a remote holds, and a clone's
//! materialisation (`docs/format.md`, Remote store). The transfer itself is `rewind-remote`'s.
//!
//! Invariants:
//! - An export covers only final rows (below every open epoch and unfinished restore), so a
//!   segment once pushed never needs to change; a later rewrite of a row is in a later one.
//! - An import and the packs it needs arrive under the workspace lock, in one transaction for
//!   the rows: a reader sees all of a pull's history or none of it.
//! - A clone writes into its directory only after every object of the tree it materialises was
//!   read and verified (by the caller, from a staging store); a failure while writing removes
//!   what it wrote, and a failure after registering forgets the registration: a refused or
//!   failed clone leaves the directory as it was.

use std::path::{Path, PathBuf};

use rewind_store::{ObjectId, Store};
use serde::{Deserialize, Serialize};

use crate::base::now_ns;
use crate::db::{self, oplog};
use crate::workspace::lock::{self, WorkspaceLock};
use crate::workspace::{OpenOptions, Workspace};
use crate::worktree::copy;
use crate::Error;

pub use crate::db::remote::{Collected, RemoteLink, SegmentRecord, TableRows};

/// The format name of an op-log segment (`docs/format.md`, Remote store).
pub const SEGMENT_FORMAT: &str = "rewind-oplog-segment";
/// The version of that format this binary writes and reads.
pub const SEGMENT_VERSION: u32 = 1;

/// A piece of the op log's export: every final row recorded in `(from_pos, to_pos]`, with the
/// sessions (their heads) as they were then.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct OplogSegment {
    /// Always [`SEGMENT_FORMAT`].
    pub format: String,
    /// [`SEGMENT_VERSION`] when written.
    pub version: u32,
    /// The workspace whose op log it is (the history's id).
    pub history: String,
    /// The first position it does not cover: rows after it.
    pub from_pos: i64,
    /// The last position it covers.
    pub to_pos: i64,
    /// The rows, table by table.
    pub tables: Vec<TableRows>,
}

impl OplogSegment {
    /// The checkpoints it holds, as `(id, created_ns, root)`.
    pub fn checkpoints(&self) -> Vec<(String, i64, ObjectId)> {
        let mut out = Vec::new();
        for t in self.tables.iter().filter(|t| t.table == "checkpoints") {
            let col = |name: &str| t.columns.iter().position(|c| c == name);
            let (Some(id), Some(created), Some(root)) = (col("id"), col("created_ns"), col("root"))
            else {
                continue;
            };
            for r in &t.rows {
                let root = r[root]
                    .get("hex")
                    .and_then(|h| h.as_str())
                    .and_then(ObjectId::from_hex);
                if let (Some(i), Some(c), Some(root)) = (r[id].as_str(), r[created].as_i64(), root)
                {
                    out.push((i.to_string(), c, root));
                }
            }
        }
        out
    }
}

impl Workspace {
    /// The last op-log position handed out (0 for an empty history).
    pub fn last_pos(&self) -> Result<i64, Error> {
        oplog::last_pos(&self.db())
    }

    /// The export of the rows after position `after` that are final now, or `None` when there
    /// are none (nothing new, or everything new is behind an open epoch).
    pub fn export_oplog(&self, after: i64) -> Result<Option<OplogSegment>, Error> {
        let conn = self.db();
        db::transaction(&conn, || {
            let upto = db::remote::stable_pos(&conn)?;
            if upto <= after {
                return Ok(None);
            }
            let tables = db::remote::export(&conn, after, upto)?;
            Ok(Some(OplogSegment {
                format: SEGMENT_FORMAT.into(),
                version: SEGMENT_VERSION,
                history: self.id().to_string(),
                from_pos: after,
                to_pos: upto,
                tables,
            }))
        })
    }

    /// Moves the objects kept inline in the index into a pack, under the workspace lock (a
    /// remote holds packs only). Returns how many moved.
    pub fn seal_inline(&self) -> Result<u64, Error> {
        let _lock = self.lock(lock::default_wait(), "push")?;
        Ok(self.store().seal_inline()?)
    }

    /// Packs the content of every clone not packed yet (see `rewind_store::Store::pack_clones`),
    /// under the workspace lock: a copy of the store elsewhere needs the bytes, and clone files
    /// stay on this machine. Returns how many were packed.
    pub fn pack_clones(&self) -> Result<u64, Error> {
        let _lock = self.lock(lock::default_wait(), "push")?;
        Ok(self.store().pack_clones()?)
    }

    /// Takes the pack file `src` (downloaded) into the store as pack `name`, verified whole
    /// first (see `rewind_store::Store::import_pack`), under the workspace lock (so gc never
    /// finds it in place but not yet indexed).
    pub fn import_pack(&self, name: &str, src: &Path) -> Result<(), Error> {
        let _lock = self.lock(lock::default_wait(), "pull")?;
        Ok(self.store().import_pack(name, src)?)
    }

    /// Writes `segments` (in order) into the op log in one transaction under the workspace
    /// lock, and moves `link` (if given) to the last one.
    pub fn import_oplog(
        &self,
        segments: &[OplogSegment],
        link: Option<&RemoteLink>,
    ) -> Result<(), Error> {
        let _lock = self.lock(lock::default_wait(), "pull")?;
        self.transaction(|| {
            for s in segments {
                check_segment(s)?;
                db::remote::import(&self.db(), &s.tables, s.to_pos)?;
            }
            if let Some(l) = link {
                db::remote::set_link(&self.db(), l)?;
            }
            Ok(())
        })
    }

    /// What garbage collection has dropped of this history (for a manifest).
    pub fn collected(&self) -> Result<Collected, Error> {
        db::remote::collected(&self.db())
    }

    /// Marks what a remote history's manifest says was collected as collected here too (a
    /// clone or pull of a history its workspace collected), under the workspace lock.
    /// `upto` is the last position the manifest's segments cover.
    pub fn import_collected(&self, c: &Collected, upto: i64) -> Result<(), Error> {
        if c.is_empty() {
            return Ok(());
        }
        let _lock = self.lock(lock::default_wait(), "pull")?;
        self.transaction(|| db::remote::import_collected(&self.db(), c, upto))
    }

    /// The lock one push or pull of this workspace holds at a time (`remote.lock`), so two
    /// never export overlapping segments; waits at most `wait`.
    pub fn remote_lock(&self, wait: std::time::Duration) -> Result<WorkspaceLock, Error> {
        lock::acquire(&self.state_dir().join("remote.lock"), wait, "push or pull")
    }

    /// The objects remote `remote` is known to hold, with their sizes (a cache: the remote
    /// decides when they disagree).
    pub fn remote_objects(
        &self,
        remote: &str,
    ) -> Result<std::collections::HashMap<String, u64>, Error> {
        db::remote::known_objects(&self.db(), remote)
    }

    /// Records that `remote` holds these objects (name, size).
    pub fn record_remote_objects(
        &self,
        remote: &str,
        objects: &[(String, u64)],
    ) -> Result<(), Error> {
        db::remote::record_objects(&self.db(), remote, objects)
    }

    /// Forgets objects `remote` was thought to hold and does not.
    pub fn forget_remote_objects(&self, remote: &str, names: &[String]) -> Result<(), Error> {
        db::remote::forget_objects(&self.db(), remote, names)
    }

    /// The op-log segments `remote` holds of this workspace's history, in order.
    pub fn remote_segments(&self, remote: &str) -> Result<Vec<SegmentRecord>, Error> {
        db::remote::segments(&self.db(), remote)
    }

    /// Records a segment as in `remote`.
    pub fn record_remote_segment(&self, remote: &str, s: &SegmentRecord) -> Result<(), Error> {
        db::remote::record_segment(&self.db(), remote, s)
    }

    /// Forgets segments recorded for `remote` that it does not hold.
    pub fn forget_remote_segments(&self, remote: &str, names: &[String]) -> Result<(), Error> {
        db::remote::forget_segments(&self.db(), remote, names)
    }

    /// Whether this workspace recorded history of its own (epochs, changes, checkpoints,
    /// settings) after position `pos`.
    pub fn recorded_after(&self, pos: i64) -> Result<bool, Error> {
        db::remote::recorded_after(&self.db(), pos)
    }

    /// The remotes this workspace follows (a clone's origin).
    pub fn remote_links(&self) -> Result<Vec<RemoteLink>, Error> {
        db::remote::links(&self.db())
    }
}

fn check_segment(s: &OplogSegment) -> Result<(), Error> {
    if s.format != SEGMENT_FORMAT || s.version != SEGMENT_VERSION || s.to_pos < s.from_pos {
        return Err(Error::State(format!(
            "an op-log segment of history {} has format {} version {}, which this rewind cannot \
             read (upgrade rewind)",
            s.history, s.format, s.version
        )));
    }
    Ok(())
}

/// What [`clone_into`] materialises, from a staging store the caller filled and verified.
pub struct CloneSource<'a> {
    /// The staging store: every object of `tree` is in it, verified.
    pub store: &'a Store,
    /// Its database file (its index is copied into the clone's).
    pub index_db: &'a Path,
    /// Its packs directory (its packs are linked into the clone's).
    pub packs_dir: &'a Path,
    /// The tree to write into the directory.
    pub tree: ObjectId,
    /// The history, in order.
    pub segments: &'a [OplogSegment],
    /// Where it came from; `pulled_pos` is set to the last segment's.
    pub link: RemoteLink,
    /// What the remote is known to hold (name, size), recorded for later pushes.
    pub objects: Vec<(String, u64)>,
    /// The segments as recorded in the remote.
    pub segment_records: Vec<SegmentRecord>,
    /// What the history's workspace collected (its manifest's list).
    pub collected: Collected,
}

/// What a clone did.
#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub struct Cloned {
    /// The new workspace's id.
    pub id: String,
    /// Its root.
    pub root: String,
    /// The tree written (hex).
    pub tree: String,
    /// Regular files written.
    pub files: u64,
    /// Their bytes.
    pub bytes: u64,
}

/// A clone under way into a directory: `$REWIND_HOME/tmp/clone-<BLAKE3 of the directory's
/// path>.json`, written before anything is made in the directory and removed once the clone is
/// done or undone. One left by a dead process is settled by the next clone into the same
/// directory: finished if the history was imported (the link is written with it), else undone
/// (the registration forgotten, what was written removed) so the clone can start over.
#[derive(Serialize, Deserialize)]
struct CloneIntent {
    /// Whether the clone made the directory (else it was given empty).
    made: bool,
    /// The process doing it, and its start time (pids are reused).
    pid: u32,
    start: u64,
}

fn intent_path(home: &Path, dest: &Path) -> PathBuf {
    use std::os::unix::ffi::OsStrExt;
    let key = blake3::hash(dest.as_os_str().as_bytes()).to_hex();
    home.join("tmp").join(format!("clone-{key}.json"))
}

/// Removes what a clone wrote into `dest`: the directory if it made it, else its contents.
fn undo_dir(dest: &Path, made: bool) {
    if made {
        let _ = std::fs::remove_dir_all(dest);
    } else if let Ok(rd) = std::fs::read_dir(dest) {
        for e in rd.flatten() {
            let p = e.path();
            let _ = if e.file_type().is_ok_and(|t| t.is_dir()) {
                std::fs::remove_dir_all(&p)
            } else {
                std::fs::remove_file(&p)
            };
        }
    }
}

/// Settles a clone into `dest` left by a dead process (see [`CloneIntent`]); refuses (busy)
/// while its process still runs.
fn settle_dead_clone(home: &Path, dest: &Path) -> Result<(), Error> {
    let path = intent_path(home, dest);
    let Ok(text) = std::fs::read_to_string(&path) else {
        return Ok(());
    };
    if let Ok(i) = serde_json::from_str::<CloneIntent>(&text) {
        let owner = crate::Owner::Process {
            pid: i.pid,
            start: i.start,
        };
        if crate::record::owner_alive(&owner) && i.pid != std::process::id() {
            return Err(Error::Busy {
                holder: format!("a clone into {} (process {})", dest.display(), i.pid),
            });
        }
        let imported = Workspace::is_registered(home, dest)
            && Workspace::open(
                dest,
                &OpenOptions {
                    force: false,
                    home: Some(home.to_path_buf()),
                },
            )
            .and_then(|ws| ws.remote_links())
            .is_ok_and(|links| !links.is_empty());
        if !imported {
            if Workspace::is_registered(home, dest) {
                let _ = crate::workspace::registry::forget(home, dest, false);
            }
            undo_dir(dest, i.made);
        }
    }
    std::fs::remove_file(&path).map_err(Error::io("removing", &path))
}

/// Checks that `dest` can receive a clone (absolute or made so; an empty directory or absent
/// with an existing parent; not a registered workspace; not inside `home` nor holding it),
/// changing nothing but what a dead clone into it left (see [`CloneIntent`]). Returns the
/// absolute path.
pub fn check_clone_dest(home: &Path, dest: &Path) -> Result<PathBuf, Error> {
    let abs = if dest.is_absolute() {
        dest.to_path_buf()
    } else {
        std::env::current_dir()
            .map_err(Error::io("resolving", dest))?
            .join(dest)
    };
    let parent = abs
        .parent()
        .ok_or_else(|| Error::Usage(format!("{} cannot be cloned into", abs.display())))?;
    let parent = std::fs::canonicalize(parent).map_err(|_| {
        Error::Usage(format!(
            "{} does not exist; create it first, or clone into an existing directory",
            parent.display()
        ))
    })?;
    let name = abs
        .file_name()
        .ok_or_else(|| Error::Usage(format!("{} cannot be cloned into", abs.display())))?;
    let abs = parent.join(name);
    settle_dead_clone(home, &abs)?;
    match crate::fs::Destination::of(&abs)? {
        crate::fs::Destination::NotEmpty => {
            return Err(Error::Usage(format!(
                "{} exists and is not empty; clone into a new or empty directory",
                abs.display()
            )))
        }
        crate::fs::Destination::NotADirectory => {
            return Err(Error::Usage(format!(
                "{} exists and is not a directory; clone into a new or empty directory",
                abs.display()
            )))
        }
        crate::fs::Destination::Absent | crate::fs::Destination::Empty => {}
    }
    let home = std::fs::canonicalize(home).unwrap_or_else(|_| home.to_path_buf());
    if abs.starts_with(&home) || home.starts_with(&abs) {
        return Err(Error::Usage(format!(
            "{} overlaps the state directory {}; clone into a directory outside it",
            abs.display(),
            home.display()
        )));
    }
    if abs.exists() && Workspace::is_registered(&home, &abs) {
        return Err(Error::Usage(format!(
            "{} is a registered workspace already; clone into a new directory",
            abs.display()
        )));
    }
    Ok(abs)
}

/// Materialises `src.tree` into `dest` (see [`check_clone_dest`]) and registers it as a
/// workspace holding `src`'s history: the tree written (directories, files with their modes,
/// symlinks, from the staging store), the directory registered, the staging store's index and
/// packs taken in, the op log imported with a snapshot of the tree after it, the stat cache
/// written, the link recorded. On failure, what was written is removed and the registration
/// forgotten.
pub fn clone_into(home: &Path, dest: &Path, src: CloneSource) -> Result<Cloned, Error> {
    let dest = check_clone_dest(home, dest)?;
    let made = !dest.exists();
    // Recorded before anything is made: a clone killed from here on is undone by the next.
    let intent = intent_path(home, &dest);
    let me = match crate::record::this_process() {
        crate::Owner::Process { pid, start } => CloneIntent { made, pid, start },
        crate::Owner::Session => CloneIntent {
            made,
            pid: std::process::id(),
            start: 0,
        },
    };
    if let Some(dir) = intent.parent() {
        std::fs::create_dir_all(dir).map_err(Error::io("creating", dir))?;
    }
    let text = serde_json::to_vec(&me).map_err(|e| Error::State(e.to_string()))?;
    std::fs::write(&intent, text).map_err(Error::io("writing", &intent))?;
    if made {
        if let Err(e) = std::fs::create_dir(&dest) {
            let _ = std::fs::remove_file(&intent);
            return Err(Error::io("creating", &dest)(e));
        }
    }
    let result = fill_clone(home, &dest, &src);
    if result.is_err() {
        if Workspace::is_registered(home, &dest) {
            let _ = crate::workspace::registry::forget(home, &dest, false);
        }
        undo_dir(&dest, made);
    }
    let _ = std::fs::remove_file(&intent);
    result
}

fn fill_clone(home: &Path, dest: &Path, src: &CloneSource) -> Result<Cloned, Error> {
    let mut made = copy::materialise(src.store, src.tree, None, dest)?;
    crate::trace::phase("clone: tree written");
    crate::base::failpoint::hit("clone-after-materialise");
    let open = OpenOptions {
        force: false,
        home: Some(home.to_path_buf()),
    };
    let ws = Workspace::open(dest, &open)?;
    if !ws.created() {
        return Err(Error::Workspace(format!(
            "{} was registered by another process meanwhile; clone into a new directory",
            dest.display()
        )));
    }
    {
        let _lock = ws.lock(lock::default_wait(), "clone")?;
        db::copy_store_index(&ws.db(), src.index_db)?;
        rewind_store::link_store_files(src.packs_dir, &ws.state_dir().join("packs"))?;
    }
    drop(ws);
    crate::trace::phase("clone: registered, store index and packs taken in");
    // Reopened: the store reads the index it now has.
    let ws = Workspace::open(dest, &open)?;
    let mut link = src.link.clone();
    link.pulled_pos = src.segments.last().map_or(0, |s| s.to_pos);
    link.pulled_ns = now_ns();
    ws.import_oplog(src.segments, Some(&link))?;
    let pos = ws.transaction(|| {
        db::remote::record_objects(&ws.db(), &link.remote, &src.objects)?;
        db::remote::import_collected(&ws.db(), &src.collected, link.pulled_pos)?;
        for s in &src.segment_records {
            db::remote::record_segment(&ws.db(), &link.remote, s)?;
        }
        let pos = oplog::next_pos(&ws.db())?;
        db::snapshots::insert(&ws.db(), &src.tree, now_ns(), "clone", pos)?;
        Ok(pos)
    })?;
    crate::trace::phase("clone: history imported");
    made.state.pos = pos;
    made.state.save(&ws.state_path())?;
    crate::trace::phase("clone: stat cache saved");
    Ok(Cloned {
        id: ws.id().to_string(),
        root: dest.display().to_string(),
        tree: src.tree.to_hex(),
        files: made.files,
        bytes: made.bytes,
    })
}
