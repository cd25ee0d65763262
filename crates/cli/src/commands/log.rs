//! `rewind log` (being written).

use crate::Cli;

#[derive(clap::Args, Debug)]
pub struct Args {}

pub fn run(_cli: &Cli, _args: &Args) -> anyhow::Result<i32> {
    Err(crate::exit::fail(
        crate::exit::ERROR,
        "rewind log is not implemented yet",
    ))
}
