//! Computing diffs: which paths, then each path's sections and hunks from the stored (or, for
//! "now", the on-disk) content of both sides.

use std::os::unix::ffi::OsStrExt;
use std::time::Duration;

use rewind_store::EntryKind;
use similar::{ChangeTag, TextDiff};

use super::{in_scope, Diff, FileDiff, Hunk, Line, Point, Section, Tag, MAX_TEXT, SNIFF};
use crate::db::oplog::{CheckpointRow, EpochRow};
use crate::fs::relpath;
use crate::model::entry::{Change, Entry};
use crate::restore::{action, Skipped};
use crate::rewind::{Mode, RewindOptions, Target};
use crate::workspace::Workspace;
use crate::Error;

/// Where a side's content is read from.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Src {
    Store,
    /// The workspace as it is now (the store may not hold it: an edit made outside epochs).
    Disk,
}
/// The two sides of one path's diff: `a` (from the store) and `b` (from `b_src`).
#[derive(Clone, Copy)]
struct Sides<'p> {
    path: &'p [u8],
    a: Option<Entry>,
    b: Option<Entry>,
    b_src: Src,
}

impl<'p> Sides<'p> {
    fn new(path: &'p [u8], a: Option<Entry>, b: Option<Entry>, b_src: Src) -> Sides<'p> {
        Sides { path, a, b, b_src }
    }
}

impl Diff {
    fn new(from: Point, to: Point, files: Vec<FileDiff>) -> Diff {
        Diff {
            from,
            to,
            session: None,
            added: files.iter().map(|f| f.added).sum(),
            removed: files.iter().map(|f| f.removed).sum(),
            files,
            uncovered: Vec::new(),
            pending: 0,
        }
    }
}

impl Workspace {
    /// What epoch `e` changed, before → after, limited to `scope` (empty: everything). Paths
    /// of an open epoch with no post image yet are counted in `pending`, not shown.
    pub fn diff_epoch(&self, e: &EpochRow, scope: &[Vec<u8>]) -> Result<Diff, Error> {
        crate::rewind::refuse_collected_epoch(e)?;
        let mut pending = 0;
        let mut files = Vec::new();
        for (c, p) in self.epoch_changes_pending(&e.id)? {
            if p {
                pending += 1;
            } else if in_scope(&c.path, scope) {
                files.push(self.file_diff(&c.path, c.before, c.after, Src::Store)?);
            }
        }
        let point = |what| Point {
            what,
            id: Some(e.id.clone()),
        };
        let mut d = Diff::new(point("epoch-before"), point("epoch-after"), files);
        d.pending = pending;
        Ok(d)
    }

    /// What a restore of checkpoint `c`'s session to it would undo, conflicting paths included
    /// (each flagged): the checkpoint is the old side (a/), the workspace now the new (b/).
    pub fn diff_checkpoint_now(&self, c: &CheckpointRow, scope: &[Vec<u8>]) -> Result<Diff, Error> {
        crate::rewind::refuse_collected_checkpoint(c)?;
        // Each step of the (forced, dry-run) restore goes from now (`before`) to the
        // checkpoint side (`after`).
        let opts = RewindOptions {
            dry_run: true,
            force: true,
            mode: Mode::FilesOnly,
            paths: scope.to_vec(),
            ..Default::default()
        };
        let mut out = self.restore(&c.session, &Target::Checkpoint(c.clone()), &opts)?;
        out.steps.sort_by(|x, y| x.path.cmp(&y.path));
        let mut files = Vec::new();
        for s in &out.steps {
            if !in_scope(&s.path, scope) {
                continue;
            }
            let mut f = self.file_diff(&s.path, s.after, s.before, Src::Disk)?;
            f.conflict = out
                .conflicts
                .iter()
                .find(|k| k.path == s.path)
                .map(|k| k.changed_by.clone());
            files.push(f);
        }
        let from = Point {
            what: "checkpoint",
            id: Some(c.id.clone()),
        };
        let to = Point {
            what: "now",
            id: None,
        };
        let mut d = Diff::new(from, to, files);
        d.session = Some(c.session.clone());
        d.uncovered = out.skipped;
        Ok(d)
    }

    /// The whole tree of checkpoint `a` (a/) against `b`'s (b/).
    pub fn diff_checkpoints(
        &self,
        a: &CheckpointRow,
        b: &CheckpointRow,
        scope: &[Vec<u8>],
    ) -> Result<Diff, Error> {
        crate::rewind::refuse_collected_checkpoint(a)?;
        crate::rewind::refuse_collected_checkpoint(b)?;
        let plan = self.diff_trees_full(a.root, b.root)?;
        let mut files = Vec::new();
        for c in &plan.steps {
            if in_scope(&c.path, scope) {
                files.push(self.file_diff(&c.path, c.before, c.after, Src::Store)?);
            }
        }
        let point = |c: &CheckpointRow| Point {
            what: "checkpoint",
            id: Some(c.id.clone()),
        };
        let mut d = Diff::new(point(a), point(b), files);
        d.uncovered = plan
            .skipped
            .into_iter()
            .filter(|k| in_scope(&k.path, scope))
            .map(|k| Skipped {
                path: k.path,
                reason: "differs, but one side was never captured".into(),
            })
            .collect();
        Ok(d)
    }

    /// Reads one side's bytes. `Src::Disk` reads the workspace (falling back to the store).
    fn side_content(&self, path: &[u8], e: &Entry, src: Src) -> Result<Vec<u8>, Error> {
        if src == Src::Disk {
            let full = relpath::to_path(self.root(), path);
            let disk = if e.kind == EntryKind::Symlink {
                std::fs::read_link(&full).map(|t| t.as_os_str().as_bytes().to_vec())
            } else {
                std::fs::read(&full)
            };
            if let Ok(bytes) = disk {
                return Ok(bytes);
            }
        }
        self.read_content(&e.id).map_err(|err| {
            let what = format!("reading the stored content of {}", relpath::display(path));
            match err {
                Error::Store(
                    s @ (rewind_store::Error::Missing { .. }
                    | rewind_store::Error::Corrupt { .. }
                    | rewind_store::Error::MissingPack { .. }),
                ) => Error::Unavailable(format!("{what}: {s}")),
                other => other,
            }
        })
    }

    /// The diff of one path from `a` (old, a/) to `b` (new, b/). `b_src` says where b's
    /// content is read from; a's always comes from the store.
    fn file_diff(
        &self,
        path: &[u8],
        a: Option<Entry>,
        b: Option<Entry>,
        b_src: Src,
    ) -> Result<FileDiff, Error> {
        let name = relpath::display(path);
        let change = Change {
            path: path.to_vec(),
            before: a,
            after: b,
        };
        let uncovered = [a, b]
            .iter()
            .flatten()
            .any(|e| e.kind == EntryKind::Uncovered);
        let mut f = FileDiff {
            path: name.clone(),
            action: if uncovered {
                "uncovered"
            } else {
                action(&change)
            },
            kind: b.or(a).map(|e| e.kind_name()).unwrap_or("none"),
            binary: false,
            added: 0,
            removed: 0,
            conflict: None,
            note: None,
            patch: String::new(),
            sections: Vec::new(),
        };
        if uncovered {
            let which: Vec<String> = [("a", a), ("b", b)]
                .iter()
                .filter(|(_, e)| e.is_some_and(|e| e.kind == EntryKind::Uncovered))
                .map(|(s, e)| format!("{s}/{name} ({} bytes)", e.map_or(0, |e| e.size)))
                .collect();
            let note = format!("not captured: {}", which.join(" and "));
            f.sections.push(Section {
                header: vec![format!("diff --git a/{name} b/{name}")],
                note: Some(format!("Uncovered: {note}")),
                hunks: Vec::new(),
            });
            f.note = Some(note);
        } else {
            let has_content = |e: &Entry| matches!(e.kind, EntryKind::File | EntryKind::Symlink);
            match (a.filter(has_content), b.filter(has_content)) {
                (Some(x), Some(y)) if x.kind != y.kind => {
                    // A symlink became a file or back: a deletion and a creation, like git.
                    self.section(&mut f, Sides::new(path, Some(x), None, b_src))?;
                    self.section(&mut f, Sides::new(path, None, Some(y), b_src))?;
                }
                (None, None) => {} // directories: named only
                (x, y) => self.section(&mut f, Sides::new(path, x, y, b_src))?,
            }
        }
        f.patch = f.lines().iter().map(|(_, l)| format!("{l}\n")).collect();
        Ok(f)
    }

    /// One `diff --git` section: `a` → `b`, at least one present, both with content kinds.
    fn section(&self, f: &mut FileDiff, sides: Sides) -> Result<(), Error> {
        let Sides { path, a, b, .. } = sides;
        let name = relpath::display(path);
        let mut s = Section::default();
        s.header.push(format!("diff --git a/{name} b/{name}"));
        match (&a, &b) {
            (None, Some(y)) => s.header.push(format!("new file mode {}", git_mode(y))),
            (Some(x), None) => s.header.push(format!("deleted file mode {}", git_mode(x))),
            (Some(x), Some(y)) if x.mode != y.mode && x.kind != EntryKind::Symlink => {
                s.header.push(format!("old mode {}", git_mode(x)));
                s.header.push(format!("new mode {}", git_mode(y)));
            }
            _ => {}
        }
        let mode_only = matches!((&a, &b), (Some(x), Some(y)) if x.id == y.id && x.size == y.size);
        if !mode_only {
            self.content_diff(f, &mut s, sides)?;
        }
        f.sections.push(s);
        Ok(())
    }

    /// The note or hunks of a section whose content differs.
    fn content_diff(&self, f: &mut FileDiff, s: &mut Section, sides: Sides) -> Result<(), Error> {
        let Sides { path, a, b, b_src } = sides;
        let name = relpath::display(path);
        let old_name = a.map_or("/dev/null".to_string(), |_| format!("a/{name}"));
        let new_name = b.map_or("/dev/null".to_string(), |_| format!("b/{name}"));
        let (sa, sb) = (a.map_or(0, |e| e.size), b.map_or(0, |e| e.size));
        if sa > MAX_TEXT || sb > MAX_TEXT {
            f.binary = true;
            f.note = Some(format!("too large to diff ({sa} -> {sb} bytes)"));
            s.note = Some(format!(
                "Files {old_name} and {new_name} differ ({sa} -> {sb} bytes; too large to diff)"
            ));
            return Ok(());
        }
        let old = match &a {
            Some(x) => self.side_content(path, x, Src::Store)?,
            None => Vec::new(),
        };
        let new = match &b {
            Some(y) => self.side_content(path, y, b_src)?,
            None => Vec::new(),
        };
        if is_binary(&old) || is_binary(&new) {
            let (lo, ln) = (old.len(), new.len());
            f.binary = true;
            f.note = Some(format!("binary ({lo} -> {ln} bytes)"));
            s.note = Some(format!(
                "Binary files {old_name} and {new_name} differ ({lo} -> {ln} bytes)"
            ));
            return Ok(());
        }
        if old.is_empty() && new.is_empty() {
            return Ok(()); // an empty file created or deleted: the header says it all
        }
        let (old, new) = (
            std::str::from_utf8(&old).expect("checked"),
            std::str::from_utf8(&new).expect("checked"),
        );
        s.header.push(format!("--- {old_name}"));
        s.header.push(format!("+++ {new_name}"));
        let diff = TextDiff::configure()
            .timeout(Duration::from_secs(5))
            .diff_lines(old, new);
        for hunk in diff.unified_diff().context_radius(3).iter_hunks() {
            let mut h = Hunk {
                header: hunk.header().to_string(),
                lines: Vec::new(),
            };
            for ch in hunk.iter_changes() {
                let tag = match ch.tag() {
                    ChangeTag::Delete => {
                        f.removed += 1;
                        Tag::Del
                    }
                    ChangeTag::Insert => {
                        f.added += 1;
                        Tag::Add
                    }
                    ChangeTag::Equal => Tag::Context,
                };
                let v = ch.value();
                h.lines.push(Line {
                    tag,
                    text: v.strip_suffix('\n').unwrap_or(v).to_string(),
                    no_newline: ch.missing_newline(),
                });
            }
            s.hunks.push(h);
        }
        Ok(())
    }
}

fn git_mode(e: &Entry) -> String {
    match e.kind {
        EntryKind::Symlink => "120000".into(),
        EntryKind::Dir => format!("{:o}", 0o040000 | e.mode),
        _ => format!("{:o}", 0o100000 | e.mode),
    }
}

fn is_binary(bytes: &[u8]) -> bool {
    bytes[..bytes.len().min(SNIFF)].contains(&0) || std::str::from_utf8(bytes).is_err()
}
