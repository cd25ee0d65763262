//! `rewind serve`: the service API as JSON-RPC 2.0 over standard input and output or a Unix
//! socket (see `rewind-server`), and with `--http` the web UI too (see `rewind-web`).

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
/// server accepts connections. With --http, the web UI is served too and the first line is
/// its address with the token (`rewind ui` prints it again). One server per workspace;
/// SIGTERM or SIGINT (or standard input closing, with --stdio) lets running requests finish
/// and stops it.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Serve one client on standard input and output.
    #[arg(long, conflicts_with = "socket")]
    pub stdio: bool,
    /// Listen on this Unix socket [default: serve.sock in the workspace's state directory].
    #[arg(long, value_name = "PATH")]
    pub socket: Option<PathBuf>,
    /// Serve the web UI too, on ADDR (`127.0.0.1:8080`, `[::1]`, `8080`) [default: 127.0.0.1
    /// on a free port].
    #[arg(long, value_name = "ADDR", num_args = 0..=1, default_missing_value = "",
          conflicts_with = "stdio")]
    pub http: Option<String>,
    /// Let --http listen on an address other machines can reach (the token then travels
    /// unencrypted over the network).
    #[arg(long, requires = "http")]
    pub allow_remote: bool,
}

pub fn run(cli: &Cli, args: &Args) -> anyhow::Result<i32> {
    // A client that goes away must not kill the server: writes to it fail instead.
    // SAFETY: setting a signal disposition before the server starts its threads.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_IGN);
    }
    let web = match &args.http {
        Some(addr) => {
            let addr = rewind_web::guard::parse_addr(addr).map_err(rewind_api::ApiError::usage)?;
            Some(rewind_web::Listener::bind(addr, args.allow_remote)?)
        }
        None => None,
    };
    let opts = rewind_server::Options {
        root: cli.dir.clone(),
        session: cli.session.clone(),
        transport: if args.stdio {
            rewind_server::Transport::Stdio
        } else {
            rewind_server::Transport::Socket(args.socket.clone())
        },
        web: web.as_ref().map(rewind_web::Listener::front),
        // As after `rewind checkpoint`: a gc over the budget, off the client's path.
        on_gc_due: Some(|root| super::start_detached_in(root, &["gc", "--auto"])),
    };
    let server = rewind_server::start(&opts)?;
    let root = server.root().to_path_buf();
    // The start's whole-tree capture may have run out of `capture.time_budget` (a big tree
    // changed while no server ran): the rest is hashed by a detached run, as after any
    // command. (Later captures re-read only what the watcher saw change.)
    if let Ok(service) = super::service(cli) {
        super::start_baseline_if_due(cli, &service);
    }
    let first_line = match web {
        Some(web) => {
            if web.is_remote() {
                eprintln!(
                    "rewind: warning: the web UI listens on an address other machines can reach; \
                     anyone who learns its token (sent unencrypted) can change this workspace"
                );
            }
            let front = web.front();
            web.serve(server.handle())?;
            eprintln!("rewind: web UI of {} at {}", root.display(), front.url);
            Some(rewind_web::url_with_token(&front.url, &front.token))
        }
        None => None,
    };
    server.run(|socket| {
        // The first line: the web UI's address (with its token) if there is one, else the
        // socket's path.
        if let Some(line) = first_line.as_deref() {
            println!("{line}");
        } else if let Some(path) = socket {
            println!("{}", path.display());
        }
        let _ = std::io::stdout().flush();
        if let Some(path) = socket {
            eprintln!("rewind: serving {} on {}", root.display(), path.display());
        }
    })?;
    Ok(crate::exit::OK)
}
