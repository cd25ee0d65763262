//! Overlapping exact epochs of two sessions, through the real binary. An exact epoch's "before"
//! of a path is what the op log says the path held when this epoch's change was made, not what
//! it held when the epoch began: another writer who changed the path in between (a guarded
//! write, another exact epoch) keeps its change when this epoch is rewound, and gets it back
//! when its own is.

use crate::common;

use crate::common::rewind::*;
use common::{text, Env};

/// `rewind -s S write PATH` with `data` on stdin (a guarded write: read first).
fn guarded_write(env: &Env, session: &str, rel: &str, data: &[u8]) {
    expect(env, session, &["read", rel], 0);
    let mut c = env.cmd(&["-s", session, "write", rel]);
    c.current_dir(env.root());
    let o = common::output_with_stdin(&mut c, data);
    assert_eq!(o.status.code(), Some(0), "write {rel}: {}", text(&o));
}

fn begin(env: &Env, session: &str, rel: &str) -> String {
    ok(
        env,
        session,
        &["epoch", "begin", "--tool", "edit", "--path", rel],
    )
}

fn end(env: &Env, session: &str, id: &str) {
    expect(env, session, &["epoch", "end", id], 0);
}

/// The (before, after) contents an epoch recorded for `rel`, from `show --json`.
fn recorded(env: &Env, id: &str) -> Vec<serde_json::Value> {
    let v = json(env, "A", &["show", id], 0);
    v["changes"].as_array().cloned().unwrap_or_default()
}

fn setup() -> (Env, String, String) {
    let env = Env::new();
    write(env.root(), "a.txt", b"a0\n");
    init(&env);
    let a0 = checkpoint(&env, "A", "a-m0");
    let b0 = checkpoint(&env, "B", "b-m0");
    (env, a0, b0)
}

/// B opens an exact epoch on a.txt; while it is open, A makes a guarded write of a.txt; then
/// B's tool writes and B ends. Rewinding B puts back A's write, not a0; rewinding A then a0.
#[test]
fn a_guarded_write_inside_anothers_open_exact_epoch_survives_its_rewind() {
    let (env, a0, b0) = setup();
    let root = env.root();
    let b = begin(&env, "B", "a.txt");
    guarded_write(&env, "A", "a.txt", b"A1\n");
    write(root, "a.txt", b"B1\n");
    end(&env, "B", &b);
    assert_eq!(recorded(&env, &b).len(), 1, "{:?}", recorded(&env, &b));

    expect(&env, "B", &["restore", &b0], 0);
    assert_eq!(
        read_str(root, "a.txt"),
        "A1\n",
        "B's rewind keeps A's write"
    );
    expect(&env, "A", &["restore", &a0], 0);
    assert_eq!(read_str(root, "a.txt"), "a0\n");
    fsck_clean(&env);
}

/// The other begin order, with A's write inside an exact epoch of its own: A begins, B begins,
/// A writes and ends, B writes and ends.
#[test]
fn two_exact_epochs_on_one_path_in_either_order() {
    for a_first in [true, false] {
        let (env, a0, b0) = setup();
        let root = env.root();
        let (a, b) = if a_first {
            let a = begin(&env, "A", "a.txt");
            (a, begin(&env, "B", "a.txt"))
        } else {
            let b = begin(&env, "B", "a.txt");
            (begin(&env, "A", "a.txt"), b)
        };
        write(root, "a.txt", b"A1\n");
        end(&env, "A", &a);
        write(root, "a.txt", b"B1\n");
        end(&env, "B", &b);

        // Rewinding B alone: A's write comes back.
        let dry = json(&env, "B", &["restore", &b0, "--dry-run"], 0);
        assert!(dry["conflicts"].as_array().unwrap().is_empty(), "{dry}");
        expect(&env, "B", &["restore", &b0], 0);
        assert_eq!(read_str(root, "a.txt"), "A1\n", "a_first={a_first}");
        expect(&env, "A", &["restore", &a0], 0);
        assert_eq!(read_str(root, "a.txt"), "a0\n", "a_first={a_first}");
        fsck_clean(&env);
    }
}

/// B's tool never writes the path it declared; A writes it while B's epoch is open. B's epoch
/// recorded nothing of A's, so rewinding B leaves A's write alone.
#[test]
fn an_exact_epoch_does_not_take_anothers_write_as_its_own() {
    let (env, a0, b0) = setup();
    let root = env.root();
    let b = begin(&env, "B", "a.txt");
    guarded_write(&env, "A", "a.txt", b"A1\n");
    end(&env, "B", &b);
    assert!(recorded(&env, &b).is_empty(), "{:?}", recorded(&env, &b));
    expect(&env, "B", &["restore", &b0], 0);
    assert_eq!(read_str(root, "a.txt"), "A1\n");
    expect(&env, "A", &["restore", &a0], 0);
    assert_eq!(read_str(root, "a.txt"), "a0\n");
}

/// B writes first, inside its open epoch; A reads what B wrote and overwrites it; B ends.
/// A's write was last: rewinding B leaves it; rewinding A brings back what A overwrote.
#[test]
fn a_write_over_an_open_epochs_write_comes_back_as_it_was() {
    let (env, a0, b0) = setup();
    let root = env.root();
    let b = begin(&env, "B", "a.txt");
    write(root, "a.txt", b"B1\n");
    guarded_write(&env, "A", "a.txt", b"A1\n");
    end(&env, "B", &b);
    expect(&env, "B", &["restore", &b0], 0);
    assert_eq!(read_str(root, "a.txt"), "A1\n");
    expect(&env, "A", &["restore", &a0], 0);
    assert_eq!(
        read_str(root, "a.txt"),
        "B1\n",
        "what A overwrote comes back"
    );
    let o = run_s(&env, "A", &["status"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
}

// ---- dry runs that say exactly what the real run does (issue 28 item 3)

/// The steps of a restore/undo report as (action, path).
fn actions(v: &serde_json::Value) -> Vec<(String, String)> {
    steps(v).into_iter().map(|(a, p, _, _)| (a, p)).collect()
}

fn kept(v: &serde_json::Value) -> Vec<String> {
    v["kept"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| k["path"].as_str().unwrap().to_string())
        .collect()
}

/// `undo EPOCH --dry-run` on the session's still-open epoch previews what the real `undo EPOCH`
/// does (it settles the epoch, then undoes it): same steps, same exit code.
#[test]
fn undo_dry_run_of_an_open_epoch_matches_the_real_undo() {
    let (env, _, _) = setup();
    let root = env.root();
    let e = begin(&env, "A", "a.txt");
    write(root, "a.txt", b"A1\n");
    let dry = json(&env, "A", &["undo", &e, "--dry-run"], 0);
    assert_eq!(read_str(root, "a.txt"), "A1\n", "a dry run writes nothing");
    let real = json(&env, "A", &["undo", &e], 0);
    assert_eq!(actions(&dry), actions(&real));
    assert_eq!(
        actions(&real),
        [("modify".to_string(), "a.txt".to_string())]
    );
    assert_eq!(read_str(root, "a.txt"), "a0\n");
}

/// A directory the session created, into which another session has since put a file: the
/// restore keeps the directory, and the dry run, the real run's report (text and `--json`)
/// and the restore epoch's record all say so, none of them "delete d".
#[test]
fn a_directory_another_session_filled_is_kept_and_every_report_says_so() {
    let (env, a0, _) = setup();
    let root = env.root();
    sh(&env, "A", "mkdir d && echo a > d/a.txt");
    sh(&env, "B", "echo b > d/b.txt");

    let dry = json(&env, "A", &["restore", &a0, "--dry-run"], 0);
    let want = [("delete".to_string(), "d/a.txt".to_string())];
    assert_eq!(actions(&dry), want, "{dry}");
    assert_eq!(kept(&dry), ["d"], "{dry}");

    let o = run_s(&env, "A", &["restore", &a0, "--dry-run"]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(!out.contains("delete   d\n"), "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("d: directory kept"),
        "{}",
        text(&o)
    );

    let real = json(&env, "A", &["restore", &a0], 0);
    assert_eq!(actions(&real), want, "{real}");
    assert_eq!(kept(&real), ["d"], "{real}");
    assert_eq!(read_str(root, "d/b.txt"), "b\n");
    assert!(!root.join("d/a.txt").exists());

    let id = real["epoch"].as_str().unwrap();
    let shown = json(&env, "A", &["show", id], 0);
    let recorded: Vec<&str> = shown["changes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["path"].as_str().unwrap())
        .collect();
    assert_eq!(recorded, ["d/a.txt"], "{shown}");
    // And undoing the restore brings back exactly what it removed.
    expect(&env, "A", &["undo"], 0);
    assert_eq!(read_str(root, "d/a.txt"), "a\n");
    assert_eq!(read_str(root, "d/b.txt"), "b\n");
}

/// Session A's command creates `f.txt` empty, and before it writes the content, session B's
/// checkpoint captures the tree: the empty file is attributed to A's running command. When A's
/// command ends, its epoch's one change for `f.txt` must still start from "absent" (not from the
/// empty file B's capture saw), so rewinding A deletes the file instead of leaving it empty.
#[test]
fn a_capture_in_the_middle_of_a_command_does_not_change_where_its_change_starts() {
    let (env, a0, _) = setup();
    let root = env.root();
    let gates = common::Gates::new(&["go"]);
    let script = format!(
        "printf '' > f.txt; touch '{}'; cat '{}' > /dev/null; echo new > f.txt",
        gates.path("paused").display(),
        gates.path("go").display()
    );
    let mut a = env
        .cmd(&["-s", "A", "exec", "--", "sh", "-c", &script])
        .current_dir(root)
        .spawn()
        .unwrap();
    gates.wait_for("paused");
    checkpoint(&env, "B", "b-mid");
    gates.open("go");
    assert!(a.wait().unwrap().success());
    assert_eq!(read_str(root, "f.txt"), "new\n");
    expect(&env, "A", &["restore", &a0], 0);
    assert!(
        !root.join("f.txt").exists(),
        "A's command created it: rewinding A removes it"
    );
}

/// What `epoch end` answers is what the op log holds for the epoch, when another session's
/// checkpoint attributed part of the command's work to it half-way: a path the command did
/// not touch again keeps that row, one it changed again is merged from its first state, and
/// one it put back as it was has no change (the settle answers without reading the rows back).
#[test]
fn the_settle_answers_what_the_op_log_holds_after_a_capture_half_way() {
    let env = Env::new();
    let root = env.root();
    write(root, "both.txt", b"x\n");
    write(root, "back.txt", b"b0\n");
    write(root, "keep.txt", b"k0\n");
    init(&env);
    checkpoint(&env, "A", "a0");
    let id = ok(&env, "A", &["epoch", "begin"]);
    write(root, "new.txt", b"n1\n");
    write(root, "both.txt", b"x1\n");
    write(root, "back.txt", b"b1\n");
    checkpoint(&env, "B", "b-mid");
    write(root, "both.txt", b"x22\n");
    write(root, "back.txt", b"b0\n");
    write(root, "late.txt", b"l\n");
    let answered = json(&env, "A", &["epoch", "end", &id], 0);
    let answered = answered["changes"].as_array().cloned().unwrap_or_default();
    let paths: Vec<&str> = answered
        .iter()
        .map(|c| c["path"].as_str().unwrap())
        .collect();
    assert_eq!(paths, ["both.txt", "late.txt", "new.txt"], "{answered:?}");
    assert_eq!(
        answered[0]["before"]["size"], 2,
        "from the first state: {answered:?}"
    );
    assert_eq!(answered[0]["after"]["size"], 4, "to the last: {answered:?}");
    // `show` reads the rows; it adds two fields of its own.
    let mut stored = recorded(&env, &id);
    for c in &mut stored {
        let c = c.as_object_mut().unwrap();
        c.remove("uncovered");
        c.remove("pending");
    }
    assert_eq!(answered, stored);
}
