//! `rewind apply-patch`: a guarded, all-or-nothing unified diff.

use std::io::Read;
use std::path::PathBuf;

use anyhow::Context;
use rewind_api::{ApplyPatchRequest, ApplyPatchResponse, PatchedFile};

use super::ToolArgs;
use crate::Cli;

/// Guarded, all-or-nothing unified diff from stdin or a file (one exact epoch)
///
/// Applies a unified diff (as `git diff` writes it) from stdin or FILE, guarded and
/// all-or-nothing: every existing file it changes, deletes or renames must have been read in
/// this session and be unchanged since (exit 5 otherwise); every hunk of every file must apply
/// exactly, or nothing is written (exit 1, naming the hunk and the differing line). Adds,
/// deletes, renames, copies and mode changes are supported; binary patches, symlinks and paths
/// outside the workspace are refused. A hunk whose context is not at the stated line is applied
/// where its context matches exactly nearest to it (as `git apply` does; never fuzzy). One exact
/// epoch over every touched path; prints its id as the last line.
///
/// Examples:
///   git diff | rewind apply-patch --dry-run
///   rewind apply-patch fix.patch
///   rewind apply-patch -p0 < plain.diff
#[derive(clap::Args, Debug)]
#[command(verbatim_doc_comment)]
pub struct Args {
    /// The patch file (relative to the current directory or -C DIR) [default: stdin]. The
    /// paths inside the patch are relative to the workspace root, as in `git diff`.
    #[arg(value_name = "FILE")]
    pub file: Option<PathBuf>,
    /// Check everything (guard, every hunk) and write nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Strip N leading components from the file names [default: 1 for git diffs; for plain
    /// diffs 1 when the names look like a/… and b/…, else 0].
    #[arg(short = 'p', long = "strip", value_name = "N")]
    pub strip: Option<usize>,
    #[command(flatten)]
    pub tool: ToolArgs,
}

pub fn run(cli: &Cli, args: &Args) -> anyhow::Result<i32> {
    let service = super::service(cli)?;
    service.open()?;
    // A patch file is read by the service; stdin is read here.
    let patch = match &args.file {
        Some(_) => None,
        None => {
            let mut buf = Vec::new();
            std::io::stdin()
                .read_to_end(&mut buf)
                .context("reading the patch from stdin")?;
            Some(buf)
        }
    };
    let out = service.apply_patch(&ApplyPatchRequest {
        patch,
        file: args.file.clone(),
        dry_run: args.dry_run,
        strip: args.strip,
        tool: args.tool.tool.clone(),
        tool_call: args.tool.tool_call.clone(),
    })?;
    let describe = |f: &PatchedFile| match &f.from {
        Some(from) => format!(
            "  {:<8} {} -> {}",
            f.op,
            String::from_utf8_lossy(from),
            String::from_utf8_lossy(&f.path)
        ),
        None => format!("  {:<8} {}", f.op, String::from_utf8_lossy(&f.path)),
    };
    crate::output::emit(cli.json, &out, |o| match o {
        ApplyPatchResponse::DryRun(d) => {
            println!(
                "the patch applies cleanly ({} files); nothing written",
                d.files.len()
            );
            for f in &d.files {
                println!("{}", describe(f));
            }
        }
        ApplyPatchResponse::Applied(w) => {
            let files = w.files.as_deref().unwrap_or_default();
            println!(
                "applied the patch ({} files) as epoch {}",
                files.len(),
                w.id
            );
            for f in files {
                println!("{}", describe(f));
            }
            println!("{}", w.id);
        }
    })?;
    Ok(0)
}
