//! The background baseline (`rewind baseline`): what a `capture.time_budget` left uncovered is
//! hashed by one detached run that the command starts, recorded a chunk at a time, shown by
//! `status` while it runs, and restorable afterwards; a second run gives way; a run killed
//! before it records leaves the baseline due, and the next run completes it.

use crate::common;

use std::fs::File;
use std::time::{Duration, Instant};

use crate::common::rewind::*;
use common::{noise, text, Env};

const FILES: usize = 120;

fn budget(env: &Env, budget: Option<&str>) {
    let toml = match budget {
        Some(b) => format!("[capture]\ntime_budget = \"{b}\"\n"),
        None => String::new(),
    };
    write(env.root(), ".rewind.toml", toml.as_bytes());
}

/// `FILES` files of 8 KiB of noise under `dir`; returns them by path.
fn files(env: &Env, dir: &str, seed: u64) -> Vec<(String, Vec<u8>)> {
    (0..FILES)
        .map(|i| {
            let rel = format!("{dir}/{:02}/f{i}.bin", i % 7);
            let body = noise(seed + i as u64, 8 << 10);
            write(env.root(), &rel, &body);
            (rel, body)
        })
        .collect()
}

fn uncovered(env: &Env) -> Vec<String> {
    let v = json(env, "S", &["status"], 0);
    v["uncovered"]
        .as_array()
        .unwrap()
        .iter()
        .map(|u| u["path"].as_str().unwrap().to_string())
        .collect()
}

/// Holds `baseline.lock` as a running `rewind baseline` would: runs started meanwhile give way.
fn hold_baseline_lock(env: &Env) -> File {
    let f = File::options()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(state_dir(env).join("baseline.lock"))
        .unwrap();
    f.lock().unwrap();
    f
}

/// Lets go of the lock [`hold_baseline_lock`] took, and waits until it can be taken.
///
/// The lock is released with an explicit unlock, not by closing the file: a child that another
/// test of this process forks holds a copy of every descriptor until its `exec` closes them,
/// and with it the lock (seen in CI: the run after the release found the lock still held and
/// gave way). An `flock` belongs to the open file description, so an unlock through any copy
/// releases it for all of them. The probe below unlocks the same way, for the same reason: a
/// probe closed while a fork held its copy made a later run give way too.
fn let_go(env: &Env, held: File) {
    held.unlock().unwrap();
    drop(held);
    let path = state_dir(env).join("baseline.lock");
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let f = File::open(&path).unwrap();
        if f.try_lock().is_ok() {
            f.unlock().unwrap();
            return;
        }
        assert!(
            Instant::now() < deadline,
            "the baseline lock was never free"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// `rewind baseline` in the foreground, which must not have given way to another run (a run
/// that gives way reports nothing left, since it looked at nothing).
fn complete(env: &Env) -> serde_json::Value {
    let r = json(env, "S", &["baseline"], 0);
    assert_eq!(r["already_running"], false, "{r}");
    r
}

/// Waits until no `rewind baseline --background` of this workspace runs (the one a command
/// started gives way while the test holds the lock; it must be gone before the test lets go).
/// `spawn` returns after the child's `exec`, so a run a finished command started is visible.
/// (A command starts it with `-C` and its own canonical directory, which is not the path the
/// test has when the temporary directory is reached through a symlink.)
fn wait_for_background_runs(env: &Env) {
    let canonical = std::fs::canonicalize(env.root()).unwrap();
    let root = canonical.to_str().unwrap().as_bytes().to_vec();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let running = std::fs::read_dir("/proc")
            .unwrap()
            .filter_map(Result::ok)
            .any(|p| {
                std::fs::read(p.path().join("cmdline")).is_ok_and(|c| {
                    let args: Vec<&[u8]> = c.split(|b| *b == 0).collect();
                    args.contains(&&b"--background"[..]) && args.contains(&root.as_slice())
                })
            });
        if !running {
            return;
        }
        assert!(Instant::now() < deadline, "a background run never ended");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A workspace whose last capture (an `exec`) deferred `FILES` new files for a spent budget,
/// while this test holds `baseline.lock`: the run that `exec` started has given way. Returns
/// the held lock and the files.
fn deferred_while_a_run_holds_the_lock(env: &Env, seed: u64) -> (File, Vec<(String, Vec<u8>)>) {
    write(env.root(), "keep.txt", b"keep\n");
    init(env);
    let held = hold_baseline_lock(env);
    budget(env, Some("0s"));
    let files = files(env, "data", seed);
    sh(env, "S", "true");
    wait_for_background_runs(env);
    (held, files)
}

/// Every file restores to its content after the baseline: the content was captured. Run with
/// no budget, so the rewrite and the restore capture in full.
fn restores(env: &Env, files: &[(String, Vec<u8>)]) {
    budget(env, None);
    let c = checkpoint(env, "S", "after-baseline");
    sh(
        env,
        "S",
        "find data -name '*.bin' -exec sh -c 'echo x > \"$1\"' _ {} \\;",
    );
    assert_eq!(read(env.root(), &files[0].0), b"x\n");
    expect(env, "S", &["restore", &c], 0);
    for (rel, body) in files {
        assert!(read(env.root(), rel) == *body, "{rel} was not restored");
    }
    fsck_clean(env);
}

/// `init` with a budget that runs out at once leaves every file uncovered and starts the
/// background run itself; without any other command, the files become covered, `status`
/// shows no baseline left, and every file restores.
#[test]
fn a_budget_that_runs_out_is_completed_in_the_background() {
    let env = Env::new();
    budget(&env, Some("0s"));
    let files = files(&env, "data", 1);
    let v = json(&env, "S", &["init"], 0);
    let left = v["uncovered"].as_array().map_or(0, |u| u.len());
    assert!(
        left >= FILES,
        "init leaves the files to the background: {v}"
    );
    wait_for_baseline(&env, "S");
    let s = json(&env, "S", &["status"], 0);
    assert_eq!(s["last_snapshot"]["label"], "baseline", "{s}");
    restores(&env, &files);
}

/// With a run holding the lock, the run a command starts gives way and a manual one says so;
/// `status` shows the run and what it has left; once the lock is free, a run hashes exactly
/// what was left and nothing stays uncovered.
#[test]
fn one_run_at_a_time_and_status_shows_what_is_left() {
    let env = Env::new();
    let (held, files) = deferred_while_a_run_holds_the_lock(&env, 2);
    let left = uncovered(&env);
    assert!(left.len() >= FILES, "{left:?}");
    let s = json(&env, "S", &["status"], 0);
    assert_eq!(s["baseline"]["running"], true, "{s}");
    assert_eq!(s["baseline"]["remaining"], left.len() as u64, "{s}");
    let r = json(&env, "S", &["baseline"], 0);
    assert_eq!(r["already_running"], true, "{r}");
    assert_eq!(uncovered(&env), left, "a run that gave way changed nothing");
    let_go(&env, held);
    let r = complete(&env);
    assert_eq!(r["files_hashed"], left.len() as u64, "{r}");
    assert_eq!(r["remaining"], 0, "{r}");
    assert!(r["captures"].as_u64().unwrap() >= 1, "{r}");
    assert!(uncovered(&env).is_empty());
    assert!(json(&env, "S", &["status"], 0)["baseline"].is_null());
    restores(&env, &files);
}

/// Killed after storing what it hashed and before recording it: the baseline is still due
/// (`status` says so), fsck is clean, and the next run completes it.
#[test]
fn killed_before_it_records_the_next_run_completes_it() {
    let env = Env::new();
    let (held, files) = deferred_while_a_run_holds_the_lock(&env, 3);
    let left = uncovered(&env).len();
    let_go(&env, held);
    let o = env
        .cmd(&["-s", "S", "baseline"])
        .env("REWIND_FAILPOINT", "baseline-before-capture")
        .output()
        .unwrap();
    assert_eq!(
        o.status.code(),
        None,
        "killed at the failpoint: {}",
        text(&o)
    );
    let s = json(&env, "S", &["status"], 0);
    assert_eq!(s["baseline"]["running"], false, "{s}");
    assert_eq!(
        s["baseline"]["remaining"], left as u64,
        "nothing recorded: {s}"
    );
    fsck_clean(&env);
    let r = complete(&env);
    assert_eq!(r["remaining"], 0, "{r}");
    assert!(uncovered(&env).is_empty());
    restores(&env, &files);
}

/// A file rewritten after the run hashed it and before it recorded it is never recorded with
/// the content that was hashed: the run's capture finds another stat, and, with the budget
/// still spent, leaves the file uncovered; the next run takes its new content.
#[test]
fn a_file_changed_between_the_hash_and_the_record_is_not_recorded_stale() {
    use std::io::{BufRead, BufReader};
    let env = Env::new();
    let (held, files) = deferred_while_a_run_holds_the_lock(&env, 4);
    let_go(&env, held);
    // The workspace lock held here: the run hashes, then waits for it to record.
    let ws_lock = File::options()
        .read(true)
        .write(true)
        .open(state_dir(&env).join("lock"))
        .unwrap();
    ws_lock.lock().unwrap();
    let mut run = env
        .cmd(&["-s", "S", "--json", "baseline"])
        .env("REWIND_TRACE", "1")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut trace = BufReader::new(run.stderr.take().unwrap());
    let mut line = String::new();
    let mut seen = String::new();
    while !line.contains("baseline: stored it") {
        line.clear();
        if trace.read_line(&mut line).unwrap() == 0 {
            let o = run.wait_with_output().unwrap();
            panic!("the run ended early: {}\n{seen}{}", o.status, text(&o));
        }
        seen.push_str(&line);
    }
    let changed = &files[0].0;
    let new = noise(99, 8 << 10);
    write(env.root(), changed, &new);
    ws_lock.unlock().unwrap(); // for every copy a fork holds (see `let_go`)
    drop(ws_lock);
    std::thread::spawn(move || std::io::copy(&mut trace, &mut std::io::sink()));
    let o = run.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let r: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(r["remaining"], 1, "{r}");
    assert_eq!(uncovered(&env), std::slice::from_ref(changed));
    let r = complete(&env);
    assert_eq!(r["remaining"], 0, "{r}");
    let mut files = files;
    files[0].1 = new;
    restores(&env, &files);
}

/// Covering a file is not a change of it, but what happened to a deferred file meanwhile is:
/// a deferred file deleted before the run records is recorded as deleted (one change), and the
/// other files, now covered, get no change row.
#[test]
fn covering_records_no_change_but_a_deleted_deferred_file_is_one() {
    let env = Env::new();
    let (held, files) = deferred_while_a_run_holds_the_lock(&env, 9);
    let epochs = |env: &Env| -> Vec<serde_json::Value> {
        let log = json(env, "S", &["log", "--limit", "1000"], 0);
        log["items"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|i| i["type"] == "epoch")
            .cloned()
            .collect()
    };
    let before: Vec<String> = epochs(&env)
        .iter()
        .map(|e| e["id"].as_str().unwrap().to_string())
        .collect();
    let gone = &files[3].0;
    std::fs::remove_file(env.root().join(gone)).unwrap();
    let_go(&env, held);
    budget(&env, None);
    let r = complete(&env);
    assert_eq!(r["remaining"], 0, "{r}");
    let left = uncovered(&env);
    assert!(left.is_empty(), "still uncovered after {r}: {left:?}");
    let new: Vec<serde_json::Value> = epochs(&env)
        .into_iter()
        .filter(|e| !before.contains(&e["id"].as_str().unwrap().to_string()))
        .collect();
    let rows: u64 = new.iter().map(|e| e["changes"].as_u64().unwrap()).sum();
    assert_eq!(rows, 1, "only the deletion is a change: {new:?}");
    let kept: Vec<_> = files.iter().filter(|(p, _)| p != gone).cloned().collect();
    restores(&env, &kept);
}
