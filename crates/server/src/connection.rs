//! One client: read a message per line, run its requests through the service, answer each,
//! and send it the events it subscribed to. A connection's requests run one after another, in
//! the order they came; connections run side by side.

use std::collections::HashMap;
use std::io::{BufRead, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use rewind_api::{ApiError, Context, ErrorKind, Service};
use serde::Serialize;
use serde_json::value::RawValue;
use serde_json::{json, Value};

use crate::events::Event;
use crate::protocol::{self, Message, Request};
use crate::Shared;

/// Where a connection's answers and notifications go; shared with the event hub.
pub type Writer = Arc<Mutex<Box<dyn Write + Send>>>;

/// Serves one client until it closes its side (or the server stops). `peer`: the client's
/// process, when it is another one (a socket's): epochs it asks to own are owned by it.
pub fn serve(shared: &Arc<Shared>, input: impl Read, out: Writer, peer: Option<u32>) {
    let id = shared.hub.connect(crate::events::Sink::Line(out.clone()));
    let mut conn = Connection {
        shared: shared.clone(),
        id,
        out,
        peer,
        services: HashMap::new(),
    };
    let mut input = std::io::BufReader::new(input);
    let mut line = Vec::new();
    loop {
        line.clear();
        match read_line(&mut input, &mut line) {
            Ok(Line::End) => break,
            Ok(Line::TooLong) => conn.send(&protocol::error(
                Value::Null,
                protocol::INVALID_REQUEST,
                &format!(
                    "message too large: the limit is {} bytes per line",
                    protocol::MAX_MESSAGE
                ),
                None,
            )),
            Ok(Line::Text) if line.iter().all(u8::is_ascii_whitespace) => {}
            Ok(Line::Text) => conn.message(&line),
            Err(_) => break,
        }
        if shared.stopping.load(Ordering::SeqCst) {
            break;
        }
    }
    shared.hub.disconnect(id);
}

enum Line {
    Text,
    TooLong,
    End,
}

/// Reads up to a newline, at most [`protocol::MAX_MESSAGE`] bytes kept; a longer line is
/// read to its end and dropped.
fn read_line(input: &mut impl BufRead, line: &mut Vec<u8>) -> std::io::Result<Line> {
    let limit = protocol::MAX_MESSAGE as u64 + 1;
    let n = input.by_ref().take(limit).read_until(b'\n', line)?;
    if n == 0 {
        return Ok(Line::End);
    }
    if line.len() as u64 == limit && line.last() != Some(&b'\n') {
        loop {
            let buf = input.fill_buf()?;
            if buf.is_empty() {
                break;
            }
            match buf.iter().position(|b| *b == b'\n') {
                Some(i) => {
                    input.consume(i + 1);
                    break;
                }
                None => {
                    let len = buf.len();
                    input.consume(len);
                }
            }
        }
        return Ok(Line::TooLong);
    }
    Ok(Line::Text)
}

struct Connection {
    shared: Arc<Shared>,
    id: u64,
    out: Writer,
    peer: Option<u32>,
    /// One service per session (and directory) this client acts for: taken from the pool or
    /// opened at its first request, given back when the client goes.
    services: HashMap<Key, Service>,
}

impl Drop for Connection {
    fn drop(&mut self) {
        for (key, svc) in self.services.drain() {
            give_back(&self.shared, key, svc);
        }
    }
}

/// Who a service acts for: a session, from a directory (`None`: the root).
pub(crate) type Key = (String, Option<PathBuf>);

/// Services kept between connections, by whom they act for. Each opened the workspace once:
/// a client that connects for one request (an agent's hook, a command line) finds it open.
#[derive(Default)]
pub(crate) struct Pool(Mutex<Vec<(Key, Service)>>);

/// The most services the pool keeps (the oldest goes first).
const POOLED: usize = 8;

/// A service of the server for `session` from `dir`, acting for requests of `peer`: one the
/// pool kept, if it can still serve as it is, else a new one.
pub(crate) fn take_service(
    shared: &Shared,
    session: &str,
    dir: Option<&Path>,
    peer: Option<u32>,
) -> Result<Service, ApiError> {
    let kept = shared.pool.0.lock().ok().and_then(|mut p| {
        let i = p
            .iter()
            .rposition(|(k, _)| k.0 == session && k.1.as_deref() == dir)?;
        Some(p.remove(i).1)
    });
    if let Some(svc) = kept.filter(Service::is_reusable) {
        return Ok(svc.for_peer(peer));
    }
    let mut ctx = context(shared, dir, session)?;
    if let Some(pid) = peer {
        ctx = ctx.with_peer(pid);
    }
    Ok(new_service(shared, ctx))
}

/// Keeps `svc` for the next client acting for `key`, if it can serve one.
pub(crate) fn give_back(shared: &Shared, key: Key, svc: Service) {
    if !svc.is_reusable() || shared.stopping.load(Ordering::SeqCst) {
        return;
    }
    if let Ok(mut p) = shared.pool.0.lock() {
        if p.len() >= POOLED {
            p.remove(0);
        }
        p.push((key, svc));
    }
}

impl Connection {
    fn send(&self, v: &(impl Serialize + ?Sized)) {
        send(&self.out, v);
    }

    fn message(&mut self, line: &[u8]) {
        rewind_api::trace::phase("rpc: message read");
        let shared = self.shared.clone();
        // The WAL thread's fold and checkpoint wait until requests are over for a while.
        let under_way = shared.wal.as_ref().map(|w| w.busy());
        match protocol::parse(line) {
            Err(e) => self.send(&e),
            Ok(Message::One(r)) => {
                if let Some(answer) = self.answer(r) {
                    self.send(&answer);
                }
            }
            Ok(Message::Batch(rs)) => {
                let answers: Vec<Box<RawValue>> =
                    rs.into_iter().filter_map(|r| self.answer(r)).collect();
                if !answers.is_empty() {
                    self.send(&answers);
                }
            }
        }
        drop(under_way);
        rewind_api::trace::phase("rpc: answered");
        // After the answer went out: a checkpoint it made due is no client's wait.
        if let Some(w) = &self.shared.wal {
            w.nudge();
        }
    }

    /// The response to one request (`None` for a notification).
    fn answer(&mut self, r: Result<Request, Value>) -> Option<Box<RawValue>> {
        let r = match r {
            Ok(r) => r,
            Err(e) => return Some(protocol::text(&e)),
        };
        self.shared.inflight.fetch_add(1, Ordering::SeqCst);
        let out = self.call(&r.method, r.params);
        self.shared.inflight.fetch_sub(1, Ordering::SeqCst);
        Some(respond(r.id?, &r.method, out))
    }

    fn call(&mut self, method: &str, mut params: Value) -> Result<Box<RawValue>, Failure> {
        match method {
            "subscribe" => {
                let kinds = kinds(&params)?;
                self.shared.hub.subscribe(self.id, kinds.clone());
                return Ok(protocol::text(&json!({ "subscribed": kinds })));
            }
            "unsubscribe" => {
                self.shared.hub.subscribe(self.id, Vec::new());
                return Ok(protocol::text(&json!({ "subscribed": [] })));
            }
            _ => {}
        }
        let session = take_session(&self.shared, &mut params)?;
        let dir = take_dir(&mut params)?;
        let key = (session.clone(), dir.clone());
        let svc = match self.services.get(&key) {
            Some(s) => s,
            None => {
                let svc = take_service(&self.shared, &session, dir.as_deref(), self.peer)?;
                self.services.entry(key).or_insert(svc)
            }
        };
        run(&self.shared, svc, &session, method, params)
    }
}

/// The page cache of each service's database connection. SQLite keeps every page a
/// connection writes in its cache up to the cache's bound (16 MiB by default): under 50
/// clients the server's private memory grew by 11 MB a minute, toward 50 times that bound. A
/// service reads the database through its mapping, its captures are the watcher's few paths
/// and it appends its new index rows (the WAL thread folds them, on a connection of its own):
/// 512 KiB holds what a request writes (a 1,000-file epoch measured no slower than with
/// 16 MiB), and 50 clients' caches hold 25 MiB at most. Freeing the cache after every request
/// instead made that epoch 5 ms slower: it read its pages again each time.
const SERVICE_PAGE_CACHE: u64 = 512 << 10;

/// A service of the server: sharing its file watcher, if it has one.
pub(crate) fn new_service(shared: &Shared, ctx: Context) -> Service {
    let mut svc = Service::new(ctx)
        .with_known_ids(shared.known.clone())
        .with_page_cache(SERVICE_PAGE_CACHE);
    if let Some(w) = &shared.wal {
        svc = svc.with_wal_checkpointer(w.clone());
    }
    match &shared.live {
        Some(w) => svc.with_live_watch(w.clone()),
        None => svc,
    }
}

/// The session a request acts for: its `session` param (taken out of the params), else the
/// server's.
pub(crate) fn take_session(shared: &Shared, params: &mut Value) -> Result<String, Failure> {
    match params.as_object_mut().and_then(|o| o.remove("session")) {
        None | Some(Value::Null) => Ok(shared.session.clone()),
        Some(Value::String(s)) => Ok(s),
        Some(_) => Err(Failure::Api(ApiError::usage(
            "invalid params: \"session\" must be a string",
        ))),
    }
}

/// The directory a request acts from: its `dir` param (taken out of the params), else the
/// workspace root. Relative paths in the request are taken from it, as the command line takes
/// them from its `-C DIR`.
pub(crate) fn take_dir(params: &mut Value) -> Result<Option<PathBuf>, Failure> {
    match params.as_object_mut().and_then(|o| o.remove("dir")) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(PathBuf::from(s))),
        Some(_) => Err(Failure::Api(ApiError::usage(
            "invalid params: \"dir\" must be a string",
        ))),
    }
}

/// The context of a request for `session` from `dir` (default: the root), which must be in
/// this server's workspace (not in another one registered inside it).
pub(crate) fn context(
    shared: &Shared,
    dir: Option<&Path>,
    session: &str,
) -> Result<Context, ApiError> {
    let Some(dir) = dir else {
        return Context::new(&shared.root, session);
    };
    let ctx = Context::new(dir, session)?;
    if ctx.root() != shared.root {
        return Err(ApiError::usage(format!(
            "{} is not in this server's workspace {}",
            dir.display(),
            shared.root.display()
        ))
        .hint("connect to the server of that directory's workspace"));
    }
    Ok(ctx)
}

/// Runs operation `method` on `svc` (acting for `session`), telling subscribers of a guard
/// refusal.
pub(crate) fn run(
    shared: &Shared,
    svc: &Service,
    session: &str,
    method: &str,
    params: Value,
) -> Result<Box<RawValue>, Failure> {
    let out = rewind_api::rpc::call_raw(svc, method, params).ok_or(Failure::NoMethod)?;
    if let Some(event) = out
        .as_ref()
        .err()
        .and_then(|e| Event::refused(method, session, e))
    {
        shared.hub.publish(&event);
    }
    if method == "checkpoint" && out.is_ok() {
        if let Some(start_gc) = &shared.on_gc_due {
            if svc.gc_due().unwrap_or(false) {
                start_gc(&shared.root);
            }
        }
    }
    Ok(out?)
}

/// The response to request `id` for `method`, from what running it gave.
pub(crate) fn respond(
    id: Value,
    method: &str,
    out: Result<Box<RawValue>, Failure>,
) -> Box<RawValue> {
    let error = match out {
        Ok(v) => return protocol::result(&id, &v),
        Err(Failure::NoMethod) => protocol::error(
            id,
            protocol::METHOD_NOT_FOUND,
            &format!("method not found: {method}"),
            Some(json!({"methods": crate::methods()})),
        ),
        Err(Failure::Api(e)) => {
            let mut data = serde_json::to_value(&e).unwrap_or(Value::Null);
            data["exit_code"] = json!(e.kind.exit_code());
            protocol::error(id, e.kind.jsonrpc_code(), &e.message, Some(data))
        }
    };
    protocol::text(&error)
}

/// Why a call has no result.
pub(crate) enum Failure {
    NoMethod,
    Api(ApiError),
}

impl From<ApiError> for Failure {
    fn from(e: ApiError) -> Failure {
        Failure::Api(e)
    }
}

/// The event kinds a `subscribe` asks for (`kinds`, default all).
fn kinds(params: &Value) -> Result<Vec<String>, Failure> {
    let bad = || {
        Failure::Api(
            ApiError::new(
                ErrorKind::Usage,
                "invalid params: \"kinds\" is a list of event kinds",
            )
            .hint(format!("the kinds: {}", crate::events::KINDS.join(", "))),
        )
    };
    match params.get("kinds") {
        None | Some(Value::Null) => {
            Ok(crate::events::KINDS.iter().map(|k| k.to_string()).collect())
        }
        Some(Value::Array(a)) => a
            .iter()
            .map(|k| match k.as_str() {
                Some(k) if crate::events::KINDS.contains(&k) => Ok(k.to_string()),
                _ => Err(bad()),
            })
            .collect(),
        Some(_) => Err(bad()),
    }
}

/// Writes one message and a newline, whole (a writer's lock is held for the line).
pub fn send(out: &Writer, v: &(impl Serialize + ?Sized)) {
    let mut line = serde_json::to_vec(v).unwrap_or_default();
    line.push(b'\n');
    if let Ok(mut w) = out.lock() {
        let _ = w.write_all(&line).and_then(|_| w.flush());
    }
}
