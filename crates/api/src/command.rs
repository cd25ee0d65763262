//! Running the command of an operation (`exec`, `sandbox exec`), plain or sandboxed, with this
//! process's standard streams or with its output collected for a front that cannot pass them
//! through (a server answers in JSON on its own standard output).
//!
//! Collected, each stream is read on its own thread, so a command that fills one pipe while
//! the other is unread cannot deadlock; what goes past [`OUTPUT_LIMIT`] is read and dropped,
//! so a command that prints without end costs bounded memory and still runs to its end.

use std::io::Read;
use std::os::unix::process::ExitStatusExt;
use std::process::{Command, ExitStatus, Stdio};

use rewind_sandbox::Sandboxed;
use schemars::JsonSchema;
use serde::Serialize;

use crate::{ApiError, ErrorKind};

/// The most bytes kept of each stream.
pub const OUTPUT_LIMIT: usize = 1 << 20;

/// What a command printed, as far as it was kept.
#[derive(Clone, Debug, Default, Serialize, serde::Deserialize, JsonSchema)]
pub struct Output {
    /// Its standard output (lossy UTF-8), the first [`OUTPUT_LIMIT`] bytes.
    pub stdout: String,
    /// Its standard error (lossy UTF-8), the first [`OUTPUT_LIMIT`] bytes.
    pub stderr: String,
    /// Bytes left out past the limit, over both streams.
    pub truncated: u64,
}

/// A command ready to start.
pub(crate) enum Runnable {
    /// As it is.
    Plain(Command),
    /// Under its sandbox policy.
    Sandboxed(Sandboxed),
}

impl Runnable {
    /// Runs it to its end: with this process's standard streams, or (`collect`) with empty
    /// standard input and its output kept.
    pub(crate) fn run(self, collect: bool) -> Result<(ExitStatus, Option<Output>), ApiError> {
        let not_run = |c: &Command| {
            let program = c.get_program().to_string_lossy().into_owned();
            move |e: std::io::Error| {
                ApiError::new(ErrorKind::Error, e.to_string())
                    .context(format!("cannot run {program}"))
            }
        };
        match (self, collect) {
            (Runnable::Plain(mut c), false) => {
                #[cfg(all(target_os = "linux", target_env = "gnu"))]
                if let Some(s) = crate::spawn::spawn(&c, false).map_err(not_run(&c))? {
                    return Ok((s.wait().map_err(not_run(&c))?, None));
                }
                Ok((c.status().map_err(not_run(&c))?, None))
            }
            (Runnable::Sandboxed(s), false) => Ok((s.status()?, None)),
            (Runnable::Plain(mut c), true) => {
                let failed = not_run(&c);
                #[cfg(all(target_os = "linux", target_env = "gnu"))]
                if let Some(mut s) = crate::spawn::spawn(&c, true).map_err(failed.clone())? {
                    let (out, err) = (s.stdout.take(), s.stderr.take());
                    return collected(out, err, || s.wait().map_err(failed));
                }
                let mut child = c
                    .stdin(Stdio::null())
                    .stdout(Stdio::piped())
                    .stderr(Stdio::piped())
                    .spawn()
                    .map_err(failed.clone())?;
                let (out, err) = (child.stdout.take(), child.stderr.take());
                collected(out, err, || child.wait().map_err(failed))
            }
            (Runnable::Sandboxed(mut s), true) => {
                s.stdin(Stdio::null())
                    .stdout(Stdio::piped())
                    .stderr(Stdio::piped());
                let mut child = s.spawn()?;
                let c = child.child_mut();
                let (out, err) = (c.stdout.take(), c.stderr.take());
                collected(out, err, || Ok(child.wait()?))
            }
        }
    }
}

/// The exit code a shell shows: the code, or 128+N when killed by signal N.
pub(crate) fn exit_code(status: ExitStatus) -> i32 {
    status
        .code()
        .unwrap_or_else(|| 128 + status.signal().unwrap_or(0))
}

fn collected(
    out: Option<impl Read + Send + 'static>,
    err: Option<impl Read + Send + 'static>,
    wait: impl FnOnce() -> Result<ExitStatus, ApiError>,
) -> Result<(ExitStatus, Option<Output>), ApiError> {
    fn keep(pipe: Option<impl Read + Send + 'static>) -> std::thread::JoinHandle<(Vec<u8>, u64)> {
        std::thread::spawn(move || {
            let (mut kept, mut dropped) = (Vec::new(), 0u64);
            if let Some(mut p) = pipe {
                let mut buf = [0u8; 64 * 1024];
                while let Ok(n) = p.read(&mut buf) {
                    if n == 0 {
                        break;
                    }
                    let room = OUTPUT_LIMIT - kept.len();
                    kept.extend_from_slice(&buf[..n.min(room)]);
                    dropped += n.saturating_sub(room) as u64;
                }
            }
            (kept, dropped)
        })
    }
    let (out, err) = (keep(out), keep(err));
    let status = wait()?;
    let (stdout, d1) = out.join().unwrap_or_default();
    let (stderr, d2) = err.join().unwrap_or_default();
    Ok((
        status,
        Some(Output {
            stdout: String::from_utf8_lossy(&stdout).into_owned(),
            stderr: String::from_utf8_lossy(&stderr).into_owned(),
            truncated: d1 + d2,
        }),
    ))
}
