//! `rewind exec`: run a command as one opaque epoch of the session.

use std::ffi::OsString;
use std::os::unix::process::ExitStatusExt;

use anyhow::Context;
use rewind_core::EpochSpec;
use rewind_sandbox::Mode as SandboxMode;

use crate::Cli;

/// Run CMD as one opaque epoch: capture before, run, capture after, record the changes.
///
/// The command's stdin, stdout and stderr are its own; rewind's messages go to stderr with the
/// prefix `rewind:`. Exits with the command's exit code (128+N if killed by signal N). The
/// command runs in the current directory, or in DIR of `rewind -C DIR`.
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
    /// The tool name recorded with the epoch (e.g. bash).
    #[arg(long, value_name = "NAME")]
    pub tool: Option<String>,
    /// The agent's tool call id recorded with the epoch.
    #[arg(long, value_name = "ID")]
    pub tool_call: Option<String>,
    /// The command and its arguments, after `--`.
    #[arg(last = true, required = true, value_name = "CMD")]
    pub command: Vec<OsString>,
}

pub fn run(cli: &Cli, args: &Args) -> anyhow::Result<i32> {
    let ws = super::open_workspace(cli, false)?;
    // As `git -C`/`make -C`: the command runs in DIR of `-C`, else where rewind was started,
    // sandboxed or not (the invocation directory is the root or inside it).
    let cwd = &cli.dir;
    // Refuse before anything is recorded if the sandbox cannot run.
    let sandboxed = match args.sandbox {
        Some(mode) => {
            let mut policy = super::sandbox::policy(ws.root())?;
            policy.set_mode(mode);
            Some(policy)
        }
        None => None,
    };
    let spec = EpochSpec {
        tool: args.tool.clone().or_else(|| Some("exec".into())),
        tool_call: args.tool_call.clone(),
        paths: Vec::new(),
        process_owned: true,
        note: Some(command_line(&args.command)),
    };
    let epoch = ws.begin_epoch(&cli.session, &spec)?;
    rewind_core::trace::phase("epoch begun");
    let status = match &sandboxed {
        Some(policy) => policy
            .command(&args.command, Some(cwd))
            .and_then(|c| c.status())
            .map_err(anyhow::Error::from),
        None => std::process::Command::new(&args.command[0])
            .args(&args.command[1..])
            .current_dir(cwd)
            .status()
            .with_context(|| format!("cannot run {}", args.command[0].to_string_lossy())),
    };
    rewind_core::trace::phase("command ran");
    // Settle even when the command could not start: what it may have changed is recorded.
    let settled = ws.end_epoch(&cli.session, Some(&epoch.id), status.is_err());
    rewind_core::trace::phase("epoch settled");
    let status = status?;
    let settled = settled?;
    if !settled.changes.is_empty() && std::env::var_os("REWIND_QUIET").is_none() {
        eprintln!(
            "rewind: epoch {} recorded {} changed paths",
            settled.epoch.id,
            settled.changes.len()
        );
    }
    Ok(status
        .code()
        .unwrap_or_else(|| 128 + status.signal().unwrap_or(0)))
}

/// The command as a shell would show it, shortened for the log.
fn command_line(argv: &[OsString]) -> String {
    let mut s = argv
        .iter()
        .map(|a| a.to_string_lossy())
        .collect::<Vec<_>>()
        .join(" ");
    if s.len() > 200 {
        let mut cut = 200;
        while !s.is_char_boundary(cut) {
            cut -= 1;
        }
        s.truncate(cut);
        s.push('…');
    }
    s
}
