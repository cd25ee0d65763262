//! `rewind pull [NAME]`: bring this workspace's view of a remote up to date.

use rewind_api::PullRequest;

use crate::output::{emit, human_bytes};
use crate::Cli;

/// Bring this workspace's view of a remote up to date: new history and the packs it needs.
///
/// In a clone: the checkpoints and epochs pushed to its origin since, and every pack of that
/// history this machine lacks (a clone fetches only its tree's packs; after a pull, every
/// checkpoint can be restored offline). Files are not changed: `rewind restore ID --all`
/// writes a pulled checkpoint's tree. Refused (nothing changed) when this workspace recorded
/// history of its own since its last pull: two histories are never interleaved.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The remote (`rewind remote list`); may be left out when there is only one.
    pub remote: Option<String>,
}

pub fn run(cli: &Cli, args: &Args) -> anyhow::Result<i32> {
    super::ignore_sigpipe();
    let r = super::service(cli)?.pull(&PullRequest {
        remote: args.remote.clone(),
    })?;
    emit(cli.json, &r, |r| {
        println!(
            "pulled from {}: {} op-log segments, {} packs ({}); history to position {}",
            r.remote,
            r.segments,
            r.packs,
            human_bytes(r.pack_bytes),
            r.pos
        )
    })?;
    Ok(0)
}
