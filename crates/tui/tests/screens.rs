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

/// The sandbox mode of the workspace as a service of another front reads it.
fn sandbox_mode(ws: &Ws) -> rewind_api::SandboxModeResponse {
    ws.svc("someone")
        .sandbox_mode(&rewind_api::SandboxModeRequest::default())
        .unwrap()
}

/// Sets the workspace's sandbox mode as `rewind sandbox mode` does (another process).
fn set_mode_from_the_cli(ws: &Ws, mode: rewind_api::SandboxMode) {
    ws.svc("someone")
        .sandbox_mode(&rewind_api::SandboxModeRequest {
            set: Some(mode),
            via: Some("cli".into()),
            ..Default::default()
        })
        .unwrap();
}

/// The sandbox-mode changes in the op log, oldest first: (previous, value, front).
fn mode_changes(ws: &Ws) -> Vec<(Option<String>, String, Option<String>)> {
    let log = ws
        .svc("someone")
        .log(&rewind_api::LogRequest {
            all_sessions: true,
            limit: 100,
        })
        .unwrap();
    let mut out: Vec<_> = log
        .items
        .into_iter()
        .filter_map(|e| match e.item {
            rewind_api::LogItem::Setting { setting } => {
                Some((setting.previous, setting.value, setting.front))
            }
            _ => None,
        })
        .collect();
    out.reverse();
    out
}

#[test]
fn the_sandbox_toggle_asks_first_and_records_the_change() {
    let ws = scripted();
    let mut app = app(&ws, "agent");
    let screen = render(&mut app);
    assert!(
        screen
            .lines()
            .next()
            .unwrap()
            .contains("sandbox workspace-write"),
        "the header shows the mode:\n{screen}"
    );
    assert!(screen.contains("S  sandbox"), "{screen}");

    // S shows the mode and what the toggle would do.
    key(&mut app, KeyCode::Char('S'));
    let screen = render(&mut app);
    snapshot("sandbox", &screen);
    assert!(screen.contains("mode      workspace-write"), "{screen}");
    assert!(screen.contains("the default"), "{screen}");
    assert!(
        screen.contains("t toggles the workspace's mode to danger-full-access"),
        "{screen}"
    );

    // t asks, in words that say what full access means; n changes nothing.
    key(&mut app, KeyCode::Char('t'));
    let screen = render(&mut app);
    snapshot("sandbox_confirm", &screen);
    assert!(screen.contains("Turn the sandbox off?"), "{screen}");
    assert!(screen.contains("no sandbox at all"), "{screen}");
    assert!(screen.contains("Sandbox mode workspace-write -> danger-full-access"));
    key(&mut app, KeyCode::Char('n'));
    assert!(app.modal.is_none());
    assert_eq!(sandbox_mode(&ws).workspace_mode, "workspace-write");
    assert!(mode_changes(&ws).is_empty(), "cancelled: nothing recorded");

    // S t y: full access, recorded as the TUI's change, and the header says so.
    keys(&mut app, "Sty");
    let now = sandbox_mode(&ws);
    assert_eq!(
        (now.workspace_mode.as_str(), now.source.as_str()),
        ("danger-full-access", "setting")
    );
    assert_eq!(
        mode_changes(&ws),
        [(None, "danger-full-access".into(), Some("tui".into()))]
    );
    let screen = render(&mut app);
    assert!(
        screen
            .lines()
            .next()
            .unwrap()
            .contains("sandbox off (danger-full-access)"),
        "{screen}"
    );
    assert!(
        screen.contains("sandbox mode workspace-write -> danger-full-access"),
        "the status line says what changed:\n{screen}"
    );

    // And back: the dialog now offers to turn the sandbox on.
    keys(&mut app, "St");
    let screen = render(&mut app);
    assert!(screen.contains("Turn the sandbox back on?"), "{screen}");
    key(&mut app, KeyCode::Char('y'));
    assert_eq!(sandbox_mode(&ws).workspace_mode, "workspace-write");
    assert_eq!(
        mode_changes(&ws),
        [
            (None, "danger-full-access".into(), Some("tui".into())),
            (
                Some("danger-full-access".into()),
                "workspace-write".into(),
                Some("tui".into())
            ),
        ]
    );
}

#[test]
fn a_sandbox_toggle_decided_on_a_stale_mode_changes_nothing() {
    let ws = scripted();
    let mut app = app(&ws, "agent");
    keys(&mut app, "St");
    // Meanwhile someone else turns the sandbox off from the command line.
    set_mode_from_the_cli(&ws, rewind_api::SandboxMode::DangerFullAccess);
    // Confirming the TUI's "turn it off" must not flip it back on.
    key(&mut app, KeyCode::Char('y'));
    let screen = render(&mut app);
    assert!(screen.contains("changed meanwhile"), "{screen}");
    assert_eq!(sandbox_mode(&ws).workspace_mode, "danger-full-access");
    assert_eq!(
        mode_changes(&ws),
        [(None, "danger-full-access".into(), Some("cli".into()))]
    );
}

#[test]
fn another_process_changing_the_sandbox_mode_shows_in_the_header() {
    let ws = scripted();
    let mut app = app(&ws, "agent");
    set_mode_from_the_cli(&ws, rewind_api::SandboxMode::ReadOnly);
    assert!(app.refresh_if_changed(), "a mode change moves the op log");
    let screen = render(&mut app);
    assert!(
        screen.lines().next().unwrap().contains("sandbox read-only"),
        "{screen}"
    );
}
