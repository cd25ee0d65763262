//! One module per command. Each exposes `Args` (clap) and `run`, returning the exit code.

pub mod apply_patch;
pub mod check_write;
pub mod checkpoint;
pub mod diff;
pub mod edit;
pub mod epoch;
pub mod exec;
pub mod fsck;
pub mod init;
pub mod log;
pub mod read;
pub mod recover;
pub mod restore;
pub mod sandbox;
pub mod show;
pub mod status;
pub mod write;

use std::path::PathBuf;

use anyhow::Context;
use rewind_core::{OpenOptions, Workspace};

use crate::{Cli, Command};

pub fn run(cli: &Cli) -> anyhow::Result<i32> {
    match &cli.command {
        Command::Init(args) => init::run(cli, args),
        Command::Status(args) => status::run(cli, args),
        Command::Fsck(args) => fsck::run(cli, args),
        Command::Exec(args) => exec::run(cli, args),
        Command::Epoch(args) => epoch::run(cli, args),
        Command::Checkpoint(args) => checkpoint::run(cli, args),
        Command::Log(args) => log::run(cli, args),
        Command::Show(args) => show::run(cli, args),
        Command::Diff(args) => diff::run(cli, args),
        Command::Restore(args) => restore::run(cli, args),
        Command::Undo(args) => restore::run_undo(cli, args),
        Command::Recover(args) => recover::run(cli, args),
        Command::Sandbox(args) => sandbox::run(cli, args),
        Command::Read(args) => read::run(cli, args),
        Command::CheckWrite(args) => check_write::run(cli, args),
        Command::Write(args) => write::run(cli, args),
        Command::Edit(args) => edit::run(cli, args),
        Command::ApplyPatch(args) => apply_patch::run(cli, args),
    }
}

/// The workspace root: `-C DIR`, else the nearest registered ancestor of the current
/// directory (so `rewind status` works from a subdirectory, like git), else the current
/// directory.
pub fn workspace_root(cli: &Cli) -> anyhow::Result<PathBuf> {
    if let Some(dir) = &cli.workspace {
        return Ok(dir.clone());
    }
    let cwd = std::env::current_dir().context("cannot read the current directory")?;
    if let Ok(home) = rewind_core::rewind_home() {
        let canon = std::fs::canonicalize(&cwd).unwrap_or_else(|_| cwd.clone());
        for dir in canon.ancestors() {
            if Workspace::is_registered(&home, dir) {
                return Ok(dir.to_path_buf());
            }
        }
    }
    Ok(cwd)
}

pub fn open_workspace(cli: &Cli, force: bool) -> anyhow::Result<Workspace> {
    let root = workspace_root(cli)?;
    let ws = Workspace::open(&root, &OpenOptions { force, home: None })?;
    rewind_core::trace::phase("workspace open");
    Ok(ws)
}

/// A change as commands print it.
#[derive(serde::Serialize)]
pub struct ChangeView {
    pub action: &'static str,
    pub path: String,
    pub before: Option<rewind_core::EntryView>,
    pub after: Option<rewind_core::EntryView>,
}

impl From<&rewind_core::Change> for ChangeView {
    fn from(c: &rewind_core::Change) -> Self {
        let v = rewind_core::restore::StepView::from(c);
        ChangeView {
            action: v.action,
            path: v.path,
            before: v.before,
            after: v.after,
        }
    }
}
