//! `rewind completions SHELL`: a shell completion script, generated from the same clap
//! definitions as `--help`.

use clap::CommandFactory;
use serde::Serialize;

use crate::Cli;

/// Print a shell completion script (bash, zsh or fish)
///
/// The script completes commands, flags, and file names where a command takes a path. Load it
/// from your shell's start-up file, or install it where the shell looks for completions.
///
/// Examples:
///   source <(rewind completions bash)           # in ~/.bashrc
///   rewind completions bash > ~/.local/share/bash-completion/completions/rewind
///   rewind completions zsh > ~/.zfunc/_rewind   # with fpath+=(~/.zfunc) before compinit
///   rewind completions fish > ~/.config/fish/completions/rewind.fish
#[derive(clap::Args, Debug)]
#[command(verbatim_doc_comment)]
pub struct Args {
    /// The shell to complete for.
    #[arg(value_enum)]
    pub shell: Shell,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug)]
pub enum Shell {
    Bash,
    Zsh,
    Fish,
}

#[derive(Serialize)]
struct Out {
    shell: &'static str,
    script: String,
}

pub fn run(cli: &Cli, args: &Args) -> anyhow::Result<i32> {
    let (name, generator) = match args.shell {
        Shell::Bash => ("bash", clap_complete::Shell::Bash),
        Shell::Zsh => ("zsh", clap_complete::Shell::Zsh),
        Shell::Fish => ("fish", clap_complete::Shell::Fish),
    };
    let mut script = Vec::new();
    clap_complete::generate(generator, &mut Cli::command(), "rewind", &mut script);
    let script = String::from_utf8(script)?;
    let out = Out {
        shell: name,
        script,
    };
    crate::output::emit(cli.json, &out, |o| print!("{}", o.script))?;
    Ok(0)
}
