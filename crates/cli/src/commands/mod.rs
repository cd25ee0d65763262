//! One module per command. Each exposes `Args` (clap) and `run`, returning the exit code.

pub mod apply_patch;
pub mod baseline;
pub mod check_write;
pub mod checkpoint;
pub mod clone;
pub mod completions;
pub mod diff;
pub mod edit;
pub mod epoch;
pub mod exec;
pub mod fsck;
pub mod gc;
pub mod hook;
pub mod init;
pub mod log;
pub mod man;
pub mod mcp;
pub mod pin;
pub mod pull;
pub mod push;
pub mod read;
pub mod recover;
pub mod remote;
pub mod restore;
pub mod sandbox;
pub mod serve;
pub mod shadow_path;
pub mod show;
pub mod status;
pub mod tui;
pub mod ui;
pub mod workspace;
pub mod worktree;
pub mod write;

use std::path::{Path, PathBuf};

use anyhow::Context;

use crate::{Cli, Command};

pub fn run(cli: &mut Cli) -> anyhow::Result<i32> {
    cli.dir = invocation_dir(cli.workspace.as_deref())?;
    let cli = &*cli;
    match &cli.command {
        Command::Init(args) => init::run(cli, args),
        Command::Status(args) => status::run(cli, args),
        Command::Workspace(args) => workspace::run(cli, args),
        Command::Worktree(args) => worktree::run(cli, args),
        Command::Fsck(args) => fsck::run(cli, args),
        Command::Exec(args) => exec::run(cli, args),
        Command::Epoch(args) => epoch::run(cli, args),
        Command::Checkpoint(args) => checkpoint::run(cli, args),
        Command::Log(args) => log::run(cli, args),
        Command::Show(args) => show::run(cli, args),
        Command::Diff(args) => diff::run(cli, args),
        Command::Restore(args) => restore::run(cli, args),
        Command::Undo(args) => restore::run_undo(cli, args),
        Command::Recover(args) => recover::run(cli, args),
        Command::Gc(args) => gc::run(cli, args),
        Command::Baseline(args) => baseline::run(cli, args),
        Command::ShadowPath(args) => shadow_path::run(cli, args),
        Command::Pin(args) => pin::run(cli, args),
        Command::Unpin(args) => pin::run_unpin(cli, args),
        Command::Sandbox(args) => sandbox::run(cli, args),
        Command::Serve(args) => serve::run(cli, args),
        Command::Ui(args) => ui::run(cli, args),
        Command::Hook(args) => hook::run(cli, args),
        Command::Mcp(args) => mcp::run(cli, args),
        Command::Read(args) => read::run(cli, args),
        Command::CheckWrite(args) => check_write::run(cli, args),
        Command::Write(args) => write::run(cli, args),
        Command::Edit(args) => edit::run(cli, args),
        Command::ApplyPatch(args) => apply_patch::run(cli, args),
        Command::Completions(args) => completions::run(cli, args),
        Command::Man(args) => man::run(cli, args),
        Command::Tui(args) => tui::run(cli, args),
        Command::Remote(args) => remote::run(cli, args),
        Command::Push(args) => push::run(cli, args),
        Command::Pull(args) => pull::run(cli, args),
        Command::Clone(args) => clone::run(cli, args),
    }
}

/// The directory a command acts from, as `git -C` means it: `-C DIR` (relative to the current
/// directory), else the current directory. Canonical, so that it compares with the workspace
/// root (which is canonical). Everything that depends on where the user "is" derives from
/// this one value: the workspace root, relative path arguments, `exec`'s working directory.
pub fn invocation_dir(dash_c: Option<&Path>) -> anyhow::Result<PathBuf> {
    let cwd = std::env::current_dir().context("cannot read the current directory")?;
    let dir = match dash_c {
        Some(d) => cwd.join(d),
        None => cwd,
    };
    std::fs::canonicalize(&dir).with_context(|| match dash_c {
        Some(d) => format!("cannot use -C {}", d.display()),
        None => "cannot read the current directory".to_string(),
    })
}

/// For commands that talk to a server over the network (`push`, `pull`, `clone`): a write to
/// a connection the server has closed must be an error the command reports (and a push run
/// again resumes), not SIGPIPE killing the process without a word, which is what the default
/// disposition `main` sets for `rewind log | head` would do.
pub fn ignore_sigpipe() {
    // SAFETY: setting a signal disposition; these commands start their runtime after this.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_IGN);
    }
}

/// The service for this invocation: acting from its directory, for its session.
pub fn service(cli: &Cli) -> anyhow::Result<rewind_api::Service> {
    let service = rewind_api::Service::new(rewind_api::Context::new(&cli.dir, &cli.session)?);
    // Said once: the next command finds the workspace registered where it is now.
    Ok(service.on_relink(|r| {
        eprintln!(
            "rewind: this workspace moved from {} to {}; its history (workspace {}) follows it",
            r.from, r.to, r.id
        )
    }))
}

/// Starts `rewind ARGS` for this workspace as a detached process (its own process group, no
/// terminal, no output) and does not wait for it. Used for `gc --auto` (which gives way at
/// once if another gc of the workspace runs), the automatic push and the background
/// baseline. Best effort: a failure to start it only means a later command tries again.
pub fn start_detached(cli: &Cli, args: &[&str]) {
    start_detached_in(&cli.dir, args);
}

/// [`start_detached`] for the workspace at `dir`.
pub fn start_detached_in(dir: &std::path::Path, args: &[&str]) {
    use std::os::unix::process::CommandExt;
    use std::process::{Command, Stdio};
    let Ok(exe) = std::env::current_exe() else {
        return;
    };
    let _ = Command::new(exe)
        .arg("-C")
        .arg(dir)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .env_remove("REWIND_FAILPOINT")
        .process_group(0)
        .spawn();
}

/// After a command that captured: when its capture ran out of `capture.time_budget`, the
/// rest of the baseline is completed by a detached `rewind baseline --background`.
pub fn start_baseline_if_due(cli: &Cli, service: &rewind_api::Service) {
    if service.baseline_due().unwrap_or(false) {
        start_detached(cli, &["baseline", "--background"]);
    }
}

/// The workspace's running server, acting for this invocation's session; `None` when none
/// runs (or REWIND_NO_SERVER is set).
pub fn server(service: &rewind_api::Service) -> Option<rewind_api::remote::Client> {
    rewind_api::remote::Client::for_workspace(service.context())
}

/// How the epoch of a tool is labelled (`exec`, `epoch begin` and the guarded tools).
#[derive(clap::Args, Debug)]
pub struct ToolArgs {
    /// The tool name recorded with the epoch (e.g. bash, edit) [default: the command's name;
    /// none for `epoch begin`].
    #[arg(long, value_name = "NAME")]
    pub tool: Option<String>,
    /// The agent's tool call id recorded with the epoch.
    #[arg(long, value_name = "ID")]
    pub tool_call: Option<String>,
}
