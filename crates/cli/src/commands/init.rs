//! `rewind init`: register the workspace and take the baseline capture.

use std::io::IsTerminal;
use std::sync::atomic::Ordering;
use std::time::Duration;

use rewind_api::Progress;

use crate::output::{emit, human_bytes};
use crate::Cli;

/// Register the workspace and take the baseline capture.
///
/// Examples:
///   rewind init
///   rewind -C ~/src/project init
#[derive(clap::Args, Debug)]
#[command(verbatim_doc_comment)]
pub struct Args {
    /// Allow `/` or the home directory as a workspace, or register anew a directory that was
    /// replaced since it was registered.
    #[arg(long)]
    pub force: bool,
}

pub fn run(cli: &Cli, args: &Args) -> anyhow::Result<i32> {
    let service = super::service(cli)?;
    let progress = Progress::default();
    let show = !cli.json && std::io::stderr().is_terminal();
    let done = std::sync::atomic::AtomicBool::new(false);
    let bar = show.then(|| {
        let bar = indicatif::ProgressBar::new_spinner();
        bar.set_style(
            indicatif::ProgressStyle::with_template("{spinner} capturing: {msg} [{elapsed}]")
                .expect("valid template"),
        );
        bar
    });
    let report = std::thread::scope(|s| {
        let (progress, done) = (&progress, &done);
        if let Some(bar) = &bar {
            s.spawn(move || {
                while !done.load(Ordering::Relaxed) {
                    bar.set_message(format!(
                        "{} entries seen, {} files hashed ({})",
                        progress.entries_seen.load(Ordering::Relaxed),
                        progress.files_hashed.load(Ordering::Relaxed),
                        human_bytes(progress.bytes_hashed.load(Ordering::Relaxed)),
                    ));
                    bar.tick();
                    std::thread::sleep(Duration::from_millis(100));
                }
                bar.finish_and_clear();
            });
        }
        let r = service.init(
            &rewind_api::InitRequest { force: args.force },
            Some(progress),
        );
        done.store(true, Ordering::Relaxed);
        r
    })?;
    emit(cli.json, &report, |r| {
        for w in &r.warnings {
            eprintln!("warning: {w}");
        }
        if r.registered {
            println!("Registered workspace {}", r.root);
        } else {
            println!(
                "Workspace {} was already registered; captured it again",
                r.root
            );
        }
        let cloned = match r.files_cloned {
            0 => String::new(),
            n => format!("; {n} cloned, {}", human_bytes(r.bytes_cloned)),
        };
        println!(
            "Captured {} entries ({} files hashed, {}{cloned}; {} new objects)",
            r.entries,
            r.files_hashed,
            human_bytes(r.bytes_hashed),
            r.new_objects
        );
        if !r.uncovered.is_empty() {
            println!(
                "{} paths are not covered (they will never be restored or deleted):",
                r.uncovered.len()
            );
            for u in r.uncovered.iter().take(20) {
                println!("  {} ({} bytes): {}", u.path_display(), u.size, u.reason);
            }
            if r.uncovered.len() > 20 {
                println!(
                    "  … and {} more (rewind status --json lists all)",
                    r.uncovered.len() - 20
                );
            }
        }
        println!("{}", r.id);
    })?;
    super::start_baseline_if_due(cli, &service);
    Ok(0)
}
