//! `rewind mcp`: Rewind's guarded tools, recorded commands, checkpoints and rewinds as a Model
//! Context Protocol server on standard input and output (see `rewind-mcp`).

use crate::Cli;

/// Serve Rewind's tools to an MCP client (Claude Code, Codex, Gemini CLI, Cursor, …) over stdio.
///
/// Tools: read_file, write_file, edit_file, apply_patch (guarded: a file must be read before
/// it is changed), run (a shell command, sandboxed, recorded as one epoch), checkpoint, log,
/// diff, restore (a dry run unless dry_run is false), undo, status. Every call is recorded for
/// one session: -s/--session, else a new one per server process (`mcp-…`; `-s default`
/// counts as not given). The server stops when the client closes standard input. Messages are
/// one JSON object per line on stdout; diagnostics go to stderr.
///
/// Examples:
///   rewind mcp -C ~/src/project
///   rewind mcp --print-config claude-code > .mcp.json
///   claude mcp add rewind -- rewind mcp -C ~/src/project
#[derive(clap::Args, Debug)]
#[command(verbatim_doc_comment)]
pub struct Args {
    /// How `run` sandboxes commands (workspace-write, read-only, danger-full-access)
    /// [default: workspace-write when the sandbox works here, else none].
    #[arg(long, value_name = "MODE")]
    pub sandbox: Option<rewind_api::SandboxMode>,
    /// Print the config snippet that registers this server with CLIENT, and exit.
    #[arg(long, value_name = "CLIENT", value_parser = ["claude-code", "codex", "gemini", "cursor"])]
    pub print_config: Option<String>,
}

pub fn run(cli: &Cli, args: &Args) -> anyhow::Result<i32> {
    if let Some(client) = &args.print_config {
        let client = rewind_mcp::Client::parse(client).expect("checked by clap");
        let exe = std::env::current_exe()?;
        let mut extra = Vec::new();
        if cli.session != "default" {
            extra.extend(["--session".to_string(), cli.session.clone()]);
        }
        if let Some(m) = args.sandbox {
            extra.extend(["--sandbox".to_string(), m.as_str().to_string()]);
        }
        print!(
            "{}",
            rewind_mcp::print_config(client, &exe, &cli.dir, &extra)
        );
        return Ok(crate::exit::OK);
    }
    // A client that goes away must not kill the server: writes to it fail instead.
    // SAFETY: setting a signal disposition before the server starts its threads.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_IGN);
    }
    let opts = rewind_mcp::Options {
        dir: cli.dir.clone(),
        session: (cli.session != "default").then(|| cli.session.clone()),
        sandbox: args.sandbox,
        start_baseline: Some(|root| super::start_detached_in(root, &["baseline", "--background"])),
        start_gc: Some(|root| super::start_detached_in(root, &["gc", "--auto"])),
    };
    rewind_mcp::serve(&opts)?;
    Ok(crate::exit::OK)
}
