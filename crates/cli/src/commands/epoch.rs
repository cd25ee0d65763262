//! `rewind epoch begin|end|abort`: epochs driven by an agent's own tool hooks.

use std::path::PathBuf;

use clap::Subcommand;
use rewind_core::EpochSpec;
use serde::Serialize;

use crate::output::emit;
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
}

#[derive(clap::Args, Debug)]
pub struct BeginArgs {
    #[arg(long, value_name = "NAME")]
    pub tool: Option<String>,
    #[arg(long, value_name = "ID")]
    pub tool_call: Option<String>,
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

#[derive(Serialize)]
struct Began {
    id: String,
    kind: rewind_core::EpochKind,
    session: String,
}

#[derive(Serialize)]
struct Ended {
    id: String,
    state: rewind_core::EpochState,
    changes: Vec<super::ChangeView>,
}

pub fn run(cli: &Cli, args: &Args) -> anyhow::Result<i32> {
    let ws = super::open_workspace(cli, false)?;
    match &args.command {
        Sub::Begin(a) => {
            let mut paths = Vec::new();
            for p in &a.paths {
                paths.push(super::user_path(cli, ws.root(), p)?);
            }
            let spec = EpochSpec {
                tool: a.tool.clone(),
                tool_call: a.tool_call.clone(),
                paths,
                process_owned: false,
                note: None,
            };
            let e = ws.begin_epoch(&cli.session, &spec)?;
            emit(
                cli.json,
                &Began {
                    id: e.id.clone(),
                    kind: e.kind,
                    session: e.session.clone(),
                },
                |b| {
                    println!("{}", b.id);
                },
            )?;
        }
        Sub::End(a) | Sub::Abort(a) => {
            let abort = matches!(args.command, Sub::Abort(_));
            let s = ws.end_epoch(&cli.session, a.epoch.as_deref(), abort)?;
            let out = Ended {
                id: s.epoch.id.clone(),
                state: s.epoch.state,
                changes: s.changes.iter().map(super::ChangeView::from).collect(),
            };
            emit(cli.json, &out, |o| {
                let verb = if abort { "aborted" } else { "settled" };
                println!("{verb} epoch {}: {} changed paths", o.id, o.changes.len());
                for c in &o.changes {
                    println!("  {:<8} {}", c.action, c.path);
                }
            })?;
        }
    }
    Ok(0)
}
