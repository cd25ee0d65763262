//! The terminal: raw mode and the alternate screen for as long as the TUI runs, given back on
//! every way out (quit, an error, a panic), and the loop of drawing, keys and polling.

use std::io::IsTerminal;
use std::path::Path;
use std::time::Duration;

use ratatui::crossterm::event::{self, Event, KeyEventKind};
use rewind_api::{ApiError, ErrorKind};

use crate::app::{App, POLL_EVERY};

/// Gives the terminal back when dropped: on return, on error and while a panic unwinds
/// (`ratatui::init` also hooks panics, for a panic that aborts).
struct Restore;

impl Drop for Restore {
    fn drop(&mut self) {
        ratatui::restore();
    }
}

/// Runs the TUI for `session` on the workspace of `dir` until the user quits.
pub fn run(dir: &Path, session: &str) -> Result<(), ApiError> {
    if !std::io::stdout().is_terminal() || !std::io::stdin().is_terminal() {
        return Err(
            ApiError::usage("rewind tui needs a terminal (standard input and output)")
                .hint("`rewind log` and `rewind diff` print the same history as text"),
        );
    }
    // Loaded before the screen is taken, so a workspace that cannot be opened is an error
    // printed as any command's.
    let mut app = App::open(dir, session)?;
    let io = |e: std::io::Error| ApiError::new(ErrorKind::Error, format!("terminal: {e}"));
    let mut terminal = ratatui::init();
    let _restore = Restore;
    loop {
        terminal
            .draw(|f| crate::ui::draw(f, &mut app))
            .map_err(io)?;
        // Waiting for a key at most until the next poll of the op log.
        if event::poll(POLL_EVERY.min(Duration::from_millis(250))).map_err(io)? {
            match event::read().map_err(io)? {
                Event::Key(k) if k.kind != KeyEventKind::Release => app.on_key(k),
                _ => {}
            }
        }
        if app.quit {
            return Ok(());
        }
        app.tick();
    }
}
