//! `rewind hook AGENT`: one hook event of an agent, on standard input (see `rewind-hook`).

use std::io::{Read, Write};

use clap::Subcommand;

use crate::Cli;

/// Turn an agent's hook events into Rewind sessions, checkpoints, epochs and guard decisions.
///
/// Reads one event (JSON) on standard input, as the agent runs its hooks. The Rewind session is
/// the agent's session id, the workspace the event's working directory (or
/// CLAUDE_PROJECT_DIR). Exits 2 only when the read-before-edit guard refuses a file edit (the
/// reason on stderr, for the model; `[hooks] guard = "warn"` or "off" to soften or disable);
/// anything else that goes wrong is a warning on stderr and exit 0, so the agent is never
/// blocked by accident.
#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(subcommand)]
    pub agent: Agent,
}

#[derive(Subcommand, Debug)]
pub enum Agent {
    /// Claude Code: SessionStart, UserPromptSubmit, PreToolUse, PostToolUse(Failure), Stop,
    /// SessionEnd (configure it with matcher `Edit|Write|NotebookEdit|MultiEdit|Bash|Read`).
    ClaudeCode,
}

pub fn run(_cli: &Cli, args: &Args) -> anyhow::Result<i32> {
    let mut input = Vec::new();
    if let Err(e) = std::io::stdin().read_to_end(&mut input) {
        eprintln!("rewind: cannot read the hook event: {e}");
        return Ok(0);
    }
    let out = match args.agent {
        Agent::ClaudeCode => rewind_hook::run(&input),
    };
    print!("{}", out.stdout);
    let _ = std::io::stdout().flush();
    eprint!("{}", out.stderr);
    Ok(out.code)
}
