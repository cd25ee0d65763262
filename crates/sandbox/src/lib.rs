//! Sandbox policy for agent shell commands (layer ④): bubblewrap argv + seccomp.

use serde::Deserialize;

/// The `[sandbox]` section of `config.toml` / `.rewind.toml`, as written by the user.
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct SandboxConfig {
    pub mode: Option<String>,
    pub network: Option<bool>,
    #[serde(default)]
    pub writable_roots: Vec<String>,
    #[serde(default)]
    pub deny_read: Vec<String>,
}
