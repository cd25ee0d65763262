//! `rewind ui`: the address of the workspace's web UI, starting a server for it when none
//! runs (see `rewind-web`).

use std::io::{BufRead, BufReader};
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};

use anyhow::Context as _;
use rewind_api::{ApiError, ErrorKind};
use serde::Serialize;

use crate::output::emit;
use crate::Cli;

/// Print the address of the web UI (with its token), starting `rewind serve --http` in the
/// background when no server runs for the workspace; `--open` opens it in the browser.
///
/// The server it starts keeps running (its pid is printed on stderr and shown by `rewind
/// status`); stop it with `kill PID`. Its messages go to serve.log in the workspace's state
/// directory. The address carries a token: whoever has it can act on this workspace as you.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Open the address in the browser (`xdg-open`) instead of printing it.
    #[arg(long)]
    pub open: bool,
}

#[derive(Serialize)]
struct Shown {
    /// The address with the token.
    url: String,
    /// The server's process.
    pid: Option<u32>,
    /// Whether this command started it.
    started: bool,
}

pub fn run(cli: &Cli, args: &Args) -> anyhow::Result<i32> {
    let svc = super::service(cli)?;
    svc.open()?;
    let state = svc
        .context()
        .state_dir()
        .context("the workspace has no state directory")?;
    let shown = match find(&state)? {
        Some(found) => found,
        None => start(cli, &state)?,
    };
    if args.open {
        open(&state, &shown.url)?;
    }
    emit(cli.json, &shown, |s| {
        if !args.open {
            println!("{}", s.url);
        }
    })?;
    Ok(crate::exit::OK)
}

/// The running server's web UI, if a server runs; an error when it runs without one.
fn find(state: &Path) -> anyhow::Result<Option<Shown>> {
    let Some(info) = rewind_api::running_server(state) else {
        return Ok(None);
    };
    let Some(url) = info.http else {
        return Err(ApiError::new(
            ErrorKind::State,
            format!(
                "a server already runs for this workspace (pid {}) without the web UI",
                info.pid
            ),
        )
        .hint(format!(
            "stop it (kill {}) and run `rewind ui` again: the server it starts serves both",
            info.pid
        ))
        .into());
    };
    let token = std::fs::read_to_string(state.join(rewind_api::SERVER_TOKEN))
        .context("reading the web UI's token (serve.token)")?;
    Ok(Some(Shown {
        url: rewind_web::url_with_token(&url, token.trim()),
        pid: Some(info.pid),
        started: false,
    }))
}

/// Starts `rewind serve --http` for the workspace, detached (its own session, stdin from
/// /dev/null, messages to serve.log), and reads the address from its first line.
fn start(cli: &Cli, state: &Path) -> anyhow::Result<Shown> {
    let exe = std::env::current_exe().context("cannot find the rewind binary")?;
    let log_path = state.join("serve.log");
    let log = std::fs::File::options()
        .create(true)
        .write(true)
        .truncate(true)
        .mode(0o600)
        .open(&log_path)
        .with_context(|| format!("cannot write {}", log_path.display()))?;
    let mut cmd = Command::new(exe);
    cmd.arg("-C")
        .arg(&cli.dir)
        .args(["-s", &cli.session, "serve", "--http"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(log);
    // SAFETY: setsid is async-signal-safe; the server outlives this command and its terminal.
    unsafe {
        cmd.pre_exec(|| {
            libc::setsid();
            Ok(())
        });
    }
    let mut child = cmd.spawn().context("cannot start `rewind serve --http`")?;
    let mut line = String::new();
    let stdout = child.stdout.take().expect("piped");
    BufReader::new(stdout).read_line(&mut line)?;
    let url = line.trim().to_string();
    if url.is_empty() {
        let _ = child.wait();
        // Another `rewind ui` may have started one first.
        if let Some(found) = find(state)? {
            return Ok(found);
        }
        let why = std::fs::read_to_string(&log_path).unwrap_or_default();
        return Err(ApiError::new(
            ErrorKind::Error,
            format!("the web UI's server did not start: {}", why.trim()),
        )
        .into());
    }
    eprintln!(
        "rewind: started the web UI's server (pid {}); it runs until stopped (kill {})",
        child.id(),
        child.id()
    );
    Ok(Shown {
        url,
        pid: Some(child.id()),
        started: true,
    })
}

/// Opens `url` in the browser through a page in the state directory that forwards to it, so
/// the token is in no command line (which other users can see).
fn open(state: &Path, url: &str) -> anyhow::Result<()> {
    let page = state.join("ui-open.html");
    let _ = std::fs::remove_file(&page);
    let html = format!(
        "<!doctype html><meta charset=utf-8><meta http-equiv=refresh content=\"0;url={url}\">\
         <title>Rewind</title><a href=\"{url}\">Open Rewind</a>\n"
    );
    std::fs::File::options()
        .create_new(true)
        .write(true)
        .mode(0o600)
        .open(&page)
        .and_then(|mut f| std::io::Write::write_all(&mut f, html.as_bytes()))
        .with_context(|| format!("cannot write {}", page.display()))?;
    match Command::new("xdg-open")
        .arg(&page)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
    {
        Ok(s) if s.success() => Ok(()),
        Ok(_) | Err(_) => {
            eprintln!("rewind: could not open a browser (xdg-open); open this address:");
            println!("{url}");
            Ok(())
        }
    }
}
