//! A merged restore (`--merge`): where a path the session changed was changed since by someone
//! else, undo only the session's own lines. The session's last write is the common ancestor,
//! the content before its first change (what the restore goes back to) one descendant, the
//! file now the other (see [`crate::merge`]). The result is a step like any other, with new
//! content the restore stores before it journals; a merge that cannot be made leaves the path
//! a conflict that says why.

use std::io::Read;

use rewind_store::EntryKind;

use crate::merge::{self, MergeError, Overlap};
use crate::model::entry::Entry;
use crate::workspace::Workspace;
use crate::Error;

/// Files bigger than this are not merged (a conflict, as without `--merge`).
const MAX_MERGE_BYTES: u64 = 16 << 20;

/// A merged file: its path, new content and the entry it gets.
#[derive(Clone, Debug)]
pub struct Merged {
    /// Workspace-relative path.
    pub path: Vec<u8>,
    /// The merged bytes.
    pub content: Vec<u8>,
    /// What the path becomes.
    pub entry: Entry,
    /// What the merge changes in the file now, as a unified diff (lossy UTF-8).
    pub patch: String,
}

/// Why a conflicting path could not be merged.
#[derive(Clone, Debug)]
pub(crate) enum Unmerged {
    /// Not three regular files (created, deleted, a directory or symlink, uncovered).
    NotFiles,
    /// Both changed the mode differently.
    Mode,
    /// Not text, or too big.
    NotText(&'static str),
    /// Both changed these lines.
    Overlaps(Vec<Overlap>),
}

impl Unmerged {
    pub(crate) fn reason(&self) -> String {
        match self {
            Unmerged::NotFiles => {
                "not merged: the session created or deleted it, or it is not a regular file".into()
            }
            Unmerged::Mode => "not merged: both changed its mode".into(),
            Unmerged::NotText(why) => format!("not merged: {why}"),
            Unmerged::Overlaps(o) => format!(
                "not merged: both changed lines {} (of the file now)",
                o.iter()
                    .map(|o| format!("{}-{}", o.theirs.0, o.theirs.1.max(o.theirs.0)))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        }
    }
}

impl Workspace {
    /// Merges the undo of `path` from `expected` (the session's last write) back to `target`
    /// into `current` (the disk now).
    pub(super) fn merge_undo(
        &self,
        path: &[u8],
        target: Option<Entry>,
        expected: Option<Entry>,
        current: Option<Entry>,
    ) -> Result<Result<Merged, Unmerged>, Error> {
        let file = |e: Option<Entry>| e.filter(|e| e.kind == EntryKind::File);
        let (Some(t), Some(x), Some(c)) = (file(target), file(expected), file(current)) else {
            return Ok(Err(Unmerged::NotFiles));
        };
        let mode = if c.mode == x.mode {
            t.mode
        } else if t.mode == x.mode || t.mode == c.mode {
            c.mode
        } else {
            return Ok(Err(Unmerged::Mode));
        };
        if [t.size, x.size, c.size]
            .iter()
            .any(|s| *s > MAX_MERGE_BYTES)
        {
            return Ok(Err(Unmerged::NotText("too big to merge")));
        }
        let stored = |e: &Entry| -> Result<Vec<u8>, Error> {
            let mut v = Vec::with_capacity(e.size as usize);
            self.store().read_content(&e.id, &mut v)?;
            Ok(v)
        };
        let (ours, ancestor) = (stored(&t)?, stored(&x)?);
        let mut theirs = Vec::with_capacity(c.size as usize);
        self.rootdir()?
            .open_read(path)
            .and_then(|mut f| f.read_to_end(&mut theirs))
            .map_err(Error::io_rel("reading", path))?;
        merge_texts(path, &ancestor, &ours, &theirs, mode)
    }
}

/// Merges two descendants of `ancestor` line by line (see [`crate::merge`]): `ours` is the
/// side whose change is applied, `theirs` the file as it is now; the result's patch is what
/// the merge changes in `theirs`. A merge that cannot be made says why.
pub(crate) fn merge_texts(
    path: &[u8],
    ancestor: &[u8],
    ours: &[u8],
    theirs: &[u8],
    mode: u32,
) -> Result<Result<Merged, Unmerged>, Error> {
    if [ancestor.len(), ours.len(), theirs.len()]
        .iter()
        .any(|s| *s as u64 > MAX_MERGE_BYTES)
    {
        return Ok(Err(Unmerged::NotText("too big to merge")));
    }
    match merge::merge(ancestor, ours, theirs) {
        Ok(content) => {
            let (id, size) = rewind_store::content_id(&mut content.as_slice())?;
            let name = crate::fs::relpath::display(path);
            let patch = similar::TextDiff::from_lines(
                &*String::from_utf8_lossy(theirs),
                &*String::from_utf8_lossy(&content),
            )
            .unified_diff()
            .header(&format!("a/{name}"), &format!("b/{name}"))
            .to_string();
            Ok(Ok(Merged {
                patch,
                path: path.to_vec(),
                entry: Entry {
                    kind: EntryKind::File,
                    mode,
                    size,
                    id,
                },
                content,
            }))
        }
        Err(MergeError::Binary) => Ok(Err(Unmerged::NotText("not text (it holds NUL bytes)"))),
        Err(MergeError::Overlaps(o)) => Ok(Err(Unmerged::Overlaps(o))),
    }
}
