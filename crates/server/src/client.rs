//! A client of a running server, for the command line: `rewind exec` and `epoch begin/end`
//! send their epochs to the workspace's server when one runs, so its watcher makes their
//! captures cost what changed instead of a walk of the tree.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::time::Duration;

use rewind_api::{
    ApiError, Context, EpochBeginRequest, EpochBeginResponse, EpochEndRequest, EpochEndResponse,
    ErrorKind, Recorder,
};
use serde::de::DeserializeOwned;
use serde_json::{json, Value};

/// A connection to the server of one workspace, acting for one session.
pub struct Client {
    out: UnixStream,
    input: std::cell::RefCell<BufReader<UnixStream>>,
    session: String,
    next: std::cell::Cell<u64>,
}

impl Client {
    /// Connects to the server of `ctx`'s workspace, acting for its session; `None` when no
    /// server runs there (or `REWIND_NO_SERVER` is set): the caller then works alone.
    pub fn for_workspace(ctx: &Context) -> Option<Client> {
        if std::env::var_os("REWIND_NO_SERVER").is_some_and(|v| !v.is_empty()) {
            return None;
        }
        let socket = rewind_api::running_server(&ctx.state_dir()?)?.socket?;
        let stream = UnixStream::connect(socket).ok()?;
        stream.set_read_timeout(None).ok()?;
        stream
            .set_write_timeout(Some(Duration::from_secs(30)))
            .ok()?;
        Some(Client {
            input: std::cell::RefCell::new(BufReader::new(stream.try_clone().ok()?)),
            out: stream,
            session: ctx.session().to_string(),
            next: std::cell::Cell::new(1),
        })
    }

    /// Calls `method` with `params` (an object; the session is added) and reads its result.
    pub fn call<T: DeserializeOwned>(
        &self,
        method: &str,
        mut params: Value,
    ) -> Result<T, ApiError> {
        let lost = |e: std::io::Error| {
            ApiError::new(ErrorKind::Error, format!("the workspace's server: {e}"))
                .hint("stop it and run the command again, or set REWIND_NO_SERVER=1")
        };
        let id = self.next.get();
        self.next.set(id + 1);
        params["session"] = json!(self.session);
        let mut line = serde_json::to_vec(
            &json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}),
        )
        .expect("serializable");
        line.push(b'\n');
        (&self.out).write_all(&line).map_err(lost)?;
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
            if let Some(e) = v.get("error") {
                return Err(error_of(e));
            }
            return serde_json::from_value(v["result"].clone())
                .map_err(|e| lost(std::io::Error::other(e)));
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

/// The server records the epochs of commands this process runs: owned by this process (the
/// server reads who connected).
impl Recorder for Client {
    fn epoch_begin(&self, req: &EpochBeginRequest) -> Result<EpochBeginResponse, ApiError> {
        self.call(
            "epoch.begin",
            json!({
                "tool": req.tool,
                "tool_call": req.tool_call,
                "paths": req.paths,
                "process_owned": req.process_owned,
                "note": req.note,
            }),
        )
    }

    fn epoch_end(&self, req: &EpochEndRequest) -> Result<EpochEndResponse, ApiError> {
        self.call("epoch.end", json!({"epoch": req.epoch, "abort": req.abort}))
    }
}
