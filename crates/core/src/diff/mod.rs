//! The structured diff every front renders: files → sections (`diff --git` blocks) → hunks →
//! lines, each line tagged (header, hunk header, added, removed, context, note).
//!
//! Three diffs are computed here: what one epoch changed, what a restore of a checkpoint's
//! session would undo (the checkpoint against the workspace now), and one checkpoint's tree
//! against another's. Binary files (a NUL byte or invalid UTF-8) and very large ones are
//! summarised instead of diffed line by line; directories have no section (their change is
//! named only). [`FileDiff::lines`] gives the git-style patch (`diff --git`, `--- a/…`,
//! `+++ b/…`, 3 lines of context, `/dev/null` for created and deleted files, `old mode` /
//! `new mode`), which is also the `patch` text of the JSON document.

mod compute;

use serde::Serialize;

use crate::restore::Skipped;

/// Files larger than this (either side) are not diffed line by line.
pub const MAX_TEXT: u64 = 8 << 20;
/// Binary detection looks for a NUL byte in this many leading bytes.
pub const SNIFF: usize = 8 << 10;

/// One side of a diff.
#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub struct Point {
    /// `epoch-before`, `epoch-after`, `checkpoint` or `now`.
    pub what: &'static str,
    /// The epoch's or checkpoint's full id; `None` for `now`.
    pub id: Option<String>,
}

/// A whole diff: from one point to another, file by file.
#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub struct Diff {
    /// The older side.
    pub from: Point,
    /// The newer side.
    pub to: Point,
    /// The session whose restore is previewed (checkpoint vs now).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session: Option<String>,
    /// Every path that differs.
    pub files: Vec<FileDiff>,
    /// Lines added over all files.
    pub added: usize,
    /// Lines removed over all files.
    pub removed: usize,
    /// Paths that differ but cannot be shown or restored (content never captured).
    pub uncovered: Vec<Skipped>,
    /// An open epoch's paths that have no post image yet, so are not shown (present only when
    /// there are some).
    #[serde(skip_serializing_if = "is_zero")]
    pub pending: usize,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// How one path differs.
#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub struct FileDiff {
    /// Workspace-relative path.
    pub path: String,
    /// create, delete, modify, mode, replace (kind changed) or uncovered.
    pub action: &'static str,
    /// The kind of the newer side (of the older one if deleted): file, executable, symlink,
    /// dir, uncovered.
    pub kind: &'static str,
    /// No line diff: either side is binary (a NUL byte in the first [`SNIFF`] bytes, or not
    /// UTF-8) or larger than [`MAX_TEXT`].
    pub binary: bool,
    /// Lines added to this path.
    pub added: usize,
    /// Lines removed from it.
    pub removed: usize,
    /// Checkpoint vs now only: who changed this path since the session wrote it (a restore
    /// would refuse it without --force).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub conflict: Option<String>,
    /// Why there is no line diff (binary, too large, not captured), if so.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// The git-style patch of this path ([`FileDiff::lines`], one per line).
    pub patch: String,
    /// The structure `patch` is rendered from: what a front that draws its own diff reads.
    pub sections: Vec<Section>,
}

/// One `diff --git` block: its header lines, then a note (binary, too large, not captured) or
/// the hunks.
#[derive(Clone, Debug, Default, Serialize, schemars::JsonSchema)]
pub struct Section {
    /// `diff --git a/P b/P`, mode lines, `--- a/P` and `+++ b/P`.
    pub header: Vec<String>,
    /// Why the section has no hunks (binary, too large, not captured), if so.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// The changed lines with 3 lines of context, in file order.
    pub hunks: Vec<Hunk>,
}

/// One hunk: its `@@ -a,b +c,d @@` header and its lines.
#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub struct Hunk {
    /// `@@ -a,b +c,d @@`.
    pub header: String,
    /// Its lines in order.
    pub lines: Vec<Line>,
}

/// One line of a hunk (without its newline).
#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub struct Line {
    /// [`Tag::Add`], [`Tag::Del`] or [`Tag::Context`].
    pub tag: Tag,
    /// The line's text, without the `+`, `-` or ` ` marker.
    pub text: String,
    /// The line is the last of its side and has no newline.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub no_newline: bool,
}

/// What a line of a rendered patch is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Tag {
    /// A header line (`diff --git`, mode lines, `---`, `+++`).
    Meta,
    /// `@@ … @@`.
    Hunk,
    /// An added line (`+`).
    Add,
    /// A removed line (`-`).
    Del,
    /// An unchanged line around the changes (` `).
    Context,
    /// A note in place of lines (binary, too large, not captured, no newline at end).
    Note,
}

impl FileDiff {
    /// The git-style patch of this path, line by line, each with its tag.
    pub fn lines(&self) -> Vec<(Tag, String)> {
        let mut out = Vec::new();
        for s in &self.sections {
            out.extend(s.header.iter().map(|h| (Tag::Meta, h.clone())));
            if let Some(n) = &s.note {
                out.push((Tag::Note, n.clone()));
            }
            for h in &s.hunks {
                out.push((Tag::Hunk, h.header.clone()));
                for l in &h.lines {
                    let sign = match l.tag {
                        Tag::Add => '+',
                        Tag::Del => '-',
                        _ => ' ',
                    };
                    out.push((l.tag, format!("{sign}{}", l.text)));
                    if l.no_newline {
                        out.push((Tag::Note, "\\ No newline at end of file".into()));
                    }
                }
            }
        }
        out
    }
}

/// Whether `path` is one of `scope` or under one (an empty scope is everything).
pub(crate) fn in_scope(path: &[u8], scope: &[Vec<u8>]) -> bool {
    scope.is_empty()
        || scope.iter().any(|s| {
            path == s.as_slice() || (path.starts_with(s) && path.get(s.len()) == Some(&b'/'))
        })
}
