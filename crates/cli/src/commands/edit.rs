//! `rewind edit`: a guarded exact string replacement.

use std::path::PathBuf;

use super::write::print_written;
use super::ToolArgs;
use crate::Cli;

/// Guarded exact string replacement in a file (one exact epoch)
///
/// Replaces the exact text --old with --new in PATH, guarded like `rewind write` (the file must
/// have been read in this session and be unchanged since: exit 5 otherwise). --old must match
/// exactly once unless --all is given; no match or several matches is an error (exit 1) naming
/// the count and the nearest lines or where the matches are. A file with CRLF line endings keeps
/// them (LF in --old/--new is read as CRLF); the final newline is kept as it was. One exact
/// epoch; prints its id as the last line.
///
/// Examples:
///   rewind edit src/lib.rs --old 'let x = 1;' --new 'let x = 2;'
///   rewind edit README.md --old colour --new color --all
#[derive(clap::Args, Debug)]
#[command(verbatim_doc_comment)]
pub struct Args {
    /// The file (relative to the current directory or -C DIR, or absolute inside the workspace).
    #[arg(value_name = "PATH")]
    pub path: PathBuf,
    /// The exact text to replace.
    #[arg(long, value_name = "TEXT", allow_hyphen_values = true)]
    pub old: String,
    /// The text to put in its place.
    #[arg(long, value_name = "TEXT", allow_hyphen_values = true)]
    pub new: String,
    /// Replace every occurrence.
    #[arg(long)]
    pub all: bool,
    #[command(flatten)]
    pub tool: ToolArgs,
}

pub fn run(cli: &Cli, args: &Args) -> anyhow::Result<i32> {
    let out = super::service(cli)?.edit(&rewind_api::EditRequest {
        path: args.path.clone(),
        old: args.old.clone(),
        new: args.new.clone(),
        all: args.all,
        tool: args.tool.tool.clone(),
        tool_call: args.tool.tool_call.clone(),
    })?;
    let n = out.replacements.unwrap_or(0);
    crate::output::emit(cli.json, &out, |o| {
        print_written(
            o,
            &format!(
                "edited {}: {n} replacement{} as epoch {}",
                args.path.display(),
                if n == 1 { "" } else { "s" },
                o.id
            ),
        )
    })?;
    Ok(0)
}
