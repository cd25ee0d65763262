//! Points of the command-line contract (docs/cli.md: globals, exit codes, output rules) and of
//! what commands report and rewind, through the real binary.

use crate::common;

use std::io::Write;
use std::process::{Output, Stdio};

use common::{text, Env};

fn init() -> Env {
    let env = Env::new();
    std::fs::write(env.root().join("f.txt"), "one\n").unwrap();
    let o = env.run(&["init"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    env
}

/// The id a successful creating command printed as its last line.
fn new_id(o: &Output) -> String {
    assert_eq!(o.status.code(), Some(0), "{}", text(o));
    common::last_line(&o.stdout)
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
    let cp = new_id(&env.run(&["checkpoint", "--message", "m0"]));
    refused(&env.run(&["undo", &cp]), 1, "is a checkpoint, not an epoch");
    refused(
        &env.run(&["epoch", "end", &cp]),
        1,
        "is a checkpoint, not an epoch",
    );
    // Another session's open epoch (undo settles the session's own first).
    let e = new_id(&env.run(&["-s", "other", "epoch", "begin", "--path", "f.txt"]));
    refused(&env.run(&["undo", &e]), 1, "still open");
    assert_eq!(env.run(&["epoch", "end", &e]).status.code(), Some(0));
    refused(&env.run(&["epoch", "end", &e]), 1, "is not open");
}

/// The one JSON document on stdout of a failed `rewind --json …`: its `error` object.
fn json_error(o: &Output, code: i32) -> serde_json::Value {
    assert_eq!(o.status.code(), Some(code), "{}", text(o));
    let docs: Vec<serde_json::Value> = serde_json::Deserializer::from_slice(&o.stdout)
        .into_iter()
        .collect::<Result<_, _>>()
        .unwrap_or_else(|e| panic!("stdout is not JSON ({e}): {}", text(o)));
    assert_eq!(docs.len(), 1, "exactly one JSON document: {}", text(o));
    let err = docs[0]["error"].clone();
    assert_eq!(err["exit_code"], code, "{}", text(o));
    assert!(
        err["message"].as_str().is_some_and(|m| !m.is_empty()),
        "{err}"
    );
    // The message is on stderr too, for a human watching.
    assert!(!o.stderr.is_empty(), "{}", text(o));
    err
}

#[test]
fn json_errors_are_one_document_with_kind_message_and_exit_code() {
    let env = init();
    let err = json_error(&env.run(&["--json", "epoch", "end"]), 1);
    assert_eq!(err["kind"], "state");
    assert!(err["message"].as_str().unwrap().contains("no open epoch"));
    let err = json_error(&env.run(&["--json", "show", "nosuch"]), 1);
    assert_eq!(err["kind"], "unknown");
    // A guard refusal is an error too (exit 5).
    std::fs::write(env.root().join("f.txt"), "changed behind its back\n").unwrap();
    let mut child = env
        .cmd(&["--json", "write", "f.txt"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(b"new\n").unwrap();
    let err = json_error(&child.wait_with_output().unwrap(), 5);
    assert_eq!(err["kind"], "guard");
    // Command lines clap refuses: usage errors (exit 2), still one document.
    let err = json_error(&env.run(&["--json", "no-such-command"]), 2);
    assert_eq!(err["kind"], "usage");
    let err = json_error(&env.run(&["read", "--json"]), 2);
    assert_eq!(err["kind"], "usage");
    // `sandbox check` failing prints the error document, not its report and then the error.
    let o = env
        .cmd(&["--json", "sandbox", "check"])
        .env("PATH", "/nonexistent")
        .output()
        .unwrap();
    let err = json_error(&o, 6);
    assert_eq!(err["kind"], "sandbox");
}

#[test]
fn an_empty_session_name_is_a_usage_error() {
    let env = init();
    refused(
        &env.run(&["-s", "", "log"]),
        2,
        "session name cannot be empty",
    );
    let o = env
        .cmd(&["checkpoint", "--message", "m"])
        .env("REWIND_SESSION", "")
        .output()
        .unwrap();
    refused(&o, 2, "session name cannot be empty");
    let o = env
        .cmd(&["--json", "log"])
        .env("REWIND_SESSION", "")
        .output()
        .unwrap();
    assert_eq!(json_error(&o, 2)["kind"], "usage");
    // Nothing was recorded for a session "".
    let o = env.run(&["--json", "log", "--all-sessions"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(
        !String::from_utf8_lossy(&o.stdout).contains("\"m\""),
        "{}",
        text(&o)
    );
}

/// `epoch begin --path new/dir/f.txt`, then the tool creates it with its parents.
fn exact_epoch_creating_parents(env: &Env) -> String {
    let id = new_id(&env.run(&["epoch", "begin", "--path", "new/dir/f.txt"]));
    std::fs::create_dir_all(env.root().join("new/dir")).unwrap();
    std::fs::write(env.root().join("new/dir/f.txt"), "made\n").unwrap();
    let o = env.run(&["epoch", "end"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    id
}

#[test]
fn rewinding_an_exact_epoch_removes_the_parents_it_created() {
    let env = init();
    exact_epoch_creating_parents(&env);
    let o = env.run(&["undo"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(!env.root().join("new").exists(), "undo left {}", text(&o));

    let cp = new_id(&env.run(&["checkpoint", "--message", "m1"]));
    exact_epoch_creating_parents(&env);
    let o = env.run(&["restore", &cp]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(
        !env.root().join("new").exists(),
        "restore left {}",
        text(&o)
    );
    // Parents that existed before are not the epoch's to remove.
    std::fs::create_dir(env.root().join("new")).unwrap();
    exact_epoch_creating_parents(&env);
    let o = env.run(&["undo"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(env.root().join("new").is_dir() && !env.root().join("new/dir").exists());
}

#[test]
fn apply_patch_lists_each_file_once() {
    let env = init();
    assert_eq!(env.run(&["read", "f.txt"]).status.code(), Some(0));
    // Two sections for the same file (as concatenated diffs have).
    let patch = "--- a/f.txt\n+++ b/f.txt\n@@ -1 +1 @@\n-one\n+two\n\
                 --- a/f.txt\n+++ b/f.txt\n@@ -1 +1 @@\n-two\n+three\n";
    let apply = |args: &[&str]| {
        let o = common::output_with_stdin(&mut env.cmd(args), patch.as_bytes());
        assert_eq!(o.status.code(), Some(0), "{}", text(&o));
        String::from_utf8(o.stdout).unwrap()
    };
    let out = apply(&["apply-patch", "--dry-run"]);
    assert!(
        out.starts_with("the patch applies cleanly (1 files)"),
        "{out}"
    );
    assert_eq!(out.matches("f.txt").count(), 1, "{out}");
    let doc: serde_json::Value = serde_json::from_str(&apply(&["--json", "apply-patch"])).unwrap();
    let files = doc["files"].as_array().unwrap();
    assert_eq!(files.len(), 1, "{doc}");
    assert_eq!(files[0]["op"], "modify");
    assert_eq!(files[0]["hunks"], 2);
    assert_eq!(
        std::fs::read_to_string(env.root().join("f.txt")).unwrap(),
        "three\n"
    );
}

/// An error's message says what happened, in no front's syntax; what to do about it comes as
/// hints in the command line's words: one `hint:` line each on stderr, and a `hints` list in
/// the `--json` error document.
#[test]
fn errors_say_what_happened_and_hint_what_to_run() {
    let env = init();
    let cases: [(&[&str], i32, &str, &str); 2] = [
        (
            &["restore", "nosuch"],
            1,
            "unknown",
            "`rewind log` lists them",
        ),
        (
            &["epoch", "end"],
            1,
            "state",
            "open one with `rewind epoch begin`",
        ),
    ];
    for (args, code, kind, hint) in cases {
        let mut all = vec!["--json"];
        all.extend_from_slice(args);
        let o = env.cmd(&all).current_dir(env.root()).output().unwrap();
        assert_eq!(o.status.code(), Some(code), "{args:?}: {}", text(&o));
        let doc: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        let error = &doc["error"];
        assert_eq!(error["kind"], kind, "{doc}");
        let message = error["message"].as_str().unwrap();
        assert!(
            !message.contains("rewind "),
            "no command line in {message:?}"
        );
        assert_eq!(error["hints"], serde_json::json!([hint]), "{doc}");
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert!(stderr.contains(&format!("hint: {hint}\n")), "{stderr}");
    }
}
