//! Creates that did not finish: `worktree-create/<name>.json` in the parent's state directory,
//! written before `worktree create` makes or fills anything and removed once the worktree's
//! `worktree.json` is written (or its failure cleaned up). A record whose process is gone is the
//! trace of a create killed half-way; every `worktree` command of the parent settles it first:
//! finished if the worktree's `worktree.json` is there, else rolled back (the registration the
//! create made forgotten, the directory removed, or emptied if it was there before).
//!
//! Invariants: only a record of a dead process is acted on (a live create is left alone, and a
//! create of the same name is refused while it runs); the rollback removes only what the create
//! made (a registration that was at the path before is kept); settling takes the parent's lock,
//! so two commands do not roll back the same create.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::link::{self, WorktreeLink};
use crate::db::oplog::Owner;
use crate::workspace::lock;
use crate::workspace::registry::{find_registered, forget, ws_dir};
use crate::workspace::Workspace;
use crate::Error;

/// The directory of the records, in the parent's state directory.
pub(crate) const CREATING_DIR: &str = "worktree-create";

/// A create under way.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct Creating {
    /// The worktree's name.
    pub name: String,
    /// Its root.
    pub path: PathBuf,
    /// Whether the create makes the directory (else it was there, empty).
    pub made: bool,
    /// The workspace registered at `path` before the create, if any: never forgotten by a
    /// rollback.
    pub registered_before: Option<String>,
    /// The creating process: its pid and start time.
    pub pid: u32,
    /// See `pid`.
    pub start: u64,
}

impl Creating {
    fn file(name: &str) -> String {
        format!("{name}.json")
    }

    fn alive(&self) -> bool {
        crate::record::owner_alive(&Owner::Process {
            pid: self.pid,
            start: self.start,
        })
    }

    fn ours(&self) -> bool {
        matches!(crate::record::this_process(), Owner::Process { pid, start }
            if pid == self.pid && start == self.start)
    }

    /// The record of a create of `name` in `parent`'s state directory, if any.
    fn load(parent: &Workspace, name: &str) -> Option<Creating> {
        let b = std::fs::read(parent.state_dir().join(CREATING_DIR).join(Self::file(name))).ok()?;
        serde_json::from_slice(&b).ok()
    }

    /// Writes the record for a create by this process (atomically, synced).
    pub fn begin(
        parent: &Workspace,
        name: &str,
        path: &Path,
        made: bool,
    ) -> Result<Creating, Error> {
        if let Some(other) = Self::load(parent, name).filter(Creating::alive) {
            return Err(Error::State(format!(
                "worktree {name} is being created by process {} right now; wait for it, or pick \
                 another name",
                other.pid
            )));
        }
        let (pid, start) = match crate::record::this_process() {
            Owner::Process { pid, start } => (pid, start),
            Owner::Session => (std::process::id(), 0),
        };
        let c = Creating {
            name: name.to_string(),
            path: path.to_path_buf(),
            made,
            registered_before: find_registered(parent.home(), path).ok().map(|r| r.id),
            pid,
            start,
        };
        let dir = parent.state_dir().join(CREATING_DIR);
        std::fs::create_dir_all(&dir).map_err(Error::io("creating", &dir))?;
        crate::fs::write_json_atomic(&dir, &Self::file(name), &c)?;
        Ok(c)
    }

    /// Removes the record (the create finished, or cleaned up after itself), if it is still
    /// this process's.
    pub fn end(&self, parent: &Workspace) {
        if Self::load(parent, &self.name).is_some_and(|c| c.ours()) {
            let _ = std::fs::remove_file(
                parent
                    .state_dir()
                    .join(CREATING_DIR)
                    .join(Self::file(&self.name)),
            );
        }
    }
}

/// Settles the creates of `parent`'s worktrees that a killed process left half-made: finished
/// or rolled back (see the module's header). Creates still running are left alone.
pub(crate) fn settle(parent: &Workspace) -> Result<(), Error> {
    let dir = parent.state_dir().join(CREATING_DIR);
    let Ok(rd) = std::fs::read_dir(&dir) else {
        return Ok(());
    };
    let names: Vec<String> = rd
        .flatten()
        .filter_map(|e| {
            e.file_name()
                .to_str()
                .and_then(|f| f.strip_suffix(".json"))
                .map(str::to_string)
        })
        .collect();
    let dead: Vec<String> = names
        .into_iter()
        .filter(|n| Creating::load(parent, n).is_some_and(|c| !c.alive()))
        .collect();
    if dead.is_empty() {
        return Ok(());
    }
    let _lock = parent.lock(lock::default_wait(), "worktree create recovery")?;
    for name in dead {
        // Read again under the lock: another command may have settled it meanwhile.
        let Some(c) = Creating::load(parent, &name).filter(|c| !c.alive()) else {
            continue;
        };
        // Names are unique among the parent's worktrees.
        let finished = link::worktrees_of(parent.home(), parent.id())
            .into_iter()
            .any(|w| w.link.name == c.name);
        if !finished {
            roll_back(parent, &c)?;
        }
        let file = dir.join(Creating::file(&name));
        std::fs::remove_file(&file).map_err(Error::io("removing", &file))?;
    }
    Ok(())
}

/// Takes back what a killed create made: the registration at its path (unless it was there
/// before, or is another workspace's worktree), then the directory (emptied if it was there
/// before).
fn roll_back(parent: &Workspace, c: &Creating) -> Result<(), Error> {
    let home = parent.home();
    // Registered as the directory resolves (the path was resolved before it existed).
    let at = std::fs::canonicalize(&c.path).unwrap_or_else(|_| c.path.clone());
    if let Ok(rec) = find_registered(home, &at) {
        let linked = WorktreeLink::load(&ws_dir(home, &rec.id)).is_some();
        if c.registered_before.as_deref() != Some(rec.id.as_str()) && !linked {
            forget(home, Path::new(&rec.id), false)?;
        }
    }
    if c.made {
        if let Err(e) = std::fs::remove_dir_all(&c.path) {
            if e.kind() != std::io::ErrorKind::NotFound {
                return Err(Error::io("removing", &c.path)(e));
            }
        }
    } else if let Ok(rd) = std::fs::read_dir(&c.path) {
        for e in rd.flatten() {
            let p = e.path();
            let r = if e.file_type().is_ok_and(|t| t.is_dir()) {
                std::fs::remove_dir_all(&p)
            } else {
                std::fs::remove_file(&p)
            };
            r.map_err(Error::io("removing", &p))?;
        }
    }
    Ok(())
}
