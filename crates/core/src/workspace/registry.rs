//! Every workspace registered in a state directory: listing them, following a workspace whose
//! root was moved or renamed (re-linking), moving one explicitly, forgetting one, and telling
//! whether an orphaned history (its root is gone) could still be re-linked.
//!
//! **Re-linking.** A command run in a directory that is not registered looks for a workspace
//! whose root is gone and whose identity the directory carries (`identity::Record::claims`),
//! and whose last captured tree it still looks like (`identity::looks_like`). If there is one,
//! the workspace is re-linked there, under its lock, in this order: (1) `workspace.json` is
//! rewritten (atomically) with the new root and identity, the old root added to `moved_from`;
//! (2) the pointer `roots/<key of the new root>` is published (hard link, as registration
//! does); (3) the pointers of earlier roots that still name the workspace are removed; (4) the
//! `user.rewind.id` attribute is set on the new root. A crash after (1) leaves a record whose
//! root is the new directory and no pointer: the next command there finishes (2)-(4). Nothing
//! else in the state holds the root path: the op log, the journal, the stat cache and
//! fingerprints hold workspace-relative paths, the lock file names a process.

use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use serde::Serialize;

use super::identity::{self, looks_like, read_mark, root_state, Record, RootState};
use super::lock;
use crate::Error;

/// A registered workspace, as `workspace list` shows it.
#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub struct Registered {
    /// The workspace id (32 hex digits), which names its state directory.
    pub id: String,
    /// The root directory it is registered at.
    pub root: String,
    /// Whether that directory is still there.
    pub root_state: RootState,
    /// Bytes its state directory takes (packs, op log, stat cache).
    pub bytes: u64,
    /// When anything was last recorded in it (the newest modification among its state files),
    /// in nanoseconds since the Unix epoch; `None` if it cannot be told.
    pub last_used_ns: Option<i64>,
    /// Earlier roots it was re-linked from, oldest first.
    pub moved_from: Vec<String>,
}

/// A workspace whose history now follows its root to a new place.
#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub struct Relinked {
    /// The workspace id.
    pub id: String,
    /// The root it was registered at.
    pub from: String,
    /// The root it is registered at now.
    pub to: String,
}

/// A workspace whose state was deleted (or would be, in a dry run).
#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub struct Forgotten {
    /// The workspace id.
    pub id: String,
    /// The root it was registered at.
    pub root: String,
    /// Bytes of state deleted.
    pub bytes: u64,
}

/// Whether a workspace's history still has its directory, for housekeeping (garbage
/// collection reclaims only [`OrphanState::Unclaimed`] histories, and only when idle long).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum OrphanState {
    /// Not an orphan: the root is where it is registered.
    Attached {
        /// Earlier roots it was re-linked from (it moved and was followed).
        moved_from: Vec<String>,
    },
    /// The root is gone, but a directory carrying its identity was found near where it was
    /// (see [`orphan_state`]): a command run there re-links it.
    Relinkable {
        /// That directory.
        dir: String,
    },
    /// The root is gone and no directory carrying its identity was found.
    Unclaimed,
}

/// How many directories [`orphan_state`] looks at, at most.
const SEARCH_LIMIT: usize = 4096;

pub(crate) fn ws_dir(home: &Path, id: &str) -> PathBuf {
    home.join("workspaces").join(id)
}

pub(crate) fn pointer(home: &Path, root: &Path) -> PathBuf {
    home.join("roots")
        .join(blake3::hash(root.as_os_str().as_bytes()).to_hex().as_str())
}

fn is_id(name: &str) -> bool {
    name.len() == 32 && name.bytes().all(|b| b.is_ascii_hexdigit())
}

/// Every registration record in `home`, in id order (unreadable ones are skipped).
pub(crate) fn records(home: &Path) -> Vec<Record> {
    let Ok(rd) = std::fs::read_dir(home.join("workspaces")) else {
        return Vec::new();
    };
    let mut out: Vec<Record> = rd
        .flatten()
        .filter(|e| e.file_name().to_str().is_some_and(is_id))
        .filter_map(|e| Record::load(&e.path()))
        .collect();
    out.sort_by(|a, b| a.id.cmp(&b.id));
    out
}

/// What [`publish`] found.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Published {
    /// This call published the pointer.
    Now,
    /// The pointer named the workspace already.
    Already,
    /// Another workspace holds the root (its id).
    Taken(String),
}

/// Publishes `roots/<key of root>` naming `id` (a hard link: of racing processes, one wins).
pub(crate) fn publish(home: &Path, root: &Path, id: &str) -> Result<Published, Error> {
    let ptr = pointer(home, root);
    let tmp = ptr.with_extension(format!("{id}.tmp"));
    std::fs::write(&tmp, format!("{id}\n")).map_err(Error::io("writing", &tmp))?;
    let linked = std::fs::hard_link(&tmp, &ptr);
    let _ = std::fs::remove_file(&tmp);
    match linked {
        Ok(()) => Ok(Published::Now),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            let other = std::fs::read_to_string(&ptr).map_err(Error::io("reading", &ptr))?;
            match other.trim() {
                other if other == id => Ok(Published::Already),
                other => Ok(Published::Taken(other.to_string())),
            }
        }
        Err(e) => Err(Error::io("registering", &ptr)(e)),
    }
}

/// Removes `roots/<key of root>` if it names `id`.
pub(crate) fn unpublish(home: &Path, root: &Path, id: &str) {
    let ptr = pointer(home, root);
    if std::fs::read_to_string(&ptr).is_ok_and(|s| s.trim() == id) {
        let _ = std::fs::remove_file(&ptr);
    }
}

fn dir_bytes(dir: &Path) -> u64 {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return 0;
    };
    rd.flatten()
        .map(|e| match e.file_type() {
            Ok(t) if t.is_dir() => dir_bytes(&e.path()),
            Ok(_) => e.metadata().map(|m| m.len()).unwrap_or(0),
            Err(_) => 0,
        })
        .sum()
}

fn last_used_ns(dir: &Path) -> Option<i64> {
    [
        "lock",
        "meta.sqlite",
        "meta.sqlite-wal",
        "state.bin",
        "workspace.json",
    ]
    .iter()
    .filter_map(|f| std::fs::metadata(dir.join(f)).ok()?.modified().ok())
    .filter_map(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
    .map(|d| d.as_nanos() as i64)
    .max()
}

fn describe(home: &Path, r: &Record) -> Registered {
    let dir = ws_dir(home, &r.id);
    Registered {
        id: r.id.clone(),
        root: r.root.clone(),
        root_state: root_state(r),
        bytes: dir_bytes(&dir),
        last_used_ns: last_used_ns(&dir),
        moved_from: r.moved_from.iter().map(|m| m.root.clone()).collect(),
    }
}

/// Every workspace registered in state directory `home`, in id order. Reads only.
pub fn registered(home: &Path) -> Vec<Registered> {
    records(home).iter().map(|r| describe(home, r)).collect()
}

/// The registered workspaces whose root is gone (orphaned histories), with their sizes. Reads
/// only; cheaper than [`registered`] when few are orphans.
pub fn orphans(home: &Path) -> Vec<Registered> {
    records(home)
        .iter()
        .filter(|r| root_state(r).is_gone())
        .map(|r| describe(home, r))
        .collect()
}

/// Whether workspace `id` of `home` still has its directory, and if not, whether a directory
/// carrying its identity (and looking like its last captured tree) is near where its root
/// was: below the old root's nearest existing ancestor, as deep as the root was (so a rename
/// of the root or of any of its missing parents is found), looking at no more than 4096
/// directories. Reads only. [`Error::Unknown`] when no such workspace is registered.
pub fn orphan_state(home: &Path, id: &str) -> Result<OrphanState, Error> {
    let rec = Record::load(&ws_dir(home, id))
        .ok_or_else(|| Error::Unknown(format!("no workspace {id} is registered")))?;
    if !root_state(&rec).is_gone() {
        return Ok(OrphanState::Attached {
            moved_from: rec.moved_from.iter().map(|m| m.root.clone()).collect(),
        });
    }
    let root = rec.root_path();
    // The nearest ancestor that is still there, and how many components below it the root was.
    let mut depth = 1;
    let mut base = root.parent();
    while let Some(b) = base {
        if b.is_dir() {
            break;
        }
        depth += 1;
        base = b.parent();
    }
    let Some(base) = base else {
        return Ok(OrphanState::Unclaimed);
    };
    let state_dir = ws_dir(home, id);
    let mut level = vec![base.to_path_buf()];
    let mut seen = 0;
    for d in 1..=depth {
        let mut next = Vec::new();
        for dir in &level {
            let Ok(rd) = std::fs::read_dir(dir) else {
                continue;
            };
            for e in rd.flatten() {
                if !e.file_type().is_ok_and(|t| t.is_dir()) {
                    continue;
                }
                seen += 1;
                if seen > SEARCH_LIMIT {
                    return Ok(OrphanState::Unclaimed);
                }
                let p = e.path();
                if d == depth {
                    let Ok(meta) = std::fs::metadata(&p) else {
                        continue;
                    };
                    if rec.claims(&meta, read_mark(&p).as_deref())
                        && looks_like(&state_dir, &p).looks_alike()
                    {
                        return Ok(OrphanState::Relinkable {
                            dir: p.display().to_string(),
                        });
                    }
                } else {
                    next.push(p);
                }
            }
        }
        level = next;
    }
    Ok(OrphanState::Unclaimed)
}

/// The record of a workspace whose root is gone and that directory `root` (canonical,
/// metadata `meta`) is the moved root of: it carries the workspace's identity and holds most
/// of its last captured tree. Also a record already pointing at `root` whose pointer is
/// missing (a re-link interrupted after its first step). `None` for a copy: a directory
/// carrying the identity of a workspace whose root is still there.
pub(crate) fn find_moved(home: &Path, root: &Path, meta: &std::fs::Metadata) -> Option<Record> {
    let mark = read_mark(root);
    let fits = |r: &Record| {
        if r.root_path() == root {
            return r.claims(meta, mark.as_deref());
        }
        r.claims(meta, mark.as_deref())
            && root_state(r).is_gone()
            && looks_like(&ws_dir(home, &r.id), root).looks_alike()
    };
    if let Some(id) = &mark {
        if let Some(r) = Record::load(&ws_dir(home, id)) {
            return fits(&r).then_some(r);
        }
    }
    records(home).into_iter().find(|r| fits(r))
}

/// Where a command acting from `dir` (canonical) finds its workspace: the nearest registered
/// ancestor of `dir`, or a nearer one that is the moved root of an orphaned workspace (the
/// open re-links it), else `dir` itself. Reads only. Costs one lookup when `dir` is a
/// registered root; below one, an attribute read per level (a moved workspace nested in a
/// registered one is found by its attribute only); with nothing registered above, the
/// registration records too (device and inode).
pub fn locate(home: &Path, dir: &Path) -> PathBuf {
    let ancestors: Vec<&Path> = dir.ancestors().collect();
    let registered = ancestors
        .iter()
        .position(|a| pointer(home, a).is_file())
        .unwrap_or(ancestors.len());
    if registered == 0 {
        return dir.to_path_buf();
    }
    let below = &ancestors[..registered];
    let moved_here = |a: &Path, r: &Record| {
        root_state(r).is_gone() && looks_like(&ws_dir(home, &r.id), a).looks_alike()
    };
    let found = if registered < ancestors.len() {
        below.iter().find(|a| {
            read_mark(a)
                .and_then(|id| Record::load(&ws_dir(home, &id)))
                .is_some_and(|r| moved_here(a, &r))
        })
    } else {
        let orphans: Vec<Record> = records(home)
            .into_iter()
            .filter(|r| root_state(r).is_gone())
            .collect();
        below.iter().filter(|_| !orphans.is_empty()).find(|a| {
            let Ok(meta) = std::fs::metadata(a) else {
                return false;
            };
            let mark = read_mark(a);
            orphans.iter().any(|r| {
                r.claims(&meta, mark.as_deref())
                    && looks_like(&ws_dir(home, &r.id), a).looks_alike()
            })
        })
    };
    match found.or(ancestors.get(registered)) {
        Some(a) => a.to_path_buf(),
        None => dir.to_path_buf(),
    }
}

/// Re-links workspace `id` to `root` (canonical, metadata `meta`), taking its lock: see the
/// module header for the order. `Ok(None)` when it no longer applies (the old root came back,
/// or another workspace took `root` meanwhile; nothing is changed then), or when another
/// process re-linked it while this one waited for the lock (it said so, not this one).
pub(crate) fn relink(
    home: &Path,
    id: &str,
    root: &Path,
    meta: &std::fs::Metadata,
) -> Result<Option<Relinked>, Error> {
    let dir = ws_dir(home, id);
    let _lock = lock::acquire(&dir.join("lock"), lock::default_wait(), "re-link")?;
    relink_locked(home, id, root, meta)
}

fn relink_locked(
    home: &Path,
    id: &str,
    root: &Path,
    meta: &std::fs::Metadata,
) -> Result<Option<Relinked>, Error> {
    let dir = ws_dir(home, id);
    let Some(mut rec) = Record::load(&dir) else {
        return Ok(None);
    };
    let before = rec.clone();
    // Already pointing here: a re-link interrupted after its record was saved. Not so when the
    // directory here is another one than recorded (a copy carrying the mark put in the
    // registered one's place, given the history by `workspace move`): that is re-linked.
    let resumed = rec.root_path() == root && rec.same_dir(meta);
    if !resumed {
        if !root_state(&rec).is_gone() {
            return Ok(None);
        }
        rec.retarget(root, meta);
        rec.save(&dir)?;
        crate::base::failpoint::hit("relink-after-record");
    }
    let published = publish(home, root, id)?;
    if let Published::Taken(_) = published {
        if !resumed {
            before.save(&dir)?;
        }
        return Ok(None);
    }
    for old in rec.earlier_roots() {
        if old != root {
            unpublish(home, &old, id);
        }
    }
    let marked = identity::set_mark(root, id);
    if rec.mark != Some(marked) {
        rec.mark = Some(marked);
        rec.save(&dir)?;
    }
    if resumed && (published == Published::Already || rec.moved_from.is_empty()) {
        // Finished by another process while this one waited for the lock; or a registration
        // (an adoption) interrupted before its pointer, finished here: not a move.
        return Ok(None);
    }
    Ok(Some(Relinked {
        id: id.to_string(),
        from: rec
            .moved_from
            .last()
            .map(|m| m.root.clone())
            .unwrap_or_default(),
        to: rec.root.clone(),
    }))
}

/// `path` made absolute (from the current directory) and canonical as far as it exists: a
/// root that is gone is named by the path it was registered at.
fn absolute(path: &Path) -> PathBuf {
    if let Ok(p) = std::fs::canonicalize(path) {
        return p;
    }
    let abs = std::env::current_dir()
        .map(|d| d.join(path))
        .unwrap_or_else(|_| path.to_path_buf());
    match (abs.parent(), abs.file_name()) {
        (Some(parent), Some(name)) => std::fs::canonicalize(parent)
            .map(|p| p.join(name))
            .unwrap_or(abs),
        _ => abs,
    }
}

/// The record of the workspace registered at `root` (a path, or a workspace id).
pub(crate) fn find_registered(home: &Path, root: &Path) -> Result<Record, Error> {
    if let Some(id) = root.to_str().filter(|s| is_id(s)) {
        if let Some(r) = Record::load(&ws_dir(home, id)) {
            return Ok(r);
        }
    }
    let abs = absolute(root);
    records(home)
        .into_iter()
        .find(|r| r.root_path() == abs)
        .ok_or_else(|| Error::Unknown(format!("no workspace is registered at {}", abs.display())))
}

/// Moves workspace `old` (its registered root, or its id) to directory `new`: when `old` is
/// still there and `new` is not, renames the directory (same file system only) and re-links
/// the history; when `old` is gone and `new` exists, re-links the history to `new` (no
/// likeness check: the caller says it is the same project). Refuses when both exist (`new` is
/// then another directory, such as a copy) and when `new` is another workspace's root.
pub fn move_workspace(home: &Path, old: &Path, new: &Path) -> Result<Relinked, Error> {
    let rec = find_registered(home, old)?;
    let dir = ws_dir(home, &rec.id);
    let _lock = lock::acquire(&dir.join("lock"), lock::default_wait(), "workspace move")?;
    let new_abs = absolute(new);
    let old_root = rec.root_path();
    // Every check before the directory is renamed.
    let state_home = std::fs::canonicalize(home).unwrap_or_else(|_| home.to_path_buf());
    if state_home.starts_with(&new_abs) || new_abs.starts_with(&state_home) {
        return Err(Error::Workspace(format!(
            "{} overlaps the state directory {}",
            new_abs.display(),
            state_home.display()
        )));
    }
    if let Ok(other) = std::fs::read_to_string(pointer(home, &new_abs)) {
        let other = other.trim();
        if other != rec.id
            && Record::load(&ws_dir(home, other)).is_some_and(|r| r.root_path() == new_abs)
        {
            return Err(Error::State(format!(
                "{} is the root of another workspace ({other}); forget that one first",
                new_abs.display()
            )));
        }
        // A pointer left by a workspace that moved away since: stale.
        let _ = std::fs::remove_file(pointer(home, &new_abs));
    }
    let present = !root_state(&rec).is_gone();
    match (present, new_abs.exists()) {
        (true, true) => {
            return Err(Error::State(format!(
                "{} and {} both exist: the history stays with {}; a copy starts a history \
                 of its own",
                old_root.display(),
                new_abs.display(),
                old_root.display()
            )))
        }
        (false, false) => {
            return Err(Error::State(format!(
                "{} does not exist (and neither does the registered root {})",
                new_abs.display(),
                old_root.display()
            )))
        }
        (true, false) => std::fs::rename(&old_root, &new_abs).map_err(|e| {
            let what = if e.raw_os_error() == Some(libc::EXDEV) {
                "they are on different file systems: move the directory yourself, then move \
                 the workspace to it"
                    .to_string()
            } else {
                e.to_string()
            };
            Error::Workspace(format!(
                "cannot move {} to {}: {what}",
                old_root.display(),
                new_abs.display()
            ))
        })?,
        (false, true) => {}
    }
    let relinked = (|| {
        let new_root = std::fs::canonicalize(&new_abs).map_err(Error::io("resolving", &new_abs))?;
        let meta = std::fs::metadata(&new_root).map_err(Error::io("inspecting", &new_root))?;
        if !meta.is_dir() {
            return Err(Error::Workspace(format!(
                "{} is not a directory",
                new_root.display()
            )));
        }
        relink_locked(home, &rec.id, &new_root, &meta)?.ok_or_else(|| {
            Error::Workspace(format!(
                "{} was taken by another workspace meanwhile; nothing was moved",
                new_root.display()
            ))
        })
    })();
    if relinked.is_err() && present {
        // Put the directory back where its history says it is.
        let _ = std::fs::rename(&new_abs, &old_root);
    }
    relinked
}

/// Deletes the state of the workspace registered at `target` (a root, gone or not, or a
/// workspace id): its pointers first (so no command opens it any more), its attribute on the
/// root, then its state directory (renamed away, then removed). With `dry_run`, only says what
/// it would delete. Takes the workspace's lock.
pub fn forget(home: &Path, target: &Path, dry_run: bool) -> Result<Forgotten, Error> {
    let rec = find_registered(home, target)?;
    let dir = ws_dir(home, &rec.id);
    let out = Forgotten {
        id: rec.id.clone(),
        root: rec.root.clone(),
        bytes: dir_bytes(&dir),
    };
    if dry_run {
        return Ok(out);
    }
    let lock = lock::acquire(&dir.join("lock"), lock::default_wait(), "workspace forget")?;
    let root = rec.root_path();
    unpublish(home, &root, &rec.id);
    for old in rec.earlier_roots() {
        unpublish(home, &old, &rec.id);
    }
    identity::clear_mark(&root, &rec.id);
    let trash = home.join("workspaces").join(format!(".forget-{}", rec.id));
    std::fs::rename(&dir, &trash).map_err(Error::io("removing", &dir))?;
    drop(lock);
    std::fs::remove_dir_all(&trash).map_err(Error::io("removing", &trash))?;
    Ok(out)
}
