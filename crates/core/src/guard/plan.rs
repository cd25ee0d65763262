//! The guard's plan of one write: what each path holds now, the operations that turn it into
//! what the tool asked for, applying them (temp + rename, parents created) and rolling back.

use std::collections::{BTreeMap, BTreeSet};

use crate::fs::relpath;
use crate::fs::root::{Present, RootDir, StagedFile};
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
}

/// What was done, for rolling back after an I/O error part-way.
pub(super) enum Done {
    Wrote(usize),
    Removed(usize),
    MadeDir(Vec<u8>),
    RemovedDir(Vec<u8>, u32),
}

/// Applies the plan: removals, new directories, writes, then directories left empty. Returns
/// the metadata of each written file (by op index).
pub(super) fn apply_plan(
    root: &RootDir,
    plan: &Plan,
    staged: &mut BTreeMap<usize, StagedFile>,
    done: &mut Vec<Done>,
) -> Result<BTreeMap<usize, std::fs::Metadata>, Error> {
    for (i, op) in plan.ops.iter().enumerate() {
        if op.after.is_none() {
            crate::base::failpoint::hit("guard-before-remove");
            root.remove_file(&op.path)
                .map_err(Error::io_rel("removing", &op.path))?;
            done.push(Done::Removed(i));
            // Counted (`guard-after-file:N`): a multi-file write stopped after its N-th file.
            crate::base::failpoint::hit("guard-after-file");
        }
    }
    let dir_mode = if plan.mkdirs.is_empty() {
        0
    } else {
        0o777 & !umask()
    };
    for d in &plan.mkdirs {
        root.make_dir(d).map_err(Error::io_rel("creating", d))?;
        done.push(Done::MadeDir(d.clone()));
        root.chmod_dir(d, dir_mode)
            .map_err(Error::io_rel("setting the mode of", d))?;
    }
    let mut metas = BTreeMap::new();
    for (i, op) in plan.ops.iter().enumerate() {
        if let Some((mode, content)) = &op.after {
            crate::base::failpoint::hit("guard-before-write");
            let meta = root
                .write_file_staged(&op.path, staged.remove(&i), *mode, DURABLE, &mut |f| {
                    std::io::Write::write_all(f, content)
                })
                .map_err(Error::io_rel("writing", &op.path))?;
            done.push(Done::Wrote(i));
            metas.insert(i, meta);
            crate::base::failpoint::hit("guard-after-file");
        }
    }
    for d in &plan.rmdirs {
        let mode = match root.lstat(d) {
            Ok(Present::Dir { mode }) => mode,
            _ => continue,
        };
        if root.remove_dir(d).map_err(Error::io_rel("removing", d))? {
            done.push(Done::RemovedDir(d.clone(), mode));
        }
    }
    Ok(metas)
}

/// The plan's new file contents, staged (see [`RootDir::stage_file`]) where the file system
/// allows it, by op index; `early`'s staged file is used for its path if it holds that content
/// with that mode. Best effort: what is not staged here is written in full later, and that
/// write reports any error.
pub(super) fn stage(
    root: &RootDir,
    plan: &Plan,
    mut early: Option<StagedWrite>,
) -> BTreeMap<usize, StagedFile> {
    let mut out = BTreeMap::new();
    if !DURABLE {
        return out;
    }
    for (i, op) in plan.ops.iter().enumerate() {
        if let Some((mode, content)) = &op.after {
            let ready = early
                .take_if(|e| e.rel == op.path)
                .and_then(|e| e.finish(*mode, content));
            if let Some(s) = ready {
                out.insert(i, s);
                continue;
            }
            let fill = &mut |f: &mut std::fs::File| std::io::Write::write_all(f, content);
            if let Ok(Some(s)) = root.stage_file(&op.path, *mode, fill) {
                out.insert(i, s);
            }
        }
    }
    out
}

/// Best-effort undo of a partly applied plan (after an I/O error); what cannot be put back is
/// still recorded by the epoch, which is then aborted.
pub(super) fn roll_back(root: &RootDir, plan: &Plan, done: Vec<Done>) {
    let put_back = |op: &Op| match &op.before {
        Disk::File {
            mode,
            content: Some(c),
            ..
        } => {
            let _ = root.write_file(&op.path, *mode, DURABLE, &mut |f| {
                std::io::Write::write_all(f, c)
            });
        }
        Disk::Absent => {
            let _ = root.remove_file(&op.path);
        }
        _ => {}
    };
    for d in done.into_iter().rev() {
        match d {
            Done::Wrote(i) | Done::Removed(i) => put_back(&plan.ops[i]),
            Done::MadeDir(p) => {
                let _ = root.remove_dir(&p);
            }
            Done::RemovedDir(p, mode) => {
                let _ = root.make_dir(&p).and_then(|_| root.chmod_dir(&p, mode));
            }
        }
    }
}
