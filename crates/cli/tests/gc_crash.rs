//! Garbage collection under SIGKILL and beside other writers: killed at each of its failpoints
//! (mark, repack, index update, pack delete), the workspace's status, fsck and a restore of
//! every kept checkpoint succeed and a second gc reaches the budget; run in a loop while four
//! processes record exact and opaque epochs and restore, nothing fails but bounded waits (exit
//! 4), fsck is clean and every kept checkpoint restores.

use crate::common;

use std::time::{Duration, Instant};

use crate::common::rewind::*;
use crate::gc::{churn, restores_each, state_bytes};
use common::{text, Env};

/// The checkpoints `log` does not mark collected, with their trees as recorded.
fn kept(env: &Env, all: &[(String, Tree)]) -> Vec<(String, Tree)> {
    let v = json(env, "x", &["log", "--all-sessions", "-n", "0"], 0);
    let items = v["items"].as_array().unwrap();
    all.iter()
        .filter(|(c, _)| {
            items
                .iter()
                .any(|i| i["id"] == c.as_str() && i["collected_ns"].is_null())
        })
        .cloned()
        .collect()
}

fn killed_gc_then_everything_works(point: &str) {
    let env = Env::new();
    write(env.root(), "keep.txt", b"keep\n");
    init(&env);
    let mut all = churn(&env, "S", 0, 8);
    all.push((checkpoint(&env, "S", "end"), read_tree(env.root())));
    let budget: u64 = 3 << 20;
    let dry = json(&env, "S", &["gc", "--dry-run", "--max-bytes", "3M"], 0);
    assert!(
        dry["packs_written"].as_u64().unwrap() >= 1,
        "a repack: {dry}"
    );
    let o = env
        .cmd(&["gc", "--max-bytes", "3M"])
        .env("REWIND_FAILPOINT", point)
        .output()
        .unwrap();
    assert_eq!(
        o.status.code(),
        None,
        "{point}: the failpoint must kill gc: {}",
        text(&o)
    );
    expect(&env, "S", &["status"], 0);
    fsck_clean(&env);
    let kept = kept(&env, &all);
    assert!(kept.len() >= 2, "{point}: kept {}", kept.len());
    restores_each(&env, &kept);
    let v = json(&env, "S", &["gc", "--max-bytes", "3M"], 0);
    assert_eq!(v["within_budget"], true, "{point}: {v}");
    assert!(
        state_bytes(&env) <= budget + (256 << 10),
        "{point}: {} bytes",
        state_bytes(&env)
    );
    fsck_clean(&env);
    let kept = self::kept(&env, &all);
    restores_each(&env, &kept);
}

#[test]
fn killed_after_mark() {
    killed_gc_then_everything_works("gc-after-mark");
}

#[test]
fn killed_after_repack() {
    killed_gc_then_everything_works("gc-after-repack");
}

#[test]
fn killed_after_index_update() {
    killed_gc_then_everything_works("gc-after-index");
}

#[test]
fn killed_after_a_pack_delete() {
    killed_gc_then_everything_works("gc-after-pack-delete");
}

#[test]
fn gc_in_a_loop_beside_four_writers() {
    let env = Env::new();
    write(env.root(), "base.txt", b"base\n");
    init(&env);
    let deadline = Instant::now() + Duration::from_secs(60);
    let failures = std::sync::Mutex::new(Vec::<String>::new());
    let run = |session: &str, args: &[&str], allowed: &[i32]| {
        let o = env
            .cmd(&["-s", session])
            .args(args)
            .env("REWIND_QUIET", "1")
            .env("REWIND_LOCK_TIMEOUT", "20")
            .output()
            .unwrap();
        let code = o.status.code();
        if !code.is_some_and(|c| c == 0 || c == 4 || allowed.contains(&c)) {
            failures
                .lock()
                .unwrap()
                .push(format!("{session} {args:?}: {}", text(&o)));
        }
        code == Some(0)
    };
    let root = env.root().to_path_buf();
    std::thread::scope(|s| {
        for w in 0..4 {
            let run = &run;
            let root = &root;
            s.spawn(move || {
                let session = format!("W{w}");
                let mut last: Option<String> = None;
                let mut n = 0u32;
                while Instant::now() < deadline {
                    match n % 4 {
                        0 => {
                            let m = format!("{session}-{n}");
                            if run(&session, &["checkpoint", "--message", &m], &[]) {
                                last = Some(m);
                            }
                        }
                        1 => {
                            let script = format!(
                                "echo {n} > w{w}.txt; head -c 200000 /dev/urandom > wbig{w}.bin"
                            );
                            run(&session, &["exec", "--", "sh", "-c", &script], &[]);
                        }
                        2 => {
                            let path = format!("e{w}.txt");
                            if run(&session, &["epoch", "begin", "--path", &path], &[]) {
                                std::fs::write(root.join(&path), format!("{n}\n")).unwrap();
                                run(&session, &["epoch", "end"], &[]);
                            }
                        }
                        _ => {
                            if let Some(m) = &last {
                                run(&session, &["restore", m], &[]);
                            }
                        }
                    }
                    n += 1;
                }
            });
        }
        let run = &run;
        s.spawn(move || {
            while Instant::now() < deadline {
                run("gc", &["gc", "--max-bytes", "1M", "--keep", "2"], &[]);
            }
        });
    });
    let failures = failures.into_inner().unwrap();
    assert!(failures.is_empty(), "{failures:#?}");
    fsck_clean(&env);
    // Every kept checkpoint restores (their trees were not recorded: exit 0 and fsck).
    let v = json(&env, "x", &["log", "--all-sessions", "-n", "0"], 0);
    let kept: Vec<String> = v["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| i["type"] == "checkpoint" && i["collected_ns"].is_null())
        .map(|i| i["id"].as_str().unwrap().to_string())
        .collect();
    assert!(kept.len() >= 4, "{v}");
    for c in &kept {
        expect(&env, "probe", &["restore", "--all", c], 0);
    }
    fsck_clean(&env);
}
