//! `rewind`: the command-line front of the Rewind engine. Thin: parse, call the library,
//! print. One file per command under `commands/`. The contract (flags, exit codes, output
//! rules) is `docs/cli.md`.

mod commands;
mod confirm;
mod exit;
mod output;
mod render;

use std::path::PathBuf;

use clap::{Parser, Subcommand};

/// A workspace time machine for AI coding agents.
#[derive(Parser, Debug)]
#[command(name = "rewind", version, long_about = None, propagate_version = true)]
pub struct Cli {
    /// Run as if started in DIR (as `git -C`): the workspace is DIR's nearest registered
    /// ancestor (or DIR), relative paths given to any command are taken from DIR, and `exec`
    /// runs its command in DIR [default: the current directory].
    #[arg(short = 'C', long = "workspace", global = true, value_name = "DIR")]
    pub workspace: Option<PathBuf>,

    /// Session the command acts for (not empty).
    #[arg(
        short = 's',
        long = "session",
        global = true,
        env = "REWIND_SESSION",
        default_value = "default",
        value_name = "ID",
        // An empty name (`-s ''`, `REWIND_SESSION=` from a script that forgot to set it) is a
        // usage error, not a session called "": that would silently be shared by every caller
        // that made the same mistake.
        value_parser = session_name
    )]
    pub session: String,

    /// One JSON document on stdout instead of human text.
    #[arg(long, global = true)]
    pub json: bool,

    #[command(subcommand)]
    pub command: Command,

    /// The directory the command acts from: `-C DIR` resolved against the current directory,
    /// else the current directory; canonical. Set once by `commands::run` before any command
    /// runs (see `commands::invocation_dir`); every relative path argument is taken from it.
    #[arg(skip)]
    pub dir: PathBuf,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    Init(commands::init::Args),
    Status(commands::status::Args),
    Workspace(commands::workspace::Args),
    Worktree(commands::worktree::Args),
    Fsck(commands::fsck::Args),
    Exec(commands::exec::Args),
    Epoch(commands::epoch::Args),
    Checkpoint(commands::checkpoint::Args),
    Log(commands::log::Args),
    Show(commands::show::Args),
    Diff(commands::diff::Args),
    Restore(commands::restore::Args),
    Undo(commands::restore::UndoArgs),
    Recover(commands::recover::Args),
    Gc(commands::gc::Args),
    Baseline(commands::baseline::Args),
    ShadowPath(commands::shadow_path::Args),
    Pin(commands::pin::Args),
    Unpin(commands::pin::UnpinArgs),
    Sandbox(commands::sandbox::Args),
    Serve(commands::serve::Args),
    Ui(commands::ui::Args),
    Hook(commands::hook::Args),
    Mcp(commands::mcp::Args),
    // The guarded tools: their help (summary, details, examples) is the doc of their Args.
    Read(commands::read::Args),
    CheckWrite(commands::check_write::Args),
    Write(commands::write::Args),
    Edit(commands::edit::Args),
    ApplyPatch(commands::apply_patch::Args),
    Completions(commands::completions::Args),
    Man(commands::man::Args),
    Tui(commands::tui::Args),
    Remote(commands::remote::Args),
    Push(commands::push::Args),
    Pull(commands::pull::Args),
    Clone(commands::clone::Args),
}

fn main() {
    rewind_api::trace::phase("start");
    // Like any Unix filter: when the reader of our stdout goes away (`rewind log | head`),
    // die quietly of SIGPIPE instead of panicking on a failed print.
    // SAFETY: setting a signal disposition before any thread starts.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    let mut cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            // clap prints help/version to stdout with exit 0, usage errors to stderr with 2.
            let code = if e.use_stderr() {
                exit::USAGE
            } else {
                exit::OK
            };
            let _ = e.print();
            if code != exit::OK && json_requested() {
                // The one document `--json` promises, even when the words did not parse.
                let rendered = e.render().to_string();
                let first = rendered.lines().next().unwrap_or_default();
                let message = first.strip_prefix("error: ").unwrap_or(first);
                println!("{}", exit::json_document("usage", message, code, &[]));
            }
            std::process::exit(code);
        }
    };
    rewind_api::trace::phase("parsed");
    let result = commands::run(&mut cli);
    rewind_api::trace::phase("done");
    match result {
        Ok(code) => std::process::exit(code),
        Err(err) => {
            let message = exit::describe(&err);
            let code = exit::code_for(&err);
            let hints = exit::hints_for(&err);
            eprintln!("rewind: {message}");
            for h in &hints {
                eprintln!("hint: {h}");
            }
            // `exec` and `sandbox exec` have no JSON output: their stdout is the child's.
            let child_stdout = matches!(
                &cli.command,
                Command::Exec(_)
                    | Command::Sandbox(commands::sandbox::Args {
                        command: commands::sandbox::Sub::Exec(_)
                    })
            );
            if cli.json && !child_stdout {
                println!(
                    "{}",
                    exit::json_document(exit::kind_for(&err), &message, code, &hints)
                );
            }
            std::process::exit(code);
        }
    }
}

/// A session name as given by `-s` or `REWIND_SESSION`: anything but empty.
fn session_name(s: &str) -> Result<String, String> {
    if s.is_empty() {
        Err("a session name cannot be empty (check -s and REWIND_SESSION)".into())
    } else {
        Ok(s.to_string())
    }
}

/// Whether `--json` is among the global options, for a command line clap could not parse:
/// looked for in the raw arguments before any `--`.
fn json_requested() -> bool {
    std::env::args_os()
        .skip(1)
        .take_while(|a| a != "--")
        .any(|a| a == "--json")
}
