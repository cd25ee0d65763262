//! `rewind tui`: the terminal UI (the `rewind-tui` crate).

use crate::Cli;

/// The terminal UI: the session's timeline as its conversation tree, diffs, rewind with a
/// preview and a confirmation, undo, sessions, a path filter and the sandbox toggle.
///
/// Keys are shown in the footer (`?` lists them all). The view follows the workspace: what
/// other processes record appears within a second. Nothing is written until a rewind, an undo
/// or a sandbox mode change (`S`, then `t`) is confirmed, and the workspace lock is taken only
/// for a rewind or undo.
///
/// Examples:
///   rewind tui
///   rewind -s agent-7 tui
///   rewind -C ~/src/project tui
#[derive(clap::Args, Debug)]
#[command(verbatim_doc_comment)]
pub struct Args {}

pub fn run(cli: &Cli, _args: &Args) -> anyhow::Result<i32> {
    rewind_tui::run(&cli.dir, &cli.session)?;
    Ok(0)
}
