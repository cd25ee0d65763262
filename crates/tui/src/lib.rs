//! `rewind tui`: the terminal UI. The session's timeline drawn as its conversation tree, a
//! diff pane, rewinds with a dry-run preview and an explicit confirmation, undo, session
//! switching and a path filter, following what other processes record.
//!
//! [`App`] is the state and what keys do to it, [`ui::draw`] draws it; [`run`] puts them on
//! a terminal. Like every front it calls the engine through `rewind-api` only.

pub mod app;
pub mod diffview;
pub mod plan;
pub mod timeline;
pub mod ui;

mod terminal;

pub use app::App;
pub use terminal::run;
