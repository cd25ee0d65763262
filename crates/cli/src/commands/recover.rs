//! `rewind recover`: finish or roll back interrupted work.

use crate::output::emit;
use crate::Cli;

/// Finish interrupted restores and settle epochs whose process died (every command also does
/// this first).
#[derive(clap::Args, Debug)]
pub struct Args {}

pub fn run(cli: &Cli, _args: &Args) -> anyhow::Result<i32> {
    let r = super::service(cli)?.recover(&rewind_api::RecoverRequest {})?;
    emit(cli.json, &r, |r| {
        if r.restores.is_empty() && r.epochs.is_empty() && r.rolled_back.is_empty() {
            println!("nothing to recover");
        }
        for e in &r.restores {
            // "Finished" only when every step is done; otherwise the steps left are named.
            if r.left.is_empty() {
                println!("finished interrupted restore {e}");
            } else {
                println!("rolled interrupted restore {e} forward, except:");
            }
        }
        for s in &r.left {
            println!(
                "  not done: {}: {}",
                String::from_utf8_lossy(&s.path),
                s.reason
            );
        }
        for e in &r.rolled_back {
            println!("rolled back failed restore {e}: nothing of it remains");
        }
        for e in &r.epochs {
            println!("settled epoch {e} of a process that died (marked recovered)");
        }
    })?;
    Ok(0)
}
