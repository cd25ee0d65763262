//! `rewind check-write`: would the guard allow a write now?

use std::path::PathBuf;

use serde::Serialize;

use crate::{exit, Cli};

/// Exit 0 if a guarded write would be allowed now, 5 with the reason if not
///
/// Exit 0 if a guarded write of PATH would be allowed now, 5 with the reason if not: the file
/// was never read in this session, or changed since it was read (and by whom, when the op log
/// knows). A path that does not exist needs no read. Writes nothing.
///
/// Examples:
///   rewind check-write src/lib.rs
///   rewind -s agent-7 --json check-write src/lib.rs src/main.rs
#[derive(clap::Args, Debug)]
#[command(verbatim_doc_comment)]
pub struct Args {
    /// Files to check (relative to the current directory or -C DIR, or absolute inside the
    /// workspace).
    #[arg(required = true, value_name = "PATH")]
    pub paths: Vec<PathBuf>,
}

#[derive(Serialize)]
struct Verdict {
    path: String,
    allowed: bool,
    new_file: bool,
    partial_read: bool,
    reason: Option<String>,
    refusal: Option<rewind_core::GuardRefusal>,
}

pub fn run(cli: &Cli, args: &Args) -> anyhow::Result<i32> {
    let ws = super::open_workspace(cli, false)?;
    let mut verdicts = Vec::new();
    for p in &args.paths {
        let rel = super::user_path(cli, ws.root(), p)?;
        match ws.check_write(&cli.session, &rel) {
            Ok(c) => verdicts.push(Verdict {
                path: rewind_core::relpath::display(&rel),
                allowed: true,
                new_file: c.new_file,
                partial_read: c.fingerprint.as_ref().is_some_and(|f| f.partial),
                reason: None,
                refusal: None,
            }),
            Err(rewind_core::Error::Guard(refusals)) => {
                for r in refusals {
                    verdicts.push(Verdict {
                        path: rewind_core::relpath::display(&r.path),
                        allowed: false,
                        new_file: false,
                        partial_read: r.partial,
                        reason: Some(r.to_string()),
                        refusal: Some(r),
                    });
                }
            }
            Err(e) => return Err(e.into()),
        }
    }
    let refused = verdicts.iter().any(|v| !v.allowed);
    if cli.json {
        println!("{}", serde_json::to_string_pretty(&verdicts)?);
    }
    for v in &verdicts {
        match &v.reason {
            Some(reason) => eprintln!("rewind: refusing to write {reason}"),
            None if !cli.json => {
                let how = if v.new_file {
                    "new file, no read needed".to_string()
                } else if v.partial_read {
                    "unchanged since this session read it (it read only part of it)".to_string()
                } else {
                    "unchanged since this session read it".to_string()
                };
                println!("ok: {}: {how}", v.path);
            }
            None => {}
        }
    }
    Ok(if refused { exit::GUARD } else { exit::OK })
}
