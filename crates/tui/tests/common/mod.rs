//! What the TUI tests share: a real workspace with a scripted history (made through the
//! service, the real engine), the app drawn on ratatui's `TestBackend`, and snapshot files
//! (`tests/snapshots/NAME.txt`; `REWIND_BLESS=1 cargo test -p rewind-tui` rewrites them).

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use ratatui::backend::TestBackend;
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use ratatui::Terminal;
use rewind_api::{
    CheckpointRequest, Context, EpochBeginRequest, EpochEndRequest, InitRequest, LogItem,
    RestoreRequest, Service,
};
use rewind_tui::App;

/// One state directory for the whole test binary (set before any service runs).
fn home() -> &'static Path {
    static HOME: OnceLock<tempfile::TempDir> = OnceLock::new();
    HOME.get_or_init(|| {
        let d = tempfile::tempdir().unwrap();
        // SAFETY: set once, before any test reads it (every test comes through here first).
        unsafe { std::env::set_var("REWIND_HOME", d.path()) };
        d
    })
    .path()
}

/// A workspace directory and the services of its sessions.
pub struct Ws {
    pub dir: tempfile::TempDir,
}

impl Ws {
    /// An empty registered workspace.
    pub fn new() -> Ws {
        home();
        let dir = tempfile::tempdir().unwrap();
        let ws = Ws { dir };
        ws.svc("agent")
            .init(&InitRequest { force: false }, None)
            .unwrap();
        ws
    }

    pub fn svc(&self, session: &str) -> Service {
        Service::new(Context::new(self.dir.path(), session).unwrap())
    }

    pub fn read(&self, path: &str) -> String {
        std::fs::read_to_string(self.dir.path().join(path)).unwrap_or_else(|_| "<absent>".into())
    }

    /// Writes files by hand (not through an epoch): what a person's editor does.
    pub fn write_by_hand(&self, path: &str, content: &[u8]) {
        std::fs::write(self.dir.path().join(path), content).unwrap();
    }

    /// One exact epoch of `session` writing `files`, as an edit tool's call.
    pub fn edit(&self, session: &str, call: &str, files: &[(&str, &[u8])]) {
        let svc = self.svc(session);
        svc.epoch_begin(&EpochBeginRequest {
            tool: Some("edit".into()),
            tool_call: Some(call.into()),
            paths: files.iter().map(|(p, _)| PathBuf::from(p)).collect(),
            process_owned: false,
            note: None,
        })
        .unwrap();
        for (p, c) in files {
            std::fs::write(self.dir.path().join(p), c).unwrap();
        }
        svc.epoch_end(&EpochEndRequest::default()).unwrap();
    }

    pub fn checkpoint(&self, session: &str, message: &str) {
        self.svc(session)
            .checkpoint(&CheckpointRequest {
                message: Some(message.into()),
                ..Default::default()
            })
            .unwrap();
    }

    /// Records what changed on disk outside any epoch (as the next command of any process
    /// would): an external epoch.
    pub fn notice_external(&self) {
        self.svc("agent").capture("test").unwrap();
    }
}

/// The scripted conversation the screens are drawn from:
///
/// msg-1 → edit a.txt (call-1) → a person edits notes.txt → msg-2 → edit b.txt (call-2) →
/// rewind to msg-1 → msg-3 (a branch from msg-1) → edit a.txt, create c.txt (call-3) →
/// a person edits c.txt.
pub fn scripted() -> Ws {
    let ws = Ws::new();
    ws.write_by_hand("a.txt", b"one\n");
    ws.write_by_hand("b.txt", b"bee\n");
    ws.notice_external();
    ws.checkpoint("agent", "msg-1");
    ws.edit("agent", "call-1", &[("a.txt", b"two\n")]);
    ws.write_by_hand("notes.txt", b"a note of mine\n");
    ws.notice_external();
    ws.checkpoint("agent", "msg-2");
    ws.edit("agent", "call-2", &[("b.txt", b"bee two\n")]);
    ws.svc("agent")
        .restore(&RestoreRequest {
            target: "msg-1".into(),
            ..Default::default()
        })
        .unwrap();
    ws.checkpoint("agent", "msg-3");
    ws.edit(
        "agent",
        "call-3",
        &[("a.txt", b"three\n"), ("c.txt", b"new file\n")],
    );
    ws.write_by_hand("c.txt", b"new file, edited by hand\n");
    ws.notice_external();
    ws
}

/// The app on `ws` for `session`, showing fixed times and root so snapshots are stable.
pub fn app(ws: &Ws, session: &str) -> App {
    let mut app = App::open(ws.dir.path(), session).unwrap();
    app.display.root = "/work/project".into();
    app.display.clock = |_| "2026-01-01 12:00:00".into();
    app
}

pub fn key(app: &mut App, code: KeyCode) {
    app.on_key(KeyEvent::new(code, KeyModifiers::NONE));
}

pub fn keys(app: &mut App, text: &str) {
    for c in text.chars() {
        key(app, KeyCode::Char(c));
    }
}

/// Selects the first row whose text contains `needle`.
pub fn select(app: &mut App, needle: &str) {
    for _ in 0..app.rows.len() {
        key(app, KeyCode::Char('k'));
    }
    for _ in 0..app.rows.len() {
        let screen = render(app);
        if screen
            .lines()
            .any(|l| l.contains(needle) && l.contains('▶'))
        {
            return;
        }
        key(app, KeyCode::Char('j'));
    }
    panic!("no row contains {needle:?}:\n{}", render(app));
}

pub const WIDTH: u16 = 110;
pub const HEIGHT: u16 = 28;

/// The app drawn on a `WIDTH`×`HEIGHT` test terminal, as text (the selected row marked
/// with `▶` in its last column, as colours are not text), ids masked (see [`mask`]).
pub fn render(app: &mut App) -> String {
    let mut t = Terminal::new(TestBackend::new(WIDTH, HEIGHT)).unwrap();
    t.draw(|f| rewind_tui::ui::draw(f, app)).unwrap();
    let buf = t.backend().buffer().clone();
    let mut out = String::new();
    for y in 0..HEIGHT {
        let mut line = String::new();
        let mut selected = false;
        for x in 0..WIDTH {
            let cell = &buf[(x, y)];
            line.push_str(cell.symbol());
            if cell.bg == ratatui::style::Color::DarkGray {
                selected = true;
            }
        }
        let mut line = line.trim_end().to_string();
        if selected {
            line.push_str(" ▶");
        }
        out.push_str(&line);
        out.push('\n');
    }
    mask(app, &out)
}

/// Replaces every id of the loaded entries (and of restore epochs named anywhere) with a
/// stable token as long as it, so snapshots do not depend on random ids.
pub fn mask(app: &App, text: &str) -> String {
    let mut ids: Vec<String> = app
        .entries
        .iter()
        .filter_map(|e| match &e.item {
            LogItem::Epoch { epoch, .. } => Some(epoch.id.clone()),
            LogItem::Checkpoint { checkpoint } => Some(checkpoint.id.clone()),
            LogItem::Setting { .. } => None,
        })
        .collect();
    ids.reverse(); // oldest first: tokens stay put when entries are added
    let mut out = text.to_string();
    for (n, id) in ids.iter().enumerate() {
        out = out.replace(id.as_str(), &format!("#{:0>w$}", n + 1, w = id.len() - 1));
        let s = &id[..8];
        out = out.replace(s, &format!("#{:0>7}", n + 1));
    }
    out
}

/// Compares `screen` with `tests/snapshots/NAME.txt`, or writes it with `REWIND_BLESS=1`.
pub fn snapshot(name: &str, screen: &str) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/snapshots")
        .join(format!("{name}.txt"));
    if std::env::var_os("REWIND_BLESS").is_some() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, screen).unwrap();
        return;
    }
    let want = std::fs::read_to_string(&path).unwrap_or_else(|_| {
        panic!(
            "no snapshot {}; run `REWIND_BLESS=1 cargo test -p rewind-tui` to write it. Screen:\n{screen}",
            path.display()
        )
    });
    assert!(
        want == screen,
        "screen {name} differs from {} (REWIND_BLESS=1 rewrites it after a deliberate change)\n\
         --- want\n{want}\n--- got\n{screen}",
        path.display()
    );
}
