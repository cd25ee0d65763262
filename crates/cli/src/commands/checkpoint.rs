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
        super::start_detached(cli, &["gc", "--auto"]);
    }
    // `[remote] auto_push = "checkpoint"`: the remote gets the checkpoint without the agent
    // waiting for the upload. (One push of a workspace runs at a time; a second waits.)
    for name in service.auto_push_remotes().unwrap_or_default() {
        super::start_detached(cli, &["push", &name]);
    }
    super::start_baseline_if_due(cli, &service);
    Ok(0)
}
