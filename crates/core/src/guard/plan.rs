//! The guard's plan of one write: what each path holds now and the operations that turn it
//! into what the tool asked for, as the restore engine's steps (see [`crate::restore`]), which
//! apply them (temp + rename, parents created) and roll them back.

use std::collections::{BTreeMap, BTreeSet};

use rewind_store::{EntryKind, ObjectId};

use crate::fs::relpath;
use crate::fs::root::{Present, RootDir, StagedFile};
use crate::model::entry::{Change, Entry};
use crate::Error;

use super::*;

/// One path's planned final state (`None`: removed).
pub(super) struct Op {
    pub(super) path: Vec<u8>,
    pub(super) before: Disk,
    pub(super) after: Option<(u32, Vec<u8>)>,
}

/// Everything a guarded write will do, computed before anything is written.
pub(super) struct Plan {
    pub(super) ops: Vec<Op>,
    /// Directories to create, parents first.
    pub(super) mkdirs: Vec<Vec<u8>>,
    /// Directories to remove if they end up empty, deepest first.
    pub(super) rmdirs: Vec<Vec<u8>>,
}

impl Plan {
    pub(super) fn new(root: &RootDir, ops: Vec<Op>) -> Result<Plan, Error> {
        let written: BTreeSet<&[u8]> = ops
            .iter()
            .filter(|o| o.after.is_some())
            .map(|o| o.path.as_slice())
            .collect();
        let removed: BTreeSet<&[u8]> = ops
            .iter()
            .filter(|o| o.after.is_none())
            .map(|o| o.path.as_slice())
            .collect();
        let mut mkdirs: Vec<Vec<u8>> = Vec::new();
        let mut needed: BTreeSet<Vec<u8>> = BTreeSet::new();
        for w in &written {
            for a in ancestors(w) {
                needed.insert(a.to_vec());
                if written.contains(a) {
                    return Err(tool_err(
                        w,
                        format!(
                            "cannot be written: {} would be both a file and a directory",
                            relpath::display(a)
                        ),
                    ));
                }
                if mkdirs.iter().any(|m| m == a) {
                    continue;
                }
                match root.lstat(a).map_err(Error::io_rel("inspecting", a))? {
                    Present::Dir { .. } => {}
                    Present::Absent => mkdirs.push(a.to_vec()),
                    Present::File { .. } if removed.contains(a) => mkdirs.push(a.to_vec()),
                    Present::Symlink => {
                        return Err(tool_err(
                            w,
                            format!(
                                "cannot be written: {} is a symlink, and rewind never writes through symlinks",
                                relpath::display(a)
                            ),
                        ))
                    }
                    _ => {
                        return Err(tool_err(
                            w,
                            format!(
                                "cannot be written: {} is not a directory",
                                relpath::display(a)
                            ),
                        ))
                    }
                }
            }
        }
        mkdirs.sort_by_key(|m| m.iter().filter(|b| **b == b'/').count());
        let mut rmdirs: Vec<Vec<u8>> = Vec::new();
        for r in &removed {
            for a in ancestors(r) {
                if !needed.contains(a)
                    && !rmdirs.iter().any(|x| x == a)
                    && matches!(root.lstat(a), Ok(Present::Dir { .. }))
                {
                    rmdirs.push(a.to_vec());
                }
            }
        }
        rmdirs.sort_by_key(|m| std::cmp::Reverse(m.iter().filter(|b| **b == b'/').count()));
        Ok(Plan {
            ops,
            mkdirs,
            rmdirs,
        })
    }

    pub(super) fn epoch_paths(&self) -> Vec<Vec<u8>> {
        let mut all: BTreeSet<Vec<u8>> = self.ops.iter().map(|o| o.path.clone()).collect();
        all.extend(self.mkdirs.iter().cloned());
        all.extend(self.rmdirs.iter().cloned());
        all.into_iter().collect()
    }

    /// The plan as the restore engine's steps, in the order they are applied: removals, new
    /// directories (parents first), writes, then directories that may end up empty (deepest
    /// first; one that still holds something is kept).
    pub(super) fn steps(&self) -> Vec<Change> {
        let dir = |mode| Entry {
            kind: EntryKind::Dir,
            mode,
            size: 0,
            id: ObjectId::ZERO,
        };
        let change = |path: &[u8], before, after| Change {
            path: path.to_vec(),
            before,
            after,
        };
        let new_dir_mode = 0o777 & !umask();
        let mut steps = Vec::new();
        for op in self.ops.iter().filter(|o| o.after.is_none()) {
            steps.push(change(&op.path, op.before.entry(), None));
        }
        for d in &self.mkdirs {
            steps.push(change(d, None, Some(dir(new_dir_mode))));
        }
        for op in &self.ops {
            if let Some((mode, content)) = &op.after {
                let after = Entry {
                    kind: EntryKind::File,
                    mode: *mode,
                    size: content.len() as u64,
                    id: content_id(content).expect("hashing bytes in memory"),
                };
                steps.push(change(&op.path, op.before.entry(), Some(after)));
            }
        }
        for d in &self.rmdirs {
            steps.push(change(d, Some(dir(0)), None));
        }
        steps
    }

    /// The new contents, by content id, for [`crate::restore::ApplyOptions::given`].
    pub(super) fn given(&self) -> BTreeMap<ObjectId, &[u8]> {
        self.ops
            .iter()
            .filter_map(|o| o.after.as_ref())
            .map(|(_, c)| {
                (
                    content_id(c).expect("hashing bytes in memory"),
                    c.as_slice(),
                )
            })
            .collect()
    }
}

/// The plan's new file contents, staged (see [`RootDir::stage_file`]) where the file system
/// allows it, by path; `early`'s staged file is used for its path if it holds that content
/// with that mode. Best effort: what is not staged here is written in full later, and that
/// write reports any error.
pub(super) fn stage(
    root: &RootDir,
    plan: &Plan,
    mut early: Option<StagedWrite>,
) -> BTreeMap<Vec<u8>, StagedFile> {
    let mut out = BTreeMap::new();
    if !DURABLE {
        return out;
    }
    for op in &plan.ops {
        if let Some((mode, content)) = &op.after {
            let ready = early
                .take_if(|e| e.rel == op.path)
                .and_then(|e| e.finish(*mode, content));
            if let Some(s) = ready {
                out.insert(op.path.clone(), s);
                continue;
            }
            let fill = &mut |f: &mut std::fs::File| std::io::Write::write_all(f, content);
            if let Ok(Some(s)) = root.stage_file(&op.path, *mode, fill) {
                out.insert(op.path.clone(), s);
            }
        }
    }
    out
}
