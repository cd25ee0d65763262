//! `rewind diff` (being written).

use crate::Cli;

#[derive(clap::Args, Debug)]
pub struct Args {}

pub fn run(_cli: &Cli, _args: &Args) -> anyhow::Result<i32> {
    Err(crate::exit::fail(
        crate::exit::ERROR,
        "rewind diff is not implemented yet",
    ))
}
