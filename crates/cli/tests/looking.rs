//! The "looking" commands through the real binary: `rewind log`, `rewind show`, `rewind diff`.

use crate::common;

use std::path::Path;
use std::process::Output;

use common::{last_line, text, Env};
use serde_json::Value;

/// Runs `rewind` with the workspace root as the current directory (so `--path f` and
/// `exec` work as an agent would run them).
fn run(env: &Env, args: &[&str]) -> Output {
    env.cmd(args).current_dir(env.root()).output().unwrap()
}

/// Runs and requires exit 0; returns stdout.
fn ok(env: &Env, args: &[&str]) -> String {
    let o = run(env, args);
    assert_eq!(o.status.code(), Some(0), "{args:?}: {}", text(&o));
    String::from_utf8(o.stdout).unwrap()
}

fn json(env: &Env, args: &[&str]) -> Value {
    let mut all = vec!["--json"];
    all.extend_from_slice(args);
    let out = ok(env, &all);
    serde_json::from_str(&out)
        .unwrap_or_else(|e| panic!("{args:?}: not one JSON document: {e}\n{out}"))
}

fn write(env: &Env, rel: &str, bytes: impl AsRef<[u8]>) {
    let p = env.root().join(rel);
    if let Some(d) = p.parent() {
        std::fs::create_dir_all(d).unwrap();
    }
    std::fs::write(p, bytes).unwrap();
}

/// An exact epoch around `f`, as an edit tool's hooks would record it. Returns its id.
fn exact_epoch(env: &Env, session: &str, path: &str, f: impl FnOnce(&Path)) -> String {
    let id = last_line(ok(
        env,
        &[
            "-s", session, "epoch", "begin", "--tool", "edit", "--path", path,
        ],
    ));
    f(&env.root().join(path));
    let settled = json(env, &["-s", session, "epoch", "end"]);
    assert_eq!(settled["id"], id.as_str());
    id
}

fn numbered(lines: std::ops::RangeInclusive<u32>) -> String {
    lines.map(|i| format!("line {i}\n")).collect()
}

/// Workspace with: checkpoint m1, an opaque epoch creating two files, an exact epoch editing
/// f.txt, an epoch of session `other`, and checkpoint m2 (with a payload).
struct Story {
    env: Env,
    m1: String,
    opaque: String,
    exact: String,
    other: String,
    m2: String,
}

fn story() -> Story {
    let env = Env::new();
    write(&env, "f.txt", numbered(1..=10));
    ok(&env, &["init"]);
    let m1 = last_line(ok(
        &env,
        &["checkpoint", "--message", "m1", "--label", "start"],
    ));
    ok(
        &env,
        &["exec", "--", "sh", "-c", "echo a > a.txt; echo b > b.txt"],
    );
    let opaque = json(&env, &["log", "--limit", "1"])["items"][0]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let exact = exact_epoch(&env, "default", "f.txt", |p| {
        std::fs::write(p, numbered(1..=10).replace("line 5\n", "line five\n")).unwrap()
    });
    ok(
        &env,
        &["-s", "other", "exec", "--", "sh", "-c", "echo o > o.txt"],
    );
    let other = json(&env, &["-s", "other", "log", "--limit", "1"])["items"][0]["id"]
        .as_str()
        .unwrap()
        .to_string();
    // The payload (e.g. the conversation) lives outside the workspace.
    let payload = env.home.path().join("payload.json");
    std::fs::write(&payload, b"{\"turns\": 2}").unwrap();
    let m2 = last_line(ok(
        &env,
        &[
            "checkpoint",
            "--message",
            "m2",
            "--payload-file",
            payload.to_str().unwrap(),
        ],
    ));
    Story {
        env,
        m1,
        opaque,
        exact,
        other,
        m2,
    }
}

fn ids(items: &Value) -> Vec<String> {
    items
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["id"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn log_lists_newest_first_with_counts_and_filters() {
    let s = story();
    let env = &s.env;

    // The default session: its checkpoints and epochs, newest first (external epochs, changes
    // no epoch made, would show in every session).
    let doc = json(env, &["log"]);
    assert_eq!(doc["session"], "default");
    assert_eq!(doc["more"], false);
    let items = &doc["items"];
    let mine: Vec<String> = items
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| i["kind"] != "external")
        .map(|i| i["id"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(
        mine,
        vec![
            s.m2.clone(),
            s.exact.clone(),
            s.opaque.clone(),
            s.m1.clone()
        ]
    );
    let pos: Vec<i64> = items
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["pos"].as_i64().unwrap())
        .collect();
    assert!(pos.windows(2).all(|w| w[0] > w[1]), "newest first: {pos:?}");
    let by_id = |id: &str| {
        items
            .as_array()
            .unwrap()
            .iter()
            .find(|i| i["id"] == id)
            .unwrap()
            .clone()
    };
    let op = by_id(&s.opaque);
    assert_eq!(op["type"], "epoch");
    assert_eq!(op["kind"], "opaque");
    assert_eq!(op["changes"], 2);
    assert_eq!(op["uncovered"], 0);
    assert_eq!(op["tool"], "exec");
    assert_eq!(op["message"], "m1");
    assert!(op["time"].as_str().unwrap().contains('T'));
    let ex = by_id(&s.exact);
    assert_eq!(
        (ex["kind"].as_str(), ex["changes"].as_i64()),
        (Some("exact"), Some(1))
    );
    let c1 = by_id(&s.m1);
    assert_eq!(c1["type"], "checkpoint");
    assert_eq!(c1["message"], "m1");
    assert_eq!(c1["label"], "start");
    assert_eq!(c1["root"].as_str().unwrap().len(), 64);
    assert!(
        !ids(items).contains(&s.other),
        "other sessions are filtered out"
    );

    // Every session.
    let all = json(env, &["log", "--all-sessions"]);
    assert!(all["session"].is_null());
    let all_ids = ids(&all["items"]);
    assert!(all_ids.contains(&s.other));
    assert_eq!(all_ids.len(), items.as_array().unwrap().len() + 1);

    // The other session sees its own epoch, not the default session's.
    let other = ids(&json(env, &["-s", "other", "log"])["items"]);
    assert!(other.contains(&s.other));
    assert!(!other.contains(&s.exact) && !other.contains(&s.m1));

    // The limit, with "more" telling that older entries exist.
    let lim = json(env, &["log", "--limit", "2"]);
    assert_eq!(ids(&lim["items"]), ids(items)[..2].to_vec());
    assert_eq!(lim["more"], true);

    // Human output: a header and one aligned line per entry, short ids, no colour in a pipe.
    let human = ok(env, &["log"]);
    assert!(!human.contains('\x1b'), "no colour when piped: {human}");
    let lines: Vec<&str> = human.lines().collect();
    assert_eq!(lines.len(), items.as_array().unwrap().len() + 1, "{human}");
    assert!(lines[0].starts_with("TYPE"), "{human}");
    assert!(lines[1].starts_with("checkpoint"), "{human}");
    assert!(
        lines[1].contains(&s.m2[..10]) && !lines[1].contains(&s.m2),
        "{human}"
    );
    assert!(lines[1].contains("msg=m2"), "{human}");
    let op_line = lines.iter().find(|l| l.contains(&s.opaque[..10])).unwrap();
    assert!(
        op_line.contains("opaque") && op_line.contains("tool=exec"),
        "{op_line}"
    );
    // Aligned: every line's id column starts at the same place.
    let col = lines[0].find("ID").unwrap();
    for l in &lines[1..] {
        assert_eq!(&l[col - 2..col], "  ", "{human}");
        assert_ne!(&l[col..col + 1], " ", "{human}");
    }
}

#[test]
fn show_lists_fields_and_changes_and_names_bad_ids() {
    let s = story();
    let env = &s.env;

    let out = ok(env, &["show", &s.opaque]);
    assert!(out.starts_with(&format!("epoch {}", s.opaque)), "{out}");
    assert!(out.contains("kind       opaque"), "{out}");
    assert!(out.contains("2 changed paths:"), "{out}");
    assert!(
        out.lines()
            .any(|l| l.trim_start().starts_with("create") && l.contains("a.txt")),
        "{out}"
    );
    assert!(
        out.lines()
            .any(|l| l.trim_start().starts_with("create") && l.contains("b.txt")),
        "{out}"
    );

    let doc = json(env, &["show", &s.exact[..6]]);
    assert_eq!(doc["type"], "epoch");
    assert_eq!(doc["id"], s.exact.as_str());
    assert_eq!(doc["state"], "settled");
    assert_eq!(doc["paths"], serde_json::json!(["f.txt"]));
    let ch = &doc["changes"][0];
    assert_eq!(
        (ch["action"].as_str(), ch["path"].as_str()),
        (Some("modify"), Some("f.txt"))
    );
    assert_eq!(ch["before"]["size"], 71);
    assert_eq!(ch["after"]["size"], 74);

    // A checkpoint, by message id: its fields, tree and payload size.
    let doc = json(env, &["show", "m2"]);
    assert_eq!(doc["type"], "checkpoint");
    assert_eq!(doc["id"], s.m2.as_str());
    assert_eq!(doc["parent"], "m1");
    assert_eq!(doc["payload_size"], 12);
    let out = ok(env, &["show", &s.m2]);
    assert!(
        out.contains(&format!("tree       {}", doc["root"].as_str().unwrap())),
        "{out}"
    );
    assert!(out.contains("payload    12 bytes"), "{out}");

    // Unknown: exit 1, saying what to do.
    let o = run(env, &["show", "nosuchthing"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.starts_with("rewind: ") && err.contains("nosuchthing") && err.contains("rewind log"),
        "{err}"
    );
    assert!(o.stdout.is_empty());

    // Ambiguous prefix: make two ids share a first character (17 ids always do).
    let mut seen: Vec<String> =
        ids(&json(env, &["log", "--all-sessions", "--limit", "0"])["items"]);
    let prefix = loop {
        if let Some(p) = seen
            .iter()
            .map(|i| &i[..1])
            .find(|p| seen.iter().filter(|i| i.starts_with(p)).count() > 1)
        {
            break p.to_string();
        }
        seen.push(last_line(ok(env, &["checkpoint"])));
    };
    // An ambiguous prefix is an error (1, as an unknown id), not a usage error.
    let o = run(env, &["show", &prefix]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("ambiguous") && err.contains("more characters"),
        "{err}"
    );
}

#[test]
fn diff_of_an_epoch_is_a_unified_diff() {
    let env = Env::new();
    write(&env, "f.txt", numbered(1..=10));
    write(&env, "run.sh", "echo hi\n");
    write(&env, "img.bin", [0u8, 1, 2, 3]);
    ok(&env, &["init"]);

    // A one-line edit in the middle: 3 lines of context either side.
    let e = exact_epoch(&env, "default", "f.txt", |p| {
        std::fs::write(p, numbered(1..=10).replace("line 5\n", "line five\n")).unwrap()
    });
    let out = ok(&env, &["diff", &e]);
    assert_eq!(
        out,
        "diff --git a/f.txt b/f.txt\n\
         --- a/f.txt\n\
         +++ b/f.txt\n\
         @@ -2,7 +2,7 @@\n \
         line 2\n \
         line 3\n \
         line 4\n\
         -line 5\n\
         +line five\n \
         line 6\n \
         line 7\n \
         line 8\n"
    );
    let stat = ok(&env, &["diff", &e, "--stat"]);
    assert_eq!(
        stat,
        " f.txt | +1 -1\n 1 path changed, 1 insertion(+), 1 deletion(-)\n"
    );

    // A mode change, an appended line without a final newline, a binary file and a created
    // file, in one opaque epoch.
    ok(
        &env,
        &[
            "exec",
            "--",
            "sh",
            "-c",
            "chmod +x run.sh; printf 'tail' >> f.txt; printf 'x\\000y' > img.bin; \
             mkdir -p sub; printf 'one\\ntwo\\n' > sub/new.txt",
        ],
    );
    let op = json(&env, &["log", "--limit", "1"])["items"][0]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let out = ok(&env, &["diff", &op]);
    let expected_f = "diff --git a/f.txt b/f.txt\n\
         --- a/f.txt\n\
         +++ b/f.txt\n\
         @@ -8,3 +8,4 @@\n \
         line 8\n \
         line 9\n \
         line 10\n\
         +tail\n\
         \\ No newline at end of file\n";
    assert!(out.contains(expected_f), "{out}");
    assert!(
        out.contains(
            "diff --git a/img.bin b/img.bin\nBinary files a/img.bin and b/img.bin differ (4 -> 3 bytes)\n"
        ),
        "{out}"
    );
    assert!(
        out.contains("diff --git a/run.sh b/run.sh\nold mode 100644\nnew mode 100755\n"),
        "{out}"
    );
    assert!(
        !out.contains("+++ b/run.sh"),
        "a mode change has no hunk: {out}"
    );
    assert!(
        out.contains(
            "diff --git a/sub/new.txt b/sub/new.txt\nnew file mode 100644\n--- /dev/null\n+++ b/sub/new.txt\n@@ -0,0 +1,2 @@\n+one\n+two\n"
        ),
        "{out}"
    );
    assert!(
        !out.contains("a/sub b/sub"),
        "directories are not in the patch: {out}"
    );
    assert!(!out.contains('\x1b'), "no colour when piped");

    let stat = ok(&env, &["diff", &op, "--stat"]);
    let lines: Vec<&str> = stat.lines().collect();
    assert_eq!(
        lines,
        vec![
            " f.txt       | +1 -0",
            " img.bin     | binary (4 -> 3 bytes)",
            " run.sh      | mode",
            " sub/        | dir (create)",
            " sub/new.txt | +2 -0",
            " 5 paths changed, 3 insertions(+), 0 deletions(-)",
        ],
        "{stat}"
    );

    // JSON: one document, per path, with counts and the patch text.
    let doc = json(&env, &["diff", &op]);
    assert_eq!(doc["added"], 3);
    assert_eq!(doc["removed"], 0);
    let files = doc["files"].as_array().unwrap();
    let img = files.iter().find(|f| f["path"] == "img.bin").unwrap();
    assert_eq!(img["binary"], true);
    assert_eq!(img["action"], "modify");
    let new = files.iter().find(|f| f["path"] == "sub/new.txt").unwrap();
    assert_eq!(
        (new["action"].as_str(), new["added"].as_u64()),
        (Some("create"), Some(2))
    );
    assert!(new["patch"]
        .as_str()
        .unwrap()
        .contains("+++ b/sub/new.txt\n"));
    let f = files.iter().find(|f| f["path"] == "f.txt").unwrap();
    assert_eq!(f["patch"].as_str().unwrap(), expected_f);

    // `-- PATH` limits to a path (relative to the current directory) or a directory.
    let out = ok(&env, &["diff", &op, "--", "sub"]);
    assert!(
        out.starts_with("diff --git a/sub/new.txt") && !out.contains("f.txt"),
        "{out}"
    );
    let o = env
        .cmd_here(&["diff", &op, "--stat", "--", "../f.txt"])
        .current_dir(env.root().join("sub"))
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert_eq!(
        String::from_utf8_lossy(&o.stdout),
        " f.txt | +1 -0\n 1 path changed, 1 insertion(+), 0 deletions(-)\n"
    );
}

#[test]
fn diff_of_a_checkpoint_shows_what_a_restore_would_undo() {
    let env = Env::new();
    write(&env, "f.txt", numbered(1..=5));
    write(&env, "keep.txt", "mine\n");
    write(&env, "gone.txt", "bye\n");
    ok(&env, &["init"]);
    let m1 = last_line(ok(&env, &["checkpoint", "--message", "m1"]));
    ok(
        &env,
        &[
            "exec",
            "--",
            "sh",
            "-c",
            "echo 'line 6' >> f.txt; echo new > new.txt; rm gone.txt",
        ],
    );
    // Another session's change is not the default session's to undo.
    ok(
        &env,
        &[
            "-s",
            "other",
            "exec",
            "--",
            "sh",
            "-c",
            "echo theirs > keep.txt",
        ],
    );

    let out = ok(&env, &["diff", "m1"]);
    assert_eq!(
        out,
        "diff --git a/f.txt b/f.txt\n\
         --- a/f.txt\n\
         +++ b/f.txt\n\
         @@ -3,3 +3,4 @@\n \
         line 3\n \
         line 4\n \
         line 5\n\
         +line 6\n\
         diff --git a/gone.txt b/gone.txt\n\
         deleted file mode 100644\n\
         --- a/gone.txt\n\
         +++ /dev/null\n\
         @@ -1 +0,0 @@\n\
         -bye\n\
         diff --git a/new.txt b/new.txt\n\
         new file mode 100644\n\
         --- /dev/null\n\
         +++ b/new.txt\n\
         @@ -0,0 +1 @@\n\
         +new\n"
    );
    // Nothing was written by looking.
    assert!(env.root().join("new.txt").exists());
    assert!(!env.root().join("gone.txt").exists());

    let doc = json(&env, &["diff", &m1]);
    assert_eq!(doc["from"]["what"], "checkpoint");
    assert_eq!(doc["from"]["id"], m1.as_str());
    assert_eq!(doc["to"]["what"], "now");
    assert_eq!(doc["session"], "default");
    let paths: Vec<&str> = doc["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["path"].as_str().unwrap())
        .collect();
    assert_eq!(paths, vec!["f.txt", "gone.txt", "new.txt"]);
    assert_eq!(
        (doc["added"].as_u64(), doc["removed"].as_u64()),
        (Some(2), Some(1))
    );

    let out = ok(&env, &["diff", "m1", "--", "new.txt", "gone.txt"]);
    assert!(
        !out.contains("f.txt") && out.contains("new.txt") && out.contains("gone.txt"),
        "{out}"
    );

    // The user edits f.txt after the session did: a restore would refuse it, so the diff
    // shows it (the current content) and flags the conflict on stderr.
    write(&env, "f.txt", numbered(1..=7));
    let o = run(&env, &["diff", "m1", "--stat"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let stat = String::from_utf8_lossy(&o.stdout);
    assert!(stat.contains(" f.txt    | +2 -0 (conflict)"), "{stat}");
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("conflict: f.txt"),
        "{}",
        text(&o)
    );
    write(&env, "f.txt", format!("{}line 6\n", numbered(1..=5)));

    // After the restore there is nothing left to undo.
    ok(&env, &["restore", "m1"]);
    let o = run(&env, &["diff", "m1"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(o.stdout.is_empty(), "{}", text(&o));
    assert!(String::from_utf8_lossy(&o.stderr).contains("no differences"));
    assert_eq!(
        std::fs::read_to_string(env.root().join("keep.txt")).unwrap(),
        "theirs\n"
    );
}

#[test]
fn diff_between_two_checkpoints_and_unsupported_pairs() {
    let s = story();
    let env = &s.env;
    let out = ok(env, &["diff", &s.m1, &s.m2, "--stat"]);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(
        lines,
        vec![
            " a.txt | +1 -0",
            " b.txt | +1 -0",
            " f.txt | +1 -1",
            " o.txt | +1 -0",
            " 4 paths changed, 4 insertions(+), 1 deletion(-)",
        ],
        "{out}"
    );
    let out = ok(env, &["diff", "m2", "m1", "--", "f.txt"]);
    assert!(out.contains("-line five\n+line 5\n"), "reversed: {out}");

    // Epochs pair with nothing: a clear usage error.
    let o = run(env, &["diff", &s.m1, &s.exact]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("two checkpoints") && err.contains("is an epoch"),
        "{err}"
    );
    let o = run(env, &["diff", &s.opaque, &s.other]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    let o = run(env, &["diff", "nosuch"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
}

#[test]
fn uncovered_paths_are_named_not_diffed() {
    let env = Env::new();
    write(&env, ".rewind.toml", "[capture]\nmax_file_size = \"1K\"\n");
    write(&env, "small.txt", "a\n");
    ok(&env, &["init"]);
    ok(
        &env,
        &[
            "exec",
            "--",
            "sh",
            "-c",
            "head -c 5000 /dev/zero > big.dat; echo b >> small.txt",
        ],
    );
    let log = json(&env, &["log", "--limit", "1"]);
    let e = &log["items"][0];
    assert_eq!(
        (e["changes"].as_i64(), e["uncovered"].as_i64()),
        (Some(2), Some(1))
    );
    let id = e["id"].as_str().unwrap();
    assert!(ok(&env, &["log"]).contains("2 (1 uncovered)"));

    let out = ok(&env, &["show", id]);
    // (The epoch's note, the command line, also names big.dat: look at the change lines.)
    let line = out
        .lines()
        .find(|l| l.contains("big.dat") && !l.contains("head -c"))
        .unwrap();
    assert!(
        line.trim_start().starts_with("uncovered") && line.contains("not captured"),
        "{out}"
    );
    assert!(out.contains("note: 1 path(s) were not captured"), "{out}");
    let doc = json(&env, &["show", id]);
    let big = doc["changes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["path"] == "big.dat")
        .unwrap()
        .clone();
    assert_eq!(big["uncovered"], true);

    let out = ok(&env, &["diff", id]);
    assert!(
        out.contains(
            "diff --git a/big.dat b/big.dat\nUncovered: not captured: b/big.dat (5000 bytes)\n"
        ),
        "{out}"
    );
    assert!(out.contains("+b\n"), "{out}");
}
