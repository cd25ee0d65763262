//! Retention: `gc` drops what the policy says and nothing a kept checkpoint needs; collected
//! history is refused with exit 7 and no writes; pins survive any policy; a size budget is met;
//! the user's own git housekeeping never affects Rewind; orphaned workspaces are reclaimed.

use crate::common;

use std::path::Path;

use crate::common::rewind::*;
use common::{text, Env};

/// Bytes of every file under `dir`.
pub fn dir_bytes(dir: &Path) -> u64 {
    let mut total = 0;
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let m = e.metadata().unwrap();
        total += if m.is_dir() {
            dir_bytes(&e.path())
        } else {
            m.len()
        };
    }
    total
}

/// Bytes of the state of every workspace in the environment's state directory.
pub fn state_bytes(env: &Env) -> u64 {
    dir_bytes(&env.home.path().join("workspaces"))
}

/// `n` turns of session `s`: a checkpoint, then an exec that rewrites `big.bin` with 1 MiB of
/// fresh random bytes and `turn.txt` with the turn's number (the first also writes a file that
/// never changes, so the first turn's pack is mostly, not wholly, dead once that turn is
/// collected). Returns each checkpoint's id with the tree at that moment.
pub fn churn(env: &Env, s: &str, first: usize, n: usize) -> Vec<(String, Tree)> {
    let mut out = Vec::new();
    for i in first..first + n {
        let c = checkpoint(env, s, &format!("{s}-m{i}"));
        out.push((c, read_tree(env.root())));
        sh(
            env,
            s,
            &format!(
                "[ -f fixed-{s}.bin ] || head -c 300000 /dev/urandom > fixed-{s}.bin; \
                 head -c 1048576 /dev/urandom > big-{s}.bin; echo {i} > turn-{s}.txt"
            ),
        );
    }
    out
}

/// `restore --all` to each checkpoint: the workspace becomes its tree again.
pub fn restores_each(env: &Env, kept: &[(String, Tree)]) {
    for (c, tree) in kept {
        let o = run_s(env, "probe", &["restore", "--all", c]);
        assert_eq!(o.status.code(), Some(0), "restore --all {c}: {}", text(&o));
        assert_tree_eq(&read_tree(env.root()), tree, &format!("checkpoint {c}"));
    }
}

/// 1 MiB of fresh random bytes: stored as is (incompressible), so each copy kept costs 1 MiB.
pub fn random_mib() -> Vec<u8> {
    let mut big = Vec::new();
    std::io::Read::read_to_end(
        &mut std::io::Read::take(std::fs::File::open("/dev/urandom").unwrap(), 1 << 20),
        &mut big,
    )
    .unwrap();
    big
}

/// Waits (60 s at most) until the workspace's state is within `budget` bytes, as the gc a
/// checkpoint started in the background leaves it; fails if it never is.
pub fn wait_within_budget(env: &Env, budget: u64) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while state_bytes(env) > budget && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    assert!(
        state_bytes(env) <= budget,
        "no gc brought the state within its budget: {} bytes",
        state_bytes(env)
    );
}

/// The checkpoints of every session marked collected in `log`.
pub fn collected(env: &Env) -> Vec<String> {
    let v = json(env, "x", &["log", "--all-sessions", "-n", "0"], 0);
    v["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| i["type"] == "checkpoint" && !i["collected_ns"].is_null())
        .map(|i| i["id"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn aggressive_gc_keeps_every_session_head_restorable() {
    let env = Env::new();
    write(env.root(), "base.txt", b"base\n");
    init(&env);
    let s = churn(&env, "S", 0, 4);
    let t = churn(&env, "T", 0, 3);
    let s_head = (checkpoint(&env, "S", "S-end"), read_tree(env.root()));
    let t_head = (checkpoint(&env, "T", "T-end"), read_tree(env.root()));
    let v = json(&env, "S", &["gc", "--max-bytes", "1"], 0);
    assert_eq!(v["within_budget"], false, "{v}");
    let gone = collected(&env);
    for (c, _) in s.iter().chain(&t) {
        assert!(gone.contains(c), "{c} should be collected: {v}");
    }
    assert!(!gone.contains(&s_head.0) && !gone.contains(&t_head.0));
    fsck_clean(&env);
    // Both heads still restore, files and all.
    restores_each(&env, &[t_head.clone(), s_head.clone()]);
    // Each session restores to its own head (session scope): T's files go back to T's head.
    sh(&env, "T", "echo later > turn-T.txt");
    expect(&env, "T", &["restore", "T-end"], 0);
    assert_eq!(read_str(env.root(), "turn-T.txt"), "2\n");
    // A second gc finds nothing more to drop.
    let v = json(&env, "S", &["gc", "--max-bytes", "1"], 0);
    assert_eq!(v["checkpoints"].as_array().unwrap().len(), 0, "{v}");
    fsck_clean(&env);
}

#[test]
fn collected_history_is_refused_with_exit_7_and_no_writes() {
    let env = Env::new();
    write(env.root(), "a.txt", b"one\n");
    std::fs::create_dir(env.root().join("dir")).unwrap();
    write(env.root(), "dir/b.txt", b"b\n");
    init(&env);
    let old = churn(&env, "S", 0, 3);
    let epoch_before = {
        let v = json(&env, "S", &["log", "-n", "0"], 0);
        // The oldest exec of S: collected with the checkpoints before it.
        v["items"]
            .as_array()
            .unwrap()
            .iter()
            .rev()
            .find(|i| i["type"] == "epoch" && i["session"] == "S")
            .unwrap()["id"]
            .as_str()
            .unwrap()
            .to_string()
    };
    checkpoint(&env, "S", "S-end");
    expect(&env, "S", &["gc", "--max-age", "0s", "--keep", "1"], 0);
    let gone = collected(&env);
    for (c, _) in &old {
        assert!(gone.contains(c), "{c}");
    }
    tick();
    let before = read_tree_mtimes(env.root());
    for args in [
        vec!["restore", old[0].0.as_str()],
        vec!["restore", "--all", old[1].0.as_str()],
        vec!["restore", "S-m2"],
        vec!["restore", "--dry-run", old[0].0.as_str()],
        vec!["diff", old[0].0.as_str()],
        vec!["undo", epoch_before.as_str()],
        vec!["restore", epoch_before.as_str()],
        vec!["pin", old[0].0.as_str()],
    ] {
        let o = run_s(&env, "S", &args);
        assert_eq!(o.status.code(), Some(7), "{args:?}: {}", text(&o));
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            err.contains("collected by garbage collection at"),
            "{args:?} names what is gone and when: {err}"
        );
        assert_eq!(read_tree_mtimes(env.root()), before, "{args:?} wrote");
    }
    let v = json(&env, "S", &["restore", old[0].0.as_str()], 7);
    assert_eq!(v["error"]["kind"], "unavailable", "{v}");
    // `show` needs no content: it shows the checkpoint, saying it was collected.
    let o = expect(&env, "S", &["show", old[0].0.as_str()], 0);
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("collected"),
        "{}",
        text(&o)
    );
    // `log` says so; the human log too.
    let o = expect(&env, "S", &["log", "-n", "0"], 0);
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("[collected "),
        "{}",
        text(&o)
    );
    fsck_clean(&env);
}

#[test]
fn churn_then_a_size_budget_is_met_and_what_is_kept_restores() {
    let env = Env::new();
    write(env.root(), "keep.txt", b"keep\n");
    init(&env);
    let turns = churn(&env, "S", 0, 32);
    let end = (checkpoint(&env, "S", "end"), read_tree(env.root()));
    let budget: u64 = 8 << 20;
    assert!(state_bytes(&env) > 4 * budget, "{}", state_bytes(&env));
    // The dry run reports and writes nothing.
    let files_before = state_bytes(&env);
    let dry = json(&env, "S", &["gc", "--dry-run", "--max-bytes", "8M"], 0);
    assert_eq!(dry["dry_run"], true);
    assert!(dry["bytes_freed"].as_u64().unwrap() > 16 << 20, "{dry}");
    assert!(collected(&env).is_empty());
    assert_eq!(state_bytes(&env), files_before);
    let v = json(&env, "S", &["gc", "--max-bytes", "8M"], 0);
    assert_eq!(v["within_budget"], true, "{v}");
    assert_eq!(
        v["checkpoints"], dry["checkpoints"],
        "the dry run said what goes"
    );
    let after = state_bytes(&env);
    // Metadata slack: the op log and index may round up past the estimate a little.
    assert!(after <= budget + (256 << 10), "{after} bytes after gc");
    let gone = collected(&env);
    let kept: Vec<(String, Tree)> = turns
        .into_iter()
        .filter(|(c, _)| !gone.contains(c))
        .chain([end])
        .collect();
    assert!(kept.len() >= 3, "kept {}", kept.len());
    fsck_clean(&env);
    expect(&env, "S", &["status"], 0);
    restores_each(&env, &kept);
}

type Turns = Vec<(String, Tree)>;

/// Sessions S and T interleaved: three turns each, then (three seconds later) four more each
/// and a head. Returns both sessions' checkpoints and the ids of the first three of each.
fn old_and_new_turns(env: &Env) -> (Turns, Turns, Vec<String>) {
    write(env.root(), "base.txt", b"base\n");
    init(env);
    let mut s_turns = Vec::new();
    let mut t_turns = Vec::new();
    for i in 0..3 {
        s_turns.extend(churn(env, "S", i, 1));
        t_turns.extend(churn(env, "T", i, 1));
    }
    let old: Vec<String> = s_turns
        .iter()
        .chain(&t_turns)
        .map(|c| c.0.clone())
        .collect();
    // Older than a 2 s age by at least a second.
    std::thread::sleep(std::time::Duration::from_secs(3));
    for i in 3..7 {
        s_turns.extend(churn(env, "S", i, 1));
        t_turns.extend(churn(env, "T", i, 1));
    }
    s_turns.push((checkpoint(env, "S", "S-end"), read_tree(env.root())));
    t_turns.push((checkpoint(env, "T", "T-end"), read_tree(env.root())));
    (s_turns, t_turns, old)
}

/// fsck is clean and every checkpoint not collected restores, session scope (oldest first:
/// only the session's own files go back) and whole tree. Returns the collected ones.
fn kept_ones_restore(
    env: &Env,
    s_turns: &[(String, Tree)],
    t_turns: &[(String, Tree)],
) -> Vec<String> {
    fsck_clean(env);
    let gone = collected(env);
    let kept = |turns: &[(String, Tree)]| -> Turns {
        turns
            .iter()
            .filter(|(c, _)| !gone.contains(c))
            .cloned()
            .collect()
    };
    let (s_kept, t_kept) = (kept(s_turns), kept(t_turns));
    assert!(
        s_kept.len() >= 2 && t_kept.len() >= 2,
        "kept {s_kept:?}, {t_kept:?}"
    );
    for (s, turns) in [("S", &s_kept), ("T", &t_kept)] {
        for (c, tree) in turns.iter() {
            let o = run_s(env, s, &["restore", c]);
            assert_eq!(o.status.code(), Some(0), "restore {c}: {}", text(&o));
            let now = read_tree(env.root());
            for f in [format!("big-{s}.bin"), format!("turn-{s}.txt")] {
                let f = f.into_bytes();
                assert_eq!(now.get(&f), tree.get(&f), "{s} restored to {c}");
            }
        }
    }
    restores_each(env, &s_kept);
    restores_each(env, &t_kept);
    gone
}

/// gc leaves out of its mark what only the checkpoints the age drops need, and reads a
/// session's change rows only from the oldest checkpoint the age keeps: with two sessions
/// interleaved, every checkpoint the age keeps still restores.
#[test]
fn the_age_drops_the_old_and_every_kept_checkpoint_restores() {
    let env = Env::new();
    let (s_turns, t_turns, mut old) = old_and_new_turns(&env);
    let v = json(&env, "S", &["gc", "--max-age", "2s"], 0);
    let mut gone = kept_ones_restore(&env, &s_turns, &t_turns);
    gone.sort();
    old.sort();
    assert_eq!(gone, old, "exactly the old ones go: {v}");
}

/// The same, with a budget that drops newer checkpoints after the age's.
#[test]
fn age_then_budget_keeps_what_every_kept_checkpoint_reads() {
    let env = Env::new();
    let (s_turns, t_turns, old) = old_and_new_turns(&env);
    // About three 1 MiB turns under what the age alone leaves.
    let age = json(&env, "S", &["gc", "--dry-run", "--max-age", "2s"], 0);
    let budget = (age["state_bytes_after"].as_u64().unwrap() - (5 << 19)).to_string();
    let v = json(
        &env,
        "S",
        &["gc", "--max-age", "2s", "--max-bytes", &budget],
        0,
    );
    assert_eq!(v["within_budget"], true, "{v}");
    let gone = kept_ones_restore(&env, &s_turns, &t_turns);
    assert!(old.iter().all(|c| gone.contains(c)), "{v}");
    assert!(gone.len() > old.len(), "the budget dropped newer ones: {v}");
}

#[test]
fn pinned_checkpoints_survive_any_policy() {
    let env = Env::new();
    write(env.root(), "x.txt", b"x\n");
    init(&env);
    let turns = churn(&env, "S", 0, 4);
    let v = json(&env, "S", &["pin", "S-m1"], 0);
    assert_eq!(v["pinned"], true);
    assert_eq!(v["id"], turns[1].0.as_str());
    checkpoint(&env, "S", "end");
    expect(
        &env,
        "S",
        &["gc", "--max-bytes", "1", "--max-age", "0s", "--keep", "0"],
        0,
    );
    let gone = collected(&env);
    assert!(!gone.contains(&turns[1].0), "pinned, kept");
    assert!(gone.contains(&turns[0].0) && gone.contains(&turns[2].0));
    fsck_clean(&env);
    restores_each(&env, &turns[1..2]);
    // A session restore to the pinned checkpoint still has every epoch it undoes.
    let o = expect(&env, "S", &["restore", "S-m1", "--dry-run"], 0);
    assert!(!o.stdout.is_empty());
    // Unpinned, the next gc drops it.
    let v = json(&env, "S", &["unpin", "S-m1"], 0);
    assert_eq!(v["pinned"], false);
    expect(&env, "S", &["gc", "--max-bytes", "1"], 0);
    assert!(collected(&env).contains(&turns[1].0));
    fsck_clean(&env);
}

#[test]
fn config_retention_is_the_default_policy() {
    let env = Env::new();
    write(env.root(), "x.txt", b"x\n");
    init(&env);
    let turns = churn(&env, "S", 0, 5);
    checkpoint(&env, "S", "end");
    write(
        env.root(),
        ".rewind.toml",
        b"[retention]\nkeep = 2\nmax_age = \"0s\"\n",
    );
    let v = json(&env, "S", &["gc"], 0);
    // keep 2: the head ("end") and S-m4; the rest is older than 0s.
    let gone = collected(&env);
    for (c, _) in &turns[..4] {
        assert!(gone.contains(c), "{c}: {v}");
    }
    assert!(!gone.contains(&turns[4].0), "{v}");
}

#[test]
fn the_users_git_housekeeping_never_affects_rewind() {
    let env = Env::new();
    let root = env.root();
    let git = |args: &[&str]| {
        let o = std::process::Command::new("git")
            .args([
                "-c",
                "user.name=t",
                "-c",
                "user.email=t@t",
                "-c",
                "gc.auto=0",
            ])
            .args(args)
            .current_dir(root)
            .output()
            .unwrap();
        assert!(o.status.success(), "git {args:?}: {}", text(&o));
    };
    git(&["init", "-q"]);
    write(root, "src.txt", b"v0\n");
    git(&["add", "."]);
    git(&["commit", "-qm", "zero"]);
    init(&env);
    let turns = churn(&env, "S", 0, 3);
    git(&["add", "."]);
    git(&["commit", "-qm", "one"]);
    // History rewrites and an aggressive prune in the user's repository.
    git(&["commit", "-q", "--amend", "-m", "rewritten"]);
    git(&["reset", "-q", "--hard", "HEAD~1"]);
    git(&["reflog", "expire", "--expire=now", "--all"]);
    git(&["gc", "-q", "--prune=now"]);
    let end = (checkpoint(&env, "S", "end"), read_tree(root));
    expect(&env, "S", &["gc"], 0);
    fsck_clean(&env);
    assert!(collected(&env).is_empty(), "no policy: nothing dropped");
    let mut all = turns;
    all.push(end);
    for (c, tree) in &all {
        expect(&env, "probe", &["restore", "--all", c], 0);
        // The user's .git is not Rewind's: compare the rest.
        let now: Tree = read_tree(root)
            .into_iter()
            .filter(|(p, _)| !p.starts_with(b".git"))
            .collect();
        let want: Tree = tree
            .clone()
            .into_iter()
            .filter(|(p, _)| !p.starts_with(b".git"))
            .collect();
        assert_tree_eq(&now, &want, c);
    }
}

#[test]
fn orphaned_workspaces_are_listed_and_reclaimed() {
    let env = Env::new();
    write(env.root(), "live.txt", b"live\n");
    init(&env);
    let live = churn(&env, "S", 0, 2);
    // Another workspace in the same state directory, then its root is deleted.
    let gone_root = tempfile::tempdir().unwrap();
    std::fs::write(gone_root.path().join("f.txt"), b"f\n").unwrap();
    let o = env
        .cmd_here(&["init"])
        .current_dir(gone_root.path())
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let v = json(&env, "S", &["status"], 0);
    assert_eq!(v["orphans"].as_array().unwrap().len(), 0, "{v}");
    let gone_path = gone_root.path().to_path_buf();
    drop(gone_root);
    assert!(!gone_path.exists());
    let v = json(&env, "S", &["status"], 0);
    let orphans = v["orphans"].as_array().unwrap();
    assert_eq!(orphans.len(), 1, "{v}");
    let dir = env
        .home
        .path()
        .join("workspaces")
        .join(orphans[0]["id"].as_str().unwrap());
    assert!(dir.is_dir());
    // Not idle long enough for a 1h age; no age at all: never.
    expect(&env, "S", &["gc"], 0);
    expect(&env, "S", &["gc", "--max-age", "1h", "--keep", "100"], 0);
    assert!(dir.is_dir());
    std::thread::sleep(std::time::Duration::from_millis(1100));
    let v = json(&env, "S", &["gc", "--max-age", "1s", "--keep", "100"], 0);
    assert_eq!(v["orphans_removed"].as_array().unwrap().len(), 1, "{v}");
    assert!(!dir.exists(), "its state is gone");
    let v = json(&env, "S", &["status"], 0);
    assert_eq!(v["orphans"].as_array().unwrap().len(), 0, "{v}");
    // The live workspace is untouched and restores.
    assert!(collected(&env).is_empty());
    fsck_clean(&env);
    restores_each(&env, &live);
}

#[test]
fn a_checkpoint_over_the_budget_starts_one_gc_in_the_background() {
    let env = Env::new();
    write(env.root(), "x.txt", b"x\n");
    init(&env);
    write(
        env.root(),
        ".rewind.toml",
        b"[retention]\nmax_bytes = \"3M\"\n",
    );
    let turns = churn(&env, "S", 0, 6);
    checkpoint(&env, "S", "end");
    // The gc the checkpoints started finishes on its own; wait for it (bounded).
    wait_within_budget(&env, (3 << 20) + (256 << 10));
    // The lock of a running gc is gone once it is done: a manual gc then waits for nothing.
    let v = json(&env, "S", &["gc", "--auto"], 0);
    assert_eq!(v["skipped"], true, "within budget now: {v}");
    let gone = collected(&env);
    assert!(gone.contains(&turns[0].0), "the oldest went: {gone:?}");
    fsck_clean(&env);
    let kept: Vec<(String, Tree)> = turns
        .into_iter()
        .filter(|(c, _)| !gone.contains(c))
        .collect();
    restores_each(&env, &kept);
}

#[test]
fn all_workspaces_collects_the_others_too() {
    let env = Env::new();
    write(env.root(), "x.txt", b"x\n");
    init(&env);
    let other = tempfile::tempdir().unwrap();
    std::fs::write(other.path().join("o.txt"), b"o\n").unwrap();
    let run_other = |args: &[&str]| {
        let o = env
            .cmd_here(args)
            .current_dir(other.path())
            .env("REWIND_QUIET", "1")
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(0), "{args:?}: {}", text(&o));
    };
    run_other(&["init"]);
    for i in 0..3 {
        run_other(&["-s", "O", "checkpoint", "--message", &format!("o{i}")]);
        run_other(&[
            "-s",
            "O",
            "exec",
            "--",
            "sh",
            "-c",
            "head -c 200000 /dev/urandom > o.bin",
        ]);
    }
    run_other(&["-s", "O", "checkpoint", "--message", "o-end"]);
    let v = json(&env, "S", &["gc", "--all-workspaces", "--max-age", "0s"], 0);
    let others = v["workspaces"].as_array().unwrap();
    assert_eq!(others.len(), 1, "{v}");
    let r = &others[0]["report"];
    assert_eq!(r["checkpoints"].as_array().unwrap().len(), 3, "{v}");
    assert!(r["bytes_freed"].as_u64().unwrap() > 400_000, "{v}");
}

#[test]
fn reads_before_a_collected_checkpoint_must_be_made_again() {
    let env = Env::new();
    write(env.root(), "a.txt", b"a\n");
    write(env.root(), "b.txt", b"b\n");
    init(&env);
    expect(&env, "S", &["read", "a.txt"], 0);
    let turns = churn(&env, "S", 0, 2);
    expect(&env, "S", &["read", "b.txt"], 0);
    checkpoint(&env, "S", "end");
    expect(&env, "S", &["check-write", "a.txt", "b.txt"], 0);
    expect(&env, "S", &["gc", "--max-age", "0s", "--keep", "1"], 0);
    assert!(collected(&env).contains(&turns[0].0));
    // The read of a.txt came before a collected checkpoint: the guard asks for it again; the
    // read of b.txt came after every collected one and still counts.
    let v = json(&env, "S", &["check-write", "a.txt"], 5);
    assert_eq!(v[0]["refusal"]["kind"], "never_read", "{v}");
    expect(&env, "S", &["check-write", "b.txt"], 0);
}

/// A directory of more than 4,096 entries is stored as a fan-out of parts, most of which a
/// later tree shares with the first capture's pack. Collecting every older checkpoint keeps
/// exactly what the kept ones read through their fan-outs: they restore, and fsck is clean.
#[test]
fn a_huge_directorys_shared_parts_outlive_the_checkpoints_that_wrote_them() {
    let env = Env::new();
    for i in 0..4200 {
        write(
            env.root(),
            &format!("many/f{i:04}"),
            format!("{i}\n").as_bytes(),
        );
    }
    init(&env);
    let mut old = Vec::new();
    for turn in 0..4 {
        old.push(checkpoint(&env, "S", &format!("m{turn}")));
        sh(
            &env,
            "S",
            &format!(
                "echo {turn} >> many/f{:04} && head -c 300000 /dev/urandom > big.bin",
                turn * 1000
            ),
        );
    }
    let head = (checkpoint(&env, "S", "end"), read_tree(env.root()));
    let v = json(&env, "S", &["gc", "--max-bytes", "1"], 0);
    let gone = collected(&env);
    for c in &old {
        assert!(gone.contains(c), "{c} should be collected: {v}");
    }
    fsck_clean(&env);
    sh(&env, "S", "rm -r many && echo later > big.bin");
    restores_each(&env, &[head]);
    fsck_clean(&env);
}
