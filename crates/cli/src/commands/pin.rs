//! `rewind pin` and `rewind unpin`: keep a checkpoint whatever the retention policy.

use rewind_api::PinRequest;

use crate::output::emit;
use crate::Cli;

/// Pin a checkpoint: garbage collection never drops it.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The checkpoint: id, unique prefix, or message id of the session.
    pub id: String,
}

/// Unpin a checkpoint: the retention policy applies to it again.
#[derive(clap::Args, Debug)]
pub struct UnpinArgs {
    /// The checkpoint: id, unique prefix, or message id of the session.
    pub id: String,
}

pub fn run(cli: &Cli, args: &Args) -> anyhow::Result<i32> {
    let c = super::service(cli)?.pin(&PinRequest {
        id: args.id.clone(),
    })?;
    emit(cli.json, &c, |c| println!("pinned checkpoint {}", c.id))?;
    Ok(0)
}

pub fn run_unpin(cli: &Cli, args: &UnpinArgs) -> anyhow::Result<i32> {
    let c = super::service(cli)?.unpin(&PinRequest {
        id: args.id.clone(),
    })?;
    emit(cli.json, &c, |c| println!("unpinned checkpoint {}", c.id))?;
    Ok(0)
}
