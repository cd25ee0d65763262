//! `rewind read`: print files and record what the session has now seen of them.

use std::io::Write;
use std::path::PathBuf;

use rewind_core::{Fingerprint, LineRange, ReadResult};
use serde::Serialize;

use crate::Cli;

/// Print files and record what the session has seen of them (the guard's baseline)
///
/// Prints the file(s) and records what this session has now seen of them: the baseline the
/// read-before-edit guard checks `write`, `edit` and `apply-patch` against.
///
/// The content goes to stdout byte for byte (with several files, each under a `==> PATH <==`
/// header). With --range only those lines are printed, the whole file's fingerprint is still
/// recorded, and a note on stderr says the read was partial. Symlinks are never followed.
///
/// Examples:
///   rewind read src/lib.rs
///   rewind read --range 120:180 -n src/main.rs
///   rewind -s agent-7 --json read Cargo.toml
#[derive(clap::Args, Debug)]
#[command(verbatim_doc_comment)]
pub struct Args {
    /// Files to read (relative to the current directory or -C DIR, or absolute inside the
    /// workspace).
    #[arg(required = true, value_name = "PATH")]
    pub paths: Vec<PathBuf>,
    /// Only these lines, 1-based and inclusive: START:END, START: or :END.
    #[arg(long, value_name = "START:END")]
    pub range: Option<LineRange>,
    /// Prefix each line with its number (as `cat -n` does).
    #[arg(short = 'n', long)]
    pub number: bool,
}

#[derive(Serialize)]
struct FileView<'a> {
    path: String,
    size: u64,
    lines: usize,
    range: Option<(usize, usize)>,
    partial: bool,
    /// The bytes returned (lossy UTF-8 when `utf8` is false).
    content: String,
    utf8: bool,
    fingerprint: &'a Fingerprint,
}

#[derive(Serialize)]
struct Out<'a> {
    session: &'a str,
    files: Vec<FileView<'a>>,
}

fn numbered(r: &ReadResult) -> Vec<u8> {
    let first = r.range.map_or(1, |(s, _)| s);
    let mut out = Vec::with_capacity(r.content.len() + r.content.len() / 8);
    for (i, line) in rewind_core::patch::split_lines(&r.content)
        .iter()
        .enumerate()
    {
        out.extend_from_slice(format!("{:>6}\t", first + i).as_bytes());
        out.extend_from_slice(line);
    }
    out
}

pub fn run(cli: &Cli, args: &Args) -> anyhow::Result<i32> {
    let ws = super::open_workspace(cli, false)?;
    let mut results = Vec::new();
    let stdout = std::io::stdout();
    for p in &args.paths {
        let rel = super::user_path(cli, ws.root(), p)?;
        let r = ws.read_file(&cli.session, &rel, args.range)?;
        if !cli.json {
            let mut out = stdout.lock();
            if args.paths.len() > 1 {
                if !results.is_empty() {
                    out.write_all(b"\n")?;
                }
                writeln!(out, "==> {} <==", p.display())?;
            }
            if args.number {
                out.write_all(&numbered(&r))?;
            } else {
                out.write_all(&r.content)?;
            }
            out.flush()?;
            if r.partial {
                let (a, b) = r.range.unwrap_or((1, r.lines));
                eprintln!(
                    "rewind: {}: partial read, lines {a}-{b} of {} (the whole file's fingerprint was recorded)",
                    p.display(),
                    r.lines
                );
            }
        }
        results.push(r);
    }
    if cli.json {
        let out = Out {
            session: &cli.session,
            files: results
                .iter()
                .map(|r| FileView {
                    path: rewind_core::relpath::display(&r.path),
                    size: r.size,
                    lines: r.lines,
                    range: r.range,
                    partial: r.partial,
                    utf8: std::str::from_utf8(&r.content).is_ok(),
                    content: String::from_utf8_lossy(&r.content).into_owned(),
                    fingerprint: &r.fingerprint,
                })
                .collect(),
        };
        println!("{}", serde_json::to_string_pretty(&out)?);
    }
    Ok(0)
}
