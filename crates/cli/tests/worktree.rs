//! Worktrees through the real binary: create, work in the copy, merge back (dry run, clean,
//! line-merged, conflicting, forced), undo the merge, discard; two agents in two worktrees;
//! `--from`; the sandbox and the guard inside a worktree; a crash during a merge; gc keeping a
//! worktree's base.

use std::path::{Path, PathBuf};

use crate::common::rewind::*;
use crate::common::{last_line, require_bwrap, text, Env};

/// `rewind -C DIR -s SESSION ARGS…`, asserting the exit code.
fn in_dir(env: &Env, dir: &Path, session: &str, args: &[&str], code: i32) -> std::process::Output {
    let mut all: Vec<&str> = vec!["-C", dir.to_str().unwrap(), "-s", session];
    all.extend_from_slice(args);
    let o = env
        .cmd_here(&all)
        .env("REWIND_QUIET", "1")
        .output()
        .unwrap();
    assert_eq!(
        o.status.code(),
        Some(code),
        "rewind -C {} {args:?}: {}",
        dir.display(),
        text(&o)
    );
    o
}

fn create(env: &Env, name: &str, extra: &[&str]) -> PathBuf {
    let mut args = vec!["worktree", "create", name];
    args.extend_from_slice(extra);
    let o = expect(env, "S", &args, 0);
    PathBuf::from(last_line(&o.stdout))
}

/// Runs a shell script in the worktree as one exec epoch of `session` there.
fn work(env: &Env, wt: &Path, session: &str, script: &str) {
    in_dir(env, wt, session, &["exec", "--", "sh", "-c", script], 0);
}

fn lines(n: usize) -> String {
    (1..=n).map(|i| format!("line {i}\n")).collect()
}

fn step_paths(v: &serde_json::Value) -> Vec<String> {
    let mut p: Vec<String> = v["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["path"].as_str().unwrap().to_string())
        .collect();
    p.sort();
    p
}

fn seed(env: &Env) {
    write(env.root(), "a.txt", lines(10).as_bytes());
    write(env.root(), "c.txt", b"to be deleted\n");
    write(env.root(), "keep/k.txt", b"kept\n");
    write(env.root(), ".gitignore", b"*.log\n");
    write(env.root(), "build.log", b"ignored\n");
    write(env.root(), ".git/config", b"[core]\n");
    init(env);
}

#[test]
fn create_work_merge_dry_run_merge_and_undo() {
    let env = Env::new();
    seed(&env);
    let wt = create(&env, "w1", &[]);
    assert!(wt.starts_with(env.home.path()), "{}", wt.display());
    assert_eq!(read_str(&wt, "a.txt"), lines(10));
    assert_eq!(read_str(&wt, "keep/k.txt"), "kept\n");
    assert!(
        !wt.join("build.log").exists(),
        "ignored files are not copied"
    );
    assert!(!wt.join(".git").exists(), ".git is not copied");
    let path = ok(&env, "S", &["worktree", "path", "w1"]);
    assert_eq!(PathBuf::from(path), wt);

    work(
        &env,
        &wt,
        "agent",
        "sed -i 's/^line 3$/LINE 3/' a.txt && mkdir -p new && echo b > new/b.txt && rm c.txt",
    );
    let list = json(&env, "S", &["worktree", "list"], 0);
    assert_eq!(list["worktrees"][0]["name"], "w1");
    assert_eq!(list["worktrees"][0]["worktree_changes"], 4);
    assert_eq!(list["worktrees"][0]["parent_changes"], 0);
    assert_eq!(list["worktrees"][0]["sessions"][0], "agent");

    let before = read_tree_mtimes(env.root());
    let dry = json(&env, "S", &["worktree", "merge", "w1", "--dry-run"], 0);
    assert_eq!(step_paths(&dry), ["a.txt", "c.txt", "new", "new/b.txt"]);
    assert_eq!(dry["applied"], false);
    assert_eq!(
        read_tree_mtimes(env.root()),
        before,
        "a dry run writes nothing"
    );

    let m = json(&env, "S", &["worktree", "merge", "w1"], 0);
    assert_eq!(step_paths(&m), ["a.txt", "c.txt", "new", "new/b.txt"]);
    assert_eq!(m["applied"], true);
    assert_eq!(
        read_str(env.root(), "a.txt"),
        lines(10).replace("line 3\n", "LINE 3\n")
    );
    assert_eq!(read_str(env.root(), "new/b.txt"), "b\n");
    assert!(!env.root().join("c.txt").exists());
    assert_eq!(read_str(env.root(), "build.log"), "ignored\n");
    let log = json(&env, "S", &["log"], 0);
    assert_eq!(log["items"][0]["tool"], "worktree-merge");
    assert!(log["items"][0]["note"].as_str().unwrap().contains("w1"));

    // Merging again changes nothing: both sides hold the same.
    let again = json(&env, "S", &["worktree", "merge", "w1", "--dry-run"], 0);
    assert_eq!(step_paths(&again), Vec::<String>::new());

    expect(&env, "S", &["undo"], 0);
    assert_eq!(read_tree(env.root()), before.0, "undo takes the merge back");
    fsck_clean(&env);
}

#[test]
fn edits_of_different_lines_on_both_sides_merge_cleanly() {
    let env = Env::new();
    seed(&env);
    let wt = create(&env, "w1", &[]);
    work(&env, &wt, "agent", "sed -i 's/^line 9$/NINE/' a.txt");
    sh(&env, "S", "sed -i 's/^line 2$/TWO/' a.txt");
    let m = json(&env, "S", &["worktree", "merge", "w1"], 0);
    assert_eq!(m["merged"][0]["path"], "a.txt");
    let want = lines(10)
        .replace("line 2\n", "TWO\n")
        .replace("line 9\n", "NINE\n");
    assert_eq!(read_str(env.root(), "a.txt"), want);
    expect(&env, "S", &["undo"], 0);
    assert_eq!(
        read_str(env.root(), "a.txt"),
        lines(10).replace("line 2\n", "TWO\n")
    );
}

#[test]
fn overlapping_edits_are_a_conflict_that_changes_nothing() {
    let env = Env::new();
    seed(&env);
    let wt = create(&env, "w1", &[]);
    work(
        &env,
        &wt,
        "agent",
        "sed -i 's/^line 5$/FIVE (worktree)/' a.txt && echo new > n.txt && rm keep/k.txt",
    );
    sh(
        &env,
        "S",
        "sed -i 's/^line 5$/FIVE (here)/' a.txt && echo edited > keep/k.txt",
    );
    let before = read_tree_mtimes(env.root());
    for args in [
        &["worktree", "merge", "w1"][..],
        &["worktree", "merge", "w1", "--dry-run"],
    ] {
        let v = json(&env, "S", args, 3);
        assert_eq!(v["refused"], true);
        let mut conflicts = conflict_paths(&v);
        conflicts.sort();
        assert_eq!(conflicts, ["a.txt", "keep/k.txt"]);
        let a = v["conflicts"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["path"] == "a.txt")
            .unwrap();
        assert_eq!(a["overlaps"][0]["ancestor"], serde_json::json!([5, 5]));
        assert_eq!(
            read_tree_mtimes(env.root()),
            before,
            "{args:?}: nothing changed"
        );
    }
    // Forced: the worktree's side, and what it overwrote comes back with undo.
    expect(&env, "S", &["worktree", "merge", "w1", "--force"], 0);
    assert!(read_str(env.root(), "a.txt").contains("FIVE (worktree)"));
    assert!(!env.root().join("keep/k.txt").exists());
    assert_eq!(read_str(env.root(), "n.txt"), "new\n");
    expect(&env, "S", &["undo"], 0);
    assert_eq!(read_tree(env.root()), before.0);
}

#[test]
fn discard_refuses_unmerged_work_then_removes_copy_and_state() {
    let env = Env::new();
    seed(&env);
    let wt = create(&env, "w1", &[]);
    let list = json(&env, "S", &["worktree", "list"], 0);
    let id = list["worktrees"][0]["id"].as_str().unwrap().to_string();
    let state = env.home.path().join("workspaces").join(&id);
    assert!(state.join("worktree.json").is_file());
    work(&env, &wt, "agent", "echo more >> a.txt");
    let o = expect(&env, "S", &["worktree", "discard", "w1"], 1);
    assert!(text(&o).contains("worktree merge w1"), "{}", text(&o));
    assert!(wt.join("a.txt").exists());
    expect(&env, "S", &["worktree", "discard", "w1", "--force"], 0);
    assert!(!wt.exists(), "the copy is gone");
    assert!(!state.exists(), "its state is gone");
    assert_eq!(
        json(&env, "S", &["worktree", "list"], 0)["worktrees"],
        serde_json::json!([])
    );
    expect(&env, "S", &["worktree", "path", "w1"], 1);
    // The name can be used again; a merged worktree discards without --force.
    let wt = create(&env, "w1", &[]);
    work(&env, &wt, "agent", "echo more >> a.txt");
    expect(&env, "S", &["worktree", "merge", "w1"], 0);
    expect(&env, "S", &["worktree", "discard", "w1"], 0);
}

#[test]
fn bad_names_and_places_are_refused_clearly() {
    let env = Env::new();
    seed(&env);
    for bad in ["a/b", "", "..", ".x", "a b"] {
        let o = expect(&env, "S", &["worktree", "create", bad], 2);
        assert!(text(&o).contains("worktree name"), "{bad:?}: {}", text(&o));
    }
    create(&env, "w1", &[]);
    let o = expect(&env, "S", &["worktree", "create", "w1"], 1);
    assert!(text(&o).contains("already"), "{}", text(&o));
    let inside = env.root().join("sub").display().to_string();
    let o = expect(
        &env,
        "S",
        &["worktree", "create", "w2", "--path", &inside],
        1,
    );
    assert!(text(&o).contains("outside"), "{}", text(&o));
    expect(&env, "S", &["worktree", "merge", "nope"], 1);
    // --path: anywhere outside the workspace and the state directory.
    let elsewhere = tempfile::tempdir().unwrap();
    let dir = elsewhere.path().join("w3");
    let wt = create(&env, "w3", &["--path", dir.to_str().unwrap()]);
    assert_eq!(wt, dir.canonicalize().unwrap());
    assert_eq!(read_str(&wt, "a.txt"), lines(10));
}

#[test]
fn two_agents_in_two_worktrees_merged_one_after_the_other() {
    let env = Env::new();
    seed(&env);
    let w1 = create(&env, "agent-1", &[]);
    let w2 = create(&env, "agent-2", &[]);
    work(
        &env,
        &w1,
        "one",
        "sed -i 's/^line 1$/ONE/' a.txt && echo 1 > one.txt",
    );
    work(
        &env,
        &w2,
        "two",
        "sed -i 's/^line 10$/TEN/' a.txt && echo 2 > two.txt",
    );
    expect(&env, "S", &["worktree", "merge", "agent-1"], 0);
    expect(&env, "S", &["worktree", "merge", "agent-2"], 0);
    let want = lines(10)
        .replace("line 1\n", "ONE\n")
        .replace("line 10\n", "TEN\n");
    assert_eq!(read_str(env.root(), "a.txt"), want);
    assert_eq!(read_str(env.root(), "one.txt"), "1\n");
    assert_eq!(read_str(env.root(), "two.txt"), "2\n");
    fsck_clean(&env);
}

#[test]
fn from_a_checkpoint() {
    let env = Env::new();
    seed(&env);
    let cp = checkpoint(&env, "S", "m1");
    sh(&env, "S", "echo later > a.txt && echo added > added.txt");
    let wt = create(&env, "old", &["--from", "m1"]);
    assert_eq!(read_str(&wt, "a.txt"), lines(10));
    assert!(!wt.join("added.txt").exists());
    let list = json(&env, "S", &["worktree", "list"], 0);
    assert_eq!(list["worktrees"][0]["from"], cp.as_str());
    // The worktree changes another file; the parent's own changes since stay.
    work(&env, &wt, "agent", "echo fixed > c.txt");
    expect(&env, "S", &["worktree", "merge", "old"], 0);
    assert_eq!(read_str(env.root(), "c.txt"), "fixed\n");
    assert_eq!(read_str(env.root(), "a.txt"), "later\n");
}

#[test]
fn sandboxed_exec_in_a_worktree_writes_only_the_worktree() {
    require_bwrap();
    let env = Env::new();
    seed(&env);
    let wt = create(&env, "w1", &[]);
    let parent = env.root().canonicalize().unwrap();
    let script = format!(
        "echo inside > inside.txt; echo outside > {}/a.txt; echo outside > {}/x.txt; true",
        parent.display(),
        parent.display()
    );
    let before = read_tree(env.root());
    in_dir(
        &env,
        &wt,
        "agent",
        &[
            "exec",
            "--sandbox",
            "workspace-write",
            "--",
            "sh",
            "-c",
            &script,
        ],
        0,
    );
    assert_eq!(read_str(&wt, "inside.txt"), "inside\n");
    assert_eq!(read_tree(env.root()), before, "the parent is not writable");
}

#[test]
fn a_worktree_has_its_own_read_fingerprints() {
    let env = Env::new();
    seed(&env);
    let wt = create(&env, "w1", &[]);
    expect(&env, "agent", &["read", "a.txt"], 0);
    let mut c = env.cmd_here(&["-C", wt.to_str().unwrap(), "-s", "agent", "write", "a.txt"]);
    let o = crate::common::output_with_stdin(&mut c, b"new\n");
    assert_eq!(
        o.status.code(),
        Some(5),
        "a read in the parent does not count: {}",
        text(&o)
    );
    in_dir(&env, &wt, "agent", &["read", "a.txt"], 0);
    let mut c = env.cmd_here(&["-C", wt.to_str().unwrap(), "-s", "agent", "write", "a.txt"]);
    let o = crate::common::output_with_stdin(&mut c, b"new\n");
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
}

#[test]
fn a_merge_killed_half_way_is_finished_by_the_next_command() {
    let env = Env::new();
    seed(&env);
    let wt = create(&env, "w1", &[]);
    work(
        &env,
        &wt,
        "agent",
        "echo 1 > one.txt && echo 2 > two.txt && echo 3 > a.txt",
    );
    for (point, finished) in [
        ("restore-after-journal", true),
        ("restore-after-step:2", true),
    ] {
        let o = env
            .cmd(&["-s", "S", "worktree", "merge", "w1"])
            .env("REWIND_FAILPOINT", point)
            .output()
            .unwrap();
        assert_eq!(o.status.code(), None, "{point}: killed: {}", text(&o));
        let r = json(&env, "S", &["recover"], 0);
        assert_eq!(r["restores"].as_array().unwrap().len(), 1, "{point}: {r}");
        assert_eq!(finished, read_str(env.root(), "two.txt") == "2\n");
        assert_eq!(read_str(env.root(), "a.txt"), "3\n");
        assert_eq!(read_str(env.root(), "one.txt"), "1\n");
        // Undo it for the next round: the recovered merge is an epoch like any other.
        expect(&env, "S", &["undo"], 0);
        assert_eq!(read_str(env.root(), "a.txt"), lines(10));
    }
    fsck_clean(&env);
}

#[test]
fn gc_keeps_a_worktrees_base() {
    let env = Env::new();
    seed(&env);
    let wt = create(&env, "w1", &[]);
    // Everything the base held changes here, and gc drops every checkpoint it may.
    sh(&env, "S", "echo gone > a.txt && rm keep/k.txt c.txt");
    checkpoint(&env, "S", "m1");
    sh(&env, "S", "echo again > a.txt");
    checkpoint(&env, "S", "m2");
    expect(&env, "S", &["gc", "--max-age", "0s", "--keep", "1"], 0);
    fsck_clean(&env);
    // The merge reads the base's content (a three-way merge of a.txt needs it).
    work(&env, &wt, "agent", "sed -i 's/^line 1$/ONE/' a.txt");
    let v = json(&env, "S", &["worktree", "merge", "w1", "--dry-run"], 3);
    let a = &v["conflicts"][0];
    assert_eq!(a["path"], "a.txt");
    assert!(a["unmerged"].as_str().unwrap().contains("lines"), "{a}");
}
