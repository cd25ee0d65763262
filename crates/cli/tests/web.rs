//! The web UI (`rewind serve --http`, `rewind ui`): its security checks with a plain HTTP
//! client (no token, a wrong `Host`, a POST without this server's `Origin`: refused; the token
//! exchanged for an `HttpOnly`, `SameSite=Strict` cookie and never in the server's log), and the
//! pages in a real headless Chromium driven over WebDriver (`web_ui.py`, Selenium): timeline,
//! diff, a rewind through its preview and confirmation with the files on disk checked, undo,
//! and an epoch from another process appearing live.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::Duration;

use crate::common::rewind::*;
use crate::common::{text, Env};

/// A running `rewind serve --http`, stopped (SIGTERM) when dropped.
struct Web {
    child: Child,
    /// The address printed, with its token.
    url: String,
    port: u16,
    token: String,
    /// Where its standard error goes.
    log: PathBuf,
    _logdir: tempfile::TempDir,
}

impl Web {
    fn start(env: &Env, session: &str) -> Web {
        let logdir = tempfile::tempdir().unwrap();
        let log = logdir.path().join("stderr");
        let mut child = env
            .cmd(&["-s", session, "serve", "--http"])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let url = line.trim().to_string();
        let rest = url.strip_prefix("http://127.0.0.1:").unwrap_or_else(|| {
            panic!(
                "first line {url:?}: {}",
                std::fs::read_to_string(&log).unwrap()
            )
        });
        let (port, token) = rest
            .split_once("/?token=")
            .expect("the token in the address");
        assert_eq!(token.len(), 32, "{url}");
        Web {
            port: port.parse().unwrap(),
            token: token.to_string(),
            url: url.clone(),
            child,
            log,
            _logdir: logdir,
        }
    }

    /// Sends `request` (a whole HTTP/1.1 request, `{port}` replaced) and reads the answer.
    fn raw(&self, request: &str) -> Answer {
        let mut s = TcpStream::connect(("127.0.0.1", self.port)).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        s.write_all(request.replace("{port}", &self.port.to_string()).as_bytes())
            .unwrap();
        let mut all = Vec::new();
        s.read_to_end(&mut all).unwrap();
        let all = String::from_utf8_lossy(&all).into_owned();
        let (head, body) = all.split_once("\r\n\r\n").unwrap_or((&all, ""));
        let status = head
            .split(' ')
            .nth(1)
            .and_then(|c| c.parse().ok())
            .unwrap_or_else(|| panic!("no status in {all:?}"));
        Answer {
            status,
            head: head.to_string(),
            body: body.to_string(),
        }
    }

    fn get(&self, path: &str, host: &str, cookie: bool) -> Answer {
        let cookie = if cookie {
            format!("Cookie: rewind-{}={}\r\n", self.port, self.token)
        } else {
            String::new()
        };
        self.raw(&format!(
            "GET {path} HTTP/1.1\r\nHost: {host}\r\n{cookie}Connection: close\r\n\r\n"
        ))
    }

    fn post_rpc(&self, extra_headers: &str, body: &str) -> Answer {
        self.raw(&format!(
            "POST /rpc HTTP/1.1\r\nHost: 127.0.0.1:{{port}}\r\nContent-Type: application/json\r\n\
             {extra_headers}Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        ))
    }

    fn cookie(&self) -> String {
        format!("Cookie: rewind-{}={}\r\n", self.port, self.token)
    }

    fn stop(mut self) -> String {
        // SAFETY: signalling our own child.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let _ = self.child.wait();
        std::fs::read_to_string(&self.log).unwrap()
    }
}

impl Drop for Web {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

struct Answer {
    status: u16,
    head: String,
    body: String,
}

impl Answer {
    fn header(&self, name: &str) -> Option<String> {
        self.head.lines().find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.eq_ignore_ascii_case(name).then(|| v.trim().to_string())
        })
    }
}

const STATUS: &str = r#"{"jsonrpc":"2.0","id":1,"method":"status","params":{}}"#;

#[test]
fn web_security_token_host_origin_and_logs() {
    let env = Env::new();
    init(&env);
    let web = Web::start(&env, "s");
    let here = "127.0.0.1:{port}";

    // No token: refused, and nothing of the UI is served.
    let a = web.get("/", here, false);
    assert_eq!(a.status, 401, "{}", a.body);
    assert!(!a.body.contains("<script"), "{}", a.body);
    assert_eq!(
        web.post_rpc("Origin: http://127.0.0.1:{port}\r\n", STATUS)
            .status,
        401
    );
    assert_eq!(web.get("/events", here, false).status, 401);
    assert_eq!(
        web.get("/?token=0123456789abcdef0123456789abcdef", here, false)
            .status,
        401
    );

    // The token in the address: exchanged for a cookie, and sent away from the address.
    let a = web.get(&format!("/?token={}&session=s", web.token), here, false);
    assert_eq!(a.status, 303, "{}", a.head);
    assert_eq!(a.header("Location").as_deref(), Some("/?session=s"));
    let cookie = a.header("Set-Cookie").unwrap();
    assert!(
        cookie.starts_with(&format!("rewind-{}={};", web.port, web.token)),
        "{cookie}"
    );
    assert!(
        cookie.contains("HttpOnly") && cookie.contains("SameSite=Strict"),
        "{cookie}"
    );

    // With the cookie: the page, under a strict policy, and no CORS.
    let a = web.get("/", here, true);
    assert_eq!(a.status, 200, "{}", a.body);
    assert!(a.body.contains("<script src=\"/app.js\""), "{}", a.body);
    let csp = a.header("Content-Security-Policy").unwrap();
    assert!(
        csp.contains("default-src 'none'") && csp.contains("script-src 'self'"),
        "{csp}"
    );
    assert!(!csp.contains("unsafe-inline"), "{csp}");
    assert!(
        a.header("Access-Control-Allow-Origin").is_none(),
        "{}",
        a.head
    );
    for asset in ["/app.js", "/timeline.js", "/diff.js", "/app.css"] {
        assert_eq!(web.get(asset, here, true).status, 200, "{asset}");
    }
    for host in ["localhost:{port}", "[::1]:{port}"] {
        assert_eq!(web.get("/", host, true).status, 200, "{host}");
    }

    // A wrong Host (DNS rebinding: a name of the attacker's pointing at 127.0.0.1), even with
    // the token: refused.
    for host in [
        "evil.example:{port}",
        "127.0.0.1:1",
        "localhost",
        "10.1.2.3:{port}",
    ] {
        let a = web.get("/", host, true);
        assert_eq!(a.status, 403, "{host}: {}", a.body);
        let a = web.get(&format!("/?token={}", web.token), host, false);
        assert_eq!(a.status, 403, "{host}");
        assert!(a.header("Set-Cookie").is_none());
    }
    let a = web.raw(&format!(
        "GET / HTTP/1.0\r\n{}Connection: close\r\n\r\n",
        web.cookie()
    ));
    assert_eq!(a.status, 403, "no Host: {}", a.body);

    // A POST with the cookie but without this server's Origin: refused; with it: answered.
    let cookie = web.cookie();
    let a = web.post_rpc(&cookie, STATUS);
    assert_eq!(a.status, 403, "{}", a.body);
    for origin in [
        "http://evil.example",
        "null",
        "http://127.0.0.1:1",
        "https://127.0.0.1:{port}",
    ] {
        let a = web.post_rpc(&format!("{cookie}Origin: {origin}\r\n"), STATUS);
        assert_eq!(a.status, 403, "{origin}: {}", a.body);
    }
    let a = web.post_rpc(
        &format!("{cookie}Origin: http://127.0.0.1:{{port}}\r\n"),
        STATUS,
    );
    assert_eq!(a.status, 200, "{}", a.body);
    let v: serde_json::Value = serde_json::from_str(&a.body).unwrap();
    assert_eq!(
        v["result"]["root"],
        env.root().canonicalize().unwrap().to_str().unwrap()
    );
    // A script with the bearer header sends no Origin.
    let a = web.post_rpc(&format!("Authorization: Bearer {}\r\n", web.token), STATUS);
    assert_eq!(a.status, 200, "{}", a.body);
    // Form posts (not JSON) and other methods: refused.
    let a = web.raw(&format!(
        "POST /rpc HTTP/1.1\r\nHost: 127.0.0.1:{{port}}\r\n{cookie}Origin: http://127.0.0.1:{{port}}\r\n\
         Content-Type: application/x-www-form-urlencoded\r\nContent-Length: 3\r\nConnection: close\r\n\r\na=b"
    ));
    assert_eq!(a.status, 415);
    let a = web.raw(&format!(
        "OPTIONS /rpc HTTP/1.1\r\nHost: 127.0.0.1:{{port}}\r\n{cookie}Origin: http://evil.example\r\n\
         Access-Control-Request-Method: POST\r\nConnection: close\r\n\r\n"
    ));
    assert_eq!(a.status, 405);
    assert!(
        a.header("Access-Control-Allow-Origin").is_none(),
        "{}",
        a.head
    );

    // status shows the address, never the token; `rewind ui` prints the same address again.
    let st = json(&env, "s", &["status"], 0);
    let shown = st["server"]["http"].as_str().unwrap();
    assert_eq!(shown, format!("http://127.0.0.1:{}/", web.port));
    assert!(!st.to_string().contains(&web.token));
    let o = env.run(&["-s", "s", "ui"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert_eq!(String::from_utf8_lossy(&o.stdout).trim(), web.url);

    // The log: refusals said, the token never.
    let url = web.url.clone();
    let token = web.token.clone();
    let log = web.stop();
    assert!(log.contains("refused"), "{log}");
    assert!(
        !log.contains(&token),
        "the token is in the server's log:\n{log}"
    );
    assert!(!url.is_empty());
}

#[test]
fn web_non_loopback_needs_allow_remote() {
    let env = Env::new();
    init(&env);
    let o = env.run(&["serve", "--http", "0.0.0.0:0"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("--allow-remote"), "{}", text(&o));
    let o = env.run(&["serve", "--http", "nonsense"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
}

/// `rewind ui` with no server running starts one in the background, and finds it next time.
#[test]
fn web_ui_starts_a_server_and_finds_it() {
    let env = Env::new();
    init(&env);
    let v = json(&env, "default", &["ui"], 0);
    let pid = v["pid"].as_u64().unwrap() as i32;
    let stop = scopeguard(pid);
    assert_eq!(v["started"], true);
    let url = v["url"].as_str().unwrap().to_string();
    assert!(
        url.starts_with("http://127.0.0.1:") && url.contains("/?token="),
        "{url}"
    );
    let again = json(&env, "default", &["ui"], 0);
    assert_eq!(again["started"], false);
    assert_eq!(again["url"], url);
    // A plain socket server running instead: said, with what to do.
    drop(stop);
    let mut plain = env
        .cmd(&["serve"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(plain.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let o = env.run(&["ui"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(text(&o).contains("without the web UI"), "{}", text(&o));
    let _ = plain.kill();
    let _ = plain.wait();
}

/// Kills `pid` (SIGTERM) and waits for it to go when dropped.
fn scopeguard(pid: i32) -> impl Drop {
    struct Kill(i32);
    impl Drop for Kill {
        fn drop(&mut self) {
            // SAFETY: signalling the server this test started.
            unsafe { libc::kill(self.0, libc::SIGTERM) };
            for _ in 0..300 {
                // SAFETY: signal 0 only checks that the process exists.
                if unsafe { libc::kill(self.0, 0) } != 0 {
                    return;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        }
    }
    Kill(pid)
}

/// The Python with Selenium: `REWIND_WEB_PYTHON` (what `scripts/test` installs; it must
/// work), else a virtual environment made next to the `rewind` binary on first use. `None`
/// (the test says why and skips) only when Chromium, its driver or Selenium cannot be had.
fn selenium_python() -> Option<PathBuf> {
    static MADE: Mutex<()> = Mutex::new(());
    for bin in ["/usr/bin/chromium", "/usr/bin/chromedriver"] {
        if !Path::new(bin).exists() {
            eprintln!("SKIPPED: {bin} is missing (apt-get install chromium chromium-driver; scripts/test does)");
            return None;
        }
    }
    if let Some(p) = std::env::var_os("REWIND_WEB_PYTHON") {
        return Some(PathBuf::from(p));
    }
    let _one = MADE.lock().unwrap_or_else(|p| p.into_inner());
    let venv = Path::new(env!("CARGO_BIN_EXE_rewind"))
        .parent()
        .unwrap()
        .join("web-venv");
    let python = venv.join("bin/python");
    let works = |p: &Path| {
        Command::new(p)
            .args(["-c", "import selenium"])
            .output()
            .is_ok_and(|o| o.status.success())
    };
    if works(&python) {
        return Some(python);
    }
    let installed = Command::new("python3")
        .args(["-m", "venv"])
        .arg(&venv)
        .output()
        .is_ok_and(|o| o.status.success())
        && Command::new(venv.join("bin/pip"))
            .args(["install", "-q", "selenium>=4,<5"])
            .output()
            .is_ok_and(|o| o.status.success());
    if installed && works(&python) {
        return Some(python);
    }
    eprintln!(
        "SKIPPED: Selenium could not be installed (python3 -m venv {} && pip install \
         'selenium>=4,<5' failed); scripts/test installs it and sets REWIND_WEB_PYTHON",
        venv.display()
    );
    None
}

/// A session as an agent leaves it: two turns, edits and a shell command, and an edit of the
/// user's in between.
fn scripted_session(env: &Env, s: &str) {
    write(env.root(), "a.txt", b"one\n");
    init(env);
    checkpoint(env, s, "msg-1");
    let root = env.root().to_path_buf();
    let id = ok(
        env,
        s,
        &[
            "epoch",
            "begin",
            "--tool",
            "edit",
            "--tool-call",
            "call-1",
            "--path",
            "a.txt",
        ],
    );
    write(&root, "a.txt", b"two\n");
    expect(env, s, &["epoch", "end", &id], 0);
    sh(env, s, "echo three > c.txt");
    checkpoint(env, s, "msg-2");
    exact(env, s, &["a.txt"], || write(&root, "a.txt", b"three\n"));
    // The user's own edit: recorded as external by the next capture of the tree.
    write(&root, "d.txt", b"mine\n");
    sh(env, s, "true");
    let log = json(env, s, &["log", "--all-sessions"], 0);
    assert!(log.to_string().contains("\"external\""), "{log}");
}

#[test]
fn web_ui_in_chromium_timeline_diff_rewind_undo_live() {
    let Some(python) = selenium_python() else {
        return;
    };
    let env = Env::new();
    scripted_session(&env, "agent");
    let web = Web::start(&env, "agent");
    // REWIND_WEB_SCREENSHOTS=DIR saves the screenshots the README shows (docs/img).
    let shots = std::env::var("REWIND_WEB_SCREENSHOTS").ok();
    let mut cmd = Command::new(&python);
    cmd.arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/web_ui.py"))
        .arg(env!("CARGO_BIN_EXE_rewind"))
        .arg(env.root())
        .arg(&web.url)
        .arg("agent")
        .args(shots.iter())
        .env("REWIND_HOME", env.home.path())
        .env_remove("REWIND_SESSION");
    let o = cmd.output().unwrap();
    let out = text(&o);
    assert!(o.status.success(), "{out}");
    assert!(out.contains("OK"), "{out}");
    // What the browser did is the command line's history too: a restore and its undo.
    let log = json(&env, "agent", &["log"], 0);
    let restores = log["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["kind"] == "restore")
        .count();
    assert_eq!(restores, 2, "{log}");
    assert_eq!(read_str(env.root(), "a.txt"), "three\n");
    assert_eq!(read_str(env.root(), "e.txt"), "live\n");
    let token = web.token.clone();
    let log = web.stop();
    assert!(!log.contains(&token), "{log}");
}
