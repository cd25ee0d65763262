//! Points of the command-line contract (SPEC.md: globals, exit codes, output rules) and of
//! what commands report and rewind, through the real binary.

mod common;

use std::process::Output;

use common::{text, Env};

fn init() -> Env {
    let env = Env::new();
    std::fs::write(env.root().join("f.txt"), "one\n").unwrap();
    let o = env.run(&["init"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    env
}

fn last_line(o: &Output) -> String {
    assert_eq!(o.status.code(), Some(0), "{}", text(o));
    let out = String::from_utf8_lossy(&o.stdout);
    out.lines().last().unwrap_or_default().to_string()
}

/// Asserts exit code `code` and that stderr says `says`.
fn refused(o: &Output, code: i32, says: &str) {
    assert_eq!(o.status.code(), Some(code), "{}", text(o));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains(says),
        "stderr should say {says:?}: {}",
        text(o)
    );
}

#[test]
fn state_errors_exit_1_not_the_usage_code() {
    let env = init();
    refused(&env.run(&["epoch", "end"]), 1, "no open epoch");
    refused(&env.run(&["epoch", "abort"]), 1, "no open epoch");
    refused(&env.run(&["undo"]), 1, "no epoch to undo");
    let cp = last_line(&env.run(&["checkpoint", "--message", "m0"]));
    refused(&env.run(&["undo", &cp]), 1, "is a checkpoint, not an epoch");
    refused(
        &env.run(&["epoch", "end", &cp]),
        1,
        "is a checkpoint, not an epoch",
    );
    // Another session's open epoch (undo settles the session's own first).
    let e = last_line(&env.run(&["-s", "other", "epoch", "begin", "--path", "f.txt"]));
    refused(&env.run(&["undo", &e]), 1, "still open");
    assert_eq!(env.run(&["epoch", "end", &e]).status.code(), Some(0));
    refused(&env.run(&["epoch", "end", &e]), 1, "is not open");
}
