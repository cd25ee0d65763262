//! `rewind log`: checkpoints, epochs and setting changes, newest first.

use rewind_api::{EpochState, LogItem, LogRequest, LogResponse};

use crate::output::emit;
use crate::render::{local_time, short_id, write_stdout, Colour, DIM, YELLOW};
use crate::Cli;

/// Checkpoints and epochs of the session (and external changes), newest first.
///
/// Each line: id (short; full ids in --json), local time, session, kind, number of changed
/// paths (and how many were not captured), then the message id, tool or label. Ids are
/// accepted by unique prefix by `rewind show`, `rewind diff` and `rewind restore`.
///
/// Examples:
///   rewind log
///   rewind log --all-sessions --limit 20
///   rewind -s agent-7 --json log
#[derive(clap::Args, Debug)]
#[command(verbatim_doc_comment)]
pub struct Args {
    /// Every session's checkpoints and epochs, not only the current session's.
    #[arg(long)]
    pub all_sessions: bool,
    /// At most N entries (0: no limit).
    #[arg(long, short = 'n', value_name = "N", default_value_t = 100)]
    pub limit: usize,
}

pub fn run(cli: &Cli, args: &Args) -> anyhow::Result<i32> {
    let doc = super::service(cli)?.log(&LogRequest {
        all_sessions: args.all_sessions,
        limit: args.limit,
    })?;
    emit(cli.json, &doc, |d| write_stdout(&human(d, args)))?;
    Ok(0)
}

/// One row of the human table.
struct Row {
    what: &'static str,
    id: String,
    time: String,
    session: String,
    kind: String,
    paths: String,
    detail: String,
}

fn row(item: &LogItem) -> Row {
    match item {
        LogItem::Epoch {
            epoch,
            changes,
            uncovered,
        } => {
            let mut detail = Vec::new();
            if let Some(t) = &epoch.tool {
                detail.push(format!("tool={t}"));
            }
            if let Some(t) = &epoch.tool_call {
                detail.push(format!("call={t}"));
            }
            if let Some(m) = &epoch.message {
                detail.push(format!("msg={m}"));
            }
            if epoch.state != EpochState::Settled {
                detail.push(format!("[{}]", epoch.state.as_str()));
            }
            if epoch.recovered {
                detail.push("[recovered]".into());
            }
            if let Some(ns) = epoch.collected_ns {
                detail.push(format!("[collected {}]", local_time(ns)));
            }
            if let Some(n) = &epoch.note {
                detail.push(format!("({n})"));
            }
            let paths = if *uncovered > 0 {
                format!("{changes} ({uncovered} uncovered)")
            } else {
                changes.to_string()
            };
            Row {
                what: "epoch",
                id: short_id(&epoch.id),
                time: local_time(epoch.created_ns),
                session: if epoch.session.is_empty() {
                    "-".into()
                } else {
                    epoch.session.clone()
                },
                kind: epoch.kind.as_str().to_string(),
                paths,
                detail: detail.join(" "),
            }
        }
        LogItem::Checkpoint { checkpoint: c } => {
            let mut detail = Vec::new();
            if let Some(m) = &c.message {
                detail.push(format!("msg={m}"));
            }
            if let Some(l) = &c.label {
                detail.push(format!("label={l:?}"));
            }
            if c.pinned {
                detail.push("[pinned]".into());
            }
            if let Some(ns) = c.collected_ns {
                detail.push(format!("[collected {}]", local_time(ns)));
            }
            Row {
                what: "checkpoint",
                id: short_id(&c.id),
                time: local_time(c.created_ns),
                session: c.session.clone(),
                kind: "-".into(),
                paths: "-".into(),
                detail: detail.join(" "),
            }
        }
        LogItem::Setting { setting: s } => {
            let mut detail = vec![format!(
                "{}: {} -> {}",
                s.key,
                s.previous.as_deref().unwrap_or("(configured)"),
                s.value
            )];
            let by: Vec<String> = [
                s.by_user.clone(),
                s.front.as_ref().map(|f| format!("via {f}")),
                s.by_pid.map(|p| format!("pid {p}")),
            ]
            .into_iter()
            .flatten()
            .collect();
            if !by.is_empty() {
                detail.push(format!("(by {})", by.join(", ")));
            }
            Row {
                what: "setting",
                id: "-".into(),
                time: local_time(s.created_ns),
                session: s.session.clone().unwrap_or_else(|| "-".into()),
                kind: "-".into(),
                paths: "-".into(),
                detail: detail.join(" "),
            }
        }
    }
}

fn human(d: &LogResponse, args: &Args) -> String {
    if d.items.is_empty() {
        return match &d.session {
            Some(s) => format!(
                "no checkpoints or epochs yet in session {s} (`rewind log --all-sessions` shows every session)\n"
            ),
            None => "no checkpoints or epochs yet\n".into(),
        };
    }
    let rows: Vec<Row> = d.items.iter().map(|i| row(&i.item)).collect();
    let header = Row {
        what: "TYPE",
        id: "ID".into(),
        time: "TIME".into(),
        session: "SESSION".into(),
        kind: "KIND".into(),
        paths: "PATHS".into(),
        detail: "DETAIL".into(),
    };
    let w = |f: fn(&Row) -> usize| rows.iter().chain([&header]).map(f).max().unwrap_or(0);
    let (ww, wi, wt, ws, wk, wp) = (
        w(|r| r.what.len()),
        w(|r| r.id.len()),
        w(|r| r.time.len()),
        w(|r| r.session.chars().count()),
        w(|r| r.kind.len()),
        w(|r| r.paths.len()),
    );
    let c = Colour::stdout();
    let line = |r: &Row, head: bool| {
        let text = format!(
            "{:<ww$}  {}  {:<wt$}  {:<ws$}  {:<wk$}  {:>wp$}  {}",
            r.what,
            if head {
                format!("{:<wi$}", r.id)
            } else {
                c.paint(YELLOW, &format!("{:<wi$}", r.id))
            },
            r.time,
            r.session,
            r.kind,
            r.paths,
            r.detail
        );
        text.trim_end().to_string()
    };
    let mut out = format!("{}\n", c.paint(DIM, &line(&header, true)));
    for r in &rows {
        out.push_str(&line(r, false));
        out.push('\n');
    }
    if d.more {
        eprintln!(
            "(showing the newest {}; `--limit N` shows more, `--limit 0` all)",
            args.limit
        );
    }
    out
}
