//! A workspace: a canonical root directory with a stable random id, and its state directory
//! `$REWIND_HOME/workspaces/<id>/` (never inside the root).
//!
//! Registration is race-free across processes: the id is published by hard-linking a file at
//! `$REWIND_HOME/roots/<BLAKE3 of the root path>`, which only one process can win. The root's
//! device and inode are recorded and checked on every open, so a directory that was deleted and
//! re-created (or a different one mounted in its place) is never mistaken for the old one.

use std::collections::HashSet;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rewind_store::{EntryKind, FsckReport, ObjectId, Store, StoreConfig, StoreStats};
use rusqlite::Connection;
use serde::{Deserialize, Serialize};

use crate::capture::{self, Capture, CaptureOptions, Uncovered};
use crate::config::Config;
use crate::fsops::RootDir;
use crate::lock::{self, WorkspaceLock};
use crate::restore::{self, Applied, ApplyOptions, RestorePlan};
use crate::scan::Progress;
use crate::state::State;
use crate::{db, relpath, Error};

/// How to open a workspace.
#[derive(Clone, Debug, Default)]
pub struct OpenOptions {
    /// Allow `/` or the home directory as a root, and register anew a root whose directory was
    /// replaced since it was registered.
    pub force: bool,
    /// Override the state directory (`$REWIND_HOME`); `None` uses [`crate::rewind_home`].
    pub home: Option<PathBuf>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
struct Identity {
    id: String,
    root: String,
    root_hex: String,
    dev: u64,
    ino: u64,
    /// Birth time of the root directory where the file system records it: inode numbers are
    /// reused at once on ext4, so dev + inode alone miss a directory deleted and re-created.
    #[serde(default)]
    btime_ns: Option<i64>,
    created_ns: i64,
}

fn birth_ns(meta: &std::fs::Metadata) -> Option<i64> {
    let t = meta.created().ok()?;
    Some(t.duration_since(UNIX_EPOCH).ok()?.as_nanos() as i64)
}

pub struct Workspace {
    root: PathBuf,
    id: String,
    dir: PathBuf,
    config: Config,
    store: Store,
    db: Connection,
    /// Whether this open registered the workspace.
    created: bool,
}

/// A recorded whole-tree snapshot.
#[derive(Clone, Debug, Serialize)]
pub struct Snapshot {
    pub seq: i64,
    #[serde(serialize_with = "crate::serde_id")]
    pub root: ObjectId,
    pub created_ns: i64,
    pub label: String,
}

/// What a restore did (or, for a dry run, would do).
pub struct RestoreOutcome {
    pub plan: RestorePlan,
    pub applied: Option<Applied>,
    /// The snapshot of the workspace taken just before the restore (so it can be undone).
    pub before: ObjectId,
}

#[derive(Clone, Debug, Serialize)]
pub struct Status {
    pub root: String,
    pub id: String,
    pub state_dir: String,
    pub store: StoreStatsView,
    pub snapshots: i64,
    pub last_snapshot: Option<Snapshot>,
    pub uncovered: Vec<Uncovered>,
}

#[derive(Clone, Debug, Serialize)]
pub struct StoreStatsView {
    pub packs: u64,
    pub objects: u64,
    pub pack_bytes: u64,
    pub raw_bytes: u64,
}

impl From<StoreStats> for StoreStatsView {
    fn from(s: StoreStats) -> Self {
        StoreStatsView {
            packs: s.packs,
            objects: s.objects,
            pack_bytes: s.pack_bytes,
            raw_bytes: s.raw_bytes,
        }
    }
}

fn now_ns() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as i64)
        .unwrap_or(0)
}

fn random_id() -> Result<String, Error> {
    let mut buf = [0u8; 16];
    let path = Path::new("/dev/urandom");
    std::io::Read::read_exact(
        &mut std::fs::File::open(path).map_err(|e| Error::Io {
            op: "opening",
            path: path.into(),
            source: e,
        })?,
        &mut buf,
    )
    .map_err(|e| Error::Io {
        op: "reading",
        path: path.into(),
        source: e,
    })?;
    Ok(hex::encode(buf))
}

fn io<'a>(op: &'static str, path: &'a Path) -> impl FnOnce(std::io::Error) -> Error + 'a {
    move |e| Error::Io {
        op,
        path: path.to_path_buf(),
        source: e,
    }
}

impl Workspace {
    /// Opens the workspace rooted at `root`, registering it on first use.
    pub fn open(root: &Path, opts: &OpenOptions) -> Result<Workspace, Error> {
        let root = std::fs::canonicalize(root).map_err(|e| {
            Error::Workspace(format!("cannot use {} as a workspace: {e}", root.display()))
        })?;
        let meta = std::fs::metadata(&root).map_err(io("inspecting", &root))?;
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
        std::fs::create_dir_all(home.join("roots")).map_err(io("creating", &home))?;
        std::fs::create_dir_all(home.join("workspaces")).map_err(io("creating", &home))?;
        let home = std::fs::canonicalize(&home).map_err(io("resolving", &home))?;
        if home.starts_with(&root) {
            return Err(Error::Workspace(format!(
                "the state directory {} is inside the workspace {}; set REWIND_HOME to a directory outside it",
                home.display(),
                root.display()
            )));
        }
        let (id, created) = register(&home, &root, &meta, opts.force)?;
        let dir = home.join("workspaces").join(&id);
        let config = Config::load(&home, Some(&root))?;
        let store = Store::open(
            &dir.join("packs"),
            &dir.join("meta.sqlite"),
            StoreConfig::default(),
        )?;
        let db = db::open(&dir.join("meta.sqlite"))?;
        Ok(Workspace {
            root,
            id,
            dir,
            config,
            store,
            db,
            created,
        })
    }

    /// Whether `root` (canonical) is registered under `home`. Cheap: one file lookup.
    pub fn is_registered(home: &Path, root: &Path) -> bool {
        home.join("roots")
            .join(blake3::hash(root.as_os_str().as_bytes()).to_hex().as_str())
            .is_file()
    }

    pub fn root(&self) -> &Path {
        &self.root
    }
    pub fn id(&self) -> &str {
        &self.id
    }
    pub fn state_dir(&self) -> &Path {
        &self.dir
    }
    pub fn config(&self) -> &Config {
        &self.config
    }
    pub fn store(&self) -> &Store {
        &self.store
    }
    /// Whether this open registered the workspace (first use).
    pub fn created(&self) -> bool {
        self.created
    }

    /// Takes the workspace lock, waiting at most `wait`.
    pub fn lock(&self, wait: Duration, what: &str) -> Result<WorkspaceLock, Error> {
        lock::acquire(&self.dir.join("lock"), wait, what)
    }

    fn state_path(&self) -> PathBuf {
        self.dir.join("state.bin")
    }

    fn capture_options<'a>(
        &self,
        skip: &'a [PathBuf],
        progress: Option<&'a Progress>,
    ) -> CaptureOptions<'a> {
        CaptureOptions {
            ignored: self.config.capture.ignored(),
            max_file_size: self.config.capture.max_file_size(),
            time_budget: self.config.capture.time_budget(),
            skip,
            progress,
        }
    }

    /// Captures the whole workspace (caller holds the lock), records a snapshot labelled
    /// `label`, then saves the stat cache.
    fn capture_locked(
        &self,
        label: &str,
        progress: Option<&Progress>,
    ) -> Result<(Capture, i64), Error> {
        let old = State::load(&self.state_path());
        let skip = [self.dir.clone()];
        let cap = capture::capture(
            &self.root,
            &self.store,
            &old,
            &self.capture_options(&skip, progress),
        )?;
        crate::failpoint::hit("capture-before-record");
        let seq = self.record_snapshot(cap.root, label)?;
        crate::failpoint::hit("capture-before-state");
        if cap.state_changed {
            cap.state.save(&self.state_path())?;
        }
        Ok((cap, seq))
    }

    /// Captures the workspace as a snapshot; returns the capture and the snapshot's sequence
    /// number.
    pub fn snapshot(
        &self,
        label: &str,
        progress: Option<&Progress>,
    ) -> Result<(Capture, i64), Error> {
        let _lock = self.lock(lock::default_wait(), "capture")?;
        self.capture_locked(label, progress)
    }

    fn record_snapshot(&self, root: ObjectId, label: &str) -> Result<i64, Error> {
        self.db.execute(
            "INSERT INTO snapshots (root, created_ns, label) VALUES (?1, ?2, ?3)",
            rusqlite::params![root.0.as_slice(), now_ns(), label],
        )?;
        Ok(self.db.last_insert_rowid())
    }

    pub fn snapshots(&self) -> Result<Vec<Snapshot>, Error> {
        let mut stmt = self
            .db
            .prepare("SELECT seq, root, created_ns, label FROM snapshots ORDER BY seq")?;
        let rows = stmt.query_map([], |r| {
            let root: Vec<u8> = r.get(1)?;
            Ok(Snapshot {
                seq: r.get(0)?,
                root: ObjectId(root.try_into().unwrap_or([0; 32])),
                created_ns: r.get(2)?,
                label: r.get(3)?,
            })
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// Makes the workspace (or the `scope` paths in it) equal to the tree `target`. Captures the
    /// current state first, so what the restore overwrites is kept and can be brought back.
    pub fn restore_tree(
        &self,
        target: ObjectId,
        scope: &[Vec<u8>],
        dry_run: bool,
    ) -> Result<RestoreOutcome, Error> {
        for p in scope {
            relpath::check(p)?;
        }
        let _lock = self.lock(lock::default_wait(), "restore")?;
        let (before, plan) = if dry_run {
            let old = State::load(&self.state_path());
            let skip = [self.dir.clone()];
            let cap = capture::capture(
                &self.root,
                &self.store,
                &old,
                &self.capture_options(&skip, None),
            )?;
            (
                cap.root,
                restore::plan(&self.store, cap.root, target, scope)?,
            )
        } else {
            let (cap, _) = self.capture_locked("before restore", None)?;
            (
                cap.root,
                restore::plan(&self.store, cap.root, target, scope)?,
            )
        };
        if dry_run {
            return Ok(RestoreOutcome {
                plan,
                applied: None,
                before,
            });
        }
        let rootdir = RootDir::open(&self.root).map_err(io("opening", &self.root))?;
        let applied = restore::apply(
            &rootdir,
            &self.store,
            &plan,
            &ApplyOptions { durable: true },
        )?;
        self.capture_locked("restore", None)?;
        Ok(RestoreOutcome {
            plan,
            applied: Some(applied),
            before,
        })
    }

    pub fn status(&self) -> Result<Status, Error> {
        let snapshots: i64 = self
            .db
            .query_row("SELECT count(*) FROM snapshots", [], |r| r.get(0))?;
        let last = self.snapshots()?.pop();
        let state = State::load(&self.state_path());
        let mut uncovered = Vec::new();
        for (dir, entries) in &state.dirs {
            for e in entries.iter().filter(|e| e.kind == EntryKind::Uncovered) {
                uncovered.push(Uncovered {
                    path: relpath::join(dir, &e.name),
                    size: e.size,
                    reason: "not captured at the last capture".into(),
                });
            }
        }
        uncovered.sort_by(|a, b| a.path.cmp(&b.path));
        Ok(Status {
            root: self.root.display().to_string(),
            id: self.id.clone(),
            state_dir: self.dir.display().to_string(),
            store: self.store.stats()?.into(),
            snapshots,
            last_snapshot: last,
            uncovered,
        })
    }

    /// Verifies every object, then that every tree reachable from a recorded snapshot is
    /// readable and everything it refers to is present.
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
                        }
                    }
                    EntryKind::Uncovered => {}
                }
            }
        }
        Ok((report, lost))
    }
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
        "refusing to use {what} as a workspace: it would capture far more than one project. \
         Run rewind inside the project directory (or pass -C DIR); use `rewind init --force` if you really mean it"
    )))
}

fn register(
    home: &Path,
    root: &Path,
    meta: &std::fs::Metadata,
    force: bool,
) -> Result<(String, bool), Error> {
    let key = blake3::hash(root.as_os_str().as_bytes()).to_hex();
    let pointer = home.join("roots").join(key.as_str());
    if let Ok(id) = std::fs::read_to_string(&pointer) {
        let id = id.trim().to_string();
        let ident_path = home.join("workspaces").join(&id).join("workspace.json");
        let ident: Option<Identity> = std::fs::read(&ident_path)
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok());
        match ident {
            Some(i) if i.dev == meta.dev() && i.ino == meta.ino() && i.btime_ns == birth_ns(meta) => {
                return Ok((id, false))
            }
            Some(_) if !force => {
                return Err(Error::Workspace(format!(
                    "{} is not the directory that was registered as workspace {id}: it was replaced \
                     or moved in since. Run `rewind init --force` to register it anew (the old history \
                     stays in {})",
                    root.display(),
                    home.join("workspaces").join(&id).display()
                )))
            }
            // Damaged registration, or forced: register anew below.
            _ => {}
        }
    }
    let id = random_id()?;
    let dir = home.join("workspaces").join(&id);
    std::fs::create_dir_all(&dir).map_err(io("creating", &dir))?;
    let ident = Identity {
        id: id.clone(),
        root: root.display().to_string(),
        root_hex: hex::encode(root.as_os_str().as_bytes()),
        dev: meta.dev(),
        ino: meta.ino(),
        btime_ns: birth_ns(meta),
        created_ns: now_ns(),
    };
    let ident_path = dir.join("workspace.json");
    std::fs::write(
        &ident_path,
        serde_json::to_vec_pretty(&ident).expect("serializable"),
    )
    .map_err(io("writing", &ident_path))?;
    // Publish: write a temp pointer, then hard-link it into place (fails if another process won).
    let tmp = home.join("roots").join(format!("{key}.{id}.tmp"));
    std::fs::write(&tmp, format!("{id}\n")).map_err(io("writing", &tmp))?;
    if force {
        std::fs::rename(&tmp, &pointer).map_err(io("registering", &pointer))?;
        return Ok((id, true));
    }
    let linked = std::fs::hard_link(&tmp, &pointer);
    let _ = std::fs::remove_file(&tmp);
    match linked {
        Ok(()) => Ok((id, true)),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            // Lost the race: use the winner's registration.
            let _ = std::fs::remove_dir_all(&dir);
            let id = std::fs::read_to_string(&pointer)
                .map_err(io("reading", &pointer))?
                .trim()
                .to_string();
            Ok((id, false))
        }
        Err(e) => Err(io("registering", &pointer)(e)),
    }
}
