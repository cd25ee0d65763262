//! Where a workspace's server (`rewind serve`) says it runs: `serve.json` in the state
//! directory, written by the server once it holds `serve.lock` and removed when it stops. A
//! server killed outright leaves the file; its process identity (pid and start time) tells a
//! reader that it is gone (the service fills [`Status::server`] from it).
//!
//! [`Status::server`]: super::Status::server

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// The lock file a server holds (an exclusive `flock`) for its whole life.
pub const SERVER_LOCK: &str = "serve.lock";
/// The file that says where the server listens.
pub const SERVER_INFO: &str = "serve.json";
/// The web UI's token of a server with one (owner-only, 0600), for `rewind ui` to print its
/// address again; never in [`SERVER_INFO`], which `status` shows.
pub const SERVER_TOKEN: &str = "serve.token";

/// A running server, as `status` shows it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ServerInfo {
    /// Its process id.
    pub pid: u32,
    /// Its process's start time (clock ticks after boot), so a reused pid is not taken for it.
    #[serde(default)]
    pub start: u64,
    /// The socket it listens on; `None` when it serves its standard input.
    pub socket: Option<PathBuf>,
    /// Whether its file watcher vouches for what changed (else its captures walk the tree).
    #[serde(default)]
    pub watcher: bool,
    /// The address of its web UI (`serve --http`), without the token; `None` when it serves
    /// none. The token is in [`SERVER_TOKEN`], readable by the owner only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http: Option<String>,
}
