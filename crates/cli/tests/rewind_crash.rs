//! Done-when 7: SIGKILL at every failpoint of capture, settle and restore (and at random
//! moments of a restore), then any command: the workspace is at the plan's target or untouched,
//! never mixed; nothing is lost (undo and restores still reach every version); fsck is clean.

mod common;

mod rewind_util;

use std::process::Stdio;
use std::time::Duration;

use common::{text, Env};
use rewind_util::*;

struct Scenario {
    env: Env,
    /// Session S's checkpoint before its turn, and the tree then.
    c0: String,
    before: Tree,
    /// S's checkpoint after its turn, and the tree then.
    c1: String,
    after: Tree,
}

fn setup(files: usize) -> Scenario {
    let env = Env::new();
    let root = env.root();
    for i in 0..files {
        write(
            root,
            &format!("d{}/f{i}.txt", i % 4),
            format!("original {i}\n").as_bytes(),
        );
    }
    write(root, "other.txt", b"not S's\n");
    init(&env);
    let c0 = checkpoint(&env, "S", "m0");
    let before = read_tree(root);
    // S's turn: modify a third, delete a sixth, create some, a new directory.
    sh(
        &env,
        "S",
        &format!(
            "for i in $(seq 0 3 {n}); do [ -f d$((i % 4))/f$i.txt ] && echo changed >> d$((i % 4))/f$i.txt; done; \
             for i in $(seq 1 6 {n}); do rm -f d$((i % 4))/f$i.txt; done; \
             mkdir -p made/deep && echo m > made/deep/m.txt && echo n > d0/new.txt",
            n = files - 1
        ),
    );
    let c1 = checkpoint(&env, "S", "m1");
    let after = read_tree(root);
    assert_ne!(before, after);
    Scenario {
        env,
        c0,
        before,
        c1,
        after,
    }
}

/// Runs `rewind ARGS` with the failpoint set; it must die by SIGKILL.
fn killed_at(env: &Env, point: &str, args: &[&str]) {
    let o = env
        .cmd(args)
        .current_dir(env.root())
        .env("REWIND_FAILPOINT", point)
        .env("REWIND_QUIET", "1")
        .output()
        .unwrap();
    assert_eq!(
        o.status.code(),
        None,
        "{point}: the failpoint must kill the process: {}",
        text(&o)
    );
}

/// The commands tried first after a crash: read-only ones, then one recovering command.
const NEXT: [&[&str]; 4] = [
    &["recover"],
    &["-s", "T", "exec", "--", "true"],
    &["-s", "T", "checkpoint", "--message", "t-after-crash"],
    &["-s", "S", "undo", "--dry-run"],
];

fn after_crash(env: &Env, next: &[&str], allowed: &[&Tree]) {
    for ro in [&["status"][..], &["fsck"][..]] {
        let o = env.run(ro);
        assert_eq!(
            o.status.code(),
            Some(0),
            "{ro:?} after a crash: {}",
            text(&o)
        );
        let now = read_tree(env.root());
        assert!(
            allowed.contains(&&now),
            "{ro:?}: the workspace is mixed after the crash:\n{}",
            tree_diff(&now, allowed[0])
        );
    }
    let o = env.cmd(next).current_dir(env.root()).output().unwrap();
    assert_eq!(
        o.status.code(),
        Some(0),
        "{next:?} after a crash: {}",
        text(&o)
    );
}

#[test]
fn sigkill_at_restore_failpoints_rolls_forward_and_loses_nothing() {
    for point in ["restore-after-journal", "restore-before-done"] {
        for next in NEXT {
            let s = setup(24);
            let env = &s.env;
            killed_at(env, point, &["-s", "S", "restore", &s.c0]);
            after_crash(env, next, &[&s.after, &s.before]);
            // Recovered (every mutating command recovers first): at the plan's target.
            expect(env, "S", &["recover"], 0);
            assert_tree_eq(
                &read_tree(env.root()),
                &s.before,
                &format!("{point} then {next:?}: rolled forward"),
            );
            fsck_clean(env);
            // Nothing lost: the interrupted restore is an undoable epoch of S...
            expect(env, "S", &["undo"], 0);
            assert_tree_eq(&read_tree(env.root()), &s.after, &format!("{point}: undo"));
            // ...and both checkpoints are still reachable.
            expect(env, "S", &["restore", &s.c0], 0);
            assert_tree_eq(&read_tree(env.root()), &s.before, &format!("{point}: c0"));
            expect(env, "S", &["restore", &s.c1], 0);
            assert_tree_eq(&read_tree(env.root()), &s.after, &format!("{point}: c1"));
            fsck_clean(env);
        }
    }
}

/// The user edits a path of the plan while the restore is interrupted: recovery leaves it.
#[test]
fn recovery_never_overwrites_an_edit_made_after_the_crash() {
    let s = setup(12);
    let env = &s.env;
    killed_at(env, "restore-after-journal", &["-s", "S", "restore", &s.c0]);
    assert_tree_eq(
        &read_tree(env.root()),
        &s.after,
        "untouched before recovery",
    );
    write(
        env.root(),
        "d0/f0.txt",
        b"the user's edit after the crash\n",
    );
    write(env.root(), "made/deep/m.txt", b"user too\n");
    let o = expect(env, "S", &["--json", "recover"], 0);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["restores"].as_array().unwrap().len(), 1, "{v}");
    assert_eq!(
        read_str(env.root(), "d0/f0.txt"),
        "the user's edit after the crash\n"
    );
    assert_eq!(read_str(env.root(), "made/deep/m.txt"), "user too\n");
    let mut expected = s.before.clone();
    for (k, v) in read_tree(env.root()) {
        if k.starts_with(b"made") || k == b"d0/f0.txt" {
            expected.insert(k, v);
        }
    }
    assert_tree_eq(&read_tree(env.root()), &expected, "the rest rolled forward");
    fsck_clean(env);
}

#[test]
fn sigkill_at_capture_failpoints_keeps_attribution() {
    for point in ["capture-before-record", "capture-before-state"] {
        for next in NEXT {
            let s = setup(12);
            let env = &s.env;
            let root = env.root();
            // The user edits while nobody records; a whole-tree capture dies half-way.
            write(root, "other.txt", b"user edit\n");
            write(root, "user-new.txt", b"user's\n");
            let with_user = read_tree(root);
            killed_at(env, point, &["init"]);
            after_crash(env, next, &[&with_user]);
            // S works on; the user's edits must not be attributed to S.
            let c2 = checkpoint(env, "S", "m2");
            sh(env, "S", "echo s2 > other.txt.s && echo more >> d0/f0.txt");
            expect(env, "S", &["restore", &c2], 0);
            assert_tree_eq(
                &read_tree(root),
                &with_user,
                &format!("{point}: turn 2 undone"),
            );
            expect(env, "S", &["restore", &s.c0], 0);
            let mut expected = s.before.clone();
            expected.insert(b"other.txt".to_vec(), with_user[&b"other.txt"[..]].clone());
            expected.insert(
                b"user-new.txt".to_vec(),
                with_user[&b"user-new.txt"[..]].clone(),
            );
            assert_tree_eq(
                &read_tree(root),
                &expected,
                &format!("{point} then {next:?}"),
            );
            expect(env, "S", &["undo"], 0);
            assert_tree_eq(&read_tree(root), &with_user, &format!("{point}: undo"));
            fsck_clean(env);
        }
    }
}

#[test]
fn sigkill_at_settle_of_an_exec_attributes_the_changes_to_it() {
    for next in NEXT {
        let s = setup(12);
        let env = &s.env;
        let root = env.root();
        killed_at(
            env,
            "settle-capture-before-record",
            &[
                "-s",
                "S",
                "exec",
                "--",
                "sh",
                "-c",
                "echo x >> d1/f1.txt; rm -r made; echo y > y.txt",
            ],
        );
        let ran = read_tree(root);
        assert_eq!(read_str(root, "y.txt"), "y\n", "the command itself ran");
        after_crash(env, next, &[&ran]);
        // Another session works meanwhile; its file is not S's.
        sh(env, "T", "echo t > t.txt");
        let with_t = read_tree(root);
        expect(env, "S", &["restore", &s.c1], 0);
        let mut expected = s.after.clone();
        expected.insert(b"t.txt".to_vec(), with_t[&b"t.txt"[..]].clone());
        assert_tree_eq(
            &read_tree(root),
            &expected,
            &format!("settle then {next:?}"),
        );
        expect(env, "S", &["undo"], 0);
        assert_tree_eq(
            &read_tree(root),
            &with_t,
            "undo brings the crashed exec's changes back",
        );
        fsck_clean(env);
    }
}

#[test]
fn sigkill_at_settle_of_an_exact_epoch_keeps_it_for_the_session() {
    for next in NEXT {
        let s = setup(12);
        let env = &s.env;
        let root = env.root();
        ok(
            env,
            "S",
            &[
                "epoch",
                "begin",
                "--path",
                "d2/f2.txt",
                "--path",
                "exact-new.txt",
            ],
        );
        write(root, "d2/f2.txt", b"exact edit\n");
        write(root, "exact-new.txt", b"exact new\n");
        killed_at(
            env,
            "settle-exact-before-record",
            &["-s", "S", "epoch", "end"],
        );
        let ran = read_tree(root);
        after_crash(env, next, &[&ran]);
        // Another session's shell command must not take the exact epoch's paths.
        sh(env, "T", "echo t > t.txt");
        let with_t = read_tree(root);
        expect(env, "S", &["restore", &s.c1], 0);
        let mut expected = s.after.clone();
        expected.insert(b"t.txt".to_vec(), with_t[&b"t.txt"[..]].clone());
        assert_tree_eq(
            &read_tree(root),
            &expected,
            &format!("exact settle then {next:?}"),
        );
        expect(env, "S", &["undo"], 0);
        assert_tree_eq(
            &read_tree(root),
            &with_t,
            "undo brings the exact epoch's changes back",
        );
        fsck_clean(env);
    }
}

/// Kills `rewind -s S restore C0` after a delay, then runs another session's command (which
/// recovers first); returns the tree and the temp files a killed restore left behind.
fn kill_restore_then_recover(s: &Scenario, delay: Duration) -> (Tree, Vec<String>) {
    let env = &s.env;
    // Start each round from `after`.
    if without_temps(&read_tree(env.root())).0 != s.after {
        expect(env, "S", &["restore", &s.c1], 0);
    }
    let mut child = env
        .cmd(&["-s", "S", "restore", &s.c0])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(delay);
    let _ = child.kill();
    let _ = child.wait();
    let o = env
        .cmd(&["-s", "T", "exec", "--", "true"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    without_temps(&read_tree(env.root()))
}

/// The tree without the restore's temp files (`.rewind-tmp-*`), and their paths.
fn without_temps(t: &Tree) -> (Tree, Vec<String>) {
    let is_temp = |k: &[u8]| {
        k.rsplit(|b| *b == b'/')
            .next()
            .is_some_and(|n| n.starts_with(b".rewind-tmp-"))
    };
    let temps = t.keys().filter(|k| is_temp(k)).map(|k| show(k)).collect();
    let rest = t
        .iter()
        .filter(|(k, _)| !is_temp(k))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    (rest, temps)
}

/// SIGKILL at random moments of a large restore: after the next command the workspace is the
/// target or untouched (temp files aside, see below), and every version is still reachable.
#[test]
fn sigkill_at_random_moments_of_a_restore() {
    let s = setup(300);
    let env = &s.env;
    let mut outcomes = [0usize; 2];
    for round in 0..10u64 {
        let (now, _temps) = kill_restore_then_recover(&s, Duration::from_millis(20 + round * 25));
        if now == s.before {
            outcomes[0] += 1;
        } else if now == s.after {
            outcomes[1] += 1;
        } else {
            panic!(
                "round {round}: mixed after recovery:\n{}",
                tree_diff(&now, &s.before)
            );
        }
        fsck_clean(env);
    }
    // Every version is still reachable.
    expect(env, "S", &["restore", &s.c0], 0);
    assert_eq!(
        without_temps(&read_tree(env.root())).0,
        s.before,
        "c0 at the end"
    );
    expect(env, "S", &["restore", &s.c1], 0);
    assert_eq!(
        without_temps(&read_tree(env.root())).0,
        s.after,
        "c1 at the end"
    );
    eprintln!(
        "outcomes: rolled forward {}, untouched {}",
        outcomes[0], outcomes[1]
    );
}

/// A restore killed while writing a file leaves its temp file in the workspace; recovery must
/// remove it (it is Rewind's, not the user's), and no capture may record it as a change.
#[test]
fn no_temp_file_survives_a_killed_restore() {
    let s = setup(300);
    for round in 0..12u64 {
        let (_, temps) = kill_restore_then_recover(&s, Duration::from_millis(20 + round * 20));
        assert!(
            temps.is_empty(),
            "round {round}: left in the workspace: {temps:?}"
        );
    }
}

/// SPEC: `status` lists unfinished restores and open epochs (so a crash is visible before any
/// recovering command runs).
#[test]
fn status_reports_an_unfinished_restore() {
    let s = setup(8);
    let env = &s.env;
    killed_at(env, "restore-after-journal", &["-s", "S", "restore", &s.c0]);
    let o = expect(env, "S", &["--json", "status"], 0);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.contains("unfinished") || out.contains("journal") || out.contains("open_epochs"),
        "{out}"
    );
}
