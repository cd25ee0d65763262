//! Each screen of the TUI drawn on a test terminal from a real workspace's history, compared
//! with its snapshot, and what it must show asserted on its own (a snapshot blessed by
//! mistake does not make these pass).

use ratatui::crossterm::event::KeyCode;
use rewind_tui::app::{Modal, View};

use crate::common::*;

#[test]
fn timeline_draws_the_conversation_tree_with_its_branch_and_head() {
    let ws = scripted();
    let mut app = app(&ws, "agent");
    let screen = render(&mut app);
    snapshot("timeline", &screen);
    let line = |needle: &str| {
        screen
            .lines()
            .skip(1) // the header names the head too
            .find(|l| l.contains(needle))
            .unwrap_or_else(|| panic!("no line with {needle:?}:\n{screen}"))
            .to_string()
    };
    // The head is msg-3, on the branch made after rewinding to msg-1.
    assert!(
        line("msg-3").contains('@') && line("msg-3").contains("(head)"),
        "{screen}"
    );
    assert!(line("msg-2").contains('○'), "{screen}");
    assert!(screen.contains("├─╯"), "the branch joins msg-1:\n{screen}");
    assert!(line("call-3").contains("edit call-3") && line("call-3").contains("a.txt +1"));
    assert!(line("↺").contains("restore"), "{screen}");
    // call-1 stays on the branch it was made on (msg-1 → msg-2).
    assert!(line("call-1").starts_with("│ •"), "{screen}");
    // A person's edits are drawn apart from the agent's.
    assert!(line("◆").contains("external (not an agent)"), "{screen}");
    // Newest first: msg-3 above msg-2 above msg-1.
    let at = |n: &str| screen.find(n).unwrap();
    assert!(at("msg-3") < at("msg-2") && at("msg-2") < at("msg-1"));
    // The footer lists the keys.
    assert!(
        screen.contains("r  rewind here") && screen.contains("u  undo"),
        "{screen}"
    );
}

#[test]
fn the_detail_pane_names_kind_tool_call_paths_and_who() {
    let ws = scripted();
    let mut app = app(&ws, "agent");
    select(&mut app, "call-3");
    let screen = render(&mut app);
    assert!(screen.contains("tool call call-3"), "{screen}");
    assert!(screen.contains("who       session agent"), "{screen}");
    assert!(
        screen.contains("create   c.txt") && screen.contains("modify   a.txt"),
        "{screen}"
    );
    select(&mut app, "◆");
    let screen = render(&mut app);
    assert!(screen.contains("external edit (not an agent)"), "{screen}");
}

#[test]
fn diff_pane_shows_an_epochs_changes() {
    let ws = scripted();
    let mut app = app(&ws, "agent");
    select(&mut app, "call-3");
    key(&mut app, KeyCode::Enter);
    assert!(matches!(app.view, View::Diff(_)));
    let screen = render(&mut app);
    snapshot("diff", &screen);
    assert!(screen.contains("modify a.txt  +1 -1"), "{screen}");
    assert!(
        screen.contains("-one") && screen.contains("+three"),
        "{screen}"
    );
    assert!(
        screen.contains("create c.txt") && screen.contains("+new file"),
        "{screen}"
    );
    key(&mut app, KeyCode::Esc);
    assert!(matches!(app.view, View::Timeline));
}

#[test]
fn diff_pane_summarises_binary_files_and_cuts_huge_ones() {
    let ws = Ws::new();
    ws.checkpoint("agent", "m1");
    let big: String = (0..5000).map(|i| format!("line {i}\n")).collect();
    ws.edit(
        "agent",
        "call-big",
        &[
            ("big.txt", big.as_bytes()),
            ("blob.bin", b"\x00\x01\x02binary"),
        ],
    );
    let mut app = app(&ws, "agent");
    select(&mut app, "call-big");
    key(&mut app, KeyCode::Enter);
    let View::Diff(d) = &app.view else {
        panic!("no diff")
    };
    let text: Vec<&str> = d.lines().iter().map(|l| l.text.as_str()).collect();
    assert!(
        text.iter()
            .any(|l| l.starts_with("create blob.bin  (binary")),
        "{text:?}"
    );
    let cut = |t: &[&str]| {
        t.iter()
            .find(|l| l.contains("more lines of big.txt"))
            .map(|s| s.to_string())
    };
    assert_eq!(
        cut(&text).as_deref(),
        Some("… 3005 more lines of big.txt not shown (+ shows 2000 more)"),
    );
    assert!(!text.contains(&"+line 4999"));
    key(&mut app, KeyCode::Char('+'));
    key(&mut app, KeyCode::Char('+'));
    let View::Diff(d) = &app.view else {
        panic!("no diff")
    };
    let text: Vec<&str> = d.lines().iter().map(|l| l.text.as_str()).collect();
    assert!(text.contains(&"+line 4999") && cut(&text).is_none());
}

#[test]
fn rewind_preview_shows_the_plan_and_refuses_conflicts_unless_forced() {
    let ws = scripted();
    let mut app = app(&ws, "agent");
    select(&mut app, "msg-3");
    key(&mut app, KeyCode::Char('r'));
    let screen = render(&mut app);
    snapshot("preview", &screen);
    assert!(
        screen.contains("Rewind to checkpoint msg-3 — preview (dry run)"),
        "{screen}"
    );
    assert!(screen.contains("modify   a.txt"), "{screen}");
    assert!(
        screen.contains("conflict c.txt  changed since by"),
        "{screen}"
    );
    assert!(
        screen.contains("refused: 1 path changed by someone else"),
        "{screen}"
    );
    // Enter does not confirm a refused plan; force is its own key and its own question.
    key(&mut app, KeyCode::Enter);
    assert!(matches!(app.modal, Some(Modal::Preview(_))));
    key(&mut app, KeyCode::Char('F'));
    let screen = render(&mut app);
    snapshot("confirm_force", &screen);
    assert!(screen.contains("Overwrite and rewind?"), "{screen}");
    assert!(screen.contains("FORCE: overwrites 1 path that someone else changed since."));
    // Backing out writes nothing.
    key(&mut app, KeyCode::Char('n'));
    key(&mut app, KeyCode::Esc);
    assert!(app.modal.is_none());
    assert_eq!(ws.read("a.txt"), "three\n");
    assert_eq!(ws.read("c.txt"), "new file, edited by hand\n");
}

#[test]
fn preview_modes_are_planned_again() {
    let ws = scripted();
    let mut app = app(&ws, "agent");
    select(&mut app, "msg-3");
    key(&mut app, KeyCode::Char('r'));
    key(&mut app, KeyCode::Char('m'));
    key(&mut app, KeyCode::Char('m'));
    let screen = render(&mut app);
    assert!(
        screen.contains("conversation head only (the files stay)"),
        "{screen}"
    );
    assert!(screen.contains("no file changes"), "{screen}");
}

#[test]
fn rewind_confirm_result_and_undo_change_the_files() {
    let ws = scripted();
    let mut app = app(&ws, "agent");
    // Only a.txt: c.txt (which a person changed) is left out by the filter.
    key(&mut app, KeyCode::Char('/'));
    keys(&mut app, "a.txt");
    key(&mut app, KeyCode::Enter);
    select(&mut app, "msg-3");
    key(&mut app, KeyCode::Char('r'));
    key(&mut app, KeyCode::Enter);
    let screen = render(&mut app);
    snapshot("confirm", &screen);
    assert!(screen.contains("Rewind?"), "{screen}");
    assert!(screen.contains("0 create, 1 modify, 0 delete"), "{screen}");
    assert_eq!(ws.read("a.txt"), "three\n", "nothing written before y");
    key(&mut app, KeyCode::Char('y'));
    let screen = render(&mut app);
    snapshot("result", &screen);
    assert!(
        screen.contains("Rewind to checkpoint msg-3: 1 path written"),
        "{screen}"
    );
    assert!(screen.contains("u  undo this"), "{screen}");
    assert_eq!(ws.read("a.txt"), "one\n");
    assert_eq!(ws.read("c.txt"), "new file, edited by hand\n");
    // The result offers undo, previewed and confirmed like any rewind.
    key(&mut app, KeyCode::Char('u'));
    let screen = render(&mut app);
    assert!(screen.contains("Undo epoch"), "{screen}");
    assert!(screen.contains("modify   a.txt"), "{screen}");
    key(&mut app, KeyCode::Enter);
    key(&mut app, KeyCode::Char('y'));
    assert_eq!(ws.read("a.txt"), "three\n");
    assert!(matches!(app.modal, Some(Modal::Result { .. })));
}

#[test]
fn session_switch_shows_the_other_sessions_timeline() {
    let ws = scripted();
    ws.checkpoint("reviewer", "review-1");
    ws.edit("reviewer", "rcall-1", &[("review.md", b"looks good\n")]);
    let mut app = app(&ws, "agent");
    key(&mut app, KeyCode::Char('s'));
    let screen = render(&mut app);
    snapshot("sessions", &screen);
    assert!(
        screen.contains("* agent") && screen.contains("reviewer"),
        "{screen}"
    );
    key(&mut app, KeyCode::Char('j'));
    key(&mut app, KeyCode::Enter);
    assert_eq!(app.session, "reviewer");
    let screen = render(&mut app);
    assert!(
        screen.contains("session reviewer  head review-1"),
        "{screen}"
    );
    assert!(
        screen.contains("rcall-1") && !screen.contains("call-3"),
        "{screen}"
    );
}

#[test]
fn filter_keeps_the_epochs_that_touched_the_path() {
    let ws = scripted();
    let mut app = app(&ws, "agent");
    key(&mut app, KeyCode::Char('/'));
    keys(&mut app, "b.txt");
    let typing = render(&mut app);
    assert!(typing.contains("> b.txt"), "{typing}");
    key(&mut app, KeyCode::Enter);
    let screen = render(&mut app);
    snapshot("filter", &screen);
    assert!(screen.contains("filter b.txt"), "{screen}");
    assert!(screen.contains("call-2"), "{screen}");
    assert!(
        !screen.contains("call-1") && !screen.contains("call-3"),
        "{screen}"
    );
    // Checkpoints stay: they hold the tree together.
    assert!(
        screen.contains("msg-1") && screen.contains("msg-3"),
        "{screen}"
    );
    key(&mut app, KeyCode::Char('/'));
    app.on_key(ratatui::crossterm::event::KeyEvent::new(
        KeyCode::Char('u'),
        ratatui::crossterm::event::KeyModifiers::CONTROL,
    ));
    key(&mut app, KeyCode::Enter);
    assert!(render(&mut app).contains("call-3"));
}

#[test]
fn another_process_epoch_appears_on_refresh() {
    let ws = scripted();
    let mut app = app(&ws, "agent");
    assert!(!app.refresh_if_changed(), "nothing changed yet");
    // Another service (its own connection, as another process has) records an epoch.
    ws.edit("agent", "call-late", &[("late.txt", b"late\n")]);
    assert!(app.refresh_if_changed());
    let screen = render(&mut app);
    assert!(screen.contains("call-late"), "{screen}");
}

#[test]
fn help_lists_the_keys() {
    let ws = scripted();
    let mut app = app(&ws, "agent");
    key(&mut app, KeyCode::Char('?'));
    let screen = render(&mut app);
    assert!(
        screen.contains("F overwrite conflicts (force), asked separately"),
        "{screen}"
    );
    key(&mut app, KeyCode::Char('x'));
    assert!(app.modal.is_none());
}
