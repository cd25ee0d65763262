//! `rewind serve` from separate processes, over its standard streams and over its socket,
//! with a small JSON-RPC client written here: every operation is a method, a whole session's
//! work (read, write, edit, patch, exec, checkpoint, restore, undo) gives the documents the
//! command line gives, bad input gets the specification's errors and the server goes on,
//! subscribers see what other clients did, a second server and a foreign uid are refused,
//! and SIGTERM stops it cleanly.

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::{json, Value};

use crate::common::rewind::*;
use crate::common::{text, Env};

/// One JSON-RPC connection: requests out, lines in.
struct Client {
    out: Box<dyn Write>,
    lines: BufReader<Box<dyn Read>>,
    next: u64,
}

impl Client {
    fn socket(path: &Path) -> Client {
        let s = UnixStream::connect(path).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
        Client {
            out: Box::new(s.try_clone().unwrap()),
            lines: BufReader::new(Box::new(s)),
            next: 1,
        }
    }

    fn stdio(child: &mut Child) -> Client {
        Client {
            out: Box::new(child.stdin.take().unwrap()),
            lines: BufReader::new(Box::new(child.stdout.take().unwrap())),
            next: 1,
        }
    }

    fn send_line(&mut self, line: &[u8]) {
        self.out.write_all(line).unwrap();
        self.out.write_all(b"\n").unwrap();
        self.out.flush().unwrap();
    }

    /// The next line the server sends.
    fn recv(&mut self) -> Value {
        let mut line = String::new();
        let n = self.lines.read_line(&mut line).unwrap();
        assert!(n > 0, "the server closed the connection");
        serde_json::from_str(&line).unwrap()
    }

    /// The whole response to a request of `method` (notifications before it are skipped).
    fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.next;
        self.next += 1;
        let req = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        self.send_line(req.to_string().as_bytes());
        loop {
            let v = self.recv();
            if v.get("id") == Some(&json!(id)) {
                return v;
            }
            assert!(v.get("method").is_some(), "not a notification: {v}");
        }
    }

    /// The result of a call that must succeed.
    fn call(&mut self, method: &str, params: Value) -> Value {
        let v = self.request(method, params);
        assert!(v.get("error").is_none(), "{method}: {v}");
        v["result"].clone()
    }

    /// The error of a call that must fail.
    fn fail(&mut self, method: &str, params: Value) -> Value {
        let v = self.request(method, params);
        assert!(v.get("result").is_none(), "{method} should fail: {v}");
        v["error"].clone()
    }
}

fn serve_stdio(env: &Env) -> Child {
    env.cmd(&["serve", "--stdio"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// A server on a socket, and the path it printed once it listens.
fn serve_socket(env: &Env, extra: &[&str]) -> (Child, PathBuf) {
    let mut args = vec!["serve"];
    args.extend(extra);
    let mut child = env
        .cmd(&args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    BufReader::new(child.stdout.as_mut().unwrap())
        .read_line(&mut first)
        .unwrap();
    assert!(!first.is_empty(), "the server printed no socket path");
    (child, PathBuf::from(first.trim_end()))
}

fn stop(mut child: Child) -> std::process::Output {
    // SAFETY: kill(2) on our own child's pid.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let _ = child.stdin.take();
    child.wait_with_output().unwrap()
}

/// Every operation of the API is a method: with no params each answers with a result or an
/// error of its own, never "method not found".
#[test]
fn every_operation_is_a_method() {
    let env = Env::new();
    write(env.root(), "a.txt", b"a\n");
    init(&env);
    let mut server = serve_stdio(&env);
    let mut c = Client::stdio(&mut server);
    for op in rewind_api::OPERATIONS {
        let v = c.request(op.method, json!({}));
        if let Some(e) = v.get("error") {
            assert_ne!(e["code"], json!(-32601), "{}: {v}", op.method);
        }
    }
    drop(c);
    let out = server.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "stdin closed: a clean stop. {}",
        text(&out)
    );
}

/// A session's work through the server: the results are the command line's `--json`
/// documents, and the files end up as the command line would leave them.
#[test]
fn a_session_works_through_the_server_as_through_the_command_line() {
    let env = Env::new();
    let root = env.root();
    write(root, "a.txt", b"one\ntwo\n");
    init(&env);
    let mut server = serve_stdio(&env);
    let mut c = Client::stdio(&mut server);
    let s = json!("S");
    let m1 = c.call("checkpoint", json!({"session": s, "message": "m1"}));
    assert_eq!(m1["message"], "m1", "{m1}");
    c.call("read", json!({"session": s, "paths": ["a.txt"]}));
    let w = c.call(
        "write",
        json!({"session": s, "path": "a.txt", "content": "ONE\ntwo\n", "tool": "Write", "tool_call": "t1"}),
    );
    assert_eq!(w["changes"][0]["action"], "modify", "{w}");
    assert_eq!(w["changes"][0]["path"], "a.txt", "{w}");
    c.call(
        "edit",
        json!({"session": s, "path": "a.txt", "old": "two", "new": "TWO"}),
    );
    c.call(
        "apply-patch",
        json!({"session": s, "patch": "--- /dev/null\n+++ b/new.txt\n@@ -0,0 +1 @@\n+new\n"}),
    );
    let x = c.call(
        "exec",
        json!({"session": s, "command": ["sh", "-c", "echo printed; echo made > made.txt; echo err >&2"]}),
    );
    assert_eq!(x["exit_code"], 0);
    assert_eq!(x["output"]["stdout"], "printed\n", "{x}");
    assert_eq!(x["output"]["stderr"], "err\n", "{x}");
    assert_eq!(read_str(root, "a.txt"), "ONE\nTWO\n");
    assert_eq!(read_str(root, "made.txt"), "made\n");
    // The log through the server is the command line's document.
    let log = c.call("log", json!({"session": s}));
    assert_eq!(log, json(&env, "S", &["log"], 0));
    let e = c.call("epoch.begin", json!({"session": s, "paths": ["b.txt"]}));
    write(root, "b.txt", b"b\n");
    c.call("epoch.end", json!({"session": s, "epoch": e["id"]}));
    // A dry run shows the plan and writes nothing; the restore puts m1 back.
    let plan = c.call(
        "restore",
        json!({"session": s, "target": "m1", "dry_run": true}),
    );
    assert_eq!(plan["applied"], false);
    assert!(root.join("b.txt").exists());
    let r = c.call("restore", json!({"session": s, "target": "m1"}));
    assert_eq!(r["applied"], true, "{r}");
    assert_eq!(read_str(root, "a.txt"), "one\ntwo\n");
    assert!(!root.join("made.txt").exists() && !root.join("b.txt").exists());
    // Undoing the restore is redo.
    c.call("undo", json!({"session": s}));
    assert_eq!(read_str(root, "a.txt"), "ONE\nTWO\n");
    let diff = c.call("diff", json!({"session": s, "id": "m1"}));
    assert!(
        diff["files"].as_array().is_some_and(|f| !f.is_empty()),
        "{diff}"
    );
    let fsck = c.call("fsck", json!({}));
    assert_eq!(fsck["ok"], true);
    drop(c);
    assert!(server.wait_with_output().unwrap().status.success());
    fsck_clean(&env);
}

/// Bad input is answered with the specification's codes and the server goes on: invalid
/// JSON, a request that is not one, an unknown method, unknown or ill-typed params, params by
/// position, an empty batch, a line over the size limit; a batch gets one array; a
/// notification (no id) gets nothing. An operation's failure carries the error document
/// and the command line's exit code.
#[test]
fn bad_input_gets_errors_and_the_server_goes_on() {
    let env = Env::new();
    write(env.root(), "a.txt", b"a\n");
    init(&env);
    let mut server = serve_stdio(&env);
    let mut c = Client::stdio(&mut server);
    let code = |v: &Value| v["error"]["code"].as_i64().unwrap();
    c.send_line(b"{not json");
    assert_eq!(code(&c.recv()), -32700);
    c.send_line(b"42");
    assert_eq!(code(&c.recv()), -32600);
    c.send_line(br#"{"jsonrpc":"1.0","id":1,"method":"status"}"#);
    assert_eq!(code(&c.recv()), -32600);
    c.send_line(b"[]");
    assert_eq!(code(&c.recv()), -32600);
    assert_eq!(c.fail("no.such", json!({}))["code"], -32601);
    let e = c.fail("status", json!({"bogus": 1}));
    assert_eq!(e["code"], -32602, "{e}");
    assert!(e["message"].as_str().unwrap().contains("bogus"), "{e}");
    assert_eq!(c.fail("read", json!({"paths": 7}))["code"], -32602);
    assert_eq!(c.fail("status", json!({"session": 7}))["code"], -32602);
    c.send_line(br#"{"jsonrpc":"2.0","id":9,"method":"status","params":[1]}"#);
    assert_eq!(code(&c.recv()), -32602);
    // Over the limit (16 MiB): refused whole, and the next request is answered.
    let mut big =
        br#"{"jsonrpc":"2.0","id":10,"method":"write","params":{"path":"x","content":""#.to_vec();
    big.resize(17 << 20, b'x');
    big.extend_from_slice(br#""}}"#);
    c.send_line(&big);
    let v = c.recv();
    assert_eq!(code(&v), -32600, "{v}");
    assert!(v["error"]["message"]
        .as_str()
        .unwrap()
        .contains("too large"));
    assert!(!env.root().join("x").exists());
    // A notification is not answered: the next line is the status's answer.
    c.send_line(br#"{"jsonrpc":"2.0","method":"status"}"#);
    let v = c.request("status", json!({}));
    assert!(v["result"]["root"].is_string(), "{v}");
    c.send_line(
        br#"[{"jsonrpc":"2.0","id":"a","method":"status"},{"jsonrpc":"2.0","method":"status"},{"jsonrpc":"2.0","id":"b","method":"nope"}]"#,
    );
    let batch = c.recv();
    let items = batch.as_array().expect("one array for a batch");
    assert_eq!(items.len(), 2, "{batch}");
    assert_eq!(items[0]["id"], "a");
    assert_eq!(items[1]["error"]["code"], -32601);
    // An operation's own failure: the guard refuses (exit code 5 on the command line).
    let e = c.fail(
        "write",
        json!({"path": "a.txt", "content": "x", "session": "T"}),
    );
    assert_eq!(e["code"], -32005, "{e}");
    assert_eq!(e["data"]["kind"], "guard");
    assert_eq!(e["data"]["exit_code"], 5);
    assert_eq!(read_str(env.root(), "a.txt"), "a\n");
    drop(c);
    assert!(server.wait_with_output().unwrap().status.success());
}

/// Over the socket: two clients at once; the subscriber is told of the other's epoch,
/// checkpoint, restore and guard refusal, and of a checkpoint made by another process (the
/// command line), each once; a second server is refused naming where the first
/// listens; SIGTERM stops the server with exit 0 and removes its socket.
#[test]
fn socket_clients_see_each_others_events_and_one_server_per_workspace() {
    let env = Env::new();
    write(env.root(), "a.txt", b"a\n");
    init(&env);
    let (server, sock) = serve_socket(&env, &[]);
    let meta = std::fs::metadata(&sock).unwrap();
    use std::os::unix::fs::{FileTypeExt, PermissionsExt};
    assert!(meta.file_type().is_socket());
    assert_eq!(meta.permissions().mode() & 0o777, 0o600, "owner-only");
    let status = json(&env, "A", &["status"], 0);
    assert_eq!(status["server"]["pid"], json!(server.id()), "{status}");
    assert_eq!(status["server"]["socket"], json!(sock), "{status}");
    assert_eq!(status["server"]["watcher"], true, "{status}");
    let second = env.run(&["serve"]);
    assert_eq!(second.status.code(), Some(1), "{}", text(&second));
    assert!(
        String::from_utf8_lossy(&second.stderr).contains(&sock.display().to_string()),
        "names where the first listens: {}",
        text(&second)
    );
    let mut watcher = Client::socket(&sock);
    let sub = watcher.call("subscribe", json!({}));
    assert_eq!(
        sub["subscribed"],
        json!(["epoch", "checkpoint", "restore", "guard", "setting"])
    );
    let mut worker = Client::socket(&sock);
    worker.call("checkpoint", json!({"session": "W", "message": "m1"}));
    worker.call("read", json!({"session": "W", "paths": ["a.txt"]}));
    worker.call(
        "write",
        json!({"session": "W", "path": "a.txt", "content": "b\n"}),
    );
    worker.fail(
        "write",
        json!({"session": "V", "path": "a.txt", "content": "c\n"}),
    );
    worker.call("restore", json!({"session": "W", "target": "m1"}));
    // Another process, the command line, is heard of too (from the op log).
    checkpoint(&env, "X", "from-the-cli");
    json(&env, "X", &["sandbox", "mode", "read-only"], 0);
    let mut heard = Vec::new();
    for _ in 0..6 {
        let n = watcher.recv();
        assert_eq!(n["method"], "event", "{n}");
        let p = &n["params"];
        heard.push(format!(
            "{} {}",
            p["kind"].as_str().unwrap(),
            p["session"].as_str().unwrap()
        ));
        if p["kind"] == "guard" {
            assert_eq!(p["detail"]["kind"], "guard", "the error document: {n}");
        }
        if p["kind"] == "checkpoint" && p["session"] == "X" {
            assert_eq!(p["detail"]["message"], "from-the-cli", "the log entry: {n}");
        }
        if p["kind"] == "setting" {
            assert_eq!(p["detail"]["value"], "read-only", "the log entry: {n}");
        }
    }
    heard.sort();
    assert_eq!(
        heard,
        [
            "checkpoint W",
            "checkpoint X",
            "epoch W",
            "guard V",
            "restore W",
            "setting X"
        ],
        "each once"
    );
    // Unsubscribed, it hears nothing more: its next line is its own answer.
    watcher.call("unsubscribe", json!({}));
    worker.call("checkpoint", json!({"session": "W", "message": "m2"}));
    let v = watcher.request("status", json!({}));
    assert!(v["result"].is_object(), "{v}");
    let out = stop(server);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(!sock.exists(), "the socket is removed");
    assert!(
        json(&env, "A", &["status"], 0)["server"].is_null(),
        "no server now"
    );
    // The next server starts.
    let (again, _) = serve_socket(&env, &[]);
    stop(again);
}

/// A peer running as another user is refused by the server itself (the socket made
/// world-writable to let it connect at all), and by the socket's mode otherwise.
#[test]
fn a_client_with_another_uid_is_refused() {
    const CLIENT: &str = "import socket,sys\n\
s=socket.socket(socket.AF_UNIX)\n\
try:\n    s.connect(sys.argv[1])\nexcept OSError as e:\n    print('connect:', e.strerror); sys.exit(0)\n\
try:\n    s.sendall(b'{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"status\"}\\n')\n\
except OSError:\n    pass\n\
print(s.makefile().readline())\n";
    let env = Env::new();
    init(&env);
    let dir = tempfile::tempdir().unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    let sock = dir.path().join("s.sock");
    let (server, printed) = serve_socket(&env, &["--socket", sock.to_str().unwrap()]);
    assert_eq!(printed, sock);
    let as_nobody = || {
        use std::os::unix::process::CommandExt;
        // The system's Python: one under root's home would not run as another user.
        let o = Command::new("/usr/bin/python3")
            .args(["-c", CLIENT])
            .arg(&sock)
            .uid(crate::common::NOBODY)
            .gid(crate::common::NOBODY)
            .output()
            .unwrap();
        text(&o)
    };
    assert!(
        as_nobody().contains("Permission denied"),
        "0600 keeps it out"
    );
    std::fs::set_permissions(&sock, std::fs::Permissions::from_mode(0o666)).unwrap();
    let answer = as_nobody();
    assert!(answer.contains("serves only its own user"), "{answer}");
    assert!(!answer.contains("\"result\""), "{answer}");
    // Its owner is served.
    assert!(Client::socket(&sock).call("status", json!({}))["root"].is_string());
    stop(server);
}

/// SIGKILL of the server while a client's `exec` runs: the command's epoch is left open, owned
/// by the dead server, and the next command (here the command line's) settles it as recovered
/// with what the command changed, as for a killed `rewind exec`; a new server starts.
#[test]
fn a_killed_server_is_recovered_like_a_killed_command() {
    let env = Env::new();
    write(env.root(), "a.txt", b"a\n");
    init(&env);
    let (mut server, sock) = serve_socket(&env, &[]);
    let mut c = Client::socket(&sock);
    let req = json!({"jsonrpc": "2.0", "id": 1, "method": "exec",
        "params": {"session": "S", "command": ["sh", "-c", "echo x > k.txt; sleep 2"]}});
    c.send_line(req.to_string().as_bytes());
    // Wait until the command has written (bounded), then kill the server.
    for _ in 0..500 {
        if env.root().join("k.txt").exists() {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(env.root().join("k.txt").exists(), "the command ran");
    server.kill().unwrap();
    server.wait().unwrap();
    let open = json(&env, "S", &["status"], 0)["open_epochs"].clone();
    assert_eq!(open.as_array().map(Vec::len), Some(1), "{open}");
    let id = open[0]["id"].as_str().unwrap().to_string();
    expect(&env, "T", &["exec", "--", "true"], 0);
    let shown = json(&env, "S", &["show", &id], 0);
    assert_eq!(shown["recovered"], true, "{shown}");
    assert_eq!(shown["state"], "settled", "{shown}");
    let paths: Vec<&str> = shown["changes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["path"].as_str().unwrap())
        .collect();
    assert_eq!(paths, ["k.txt"], "{shown}");
    fsck_clean(&env);
    let (again, _) = serve_socket(&env, &[]);
    stop(again);
}

/// The paths an `exec` result says changed, with their actions, sorted.
fn changed(result: &Value) -> Vec<String> {
    let mut out: Vec<String> = result["changes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            format!(
                "{} {}",
                c["action"].as_str().unwrap(),
                c["path"].as_str().unwrap()
            )
        })
        .collect();
    out.sort();
    out
}

/// With the server's watcher, an `exec` re-reads only what changed, and must record exactly
/// what a walk would: what changed while no server ran (found when it starts), editor save
/// patterns (write to a temporary file and rename over, delete and create, `sed -i`), rename
/// storms of files and directories, changes deep inside a directory made and filled at once,
/// and a burst of 20,000 deletions, more events than the kernel's queue holds (16,384 by
/// default): where they come faster than the server's thread reads them, the queue overflows,
/// the watcher cannot vouch and the capture walks (`an_overflowed_queue_means_a_full_scan`
/// in the watcher's own tests makes it overflow for certain).
#[test]
fn the_servers_watcher_records_exactly_what_a_walk_would() {
    let env = Env::new();
    let root = env.root();
    write(root, "a.txt", b"a\n");
    write(root, "b.txt", b"b\n");
    write(root, "d/e/f.txt", b"f\n");
    init(&env);
    write(root, "offline.txt", b"written while no server ran\n");
    let mut server = serve_stdio(&env);
    let mut c = Client::stdio(&mut server);
    c.call("status", json!({})); // answered once the server has started
    let log = json(&env, "any", &["log", "--all-sessions"], 0);
    assert!(
        log.to_string().contains("\"kind\":\"external\""),
        "the start's capture found the offline change: {log}"
    );
    let mut exec = |script: &str| {
        let r = c.call(
            "exec",
            json!({"session": "S", "command": ["sh", "-c", script]}),
        );
        assert_eq!(r["exit_code"], 0, "{script}: {r}");
        changed(&r)
    };
    assert_eq!(exec("true"), Vec::<String>::new());
    assert_eq!(
        exec("printf 'A\\n' > .a.txt.tmp && mv .a.txt.tmp a.txt"),
        ["modify a.txt"]
    );
    assert_eq!(exec("rm b.txt && printf 'B\\n' > b.txt"), ["modify b.txt"]);
    assert_eq!(exec("sed -i 's/f/F/' d/e/f.txt"), ["modify d/e/f.txt"]);
    assert_eq!(
        exec("mv a.txt x1 && mv x1 x2 && mv x2 x3 && mv b.txt a.txt && mv x3 b.txt"),
        ["modify a.txt", "modify b.txt"]
    );
    assert_eq!(
        exec("mv d g && mkdir -p n/m/o && echo deep > n/m/o/p.txt && echo more > g/e/q.txt"),
        [
            "create g",
            "create g/e",
            "create g/e/f.txt",
            "create g/e/q.txt",
            "create n",
            "create n/m",
            "create n/m/o",
            "create n/m/o/p.txt",
            "delete d",
            "delete d/e",
            "delete d/e/f.txt",
        ]
    );
    // Inside a directory moved in this epoch and already re-watched: a later change is seen.
    assert_eq!(exec("echo again >> g/e/q.txt"), ["modify g/e/q.txt"]);
    let burst = exec("mkdir many && cd many && seq 1 20000 | xargs touch");
    assert_eq!(
        burst.len(),
        20_001,
        "every file of the burst, and its directory"
    );
    let after = exec("rm -r many && echo after > n/m/o/p.txt");
    let deleted = after
        .iter()
        .filter(|c| c.starts_with("delete many"))
        .count();
    assert_eq!(
        deleted, 20_001,
        "every file of the burst gone, and its directory"
    );
    assert_eq!(after.len(), 20_002, "and one more: {:?}", after.last());
    assert!(after.contains(&"modify n/m/o/p.txt".to_string()));
    drop(c);
    assert!(server.wait_with_output().unwrap().status.success());
    fsck_clean(&env);
}

/// With a server running, `rewind exec` and `epoch begin/end` record through it: no capture
/// runs in the command line's process (its trace has no walk), the epoch is owned by the
/// command line's process (not the server), and the changes are the same. A command line
/// killed mid-command leaves its epoch to recovery, as without a server, while the server
/// goes on; REWIND_NO_SERVER=1 records locally.
#[test]
fn the_command_line_records_through_a_running_server() {
    let env = Env::new();
    write(env.root(), "a.txt", b"a\n");
    init(&env);
    let (server, _sock) = serve_socket(&env, &[]);
    let traced = |args: &[&str], no_server: bool| {
        let mut c = env.cmd(args);
        c.env("REWIND_TRACE", "1").env("REWIND_SESSION", "S");
        if no_server {
            c.env("REWIND_NO_SERVER", "1");
        }
        let o = c.output().unwrap();
        assert!(o.status.success(), "{}", text(&o));
        String::from_utf8_lossy(&o.stderr).into_owned()
    };
    let err = traced(&["exec", "--", "sh", "-c", "echo b > b.txt"], false);
    assert!(
        !err.contains("capture: walk"),
        "captured by the server: {err}"
    );
    let log = json(&env, "S", &["log"], 0);
    let e = &log["items"][0];
    assert_eq!(e["note"], "sh -c echo b > b.txt", "{e}");
    assert_ne!(
        e["owner"]["pid"],
        json!(server.id()),
        "owned by the command line: {e}"
    );
    let shown = json(&env, "S", &["show", e["id"].as_str().unwrap()], 0);
    assert_eq!(shown["changes"][0]["path"], "b.txt", "{shown}");
    // epoch begin/end, with a path relative to a subdirectory.
    std::fs::create_dir(env.root().join("sub")).unwrap();
    let o = env
        .cmd_here(&["-s", "S", "epoch", "begin", "--path", "c.txt"])
        .current_dir(env.root().join("sub"))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    let id = String::from_utf8_lossy(&o.stdout).into_owned();
    write(env.root(), "sub/c.txt", b"c\n");
    let ended = json(&env, "S", &["epoch", "end", id.trim()], 0);
    assert_eq!(ended["changes"][0]["path"], "sub/c.txt", "{ended}");
    let err = traced(&["exec", "--", "true"], true);
    assert!(
        err.contains("capture: walk"),
        "REWIND_NO_SERVER: captured here: {err}"
    );
    // Killed mid-command: its epoch stays open until a command's recovery settles it.
    let mut killed = env
        .cmd(&["exec", "--", "sh", "-c", "echo k > k.txt; sleep 30"])
        .env("REWIND_SESSION", "S")
        .spawn()
        .unwrap();
    for _ in 0..500 {
        if env.root().join("k.txt").exists() {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    // The shell's `sleep` outlives it harmlessly: the epoch's owner is the `rewind` process.
    killed.kill().unwrap();
    killed.wait().unwrap();
    expect(&env, "T", &["exec", "--", "true"], 0);
    let log = json(&env, "S", &["log"], 0);
    let k = &log["items"][0];
    assert_eq!(k["recovered"], true, "{k}");
    assert_eq!(k["state"], "settled", "{k}");
    stop(server);
    fsck_clean(&env);
}

/// The server's resident memory, in KiB: private (`RssAnon`: its heap, its SQLite page
/// caches, its stacks) and mapped from files (`RssFile`: the binary, and the database each
/// connection reads through a mapping of its own, counted once per mapping: page cache the
/// kernel can drop, and as large as the part of the database read).
fn rss_kib(pid: u32) -> (u64, u64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let field = |name: &str| -> u64 {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().trim_end_matches(" kB").trim().parse().ok())
            .unwrap()
    };
    (field("RssAnon:"), field("RssFile:"))
}

/// Load: 50 clients for 60 seconds (`REWIND_LOAD_SECS` to change it), each its own session
/// and file, issuing guarded writes (exact epochs), commands (opaque epochs), checkpoints and
/// restores to their last checkpoint, on one workspace. No answer is an error other than
/// busy; every epoch a client was told about is in the log; fsck is clean; the server's
/// private memory does not grow without bound (its peak is printed). It rises while the 50
/// connections' page caches fill, each to 512 KiB (`SERVICE_PAGE_CACHE` in the server); with
/// SQLite's default bound of 16 MiB it went from 47 to 103 MB in 300 s and on.
#[test]
fn fifty_clients_for_a_minute() {
    let secs: u64 = std::env::var("REWIND_LOAD_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(60);
    let env = Env::new();
    for i in 0..50 {
        write(env.root(), &format!("c{i}/f.txt"), b"0\n");
    }
    init(&env);
    let (server, sock) = serve_socket(&env, &[]);
    let pid = server.id();
    let deadline = std::time::Instant::now() + Duration::from_secs(secs);
    let rss = std::sync::Mutex::new(Vec::new());
    let told: Vec<Vec<String>> = std::thread::scope(|s| {
        s.spawn(|| {
            while std::time::Instant::now() < deadline {
                rss.lock().unwrap().push(rss_kib(pid));
                std::thread::sleep(Duration::from_millis(500));
            }
        });
        let workers: Vec<_> = (0..50)
            .map(|i| {
                let sock = &sock;
                s.spawn(move || {
                    let mut c = Client::socket(sock);
                    let session = format!("L{i}");
                    let file = format!("c{i}/f.txt");
                    let mut epochs = Vec::new();
                    let mut checkpoint: Option<String> = None;
                    let mut n = 0u64;
                    c.call("read", json!({"session": session, "paths": [file]}));
                    while std::time::Instant::now() < deadline {
                        n += 1;
                        let (method, params) = match n % 4 {
                            0 => ("write", json!({"session": session, "path": file, "content": format!("{n}\n")})),
                            1 => ("exec", json!({"session": session, "command": ["sh", "-c", format!("echo {n} >> {file}")]})),
                            2 => ("checkpoint", json!({"session": session, "message": format!("{session}-m{n}")})),
                            _ => match &checkpoint {
                                Some(m) => ("restore", json!({"session": session, "target": m})),
                                None => continue,
                            },
                        };
                        let v = c.request(method, params);
                        if let Some(e) = v.get("error") {
                            assert_eq!(e["data"]["kind"], "busy", "{method}: {v}");
                            continue;
                        }
                        let r = &v["result"];
                        match method {
                            "write" => epochs.push(r["id"].as_str().unwrap().to_string()),
                            "exec" => epochs.push(r["epoch"].as_str().unwrap().to_string()),
                            "checkpoint" => checkpoint = Some(r["message"].as_str().unwrap().to_string()),
                            _ => {
                                if let Some(e) = r["epoch"].as_str() {
                                    epochs.push(e.to_string());
                                }
                            }
                        }
                        // A restore may leave the file other than the session last read it:
                        // read again so the next write is allowed.
                        if method == "restore" {
                            c.call("read", json!({"session": session, "paths": [file]}));
                        }
                    }
                    epochs
                })
            })
            .collect();
        workers.into_iter().map(|w| w.join().unwrap()).collect()
    });
    let samples = rss.into_inner().unwrap();
    let private: Vec<u64> = samples.iter().map(|s| s.0).collect();
    let peak = private.iter().copied().max().unwrap_or(0);
    let settled = private.get(private.len() / 4).copied().unwrap_or(peak);
    let mapped = samples.iter().map(|s| s.1).max().unwrap_or(0);
    println!(
        "server private memory: peak {peak} KiB, a quarter in {settled} KiB, {} samples; \
         mapped from files at most {mapped} KiB",
        samples.len()
    );
    stop(server);
    let log = json(&env, "any", &["log", "--all-sessions", "--limit", "0"], 0);
    let logged: std::collections::HashSet<&str> = log["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| e["id"].as_str())
        .collect();
    let all: Vec<&String> = told.iter().flatten().collect();
    assert!(all.len() > 50, "work was done: {}", all.len());
    println!("{} epochs answered, all in the log", all.len());
    for id in &all {
        assert!(
            logged.contains(id.as_str()),
            "epoch {id} was answered but is not in the log"
        );
    }
    fsck_clean(&env);
    assert!(
        peak < settled.max(1) * 3,
        "the server's private memory grew from {settled} KiB to {peak} KiB"
    );
}

/// A server that starts on a tree changed while none ran, with a `capture.time_budget` its
/// start's capture runs out of, leaves the rest to a background baseline, as a command would:
/// with no other command run, every file becomes covered.
#[test]
fn a_server_start_that_runs_out_of_budget_completes_the_baseline_in_the_background() {
    let env = Env::new();
    write(env.root(), "keep.txt", b"keep\n");
    init(&env);
    spent_budget_tree(&env);
    let mut server = serve_stdio(&env);
    let mut c = Client::stdio(&mut server);
    c.call("status", json!({})); // answered once the server has started
    wait_for_baseline(&env, "S");
    drop(c);
    assert!(server.wait_with_output().unwrap().status.success());
    fsck_clean(&env);
}

/// A server writes `state.bin` at most every 10 s, keeping a newer stat cache in memory in
/// between; when it stops, it writes what it kept, so the next command starts from it.
#[test]
fn a_server_that_stops_writes_the_stat_cache_it_kept() {
    let env = Env::new();
    write(env.root(), "a.txt", b"a\n");
    init(&env);
    let state = state_dir(&env).join("state.bin");
    let mut server = serve_stdio(&env);
    let mut c = Client::stdio(&mut server);
    c.call("status", json!({})); // answered once the server has started
    let started = std::fs::metadata(&state).unwrap().modified().unwrap();
    std::thread::sleep(Duration::from_millis(50));
    let r = c.call(
        "exec",
        json!({"session": "S", "command": ["sh", "-c", "echo b > b.txt"]}),
    );
    assert_eq!(changed(&r), ["create b.txt"]);
    let kept = std::fs::metadata(&state).unwrap().modified().unwrap();
    assert_eq!(
        kept, started,
        "the epoch's captures left state.bin to later"
    );
    std::thread::sleep(Duration::from_millis(50));
    drop(c);
    assert!(server.wait_with_output().unwrap().status.success());
    let stopped = std::fs::metadata(&state).unwrap().modified().unwrap();
    assert!(
        stopped > started,
        "the server wrote state.bin when it stopped"
    );
    fsck_clean(&env);
}

/// A client's checkpoint that leaves the state over `[retention] max_bytes` starts one gc in
/// the background, as `rewind checkpoint` does, and the server goes on serving.
#[test]
fn a_checkpoint_through_the_server_over_the_budget_starts_a_gc() {
    let env = Env::new();
    let root = env.root();
    write(root, "x.txt", b"x\n");
    write(root, ".rewind.toml", b"[retention]\nmax_bytes = \"3M\"\n");
    init(&env);
    let mut server = serve_stdio(&env);
    let mut c = Client::stdio(&mut server);
    for i in 0..6 {
        // Each checkpoint stores 1 MiB more.
        let big = crate::gc::random_mib();
        write(root, "big.bin", &big);
        c.call(
            "checkpoint",
            json!({"session": "S", "message": format!("m{i}")}),
        );
    }
    crate::gc::wait_within_budget(&env, (3 << 20) + (256 << 10));
    let log = c.call("log", json!({"session": "S", "limit": 0}));
    let collected = log["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| i["type"] == "checkpoint" && !i["collected_ns"].is_null())
        .count();
    assert!(collected > 0, "a gc dropped the oldest checkpoints: {log}");
    let o = stop(server);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    fsck_clean(&env);
}

/// Content a gc collected while the server ran, written again through the server, is stored
/// again and restores: the server's writers keep the ids they know are stored in memory
/// (`docs/format.md`, "Known ids"), and the gc's sweep must make them reload those, never
/// take the collected content as still stored.
#[test]
fn content_a_gc_collected_is_stored_again_through_the_server() {
    let env = Env::new();
    let root = env.root();
    write(root, "x.txt", b"x\n");
    init(&env);
    let mut server = serve_stdio(&env);
    let mut c = Client::stdio(&mut server);
    // Answered once the server's start capture is done: that snapshot, which no gc drops,
    // must not hold the content.
    c.call("status", json!({"session": "S"}));
    // Stored by a capture of the server's (which commits on its own: its writers now know
    // it), then replaced: only a checkpoint the gc drops, and epochs that go with it, need it.
    let first = crate::gc::random_mib();
    write(root, "big.bin", &first);
    c.call("exec", json!({"session": "S", "command": ["true"]}));
    c.call("checkpoint", json!({"session": "S", "message": "first"}));
    write(root, "big.bin", b"other\n");
    c.call("exec", json!({"session": "S", "command": ["true"]}));
    c.call("checkpoint", json!({"session": "S", "message": "head"}));
    // Limits as the command line writes them are taken too (`gc --max-bytes 1K --max-age 30d`).
    let dry = c.call(
        "gc",
        json!({"session": "S", "dry_run": true, "max_bytes": "1K", "max_age": "30d"}),
    );
    assert_eq!(dry["max_bytes"], 1024, "{dry}");
    let v = c.call("gc", json!({"session": "S", "max_bytes": 1}));
    assert!(
        v["bytes_freed"].as_u64().unwrap_or(0) >= 1 << 20,
        "the gc removed the first content: {v}"
    );

    write(root, "big.bin", &first);
    let again = c.call("checkpoint", json!({"session": "S", "message": "again"}));
    let id = again["id"].as_str().expect("a checkpoint id").to_string();
    // The session's own change, which a restore puts back (another's it would leave).
    c.call("read", json!({"session": "S", "paths": ["big.bin"]}));
    c.call(
        "write",
        json!({"session": "S", "path": "big.bin", "content": "something else\n"}),
    );
    let o = stop(server);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    fsck_clean(&env);
    let o = expect(&env, "S", &["restore", &id], 0);
    let now = std::fs::read(root.join("big.bin")).unwrap();
    assert!(
        now == first,
        "not restored ({} bytes): {}",
        now.len(),
        text(&o)
    );
}
