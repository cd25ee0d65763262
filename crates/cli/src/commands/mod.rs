//! One module per command. Each exposes `Args` (clap) and `run`, returning the exit code.

pub mod fsck;
pub mod init;
pub mod sandbox;
pub mod status;

use crate::{Cli, Command};

pub fn run(cli: &Cli) -> anyhow::Result<i32> {
    match &cli.command {
        Command::Init(args) => init::run(cli, args),
        Command::Status(args) => status::run(cli, args),
        Command::Fsck(args) => fsck::run(cli, args),
        Command::Sandbox(args) => sandbox::run(cli, args),
    }
}
