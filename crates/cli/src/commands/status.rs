//! `rewind status`: the workspace, its store and what is not covered.

use crate::output::{emit, human_bytes};
use crate::Cli;

/// Show the workspace root and id, store size, sessions and heads, open epochs, unfinished
/// restores and uncovered paths.
#[derive(clap::Args, Debug)]
pub struct Args {}

pub fn run(cli: &Cli, _args: &Args) -> anyhow::Result<i32> {
    let status = super::service(cli)?.status(&rewind_api::StatusRequest {})?;
    emit(cli.json, &status, |s| {
        println!("workspace  {}", s.root);
        println!("id         {}", s.id);
        println!("state      {}", s.state_dir);
        println!(
            "store      {} in {} packs ({} objects, {} uncompressed)",
            human_bytes(s.store.pack_bytes),
            s.store.packs,
            s.store.objects,
            human_bytes(s.store.raw_bytes)
        );
        if s.store.clones > 0 {
            println!(
                "clones     {} large files cloned in ({}; {} of blocks their own)",
                s.store.clones,
                human_bytes(s.store.clone_bytes),
                human_bytes(s.store.clone_own_bytes)
            );
        }
        match &s.last_snapshot {
            Some(l) => println!(
                "snapshots  {} (last: #{} {}, tree {})",
                s.snapshots,
                l.seq,
                l.label,
                &l.root.to_hex()[..12]
            ),
            None => println!("snapshots  none yet (run `rewind init`)"),
        }
        for sh in &s.sessions {
            println!(
                "session    {} (head: {})",
                sh.session,
                sh.head.as_deref().unwrap_or("none")
            );
        }
        for e in &s.open_epochs {
            println!(
                "open       epoch {} ({}, session {}, tool {})",
                e.id,
                e.kind.as_str(),
                e.session,
                e.tool.as_deref().unwrap_or("-")
            );
        }
        if let Some(srv) = &s.server {
            let at = match &srv.socket {
                Some(p) => format!("on {}", p.display()),
                None => "on its standard input".to_string(),
            };
            let watcher = if srv.watcher {
                "its file watcher vouches for changes"
            } else {
                "no file watcher: its captures walk the tree"
            };
            println!("server     pid {} {at}; {watcher}", srv.pid);
            if let Some(url) = &srv.http {
                println!("web UI     {url} (`rewind ui` prints it with its token)");
            }
        }
        for r in &s.unfinished_restores {
            println!(
                "unfinished restore {r} (the next command finishes it; or run `rewind recover`)"
            );
        }
        for o in &s.orphans {
            println!(
                "orphan     history of {} ({}): its root is gone (`rewind workspace list`; \
                 running rewind in the moved directory re-links it; `rewind gc --max-age` \
                 reclaims it once idle)",
                o.root,
                human_bytes(o.bytes)
            );
        }
        if s.uncovered.is_empty() {
            println!("uncovered  none");
        } else {
            println!(
                "uncovered  {} paths (never restored or deleted):",
                s.uncovered.len()
            );
            for u in &s.uncovered {
                println!("  {} ({} bytes)", u.path_display(), u.size);
            }
        }
    })?;
    Ok(0)
}
