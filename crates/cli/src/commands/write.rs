//! `rewind write`: a guarded whole-file write from stdin; shared helpers of the guarded tools.

use std::io::Read;
use std::path::{Path, PathBuf};

use anyhow::Context;
use rewind_core::{PatchedFile, Settled, StagedWrite, ToolCall};
use serde::Serialize;

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

/// How the epoch of a guarded tool is labelled.
#[derive(clap::Args, Debug)]
pub struct ToolArgs {
    /// The tool name recorded with the epoch [default: the command's name].
    #[arg(long, value_name = "NAME")]
    pub tool: Option<String>,
    /// The agent's tool call id recorded with the epoch.
    #[arg(long, value_name = "ID")]
    pub tool_call: Option<String>,
}

impl ToolArgs {
    pub fn call(&self, default: &str) -> ToolCall {
        ToolCall {
            name: self.tool.clone().unwrap_or_else(|| default.to_string()),
            id: self.tool_call.clone(),
        }
    }
}

/// The workspace root (as the workspace will resolve it) and the workspace-relative path of a
/// guarded write, known before the workspace is open: what a [`StagedWrite`] needs.
pub fn staging_target(cli: &Cli, p: &Path) -> anyhow::Result<(PathBuf, Vec<u8>)> {
    let root = super::workspace_root(cli)?;
    let root = std::fs::canonicalize(&root).unwrap_or(root);
    let rel = super::user_path(cli, &root, p)?;
    Ok((root, rel))
}

/// What a guarded write prints.
#[derive(Serialize)]
pub struct Written {
    pub id: String,
    pub session: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub replacements: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub files: Option<Vec<PatchedFile>>,
    pub changes: Vec<super::ChangeView>,
}

impl Written {
    pub fn new(s: &Settled) -> Written {
        Written {
            id: s.epoch.id.clone(),
            session: s.epoch.session.clone(),
            replacements: None,
            files: None,
            changes: s.changes.iter().map(super::ChangeView::from).collect(),
        }
    }

    /// Human output: one line per changed path, then the epoch id as the last line.
    pub fn print(&self, headline: &str) {
        println!("{headline}");
        for c in &self.changes {
            println!("  {:<8} {}", c.action, c.path);
        }
        println!("{}", self.id);
    }
}

pub fn run(cli: &Cli, args: &Args) -> anyhow::Result<i32> {
    let mut content = Vec::new();
    std::io::stdin()
        .read_to_end(&mut content)
        .context("reading the new content from stdin")?;
    let len = content.len();
    // The new content is staged (written and fsynced under no name) while the workspace opens.
    let (root, rel) = staging_target(cli, &args.path)?;
    let staged = StagedWrite::start(&root, rel, content);
    let ws = super::open_workspace(cli, false)?;
    let settled = ws.write_staged(&cli.session, staged, &args.tool.call("write"))?;
    let out = Written::new(&settled);
    crate::output::emit(cli.json, &out, |o| {
        o.print(&format!(
            "wrote {} ({len} bytes) as epoch {}",
            args.path.display(),
            o.id
        ))
    })?;
    Ok(0)
}
