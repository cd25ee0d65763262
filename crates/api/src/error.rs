//! The one error every operation returns: what kind of failure it is, a message, and hints.
//!
//! The kind says what happened (a conflict, a busy workspace, a refused write), never how a
//! front reports it: each front maps kinds to its own codes from the tables here, so the CLI's
//! exit codes and the JSON-RPC error codes cannot drift apart.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// What kind of failure an error is. Stable words: scripts and clients branch on them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ErrorKind {
    /// The request itself is wrong, whatever the workspace holds (a bad path, a bad flag).
    Usage,
    /// An id, prefix or message that matches nothing, or several things.
    Unknown,
    /// A request the workspace's state does not allow now (nothing to undo, an epoch still
    /// open); the same request may succeed later.
    State,
    /// A configuration file is malformed or has an unknown key.
    Config,
    /// The directory is not a usable workspace (refused, replaced, misplaced state).
    Workspace,
    /// A guarded tool could not do what was asked (no match for an edit, a hunk that does not
    /// apply); nothing was written.
    Tool,
    /// A restore was refused: paths changed by someone else since the session wrote them.
    Conflict,
    /// The workspace lock is held by another process and the bounded wait ran out.
    Busy,
    /// The read-before-edit guard refused a write; nothing was written.
    Guard,
    /// The sandbox refused or could not run the command; nothing was run.
    Sandbox,
    /// Stored content the operation needs is missing or corrupt.
    Unavailable,
    /// Anything else (an I/O error, a database error).
    Error,
}

impl ErrorKind {
    /// Every kind, in the order of the tables in `docs/api.md`.
    pub const ALL: [ErrorKind; 12] = [
        ErrorKind::Usage,
        ErrorKind::Unknown,
        ErrorKind::State,
        ErrorKind::Config,
        ErrorKind::Workspace,
        ErrorKind::Tool,
        ErrorKind::Conflict,
        ErrorKind::Busy,
        ErrorKind::Guard,
        ErrorKind::Sandbox,
        ErrorKind::Unavailable,
        ErrorKind::Error,
    ];

    /// The word in JSON documents (`"kind": "busy"`).
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorKind::Usage => "usage",
            ErrorKind::Unknown => "unknown",
            ErrorKind::State => "state",
            ErrorKind::Config => "config",
            ErrorKind::Workspace => "workspace",
            ErrorKind::Tool => "tool",
            ErrorKind::Conflict => "conflict",
            ErrorKind::Busy => "busy",
            ErrorKind::Guard => "guard",
            ErrorKind::Sandbox => "sandbox",
            ErrorKind::Unavailable => "unavailable",
            ErrorKind::Error => "error",
        }
    }

    /// The kind a word of [`ErrorKind::as_str`] names.
    pub fn parse(word: &str) -> Option<ErrorKind> {
        ErrorKind::ALL.into_iter().find(|k| k.as_str() == word)
    }

    /// The command line's exit code for this kind.
    pub fn exit_code(self) -> i32 {
        match self {
            ErrorKind::Usage => 2,
            ErrorKind::Conflict => 3,
            ErrorKind::Busy => 4,
            ErrorKind::Guard => 5,
            ErrorKind::Sandbox => 6,
            ErrorKind::Unavailable => 7,
            ErrorKind::Unknown
            | ErrorKind::State
            | ErrorKind::Config
            | ErrorKind::Workspace
            | ErrorKind::Tool
            | ErrorKind::Error => 1,
        }
    }

    /// The JSON-RPC 2.0 error code for this kind: `-32602` (invalid params) for a bad
    /// request, and one code per kind in the range the specification leaves to servers.
    pub fn jsonrpc_code(self) -> i64 {
        match self {
            ErrorKind::Usage => -32602,
            ErrorKind::Error => -32000,
            ErrorKind::Unknown => -32001,
            ErrorKind::State => -32002,
            ErrorKind::Conflict => -32003,
            ErrorKind::Busy => -32004,
            ErrorKind::Guard => -32005,
            ErrorKind::Sandbox => -32006,
            ErrorKind::Unavailable => -32007,
            ErrorKind::Config => -32008,
            ErrorKind::Workspace => -32009,
            ErrorKind::Tool => -32010,
        }
    }
}

/// An operation's failure. `message` says what happened in plain words (no command syntax);
/// `hints` say what to do about it; `data` carries structured detail where a client can act
/// on it (the guard's refusals).
#[derive(Clone, Debug, Serialize, JsonSchema)]
pub struct ApiError {
    /// What kind of failure: what a client branches on.
    pub kind: ErrorKind,
    /// What happened, in plain words.
    pub message: String,
    /// What the caller can do about it, one per entry (absent when none).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hints: Vec<String>,
    /// Structured detail a client can act on (the guard's refusals); absent when none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<serde_json::Value>,
    /// What resolves the error, as an operation (each front says it in its own syntax).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remedy: Option<rewind_core::Remedy>,
}

impl ApiError {
    /// An error of `kind` with `message`, no hints and no data.
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> ApiError {
        ApiError {
            kind,
            message: message.into(),
            hints: Vec::new(),
            data: None,
            remedy: None,
        }
    }

    /// A usage error: the request itself is wrong.
    pub fn usage(message: impl Into<String>) -> ApiError {
        ApiError::new(ErrorKind::Usage, message)
    }

    /// Adds a hint: what the caller can do about it.
    pub fn hint(mut self, hint: impl Into<String>) -> ApiError {
        self.hints.push(hint.into());
        self
    }

    /// Prefixes the message with what was being done (`"cannot use DIR: …"`).
    pub fn context(mut self, what: impl std::fmt::Display) -> ApiError {
        self.message = format!("{what}: {}", self.message);
        self
    }
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for ApiError {}

/// The message of an error and its causes, outermost first, each said once.
fn chain_message(err: &dyn std::error::Error) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut cur: Option<&dyn std::error::Error> = Some(err);
    while let Some(e) = cur {
        let s = e.to_string();
        if !parts.iter().any(|p| p.contains(&s)) {
            parts.push(s);
        }
        cur = e.source();
    }
    parts.join(": ")
}

fn core_kind(e: &rewind_core::Error) -> ErrorKind {
    use rewind_core::Error as E;
    match e {
        E::Busy { .. } => ErrorKind::Busy,
        E::Store(s) => store_kind(s),
        E::Usage(_) => ErrorKind::Usage,
        E::Guard(_) => ErrorKind::Guard,
        E::Unknown(_) => ErrorKind::Unknown,
        E::State(_) => ErrorKind::State,
        E::Config { .. } => ErrorKind::Config,
        E::Workspace(_) => ErrorKind::Workspace,
        E::Tool { .. } => ErrorKind::Tool,
        E::Unavailable(_) => ErrorKind::Unavailable,
        // What failed decides (a store error mid-apply is still "unavailable").
        E::RolledBack(cause) | E::RollbackFailed { cause, .. } => core_kind(cause),
        E::Remedied { error, .. } => core_kind(error),
        E::Db(_) | E::Io { .. } | E::Shadow(_) => ErrorKind::Error,
    }
}

fn store_kind(e: &rewind_store::Error) -> ErrorKind {
    use rewind_store::Error as E;
    match e {
        E::Missing { .. } | E::Corrupt { .. } | E::MissingPack { .. } => ErrorKind::Unavailable,
        _ => ErrorKind::Error,
    }
}

/// A remedy in plain words, naming the operation that does it.
fn remedy_hint(r: &rewind_core::Remedy) -> &'static str {
    use rewind_core::Remedy as R;
    match r {
        R::Init { force: false } => "register the workspace (operation init)",
        R::Init { force: true } => "register it anew (operation init, with force)",
        R::Log => "list the checkpoints, epochs and messages (operation log)",
        R::Fsck => "verify the store to see what is lost (operation fsck)",
        R::EpochBegin => "open an epoch first (operation epoch_begin)",
        R::Write => "create the file with a whole-file write (operation write)",
        R::ProjectDir => {
            "act from the project directory, or register this one with force (operation init)"
        }
    }
}

impl From<rewind_core::Error> for ApiError {
    fn from(e: rewind_core::Error) -> ApiError {
        let mut out = ApiError::new(core_kind(&e), chain_message(&e));
        if let Some(remedy) = e.remedy_of() {
            out.hints.push(remedy_hint(remedy).to_string());
            out.remedy = Some(remedy.clone());
        }
        if let rewind_core::Error::Guard(refusals) = &e {
            out.data = serde_json::to_value(refusals).ok();
            for r in refusals {
                out.hints.push(format!(
                    "read {} (the whole file), then redo the change",
                    String::from_utf8_lossy(&r.path)
                ));
            }
        }
        out
    }
}

impl From<rewind_store::Error> for ApiError {
    fn from(e: rewind_store::Error) -> ApiError {
        ApiError::new(store_kind(&e), chain_message(&e))
    }
}

impl From<rewind_sandbox::Error> for ApiError {
    fn from(e: rewind_sandbox::Error) -> ApiError {
        // Refused or unavailable: nothing was run.
        let kind = if e.is_refusal() {
            ErrorKind::Sandbox
        } else {
            ErrorKind::Error
        };
        ApiError::new(kind, chain_message(&e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each kind has its own JSON-RPC code, and the exit codes are the command line's.
    #[test]
    fn codes_are_distinct_per_kind() {
        let mut rpc: Vec<i64> = ErrorKind::ALL.iter().map(|k| k.jsonrpc_code()).collect();
        rpc.sort();
        rpc.dedup();
        assert_eq!(rpc.len(), ErrorKind::ALL.len());
        for k in ErrorKind::ALL {
            let json = serde_json::to_value(k).unwrap();
            assert_eq!(json, k.as_str());
        }
        assert_eq!(ErrorKind::Conflict.exit_code(), 3);
        assert_eq!(ErrorKind::Unavailable.exit_code(), 7);
    }
}
