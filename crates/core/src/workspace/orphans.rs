//! Orphaned workspaces: state directories whose root no longer exists. `status` lists them;
//! garbage collection (`gc`) removes those idle longer than the age, whole.
//!
//! The decision is [`reclaimable`], one small function, so that other reasons to keep a state
//! directory (a root that was moved and can be re-linked) combine with it in one place.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Serialize;

use crate::Error;

/// A workspace whose root directory is gone.
#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub struct Orphan {
    /// Its id (the state directory's name).
    pub id: String,
    /// The root it was registered for, which no longer exists.
    pub root: String,
    /// Its state directory.
    pub state_dir: String,
    /// Nanoseconds since anything wrote its state (the newest mtime in it).
    pub idle_ns: i64,
    /// Bytes of its state directory.
    pub bytes: u64,
}

/// Whether an orphan's state may be removed: its root is gone, no directory carrying its
/// identity was found near where it was (it was not moved: see
/// [`super::registry::orphan_state`]), and it has been idle longer than `max_age`. No age
/// given: never.
pub(crate) fn reclaimable(
    root_exists: bool,
    relinkable: bool,
    idle: Duration,
    max_age: Option<Duration>,
) -> bool {
    !root_exists && !relinkable && max_age.is_some_and(|age| idle > age)
}

/// Every registered workspace under `home` whose root is gone, except `except` (an id).
pub(crate) fn find(home: &Path, except: &str) -> Vec<Orphan> {
    let dir = home.join("workspaces");
    let Ok(list) = std::fs::read_dir(&dir) else {
        return Vec::new();
    };
    let now = crate::base::now_ns();
    let mut out = Vec::new();
    for e in list.flatten() {
        let path = e.path();
        let Some(id) = path.file_name().and_then(|n| n.to_str()).map(str::to_owned) else {
            continue;
        };
        if id == except || id.starts_with('.') {
            continue;
        }
        let Some(root) = registered_root(&path) else {
            continue;
        };
        if std::fs::symlink_metadata(&root).is_ok() {
            continue;
        }
        out.push(Orphan {
            id,
            root: root.display().to_string(),
            state_dir: path.display().to_string(),
            idle_ns: (now - newest_mtime_ns(&path)).max(0),
            bytes: dir_bytes(&path),
        });
    }
    out.sort_by(|a, b| a.id.cmp(&b.id));
    out
}

/// The roots of the other workspaces registered under `home` whose root still exists.
pub(crate) fn live_roots(home: &Path, except: &str) -> Vec<PathBuf> {
    let Ok(list) = std::fs::read_dir(home.join("workspaces")) else {
        return Vec::new();
    };
    let mut out: Vec<PathBuf> = list
        .flatten()
        .filter(|e| {
            let name = e.file_name();
            let name = name.to_string_lossy();
            name != except && !name.starts_with('.')
        })
        .filter_map(|e| registered_root(&e.path()))
        .filter(|root| root.is_dir())
        .collect();
    out.sort();
    out
}

/// Removes the orphans [`reclaimable`] allows under `max_age`; returns them. Each is renamed
/// aside first (one atomic step: its id no longer resolves), then its pointer under `roots/`
/// and the directory are removed; a directory left aside by a crash is removed next time. An
/// orphan some process still has locked is left alone.
pub(crate) fn reclaim(
    home: &Path,
    except: &str,
    max_age: Option<Duration>,
    dry_run: bool,
) -> Result<Vec<Orphan>, Error> {
    let workspaces = home.join("workspaces");
    let mut done = Vec::new();
    if !dry_run {
        remove_aside(&workspaces);
    }
    for o in find(home, except) {
        let idle = Duration::from_nanos(o.idle_ns as u64);
        // A moved root (a directory with its identity near where it was) is kept: the next
        // command there re-links it. Only a workspace nothing claims goes.
        let state = super::registry::orphan_state(home, &o.id);
        let unclaimed = matches!(state, Ok(super::registry::OrphanState::Unclaimed));
        if !reclaimable(false, !unclaimed, idle, max_age) {
            continue;
        }
        if dry_run {
            done.push(o);
            continue;
        }
        let dir = PathBuf::from(&o.state_dir);
        let Ok(lock) = std::fs::File::options()
            .read(true)
            .write(true)
            .open(dir.join("lock"))
        else {
            continue;
        };
        if lock.try_lock().is_err() {
            continue;
        }
        let registered = registered_root(&dir);
        let aside = workspaces.join(format!(".reclaimed-{}", o.id));
        std::fs::rename(&dir, &aside).map_err(Error::io("moving aside", &dir))?;
        if let Some(root) = registered {
            use std::os::unix::ffi::OsStrExt;
            let key = blake3::hash(root.as_os_str().as_bytes()).to_hex();
            let pointer = home.join("roots").join(key.as_str());
            if std::fs::read_to_string(&pointer).is_ok_and(|p| p.trim() == o.id) {
                let _ = std::fs::remove_file(&pointer);
            }
        }
        std::fs::remove_dir_all(&aside).map_err(Error::io("removing", &aside))?;
        done.push(o);
    }
    Ok(done)
}

/// Directories a reclaim moved aside and did not finish removing.
fn remove_aside(workspaces: &Path) {
    let Ok(list) = std::fs::read_dir(workspaces) else {
        return;
    };
    for e in list.flatten() {
        if e.file_name().to_string_lossy().starts_with(".reclaimed-") {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
}

/// The root a state directory was registered for, from its `workspace.json` (`root_hex` keeps
/// non-UTF-8 bytes).
fn registered_root(state: &Path) -> Option<PathBuf> {
    use std::os::unix::ffi::OsStringExt;
    let v: serde_json::Value =
        serde_json::from_slice(&std::fs::read(state.join("workspace.json")).ok()?).ok()?;
    if let Some(bytes) = v
        .get("root_hex")
        .and_then(|h| h.as_str())
        .and_then(|h| hex::decode(h).ok())
    {
        return Some(PathBuf::from(std::ffi::OsString::from_vec(bytes)));
    }
    v.get("root").and_then(|r| r.as_str()).map(PathBuf::from)
}

/// The newest modification time of the files directly in `dir` (ns since the Unix epoch).
fn newest_mtime_ns(dir: &Path) -> i64 {
    use std::os::unix::fs::MetadataExt;
    let Ok(list) = std::fs::read_dir(dir) else {
        return 0;
    };
    list.flatten()
        .filter_map(|e| e.metadata().ok())
        .map(|m| m.mtime() * 1_000_000_000 + m.mtime_nsec())
        .max()
        .unwrap_or(0)
}

/// Apparent size of every file under `dir`, in bytes (0 for what cannot be read), except a
/// clone file's: the bytes only it holds (`rewind_store::exclusive_bytes`).
pub(crate) fn dir_bytes(dir: &std::path::Path) -> u64 {
    let Ok(list) = std::fs::read_dir(dir) else {
        return 0;
    };
    let mut total = 0;
    for e in list.flatten() {
        let Ok(meta) = e.metadata() else { continue };
        if meta.is_dir() {
            total += dir_bytes(&e.path());
        } else if e.path().extension().is_some_and(|x| x == "clone") {
            // Cloned content: only the blocks the workspace no longer shares with it.
            total += std::fs::File::open(e.path())
                .map_or(meta.len(), |f| rewind_store::exclusive_bytes(&f));
        } else {
            total += meta.len();
        }
    }
    total
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_gone_roots_idle_past_the_age() {
        let day = Duration::from_secs(86400);
        assert!(reclaimable(false, false, 2 * day, Some(day)));
        assert!(
            !reclaimable(true, false, 2 * day, Some(day)),
            "root still there"
        );
        assert!(
            !reclaimable(false, true, 2 * day, Some(day)),
            "moved: re-linkable"
        );
        assert!(
            !reclaimable(false, false, day / 2, Some(day)),
            "not idle long enough"
        );
        assert!(!reclaimable(false, false, 100 * day, None), "no age: never");
    }
}
