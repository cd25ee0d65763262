//! `rewind push [NAME]`: upload what the remote lacks of this workspace's history.

use rewind_api::PushRequest;

use crate::output::{emit, human_bytes};
use crate::Cli;

/// Upload this workspace's history to a remote: what it lacks, then a manifest.
///
/// Sealed packs the remote does not have (objects kept in the index are sealed into a pack
/// first), each pack's index, the op log's new rows as one segment, and a manifest last, so
/// the remote alone can rebuild every checkpoint. Nothing in the remote is ever overwritten.
/// Run it again after an interruption: it uploads only what is missing. Rows recorded after an
/// epoch that is still open wait for it to end (the next push takes them). With
/// `[remote] auto_push = "checkpoint"` in config.toml, every checkpoint starts one in the
/// background.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The remote (`rewind remote list`); may be left out when there is only one.
    pub remote: Option<String>,
}

pub fn run(cli: &Cli, args: &Args) -> anyhow::Result<i32> {
    super::ignore_sigpipe();
    let r = super::service(cli)?.push(&PushRequest {
        remote: args.remote.clone(),
    })?;
    emit(cli.json, &r, |r| {
        if r.manifest.is_none() {
            println!("{} is up to date (op log to position {})", r.remote, r.pos);
        } else {
            println!(
                "pushed to {}: {} packs ({}), {} op-log segment ({}); {} packs were there",
                r.remote,
                r.packs,
                human_bytes(r.pack_bytes),
                r.segments,
                human_bytes(r.segment_bytes),
                r.packs_present
            );
        }
        if r.local_pos > r.pos {
            eprintln!(
                "rewind: history after position {} waits for an open epoch to end; push again then",
                r.pos
            );
        }
    })?;
    Ok(0)
}
