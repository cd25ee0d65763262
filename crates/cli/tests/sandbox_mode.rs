//! `rewind sandbox mode|toggle`: the workspace's sandbox mode set from the command line, kept
//! in the op log (shown by `log`), applied to the next sandboxed command, never loosened by
//! `.rewind.toml`, never changed from inside the sandbox, and asked about before it loosens;
//! MCP's `run` follows it and may only ask for stricter.

use std::process::Stdio;

use serde_json::{json, Value};

use crate::common::rewind::*;
use crate::common::{require_bwrap, text, Env};
use crate::mcp::Raw;

fn mode(env: &Env) -> Value {
    json(env, "s", &["sandbox", "mode"], 0)
}

/// Writes `out` from a sandboxed command; whether the file is there afterwards.
fn write_outside(env: &Env, out: &std::path::Path) -> bool {
    let _ = std::fs::remove_file(out);
    let script = format!("echo x > '{}'", out.display());
    let _ = env
        .cmd(&["sandbox", "exec", "--", "sh", "-c", &script])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    out.exists()
}

#[test]
fn set_toggle_and_log_with_who_and_when_applied_to_the_next_command() {
    require_bwrap();
    let env = Env::new();
    expect(&env, "s", &["init"], 0);
    // Not under /tmp: sandboxed commands get a private one.
    let outside = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let out = outside.path().join("out.txt");

    let m = mode(&env);
    assert_eq!(m["mode"], "workspace-write", "{m}");
    assert_eq!(m["source"], "default", "{m}");
    assert!(!write_outside(&env, &out), "the default sandbox blocks it");

    // Loosening without a terminal and without --yes: refused, nothing changed.
    let o = env
        .cmd(&["sandbox", "toggle"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("--yes"), "{}", text(&o));
    assert_eq!(mode(&env)["source"], "default");

    let t = json(&env, "s", &["sandbox", "toggle", "--yes"], 0);
    assert_eq!(t["mode"], "danger-full-access", "{t}");
    assert_eq!(t["changed"]["previous"], Value::Null, "{t}");
    assert_eq!(t["changed"]["front"], "cli", "{t}");
    assert!(write_outside(&env, &out), "full access: the write happens");

    // Tightening needs no confirmation.
    let t = json(&env, "s", &["sandbox", "mode", "read-only"], 0);
    assert_eq!(t["mode"], "read-only", "{t}");
    assert_eq!(t["changed"]["previous"], "danger-full-access", "{t}");
    let o = env
        .cmd(&["sandbox", "exec", "--", "sh", "-c", "echo y > inside.txt"])
        .output()
        .unwrap();
    assert!(!o.status.success());
    assert!(!env.root().join("inside.txt").exists(), "read-only");
    // Setting the mode it already has records nothing.
    let t = json(&env, "s", &["sandbox", "mode", "read-only"], 0);
    assert_eq!(t["changed"], Value::Null, "{t}");
    // From read-only, toggle gives full access (asked for), then back to workspace-write.
    json(&env, "s", &["sandbox", "toggle", "--yes"], 0);
    let t = json(&env, "s", &["sandbox", "toggle"], 0);
    assert_eq!(t["mode"], "workspace-write", "tightening, not asked: {t}");
    assert!(!write_outside(&env, &out));

    let log = json(&env, "other", &["log"], 0);
    let changes: Vec<(String, String)> = log["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| i["type"] == "setting")
        .map(|i| {
            assert_eq!(i["key"], "sandbox.mode");
            assert_eq!(i["session"], "s", "{i}");
            assert!(i["by_pid"].as_i64().unwrap() > 0);
            assert!(i["time"].as_str().is_some(), "{i}");
            (
                i["previous"].as_str().unwrap_or("-").to_string(),
                i["value"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let want = [
        ("danger-full-access", "workspace-write"),
        ("read-only", "danger-full-access"),
        ("danger-full-access", "read-only"),
        ("-", "danger-full-access"),
    ];
    let want: Vec<(String, String)> = want
        .iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect();
    assert_eq!(
        changes, want,
        "every change, newest first, in any session's log"
    );
    let human = expect(&env, "s", &["log"], 0);
    assert!(
        text(&human).contains("sandbox.mode: danger-full-access -> workspace-write"),
        "{}",
        text(&human)
    );
}

#[test]
fn the_workspace_file_tightens_the_set_mode_and_cannot_loosen_it() {
    let env = Env::new();
    expect(&env, "s", &["init"], 0);
    json(
        &env,
        "s",
        &["sandbox", "mode", "danger-full-access", "--yes"],
        0,
    );
    std::fs::write(
        env.root().join(".rewind.toml"),
        "[sandbox]\nmode = \"workspace-write\"\n",
    )
    .unwrap();
    let m = mode(&env);
    assert_eq!(m["mode"], "workspace-write", "{m}");
    assert_eq!(m["workspace_mode"], "danger-full-access", "{m}");
    assert_eq!(m["tightened_by"], ".rewind.toml", "{m}");
    // A stricter set mode is not loosened by the file's workspace-write.
    json(&env, "s", &["sandbox", "mode", "read-only"], 0);
    let m = mode(&env);
    assert_eq!(m["mode"], "read-only", "{m}");
    assert_eq!(m["tightened_by"], Value::Null, "{m}");
    // And the file cannot grant full access.
    std::fs::write(
        env.root().join(".rewind.toml"),
        "[sandbox]\nmode = \"danger-full-access\"\n",
    )
    .unwrap();
    let o = env.run(&["sandbox", "mode"]);
    assert_ne!(o.status.code(), Some(0), "{}", text(&o));
    assert!(text(&o).contains("loosen"), "{}", text(&o));
}

#[test]
fn the_mode_cannot_be_changed_from_inside_the_sandbox() {
    require_bwrap();
    // Not under /tmp: in the sandbox's private /tmp, the state directory would be an empty
    // one of its own, and "changing the mode" there would prove nothing.
    let env = Env {
        home: tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap(),
        root: tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap(),
    };
    expect(&env, "s", &["init"], 0);
    let bin = env!("CARGO_BIN_EXE_rewind");
    let home = env.home.path().display().to_string();
    let root = env.root().display().to_string();
    // As an agent's command would: with the state directory named, asking plainly...
    let plain = format!("REWIND_HOME='{home}' '{bin}' -C '{root}' sandbox toggle --yes");
    let o = env.run(&["sandbox", "exec", "--", "sh", "-c", &plain]);
    assert_eq!(
        o.status.code(),
        Some(6),
        "refused as a sandbox refusal: {}",
        text(&o)
    );
    assert!(text(&o).contains("inside the sandbox"), "{}", text(&o));
    // ...and hiding that it runs sandboxed: the state directory is read-only in there.
    let hidden = format!("unset REWIND_SANDBOX; {plain}");
    let o = env.run(&["sandbox", "exec", "--", "sh", "-c", &hidden]);
    assert!(!o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("readonly database"), "{}", text(&o));
    let m = mode(&env);
    assert_eq!(m["mode"], "workspace-write", "{m}");
    assert_eq!(m["source"], "default", "unchanged: {m}");
}

/// One `run` call; its result.
fn run(m: &mut Raw, id: u64, args: Value) -> Value {
    m.call(id, "run", args);
    m.recv()["result"].clone()
}

#[test]
fn mcp_run_follows_the_workspace_mode_and_a_call_may_only_ask_for_stricter() {
    require_bwrap();
    let env = Env::new();
    expect(&env, "s", &["init"], 0);
    let mut m = Raw::start(&env, "m");
    let r = run(&mut m, 1, json!({"command": "echo a > a.txt"}));
    assert_eq!(r["structuredContent"]["sandbox"], "workspace-write", "{r}");
    assert!(env.root().join("a.txt").exists());
    // Stricter for one call: read-only, the write fails.
    let r = run(
        &mut m,
        2,
        json!({"command": "echo b > b.txt", "sandbox": "read-only"}),
    );
    assert_eq!(r["structuredContent"]["sandbox"], "read-only", "{r}");
    assert_ne!(r["structuredContent"]["exit_code"], 0, "{r}");
    assert!(!env.root().join("b.txt").exists());
    // Looser: refused, nothing run.
    let r = run(
        &mut m,
        3,
        json!({"command": "echo c > c.txt", "sandbox": "danger-full-access"}),
    );
    assert_eq!(r["isError"], true, "{r}");
    assert_eq!(r["structuredContent"]["error"]["kind"], "sandbox", "{r}");
    assert!(!env.root().join("c.txt").exists());
    // The user tightens the workspace: the next call runs read-only, and may not ask for
    // workspace-write.
    json(&env, "s", &["sandbox", "mode", "read-only"], 0);
    let r = run(&mut m, 4, json!({"command": "echo d > d.txt"}));
    assert_eq!(r["structuredContent"]["sandbox"], "read-only", "{r}");
    assert!(!env.root().join("d.txt").exists());
    let r = run(
        &mut m,
        5,
        json!({"command": "echo e > e.txt", "sandbox": "workspace-write"}),
    );
    assert_eq!(r["isError"], true, "{r}");
    assert!(!env.root().join("e.txt").exists());
    // Full access set by the user: commands run unsandboxed.
    json(
        &env,
        "s",
        &["sandbox", "mode", "danger-full-access", "--yes"],
        0,
    );
    let r = run(&mut m, 6, json!({"command": "echo f > f.txt"}));
    assert_eq!(r["structuredContent"]["sandbox"], "none", "{r}");
    assert!(env.root().join("f.txt").exists(), "{r}");
    assert!(m.finish().success());
}
