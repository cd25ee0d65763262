//! `rewind edit`: a guarded exact string replacement.

use std::path::PathBuf;

use rewind_core::{EditSpec, StagedWrite};

use super::write::{staging_target, ToolArgs, Written};
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
    let spec = EditSpec {
        old: args.old.clone().into_bytes(),
        new: args.new.clone().into_bytes(),
        all: args.all,
    };
    // The edited content is computed and staged (written and fsynced under no name) while the
    // workspace opens; the edit proper uses it if the file is still what the staging read.
    let (root, rel) = staging_target(cli, &args.path)?;
    let staged = StagedWrite::start_edit(&root, rel, spec.clone());
    let ws = super::open_workspace(cli, false)?;
    let edited = ws.edit_staged(&cli.session, staged, &spec, &args.tool.call("edit"))?;
    let mut out = Written::new(&edited.settled);
    out.replacements = Some(edited.replacements);
    let n = edited.replacements;
    crate::output::emit(cli.json, &out, |o| {
        o.print(&format!(
            "edited {}: {n} replacement{} as epoch {}",
            args.path.display(),
            if n == 1 { "" } else { "s" },
            o.id
        ))
    })?;
    Ok(0)
}
