//! `rewind workspace list | move OLD NEW | adopt FROM [DIR] | forget PATH`: the workspaces
//! registered in the state directory.

use std::path::PathBuf;

use clap::Subcommand;
use rewind_api::{
    RootState, WorkspaceAdoptRequest, WorkspaceForgetRequest, WorkspaceListRequest,
    WorkspaceMoveRequest,
};

use crate::output::{emit, human_bytes};
use crate::Cli;

/// The workspaces registered in the state directory: list, move, adopt, forget.
#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(subcommand)]
    pub command: Sub,
}

#[derive(Subcommand, Debug)]
pub enum Sub {
    /// List every registered workspace: root, whether the root is still there, the size of
    /// its history and when it was last used.
    List,
    /// Move a workspace's history to another directory.
    ///
    /// If OLD is still there and NEW does not exist, the directory is renamed (same file
    /// system only) and its history follows. If the directory was already moved to NEW, its
    /// history is re-linked there. (A command run in a moved directory usually notices the
    /// move and re-links it by itself.)
    ///
    /// Example: rewind workspace move ~/src/proj ~/src/proj2
    Move {
        /// The registered root (it may be gone), or the workspace id.
        old: PathBuf,
        /// Where the workspace is, or goes.
        new: PathBuf,
    },
    /// Start a directory's history from a copy of another workspace's.
    ///
    /// A copy of a project (`cp -r`) gets a history of its own, empty. Adopting instead
    /// registers it with a copy of the original's history (checkpoints, sessions, stored
    /// content), so the original's checkpoints can be restored in the copy. The original is
    /// not changed. DIR must not be registered yet (forget its own history first).
    ///
    /// Example: cp -r ~/src/proj ~/src/try && rewind workspace adopt ~/src/proj ~/src/try
    Adopt {
        /// The workspace whose history to start from: its root (it may be gone) or its id.
        from: PathBuf,
        /// The directory to register [default: the current directory, or -C DIR].
        dir: Option<PathBuf>,
    },
    /// Delete a workspace's history (its whole state). The files of the workspace are not
    /// touched. Asks first on a terminal; scripts pass --yes.
    Forget {
        /// The registered root (it may be gone), or the workspace id.
        path: PathBuf,
        /// Do not ask for confirmation.
        #[arg(long, short = 'y')]
        yes: bool,
    },
}

pub fn run(cli: &Cli, args: &Args) -> anyhow::Result<i32> {
    let service = super::service(cli)?;
    match &args.command {
        Sub::List => {
            let list = service.workspace_list(&WorkspaceListRequest {})?;
            emit(cli.json, &list, |l| {
                if l.workspaces.is_empty() {
                    println!("no workspaces registered");
                    return;
                }
                println!("{:<12}  {:>9}  {:<19}  ROOT", "ID", "SIZE", "LAST USED");
                for w in &l.workspaces {
                    let state = match w.root_state {
                        RootState::Present => "",
                        RootState::Missing => "  (root gone)",
                        RootState::Replaced => "  (root replaced by another directory)",
                    };
                    let used = w
                        .last_used_ns
                        .map(rewind_api::time::local_time)
                        .unwrap_or_else(|| "-".into());
                    println!(
                        "{}  {:>9}  {:<19}  {}{state}",
                        &w.id[..12],
                        human_bytes(w.bytes),
                        used,
                        w.root
                    );
                }
            })?;
        }
        Sub::Move { old, new } => {
            let r = service.workspace_move(&WorkspaceMoveRequest {
                old: old.clone(),
                new: new.clone(),
            })?;
            emit(cli.json, &r, |r| {
                if r.from == r.to {
                    // A copy put in the registered directory's place was given the history.
                    println!(
                        "Workspace {}'s history now goes with the directory at {}",
                        r.id, r.to
                    )
                } else {
                    println!("Moved workspace {} from {} to {}", r.id, r.from, r.to)
                }
            })?;
        }
        Sub::Adopt { from, dir } => {
            let a = service.workspace_adopt(&WorkspaceAdoptRequest {
                from: from.clone(),
                dir: dir.clone(),
            })?;
            emit(cli.json, &a, |a| {
                println!(
                    "Registered {} as workspace {}, starting from the history of {} ({})",
                    a.root, a.id, a.from_root, a.from_id
                )
            })?;
        }
        Sub::Forget { path, yes } => {
            let what = service.workspace_forget(&WorkspaceForgetRequest {
                path: path.clone(),
                dry_run: true,
            })?;
            let question = format!(
                "Forget workspace {} at {}? Its whole history ({}) is deleted.",
                what.id,
                what.root,
                human_bytes(what.bytes)
            );
            let refusal = format!(
                "refusing to forget workspace {} ({}, {} of history) without confirmation",
                what.id,
                what.root,
                human_bytes(what.bytes)
            );
            if !crate::confirm::confirm(*yes, &question, refusal)? {
                eprintln!("Nothing was deleted.");
                return Ok(crate::exit::ERROR);
            }
            let done = service.workspace_forget(&WorkspaceForgetRequest {
                path: path.clone(),
                dry_run: false,
            })?;
            emit(cli.json, &done, |d| {
                println!(
                    "Forgot workspace {} ({}): {} of history deleted",
                    d.id,
                    d.root,
                    human_bytes(d.bytes)
                )
            })?;
        }
    }
    Ok(0)
}
