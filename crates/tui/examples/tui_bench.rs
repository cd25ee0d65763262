//! What `rewind tui` costs on a long history, measured (docs/benchmarks.md, "TUI"):
//!
//! - the first screen of a timeline of 10,000 epochs (and 100 checkpoints): opening the
//!   workspace, reading the log's first page, laying out the tree and drawing it;
//! - a diff of a 1 MiB text file, created and then modified in every 50th line: the service's
//!   diff, the pane's layout and drawing it.
//!
//! Drawn on ratatui's `TestBackend` (what a terminal adds is writing one screen).
//!
//!   cargo run --release -p rewind-tui --example tui_bench

use std::path::PathBuf;
use std::time::Instant;

use ratatui::backend::TestBackend;
use ratatui::crossterm::event::{KeyCode, KeyEvent};
use ratatui::Terminal;
use rewind_api::{
    CheckpointRequest, Context, EpochBeginRequest, EpochEndRequest, InitRequest, Service,
};
use rewind_tui::app::{entry_id, View};
use rewind_tui::timeline::RowKind;
use rewind_tui::App;

const EPOCHS: usize = 10_000;

fn main() {
    let home = tempfile::tempdir().unwrap();
    // SAFETY: set before any thread starts.
    unsafe { std::env::set_var("REWIND_HOME", home.path()) };
    let dir = tempfile::tempdir().unwrap();
    let svc = Service::new(Context::new(dir.path(), "agent").unwrap());
    svc.init(&InitRequest::default(), None).unwrap();

    let t = Instant::now();
    let edit = |path: &str, content: &[u8]| -> String {
        let id = svc
            .epoch_begin(&EpochBeginRequest {
                tool: Some("edit".into()),
                tool_call: Some(format!("call-{path}")),
                paths: vec![PathBuf::from(path)],
                ..Default::default()
            })
            .unwrap()
            .id;
        std::fs::write(dir.path().join(path), content).unwrap();
        svc.epoch_end(&EpochEndRequest::default()).unwrap();
        id
    };
    for i in 0..EPOCHS {
        if i % 100 == 0 {
            svc.checkpoint(&CheckpointRequest {
                message: Some(format!("msg-{}", i / 100)),
                ..Default::default()
            })
            .unwrap();
        }
        edit(
            &format!("f{}.txt", i % 100),
            format!("version {i}\n").as_bytes(),
        );
    }
    eprintln!("made {EPOCHS} epochs in {:.1} s", t.elapsed().as_secs_f64());

    let big: String = (0..)
        .map(|i| format!("line {i:>8} of a one mebibyte text file, as a log or a dump\n"))
        .scan(0usize, |n, l| {
            *n += l.len();
            (*n <= 1 << 20).then_some(l)
        })
        .collect();
    let created = edit("big.txt", big.as_bytes());
    let modified_text: String = big
        .lines()
        .enumerate()
        .map(|(i, l)| {
            if i % 50 == 0 {
                format!("{l} (changed)\n")
            } else {
                format!("{l}\n")
            }
        })
        .collect();
    let modified = edit("big.txt", modified_text.as_bytes());

    let t = Instant::now();
    let mut app = App::open(dir.path(), "agent").unwrap();
    let mut term = Terminal::new(TestBackend::new(160, 48)).unwrap();
    term.draw(|f| rewind_tui::ui::draw(f, &mut app)).unwrap();
    let first = t.elapsed();
    println!(
        "timeline of {} epochs: first screen in {:.0} ms ({} entries read, more: {})",
        EPOCHS + 2,
        first.as_secs_f64() * 1000.0,
        app.entries.len(),
        app.more
    );

    for (what, id) in [("created", created), ("modified every 50th line", modified)] {
        let row = app
            .rows
            .iter()
            .position(|r| matches!(r.kind, RowKind::Item(i) if entry_id(&app.entries[i]) == id))
            .unwrap();
        app.selected = row;
        let t = Instant::now();
        app.on_key(KeyEvent::from(KeyCode::Enter));
        term.draw(|f| rewind_tui::ui::draw(f, &mut app)).unwrap();
        let took = t.elapsed();
        let View::Diff(d) = &app.view else {
            panic!("no diff: {:?}", app.flash)
        };
        println!(
            "diff of a {} byte text file ({what}): drawn in {:.0} ms ({} lines laid out)",
            big.len(),
            took.as_secs_f64() * 1000.0,
            d.lines().len()
        );
        app.on_key(KeyEvent::from(KeyCode::Esc));
    }
}
