//! `rewind diff`: unified diffs of an epoch, of a checkpoint against now, or between two
//! checkpoints.
//!
//! The patch is git-style (`diff --git`, `--- a/…`, `+++ b/…`, 3 lines of context, `/dev/null`
//! for created and deleted files, `old mode`/`new mode`), so it can be read by the usual tools.
//! Binary and very large files are summarised, directories only appear in `--stat`.

use std::fmt::Write as _;
use std::path::PathBuf;

use rewind_api::{Diff, DiffRequest, FileDiff, Tag};

use crate::exit;
use crate::output::emit;
use crate::render::{write_stdout, Colour, BOLD, CYAN, DIM, GREEN, RED};
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

pub fn run(cli: &Cli, args: &Args) -> anyhow::Result<i32> {
    let doc = super::service(cli)?.diff(&DiffRequest {
        id: args.id.clone(),
        id2: args.id2.clone(),
        paths: args.paths.clone(),
    })?;
    if doc.pending > 0 {
        if let Some(id) = &doc.from.id {
            eprintln!(
                "rewind: epoch {id} is still open: {} path(s) have no post image yet \
                 and are not shown; `rewind epoch end` records them",
                doc.pending
            );
        }
    }
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

fn print_patch(d: &Diff) {
    let c = Colour::stdout();
    let mut out = String::new();
    for f in &d.files {
        for (tag, line) in f.lines() {
            let painted = match tag {
                Tag::Meta => c.paint(BOLD, &line),
                Tag::Hunk => c.paint(CYAN, &line),
                Tag::Add => c.paint(GREEN, &line),
                Tag::Del => c.paint(RED, &line),
                Tag::Note => c.paint(DIM, &line),
                Tag::Context => line,
            };
            out.push_str(&painted);
            out.push('\n');
        }
    }
    write_stdout(&out);
}

fn print_stat(d: &Diff) {
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
fn print_notes(d: &Diff, stat: bool) {
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
        eprintln!(
            "uncovered: {}: {}",
            String::from_utf8_lossy(&k.path),
            k.reason
        );
    }
}
