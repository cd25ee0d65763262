//! `rewind clone URL DIR [--checkpoint ID]`: a checkpoint's tree and its history from a remote.

use std::path::PathBuf;

use rewind_api::CloneRequest;

use crate::output::{emit, human_bytes};
use crate::Cli;

/// Write a checkpoint's tree from a remote into DIR and register DIR with its history.
///
/// DIR must be absent or empty. The checkpoint is the remote's newest unless --checkpoint
/// names one (an id or a unique prefix, in any history of the remote). Only the packs the tree
/// needs are fetched, and every object is verified before anything is written into DIR: a
/// missing or damaged remote object is exit 7, naming it, with DIR left as it was. Then `log`,
/// `diff` and `restore` work in DIR; `rewind pull` there fetches the rest of the history's
/// packs and what is pushed later. An encrypted remote needs its key file (--key-file, or the
/// configured remote's key_file); without it, or with another key, nothing is read or written.
///
///   rewind clone s3://my-bucket/rewind ./proj --endpoint http://127.0.0.1:3900
///   rewind clone origin ./proj --checkpoint 3f2a9c
///   rewind clone s3://my-bucket/private ./proj --key-file ~/backup/vault.key
#[derive(clap::Args, Debug)]
#[command(verbatim_doc_comment)]
pub struct Args {
    /// The remote: s3://BUCKET/PREFIX, file:///PATH, or a configured remote's name.
    pub url: String,
    /// The directory to write (absent or empty).
    pub dir: PathBuf,
    /// The checkpoint to write (id or unique prefix) [default: the remote's newest].
    #[arg(long, value_name = "ID")]
    pub checkpoint: Option<String>,
    /// The S3 endpoint, for storage other than AWS's.
    #[arg(long, value_name = "URL")]
    pub endpoint: Option<String>,
    /// The S3 region.
    #[arg(long, value_name = "REGION")]
    pub region: Option<String>,
    /// The key file of an encrypted remote [default: the configured remote's key_file].
    #[arg(long, value_name = "PATH")]
    pub key_file: Option<PathBuf>,
}

pub fn run(cli: &Cli, args: &Args) -> anyhow::Result<i32> {
    super::ignore_sigpipe();
    let r = super::service(cli)?.clone_remote(&CloneRequest {
        url: args.url.clone(),
        dir: args.dir.clone(),
        checkpoint: args.checkpoint.clone(),
        endpoint: args.endpoint.clone(),
        region: args.region.clone(),
        key_file: args.key_file.clone(),
    })?;
    emit(cli.json, &r, |r| {
        eprintln!(
            "rewind: checkpoint {}: {} files ({}), {} packs fetched ({}), {} left for `rewind pull`",
            r.checkpoint,
            r.files,
            human_bytes(r.bytes),
            r.packs_fetched,
            human_bytes(r.pack_bytes),
            r.packs_left
        );
        println!("{}", r.root);
    })?;
    Ok(0)
}
