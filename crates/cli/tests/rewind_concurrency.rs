//! Done-when 8: 8 processes × 8 capture/restore cycles on one workspace, each process its own
//! session and its own files, through the CLI (`exec`, `checkpoint`, `restore`). Every call
//! succeeds (none gives up waiting for the lock: see `call`); every restore leaves that
//! session's files exactly at its checkpoint; fsck is clean at the end.

use crate::common;

use std::collections::BTreeMap;
use std::process::Output;
use std::sync::{Arc, Mutex};

use crate::common::rewind::*;
use common::{last_line, text, Env, Gates};

const PROCS: usize = 8;
const CYCLES: usize = 8;

/// The session's own files (`s<i>/…`) as they are on disk. Only that subtree is read: the
/// other sessions are changing theirs at the same time.
fn own_files(env: &Env, i: usize) -> Tree {
    read_tree(&env.root().join(format!("s{i}")))
        .into_iter()
        .map(|(k, v)| ([format!("s{i}/").as_bytes(), &k].concat(), v))
        .collect()
}

/// Runs one command, waiting up to 20 s for the workspace lock. The longest queue here is the
/// other seven processes' calls, each well under a second, so a call that gives up (exit 4) is
/// a lock held far too long, not a slow machine: the test fails on it.
fn call(env: &Env, session: &str, args: &[&str]) -> Output {
    let mut all = vec!["-s", session];
    all.extend_from_slice(args);
    env.cmd(&all)
        .current_dir(env.root())
        .env("REWIND_LOCK_TIMEOUT", "20")
        .env("REWIND_QUIET", "1")
        .output()
        .unwrap()
}

#[derive(Default)]
struct Tally {
    ok: usize,
    busy: usize,
    /// Restores after which the session's files were checked to be at its checkpoint.
    verified: usize,
    failures: Vec<String>,
}

/// How a worker's tool calls record their changes.
#[derive(Clone, Copy, PartialEq)]
enum Via {
    /// `rewind exec -- sh -c …`: opaque epochs (whole-tree capture before and after).
    Exec,
    /// `epoch begin --path …`, plain writes, `epoch end`: exact epochs.
    Exact,
}

/// One tool call: `script` run under `exec`, or (exact) `epoch begin` on `paths`, the script
/// run by the test itself, `epoch end`.
fn tool_call(env: &Env, session: &str, via: Via, paths: &[String], script: &str) -> Output {
    match via {
        Via::Exec => call(env, session, &["exec", "--", "sh", "-c", script]),
        Via::Exact => {
            let mut args = vec!["epoch", "begin"];
            for p in paths {
                args.push("--path");
                args.push(p);
            }
            let o = call(env, session, &args);
            if o.status.code() != Some(0) {
                return o;
            }
            let run = std::process::Command::new("sh")
                .args(["-c", script])
                .current_dir(env.root())
                .output()
                .unwrap();
            assert!(run.status.success(), "{}", text(&run));
            call(env, session, &["epoch", "end"])
        }
    }
}

fn worker(env: &Env, via: Via, i: usize, tally: &Mutex<Tally>) {
    let session = format!("p{i}");
    let record = |what: &str, o: &Output| -> bool {
        let mut t = tally.lock().unwrap();
        match o.status.code() {
            Some(0) => {
                t.ok += 1;
                true
            }
            Some(4) => {
                t.busy += 1;
                false
            }
            _ => {
                t.failures.push(format!("{session} {what}: {}", text(o)));
                false
            }
        }
    };
    for cycle in 0..CYCLES {
        // A turn's first tool call: write this session's files.
        let script = format!(
            "mkdir -p s{i}/d && echo '{i}:{cycle}:a' > s{i}/a && echo '{i}:{cycle}:b' > s{i}/d/b \
             && chmod {} s{i}/a",
            if cycle % 2 == 0 { "0644" } else { "0755" }
        );
        let paths: Vec<String> = ["a", "d", "d/b", "l", &format!("n{cycle}")]
            .iter()
            .map(|p| format!("s{i}/{p}"))
            .collect();
        if !record("call 1", &tool_call(env, &session, via, &paths, &script)) {
            continue;
        }
        let o = call(
            env,
            &session,
            &["checkpoint", "--message", &format!("c{cycle}")],
        );
        if !record("checkpoint", &o) {
            continue;
        }
        let cp = last_line(&o.stdout);
        let at_checkpoint = own_files(env, i);
        // The next tool call changes, deletes and creates.
        let script = format!(
            "echo changed >> s{i}/a && rm -r s{i}/d && echo new > s{i}/n{cycle} && ln -sfn a s{i}/l"
        );
        if !record("call 2", &tool_call(env, &session, via, &paths, &script)) {
            continue;
        }
        let o = call(env, &session, &["restore", &cp]);
        if !record("restore", &o) {
            continue;
        }
        let now = own_files(env, i);
        let mut t = tally.lock().unwrap();
        if now == at_checkpoint {
            t.verified += 1;
        } else {
            t.failures.push(format!(
                "{session} cycle {cycle}: not at its checkpoint after restore:\n{}\n{}",
                tree_diff(&now, &at_checkpoint),
                text(&o)
            ));
        }
    }
}

fn eight_by_eight(via: Via) {
    let env = Arc::new(Env::new());
    write(env.root(), "shared-readme", b"nobody writes this\n");
    init(&env);
    let tally = Arc::new(Mutex::new(Tally::default()));
    let handles: Vec<_> = (0..PROCS)
        .map(|i| {
            let env = Arc::clone(&env);
            let tally = Arc::clone(&tally);
            std::thread::spawn(move || worker(&env, via, i, &tally))
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    let t = tally.lock().unwrap();
    eprintln!(
        "calls: {} ok, {} busy (exit 4), {} restores verified",
        t.ok, t.busy, t.verified
    );
    assert!(
        t.failures.is_empty(),
        "{} failures:\n{}",
        t.failures.len(),
        t.failures.join("\n---\n")
    );
    assert_eq!(t.busy, 0, "no call may give up waiting for the lock");
    assert_eq!(
        t.verified,
        PROCS * CYCLES,
        "every cycle's restore ran and was checked"
    );
    fsck_clean(&env);
    // Nobody touched the shared file, and no session's state leaked into another's.
    assert_eq!(
        read_str(env.root(), "shared-readme"),
        "nobody writes this\n"
    );
    let mut per: BTreeMap<usize, Tree> = BTreeMap::new();
    for i in 0..PROCS {
        per.insert(i, own_files(&env, i));
    }
    for (i, files) in per {
        for (k, v) in files {
            if let Node::File { data, .. } = v {
                if k.ends_with(b"/a") || k.ends_with(b"/b") {
                    assert!(
                        data.starts_with(format!("{i}:").as_bytes()),
                        "{}: {:?}",
                        show(&k),
                        String::from_utf8_lossy(&data)
                    );
                }
            }
        }
    }
}

/// Exact epochs (declared paths, no scan) from 8 concurrent processes.
#[test]
fn eight_processes_eight_cycles_exact_epochs() {
    eight_by_eight(Via::Exact);
}

/// Shell commands (`exec`, opaque epochs) from 8 concurrent processes.
#[test]
fn eight_processes_eight_cycles_exec() {
    eight_by_eight(Via::Exec);
}

/// Two sessions' shell commands never overlap: opaque epochs are serialised, since before/after
/// scans could not tell their changes apart. (This test used to sleep to make B write "while
/// A's runs"; A's exec in fact waited for B's to end.) While B's command runs, held on a gate,
/// A's exec waits and gives up at its lock bound (exit 4) without running its command; once
/// B's ends, A's runs. Each session's rewind reverts its own command's change and only that.
#[test]
fn concurrent_execs_keep_their_own_changes() {
    let env = Env::new();
    let root = env.root();
    write(root, "a", b"a0\n");
    write(root, "b", b"b0\n");
    init(&env);
    let ca = checkpoint(&env, "A", "a0");
    let cb = checkpoint(&env, "B", "b0");
    let g = Gates::new(&["b-end"]);
    let script = format!(
        "echo b1 > b; : > '{}'; read x < '{}'",
        g.path("b-wrote").display(),
        g.path("b-end").display()
    );
    let mut b = env
        .cmd(&["-s", "B", "exec", "--", "sh", "-c", &script])
        .current_dir(root)
        .spawn()
        .unwrap();
    g.wait_for("b-wrote");
    let o = env
        .cmd(&["-s", "A", "exec", "--", "sh", "-c", "echo a1 > a"])
        .current_dir(root)
        .env("REWIND_LOCK_TIMEOUT", "0.5")
        .output()
        .unwrap();
    assert_eq!(
        o.status.code(),
        Some(4),
        "A's exec while B's runs: {}",
        text(&o)
    );
    assert_eq!(read_str(root, "a"), "a0\n", "A's command did not run");
    g.open("b-end");
    assert!(b.wait().unwrap().success());
    assert_eq!(read_str(root, "b"), "b1\n");
    sh(&env, "A", "echo a1 > a");
    // A's rewind reverts a only.
    let v = json(&env, "A", &["restore", &ca, "--dry-run"], 0);
    let paths: Vec<String> = steps(&v).into_iter().map(|s| s.1).collect();
    assert_eq!(paths, vec!["a"], "A's rewind would touch: {v}");
    // B's rewind reverts b.
    let v = json(&env, "B", &["restore", &cb, "--dry-run"], 0);
    let paths: Vec<String> = steps(&v).into_iter().map(|s| s.1).collect();
    assert_eq!(paths, vec!["b"], "B's rewind would touch: {v}");
}
