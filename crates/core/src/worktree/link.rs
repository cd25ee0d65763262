//! The link between a worktree and the workspace it was made from: `worktree.json` in the
//! worktree's own state directory (`$REWIND_HOME/workspaces/<worktree id>/`).
//!
//! Invariants: a worktree is an ordinary registered workspace plus this record; the record is
//! written last when a worktree is created (so a record always names a complete copy with its
//! op log and stat cache), and it is the only place that says which workspace is the parent and
//! which tree the copy started from (`base`, a tree of the parent's store that the parent's gc
//! keeps). A parent finds its worktrees by reading the records of every registered workspace;
//! names are unique per parent.

use std::path::{Path, PathBuf};

use rewind_store::ObjectId;
use serde::{Deserialize, Serialize};

use crate::workspace::identity::Record;
use crate::workspace::registry::{records, ws_dir};
use crate::Error;

/// The record's file name in the worktree's state directory.
pub(crate) const LINK_FILE: &str = "worktree.json";

pub use crate::workspace::home::WORKTREES_DIR;

/// A worktree's link to its parent, as recorded in `worktree.json`.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct WorktreeLink {
    /// The worktree's name, unique among its parent's worktrees.
    pub name: String,
    /// The parent workspace's id.
    pub parent: String,
    /// The tree the copy started from (and, after a merge, the tree merged last), hex; the
    /// parent's store holds it.
    pub base: String,
    /// The checkpoint the copy was made from (`--from`), if any.
    pub from: Option<String>,
    /// When it was created, ns since the Unix epoch.
    pub created_ns: i64,
    /// A merge into the parent under way when the record was written: its tree becomes `base`
    /// if the parent's op log has its restore epoch settled, and is dropped otherwise (see
    /// [`crate::Workspace::merge_worktree`]). Absent (older records) is none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub merging: Option<PendingMerge>,
}

/// A worktree's merge that had begun when its record was last written.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct PendingMerge {
    /// The worktree's tree being merged, hex; the parent's store holds it (copied in under the
    /// parent's lock before the merge's journal).
    pub tree: String,
    /// The id of the parent's restore epoch that records the merge.
    pub epoch: String,
}

impl WorktreeLink {
    /// The base tree's id.
    pub fn base_id(&self) -> Result<ObjectId, Error> {
        ObjectId::from_hex(&self.base).ok_or_else(|| {
            Error::Workspace(format!(
                "worktree {}: its record names a base tree {:?} that is not an id",
                self.name, self.base
            ))
        })
    }

    /// Reads the record of the workspace whose state directory is `dir`, if it is a worktree.
    pub fn load(dir: &Path) -> Option<WorktreeLink> {
        let b = std::fs::read(dir.join(LINK_FILE)).ok()?;
        serde_json::from_slice(&b).ok()
    }

    /// Writes the record atomically (temporary file, fsync, rename, directory fsync).
    pub(crate) fn save(&self, dir: &Path) -> Result<(), Error> {
        crate::fs::write_json_atomic(dir, LINK_FILE, self)
    }
}

/// A worktree found in the state directory: its registration and its link.
#[derive(Clone, Debug)]
pub struct Linked {
    /// The worktree's own registration (id, root).
    pub record: Record,
    /// Its link to the parent.
    pub link: WorktreeLink,
}

impl Linked {
    /// The worktree's root directory.
    pub fn root(&self) -> PathBuf {
        self.record.root_path()
    }
}

/// Every worktree of workspace `parent`, by name.
pub fn worktrees_of(home: &Path, parent: &str) -> Vec<Linked> {
    let mut out: Vec<Linked> = records(home)
        .into_iter()
        .filter_map(|record| {
            let link = WorktreeLink::load(&ws_dir(home, &record.id))?;
            (link.parent == parent).then_some(Linked { record, link })
        })
        .collect();
    out.sort_by(|a, b| a.link.name.cmp(&b.link.name));
    out
}

/// The worktree of `parent` called `name`: an error naming the worktrees there are if none.
pub fn find(home: &Path, parent: &str, name: &str) -> Result<Linked, Error> {
    check_name(name)?;
    let all = worktrees_of(home, parent);
    let names: Vec<String> = all.iter().map(|w| w.link.name.clone()).collect();
    all.into_iter()
        .find(|w| w.link.name == name)
        .ok_or_else(|| {
            Error::Unknown(if names.is_empty() {
                format!("this workspace has no worktree named {name:?} (it has none; make one with `rewind worktree create {name}`)")
            } else {
                format!(
                    "this workspace has no worktree named {name:?}; it has: {}",
                    names.join(", ")
                )
            })
        })
}

/// A worktree name is one path component of at most 64 bytes: letters, digits, `-`, `_`, `.`,
/// not starting with `.` (so never `.` or `..`, never hidden).
pub fn check_name(name: &str) -> Result<(), Error> {
    let bad = |why: &str| {
        Err(Error::Usage(format!(
            "worktree name {name:?} {why}; use letters, digits, '-', '_' and '.' (for example \
             `agent-1`)"
        )))
    };
    if name.is_empty() {
        return bad("is empty");
    }
    if name.len() > 64 {
        return bad("is longer than 64 bytes");
    }
    if name.contains('/') || name.contains('\\') {
        return bad("contains a path separator");
    }
    if name.starts_with('.') {
        return bad("starts with '.'");
    }
    if !name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
    {
        return bad("has characters other than letters, digits, '-', '_' and '.'");
    }
    Ok(())
}

/// The default root of worktree `name` of workspace `parent`.
pub fn default_root(home: &Path, parent: &str, name: &str) -> PathBuf {
    home.join(WORKTREES_DIR).join(parent).join(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        for ok in ["a", "agent-1", "x_y.z", "A9"] {
            check_name(ok).unwrap();
        }
        for bad in [
            "",
            ".",
            "..",
            ".hidden",
            "a/b",
            "a\\b",
            "a b",
            "é",
            &"x".repeat(65),
        ] {
            assert!(matches!(check_name(bad), Err(Error::Usage(_))), "{bad:?}");
        }
    }
}
