//! `rewind-bench`: runs the same work through the git "shadow repository" baseline and through
//! Rewind, in the same run, and reports ratios. Every measured step is a separate child process
//! timed by wall clock, with its peak RSS from `wait4`. See `crates/bench/scripts/run.sh`, `crates/bench/scripts/` and
//! `docs/benchmarks.md`.

mod floor;
mod measure;
mod report;
mod scenarios;

use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use clap::{Parser, Subcommand};
use rewind_core::{OpenOptions, Workspace};
use rewind_store::ObjectId;

#[derive(Parser, Debug)]
#[command(name = "rewind-bench", about)]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// Run the foundation benchmark (capture and restore) and print a Markdown report.
    Run(scenarios::Opts),
    /// Do only the work no capture can skip (list and `lstat` everything; for
    /// `capture`, also read, hash, write and flush every file); timed from outside, a floor.
    Floor(floor::Opts),
    /// (Child process) Restore a workspace to a tree with the library, as a restore command
    /// would, so restore is measured whole-process.
    ChildRestore(ChildRestore),
}

#[derive(clap::Args, Debug)]
struct ChildRestore {
    /// The state directory (`$REWIND_HOME`).
    #[arg(long)]
    home: PathBuf,
    /// The workspace root.
    #[arg(long)]
    root: PathBuf,
    /// The tree to restore to (hex id).
    #[arg(long)]
    tree: String,
    /// Restrict the restore to these paths (relative to the root); the whole tree if absent.
    #[arg(long = "path")]
    paths: Vec<String>,
}

fn child_restore(a: &ChildRestore) -> Result<()> {
    let tree = ObjectId::from_hex(&a.tree).with_context(|| format!("bad tree id {}", a.tree))?;
    let ws = Workspace::open(
        &a.root,
        &OpenOptions {
            force: false,
            home: Some(a.home.clone()),
        },
    )?;
    let scope: Vec<Vec<u8>> = a.paths.iter().map(|p| p.as_bytes().to_vec()).collect();
    let out = ws.restore_tree(tree, &scope, false)?;
    if !out.applied {
        bail!(
            "restore did not apply ({} conflicts, {} skipped)",
            out.conflicts.len(),
            out.skipped.len()
        );
    }
    println!(
        "{}",
        serde_json::json!({
            "steps": out.steps.len(),
            "skipped": out.skipped.len(),
            "kept": out.kept.len(),
        })
    );
    Ok(())
}

fn main() -> Result<()> {
    match Cli::parse().command {
        Cmd::Run(opts) => scenarios::run(&opts),
        Cmd::Floor(opts) => floor::run(&opts),
        Cmd::ChildRestore(a) => child_restore(&a),
    }
}
