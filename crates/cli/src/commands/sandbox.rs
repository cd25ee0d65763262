//! `rewind sandbox check` and `rewind sandbox exec`: layer ④ from the command line.
//! The policy is the `[sandbox]` config (user `config.toml` + workspace `.rewind.toml`),
//! overridden by flags. Exit codes: `exec` returns the child's; refusals are 6.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use anyhow::Context;
use clap::Subcommand;
use rewind_sandbox::{Mode, Policy};
use serde::Serialize;

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
    }
}

/// The workspace root (as every command finds it: the invocation directory's nearest
/// registered ancestor, or that directory) and the invocation directory (`-C DIR` or the
/// current directory), where the command runs and relative flags are taken from.
fn workspace(cli: &Cli) -> anyhow::Result<(PathBuf, PathBuf)> {
    let ws = super::workspace_root(cli)?;
    let ws = ws
        .canonicalize()
        .with_context(|| format!("workspace {}", ws.display()))?;
    Ok((ws, cli.dir.clone()))
}

/// The policy from config; flags are applied by the caller.
pub fn policy(ws: &Path) -> anyhow::Result<Policy> {
    let home = rewind_core::rewind_home()?;
    let config = rewind_core::Config::load(&home, Some(ws))?;
    let mut p = Policy::new(ws, &home)?;
    p.apply_config(&config.sandbox)?;
    Ok(p)
}

/// A relative path given on the command line is relative to the invocation directory.
fn from_cwd(cwd: &Path, raw: &OsString) -> OsString {
    let p = Path::new(raw);
    if p.is_absolute()
        || raw.to_string_lossy().starts_with('~')
        || raw.to_string_lossy().starts_with('-')
    {
        raw.clone()
    } else {
        cwd.join(p).into_os_string()
    }
}

fn exec(cli: &Cli, a: &ExecArgs) -> anyhow::Result<i32> {
    let (ws, cwd) = workspace(cli)?;
    let mut p = policy(&ws)?;
    if let Some(m) = a.mode {
        p.set_mode(m);
    }
    if a.network {
        p.set_network(true);
    }
    for r in &a.writable_root {
        p.add_writable_root("--writable-root", &from_cwd(&cwd, r))?;
    }
    for r in &a.deny_read {
        p.add_deny_read("--deny-read", &from_cwd(&cwd, r))?;
    }
    if p.mode() == Mode::DangerFullAccess {
        eprintln!("rewind: warning: sandbox mode danger-full-access: running the command without any sandbox");
    }
    let status = p.command(&a.command, Some(&cwd))?.status()?;
    use std::os::unix::process::ExitStatusExt;
    Ok(status
        .code()
        .unwrap_or_else(|| 128 + status.signal().unwrap_or(0)))
}

#[derive(Serialize)]
struct CheckJson {
    ok: bool,
    workspace: PathBuf,
    mode: String,
    network: bool,
    bwrap: Option<PathBuf>,
    version: Option<String>,
    checks: Vec<Check>,
    error: Option<String>,
}

#[derive(Serialize)]
struct Check {
    check: String,
    result: String,
}

fn check(cli: &Cli) -> anyhow::Result<i32> {
    let (ws, _) = workspace(cli)?;
    let p = policy(&ws)?;
    let mut doc = CheckJson {
        ok: false,
        workspace: ws,
        mode: p.mode().to_string(),
        network: p.network(),
        bwrap: None,
        version: None,
        checks: vec![],
        error: None,
    };
    match p.preflight() {
        Ok(report) => {
            doc.ok = true;
            doc.bwrap = Some(report.bwrap);
            doc.version = Some(report.version);
            doc.checks = report
                .checks
                .into_iter()
                .map(|(check, result)| Check { check, result })
                .collect();
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
        // The error document (`--json`) is printed by main, as for every failing command: one
        // document on stdout, never this report and then the error.
        Err(e) => Err(anyhow::Error::new(e).context("sandbox unavailable")),
    }
}
