//! Starting a plain command with `posix_spawn`, which shares this process's memory until the
//! command's `exec` (glibc's `clone(CLONE_VM | CLONE_VFORK)`), instead of std's `fork`.
//!
//! Why: release binaries are linked statically (`.cargo/config.toml`), and a static binary
//! cannot look up the glibc functions std checks for before it uses `posix_spawn`, so every
//! `Command::spawn` forks and copies the page tables of the whole process. A long-running
//! server holding a 100,000-file tree spent 2-3 ms of each `exec` on that fork and on the
//! copy-on-write faults of its own threads after it.
//!
//! What the child gets is what std gives it: the arguments and the current environment, the
//! working directory, standard input from `/dev/null` and two pipes for its output when they
//! are collected (else this process's three streams), `SIGPIPE` at its default action and no
//! signal blocked. Every other descriptor of this process is close-on-exec (std and this crate
//! open them so). A command this cannot start as std would (an environment or descriptor set
//! on the `Command`, no working directory, a standard stream of this process closed) is left
//! to std.

use std::ffi::{CString, OsStr};
use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::ExitStatusExt;
use std::process::{Command, ExitStatus};

/// A started command: its pid, and the read ends of its output pipes when collected.
pub(crate) struct Spawned {
    pid: libc::pid_t,
    pub stdout: Option<File>,
    pub stderr: Option<File>,
}

impl Spawned {
    /// Waits for it to end.
    pub fn wait(&self) -> io::Result<ExitStatus> {
        let mut status = 0;
        loop {
            // SAFETY: waits for our own child; `status` is writable.
            if unsafe { libc::waitpid(self.pid, &mut status, 0) } >= 0 {
                return Ok(ExitStatus::from_raw(status));
            }
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::Interrupted {
                return Err(e);
            }
        }
    }
}

/// Starts `cmd` (its program, arguments and working directory) as the module says, with
/// its output collected into pipes or not; `Ok(None)` when std must start it instead.
pub(crate) fn spawn(cmd: &Command, collect: bool) -> io::Result<Option<Spawned>> {
    let Some(cwd) = cmd.get_current_dir() else {
        return Ok(None);
    };
    if cmd.get_envs().next().is_some() {
        return Ok(None);
    }
    let c = |s: &OsStr| {
        CString::new(s.as_bytes())
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "a NUL byte in the command"))
    };
    let program = c(cmd.get_program())?;
    let mut argv = vec![program.clone()];
    for a in cmd.get_args() {
        argv.push(c(a)?);
    }
    let env: Vec<CString> = std::env::vars_os()
        .filter_map(|(k, v)| {
            let mut kv = k.into_encoded_bytes();
            kv.push(b'=');
            kv.extend_from_slice(v.as_encoded_bytes());
            CString::new(kv).ok()
        })
        .collect();
    let cwd = c(cwd.as_os_str())?;
    let pipes = if collect {
        let (out, err) = (pipe()?, pipe()?);
        // A write end that is one of the standard descriptors (this process had one closed)
        // would keep its close-on-exec flag through `dup2` onto itself.
        if [&out.1, &err.1].iter().any(|w| w.as_raw_fd() <= 2) {
            return Ok(None);
        }
        Some((out, err))
    } else {
        None
    };

    let mut actions = FileActions::new()?;
    check(unsafe {
        // SAFETY: initialised actions, a NUL-terminated path copied by the call.
        libc::posix_spawn_file_actions_addchdir_np(&mut actions.0, cwd.as_ptr())
    })?;
    if let Some(((_, out_w), (_, err_w))) = &pipes {
        // SAFETY: initialised actions; the descriptors and path outlive the spawn.
        unsafe {
            check(libc::posix_spawn_file_actions_addopen(
                &mut actions.0,
                0,
                c"/dev/null".as_ptr(),
                libc::O_RDONLY,
                0,
            ))?;
            check(libc::posix_spawn_file_actions_adddup2(
                &mut actions.0,
                out_w.as_raw_fd(),
                1,
            ))?;
            check(libc::posix_spawn_file_actions_adddup2(
                &mut actions.0,
                err_w.as_raw_fd(),
                2,
            ))?;
        }
    }
    let attrs = Attrs::new()?;

    let ptrs = |v: &[CString]| -> Vec<*mut libc::c_char> {
        v.iter()
            .map(|s| s.as_ptr().cast_mut())
            .chain(std::iter::once(std::ptr::null_mut()))
            .collect()
    };
    let (argv_p, env_p) = (ptrs(&argv), ptrs(&env));
    let mut pid = 0;
    // SAFETY: every pointer is to a live NUL-terminated string or a NULL-terminated array of
    // them; the actions and attributes are initialised. `posix_spawnp` searches PATH as
    // `execvp` does.
    check(unsafe {
        libc::posix_spawnp(
            &mut pid,
            program.as_ptr(),
            &actions.0,
            &attrs.0,
            argv_p.as_ptr(),
            env_p.as_ptr(),
        )
    })?;
    // The write ends close here: the child has its own copies.
    let (stdout, stderr) = match pipes {
        Some(((out_r, _), (err_r, _))) => (Some(File::from(out_r)), Some(File::from(err_r))),
        None => (None, None),
    };
    Ok(Some(Spawned {
        pid,
        stdout,
        stderr,
    }))
}

/// A pipe, both ends close-on-exec: (read, write).
fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0; 2];
    // SAFETY: `fds` has room for the two descriptors.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: both were just opened and are ours.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// A `posix_spawn*` return value (an errno, not -1) as a result.
fn check(r: libc::c_int) -> io::Result<()> {
    match r {
        0 => Ok(()),
        e => Err(io::Error::from_raw_os_error(e)),
    }
}

struct FileActions(libc::posix_spawn_file_actions_t);

impl FileActions {
    fn new() -> io::Result<FileActions> {
        // SAFETY: zeroed storage initialised by the call before any use.
        let mut a = FileActions(unsafe { std::mem::zeroed() });
        check(unsafe { libc::posix_spawn_file_actions_init(&mut a.0) })?;
        Ok(a)
    }
}

impl Drop for FileActions {
    fn drop(&mut self) {
        // SAFETY: initialised in `new`, destroyed once.
        unsafe { libc::posix_spawn_file_actions_destroy(&mut self.0) };
    }
}

/// Attributes that give the child `SIGPIPE`'s default action (this process ignores it, as
/// every Rust program does) and an empty signal mask, as std does.
struct Attrs(libc::posix_spawnattr_t);

impl Attrs {
    fn new() -> io::Result<Attrs> {
        // SAFETY: zeroed storage initialised by the call before any use; the signal sets are
        // initialised by sigemptyset before they are read.
        unsafe {
            let mut a = Attrs(std::mem::zeroed());
            check(libc::posix_spawnattr_init(&mut a.0))?;
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            check(libc::posix_spawnattr_setsigmask(&mut a.0, &set))?;
            libc::sigaddset(&mut set, libc::SIGPIPE);
            check(libc::posix_spawnattr_setsigdefault(&mut a.0, &set))?;
            let flags = libc::POSIX_SPAWN_SETSIGMASK | libc::POSIX_SPAWN_SETSIGDEF;
            check(libc::posix_spawnattr_setflags(
                &mut a.0,
                flags as libc::c_short,
            ))?;
            Ok(a)
        }
    }
}

impl Drop for Attrs {
    fn drop(&mut self) {
        // SAFETY: initialised in `new`, destroyed once.
        unsafe { libc::posix_spawnattr_destroy(&mut self.0) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    fn sh(dir: &std::path::Path, script: &str) -> Command {
        let mut c = Command::new("sh");
        c.args(["-c", script]).current_dir(dir);
        c
    }

    fn read(f: Option<File>) -> String {
        let mut s = String::new();
        f.unwrap().read_to_string(&mut s).unwrap();
        s
    }

    /// Collected: the working directory, empty standard input, both streams and the exit code
    /// come back as std would give them; the environment reaches the command.
    #[test]
    fn collected_output_directory_input_and_code() {
        let dir = tempfile::tempdir().unwrap();
        let script = "pwd; echo \"$PATH\"; cat; echo err >&2; exit 3";
        let mut s = spawn(&sh(dir.path(), script), true)
            .unwrap()
            .expect("spawned");
        let (out, err) = (read(s.stdout.take()), read(s.stderr.take()));
        assert_eq!(s.wait().unwrap().code(), Some(3));
        let want = std::fs::canonicalize(dir.path()).unwrap();
        let path = std::env::var("PATH").unwrap();
        assert_eq!(out, format!("{}\n{path}\n", want.display()));
        assert_eq!(err, "err\n");
        // Not collected: the streams are this process's, the code still comes back.
        let s = spawn(&sh(dir.path(), "exit 7"), false)
            .unwrap()
            .expect("spawned");
        assert!(s.stdout.is_none() && s.stderr.is_none());
        assert_eq!(s.wait().unwrap().code(), Some(7));
    }

    /// The child gets SIGPIPE's default action (this test process ignores it, as Rust
    /// programs do, and a shell cannot undo an ignore it inherits) and no blocked signal.
    #[test]
    fn signals_as_a_fresh_process_has_them() {
        let dir = tempfile::tempdir().unwrap();
        // SAFETY: plain signal-mask calls on this thread, restored below.
        let mut old: libc::sigset_t = unsafe { std::mem::zeroed() };
        unsafe {
            let mut block: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut block);
            libc::sigaddset(&mut block, libc::SIGTERM);
            libc::pthread_sigmask(libc::SIG_BLOCK, &block, &mut old);
        }
        let run = |script: &str| {
            let s = spawn(&sh(dir.path(), script), true)
                .unwrap()
                .expect("spawned");
            s.wait().unwrap()
        };
        let pipe = run("kill -PIPE $$; echo alive");
        let term = run("kill -TERM $$; echo alive");
        // SAFETY: restores the mask saved above.
        unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut()) };
        assert_eq!(pipe.signal(), Some(libc::SIGPIPE), "{pipe:?}");
        assert_eq!(term.signal(), Some(libc::SIGTERM), "{term:?}");
    }

    /// A program that is nowhere is std's error for it; what std alone can do is left to it.
    #[test]
    fn missing_program_and_what_std_starts() {
        let dir = tempfile::tempdir().unwrap();
        let mut c = Command::new("rewind-no-such-program");
        c.current_dir(dir.path());
        let e = spawn(&c, true).err().expect("not started");
        assert_eq!(e.kind(), io::ErrorKind::NotFound, "{e}");
        let mut with_env = sh(dir.path(), "true");
        with_env.env("X", "1");
        assert!(spawn(&with_env, true).unwrap().is_none());
        assert!(spawn(&Command::new("true"), true).unwrap().is_none());
    }
}
