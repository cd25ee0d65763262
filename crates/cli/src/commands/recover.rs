//! `rewind recover`: finish or roll back interrupted work.

use crate::output::emit;
use crate::Cli;

/// Finish interrupted restores and settle epochs whose process died (every command also does
/// this first).
#[derive(clap::Args, Debug)]
pub struct Args {}

pub fn run(cli: &Cli, _args: &Args) -> anyhow::Result<i32> {
    let ws = super::open_workspace(cli, false)?;
    let r = ws.recover()?;
    emit(cli.json, &r, |r| {
        if r.restores.is_empty() && r.epochs.is_empty() {
            println!("nothing to recover");
        }
        for e in &r.restores {
            println!("finished interrupted restore {e}");
        }
        for e in &r.epochs {
            println!("settled epoch {e} of a process that died (marked recovered)");
        }
    })?;
    Ok(0)
}
