//! The error of every remote operation (`remote add|list|remove`, `push`, `pull`, `clone`).
//! Its kind decides the exit code through the api (`rewind-api`'s `ApiError`): damage or loss
//! in the remote is `Unavailable` (exit 7), naming the object.
//!
//! Invariant: no message carries a credential. Messages name remotes by URL and objects by
//! their names in the remote; the transport's own errors are reduced to their text, which
//! `object_store` builds from the request's path and status, never from signing material.

/// What went wrong with a remote.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A bad request: a malformed URL, name or option, whatever the remote holds.
    #[error("{0}")]
    Usage(String),
    /// A remote name or a history, checkpoint or URL that matches nothing.
    #[error("{0}")]
    Unknown(String),
    /// A request the state does not allow (the workspace recorded history since its last
    /// pull, a remote made by a newer rewind).
    #[error("{0}")]
    State(String),
    /// An object the remote should hold is not there.
    #[error("the remote {remote} is missing {object}: {what}")]
    Missing {
        /// The remote's URL.
        remote: String,
        /// The object's name in the remote.
        object: String,
        /// Why it was needed.
        what: String,
    },
    /// An object of the remote does not verify (size, hash, format).
    #[error("the remote {remote} holds a damaged {object}: {reason}")]
    Corrupt {
        /// The remote's URL.
        remote: String,
        /// The object's name in the remote.
        object: String,
        /// What is wrong.
        reason: String,
    },
    /// Talking to the remote failed (network, permissions, the server's error).
    #[error("{op} {object} in {remote}: {message}")]
    Transport {
        /// What was being done (`uploading`, `reading`, `listing`).
        op: &'static str,
        /// The object or prefix.
        object: String,
        /// The remote's URL.
        remote: String,
        /// The transport's message.
        message: String,
    },
    /// The engine failed.
    #[error(transparent)]
    Core(#[from] rewind_core::Error),
    /// The object store failed (a downloaded pack that does not verify is `Corrupt` there).
    #[error(transparent)]
    Store(#[from] rewind_store::Error),
}

/// The remote operations' result.
pub type Result<T, E = Error> = std::result::Result<T, E>;
