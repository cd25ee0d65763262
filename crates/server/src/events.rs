//! Notifications: what happened in the workspace, sent to every connection that subscribed.
//! An event is sent after the operation that caused it has committed; a client that reads
//! slowly holds up only the sender writing to it.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use rewind_api::{ApiError, ErrorKind};
use serde_json::{json, Value};

use crate::connection::{send, Writer};

/// Every event kind: an epoch settled (or aborted), a checkpoint, a restore or undo applied,
/// a guarded write refused.
pub const KINDS: &[&str] = &["epoch", "checkpoint", "restore", "guard"];

/// One event: its kind, the session, and the operation's result (or the refusal).
pub struct Event {
    kind: &'static str,
    session: String,
    detail: Value,
}

impl Event {
    /// The event an operation's outcome is, if any.
    pub fn of(method: &str, session: &str, out: &Result<Value, ApiError>) -> Option<Event> {
        let kind = match (method, out) {
            ("epoch.end" | "exec" | "write" | "edit", Ok(_)) => "epoch",
            ("apply-patch", Ok(v)) if v.get("id").is_some() => "epoch",
            ("checkpoint", Ok(_)) => "checkpoint",
            ("restore" | "undo", Ok(v)) if v.get("applied") == Some(&json!(true)) => "restore",
            ("write" | "edit" | "apply-patch", Err(e)) if e.kind == ErrorKind::Guard => "guard",
            _ => return None,
        };
        let detail = match out {
            Ok(v) => v.clone(),
            Err(e) => serde_json::to_value(e).unwrap_or(Value::Null),
        };
        Some(Event {
            kind,
            session: session.to_string(),
            detail,
        })
    }
}

/// The connections and what each subscribed to.
#[derive(Default)]
pub struct Hub {
    next: AtomicU64,
    conns: Mutex<HashMap<u64, (Writer, Vec<String>)>>,
}

impl Hub {
    /// Registers a connection (subscribed to nothing yet); its id.
    pub fn connect(&self, out: Writer) -> u64 {
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
        let to: Vec<Writer> = match self.conns.lock() {
            Ok(c) => c
                .values()
                .filter(|(_, kinds)| kinds.iter().any(|k| k == event.kind))
                .map(|(w, _)| w.clone())
                .collect(),
            Err(_) => return,
        };
        let note = crate::protocol::notification(
            "event",
            json!({"kind": event.kind, "session": event.session, "detail": event.detail}),
        );
        for w in to {
            send(&w, &note);
        }
    }
}
