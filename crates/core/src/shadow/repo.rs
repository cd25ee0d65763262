//! The shadow repository on disk: `<state dir>/shadow.git`, a bare git repository that only
//! Rewind writes, under `<state dir>/shadow.lock`.
//!
//! Invariants:
//! - It is never inside the workspace and never the user's repository: its path is fixed under
//!   the workspace's state directory. It is opened isolated (no global or system git config,
//!   no environment overrides), and nothing here runs git or a hook.
//! - `shadow.git` appears whole or not at all: it is created as `shadow.git.tmp-<random>` and
//!   renamed into place; a rebuild renames the old one to `shadow.git.old-<random>` first.
//!   Leftovers of either (a process killed half-way) are removed under the lock.
//! - One writer at a time: `shadow.lock` (a kernel lock, released when its holder dies) is
//!   held for every change. A ref lock file (`refs/heads/<name>.lock`) found while holding it
//!   was left by a killed writer and is removed.

use std::path::{Path, PathBuf};

use crate::base::random_hex;
use crate::workspace::lock::{acquire, WorkspaceLock};
use crate::Error;

/// The directory name of the shadow repository inside the state directory.
pub(crate) const DIR: &str = "shadow.git";
/// The lock file every writer of the shadow repository holds.
pub(crate) const LOCK: &str = "shadow.lock";

/// Options that keep the user's and the system's git configuration out.
fn open_options() -> gix::open::Options {
    gix::open::Options::isolated().open_path_as_is(true)
}

/// Takes `shadow.lock`, waiting up to `wait`.
pub(crate) fn lock(state: &Path, wait: std::time::Duration) -> Result<WorkspaceLock, Error> {
    acquire(&state.join(LOCK), wait, "shadow history")
}

/// Opens the shadow repository, `None` when there is none. Hold the lock.
pub(crate) fn open(state: &Path) -> Result<Option<gix::Repository>, Error> {
    let dir = state.join(DIR);
    if !dir.exists() {
        return Ok(None);
    }
    let repo = gix::open_opts(&dir, open_options()).map_err(super::git("opening"))?;
    Ok(Some(repo))
}

/// Creates the shadow repository (whole, by a rename). Hold the lock.
pub(crate) fn create(state: &Path) -> Result<gix::Repository, Error> {
    let tmp = state.join(format!("{DIR}.tmp-{}", random_hex()));
    gix::ThreadSafeRepository::init_opts(
        &tmp,
        gix::create::Kind::Bare,
        gix::create::Options::default(),
        open_options(),
    )
    .map_err(super::git("creating"))?;
    let dir = state.join(DIR);
    std::fs::rename(&tmp, &dir).map_err(Error::io("renaming", &tmp))?;
    gix::open_opts(&dir, open_options()).map_err(super::git("opening"))
}

/// Moves the shadow repository aside and removes it. Hold the lock.
pub(crate) fn remove(state: &Path) -> Result<(), Error> {
    let dir = state.join(DIR);
    if dir.exists() {
        let old = state.join(format!("{DIR}.old-{}", random_hex()));
        std::fs::rename(&dir, &old).map_err(Error::io("renaming", &dir))?;
        std::fs::remove_dir_all(&old).map_err(Error::io("removing", &old))?;
    }
    Ok(())
}

/// Removes what killed writers left: half-made or half-removed repositories beside
/// `shadow.git`, and ref lock files inside it. Hold the lock.
pub(crate) fn clean(state: &Path) -> Result<(), Error> {
    let prefix = format!("{DIR}.");
    for e in std::fs::read_dir(state)
        .map_err(Error::io("listing", state))?
        .flatten()
    {
        let name = e.file_name();
        let name = name.to_string_lossy();
        if name.starts_with(&prefix) && (name.contains(".tmp-") || name.contains(".old-")) {
            let p = e.path();
            std::fs::remove_dir_all(&p).map_err(Error::io("removing", &p))?;
        }
    }
    if let Ok(list) = std::fs::read_dir(state.join(DIR)) {
        for e in list.flatten() {
            if e.file_name().to_string_lossy().starts_with("HEAD.tmp-") {
                let p = e.path();
                std::fs::remove_file(&p).map_err(Error::io("removing", &p))?;
            }
        }
    }
    let heads = state.join(DIR).join("refs").join("heads");
    if let Ok(list) = std::fs::read_dir(&heads) {
        for e in list.flatten() {
            let p: PathBuf = e.path();
            if p.extension().is_some_and(|x| x == "lock") {
                std::fs::remove_file(&p).map_err(Error::io("removing", &p))?;
            }
        }
    }
    Ok(())
}

/// Points `HEAD` at `branch` (a symbolic ref, as `git symbolic-ref` writes it: a temporary
/// file renamed over it), so `git log` without a branch shows the session written last and
/// `HEAD` never names a branch that does not exist. Hold the lock.
pub(crate) fn point_head(git_dir: &Path, branch: &str) -> Result<(), Error> {
    let head = git_dir.join("HEAD");
    let text = format!("ref: {branch}\n");
    if std::fs::read_to_string(&head).is_ok_and(|t| t == text) {
        return Ok(());
    }
    let tmp = git_dir.join(format!("HEAD.tmp-{}", random_hex()));
    std::fs::write(&tmp, text).map_err(Error::io("writing", &tmp))?;
    std::fs::rename(&tmp, &head).map_err(Error::io("renaming", &tmp))
}
