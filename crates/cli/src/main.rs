//! `rewind`: the command-line front of the Rewind engine. Thin: parse, call the library,
//! print. One file per command under `commands/`. The contract (flags, exit codes, output
//! rules) is `SPEC.md`; see `docs/cli.md`.

mod commands;
mod exit;
mod output;

use std::path::PathBuf;

use clap::{Parser, Subcommand};

/// A workspace time machine for AI coding agents.
#[derive(Parser, Debug)]
#[command(name = "rewind", version, about, long_about = None, propagate_version = true)]
pub struct Cli {
    /// The workspace root [default: current directory].
    #[arg(short = 'C', long = "workspace", global = true, value_name = "DIR")]
    pub workspace: Option<PathBuf>,

    /// Session the command acts for.
    #[arg(
        short = 's',
        long = "session",
        global = true,
        env = "REWIND_SESSION",
        default_value = "default",
        value_name = "ID"
    )]
    pub session: String,

    /// One JSON document on stdout instead of human text.
    #[arg(long, global = true)]
    pub json: bool,

    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Register the workspace and take the baseline capture.
    Init(commands::init::Args),
    /// Workspace root and id, store size, snapshots, uncovered paths.
    Status(commands::status::Args),
    /// Verify every object and reference; name what is lost.
    Fsck(commands::fsck::Args),
    /// Run a command as one opaque epoch of the session.
    Exec(commands::exec::Args),
    /// Open, settle or abort an epoch (for agents' tool hooks).
    Epoch(commands::epoch::Args),
    /// Mark a turn boundary for the session, bound to a conversation node.
    Checkpoint(commands::checkpoint::Args),
    /// Checkpoints and epochs, newest first.
    Log(commands::log::Args),
    /// One checkpoint or epoch with its changes.
    Show(commands::show::Args),
    /// Unified diff of an epoch, of a checkpoint vs now, or between two points.
    Diff(commands::diff::Args),
    /// Restore the session (or the whole workspace) to a checkpoint, message or epoch.
    Restore(commands::restore::Args),
    /// Undo the session's last epoch (or the named one); undoing a restore is redo.
    Undo(commands::restore::UndoArgs),
    /// Finish or roll back interrupted work (every command also does this first).
    Recover(commands::recover::Args),
    /// Run commands in the OS sandbox (layer ④), or check that it works here.
    Sandbox(commands::sandbox::Args),
    // The guarded tools: their help (summary, details, examples) is the doc of their Args.
    Read(commands::read::Args),
    CheckWrite(commands::check_write::Args),
    Write(commands::write::Args),
    Edit(commands::edit::Args),
    ApplyPatch(commands::apply_patch::Args),
}

fn main() {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            // clap prints help/version to stdout with exit 0, usage errors to stderr with 2.
            let code = if e.use_stderr() {
                exit::USAGE
            } else {
                exit::OK
            };
            let _ = e.print();
            std::process::exit(code);
        }
    };
    let result = commands::run(&cli);
    match result {
        Ok(code) => std::process::exit(code),
        Err(err) => {
            eprintln!("rewind: {}", exit::describe(&err));
            std::process::exit(exit::code_for(&err));
        }
    }
}
