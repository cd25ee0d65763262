//! Planning a session-scope restore or undo: per path, back to the `pre` of the session's
//! earliest change after the target, provided the path is still the `post` of its latest; a
//! path someone else changed since is merged (`--merge`) or a conflict.

use rewind_store::EntryKind;

use crate::fs::probe::disk_entry_known;
use crate::model::entry::{same, Change, Entry};
use crate::restore::Skipped;
use crate::workspace::Workspace;
use crate::Error;

use super::*;

impl Workspace {
    /// Session scope: for each path the changes touched, go back to the `pre` of the earliest
    /// change, provided the path is still the `post` of the latest.
    pub(super) fn plan_undo(
        &self,
        changes: Vec<Change>,
        opts: &RewindOptions,
    ) -> Result<RewindOutcome, Error> {
        let mut per_path: std::collections::BTreeMap<Vec<u8>, (Option<Entry>, Option<Entry>)> =
            Default::default();
        for c in changes {
            if !in_scope(&c.path, &opts.paths) {
                continue;
            }
            per_path
                .entry(c.path)
                .and_modify(|v| v.1 = c.after)
                .or_insert((c.before, c.after));
        }
        let root = self.rootdir()?;
        let max = self.config().capture.max_file_size();
        // What each path holds now, read and hashed on every core (a big turn's undo reads
        // thousands of files; this is most of its planning).
        let currents = {
            use rayon::prelude::*;
            let paths: Vec<_> = per_path.iter().collect();
            // (Not the paths whose target was never captured: they are skipped unread.)
            let store = self.store();
            paths
                .par_iter()
                .map(|(p, (target, expected))| match target {
                    Some(t) if t.kind == EntryKind::Uncovered => Ok(None),
                    _ => disk_entry_known(&root, p, None, max, store, [target, expected]),
                })
                .collect::<Result<Vec<_>, Error>>()?
        };
        let mut out = RewindOutcome::default();
        for ((path, (target, expected)), current) in per_path.into_iter().zip(currents) {
            if target.is_some_and(|t| t.kind == EntryKind::Uncovered) {
                out.skipped.push(Skipped {
                    path,
                    reason: "cannot restore: its content was never captured".into(),
                });
                continue;
            }
            if same(&current, &target) {
                continue;
            }
            if current.is_some_and(|c| c.kind == EntryKind::Uncovered) {
                // What is there now was never stored (over the size cap, unreadable): writing
                // over it or removing it would lose it for good, forced or not.
                out.skipped.push(Skipped {
                    path,
                    reason: "left as it is: its current content is not captured".into(),
                });
                continue;
            }
            if same(&current, &expected) {
                out.steps.push(Change {
                    path,
                    before: current,
                    after: target,
                });
            } else {
                // Someone else changed it since: merged (`--merge`) where the changes touch
                // different lines, else a conflict, overwritten only with `--force`.
                let merged = if opts.merge {
                    Some(self.merge_undo(&path, target, expected, current)?)
                } else {
                    None
                };
                let why = match merged {
                    Some(Ok(m)) => {
                        if !same(&current, &Some(m.entry)) {
                            out.steps.push(Change {
                                path,
                                before: current,
                                after: Some(m.entry),
                            });
                            out.merged.push(m);
                        }
                        continue;
                    }
                    Some(Err(why)) => Some(why),
                    None => None,
                };
                let mut c = self.conflict(&path, expected, current)?;
                if let Some(why) = why {
                    c.unmerged = Some(why.reason());
                    if let merge::Unmerged::Overlaps(o) = why {
                        c.overlaps = o;
                    }
                }
                out.conflicts.push(c);
                if opts.force {
                    out.steps.push(Change {
                        path,
                        before: current,
                        after: target,
                    });
                }
            }
        }
        order_steps(&mut out.steps);
        Ok(out)
    }
}
