//! `rewind check-write`: would the guard allow a write now?

use std::path::PathBuf;

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

pub fn run(cli: &Cli, args: &Args) -> anyhow::Result<i32> {
    let verdicts = super::service(cli)?.check_write(&rewind_api::CheckWriteRequest {
        paths: args.paths.clone(),
    })?;
    let refused = verdicts.0.iter().any(|v| !v.allowed);
    if cli.json {
        println!("{}", serde_json::to_string_pretty(&verdicts)?);
    }
    for v in &verdicts.0 {
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
