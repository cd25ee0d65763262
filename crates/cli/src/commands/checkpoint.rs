//! `rewind checkpoint`: mark a turn boundary for the session.

use std::path::PathBuf;

use crate::output::emit;
use crate::Cli;

/// Mark a turn boundary, bound to conversation node (message) ID; prints the checkpoint id.
///
/// Examples:
///   rewind checkpoint --message msg-42 --label "after refactor"
///   rewind -s agent-7 checkpoint --message msg-43 --parent msg-42 --payload-file state.json
#[derive(clap::Args, Debug)]
#[command(verbatim_doc_comment)]
pub struct Args {
    /// The conversation node (message id) this checkpoint belongs to.
    #[arg(long, value_name = "ID")]
    pub message: Option<String>,
    /// The node's parent (default: the session head).
    #[arg(long, value_name = "ID")]
    pub parent: Option<String>,
    #[arg(long, value_name = "TEXT")]
    pub label: Option<String>,
    /// Stored with the checkpoint and returned by `restore --json` (e.g. the conversation);
    /// relative to the current directory or -C DIR. At most checkpoint.max_payload_size
    /// (config; default 64M).
    #[arg(long, value_name = "F")]
    pub payload_file: Option<PathBuf>,
}

pub fn run(cli: &Cli, args: &Args) -> anyhow::Result<i32> {
    let service = super::service(cli)?;
    let out = service.checkpoint(&rewind_api::CheckpointRequest {
        message: args.message.clone(),
        parent: args.parent.clone(),
        label: args.label.clone(),
        payload_file: args.payload_file.clone(),
    })?;
    emit(cli.json, &out, |o| println!("{}", o.id))?;
    if service.gc_due().unwrap_or(false) {
        start_detached(cli, &["gc", "--auto"]);
    }
    // `[remote] auto_push = "checkpoint"`: the remote gets the checkpoint without the agent
    // waiting for the upload. (One push of a workspace runs at a time; a second waits.)
    for name in service.auto_push_remotes().unwrap_or_default() {
        start_detached(cli, &["push", &name]);
    }
    Ok(0)
}

/// Starts `rewind ARGS` for this workspace as a detached process (its own process group, no
/// terminal, no output) and does not wait for it: the checkpoint is done. Used for
/// `gc --auto` (which gives way at once if another gc of the workspace runs) and the automatic
/// push. Best effort: a failure to start it only means the next checkpoint tries again.
fn start_detached(cli: &Cli, args: &[&str]) {
    use std::os::unix::process::CommandExt;
    use std::process::{Command, Stdio};
    let Ok(exe) = std::env::current_exe() else {
        return;
    };
    let _ = Command::new(exe)
        .arg("-C")
        .arg(&cli.dir)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .env_remove("REWIND_FAILPOINT")
        .process_group(0)
        .spawn();
}
