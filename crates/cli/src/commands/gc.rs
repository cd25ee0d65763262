//! `rewind gc`: drop old history under the retention policy and free its space.

use rewind_api::{GcReport, GcRequest, RemoteGcReport, Size, Span};

use crate::output::emit;
use crate::Cli;

/// Drop old history under the retention policy, sweep and repack the store.
///
/// Keeps each session's newest N checkpoints (--keep), drops checkpoints older than
/// --max-age, then the oldest first until the workspace's state fits --max-bytes. Each
/// session's head, pinned checkpoints (`rewind pin`), open epochs and unfinished restores are
/// always kept. A collected checkpoint stays in `log`, marked collected; restoring to it exits
/// 7. Unset limits come from `[retention]` in the configuration. With an age, also removes
/// the state of workspaces whose root no longer exists and that were idle longer than it.
///
/// With --remote NAME, the remote is collected too, in two phases: this workspace's history
/// there is pushed listing only what the policy kept; objects no history in the remote
/// references are marked; a later `gc --remote` deletes the ones marked longer ago than the
/// grace period (--grace, default 1h) that are still unreferenced. A push running meanwhile
/// on another machine protects what it relies on, so it never loses an object.
#[derive(clap::Args, Debug)]
#[command(verbatim_doc_comment)]
pub struct Args {
    /// Show what would go (checkpoints, epochs, bytes), write nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Size budget of the workspace's state: 1048576, 500K, 500M, 2G.
    #[arg(long, value_name = "SIZE")]
    pub max_bytes: Option<Size>,
    /// Drop checkpoints older than this: 30s, 15m, 12h, 7d, 2w.
    #[arg(long, value_name = "DURATION")]
    pub max_age: Option<Span>,
    /// Keep each session's newest N checkpoints whatever their age and size.
    #[arg(long, value_name = "N")]
    pub keep: Option<u64>,
    /// Also collect every other workspace registered in the same state directory.
    #[arg(long)]
    pub all_workspaces: bool,
    /// Run only if the state exceeds `[retention] max_bytes` and no other gc of the workspace
    /// runs, else do nothing (what `checkpoint` starts in the background).
    #[arg(long)]
    pub auto: bool,
    /// Then collect this remote (its name): compact this history there, sweep old marks,
    /// mark what nothing references.
    #[arg(long, value_name = "NAME", conflicts_with_all = ["all_workspaces", "auto"])]
    pub remote: Option<String>,
    /// With --remote: how long a marked object stays before a gc may delete it (default 1h;
    /// at least 2m).
    #[arg(long, value_name = "DURATION", requires = "remote")]
    pub grace: Option<Span>,
}

pub fn run(cli: &Cli, args: &Args) -> anyhow::Result<i32> {
    let r = super::service(cli)?.gc(&GcRequest {
        dry_run: args.dry_run,
        max_bytes: args.max_bytes.map(|s| s.0),
        max_age_secs: args.max_age.map(|s| s.0.as_secs()),
        keep: args.keep,
        all_workspaces: args.all_workspaces,
        auto: args.auto,
        remote: args.remote.clone(),
        grace_secs: args.grace.map(|s| s.0.as_secs()),
    })?;
    emit(cli.json, &r, |r| {
        human(&r.report);
        for w in &r.workspaces {
            match (&w.report, &w.error) {
                (Some(report), _) => {
                    println!("workspace {}:", w.root);
                    human(report);
                }
                (None, Some(e)) => println!("workspace {}: not collected: {e}", w.root),
                (None, None) => {}
            }
        }
        if let Some(remote) = &r.remote {
            human_remote(remote);
        }
    })?;
    Ok(0)
}

fn human(r: &GcReport) {
    if r.skipped {
        println!("nothing to do: the state fits its budget, or another gc is running");
        return;
    }
    let would = if r.dry_run { "would drop" } else { "dropped" };
    for c in &r.checkpoints {
        println!(
            "{would} checkpoint {} (session {}, message {})",
            c.id,
            c.session,
            c.message.as_deref().unwrap_or("-")
        );
    }
    if !r.epochs.is_empty() {
        println!("{would} {} epochs' content", r.epochs.len());
    }
    for o in &r.orphans_removed {
        let verb = if r.dry_run { "would remove" } else { "removed" };
        println!(
            "{verb} orphaned workspace {} (root {} is gone; {} bytes)",
            o.id, o.root, o.bytes
        );
    }
    let freed = if r.dry_run { "would free" } else { "freed" };
    println!(
        "{freed} {} bytes ({} objects, {} packs deleted, {} written); state {} -> {} bytes; {} checkpoints kept",
        r.bytes_freed,
        r.objects_removed,
        r.packs_deleted,
        r.packs_written,
        r.state_bytes_before,
        r.state_bytes_after,
        r.kept_checkpoints
    );
    if let (Some(b), false) = (r.max_bytes, r.within_budget) {
        println!(
            "rewind: the state is still over the budget of {b} bytes: what is always kept (heads, pins, the current files) is larger"
        );
    }
}

fn human_remote(r: &RemoteGcReport) {
    println!("remote {} ({}):", r.remote, r.url);
    if let Some(p) = &r.push {
        println!(
            "  pushed this history: {} packs uploaded, {} no longer listed",
            p.packs, p.packs_unlisted
        );
    }
    let deleted = if r.dry_run { "would delete" } else { "deleted" };
    println!(
        "  {deleted} {} objects ({} bytes) of {} marks past their grace; {} kept (referenced again or protected by a push)",
        r.deleted, r.deleted_bytes, r.marks_swept, r.kept
    );
    let marked = if r.dry_run { "would mark" } else { "marked" };
    println!(
        "  {marked} {} unreferenced objects ({} bytes): a gc after {}s deletes them if still unreferenced; {} marks pending",
        r.marked, r.marked_bytes, r.grace_secs, r.marks_pending
    );
}
