//! Shared fixtures for the bubblewrap tests. Not a test file of its own (see `mod common`).
#![allow(dead_code)]

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Once;
use std::time::Duration;

use rewind_sandbox::{Policy, SandboxedChild};

pub mod probe;

pub const SECRET: &str = "sk-test-do-not-leak-0123";

pub use rewind_testutil::require_bwrap;

/// Polls `cond` every 10 ms until it holds, for at most `limit`; whether it held. For waiting
/// on what another process does without guessing how long that takes on a loaded machine.
pub fn wait_until(limit: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let start = std::time::Instant::now();
    loop {
        if cond() {
            return true;
        }
        if start.elapsed() > limit {
            return false;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// A FIFO a sandboxed command waits on (`read x < GATE`) until the test opens it.
pub struct Gate(PathBuf);

impl Gate {
    pub fn new(path: PathBuf) -> Gate {
        let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a valid C string.
        let r = unsafe { libc::mkfifo(c.as_ptr(), 0o600) };
        assert_eq!(
            r,
            0,
            "mkfifo {}: {}",
            path.display(),
            std::io::Error::last_os_error()
        );
        Gate(path)
    }

    /// Lets the waiting command go on (opening a FIFO waits for its reader).
    pub fn open(&self) {
        std::fs::write(&self.0, "go\n").unwrap();
    }
}

/// A failing test must not leave a command blocked on the gate forever: it is opened on the
/// way out, without waiting when nobody reads it.
impl Drop for Gate {
    fn drop(&mut self) {
        use std::os::unix::fs::OpenOptionsExt;
        let _ = std::fs::OpenOptions::new()
            .write(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(&self.0);
    }
}

fn init_env() {
    static INIT: Once = Once::new();
    INIT.call_once(|| {
        // Set once, before any sandbox is spawned, so every run sees the same secrets.
        std::env::set_var("FAKE_API_KEY", SECRET);
        std::env::set_var("GITHUB_TOKEN", SECRET);
        std::env::set_var("MY_PASSWORD", SECRET);
        std::env::set_var("SSH_AUTH_SOCK", "/run/user/0/fake-agent.sock");
    });
}

/// A workspace (a git repo with hooks), an extra writable root, an outside dir and a fake
/// home, all *outside* /tmp (the sandbox's /tmp is private, which would hide them anyway).
pub struct Fx {
    _dir: tempfile::TempDir,
    pub root: PathBuf,
    pub ws: PathBuf,
    pub extra: PathBuf,
    pub out: PathBuf,
    pub home: PathBuf,
    pub state: PathBuf,
}

impl Fx {
    pub fn new() -> Fx {
        require_bwrap();
        init_env();
        let dir = tempfile::Builder::new()
            .prefix("sbx")
            .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
            .unwrap();
        let root = dir.path().canonicalize().unwrap();
        let fx = Fx {
            ws: root.join("ws"),
            extra: root.join("extra"),
            out: root.join("out"),
            home: root.join("home"),
            state: root.join("state"),
            root,
            _dir: dir,
        };
        for d in [
            "ws/.git/hooks",
            "ws/src",
            "extra",
            "out",
            "home/.ssh",
            "home/.aws",
            "home/dotfiles",
            "state",
        ] {
            std::fs::create_dir_all(fx.root.join(d)).unwrap();
        }
        std::fs::write(fx.ws.join(".git/config"), "[core]\n").unwrap();
        std::fs::write(fx.ws.join(".git/HEAD"), "ref: refs/heads/main\n").unwrap();
        std::fs::write(fx.ws.join(".git/hooks/pre-commit"), "#!/bin/sh\n").unwrap();
        std::fs::write(fx.ws.join("README"), "hello\n").unwrap();
        std::fs::write(fx.home.join(".ssh/id_rsa"), "PRIVATE-KEY-BYTES\n").unwrap();
        std::fs::write(fx.home.join(".aws/credentials"), "aws-secret\n").unwrap();
        std::fs::write(fx.home.join(".aws/config"), "region\n").unwrap();
        std::fs::write(fx.home.join("dotfiles/netrc"), "netrc-secret\n").unwrap();
        std::os::unix::fs::symlink(fx.home.join("dotfiles/netrc"), fx.home.join(".netrc")).unwrap();
        std::fs::write(fx.home.join(".bashrc"), "# rc\n").unwrap();
        fx
    }

    /// workspace-write, network off, ~/.ssh, ~/.aws/credentials and ~/.netrc denied.
    pub fn policy(&self) -> Policy {
        let mut p = Policy::with_home(&self.ws, &self.state, Some(&self.home)).unwrap();
        for d in ["~/.ssh", "~/.aws/credentials", "~/.netrc"] {
            p.add_deny_read("test", d.as_ref()).unwrap();
        }
        p
    }

    pub fn policy_extra(&self) -> Policy {
        let mut p = self.policy();
        p.add_writable_root("test", self.extra.as_os_str()).unwrap();
        p
    }

    pub fn read(&self, p: impl AsRef<Path>) -> String {
        std::fs::read_to_string(p).unwrap_or_else(|_| "<absent>".into())
    }
}

/// Result of one sandboxed run.
#[derive(Debug)]
pub struct Run {
    pub code: i32,
    pub signal: Option<i32>,
    pub out: String,
    pub err: String,
}

impl Run {
    pub fn ok(&self) -> bool {
        self.code == 0
    }
    pub fn all(&self) -> String {
        format!("{}{}", self.out, self.err)
    }
}

fn collect(mut child: SandboxedChild, limit: Duration) -> Run {
    let mut so = child.child_mut().stdout.take().unwrap();
    let mut se = child.child_mut().stderr.take().unwrap();
    let to = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = so.read_to_string(&mut s);
        s
    });
    let te = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = se.read_to_string(&mut s);
        s
    });
    let st = child
        .wait_timeout(limit)
        .expect("sandbox failed to start the command")
        .expect("command timed out");
    use std::os::unix::process::ExitStatusExt;
    Run {
        code: st.code().unwrap_or(-1),
        signal: st.signal(),
        out: to.join().unwrap(),
        err: te.join().unwrap(),
    }
}

/// Runs argv under `p` with a 30 s bound, stdin closed.
pub fn run_argv(p: &Policy, argv: &[&str], env: &[(&str, &str)]) -> Run {
    let mut s = p.command(argv.iter().copied(), None).unwrap();
    for (k, v) in env {
        s.env(k, v);
    }
    s.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    collect(s.spawn().unwrap(), Duration::from_secs(30))
}

/// Runs a shell script under `p`.
pub fn sh(p: &Policy, script: &str) -> Run {
    run_argv(p, &["/bin/sh", "-c", script], &[])
}

/// Runs a syscall probe: this very test binary, whose `bwrap::probe` test acts on
/// `REWIND_PROBE`.
pub fn syscall(p: &Policy, what: &str) -> Run {
    let exe = std::env::current_exe().unwrap();
    let exe = exe.to_str().unwrap();
    run_argv(
        p,
        &[
            exe,
            "--exact",
            "bwrap::probe",
            "--nocapture",
            "--test-threads=1",
            "-q",
        ],
        &[("REWIND_PROBE", what)],
    )
}

/// The errno a probe reported (`errno=N`), 0 for success.
pub fn errno_of(r: &Run) -> i32 {
    r.out
        .lines()
        .find_map(|l| l.strip_prefix("errno="))
        .unwrap_or_else(|| panic!("probe printed no errno: {r:?}"))
        .trim()
        .parse()
        .unwrap()
}
