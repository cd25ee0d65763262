//! `rewind checkpoint`: mark a turn boundary for the session.

use std::path::PathBuf;

use anyhow::Context;
use serde::Serialize;

use crate::output::emit;
use crate::Cli;

/// Mark a turn boundary, bound to conversation node (message) ID; prints the checkpoint id.
///
/// Examples:
///   rewind checkpoint --message msg-42 --label "after refactor"
///   rewind -s agent-7 checkpoint --message msg-43 --parent msg-42 --payload-file state.json
#[derive(clap::Args, Debug)]
#[command(verbatim_doc_comment)]
pub struct Args {
    /// The conversation node (message id) this checkpoint belongs to.
    #[arg(long, value_name = "ID")]
    pub message: Option<String>,
    /// The node's parent (default: the session head).
    #[arg(long, value_name = "ID")]
    pub parent: Option<String>,
    #[arg(long, value_name = "TEXT")]
    pub label: Option<String>,
    /// Stored with the checkpoint and returned by `restore --json` (e.g. the conversation);
    /// relative to the current directory or -C DIR. At most checkpoint.max_payload_size
    /// (config; default 64M).
    #[arg(long, value_name = "F")]
    pub payload_file: Option<PathBuf>,
}

#[derive(Serialize)]
struct Out {
    id: String,
    pos: i64,
    session: String,
    message: Option<String>,
    parent: Option<String>,
    root: String,
}

pub fn run(cli: &Cli, args: &Args) -> anyhow::Result<i32> {
    let ws = super::open_workspace(cli, false)?;
    let payload = match &args.payload_file {
        Some(f) => {
            // Read at most one byte past the cap: a huge file is refused, never loaded whole.
            use std::io::Read;
            let cap = ws.config().checkpoint.max_payload_size();
            let mut bytes = Vec::new();
            std::fs::File::open(super::user_file(cli, f))
                .and_then(|file| file.take(cap + 1).read_to_end(&mut bytes))
                .with_context(|| format!("reading payload file {}", f.display()))?;
            if bytes.len() as u64 > cap {
                return Err(rewind_core::payload_too_large(bytes.len() as u64, cap))
                    .with_context(|| format!("payload file {}", f.display()));
            }
            Some(bytes)
        }
        None => None,
    };
    let c = ws.checkpoint(
        &cli.session,
        args.message.as_deref(),
        args.parent.as_deref(),
        args.label.as_deref(),
        payload,
    )?;
    let out = Out {
        id: c.id.clone(),
        pos: c.pos,
        session: c.session.clone(),
        message: c.message.clone(),
        parent: c.parent.clone(),
        root: c.root.to_hex(),
    };
    emit(cli.json, &out, |o| println!("{}", o.id))?;
    Ok(0)
}
