//! Process-level pieces of a server: the lock that makes it the only one of its workspace, the
//! peer check of a socket client, and stopping on a signal.

use std::fs::File;
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};

use rewind_api::{ApiError, ErrorKind};

/// The held lock of the workspace's one server; dropping it (or the process dying) frees it.
pub struct ServerLock {
    _file: File,
    info: PathBuf,
    token: Option<PathBuf>,
}

impl ServerLock {
    /// Takes the lock in `state` (the workspace's state directory) and writes where this
    /// server listens (`serve.json`, and its web UI's token in `serve.token`, owner-only);
    /// refuses when another server holds it, saying where that one listens.
    pub fn take(
        state: &Path,
        socket: Option<&Path>,
        watcher: bool,
        web: Option<&crate::WebFront>,
    ) -> Result<ServerLock, ApiError> {
        let io =
            |what: &str, e: std::io::Error| ApiError::new(ErrorKind::Error, format!("{what}: {e}"));
        let file = File::options()
            .create(true)
            .truncate(false)
            .write(true)
            .open(state.join(rewind_api::SERVER_LOCK))
            .map_err(|e| io("opening the server lock", e))?;
        let info = state.join(rewind_api::SERVER_INFO);
        // SAFETY: valid fd.
        if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
            let other: serde_json::Value = std::fs::read(&info)
                .ok()
                .and_then(|b| serde_json::from_slice(&b).ok())
                .unwrap_or_default();
            let mut at = match other["socket"].as_str() {
                Some(s) => format!("listening on {s}"),
                None => "serving its standard input".to_string(),
            };
            if let Some(url) = other["http"].as_str() {
                at.push_str(&format!(" and {url}"));
            }
            return Err(ApiError::new(
                ErrorKind::State,
                format!(
                    "a server already runs for this workspace (pid {}), {at}",
                    other["pid"]
                ),
            )
            .hint("use that server, or stop it first"));
        }
        // The token first: a reader that finds the address finds the token with it.
        let token = match web {
            Some(w) => {
                let path = state.join(rewind_api::SERVER_TOKEN);
                write_private(&path, w.token.as_bytes())
                    .map_err(|e| io("writing serve.token", e))?;
                Some(path)
            }
            None => None,
        };
        let doc = rewind_api::server_info(socket, watcher, web.map(|w| w.url.as_str()));
        std::fs::write(&info, serde_json::to_vec(&doc).expect("serializable"))
            .map_err(|e| io("writing serve.json", e))?;
        Ok(ServerLock {
            _file: file,
            info,
            token,
        })
    }

    /// The files that say where this server listens (and its token), to remove when it stops.
    pub fn files(&self) -> Vec<PathBuf> {
        std::iter::once(self.info.clone())
            .chain(self.token.clone())
            .collect()
    }
}

impl Drop for ServerLock {
    fn drop(&mut self) {
        for f in self.files() {
            let _ = std::fs::remove_file(f);
        }
    }
}

/// Writes `data` to a new file at `path` that only its owner can read (created so, never
/// readable by others even for a moment).
fn write_private(path: &Path, data: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let _ = std::fs::remove_file(path);
    let mut f = File::options()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)?;
    f.write_all(data)
}

/// The uid and pid of the process at the other end of `conn`.
pub fn peer(conn: &UnixStream) -> Option<(u32, u32)> {
    let mut cred = libc::ucred {
        pid: 0,
        uid: 0,
        gid: 0,
    };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: valid fd, and a buffer of the size given.
    let r = unsafe {
        libc::getsockopt(
            conn.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            &mut cred as *mut libc::ucred as *mut libc::c_void,
            &mut len,
        )
    };
    (r == 0).then_some((cred.uid, cred.pid as u32))
}

/// Blocks SIGTERM and SIGINT in this thread and every thread it starts from now on, so that
/// only [`on_stop`]'s thread receives them (children get a fresh mask when spawned).
pub fn block_stop_signals() -> libc::sigset_t {
    // SAFETY: plain signal-set calls on a local set.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGTERM);
        libc::sigaddset(&mut set, libc::SIGINT);
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
        set
    }
}

/// On SIGTERM or SIGINT: runs `stop`, then exits the process with status 0.
pub fn on_stop(set: libc::sigset_t, stop: impl FnOnce() + Send + 'static) {
    std::thread::spawn(move || {
        let mut sig = 0;
        // SAFETY: waits for a signal of a set blocked in every thread.
        unsafe { libc::sigwait(&set, &mut sig) };
        stop();
        std::process::exit(0);
    });
}
