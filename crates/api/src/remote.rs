//! The service of a running `rewind serve`, for fronts that start as short processes (the
//! command line, an agent's hooks) or that should share the server's work (`rewind mcp`):
//! the server keeps the workspace open, its stat cache loaded and its file watcher running, so
//! an operation through it costs what the operation does, not an open of the workspace (a
//! database, the configuration, the stat cache) and, for an opaque epoch, a walk of the tree.
//!
//! [`Client`] is one connection to the server of a workspace (JSON-RPC 2.0 over its Unix
//! socket, one JSON value per line); [`Endpoint`] is "through the server when one runs, else by
//! a service of this process": one `call` by operation name, the same requests and the same
//! result documents either way ([`crate::rpc`]).

use std::cell::{Cell, RefCell};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::time::Duration;

use serde::de::DeserializeOwned;
use serde_json::{json, Value};

use crate::{
    ApiError, Context, EpochBeginRequest, EpochBeginResponse, EpochEndRequest, EpochEndResponse,
    ErrorKind, Recorder, Service,
};

/// Why a call got no answer from the server.
#[derive(Debug)]
pub struct Lost {
    /// The request was written: the server may have run it.
    pub sent: bool,
    /// What failed.
    pub error: std::io::Error,
}

impl Lost {
    fn api_error(&self) -> ApiError {
        ApiError::new(
            ErrorKind::Error,
            format!("the workspace's server: {}", self.error),
        )
        .hint("stop it and run the command again, or set REWIND_NO_SERVER=1")
    }
}

/// A connection to the server of one workspace, acting for one session from one directory.
pub struct Client {
    out: UnixStream,
    input: RefCell<BufReader<UnixStream>>,
    session: String,
    /// The directory requests act from, when it is not the workspace root (the server's
    /// default): relative paths in requests are taken from it.
    dir: Option<PathBuf>,
    next: Cell<u64>,
}

impl Client {
    /// Connects to the server of `ctx`'s workspace, acting for its session from its directory;
    /// `None` when no server runs there (or `REWIND_NO_SERVER` is set): the caller then works
    /// alone.
    pub fn for_workspace(ctx: &Context) -> Option<Client> {
        if std::env::var_os("REWIND_NO_SERVER").is_some_and(|v| !v.is_empty()) {
            return None;
        }
        let root = ctx.root();
        let state = rewind_core::state_dir_of(&rewind_core::rewind_home().ok()?, &root)?;
        let socket = crate::running_server(&state)?.socket?;
        let stream = UnixStream::connect(socket).ok()?;
        stream.set_read_timeout(None).ok()?;
        stream
            .set_write_timeout(Some(Duration::from_secs(30)))
            .ok()?;
        crate::trace::phase("server connected");
        Some(Client {
            input: RefCell::new(BufReader::new(stream.try_clone().ok()?)),
            out: stream,
            session: ctx.session().to_string(),
            dir: (ctx.dir() != root).then(|| ctx.dir().to_path_buf()),
            next: Cell::new(1),
        })
    }

    /// Calls `method` with `params` (an object; the session and directory are added) and
    /// reads its result.
    pub fn call<T: DeserializeOwned>(&self, method: &str, params: Value) -> Result<T, ApiError> {
        let v = self.exchange(method, params).map_err(|l| l.api_error())??;
        serde_json::from_value(v).map_err(|e| {
            Lost {
                sent: true,
                error: std::io::Error::other(e),
            }
            .api_error()
        })
    }

    /// One request and its answer: the operation's result or error, or why there was no
    /// answer.
    pub fn exchange(&self, method: &str, params: Value) -> Result<Result<Value, ApiError>, Lost> {
        let id = self.next.get();
        self.next.set(id + 1);
        let mut params = match params {
            Value::Null => json!({}),
            p => p,
        };
        params["session"] = json!(self.session);
        if let Some(d) = &self.dir {
            params["dir"] = json!(d);
        }
        let mut line = serde_json::to_vec(
            &json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}),
        )
        .expect("serializable");
        line.push(b'\n');
        (&self.out)
            .write_all(&line)
            .map_err(|error| Lost { sent: false, error })?;
        let lost = |error| Lost { sent: true, error };
        let mut input = self.input.borrow_mut();
        loop {
            let mut answer = String::new();
            if input.read_line(&mut answer).map_err(lost)? == 0 {
                return Err(lost(std::io::ErrorKind::UnexpectedEof.into()));
            }
            let v: Value =
                serde_json::from_str(&answer).map_err(|e| lost(std::io::Error::other(e)))?;
            if v.get("id") != Some(&json!(id)) {
                continue; // a notification
            }
            crate::trace::phase(&format!("server: {method}"));
            if let Some(e) = v.get("error") {
                return Ok(Err(error_of(e)));
            }
            return Ok(Ok(v["result"].clone()));
        }
    }
}

/// The service's error a JSON-RPC error carries (its `data` is the error document).
fn error_of(e: &Value) -> ApiError {
    let data = &e["data"];
    let kind = data["kind"]
        .as_str()
        .and_then(ErrorKind::parse)
        .unwrap_or(ErrorKind::Error);
    let message = data["message"]
        .as_str()
        .or(e["message"].as_str())
        .unwrap_or("the server failed")
        .to_string();
    let mut err = ApiError::new(kind, message);
    for h in data["hints"].as_array().into_iter().flatten() {
        if let Some(h) = h.as_str() {
            err = err.hint(h);
        }
    }
    err.data = data.get("data").cloned().filter(|d| !d.is_null());
    err
}

fn epoch_begin_params(req: &EpochBeginRequest) -> Value {
    json!({
        "tool": req.tool,
        "tool_call": req.tool_call,
        "paths": req.paths,
        "process_owned": req.process_owned,
        "note": req.note,
    })
}

fn epoch_end_params(req: &EpochEndRequest) -> Value {
    json!({"epoch": req.epoch, "abort": req.abort})
}

/// The server records the epochs of commands this process runs: owned by this process (the
/// server reads who connected).
impl Recorder for Client {
    fn epoch_begin(&self, req: &EpochBeginRequest) -> Result<EpochBeginResponse, ApiError> {
        self.call("epoch.begin", epoch_begin_params(req))
    }

    fn epoch_end(&self, req: &EpochEndRequest) -> Result<EpochEndResponse, ApiError> {
        self.call("epoch.end", epoch_end_params(req))
    }
}

/// Operations that change nothing a second run would not change the same way: when the
/// server's answer to one is lost, it is run again in this process.
const REPEATABLE: &[&str] = &[
    "status",
    "fsck",
    "workspace.list",
    "worktree.list",
    "worktree.path",
    "log",
    "show",
    "diff",
    "read",
    "check-write",
    "epoch.list",
    "sandbox.check",
];

/// Where a front's operations run: through the workspace's server when one runs (see the
/// module's doc), else by a service of this process, which opens the workspace itself. The
/// same operations by name, with the same parameters and result documents, either way.
///
/// A server that goes away is not an error of the caller's: a request it never got, and a
/// request that changes nothing (a read, the guard's check, a listing) whose answer was lost,
/// run in this process instead, and so does everything after. A request that changes something and whose answer
/// was lost is an error (the server may have run it).
pub struct Endpoint {
    local: Service,
    server: RefCell<Option<Client>>,
}

impl Endpoint {
    /// Operations through the server of `local`'s workspace when one runs (and
    /// `REWIND_NO_SERVER` is not set), else by `local`. Connecting opens nothing: no
    /// database, no configuration.
    pub fn new(local: Service) -> Endpoint {
        let server = Client::for_workspace(local.context());
        Endpoint {
            local,
            server: RefCell::new(server),
        }
    }

    /// Operations by `local` only, whether a server runs or not.
    pub fn local(local: Service) -> Endpoint {
        Endpoint {
            local,
            server: RefCell::new(None),
        }
    }

    /// Whether operations go to a server now.
    pub fn via_server(&self) -> bool {
        self.server.borrow().is_some()
    }

    /// The service of this process (what runs the operations when no server does; for what
    /// must run here, such as a command with this process's streams).
    pub fn service(&self) -> &Service {
        &self.local
    }

    /// Who the operations act for.
    pub fn context(&self) -> &Context {
        self.local.context()
    }

    /// Calls operation `method` with `params` (an object, or `null`): its result document.
    pub fn call(&self, method: &str, params: Value) -> Result<Value, ApiError> {
        let lost = {
            let server = self.server.borrow();
            match server.as_ref().map(|c| c.exchange(method, params.clone())) {
                None => None,
                Some(Ok(answer)) => return answer,
                Some(Err(lost)) => Some(lost),
            }
        };
        if let Some(lost) = lost {
            *self.server.borrow_mut() = None;
            if lost.sent && !repeatable(method, &params) {
                return Err(lost.api_error());
            }
            crate::trace::phase("server lost: working alone");
        }
        crate::rpc::call(&self.local, method, params)
            .unwrap_or_else(|| Err(ApiError::usage(format!("no operation {method}"))))
    }

    /// [`Endpoint::call`], its result read as a `T`.
    pub fn call_as<T: DeserializeOwned>(&self, method: &str, params: Value) -> Result<T, ApiError> {
        let v = self.call(method, params)?;
        serde_json::from_value(v).map_err(|e| {
            ApiError::new(
                ErrorKind::Error,
                format!("reading the result of {method}: {e}"),
            )
        })
    }
}

fn repeatable(method: &str, params: &Value) -> bool {
    REPEATABLE.contains(&method)
        || (method == "sandbox.mode"
            && params.get("set").is_none_or(Value::is_null)
            && params.get("toggle").is_none_or(|t| t == &json!(false)))
}

/// Epochs through the server when one runs: the epochs of commands this process runs are
/// owned by this process either way (the server reads who connected).
impl Recorder for Endpoint {
    fn epoch_begin(&self, req: &EpochBeginRequest) -> Result<EpochBeginResponse, ApiError> {
        if !self.via_server() {
            return Recorder::epoch_begin(&self.local, req);
        }
        self.call_as("epoch.begin", epoch_begin_params(req))
    }

    fn epoch_end(&self, req: &EpochEndRequest) -> Result<EpochEndResponse, ApiError> {
        if !self.via_server() {
            return Recorder::epoch_end(&self.local, req);
        }
        self.call_as("epoch.end", epoch_end_params(req))
    }
}
