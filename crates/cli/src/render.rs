//! What the commands share to render documents for humans: stdout that survives a closed pipe,
//! short ids, times and durations, and terminal colour.

use std::io::IsTerminal;

pub use rewind_api::time::local_time;
use rewind_api::Owner;

/// Writes human output to stdout. A closed pipe (`rewind log | head`) ends the output
/// quietly instead of panicking.
pub fn write_stdout(text: &str) {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(text.as_bytes()).and_then(|()| out.flush());
}

/// The first 10 characters of an id (full ids are in `--json`).
pub fn short_id(id: &str) -> String {
    id.chars().take(10).collect()
}

/// Who owns an epoch, for humans.
pub fn owner_text(o: &Owner) -> String {
    match o {
        Owner::Process { pid, .. } => format!("process {pid}"),
        Owner::Session => "session".into(),
    }
}

/// `1.2s`, `340ms`, `3m05s`: a short duration for humans.
pub fn duration_text(ns: i64) -> String {
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

pub const RED: &str = "31";
pub const GREEN: &str = "32";
pub const YELLOW: &str = "33";
pub const CYAN: &str = "36";
pub const BOLD: &str = "1";
pub const DIM: &str = "2";

/// Plain ANSI colour, only when stdout is a terminal and `NO_COLOR` is unset (or empty).
#[derive(Clone, Copy)]
pub struct Colour(bool);

impl Colour {
    pub fn stdout() -> Colour {
        let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
        Colour(!no_color && std::io::stdout().is_terminal())
    }

    pub fn paint(self, code: &str, text: &str) -> String {
        if self.0 && !text.is_empty() {
            format!("\x1b[{code}m{text}\x1b[0m")
        } else {
            text.to_string()
        }
    }
}

/// One line per changed path (`  modify   src/lib.rs`), as epochs and guarded writes list
/// them.
pub fn print_changes(changes: &[rewind_api::StepView]) {
    for c in changes {
        println!("  {:<8} {}", c.action, c.path);
    }
}
