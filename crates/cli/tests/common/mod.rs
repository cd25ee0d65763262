//! Running the real `rewind` binary against temporary workspaces and state directories; the
//! helpers of the rewind (op-log) tests are in `rewind`.
#![allow(dead_code)]

pub mod rewind;

pub use rewind_testutil::require_bwrap;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub struct Env {
    pub home: tempfile::TempDir,
    pub root: tempfile::TempDir,
}

impl Env {
    pub fn new() -> Env {
        Env {
            home: tempfile::tempdir().unwrap(),
            root: tempfile::tempdir().unwrap(),
        }
    }

    pub fn cmd(&self, args: &[&str]) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_rewind"));
        c.env("REWIND_HOME", self.home.path())
            .env_remove("REWIND_SESSION")
            .env_remove("REWIND_FAILPOINT")
            .arg("-C")
            .arg(self.root.path())
            .args(args);
        c
    }

    /// Like [`Env::cmd`] without `-C`: the workspace is found from the working directory
    /// the caller gives the command.
    pub fn cmd_here(&self, args: &[&str]) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_rewind"));
        c.env("REWIND_HOME", self.home.path())
            .env_remove("REWIND_SESSION")
            .env_remove("REWIND_FAILPOINT")
            .args(args);
        c
    }

    pub fn run(&self, args: &[&str]) -> Output {
        self.cmd(args).output().unwrap()
    }

    pub fn root(&self) -> &Path {
        self.root.path()
    }

    /// Every pack file of every workspace in the state directory.
    pub fn packs(&self) -> Vec<PathBuf> {
        let mut out: Vec<PathBuf> = self
            .state_files()
            .into_iter()
            .filter(|p| p.extension().is_some_and(|x| x == "pack") && !in_tmp(p))
            .collect();
        out.sort();
        out
    }

    /// Files in the store's `tmp/` directories: packs being written, or left by a killed writer
    /// (the next command removes those).
    pub fn temp_packs(&self) -> Vec<PathBuf> {
        self.state_files()
            .into_iter()
            .filter(|p| in_tmp(p))
            .collect()
    }

    /// Every file under the state directory.
    fn state_files(&self) -> Vec<PathBuf> {
        let mut out = Vec::new();
        fn go(d: &Path, out: &mut Vec<PathBuf>) {
            if let Ok(rd) = std::fs::read_dir(d) {
                for e in rd.flatten() {
                    let p = e.path();
                    if p.is_dir() {
                        go(&p, out);
                    } else {
                        out.push(p);
                    }
                }
            }
        }
        go(self.home.path(), &mut out);
        out
    }
}

fn in_tmp(p: &Path) -> bool {
    p.parent()
        .and_then(|d| d.file_name())
        .is_some_and(|d| d == "tmp")
}

/// FIFOs and marker files outside the workspace, to order a test against the commands it
/// runs instead of guessing with sleeps: a command signals with `: > MARK` what the test waits
/// for ([`Gates::wait_for`]), and blocks on `read x < GATE` until the test opens that gate.
pub struct Gates {
    dir: tempfile::TempDir,
    names: Vec<String>,
}

/// A failing test must not leave a command blocked on a gate forever (it would hold the test
/// harness's output pipe and hang the run): every gate is opened on the way out, without
/// waiting when nobody reads it.
impl Drop for Gates {
    fn drop(&mut self) {
        use std::os::unix::fs::OpenOptionsExt;
        for name in &self.names {
            let _ = std::fs::OpenOptions::new()
                .write(true)
                .custom_flags(libc::O_NONBLOCK)
                .open(self.path(name));
        }
    }
}

impl Gates {
    /// A fresh directory holding the FIFOs `gates`.
    pub fn new(gates: &[&str]) -> Gates {
        let g = Gates {
            dir: tempfile::tempdir().unwrap(),
            names: gates.iter().map(|n| n.to_string()).collect(),
        };
        for name in gates {
            let made = Command::new("mkfifo").arg(g.path(name)).status().unwrap();
            assert!(made.success(), "mkfifo {name}");
        }
        g
    }

    /// The path of a gate or marker, for a command's script.
    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// Lets the command waiting on `gate` go on (opening a FIFO waits for its reader).
    pub fn open(&self, gate: &str) {
        std::fs::write(self.path(gate), "go\n").unwrap();
    }

    /// Waits until a command made `mark` (polling, failing after 30 s).
    pub fn wait_for(&self, mark: &str) {
        let start = std::time::Instant::now();
        while !self.path(mark).exists() {
            assert!(
                start.elapsed() < std::time::Duration::from_secs(30),
                "{mark} never came"
            );
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
    }
}

/// The unprivileged user some tests run `rewind` as, to see what a user without permission
/// sees (CI runs as root, which ignores permissions).
pub const NOBODY: u32 = 65534;

impl Env {
    /// Hands the workspace and the state directory to [`NOBODY`]; the test must run as root.
    pub fn hand_to_nobody(&self) {
        // SAFETY: getuid has no preconditions.
        assert_eq!(
            unsafe { libc::getuid() },
            0,
            "this test drops to an unprivileged uid and must start as root (CI does)"
        );
        for dir in [self.home.path(), self.root.path()] {
            let ok = Command::new("chown")
                .args(["-R", &format!("{NOBODY}:{NOBODY}")])
                .arg(dir)
                .status()
                .unwrap()
                .success();
            assert!(ok, "chown {}", dir.display());
        }
    }

    /// `rewind ARGS…` run as [`NOBODY`] in the workspace root.
    pub fn run_as_nobody(&self, args: &[&str]) -> Output {
        use std::os::unix::process::CommandExt;
        self.cmd(args)
            .current_dir(self.root())
            .uid(NOBODY)
            .gid(NOBODY)
            .output()
            .unwrap()
    }
}

/// Runs `cmd` with `input` on its standard input; stdout and stderr captured.
pub fn output_with_stdin(cmd: &mut Command, input: &[u8]) -> Output {
    use std::io::Write;
    use std::process::Stdio;
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(input).unwrap();
    child.wait_with_output().unwrap()
}

pub fn text(o: &Output) -> String {
    format!(
        "status {:?}\nstdout:\n{}\nstderr:\n{}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// The last line of a command's output, trimmed ("" when there is none): where the creating
/// commands print the id they made.
pub fn last_line(out: impl AsRef<[u8]>) -> String {
    String::from_utf8_lossy(out.as_ref())
        .lines()
        .last()
        .unwrap_or("")
        .trim()
        .to_string()
}

/// Deterministic pseudo-random bytes (xorshift), so tests need no RNG crate.
pub fn noise(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

/// The stdout of a command that must have succeeded (exit 0).
pub fn stdout_ok(o: Output) -> String {
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    String::from_utf8(o.stdout).unwrap()
}

/// The names in the "Commands:" section of `rewind [SUB] --help`.
pub fn help_commands(env: &Env, sub: &[&str]) -> Vec<String> {
    let mut args = sub.to_vec();
    args.push("--help");
    let help = stdout_ok(env.run(&args));
    help.lines()
        .skip_while(|l| *l != "Commands:")
        .skip(1)
        .take_while(|l| !l.is_empty())
        .filter(|l| l.starts_with("  ") && !l.starts_with("   "))
        .map(|l| l.split_whitespace().next().unwrap().to_string())
        .filter(|c| c != "help")
        .collect()
}
