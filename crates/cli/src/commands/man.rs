//! `rewind man`: the manual pages, generated from the same clap definitions as `--help`, plus
//! the sections `--help` has no room for (exit status, environment, files).

use std::path::{Path, PathBuf};

use anyhow::Context;
use clap::CommandFactory;
use roff::{bold, roman, Roff};
use serde::Serialize;

use crate::{exit, Cli};

/// Print the manual page (roff), or write one page per command into a directory
///
/// Without --dir, prints rewind(1) on stdout: the global options, the commands, the exit
/// status table, the environment variables and the files Rewind uses. With --dir, writes
/// rewind.1 and a page per command (rewind-restore.1, rewind-epoch-begin.1, …) into DIR and
/// prints the paths written.
///
/// Examples:
///   rewind man | man -l -
///   rewind man --dir ~/.local/share/man/man1 && man rewind-restore
#[derive(clap::Args, Debug)]
#[command(verbatim_doc_comment)]
pub struct Args {
    /// Write the pages into this directory (created if missing; relative to the current
    /// directory or -C DIR) instead of printing rewind(1).
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
}

#[derive(Serialize)]
#[serde(untagged)]
enum Out {
    /// Without --dir: the page.
    Page { page: String, roff: String },
    /// With --dir: the files written.
    Written { written: Vec<String> },
}

pub fn run(cli: &Cli, args: &Args) -> anyhow::Result<i32> {
    let mut cmd = Cli::command().disable_help_subcommand(true);
    // Sets every subcommand's display name ("rewind-epoch-begin"), which names its page.
    cmd.build();
    let out = match &args.dir {
        None => Out::Page {
            page: "rewind.1".into(),
            roff: String::from_utf8(main_page(&cmd)?)?,
        },
        Some(dir) => {
            let dir = cli.dir.join(dir);
            std::fs::create_dir_all(&dir)
                .with_context(|| format!("cannot create {}", dir.display()))?;
            let mut written = Vec::new();
            write_page(&dir, "rewind.1", &main_page(&cmd)?, &mut written)?;
            for sub in cmd.get_subcommands() {
                sub_pages(&dir, sub, &mut written)?;
            }
            Out::Written { written }
        }
    };
    crate::output::emit(cli.json, &out, |o| match o {
        Out::Page { roff, .. } => print!("{roff}"),
        Out::Written { written } => {
            for w in written {
                println!("{w}");
            }
        }
    })?;
    Ok(0)
}

/// rewind(1): clap_mangen's sections of the top-level command, with a longer description, then
/// EXIT STATUS, ENVIRONMENT and FILES.
fn main_page(cmd: &clap::Command) -> anyhow::Result<Vec<u8>> {
    let man = manual(cmd);
    let mut page = Vec::new();
    man.render_title(&mut page)?;
    man.render_name_section(&mut page)?;
    man.render_synopsis_section(&mut page)?;
    let mut r = Roff::new();
    r.control("SH", ["DESCRIPTION"]);
    for (i, paragraph) in DESCRIPTION.iter().enumerate() {
        if i > 0 {
            r.control("PP", []);
        }
        r.text([roman(*paragraph)]);
    }
    page.extend_from_slice(r.render().as_bytes());
    man.render_options_section(&mut page)?;
    man.render_subcommands_section(&mut page)?;
    let mut r = Roff::new();
    r.control("SH", ["EXIT STATUS"]);
    for (code, meaning) in exit::TABLE {
        r.control("TP", [])
            .text([bold(code.to_string())])
            .text([roman(*meaning)]);
    }
    r.control("PP", []).text([roman(
        "exec and sandbox exec exit with the code of the command they ran; their own failures \
         use 1, 4 or 6, with a message on stderr that starts with \"rewind:\".",
    )]);
    for (title, items) in [("ENVIRONMENT", ENVIRONMENT), ("FILES", FILES)] {
        r.control("SH", [title]);
        for (name, meaning) in items {
            r.control("TP", [])
                .text([bold(*name)])
                .text([roman(*meaning)]);
        }
    }
    page.extend_from_slice(r.render().as_bytes());
    man.render_version_section(&mut page)?;
    Ok(page)
}

const DESCRIPTION: &[&str] = &[
    "Rewind records every change an agent makes to a working directory, through edit tools and \
     through shell commands, attributes it to the session, turn (checkpoint) and tool call \
     (epoch) that made it, and puts any of it back exactly, with a preview, without touching \
     anyone else's work. State lives outside the workspace, in $REWIND_HOME; Rewind never \
     touches a .git directory.",
    "The workspace is the nearest registered ancestor of the current directory (or of DIR of \
     -C), else that directory itself; it is registered on first use. Relative paths given to \
     any command are taken from that same directory. Several agents share a workspace by \
     using one session each (-s or REWIND_SESSION): a restore only undoes what its session \
     changed, and refuses (exit 3) when someone else changed those files since.",
    "With --json every command prints exactly one JSON document on stdout, also on an error \
     ({\"error\": {\"kind\", \"message\", \"exit_code\"}}), except exec and sandbox exec, \
     whose stdout is their command's. Ids are accepted by unique prefix; a checkpoint can also \
     be named by its message id.",
];

/// The environment variables `rewind` reads (docs/cli.md lists the same).
const ENVIRONMENT: &[(&str, &str)] = &[
    (
        "REWIND_HOME",
        "The state directory: stores, the op log, config.toml. Default: $XDG_DATA_HOME/rewind, \
         else ~/.local/share/rewind. Never inside a workspace.",
    ),
    (
        "REWIND_SESSION",
        "The session a command acts for, when -s is not given (default: default). Must not be \
         empty.",
    ),
    (
        "REWIND_LOCK_TIMEOUT",
        "Seconds a command waits for the workspace lock before it exits 4 (default 30).",
    ),
    (
        "REWIND_QUIET",
        "When set, exec does not report on stderr how many paths its command changed.",
    ),
    (
        "REWIND_TRACE",
        "When set, every command prints on stderr where its time went (workspace open, walk, \
         hashing, commit, settle).",
    ),
    (
        "NO_COLOR",
        "When set and not empty, log prints no colour (it colours only a terminal anyway).",
    ),
    (
        "AWS_ACCESS_KEY_ID",
        "With AWS_SECRET_ACCESS_KEY and AWS_SESSION_TOKEN: the credentials of s3:// remotes \
         (push, pull, clone), unless the remote's section of config.toml has its own. Never \
         printed or recorded.",
    ),
    (
        "AWS_ENDPOINT_URL",
        "With AWS_REGION (or AWS_DEFAULT_REGION) and AWS_ALLOW_HTTP: where s3:// remotes are, \
         when a remote sets no --endpoint or --region of its own.",
    ),
];

const FILES: &[(&str, &str)] = &[
    (
        "$REWIND_HOME/config.toml",
        "User configuration: [capture], [checkpoint], [sandbox], [retention], [remote.NAME]. \
         Unknown keys are an error.",
    ),
    (
        ".rewind.toml",
        "Per-workspace configuration at the workspace root, overriding config.toml.",
    ),
    (
        ".rewindignore",
        "Ignore rules (gitignore syntax) on top of .gitignore, .git/info/exclude and the \
         global excludes file: ignored paths are never captured and never touched.",
    ),
    (
        "$REWIND_HOME/workspaces/ID/",
        "One workspace's state: its object packs, the op log (meta.sqlite), the stat cache, \
         the lock.",
    ),
];

/// The page of one command, its footer naming the program ("rewind 0.1.0", not the
/// subcommand's name).
fn manual(cmd: &clap::Command) -> clap_mangen::Man {
    clap_mangen::Man::new(cmd.clone()).source(format!("rewind {}", env!("CARGO_PKG_VERSION")))
}

/// The page of `cmd` and of every command below it, as `man rewind-epoch-begin` finds them.
fn sub_pages(dir: &Path, cmd: &clap::Command, written: &mut Vec<String>) -> anyhow::Result<()> {
    if cmd.is_hide_set() {
        return Ok(());
    }
    let man = manual(cmd);
    let mut page = Vec::new();
    man.render(&mut page)?;
    write_page(dir, &man.get_filename(), &page, written)?;
    for sub in cmd.get_subcommands() {
        sub_pages(dir, sub, written)?;
    }
    Ok(())
}

fn write_page(
    dir: &Path,
    name: &str,
    page: &[u8],
    written: &mut Vec<String>,
) -> anyhow::Result<()> {
    let path = dir.join(name);
    std::fs::write(&path, page).with_context(|| format!("cannot write {}", path.display()))?;
    written.push(path.display().to_string());
    Ok(())
}
