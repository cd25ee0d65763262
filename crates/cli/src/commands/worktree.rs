//! `rewind worktree create NAME | list | path NAME | merge NAME | discard NAME`: isolated
//! copies of the workspace for agents to work in, merged back or discarded.

use std::path::PathBuf;

use clap::Subcommand;
use rewind_api::{
    WorktreeCreateRequest, WorktreeDiscardRequest, WorktreeListRequest, WorktreeMergeRequest,
    WorktreePathRequest,
};

use crate::output::{emit, human_bytes};
use crate::{exit, Cli};

/// Worktrees: an isolated copy of the workspace for an agent, merged back or discarded.
///
/// A worktree is a copy of the workspace (or of a checkpoint's tree) outside it, registered as
/// a workspace of its own and linked to this one. Agents work there with the usual commands:
///
///   rewind worktree create agent-1
///   rewind -C "$(rewind worktree path agent-1)" -s agent-1 exec -- make fix
///   rewind worktree merge agent-1 --dry-run
///   rewind worktree merge agent-1          # one epoch here: `rewind undo` takes it back
///   rewind worktree discard agent-1
#[derive(clap::Args, Debug)]
#[command(verbatim_doc_comment)]
pub struct Args {
    #[command(subcommand)]
    pub command: Sub,
}

#[derive(Subcommand, Debug)]
pub enum Sub {
    /// Make a worktree: a copy of the workspace as it is now, or of a checkpoint's tree.
    ///
    /// By default under the state directory ($REWIND_HOME/worktrees/<workspace id>/NAME).
    /// Ignored files and .git are not copied unless --include-ignored (.git never is). File
    /// content is cloned (reflinks) where the file system can, else copied; never hard-linked.
    /// Prints the worktree's path as the last line.
    Create {
        /// Its name: letters, digits, '-', '_', '.'.
        name: String,
        /// Start from this checkpoint (id, prefix or message id) instead of the files now.
        #[arg(long, value_name = "CHECKPOINT")]
        from: Option<String>,
        /// Put it in DIR (new or empty, outside the workspace) instead.
        #[arg(long, value_name = "DIR")]
        path: Option<PathBuf>,
        /// Copy ignored files too (never .git).
        #[arg(long)]
        include_ignored: bool,
    },
    /// List this workspace's worktrees: name, path, base, the paths each side changed since.
    List,
    /// Print a worktree's directory.
    Path {
        /// The worktree's name.
        name: String,
    },
    /// Merge a worktree's changes since its base into this workspace, three-way.
    ///
    /// A path only the worktree changed is taken; a text file both sides changed is merged
    /// line by line when the changes do not overlap. Overlapping lines, a delete against an
    /// edit, different kinds: conflicts, exit 3 and nothing changed, unless --force (the
    /// worktree's side is taken; what it overwrites is kept, so `rewind undo` brings it back).
    /// The merge is one epoch of the session (tool worktree-merge).
    Merge {
        /// The worktree's name.
        name: String,
        /// Print the plan and write nothing here; exits as the real run would (3 on conflicts).
        #[arg(long)]
        dry_run: bool,
        /// Take the worktree's side of every conflict.
        #[arg(long)]
        force: bool,
    },
    /// Remove a worktree's directory and its history.
    ///
    /// Refused while the worktree holds changes this workspace does not have (merge them
    /// first), unless --force.
    Discard {
        /// The worktree's name.
        name: String,
        /// Discard it even with unmerged changes (they are lost).
        #[arg(long)]
        force: bool,
    },
}

pub fn run(cli: &Cli, args: &Args) -> anyhow::Result<i32> {
    let service = super::service(cli)?;
    match &args.command {
        Sub::Create {
            name,
            from,
            path,
            include_ignored,
        } => {
            let w = service.worktree_create(&WorktreeCreateRequest {
                name: name.clone(),
                from: from.clone(),
                path: path.clone(),
                include_ignored: *include_ignored,
            })?;
            emit(cli.json, &w, |w| {
                let how = if w.reflinks {
                    format!("{} cloned (reflinks)", w.reflinked)
                } else {
                    "copied (this file system has no reflinks)".to_string()
                };
                eprintln!(
                    "rewind: worktree {}: {} files, {}, {how}",
                    w.name,
                    w.files,
                    human_bytes(w.bytes)
                );
                for s in &w.skipped {
                    eprintln!(
                        "skipped: {}: {}",
                        String::from_utf8_lossy(&s.path),
                        s.reason
                    );
                }
                println!("{}", w.path);
            })?;
        }
        Sub::List => {
            let l = service.worktree_list(&WorktreeListRequest {})?;
            emit(cli.json, &l, |l| {
                if l.worktrees.is_empty() {
                    println!("no worktrees");
                    return;
                }
                println!(
                    "{:<16}  {:<12}  {:>9}  {:>9}  PATH",
                    "NAME", "BASE", "WORKTREE", "HERE"
                );
                for w in &l.worktrees {
                    let theirs = w
                        .worktree_changes
                        .map(|n| n.to_string())
                        .unwrap_or_else(|| "gone".into());
                    println!(
                        "{:<16}  {:<12}  {:>9}  {:>9}  {}",
                        w.name,
                        &w.base[..12],
                        theirs,
                        w.parent_changes,
                        w.path
                    );
                }
            })?;
        }
        Sub::Path { name } => {
            let p = service.worktree_path(&WorktreePathRequest { name: name.clone() })?;
            emit(cli.json, &p, |p| println!("{}", p.path))?;
        }
        Sub::Merge {
            name,
            dry_run,
            force,
        } => {
            let m = service.worktree_merge(&WorktreeMergeRequest {
                name: name.clone(),
                dry_run: *dry_run,
                force: *force,
            })?;
            let refused = m.result.refused;
            emit(cli.json, &m, |m| {
                let d = &m.result;
                super::restore::print_steps(d);
                for c in &d.conflicts {
                    eprintln!(
                        "conflict: {}: {}",
                        String::from_utf8_lossy(&c.path),
                        c.unmerged.as_deref().unwrap_or(&c.changed_by)
                    );
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
                        "rewind: refused: {} conflicts, nothing was changed; rerun with --force \
                         to take the worktree's side (what it overwrites is kept: `rewind undo` \
                         brings it back)",
                        d.conflicts.len()
                    );
                } else if d.steps.is_empty() {
                    println!("nothing to merge");
                } else if let Some(e) = &d.epoch {
                    println!(
                        "merged {} paths from worktree {}; `rewind undo` takes the merge back",
                        d.steps.len(),
                        m.name
                    );
                    println!("{e}");
                }
            })?;
            return Ok(if refused { exit::CONFLICT } else { exit::OK });
        }
        Sub::Discard { name, force } => {
            let d = service.worktree_discard(&WorktreeDiscardRequest {
                name: name.clone(),
                force: *force,
            })?;
            emit(cli.json, &d, |d| {
                if !d.unmerged.is_empty() {
                    eprintln!(
                        "rewind: {} unmerged change(s) thrown away: {}",
                        d.unmerged.len(),
                        d.unmerged.join(", ")
                    );
                }
                println!("Discarded worktree {} ({})", d.name, d.path)
            })?;
        }
    }
    Ok(exit::OK)
}
