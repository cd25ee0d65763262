//! `rewind restore` and `rewind undo`: rewinding, with a preview and conflict refusal.

use std::path::PathBuf;

use rewind_api::{RestoreRequest, RestoreResponse, UndoRequest};

use crate::output::emit;
use crate::{exit, Cli};

/// Restore the session to TARGET: undo every change the session made after it (its own
/// restores included, so restoring to a checkpoint from before a rewind is redo).
///
/// TARGET is a checkpoint id, a message id, or an epoch id ("just before that epoch"); ids are
/// accepted by unique prefix. Paths the session never changed are untouched. A path whose
/// current content is not what the session left there is a conflict: exit 3, nothing changed,
/// unless --force (what it overwrites is kept in the restore epoch, so it can be brought back).
///
/// Examples:
///   rewind restore msg-41 --dry-run
///   rewind restore 3fa9c2 -- src/
///   rewind restore msg-40 --all --force
#[derive(clap::Args, Debug)]
#[command(verbatim_doc_comment)]
pub struct Args {
    pub target: String,
    #[command(flatten)]
    pub common: Common,
    /// Make the whole workspace (or the given paths) equal to TARGET's tree, whoever changed
    /// it (no conflict check; what it overwrites is kept).
    #[arg(long)]
    pub all: bool,
    /// Restore files, leave the session head where it is.
    #[arg(long, conflicts_with = "head_only")]
    pub files_only: bool,
    /// Move the session head only ("undo the message, keep the files").
    #[arg(long)]
    pub head_only: bool,
    /// Limit to these paths (and what is under them), relative to the current directory or
    /// -C DIR.
    #[arg(last = true, value_name = "PATH")]
    pub paths: Vec<PathBuf>,
}

#[derive(clap::Args, Debug)]
pub struct Common {
    /// Print the plan and write nothing; exits as the real run would (3 on conflicts).
    #[arg(long)]
    pub dry_run: bool,
    /// Overwrite conflicting paths (their current content is kept in the restore epoch).
    #[arg(long)]
    pub force: bool,
    /// Where someone else changed a file since, undo only this session's lines when the two
    /// changes touch different lines (else a conflict naming the lines). Default: the
    /// `[restore] merge` setting.
    #[arg(long, conflicts_with = "no_merge")]
    pub merge: bool,
    /// Do not merge, whatever `[restore] merge` says.
    #[arg(long)]
    pub no_merge: bool,
}

impl Common {
    fn merge(&self) -> Option<bool> {
        match (self.merge, self.no_merge) {
            (true, _) => Some(true),
            (_, true) => Some(false),
            _ => None,
        }
    }
}

/// Undo the session's last epoch (or the named one); undoing a restore is redo.
///
/// Examples:
///   rewind undo --dry-run
///   rewind undo 7c01
#[derive(clap::Args, Debug)]
#[command(verbatim_doc_comment)]
pub struct UndoArgs {
    /// The epoch (id or unique prefix); default: the session's newest.
    pub epoch: Option<String>,
    #[command(flatten)]
    pub common: Common,
}

pub fn run(cli: &Cli, args: &Args) -> anyhow::Result<i32> {
    let out = super::service(cli)?.restore(&RestoreRequest {
        target: args.target.clone(),
        dry_run: args.common.dry_run,
        force: args.common.force,
        all: args.all,
        files_only: args.files_only,
        head_only: args.head_only,
        paths: args.paths.clone(),
        merge: args.common.merge(),
    })?;
    report(cli, &out)
}

pub fn run_undo(cli: &Cli, args: &UndoArgs) -> anyhow::Result<i32> {
    let out = super::service(cli)?.undo(&UndoRequest {
        epoch: args.epoch.clone(),
        dry_run: args.common.dry_run,
        force: args.common.force,
        merge: args.common.merge(),
    })?;
    report(cli, &out)
}

/// Each path a restore (or a worktree merge) wrote or would write, and, for a dry run, the
/// diff of each file it merges.
pub(crate) fn print_steps(d: &RestoreResponse) {
    let would = if d.applied { "" } else { "would " };
    for s in &d.steps {
        let merged = d.merged.iter().any(|m| m.path == s.path);
        let action = if merged { "merge" } else { s.action.as_str() };
        println!("{would}{action:<8} {}", s.path);
    }
    if !d.applied {
        for m in &d.merged {
            print!("{}", m.patch);
        }
    }
}

fn report(cli: &Cli, doc: &RestoreResponse) -> anyhow::Result<i32> {
    let refused = doc.refused;
    emit(cli.json, doc, |d| {
        print_steps(d);
        for c in &d.conflicts {
            eprintln!(
                "conflict: {} was changed by {} since this session wrote it",
                String::from_utf8_lossy(&c.path),
                c.changed_by
            );
            if let Some(why) = &c.unmerged {
                eprintln!("  {why}");
            }
        }
        for s in d.skipped.iter().chain(&d.kept) {
            eprintln!(
                "skipped: {}: {}",
                String::from_utf8_lossy(&s.path),
                s.reason
            );
        }
        if refused {
            eprintln!(
                "rewind: refused: {} conflicts, nothing was changed; rerun with --force to overwrite them \
                 (what they hold now is kept in the restore epoch)",
                d.conflicts.len()
            );
        } else if d.steps.is_empty() && !d.applied {
            println!("nothing to restore");
        } else if let Some(e) = &d.epoch {
            println!(
                "restored {} paths; `rewind undo` brings them back",
                d.steps.len()
            );
            println!("{e}");
        }
    })?;
    Ok(if refused { exit::CONFLICT } else { exit::OK })
}
