//! Done-when 7: SIGKILL at every failpoint of capture, settle and restore (and at random
//! moments of a restore), then any command: the workspace is at the plan's target or untouched,
//! never mixed; nothing is lost (undo and restores still reach every version); fsck is clean.

use crate::common;

use std::process::Stdio;
use std::time::Duration;

use crate::common::rewind::*;
use common::{text, Env};

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

/// `rewind --json status`.
fn status(env: &Env) -> serde_json::Value {
    let o = env.run(&["--json", "status"]);
    assert_eq!(o.status.code(), Some(0), "status: {}", text(&o));
    serde_json::from_slice(&o.stdout).unwrap()
}

/// The ids of the restores `status` lists as unfinished, and of the open epochs.
fn unfinished_and_open(env: &Env) -> (Vec<String>, Vec<String>) {
    let v = status(env);
    let ids = |a: &serde_json::Value, key: Option<&str>| -> Vec<String> {
        a.as_array()
            .unwrap_or_else(|| panic!("not a list in {v}"))
            .iter()
            .map(|x| key.map_or(x, |k| &x[k]).as_str().unwrap().to_string())
            .collect()
    };
    (
        ids(&v["unfinished_restores"], None),
        ids(&v["open_epochs"], Some("id")),
    )
}

/// After a kill inside a restore: exactly one unfinished restore, which is also an open epoch;
/// returns its id.
fn one_unfinished_restore(env: &Env, what: &str) -> String {
    let (unfinished, open) = unfinished_and_open(env);
    assert_eq!(
        unfinished.len(),
        1,
        "{what}: unfinished restores {unfinished:?}"
    );
    assert_eq!(
        open, unfinished,
        "{what}: the restore's epoch is the open one"
    );
    unfinished[0].clone()
}

fn nothing_unfinished(env: &Env, what: &str) {
    assert_eq!(
        unfinished_and_open(env),
        (vec![], vec![]),
        "{what}: unfinished restores and open epochs after recovery"
    );
}

/// The op log agrees with the tree after a recovered restore `epoch` of `s.c0` from `s.after`:
/// the epoch is settled with one change per step of the plan, and undoing it brings `after`
/// back exactly.
fn restore_epoch_agrees(s: &Scenario, epoch: &str, plan_steps: usize, what: &str) {
    let env = &s.env;
    let shown = json(env, "S", &["show", epoch], 0);
    assert_eq!(shown["state"], "settled", "{what}: {shown}");
    assert_eq!(
        shown["changes"].as_array().unwrap().len(),
        plan_steps,
        "{what}: the restore's changes are its whole plan: {shown}"
    );
    expect(env, "S", &["undo"], 0);
    assert_tree_eq(&read_tree(env.root()), &s.after, &format!("{what}: undo"));
    fsck_clean(env);
}

/// How many steps `rewind -s S restore C0` takes from `after`.
fn restore_plan_len(s: &Scenario) -> usize {
    steps(&json(&s.env, "S", &["restore", "--dry-run", &s.c0], 0)).len()
}

/// SIGKILL after the N-th step of a restore's plan (the counted failpoint), so the tree on disk
/// is truly half-way: the next command of any session finishes the restore, never leaves it
/// mixed, and the op log records the whole plan.
#[test]
fn sigkill_part_way_through_a_restore_rolls_forward() {
    let s = setup(24);
    let env = &s.env;
    let n = restore_plan_len(&s);
    assert!(n > 4, "a plan of several steps: {n}");
    for after_step in [1, n / 2, n - 1] {
        let what = format!("killed after step {after_step} of {n}");
        let point = format!("restore-after-step:{after_step}");
        killed_at(env, &point, &["-s", "S", "restore", &s.c0]);
        let epoch = one_unfinished_restore(env, &what);
        let mid = read_tree(env.root());
        assert!(
            mid != s.before && mid != s.after,
            "{what}: the kill must leave the tree half-way for this test to mean anything"
        );
        // Another session's command recovers first.
        expect(env, "T", &["exec", "--", "true"], 0);
        nothing_unfinished(env, &what);
        assert_tree_eq(&read_tree(env.root()), &s.before, &what);
        restore_epoch_agrees(&s, &epoch, n, &what);
    }
}

/// SIGKILL with restored files' new contents complete under their temporary names, before a
/// rename: a restore writes a batch of files (this plan's all) before it renames the first, so
/// at the kill before the k-th rename the files not yet renamed are there under temporary names;
/// recovery removes them and finishes.
#[test]
fn sigkill_before_a_restore_renames_a_written_file() {
    let s = setup(24);
    let env = &s.env;
    let n = restore_plan_len(&s);
    let files = steps(&json(env, "S", &["restore", "--dry-run", &s.c0], 0))
        .iter()
        .filter(|(_, _, _, after)| after.contains("\"file\"") || after.contains("\"executable\""))
        .count();
    assert!(files > 3, "a plan that writes several files: {files}");
    for nth_write in [1, 3] {
        let what = format!("killed before the rename of write {nth_write}");
        let point = format!("write-before-rename:{nth_write}");
        killed_at(env, &point, &["-s", "S", "restore", &s.c0]);
        let epoch = one_unfinished_restore(env, &what);
        let (_, temps) = without_temps(&read_tree(env.root()));
        assert_eq!(
            temps.len(),
            files - (nth_write - 1),
            "{what}: the files not renamed yet are there under temporary names at the kill"
        );
        expect(env, "T", &["exec", "--", "true"], 0);
        nothing_unfinished(env, &what);
        let (now, temps) = without_temps(&read_tree(env.root()));
        assert!(temps.is_empty(), "{what}: left in the workspace: {temps:?}");
        assert_tree_eq(&now, &s.before, &what);
        restore_epoch_agrees(&s, &epoch, n, &what);
    }
}

/// Why a kill at a random moment did or did not interrupt a restore.
#[derive(Debug, PartialEq)]
enum Landed {
    /// Before the restore's journal was committed (or in the instant after it was done):
    /// nothing to finish.
    Early,
    /// With the journal committed and not done: a restore to finish.
    Inside,
    /// After the process exited.
    Late,
}

/// Kills `rewind -s S restore C0` after `delay`, tells where the kill landed, then runs another
/// session's command (which recovers first); returns the tree and the temp files a killed
/// restore left behind.
fn kill_restore_then_recover(s: &Scenario, delay: Duration) -> (Landed, Tree, Vec<String>) {
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
    let status = child.wait().unwrap();
    let landed = if status.code().is_some() {
        Landed::Late
    } else if !unfinished_and_open(env).0.is_empty() {
        Landed::Inside
    } else {
        Landed::Early
    };
    let o = env
        .cmd(&["-s", "T", "exec", "--", "true"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let (tree, temps) = without_temps(&read_tree(env.root()));
    (landed, tree, temps)
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
/// target or untouched (temp files aside: none may be left), and every version is still
/// reachable. The kill time adapts (later after a kill that came before the journal, earlier
/// after one that came after the restore finished) so that kills land inside restores on a
/// slow or loaded machine too; the test fails unless at least one did.
#[test]
fn sigkill_at_random_moments_of_a_restore() {
    let s = setup(300);
    let env = &s.env;
    let mut delay_ms = 20u64;
    let mut inside = 0;
    let mut round = 0u64;
    // At least 10 rounds; more (bounded) until one landed inside a restore.
    while round < 10 || (inside == 0 && round < 40) {
        round += 1;
        let (landed, now, temps) =
            kill_restore_then_recover(&s, Duration::from_millis(delay_ms + (round * 7) % 20));
        assert!(
            temps.is_empty(),
            "round {round}: left in the workspace: {temps:?}"
        );
        assert!(
            now == s.before || now == s.after,
            "round {round} ({landed:?}): mixed after recovery:\n{}",
            tree_diff(&now, &s.before)
        );
        match landed {
            // Capped: a restore of 300 small files takes well under a second even here.
            Landed::Early => delay_ms = (delay_ms * 3 / 2 + 5).min(1000),
            Landed::Late => {
                delay_ms = delay_ms * 2 / 3;
                assert_tree_eq(&now, &s.before, &format!("round {round}: finished"));
            }
            Landed::Inside => {
                inside += 1;
                assert_tree_eq(&now, &s.before, &format!("round {round}: rolled forward"));
            }
        }
        fsck_clean(env);
    }
    eprintln!("{inside} of {round} kills landed inside a restore");
    assert!(
        inside > 0,
        "no kill landed inside a restore in {round} rounds (last delay {delay_ms} ms)"
    );
    // Every version is still reachable.
    expect(env, "S", &["restore", &s.c0], 0);
    assert_eq!(read_tree(env.root()), s.before, "c0 at the end");
    expect(env, "S", &["restore", &s.c1], 0);
    assert_eq!(read_tree(env.root()), s.after, "c1 at the end");
}

/// docs/cli.md: `status` lists unfinished restores and open epochs (so a crash is visible
/// before any recovering command runs), and no longer once recovered.
#[test]
fn status_reports_an_unfinished_restore() {
    let s = setup(8);
    let env = &s.env;
    killed_at(env, "restore-after-journal", &["-s", "S", "restore", &s.c0]);
    one_unfinished_restore(env, "after the kill");
    expect(env, "S", &["recover"], 0);
    nothing_unfinished(env, "after recover");
}

/// SIGKILL in the settle of an `exec` whose watcher saw nothing change: the epoch is open
/// until the next command settles it (recovered, with no changes), and the tree is untouched.
#[test]
fn sigkill_at_settle_of_an_exec_that_changed_nothing() {
    for next in NEXT {
        let s = setup(12);
        let env = &s.env;
        killed_at(
            env,
            "settle-unchanged-before-record",
            &["-s", "S", "exec", "--", "true"],
        );
        let (unfinished, open) = unfinished_and_open(env);
        assert!(unfinished.is_empty(), "{unfinished:?}");
        assert_eq!(open.len(), 1, "the exec's epoch is open: {open:?}");
        after_crash(env, next, &[&s.after]);
        expect(env, "S", &["recover"], 0);
        nothing_unfinished(env, &format!("{next:?}"));
        assert_tree_eq(&read_tree(env.root()), &s.after, &format!("{next:?}"));
        let shown = json(env, "S", &["show", &open[0]], 0);
        assert_eq!(shown["state"], "settled", "{shown}");
        assert_eq!(shown["recovered"], true, "{shown}");
        assert_eq!(shown["changes"], serde_json::json!([]), "{shown}");
        fsck_clean(env);
    }
}

/// `rewind -s S apply-patch` with `patch` on stdin, in the root, killed at `point`.
fn patch_killed_at(env: &Env, point: &str, patch: &[u8]) {
    use std::io::Write;
    let mut child = env
        .cmd(&["-s", "S", "apply-patch"])
        .current_dir(env.root())
        .env("REWIND_FAILPOINT", point)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(patch).unwrap();
    assert_eq!(
        child.wait().unwrap().code(),
        None,
        "{point}: the failpoint must kill the process"
    );
}

/// A patch that deletes b.txt and modifies a.txt and c.txt (removals are applied first).
const PATCH: &[u8] = b"diff --git a/b.txt b/b.txt\ndeleted file mode 100644\n--- a/b.txt\n+++ /dev/null\n@@ -1 +0,0 @@\n-b\n\
diff --git a/a.txt b/a.txt\n--- a/a.txt\n+++ b/a.txt\n@@ -1 +1 @@\n-a\n+A\n\
diff --git a/c.txt b/c.txt\n--- a/c.txt\n+++ b/c.txt\n@@ -1 +1 @@\n-c\n+C\n";

/// SIGKILL inside a multi-file `apply-patch`: before its file removal, and after its first and
/// second files. The patch is all or nothing against errors (rolled back), but a killed one is
/// not rolled back: recovery settles its epoch with exactly the files that were done, so the op
/// log agrees with the disk, and undoing that epoch brings every file back as before the patch.
#[test]
fn sigkill_inside_apply_patch_is_recorded_as_far_as_it_went() {
    for (point, done) in [
        ("guard-before-remove", &[][..]),
        ("guard-after-step:1", &["b.txt"][..]),
        ("guard-after-step:2", &["a.txt", "b.txt"][..]),
    ] {
        let env = Env::new();
        let root = env.root();
        for (f, c) in [("a.txt", "a\n"), ("b.txt", "b\n"), ("c.txt", "c\n")] {
            write(root, f, c.as_bytes());
        }
        init(&env);
        expect(&env, "S", &["read", "a.txt", "b.txt", "c.txt"], 0);
        let before = read_tree(root);
        patch_killed_at(&env, point, PATCH);
        let (_, open) = unfinished_and_open(&env);
        assert_eq!(open.len(), 1, "{point}: the patch's epoch is open");
        // The files done so far are as the patch makes them (b.txt gone, the others in capitals),
        // the rest untouched.
        let mut expected = before.clone();
        for f in done {
            match expected.get_mut(f.as_bytes()) {
                _ if *f == "b.txt" => drop(expected.remove(f.as_bytes())),
                Some(Node::File { data, .. }) => data.make_ascii_uppercase(),
                other => panic!("{f}: {other:?}"),
            }
        }
        assert_tree_eq(&read_tree(root), &expected, point);
        expect(&env, "T", &["exec", "--", "true"], 0);
        nothing_unfinished(&env, point);
        let shown = json(&env, "S", &["show", &open[0]], 0);
        assert_eq!(shown["recovered"], true, "{point}: {shown}");
        let mut changed: Vec<&str> = shown["changes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["path"].as_str().unwrap())
            .collect();
        changed.sort();
        assert_eq!(changed, done, "{point}: the op log records what was done");
        expect(&env, "S", &["undo", &open[0]], 0);
        assert_tree_eq(&read_tree(root), &before, &format!("{point}: undo"));
        fsck_clean(&env);
    }
}
