//! Notifications: what happened in the workspace, sent to every connection that subscribed.
//!
//! What the op log records (epochs, checkpoints, restores) is read from the op log by one
//! thread ([`follow`]), so a client hears of every process's work, the command line's and
//! other agents' included, not only of this server's clients; a guard refusal leaves no trace
//! in the op log and is sent by the request that was refused. An event is sent after what
//! caused it has committed; a client that reads slowly holds up only the sender writing to it.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rewind_api::{ApiError, Context, ErrorKind, LogRequest, Service};
use serde_json::{json, Value};

use crate::connection::{send, Writer};
use crate::Shared;

/// How often the op log is read for new entries.
pub const FOLLOW_EVERY: Duration = Duration::from_millis(200);

/// The newest entries read each time: more new ones than this between two reads are not all
/// sent (a client that must see everything reads the log).
const FOLLOW_WINDOW: usize = 1000;

/// Every event kind: an epoch settled (or aborted), a checkpoint, a restore or undo applied,
/// a guarded write refused, a workspace setting changed (the sandbox mode).
pub const KINDS: &[&str] = &["epoch", "checkpoint", "restore", "guard", "setting"];

/// One event: its kind, the session, and the operation's result (or the refusal).
pub struct Event {
    kind: &'static str,
    session: String,
    detail: Value,
}

impl Event {
    /// The event a request's failure is, if any: a guarded write refused.
    pub fn refused(method: &str, session: &str, e: &ApiError) -> Option<Event> {
        match method {
            "write" | "edit" | "apply-patch" if e.kind == ErrorKind::Guard => Some(Event {
                kind: "guard",
                session: session.to_string(),
                detail: serde_json::to_value(e).unwrap_or(Value::Null),
            }),
            _ => None,
        }
    }

    /// The event a log entry is, once it is final (an epoch still open is not yet).
    fn of_log_entry(entry: &Value) -> Option<Event> {
        let kind = match (entry["type"].as_str()?, entry["kind"].as_str()) {
            ("checkpoint", _) => "checkpoint",
            ("epoch", _) if entry["state"] == "open" => return None,
            ("epoch", Some("restore")) => "restore",
            ("epoch", _) => "epoch",
            ("setting", _) => "setting",
            _ => return None,
        };
        Some(Event {
            kind,
            session: entry["session"].as_str().unwrap_or_default().to_string(),
            detail: entry.clone(),
        })
    }
}

/// Starts reading the op log every [`FOLLOW_EVERY`] on a thread of its own, publishing each
/// entry not seen before, until the server stops. What is there when this returns is not news.
pub fn follow(shared: Arc<Shared>) {
    let Ok(ctx) = Context::new(&shared.root, &shared.session) else {
        return;
    };
    let svc = Service::new(ctx);
    // Read before the log: a commit in between makes the first poll read the log again.
    let mut commits = svc.commits_seen().ok();
    let mut seen: HashSet<String> = final_entries(&svc)
        .unwrap_or_default()
        .into_iter()
        .map(|(id, _)| id)
        .collect();
    std::thread::spawn(move || {
        while !shared.stopping.load(Ordering::SeqCst) {
            std::thread::sleep(FOLLOW_EVERY);
            // The log (with each epoch's change counts) is read only when something committed
            // since the last read: an idle server does no work.
            let now_commits = svc.commits_seen().ok();
            if now_commits.is_some() && now_commits == commits {
                continue;
            }
            let Some(entries) = final_entries(&svc) else {
                continue;
            };
            commits = now_commits;
            let mut now = HashSet::new();
            for (id, event) in entries {
                if !seen.contains(&id) {
                    shared.hub.publish(&event);
                }
                now.insert(id);
            }
            // Only the window's entries can come back; older ones are forgotten.
            seen = now;
        }
    });
}

/// What tells a log entry from the others: an epoch's or a checkpoint's id; a setting change
/// has none, and its op-log position is unique.
fn entry_key(e: &Value) -> Option<String> {
    match e["id"].as_str() {
        Some(id) => Some(id.to_string()),
        None => Some(format!("pos:{}", e["pos"].as_i64()?)),
    }
}

/// The newest [`FOLLOW_WINDOW`] entries of every session's log that are final, oldest first,
/// by id.
fn final_entries(svc: &Service) -> Option<Vec<(String, Event)>> {
    let log = svc
        .log(&LogRequest {
            all_sessions: true,
            limit: FOLLOW_WINDOW,
        })
        .ok()?;
    let Value::Array(items) = serde_json::to_value(log.items).ok()? else {
        return None;
    };
    Some(
        items
            .iter()
            .rev()
            .filter_map(|e| Some((entry_key(e)?, Event::of_log_entry(e)?)))
            .collect(),
    )
}
/// Where a subscriber's events go.
#[derive(Clone)]
pub enum Sink {
    /// A JSON-RPC connection: each event as an `event` notification, one line.
    Line(Writer),
    /// A front in this process (the web UI's event stream): each event's params
    /// (`{kind, session, detail}`).
    Channel(std::sync::mpsc::Sender<Value>),
}

/// The connections and what each subscribed to.
#[derive(Default)]
pub struct Hub {
    next: AtomicU64,
    conns: Mutex<HashMap<u64, (Sink, Vec<String>)>>,
}

impl Hub {
    /// Registers a connection (subscribed to nothing yet); its id.
    pub fn connect(&self, out: Sink) -> u64 {
        let id = self.next.fetch_add(1, Ordering::SeqCst);
        if let Ok(mut c) = self.conns.lock() {
            c.insert(id, (out, Vec::new()));
        }
        id
    }

    /// Forgets a connection.
    pub fn disconnect(&self, id: u64) {
        if let Ok(mut c) = self.conns.lock() {
            c.remove(&id);
        }
    }

    /// Sets the kinds a connection receives (none: unsubscribed).
    pub fn subscribe(&self, id: u64, kinds: Vec<String>) {
        if let Ok(mut c) = self.conns.lock() {
            if let Some(entry) = c.get_mut(&id) {
                entry.1 = kinds;
            }
        }
    }

    /// Sends `event` to every connection subscribed to its kind.
    pub fn publish(&self, event: &Event) {
        let to: Vec<Sink> = match self.conns.lock() {
            Ok(c) => c
                .values()
                .filter(|(_, kinds)| kinds.iter().any(|k| k == event.kind))
                .map(|(w, _)| w.clone())
                .collect(),
            Err(_) => return,
        };
        let params = json!({"kind": event.kind, "session": event.session, "detail": event.detail});
        let note = crate::protocol::notification("event", params.clone());
        for sink in to {
            match sink {
                Sink::Line(w) => send(&w, &note),
                // A receiver gone is a subscription being dropped: it disconnects itself.
                Sink::Channel(tx) => {
                    let _ = tx.send(params.clone());
                }
            }
        }
    }
}
