//! Preparing and running the sandboxed process: [`Policy::command`] → [`Sandboxed`] →
//! [`SandboxedChild`]. The descriptors bwrap reads (seccomp program, status channel, empty
//! sources for denied files) are close-on-exec in this process and made inheritable only in
//! the forked child, so concurrent spawns elsewhere in the program never receive them.

use std::ffi::OsString;
use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::time::{Duration, Instant};

use crate::argv;
use crate::config::Mode;
use crate::error::{Error, Result};
use crate::ghost;
use crate::policy::Policy;
use crate::preflight;

/// Above this many bytes of options, they go through `--args FD` instead of argv.
const ARGV_INLINE_MAX: usize = 64 * 1024;
/// bubblewrap refuses more than 9000 arguments (its MAX_ARGS), even through `--args`.
const MAX_BWRAP_ARGS: usize = 8900;

fn memfd(name: &str, data: &[u8]) -> Result<OwnedFd> {
    let cname = std::ffi::CString::new(name).expect("no NUL");
    // SAFETY: memfd_create with a valid C string; the result is checked.
    let fd = unsafe { libc::memfd_create(cname.as_ptr(), libc::MFD_CLOEXEC) };
    if fd < 0 {
        return Err(Error::io(
            "memfd_create",
            name,
            std::io::Error::last_os_error(),
        ));
    }
    // SAFETY: fd was just created and is owned here.
    let mut f = unsafe { File::from_raw_fd(fd) };
    f.write_all(data)
        .map_err(|e| Error::io("writing", name, e))?;
    // SAFETY: rewind the descriptor so bwrap reads from the start.
    unsafe { libc::lseek(f.as_raw_fd(), 0, libc::SEEK_SET) };
    Ok(f.into())
}

fn pipe() -> Result<(File, OwnedFd)> {
    let mut fds = [0; 2];
    // SAFETY: pipe2 into a 2-element array; checked.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(Error::io("pipe", "status", std::io::Error::last_os_error()));
    }
    // SAFETY: both descriptors are fresh and owned here.
    unsafe { Ok((File::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1]))) }
}

/// In a forked child about to exec: marks every descriptor above standard error close-on-exec,
/// then clears the flag on `keep`. Async-signal-safe: system calls only, no allocation.
fn inherit_only(keep: &[RawFd]) -> std::io::Result<()> {
    // SAFETY: plain system calls on descriptor numbers; none is dereferenced.
    unsafe {
        // Linux ≥ 5.11. Close-on-exec rather than closed: std's exec-error pipe (already
        // close-on-exec) must stay open until the exec.
        let r = libc::syscall(
            libc::SYS_close_range,
            3u32,
            u32::MAX,
            libc::CLOSE_RANGE_CLOEXEC,
        );
        if r != 0 {
            // Older kernels: every number up to the descriptor limit (a descriptor opened
            // before the limit was lowered can lie above the soft one, so the hard one).
            let mut lim = libc::rlimit {
                rlim_cur: 0,
                rlim_max: 0,
            };
            if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            let top = lim.rlim_max.max(lim.rlim_cur).min(1 << 20) as RawFd;
            for fd in 3..top {
                libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC); // EBADF: not open
            }
        }
        for &fd in keep {
            if libc::fcntl(fd, libc::F_SETFD, 0) != 0 {
                return Err(std::io::Error::last_os_error());
            }
        }
    }
    Ok(())
}

/// `name` resolved like execvp would inside the sandbox (same PATH, same files).
fn find_command(program: &OsString, path_var: Option<&OsString>, cwd: &Path) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let runnable = |p: &Path| {
        std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    let p = Path::new(program);
    let found = if p.as_os_str().is_empty() {
        false
    } else if p.as_os_str().to_string_lossy().contains('/') {
        runnable(&cwd.join(p))
    } else {
        path_var.is_some_and(|pv| std::env::split_paths(pv).any(|d| runnable(&cwd.join(d).join(p))))
    };
    if found {
        Ok(())
    } else {
        Err(Error::CommandNotFound(
            program.to_string_lossy().into_owned(),
        ))
    }
}

/// A prepared, not yet started, sandboxed command. Configure stdio through
/// [`Sandboxed::stdin`] & co., then [`Sandboxed::spawn`] or [`Sandboxed::status`].
#[derive(Debug)]
pub struct Sandboxed {
    cmd: Command,
    program: PathBuf,
    args: Vec<OsString>,
    /// Descriptors bwrap must inherit; closed here after spawn.
    keep: Vec<OwnedFd>,
    status: Option<File>,
    session: Option<ghost::Session>,
}

impl Sandboxed {
    /// True when the command runs under bubblewrap (false only for `danger-full-access`).
    pub fn is_sandboxed(&self) -> bool {
        self.status.is_some()
    }

    /// The program that will be started (`bwrap`, or the command itself when unwrapped).
    pub fn program(&self) -> &Path {
        &self.program
    }

    /// Its arguments, e.g. to log the exact bwrap invocation.
    pub fn args(&self) -> &[OsString] {
        &self.args
    }

    /// Sets one variable for the command on top of the scrubbed environment. It is set on the
    /// bwrap process, so it is readable at `/proc/1/environ` inside: never pass a secret.
    pub fn env(
        &mut self,
        key: impl AsRef<std::ffi::OsStr>,
        val: impl AsRef<std::ffi::OsStr>,
    ) -> &mut Self {
        self.cmd.env(key, val);
        self
    }

    /// The command's standard input, as [`std::process::Command::stdin`].
    pub fn stdin(&mut self, s: impl Into<Stdio>) -> &mut Self {
        self.cmd.stdin(s);
        self
    }
    /// The command's standard output, as [`std::process::Command::stdout`].
    pub fn stdout(&mut self, s: impl Into<Stdio>) -> &mut Self {
        self.cmd.stdout(s);
        self
    }
    /// The command's standard error, as [`std::process::Command::stderr`].
    pub fn stderr(&mut self, s: impl Into<Stdio>) -> &mut Self {
        self.cmd.stderr(s);
        self
    }

    /// Starts it. The placeholders and lock are held by the returned child until it is reaped.
    ///
    /// Under bubblewrap, only standard input, output and error and bwrap's own control
    /// descriptors reach bwrap, and bwrap passes on only the first three: every other
    /// descriptor of this process is made close-on-exec in the forked child, including ones
    /// the caller opened without `O_CLOEXEC` (`exec 9>>/outside/log` in a shell). An inherited
    /// descriptor is a capability the mount namespace cannot take back: a file descriptor
    /// writes to its file and a directory descriptor creates files beside it
    /// (`openat(fd, "x", O_CREAT)`, or `/proc/self/fd/N/x`) wherever they are. Unwrapped
    /// (`danger-full-access`) the command inherits what any child would.
    pub fn spawn(mut self) -> Result<SandboxedChild> {
        if self.is_sandboxed() {
            let keep: Vec<RawFd> = self.keep.iter().map(|f| f.as_raw_fd()).collect();
            // SAFETY: runs in the forked child before exec; it only makes async-signal-safe
            // system calls (close_range, fcntl, getrlimit) and allocates nothing.
            unsafe {
                self.cmd.pre_exec(move || inherit_only(&keep));
            }
        }
        let child = self.cmd.spawn().map_err(|e| {
            if self.status.is_some() && e.kind() == std::io::ErrorKind::NotFound {
                Error::BwrapMissing {
                    searched: format!("{} disappeared: {e}", self.program.display()),
                }
            } else {
                Error::io("starting", &self.program, e)
            }
        })?;
        self.keep.clear(); // our copies of bwrap's descriptors (incl. the status write end)
        Ok(SandboxedChild {
            child: Some(child),
            status: self.status.take(),
            session: self.session.take(),
        })
    }

    /// Spawns and waits.
    pub fn status(self) -> Result<ExitStatus> {
        self.spawn()?.wait()
    }

    /// Spawns with stdout/stderr captured and stdin closed, and waits.
    pub fn output(mut self) -> Result<Output> {
        self.stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        self.spawn()?.wait_with_output()
    }
}

/// A running sandboxed command. Waiting reports whether bubblewrap actually started the
/// command; dropping it unwaited kills it (and with it the whole sandbox).
#[derive(Debug)]
pub struct SandboxedChild {
    child: Option<Child>,
    status: Option<File>,
    session: Option<ghost::Session>,
}

impl SandboxedChild {
    /// The process id of bwrap (or of the command when unwrapped).
    pub fn id(&self) -> u32 {
        self.child.as_ref().map_or(0, Child::id)
    }

    /// The underlying child, e.g. to take its stdin/stdout pipes. Wait through `self`.
    pub fn child_mut(&mut self) -> &mut Child {
        self.child.as_mut().expect("child present until reaped")
    }

    /// Kills bwrap; `--die-with-parent` and the PID namespace take everything inside with it.
    pub fn kill(&mut self) -> Result<()> {
        if let Some(c) = self.child.as_mut() {
            let _ = c.kill();
        }
        Ok(())
    }

    fn finish(&mut self, st: ExitStatus) -> Result<ExitStatus> {
        self.child = None;
        let started = match self.status.take() {
            None => true,
            Some(mut f) => {
                let mut text = String::new();
                let _ = f.read_to_string(&mut text);
                text.contains("\"exit-code\"")
            }
        };
        // Placeholders go away (if last) before the caller looks at the workspace.
        self.session = None;
        if started {
            Ok(st)
        } else {
            Err(Error::Unavailable {
                what: "bubblewrap could not set up the sandbox, the command was not run (its reason is printed above)".into(),
                hint: "run `rewind sandbox check`".into(),
            })
        }
    }

    /// Waits for the command; `Err` if bubblewrap failed before running it.
    pub fn wait(&mut self) -> Result<ExitStatus> {
        let st = self
            .child_mut()
            .wait()
            .map_err(|e| Error::io("waiting for", "sandbox", e))?;
        self.finish(st)
    }

    /// Waits at most `limit`; `Ok(None)` means it was still running and has been killed.
    pub fn wait_timeout(&mut self, limit: Duration) -> Result<Option<ExitStatus>> {
        let start = Instant::now();
        loop {
            if let Some(st) = self
                .child_mut()
                .try_wait()
                .map_err(|e| Error::io("waiting for", "sandbox", e))?
            {
                return self.finish(st).map(Some);
            }
            if start.elapsed() >= limit {
                self.kill()?;
                let st = self
                    .child_mut()
                    .wait()
                    .map_err(|e| Error::io("waiting for", "sandbox", e))?;
                let _ = self.finish(st);
                return Ok(None);
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// Waits, collecting piped stdout/stderr.
    pub fn wait_with_output(mut self) -> Result<Output> {
        let child = self.child.take().expect("child present until reaped");
        let out = child
            .wait_with_output()
            .map_err(|e| Error::io("waiting for", "sandbox", e))?;
        self.finish(out.status)?;
        Ok(out)
    }
}

impl Drop for SandboxedChild {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Policy {
    /// Prepares `argv` (program and arguments) to run under this policy, starting in `cwd`
    /// (if inside the workspace; else the workspace root).
    ///
    /// Checks the platform and bubblewrap (present, ≥ 0.8.0), resolves every path, creates
    /// placeholders for missing protected paths, builds the seccomp program and the bwrap
    /// argv, and scrubs the environment. Nothing runs until [`Sandboxed::spawn`]. In
    /// `danger-full-access` the command is returned unwrapped, with the caller's environment.
    pub fn command<I, S>(&self, argv: I, cwd: Option<&Path>) -> Result<Sandboxed>
    where
        I: IntoIterator<Item = S>,
        S: Into<OsString>,
    {
        let argv: Vec<OsString> = argv.into_iter().map(Into::into).collect();
        let Some(program) = argv.first().cloned() else {
            return Err(Error::CommandNotFound(String::new()));
        };
        let cwd = self.cwd_for(cwd);
        if self.mode() == Mode::DangerFullAccess {
            let mut cmd = Command::new(&program);
            cmd.args(&argv[1..]).current_dir(&cwd);
            return Ok(Sandboxed {
                cmd,
                program: program.into(),
                args: argv[1..].to_vec(),
                keep: vec![],
                status: None,
                session: None,
            });
        }
        preflight::platform(std::env::consts::OS, std::env::consts::ARCH)?;
        let bwrap = preflight::find_bwrap(self.bwrap(), preflight::host_path().as_deref())?;
        preflight::check_version(&bwrap)?;

        let env = self.environment();
        let path_var = env.iter().find(|(k, _)| k == "PATH").map(|(_, v)| v);
        find_command(&program, path_var, &cwd)?;

        let session = ghost::Session::open(self.state_dir())?;
        let hide = vec![session.dir().to_path_buf()];
        let plan = self.plan(&cwd, |p, dir| session.create(p, dir), &hide)?;

        let seccomp = memfd(
            "rewind-seccomp",
            &crate::seccomp::program_bytes(self.network())?,
        )?;
        let (status_r, status_w) = pipe()?;
        let mut keep = vec![];
        let mut fds = argv::Fds {
            seccomp: seccomp.as_raw_fd(),
            json_status: status_w.as_raw_fd(),
            deny_files: vec![],
        };
        keep.push(seccomp);
        keep.push(status_w);
        for _ in &plan.deny_files {
            let empty = memfd("rewind-deny", b"")?;
            fds.deny_files.push(empty.as_raw_fd());
            keep.push(empty);
        }
        let options = argv::options(&plan, &fds);
        if options.len() > MAX_BWRAP_ARGS {
            return Err(Error::setting(
                "sandbox.deny_read",
                format!("{} entries", plan.deny_dirs.len() + plan.deny_files.len()),
                format!("too many paths for bubblewrap ({} arguments, it accepts {MAX_BWRAP_ARGS}); deny a few parent directories instead", options.len()),
            ));
        }
        let mut args: Vec<OsString> = Vec::new();
        if options.iter().map(|o| o.len() + 1).sum::<usize>() > ARGV_INLINE_MAX {
            // Large deny lists: pass the options NUL-separated through a descriptor.
            let mut blob = Vec::new();
            for o in &options {
                blob.extend_from_slice(std::os::unix::ffi::OsStrExt::as_bytes(o.as_os_str()));
                blob.push(0);
            }
            let fd = memfd("rewind-args", &blob)?;
            args.push("--args".into());
            args.push(fd.as_raw_fd().to_string().into());
            keep.push(fd);
        } else {
            args.extend(options);
        }
        args.push("--".into());
        args.extend(argv);

        let mut cmd = Command::new(&bwrap);
        cmd.args(&args).env_clear().envs(env).current_dir("/");
        Ok(Sandboxed {
            cmd,
            program: bwrap,
            args,
            keep,
            status: Some(status_r),
            session: Some(session),
        })
    }

    /// `rewind sandbox check`: platform, bubblewrap and its version, user namespaces, and a
    /// trial run of `true` under this policy (workspace-write when the policy is unwrapped).
    pub fn preflight(&self) -> Result<preflight::Report> {
        let mut checks = Vec::new();
        preflight::platform(std::env::consts::OS, std::env::consts::ARCH)?;
        checks.push((
            "platform".into(),
            format!("{}/{}", std::env::consts::OS, std::env::consts::ARCH),
        ));
        let bwrap = preflight::find_bwrap(self.bwrap(), preflight::host_path().as_deref())?;
        let version = preflight::check_version(&bwrap)?;
        checks.push((
            "bubblewrap".into(),
            format!("{} {version}", bwrap.display()),
        ));
        let mut trial = self.clone();
        if trial.mode() == Mode::DangerFullAccess {
            trial.set_mode(Mode::WorkspaceWrite);
        }
        let mut cmd = trial.command(["true"], None)?;
        cmd.stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn()?;
        let mut err = String::new();
        if let Some(mut e) = child.child_mut().stderr.take() {
            let _ = e.read_to_string(&mut err);
        }
        match child.wait_timeout(Duration::from_secs(20)) {
            Ok(Some(st)) if st.success() => {
                checks.push((
                    "trial run".into(),
                    format!("ok ({} mode, seccomp filter installed)", trial.mode()),
                ));
            }
            Ok(Some(st)) => {
                return Err(Error::Unavailable {
                    what: format!("the trial run `bwrap … true` failed ({st}): {}", err.trim()),
                    hint: preflight::namespace_hint(),
                })
            }
            Ok(None) => {
                return Err(Error::Unavailable {
                    what: "the trial run `bwrap … true` did not finish within 20s".into(),
                    hint: String::new(),
                })
            }
            Err(Error::Unavailable { .. }) => {
                return Err(Error::Unavailable {
                    what: format!("bubblewrap could not create the sandbox: {}", err.trim()),
                    hint: preflight::namespace_hint(),
                })
            }
            Err(e) => return Err(e),
        }
        Ok(preflight::Report {
            bwrap,
            version,
            checks,
        })
    }
}
