//! `rewind diff`: unified diffs of an epoch, of a checkpoint against now, or between two
//! checkpoints.
//!
//! The patch is git-style (`diff --git`, `--- a/…`, `+++ b/…`, 3 lines of context, `/dev/null`
//! for created and deleted files, `old mode`/`new mode`), so it can be read by the usual tools.
//! Binary and very large files are summarised, directories only appear in `--stat`.

use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use rewind_core::{relpath, Change, Entry, RewindOptions, Skipped, Target, Workspace};
use rewind_store::EntryKind;
use serde::Serialize;
use similar::{ChangeTag, TextDiff};

use std::fmt::Write as _;

use super::log::{write_stdout, Colour, BOLD, CYAN, DIM, GREEN, RED};
use crate::exit::{self, fail};
use crate::output::emit;
use crate::Cli;

/// Unified diff of an epoch, of a checkpoint against now, or between two checkpoints.
///
///   rewind diff EPOCH        what the epoch changed (before → after)
///   rewind diff CHECKPOINT   what a restore of the checkpoint's session to it would undo:
///                            the checkpoint side is a/, the workspace now is b/
///   rewind diff CKPT1 CKPT2  the whole workspace tree of CKPT1 (a/) against CKPT2's (b/)
///
/// Ids are accepted by unique prefix; a message id names its checkpoint. Binary files (a NUL
/// byte or invalid UTF-8) are summarised with their sizes; directories appear only in --stat.
///
/// Examples:
///   rewind diff 7c01
///   rewind diff msg-41 --stat
///   rewind diff 3fa9c2 8d1e07 -- src/
#[derive(clap::Args, Debug)]
#[command(verbatim_doc_comment)]
pub struct Args {
    /// Epoch or checkpoint (id, unique prefix or message id).
    #[arg(value_name = "ID")]
    pub id: String,
    /// A second checkpoint: diff ID's tree against this one's.
    #[arg(value_name = "ID2")]
    pub id2: Option<String>,
    /// Per-path counts of added and removed lines and a summary, instead of the patch.
    #[arg(long)]
    pub stat: bool,
    /// Limit to these paths (and what is under them), relative to the current directory or
    /// -C DIR.
    #[arg(last = true, value_name = "PATH")]
    pub paths: Vec<PathBuf>,
}

/// Files larger than this (either side) are not diffed line by line.
const MAX_TEXT: u64 = 8 << 20;
/// Binary detection looks for a NUL byte in this many leading bytes.
const SNIFF: usize = 8 << 10;

#[derive(Serialize)]
struct Point {
    /// `epoch-before`, `epoch-after`, `checkpoint` or `now`.
    what: &'static str,
    id: Option<String>,
}

#[derive(Serialize)]
struct FileDiff {
    path: String,
    /// create, delete, modify, mode, replace (kind changed) or uncovered.
    action: &'static str,
    /// The kind of the newer side (of the older one if deleted): file, executable, symlink,
    /// dir, uncovered.
    kind: &'static str,
    binary: bool,
    added: usize,
    removed: usize,
    /// Checkpoint vs now only: who changed this path since the session wrote it (a restore
    /// would refuse it without --force).
    #[serde(skip_serializing_if = "Option::is_none")]
    conflict: Option<String>,
    /// Why there is no line diff (binary, too large, not captured), if so.
    #[serde(skip_serializing_if = "Option::is_none")]
    note: Option<String>,
    patch: String,
    #[serde(skip)]
    lines: Vec<(Style, String)>,
}

#[derive(Serialize)]
struct Doc {
    from: Point,
    to: Point,
    /// The session whose restore is previewed (checkpoint vs now).
    #[serde(skip_serializing_if = "Option::is_none")]
    session: Option<String>,
    files: Vec<FileDiff>,
    added: usize,
    removed: usize,
    /// Paths that differ but cannot be shown or restored (content never captured).
    uncovered: Vec<Skipped>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Style {
    Meta,
    Hunk,
    Add,
    Del,
    Context,
    Note,
}

/// Where a side's content is read from.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Src {
    Store,
    /// The workspace as it is now (the store may not hold it: an edit made outside epochs).
    Disk,
}

pub fn run(cli: &Cli, args: &Args) -> anyhow::Result<i32> {
    let ws = super::open_workspace(cli, false)?;
    let mut scope = Vec::new();
    for p in &args.paths {
        scope.push(super::user_path(cli, ws.root(), p)?);
    }
    if scope.iter().any(Vec::is_empty) {
        scope.clear(); // the root itself: everything
    }
    let first = ws.resolve(&cli.session, &args.id)?;
    let second = match &args.id2 {
        Some(t) => Some(ws.resolve(&cli.session, t)?),
        None => None,
    };
    let mut doc = match (first, second) {
        (Target::Epoch(e), None) => {
            let mut pending = 0;
            let mut files = Vec::new();
            for (c, p) in ws.epoch_changes_pending(&e.id)? {
                if p {
                    pending += 1;
                } else if in_scope(&c.path, &scope) {
                    files.push(file_diff(&ws, &c.path, c.before, c.after, Src::Store)?);
                }
            }
            if pending > 0 {
                eprintln!(
                    "rewind: epoch {} is still open: {pending} path(s) have no post image yet \
                     and are not shown; `rewind epoch end` records them",
                    e.id
                );
            }
            Doc {
                from: Point {
                    what: "epoch-before",
                    id: Some(e.id.clone()),
                },
                to: Point {
                    what: "epoch-after",
                    id: Some(e.id),
                },
                session: None,
                files,
                added: 0,
                removed: 0,
                uncovered: Vec::new(),
            }
        }
        (Target::Checkpoint(c), None) => {
            // What `rewind -s SESSION restore C` would do, conflicting paths included (forced,
            // flagged). Each step goes from now (`before`) to the checkpoint side (`after`);
            // the patch shows the checkpoint as a/ and now as b/.
            let opts = RewindOptions {
                dry_run: true,
                force: true,
                mode: rewind_core::Mode::FilesOnly,
                paths: scope.clone(),
                ..Default::default()
            };
            let target = Target::Checkpoint(c.clone());
            let mut out = ws.restore(&c.session, &target, &opts)?;
            out.steps.sort_by(|x, y| x.path.cmp(&y.path));
            let mut files = Vec::new();
            for s in &out.steps {
                if !in_scope(&s.path, &scope) {
                    continue;
                }
                let mut f = file_diff(&ws, &s.path, s.after, s.before, Src::Disk)?;
                f.conflict = out
                    .conflicts
                    .iter()
                    .find(|k| k.path == s.path)
                    .map(|k| k.changed_by.clone());
                files.push(f);
            }
            Doc {
                from: Point {
                    what: "checkpoint",
                    id: Some(c.id.clone()),
                },
                to: Point {
                    what: "now",
                    id: None,
                },
                session: Some(c.session.clone()),
                files,
                added: 0,
                removed: 0,
                uncovered: out.skipped,
            }
        }
        (Target::Checkpoint(a), Some(Target::Checkpoint(b))) => {
            let plan = ws.diff_trees_full(a.root, b.root)?;
            let mut files = Vec::new();
            for c in &plan.steps {
                if in_scope(&c.path, &scope) {
                    files.push(file_diff(&ws, &c.path, c.before, c.after, Src::Store)?);
                }
            }
            let uncovered = plan
                .skipped
                .into_iter()
                .filter(|k| in_scope(&k.path, &scope))
                .map(|k| Skipped {
                    path: k.path,
                    reason: "differs, but one side was never captured".into(),
                })
                .collect();
            Doc {
                from: Point {
                    what: "checkpoint",
                    id: Some(a.id),
                },
                to: Point {
                    what: "checkpoint",
                    id: Some(b.id),
                },
                session: None,
                files,
                added: 0,
                removed: 0,
                uncovered,
            }
        }
        (a, Some(b)) => {
            let kind = |t: &Target| match t {
                Target::Epoch(_) => "an epoch",
                Target::Checkpoint(_) => "a checkpoint",
            };
            return Err(fail(
                exit::USAGE,
                format!(
                    "diff of two points supports two checkpoints, and {} is {} and {} is {}; \
                     `rewind diff EPOCH` shows one epoch's own changes, `rewind diff CHECKPOINT` \
                     a checkpoint against now",
                    a.id(),
                    kind(&a),
                    b.id(),
                    kind(&b)
                ),
            ));
        }
    };
    doc.added = doc.files.iter().map(|f| f.added).sum();
    doc.removed = doc.files.iter().map(|f| f.removed).sum();
    emit(cli.json, &doc, |d| {
        if args.stat {
            print_stat(d)
        } else {
            print_patch(d)
        }
        print_notes(d, args.stat);
    })?;
    Ok(exit::OK)
}

fn in_scope(path: &[u8], scope: &[Vec<u8>]) -> bool {
    scope.is_empty()
        || scope.iter().any(|s| {
            path == s.as_slice() || (path.starts_with(s) && path.get(s.len()) == Some(&b'/'))
        })
}

fn has_content(e: &Entry) -> bool {
    matches!(e.kind, EntryKind::File | EntryKind::Symlink)
}

fn git_mode(e: &Entry) -> String {
    match e.kind {
        EntryKind::Symlink => "120000".into(),
        EntryKind::Dir => format!("{:o}", 0o040000 | e.mode),
        _ => format!("{:o}", 0o100000 | e.mode),
    }
}

/// Reads one side's bytes. `Src::Disk` reads the workspace (falling back to the store).
fn content(ws: &Workspace, path: &[u8], e: &Entry, src: Src) -> anyhow::Result<Vec<u8>> {
    if src == Src::Disk {
        let full = relpath::to_path(ws.root(), path);
        let disk = if e.kind == EntryKind::Symlink {
            std::fs::read_link(&full).map(|t| t.as_os_str().as_bytes().to_vec())
        } else {
            std::fs::read(&full)
        };
        if let Ok(bytes) = disk {
            return Ok(bytes);
        }
    }
    ws.read_content(&e.id)
        .with_context(|| format!("reading the stored content of {}", relpath::display(path)))
}

fn is_binary(bytes: &[u8]) -> bool {
    bytes[..bytes.len().min(SNIFF)].contains(&0) || std::str::from_utf8(bytes).is_err()
}

/// The diff of one path from `a` (old, a/) to `b` (new, b/). `b_src` says where b's content
/// is read from; a's always comes from the store.
fn file_diff(
    ws: &Workspace,
    path: &[u8],
    a: Option<Entry>,
    b: Option<Entry>,
    b_src: Src,
) -> anyhow::Result<FileDiff> {
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
            rewind_core::restore::action(&change)
        },
        kind: b.or(a).map(|e| e.kind_name()).unwrap_or("none"),
        binary: false,
        added: 0,
        removed: 0,
        conflict: None,
        note: None,
        patch: String::new(),
        lines: Vec::new(),
    };
    if uncovered {
        let which: Vec<String> = [("a", a), ("b", b)]
            .iter()
            .filter(|(_, e)| e.is_some_and(|e| e.kind == EntryKind::Uncovered))
            .map(|(s, e)| format!("{s}/{name} ({} bytes)", e.map_or(0, |e| e.size)))
            .collect();
        let note = format!("not captured: {}", which.join(" and "));
        f.lines
            .push((Style::Meta, format!("diff --git a/{name} b/{name}")));
        f.lines.push((Style::Note, format!("Uncovered: {note}")));
        f.note = Some(note);
    } else {
        let a_c = a.filter(has_content);
        let b_c = b.filter(has_content);
        match (a_c, b_c) {
            (Some(x), Some(y)) if x.kind != y.kind => {
                // A symlink became a file or back: shown as a deletion and a creation, like git.
                section(ws, &mut f, path, Some(x), None, b_src)?;
                section(ws, &mut f, path, None, Some(y), b_src)?;
            }
            (None, None) => {} // directories: --stat only
            (x, y) => section(ws, &mut f, path, x, y, b_src)?,
        }
    }
    f.patch = f
        .lines
        .iter()
        .map(|(_, l)| format!("{l}\n"))
        .collect::<String>();
    Ok(f)
}

/// One `diff --git` section: `a` → `b`, at least one present, both with content kinds.
fn section(
    ws: &Workspace,
    f: &mut FileDiff,
    path: &[u8],
    a: Option<Entry>,
    b: Option<Entry>,
    b_src: Src,
) -> anyhow::Result<()> {
    let name = relpath::display(path);
    let lines = &mut f.lines;
    lines.push((Style::Meta, format!("diff --git a/{name} b/{name}")));
    match (&a, &b) {
        (None, Some(y)) => lines.push((Style::Meta, format!("new file mode {}", git_mode(y)))),
        (Some(x), None) => lines.push((Style::Meta, format!("deleted file mode {}", git_mode(x)))),
        (Some(x), Some(y)) if x.mode != y.mode && x.kind != EntryKind::Symlink => {
            lines.push((Style::Meta, format!("old mode {}", git_mode(x))));
            lines.push((Style::Meta, format!("new mode {}", git_mode(y))));
        }
        _ => {}
    }
    if let (Some(x), Some(y)) = (&a, &b) {
        if x.id == y.id && x.size == y.size {
            return Ok(()); // mode only
        }
    }
    let old_name = a.map_or("/dev/null".to_string(), |_| format!("a/{name}"));
    let new_name = b.map_or("/dev/null".to_string(), |_| format!("b/{name}"));
    let (sa, sb) = (a.map_or(0, |e| e.size), b.map_or(0, |e| e.size));
    if sa > MAX_TEXT || sb > MAX_TEXT {
        f.binary = true;
        f.note = Some(format!("too large to diff ({sa} -> {sb} bytes)"));
        lines.push((
            Style::Note,
            format!(
                "Files {old_name} and {new_name} differ ({sa} -> {sb} bytes; too large to diff)"
            ),
        ));
        return Ok(());
    }
    let old = match &a {
        Some(x) => content(ws, path, x, Src::Store)?,
        None => Vec::new(),
    };
    let new = match &b {
        Some(y) => content(ws, path, y, b_src)?,
        None => Vec::new(),
    };
    if is_binary(&old) || is_binary(&new) {
        f.binary = true;
        f.note = Some(format!("binary ({} -> {} bytes)", old.len(), new.len()));
        lines.push((
            Style::Note,
            format!(
                "Binary files {old_name} and {new_name} differ ({} -> {} bytes)",
                old.len(),
                new.len()
            ),
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
    lines.push((Style::Meta, format!("--- {old_name}")));
    lines.push((Style::Meta, format!("+++ {new_name}")));
    let diff = TextDiff::configure()
        .timeout(Duration::from_secs(5))
        .diff_lines(old, new);
    for hunk in diff.unified_diff().context_radius(3).iter_hunks() {
        lines.push((Style::Hunk, hunk.header().to_string()));
        for ch in hunk.iter_changes() {
            let (style, sign) = match ch.tag() {
                ChangeTag::Delete => {
                    f.removed += 1;
                    (Style::Del, '-')
                }
                ChangeTag::Insert => {
                    f.added += 1;
                    (Style::Add, '+')
                }
                ChangeTag::Equal => (Style::Context, ' '),
            };
            let v = ch.value();
            lines.push((
                style,
                format!("{sign}{}", v.strip_suffix('\n').unwrap_or(v)),
            ));
            if ch.missing_newline() {
                lines.push((Style::Note, "\\ No newline at end of file".into()));
            }
        }
    }
    Ok(())
}

fn print_patch(d: &Doc) {
    let c = Colour::stdout();
    let mut out = String::new();
    for f in &d.files {
        for (style, line) in &f.lines {
            let painted = match style {
                Style::Meta => c.paint(BOLD, line),
                Style::Hunk => c.paint(CYAN, line),
                Style::Add => c.paint(GREEN, line),
                Style::Del => c.paint(RED, line),
                Style::Note => c.paint(DIM, line),
                Style::Context => line.clone(),
            };
            out.push_str(&painted);
            out.push('\n');
        }
    }
    write_stdout(&out);
}

fn print_stat(d: &Doc) {
    let c = Colour::stdout();
    let mut out = String::new();
    let shown = |f: &FileDiff| {
        if f.kind == "dir" {
            format!("{}/", f.path)
        } else {
            f.path.clone()
        }
    };
    let w = d
        .files
        .iter()
        .map(|f| shown(f).chars().count())
        .max()
        .unwrap_or(0);
    for f in &d.files {
        let what = if f.kind == "dir" {
            format!("dir ({})", f.action)
        } else if let Some(n) = &f.note {
            n.clone()
        } else if f.action == "mode" {
            "mode".into()
        } else {
            format!(
                "{} {}",
                c.paint(GREEN, &format!("+{}", f.added)),
                c.paint(RED, &format!("-{}", f.removed))
            )
        };
        let flag = if f.conflict.is_some() {
            " (conflict)"
        } else {
            ""
        };
        let _ = writeln!(out, " {:<w$} | {what}{flag}", shown(f));
    }
    let n = d.files.len();
    let _ = writeln!(
        out,
        " {n} path{} changed, {} insertion{}(+), {} deletion{}(-)",
        if n == 1 { "" } else { "s" },
        d.added,
        if d.added == 1 { "" } else { "s" },
        d.removed,
        if d.removed == 1 { "" } else { "s" },
    );
    write_stdout(&out);
}

/// What does not fit in the patch, on stderr so stdout stays a clean patch.
fn print_notes(d: &Doc, stat: bool) {
    if d.files.is_empty() && d.uncovered.is_empty() && !stat {
        eprintln!("no differences");
    }
    let conflicts: Vec<&FileDiff> = d.files.iter().filter(|f| f.conflict.is_some()).collect();
    for f in &conflicts {
        eprintln!(
            "conflict: {} was changed by {} since the session wrote it",
            f.path,
            f.conflict.as_deref().unwrap_or("?")
        );
    }
    if !conflicts.is_empty() {
        eprintln!(
            "note: `rewind restore` would refuse these {} path(s) without --force",
            conflicts.len()
        );
    }
    for k in &d.uncovered {
        eprintln!("uncovered: {}: {}", relpath::display(&k.path), k.reason);
    }
}
