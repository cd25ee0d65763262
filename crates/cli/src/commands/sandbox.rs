//! `rewind sandbox check|exec|mode|toggle`: layer ④ from the command line. The policy is the
//! `[sandbox]` config (user `config.toml`, the mode set with `sandbox mode`/`toggle`, the
//! workspace's `.rewind.toml`), overridden by flags. Exit codes: `exec` returns the child's;
//! refusals are 6.

use std::ffi::OsString;

use clap::Subcommand;
use rewind_api::{
    SandboxCheckRequest, SandboxExecRequest, SandboxMode as Mode, SandboxModeRequest,
    SandboxModeResponse,
};

use crate::{exit, output, Cli};

/// Run commands in the OS sandbox (layer ④), or check that it works here.
#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(subcommand)]
    pub command: Sub,
}

#[derive(Subcommand, Debug)]
pub enum Sub {
    /// Preflight: exit 0 if the sandbox works here, 6 with the reason if not.
    ///
    /// Checks the platform, that bubblewrap is installed and new enough (0.8.0+), and runs
    /// `true` under the workspace's policy (namespaces, mounts, seccomp filter).
    Check,
    /// Run CMD under the sandbox policy; exits with CMD's exit code.
    ///
    /// CMD runs in the current directory, or in DIR of `rewind -C DIR`; relative paths given
    /// to --writable-root and --deny-read are taken from there too.
    ///
    /// Example: rewind sandbox exec --deny-read ~/.aws -- cargo test
    Exec(ExecArgs),
    /// Show the workspace's sandbox mode, or set it.
    ///
    /// The mode set here replaces `[sandbox] mode` of your config.toml for this workspace
    /// only, and is recorded in the op log (`rewind log` shows who changed it, when, from what
    /// to what). The workspace's .rewind.toml may still tighten it, never loosen it. Loosening
    /// asks for confirmation on a terminal (--yes otherwise). Refused from inside the sandbox.
    ///
    /// Example: rewind sandbox mode read-only
    Mode {
        /// workspace-write, read-only, or danger-full-access (no sandbox at all).
        #[arg(value_name = "MODE")]
        mode: Option<Mode>,
        /// Do not ask for confirmation.
        #[arg(long, short = 'y')]
        yes: bool,
    },
    /// Flip the workspace's mode between workspace-write and danger-full-access.
    ///
    /// As `sandbox mode` with the other one; asks for confirmation on a terminal before
    /// giving commands full access (--yes otherwise).
    Toggle {
        /// Do not ask for confirmation.
        #[arg(long, short = 'y')]
        yes: bool,
    },
}

#[derive(clap::Args, Debug)]
pub struct ExecArgs {
    /// workspace-write (default), read-only, or danger-full-access (no sandbox at all).
    #[arg(long, value_name = "MODE")]
    pub mode: Option<Mode>,
    /// Allow network access (internet sockets; host unix sockets stay blocked).
    #[arg(long)]
    pub network: bool,
    /// Another directory the command may write (repeatable).
    #[arg(long = "writable-root", value_name = "DIR")]
    pub writable_root: Vec<OsString>,
    /// A file or directory the command may not read (repeatable).
    #[arg(long = "deny-read", value_name = "PATH")]
    pub deny_read: Vec<OsString>,
    /// The command and its arguments, after `--`.
    #[arg(last = true, required = true, value_name = "CMD")]
    pub command: Vec<OsString>,
}

pub fn run(cli: &Cli, args: &Args) -> anyhow::Result<i32> {
    match &args.command {
        Sub::Check => check(cli),
        Sub::Exec(a) => exec(cli, a),
        Sub::Mode { mode: None, .. } => show_mode(cli),
        Sub::Mode { mode: Some(m), yes } => set_mode(cli, Some(*m), *yes),
        Sub::Toggle { yes } => set_mode(cli, None, *yes),
    }
}

fn show_mode(cli: &Cli) -> anyhow::Result<i32> {
    let doc = super::service(cli)?.sandbox_mode(&SandboxModeRequest::default())?;
    output::emit(cli.json, &doc, print_mode)?;
    Ok(exit::OK)
}

/// Sets `mode`, or toggles (`None`), after asking when the change loosens the sandbox.
fn set_mode(cli: &Cli, mode: Option<Mode>, yes: bool) -> anyhow::Result<i32> {
    let svc = super::service(cli)?;
    let now = svc.sandbox_mode(&SandboxModeRequest::default())?;
    let from: Mode = now.workspace_mode.parse().map_err(anyhow::Error::msg)?;
    let to = mode.unwrap_or(from.toggled());
    if to.openness() > from.openness() {
        let question = format!(
            "Sandbox mode {from} -> {to}: {}. Change it?",
            to.consequence()
        );
        let refusal =
            format!("refusing to loosen the sandbox ({from} -> {to}) without confirmation");
        if !crate::confirm::confirm(yes, &question, refusal)? {
            eprintln!("Nothing was changed.");
            return Ok(exit::ERROR);
        }
    }
    let doc = svc.sandbox_mode(&SandboxModeRequest {
        set: Some(to),
        toggle: false,
        expect: Some(from),
        via: Some("cli".into()),
    })?;
    output::emit(cli.json, &doc, print_mode)?;
    Ok(exit::OK)
}

fn print_mode(d: &SandboxModeResponse) {
    if let Some(c) = &d.changed {
        println!(
            "sandbox mode {} -> {}",
            c.previous.as_deref().unwrap_or("(configured)"),
            c.value
        );
    }
    let from = match d.source.as_str() {
        "setting" => "set for this workspace",
        "config" => "from config.toml",
        _ => "the default",
    };
    match &d.tightened_by {
        Some(file) => println!(
            "{} ({} is {from}; {file} tightens it)",
            d.mode, d.workspace_mode
        ),
        None => println!("{} ({from})", d.mode),
    }
}

fn exec(cli: &Cli, a: &ExecArgs) -> anyhow::Result<i32> {
    let run = super::service(cli)?.sandbox_prepare(&SandboxExecRequest {
        command: a.command.clone(),
        mode: a.mode,
        network: a.network,
        writable_roots: a.writable_root.clone(),
        deny_read: a.deny_read.clone(),
        collect_output: false,
    })?;
    if run.mode() == Mode::DangerFullAccess {
        eprintln!("rewind: warning: sandbox mode danger-full-access: running the command without any sandbox");
    }
    Ok(run.run()?.exit_code)
}

fn check(cli: &Cli) -> anyhow::Result<i32> {
    // On failure the error document (`--json`) is printed by main, as for every failing
    // command: one document on stdout, never this report and then the error.
    let doc = super::service(cli)?.sandbox_check(&SandboxCheckRequest {})?;
    output::emit(cli.json, &doc, |d| {
        for c in &d.checks {
            println!("{:<11} {}", format!("{}:", c.check), c.result);
        }
        println!(
            "sandbox ok: {} mode, network {} (workspace {})",
            d.mode,
            if d.network { "on" } else { "off" },
            d.workspace.display()
        );
    })?;
    Ok(exit::OK)
}
