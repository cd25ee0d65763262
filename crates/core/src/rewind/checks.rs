//! What a restore checks before its first write under the root, and what it leaves in place.
//!
//! A dry run makes the same checks as the real run, so both exit with the same code; a refused
//! restore has written nothing. Invariants (docs/format.md, "A restore keeps three invariants"):
//! a directory that still holds something the plan does not remove is kept, not deleted; no
//! step goes through a symlink or a file on the way; every object the plan writes is readable
//! and verified; every directory written in is writable and the file system has room.

use rewind_store::EntryKind;

use super::RewindOutcome;
use crate::fs::relpath;
use crate::model::entry::{Change, Entry};
use crate::restore::Skipped;
use crate::workspace::Workspace;
use crate::Error;

impl Workspace {
    /// A directory the plan would delete stays if, on disk, it holds anything the plan does not
    /// remove: another writer's file, an ignored or uncovered one, a directory that stays itself.
    /// Its step becomes a `kept` entry, in the dry run and the real run alike, so neither says
    /// "delete" and the restore epoch does not record a deletion that never happened.
    pub(super) fn keep_occupied_dirs(&self, out: &mut RewindOutcome) -> Result<(), Error> {
        let root = self.rootdir()?;
        let removed: std::collections::HashSet<&[u8]> = out
            .steps
            .iter()
            .filter(|s| s.after.is_none())
            .map(|s| s.path.as_slice())
            .collect();
        // (A step's `before` is what the plan found on disk: no need to look again.)
        let mut dirs: Vec<Vec<u8>> = out
            .steps
            .iter()
            .filter(|s| s.after.is_none() && s.before.is_some_and(|b| b.kind == EntryKind::Dir))
            .map(|s| s.path.clone())
            .collect();
        // Deepest first: a directory that stays keeps its parent.
        dirs.sort_by_key(|p| std::cmp::Reverse(p.iter().filter(|b| **b == b'/').count()));
        let mut kept: std::collections::BTreeSet<Vec<u8>> = Default::default();
        for dir in dirs {
            let names = match root.list_dir(&dir) {
                Ok(names) => names,
                // One this process cannot list holds what was never captured: it stays.
                Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {
                    kept.insert(dir);
                    continue;
                }
                Err(e) => {
                    return Err(Error::Io {
                        op: "listing",
                        path: relpath::display(&dir).into(),
                        source: e,
                    })
                }
            };
            let stays = names.into_iter().any(|n| {
                let child = relpath::join(&dir, &n);
                !removed.contains(child.as_slice()) || kept.contains(&child)
            });
            if stays {
                kept.insert(dir);
            }
        }
        if !kept.is_empty() {
            out.steps.retain(|s| !kept.contains(&s.path));
            out.kept.extend(kept.into_iter().map(|path| Skipped {
                path,
                reason: "directory kept: it holds files this restore does not remove (another writer's, ignored or not captured)".into(),
            }));
        }
        Ok(())
    }

    /// Every check that can be made before the first write under the root, made by the dry
    /// run as by the real run (so both exit with the same code): every directory on the way
    /// to a step is a directory (not a symlink that could lead out, not a file) unless the
    /// plan makes it one, every object the plan writes is readable and verified, every
    /// directory written in is writable and the file system has room.
    pub(super) fn checks_before_writing(&self, out: &RewindOutcome) -> Result<(), Error> {
        let steps = &out.steps;
        let root = self.rootdir()?;
        let made_dirs: std::collections::HashSet<&[u8]> = steps
            .iter()
            .filter(|s| s.after.is_some_and(|a| a.kind == EntryKind::Dir))
            .map(|s| s.path.as_slice())
            .collect();
        let mut checked = std::collections::HashSet::new();
        for s in steps {
            let mut dir = relpath::split(&s.path).0;
            while !dir.is_empty() && checked.insert(dir) {
                let now = root.lstat(dir).map_err(|e| Error::Io {
                    op: "inspecting",
                    path: relpath::display(dir).into(),
                    source: e,
                })?;
                let fine = matches!(
                    now,
                    crate::fs::root::Present::Dir { .. } | crate::fs::root::Present::Absent
                ) || made_dirs.contains(dir);
                if !fine {
                    return Err(Error::Io {
                        op: "cannot restore (nothing was changed):",
                        path: relpath::display(&s.path).into(),
                        source: std::io::Error::new(
                            std::io::ErrorKind::NotADirectory,
                            format!(
                                "{} is a symlink or a file now, not a directory; move it away and retry",
                                relpath::display(dir)
                            ),
                        ),
                    });
                }
                dir = relpath::split(dir).0;
            }
        }
        // A merged file's content is in memory, not yet in the store.
        let stored: Vec<Change> = steps
            .iter()
            .filter(|s| !out.merged.iter().any(|m| m.path == s.path))
            .filter(|s| !out.verified_elsewhere.contains(&s.path))
            .cloned()
            .collect();
        self.verify_objects(&stored)?;
        preflight_writes(self.root(), steps)
    }

    /// Every object the plan writes is present and verified (read and hashed; a clone: its
    /// file there at its record's length), before the first byte is written under the root: a
    /// damaged store refuses the restore whole instead of failing half-way through it.
    fn verify_objects(&self, steps: &[Change]) -> Result<(), Error> {
        let mut bad = Vec::new();
        for s in steps {
            let Some(t) = s.after else { continue };
            let read = match t.kind {
                EntryKind::File => self.store().verify_content(&t.id, t.size),
                EntryKind::Symlink => self.store().read_blob(&t.id).map(drop),
                _ => Ok(()),
            };
            match read {
                Ok(()) => {}
                Err(
                    e @ (rewind_store::Error::Missing { .. }
                    | rewind_store::Error::Corrupt { .. }
                    | rewind_store::Error::MissingPack { .. }),
                ) => bad.push(format!("{} ({e})", relpath::display(&s.path))),
                Err(e) => return Err(e.into()),
            }
        }
        if bad.is_empty() {
            return Ok(());
        }
        Err(Error::Unavailable(format!(
            "cannot restore: the content of {} path(s) is missing or corrupt in the store, so nothing was changed: {}",
            bad.len(),
            bad.join("; ")
        ))
        .remedy(crate::model::remedy::Remedy::Fsck))
    }
}

/// What can be known before the first write under the root, checked so that most failures
/// refuse the restore whole instead of rolling it back: every directory a step writes in (the
/// nearest existing ancestor of its path) is writable by this process (`EACCES` for a user
/// without permission, `EROFS` for a read-only mount), and the file system has room for the
/// bytes the plan adds.
fn preflight_writes(root: &std::path::Path, steps: &[Change]) -> Result<(), Error> {
    use std::os::unix::ffi::OsStrExt;
    let mut checked = std::collections::HashSet::new();
    for s in steps {
        let mut dir = relpath::split(&s.path).0;
        // The nearest ancestor that is a directory (a step may create the rest, or replace a
        // file or symlink on the way by a directory).
        let abs = loop {
            let abs = relpath::to_path(root, dir);
            if dir.is_empty() || std::fs::symlink_metadata(&abs).is_ok_and(|m| m.is_dir()) {
                break abs;
            }
            dir = relpath::split(dir).0;
        };
        if !checked.insert(dir.to_vec()) {
            continue;
        }
        let c = std::ffi::CString::new(abs.as_os_str().as_bytes())
            .map_err(|_| Error::Usage("a path contains NUL".into()))?;
        // SAFETY: a valid C string; faccessat reads it only.
        let rc = unsafe {
            libc::faccessat(
                libc::AT_FDCWD,
                c.as_ptr(),
                libc::W_OK | libc::X_OK,
                libc::AT_EACCESS,
            )
        };
        if rc != 0 {
            return Err(Error::Io {
                op: "cannot restore (nothing was changed): no write access to the directory of",
                path: relpath::display(&s.path).into(),
                source: std::io::Error::last_os_error(),
            });
        }
    }
    // Deletions come first and free their files' blocks; written files need theirs.
    let size = |e: &Option<Entry>| {
        e.filter(|e| e.kind == EntryKind::File)
            .map_or(0, |e| e.size)
    };
    let adds: u64 = steps.iter().map(|s| size(&s.after)).sum();
    let frees: u64 = steps.iter().map(|s| size(&s.before)).sum();
    let need = adds.saturating_sub(frees);
    if need > 0 {
        let c = std::ffi::CString::new(root.as_os_str().as_bytes())
            .map_err(|_| Error::Usage("a path contains NUL".into()))?;
        // SAFETY: a valid C string and a zeroed out-structure statvfs fills.
        let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
        if unsafe { libc::statvfs(c.as_ptr(), &mut st) } == 0 {
            let free = st.f_bavail as u64 * st.f_frsize as u64;
            if need > free {
                return Err(Error::Io {
                    op: "cannot restore (nothing was changed): not enough free space for",
                    path: root.to_path_buf(),
                    source: std::io::Error::other(format!(
                        "the restore adds {need} bytes and the file system has {free} free; free some space and retry"
                    )),
                });
            }
        }
    }
    Ok(())
}
