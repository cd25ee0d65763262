//! One module per command. Each exposes `Args` (clap) and `run`, returning the exit code.

pub mod fsck;
pub mod init;
pub mod sandbox;
pub mod status;

use std::path::PathBuf;

use anyhow::Context;
use rewind_core::{OpenOptions, Workspace};

use crate::{Cli, Command};

pub fn run(cli: &Cli) -> anyhow::Result<i32> {
    match &cli.command {
        Command::Init(args) => init::run(cli, args),
        Command::Status(args) => status::run(cli, args),
        Command::Fsck(args) => fsck::run(cli, args),
        Command::Sandbox(args) => sandbox::run(cli, args),
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
    Ok(Workspace::open(&root, &OpenOptions { force, home: None })?)
}
