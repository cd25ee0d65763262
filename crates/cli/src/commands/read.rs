//! `rewind read`: print files and record what the session has now seen of them.

use std::io::Write;
use std::path::PathBuf;

use rewind_api::{LineRange, ReadFile, ReadRequest, ReadResponse};

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

/// The lines of `r`, each prefixed with its number (as `cat -n`).
fn numbered(r: &ReadFile) -> Vec<u8> {
    let first = r.range.map_or(1, |(s, _)| s);
    let mut out = Vec::with_capacity(r.bytes.len() + r.bytes.len() / 8);
    for (i, line) in r.bytes.split_inclusive(|b| *b == b'\n').enumerate() {
        out.extend_from_slice(format!("{:>6}\t", first + i).as_bytes());
        out.extend_from_slice(line);
    }
    out
}

pub fn run(cli: &Cli, args: &Args) -> anyhow::Result<i32> {
    let service = super::service(cli)?;
    let mut doc = ReadResponse {
        session: cli.session.clone(),
        files: Vec::new(),
    };
    let stdout = std::io::stdout();
    // One file at a time, so what was read is printed before a later file fails.
    for p in &args.paths {
        let mut one = service.read(&ReadRequest {
            paths: vec![p.clone()],
            range: args.range,
            record_only: false,
        })?;
        let r = one.files.remove(0);
        if !cli.json {
            let mut out = stdout.lock();
            if args.paths.len() > 1 {
                if !doc.files.is_empty() {
                    out.write_all(b"\n")?;
                }
                writeln!(out, "==> {} <==", p.display())?;
            }
            if args.number {
                out.write_all(&numbered(&r))?;
            } else {
                out.write_all(&r.bytes)?;
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
        doc.files.push(r);
    }
    if cli.json {
        println!("{}", serde_json::to_string_pretty(&doc)?);
    }
    Ok(0)
}
