//! Drawing the [`App`]: a header, the body (the timeline with a detail pane, or a diff), a
//! status line and the footer of keys; dialogs over the body. Reads the app, changes only
//! where it is scrolled to.

use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Clear, Paragraph, Wrap};
use ratatui::Frame;
use rewind_api::{EpochKind, EpochState, LogItem, SandboxMode, SandboxModeResponse, Tag};

use crate::app::{App, Level, Modal, View};
use crate::diffview::LineTag;
use crate::plan::{short, Mode, PlanTag, Preview};
use crate::timeline::RowKind;

const ACCENT: Color = Color::Cyan;
const EXTERNAL: Color = Color::Magenta;

/// Draws everything.
pub fn draw(f: &mut Frame, app: &mut App) {
    let [header, body, status, footer] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Min(3),
        Constraint::Length(1),
        Constraint::Length(1),
    ])
    .areas(f.area());
    draw_header(f, header, app);
    match &app.view {
        View::Timeline => draw_timeline(f, body, app),
        View::Diff(_) => draw_diff(f, body, app),
    }
    if let Some((level, text)) = &app.flash {
        let style = match level {
            Level::Info => Style::new().fg(Color::Green),
            Level::Error => Style::new().fg(Color::Red).add_modifier(Modifier::BOLD),
        };
        f.render_widget(Paragraph::new(text.as_str()).style(style), status);
    }
    f.render_widget(Paragraph::new(footer_line(app)), footer);
    if let Some(m) = &app.modal {
        draw_modal(f, body, app, m);
    }
}

fn draw_header(f: &mut Frame, area: Rect, app: &App) {
    let mut spans = vec![
        Span::styled(" rewind ", Style::new().fg(Color::Black).bg(ACCENT)),
        Span::raw(format!(" {}  ", app.display.root)),
        Span::styled("session ", Style::new().add_modifier(Modifier::DIM)),
        Span::styled(
            app.session.clone(),
            Style::new().add_modifier(Modifier::BOLD),
        ),
        Span::styled("  head ", Style::new().add_modifier(Modifier::DIM)),
        Span::raw(app.head.clone().unwrap_or_else(|| "none".into())),
    ];
    spans.push(Span::styled(
        "  sandbox ",
        Style::new().add_modifier(Modifier::DIM),
    ));
    spans.push(match &app.sandbox {
        Some(s) if s.mode == SandboxMode::DangerFullAccess.as_str() => Span::styled(
            "off (danger-full-access)",
            Style::new().fg(Color::Red).add_modifier(Modifier::BOLD),
        ),
        Some(s) => Span::raw(s.mode.clone()),
        None => Span::styled("unknown", Style::new().fg(Color::Yellow)),
    });
    if !app.filter.is_empty() {
        spans.push(Span::styled(
            format!("  filter {}", app.filter),
            Style::new().fg(Color::Yellow),
        ));
    }
    let loaded = format!(
        "  {} entries{}",
        app.entries.len(),
        if app.more { "+" } else { "" }
    );
    spans.push(Span::styled(
        loaded,
        Style::new().add_modifier(Modifier::DIM),
    ));
    f.render_widget(Paragraph::new(Line::from(spans)), area);
}

/// The keys of what has focus, as the footer shows them.
pub fn footer_line(app: &App) -> Line<'static> {
    let keys: &[(&str, &str)] = match (&app.modal, &app.view) {
        (Some(Modal::Preview(p)), _) if p.is_restore() => &[
            ("enter", "confirm"),
            ("m", "mode"),
            ("a", "whole tree"),
            ("M", "merge"),
            ("F", "force…"),
            ("j/k", "scroll"),
            ("esc", "cancel"),
        ],
        (Some(Modal::Preview(_)), _) => &[
            ("enter", "confirm"),
            ("M", "merge"),
            ("F", "force…"),
            ("esc", "cancel"),
        ],
        (Some(Modal::Confirm { .. }), _) => &[("y", "yes, rewind"), ("n/esc", "back")],
        (Some(Modal::Result { .. }), _) => &[("u", "undo this"), ("enter/esc", "close")],
        (Some(Modal::Sessions { .. }), _) => {
            &[("j/k", "move"), ("enter", "switch"), ("esc", "cancel")]
        }
        (Some(Modal::Filter { .. }), _) => &[
            ("enter", "apply (empty clears)"),
            ("ctrl-u", "erase"),
            ("esc", "cancel"),
        ],
        (Some(Modal::Help), _) => &[("any key", "close")],
        (Some(Modal::Sandbox(_)), _) => &[("t", "toggle…"), ("esc", "close")],
        (Some(Modal::SandboxConfirm(_)), _) => &[("y", "yes, change it"), ("n/esc", "cancel")],
        (None, View::Diff(_)) => &[
            ("j/k", "scroll"),
            ("space/b", "page"),
            ("n/N", "next/prev file"),
            ("+", "show more"),
            ("r", "rewind here"),
            ("esc", "back"),
        ],
        (None, View::Timeline) => &[
            ("j/k", "move"),
            ("enter", "diff"),
            ("r", "rewind here"),
            ("u", "undo"),
            ("s", "sessions"),
            ("S", "sandbox"),
            ("/", "filter"),
            ("R", "reload"),
            ("?", "help"),
            ("q", "quit"),
        ],
    };
    let mut spans = Vec::new();
    for (k, what) in keys {
        spans.push(Span::styled(
            format!(" {k} "),
            Style::new().fg(Color::Black).bg(Color::Gray),
        ));
        spans.push(Span::raw(format!(" {what} ")));
    }
    Line::from(spans)
}

fn draw_timeline(f: &mut Frame, area: Rect, app: &mut App) {
    let [list_area, detail_area] =
        Layout::horizontal([Constraint::Percentage(62), Constraint::Percentage(38)]).areas(area);
    let block = Block::new()
        .borders(Borders::RIGHT)
        .border_style(Style::new().add_modifier(Modifier::DIM));
    let inner = block.inner(list_area);
    f.render_widget(block, list_area);
    app.prepare(inner.height as usize);
    if app.rows.is_empty() {
        f.render_widget(
            Paragraph::new(format!(
                "no checkpoints or epochs yet in session {} (s: another session)",
                app.session
            ))
            .style(Style::new().add_modifier(Modifier::DIM)),
            inner,
        );
    }
    let lines: Vec<Line> = app
        .rows
        .iter()
        .enumerate()
        .skip(app.offset)
        .take(inner.height as usize)
        .map(|(i, row)| {
            let mut line = row_line(app, &row.graph, &row.kind);
            if i == app.selected {
                line = line.style(Style::new().bg(Color::DarkGray));
            }
            line
        })
        .collect();
    f.render_widget(Paragraph::new(lines), inner);
    draw_detail(f, detail_area, app);
}

fn row_line(app: &App, graph: &str, kind: &RowKind) -> Line<'static> {
    let dim = Style::new().add_modifier(Modifier::DIM);
    let graph_span = Span::styled(graph.to_string(), Style::new().fg(ACCENT));
    match kind {
        RowKind::Join => Line::from(graph_span),
        RowKind::More => Line::from(vec![
            graph_span,
            Span::styled("older entries not loaded (L loads more)", dim),
        ]),
        RowKind::Item(i) => {
            let e = &app.entries[*i];
            let time = (app.display.clock)(match &e.item {
                LogItem::Epoch { epoch, .. } => epoch.created_ns,
                LogItem::Checkpoint { checkpoint } => checkpoint.created_ns,
                LogItem::Setting { setting } => setting.created_ns,
            });
            let clock = time.get(11..).unwrap_or(&time).to_string();
            match &e.item {
                LogItem::Checkpoint { checkpoint: c } => {
                    let head = app.head.is_some() && c.message == app.head;
                    let mut spans = vec![
                        graph_span,
                        Span::styled(
                            c.message.clone().unwrap_or_else(|| "(no message)".into()),
                            Style::new().fg(Color::Yellow).add_modifier(Modifier::BOLD),
                        ),
                        Span::styled(format!("  {}  {clock}", short(&c.id)), dim),
                    ];
                    if let Some(l) = &c.label {
                        spans.push(Span::raw(format!("  {l}")));
                    }
                    if head {
                        spans.push(Span::styled("  (head)", Style::new().fg(Color::Green)));
                    }
                    if c.collected_ns.is_some() {
                        spans.push(Span::styled("  [collected]", Style::new().fg(Color::Red)));
                    }
                    Line::from(spans)
                }
                LogItem::Epoch {
                    epoch,
                    changes,
                    uncovered,
                } => {
                    let kind_style = match epoch.kind {
                        EpochKind::External => Style::new().fg(EXTERNAL),
                        EpochKind::Restore => Style::new().fg(Color::Blue),
                        _ => Style::new(),
                    };
                    let what = match epoch.kind {
                        EpochKind::External => "(not an agent)".to_string(),
                        // A restore's note names its target.
                        EpochKind::Restore => epoch
                            .note
                            .as_deref()
                            .map(shorten_ids)
                            .unwrap_or_else(|| "restore".into()),
                        _ => {
                            let mut w = epoch
                                .tool
                                .clone()
                                .unwrap_or_else(|| epoch.kind.as_str().into());
                            if let Some(c) = &epoch.tool_call {
                                w.push_str(&format!(" {c}"));
                            }
                            w
                        }
                    };
                    let mut spans = vec![
                        graph_span,
                        Span::styled(format!("{} ", short(&epoch.id)), dim),
                        Span::styled(format!("{clock} "), dim),
                        Span::styled(format!("{:<7} ", epoch.kind.as_str()), kind_style),
                        Span::styled(what, kind_style.add_modifier(Modifier::BOLD)),
                    ];
                    let paths = match app.shown(&epoch.id) {
                        Some(s) => match s.changes.as_slice() {
                            [] => "no change".to_string(),
                            [one] => one.path.clone(),
                            [first, rest @ ..] => format!("{} +{}", first.path, rest.len()),
                        },
                        None => plural(*changes as usize, "path"),
                    };
                    spans.push(Span::raw(format!("  {paths}")));
                    if *uncovered > 0 {
                        spans.push(Span::styled(
                            format!(" ({uncovered} uncovered)"),
                            Style::new().fg(Color::Red),
                        ));
                    }
                    if epoch.state != EpochState::Settled {
                        spans.push(Span::styled(
                            format!(" [{}]", epoch.state.as_str()),
                            Style::new().fg(Color::Yellow),
                        ));
                    }
                    Line::from(spans)
                }
                LogItem::Setting { setting: s } => Line::from(vec![
                    graph_span,
                    Span::styled(
                        format!(
                            "{clock} {}: {} -> {}",
                            s.key,
                            s.previous.as_deref().unwrap_or("(configured)"),
                            s.value
                        ),
                        dim,
                    ),
                ]),
            }
        }
    }
}

fn draw_detail(f: &mut Frame, area: Rect, app: &App) {
    let key = |k: &str| Span::styled(format!("{k:<10}"), Style::new().add_modifier(Modifier::DIM));
    let mut lines: Vec<Line> = Vec::new();
    match app.selected_entry().map(|e| &e.item) {
        None | Some(LogItem::Setting { .. }) => {}
        Some(LogItem::Checkpoint { checkpoint: c }) => {
            lines.push(Line::styled(
                "checkpoint",
                Style::new().add_modifier(Modifier::BOLD),
            ));
            lines.push(Line::from(vec![key("id"), Span::raw(c.id.clone())]));
            lines.push(Line::from(vec![
                key("message"),
                Span::raw(c.message.clone().unwrap_or_else(|| "-".into())),
            ]));
            lines.push(Line::from(vec![
                key("parent"),
                Span::raw(c.parent.clone().unwrap_or_else(|| "-".into())),
            ]));
            if let Some(l) = &c.label {
                lines.push(Line::from(vec![key("label"), Span::raw(l.clone())]));
            }
            lines.push(Line::from(vec![
                key("time"),
                Span::raw((app.display.clock)(c.created_ns)),
            ]));
            lines.push(Line::from(vec![
                key("who"),
                Span::raw(format!("session {}", c.session)),
            ]));
            if c.pinned {
                lines.push(Line::from(vec![key("pinned"), Span::raw("yes")]));
            }
            lines.push(Line::raw(""));
            lines.push(Line::styled(
                "enter: what rewinding here would undo · r: rewind here",
                Style::new().add_modifier(Modifier::DIM),
            ));
        }
        Some(LogItem::Epoch { epoch, .. }) => {
            let external = epoch.kind == EpochKind::External;
            let title = if external { "external edit" } else { "epoch" };
            let style = if external {
                Style::new().fg(EXTERNAL).add_modifier(Modifier::BOLD)
            } else {
                Style::new().add_modifier(Modifier::BOLD)
            };
            lines.push(Line::styled(title, style));
            lines.push(Line::from(vec![key("id"), Span::raw(epoch.id.clone())]));
            lines.push(Line::from(vec![
                key("kind"),
                Span::raw(format!(
                    "{} ({})",
                    epoch.kind.as_str(),
                    epoch.state.as_str()
                )),
            ]));
            lines.push(Line::from(vec![
                key("tool"),
                Span::raw(epoch.tool.clone().unwrap_or_else(|| "-".into())),
            ]));
            lines.push(Line::from(vec![
                key("tool call"),
                Span::raw(epoch.tool_call.clone().unwrap_or_else(|| "-".into())),
            ]));
            lines.push(Line::from(vec![
                key("message"),
                Span::raw(epoch.message.clone().unwrap_or_else(|| "-".into())),
            ]));
            lines.push(Line::from(vec![
                key("time"),
                Span::raw((app.display.clock)(epoch.created_ns)),
            ]));
            lines.push(Line::from(vec![
                key("who"),
                Span::raw(App::who(epoch.kind, &epoch.session)),
            ]));
            if let Some(n) = &epoch.note {
                lines.push(Line::from(vec![key("note"), Span::raw(n.clone())]));
            }
            if epoch.recovered {
                lines.push(Line::from(vec![
                    key("recovered"),
                    Span::raw("settled after its process died"),
                ]));
            }
            lines.push(Line::raw(""));
            match app.shown(&epoch.id) {
                Some(s) => {
                    lines.push(Line::styled(
                        plural(s.changes.len(), "path"),
                        Style::new().add_modifier(Modifier::BOLD),
                    ));
                    for c in &s.changes {
                        lines.push(Line::from(vec![
                            Span::styled(format!("{:<8} ", c.action), action_style(&c.action)),
                            Span::raw(c.path.clone()),
                        ]));
                    }
                }
                None => lines.push(Line::raw("paths: …")),
            }
        }
    }
    f.render_widget(
        Paragraph::new(lines).wrap(Wrap { trim: false }),
        area.inner(ratatui::layout::Margin::new(1, 0)),
    );
}

fn action_style(action: &str) -> Style {
    match action {
        "create" => Style::new().fg(Color::Green),
        "delete" => Style::new().fg(Color::Red),
        "uncovered" | "pending" => Style::new().fg(Color::Yellow),
        _ => Style::new().fg(Color::Blue),
    }
}

fn draw_diff(f: &mut Frame, area: Rect, app: &mut App) {
    let View::Diff(d) = &mut app.view else { return };
    let (files, added, removed) = d.totals();
    let block = Block::new()
        .borders(Borders::TOP)
        .title(format!(" {}  {files} files +{added} -{removed} ", d.title))
        .title_style(Style::new().add_modifier(Modifier::BOLD));
    let inner = block.inner(area);
    f.render_widget(block, area);
    let height = inner.height as usize;
    app.page = height.max(1);
    let View::Diff(d) = &mut app.view else { return };
    d.scroll_by(0, height);
    let lines: Vec<Line> = d.lines()[d.scroll..]
        .iter()
        .take(height)
        .map(|l| {
            let style = match l.tag {
                LineTag::File => Style::new().fg(Color::Yellow).add_modifier(Modifier::BOLD),
                LineTag::Cut => Style::new()
                    .fg(Color::Magenta)
                    .add_modifier(Modifier::ITALIC),
                LineTag::Patch(Tag::Add) => Style::new().fg(Color::Green),
                LineTag::Patch(Tag::Del) => Style::new().fg(Color::Red),
                LineTag::Patch(Tag::Hunk) => Style::new().fg(ACCENT),
                LineTag::Patch(Tag::Meta) => Style::new().add_modifier(Modifier::DIM),
                LineTag::Patch(Tag::Note) => Style::new().fg(Color::Yellow),
                LineTag::Patch(Tag::Context) => Style::new(),
            };
            // Tabs would let the terminal move the cursor past what was drawn.
            Line::styled(l.text.replace('\t', "    "), style)
        })
        .collect();
    f.render_widget(Paragraph::new(lines), inner);
    let total = d.lines().len();
    let pos = format!(
        " {}-{}/{} ",
        d.scroll + 1,
        (d.scroll + height).min(total),
        total
    );
    let w = pos.chars().count() as u16;
    if area.width > w {
        f.render_widget(
            Paragraph::new(pos).style(Style::new().add_modifier(Modifier::DIM)),
            Rect::new(area.right() - w, area.y, w, 1),
        );
    }
}

/// A rectangle of `w`×`h` (at most the area) centred in `area`.
fn centred(area: Rect, w: u16, h: u16) -> Rect {
    let w = w.min(area.width);
    let h = h.min(area.height);
    Rect::new(
        area.x + (area.width - w) / 2,
        area.y + (area.height - h) / 2,
        w,
        h,
    )
}

fn dialog(f: &mut Frame, area: Rect, title: &str, colour: Color) -> Rect {
    f.render_widget(Clear, area);
    let block = Block::bordered()
        .title(format!(" {title} "))
        .border_style(Style::new().fg(colour))
        .title_style(Style::new().fg(colour).add_modifier(Modifier::BOLD));
    let inner = block.inner(area);
    f.render_widget(block, area);
    inner
}

fn draw_modal(f: &mut Frame, body: Rect, app: &App, m: &Modal) {
    match m {
        Modal::Preview(p) => draw_preview(f, body, app, p),
        Modal::Confirm { preview, force } => {
            let area = centred(body, 72, if *force { 11 } else { 9 });
            let inner = dialog(
                f,
                area,
                if *force {
                    "Overwrite and rewind?"
                } else {
                    "Rewind?"
                },
                if *force { Color::Red } else { Color::Yellow },
            );
            let counts = step_counts(preview);
            let mut lines = vec![
                Line::styled(preview.title(), Style::new().add_modifier(Modifier::BOLD)),
                Line::raw(format!("session {} · {}", app.session, mode_text(preview))),
                Line::raw(counts),
                Line::raw(""),
            ];
            if *force {
                lines.push(Line::styled(
                    format!(
                        "FORCE: overwrites {} that someone else changed since.",
                        plural(preview.plan.conflicts.len(), "path")
                    ),
                    Style::new().fg(Color::Red).add_modifier(Modifier::BOLD),
                ));
                lines.push(Line::raw(
                    "What they hold now is kept in the restore epoch: undo brings it back.",
                ));
                lines.push(Line::raw(""));
            }
            lines.push(Line::from(vec![
                Span::styled(" y ", Style::new().fg(Color::Black).bg(Color::Yellow)),
                Span::raw(" rewind now    "),
                Span::styled(" n ", Style::new().fg(Color::Black).bg(Color::Gray)),
                Span::raw(" back to the preview"),
            ]));
            f.render_widget(Paragraph::new(lines).wrap(Wrap { trim: false }), inner);
        }
        Modal::Result { title, done } => {
            let area = centred(body, 76, (done.steps.len() as u16 + 8).min(body.height));
            let inner = dialog(f, area, "Done", Color::Green);
            let mut lines = vec![Line::styled(
                format!("{title}: {} written", plural(done.steps.len(), "path")),
                Style::new().add_modifier(Modifier::BOLD),
            )];
            for s in &done.steps {
                lines.push(Line::from(vec![
                    Span::styled(format!("{:<8} ", s.action), action_style(&s.action)),
                    Span::raw(s.path.clone()),
                ]));
            }
            lines.push(Line::raw(format!(
                "head now {}",
                done.head.as_deref().unwrap_or("none")
            )));
            if let Some(e) = &done.epoch {
                lines.push(Line::raw(format!("recorded as restore epoch {}", short(e))));
            }
            lines.push(Line::raw(""));
            lines.push(Line::from(vec![
                Span::styled(" u ", Style::new().fg(Color::Black).bg(Color::Yellow)),
                Span::raw(" undo this (preview first)    "),
                Span::styled(" enter ", Style::new().fg(Color::Black).bg(Color::Gray)),
                Span::raw(" close"),
            ]));
            f.render_widget(Paragraph::new(lines), inner);
        }
        Modal::Sessions { list, selected } => {
            let area = centred(body, 60, list.len() as u16 + 2);
            let inner = dialog(f, area, "Sessions", ACCENT);
            let lines: Vec<Line> = list
                .iter()
                .enumerate()
                .map(|(i, (s, head))| {
                    let current = if *s == app.session { "*" } else { " " };
                    let line = Line::raw(format!(
                        "{current} {s:<30} head {}",
                        head.as_deref().unwrap_or("none")
                    ));
                    if i == *selected {
                        line.style(Style::new().bg(Color::DarkGray))
                    } else {
                        line
                    }
                })
                .collect();
            f.render_widget(Paragraph::new(lines), inner);
        }
        Modal::Filter { input } => {
            let area = centred(body, 64, 4);
            let inner = dialog(f, area, "Filter by path", ACCENT);
            f.render_widget(
                Paragraph::new(vec![
                    Line::raw(format!("> {input}▏")),
                    Line::styled(
                        "a workspace path: epochs that touched it or what is under it",
                        Style::new().add_modifier(Modifier::DIM),
                    ),
                ]),
                inner,
            );
        }
        Modal::Sandbox(now) => draw_sandbox(f, body, now),
        Modal::SandboxConfirm(now) => {
            let loosens = now.toggle_loosens;
            let area = centred(body, 72, 9);
            let inner = dialog(
                f,
                area,
                if loosens {
                    "Turn the sandbox off?"
                } else {
                    "Turn the sandbox back on?"
                },
                if loosens { Color::Red } else { Color::Yellow },
            );
            let warn = if loosens {
                Style::new().fg(Color::Red).add_modifier(Modifier::BOLD)
            } else {
                Style::new()
            };
            let lines = vec![
                Line::styled(
                    format!("Sandbox mode {} -> {}", now.workspace_mode, now.toggle_to),
                    Style::new().add_modifier(Modifier::BOLD),
                ),
                Line::styled(format!("{}.", capitalised(&now.toggle_consequence)), warn),
                Line::raw("For every session of this workspace, from its next command on;"),
                Line::raw("recorded in the op log (rewind log)."),
                Line::raw(""),
                Line::from(vec![
                    Span::styled(" y ", Style::new().fg(Color::Black).bg(Color::Yellow)),
                    Span::raw(" change it    "),
                    Span::styled(" n ", Style::new().fg(Color::Black).bg(Color::Gray)),
                    Span::raw(" cancel"),
                ]),
            ];
            f.render_widget(Paragraph::new(lines).wrap(Wrap { trim: false }), inner);
        }
        Modal::Help => {
            let area = centred(body, 70, 23);
            let inner = dialog(f, area, "Keys", ACCENT);
            let text = [
                "timeline   j/k ↑/↓ move · g/G first/last · space/b page",
                "           enter diff of the entry (a checkpoint: what rewinding",
                "           to it would undo) · r rewind here · u undo newest epoch",
                "           s switch session · / filter by path · R reload",
                "           S sandbox mode of the workspace, t toggles it (asked)",
                "           L load older entries · q quit",
                "diff       j/k scroll · space/b page · n/N next/prev file",
                "           + show more of a cut file · r rewind here · esc back",
                "preview    m mode (files and head / files only / head only)",
                "           a whole tree (--all) · M merge · enter confirm",
                "           F overwrite conflicts (force), asked separately",
                "confirm    y rewind · n back",
                "result     u undo it (previewed) · enter close",
                "",
                "graph      @ head checkpoint · ○ checkpoint · • epoch",
                "           ↺ restore/undo · ◆ external edit (not an agent)",
                "",
                "The view follows the workspace: what other processes record",
                "appears within a second.",
            ];
            f.render_widget(Paragraph::new(text.map(Line::raw).to_vec()), inner);
        }
    }
}

/// The sandbox dialog: the mode commands run in, where it comes from, and the toggle.
fn draw_sandbox(f: &mut Frame, body: Rect, now: &SandboxModeResponse) {
    let area = centred(body, 72, 9);
    let inner = dialog(f, area, "Sandbox", ACCENT);
    let from = match now.source.as_str() {
        "setting" => "set for this workspace",
        "config" => "from config.toml",
        _ => "the default",
    };
    let mut lines = vec![Line::from(vec![
        Span::styled("mode      ", Style::new().add_modifier(Modifier::DIM)),
        Span::styled(now.mode.clone(), Style::new().add_modifier(Modifier::BOLD)),
    ])];
    match &now.tightened_by {
        Some(file) => lines.push(Line::raw(format!(
            "          {} is {from}; {file} tightens it",
            now.workspace_mode
        ))),
        None => lines.push(Line::raw(format!("          {from}"))),
    }
    lines.push(Line::raw(""));
    lines.push(Line::raw(format!(
        "t toggles the workspace's mode to {}:",
        now.toggle_to
    )));
    lines.push(Line::raw(format!("  {}.", now.toggle_consequence)));
    lines.push(Line::raw(""));
    lines.push(Line::from(vec![
        Span::styled(" t ", Style::new().fg(Color::Black).bg(Color::Yellow)),
        Span::raw(" toggle (asked first)    "),
        Span::styled(" esc ", Style::new().fg(Color::Black).bg(Color::Gray)),
        Span::raw(" close"),
    ]));
    f.render_widget(Paragraph::new(lines).wrap(Wrap { trim: false }), inner);
}

/// `text` with its first letter in upper case.
fn capitalised(text: &str) -> String {
    let mut c = text.chars();
    match c.next() {
        Some(first) => first.to_uppercase().chain(c).collect(),
        None => String::new(),
    }
}

fn mode_text(p: &Preview) -> String {
    if !p.is_restore() {
        return "undo".into();
    }
    let mut t = p.mode.describe().to_string();
    if p.all {
        t.push_str(", whole tree");
    }
    if !p.paths.is_empty() {
        t.push_str(", filtered paths only");
    }
    t
}

fn step_counts(p: &Preview) -> String {
    let mut create = 0;
    let mut delete = 0;
    let mut modify = 0;
    for s in &p.plan.steps {
        match s.action.as_str() {
            "create" => create += 1,
            "delete" => delete += 1,
            _ => modify += 1,
        }
    }
    let mut t = format!("{create} create, {modify} modify, {delete} delete");
    if p.mode == Mode::HeadOnly {
        t = "no file changes".into();
    }
    if !p.plan.skipped.is_empty() {
        t.push_str(&format!(", {} cannot be restored", p.plan.skipped.len()));
    }
    t
}

fn draw_preview(f: &mut Frame, body: Rect, app: &App, p: &Preview) {
    let area = centred(body, body.width.saturating_sub(8).max(60), body.height);
    let colour = if p.plan.refused {
        Color::Red
    } else {
        Color::Yellow
    };
    let inner = dialog(
        f,
        area,
        &format!("{} — preview (dry run)", p.title()),
        colour,
    );
    let mut lines = vec![
        Line::from(vec![
            Span::styled("mode      ", Style::new().add_modifier(Modifier::DIM)),
            Span::raw(mode_text(p)),
        ]),
        Line::from(vec![
            Span::styled("merge     ", Style::new().add_modifier(Modifier::DIM)),
            Span::raw(match p.merge {
                None => "as configured",
                Some(true) => "on: only this session's lines where others changed other lines",
                Some(false) => "off",
            }),
        ]),
        Line::from(vec![
            Span::styled("plan      ", Style::new().add_modifier(Modifier::DIM)),
            Span::raw(step_counts(p)),
            Span::raw(match &p.plan.head {
                Some(h) => format!(" · head → {h}"),
                None => String::new(),
            }),
        ]),
    ];
    if p.plan.refused {
        lines.push(Line::styled(
            format!(
                "refused: {} changed by someone else since this session wrote {}",
                plural(p.plan.conflicts.len(), "path"),
                if p.plan.conflicts.len() == 1 {
                    "it"
                } else {
                    "them"
                }
            ),
            Style::new().fg(Color::Red).add_modifier(Modifier::BOLD),
        ));
        lines.push(Line::raw(
            "  nothing would be written; F overwrites them (kept in the restore epoch, undo brings them back)",
        ));
    }
    lines.push(Line::raw(""));
    let plan = p.lines();
    let room = (inner.height as usize).saturating_sub(lines.len());
    let scroll = p.scroll.min(plan.len().saturating_sub(room.max(1)));
    for (tag, text) in plan.iter().skip(scroll).take(room) {
        let style = match tag {
            PlanTag::Step => action_style(text.split_whitespace().next().unwrap_or("")),
            PlanTag::Conflict => Style::new().fg(Color::Red),
            PlanTag::Skipped => Style::new().fg(Color::Yellow),
            PlanTag::Note => Style::new().add_modifier(Modifier::DIM),
        };
        lines.push(Line::styled(text.clone(), style));
    }
    let _ = app;
    f.render_widget(Paragraph::new(lines), inner);
}

/// `1 path`, `3 paths`.
pub fn plural(n: usize, word: &str) -> String {
    if n == 1 {
        format!("1 {word}")
    } else {
        format!("{n} {word}s")
    }
}

/// `text` with each full id (16 hex digits) cut to the 8 the rows show.
fn shorten_ids(text: &str) -> String {
    text.split(' ')
        .map(|w| {
            if w.len() == 16 && w.bytes().all(|b| b.is_ascii_hexdigit()) {
                &w[..8]
            } else {
                w
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}
