//! `rewind shadow-path`: the shadow git history's directory, brought up to date first.

use rewind_api::ShadowPathRequest;

use crate::output::emit;
use crate::Cli;

/// Bring the shadow git history up to date and print its git directory.
///
/// Every checkpoint is a commit on the branch of its session (a restore or undo is a commit
/// too; nothing is ever rewritten), in a bare repository under the workspace's state
/// directory, never the workspace's own `.git`:
///
///   git --git-dir "$(rewind shadow-path)" log -p default
///
/// The first call writes the whole tree once; after it, checkpoints add their commits
/// themselves (`[shadow] eager`). Paths Rewind does not capture (ignored, over the size cap)
/// are absent.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Delete the shadow repository and write it again from the op log (frees what only
    /// collected checkpoints used; they are then absent from it).
    #[arg(long)]
    pub rebuild: bool,
}

pub fn run(cli: &Cli, args: &Args) -> anyhow::Result<i32> {
    let r = super::service(cli)?.shadow_path(&ShadowPathRequest {
        rebuild: args.rebuild,
    })?;
    emit(cli.json, &r, |r| println!("{}", r.git_dir.display()))?;
    Ok(0)
}
