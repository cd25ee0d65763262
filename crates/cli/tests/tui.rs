//! `rewind tui` end to end: the real binary in a real tmux pane over a real workspace whose
//! history was made with the real binary. Keys are sent with `tmux send-keys` and the screen
//! read with `capture-pane`: rewind to a checkpoint through the preview and the confirmation,
//! check the files, undo, check them again, and see an epoch another process records appear
//! without restarting.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use crate::common::rewind::{assert_tree_eq, checkpoint, expect, init, read_tree, write, Tree};
use crate::common::{text, Env};

/// A tmux server of this test's own (its own socket), killed when dropped.
struct Tmux {
    socket: String,
}

impl Tmux {
    fn start(env: &Env, session: &str) -> Tmux {
        let socket = format!("rewind-tui-test-{}", std::process::id());
        let t = Tmux { socket };
        let cmd = format!(
            "env REWIND_HOME={} {} -C {} -s {session} tui",
            sh_quote(env.home.path()),
            sh_quote(Path::new(env!("CARGO_BIN_EXE_rewind"))),
            sh_quote(env.root()),
        );
        let o = t
            .tmux(&[
                "new-session",
                "-d",
                "-x",
                "120",
                "-y",
                "36",
                "-s",
                "tui",
                &cmd,
            ])
            .output()
            .expect("tmux runs (scripts/test installs it)");
        assert!(o.status.success(), "tmux new-session: {}", text(&o));
        // Keep the pane after the TUI exits, to read what it left on the terminal.
        t.tmux(&["set-option", "-t", "tui", "remain-on-exit", "on"])
            .output()
            .unwrap();
        t
    }

    fn tmux(&self, args: &[&str]) -> Command {
        let mut c = Command::new("tmux");
        c.arg("-L").arg(&self.socket).args(args);
        c
    }

    fn keys(&self, keys: &[&str]) {
        let mut args = vec!["send-keys", "-t", "tui"];
        args.extend_from_slice(keys);
        let o = self.tmux(&args).output().unwrap();
        assert!(o.status.success(), "send-keys {keys:?}: {}", text(&o));
    }

    fn screen(&self) -> String {
        let o = self
            .tmux(&["capture-pane", "-p", "-t", "tui"])
            .output()
            .unwrap();
        String::from_utf8_lossy(&o.stdout).into_owned()
    }

    /// Waits until the screen shows `needle` (the TUI draws asynchronously); fails with the
    /// screen after a generous deadline, so a slow machine does not fail it.
    fn wait_for(&self, needle: &str) -> String {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let s = self.screen();
            if s.contains(needle) {
                return s;
            }
            assert!(
                Instant::now() < deadline,
                "the TUI never showed {needle:?}; the screen:\n{s}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    fn pane_dead(&self) -> bool {
        let o = self
            .tmux(&["display-message", "-p", "-t", "tui", "#{pane_dead}"])
            .output()
            .unwrap();
        String::from_utf8_lossy(&o.stdout).trim() == "1"
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.tmux(&["kill-server"]).output();
    }
}

fn sh_quote(p: &Path) -> String {
    format!("'{}'", p.display().to_string().replace('\'', r"'\''"))
}

fn tree(env: &Env) -> Tree {
    read_tree(env.root())
}

#[test]
fn tui_rewinds_and_undoes_in_a_tmux_pane_and_follows_other_processes() {
    let env = Env::new();
    let root = env.root();
    write(root, "a.txt", b"one\n");
    write(root, "src/lib.rs", b"fn lib() {}\n");
    init(&env);
    // A scripted session: msg-1, an edit tool's epoch, a shell command, msg-2, another edit.
    checkpoint(&env, "agent", "msg-1");
    let at_msg_1 = tree(&env);
    let s = ["-s", "agent"];
    let run = |args: &[&str]| {
        let mut all = s.to_vec();
        all.extend_from_slice(args);
        let o = env.run(&all);
        assert_eq!(o.status.code(), Some(0), "rewind {all:?}: {}", text(&o));
    };
    run(&[
        "epoch",
        "begin",
        "--tool",
        "edit",
        "--tool-call",
        "call-1",
        "--path",
        "a.txt",
    ]);
    write(root, "a.txt", b"two\n");
    run(&["epoch", "end"]);
    run(&[
        "exec",
        "--tool",
        "bash",
        "--tool-call",
        "call-2",
        "--",
        "sh",
        "-c",
        "echo made > made.txt",
    ]);
    checkpoint(&env, "agent", "msg-2");
    run(&[
        "epoch",
        "begin",
        "--tool",
        "edit",
        "--tool-call",
        "call-3",
        "--path",
        "src/lib.rs",
    ]);
    write(root, "src/lib.rs", b"fn lib() { todo!() }\n");
    run(&["epoch", "end"]);
    let before = tree(&env);
    assert_ne!(before, at_msg_1);

    let t = Tmux::start(&env, "agent");
    // A frame may be captured half drawn: each thing awaited is awaited on its own.
    for needle in ["msg-2", "call-3", "msg-1"] {
        t.wait_for(needle);
    }
    // The oldest row is msg-1: select it, its details show.
    t.keys(&["G"]);
    t.wait_for("message   msg-1");
    t.keys(&["r"]);
    t.wait_for("Rewind to checkpoint msg-1 — preview (dry run)");
    for line in ["modify   a.txt", "delete   made.txt", "modify   src/lib.rs"] {
        t.wait_for(line);
    }
    assert_eq!(tree(&env), before, "a preview writes nothing");
    t.keys(&["Enter"]);
    t.wait_for("Rewind?");
    assert_eq!(tree(&env), before, "asking writes nothing");
    t.keys(&["y"]);
    t.wait_for("3 paths written");
    assert_tree_eq(&tree(&env), &at_msg_1, "the files after rewinding to msg-1");
    // Undo from the result, previewed and confirmed.
    t.keys(&["u"]);
    t.wait_for("Undo epoch");
    t.keys(&["Enter"]);
    t.wait_for("Rewind?");
    t.keys(&["y"]);
    t.wait_for("Done");
    assert_tree_eq(&tree(&env), &before, "the files after undoing the rewind");
    t.keys(&["Enter"]);

    // Another process records an epoch: it appears without a restart.
    expect(
        &env,
        "agent",
        &[
            "exec",
            "--tool",
            "bash",
            "--tool-call",
            "call-late",
            "--",
            "sh",
            "-c",
            "echo late > late.txt",
        ],
        0,
    );
    t.wait_for("call-late");
    t.wait_for("late.txt");

    // Quitting gives the terminal back: the pane is left with a shell-ready screen.
    t.keys(&["q"]);
    let deadline = Instant::now() + Duration::from_secs(30);
    while !t.pane_dead() {
        assert!(
            Instant::now() < deadline,
            "the TUI did not quit:\n{}",
            t.screen()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let after = t.screen();
    assert!(
        !after.contains("rewind here"),
        "the alternate screen was left:\n{after}"
    );
}

#[test]
fn tui_without_a_terminal_is_a_usage_error() {
    let env = Env::new();
    let o = env
        .cmd(&["tui"])
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("rewind tui needs a terminal"),
        "{}",
        text(&o)
    );
}
