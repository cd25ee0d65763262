//! Rewind's service API: the one place every front end (the command line, `rewind serve`'s
//! JSON-RPC, `rewind mcp`, agent hook adapters, the web UI) calls the engine through.
//!
//! Each operation takes a typed request and returns a typed response (serde, with JSON Schemas
//! generated from the types: `docs/api.md`); the command line's `--json` documents are these
//! responses, so every front returns the same documents. Every operation fails with one
//! [`ApiError`], whose [`ErrorKind`] each front maps to its own codes.
//!
//! Who asks and from where is a [`Context`]: the caller's directory and session. Fronts never
//! use `rewind-core` or `rewind-store` directly; what they need of them is re-exported here.

mod context;
mod error;
pub mod ops;

pub use context::{Context, WsPath};
pub use error::{ApiError, ErrorKind};
pub use ops::workspace::*;
pub use ops::{Operation, OPERATIONS};

/// Live counters of a whole-tree capture, for a progress display.
pub use rewind_core::Progress;

/// The service for one caller: every operation acts from the context's directory for its
/// session.
pub struct Service {
    ctx: Context,
}

impl Service {
    pub fn new(ctx: Context) -> Service {
        Service { ctx }
    }

    /// Who this service acts for.
    pub fn context(&self) -> &Context {
        &self.ctx
    }
}
