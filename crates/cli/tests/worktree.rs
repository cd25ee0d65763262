//! Worktrees through the real binary: create, work in the copy, merge back (dry run, clean,
//! line-merged, conflicting, forced), undo the merge, discard; two agents in two worktrees;
//! `--from`; the sandbox and the guard inside a worktree; a crash during a merge; gc keeping a
//! worktree's base; a second merge of the same worktree (its base moved by the first), and a
//! merge or a create killed at each of their own failpoints.

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
    for (point, finished, name) in [
        ("restore-after-journal", true, "w1"),
        ("restore-after-step:2", true, "w2"),
    ] {
        // A worktree per round: a merge that was finished moved its worktree's base.
        let wt = create(&env, name, &[]);
        work(
            &env,
            &wt,
            "agent",
            "echo 1 > one.txt && echo 2 > two.txt && echo 3 > a.txt",
        );
        let o = env
            .cmd(&["-s", "S", "worktree", "merge", name])
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

/// The hex tree ids of the worktrees' bases, by name, as `worktree list` shows them.
fn bases(env: &Env) -> Vec<(String, String)> {
    json(env, "S", &["worktree", "list"], 0)["worktrees"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| {
            (
                w["name"].as_str().unwrap().to_string(),
                w["base"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

/// A merge moves the worktree's base to the tree it merged: after more work there, merging
/// again applies only the new changes, three-way against what was merged (here a line the
/// parent changed after the first merge, next to one the worktree changes now, and a file the
/// parent edited that the first merge brought: neither is a conflict), and `undo` of the second
/// merge takes back only what it brought.
#[test]
fn a_second_merge_applies_only_what_changed_since_the_first() {
    let env = Env::new();
    seed(&env);
    let wt = create(&env, "w1", &[]);
    let created = bases(&env)[0].1.clone();
    work(
        &env,
        &wt,
        "agent",
        "sed -i 's/^line 3$/LINE 3/' a.txt && echo n > n.txt",
    );
    let m1 = json(&env, "S", &["worktree", "merge", "w1"], 0);
    assert_eq!(step_paths(&m1), ["a.txt", "n.txt"]);
    assert_eq!(m1["base"], created.as_str());
    let merged = m1["tree"].as_str().unwrap().to_string();
    assert_eq!(bases(&env), [("w1".to_string(), merged.clone())], "moved");
    // The parent goes on with what was merged; the worktree goes on too.
    sh(
        &env,
        "S",
        "sed -i 's/^LINE 3$/LINE 3 here/' a.txt && echo 'n here' > n.txt",
    );
    let between = read_tree(env.root());
    work(
        &env,
        &wt,
        "agent",
        "sed -i 's/^line 8$/EIGHT/' a.txt && echo m > m.txt",
    );
    let m2 = json(&env, "S", &["worktree", "merge", "w1"], 0);
    assert_eq!(m2["base"], merged.as_str(), "against what was merged");
    assert_eq!(step_paths(&m2), ["a.txt", "m.txt"], "only the new changes");
    assert_eq!(m2["merged"][0]["path"], "a.txt");
    assert_eq!(
        read_str(env.root(), "a.txt"),
        lines(10)
            .replace("line 3\n", "LINE 3 here\n")
            .replace("line 8\n", "EIGHT\n")
    );
    assert_eq!(
        read_str(env.root(), "n.txt"),
        "n here\n",
        "not merged again"
    );
    assert_eq!(read_str(env.root(), "m.txt"), "m\n");
    assert_eq!(
        bases(&env),
        [("w1".to_string(), m2["tree"].as_str().unwrap().to_string())]
    );
    // Nothing left to merge; undo takes back the second merge only.
    let again = json(&env, "S", &["worktree", "merge", "w1", "--dry-run"], 0);
    assert_eq!(step_paths(&again), Vec::<String>::new());
    expect(&env, "S", &["undo"], 0);
    assert_eq!(read_tree(env.root()), between);
    fsck_clean(&env);
    // The bases the merges recorded stay readable through gc.
    expect(&env, "S", &["gc", "--max-age", "0s", "--keep", "1"], 0);
    fsck_clean(&env);
}

/// A merge killed after it named its epoch in the worktree's record: before its journal (it
/// did not happen: the base stays, the next merge applies the changes), after its journal
/// (finished by recovery: the base moves), and after the restore, before the base was written
/// (the base moves). Each is settled by the next command.
#[test]
fn a_merge_killed_around_its_base_is_settled_by_the_next_command() {
    for (point, happened) in [
        ("worktree-merge-before-journal", false),
        ("restore-after-journal", true),
        ("worktree-merge-before-base", true),
    ] {
        let env = Env::new();
        seed(&env);
        let wt = create(&env, "w1", &[]);
        let created = bases(&env)[0].1.clone();
        work(&env, &wt, "agent", "echo n > n.txt");
        let o = env
            .cmd(&["-s", "S", "worktree", "merge", "w1"])
            .env("REWIND_FAILPOINT", point)
            .output()
            .unwrap();
        assert_eq!(o.status.code(), None, "{point}: killed: {}", text(&o));
        let list = bases(&env);
        assert_eq!(list.len(), 1, "{point}");
        assert_eq!(list[0].1 != created, happened, "{point}: {list:?}");
        assert_eq!(env.root().join("n.txt").exists(), happened, "{point}");
        let m = json(&env, "S", &["worktree", "merge", "w1"], 0);
        let want: Vec<String> = if happened {
            Vec::new()
        } else {
            vec!["n.txt".into()]
        };
        assert_eq!(step_paths(&m), want, "{point}");
        assert_eq!(read_str(env.root(), "n.txt"), "n\n");
        fsck_clean(&env);
    }
}

/// The workspaces registered in the state directory.
fn registered(env: &Env) -> usize {
    std::fs::read_dir(env.home.path().join("workspaces"))
        .unwrap()
        .flatten()
        .filter(|e| {
            let n = e.file_name();
            let n = n.to_string_lossy();
            n.len() == 32 && n.bytes().all(|b| b.is_ascii_hexdigit())
        })
        .count()
}

/// `worktree create` killed before its worktree was registered, and after, before its
/// `worktree.json`: the next `worktree list` (or `create` of the name) rolls it back (the
/// registration forgotten, the directory removed, or emptied when it was given empty with
/// `--path`), and the name can be used; killed after `worktree.json`, the create is finished.
#[test]
fn a_create_killed_half_way_is_rolled_back_or_finished_by_the_next_command() {
    let elsewhere = tempfile::tempdir().unwrap();
    for (point, given, next) in [
        ("worktree-create-after-copy", false, "list"),
        ("worktree-create-before-link", false, "create"),
        ("worktree-create-before-link", true, "list"),
        ("worktree-create-after-copy", true, "create"),
    ] {
        let env = Env::new();
        seed(&env);
        let dir = elsewhere.path().join(format!("{point}-{next}"));
        let mut args = vec!["-s", "S", "worktree", "create", "w1"];
        let dir_s = dir.to_str().unwrap().to_string();
        if given {
            std::fs::create_dir(&dir).unwrap();
            args.extend(["--path", dir_s.as_str()]);
        }
        let o = env
            .cmd(&args)
            .env("REWIND_FAILPOINT", point)
            .output()
            .unwrap();
        assert_eq!(o.status.code(), None, "{point}: killed: {}", text(&o));
        let made = if given {
            dir.clone()
        } else {
            env.home
                .path()
                .join("worktrees")
                .read_dir()
                .unwrap()
                .next()
                .unwrap()
                .unwrap()
                .path()
                .join("w1")
        };
        assert!(made.join("a.txt").exists(), "{point}: half made");
        let extra: Vec<&str> = if given {
            vec!["--path", dir_s.as_str()]
        } else {
            Vec::new()
        };
        if next == "list" {
            let list = json(&env, "S", &["worktree", "list"], 0);
            assert_eq!(list["worktrees"], serde_json::json!([]), "{point}");
            assert_eq!(registered(&env), 1, "{point}: only the parent");
            if given {
                assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0, "{point}");
            } else {
                assert!(!made.exists(), "{point}: removed");
            }
        }
        let wt = create(&env, "w1", &extra);
        assert_eq!(read_str(&wt, "a.txt"), lines(10));
        assert_eq!(registered(&env), 2, "{point}");
        work(&env, &wt, "agent", "echo more >> a.txt");
        expect(&env, "S", &["worktree", "merge", "w1"], 0);
        fsck_clean(&env);
    }
    // Killed after its record: finished.
    let env = Env::new();
    seed(&env);
    let o = env
        .cmd(&["-s", "S", "worktree", "create", "w1"])
        .env("REWIND_FAILPOINT", "worktree-create-before-done")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), None, "killed: {}", text(&o));
    let list = json(&env, "S", &["worktree", "list"], 0);
    assert_eq!(list["worktrees"][0]["name"], "w1");
    let wt = PathBuf::from(ok(&env, "S", &["worktree", "path", "w1"]));
    assert_eq!(read_str(&wt, "a.txt"), lines(10));
    let state = env.home.path().join("workspaces");
    let leftovers: Vec<_> = std::fs::read_dir(&state)
        .unwrap()
        .flatten()
        .filter(|e| e.path().join("worktree-create").join("w1.json").exists())
        .collect();
    assert!(leftovers.is_empty(), "the record of the create is gone");
}
