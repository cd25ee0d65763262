//! `rewind log`: checkpoints and epochs, newest first.
//!
//! Also home of the small presentation helpers the "looking" commands share (`show`, `diff`):
//! local times and terminal colour.

use std::io::IsTerminal;

use rewind_core::{EpochState, LogItem, Owner};
use serde::Serialize;

use crate::output::emit;
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

#[derive(Serialize)]
struct Item<'a> {
    #[serde(flatten)]
    item: &'a LogItem,
    /// `created_ns` as local RFC 3339 time.
    time: String,
}

#[derive(Serialize)]
struct Doc<'a> {
    /// The session shown, `null` with --all-sessions.
    session: Option<&'a str>,
    items: Vec<Item<'a>>,
    /// Whether older entries were left out by the limit.
    more: bool,
}

pub fn run(cli: &Cli, args: &Args) -> anyhow::Result<i32> {
    let ws = super::open_workspace(cli, false)?;
    let session = (!args.all_sessions).then_some(cli.session.as_str());
    let limit = if args.limit == 0 {
        i64::MAX as usize - 1
    } else {
        args.limit
    };
    let mut items = ws.log(session, limit + 1)?;
    let more = items.len() > limit;
    items.truncate(limit);
    let doc = Doc {
        session,
        items: items
            .iter()
            .map(|item| Item {
                item,
                time: rfc3339(created_ns(item)),
            })
            .collect(),
        more,
    };
    emit(cli.json, &doc, |d| write_stdout(&human(d, args)))?;
    Ok(0)
}

fn created_ns(item: &LogItem) -> i64 {
    match item {
        LogItem::Epoch { epoch, .. } => epoch.created_ns,
        LogItem::Checkpoint { checkpoint } => checkpoint.created_ns,
    }
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
    }
}

fn human(d: &Doc, args: &Args) -> String {
    if d.items.is_empty() {
        return match d.session {
            Some(s) => format!(
                "no checkpoints or epochs yet in session {s} (`rewind log --all-sessions` shows every session)\n"
            ),
            None => "no checkpoints or epochs yet\n".into(),
        };
    }
    let rows: Vec<Row> = d.items.iter().map(|i| row(i.item)).collect();
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

/// Writes human output to stdout. A closed pipe (`rewind log | head`) ends the output
/// quietly instead of panicking.
pub(crate) fn write_stdout(text: &str) {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(text.as_bytes()).and_then(|()| out.flush());
}

/// The first 10 characters of an id (full ids are in `--json`).
pub(crate) fn short_id(id: &str) -> String {
    id.chars().take(10).collect()
}

/// Who owns an epoch, for humans.
pub(crate) fn owner_text(o: &Owner) -> String {
    match o {
        Owner::Process { pid, .. } => format!("process {pid}"),
        Owner::Session => "session".into(),
    }
}

/// Broken-down local time of a nanosecond Unix timestamp, and its UTC offset in seconds.
fn local_tm(ns: i64) -> Option<(libc::tm, i64)> {
    let secs: libc::time_t = ns.div_euclid(1_000_000_000) as libc::time_t;
    // SAFETY: an all-zero `tm` is a valid value; localtime_r fills it and touches nothing else.
    let mut tm: libc::tm = unsafe { std::mem::zeroed() };
    let ok = unsafe { !libc::localtime_r(&secs, &mut tm).is_null() };
    ok.then(|| {
        let off = tm.tm_gmtoff;
        (tm, off)
    })
}

/// `2025-06-01 14:03:25` in local time.
pub(crate) fn local_time(ns: i64) -> String {
    match local_tm(ns) {
        Some((tm, _)) => format!(
            "{:04}-{:02}-{:02} {:02}:{:02}:{:02}",
            tm.tm_year + 1900,
            tm.tm_mon + 1,
            tm.tm_mday,
            tm.tm_hour,
            tm.tm_min,
            tm.tm_sec
        ),
        None => format!("@{}", ns / 1_000_000_000),
    }
}

/// `2025-06-01T14:03:25.123+02:00`: local time with its offset, for JSON.
pub(crate) fn rfc3339(ns: i64) -> String {
    match local_tm(ns) {
        Some((tm, off)) => {
            let sign = if off < 0 { '-' } else { '+' };
            let off = off.abs();
            format!(
                "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}{sign}{:02}:{:02}",
                tm.tm_year + 1900,
                tm.tm_mon + 1,
                tm.tm_mday,
                tm.tm_hour,
                tm.tm_min,
                tm.tm_sec,
                ns.rem_euclid(1_000_000_000) / 1_000_000,
                off / 3600,
                (off % 3600) / 60
            )
        }
        None => String::new(),
    }
}

/// `1.2s`, `340ms`, `3m05s`: a short duration for humans.
pub(crate) fn duration_text(ns: i64) -> String {
    let ms = ns.max(0) / 1_000_000;
    if ms < 1000 {
        format!("{ms}ms")
    } else if ms < 60_000 {
        format!("{:.1}s", ms as f64 / 1000.0)
    } else {
        let s = ms / 1000;
        format!("{}m{:02}s", s / 60, s % 60)
    }
}

pub(crate) const RED: &str = "31";
pub(crate) const GREEN: &str = "32";
pub(crate) const YELLOW: &str = "33";
pub(crate) const CYAN: &str = "36";
pub(crate) const BOLD: &str = "1";
pub(crate) const DIM: &str = "2";

/// Plain ANSI colour, only when stdout is a terminal and `NO_COLOR` is unset (or empty).
#[derive(Clone, Copy)]
pub(crate) struct Colour(bool);

impl Colour {
    pub(crate) fn stdout() -> Colour {
        let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
        Colour(!no_color && std::io::stdout().is_terminal())
    }

    pub(crate) fn paint(self, code: &str, text: &str) -> String {
        if self.0 && !text.is_empty() {
            format!("\x1b[{code}m{text}\x1b[0m")
        } else {
            text.to_string()
        }
    }
}
