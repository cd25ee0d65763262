//! A workspace: a canonical root directory with a stable random id, and its state directory
//! `$REWIND_HOME/workspaces/<id>/` (never inside the root).
//!
//! Registration is race-free across processes: the id is published by hard-linking a file at
//! `$REWIND_HOME/roots/<BLAKE3 of the root path>`, which only one process can win. The root's
//! identity (`identity`: device, inode, birth time, the `user.rewind.id` attribute) is recorded
//! and checked on every open, so a directory that was deleted and re-created (or a different
//! one mounted in its place) is never mistaken for the old one; and a root that moved is
//! followed (`registry`), a copy given a history of its own or one adopted (`adopt`).

pub mod adopt;
pub mod baseline;
pub(crate) mod home;
pub(crate) mod identity;
pub mod lock;
pub(crate) mod orphans;
pub mod registry;
pub mod server;
pub mod settings;

use std::collections::HashSet;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use rewind_store::{EntryKind, FsckReport, ObjectId, Store, StoreConfig, StoreStats};
use rusqlite::Connection;
use serde::Serialize;

use crate::capture::scan::Progress;
use crate::capture::{Capture, Uncovered};
use crate::config::Config;
use crate::db::oplog;
use crate::fs::relpath;
use crate::model::oplog::Snapshot;
use crate::model::remedy::Remedy;
use crate::{db, Error};
use identity::Record;
use lock::WorkspaceLock;
use registry::Relinked;

/// How to open a workspace.
#[derive(Clone, Debug, Default)]
pub struct OpenOptions {
    /// Allow `/` or the home directory as a root, and register anew a root whose directory was
    /// replaced since it was registered.
    pub force: bool,
    /// Override the state directory (`$REWIND_HOME`); `None` uses [`crate::rewind_home`].
    pub home: Option<PathBuf>,
}

/// An open workspace: its root, its configuration, its store and op log. Every operation of
/// the engine is a method of it. Not `Sync`: it keeps this process's caches and locks in cells.
pub struct Workspace {
    root: PathBuf,
    id: String,
    dir: PathBuf,
    config: Config,
    /// The configuration files as they were just before `config` was read from them.
    config_stamp: ConfigStamp,
    store: Store,
    /// Whether this open registered the workspace.
    created: bool,
    /// The re-link this open made: the root had moved here.
    relinked: Option<Relinked>,
    /// Held while this process runs an opaque epoch (see `record::begin_epoch`).
    pub(crate) opaque: std::cell::RefCell<Option<(String, WorkspaceLock)>>,
    /// The watcher of this process's open opaque epoch, if it could be armed.
    pub(crate) watcher: std::cell::RefCell<Option<(String, crate::capture::watch::Watcher)>>,
    /// A long-running process's watcher (see [`Workspace::use_live_watch`]), and the number of
    /// its take whose capture is not saved yet.
    pub(crate) live: std::cell::RefCell<Option<(crate::capture::watch::LiveWatch, u64)>>,
    /// The stat cache this process last loaded or saved, and which file it matches: an
    /// `exec` captures before and after its command, and the second capture takes the state
    /// the first one left instead of reading it again (see `Workspace::take_state`).
    pub(crate) state_cache: std::cell::RefCell<Option<crate::capture::watch::Kept>>,
    /// Inside [`Workspace::relaxed`]: commits do not flush.
    pub(crate) relaxed: std::cell::Cell<bool>,
    /// Files a background baseline hashed, for its next capture (see [`baseline`]).
    pub(crate) prehashed: std::cell::RefCell<Option<crate::capture::prehash::Prehashed>>,
}

impl Drop for Workspace {
    fn drop(&mut self) {
        // The kept stat cache: one small allocation per file.
        if let Some(kept) = self.state_cache.get_mut().take() {
            crate::base::drop_in_background(kept);
        }
    }
}

/// What `rewind status` shows: the workspace, its store, sessions, and what needs attention.
#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub struct Status {
    /// The canonical root directory.
    pub root: String,
    /// The workspace's id (32 hex digits), which names its state directory.
    pub id: String,
    /// Where its state lives: `$REWIND_HOME/workspaces/<id>`.
    pub state_dir: String,
    /// Sizes of its object store.
    pub store: StoreStatsView,
    /// How many whole-tree captures were recorded.
    pub snapshots: i64,
    /// The newest of them.
    pub last_snapshot: Option<Snapshot>,
    /// Every session with its head, oldest first.
    pub sessions: Vec<SessionHead>,
    /// Epochs still open, of every session, oldest first.
    pub open_epochs: Vec<crate::db::oplog::EpochRow>,
    /// Restores whose journal is not finished (the next command rolls them forward).
    pub unfinished_restores: Vec<String>,
    /// Paths whose content the last capture could not take (from the stat cache): never
    /// restored, never deleted.
    pub uncovered: Vec<Uncovered>,
    /// A baseline still to complete: files a `capture.time_budget` left uncovered, which a
    /// background `rewind baseline` is hashing (or will, at the next command).
    pub baseline: Option<baseline::BaselineProgress>,
    /// The workspace's running server (`rewind serve`), if any: the service fills it in
    /// (the engine does not know servers).
    pub server: Option<server::ServerInfo>,
    /// Other workspaces registered in the same state directory whose root is gone (orphaned
    /// histories), with their sizes.
    pub orphans: Vec<registry::Registered>,
}

/// A session and where its conversation is.
#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub struct SessionHead {
    /// The session's name.
    pub session: String,
    /// The message id of its current conversation node; `None` before its first checkpoint.
    pub head: Option<String>,
}

/// The store's sizes, for JSON.
#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub struct StoreStatsView {
    /// Pack files.
    pub packs: u64,
    /// Objects, packed and kept inline in the index.
    pub objects: u64,
    /// Bytes of pack files on disk.
    pub pack_bytes: u64,
    /// Bytes the objects hold uncompressed.
    pub raw_bytes: u64,
    /// Large files cloned into the state (`capture.reflink`): clone files in place.
    pub clones: u64,
    /// Their length in bytes.
    pub clone_bytes: u64,
    /// Of that, the blocks no workspace file shares with them: what they cost on disk.
    pub clone_own_bytes: u64,
}

impl From<StoreStats> for StoreStatsView {
    fn from(s: StoreStats) -> Self {
        StoreStatsView {
            packs: s.packs,
            objects: s.objects,
            pack_bytes: s.pack_bytes,
            raw_bytes: s.raw_bytes,
            clones: s.clones,
            clone_bytes: s.clone_bytes,
            clone_own_bytes: s.clone_own_bytes,
        }
    }
}

/// The paths under tree `id` whose content is in `bad` (or whose tree cannot be read);
/// trees found clean are remembered in `clean`.
fn damaged_paths(
    store: &Store,
    id: ObjectId,
    dir: &[u8],
    bad: &HashSet<ObjectId>,
    clean: &mut HashSet<ObjectId>,
    out: &mut Vec<Vec<u8>>,
) {
    if id.is_zero() || clean.contains(&id) {
        return;
    }
    let Ok(tree) = store.read_tree(&id) else {
        out.push(dir.to_vec());
        return;
    };
    let before = out.len();
    for e in tree.entries() {
        let path = relpath::join(dir, &e.name);
        match e.kind {
            EntryKind::Dir => damaged_paths(store, e.id, &path, bad, clean, out),
            EntryKind::File | EntryKind::Symlink if bad.contains(&e.id) => out.push(path),
            _ => {}
        }
    }
    if out.len() == before {
        clean.insert(id);
    }
}

/// Looks for an epoch or checkpoint id in the other workspaces under the same state directory;
/// returns that workspace's root.
pub(crate) fn find_in_other_workspaces(ws: &Workspace, id: &str) -> Option<String> {
    if id.len() < 4 || !id.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    let all = ws.dir.parent()?;
    for dir in std::fs::read_dir(all).ok()?.flatten() {
        let path = dir.path();
        if path == ws.dir {
            continue;
        }
        let flags = rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY;
        let Ok(conn) = Connection::open_with_flags(path.join("meta.sqlite"), flags) else {
            continue;
        };
        if let Ok(hits) = crate::db::oplog::ids_with_prefix(&conn, id) {
            if !hits.is_empty() {
                let ident = Record::load(&path);
                return Some(
                    ident
                        .map(|i| i.root)
                        .unwrap_or_else(|| path.display().to_string()),
                );
            }
        }
    }
    None
}

impl Workspace {
    /// Opens the workspace rooted at `root`, registering it on first use.
    pub fn open(root: &Path, opts: &OpenOptions) -> Result<Workspace, Error> {
        let root = std::fs::canonicalize(root).map_err(|e| {
            Error::Workspace(format!("cannot use {} as a workspace: {e}", root.display()))
        })?;
        let meta = std::fs::metadata(&root).map_err(Error::io("inspecting", &root))?;
        if !meta.is_dir() {
            return Err(Error::Workspace(format!(
                "{} is not a directory",
                root.display()
            )));
        }
        refuse_broad_root(&root, opts.force)?;
        let home = match &opts.home {
            Some(h) => h.clone(),
            None => crate::rewind_home()?,
        };
        std::fs::create_dir_all(home.join("roots")).map_err(Error::io("creating", &home))?;
        std::fs::create_dir_all(home.join("workspaces")).map_err(Error::io("creating", &home))?;
        let home = std::fs::canonicalize(&home).map_err(Error::io("resolving", &home))?;
        if home.starts_with(&root) {
            return Err(Error::Workspace(format!(
                "the state directory {} is inside the workspace {}; set REWIND_HOME to a directory outside it",
                home.display(),
                root.display()
            )));
        }
        // Worktrees (`$REWIND_HOME/worktrees/…`) are the one kind of workspace that may live
        // there: that directory holds no state.
        if root.starts_with(&home) && !root.starts_with(home.join(home::WORKTREES_DIR)) {
            return Err(Error::Workspace(format!(
                "{} is inside the state directory {}: Rewind never records or restores its own \
                 state; use a workspace outside it (or set REWIND_HOME elsewhere)",
                root.display(),
                home.display()
            )));
        }
        let (id, created, relinked) = register(&home, &root, &meta, opts.force)?;
        let dir = home.join("workspaces").join(&id);
        if !created && !dir.join("meta.sqlite").exists() {
            // Starting a fresh op log here would show an empty history and record changes
            // against preimages it does not have: the damage is named instead.
            return Err(Error::Unavailable(format!(
                "the op log of this workspace ({}) is missing: its history (checkpoints, epochs, \
                 the index of stored content) is gone. Nothing was changed. To start a new \
                 history, move {} aside (its packs still hold file contents) and register the \
                 workspace again",
                dir.join("meta.sqlite").display(),
                dir.display()
            ))
            .remedy(Remedy::Init { force: false }));
        }
        let config_stamp = config_stamp(&home, &root);
        let config = Config::load(&home, Some(&root))?;
        let store = open_store(&dir, config.capture.reflink())?;
        Ok(Workspace {
            opaque: std::cell::RefCell::new(None),
            watcher: std::cell::RefCell::new(None),
            live: std::cell::RefCell::new(None),
            state_cache: std::cell::RefCell::new(None),
            relaxed: std::cell::Cell::new(false),
            prehashed: Default::default(),
            root,
            id,
            dir,
            config,
            config_stamp,
            store,
            created,
            relinked,
        })
    }

    /// Makes every capture of this handle re-read only what `watch` saw change since the
    /// previous capture (of any handle sharing it), instead of walking the whole tree, and
    /// take what its thread hashed ahead: for a process that keeps the workspace open
    /// (`rewind serve`). See [`LiveWatch`].
    ///
    /// [`LiveWatch`]: crate::capture::watch::LiveWatch
    pub fn use_live_watch(&self, watch: crate::capture::watch::LiveWatch) {
        let max_file_size = self.config.capture.max_file_size();
        watch.hash_ahead(&self.root, max_file_size, self.store().config());
        *self.live.borrow_mut() = Some((watch, 0));
    }

    /// Whether this handle can serve another request as it is, in a process that keeps
    /// handles between requests (`rewind serve`): it holds no open epoch's lock or watcher,
    /// and its configuration files have not changed since it read them. Cheap: two `stat`s.
    pub fn is_reusable(&self) -> bool {
        self.opaque.borrow().is_none()
            && self.watcher.borrow().is_none()
            && config_stamp(self.home(), &self.root) == self.config_stamp
    }

    /// Whether `root` (canonical) is registered under `home`. Cheap: one file lookup.
    pub fn is_registered(home: &Path, root: &Path) -> bool {
        home.join("roots")
            .join(blake3::hash(root.as_os_str().as_bytes()).to_hex().as_str())
            .is_file()
    }

    /// The canonical root directory.
    pub fn root(&self) -> &Path {
        &self.root
    }
    /// The workspace's id (32 hex digits).
    pub fn id(&self) -> &str {
        &self.id
    }
    /// Its state directory, `$REWIND_HOME/workspaces/<id>`.
    pub fn state_dir(&self) -> &Path {
        &self.dir
    }
    /// The configuration it was opened with (user file and `.rewind.toml` merged).
    pub fn config(&self) -> &Config {
        &self.config
    }
    /// Its object store, whose connection also holds the op log.
    pub fn store(&self) -> &Store {
        &self.store
    }
    /// Whether this open registered the workspace (first use).
    pub fn created(&self) -> bool {
        self.created
    }
    /// The re-link this open made, if the root had moved here from where it was registered
    /// (the history follows it; see [`registry`]). Only the open that re-links says so.
    pub fn relinked(&self) -> Option<&Relinked> {
        self.relinked.as_ref()
    }
    /// The state directory holding every workspace's (`$REWIND_HOME`).
    pub fn home(&self) -> &Path {
        self.dir
            .parent()
            .and_then(Path::parent)
            .unwrap_or(&self.dir)
    }

    /// Takes the workspace lock, waiting at most `wait`.
    pub fn lock(&self, wait: Duration, what: &str) -> Result<WorkspaceLock, Error> {
        lock::acquire(&self.dir.join("lock"), wait, what)
    }

    pub(crate) fn state_path(&self) -> PathBuf {
        self.dir.join("state.bin")
    }

    /// The op log's connection: the store's (one connection per process, so one transaction
    /// can hold both the op log's rows and the objects they refer to).
    pub(crate) fn db(&self) -> rewind_store::Db<'_> {
        self.store.db()
    }

    /// The root directory, opened for root-confined file operations.
    pub(crate) fn rootdir(&self) -> Result<crate::fs::root::RootDir, Error> {
        crate::fs::root::RootDir::open(self.root()).map_err(Error::io("opening", self.root()))
    }

    /// Runs `f` in one transaction of the metadata database (see [`db::transaction`]).
    pub(crate) fn transaction<T>(&self, f: impl FnOnce() -> Result<T, Error>) -> Result<T, Error> {
        db::transaction(&self.db(), f)
    }

    /// Runs `f` with commits that do not flush (see [`db::set_durable`]). For commits whose
    /// loss is repaired from the disk (an exact epoch's settle), only ever makes Rewind more
    /// cautious (the guard's fingerprints), or is made durable by the durable commit that
    /// follows (a capture's store commit: `Workspace::capture_before_record`). Nests: an inner
    /// call leaves the outer's setting.
    pub(crate) fn relaxed<T>(&self, f: impl FnOnce() -> Result<T, Error>) -> Result<T, Error> {
        // The connection runs durable (`open_database`) outside these sections.
        if self.relaxed.get() {
            return f();
        }
        db::set_durable(&self.db(), false)?;
        self.relaxed.set(true);
        let r = f();
        self.relaxed.set(false);
        let restore = db::set_durable(&self.db(), true);
        let v = r?;
        restore?;
        Ok(v)
    }

    /// Captures the whole workspace and records it as a snapshot labelled `label`; anything
    /// changed since the last known state is recorded as an external epoch. Returns the capture
    /// (its new stat cache kept in this handle, not in the capture) and the op-log position.
    pub fn snapshot(
        &self,
        label: &str,
        progress: Option<&Progress>,
    ) -> Result<(Capture, i64), Error> {
        let _lock = self.lock(lock::default_wait(), "capture")?;
        // A whole-tree command: the moment to keep the WAL short for the quick ones.
        self.store().checkpoint_wal_on_close();
        self.recover_locked()?;
        let mut found = self.capture_before_record(|| self.capture_found(progress))?;
        crate::base::trace::phase("snapshot: attributed");
        crate::base::failpoint::hit("capture-before-record");
        let pos = self.transaction(|| self.record_found(&found, label, None))?;
        crate::base::trace::phase("snapshot: recorded");
        crate::base::failpoint::hit("capture-before-state");
        self.save_state(&mut found)?;
        crate::base::trace::phase("snapshot: state saved");
        let mut capture = found.capture;
        if let Some(stamp) = found.stamp {
            // Kept, not read again by what this process does next (a background baseline).
            self.keep_state(stamp, std::mem::take(&mut capture.state), false);
        }
        Ok((capture, pos))
    }

    /// Every whole-tree capture, oldest first.
    pub fn snapshots(&self) -> Result<Vec<Snapshot>, Error> {
        db::snapshots::all(&self.db())
    }

    /// A number that changes whenever another connection (another handle, another process)
    /// commits to the workspace's database (SQLite's `data_version`): a poller reads the op
    /// log again only when it did.
    pub fn commits_seen(&self) -> Result<i64, Error> {
        Ok(self
            .db()
            .query_row("PRAGMA data_version", [], |r| r.get(0))?)
    }

    /// The workspace's status. Reads only; takes no lock.
    pub fn status(&self) -> Result<Status, Error> {
        let snapshots = db::snapshots::count(&self.db())?;
        let last = db::snapshots::last(&self.db())?;
        // A server's kept cache, newer than `state.bin` between its writes, without reading
        // the file (8 MB at 100k files).
        let mut uncovered = Vec::new();
        let baseline = self.peek_state(|state| {
            for (dir, entries) in &state.dirs {
                for e in entries.iter().filter(|e| e.kind == EntryKind::Uncovered) {
                    uncovered.push(Uncovered {
                        path: relpath::join(dir, &e.name),
                        size: e.size,
                        reason: "not captured at the last capture".into(),
                    });
                }
            }
            self.baseline_progress(state)
        });
        uncovered.sort_by(|a, b| a.path.cmp(&b.path));
        Ok(Status {
            root: self.root.display().to_string(),
            id: self.id.clone(),
            state_dir: self.dir.display().to_string(),
            store: self.store.stats()?.into(),
            snapshots,
            last_snapshot: last,
            sessions: self
                .sessions()?
                .into_iter()
                .map(|(session, head)| SessionHead { session, head })
                .collect(),
            open_epochs: self.open_epochs()?,
            unfinished_restores: self.unfinished_restores()?,
            uncovered,
            baseline,
            server: None,
            orphans: registry::orphans(self.home()),
        })
    }

    /// Before anything is recorded: every pack the index names is on disk. A capture trusts
    /// the stat cache and the index that a file's content is stored; with a pack gone it would
    /// record changes whose preimages are lost, and say nothing until a restore fails.
    pub(crate) fn check_store(&self) -> Result<(), Error> {
        let gone = self.store.missing_packs()?;
        if gone.is_empty() {
            return Ok(());
        }
        Err(Error::Unavailable(format!(
            "the store is damaged: {} pack file(s) the index lists are missing ({}), and the \
             content in them with them; nothing was recorded. A store check names the \
             checkpoints that lost content (see docs/format.md, \"Damage\")",
            gone.len(),
            gone.join(", ")
        ))
        .remedy(Remedy::Fsck))
    }

    /// Verifies every object, then that every tree reachable from a recorded snapshot or
    /// checkpoint is readable and everything it refers to is present, as is every content a
    /// recorded change names. Returns the store's report and, for a person, what is lost: each
    /// missing object and every checkpoint with paths that cannot be restored. Writes nothing.
    pub fn fsck(&self) -> Result<(FsckReport, Vec<String>), Error> {
        let report = self.store.fsck()?;
        let mut lost = Vec::new();
        let mut seen = HashSet::new();
        let mut stack: Vec<(ObjectId, String)> = Vec::new();
        for s in self.snapshots()? {
            if !s.root.is_zero() {
                stack.push((s.root, format!("snapshot {} ({})", s.seq, s.label)));
            }
        }
        // Collected checkpoints' content is gone by design: not a loss.
        let mut checkpoints = crate::db::oplog::checkpoints(&self.db(), None, i64::MAX)?;
        checkpoints.retain(|c| c.collected_ns.is_none());
        for c in &checkpoints {
            if !c.root.is_zero() {
                stack.push((c.root, format!("checkpoint {}", c.id)));
            }
        }
        // What the store found damaged, to name every checkpoint that lost content to it.
        let mut bad: HashSet<ObjectId> = HashSet::new();
        for p in &report.problems {
            match p {
                rewind_store::FsckProblem::Corrupt { id, .. } => {
                    bad.insert(*id);
                }
                rewind_store::FsckProblem::MissingPack { objects, .. } => bad.extend(objects),
                rewind_store::FsckProblem::UnreadablePack { .. } => {}
            }
        }
        // Every content an epoch recorded must still be there: it is what a rewind writes.
        let db = self.db();
        for (epoch, path, pk, pid, ak, aid) in oplog::all_change_ids(&db)? {
            for (kind, id) in [(pk, pid), (ak, aid)] {
                let is_content = matches!(
                    kind.and_then(|k| EntryKind::from_u8(k as u8)),
                    Some(EntryKind::File | EntryKind::Symlink)
                );
                let Some(id) = id.and_then(|v| <[u8; 32]>::try_from(v).ok()).map(ObjectId) else {
                    continue;
                };
                if is_content && seen.insert(id) && !self.store.has(&id)? {
                    lost.push(format!(
                        "epoch {epoch}/{}: object {id} is missing",
                        relpath::display(&path)
                    ));
                    // The trees below skip what was seen here: the checkpoints holding it are
                    // named from `bad`.
                    bad.insert(id);
                }
            }
        }
        while let Some((id, what)) = stack.pop() {
            if !seen.insert(id) {
                continue;
            }
            let tree = match self.store.read_tree(&id) {
                Ok(t) => t,
                Err(e) => {
                    lost.push(format!("{what}: tree {id}: {e}"));
                    continue;
                }
            };
            for e in tree.entries() {
                let name = format!("{what}/{}", String::from_utf8_lossy(&e.name));
                match e.kind {
                    EntryKind::Dir => stack.push((e.id, name)),
                    EntryKind::File | EntryKind::Symlink => {
                        if seen.insert(e.id) && !self.store.has(&e.id)? {
                            lost.push(format!("{name}: object {} is missing", e.id));
                            bad.insert(e.id);
                        }
                    }
                    EntryKind::Uncovered => {}
                }
            }
        }
        if !bad.is_empty() {
            // Trees known to hold nothing damaged, shared between checkpoints.
            let mut clean = HashSet::new();
            for c in &checkpoints {
                let mut paths = Vec::new();
                damaged_paths(&self.store, c.root, b"", &bad, &mut clean, &mut paths);
                if !paths.is_empty() {
                    // (An empty path: the checkpoint's own tree is lost, and with it every path.)
                    let examples: Vec<String> = paths
                        .iter()
                        .take(3)
                        .map(|p| match p.is_empty() {
                            true => "its whole tree".to_string(),
                            false => relpath::display(p),
                        })
                        .collect();
                    lost.push(format!(
                        "checkpoint {} (message {}): {} path(s) cannot be restored, e.g. {}",
                        c.id,
                        c.message.as_deref().unwrap_or("-"),
                        paths.len(),
                        examples.join(", ")
                    ));
                }
            }
        }
        Ok((report, lost))
    }
}

/// Opens (creating it if needed) the store and op log in state directory `dir`.
/// What identifies the contents of the configuration files of a workspace (the user's and
/// the workspace's): for each, its inode, size and modification time, or nothing if absent.
type ConfigStamp = [Option<(u64, u64, i64, i64)>; 2];

fn config_stamp(home: &Path, root: &Path) -> ConfigStamp {
    use std::os::unix::fs::MetadataExt;
    let one = |p: PathBuf| {
        std::fs::metadata(p)
            .ok()
            .map(|m| (m.ino(), m.size(), m.mtime(), m.mtime_nsec()))
    };
    [
        one(home.join(crate::config::USER_CONFIG)),
        one(root.join(crate::config::WORKSPACE_CONFIG)),
    ]
}

fn open_store(dir: &Path, reflink: crate::config::Reflink) -> Result<Store, Error> {
    let config = StoreConfig {
        clone_from: match reflink {
            crate::config::Reflink::Auto => rewind_store::CLONE_FROM,
            crate::config::Reflink::Never => u64::MAX,
        },
        ..StoreConfig::default()
    };
    let store = Store::open(&dir.join("packs"), &dir.join("meta.sqlite"), config)?;
    db::init(&store.db())?;
    Ok(store)
}

fn refuse_broad_root(root: &Path, force: bool) -> Result<(), Error> {
    if force {
        return Ok(());
    }
    let home = std::env::var_os("HOME").and_then(|h| std::fs::canonicalize(h).ok());
    let what = if root == Path::new("/") {
        "the root directory /"
    } else if home.as_deref() == Some(root) {
        "your home directory"
    } else {
        return Ok(());
    };
    Err(Error::Workspace(format!(
        "refusing to use {what} as a workspace: it would capture far more than one project; \
         use the project directory, or force it if you really mean it"
    ))
    .remedy(Remedy::ProjectDir))
}

/// Registers `root` (canonical, metadata `meta`) under `home`, or finds its registration:
/// the workspace id, whether this call registered it, and the re-link it made when `root` is
/// the moved root of a workspace whose registered root is gone.
fn register(
    home: &Path,
    root: &Path,
    meta: &std::fs::Metadata,
    force: bool,
) -> Result<(String, bool, Option<Relinked>), Error> {
    let pointer = registry::pointer(home, root);
    if let Ok(id) = std::fs::read_to_string(&pointer) {
        let id = id.trim().to_string();
        let dir = registry::ws_dir(home, &id);
        match Record::load(&dir) {
            // A pointer left behind by a workspace that was re-linked elsewhere.
            Some(r) if r.root_path() != root => registry::unpublish(home, root, &id),
            Some(mut r) if r.same_dir(meta) => {
                if r.mark.is_none() {
                    // Registered before roots were marked: mark it now.
                    r.mark = Some(identity::set_mark(root, &id));
                    r.save(&dir)?;
                }
                return Ok((id, false, None));
            }
            Some(_) if !force => {
                // Where the registered directory went, if it is near (a rename).
                let moved = match registry::orphan_state(home, &id) {
                    // The directory here carries the workspace's mark: a copy of it (`cp -a`,
                    // a backup) put in its place. Whether the history goes with it is the
                    // user's call, not a guess.
                    Ok(registry::OrphanState::Relinkable { dir }) if Path::new(&dir) == root => {
                        format!(
                            " It carries that workspace's mark: a copy of the registered \
                             directory, put in its place? To give it the history, run \
                             `rewind workspace move {id} {dir}`."
                        )
                    }
                    Ok(registry::OrphanState::Relinkable { dir }) => format!(
                        " The registered directory seems to be {dir} now: a command run there \
                         takes its history along."
                    ),
                    _ => String::new(),
                };
                return Err(Error::Workspace(format!(
                    "{} is not the directory that was registered as workspace {id}: it was \
                     replaced or moved in since. Registering it anew (forced) starts a new \
                     history; the old history stays in {}.{moved}",
                    root.display(),
                    dir.display()
                ))
                .remedy(Remedy::Init { force: true }));
            }
            // Damaged registration, or forced: register anew below.
            _ => {}
        }
    }
    if !force {
        if let Some(rec) = registry::find_moved(home, root, meta) {
            if let Some(r) = registry::relink(home, &rec.id, root, meta)? {
                return Ok((rec.id, false, Some(r)));
            }
            // Re-linked by another process meanwhile, or the root taken by a registration.
            if let Ok(id) = std::fs::read_to_string(&pointer) {
                return Ok((id.trim().to_string(), false, None));
            }
        }
    }
    let id = crate::base::random_id().map_err(Error::io("reading", "/dev/urandom"))?;
    let dir = registry::ws_dir(home, &id);
    std::fs::create_dir_all(&dir).map_err(Error::io("creating", &dir))?;
    // The op log exists before the record, and the record before the pointer: a process
    // killed half-way leaves a directory nothing points to (no record: ignored), or a record
    // the next command there finishes registering (see `registry`), never a registered
    // workspace without its op log (which opening refuses as a lost history).
    open_store(&dir, crate::config::Reflink::Never)?;
    crate::base::failpoint::hit("register-before-record");
    let mut record = Record::new(&id, root, meta);
    record.save(&dir)?;
    crate::base::failpoint::hit("register-before-pointer");
    // Publish: a hard link fails if another process won the race for this root.
    if force {
        let tmp = pointer.with_extension(format!("{id}.tmp"));
        std::fs::write(&tmp, format!("{id}\n")).map_err(Error::io("writing", &tmp))?;
        std::fs::rename(&tmp, &pointer).map_err(Error::io("registering", &pointer))?;
    } else if let registry::Published::Taken(winner) = registry::publish(home, root, &id)? {
        // Lost the race: use the winner's registration.
        let _ = std::fs::remove_dir_all(&dir);
        return Ok((winner, false, None));
    }
    crate::base::failpoint::hit("register-before-mark");
    // Only the winner marks the root (a copy made with `cp -a` carries the original's mark).
    record.mark = Some(identity::set_mark(root, &id));
    record.save(&dir)?;
    Ok((id, true, None))
}

impl Workspace {
    /// The regular files the last capture left uncovered for being over
    /// `capture.max_file_size`: content Rewind cannot put back, which
    /// `capture.large_files = "protect"` keeps read-only inside the sandbox. Workspace-relative,
    /// sorted.
    pub fn oversize_files(&self) -> Result<Vec<Vec<u8>>, Error> {
        let state = crate::capture::state::State::load(&self.state_path());
        let max = self.config().capture.max_file_size();
        let mut out: Vec<Vec<u8>> = state
            .dirs
            .iter()
            .flat_map(|(dir, entries)| {
                entries
                    .iter()
                    .filter(|e| e.kind == rewind_store::EntryKind::Uncovered && e.size > max)
                    .map(|e| crate::fs::relpath::join(dir, &e.name))
            })
            .collect();
        out.sort();
        Ok(out)
    }
}
