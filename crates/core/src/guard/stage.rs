//! Staging a guarded write's content before the write is checked, so its flush overlaps
//! the checks.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::fs::root::{Present, RootDir, StagedFile};
use crate::text::edit::{self, EditSpec};
use crate::workspace::Workspace;
use crate::Error;

use super::*;

/// A guarded write's new content, staged before the write is even checked: written into an
/// unnamed file in the target's directory (see [`RootDir::stage_file`]) and fsynced on a thread
/// of its own. The command line's `rewind write` and `rewind edit` start one before they open
/// the workspace, so the flush runs while the workspace opens, the guard checks and the epoch's
/// opening commit is made durable, instead of after them. [`Workspace::write_staged`] and
/// [`Workspace::edit_staged`] use it when the workspace, the path, the file's mode and the
/// content are still what the write needs, and otherwise write in full; an unused staged file
/// has no name and leaves nothing behind.
pub struct StagedWrite {
    pub(super) root: PathBuf,
    pub(super) rel: Vec<u8>,
    /// The new content, when the caller gave it (a whole-file write); an edit's is computed by
    /// the staging thread.
    pub(super) content: Option<Arc<Vec<u8>>>,
    pub(super) staging: Option<std::thread::JoinHandle<Option<Staged>>>,
    /// What the staging thread made, once [`StagedWrite::wait`] joined it.
    pub(super) ready: Option<Staged>,
}

/// What a staging thread made: the file, and the mode and content it was made with.
pub(super) struct Staged {
    mode: u32,
    content: Arc<Vec<u8>>,
    file: StagedFile,
}

impl StagedWrite {
    /// Starts staging `content` as the new content of `rel` (workspace-relative) in the
    /// workspace rooted at `root` (as [`Workspace::root`] gives it). Never fails: what cannot
    /// be staged is written in full by the write, which reports any error.
    pub fn start(root: &Path, rel: Vec<u8>, content: Vec<u8>) -> StagedWrite {
        let content = Arc::new(content);
        let given = content.clone();
        StagedWrite::spawn(root, rel, Some(content), move |dir, rel| {
            // The mode the write will give it: the file's own, or a new file's.
            let mode = match dir.lstat(rel).ok()? {
                Present::File { mode } => mode,
                Present::Absent => new_file_mode(false),
                _ => return None,
            };
            Some((mode, given))
        })
    }

    /// Starts staging the result of the exact string replacement `spec` in the existing file
    /// `rel`, read and edited on the staging thread (see [`StagedWrite::start`]).
    pub fn start_edit(root: &Path, rel: Vec<u8>, spec: EditSpec) -> StagedWrite {
        StagedWrite::spawn(root, rel, None, move |dir, rel| {
            let Present::File { mode } = dir.lstat(rel).ok()? else {
                return None;
            };
            let mut current = Vec::new();
            dir.open_read(rel).ok()?.read_to_end(&mut current).ok()?;
            let (new, _) = edit::apply(&current, &spec).ok()?;
            Some((mode, Arc::new(new)))
        })
    }

    /// Stages, on a thread, the mode and content `make` gives (`None`: nothing to stage).
    pub(super) fn spawn(
        root: &Path,
        rel: Vec<u8>,
        content: Option<Arc<Vec<u8>>>,
        make: impl FnOnce(&RootDir, &[u8]) -> Option<(u32, Arc<Vec<u8>>)> + Send + 'static,
    ) -> StagedWrite {
        let staging = (DURABLE && check_writable(&rel).is_ok())
            .then(|| {
                let (root, rel) = (root.to_path_buf(), rel.clone());
                std::thread::Builder::new()
                    .spawn(move || {
                        let dir = RootDir::open(&root).ok()?;
                        let (mode, content) = make(&dir, &rel)?;
                        let fill =
                            &mut |f: &mut std::fs::File| std::io::Write::write_all(f, &content);
                        let file = dir.stage_file(&rel, mode, fill).ok()??;
                        Some(Staged {
                            mode,
                            content,
                            file,
                        })
                    })
                    .ok()
            })
            .flatten();
        StagedWrite {
            root: root.to_path_buf(),
            rel,
            content,
            staging,
            ready: None,
        }
    }

    /// Waits until the staging is over; whether it staged a file. The write waits for it
    /// anyway: this lets a caller (a test) order what it does after the staging, and know
    /// that a file was staged rather than hope a pause was long enough.
    pub fn wait(&mut self) -> bool {
        if let Some(h) = self.staging.take() {
            self.ready = h.join().ok().flatten();
        }
        self.ready.is_some()
    }

    /// The workspace-relative path it writes.
    pub fn path(&self) -> &[u8] {
        &self.rel
    }

    /// The staged file, once its fsync is done, if it holds `content` with mode `mode`.
    pub(super) fn finish(mut self, mode: u32, content: &[u8]) -> Option<StagedFile> {
        self.wait();
        self.ready
            .filter(|s| s.mode == mode && s.content.as_slice() == content)
            .map(|s| s.file)
    }

    /// Refuses a `StagedWrite` started for another workspace root (its path is relative to
    /// that root).
    pub(super) fn check_root(&self, ws: &Workspace) -> Result<(), Error> {
        if self.root != ws.root() {
            return Err(Error::Workspace(format!(
                "a write was prepared for the workspace {}, not this one ({})",
                self.root.display(),
                ws.root().display()
            )));
        }
        Ok(())
    }
}
