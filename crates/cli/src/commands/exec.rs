//! `rewind exec`: run a command as one opaque epoch of the session.

use std::ffi::OsString;

use rewind_api::SandboxMode;

use super::ToolArgs;
use crate::Cli;

/// Run CMD as one opaque epoch: capture before, run, capture after, record the changes.
///
/// The command's stdin, stdout and stderr are its own; rewind's messages go to stderr with the
/// prefix `rewind:`. Exits with the command's exit code (128+N if killed by signal N). The
/// command runs in the current directory, or in DIR of `rewind -C DIR`. When `rewind serve`
/// runs for the workspace, the epoch is recorded through it (its file watcher spares the two
/// walks of the tree); REWIND_NO_SERVER=1 records it here.
///
/// Examples:
///   rewind exec -- sed -i s/foo/bar/ src/lib.rs
///   rewind -s agent-7 exec --tool bash --sandbox workspace-write -- cargo fmt
#[derive(clap::Args, Debug)]
#[command(verbatim_doc_comment)]
pub struct Args {
    /// Run under the sandbox in this mode (workspace-write, read-only, danger-full-access).
    #[arg(long, value_name = "MODE")]
    pub sandbox: Option<SandboxMode>,
    #[command(flatten)]
    pub tool: ToolArgs,
    /// The command and its arguments, after `--`.
    #[arg(last = true, required = true, value_name = "CMD")]
    pub command: Vec<OsString>,
}

pub fn run(cli: &Cli, args: &Args) -> anyhow::Result<i32> {
    let service = super::service(cli)?;
    let req = rewind_api::ExecRequest {
        command: args.command.clone(),
        sandbox: args.sandbox,
        tool: args.tool.tool.clone(),
        tool_call: args.tool.tool_call.clone(),
        collect_output: false,
    };
    // With a server running for the workspace, it records the epoch (its watcher knows what
    // changed); the command runs here either way.
    let out = match super::server(&service) {
        Some(server) => service.exec_with(&req, &server)?,
        None => service.exec(&req)?,
    };
    if !out.changes.is_empty() && std::env::var_os("REWIND_QUIET").is_none() {
        eprintln!(
            "rewind: epoch {} recorded {} changed paths",
            out.epoch,
            out.changes.len()
        );
    }
    super::start_baseline_if_due(cli, &service);
    Ok(out.exit_code)
}
