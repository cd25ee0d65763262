//! `rewind show`: one checkpoint or epoch, with its changes.

use rewind_core::{relpath, Change, CheckpointRow, EntryView, EpochRow, EpochState, Target};
use rewind_store::EntryKind;
use serde::Serialize;

use std::fmt::Write as _;

use super::log::{
    duration_text, local_time, owner_text, rfc3339, write_stdout, Colour, BOLD, DIM, YELLOW,
};
use crate::output::{emit, human_bytes};
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

/// One change of an epoch as `show` prints it.
#[derive(Serialize)]
pub(crate) struct ShownChange {
    pub action: &'static str,
    pub path: String,
    pub before: Option<EntryView>,
    pub after: Option<EntryView>,
    /// Either side was not captured (content unknown; a restore cannot bring it back).
    pub uncovered: bool,
    /// The epoch is open and this path's post image is not recorded yet.
    pub pending: bool,
}

impl ShownChange {
    pub(crate) fn new(c: &Change, pending: bool) -> ShownChange {
        let v = rewind_core::restore::StepView::from(c);
        let uncovered = [c.before, c.after]
            .iter()
            .flatten()
            .any(|e| e.kind == EntryKind::Uncovered);
        let action = if pending {
            "pending"
        } else if uncovered {
            "uncovered"
        } else {
            v.action
        };
        ShownChange {
            action,
            path: v.path,
            before: v.before,
            after: if pending { None } else { v.after },
            uncovered,
            pending,
        }
    }

    /// What changed beyond the action, e.g. `0644 → 0755` or `file → symlink`.
    fn detail(&self) -> String {
        match (&self.before, &self.after) {
            _ if self.pending => "(epoch open: post image not recorded yet)".into(),
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
            (Some(b), Some(a)) if b.mode != a.mode && self.action == "mode" => {
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
}

#[derive(Serialize)]
struct EpochDoc<'a> {
    r#type: &'static str,
    #[serde(flatten)]
    epoch: &'a EpochRow,
    time: String,
    /// Declared paths of an exact epoch.
    paths: Vec<String>,
    /// The whole-tree state before an opaque epoch, if recorded.
    pre_root: Option<String>,
    changes: Vec<ShownChange>,
}

#[derive(Serialize)]
struct CheckpointDoc<'a> {
    r#type: &'static str,
    #[serde(flatten)]
    checkpoint: &'a CheckpointRow,
    time: String,
    /// Size of the stored payload in bytes, `null` when none.
    payload_size: Option<usize>,
}

pub fn run(cli: &Cli, args: &Args) -> anyhow::Result<i32> {
    let ws = super::open_workspace(cli, false)?;
    match ws.resolve(&cli.session, &args.id)? {
        Target::Epoch(e) => {
            let changes = ws
                .epoch_changes_pending(&e.id)?
                .iter()
                .map(|(c, p)| ShownChange::new(c, *p))
                .collect();
            let doc = EpochDoc {
                r#type: "epoch",
                epoch: &e,
                time: rfc3339(e.created_ns),
                paths: e.paths.iter().map(|p| relpath::display(p)).collect(),
                pre_root: e.pre_root.map(|r| r.to_hex()),
                changes,
            };
            emit(cli.json, &doc, |d| write_stdout(&epoch_text(d)))?;
        }
        Target::Checkpoint(c) => {
            let doc = CheckpointDoc {
                r#type: "checkpoint",
                checkpoint: &c,
                time: rfc3339(c.created_ns),
                payload_size: c.payload.as_ref().map(Vec::len),
            };
            emit(cli.json, &doc, |d| write_stdout(&checkpoint_text(d)))?;
        }
    }
    Ok(0)
}

fn field(out: &mut String, name: &str, value: impl std::fmt::Display) {
    let _ = writeln!(out, "{name:<10} {value}");
}

fn epoch_text(d: &EpochDoc) -> String {
    let e = d.epoch;
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
    let wa = d.changes.iter().map(|x| x.action.len()).max().unwrap_or(0);
    let wp = d
        .changes
        .iter()
        .map(|x| x.path.chars().count())
        .max()
        .unwrap_or(0);
    for ch in &d.changes {
        let detail = ch.detail();
        let line = format!(
            "  {:<wa$}  {:<wp$}  {}",
            ch.action,
            ch.path,
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

fn checkpoint_text(d: &CheckpointDoc) -> String {
    let k = d.checkpoint;
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
    let payload = match d.payload_size {
        Some(n) if n >= 1024 => format!("{n} bytes ({})", human_bytes(n as u64)),
        Some(n) => format!("{n} bytes"),
        None => "none".into(),
    };
    field(&mut o, "payload", payload);
    o
}
