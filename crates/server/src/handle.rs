//! A handle on a started server for a front that runs in the same process (the web UI of
//! `rewind serve --http`): it calls the same operations with the same sessions, file watcher
//! and guard events as a socket client, hears the same events, and its running requests count
//! in the server's drain when it stops.

use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::mpsc;
use std::sync::Arc;
use std::time::Duration;

use rewind_api::{ApiError, ErrorKind, Service};
use serde_json::value::RawValue;
use serde_json::Value;

use crate::connection::{self, Failure};
use crate::events::Sink;
use crate::protocol::{self, Message, Request};
use crate::Shared;

/// See the module's doc. Cheap to clone; every clone is the same server.
#[derive(Clone)]
pub struct Handle {
    shared: Arc<Shared>,
}

impl Handle {
    pub(crate) fn new(shared: Arc<Shared>) -> Handle {
        Handle { shared }
    }

    /// The workspace root.
    pub fn root(&self) -> &Path {
        &self.shared.root
    }

    /// The session of requests that name none (the server's `-s`).
    pub fn session(&self) -> &str {
        &self.shared.session
    }

    /// Whether the server is stopping (takes no new requests).
    pub fn stopping(&self) -> bool {
        self.shared.stopping.load(Ordering::SeqCst)
    }

    /// The answer to one JSON-RPC message (a request or a batch, as a socket client sends it
    /// on a line); `None` when it holds only notifications. `subscribe` is not among its
    /// methods: a front in the process hears events through [`Handle::events`].
    pub fn answer(&self, message: &[u8]) -> Option<Box<RawValue>> {
        match protocol::parse(message) {
            Err(e) => Some(protocol::text(&e)),
            Ok(Message::One(r)) => self.answer_one(r),
            Ok(Message::Batch(rs)) => {
                let answers: Vec<Box<RawValue>> =
                    rs.into_iter().filter_map(|r| self.answer_one(r)).collect();
                (!answers.is_empty())
                    .then(|| serde_json::value::to_raw_value(&answers).expect("JSON text encodes"))
            }
        }
    }

    fn answer_one(&self, r: Result<Request, Value>) -> Option<Box<RawValue>> {
        let r = match r {
            Ok(r) => r,
            Err(e) => return Some(protocol::text(&e)),
        };
        let out = self.call(&r.method, r.params);
        Some(connection::respond(r.id?, &r.method, out))
    }

    fn call(&self, method: &str, mut params: Value) -> Result<Box<RawValue>, Failure> {
        if matches!(method, "subscribe" | "unsubscribe") {
            return Err(Failure::NoMethod);
        }
        let session = connection::take_session(&self.shared, &mut params)?;
        let dir = connection::take_dir(&mut params)?;
        self.with_service_from(&session, dir, |svc| {
            connection::run(&self.shared, svc, &session, method, params)
        })?
    }

    /// Runs `f` with a service of the server acting for `session` (one kept from an earlier
    /// call when there is one), counted as a running request.
    pub fn with_service<R>(
        &self,
        session: &str,
        f: impl FnOnce(&Service) -> R,
    ) -> Result<R, ApiError> {
        self.with_service_from(session, None, f)
    }

    /// [`Handle::with_service`] acting from `dir` (`None`: the root).
    fn with_service_from<R>(
        &self,
        session: &str,
        dir: Option<PathBuf>,
        f: impl FnOnce(&Service) -> R,
    ) -> Result<R, ApiError> {
        if self.stopping() {
            return Err(ApiError::new(ErrorKind::Busy, "the server is stopping"));
        }
        let svc = connection::take_service(&self.shared, session, dir.as_deref(), None)?;
        self.shared.inflight.fetch_add(1, Ordering::SeqCst);
        let under_way = self.shared.wal.as_ref().map(|w| w.busy());
        let out = f(&svc);
        drop(under_way);
        self.shared.inflight.fetch_sub(1, Ordering::SeqCst);
        connection::give_back(&self.shared, (session.to_string(), dir), svc);
        if let Some(w) = &self.shared.wal {
            w.nudge();
        }
        Ok(out)
    }

    /// Subscribes to every event kind (epochs, checkpoints, restores, guard refusals),
    /// whichever process caused them; dropping the subscription ends it.
    pub fn events(&self) -> Events {
        let (tx, rx) = mpsc::channel();
        let id = self.shared.hub.connect(Sink::Channel(tx));
        self.shared.hub.subscribe(
            id,
            crate::events::KINDS.iter().map(|k| k.to_string()).collect(),
        );
        Events {
            shared: self.shared.clone(),
            id,
            rx,
        }
    }
}

/// A subscription to the server's events (see [`Handle::events`]).
pub struct Events {
    shared: Arc<Shared>,
    id: u64,
    rx: mpsc::Receiver<Value>,
}

impl Events {
    /// The next event (`{kind, session, detail}`, the params of a socket client's `event`
    /// notification), waiting at most `wait`; `None` when there was none by then.
    pub fn next(&self, wait: Duration) -> Option<Value> {
        self.rx.recv_timeout(wait).ok()
    }
}

impl Drop for Events {
    fn drop(&mut self) {
        self.shared.hub.disconnect(self.id);
    }
}
