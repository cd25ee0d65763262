//! `rewind serve`: the service API as JSON-RPC 2.0, one JSON value per line, over standard
//! input and output or a Unix socket. Every method is an operation of `rewind-api` (see
//! [`rewind_api::rpc`]); the server adds only what a long-running process needs: framing,
//! connections, sessions per request, notifications, one server per workspace, a file
//! watcher its services share (so an opaque epoch costs O(changed paths), see
//! [`rewind_api::LiveWatch`]), and a clean stop.
//!
//! Invariants:
//! - One server per workspace: it holds an exclusive `flock` on `serve.lock` in the
//!   workspace's state directory for its whole life; `serve.json` beside it says where it
//!   listens ([`rewind_api::ServerInfo`], which `status` shows). A second server reads that and
//!   refuses to start.
//! - The socket (default `serve.sock` in the state directory) is made owner-only (0600), and a
//!   peer whose uid is not the server's is refused before anything is read from it.
//! - A stop (SIGTERM, SIGINT, or standard input closing with `--stdio`) takes no new requests,
//!   lets the ones running finish (up to [`DRAIN`]), then removes the socket and exits. A
//!   server killed outright leaves what a killed command leaves: the next command's recovery
//!   finishes it.

mod connection;
mod events;
mod handle;
mod lock;
pub mod protocol;

pub use handle::{Events, Handle};

use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rewind_api::{ApiError, ErrorKind, OPERATIONS};

/// How long a stop waits for running requests.
pub const DRAIN: Duration = Duration::from_secs(30);

/// Where the server listens.
#[derive(Clone, Debug)]
pub enum Transport {
    /// Standard input and output: one client, the process that started it.
    Stdio,
    /// A Unix socket at this path (`None`: `serve.sock` in the workspace's state directory).
    Socket(Option<PathBuf>),
}

/// What to serve and how.
#[derive(Clone, Debug)]
pub struct Options {
    /// The workspace root (registered on first use, as any command does).
    pub root: PathBuf,
    /// The session of requests that name none.
    pub session: String,
    /// Where to listen.
    pub transport: Transport,
    /// A web UI this process serves too (`serve --http`), recorded with where the server
    /// listens so that `rewind ui` finds it.
    pub web: Option<WebFront>,
    /// Run after every checkpoint a client makes whose state is then over its `[retention]
    /// max_bytes`, with the workspace root: `rewind serve` starts a detached `rewind gc --auto`
    /// there (the server runs in whatever program embeds it, so starting processes is the
    /// front's call).
    pub on_gc_due: Option<fn(&Path)>,
}

/// A web front served by the server's process: its address and token.
#[derive(Clone)]
pub struct WebFront {
    /// The address, without the token (`http://127.0.0.1:PORT/`): `serve.json` and `status`
    /// show it.
    pub url: String,
    /// The secret every request must carry; kept in `serve.token`, owner-only.
    pub token: String,
}

impl std::fmt::Debug for WebFront {
    // Never the token: a debug print may end up in a log.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WebFront")
            .field("url", &self.url)
            .finish_non_exhaustive()
    }
}

/// What every connection shares.
pub(crate) struct Shared {
    pub(crate) root: PathBuf,
    pub(crate) session: String,
    /// The file watcher every service of the server shares (`None`: captures walk the tree).
    pub(crate) live: Option<rewind_api::LiveWatch>,
    /// The object ids every service's writers take as stored without asking the index.
    pub(crate) known: Arc<rewind_api::KnownIds>,
    /// Checkpoints the WAL for every service's store, nudged after each request (`None`:
    /// the stores checkpoint in their commits).
    pub(crate) wal: Option<Arc<rewind_api::WalCheckpointer>>,
    pub(crate) hub: events::Hub,
    /// Requests running now.
    pub(crate) inflight: AtomicUsize,
    /// Set by a stop: connections take no further requests.
    pub(crate) stopping: AtomicBool,
    /// Services kept between connections (see [`connection::take_service`]).
    pub(crate) pool: connection::Pool,
    pub(crate) on_gc_due: Option<fn(&Path)>,
}

/// The method names a client may call: the operations and the server's own.
pub fn methods() -> Vec<&'static str> {
    let mut m: Vec<&str> = OPERATIONS.iter().map(|o| o.method).collect();
    m.extend(["subscribe", "unsubscribe"]);
    m
}

/// Runs the server until it is stopped. `ready` is called once it accepts requests, with
/// the socket's path for [`Transport::Socket`] (the command line prints it).
pub fn serve(opts: &Options, ready: impl FnOnce(Option<&Path>)) -> Result<(), ApiError> {
    start(opts)?.run(ready)
}

/// A server that holds its workspace (the lock taken, the watcher armed, events followed)
/// but takes no requests yet: a front in the same process takes a [`Handle`] now, then
/// [`Server::run`] serves.
pub struct Server {
    shared: Arc<Shared>,
    lock: lock::ServerLock,
    socket: Option<PathBuf>,
    signals: libc::sigset_t,
}

/// Starts the server of `opts.root`: refuses when another one runs there. Call it before
/// this process starts any thread (see [`Server`]): stop signals are blocked here for every
/// thread started after.
pub fn start(opts: &Options) -> Result<Server, ApiError> {
    // First, before opening the workspace starts any thread: a thread that does not block
    // them would take a stop signal's default action (the process dies mid-request).
    let signals = lock::block_stop_signals();
    let svc = rewind_api::Service::new(rewind_api::Context::new(&opts.root, &opts.session)?);
    let status = svc.status(&rewind_api::StatusRequest {})?;
    let root = PathBuf::from(&status.root);
    let state = PathBuf::from(&status.state_dir);
    let socket = match &opts.transport {
        Transport::Stdio => None,
        Transport::Socket(p) => Some(p.clone().unwrap_or_else(|| state.join("serve.sock"))),
    };
    let live = rewind_api::LiveWatch::new(&root);
    let lock =
        lock::ServerLock::take(&state, socket.as_deref(), live.is_some(), opts.web.as_ref())?;
    let known = Arc::new(rewind_api::KnownIds::new());
    // Without it (no thread could be started), services checkpoint in their commits.
    let wal = svc.start_wal_checkpointer().ok().map(Arc::new);
    // Armed by a whole-tree capture, which also records what changed while no server ran.
    if let Some(w) = &live {
        let ctx = rewind_api::Context::new(&root, &opts.session)?;
        rewind_api::Service::new(ctx)
            .with_live_watch(w.clone())
            .with_known_ids(known.clone())
            .capture("serve")?;
    }
    let shared = Arc::new(Shared {
        root,
        session: opts.session.clone(),
        live,
        known,
        wal,
        hub: events::Hub::default(),
        inflight: AtomicUsize::new(0),
        stopping: AtomicBool::new(false),
        pool: connection::Pool::default(),
        on_gc_due: opts.on_gc_due,
    });
    events::follow(shared.clone());
    Ok(Server {
        shared,
        lock,
        socket,
        signals,
    })
}

impl Server {
    /// A handle for a front in this process.
    pub fn handle(&self) -> Handle {
        Handle::new(self.shared.clone())
    }

    /// The workspace root.
    pub fn root(&self) -> &Path {
        &self.shared.root
    }

    /// Serves until stopped. `ready` is called once it accepts requests, with the socket's
    /// path for [`Transport::Socket`].
    pub fn run(self, ready: impl FnOnce(Option<&Path>)) -> Result<(), ApiError> {
        let Server {
            shared,
            lock,
            socket,
            signals,
        } = self;
        let files = lock.files();
        match socket {
            None => {
                let stop = shared.clone();
                lock::on_stop(signals, move || {
                    drain(&stop);
                    for f in files {
                        let _ = std::fs::remove_file(f);
                    }
                });
                ready(None);
                let out: connection::Writer = Arc::new(Mutex::new(Box::new(std::io::stdout())));
                connection::serve(&shared, std::io::stdin(), out, None);
                drain(&shared);
                drop(lock);
                Ok(())
            }
            Some(path) => {
                let listener = listen(&path)?;
                let stop = shared.clone();
                let cleanup = path.clone();
                lock::on_stop(signals, move || {
                    drain(&stop);
                    let _ = std::fs::remove_file(&cleanup);
                    for f in files {
                        let _ = std::fs::remove_file(f);
                    }
                });
                ready(Some(&path));
                for conn in listener.incoming() {
                    let Ok(conn) = conn else { continue };
                    if shared.stopping.load(Ordering::SeqCst) {
                        break;
                    }
                    let shared = shared.clone();
                    std::thread::spawn(move || client(&shared, conn));
                }
                drop(lock);
                Ok(())
            }
        }
    }
}

/// Binds the socket, owner-only. The server lock is held, so a file already there is a dead
/// server's.
fn listen(path: &Path) -> Result<UnixListener, ApiError> {
    let _ = std::fs::remove_file(path);
    let listener = UnixListener::bind(path).map_err(|e| {
        ApiError::new(
            ErrorKind::Error,
            format!("cannot listen on {}: {e}", path.display()),
        )
        .hint("give another path with --socket (a socket path is limited to 107 bytes)")
    })?;
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).map_err(|e| {
        ApiError::new(
            ErrorKind::Error,
            format!("cannot make {} owner-only: {e}", path.display()),
        )
    })?;
    Ok(listener)
}

/// One socket client: refused unless it runs as the server's user.
fn client(shared: &Arc<Shared>, conn: UnixStream) {
    let Ok(out) = conn.try_clone() else { return };
    let out: connection::Writer = Arc::new(Mutex::new(Box::new(out)));
    match lock::peer(&conn) {
        // SAFETY: geteuid cannot fail.
        Some((uid, pid)) if uid == unsafe { libc::geteuid() } => {
            connection::serve(shared, conn, out, Some(pid))
        }
        _ => connection::send(
            &out,
            &protocol::error(
                serde_json::Value::Null,
                protocol::INVALID_REQUEST,
                "refused: this server serves only its own user",
                None,
            ),
        ),
    }
}

/// Stops taking requests and waits (bounded) for those running.
fn drain(shared: &Shared) {
    shared.stopping.store(true, Ordering::SeqCst);
    let start = Instant::now();
    while shared.inflight.load(Ordering::SeqCst) > 0 && start.elapsed() < DRAIN {
        std::thread::sleep(Duration::from_millis(10));
    }
    // The stat cache the server's captures kept, newer than `state.bin` until it is written
    // (at most every 10 s): the next command starts from it instead of re-hashing what
    // changed since. Best effort: an older file is a valid cache.
    if let Some(w) = &shared.live {
        if let Ok(ctx) = rewind_api::Context::new(&shared.root, &shared.session) {
            let _ = rewind_api::Service::new(ctx)
                .with_live_watch(w.clone())
                .save_kept_state();
        }
    }
}
