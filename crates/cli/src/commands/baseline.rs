//! `rewind baseline`: hash what a `capture.time_budget` left uncovered.

use rewind_api::BaselineRequest;

use crate::output::emit;
use crate::Cli;

/// Complete the baseline: hash every file a capture.time_budget left uncovered, and record it.
///
/// A command whose capture runs out of its time budget leaves the rest uncovered and starts
/// this in the background (`--background`); it records a chunk at a time, holding the
/// workspace lock only to record each chunk, so agents keep working while it runs. `status`
/// shows how many files it still has. One runs per workspace: a second returns at once.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Run at the lowest CPU and I/O priority (how commands start it).
    #[arg(long)]
    pub background: bool,
}

pub fn run(cli: &Cli, args: &Args) -> anyhow::Result<i32> {
    if args.background {
        lower_priority();
    }
    let r = super::service(cli)?.baseline(&BaselineRequest {})?;
    emit(cli.json, &r, |r| {
        if r.already_running {
            println!("a baseline is already being completed for this workspace");
        } else {
            println!(
                "hashed {} file(s) ({} bytes) in {} capture(s); {} left uncovered",
                r.files_hashed, r.bytes_hashed, r.captures, r.remaining
            );
        }
    })?;
    Ok(0)
}

/// Nice 19 and the idle I/O class, for this process and the threads it starts from now on:
/// a background baseline takes what the machine leaves over.
fn lower_priority() {
    const IOPRIO_WHO_PROCESS: libc::c_int = 1;
    const IOPRIO_CLASS_IDLE: libc::c_int = 3;
    const IOPRIO_CLASS_SHIFT: libc::c_int = 13;
    // SAFETY: plain system calls on this process; failures leave the priority as it was.
    unsafe {
        libc::setpriority(libc::PRIO_PROCESS, 0, 19);
        libc::syscall(
            libc::SYS_ioprio_set,
            IOPRIO_WHO_PROCESS,
            0,
            IOPRIO_CLASS_IDLE << IOPRIO_CLASS_SHIFT,
        );
    }
}
