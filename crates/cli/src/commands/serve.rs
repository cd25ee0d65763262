//! `rewind serve`: the service API as JSON-RPC 2.0 over standard input and output or a Unix
//! socket (see `rewind-server`).

use std::io::Write;
use std::path::PathBuf;

use crate::Cli;

/// Serve the API as JSON-RPC 2.0 (one JSON value per line) for agents, editors and UIs.
///
/// Methods are the subcommands with a dot for a space (`status`, `epoch.begin`, `restore`,
/// `apply-patch`, …), params the long options and arguments as snake_case keys plus
/// `session` (default: -s), results the `--json` documents; an error carries the error
/// document and the exit code in `data`. `subscribe` sends `event` notifications (epoch,
/// checkpoint, restore, guard). With a socket, its path is the first line on stdout once the
/// server accepts connections. One server per workspace; SIGTERM or SIGINT (or standard input
/// closing, with --stdio) lets running requests finish and stops it.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Serve one client on standard input and output.
    #[arg(long, conflicts_with = "socket")]
    pub stdio: bool,
    /// Listen on this Unix socket [default: serve.sock in the workspace's state directory].
    #[arg(long, value_name = "PATH")]
    pub socket: Option<PathBuf>,
}

pub fn run(cli: &Cli, args: &Args) -> anyhow::Result<i32> {
    // A client that goes away must not kill the server: writes to it fail instead.
    // SAFETY: setting a signal disposition before the server starts its threads.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_IGN);
    }
    let opts = rewind_server::Options {
        root: cli.dir.clone(),
        session: cli.session.clone(),
        transport: if args.stdio {
            rewind_server::Transport::Stdio
        } else {
            rewind_server::Transport::Socket(args.socket.clone())
        },
    };
    rewind_server::serve(&opts, |socket| {
        if let Some(path) = socket {
            println!("{}", path.display());
            let _ = std::io::stdout().flush();
            eprintln!(
                "rewind: serving {} on {}",
                cli.dir.display(),
                path.display()
            );
        }
    })?;
    Ok(crate::exit::OK)
}
