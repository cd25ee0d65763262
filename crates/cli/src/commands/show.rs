//! `rewind show`: one checkpoint or epoch, with its changes.

use std::fmt::Write as _;

use rewind_api::{EpochState, ShowRequest, ShowResponse, ShownChange, ShownCheckpoint, ShownEpoch};

use crate::output::{emit, human_bytes};
use crate::render::{
    duration_text, local_time, owner_text, write_stdout, Colour, BOLD, DIM, YELLOW,
};
use crate::Cli;

/// Show one checkpoint or epoch: all its fields, and for an epoch the paths it changed.
///
/// ID is an epoch or checkpoint id (or a unique prefix), or a message id of the session.
/// Paths an epoch could not capture (too large, unreadable) are listed as uncovered: a restore
/// cannot bring their content back.
///
/// Examples:
///   rewind show 7c01
///   rewind show msg-41
///   rewind --json show 3fa9c2
#[derive(clap::Args, Debug)]
#[command(verbatim_doc_comment)]
pub struct Args {
    /// Epoch or checkpoint id (unique prefix), or message id.
    #[arg(value_name = "ID")]
    pub id: String,
}

/// What changed beyond the action, e.g. `0644 → 0755` or `file → symlink`.
fn detail(ch: &ShownChange) -> String {
    let c = &ch.change;
    match (&c.before, &c.after) {
        _ if ch.pending => "(epoch open: post image not recorded yet)".into(),
        (b, Some(a)) if a.kind == "uncovered" => format!(
            "(not captured, {} bytes{}; a restore cannot bring it back)",
            a.size,
            b.as_ref()
                .map(|b| format!("; was a {} of {} bytes", b.kind, b.size))
                .unwrap_or_default()
        ),
        (Some(b), _) if b.kind == "uncovered" => {
            format!(
                "(its earlier content, {} bytes, was never captured)",
                b.size
            )
        }
        (Some(b), Some(a)) if b.kind != a.kind => format!("{} → {}", b.kind, a.kind),
        (Some(b), Some(a)) if b.mode != a.mode && c.action == "mode" => {
            format!("{} → {}", b.mode, a.mode)
        }
        (Some(b), Some(a)) if b.mode != a.mode => {
            format!("{} → {} bytes, {} → {}", b.size, a.size, b.mode, a.mode)
        }
        (Some(b), Some(a)) if a.kind != "dir" => format!("{} → {} bytes", b.size, a.size),
        (None, Some(a)) if a.kind != "dir" => format!("{}, {} bytes", a.kind, a.size),
        (None, Some(a)) => a.kind.to_string(),
        (Some(b), None) if b.kind != "dir" => format!("{}, {} bytes", b.kind, b.size),
        (Some(b), None) => b.kind.to_string(),
        _ => String::new(),
    }
}

pub fn run(cli: &Cli, args: &Args) -> anyhow::Result<i32> {
    let doc = super::service(cli)?.show(&ShowRequest {
        id: args.id.clone(),
    })?;
    emit(cli.json, &doc, |d| match d {
        ShowResponse::Epoch(e) => write_stdout(&epoch_text(e)),
        ShowResponse::Checkpoint(c) => write_stdout(&checkpoint_text(c)),
    })?;
    Ok(0)
}

fn field(out: &mut String, name: &str, value: impl std::fmt::Display) {
    let _ = writeln!(out, "{name:<10} {value}");
}

fn epoch_text(d: &ShownEpoch) -> String {
    let e = &d.epoch;
    let c = Colour::stdout();
    let mut o = String::new();
    let _ = writeln!(o, "{} {}", c.paint(BOLD, "epoch"), c.paint(YELLOW, &e.id));
    field(&mut o, "session", &e.session);
    field(&mut o, "kind", e.kind.as_str());
    let mut state = e.state.as_str().to_string();
    if e.recovered {
        state.push_str(" (recovered: settled after its owner went away)");
    }
    field(&mut o, "state", state);
    if let Some(ns) = e.collected_ns {
        field(
            &mut o,
            "collected",
            format!("{} (its content is no longer kept)", local_time(ns)),
        );
    }
    if let Some(t) = &e.tool {
        field(&mut o, "tool", t);
    }
    if let Some(t) = &e.tool_call {
        field(&mut o, "tool call", t);
    }
    if let Some(m) = &e.message {
        field(&mut o, "message", m);
    }
    field(&mut o, "owner", owner_text(&e.owner));
    field(&mut o, "position", e.pos);
    field(&mut o, "created", local_time(e.created_ns));
    if let Some(s) = e.settled_ns {
        let took = duration_text(s - e.created_ns);
        field(
            &mut o,
            "settled",
            format!("{} (after {took})", local_time(s)),
        );
    }
    if let Some(n) = &e.note {
        field(&mut o, "note", n);
    }
    if !d.paths.is_empty() {
        field(&mut o, "declared", d.paths.join(", "));
    }
    if let Some(r) = &d.pre_root {
        field(&mut o, "pre tree", r);
    }
    o.push('\n');
    let _ = match d.changes.len() {
        0 => writeln!(o, "no changed paths"),
        1 => writeln!(o, "1 changed path:"),
        n => writeln!(o, "{n} changed paths:"),
    };
    let wa = d
        .changes
        .iter()
        .map(|x| x.change.action.len())
        .max()
        .unwrap_or(0);
    let wp = d
        .changes
        .iter()
        .map(|x| x.change.path.chars().count())
        .max()
        .unwrap_or(0);
    for ch in &d.changes {
        let detail = detail(ch);
        let line = format!(
            "  {:<wa$}  {:<wp$}  {}",
            ch.change.action,
            ch.change.path,
            c.paint(DIM, &detail)
        );
        let _ = writeln!(o, "{}", line.trim_end());
    }
    let uncovered = d.changes.iter().filter(|x| x.uncovered).count();
    if uncovered > 0 {
        let _ = writeln!(
            o,
            "\nnote: {uncovered} path(s) were not captured (too large, unreadable or over the time \
             budget); their content is not in the store and a restore cannot bring it back"
        );
    }
    if e.state == EpochState::Open {
        let _ = writeln!(
            o,
            "\nnote: this epoch is still open; `rewind epoch end` records what it changed"
        );
    }
    o
}

fn checkpoint_text(d: &ShownCheckpoint) -> String {
    let k = &d.checkpoint;
    let c = Colour::stdout();
    let mut o = String::new();
    let _ = writeln!(
        o,
        "{} {}",
        c.paint(BOLD, "checkpoint"),
        c.paint(YELLOW, &k.id)
    );
    field(&mut o, "session", &k.session);
    field(&mut o, "message", k.message.as_deref().unwrap_or("-"));
    field(&mut o, "parent", k.parent.as_deref().unwrap_or("-"));
    if let Some(l) = &k.label {
        field(&mut o, "label", l);
    }
    field(&mut o, "position", k.pos);
    field(&mut o, "created", local_time(k.created_ns));
    field(&mut o, "tree", k.root.to_hex());
    field(&mut o, "pinned", if k.pinned { "yes" } else { "no" });
    if let Some(ns) = k.collected_ns {
        field(
            &mut o,
            "collected",
            format!("{} (restoring to it is no longer possible)", local_time(ns)),
        );
    }
    let payload = match d.payload_size {
        Some(n) if n >= 1024 => format!("{n} bytes ({})", human_bytes(n as u64)),
        Some(n) => format!("{n} bytes"),
        None => "none".into(),
    };
    field(&mut o, "payload", payload);
    o
}
