//! `rewind epoch begin|end|abort|list`: epochs driven by an agent's own tool hooks.

use std::path::PathBuf;

use clap::Subcommand;
use rewind_api::{EpochBeginRequest, EpochEndRequest, EpochListRequest, Recorder};

use super::ToolArgs;
use crate::output::emit;
use crate::render::print_changes;
use crate::Cli;

/// Open, settle or abort an epoch (for agents' own tool hooks).
#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(subcommand)]
    pub command: Sub,
}

#[derive(Subcommand, Debug)]
pub enum Sub {
    /// Open an epoch for the session and print its id. With --path it is exact (only those
    /// paths are captured, no scan); without, it is opaque (whole-workspace capture).
    ///
    /// Example: rewind epoch begin --tool edit --path src/lib.rs
    Begin(BeginArgs),
    /// Settle the session's open epoch (or the named one): record what changed.
    End(EndArgs),
    /// Close the session's open epoch (or the named one) as aborted, still recording what
    /// changed.
    Abort(EndArgs),
    /// List the session's open epochs (or every session's), oldest first: what `epoch end`
    /// can settle.
    List(ListArgs),
}

#[derive(clap::Args, Debug)]
pub struct ListArgs {
    /// Every session's open epochs.
    #[arg(long)]
    pub all_sessions: bool,
}

#[derive(clap::Args, Debug)]
pub struct BeginArgs {
    #[command(flatten)]
    pub tool: ToolArgs,
    /// A path the tool will write (repeatable; relative to the current directory or -C DIR);
    /// makes the epoch exact. A directory declares everything below it (and what is created
    /// inside it is recorded too).
    #[arg(long = "path", value_name = "P")]
    pub paths: Vec<PathBuf>,
}

#[derive(clap::Args, Debug)]
pub struct EndArgs {
    /// The epoch (id or unique prefix); default: the session's open epoch.
    pub epoch: Option<String>,
}

pub fn run(cli: &Cli, args: &Args) -> anyhow::Result<i32> {
    let service = super::service(cli)?;
    if let Sub::List(a) = &args.command {
        let out = service.epoch_list(&EpochListRequest {
            all_sessions: a.all_sessions,
        })?;
        emit(cli.json, &out, |o| {
            for e in &o.epochs {
                let what = [e.tool.as_deref(), e.tool_call.as_deref()]
                    .into_iter()
                    .flatten()
                    .collect::<Vec<_>>()
                    .join(" ");
                println!("{} {} session {} {what}", e.id, e.kind.as_str(), e.session);
            }
        })?;
        return Ok(0);
    }
    // Through the workspace's server when one runs (see `exec`).
    let server = super::server(&service);
    let recorder: &dyn Recorder = match &server {
        Some(s) => s,
        None => &service,
    };
    match &args.command {
        Sub::Begin(a) => {
            let began = recorder.epoch_begin(&EpochBeginRequest {
                tool: a.tool.tool.clone(),
                tool_call: a.tool.tool_call.clone(),
                // The server takes them from the root: given from here, they are absolute.
                paths: a.paths.iter().map(|p| cli.dir.join(p)).collect(),
                process_owned: false,
                note: None,
            })?;
            emit(cli.json, &began, |b| println!("{}", b.id))?;
        }
        Sub::List(_) => unreachable!("answered above"),
        Sub::End(a) | Sub::Abort(a) => {
            let abort = matches!(args.command, Sub::Abort(_));
            let out = recorder.epoch_end(&EpochEndRequest {
                epoch: a.epoch.clone(),
                abort,
            })?;
            emit(cli.json, &out, |o| {
                let verb = if abort { "aborted" } else { "settled" };
                println!("{verb} epoch {}: {} changed paths", o.id, o.changes.len());
                print_changes(&o.changes);
            })?;
        }
    }
    super::start_baseline_if_due(cli, &service);
    Ok(0)
}
