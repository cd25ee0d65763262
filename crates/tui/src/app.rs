//! The TUI's state and what each key does to it. Everything the screen shows is read from
//! here; nothing here draws (that is `ui`), so tests drive an [`App`] with keys and look at
//! both its state and its rendering.
//!
//! The app holds no lock: it reads through the service (the op log, never the workspace
//! lock) and takes the lock only inside a confirmed restore or undo. It notices other
//! processes' work by polling the op log's position ([`App::tick`]).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use rewind_api::{
    ApiError, Context, DiffRequest, EpochKind, LogEntry, LogItem, LogRequest, RestoreResponse,
    SandboxMode, SandboxModeRequest, SandboxModeResponse, Service, ShowRequest, ShowResponse,
    StatusRequest, StepView,
};

use crate::diffview::DiffView;
use crate::plan::{short, Action, Preview};
use crate::timeline::{self, Row, RowKind};

/// Log entries read at first, and added each time the end of the timeline is reached.
pub const PAGE: usize = 500;
/// How often the op log's position is read for other processes' work.
pub const POLL_EVERY: Duration = Duration::from_millis(500);

/// How the app shows what varies from run to run (tests fix both).
pub struct Display {
    /// The workspace root as the header shows it.
    pub root: String,
    /// A nanosecond timestamp as `YYYY-MM-DD HH:MM:SS`.
    pub clock: fn(i64) -> String,
}

/// The main view.
pub enum View {
    /// The session's conversation tree with its epochs.
    Timeline,
    /// A diff, scrollable.
    Diff(Box<DiffView>),
}

/// A dialog over the view; keys go to it first.
pub enum Modal {
    /// The dry-run plan of a rewind, with its options.
    Preview(Preview),
    /// Asking to apply a previewed rewind (`force`: overwriting conflicts).
    Confirm {
        /// The rewind.
        preview: Preview,
        /// Conflicting paths are overwritten.
        force: bool,
    },
    /// What an applied rewind did, offering to undo it.
    Result {
        /// What was rewound.
        title: String,
        /// The service's answer.
        done: RestoreResponse,
    },
    /// Choosing another session.
    Sessions {
        /// Every session of the workspace and its head.
        list: Vec<(String, Option<String>)>,
        /// The highlighted one.
        selected: usize,
    },
    /// The workspace's sandbox mode, offering the toggle.
    Sandbox(SandboxModeResponse),
    /// Asking to toggle the sandbox mode from what the dialog showed (`toggle_to`).
    SandboxConfirm(SandboxModeResponse),
    /// Typing the path filter.
    Filter {
        /// The text typed so far.
        input: String,
    },
    /// Every key.
    Help,
}

/// How serious a status-line message is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Level {
    /// Something happened.
    Info,
    /// Something failed.
    Error,
}

/// What an epoch changed, read with `show` when first needed.
#[derive(Clone, Debug, Default)]
pub struct Shown {
    /// Its changes (action and path), sorted by path.
    pub changes: Vec<StepView>,
}

/// The whole state of the TUI.
pub struct App {
    root: PathBuf,
    svc: Service,
    /// The session shown.
    pub session: String,
    /// The workspace's sandbox mode, as of the last reload (`None`: it could not be read).
    pub sandbox: Option<SandboxModeResponse>,
    /// Its current conversation message.
    pub head: Option<String>,
    /// The log entries loaded, newest first.
    pub entries: Vec<LogEntry>,
    /// Whether older entries exist than those loaded.
    pub more: bool,
    limit: usize,
    /// The timeline's rows.
    pub rows: Vec<Row>,
    /// The selected row.
    pub selected: usize,
    /// The first row on screen.
    pub offset: usize,
    shown: HashMap<String, Shown>,
    /// The path filter (workspace-relative; a path and what is under it); empty: none.
    pub filter: String,
    /// The main view.
    pub view: View,
    /// The dialog over it, if any.
    pub modal: Option<Modal>,
    /// The status line's message.
    pub flash: Option<(Level, String)>,
    position: i64,
    last_poll: Instant,
    /// The user asked to quit.
    pub quit: bool,
    /// What varies from run to run, as shown.
    pub display: Display,
    /// Rows of the body on screen at the last draw (for paging keys).
    pub page: usize,
}

impl App {
    /// Opens the workspace of `dir` for `session` and loads its newest [`PAGE`] entries.
    pub fn open(dir: &Path, session: &str) -> Result<App, ApiError> {
        let probe = Service::new(Context::new(dir, session)?);
        // Paths typed into the filter are the workspace's, as the timeline shows them.
        let root = probe.context().root();
        let svc = Service::new(Context::new(&root, session)?);
        svc.open()?;
        let mut app = App {
            display: Display {
                root: root.display().to_string(),
                clock: rewind_api::time::local_time,
            },
            root,
            svc,
            session: session.to_string(),
            sandbox: None,
            head: None,
            entries: Vec::new(),
            more: false,
            limit: PAGE,
            rows: Vec::new(),
            selected: 0,
            offset: 0,
            shown: HashMap::new(),
            filter: String::new(),
            view: View::Timeline,
            modal: None,
            flash: None,
            position: -1,
            last_poll: Instant::now(),
            quit: false,
            page: 20,
        };
        app.reload()?;
        Ok(app)
    }

    /// The service acting for the session shown.
    pub fn service(&self) -> &Service {
        &self.svc
    }

    /// Reads the log and the head again, keeping the selection on the same entry.
    pub fn reload(&mut self) -> Result<(), ApiError> {
        let keep = self.selected_entry().map(|e| entry_id(e).to_string());
        self.position = self.svc.position()?;
        let status = self.svc.status(&StatusRequest {})?;
        self.head = status
            .sessions
            .iter()
            .find(|s| s.session == self.session)
            .and_then(|s| s.head.clone());
        // A change of mode is in the op log, so it moves the position and lands here.
        self.sandbox = self.svc.sandbox_mode(&SandboxModeRequest::default()).ok();
        let log = self.svc.log(&LogRequest {
            all_sessions: false,
            limit: self.limit,
        })?;
        // The timeline is the session's conversation: settings changes (the sandbox mode) are
        // the workspace's, shown in the status line instead.
        self.entries = log
            .items
            .into_iter()
            .filter(|e| !matches!(e.item, LogItem::Setting { .. }))
            .collect();
        self.more = log.more;
        self.rebuild()?;
        if let Some(id) = keep {
            if let Some(i) = self.row_of(&id) {
                self.selected = i;
            }
        }
        self.clamp_selection();
        Ok(())
    }

    /// Lays out the rows again (after the entries or the filter changed).
    fn rebuild(&mut self) -> Result<(), ApiError> {
        if !self.filter.is_empty() {
            // Which epochs touch the filter is only known from their changes.
            let missing: Vec<String> = self
                .entries
                .iter()
                .filter_map(|e| match &e.item {
                    LogItem::Epoch { epoch, .. } if !self.shown.contains_key(&epoch.id) => {
                        Some(epoch.id.clone())
                    }
                    _ => None,
                })
                .collect();
            for id in missing {
                self.fetch_shown(&id)?;
            }
        }
        let filter = self.filter.trim_end_matches('/').to_string();
        let shown = &self.shown;
        self.rows = timeline::build(
            &self.entries,
            self.head.as_deref(),
            |e| match &e.item {
                LogItem::Epoch { epoch, .. } if !filter.is_empty() => shown
                    .get(&epoch.id)
                    .is_some_and(|s| s.changes.iter().any(|c| under(&c.path, &filter))),
                _ => true,
            },
            self.more,
        );
        self.clamp_selection();
        Ok(())
    }

    fn fetch_shown(&mut self, id: &str) -> Result<&Shown, ApiError> {
        if !self.shown.contains_key(id) {
            let shown = match self.svc.show(&ShowRequest { id: id.to_string() })? {
                ShowResponse::Epoch(e) => Shown {
                    changes: e.changes.into_iter().map(|c| c.change).collect(),
                },
                ShowResponse::Checkpoint(_) => Shown::default(),
            };
            self.shown.insert(id.to_string(), shown);
        }
        Ok(&self.shown[id])
    }

    /// What an epoch changed, if it was read already (see [`App::prepare`]).
    pub fn shown(&self, id: &str) -> Option<&Shown> {
        self.shown.get(id)
    }

    /// Reads what the rows on screen (`offset .. offset + height`) and the selected one need
    /// that is not read yet: the changes of their epochs. Called before each draw, so what is
    /// never on screen is never read.
    pub fn prepare(&mut self, height: usize) {
        self.page = height.max(1);
        if self.selected < self.offset {
            self.offset = self.selected;
        } else if self.selected >= self.offset + self.page {
            self.offset = self.selected + 1 - self.page;
        }
        let ids: Vec<String> = self.rows[self.offset.min(self.rows.len())..]
            .iter()
            .take(self.page)
            .filter_map(|r| match r.kind {
                RowKind::Item(i) => match &self.entries[i].item {
                    LogItem::Epoch { epoch, .. } => Some(epoch.id.clone()),
                    _ => None,
                },
                _ => None,
            })
            .collect();
        for id in ids {
            if let Err(e) = self.fetch_shown(&id) {
                self.error(e);
                break;
            }
        }
    }

    /// The entry of the selected row, if it is one.
    pub fn selected_entry(&self) -> Option<&LogEntry> {
        match self.rows.get(self.selected)?.kind {
            RowKind::Item(i) => self.entries.get(i),
            _ => None,
        }
    }

    fn row_of(&self, id: &str) -> Option<usize> {
        self.rows.iter().position(|r| match r.kind {
            RowKind::Item(i) => entry_id(&self.entries[i]) == id,
            _ => false,
        })
    }

    fn clamp_selection(&mut self) {
        self.selected = self.selected.min(self.rows.len().saturating_sub(1));
    }

    /// Checks (at most every [`POLL_EVERY`]) whether any process recorded something, and
    /// reads the log again if so. A preview open then is planned again.
    pub fn tick(&mut self) {
        if self.last_poll.elapsed() < POLL_EVERY {
            return;
        }
        self.last_poll = Instant::now();
        self.refresh_if_changed();
    }

    /// Reads the log again if the op log moved since it was last read; whether it did.
    pub fn refresh_if_changed(&mut self) -> bool {
        match self.svc.position() {
            Ok(p) if p != self.position => {}
            Ok(_) => return false,
            Err(e) => {
                self.error(e);
                return false;
            }
        }
        if let Err(e) = self.reload() {
            self.error(e);
        }
        if let Some(Modal::Preview(p)) = &mut self.modal {
            match p.replan(&self.svc) {
                Ok(()) => {
                    self.flash = Some((Level::Info, "the workspace changed: plan updated".into()))
                }
                Err(e) => self.error(e),
            }
        }
        true
    }

    fn error(&mut self, e: ApiError) {
        let mut text = e.to_string();
        if let Some(h) = e.hints.first() {
            text.push_str(&format!(" (hint: {h})"));
        }
        self.flash = Some((Level::Error, text));
    }

    fn info(&mut self, text: impl Into<String>) {
        self.flash = Some((Level::Info, text.into()));
    }

    /// Handles one key press.
    pub fn on_key(&mut self, key: KeyEvent) {
        if key.modifiers.contains(KeyModifiers::CONTROL) && key.code == KeyCode::Char('c') {
            self.quit = true;
            return;
        }
        if self.modal.is_some() {
            self.modal_key(key);
            return;
        }
        self.flash = None;
        match &mut self.view {
            View::Diff(d) => {
                let page = self.page as isize;
                match key.code {
                    KeyCode::Esc | KeyCode::Char('q') | KeyCode::Left | KeyCode::Char('h') => {
                        self.view = View::Timeline
                    }
                    KeyCode::Down | KeyCode::Char('j') => d.scroll_by(1, self.page),
                    KeyCode::Up | KeyCode::Char('k') => d.scroll_by(-1, self.page),
                    KeyCode::PageDown | KeyCode::Char(' ') | KeyCode::Char('f') => {
                        d.scroll_by(page, self.page)
                    }
                    KeyCode::PageUp | KeyCode::Char('b') => d.scroll_by(-page, self.page),
                    KeyCode::Home | KeyCode::Char('g') => d.scroll = 0,
                    KeyCode::End | KeyCode::Char('G') => d.scroll_by(isize::MAX / 2, self.page),
                    KeyCode::Char('n') | KeyCode::Tab => d.jump_file(true, self.page),
                    KeyCode::Char('N') | KeyCode::BackTab => d.jump_file(false, self.page),
                    KeyCode::Char('+') => {
                        let shown = d.show_more();
                        if !shown {
                            self.info("nothing more to show: no file is cut");
                        }
                    }
                    KeyCode::Char('r') => self.preview_restore(),
                    _ => {}
                }
            }
            View::Timeline => match key.code {
                KeyCode::Char('q') | KeyCode::Esc => self.quit = true,
                KeyCode::Down | KeyCode::Char('j') => self.move_by(1),
                KeyCode::Up | KeyCode::Char('k') => self.move_by(-1),
                KeyCode::PageDown | KeyCode::Char(' ') => self.move_by(self.page as isize),
                KeyCode::PageUp | KeyCode::Char('b') => self.move_by(-(self.page as isize)),
                KeyCode::Home | KeyCode::Char('g') => self.selected = 0,
                KeyCode::End | KeyCode::Char('G') => self.move_by(isize::MAX / 2),
                KeyCode::Enter | KeyCode::Char('d') | KeyCode::Right | KeyCode::Char('l') => {
                    self.open_diff()
                }
                KeyCode::Char('r') => self.preview_restore(),
                KeyCode::Char('u') => self.preview(Action::Undo { epoch: None }),
                KeyCode::Char('s') => self.open_sessions(),
                KeyCode::Char('S') => self.open_sandbox(),
                KeyCode::Char('/') => {
                    self.modal = Some(Modal::Filter {
                        input: self.filter.clone(),
                    })
                }
                KeyCode::Char('R') => match self.reload() {
                    Ok(()) => self.info("reloaded"),
                    Err(e) => self.error(e),
                },
                KeyCode::Char('L') => self.load_more(),
                KeyCode::Char('?') => self.modal = Some(Modal::Help),
                _ => {}
            },
        }
    }

    fn move_by(&mut self, delta: isize) {
        let last = self.rows.len().saturating_sub(1) as isize;
        self.selected = (self.selected as isize + delta).clamp(0, last) as usize;
        if self.selected as isize == last
            && self.more
            && matches!(self.rows.last().map(|r| &r.kind), Some(RowKind::More))
        {
            self.load_more();
        }
    }

    /// Reads [`PAGE`] more older entries.
    pub fn load_more(&mut self) {
        if !self.more {
            self.info("the whole log is loaded");
            return;
        }
        self.limit += PAGE;
        if let Err(e) = self.reload() {
            self.error(e);
        }
    }

    /// The path filter as the paths of a request (none when unset).
    fn scope(&self) -> Vec<PathBuf> {
        match self.filter.trim() {
            "" => Vec::new(),
            f => vec![self.root.join(f)],
        }
    }

    fn open_diff(&mut self) {
        let Some(e) = self.selected_entry() else {
            return;
        };
        let (id, title) = match &e.item {
            LogItem::Epoch { epoch, .. } => (
                epoch.id.clone(),
                format!(
                    "epoch {} ({}): what it changed",
                    short(&epoch.id),
                    epoch.kind.as_str()
                ),
            ),
            LogItem::Checkpoint { checkpoint: c } => (
                c.id.clone(),
                format!(
                    "checkpoint {}: what rewinding to it would undo (then → now)",
                    c.message.as_deref().unwrap_or(short(&c.id))
                ),
            ),
            LogItem::Setting { .. } => return,
        };
        match self.svc.diff(&DiffRequest {
            id,
            id2: None,
            paths: self.scope(),
        }) {
            Ok(d) => self.view = View::Diff(Box::new(DiffView::new(title, d))),
            Err(e) => self.error(e),
        }
    }

    fn preview_restore(&mut self) {
        let Some(e) = self.selected_entry() else {
            return;
        };
        let (target, label) = match &e.item {
            LogItem::Checkpoint { checkpoint: c } => (
                c.id.clone(),
                match &c.message {
                    Some(m) => format!("checkpoint {m}"),
                    None => format!("checkpoint {}", short(&c.id)),
                },
            ),
            LogItem::Epoch { epoch, .. } => (
                epoch.id.clone(),
                format!("just before epoch {}", short(&epoch.id)),
            ),
            LogItem::Setting { .. } => return,
        };
        self.preview(Action::Restore { target, label });
    }

    fn preview(&mut self, action: Action) {
        match Preview::new(&self.svc, action, self.scope()) {
            Ok(p) => self.modal = Some(Modal::Preview(p)),
            Err(e) => self.error(e),
        }
    }

    fn open_sessions(&mut self) {
        match self.svc.status(&StatusRequest {}) {
            Ok(s) => {
                let list: Vec<(String, Option<String>)> = s
                    .sessions
                    .into_iter()
                    .map(|s| (s.session, s.head))
                    .collect();
                let selected = list
                    .iter()
                    .position(|(s, _)| *s == self.session)
                    .unwrap_or(0);
                self.modal = Some(Modal::Sessions { list, selected });
            }
            Err(e) => self.error(e),
        }
    }

    /// Shows `session` instead.
    pub fn switch_session(&mut self, session: &str) -> Result<(), ApiError> {
        self.svc = Service::new(Context::new(&self.root, session)?);
        self.session = session.to_string();
        self.shown.clear();
        self.limit = PAGE;
        self.selected = 0;
        self.offset = 0;
        self.view = View::Timeline;
        self.reload()
    }

    /// Shows the workspace's sandbox mode, read again now, with the toggle.
    fn open_sandbox(&mut self) {
        match self.svc.sandbox_mode(&SandboxModeRequest::default()) {
            Ok(now) => {
                self.sandbox = Some(now.clone());
                self.modal = Some(Modal::Sandbox(now));
            }
            Err(e) => self.error(e),
        }
    }

    /// Toggles the sandbox mode from what `shown` showed: refused (nothing changed) if it
    /// changed meanwhile, as from inside the sandbox. Recorded in the op log as the TUI's.
    fn toggle_sandbox(&mut self, shown: &SandboxModeResponse) {
        let expect = match shown.workspace_mode.parse::<SandboxMode>() {
            Ok(m) => m,
            Err(e) => {
                self.flash = Some((Level::Error, e));
                return;
            }
        };
        let done = self.svc.sandbox_mode(&SandboxModeRequest {
            set: None,
            toggle: true,
            expect: Some(expect),
            via: Some("tui".into()),
        });
        match done {
            Ok(now) => {
                self.info(format!(
                    "sandbox mode {} -> {} (recorded in the op log)",
                    shown.workspace_mode, now.workspace_mode
                ));
                self.sandbox = Some(now);
                if let Err(e) = self.reload() {
                    self.error(e);
                }
            }
            Err(e) => self.error(e),
        }
    }

    /// Sets the path filter (empty: none).
    pub fn set_filter(&mut self, filter: &str) -> Result<(), ApiError> {
        self.filter = filter.trim().to_string();
        self.rebuild()
    }

    fn modal_key(&mut self, key: KeyEvent) {
        let Some(modal) = self.modal.take() else {
            return;
        };
        self.modal = match modal {
            Modal::Help => None,
            Modal::Sandbox(now) => match key.code {
                KeyCode::Char('t') => Some(Modal::SandboxConfirm(now)),
                KeyCode::Esc | KeyCode::Char('q') | KeyCode::Enter => None,
                _ => Some(Modal::Sandbox(now)),
            },
            Modal::SandboxConfirm(now) => match key.code {
                KeyCode::Char('y') | KeyCode::Char('Y') => {
                    self.toggle_sandbox(&now);
                    None
                }
                KeyCode::Esc | KeyCode::Char('n') | KeyCode::Char('q') => {
                    self.info("nothing was changed");
                    None
                }
                _ => Some(Modal::SandboxConfirm(now)),
            },
            Modal::Filter { mut input } => match key.code {
                KeyCode::Esc => None,
                KeyCode::Enter => {
                    if let Err(e) = self.set_filter(&input) {
                        self.error(e);
                    } else if self.filter.is_empty() {
                        self.info("filter cleared");
                    }
                    None
                }
                KeyCode::Backspace => {
                    input.pop();
                    Some(Modal::Filter { input })
                }
                KeyCode::Char('u') if key.modifiers.contains(KeyModifiers::CONTROL) => {
                    Some(Modal::Filter {
                        input: String::new(),
                    })
                }
                KeyCode::Char(c) => {
                    input.push(c);
                    Some(Modal::Filter { input })
                }
                _ => Some(Modal::Filter { input }),
            },
            Modal::Sessions { list, mut selected } => match key.code {
                KeyCode::Esc | KeyCode::Char('q') => None,
                KeyCode::Down | KeyCode::Char('j') => {
                    selected = (selected + 1).min(list.len().saturating_sub(1));
                    Some(Modal::Sessions { list, selected })
                }
                KeyCode::Up | KeyCode::Char('k') => {
                    selected = selected.saturating_sub(1);
                    Some(Modal::Sessions { list, selected })
                }
                KeyCode::Enter => {
                    if let Some((s, _)) = list.get(selected) {
                        let s = s.clone();
                        match self.switch_session(&s) {
                            Ok(()) => self.info(format!("session {s}")),
                            Err(e) => self.error(e),
                        }
                    }
                    None
                }
                _ => Some(Modal::Sessions { list, selected }),
            },
            Modal::Preview(mut p) => match key.code {
                KeyCode::Esc | KeyCode::Char('q') => None,
                KeyCode::Down | KeyCode::Char('j') => {
                    p.scroll += 1;
                    Some(Modal::Preview(p))
                }
                KeyCode::Up | KeyCode::Char('k') => {
                    p.scroll = p.scroll.saturating_sub(1);
                    Some(Modal::Preview(p))
                }
                KeyCode::Char('m') | KeyCode::Char('a') | KeyCode::Char('M')
                    if p.is_restore() || key.code == KeyCode::Char('M') =>
                {
                    match key.code {
                        KeyCode::Char('m') => p.mode = p.mode.next(),
                        KeyCode::Char('a') => p.all = !p.all,
                        _ => p.merge = Some(!p.merge.unwrap_or(false)),
                    }
                    if let Err(e) = p.replan(&self.svc) {
                        self.error(e);
                    }
                    Some(Modal::Preview(p))
                }
                KeyCode::Enter | KeyCode::Char('y') => {
                    if p.plan.refused {
                        self.flash = Some((
                            Level::Error,
                            format!(
                                "refused for {}: nothing would be written; F overwrites (kept for undo)",
                                crate::ui::plural(p.plan.conflicts.len(), "conflict")
                            ),
                        ));
                        Some(Modal::Preview(p))
                    } else if p.plan.steps.is_empty() && p.plan.head.is_none() {
                        self.info("nothing to rewind");
                        Some(Modal::Preview(p))
                    } else {
                        Some(Modal::Confirm {
                            preview: p,
                            force: false,
                        })
                    }
                }
                KeyCode::Char('F') if !p.plan.conflicts.is_empty() => Some(Modal::Confirm {
                    preview: p,
                    force: true,
                }),
                _ => Some(Modal::Preview(p)),
            },
            Modal::Confirm { preview, force } => match key.code {
                KeyCode::Char('y') | KeyCode::Char('Y') => self.apply(preview, force),
                KeyCode::Esc | KeyCode::Char('n') | KeyCode::Char('q') => {
                    Some(Modal::Preview(preview))
                }
                _ => Some(Modal::Confirm { preview, force }),
            },
            Modal::Result { title, done } => match key.code {
                KeyCode::Char('u') => match &done.epoch {
                    Some(epoch) => {
                        self.preview(Action::Undo {
                            epoch: Some(epoch.clone()),
                        });
                        self.modal.take()
                    }
                    None => Some(Modal::Result { title, done }),
                },
                KeyCode::Esc | KeyCode::Enter | KeyCode::Char('q') => None,
                _ => Some(Modal::Result { title, done }),
            },
        };
    }

    fn apply(&mut self, preview: Preview, force: bool) -> Option<Modal> {
        let title = preview.title();
        match preview.run(&self.svc, false, force) {
            Ok(done) if done.refused => {
                // Someone changed a path between the preview and the confirmation.
                let mut p = preview;
                p.plan = done;
                self.flash = Some((
                    Level::Error,
                    "refused: paths changed since the preview; nothing was changed".into(),
                ));
                Some(Modal::Preview(p))
            }
            Ok(done) => {
                if let Err(e) = self.reload() {
                    self.error(e);
                }
                Some(Modal::Result { title, done })
            }
            Err(e) => {
                self.error(e);
                Some(Modal::Preview(preview))
            }
        }
    }

    /// Who made an epoch, for people: its session, or "external" for changes found on disk
    /// that no epoch made (the user's editor, another program).
    pub fn who(kind: EpochKind, session: &str) -> String {
        if kind == EpochKind::External {
            "external edit (not an agent)".into()
        } else {
            format!("session {session}")
        }
    }
}

/// The id of a log entry.
pub fn entry_id(e: &LogEntry) -> &str {
    match &e.item {
        LogItem::Epoch { epoch, .. } => &epoch.id,
        LogItem::Checkpoint { checkpoint } => &checkpoint.id,
        LogItem::Setting { setting } => &setting.key,
    }
}

/// Whether `path` is `filter` or under it.
fn under(path: &str, filter: &str) -> bool {
    path == filter || (path.starts_with(filter) && path.as_bytes().get(filter.len()) == Some(&b'/'))
}
