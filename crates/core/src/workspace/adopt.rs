//! Adopting a workspace's history for another directory: a copy (`cp -r`) of a project gets a
//! history of its own, empty; `adopt` starts it instead from a copy of the original's history
//! (op log, sessions, checkpoints, stored content), so restores of the original's checkpoints
//! work in the copy. The original is not changed.
//!
//! Order: the new state directory gets the op log (a consistent copy of `meta.sqlite`), the
//! packs (hard links: packs are never modified once complete; copied where links fail) and
//! the stat cache; then its `workspace.json`; then the pointer is published and the root
//! marked. A crash before the record leaves a directory without a record (listed by nothing,
//! garbage); after it, the next command in the directory finishes the registration.

use std::path::Path;

use serde::Serialize;

use super::identity::{self, Record};
use super::lock;
use super::registry::{self, find_registered, pointer, publish, ws_dir, Published};
use crate::db;
use crate::Error;

/// A history started from another workspace's.
#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub struct Adopted {
    /// The new workspace's id.
    pub id: String,
    /// Its root.
    pub root: String,
    /// The workspace whose history it started from.
    pub from_id: String,
    /// That workspace's root.
    pub from_root: String,
}

/// Registers directory `dir` as a new workspace whose history is a copy of the history of
/// the workspace registered at `from` (a root, gone or not, or an id). Refuses a `dir` that
/// is `from`'s own root, overlaps the state directory or is registered already (forget that
/// registration first), and a source with an unfinished restore or an open epoch (finish it
/// first: a copy would finish it in `dir`). Takes the source's lock while copying.
pub fn adopt(home: &Path, from: &Path, dir: &Path) -> Result<Adopted, Error> {
    let src = find_registered(home, from)?;
    let root = std::fs::canonicalize(dir).map_err(Error::io("resolving", dir))?;
    let meta = std::fs::metadata(&root).map_err(Error::io("inspecting", &root))?;
    if !meta.is_dir() {
        return Err(Error::Workspace(format!(
            "{} is not a directory",
            root.display()
        )));
    }
    if root == src.root_path() {
        return Err(Error::State(format!(
            "{} is the root of workspace {} itself",
            root.display(),
            src.id
        )));
    }
    if home.starts_with(&root) || root.starts_with(home) {
        return Err(Error::Workspace(format!(
            "{} overlaps the state directory {}",
            root.display(),
            home.display()
        )));
    }
    if let Ok(other) = std::fs::read_to_string(pointer(home, &root)) {
        let other = other.trim();
        if Record::load(&ws_dir(home, other)).is_some_and(|r| r.root_path() == root) {
            return Err(Error::State(format!(
                "{} is registered as workspace {other} already; forget it first to start it \
                 from another history",
                root.display()
            )));
        }
        // A pointer left by a workspace that moved away since: stale.
        registry::unpublish(home, &root, other);
    }
    let sdir = ws_dir(home, &src.id);
    let _lock = lock::acquire(&sdir.join("lock"), lock::default_wait(), "workspace adopt")?;
    let flags = rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY;
    let conn = rusqlite::Connection::open_with_flags(sdir.join("meta.sqlite"), flags)?;
    let unfinished = db::journal::in_state(&conn, db::journal::JournalState::Applying)?.len()
        + db::journal::in_state(&conn, db::journal::JournalState::RollingBack)?.len()
        + db::oplog::open_epochs(&conn)?.len();
    if unfinished > 0 {
        return Err(Error::Workspace(format!(
            "workspace {} has {unfinished} unfinished restore(s) or open epoch(s); finish them \
             in {} first (recover, or end the epochs)",
            src.id, src.root
        )));
    }
    let id = crate::base::random_id().map_err(Error::io("reading", "/dev/urandom"))?;
    let ndir = ws_dir(home, &id);
    std::fs::create_dir_all(&ndir).map_err(Error::io("creating", &ndir))?;
    let copied = (|| {
        db::copy_into(&conn, &ndir.join("meta.sqlite"))?;
        rewind_store::link_store_files(&sdir.join("packs"), &ndir.join("packs"))?;
        if sdir.join("state.bin").exists() {
            std::fs::copy(sdir.join("state.bin"), ndir.join("state.bin"))
                .map_err(Error::io("copying", sdir.join("state.bin")))?;
        }
        let mut rec = Record::new(&id, &root, &meta);
        rec.save(&ndir)?;
        match publish(home, &root, &id)? {
            Published::Taken(other) => Err(Error::Workspace(format!(
                "{} was registered as workspace {other} meanwhile; nothing was adopted",
                root.display()
            ))),
            _ => {
                rec.mark = Some(identity::set_mark(&root, &id));
                rec.save(&ndir)
            }
        }
    })();
    if let Err(e) = copied {
        let _ = std::fs::remove_dir_all(&ndir);
        return Err(e);
    }
    Ok(Adopted {
        id,
        root: root.display().to_string(),
        from_id: src.id.clone(),
        from_root: src.root.clone(),
    })
}
