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
    /// Codex: SessionStart, UserPromptSubmit, PreToolUse, PostToolUse, Stop (matcher
    /// `Bash|apply_patch`). Codex reports no reads: edits are recorded, not guarded.
    Codex,
    /// Gemini CLI: SessionStart, BeforeAgent, BeforeTool, AfterTool, AfterAgent, SessionEnd
    /// (matcher `write_file|replace|run_shell_command|read_file`).
    Gemini,
    /// Merge Rewind's hooks into the agent's settings (idempotent; the user's own hooks kept,
    /// the original backed up beside it). Codex asks to trust new hooks once, in `/hooks`.
    Install(InstallArgs),
    /// Take Rewind's hooks out of the agent's settings again.
    Uninstall(InstallArgs),
    /// What Claude Code's /rewind command runs, for the session of REWIND_SESSION: no
    /// argument lists the last 10 checkpoints; N previews rewinding the files to checkpoint N;
    /// N yes does it; undo takes it back.
    #[command(name = "command")]
    SlashCommand {
        /// The command: rewind.
        #[arg(value_parser = ["rewind"])]
        name: String,
        /// Its arguments, as the user typed them.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
}

#[derive(clap::Args, Debug)]
pub struct InstallArgs {
    /// The agent: claude-code, codex or gemini.
    #[arg(value_parser = ["claude-code", "codex", "gemini"])]
    pub agent: String,
    /// The project's settings shared through the repository (`.claude/settings.json`,
    /// `.codex/hooks.json`, `.gemini/settings.json`).
    #[arg(long, conflicts_with_all = ["local", "user"])]
    pub project: bool,
    /// The project's settings for this machine only (`.claude/settings.local.json`; the
    /// project file for Codex and Gemini CLI) [default].
    #[arg(long, conflicts_with = "user")]
    pub local: bool,
    /// The user's settings (`~/.claude/settings.json`, `~/.codex/hooks.json`,
    /// `~/.gemini/settings.json`): every project.
    #[arg(long)]
    pub user: bool,
}

impl InstallArgs {
    fn dialect(&self) -> rewind_hook::Dialect {
        match self.agent.as_str() {
            "codex" => rewind_hook::Dialect::Codex,
            "gemini" => rewind_hook::Dialect::Gemini,
            _ => rewind_hook::Dialect::ClaudeCode,
        }
    }

    fn path(&self, cli: &Cli) -> anyhow::Result<std::path::PathBuf> {
        use rewind_hook::install::{settings_path, Scope};
        let scope = if self.project {
            Scope::Project
        } else if self.user {
            Scope::User
        } else {
            Scope::Local
        };
        let home = std::env::var_os("HOME")
            .map(std::path::PathBuf::from)
            .ok_or_else(|| anyhow::anyhow!("HOME is not set: cannot find ~/.claude"))?;
        let project = super::service(cli)?.context().root();
        Ok(settings_path(self.dialect(), scope, &project, &home))
    }
}

pub fn run(cli: &Cli, args: &Args) -> anyhow::Result<i32> {
    let dialect = match &args.agent {
        Agent::ClaudeCode => rewind_hook::Dialect::ClaudeCode,
        Agent::Codex => rewind_hook::Dialect::Codex,
        Agent::Gemini => rewind_hook::Dialect::Gemini,
        Agent::Install(a) => {
            let exe = std::env::current_exe()?;
            let exe = exe.to_string_lossy().replace('\'', "'\\''");
            let d = a.dialect();
            let command = format!("'{exe}' hook {}", rewind_hook::install::word(d));
            let path = a.path(cli)?;
            let said =
                rewind_hook::install::install(d, &path, &command).map_err(anyhow::Error::msg)?;
            println!("{said}");
            if d == rewind_hook::Dialect::ClaudeCode {
                let exe = std::env::current_exe()?;
                for line in rewind_hook::install::install_commands(&path, &exe.to_string_lossy())
                    .map_err(anyhow::Error::msg)?
                {
                    println!("{line}");
                }
            }
            return Ok(0);
        }
        Agent::SlashCommand { args, .. } => {
            let text = rewind_hook::slash::rewind(&super::service(cli)?, args)?;
            print!("{text}");
            return Ok(0);
        }
        Agent::Uninstall(a) => {
            let path = a.path(cli)?;
            let said = rewind_hook::install::uninstall(&path).map_err(anyhow::Error::msg)?;
            println!("{said}");
            if a.dialect() == rewind_hook::Dialect::ClaudeCode {
                for line in
                    rewind_hook::install::uninstall_commands(&path).map_err(anyhow::Error::msg)?
                {
                    println!("{line}");
                }
            }
            return Ok(0);
        }
    };
    let mut input = Vec::new();
    if let Err(e) = std::io::stdin().read_to_end(&mut input) {
        eprintln!("rewind: cannot read the hook event: {e}");
        return Ok(0);
    }
    let out = rewind_hook::run(dialect, &input);
    print!("{}", out.stdout);
    let _ = std::io::stdout().flush();
    eprint!("{}", out.stderr);
    if let Some(root) = &out.baseline_in {
        super::start_detached_in(root, &["baseline", "--background"]);
    }
    if let Some(root) = &out.gc_in {
        super::start_detached_in(root, &["gc", "--auto"]);
    }
    Ok(out.code)
}
