//! `rewind write`: a guarded whole-file write from stdin.

use std::io::Read;
use std::path::PathBuf;

use anyhow::Context;
use rewind_api::WriteResponse;

use super::ToolArgs;
use crate::Cli;

/// Guarded write of a whole file from stdin (one exact epoch)
///
/// Writes PATH with the content of stdin, guarded: an existing file must have been read in this
/// session (`rewind read`) and be unchanged since (exit 5 otherwise, with the reason); a new
/// file needs no read. One exact epoch (undo it with `rewind undo`), atomic on disk (a temp
/// file renamed into place, the file's mode kept); the session's read baseline is refreshed,
/// so it can write again without reading again. Prints the epoch id as the last line.
///
/// Examples:
///   printf 'hello\n' | rewind write notes.txt
///   rewind -s agent-7 write --tool-call call_12 src/lib.rs < new_lib.rs
#[derive(clap::Args, Debug)]
#[command(verbatim_doc_comment)]
pub struct Args {
    /// The file (relative to the current directory or -C DIR, or absolute inside the workspace).
    #[arg(value_name = "PATH")]
    pub path: PathBuf,
    #[command(flatten)]
    pub tool: ToolArgs,
}

/// Human output of a guarded write: a headline, one line per changed path, then the epoch
/// id as the last line.
pub fn print_written(o: &WriteResponse, headline: &str) {
    println!("{headline}");
    crate::render::print_changes(&o.changes);
    println!("{}", o.id);
}

pub fn run(cli: &Cli, args: &Args) -> anyhow::Result<i32> {
    let mut content = Vec::new();
    std::io::stdin()
        .read_to_end(&mut content)
        .context("reading the new content from stdin")?;
    let len = content.len();
    let out = super::service(cli)?.write(&rewind_api::WriteRequest {
        path: args.path.clone(),
        content,
        tool: args.tool.tool.clone(),
        tool_call: args.tool.tool_call.clone(),
    })?;
    crate::output::emit(cli.json, &out, |o| {
        print_written(
            o,
            &format!(
                "wrote {} ({len} bytes) as epoch {}",
                args.path.display(),
                o.id
            ),
        )
    })?;
    Ok(0)
}
