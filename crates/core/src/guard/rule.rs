//! The rule: a session writes a file only if the content on disk is what it last read.
//! Fingerprints are recorded on read and checked on write; a refusal says who changed the file.

use std::io::Read;
use std::os::unix::fs::MetadataExt;

use crate::base::now_ns;
use crate::db;
use crate::db::oplog::{self, EpochKind, EpochRow, EpochState};
use crate::fs::relpath;
use crate::fs::root::Present;
use crate::model::entry::Entry;
use crate::model::guard::{ChangedBy, Fingerprint, GuardRefusal, RefusalKind};
use crate::record::owner_alive;
use crate::text::patch::{self};
use crate::workspace::Workspace;
use crate::Error;

use super::*;

pub(super) fn count_lines(content: &[u8]) -> usize {
    let n = content.iter().filter(|b| **b == b'\n').count();
    if content.last().is_some_and(|b| *b != b'\n') {
        n + 1
    } else {
        n
    }
}

impl Workspace {
    /// The session's fingerprint of `rel`, if it read (or wrote) it.
    pub fn fingerprint(&self, session: &str, rel: &[u8]) -> Result<Option<Fingerprint>, Error> {
        db::fingerprints::get(&self.db(), session, rel)
    }

    /// Runs `f` in a transaction committed without an fsync (`synchronous = NORMAL`: still
    /// atomic and consistent in WAL mode, only not durable across power loss). Used for
    /// fingerprints only: losing one makes the guard refuse (the session reads again), never
    /// allow, so they are not worth a disk flush on the hot path.
    pub(super) fn relaxed_tx(&self, f: impl FnOnce() -> Result<(), Error>) -> Result<(), Error> {
        self.relaxed(|| self.transaction(f))
    }

    pub(super) fn save_fingerprint(&self, session: &str, fp: &Fingerprint) -> Result<(), Error> {
        db::fingerprints::save(&self.db(), session, fp)
    }

    /// Reads a regular file for `session` and records its fingerprint (of the whole file, also
    /// when only `range` is returned). Symlinks are never followed.
    pub fn read_file(
        &self,
        session: &str,
        rel: &[u8],
        range: Option<LineRange>,
    ) -> Result<ReadResult, Error> {
        relpath::check(rel)?;
        let root = self.rootdir()?;
        match root.lstat(rel).map_err(Error::io_rel("inspecting", rel))? {
            Present::File { .. } => {}
            Present::Absent => return Err(tool_err(rel, "no such file")),
            Present::Dir { .. } => return Err(tool_err(rel, "is a directory")),
            Present::Symlink => return Err(tool_err(
                rel,
                "is a symlink; the guarded tools read regular files only and never follow symlinks",
            )),
            Present::Other => return Err(tool_err(rel, "is not a regular file")),
        }
        let mut f = root.open_read(rel).map_err(Error::io_rel("opening", rel))?;
        let meta = f.metadata().map_err(Error::io_rel("inspecting", rel))?;
        let mut content = Vec::with_capacity(meta.len() as usize);
        f.read_to_end(&mut content)
            .map_err(Error::io_rel("reading", rel))?;
        let lines = count_lines(&content);
        let fp = Fingerprint {
            path: rel.to_vec(),
            size: content.len() as u64,
            mtime_ns: meta.mtime() * 1_000_000_000 + meta.mtime_nsec(),
            mode: meta.mode() & 0o7777,
            content: content_id(&content)?,
            pos: oplog::last_pos(&self.db())?,
            partial: false,
            read_ns: now_ns(),
        };
        let (content, range, partial) = match range {
            None => (content, None, false),
            Some(r) => {
                let end = r.end.unwrap_or(usize::MAX).min(lines);
                let split = patch::split_lines(&content);
                let picked: Vec<u8> = if r.start <= end {
                    split[r.start - 1..end].concat()
                } else {
                    Vec::new()
                };
                let partial = !(r.start <= 1 && end >= lines);
                let shown = if r.start <= end {
                    (r.start, end)
                } else {
                    (r.start, r.start - 1)
                };
                (picked, Some(shown), partial)
            }
        };
        let fp = Fingerprint { partial, ..fp };
        self.relaxed_tx(|| self.save_fingerprint(session, &fp))?;
        Ok(ReadResult {
            path: rel.to_vec(),
            size: fp.size,
            content,
            lines,
            range,
            partial,
            fingerprint: fp,
        })
    }

    /// Whether `session` may write `rel` now: `Ok` for a new file or one unchanged since the
    /// session read it, [`Error::Guard`] with the reason otherwise.
    pub fn check_write(&self, session: &str, rel: &[u8]) -> Result<WriteCheck, Error> {
        check_writable(rel)?;
        let root = self.rootdir()?;
        let d = disk_state(&root, rel, false)?;
        if let Disk::Absent = d {
            // A new file: its directories must be creatable (no symlink or file on the way).
            let probe = Op {
                path: rel.to_vec(),
                before: Disk::Absent,
                after: Some((0, Vec::new())),
            };
            Plan::new(&root, vec![probe])?;
        }
        match self.guard(session, rel, &d)? {
            Ok(fp) => Ok(WriteCheck {
                path: rel.to_vec(),
                new_file: matches!(d, Disk::Absent),
                fingerprint: fp,
            }),
            Err(r) => Err(Error::Guard(vec![r])),
        }
    }

    /// The guard's verdict for one path in state `d`.
    pub(super) fn guard(
        &self,
        session: &str,
        rel: &[u8],
        d: &Disk,
    ) -> Result<Result<Option<Fingerprint>, GuardRefusal>, Error> {
        let (size, id) = match d {
            Disk::Absent => return Ok(Ok(None)),
            Disk::NotFile(what) => {
                return Err(tool_err(
                    rel,
                    format!("is {what}; the guarded tools write regular files only"),
                ))
            }
            Disk::File { size, id, .. } => (*size, *id),
        };
        let refusal = |kind, changed_by, detail, partial| GuardRefusal {
            path: rel.to_vec(),
            session: session.to_string(),
            kind,
            changed_by,
            detail,
            partial,
        };
        let Some(fp) = self.fingerprint(session, rel)? else {
            return Ok(Err(refusal(RefusalKind::NeverRead, None, None, false)));
        };
        if fp.content == id && fp.size == size {
            return Ok(Ok(Some(fp)));
        }
        let detail = if fp.size != size {
            format!("size {} -> {size} bytes", fp.size)
        } else {
            format!("same size, different content: {size} bytes")
        };
        let by = self.changed_by(session, rel, fp.pos, &d.entry())?;
        Ok(Err(refusal(
            RefusalKind::Changed,
            Some(by),
            Some(detail),
            fp.partial,
        )))
    }

    /// Who made `rel` what it is now (`current`), looking at changes recorded after `after_pos`.
    pub(super) fn changed_by(
        &self,
        session: &str,
        rel: &[u8],
        after_pos: i64,
        current: &Option<Entry>,
    ) -> Result<ChangedBy, Error> {
        let by_epoch = |e: &EpochRow, open: bool| {
            if e.kind == EpochKind::External {
                ChangedBy::External {
                    epoch: e.id.clone(),
                }
            } else {
                ChangedBy::Epoch {
                    session: e.session.clone(),
                    epoch: e.id.clone(),
                    kind: e.kind,
                    tool: e.tool.clone(),
                    this_session: e.session == session,
                    open,
                }
            }
        };
        let latest = oplog::latest_change(&self.db(), rel, after_pos)?;
        if let Some(r) = latest {
            let epoch = oplog::epoch(&self.db(), &r.epoch)?;
            if let Some(e) = epoch {
                if r.pending || e.state == EpochState::Open {
                    // Still running, unless its process died (the next command settles it).
                    return Ok(by_epoch(&e, owner_alive(&e.owner)));
                }
                if same_content(&r.change.after, current) {
                    return Ok(by_epoch(&e, false));
                }
            }
        }
        // Not recorded yet: a tool call still running may be the writer.
        let open = oplog::open_epochs(&self.db())?;
        for e in open.iter().rev() {
            let holds = match e.kind {
                EpochKind::Exact => e.paths.iter().any(|p| p == rel),
                EpochKind::Opaque => owner_alive(&e.owner),
                _ => false,
            };
            if holds {
                return Ok(by_epoch(e, owner_alive(&e.owner)));
            }
        }
        Ok(ChangedBy::Unrecorded)
    }
}
